//! Issue #24, defect 7: an upstream whose stdout can no longer be framed fails its
//! pending calls with the reason and is restarted (ARCHITECTURE.md, "Framing an
//! upstream's stdout").
//!
//! Each test runs `mcpx serve` (a real process) with two stdio upstreams: `good`
//! (`mcpx example-server`) and `bad`, `tests/fixtures/misframing_server.py`, whose tool
//! `speak` breaks the framing of its stdout as its `mode` argument says: a line left
//! unfinished, a line over `maxFrameBytes` (small here), two messages run together.
//! Each time the host's call fails with an error naming the upstream and the reason,
//! `bad` runs in a new process, later calls succeed, and `good` serves throughout.
//! A line that is not JSON at all (a log line) is skipped and costs nothing, and a big
//! result that is well framed arrives whole.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use crate::runtime;
use common::R1125;
use runtime::*;

/// The bad upstream's `callTimeoutMs`.
const CALL_TIMEOUT: Duration = Duration::from_millis(3000);
/// How late past the timeout an answer may come and still count as "about the
/// timeout": a loaded 2-core machine (CI runs builds beside the tests) delays
/// wake-ups by a second or more. A hang is what this bound catches, not speed.
const SLACK: Duration = Duration::from_secs(5);
/// The configured `mcpx.limits.maxFrameBytes`.
const MAX_FRAME: usize = 65536;

async fn start(tag: &str) -> Gateway {
    start_with(tag, MAX_FRAME).await
}

async fn start_with(tag: &str, max_frame: usize) -> Gateway {
    let config = json!({
        "mcpServers": {
            "bad": with_mcpx(
                python_entry("bad", "misframing_server.py", &[]),
                json!({
                    "protocol": "legacy",
                    "callTimeoutMs": CALL_TIMEOUT.as_millis() as u64
                }),
            ),
            "good": example_entry("good", &[]),
        },
        "mcpx": {"limits": {"maxFrameBytes": max_frame}}
    });
    let mut gw = Gateway::start(tag, &config, R1125, &[]).await;
    gw.initialize().await;
    let r = gw
        .call_until_ok("bad__speak", json!({"mode": "ok"}), Duration::from_secs(20))
        .await;
    assert_eq!(first_text(&r), "ok", "{r}");
    gw
}

/// The error of `v`, which must name upstream `bad` and say `words` (all of them);
/// `data.cause` is `framing`.
fn framing_error<'a>(v: &'a Value, words: &[&str], gw: &Gateway) -> &'a Value {
    let e = v
        .get("error")
        .unwrap_or_else(|| panic!("expected an error, got {v}"));
    let msg = e["message"].as_str().unwrap_or_default();
    assert!(msg.contains("upstream bad"), "names no upstream: {v}");
    for w in words {
        assert!(
            msg.contains(w),
            "the error does not say {w:?}: {v}\nmcpx's stderr:\n{}",
            gw.stderr()
        );
    }
    assert_eq!(e["data"]["upstream"], "bad", "{v}");
    assert_eq!(e["data"]["cause"], "framing", "{v}");
    e
}

/// `bad` runs in a process other than `old` and answers; the old process is gone;
/// `good` serves.
async fn restarted(gw: &mut Gateway, old: u32) {
    let new = gw
        .wait_upstream("bad", Some(old), Duration::from_secs(15))
        .await;
    assert_ne!(new, old);
    let r = gw
        .call_until_ok("bad__speak", json!({"mode": "ok"}), Duration::from_secs(15))
        .await;
    assert_eq!(first_text(&r), "ok", "{r}");
    wait_for(
        Duration::from_secs(10),
        "the old bad process ended",
        || (!alive(old)).then_some(()),
        || format!("pid {old} still runs"),
    )
    .await;
    let r = gw
        .call_until_ok("good__test_simple_text", json!({}), Duration::from_secs(10))
        .await;
    assert_eq!(first_text(&r), SIMPLE_TEXT, "{r}");
}

