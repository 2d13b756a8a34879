//! The ask bridge (docs/asking.md), over the wire through `mcpx serve` (a real process,
//! stdio): a 2026-07-28 host in front of a legacy upstream (`mcpx example-server
//! --revision 2025-11-25`) that asks its questions with server-to-client requests.
//! mcpx puts them to the host as `input_required` rounds and resumes the upstream call
//! with the host's answers. Every frame mcpx sends the host is validated against the
//! 2026-07-28 schema; each test names the register ids it proves.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

use mcpx_testkit::tap::tap;
use serde_json::{Value, json};

use crate::common;
use common::*;

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
