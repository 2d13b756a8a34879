//! The ask bridge (docs/asking.md), over the wire through `mcpx serve` (a real process,
//! stdio): a 2026-07-28 host in front of a legacy upstream (`mcpx example-server
//! --revision 2025-11-25`) that asks its questions with server-to-client requests.
//! mcpx puts them to the host as `input_required` rounds and resumes the upstream call
//! with the host's answers. Every frame mcpx sends the host is validated against the
//! 2026-07-28 schema; each test names the register ids it proves.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

use std::time::Duration;

use mcpx_testkit::tap::tap;
use serde_json::{Value, json};

use crate::common;
use common::*;

/// E-1, E-13, E-24: three questions a legacy upstream sends back to back reach the host
/// in one input_required round, under the keys the upstream named; a retry lacking
/// some answers is asked again for those only, under the same requestState; the full
/// answers resume the upstream call; the spent requestState is then refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_asked_at_once_reach_a_modern_host_in_one_round() {
    let mut h = bridged("round").await;
    let tool = "test_input_required_result_multiple_inputs";
    let v = call(&mut h, tool, all_caps(), json!({})).await;
    let r = result(&v, "round 1");
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
    let v = call(
        &mut h,
        tool,
        all_caps(),
        json!({"requestState": state, "inputResponses": {
            "user_name": elicited(json!({"name": "Alice"})),
            "greeting": sampled("Hello there!"),
        }}),
    )
    .await;
    let r = result(&v, "partial retry");
    assert_eq!(r["resultType"], "input_required", "{r}");
    let asks = r["inputRequests"].as_object().unwrap();
    assert_eq!(asks.keys().collect::<Vec<_>>(), ["client_roots"], "{r}");
    assert_eq!(r["requestState"], state.as_str(), "{r}");

    let v = call(
        &mut h,
        tool,
        all_caps(),
        json!({"requestState": state, "inputResponses": {"client_roots": roots()}}),
    )
    .await;
    let r = result(&v, "final retry");
    assert_ne!(r["resultType"], "input_required", "{r}");
    assert_eq!(
        text(r),
        "name: Alice; greeting: Hello there!; roots: file:///bridge",
        "{r}"
    );

    // Spent: the parked call is gone (E-13).
    let v = call(
        &mut h,
        tool,
        all_caps(),
        json!({"requestState": state, "inputResponses": {"client_roots": roots()}}),
    )
    .await;
    assert_eq!(error_code(&v, "spent state"), -32602, "{v}");
    h.finish().await;
}

/// E-13, E-30: each round has its own requestState; a tampered one, a stale one, and
/// a valid one presented with another request are refused with -32602, and the parked
/// call still answers the right retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_round_has_its_own_state_bound_to_its_request() {
    let mut h = bridged("rounds").await;
    let tool = "test_input_required_result_multi_round";
    let caps = json!({"elicitation": {}});
    let v = call(&mut h, tool, caps.clone(), json!({})).await;
    let r = result(&v, "round 1");
    assert!(r["inputRequests"]["step1"].is_object(), "{r}");
    let s1 = r["requestState"].as_str().unwrap().to_owned();

    let v = call(
        &mut h,
        tool,
        caps.clone(),
        json!({"requestState": format!("{s1}-TAMPERED"), "inputResponses": {}}),
    )
    .await;
    assert_eq!(error_code(&v, "tampered"), -32602, "{v}");
    // The same state presented with another tool (E-30).
    let v = call(
        &mut h,
        "test_input_required_result_elicitation",
        caps.clone(),
        json!({"requestState": s1, "inputResponses": {}}),
    )
    .await;
    assert_eq!(error_code(&v, "other request"), -32602, "{v}");

    let v = call(
        &mut h,
        tool,
        caps.clone(),
        json!({"requestState": s1, "inputResponses": {"step1": elicited(json!({"name": "Bo"}))}}),
    )
    .await;
    let r = result(&v, "round 2");
    assert!(r["inputRequests"]["step2"].is_object(), "{r}");
    let s2 = r["requestState"].as_str().unwrap().to_owned();
    assert_ne!(s1, s2);
    let v = call(
        &mut h,
        tool,
        caps.clone(),
        json!({"requestState": s1, "inputResponses": {"step2": elicited(json!({"color": "red"}))}}),
    )
    .await;
    assert_eq!(error_code(&v, "stale"), -32602, "{v}");
    let v = call(
        &mut h,
        tool,
        caps,
        json!({"requestState": s2, "inputResponses": {"step2": elicited(json!({"color": "red"}))}}),
    )
    .await;
    assert_eq!(text(result(&v, "round 3")), "Bo's favorite color is red");
    h.finish().await;
}

