//! Elicitation across eras and revisions (docs/asking.md), over the wire through
//! `mcpx serve` (a real process, stdio) in front of `mcpx example-server` or a scripted
//! `sh` upstream: url mode for hosts that cannot take it (E-9, E-19), the namespace
//! label (E-10), per-revision shapes (E-11, E-18, E-29), url elicitation ids and their
//! completion (E-12), error surfaces (E-14), the per-upstream limit (E-15) and state
//! (E-32). Every frame mcpx sends a host is validated against the host's schema, and
//! every frame it sends an upstream (MCPX_WIRE_LOG) against the upstream's.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

use mcpx_protocol::{Era, Revision};
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

/// E-9, E-19, E-11, E-12: a legacy upstream's url-mode elicitation (the example
/// server's `test_elicitation_url`, 2025-11-25) reaches only hosts that declared url
/// mode, never as a form: a 2025-06-18 host and a 2026-07-28 host without
/// `elicitation.url` get -32603 carrying the URL, a 2025-11-25 host without it -32042
/// with the elicitation in data; each time the upstream's ask is answered "cancel" and
/// its call cancelled. A 2025-11-25 host with url mode gets the request with its
/// elicitationId and then the upstream's completion notification; a 2026-07-28 host
/// gets it without elicitationId and never a completion notification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_elicitations_reach_only_hosts_that_declared_url_mode() {
    let tool = "test_elicitation_url";
    for (rev, caps) in [
        (R0618, json!({"elicitation": {}})),
        (R1125, json!({"elicitation": {}})),
        (R1125, json!({"elicitation": {"form": {}}})),
        (R2026, json!({"elicitation": {}})),
    ] {
        let tag = format!("e9-{rev}-{}", caps["elicitation"]);
        let mut h = if rev.era() == Era::Legacy {
            legacy_host(&tag, &example(R1125), rev, caps.clone()).await
        } else {
            Host::start(&tag, &example(R1125), rev).await
        };
        let v = if rev.era() == Era::Legacy {
            let (v, asks, _) = legacy_call(&mut h, "c", tool, |_| json!({})).await;
            assert!(asks.is_empty(), "{tag}: {asks:?}");
            v
        } else {
            call(&mut h, tool, caps.clone(), json!({})).await
        };
        let code = error_code(&v, &tag);
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(SIGN_IN), "{tag}: {v}");
        if rev == R1125 {
            assert_eq!(code, -32042, "{tag}: {v}");
            let e = &v["error"]["data"]["elicitations"][0];
            assert_eq!(e["mode"], "url", "{tag}: {v}");
            assert_eq!(e["url"], SIGN_IN, "{tag}: {v}");
            assert_eq!(e["elicitationId"], "mcpx-elicitation-1", "{tag}: {v}");
        } else {
            assert_eq!(code, -32603, "{tag}: {v}");
        }
        let frames = h.finish_checked(R1125).await;
        let answers = answers_upstream(&frames);
        assert!(
            answers
                .iter()
                .any(|a| a["result"] == json!({"action": "cancel"})),
            "{tag}: {answers:?}"
        );
        assert!(
            frames
                .iter()
                .any(|f| f["method"] == "notifications/cancelled"),
            "{tag}: the upstream call was not cancelled: {frames:?}"
        );
    }

    // A 2025-11-25 host that declared url mode: the request, then the completion.
    let mut h = legacy_host(
        "e12-1125",
        &example(R1125),
        R1125,
        json!({"elicitation": {"url": {}}}),
    )
    .await;
    let (v, asks, mut notes) =
        legacy_call(&mut h, "c", tool, |_| json!({"action": "accept"})).await;
    assert_eq!(text(result(&v, "url accepted")), "URL elicitation: accept");
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!(asks[0]["params"]["mode"], "url");
    assert_eq!(asks[0]["params"]["url"], SIGN_IN);
    assert_eq!(asks[0]["params"]["elicitationId"], "mcpx-elicitation-1");
    // The upstream notifies before its result, but mcpx relays the notification on
    // its own: wait for it (next_line fails after 20 s).
    notes.extend(settle(&mut h).await);
    while !notes
        .iter()
        .any(|n| n["method"] == "notifications/elicitation/complete")
    {
        let line = h.next_line("notifications/elicitation/complete").await;
        tap().validate_frame(R1125, &line).unwrap();
        notes.push(serde_json::from_str(&line).unwrap());
    }
    let done: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/elicitation/complete")
        .collect();
    assert_eq!(done.len(), 1, "{notes:?}");
    assert_eq!(done[0]["params"]["elicitationId"], "mcpx-elicitation-1");
    // Relayed once: the completed elicitation is forgotten.
    let later = settle(&mut h).await;
    assert!(
        later
            .iter()
            .all(|n| n["method"] != "notifications/elicitation/complete"),
        "{later:?}"
    );
    h.finish().await;

    // A 2026-07-28 host that declared url mode: no elicitationId, no notification.
    let mut h = Host::start("e12-2026", &example(R1125), R2026).await;
    let caps = json!({"elicitation": {"url": {}}});
    let v = call(&mut h, tool, caps.clone(), json!({})).await;
    let r = result(&v, "url round");
    let ask = &r["inputRequests"]["sign_in"];
    assert_eq!(ask["params"]["mode"], "url", "{r}");
    assert_eq!(ask["params"]["url"], SIGN_IN, "{r}");
    assert!(ask["params"].get("elicitationId").is_none(), "{r}");
    let mut meta = modern_meta(json!({}));
    meta["io.modelcontextprotocol/clientCapabilities"] = caps;
    let (v, mut notes) = h
        .raw_request(
            "tools/call",
            json!({"name": tool, "arguments": {}, "_meta": meta,
                   "requestState": r["requestState"],
                   "inputResponses": {"sign_in": {"action": "accept"}}}),
        )
        .await;
    assert_eq!(text(result(&v, "url retry")), "URL elicitation: accept");
    notes.extend(settle(&mut h).await);
    assert!(
        notes
            .iter()
            .all(|n| n["method"] != "notifications/elicitation/complete"),
        "{notes:?}"
    );
    h.finish_checked(R1125).await;
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

