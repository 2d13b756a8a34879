//! Elicitation across eras and revisions (docs/asking.md), over the wire through
//! `mcpx serve` (a real process, stdio) in front of `mcpx example-server` or a scripted
//! `sh` upstream: url mode for hosts that cannot take it (E-9, E-19), the namespace
//! label (E-10), per-revision shapes (E-11, E-18, E-29), url elicitation ids and their
//! completion (E-12), error surfaces (E-14), the per-upstream limit (E-15) and state
//! (E-32). Every frame mcpx sends a host is validated against the host's schema, and
//! every frame it sends an upstream (MCPX_WIRE_LOG) against the upstream's.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

use mcpx_protocol::Revision;
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};

use crate::common;
use common::*;

/// mcpx's answers to the upstream's own requests (responses it sent upstream).
fn answers_upstream(frames: &[Value]) -> Vec<&Value> {
    frames
        .iter()
        .filter(|v| v.get("method").is_none() && v.get("id").is_some())
        .collect()
}

/// A legacy host's `tools/call` of `tool` with request id `id`: reads frames until its
/// response (each validated against the host's revision), answering each server
/// request with `answer(request)`. Returns the response, the requests and the
/// notifications seen.
async fn legacy_call(
    h: &mut Host,
    id: &str,
    tool: &str,
    answer: impl Fn(&Value) -> Value,
) -> (Value, Vec<Value>, Vec<Value>) {
    h.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": tool, "arguments": {}}}))
        .await;
    let mut asks = Vec::new();
    let mut notes = Vec::new();
    loop {
        let line = h.next_line(tool).await;
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == id && v.get("method").is_none() {
            if v.get("result").is_some() {
                tap()
                    .validate_response(h.rev, "tools/call", &line)
                    .unwrap_or_else(|e| panic!("to the host: {e}"));
            } else {
                tap()
                    .validate_frame(h.rev, &line)
                    .unwrap_or_else(|e| panic!("to the host: {e}"));
            }
            return (v, asks, notes);
        }
        tap()
            .validate_frame(h.rev, &line)
            .unwrap_or_else(|e| panic!("to the host: {e}"));
        if v.get("id").is_some() {
            let reply = answer(&v);
            h.send(&json!({"jsonrpc": "2.0", "id": v["id"], "result": reply}))
                .await;
            asks.push(v);
        } else {
            notes.push(v);
        }
    }
}

/// A legacy host at `rev` declaring `caps`, in front of `config`.
async fn legacy_host(tag: &str, config: &Value, rev: Revision, caps: Value) -> Host {
    let mut h = Host::start(tag, config, rev).await;
    h.initialize(caps).await;
    h
}

/// Reads frames until a `ping` answer arrives (sent just before), returning the
/// notifications that came first: a later frame would have been sent after them.
async fn settle(h: &mut Host) -> Vec<Value> {
    let (_, notes) = h.request("ping", json!({})).await;
    notes
}

