//! The ask bridge: server-to-client requests (sampling, elicitation, roots) between
//! an upstream and a host, within an era and across eras.
//!
//! * Legacy upstream, legacy host: the ask is relayed as a request on the host's
//!   session ([`relay::Relay::on_ask`]).
//! * Legacy upstream, 2026-07-28 host: the upstream call runs in a task of its own and
//!   is *parked* while the host answers an `input_required` result; the host's retry
//!   resumes it (`park.rs`; the call path's `call/bridge.rs` drives it).
//! * 2026-07-28 upstream, legacy host: each `inputRequests` entry is put to the host as
//!   a request and the call retried with the answers
//!   ([`relay::Relay::ask_legacy_host_all`]).
//! * Elicitations are labelled with their upstream when namespaces are in use (E-10);
//!   url-mode completions go back to the host they came from (E-12).
//! * An upstream that needs a user's login is offered to the host as a url-mode
//!   elicitation (`login.rs`, B-C15).
//!
//! [`AskBroker`] composes the three owners (`park`, `relay`, `login`). None of them
//! sees the gateway: what they need of it (the asking upstream, its label, the
//! timeouts) comes as parameters.

pub(in crate::gateway) mod login;
pub(in crate::gateway) mod park;
pub(in crate::gateway) mod relay;

use std::sync::Arc;

use mcpx_client::AskRefusal;
use mcpx_protocol::error::INTERNAL_ERROR;
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::lower::elicitation;
use mcpx_protocol::lower::{
    SamplingRefusal, check_sampling_request, lower_sampling_request, sampling_tool_fields,
};
use mcpx_server::{Call, Fault};
use serde_json::{Map, Value, json};

use crate::error::GatewayError;

pub(in crate::gateway) use relay::{Asking, Asks};

/// What the ask bridge holds across requests.
#[derive(Debug, Default)]
pub(in crate::gateway) struct AskBroker {
    /// Calls of modern hosts to legacy upstreams, parked while the host answers an
    /// `input_required` result, by `requestState` token.
    pub(in crate::gateway) parked: park::ParkedCalls,
    /// Asks put to hosts as requests: minted ids, url elicitations, progress routes.
    pub(in crate::gateway) relay: relay::Relay,
    /// Authorization flows hosts were asked to complete.
    pub(in crate::gateway) logins: login::Logins,
}

/// The `requestState` prefix of a call mcpx parked (followed by a random token).
pub(in crate::gateway) const PARKED_PREFIX: &str = "mcpx1:";

/// The most questions one parked call may have open at once; more are refused.
const MAX_OPEN_QUESTIONS: usize = 16;

/// How many url-mode elicitations relayed to 2025-11-25 hosts mcpx remembers for
/// their completion notifications (E-12); the oldest is forgotten first (2025-11-25
/// client/elicitation §Completion Notifications: clients ignore unknown ids anyway).
const MAX_URL_ELICITATIONS: usize = 256;

/// A 2026-07-28 upstream's `input_required` result passes to a modern host as it is
/// (its `requestState` untouched: E-32), except that elicitation messages are
/// labelled with `label` when namespaces are in use (E-10) and an `elicitationId`,
/// which 2026 lacks, is removed (E-12). `None` when nothing changes.
pub(in crate::gateway) fn relabel_input_required(
    label: Option<&str>,
    result: &str,
) -> Option<Json> {
    if label.is_none() && !result.contains("\"elicitationId\"") {
        return None;
    }
    let mut v: Value = serde_json::from_str(result).ok()?;
    if v.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return None;
    }
    let requests = v.get_mut("inputRequests").and_then(Value::as_object_mut)?;
    relabel_input_requests(label, requests).then(|| Json::of_value(&v))
}

/// 128 random bits, hex: unguessable, so a `requestState` cannot be forged (E-13, E-30).
pub(in crate::gateway) fn random_token() -> Option<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).ok()?;
    Some(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Names, in an ask's `_meta`, the host request it is sent while serving
/// ([`mcpx_protocol::meta::RELATED_REQUEST`]): on stdio and HTTP+SSE nothing else
/// tells a host with several requests in flight which one asks. An upstream's value
/// names its own request, meaningless to the host, so it is replaced.
pub(in crate::gateway) fn stamp_related(params: &mut Value, id: &mcpx_protocol::Id) {
    if let Some(o) = params.as_object_mut()
        && let Some(m) = o
            .entry("_meta")
            .or_insert_with(|| json!({}))
            .as_object_mut()
    {
        m.insert(
            mcpx_protocol::meta::RELATED_REQUEST.to_owned(),
            serde_json::to_value(id).unwrap_or(Value::Null),
        );
    }
}

/// The tool or prompt name, or resource URI, a host's call names.
pub(in crate::gateway) fn call_target(call: &Call) -> Option<String> {
    let p = call.params.as_ref()?;
    let v = p.member("name").or_else(|| p.member("uri"))?;
    serde_json::from_str(v).ok()
}

/// A modern host's `inputResponses`: absent is none; anything but an object of
/// objects (every answer is a result object) is -32602 (2026-07-28
/// basic/patterns/mrtr: protocol errors in the retry are JSON-RPC errors).
pub(in crate::gateway) fn input_responses(call: &Call) -> Result<Map<String, Value>, Fault> {
    let Some(raw) = call
        .params
        .as_ref()
        .and_then(|p| p.member("inputResponses"))
    else {
        return Ok(Map::new());
    };
    let bad = |why: &str| {
        GatewayError::InvalidParams(format!("inputResponses {why}")).to_fault(call.host)
    };
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => match m.iter().find(|(_, v)| !v.is_object()) {
            Some((k, _)) => Err(bad(&format!("[{k:?}] must be a result object"))),
            None => Ok(m),
        },
        _ => Err(bad("must be an object")),
    }
}