/// E-11: to a 2025-06-18 host an elicitation is sent in 2025-06-18's shape (no mode,
/// defaults only on booleans; validated against the 2025-06-18 schema by the tap);
/// multi-select fields have no 2025-06-18 form, so that ask is refused to the
/// upstream with -32602 and never reaches the host. A 2025-11-25 host gets the same
/// asks unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitations_take_the_2025_06_18_shape() {
    let mut h = legacy_host(
        "e11-0618",
        &example(R1125),
        R0618,
        json!({"elicitation": {}}),
    )
    .await;
    let (v, asks, _) = legacy_call(
        &mut h,
        "defaults",
        "test_elicitation_sep1034_defaults",
        |_| json!({"action": "accept", "content": {"name": "Ann"}}),
    )
    .await;
    assert!(
        text(result(&v, "defaults")).starts_with("Elicitation completed"),
        "{v}"
    );
    let p = &asks[0]["params"];
    assert!(p.get("mode").is_none(), "{p}");
    let props = &p["requestedSchema"]["properties"];
    for field in ["name", "age", "score", "status"] {
        assert!(props[field].get("default").is_none(), "{field}: {p}");
    }
    assert_eq!(props["verified"]["default"], true, "{p}");
    assert_eq!(
        props["status"]["enum"],
        json!(["active", "inactive", "pending"])
    );

    let (v, asks, _) = legacy_call(
        &mut h,
        "enums",
        "test_elicitation_sep1330_enums",
        |_| json!({"action": "accept", "content": {}}),
    )
    .await;
    assert!(asks.is_empty(), "{asks:?}");
    let r = result(&v, "enums");
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(r).contains("-32602"), "{r}");
    let frames = h.finish_checked(R1125).await;
    assert!(
        answers_upstream(&frames)
            .iter()
            .any(|a| a.pointer("/error/code") == Some(&json!(-32602))),
        "{frames:?}"
    );

    // 2025-11-25 has every shape: the same ask passes unchanged.
    let mut h = legacy_host(
        "e11-1125",
        &example(R1125),
        R1125,
        json!({"elicitation": {}}),
    )
    .await;
    let (v, asks, _) = legacy_call(
        &mut h,
        "enums",
        "test_elicitation_sep1330_enums",
        |_| json!({"action": "accept", "content": {}}),
    )
    .await;
    assert_ne!(result(&v, "enums 1125")["isError"], true, "{v}");
    let props = &asks[0]["params"]["requestedSchema"]["properties"];
    assert!(props["titledSingle"]["oneOf"].is_array(), "{props}");
    assert_eq!(props["untitledMulti"]["type"], "array", "{props}");
    h.finish().await;
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

