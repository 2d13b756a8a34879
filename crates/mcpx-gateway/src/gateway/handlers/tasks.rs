//! `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`, `tasks/update`: the
//! gateway's tasks (H13), answered from the task store.

use std::sync::Arc;

use mcpx_server::{Call, Fault, Reply};

use super::super::{Gateway, tasks};

/// Answers a `tasks/*` request.
pub(super) async fn handle(gw: &Arc<Gateway>, call: &Call) -> Result<Reply, Fault> {
    tasks::method(gw, call).await
}
