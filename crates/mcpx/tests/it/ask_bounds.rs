//! The bounds on an upstream's asks when the host does not answer (docs/asking.md,
//! register E-15, A-C18), over the wire through `mcpx serve` (a real process, stdio)
//! in front of tests/fixtures/ask_flood.py, a legacy server that asks thousands of
//! questions at once, or `mcpx example-server` at 2026-07-28: asks past
//! `askMaxPending` are refused at once, `maxCallTimeMs` bounds a call however long
//! its asks wait, and no backlog of asks stops mcpx reading the upstream. Every frame
//! mcpx sends the host is validated against the host's schema, and every frame it
//! sends a legacy upstream against the upstream's.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use mcpx_testkit::tap::tap;
use serde_json::{Value, json};

use crate::common;
use common::*;

/// One upstream, `up`, running the flood fixture, with `limits` as mcpx's and
/// `settings` as the server's `mcpx` block.
/// `log`, if given, is the fixture's FLOOD_LOG.
fn flood_config(limits: Value, settings: Value, log: Option<&Path>) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ask_flood.py");
    let env = match log {
        Some(l) => json!({"FLOOD_LOG": l}),
        None => json!({}),
    };
    json!({
        "mcpServers": {"up": {"command": "python3", "args": [script], "env": env,
                              "mcpx": settings}},
        "mcpx": {"limits": limits},
    })
}

/// A 2025-11-25 host that declared elicitation, in front of `config`.
async fn elicitation_host(tag: &str, config: &Value) -> Host {
    let mut h = Host::start(tag, config, R1125).await;
    h.initialize(json!({"elicitation": {}})).await;
    h
}

fn tool_call(id: &str, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args}})
}

/// What mcpx sent the host until the response to `id`, within 15 s: that response,
/// the requests (never answered) and the notifications.
async fn until_response(h: &mut Host, id: &str) -> (Value, Vec<Value>, Vec<Value>) {
    let (mut asks, mut notes) = (Vec::new(), Vec::new());
    let read = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            let v = h.next_frame(id).await;
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
            if v.get("id").is_some() {
                asks.push(v);
            } else {
                notes.push(v);
            }
        }
    })
    .await;
    match read {
        Ok(v) => (v, asks, notes),
        Err(_) => panic!(
            "{id} was not answered within 15 s; {} asks had reached the host: {asks:?}",
            asks.len()
        ),
    }
}

/// The notifications that reach the host before the answer to a `ping` sent now: a
/// later frame would have been sent after them.
async fn settle(h: &mut Host) -> Vec<Value> {
    let (_, notes) = h.request("ping", json!({})).await;
    notes
}

