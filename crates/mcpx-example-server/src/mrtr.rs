//! Multi round-trip requests (2026-07-28 basic/patterns/mrtr): `input_required` results,
//! the client's `inputResponses`, and an integrity-protected `requestState`.
//!
//! The spec calls `requestState` opaque and attacker-controlled: "servers MUST validate
//! it" (basic/patterns/mrtr §Request State). This server signs it with a keyed 64-bit
//! hash whose key is drawn per process ([`std::hash::RandomState`]); that detects
//! tampering and state from another process, which is all a reference server needs. A
//! production server would use an HMAC or AEAD.

use std::hash::{BuildHasher, RandomState};

use mcpx_protocol::error::{INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY};
use serde_json::{Map, Value, json};

use crate::RpcError;

/// Signs and verifies `requestState` strings.
#[derive(Debug, Default)]
pub(crate) struct StateSigner {
    key: RandomState,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}

impl StateSigner {
    fn mac(&self, payload: &str) -> String {
        format!("{:016x}", self.key.hash_one(payload))
    }

    /// `payload` wrapped as `<hex payload>.<mac>`.
    pub(crate) fn sign(&self, payload: &Value) -> String {
        let text = payload.to_string();
        format!("{}.{}", hex(text.as_bytes()), self.mac(&text))
    }

    /// The payload of a state this process signed, or `None` when it was altered.
    pub(crate) fn verify(&self, state: &str) -> Option<Value> {
        let (body, mac) = state.rsplit_once('.')?;
        let text = String::from_utf8(unhex(body)?).ok()?;
        if self.mac(&text) != mac {
            return None;
        }
        serde_json::from_str(&text).ok()
    }
}

/// What the client sent back on a retry.
#[derive(Debug, Default)]
pub(crate) struct Retry {
    /// `params.inputResponses`, when present.
    pub(crate) responses: Option<Map<String, Value>>,
    /// The verified payload of `params.requestState`, when present.
    pub(crate) state: Option<Value>,
}

impl Retry {
    /// Reads `inputResponses` and `requestState` from `params`. A non-object
    /// `inputResponses` (null included) and a `requestState` that fails verification are
    /// protocol errors (-32602; basic/patterns/mrtr §Error Handling).
    pub(crate) fn read(params: &Value, signer: &StateSigner) -> Result<Retry, RpcError> {
        let responses = match params.get("inputResponses") {
            None => None,
            Some(Value::Object(m)) => Some(m.clone()),
            Some(_) => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    "inputResponses must be an object mapping input keys to responses",
                ));
            }
        };
        let state = match params.get("requestState") {
            None => None,
            Some(Value::String(s)) => Some(signer.verify(s).ok_or_else(|| {
                RpcError::new(
                    INVALID_PARAMS,
                    "requestState failed its integrity check (altered, or not issued by this server)",
                )
            })?),
            Some(_) => return Err(RpcError::new(INVALID_PARAMS, "requestState must be a string")),
        };
        Ok(Retry { responses, state })
    }

    /// The verified state payload, when it belongs to `tool`.
    pub(crate) fn step_of(&self, tool: &str) -> Option<&Value> {
        let s = self.state.as_ref()?;
        (s.get("tool").and_then(Value::as_str) == Some(tool)).then_some(s)
    }
}

/// The client capability an embedded request needs (2026-07-28 basic/patterns/mrtr:
/// the server "MUST NOT" ask for what the client did not declare).
fn needed_capability(req: &Value) -> (&'static str, Value) {
    match req.get("method").and_then(Value::as_str) {
        Some("sampling/createMessage") => ("sampling", json!({})),
        Some("roots/list") => ("roots", json!({})),
        _ => {
            let url = req.pointer("/params/mode").and_then(Value::as_str) == Some("url");
            (
                "elicitation",
                if url { json!({"url": {}}) } else { json!({}) },
            )
        }
    }
}

/// Whether `caps` (the request's `clientCapabilities`) covers `req`.
pub(crate) fn client_can(caps: &Value, req: &Value) -> bool {
    let (cap, sub) = needed_capability(req);
    let Some(declared) = caps.get(cap) else {
        return false;
    };
    // URL-mode elicitation needs `elicitation.url` (client/elicitation §Capabilities);
    // an empty `elicitation: {}` means form mode only.
    match sub.as_object().and_then(|o| o.keys().next()) {
        Some(mode) => declared.get(mode).is_some(),
        None => true,
    }
}

