//! Timeouts on the paused clock: `callTimeoutMs` bounds a call without progress,
//! `maxCallTimeMs` any call, `connectTimeoutMs` a start.
//!
//! In-process version of the timeout half of `crates/mcpx/tests/upstream_client.rs`'s
//! `the_gateway_times_out_calls_but_not_listens` (there a shell script that never
//! answers; here the example server's `slow_compute`, on the paused clock).

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::harness::{Behaviour, Host, InMemory, Upstream, config, text};

/// A call past `callTimeoutMs` fails with -32603 "upstream request timed out",
/// naming the upstream; the connection stays up, and the next call is answered.
#[tokio::test(start_paused = true)]
async fn a_call_past_its_timeout_fails_and_the_upstream_serves_on() {
    let links = InMemory::default().with("up", Upstream::example());
    let host = Host::start(
        config(json!({}), &[("up", json!({"callTimeoutMs": 300}))]),
        links,
    );
    let slow = host
        .request(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 600}}),
        )
        .await;
    let e = slow.error();
    assert_eq!(e["code"], -32603, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("upstream request timed out") && message.contains("up"),
        "{message}"
    );
    let quick = host
        .request(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "b"}}),
        )
        .await;
    assert_eq!(
        text(quick.result()),
        "computed b after 0 s",
        "{:?}",
        quick.response
    );
    assert_eq!(
        host.links.connects("up"),
        1,
        "the timeout restarted the upstream"
    );
    host.finish().await;
}

/// A tool that never answers: the call fails `callTimeoutMs` (300 ms) after it was
/// sent, not sooner, and the upstream is told the request is cancelled.
#[tokio::test(start_paused = true)]
async fn a_call_never_answered_fails_at_its_timeout() {
    let links = InMemory::default().with("up", Upstream::example().behaving(Behaviour::MutesCalls));
    let host = Host::start(
        config(json!({}), &[("up", json!({"callTimeoutMs": 300}))]),
        links,
    );
    let (_, names) = host.tool_names().await;
    assert!(names.contains(&"test_simple_text".to_owned()), "{names:?}");
    let sent = Instant::now();
    let v = host
        .request(
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        )
        .await;
    let took = sent.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(350),
        "failed after {took:?}"
    );
    let e = v.error();
    assert_eq!(e["code"], -32603, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("upstream request timed out"),
        "{e}"
    );
    let (at, call) = host.links.requests_to("up", "tools/call").pop().unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let cancelled = host.links.requests_to("up", "notifications/cancelled");
    assert!(
        cancelled
            .iter()
            .any(|(c_at, c)| *c_at >= at && c["params"]["requestId"] == call["id"]),
        "the upstream was not told: {cancelled:?}"
    );
    host.finish().await;
}

/// Progress restarts `callTimeoutMs`: a call that reports progress every 100 ms for
/// 2 s outlives a 300 ms timeout; `maxCallTimeMs` (1 s) bounds it whatever progress
/// it makes.
#[tokio::test(start_paused = true)]
async fn progress_restarts_the_call_timeout_within_the_max_call_time() {
    let links = InMemory::default().with("up", Upstream::example());
    let host = Host::start(
        config(json!({}), &[("up", json!({"callTimeoutMs": 300}))]),
        links,
    );
    let v = host
        .request(
            "tools/call",
            json!({"name": "test_tool_with_progress",
                   "arguments": {"steps": 20, "delayMs": 100},
                   "_meta": {"progressToken": "p"}}),
        )
        .await;
    assert!(v.response.get("result").is_some(), "{:?}", v.response);
    assert!(v.related.len() >= 19, "progress relayed: {:?}", v.related);
    host.finish().await;

    let links = InMemory::default().with("up", Upstream::example());
    let host = Host::start(
        config(
            json!({"limits": {"maxCallTimeMs": 1000}}),
            &[("up", json!({"callTimeoutMs": 300}))],
        ),
        links,
    );
    let sent = Instant::now();
    let v = host
        .request(
            "tools/call",
            json!({"name": "test_tool_with_progress",
                   "arguments": {"steps": 20, "delayMs": 100},
                   "_meta": {"progressToken": "p"}}),
        )
        .await;
    let took = sent.elapsed();
    assert!(v.response.get("error").is_some(), "{:?}", v.response);
    assert!(
        took >= Duration::from_millis(1000) && took < Duration::from_millis(1100),
        "failed after {took:?}"
    );
    host.finish().await;
}

/// An upstream that never answers its handshake: each start fails after
/// `connectTimeoutMs` (2 s), and the next begins `backoffMs` (1 s) later.
#[tokio::test(start_paused = true)]
async fn a_start_never_answered_fails_at_the_connect_timeout() {
    let links = InMemory::default().with("mute", Upstream::example().behaving(Behaviour::Silent));
    let host = Host::start(
        config(
            json!({}),
            &[(
                "mute",
                json!({"connectTimeoutMs": 2000, "restart": {"backoffMs": 1000}}),
            )],
        ),
        links,
    );
    let began = Instant::now();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (_, status) = host.app.status().pop().unwrap();
    assert_eq!(status.state.key(), "backoff", "{status:?}");
    assert_eq!(host.links.connects("mute"), 1);
    tokio::time::sleep_until(began + Duration::from_millis(3100)).await;
    let at = host.links.attempts("mute");
    assert_eq!(at.len(), 2, "{at:?}");
    let gap = at[1] - at[0];
    assert!(
        // 2 s to time out, then the 1 s backoff, less its jitter (up to a quarter).
        gap >= Duration::from_millis(2750) && gap < Duration::from_millis(3050),
        "the second start came {gap:?} after the first"
    );
    host.finish().await;
}
