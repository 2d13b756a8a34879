//! `prompts/get`: routed by name to the owning upstream.

use std::sync::Arc;

use mcpx_server::{Call, Fault, Reply};

use super::super::Gateway;
use super::super::route::Routed;

/// Gets the prompt `call` names.
pub(super) async fn handle(gw: &Arc<Gateway>, call: &Call) -> Result<Reply, Fault> {
    let Routed {
        upstream, params, ..
    } = match gw.route_name(call, true) {
        Ok(r) => r,
        Err(f) => Box::pin(gw.route_once_started(call, true, f)).await?,
    };
    // prompts/get changes nothing: safe to re-issue (B-C10).
    gw.forward(call, &upstream, None, &call.method, &params, true)
        .await
}
