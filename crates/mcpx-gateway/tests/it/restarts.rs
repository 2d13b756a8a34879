//! The supervisor's restarts, on the paused clock: quick failures retried after
//! delays that double from `backoffMs`, a crash loop after `maxRestarts`, tried again
//! every `crashLoopRetryMs`; a connection that ends is made again with no call, and a
//! call in flight on it fails at once, naming the upstream.
//!
//! In-process versions of `crates/mcpx/tests/runtime_supervisor.rs`'s
//! `a_killed_idle_child_is_started_again_before_any_call`,
//! `a_call_in_flight_fails_when_its_child_dies` and
//! `quick_failures_in_a_row_end_in_a_crash_loop` (its `mcpx serve` half; the `mcpx
//! probe` half stays there). A killed child is here a connection whose stream ends
//! ([`crate::harness::InMemory::kill`]); a command that exits at once, a connection
//! attempt that fails ([`crate::harness::Upstream::failing_first`]).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::{Instant, sleep, sleep_until};

use mcpx_client::EraCache;

use crate::harness::{Host, InMemory, Upstream, config, text};

const SIMPLE_TEXT: &str = "This is a simple text response for testing.";

/// The gaps between consecutive instants.
fn gaps(at: &[Instant]) -> Vec<Duration> {
    at.windows(2).map(|w| w[1] - w[0]).collect()
}

/// `d` within 50 ms after `want` (a start takes a few scheduler turns).
fn about(d: Duration, want: Duration) -> bool {
    // The backoff's jitter takes up to a quarter off each delay.
    d >= want * 3 / 4 && d < want + Duration::from_millis(50)
}

/// The state an error for upstream `name` reports in `data.state`, after checking it
/// is -32603 naming the upstream.
fn not_ready_state(v: &Value, name: &str) -> String {
    let err = v
        .get("error")
        .unwrap_or_else(|| panic!("expected an error for upstream {name}, got {v}"));
    assert_eq!(err["code"], -32603, "not -32603: {v}");
    let message = err["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("upstream {name}")),
        "the message does not name upstream {name}: {v}"
    );
    assert_eq!(err["data"]["upstream"], name, "data.upstream: {v}");
    err["data"]["state"].as_str().unwrap_or_default().to_owned()
}

/// Four failed starts in a row, the default `maxRestarts` (5) not reached: the
/// retries come 1, 2, 4 and 8 s after each failure (`backoffMs` 1000, doubling), the
/// fifth start succeeds and the upstream serves.
#[tokio::test(start_paused = true)]
async fn failed_starts_are_retried_after_doubling_delays() {
    let links = InMemory::default().with("flaky", Upstream::example().failing_first(4));
    let host = Host::start(
        config(
            json!({}),
            &[("flaky", json!({"restart": {"backoffMs": 1000}}))],
        ),
        links,
    );
    sleep(Duration::from_secs(20)).await;
    let at = host.links.attempts("flaky");
    assert_eq!(at.len(), 5, "starts: {at:?}");
    let gaps = gaps(&at);
    for (gap, want) in gaps.iter().zip([1, 2, 4, 8]) {
        assert!(
            about(*gap, Duration::from_secs(want)),
            "the delays between starts are {gaps:?}, not 1, 2, 4 and 8 s"
        );
    }
    let call = host
        .request(
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        )
        .await;
    assert_eq!(text(call.result()), SIMPLE_TEXT, "{:?}", call.response);
    assert_eq!(host.links.connects("flaky"), 5, "a call started it again");
    host.finish().await;
}

