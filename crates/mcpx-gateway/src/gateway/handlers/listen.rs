//! `subscriptions/listen` (2026-07-28): list changes and resource updates on one
//! stream, until the host cancels or mcpx stops.

use std::sync::Arc;

use mcpx_server::{Call, Fault, Reply};

use super::super::Gateway;

/// Holds the listen `call` opens.
pub(super) async fn handle(gw: &Arc<Gateway>, call: &Call) -> Result<Reply, Fault> {
    gw.subs
        .listen(call, &gw.stopping, |uri| gw.route_uri(call, uri).ok())
        .await
}
