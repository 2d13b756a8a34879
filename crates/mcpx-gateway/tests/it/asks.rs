//! The ask bridge (docs/asking.md) in-process: a legacy upstream's server-to-client
//! questions gathered into `input_required` rounds for a 2026-07-28 host, and a
//! 2026-07-28 upstream's `input_required` questions put to a legacy host as requests
//! of its revision. Waits (`askGatherMs`, `askTimeoutMs`) run on the paused clock.
//!
//! In-process versions of `crates/mcpx/tests/ask_bridge.rs`'s
//! `questions_asked_at_once_reach_a_modern_host_in_one_round`,
//! `every_round_has_its_own_state_bound_to_its_request`, `unanswered_questions_expire`
//! and `a_legacy_host_refusing_a_question_fails_the_call`.

use std::time::Duration;

use mcpx_protocol::Revision;
use serde_json::{Value, json};

use crate::harness::{Host, InMemory, LegacyHost, Upstream, config, text};

fn all_caps() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

fn elicited(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

fn sampled(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"})
}

fn roots() -> Value {
    json!({"roots": [{"uri": "file:///bridge", "name": "bridge"}]})
}

/// A modern host in front of one legacy (2025-11-25) example server, `global` its
/// `mcpx` block.
fn bridged(global: Value) -> Host {
    let links = InMemory::default().with("up", Upstream::strict(Revision::V2025_11_25));
    Host::start(config(global, &[("up", json!({}))]), links)
}

/// E-1, E-13, E-24: three questions a legacy upstream sends back to back reach the host
/// in one input_required round (gathered for `askGatherMs`), under the keys the
/// upstream named; a retry lacking some answers is asked again for those only, under
/// the same requestState; the full answers resume the upstream call; the spent
/// requestState is then refused.
#[tokio::test(start_paused = true)]
async fn questions_asked_at_once_reach_a_modern_host_in_one_round() {
    let h = bridged(json!({}));
    let tool = "test_input_required_result_multiple_inputs";
    let v = h.call_as(tool, all_caps(), json!({})).await;
    let r = v.result();
    assert_eq!(r["resultType"], "input_required", "{r}");
    let asks = r["inputRequests"].as_object().unwrap();
    let mut keys: Vec<&str> = asks.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["client_roots", "greeting", "user_name"], "{r}");
    assert_eq!(asks["user_name"]["method"], "elicitation/create");
    assert_eq!(asks["greeting"]["method"], "sampling/createMessage");
    assert_eq!(asks["client_roots"]["method"], "roots/list");
    // The upstream's request id is not the host's business; its own key passes.
    let meta = &asks["user_name"]["params"]["_meta"];
    assert!(meta.get("mcpx/relatedRequestId").is_none(), "{r}");
    assert_eq!(meta["mcpx/inputKey"], "user_name", "{r}");
    let state = r["requestState"].as_str().unwrap().to_owned();

    // Two of three answers: asked again for the third, same state (E-24).
    let v = h
        .call_as(
            tool,
            all_caps(),
            json!({"requestState": state, "inputResponses": {
                "user_name": elicited(json!({"name": "Alice"})),
                "greeting": sampled("Hello there!"),
            }}),
        )
        .await;
    let r = v.result();
    assert_eq!(r["resultType"], "input_required", "{r}");
    let asks = r["inputRequests"].as_object().unwrap();
    assert_eq!(asks.keys().collect::<Vec<_>>(), ["client_roots"], "{r}");
    assert_eq!(r["requestState"], state.as_str(), "{r}");

    let v = h
        .call_as(
            tool,
            all_caps(),
            json!({"requestState": state, "inputResponses": {"client_roots": roots()}}),
        )
        .await;
    let r = v.result();
    assert_ne!(r["resultType"], "input_required", "{r}");
    assert_eq!(
        text(r),
        "name: Alice; greeting: Hello there!; roots: file:///bridge",
        "{r}"
    );

    // Spent: the parked call is gone (E-13).
    let v = h
        .call_as(
            tool,
            all_caps(),
            json!({"requestState": state, "inputResponses": {"client_roots": roots()}}),
        )
        .await;
    assert_eq!(v.error()["code"], -32602, "{:?}", v.response);
    // The legacy upstream never sees the bridge's params.
    for (_, c) in h.links.requests_to("up", "tools/call") {
        assert!(c["params"].get("inputResponses").is_none(), "{c}");
        assert!(c["params"].get("requestState").is_none(), "{c}");
    }
    h.finish().await;
}