/// A scripted upstream with one tool, `ask`, whose call asks the client `ask` (the
/// params of an `elicitation/create`). `legacy`: a 2025-11-25 server that sends the
/// ask as a request (id "ask-1") and, once answered, ends the call with "answered".
/// `modern`: a 2026-07-28 server that answers the call `input_required` (key `q`,
/// requestState "opaque-state-1") and any retry carrying inputResponses "answered".
fn elicits(era: &str, ask: &Value) -> Value {
    let script = r#"era=@ERA@
out() { printf '%s\n' "$1"; }
cid=0
while IFS= read -r line; do
  id=$(printf '%s' "$line" | grep -o '"id":[0-9][0-9]*' | head -n 1 | cut -d: -f2)
  case "$line" in
    *'"id":"ask-1"'*)
      out '{"jsonrpc":"2.0","id":'"$cid"',"result":{"content":[{"type":"text","text":"answered"}]}}' ;;
    *'"method":"server/discover"'*)
      if [ "$era" = modern ]; then
        out '{"jsonrpc":"2.0","id":'"$id"',"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"},"ttlMs":0,"cacheScope":"private","resultType":"complete"}}'
      else
        out '{"jsonrpc":"2.0","id":'"$id"',"error":{"code":-32601,"message":"Method not found"}}'
      fi ;;
    *'"method":"initialize"'*)
      out '{"jsonrpc":"2.0","id":'"$id"',"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}}' ;;
    *'"method":"tools/list"'*)
      out '{"jsonrpc":"2.0","id":'"$id"',"result":{"tools":[{"name":"ask","inputSchema":{"type":"object"}}]}}' ;;
    *'"method":"tools/call"'*)
      if [ "$era" = modern ]; then
        case "$line" in
          *'"inputResponses"'*)
            out '{"jsonrpc":"2.0","id":'"$id"',"result":{"content":[{"type":"text","text":"answered"}],"resultType":"complete"}}' ;;
          *)
            out '{"jsonrpc":"2.0","id":'"$id"',"result":{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":@ASK@}},"requestState":"opaque-state-1"}}' ;;
        esac
      else
        cid=$id
        out '{"jsonrpc":"2.0","id":"ask-1","method":"elicitation/create","params":@ASK@}'
      fi ;;
    *) [ -n "$id" ] && out '{"jsonrpc":"2.0","id":'"$id"',"result":{}}' ;;
  esac
done
"#;
    let ask = ask.to_string();
    assert!(!ask.contains('\''));
    let script = script.replace("@ERA@", era).replace("@ASK@", &ask);
    json!({"mcpServers": {"up": {"command": "sh", "args": ["-c", script]}}})
}

const SIGN_IN: &str = "https://example.com/mcpx/sign-in";

fn url_ask() -> Value {
    json!({"mode": "url", "message": "Please sign in", "url": SIGN_IN})
}

/// E-9, E-11 (modern upstream): a 2026-07-28 upstream's url-mode inputRequests entry
/// reaches a 2025-11-25 host that declared url mode as a request with a minted
/// elicitationId, and the call is retried with the answer; a host that cannot take
/// url mode gets -32042 (2025-11-25) or -32603 (2025-06-18) with the URL, and the
/// upstream call is not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_asks_of_a_modern_upstream_for_legacy_hosts() {
    let config = elicits("modern", &url_ask());
    let mut h = legacy_host(
        "e9-up-url",
        &config,
        R1125,
        json!({"elicitation": {"url": {}}}),
    )
    .await;
    let (v, asks, _) = legacy_call(&mut h, "c", "ask", |_| json!({"action": "accept"})).await;
    assert_eq!(text(result(&v, "accepted")), "answered", "{v}");
    assert_eq!(asks.len(), 1, "{asks:?}");
    let id = asks[0]["params"]["elicitationId"].as_str().unwrap();
    assert!(id.starts_with("mcpx-"), "{asks:?}");
    let frames = h.finish_checked(R2026).await;
    let retry = frames
        .iter()
        .find(|f| f["method"] == "tools/call" && f["params"].get("inputResponses").is_some())
        .expect("no retry");
    assert_eq!(
        retry["params"]["inputResponses"]["q"],
        json!({"action": "accept"})
    );
    assert_eq!(retry["params"]["requestState"], "opaque-state-1");

    for (rev, code) in [(R1125, -32042), (R0618, -32603)] {
        let tag = format!("e9-up-{rev}");
        let mut h = legacy_host(&tag, &config, rev, json!({"elicitation": {}})).await;
        let (v, asks, _) = legacy_call(&mut h, "c", "ask", |_| json!({})).await;
        assert!(asks.is_empty(), "{tag}: {asks:?}");
        assert_eq!(error_code(&v, &tag), code, "{tag}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(SIGN_IN),
            "{tag}: {v}"
        );
        if code == -32042 {
            let e = &v["error"]["data"]["elicitations"][0];
            assert_eq!(e["url"], SIGN_IN, "{tag}: {v}");
            assert!(e["elicitationId"].is_string(), "{tag}: {v}");
        }
        let frames = h.finish_checked(R2026).await;
        let calls = frames
            .iter()
            .filter(|f| f["method"] == "tools/call")
            .count();
        assert_eq!(calls, 1, "{tag}: the upstream call was retried");
    }
}

