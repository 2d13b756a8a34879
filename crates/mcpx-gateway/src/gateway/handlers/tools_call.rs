//! `tools/call`: routed by name to the owning upstream; a task-augmented call becomes
//! a gateway task (H13).

use std::sync::Arc;

use mcpx_server::{Call, Fault, Reply};

use super::super::{Gateway, tasks};

/// Calls the tool `call` names.
pub(super) async fn handle(gw: &Arc<Gateway>, call: &Call) -> Result<Reply, Fault> {
    tasks::tools_call(gw, call).await
}