/// E-25, E-24 (validation): answers sent ahead answer the upstream's question without
/// a round; malformed inputResponses are -32602; a question the host did not declare
/// the capability for is never put to it (the upstream hears -32601 and degrades, or
/// fails with its own -32021, which reaches the modern host unchanged). The legacy
/// upstream never sees inputResponses or requestState.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_ahead_undeclared_capabilities_and_bad_answers() {
    let mut h = bridged("ahead").await;
    let v = call(
        &mut h,
        "test_input_required_result_elicitation",
        json!({"elicitation": {}}),
        json!({"inputResponses": {
            "user_name": elicited(json!({"name": "Alice"})),
            "unknown_extra_key": {"action": "accept", "content": {}},
        }}),
    )
    .await;
    assert_eq!(text(result(&v, "ahead")), "Hello, Alice!", "{v}");

    for bad in [json!(12345), json!({"user_name": 12345}), json!(null)] {
        let v = call(
            &mut h,
            "test_input_required_result_elicitation",
            json!({"elicitation": {}}),
            json!({ "inputResponses": bad }),
        )
        .await;
        assert_eq!(error_code(&v, "bad inputResponses"), -32602, "{bad}: {v}");
    }

    // Sampling only: the elicitation question is refused upstream, not put to the host.
    let v = call(
        &mut h,
        "test_input_required_result_capabilities",
        json!({"sampling": {}}),
        json!({}),
    )
    .await;
    let r = result(&v, "capabilities");
    let asks = r["inputRequests"].as_object().unwrap();
    assert_eq!(asks.keys().collect::<Vec<_>>(), ["capital_question"], "{r}");

    let v = call(&mut h, "test_missing_capability", json!({}), json!({})).await;
    assert_eq!(error_code(&v, "missing capability"), -32021, "{v}");
    assert!(
        v.pointer("/error/data/requiredCapabilities/sampling")
            .is_some_and(Value::is_object),
        "{v}"
    );

    let wire = h.finish().await;
    let calls = sent(&wire, "tools/call");
    assert!(!calls.is_empty());
    for c in &calls {
        tap().validate_frame(R1125, &c.to_string()).unwrap();
        assert!(c["params"].get("inputResponses").is_none(), "{c}");
        assert!(c["params"].get("requestState").is_none(), "{c}");
    }
    // The refusal the upstream got for the undeclared elicitation was -32601.
    let refused = wire
        .iter()
        .any(|v| v.pointer("/error/code") == Some(&json!(-32601)));
    assert!(refused, "{wire:?}");
}

/// The same bridge on a prompt (E-26: prompts/get may answer input_required).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_can_ask_too() {
    let mut h = bridged("prompt").await;
    let mut meta = modern_meta(json!({}));
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let params = json!({"name": "test_input_required_result_prompt", "_meta": meta});
    let (v, _) = h.raw_request("prompts/get", params.clone()).await;
    let r = result(&v, "prompt round 1");
    assert_eq!(r["resultType"], "input_required", "{r}");
    let mut retry = params;
    retry["requestState"] = r["requestState"].clone();
    retry["inputResponses"] = json!({"user_context": elicited(json!({"context": "tests"}))});
    let (v, _) = h.raw_request("prompts/get", retry).await;
    let r = result(&v, "prompt round 2");
    assert_eq!(
        r["messages"][0]["content"]["text"], "Use this context: tests",
        "{r}"
    );
    h.finish().await;
}

/// E-6, E-24 (timeouts): a modern host that never retries leaves the legacy upstream's
/// questions unanswered only until askTimeoutMs: then an elicitation is answered
/// `cancel`, a sampling request -32603, and the requestState is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_questions_expire() {
    let mut config = example(R1125);
    config["mcpx"] = json!({"limits": {"askTimeoutMs": 400}});
    let mut h = Host::start("expire", &config, R2026).await;
    let v = call(
        &mut h,
        "test_input_required_result_elicitation",
        all_caps(),
        json!({}),
    )
    .await;
    let state = result(&v, "elicitation")["requestState"].clone();
    let v = call(
        &mut h,
        "test_input_required_result_sampling",
        all_caps(),
        json!({}),
    )
    .await;
    assert_eq!(result(&v, "sampling")["resultType"], "input_required");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let v = call(
        &mut h,
        "test_input_required_result_elicitation",
        all_caps(),
        json!({"requestState": state,
               "inputResponses": {"user_name": elicited(json!({"name": "Late"}))}}),
    )
    .await;
    assert_eq!(error_code(&v, "expired"), -32602, "{v}");
    let wire = h.finish().await;
    // mcpx's answers to the upstream's two requests (ids the upstream chose).
    let answers: Vec<&Value> = wire
        .iter()
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
    for a in answers {
        tap().validate_frame(R1125, &a.to_string()).unwrap();
    }
}

