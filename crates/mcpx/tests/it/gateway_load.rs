//! A load spike on one upstream: calls beyond what it may have in flight wait in a
//! bounded queue (`maxInFlight`, `maxQueued`), and only a call beyond the queue is
//! refused, with an error naming the upstream; the connection and the other calls are
//! never touched (issue "Reliability and security", defect 1: the 257th concurrent
//! call used to tear the upstream's connection down and fail all 256 in flight).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::runtime;
use runtime::*;

/// One 2026-07-28 `tools/call` of the example server's slow tool: the call's answer
/// (a result or an error), or what went wrong on the wire.
async fn slow_call(client: &reqwest::Client, url: &str, id: i64, delay_ms: u64) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
    "name": "test_tool_with_progress",
    "arguments": {"steps": 1, "delayMs": delay_ms},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "load", "version": "1"},
    }}});
    let resp = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "test_tool_with_progress")
        .body(body.to_string())
        .send()
        .await;
    let text = match resp {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(e) => return json!({"wire": e.to_string()}),
    };
    frames(&text)
        .into_iter()
        .find(|f| f["id"] == json!(id))
        .unwrap_or_else(|| json!({"wire": text}))
}

/// `n` concurrent slow calls; the answers, in call order.
async fn spike(url: &str, n: i64, delay_ms: u64) -> Vec<Value> {
    let client = client();
    let calls = (0..n).map(|id| {
        let (client, url) = (client.clone(), url.to_owned());
        tokio::spawn(async move { slow_call(&client, &url, id, delay_ms).await })
    });
    let mut out = Vec::new();
    for c in calls.collect::<Vec<_>>() {
        out.push(
            tokio::time::timeout(Duration::from_secs(120), c)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_calls_to_one_stdio_upstream_all_succeed() {
    let config = json!({"mcpServers": {"ex": example_entry("ex", &[])}});
    let mut gw = HttpGateway::start("load-1000", &config, &[]).await;
    let url = gw.url();
    // Started, and its pid known, before the spike.
    let first = spike(&url, 1, 0).await;
    assert!(first[0].get("result").is_some(), "{}", first[0]);
    let pid = gw.upstream_pid("ex").expect("no upstream child");
    let answers = spike(&url, 1000, 200).await;
    let failed: Vec<&Value> = answers
        .iter()
        .filter(|a| a.get("result").is_none())
        .collect();
    assert!(
        failed.is_empty(),
        "{} of 1000 failed, e.g. {}",
        failed.len(),
        failed[0]
    );
    assert_eq!(
        gw.upstream_pid("ex"),
        Some(pid),
        "the upstream was restarted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_queue_are_refused_and_nothing_else_is_touched() {
    let config = json!({"mcpServers": {"ex": with_mcpx(
        example_entry("ex", &[]),
        json!({"maxInFlight": 4, "maxQueued": 8})
    )}});
    let mut gw = HttpGateway::start("load-queue", &config, &[]).await;
    let url = gw.url();
    let first = spike(&url, 1, 0).await;
    assert!(first[0].get("result").is_some(), "{}", first[0]);
    let pid = gw.upstream_pid("ex").expect("no upstream child");
    let answers = spike(&url, 40, 500).await;
    let ok = answers.iter().filter(|a| a.get("result").is_some()).count();
    let busy: Vec<&Value> = answers
        .iter()
        .filter(|a| a["error"]["data"]["state"] == "busy")
        .collect();
    // Every call is answered: a result, or the refusal of a call beyond the queue.
    assert_eq!(ok + busy.len(), 40, "lost or other answers: {answers:?}");
    assert!(
        ok >= 12,
        "fewer than maxInFlight + maxQueued succeeded: {ok}"
    );
    assert!(!busy.is_empty(), "nothing was refused");
    let e = &busy[0]["error"];
    assert_eq!(e["code"], -32603, "{e}");
    assert_eq!(e["data"]["upstream"], "ex", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("upstream ex is busy"), "{message}");
    assert!(message.contains("maxQueued"), "{message}");
    assert_eq!(
        gw.upstream_pid("ex"),
        Some(pid),
        "the upstream was restarted"
    );
    // And it serves on.
    let after = spike(&url, 1, 0).await;
    assert!(after[0].get("result").is_some(), "{}", after[0]);
}
