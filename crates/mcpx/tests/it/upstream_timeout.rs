//! `callTimeoutMs` bounds the whole call, the wait for an HTTP upstream's response
//! headers included, and the cancellation reaches the upstream as its era says (a
//! legacy one gets `notifications/cancelled`). Issue "Reliability and security",
//! defect 2: with 3000 ms the call failed at 30 s, and no cancellation was sent.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::time::{Duration, Instant};

use mcpx_protocol::Revision;
use serde_json::json;
use tokio::process::Command;

use crate::common;
use common::{Host, error_code, start_listening};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_upstream_withholds_its_headers_times_out_and_is_cancelled() {
    let dir = crate::scratch_dir("silent-http");
    let log = dir.join("upstream.log");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/silent_http.py");
    let mut cmd = Command::new("python3");
    cmd.arg(script).env("LOG", &log);
    let (_upstream, port) = start_listening(cmd).await;
    let config = json!({"mcpServers": {"silent": {"type": "http",
        "url": format!("http://127.0.0.1:{port}/mcp"),
        "mcpx": {"protocol": "legacy", "callTimeoutMs": 1500}}}});
    let mut host = Host::start("silent-http", &config, Revision::V2025_06_18).await;
    host.initialize(json!({})).await;
    let started = Instant::now();
    let (r, _) = host
        .request("tools/call", json!({"name": "hang", "arguments": {}}))
        .await;
    let took = started.elapsed();
    assert_eq!(error_code(&r, "hang"), -32603, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("timed out"), "{message}");
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(5),
        "the call ended after {took:?}, not at its 1.5 s timeout"
    );
    // The legacy upstream was told.
    let told = crate::wait::until(Duration::from_secs(5), async || {
        let seen = std::fs::read_to_string(&log).unwrap_or_default();
        seen.lines().any(|l| l == "notifications/cancelled")
    })
    .await;
    let seen = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(told, "no notifications/cancelled: {seen}");
    host.finish().await;
}