/// E-18, E-14: only message is required; an elicitation without mode is relayed as
/// written (no mode added) to a 2025-11-25 host and to a 2026-07-28 host; one without
/// message, or with a mode mcpx did not declare, is answered -32602 and reaches no
/// host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_message_is_required() {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}});
    let no_mode = json!({"message": "Name?", "requestedSchema": schema});
    let config = elicits("legacy", &no_mode);
    let mut h = legacy_host("e18-1125", &config, R1125, json!({"elicitation": {}})).await;
    let (v, asks, _) = legacy_call(
        &mut h,
        "c",
        "ask",
        |_| json!({"action": "accept", "content": {"name": "A"}}),
    )
    .await;
    assert_eq!(text(result(&v, "no mode")), "answered");
    assert_eq!(asks.len(), 1);
    let mut sent = asks[0]["params"].clone();
    sent.as_object_mut().unwrap().remove("_meta");
    assert_eq!(sent, no_mode, "relayed as written");
    h.finish().await;

    let mut h = Host::start("e18-2026", &config, R2026).await;
    let v = call(&mut h, "ask", json!({"elicitation": {}}), json!({})).await;
    let r = result(&v, "no mode, modern");
    let asks = r["inputRequests"].as_object().unwrap();
    assert_eq!(asks.len(), 1, "{r}");
    let ask = asks.values().next().unwrap();
    assert_eq!(ask["params"], no_mode, "{r}");
    h.finish().await;

    for bad in [
        json!({"requestedSchema": schema}),
        json!({"message": "Name?", "mode": "telepathy", "requestedSchema": schema}),
    ] {
        let mut h = legacy_host(
            "e18-bad",
            &elicits("legacy", &bad),
            R1125,
            json!({"elicitation": {}}),
        )
        .await;
        let (v, asks, _) = legacy_call(&mut h, "c", "ask", |_| json!({})).await;
        assert!(asks.is_empty(), "{bad}: {asks:?}");
        assert_eq!(text(result(&v, "bad")), "answered");
        let frames = h.finish_checked(R1125).await;
        let answers = answers_upstream(&frames);
        assert!(
            answers
                .iter()
                .any(|a| a["id"] == "ask-1" && a.pointer("/error/code") == Some(&json!(-32602))),
            "{bad}: {answers:?}"
        );
    }
}

/// E-29: pattern (no StringSchema keyword) is relayed as the upstream wrote it and
/// answers are not checked against it, to a legacy and to a modern host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pattern_is_relayed_and_not_enforced() {
    let field = json!({"type": "string", "pattern": "^[A-Za-z]+$"});
    let ask = json!({"message": "Name?", "requestedSchema":
        {"type": "object", "properties": {"name": field}}});
    let config = elicits("legacy", &ask);
    let off_pattern = json!({"action": "accept", "content": {"name": "123"}});

    let mut h = legacy_host("e29-1125", &config, R1125, json!({"elicitation": {}})).await;
    let (v, asks, _) = legacy_call(&mut h, "c", "ask", |_| off_pattern.clone()).await;
    assert_eq!(text(result(&v, "legacy host")), "answered");
    assert_eq!(
        asks[0]["params"]["requestedSchema"]["properties"]["name"],
        field
    );
    let frames = h.finish_checked(R1125).await;
    assert!(
        answers_upstream(&frames)
            .iter()
            .any(|a| a["id"] == "ask-1" && a["result"] == off_pattern),
        "{frames:?}"
    );

    let mut h = Host::start("e29-2026", &config, R2026).await;
    let caps = json!({"elicitation": {}});
    let v = call(&mut h, "ask", caps.clone(), json!({})).await;
    let r = result(&v, "modern host");
    let (key, q) = r["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(q["params"]["requestedSchema"]["properties"]["name"], field);
    let v = call(
        &mut h,
        "ask",
        caps,
        json!({"requestState": r["requestState"], "inputResponses": {key.clone(): off_pattern}}),
    )
    .await;
    assert_eq!(text(result(&v, "modern retry")), "answered");
    let frames = h.finish_checked(R1125).await;
    assert!(
        answers_upstream(&frames)
            .iter()
            .any(|a| a["id"] == "ask-1" && a["result"] == off_pattern),
        "{frames:?}"
    );
}