/// The start of an answer and then nothing: the call fails when it times out, saying
/// the line was left unfinished (not just "did not answer"), and the upstream is
/// restarted, where before every later answer was read as the end of that line and
/// every later call timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_line_then_silence_fails_the_call_and_restarts_the_upstream() {
    let mut gw = start("framing-partial").await;
    let old = gw.wait_upstream("bad", None, Duration::from_secs(10)).await;
    let t0 = Instant::now();
    let v = gw.call("bad__speak", json!({"mode": "partial"})).await;
    let elapsed = t0.elapsed();
    framing_error(&v, &["unfinished line", "no newline"], &gw);
    assert!(
        elapsed >= CALL_TIMEOUT - Duration::from_millis(100) && elapsed < CALL_TIMEOUT + SLACK,
        "the call failed after {elapsed:?}, not about its timeout ({CALL_TIMEOUT:?})"
    );
    restarted(&mut gw, old).await;
}

/// A line that grows past `maxFrameBytes` with no end in sight: the call fails as the
/// line crosses the limit (long before its timeout), naming the limit, and the
/// upstream is restarted. Before, the call waited for its timeout, and the next
/// answer's newline ended the skipped line: that answer was swallowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_over_the_frame_limit_fails_the_call_at_once_and_restarts_the_upstream() {
    let mut gw = start("framing-oversized").await;
    let old = gw.wait_upstream("bad", None, Duration::from_secs(10)).await;
    let t0 = Instant::now();
    let v = gw
        .call(
            "bad__speak",
            json!({"mode": "oversized", "size": 4 * MAX_FRAME}),
        )
        .await;
    let elapsed = t0.elapsed();
    framing_error(
        &v,
        &[&format!("more than {MAX_FRAME} bytes"), "maxFrameBytes"],
        &gw,
    );
    assert!(
        elapsed < CALL_TIMEOUT,
        "the call failed after {elapsed:?}, not as the line crossed the limit"
    );
    // The very next call is not swallowed: it is told the upstream is restarting, or
    // is answered by the new process.
    let v = gw.call("bad__speak", json!({"mode": "ok"})).await;
    if v.get("result").is_none() {
        not_ready_state(&v, "bad");
    }
    restarted(&mut gw, old).await;
}

/// Two messages run together on one line (it starts like JSON and is not): the call
/// fails at once with the reason, and the upstream is restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_messages_on_one_line_fail_the_call_and_restart_the_upstream() {
    let mut gw = start("framing-joined").await;
    let old = gw.wait_upstream("bad", None, Duration::from_secs(10)).await;
    let t0 = Instant::now();
    let v = gw.call("bad__speak", json!({"mode": "joined"})).await;
    framing_error(&v, &["not JSON"], &gw);
    assert!(t0.elapsed() < CALL_TIMEOUT, "after {:?}", t0.elapsed());
    restarted(&mut gw, old).await;
}

/// A big result that is well framed (3 MiB, over the size decoded and written off the
/// event loop) arrives whole, and the calls after it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_big_result_arrives_whole() {
    let mut gw = start_with("framing-big", 16 << 20).await;
    let old = gw.wait_upstream("bad", None, Duration::from_secs(10)).await;
    let size = 3 << 20;
    let v = gw
        .call("bad__speak", json!({"mode": "big", "size": size}))
        .await;
    let text = first_text(&v["result"]);
    assert_eq!(
        text.len(),
        size,
        "{}",
        v.to_string().chars().take(300).collect::<String>()
    );
    assert!(text.bytes().all(|b| b == b'x'));
    let v = gw.call("bad__speak", json!({"mode": "ok"})).await;
    assert_eq!(first_text(&v["result"]), "ok", "{v}");
    assert_eq!(gw.upstream_pid("bad"), Some(old), "bad was restarted");
}

/// A line that is not JSON at all (a server's log line on stdout, which the spec
/// forbids but servers print) is skipped: the answer after it arrives, and the
/// process is the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_line_on_stdout_is_skipped() {
    let mut gw = start("framing-banner").await;
    let old = gw.wait_upstream("bad", None, Duration::from_secs(10)).await;
    let v = gw.call("bad__speak", json!({"mode": "banner"})).await;
    assert_eq!(first_text(&v["result"]), "ok", "{v}");
    let v = gw.call("bad__speak", json!({"mode": "ok"})).await;
    assert_eq!(first_text(&v["result"]), "ok", "{v}");
    assert_eq!(gw.upstream_pid("bad"), Some(old), "bad was restarted");
}