/// E-14: between eras no error codes stand for the user's choice: a modern host's
/// decline reaches a legacy upstream as an ElicitResult "decline", and a legacy host's
/// cancel reaches a modern upstream as an inputResponses entry "cancel".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decline_and_cancel_are_results_in_both_directions() {
    let tool = "test_input_required_result_elicitation";
    let mut h = Host::start("e14-modern", &example(R1125), R2026).await;
    let caps = json!({"elicitation": {}});
    let v = call(&mut h, tool, caps.clone(), json!({})).await;
    let state = result(&v, "round")["requestState"].clone();
    let v = call(
        &mut h,
        tool,
        caps,
        json!({"requestState": state, "inputResponses": {"user_name": {"action": "decline"}}}),
    )
    .await;
    assert_eq!(
        text(result(&v, "declined")),
        "The user did not accept (decline)."
    );
    let frames = h.finish_checked(R1125).await;
    assert!(
        answers_upstream(&frames)
            .iter()
            .any(|a| a["result"] == json!({"action": "decline"})),
        "{frames:?}"
    );

    let mut h = legacy_host(
        "e14-legacy",
        &example(R2026),
        R1125,
        json!({"elicitation": {}}),
    )
    .await;
    let (v, asks, _) = legacy_call(&mut h, "c", tool, |_| json!({"action": "cancel"})).await;
    assert_eq!(asks.len(), 1);
    assert_eq!(
        text(result(&v, "cancelled")),
        "The user did not accept (cancel)."
    );
    let frames = h.finish_checked(R2026).await;
    assert!(
        frames.iter().any(|f| f["method"] == "tools/call"
            && f["params"]["inputResponses"]["user_name"] == json!({"action": "cancel"})),
        "{frames:?}"
    );
}

fn limited(config: Value, n: usize) -> Value {
    let mut config = config;
    config["mcpx"] = json!({"limits": {"askMaxPending": n}});
    config
}

/// E-15 (legacy host, legacy upstream): with askMaxPending 2, a third elicitation of
/// the same upstream while two are unanswered is refused upstream with -32603 "too
/// many pending requests" (the example server then fails its tool); answering frees
/// the permits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_asks_per_upstream_are_limited_for_legacy_hosts() {
    let config = limited(example(R1125), 2);
    let mut h = legacy_host("e15-legacy", &config, R1125, json!({"elicitation": {}})).await;
    for id in ["c1", "c2", "c3"] {
        h.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": "test_elicitation", "arguments": {}}}))
            .await;
    }
    let mut asks = Vec::new();
    let mut done = Vec::new();
    while done.len() < 3 {
        let line = h.next_line("tools/call").await;
        tap().validate_frame(R1125, &line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["method"] == "elicitation/create" {
            asks.push(v);
        } else if v.get("result").is_some() {
            done.push(v);
        }
        if done.len() == 1 && asks.len() == 2 {
            // One call was refused while two asks wait: now answer them.
            let r = &done[0]["result"];
            assert_eq!(r["isError"], true, "{r}");
            assert!(text(r).contains("too many pending requests"), "{r}");
            for a in &asks {
                h.send(&json!({"jsonrpc": "2.0", "id": a["id"],
                               "result": {"action": "accept", "content": {"username": "u"}}}))
                    .await;
            }
        }
        assert!(
            asks.len() <= 2,
            "more than askMaxPending asks reached the host"
        );
    }
    for d in &done[1..] {
        assert_ne!(d["result"]["isError"], true, "{d}");
    }
    // The permits are free again.
    let (v, asks, _) = legacy_call(
        &mut h,
        "c4",
        "test_elicitation",
        |_| json!({"action": "accept", "content": {"username": "u"}}),
    )
    .await;
    assert_eq!(asks.len(), 1);
    assert_ne!(result(&v, "after")["isError"], true, "{v}");
    let frames = h.finish_checked(R1125).await;
    let refused = answers_upstream(&frames)
        .into_iter()
        .filter(|a| a.pointer("/error/code") == Some(&json!(-32603)))
        .count();
    assert_eq!(refused, 1, "{frames:?}");
}

