//! `mcpx serve --metrics`: the scrape after real traffic, over real sockets, and each
//! outcome of a call in its own series (`error_type`) on both legs.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;
use std::time::Duration;

use mcpx_protocol::Revision;
use serde_json::{Value, json};

use crate::runtime;
use runtime::{Gateway, HttpGateway, client, example_entry, poll, with_mcpx};

/// The metrics address `mcpx serve` announced on stderr.
async fn metrics_url(stderr: impl Fn() -> String) -> String {
    let port = poll(Duration::from_secs(20), || {
        let text = stderr();
        let rest = text.split("metrics at http://127.0.0.1:").nth(1)?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u16>().ok()
    })
    .await
    .unwrap_or_else(|| panic!("no metrics address announced; stderr:\n{}", stderr()));
    format!("http://127.0.0.1:{port}/metrics")
}

/// One scrape: the content type and the text.
async fn scrape(url: &str) -> String {
    let r = client().get(url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"],
        mcpx_metrics::CONTENT_TYPE,
        "the Prometheus text format"
    );
    r.text().await.unwrap()
}

/// The samples of a scrape: (name, labels) → value. Checks each line's shape too.
fn samples(text: &str) -> Vec<(String, HashMap<String, String>, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            assert!(
                line.is_empty() || line.starts_with("# HELP ") || line.starts_with("# TYPE "),
                "{line}"
            );
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("{line}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, HashMap::new()),
            Some((name, rest)) => {
                let rest = rest.strip_suffix('}').unwrap();
                let labels = rest
                    .split("\",")
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        let (k, v) = p.split_once("=\"").unwrap();
                        (k.to_owned(), v.trim_end_matches('"').to_owned())
                    })
                    .collect();
                (name, labels)
            }
        };
        out.push((name.to_owned(), labels, value));
    }
    out
}

/// The value of the sample `name` whose labels include `labels`, summed over the
/// samples that match.
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples(text)
        .iter()
        .filter(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, _, v)| v)
        .sum()
}

/// `count` of `leg`'s histogram for a `tools/call` of `tool` that ended as `error_type`.
fn calls(text: &str, leg: &str, tool: &str, error_type: &str) -> f64 {
    value(
        text,
        &format!("mcp_{leg}_operation_duration_seconds_count"),
        &[
            ("mcp_method_name", "tools/call"),
            ("gen_ai_tool_name", tool),
            ("upstream", "a"),
            ("error_type", error_type),
        ],
    )
}

/// A 2026-07-28 `tools/call` over Streamable HTTP: its response.
async fn modern_call(url: &str, id: i64, tool: &str) -> Value {
    modern_request(
        url,
        id,
        "tools/call",
        json!({"name": tool, "arguments": {}}),
    )
    .await
}