/// Checks a sampling ask and lowers it to the revision of the host of `call` (E-16:
/// malformed asks are not forwarded; E-23: tools only to a host that declared
/// `sampling.tools`; E-7: what the host's revision cannot represent is refused, never
/// cut). Everything else passes unchanged (E-8, E-27, E-28).
pub(in crate::gateway) fn prepare_sampling(
    call: &Call,
    params: &mut Value,
) -> Result<(), SamplingRefusal> {
    check_sampling_request(params)?;
    if let Some(field) = sampling_tool_fields(params)
        && call
            .client_capabilities
            .pointer("/sampling/tools")
            .is_none()
    {
        return Err(SamplingRefusal::ToolsNotDeclared(field));
    }
    lower_sampling_request(params, call.host)
}

/// A permit for one sampling or elicitation ask an upstream puts to a host (register
/// E-15): each upstream may have `askMaxPending` of them held by mcpx at once; a further
/// one is refused with -32603. Client rate limiting is a SHOULD for elicitation in
/// 2025-06-18 and 2025-11-25 client/elicitation §Security Considerations and for
/// sampling in every revision (client/sampling §Security Considerations). Roots are
/// not limited.
pub(in crate::gateway) fn ask_permit(
    asks: &Arc<tokio::sync::Semaphore>,
    method: &str,
) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, AskRefusal> {
    if !matches!(method, "sampling/createMessage" | "elicitation/create") {
        return Ok(None);
    }
    asks.clone().try_acquire_owned().map(Some).map_err(|_| {
        AskRefusal::new(
            INTERNAL_ERROR,
            format!("too many pending requests: {method} refused"),
        )
    })
}

/// E-10: puts `label` ("[<namespace>] ") before an elicitation's message. 2025-11-25
/// client/elicitation §Security Considerations: clients MUST make clear which server
/// asks; behind mcpx the host sees only mcpx, so the message names the upstream.
/// Labels the elicitations of `inputRequests` (E-10) and removes their
/// `elicitationId`, which 2026 lacks (E-12); whether anything changed.
pub(in crate::gateway) fn relabel_input_requests(
    label: Option<&str>,
    requests: &mut Map<String, Value>,
) -> bool {
    let mut changed = false;
    for req in requests.values_mut() {
        if req.get("method").and_then(Value::as_str) != Some("elicitation/create") {
            continue;
        }
        if let Some(params) = req.get_mut("params") {
            if let Some(o) = params.as_object_mut() {
                changed |= o.remove("elicitationId").is_some();
            }
            if label.is_some() && params.get("message").is_some_and(Value::is_string) {
                label_elicitation(label, params);
                changed = true;
            }
        }
    }
    changed
}

pub(in crate::gateway) fn label_elicitation(label: Option<&str>, params: &mut Value) {
    if let (Some(label), Some(Value::String(m))) = (label, params.get_mut("message")) {
        *m = format!("{label}{m}");
    }
}

/// Whether the host of `call` can be put a url-mode elicitation: its revision has url
/// mode and it declared `elicitation.url` (2025-11-25 client/elicitation
/// §Capabilities: an empty `elicitation` object means form mode only).
pub(in crate::gateway) fn host_takes_url(call: &Call) -> bool {
    // `get`, not `pointer`: a JSON pointer is split and unescaped into new strings,
    // and a host's every `tools/call` asks this (callgrind: 2 allocations a call).
    elicitation::shape(call.host).modes
        && call
            .client_capabilities
            .get("elicitation")
            .and_then(|e| e.get("url"))
            .is_some()
}

/// Whether mcpx may send `method` to the legacy host of `call`:
///
/// * register A-C8 (every legacy basic/lifecycle §Initialization: the server "SHOULD
///   NOT send requests other than pings and logging before receiving the initialized
///   notification", read literally): no request but `ping` before the host's
///   `notifications/initialized`; notifications are not restricted;
/// * register E-2 (2025-11-25 basic/lifecycle §Operation: "Only use capabilities that
///   were successfully negotiated"): `roots/list`, `sampling/createMessage` and
///   `elicitation/create` only when the host declared `roots`, `sampling` or
///   `elicitation` at `initialize` (`call.client_capabilities`, the session's).
pub(in crate::gateway) fn host_may_be_asked(call: &Call, method: &str) -> Result<(), AskRefusal> {
    let Some(p) = &call.peer else {
        return Ok(());
    };
    if method != "ping" && !p.is_initialized() {
        return Err(AskRefusal::new(
            INTERNAL_ERROR,
            format!(
                "the client has not sent notifications/initialized, so it cannot be sent {method}"
            ),
        ));
    }
    let Some(cap) = mcpx_protocol::method::ask_capability(method) else {
        return Ok(());
    };
    if call.client_capabilities.get(cap).is_none() {
        return Err(AskRefusal::new(
            INTERNAL_ERROR,
            format!("the client did not declare the {cap} capability needed for {method}"),
        ));
    }
    Ok(())
}