fn limited(config: Value, n: usize) -> Value {
    let mut config = config;
    config["mcpx"] = json!({"limits": {"askMaxPending": n}});
    config
}

/// E-10: with several upstreams (namespaces in use) every elicitation a host is shown
/// names its upstream's namespace, "[<namespace>] " before the message, whatever the
/// eras on either side; with one upstream the message is unchanged
/// (only_message_is_required).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitations_name_their_upstream_when_namespaces_are_in_use() {
    let bin = env!("CARGO_BIN_EXE_mcpx");
    let config = json!({"mcpServers": {
        "alpha": {"command": bin, "args": ["example-server", "--revision", "2025-11-25"]},
        "beta": {"command": bin, "args": ["example-server", "--revision", "2026-07-28"],
                 "mcpx": {"namespace": "b"}},
    }});
    let tool = "test_input_required_result_elicitation";
    let mut h = legacy_host("e10-legacy", &config, R1125, json!({"elicitation": {}})).await;
    for (name, label) in [
        ("alpha__test_elicitation", "[alpha] "),
        (&*format!("b__{tool}"), "[b] "),
    ] {
        let (v, asks, _) = legacy_call(
            &mut h,
            "c",
            name,
            |_| json!({"action": "accept", "content": {"name": "N", "username": "u"}}),
        )
        .await;
        result(&v, name);
        let m = asks[0]["params"]["message"].as_str().unwrap();
        assert!(m.starts_with(label), "{name}: {m}");
        assert!(
            !m[label.len()..].starts_with('['),
            "{name}: labelled twice: {m}"
        );
    }
    h.finish().await;

    let mut h = Host::start("e10-modern", &config, R2026).await;
    for (name, label) in [
        (format!("alpha__{tool}"), "[alpha] "),
        (format!("b__{tool}"), "[b] "),
    ] {
        let v = call(&mut h, &name, json!({"elicitation": {}}), json!({})).await;
        let r = result(&v, &name);
        let m = r["inputRequests"]["user_name"]["params"]["message"]
            .as_str()
            .unwrap();
        assert_eq!(m, format!("{label}What is your name?"), "{r}");
    }
    h.finish().await;
}

/// E-32: a 2026-07-28 upstream's url-mode ask and requestState pass to a modern host
/// as written, and mcpx keeps nothing for them: the same retry can be sent twice, and
/// the upstream gets the state back unchanged each time (whereas a bridged ask's
/// state is single-use, E-13).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_to_modern_asks_keep_no_state_in_mcpx() {
    let mut h = Host::start("e32", &elicits("modern", &url_ask()), R2026).await;
    let caps = json!({"elicitation": {"url": {}}});
    let v = call(&mut h, "ask", caps.clone(), json!({})).await;
    let r = result(&v, "round");
    assert_eq!(r["requestState"], "opaque-state-1", "{r}");
    assert_eq!(r["inputRequests"]["q"]["params"], url_ask(), "{r}");
    for n in 0..2 {
        let v = call(
            &mut h,
            "ask",
            caps.clone(),
            json!({"requestState": "opaque-state-1",
                   "inputResponses": {"q": {"action": "accept"}}}),
        )
        .await;
        assert_eq!(text(result(&v, "retry")), "answered", "retry {n}: {v}");
    }
    let frames = h.finish_checked(R2026).await;
    let retries: Vec<&Value> = frames
        .iter()
        .filter(|f| f["method"] == "tools/call" && f["params"].get("inputResponses").is_some())
        .collect();
    assert_eq!(retries.len(), 2, "{frames:?}");
    for r in retries {
        assert_eq!(r["params"]["requestState"], "opaque-state-1", "{r}");
    }
}