/// A 2026-07-28 request over Streamable HTTP: its response.
async fn modern_request(url: &str, id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut r = client()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method);
    if let Some(name) = params["name"].as_str() {
        r = r.header("Mcp-Name", name);
    }
    let r = r.body(body.to_string()).send().await.unwrap();
    let text = r.text().await.unwrap();
    runtime::frames(&text)
        .into_iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no response in {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_after_traffic_counts_each_call_in_its_series() {
    let config = json!({"mcpServers": {"a": example_entry("a", &[])}});
    let gw = HttpGateway::start("metrics-scrape", &config, &["--metrics", "127.0.0.1:0"]).await;
    let metrics = metrics_url(|| gw.stderr()).await;
    // Listed first: a call that comes before its tool is listed counts as `other`.
    let list = modern_request(&gw.url(), 1000, "tools/list", json!({})).await;
    assert!(list["result"]["tools"].is_array(), "{list}");
    let (ok, tool_errors) = (5, 3);
    for id in 0..ok {
        let r = modern_call(&gw.url(), id, "test_simple_text").await;
        assert!(r["result"]["content"].is_array(), "{r}");
    }
    for id in 0..tool_errors {
        let r = modern_call(&gw.url(), 100 + id, "test_error_handling").await;
        assert_eq!(r["result"]["isError"], true, "{r}");
    }
    // A name the catalog does not list is `other`, with no upstream.
    let r = modern_call(&gw.url(), 200, "no_such_tool").await;
    assert!(r["error"].is_object(), "{r}");

    let text = scrape(&metrics).await;
    for leg in ["server", "client"] {
        assert_eq!(
            calls(&text, leg, "test_simple_text", ""),
            5.0,
            "{leg}:\n{text}"
        );
        assert_eq!(
            calls(&text, leg, "test_error_handling", "tool_error"),
            3.0,
            "{leg}:\n{text}"
        );
        // Every observation is within the +Inf bucket.
        assert_eq!(
            value(
                &text,
                &format!("mcp_{leg}_operation_duration_seconds_bucket"),
                &[("gen_ai_tool_name", "test_simple_text"), ("le", "+Inf")]
            ),
            5.0
        );
    }
    let other = [
        ("mcp_method_name", "tools/call"),
        ("gen_ai_tool_name", "other"),
        ("upstream", ""),
        ("error_type", "-32602"),
    ];
    assert_eq!(
        value(&text, "mcp_server_operation_duration_seconds_count", &other),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(&text, "mcp_client_operation_duration_seconds_count", &other),
        0.0,
        "an unknown tool never reaches an upstream"
    );
    assert_eq!(
        value(
            &text,
            "mcpx_upstream_state",
            &[("upstream", "a"), ("state", "ready")]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(&text, "mcpx_upstream_state", &[("upstream", "a")]),
        1.0,
        "one state at a time"
    );
    assert_eq!(
        value(&text, "mcpx_upstream_calls_in_flight", &[("upstream", "a")]),
        0.0
    );
    assert!(value(&text, "mcpx_host_received_bytes_total", &[]) > 0.0);
    assert!(value(&text, "mcpx_host_sent_bytes_total", &[]) > 0.0);
    assert_eq!(value(&text, "mcpx_tasks", &[]), 0.0);
    assert_eq!(value(&text, "mcpx_parked_calls", &[]), 0.0);

    // A legacy session counts while it is open.
    assert_eq!(value(&text, "mcpx_legacy_sessions", &[]), 0.0, "{text}");
    let session =
        runtime::Session::open(&gw.url(), Revision::V2025_11_25, Duration::from_secs(10)).await;
    let text = scrape(&metrics).await;
    assert_eq!(value(&text, "mcpx_legacy_sessions", &[]), 1.0, "{text}");
    let r = client()
        .delete(gw.url())
        .header("Mcp-Session-Id", &session.sid)
        .header("MCP-Protocol-Version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let text = scrape(&metrics).await;
    assert_eq!(value(&text, "mcpx_legacy_sessions", &[]), 0.0, "{text}");

    // Only /metrics is served, and only to GET and HEAD.
    let base = metrics.trim_end_matches("/metrics");
    let r = client().get(format!("{base}/mcp")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = client().post(&metrics).body("{}").send().await.unwrap();
    assert_eq!(r.status(), 405);
    let r = client().head(&metrics).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_outcome_lands_in_its_own_series() {
    // A 2025-06-18 upstream and host: a tool's invalid input is a -32602 both ways
    // (from 2025-11-25 it is an isError result). Calls time out after 300 ms without
    // progress.
    let entry = with_mcpx(
        example_entry("a", &["--revision", "2025-06-18"]),
        json!({"callTimeoutMs": 300}),
    );
    let config = json!({"mcpServers": {"a": entry}});
    let mut gw = Gateway::start(
        "metrics-outcomes",
        &config,
        Revision::V2025_06_18,
        &["--metrics", "127.0.0.1:0"],
    )
    .await;
    let metrics = metrics_url(|| gw.stderr()).await;
    gw.initialize().await;

    // A tool error: a result, but an error to its user.
    let r = gw.call("test_error_handling", json!({})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    // Invalid params.
    let r = gw.call("test_add", json!({"a": "one", "b": 2})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // A timeout: 4 steps of 400 ms, no progress asked for.
    let r = gw
        .call(
            "test_tool_with_progress",
            json!({"steps": 4, "delayMs": 400}),
        )
        .await;
    assert_eq!(r["error"]["data"]["cause"], "timeout", "{r}");
    // Cancelled by the host mid-call.
    let slow = json!({"name": "test_tool_with_progress", "arguments": {"steps": 40, "delayMs": 100},
                      "_meta": {"progressToken": "p"}});
    let id = gw.send_request("tools/call", slow.clone()).await;
    assert!(
        gw.wait_note("notifications/progress", Duration::from_secs(10))
            .await
    );
    gw.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": id, "reason": "test"}}),
    )
    .await;
    let text = loop_until(&metrics, |t| {
        calls(t, "server", "test_tool_with_progress", "cancelled") == 1.0
            && calls(t, "client", "test_tool_with_progress", "cancelled") == 1.0
    })
    .await;
    assert_eq!(value(&text, "mcpx_legacy_sessions", &[]), 1.0, "{text}");
    // A crashed upstream: killed mid-call.
    let id = gw.send_request("tools/call", slow).await;
    assert!(
        gw.wait_note("notifications/progress", Duration::from_secs(10))
            .await
    );
    let pid = gw.upstream_pid("a").expect("the upstream's pid");
    runtime::signal(pid, "KILL");
    let r = gw
        .response(id, "tools/call", Duration::from_secs(10))
        .await
        .expect("an answer after the crash");
    assert!(r["error"].is_object(), "{r}");

    let text = scrape(&metrics).await;
    for leg in ["server", "client"] {
        let why = || format!("{leg}:\n{text}");
        assert_eq!(
            calls(&text, leg, "test_error_handling", "tool_error"),
            1.0,
            "{}",
            why()
        );
        assert_eq!(calls(&text, leg, "test_add", "-32602"), 1.0, "{}", why());
        assert_eq!(
            calls(&text, leg, "test_tool_with_progress", "timeout"),
            1.0,
            "{}",
            why()
        );
        assert_eq!(
            calls(&text, leg, "test_tool_with_progress", "cancelled"),
            1.0,
            "{}",
            why()
        );
        assert_eq!(
            calls(&text, leg, "test_tool_with_progress", "transport"),
            1.0,
            "{}",
            why()
        );
        // Nothing else: five calls, five series.
        assert_eq!(
            value(
                &text,
                &format!("mcp_{leg}_operation_duration_seconds_count"),
                &[("mcp_method_name", "tools/call")]
            ),
            5.0,
            "{}",
            why()
        );
    }
    // The supervisor starts it again: a restart, and the state back to ready.
    loop_until(&metrics, |t| {
        value(t, "mcpx_upstream_restarts_total", &[("upstream", "a")]) == 1.0
            && value(
                t,
                "mcpx_upstream_state",
                &[("upstream", "a"), ("state", "ready")],
            ) == 1.0
    })
    .await;
}

/// Scrapes until `ok` holds (at most 10 s); returns that scrape.
async fn loop_until(url: &str, ok: impl Fn(&str) -> bool) -> String {
    let mut last = String::new();
    let every = Duration::from_millis(50);
    let found = crate::wait::poll_every(Duration::from_secs(10), every, async || {
        last = scrape(url).await;
        ok(&last).then(|| last.clone())
    })
    .await;
    found.unwrap_or_else(|| panic!("not within 10 s; the last scrape:\n{last}"))
}