/// E-15 (modern host, legacy upstream): questions parked for a 2026-07-28 host's retry
/// hold no ask permit (that host is not being asked until it retries, and a round it
/// abandons must not block the upstream's asks for askTimeoutMs): with askMaxPending
/// 1, two rounds are put to the host at once. Parked calls are bounded by
/// maxParkedCalls instead: past it the upstream's question is refused (-32603) and its
/// call ends without a round; an answered round frees its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_questions_are_bounded_by_max_parked_calls() {
    let mut config = example(R1125);
    config["mcpx"] = json!({"limits": {"askMaxPending": 1, "maxParkedCalls": 2}});
    let mut h = Host::start("e15-modern", &config, R2026).await;
    let elicit = "test_input_required_result_elicitation";
    let v = call(&mut h, elicit, all_caps(), json!({})).await;
    let first = result(&v, "first")["requestState"].clone();
    let v = call(
        &mut h,
        "test_input_required_result_sampling",
        all_caps(),
        json!({}),
    )
    .await;
    assert_eq!(result(&v, "second")["resultType"], "input_required", "{v}");
    let v = call(&mut h, elicit, all_caps(), json!({})).await;
    let r = result(&v, "third");
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(r).contains("too many calls waiting"), "{r}");
    let v = call(
        &mut h,
        elicit,
        all_caps(),
        json!({"requestState": first, "inputResponses": {"user_name": elicited(json!({"name": "Al"}))}}),
    )
    .await;
    assert_eq!(text(result(&v, "answered")), "Hello, Al!");
    let v = call(&mut h, elicit, all_caps(), json!({})).await;
    assert_eq!(result(&v, "fourth")["resultType"], "input_required", "{v}");
    h.finish().await;
}

/// E-15 (legacy host, modern upstream): an inputRequests ask over the limit fails the
/// host's request with -32603 "too many pending requests".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_asks_of_a_modern_upstream_are_limited() {
    let config = limited(example(R2026), 1);
    let mut h = legacy_host("e15-up", &config, R1125, json!({"elicitation": {}})).await;
    for id in ["c1", "c2"] {
        h.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": "test_input_required_result_elicitation", "arguments": {}}}))
            .await;
    }
    let mut asks = Vec::new();
    let mut done = Vec::new();
    while done.len() < 2 {
        let line = h.next_line("tools/call").await;
        tap().validate_frame(R1125, &line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["method"] == "elicitation/create" {
            asks.push(v);
        } else if v.get("method").is_none() && v.get("id").is_some() {
            if done.is_empty() {
                assert_eq!(error_code(&v, "over the limit"), -32603, "{v}");
                assert!(
                    v["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("too many pending requests"),
                    "{v}"
                );
                assert_eq!(asks.len(), 1, "{asks:?}");
                h.send(&json!({"jsonrpc": "2.0", "id": asks[0]["id"],
                               "result": elicited(json!({"name": "Bo"}))}))
                    .await;
            } else {
                assert_eq!(text(result(&v, "within the limit")), "Hello, Bo!");
            }
            done.push(v);
        }
    }
    assert_eq!(asks.len(), 1, "{asks:?}");
    h.finish_checked(R2026).await;
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