/// E-13, E-30: each round has its own requestState; a tampered one, a stale one, and
/// a valid one presented with another request are refused with -32602, and the parked
/// call still answers the right retry.
#[tokio::test(start_paused = true)]
async fn every_round_has_its_own_state_bound_to_its_request() {
    let h = bridged(json!({}));
    let tool = "test_input_required_result_multi_round";
    let caps = json!({"elicitation": {}});
    let v = h.call_as(tool, caps.clone(), json!({})).await;
    let r = v.result();
    assert!(r["inputRequests"]["step1"].is_object(), "{r}");
    let s1 = r["requestState"].as_str().unwrap().to_owned();

    let v = h
        .call_as(
            tool,
            caps.clone(),
            json!({"requestState": format!("{s1}-TAMPERED"), "inputResponses": {}}),
        )
        .await;
    assert_eq!(v.error()["code"], -32602, "tampered: {:?}", v.response);
    // The same state presented with another tool (E-30).
    let v = h
        .call_as(
            "test_input_required_result_elicitation",
            caps.clone(),
            json!({"requestState": s1, "inputResponses": {}}),
        )
        .await;
    assert_eq!(v.error()["code"], -32602, "other request: {:?}", v.response);

    let v = h
        .call_as(
            tool,
            caps.clone(),
            json!({"requestState": s1, "inputResponses": {"step1": elicited(json!({"name": "Bo"}))}}),
        )
        .await;
    let r = v.result();
    assert!(r["inputRequests"]["step2"].is_object(), "{r}");
    let s2 = r["requestState"].as_str().unwrap().to_owned();
    assert_ne!(s1, s2);
    let v = h
        .call_as(
            tool,
            caps.clone(),
            json!({"requestState": s1, "inputResponses": {"step2": elicited(json!({"color": "red"}))}}),
        )
        .await;
    assert_eq!(v.error()["code"], -32602, "stale: {:?}", v.response);
    let v = h
        .call_as(
            tool,
            caps,
            json!({"requestState": s2, "inputResponses": {"step2": elicited(json!({"color": "red"}))}}),
        )
        .await;
    assert_eq!(text(v.result()), "Bo's favorite color is red");
    h.finish().await;
}

/// E-6, E-24 (timeouts): a modern host that never retries leaves the legacy upstream's
/// questions unanswered only until `askTimeoutMs`: then an elicitation is answered
/// `cancel`, a sampling request -32603, and the requestState is gone. Before it, the
/// state still resumes the call.
#[tokio::test(start_paused = true)]
async fn unanswered_questions_expire() {
    let h = bridged(json!({"limits": {"askTimeoutMs": 400}}));
    let v = h
        .call_as(
            "test_input_required_result_elicitation",
            all_caps(),
            json!({}),
        )
        .await;
    let state = v.result()["requestState"].clone();
    let v = h
        .call_as("test_input_required_result_sampling", all_caps(), json!({}))
        .await;
    assert_eq!(v.result()["resultType"], "input_required");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let v = h
        .call_as(
            "test_input_required_result_elicitation",
            all_caps(),
            json!({"requestState": state,
                   "inputResponses": {"user_name": elicited(json!({"name": "Late"}))}}),
        )
        .await;
    assert_eq!(v.error()["code"], -32602, "expired: {:?}", v.response);
    // mcpx's answers to the upstream's two requests (ids the upstream chose).
    let answers: Vec<Value> = h
        .links
        .sent_to("up")
        .into_iter()
        .filter(|v| v.get("method").is_none() && v.get("id").is_some())
        .collect();
    assert!(
        answers
            .iter()
            .any(|a| a["result"] == json!({"action": "cancel"})),
        "{answers:?}"
    );
    assert!(
        answers
            .iter()
            .any(|a| a.pointer("/error/code") == Some(&json!(-32603))),
        "{answers:?}"
    );

    // Within askTimeoutMs, the same round resumes the call.
    let v = h
        .call_as(
            "test_input_required_result_elicitation",
            all_caps(),
            json!({}),
        )
        .await;
    let state = v.result()["requestState"].clone();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let v = h
        .call_as(
            "test_input_required_result_elicitation",
            all_caps(),
            json!({"requestState": state,
                   "inputResponses": {"user_name": elicited(json!({"name": "Soon"}))}}),
        )
        .await;
    assert_eq!(text(v.result()), "Hello, Soon!", "{:?}", v.response);
    h.finish().await;
}