/// The request ids the host's `notifications/cancelled` name, sorted.
fn cancelled_ids(notes: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/cancelled")
        .map(|n| {
            n["params"]["requestId"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    ids.sort();
    ids
}

fn ids_of(asks: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = asks
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

/// The id mcpx gave the upstream's `tools/call` of `tool`.
fn upstream_call_id(wire: &[Value], tool: &str) -> Value {
    sent(wire, "tools/call")
        .into_iter()
        .find(|f| f["params"]["name"] == tool)
        .unwrap_or_else(|| panic!("no tools/call of {tool} upstream: {wire:?}"))["id"]
        .clone()
}

/// E-15 (askMaxPending 4): an upstream that sends 3,000 elicitations at once while
/// the host answers none gets exactly 4 of them put to the host and the other 2,996
/// refused at once with -32603 "too many pending requests", the code every legacy
/// revision has for a request the client cannot serve: none is queued behind the
/// unanswered ones. When the call ends, its 4 open asks are cancelled at the host and
/// answered -32603 upstream, and the permits are free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_past_the_limit_are_refused_at_once() {
    let config = flood_config(
        json!({"askMaxPending": 4, "askTimeoutMs": 120_000}),
        json!({}),
        None,
    );
    let mut h = elicitation_host("bounds-flood", &config).await;
    let count = 3000;
    h.send(&tool_call(
        "flood",
        "flood",
        json!({"count": count, "keep": 4, "wait": 60}),
    ))
    .await;
    let (mut asks, mut notes) = (Vec::new(), Vec::new());
    let mut flood = None;
    let read = tokio::time::timeout(Duration::from_secs(15), async {
        while flood.is_none() {
            let v = h.next_frame("flood").await;
            if v["method"] == "elicitation/create" {
                asks.push(v);
                assert!(
                    asks.len() <= 4,
                    "more than askMaxPending asks reached the host"
                );
            } else if v["id"] == "flood" {
                flood = Some(v);
            } else {
                notes.push(v);
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the flooding call was not answered within 15 s; {} of its asks had reached the host (askMaxPending 4)",
        asks.len()
    );
    let flood = flood.unwrap();
    let report: Value = serde_json::from_str(&text(result(&flood, "flood"))).unwrap();
    assert_eq!(report["answered"], count - 4, "{report}");
    assert_eq!(report["codes"], json!({"-32603": count - 4}), "{report}");
    assert!(
        report["message"]
            .as_str()
            .unwrap()
            .contains("too many pending requests"),
        "{report}"
    );
    // At once: not one askTimeoutMs (120 s) after another.
    assert!(report["seconds"].as_f64().unwrap() < 30.0, "{report}");
    assert_eq!(asks.len(), 4, "{asks:?}");

    // The call is over: its open asks are cancelled at the host.
    notes.extend(settle(&mut h).await);
    assert_eq!(cancelled_ids(&notes), ids_of(&asks), "{notes:?}");

    // And their permits are free: the next call's asks reach the host and their
    // answers reach the upstream.
    h.send(&tool_call(
        "again",
        "flood",
        json!({"count": 4, "keep": 0, "wait": 30}),
    ))
    .await;
    let mut seen = 0;
    let again = loop {
        let v = h.next_frame("again").await;
        if v["method"] == "elicitation/create" {
            seen += 1;
            h.send(&json!({"jsonrpc": "2.0", "id": v["id"],
                           "result": {"action": "accept", "content": {"name": "Al"}}}))
                .await;
        } else if v["id"] == "again" {
            break v;
        }
    };
    assert_eq!(seen, 4);
    let report: Value = serde_json::from_str(&text(result(&again, "again"))).unwrap();
    assert_eq!(report["codes"], json!({"result": 4}), "{report}");

    let wire = h.finish_checked(R1125).await;
    let refused = wire
        .iter()
        .filter(|f| {
            f["id"].as_str().is_some_and(|id| id.starts_with("flood-"))
                && f.pointer("/error/code") == Some(&json!(-32603))
        })
        .count();
    // The 2,996 refused at once, and the 4 the host left open, answered when the
    // call ended.
    assert_eq!(refused, count, "refusals sent upstream");
}

/// E-15: no backlog of asks stops mcpx reading an upstream. One that writes 3,000
/// elicitations back to back (more than every queue between its stdout and the host
/// holds) can write them all, while the host answers none, and another call to it,
/// sent while the asking call waits on the host, is answered promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_of_asks_never_stops_mcpx_reading_the_upstream() {
    let files = crate::scratch_dir("bounds-backlog-files");
    let log = files.join("flood.log");
    let config = flood_config(
        json!({"askMaxPending": 4, "askTimeoutMs": 120_000}),
        json!({}),
        Some(&log),
    );
    let mut h = elicitation_host("bounds-backlog", &config).await;
    let count = 3000;
    h.send(&tool_call(
        "flood",
        "flood",
        json!({"count": count, "keep": 4, "wait": 60, "hold": true}),
    ))
    .await;
    // Until the upstream has written every ask (the host reads what mcpx sends it
    // meanwhile, and answers nothing).
    let sent = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .last()
            .unwrap_or("sent 0")
            .to_owned()
    };
    let mut frames = Vec::new();
    let all = format!("sent {count}");
    let deadline = Instant::now() + Duration::from_secs(15);
    while sent() != all && Instant::now() < deadline {
        if let Ok(line) =
            tokio::time::timeout(Duration::from_millis(100), h.next_line("flood")).await
        {
            frames.push(line);
        }
    }
    let wrote = sent();
    // Another call to the same upstream, while the flooding one waits on the host.
    h.send(&tool_call("echo", "echo", json!({}))).await;
    let echo_sent = Instant::now();
    let mut echo = None;
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while echo.is_none() {
            let line = h.next_line("echo").await;
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == "echo" {
                echo = Some(v);
            }
            frames.push(line);
        }
    })
    .await;
    assert!(
        wrote == all && echo.is_some(),
        "the upstream got to \"{wrote}\" of {count} asks in 15 s, and another call to it was {} within 10 s",
        if echo.is_some() {
            "answered"
        } else {
            "not answered"
        }
    );
    assert_eq!(text(result(echo.as_ref().unwrap(), "echo")), "echo");
    assert!(echo_sent.elapsed() < Duration::from_secs(10));
    // The flooding call ends once the echo is answered.
    let (v, _, _) = until_response(&mut h, "flood").await;
    let report: Value = serde_json::from_str(&text(result(&v, "flood"))).unwrap();
    assert_eq!(report["answered"], count - 4, "{report}");
    for line in &frames {
        tap()
            .validate_frame(R1125, line)
            .unwrap_or_else(|e| panic!("to the host: {e}"));
    }
    let asked = frames
        .iter()
        .filter(|l| l.contains("elicitation/create"))
        .count();
    assert_eq!(asked, 4, "asks put to the host");
    h.finish_checked(R1125).await;
    let _ = std::fs::remove_dir_all(&files);
}

/// A-C18, E-15: `maxCallTimeMs` (2 s) bounds a call whose asks the host leaves
/// unanswered, although `askTimeoutMs` and the server's `callTimeoutMs` are 120 s:
/// the host gets the timeout error after about 2 s, its open asks are cancelled with
/// notifications/cancelled, and the legacy upstream gets notifications/cancelled for
/// the call and -32603 for each of its asks. The upstream serves the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_call_time_bounds_a_call_whose_asks_wait() {
    let config = flood_config(
        json!({"maxCallTimeMs": 2000, "askTimeoutMs": 120_000}),
        json!({"callTimeoutMs": 120_000}),
        None,
    );
    let mut h = elicitation_host("bounds-hang", &config).await;
    let sent_at = Instant::now();
    h.send(&tool_call("hang", "hang", json!({"count": 2})))
        .await;
    let (v, asks, mut notes) = until_response(&mut h, "hang").await;
    let took = sent_at.elapsed();
    assert_eq!(asks.len(), 2, "{asks:?}");
    assert_eq!(error_code(&v, "hang"), -32603, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{v}"
    );
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(15),
        "the call took {took:?} (maxCallTimeMs 2000)"
    );
    notes.extend(settle(&mut h).await);
    assert_eq!(cancelled_ids(&notes), ids_of(&asks), "{notes:?}");

    let (v, _) = h
        .request("tools/call", json!({"name": "echo", "arguments": {}}))
        .await;
    assert_eq!(text(result(&v, "echo")), "echo", "{v}");

    let wire = h.finish_checked(R1125).await;
    let id = upstream_call_id(&wire, "hang");
    assert!(
        sent(&wire, "notifications/cancelled")
            .iter()
            .any(|n| n["params"]["requestId"] == id),
        "no notifications/cancelled for the call upstream: {wire:?}"
    );
    let refused = wire
        .iter()
        .filter(|f| {
            f["id"].as_str().is_some_and(|i| i.starts_with("hang-"))
                && f.pointer("/error/code") == Some(&json!(-32603))
        })
        .count();
    assert_eq!(
        refused, 2,
        "the upstream's asks were left unanswered: {wire:?}"
    );
}
