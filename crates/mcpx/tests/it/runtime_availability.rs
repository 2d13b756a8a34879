//! Acceptance tests of non-blocking startup and availability: upstreams that come up
//! late are announced to hosts with `notifications/tools/list_changed`; a host's
//! `initialize` (and the HTTP listener) never waits for an upstream that does not
//! answer; a call to an upstream that is not ready gets -32603 saying its state; an
//! upstream that is down keeps its last known tools listed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::process::Command;

use crate::common;
use crate::runtime;
use common::{R1125, start_listening};
use runtime::*;

const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// An HTTP upstream that starts listening 3 s after mcpx, and a stdio upstream whose
/// first start fails: with small backoffs both become callable within a few seconds,
/// and the (legacy, initialized) host is told the tools changed when the HTTP one came
/// up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_upstreams_become_callable_and_are_announced() {
    let files = crate::scratch_dir("rt-late-files");
    let flag = files.join("started-once");
    let port = free_port();
    // Enough restarts for the HTTP upstream's 3 s of refused connections.
    let restart = json!({"restart": {"backoffMs": 100, "maxBackoffMs": 400, "maxRestarts": 100}});
    let script = format!(
        "if [ -e '{f}' ]; then exec '{MCPX}' example-server; else touch '{f}'; exit 1; fi",
        f = flag.display()
    );
    let config = json!({"mcpServers": {
        "late": with_mcpx(
            json!({"type": "http", "url": format!("http://127.0.0.1:{port}/mcp")}),
            restart.clone(),
        ),
        "flaky": with_mcpx(sh_entry("flaky", &script), restart),
    }});
    let began = Instant::now();
    let mut gw = Gateway::start("late", &config, R1125, &[]).await;
    gw.initialize().await;

    // real sleep: `late` starts listening 3 s after mcpx; the delay is the point.
    tokio::time::sleep(Duration::from_secs(3).saturating_sub(began.elapsed())).await;
    // What the host heard so far was not about `late`, which is not listening yet.
    gw.drain(Duration::from_millis(200)).await;
    let mut cmd = Command::new(MCPX);
    cmd.args(["example-server", "--http", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null());
    let (_late, _) = start_listening(cmd).await;

    let r = gw
        .call_until_ok(
            "flaky__test_simple_text",
            json!({}),
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(first_text(&r), SIMPLE_TEXT);
    assert!(flag.exists(), "flaky's first start did not run");
    let r = gw
        .call_until_ok("late__test_simple_text", json!({}), Duration::from_secs(10))
        .await;
    assert_eq!(first_text(&r), SIMPLE_TEXT);
    assert!(
        gw.wait_note(LIST_CHANGED, Duration::from_secs(5)).await,
        "the host was not told of late's tools; stderr:\n{}",
        gw.stderr()
    );
}

/// The same over `mcpx serve --http`: the listener is announced and accepts a TCP
/// connection within 1 s of the start, a host's `initialize` is answered within 2.5 s,
/// and a call to the silent upstream's tool says it is starting (or backing off).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_upstream_does_not_hold_up_the_http_listener() {
    let config = json!({"mcpServers": {
        "mute": sh_entry("mute", "exec sleep 600"),
        "ok": example_entry("ok", &[]),
    }});
    let gw = HttpGateway::start_within("silent-http", &config, &[], Duration::from_secs(1)).await;
    let connected = tokio::time::timeout(
        Duration::from_secs(1).saturating_sub(gw.announced_after),
        tokio::net::TcpStream::connect(("127.0.0.1", gw.port)),
    )
    .await;
    assert!(
        gw.announced_after <= Duration::from_secs(1) && matches!(connected, Ok(Ok(_))),
        "no connection accepted within 1 s (announced after {:?}); stderr:\n{}",
        gw.announced_after,
        gw.stderr()
    );
    let session = Session::open(&gw.url(), R1125, Duration::from_millis(2500)).await;
    let v = session
        .request(
            "tools/call",
            json!({"name": "mute__test_simple_text", "arguments": {}}),
        )
        .await;
    let state = not_ready_state(&v, "mute");
    assert!(state == "starting" || state == "backoff", "{v}");
}
