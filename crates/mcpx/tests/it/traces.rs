//! Trace context and JSON logs, over real sockets, with traces off (the OTLP export
//! itself is checked against a real receiver by scripts/interop.sh, section 8).
//!
//! With traces off, mcpx passes a host's trace context on as it came: from the
//! `traceparent`/`tracestate` headers of a legacy session's POST, or from a 2026-07-28
//! request's `_meta`, to the upstream's `_meta` (register A-C9). An invalid one is
//! not passed on. `MCPX_LOG_FORMAT=json` writes one JSON object a line, the request
//! spans' fields and the trace id included.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use mcpx_protocol::Revision;
use serde_json::{Value, json};

use crate::runtime;
use runtime::{HttpGateway, Session, client, example_entry, frames, poll};

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const STATE: &str = "vendor=opaque,other=1";

/// A legacy session's `tools/call` of `tool`, with extra headers: the response.
async fn call_with_headers(s: &Session, url: &str, tool: &str, headers: &[(&str, &str)]) -> Value {
    let mut req = client()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("Mcp-Session-Id", &s.sid)
        .header("MCP-Protocol-Version", s.rev.as_str());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}});
    let text = req
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    frames(&text).into_iter().find(|f| f["id"] == 77).unwrap()
}

/// The `_meta` of the `n`th `tools/call` mcpx sent upstream, once it is logged.
async fn sent_meta(gw: &HttpGateway, n: usize) -> Value {
    poll(Duration::from_secs(10), || {
        let calls: Vec<Value> = gw
            .wire()
            .into_iter()
            .filter(|f| f["method"] == "tools/call")
            .collect();
        calls.get(n).map(|f| f["params"]["_meta"].clone())
    })
    .await
    .unwrap_or_else(|| panic!("no tools/call #{n} upstream; wire: {:?}", gw.wire()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_trace_context_reaches_the_upstream_with_traces_off() {
    let config = json!({"mcpServers": {"a": example_entry("a", &[])}});
    let gw = HttpGateway::start("trace-pass", &config, &[]).await;
    let url = gw.url();
    let s = Session::open(&url, Revision::V2025_06_18, Duration::from_secs(20)).await;
    // From the HTTP headers of a legacy session's POST.
    let r = call_with_headers(
        &s,
        &url,
        "test_simple_text",
        &[("traceparent", PARENT), ("tracestate", STATE)],
    )
    .await;
    assert!(r["result"]["content"].is_array(), "{r}");
    let meta = sent_meta(&gw, 0).await;
    assert_eq!(meta["traceparent"], PARENT, "{meta}");
    assert_eq!(meta["tracestate"], STATE, "{meta}");
    // An invalid traceparent (upper-case hex) is no context: nothing is passed on.
    let invalid = PARENT.to_uppercase();
    let r = call_with_headers(
        &s,
        &url,
        "test_simple_text",
        &[("traceparent", invalid.as_str())],
    )
    .await;
    assert!(r["result"]["content"].is_array(), "{r}");
    let meta = sent_meta(&gw, 1).await;
    assert!(meta.get("traceparent").is_none(), "{meta}");
    // From a 2026-07-28 request's `_meta`.
    let other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "test_simple_text", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "traceparent": other}}});
    let text = client()
        .post(&url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "test_simple_text")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("simple text"), "{text}");
    let meta = sent_meta(&gw, 2).await;
    assert_eq!(meta["traceparent"], other, "{meta}");
    assert!(meta.get("tracestate").is_none(), "{meta}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_request_spans_and_the_trace_id() {
    let config = json!({"mcpServers": {"a": example_entry("a", &[])}});
    let env = [("MCPX_LOG_FORMAT", "json"), ("MCPX_LOG", "info")];
    let gw =
        HttpGateway::start_env("trace-json", &config, &[], &env, Duration::from_secs(20)).await;
    let url = gw.url();
    let s = Session::open(&url, Revision::V2025_06_18, Duration::from_secs(20)).await;
    let r = call_with_headers(&s, &url, "test_simple_text", &[("traceparent", PARENT)]).await;
    assert!(r["result"]["content"].is_array(), "{r}");
    // The request's span ends with a line of its own, carrying its fields.
    let line = poll(Duration::from_secs(10), || {
        gw.stderr()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["fields"]["message"] == "close" && v["span"]["name"] == "mcp.request")
    })
    .await
    .unwrap_or_else(|| panic!("no request line; stderr:\n{}", gw.stderr()));
    let span = &line["span"];
    assert_eq!(
        span["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736",
        "{line}"
    );
    assert_eq!(span["otel.name"], "tools/call test_simple_text", "{line}");
    assert_eq!(span["mcp.method.name"], "tools/call", "{line}");
    assert_eq!(span["mcp.protocol.version"], "2025-06-18", "{line}");
    assert_eq!(span["mcp.session.id"], s.sid, "{line}");
    assert_eq!(span["jsonrpc.request.id"], "77", "{line}");
    assert_eq!(span["network.transport"], "tcp", "{line}");
    assert_eq!(span["mcpx.upstream"], "a", "{line}");
    // The upstream call's line sits inside the request's span.
    let upstream = gw
        .stderr()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["span"]["name"] == "mcp.upstream")
        .unwrap_or_else(|| panic!("no upstream line; stderr:\n{}", gw.stderr()));
    assert_eq!(
        upstream["spans"][0]["trace_id"], span["trace_id"],
        "{upstream}"
    );
    assert_eq!(upstream["span"]["otel.kind"], "client", "{upstream}");
    // Every line is one JSON object, the listening address's too.
    for l in gw.stderr().lines() {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert!(v["timestamp"].is_string() && v["level"].is_string(), "{l}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_trace_settings_are_reported_and_mcpx_serves() {
    let config = json!({"mcpServers": {"a": example_entry("a", &[])}});
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("MCPX_LOG_FORMAT", "yaml"),
    ];
    let gw = HttpGateway::start_env("trace-bad", &config, &[], &env, Duration::from_secs(20)).await;
    let err = gw.stderr();
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\": mcpx exports OTLP over HTTP only"),
        "{err}"
    );
    assert!(err.contains("MCPX_LOG_FORMAT=\"yaml\""), "{err}");
    let s = Session::open(&gw.url(), Revision::V2025_06_18, Duration::from_secs(20)).await;
    let r = s
        .request(
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        )
        .await;
    assert!(r["result"]["content"].is_array(), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_go_to_an_https_collector_with_the_configured_headers() {
    use mcpx_testkit::http::{Answer, ScriptedHttp};
    use mcpx_testkit::tls::TlsFront;
    let collector = ScriptedHttp::start(|r| {
        if r.line().starts_with("POST /v1/traces ") {
            Answer::empty("200 OK", &["Content-Type: application/x-protobuf"])
        } else {
            Answer::not_found()
        }
    })
    .await;
    let front = TlsFront::start(collector.port).await;
    let dir = crate::scratch_dir("trace-https");
    let bundle = dir.join("ca.pem");
    std::fs::write(&bundle, &front.ca_pem).unwrap();
    let endpoint = format!("https://127.0.0.1:{}", front.port);
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer%20collector-key",
        ),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("SSL_CERT_FILE", bundle.to_str().unwrap()),
    ];
    let config = json!({"mcpServers": {"a": example_entry("a", &[])}});
    let gw =
        HttpGateway::start_env("trace-https", &config, &[], &env, Duration::from_secs(20)).await;
    let s = Session::open(&gw.url(), Revision::V2025_06_18, Duration::from_secs(20)).await;
    let r = s
        .request(
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        )
        .await;
    assert!(r["result"]["content"].is_array(), "{r}");
    let export = poll(Duration::from_secs(15), || {
        collector
            .seen()
            .into_iter()
            .find(|r| r.body.contains("tools/call test_simple_text"))
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "no export with the call's span; seen {:?}; stderr:\n{}",
            collector
                .seen()
                .iter()
                .map(|r| r.line().to_owned())
                .collect::<Vec<_>>(),
            gw.stderr()
        )
    });
    assert_eq!(export.line(), "POST /v1/traces HTTP/1.1");
    assert_eq!(
        export.header("content-type"),
        Some("application/x-protobuf")
    );
    assert_eq!(export.header("authorization"), Some("Bearer collector-key"));
    assert!(export.body.contains("mcp.request") || export.body.contains("mcp.method.name"));
}