/// `maxBackoffMs` caps the doubling: 50, 100, 200, 200 ms with a 200 ms cap.
#[tokio::test(start_paused = true)]
async fn the_delay_stops_doubling_at_max_backoff() {
    let links = InMemory::default().with("flaky", Upstream::example().failing_first(4));
    let restart = json!({"backoffMs": 50, "maxBackoffMs": 200});
    let host = Host::start(
        config(json!({}), &[("flaky", json!({"restart": restart}))]),
        links,
    );
    sleep(Duration::from_secs(2)).await;
    let at = host.links.attempts("flaky");
    assert_eq!(at.len(), 5, "starts: {at:?}");
    let gaps = gaps(&at);
    for (gap, want) in gaps.iter().zip([50, 100, 200, 200]) {
        assert!(
            about(*gap, Duration::from_millis(want)),
            "the delays between starts are {gaps:?}, not 50, 100, 200 and 200 ms"
        );
    }
    host.finish().await;
}

/// Quick failures beyond `maxRestarts` (3) end in a crash loop: four starts, then
/// none until `crashLoopRetryMs`; a call in its namespace gets -32603 with
/// `data.state` `crash_loop` and the cause; the other upstream serves meanwhile; the
/// crash loop's retry comes `crashLoopRetryMs` after the last failure.
#[tokio::test(start_paused = true)]
async fn quick_failures_in_a_row_end_in_a_crash_loop() {
    let links = InMemory::default()
        .with("crashy", Upstream::example().failing_first(u32::MAX))
        .with("ok", Upstream::example());
    let restart = json!({"backoffMs": 50, "maxBackoffMs": 200, "maxRestarts": 3,
                         "crashLoopRetryMs": 60_000});
    let host = Host::start(
        config(
            json!({}),
            &[("crashy", json!({"restart": restart})), ("ok", json!({}))],
        ),
        links,
    );
    sleep(Duration::from_secs(3)).await;
    let at = host.links.attempts("crashy");
    assert_eq!(at.len(), 4, "starts in 3 s (1 + maxRestarts): {at:?}");
    sleep(Duration::from_secs(10)).await;
    assert_eq!(
        host.links.connects("crashy"),
        4,
        "crashy was started again in its crash loop"
    );

    let v = host
        .request(
            "tools/call",
            json!({"name": "crashy__test_simple_text", "arguments": {}}),
        )
        .await;
    assert_eq!(
        not_ready_state(&v.response, "crashy"),
        "crash_loop",
        "{:?}",
        v.response
    );
    let message = v.error()["message"].as_str().unwrap();
    assert!(message.contains("the in-memory server failed"), "{message}");
    let ok = host
        .request(
            "tools/call",
            json!({"name": "ok__test_simple_text", "arguments": {}}),
        )
        .await;
    assert_eq!(text(ok.result()), SIMPLE_TEXT, "{:?}", ok.response);

    let last = *at.last().unwrap();
    sleep_until(last + Duration::from_secs(61)).await;
    let again = host.links.attempts("crashy");
    assert_eq!(again.len(), 5, "no retry after crashLoopRetryMs: {again:?}");
    assert!(
        about(again[4] - last, Duration::from_secs(60)),
        "the crash loop's retry came {:?} after the last failure",
        again[4] - last
    );
    host.finish().await;
}

/// An idle upstream's connection ends: the supervisor connects again after
/// `backoffMs` (the default 1 s) with no call made, and a call then succeeds.
#[tokio::test(start_paused = true)]
async fn an_ended_idle_connection_is_made_again_before_any_call() {
    let links = InMemory::default().with("victim", Upstream::example());
    let host = Host::start(config(json!({}), &[("victim", json!({}))]), links);
    let call = host
        .request(
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        )
        .await;
    assert_eq!(text(call.result()), SIMPLE_TEXT);
    let calls_before = host.links.requests_to("victim", "tools/call").len();
    assert_eq!(host.links.open("victim"), 1);

    let killed = Instant::now();
    host.links.kill("victim");
    sleep(Duration::from_secs(5)).await;
    let at = host.links.attempts("victim");
    assert_eq!(at.len(), 2, "not connected again within 5 s: {at:?}");
    assert!(
        about(at[1] - killed, Duration::from_secs(1)),
        "connected again {:?} after the end, not backoffMs (1 s)",
        at[1] - killed
    );
    assert_eq!(host.links.open("victim"), 1);
    assert_eq!(
        host.links.requests_to("victim", "tools/call").len(),
        calls_before,
        "a call was made meanwhile"
    );
    let call = host
        .request(
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        )
        .await;
    assert_eq!(text(call.result()), SIMPLE_TEXT);
    host.finish().await;
}