/// A legacy host of every revision in front of a 2026-07-28 upstream: the upstream's
/// `input_required` sampling question reaches the host as a `sampling/createMessage`
/// request of its revision, and its answer resumes the upstream call (a retry with
/// `inputResponses`), whose result the host gets.
#[tokio::test(start_paused = true)]
async fn a_legacy_host_answers_a_modern_upstreams_question() {
    for rev in [
        Revision::V2024_11_05,
        Revision::V2025_03_26,
        Revision::V2025_06_18,
        Revision::V2025_11_25,
    ] {
        let links = InMemory::default().with("up", Upstream::strict(Revision::V2026_07_28));
        let mut h = LegacyHost::start(
            config(json!({}), &[("up", json!({}))]),
            links,
            rev,
            json!({"sampling": {}}),
            Box::new(|ask| {
                assert_eq!(ask["method"], "sampling/createMessage", "{ask}");
                Ok(sampled("Paris"))
            }),
        )
        .await;
        let v = h
            .call("test_input_required_result_sampling", json!({}))
            .await;
        assert_eq!(
            text(v.result()),
            "LLM response: Paris",
            "{rev}: {:?}",
            v.response
        );
        assert_eq!(h.asks.len(), 1, "{rev}: {:?}", h.asks);
        let calls = h.links.requests_to("up", "tools/call");
        assert_eq!(calls.len(), 2, "{rev}: the call and its retry: {calls:?}");
        assert!(
            calls[1].1["params"]["inputResponses"].is_object(),
            "{rev}: {calls:?}"
        );
        h.finish().await;
    }
}

/// E-6: a legacy host that refuses a modern upstream's question fails the call with
/// -32603 carrying its refusal, and mcpx does not retry the upstream call.
#[tokio::test(start_paused = true)]
async fn a_legacy_host_refusing_a_question_fails_the_call() {
    let links = InMemory::default().with("up", Upstream::strict(Revision::V2026_07_28));
    let mut h = LegacyHost::start(
        config(json!({}), &[("up", json!({}))]),
        links,
        Revision::V2025_11_25,
        json!({"sampling": {}}),
        Box::new(|_| Err(json!({"code": -32000, "message": "the user said no"}))),
    )
    .await;
    let tool = "test_input_required_result_sampling";
    let v = h.call(tool, json!({})).await;
    assert_eq!(v.error()["code"], -32603, "{:?}", v.response);
    let msg = v.error()["message"].as_str().unwrap();
    assert!(msg.contains("the user said no"), "{msg}");
    assert_eq!(h.asks.len(), 1, "{:?}", h.asks);
    let calls = h
        .links
        .requests_to("up", "tools/call")
        .into_iter()
        .filter(|(_, c)| c["params"]["name"] == tool)
        .count();
    assert_eq!(calls, 1, "the upstream call was retried");
    h.finish().await;
}

/// A legacy host in front of a legacy upstream: the upstream's elicitation is relayed
/// as a request of the host's revision, and the host's answer goes back to it.
#[tokio::test(start_paused = true)]
async fn a_legacy_upstreams_question_is_relayed_to_a_legacy_host() {
    let links = InMemory::default().with("up", Upstream::strict(Revision::V2025_11_25));
    let mut h = LegacyHost::start(
        config(json!({}), &[("up", json!({}))]),
        links,
        Revision::V2025_06_18,
        json!({"elicitation": {}}),
        Box::new(|ask| {
            assert_eq!(ask["method"], "elicitation/create", "{ask}");
            Ok(elicited(json!({"name": "Ada"})))
        }),
    )
    .await;
    let v = h
        .call("test_input_required_result_elicitation", json!({}))
        .await;
    assert_eq!(text(v.result()), "Hello, Ada!", "{:?}", v.response);
    assert_eq!(h.asks.len(), 1, "{:?}", h.asks);
    h.finish().await;
}
