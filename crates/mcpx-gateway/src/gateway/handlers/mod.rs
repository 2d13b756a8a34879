//! One handler per method, each in a file of its own: the gateway's answer to a host
//! request once the seam has admitted it.
//!
//! A handler reads its typed params ([`params`]), composes the gateway's owners (the
//! catalog, the upstreams, the ask broker, the task store, subscriptions) and the call
//! path (`super::forward`), and returns the host's reply or fault. Dispatch is one
//! match on [`Method`], parsed once.

mod complete;
mod list;
mod listen;
mod prompts_get;
mod resources;
mod tasks;
mod tools_call;

use std::sync::Arc;

use mcpx_server::{Call, Fault, Reply};
use serde::de::DeserializeOwned;

use super::Gateway;
use super::method::Method;
use crate::error::GatewayError;

/// Serves `call` of `method`.
pub(super) async fn dispatch(
    gw: &Arc<Gateway>,
    call: &Call,
    method: Method,
) -> Result<Reply, Fault> {
    match method {
        Method::List(kind) => list::handle(gw, call, kind).await,
        Method::ToolsCall => tools_call::handle(gw, call).await,
        Method::PromptsGet => prompts_get::handle(gw, call).await,
        Method::ResourcesRead | Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
            resources::handle(gw, call, method).await
        }
        Method::Complete => complete::handle(gw, call).await,
        Method::Listen => Box::pin(listen::handle(gw, call)).await,
        Method::Tasks => tasks::handle(gw, call).await,
        Method::Other => Err(GatewayError::MethodNotFound(call.method.clone()).to_fault(call.host)),
    }
}

/// `call`'s params as `T` (absent params read as `{}`); an invalid-params fault
/// saying `what` when they are not.
pub(super) fn params<T: DeserializeOwned>(call: &Call, what: &str) -> Result<T, Fault> {
    let text = call.params.as_deref().map_or("{}", |p| p);
    serde_json::from_str(text)
        .map_err(|_| GatewayError::InvalidParams(what.to_owned()).to_fault(call.host))
}

/// `call`'s params as JSON, to forward with changes (`{}` when absent or not JSON: the
/// typed read refuses those first where it matters).
pub(super) fn params_json(call: &Call) -> serde_json::Value {
    call.params
        .as_deref()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_else(|| serde_json::json!({}))
}