/// -32021 naming the capabilities `reqs` need that `caps` lacks, if any.
pub(crate) fn missing_capabilities(caps: &Value, reqs: &[(&str, Value)]) -> Option<RpcError> {
    let mut missing = Map::new();
    for (_, req) in reqs {
        if !client_can(caps, req) {
            let (cap, sub) = needed_capability(req);
            missing.insert(cap.to_owned(), sub);
        }
    }
    if missing.is_empty() {
        return None;
    }
    let names: Vec<&str> = missing.keys().map(String::as_str).collect();
    let message = format!(
        "this request needs client capabilities the request did not declare: {}",
        names.join(", ")
    );
    Some(RpcError::with_data(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        &message,
        json!({"requiredCapabilities": missing}),
    ))
}

/// Checks that a response has the shape its request's result type needs.
pub(crate) fn response_ok(req: &Value, resp: &Value) -> bool {
    let Some(o) = resp.as_object() else {
        return false;
    };
    match req.get("method").and_then(Value::as_str) {
        Some("sampling/createMessage") => o.contains_key("content") && o.contains_key("role"),
        Some("roots/list") => o.get("roots").is_some_and(Value::is_array),
        _ => matches!(
            o.get("action").and_then(Value::as_str),
            Some("accept" | "decline" | "cancel")
        ),
    }
}

/// The outcome of one round.
#[derive(Debug)]
pub(crate) enum Round {
    /// Every input is here, by key.
    Ready(Map<String, Value>),
    /// An `input_required` result to return.
    Ask(Value),
}

/// Asks for `reqs` (key, `InputRequest`) unless `retry` already answers them all. Keys
/// the client did not answer are asked again (the conformance suite's
/// input-required-result-missing-input-response); extra keys are ignored; a malformed
/// answer is -32602.
pub(crate) fn gather(
    retry: &Retry,
    reqs: &[(&str, Value)],
    state: Option<String>,
) -> Result<Round, RpcError> {
    let mut ready = Map::new();
    let mut ask = Map::new();
    for (key, req) in reqs {
        match retry.responses.as_ref().and_then(|r| r.get(*key)) {
            Some(resp) if response_ok(req, resp) => {
                ready.insert((*key).to_owned(), resp.clone());
            }
            Some(_) => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    &format!(
                        "inputResponses[{key:?}] is not a valid response to its input request"
                    ),
                ));
            }
            None => {
                ask.insert((*key).to_owned(), req.clone());
            }
        }
    }
    if ask.is_empty() {
        return Ok(Round::Ready(ready));
    }
    let mut result = json!({"resultType": "input_required", "inputRequests": ask});
    if let (Some(s), Some(o)) = (state, result.as_object_mut()) {
        o.insert("requestState".into(), Value::String(s));
    }
    Ok(Round::Ask(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_detects_tampering() {
        let s = StateSigner::default();
        let st = s.sign(&json!({"tool": "t", "step": 2}));
        assert_eq!(s.verify(&st), Some(json!({"tool": "t", "step": 2})));
        assert_eq!(s.verify(&format!("{st}-TAMPERED")), None);
        assert_eq!(s.verify("zz.00"), None);
        assert_eq!(s.verify(""), None);
        assert_eq!(StateSigner::default().verify(&st), None, "another key");
    }

    #[test]
    fn gather_asks_for_what_is_missing() {
        let elicit = json!({"method": "elicitation/create", "params": {"message": "m",
            "requestedSchema": {"type": "object", "properties": {}}}});
        let retry = Retry::default();
        assert!(matches!(
            gather(&retry, &[("a", elicit.clone())], None),
            Ok(Round::Ask(_))
        ));
        let retry = Retry {
            responses: Some(
                json!({"a": {"action": "accept", "content": {}}, "x": 1})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
            state: None,
        };
        assert!(matches!(
            gather(&retry, &[("a", elicit.clone())], None),
            Ok(Round::Ready(_))
        ));
        let bad = Retry {
            responses: Some(json!({"a": 12345}).as_object().cloned().unwrap()),
            state: None,
        };
        assert!(gather(&bad, &[("a", elicit)], None).is_err());
    }

    #[test]
    fn capabilities_are_checked() {
        let sampling = json!({"method": "sampling/createMessage", "params": {}});
        let url = json!({"method": "elicitation/create", "params": {"mode": "url"}});
        assert!(client_can(&json!({"sampling": {}}), &sampling));
        assert!(!client_can(&json!({}), &sampling));
        assert!(!client_can(&json!({"elicitation": {}}), &url));
        assert!(client_can(&json!({"elicitation": {"url": {}}}), &url));
        let e = missing_capabilities(&json!({}), &[("s", sampling)]).unwrap();
        assert_eq!(e.code, MISSING_REQUIRED_CLIENT_CAPABILITY);
    }
}