/// A 2025-11-25 upstream whose tool `need` fails with -32042 naming elicitation
/// "up-7", and whose tool `finish` first notifies that "up-7" (then "up-8", which it
/// never named) completed.
const NEEDS_URL: &str = r#"out() { printf '%s\n' "$1"; }
while IFS= read -r line; do
  id=$(printf '%s' "$line" | grep -o '"id":[0-9][0-9]*' | head -n 1 | cut -d: -f2)
  case "$line" in
    *'"method":"server/discover"'*)
      out '{"jsonrpc":"2.0","id":'"$id"',"error":{"code":-32601,"message":"Method not found"}}' ;;
    *'"method":"initialize"'*)
      out '{"jsonrpc":"2.0","id":'"$id"',"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}}' ;;
    *'"method":"tools/list"'*)
      out '{"jsonrpc":"2.0","id":'"$id"',"result":{"tools":[{"name":"need","inputSchema":{"type":"object"}},{"name":"finish","inputSchema":{"type":"object"}}]}}' ;;
    *'"name":"need"'*)
      out '{"jsonrpc":"2.0","id":'"$id"',"error":{"code":-32042,"message":"sign in first","data":{"elicitations":[{"mode":"url","elicitationId":"up-7","url":"https://example.com/up","message":"Sign in"}]}}}' ;;
    *'"name":"finish"'*)
      out '{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"up-7"}}'
      out '{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"up-8"}}'
      out '{"jsonrpc":"2.0","id":'"$id"',"result":{"content":[{"type":"text","text":"finished"}]}}' ;;
    *) [ -n "$id" ] && out '{"jsonrpc":"2.0","id":'"$id"',"result":{}}' ;;
  esac
done
"#;

/// E-12: the elicitations of an upstream's -32042 that reach a 2025-11-25 host are
/// followed like relayed ones: the upstream's completion for one reaches that host;
/// a completion for an elicitation mcpx never relayed is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_follow_url_elicitation_required_errors() {
    let config = json!({"mcpServers": {"up": {"command": "sh", "args": ["-c", NEEDS_URL]}}});
    let mut h = legacy_host(
        "e12-32042",
        &config,
        R1125,
        json!({"elicitation": {"url": {}}}),
    )
    .await;
    let (v, _, _) = legacy_call(&mut h, "c1", "need", |_| json!({})).await;
    assert_eq!(error_code(&v, "need"), -32042, "{v}");
    assert_eq!(
        v["error"]["data"]["elicitations"][0]["elicitationId"],
        "up-7"
    );
    let (v, _, mut notes) = legacy_call(&mut h, "c2", "finish", |_| json!({})).await;
    assert_eq!(text(result(&v, "finish")), "finished");
    notes.extend(settle(&mut h).await);
    while !notes
        .iter()
        .any(|n| n["method"] == "notifications/elicitation/complete")
    {
        let line = h.next_line("notifications/elicitation/complete").await;
        tap().validate_frame(R1125, &line).unwrap();
        notes.push(serde_json::from_str(&line).unwrap());
    }
    notes.extend(settle(&mut h).await);
    let ids: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/elicitation/complete")
        .map(|n| &n["params"]["elicitationId"])
        .collect();
    assert_eq!(ids, [&json!("up-7")], "{notes:?}");
    h.finish().await;
}