/// A call in flight when its upstream's connection ends gets an error naming the
/// upstream at once, not when the call would have ended (10 s later).
#[tokio::test(start_paused = true)]
async fn a_call_in_flight_fails_when_its_connection_ends() {
    let links = InMemory::default().with("slowpoke", Upstream::example());
    let host = Host::start(config(json!({}), &[("slowpoke", json!({}))]), links);
    let call = host.request(
        "tools/call",
        json!({"name": "test_tool_with_progress",
               "arguments": {"steps": 100, "delayMs": 100}}),
    );
    let kill = async {
        while host.links.requests_to("slowpoke", "tools/call").is_empty() {
            sleep(Duration::from_millis(10)).await;
        }
        sleep(Duration::from_millis(500)).await;
        host.links.kill("slowpoke");
        Instant::now()
    };
    let (answer, killed) = tokio::join!(call, kill);
    let answered = Instant::now();
    assert!(
        answered - killed < Duration::from_millis(100),
        "answered {:?} after the connection ended",
        answered - killed
    );
    let message = answer.error()["message"].as_str().unwrap();
    assert!(
        message.contains("slowpoke"),
        "the error names no upstream: {message}"
    );
    host.finish().await;
}

/// Issue #39: an upstream that came up (its era remembered) crashes, and from then on
/// exits as soon as it starts. Each restart is one start of its process: one within
/// the first second after the crash (at `backoffMs`, 1 s less jitter), none before,
/// then one per doubling delay. It was three at once: the remembered era's start, the
/// other era's, and a third probe, each a new process.
#[tokio::test(start_paused = true)]
async fn each_restart_after_a_crash_starts_the_process_once() {
    let dir = mcpx_testkit::scratch::dir("restart-once");
    let links = InMemory::default().with("crashy", Upstream::example().crashing_after(1));
    let host = Host::start_with(
        config(json!({}), &[("crashy", json!({}))]),
        None,
        links,
        EraCache::at(dir.join("eras.json")),
    );
    let call = host
        .request(
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        )
        .await;
    assert_eq!(text(call.result()), SIMPLE_TEXT, "{:?}", call.response);
    assert_eq!(host.links.opens("crashy").len(), 1);

    let crashed = Instant::now();
    host.links.kill("crashy");
    sleep(Duration::from_millis(1050)).await;
    let since = |at: &[Instant]| -> Vec<Duration> { at.iter().map(|t| *t - crashed).collect() };
    let opens = host.links.opens("crashy");
    assert_eq!(
        opens.len(),
        2,
        "starts within the first second after the crash: {:?}",
        since(&opens[1..])
    );
    assert!(
        about(opens[1] - crashed, Duration::from_secs(1)),
        "restarted {:?} after the crash, not backoffMs (1 s)",
        opens[1] - crashed
    );

    // Three more failed restarts: one start each, after 2, 4 and 8 s.
    sleep(Duration::from_secs(15)).await;
    let opens = host.links.opens("crashy");
    assert_eq!(
        opens.len(),
        host.links.attempts("crashy").len(),
        "a restart started the process more than once: {:?}",
        since(&opens[1..])
    );
    assert_eq!(opens.len(), 5, "{:?}", since(&opens[1..]));
    let gaps = gaps(&opens[1..]);
    for (gap, want) in gaps.iter().zip([2, 4, 8]) {
        assert!(
            about(*gap, Duration::from_secs(want)),
            "the delays between restarts are {gaps:?}, not 2, 4 and 8 s"
        );
    }
    host.finish().await;
}
