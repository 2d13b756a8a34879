//! `resources/read`, `resources/subscribe`, `resources/unsubscribe`: routed by URI to
//! the owning upstream, the URI rewritten to the upstream's own where they differ.

use std::sync::Arc;

use mcpx_protocol::Params;
use mcpx_server::{Call, Fault, Reply};
use serde::Deserialize;
use serde_json::json;

use super::super::Gateway;
use super::super::method::Method;
use super::super::route::expose_contents;

/// The params every resource request has (`ReadResourceRequestParams`,
/// `SubscribeRequestParams`, `UnsubscribeRequestParams`).
#[derive(Debug, Deserialize)]
struct UriParams {
    uri: String,
}

/// Reads, subscribes to or unsubscribes from the resource `call` names.
pub(super) async fn handle(gw: &Arc<Gateway>, call: &Call, method: Method) -> Result<Reply, Fault> {
    let UriParams { uri } = super::params(call, "params.uri is required")?;
    let (up, theirs) = Box::pin(gw.route_uri_once_settled(call, &uri)).await?;
    // Every other member of the host's params goes on as it came.
    let mut params = super::params_json(call);
    if theirs != uri {
        params["uri"] = json!(theirs);
    }
    if method != Method::ResourcesRead {
        let (to, sent) = (&up, &params);
        let forward = move || async move {
            gw.forward(call, to, None, &call.method, &Params::of_value(sent), true)
                .await
        };
        return Box::pin(gw.subs.subscription(call, &up, &uri, &params, forward)).await;
    }
    let reply = gw
        .forward(
            call,
            &up,
            None,
            &call.method,
            &Params::of_value(&params),
            true,
        )
        .await?;
    Ok(if theirs == uri {
        reply
    } else {
        expose_contents(reply, &uri, &theirs)
    })
}
