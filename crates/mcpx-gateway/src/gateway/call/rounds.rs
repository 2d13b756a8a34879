//! Multi round-trip requests (2026-07-28 basic/patterns/mrtr) for a legacy host: a
//! modern upstream that answers `input_required` has its questions put to the host
//! as wire requests, and the call is sent again with the answers (register E-1), a
//! bounded number of rounds, all within `maxCallTimeMs`. A modern host gets
//! `input_required` results as they are and retries itself.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use mcpx_client::ClientError;
use mcpx_protocol::{Era, Frame, Params};
use mcpx_server::{Call, Fault, Reply};
use serde_json::{Map, Value, json};

use super::admit::Admitted;
use super::{MAX_INPUT_ROUNDS, send};
use crate::error::GatewayError;
use crate::gateway::Gateway;
use crate::upstream::Upstream;

/// Sends `call` on its admitted connection, round after round while a modern
/// upstream asks a legacy host for input, and takes the final answer.
pub(super) async fn rounds(
    gw: &Arc<Gateway>,
    call: &Call,
    up: &Arc<Upstream>,
    admitted: &Admitted<'_>,
    method: &str,
    params: &Params,
    idempotent: bool,
) -> Result<Reply, Fault> {
    let facts = &admitted.facts;
    let host_modern = call.host.era() == Era::Modern;
    let max_call_time = gw.config().global.max_call_time;
    // The clock is read only for this pairing: maxCallTimeMs bounds every round and
    // every question together.
    let until = (facts.era == Era::Modern && !host_modern)
        .then(|| tokio::time::Instant::now() + max_call_time);
    // The params as sent: the caller's text until an input round rewrites them.
    let mut text = Cow::Borrowed(params);
    let mut round = 0;
    loop {
        // A retry has what is left of the whole call's time.
        let max_time = match until {
            Some(until) if round > 0 => {
                let left = until.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    return Err(timed_out(call, up, method, max_call_time));
                }
                left
            }
            _ => max_call_time,
        };
        let sent = send::Send {
            call,
            up,
            admitted,
            method,
            params: &text,
            idempotent,
            max_time,
            round,
        };
        let frame = send::send(gw, sent).await?;
        let Some(result) = until.and_then(|_| input_required(&frame)) else {
            return super::answer(gw, call, facts, up.id.as_str(), method, frame);
        };
        round += 1;
        if round > MAX_INPUT_ROUNDS {
            return Err(GatewayError::InputRounds {
                upstream: up.id.clone(),
                rounds: MAX_INPUT_ROUNDS,
            }
            .to_fault(call.host));
        }
        let responses = match result.get("inputRequests") {
            Some(Value::Object(requests)) => {
                let asked = gw.ask_legacy_host_all(call, up.id.as_str(), requests.iter());
                let until = until.unwrap_or_else(tokio::time::Instant::now);
                match Box::pin(tokio::time::timeout_at(until, asked)).await {
                    Ok(answers) => answers?,
                    Err(_) => return Err(timed_out(call, up, method, max_call_time)),
                }
            }
            _ => Map::new(),
        };
        text = Cow::Owned(retry(&text, responses, result.get("requestState")));
    }
}

/// A modern upstream's `input_required` result, read whole; `None` for any other
/// answer.
fn input_required(frame: &Frame) -> Option<Value> {
    let result = frame.result()?;
    if mcpx_protocol::jsonrpc::first_member(result, "resultType") != Some("\"input_required\"") {
        return None;
    }
    Some(serde_json::from_str(result).unwrap_or(Value::Null))
}

/// The retry: the original params, the answers, and the state echoed verbatim
/// (2026-07-28 basic/patterns/mrtr).
fn retry(sent: &Params, responses: Map<String, Value>, state: Option<&Value>) -> Params {
    let mut params: Value = serde_json::from_str(sent).unwrap_or(json!({}));
    params["inputResponses"] = Value::Object(responses);
    match state {
        Some(state) => params["requestState"] = state.clone(),
        None => {
            if let Some(o) = params.as_object_mut() {
                o.remove("requestState");
            }
        }
    }
    Params::of_value(&params)
}

/// The host's error when a modern upstream's `input_required` rounds, and the
/// questions mcpx puts to the host between them, outlast `maxCallTimeMs`: the
/// upstream holds nothing between rounds, so only the host is told.
fn timed_out(call: &Call, up: &Upstream, method: &str, after: Duration) -> Fault {
    GatewayError::Client(ClientError::Timeout {
        upstream: up.id.to_string(),
        method: method.to_owned(),
        after,
    })
    .to_fault(call.host)
}
