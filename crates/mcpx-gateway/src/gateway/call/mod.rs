//! The call path: one host request sent to one upstream, as small layers.
//!
//! ```text
//! admit   (admit.rs)   the connection, taken once, and a place among the calls in
//!                      flight (maxInFlight, then the queue up to callTimeoutMs)
//! bridge  (bridge.rs)  a modern host's call to a legacy upstream: run parked while
//!                      the host answers its asks (E-1)
//! rounds  (rounds.rs)  a modern upstream's input_required rounds for a legacy host,
//!                      under one deadline (maxCallTimeMs)
//! observe (observe.rs) the upstream leg's span and metrics, in one place
//! send    (send.rs)    one connection call, its events relayed to the host
//! ```
//!
//! The answer is taken for the host by [`answer`]. Every rarer branch is boxed: a
//! future is as large as its largest branch, and a call's is moved on every call.

mod admit;
mod bridge;
mod observe;
mod rounds;
mod send;

use std::sync::Arc;

use mcpx_client::{Connection, ServerFacts};
use mcpx_protocol::error::{INVALID_PARAMS, URL_ELICITATION_REQUIRED};
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::{Era, Frame, Params};
use mcpx_server::{Call, Fault, Reply};
use serde_json::{Value, json};

pub(super) use bridge::resume;
pub(super) use observe::{UpstreamLeg, leg};
pub(super) use send::relay_event;

use super::Gateway;
use crate::error::GatewayError;
use crate::upstream::Upstream;

/// How many `input_required` rounds mcpx answers for a legacy host before giving up.
pub(super) const MAX_INPUT_ROUNDS: usize = 10;

/// Sends `method` with `params` to upstream `up` for `call`, relaying events, and
/// takes the answer for the host; on `taken` when the caller took the connection
/// already. `idempotent`: safe to send again after a connection was lost before the
/// answer (B-C10).
pub(super) async fn forward(
    gw: &Arc<Gateway>,
    call: &Call,
    up: &Arc<Upstream>,
    taken: Option<(u64, Connection)>,
    method: &str,
    params: &Params,
    idempotent: bool,
) -> Result<Reply, Fault> {
    let admitted = admit::admit(call, up, taken).await?;
    if bridge::parks(call, &admitted.facts) {
        // Boxed: the rarer path's future stays out of every call's.
        return Box::pin(bridge::forward_parking(
            gw, call, up, admitted, method, params, idempotent,
        ))
        .await;
    }
    rounds::rounds(gw, call, up, &admitted, method, params, idempotent).await
}

/// The host's reply to an upstream's answer `frame` of `method` (upstream `name`, of
/// `facts`): its result, or its error as a fault in the upstream's revision.
pub(super) fn answer(
    gw: &Gateway,
    call: &Call,
    facts: &ServerFacts,
    name: &str,
    method: &str,
    frame: Frame,
) -> Result<Reply, Fault> {
    if let Some(e) = frame.error() {
        if e.code == URL_ELICITATION_REQUIRED {
            gw.note_required_elicitations(call, name, e.data.as_deref());
        }
        // The upstream's own error, relayed as it is (its code, message and data), in
        // its revision: not one of the gateway's.
        return Err(Fault {
            code: e.code,
            message: format!("upstream {name}: {}", e.message),
            data: e.data.as_deref().and_then(|d| serde_json::from_str(d).ok()),
            from: facts.revision,
            // Up to 2025-06-18 a tool's invalid input is a -32602 protocol error; hosts
            // from 2025-11-25 get it as an isError result (H5, D-C1).
            input_validation: method == "tools/call"
                && e.code == INVALID_PARAMS
                && !facts.revision.facts().input_validation_is_tool_error,
        });
    }
    // Taken from the decoded frame, not copied out of it: not parsed again on its
    // way to the host.
    let mut result = frame
        .into_result_json()
        .unwrap_or_else(|| Json::of_value(&json!({})));
    if facts.era == Era::Modern
        && call.host.era() == Era::Modern
        && let Some(relabelled) = gw.relabel_input_required(name, result.as_str())
    {
        result = relabelled;
    }
    if facts.era == Era::Modern && call.host.era() == Era::Legacy {
        let input_required = serde_json::from_str::<Value>(result.as_str())
            .ok()
            .and_then(|v| {
                v.get("resultType")
                    .and_then(Value::as_str)
                    .map(|t| t == "input_required")
            })
            .unwrap_or(false);
        if input_required {
            return Err(GatewayError::Internal(format!(
                "upstream {name} (2026-07-28) needs input from the client (an input_required result); mcpx does not yet bridge that to a {} client",
                call.host
            ))
            .to_fault(call.host));
        }
    }
    Ok(Reply {
        result,
        revision: facts.revision,
    })
}