/// E-6: a legacy host that refuses a modern upstream's question fails the call with
/// -32603 carrying its refusal, and mcpx does not retry the upstream call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_host_refusing_a_question_fails_the_call() {
    let mut h = Host::start("refuse", &example(R2026), R1125).await;
    h.initialize(json!({"sampling": {}})).await;
    let tool = "test_input_required_result_sampling";
    h.send(
        &json!({"jsonrpc": "2.0", "id": "call", "method": "tools/call",
                   "params": {"name": tool, "arguments": {}}}),
    )
    .await;
    let response = loop {
        let line = h.next_line("tools/call").await;
        tap().validate_frame(R1125, &line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["method"] == "sampling/createMessage" {
            h.send(&json!({"jsonrpc": "2.0", "id": v["id"],
                           "error": {"code": -32000, "message": "the user said no"}}))
                .await;
        } else if v["id"] == "call" {
            break v;
        }
    };
    assert_eq!(error_code(&response, "refused"), -32603, "{response}");
    let msg = response
        .pointer("/error/message")
        .unwrap()
        .as_str()
        .unwrap();
    assert!(msg.contains("the user said no"), "{msg}");
    let wire = h.finish().await;
    let calls = sent(&wire, "tools/call")
        .into_iter()
        .filter(|c| c["params"]["name"] == tool)
        .count();
    assert_eq!(calls, 1, "the upstream call was retried");
}

/// A legacy upstream that asks an elicitation while answering completion/complete,
/// and completes with the error code its question got.
const ASKS_DURING_COMPLETION: &str = r#"out() { printf '%s\n' "$1"; }
cid=0
while IFS= read -r line; do
  id=$(printf '%s' "$line" | grep -o '"id":[0-9][0-9]*' | head -n 1 | cut -d: -f2)
  case "$line" in
    *'"id":"ask-1"'*)
      code=$(printf '%s' "$line" | grep -o '"code":-[0-9]*' | head -n 1 | cut -d: -f2)
      out '{"jsonrpc":"2.0","id":'"$cid"',"result":{"completion":{"values":["'"$code"'"],"hasMore":false}}}' ;;
    *'"method":"server/discover"'*)
      out '{"jsonrpc":"2.0","id":'"$id"',"error":{"code":-32601,"message":"Method not found"}}' ;;
    *'"method":"initialize"'*)
      out '{"jsonrpc":"2.0","id":'"$id"',"result":{"protocolVersion":"2025-06-18","capabilities":{"prompts":{},"completions":{}},"serverInfo":{"name":"fake","version":"1"}}}' ;;
    *'"method":"prompts/list"'*)
      out '{"jsonrpc":"2.0","id":'"$id"',"result":{"prompts":[{"name":"p","arguments":[{"name":"a"}]}]}}' ;;
    *'"method":"completion/complete"'*)
      cid=$id
      out '{"jsonrpc":"2.0","id":"ask-1","method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object","properties":{}}}}' ;;
    *) [ -n "$id" ] && out '{"jsonrpc":"2.0","id":'"$id"',"result":{}}' ;;
  esac
done"#;

/// E-26: only tools/call, prompts/get and resources/read can answer input_required; a
/// legacy upstream's question during another request of a modern host is refused
/// upstream with -32603 (the host declared elicitation, so it is not E-25's -32601).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_only_during_requests_that_can_answer_input_required() {
    let config =
        json!({"mcpServers": {"up": {"command": "sh", "args": ["-c", ASKS_DURING_COMPLETION]}}});
    let mut h = Host::start("e26", &config, R2026).await;
    let mut meta = modern_meta(json!({}));
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let (v, notes) = h
        .raw_request(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "p"},
                   "argument": {"name": "a", "value": ""}, "_meta": meta}),
        )
        .await;
    assert!(notes.iter().all(|n| n.get("id").is_none()), "{notes:?}");
    let r = result(&v, "completion");
    assert_ne!(r["resultType"], "input_required", "{r}");
    assert_eq!(r["completion"]["values"], json!(["-32603"]), "{r}");
    h.finish().await;
}

/// E-25 (legacy half): a modern upstream's -32021 reaches a legacy host, whose revision
/// has no such code, as -32603 with data.requiredCapabilities kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_capability_reaches_a_legacy_host_as_internal_error() {
    let mut h = Host::start("e25-legacy", &example(R2026), R1125).await;
    h.initialize(json!({})).await;
    let (v, _) = h
        .raw_request(
            "tools/call",
            json!({"name": "test_missing_capability", "arguments": {}}),
        )
        .await;
    assert_eq!(error_code(&v, "legacy -32021"), -32603, "{v}");
    assert!(
        v.pointer("/error/data/requiredCapabilities/sampling")
            .is_some_and(Value::is_object),
        "{v}"
    );
    h.finish().await;
}
