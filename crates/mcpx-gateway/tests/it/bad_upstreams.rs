//! Misbehaving upstreams beside a good one, for hosts of both eras, on the paused
//! clock: one that hangs (its call times out, the upstream is told), one whose
//! connection ends mid-call (the call fails at once, the upstream is connected again),
//! and a host that cancels mid-call (no answer, the upstream is told, calls go on).
//!
//! In-process versions of `crates/mcpx/tests/gateway_bad_input.rs`'s
//! `upstream_hang_legacy_host`, `upstream_hang_modern_host`,
//! `upstream_crash_legacy_host`, `upstream_crash_modern_host` (but the exit status and
//! stderr tail, which only a process has), `upstream_exits_while_idle` and
//! `host_cancels_mid_call`.

use std::time::Duration;

use mcpx_protocol::{Era, Revision};
use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

use crate::harness::{
    Answer, Behaviour, Host, InMemory, LegacyHost, Upstream, config, refuse_all, text,
};

const CALL_TIMEOUT: Duration = Duration::from_millis(1500);
const SIMPLE_TEXT: &str = "This is a simple text response for testing.";

/// `good` (the dual example server) and `bad` (a 2025-06-18 one behaving as
/// `behaviour`, `callTimeoutMs` 1.5 s).
fn links_and_config(behaviour: Behaviour) -> (InMemory, mcpx_gateway::config::Config) {
    let links = InMemory::default().with("good", Upstream::example()).with(
        "bad",
        Upstream::strict(Revision::V2025_06_18).behaving(behaviour),
    );
    let bad = json!({"protocol": "legacy", "callTimeoutMs": 1500, "connectTimeoutMs": 5000});
    (
        links,
        config(json!({}), &[("good", json!({})), ("bad", bad)]),
    )
}

/// The error of a response, which must name the upstream `bad`.
fn bad_error(v: &Value) -> &Value {
    let e = v
        .get("error")
        .unwrap_or_else(|| panic!("expected an error, got {v}"));
    let msg = e["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("upstream bad"),
        "the error does not name the upstream: {v}"
    );
    e
}

fn call_params(tool: &str, arguments: Value) -> Value {
    json!({"name": tool, "arguments": arguments})
}

/// The bad call and the good one, sent together: (bad's answer, when it came, good's
/// answer, when it came).
async fn bad_and_good(
    rev: Revision,
    bad: Value,
) -> (Answer, Instant, Answer, Instant, InMemoryHost) {
    let (links, config) = links_and_config(Behaviour::MutesCalls);
    let good = call_params("good__test_simple_text", json!({}));
    match rev.era() {
        Era::Modern => {
            let host = Host::start(config, links);
            let (b, g) = tokio::join!(
                async {
                    let a = host.request("tools/call", bad).await;
                    (a, Instant::now())
                },
                async {
                    // After the bad call is on its way.
                    sleep(Duration::from_millis(10)).await;
                    let a = host.request("tools/call", good).await;
                    (a, Instant::now())
                },
            );
            (b.0, b.1, g.0, g.1, InMemoryHost::Modern(host))
        }
        Era::Legacy => {
            let mut host = LegacyHost::start(config, links, rev, json!({}), refuse_all()).await;
            host.send_request("bad", "tools/call", bad).await;
            host.send_request("good", "tools/call", good).await;
            let first = host.next_response().await;
            let first_at = Instant::now();
            let second = host.next_response().await;
            let second_at = Instant::now();
            let (b, g) = if first.response["id"] == "bad" {
                ((first, first_at), (second, second_at))
            } else {
                ((second, second_at), (first, first_at))
            };
            (b.0, b.1, g.0, g.1, InMemoryHost::Legacy(Box::new(host)))
        }
    }
}

/// A host of either era, after the calls.
enum InMemoryHost {
    Modern(Host),
    Legacy(Box<LegacyHost>),
}

impl InMemoryHost {
    async fn call(&mut self, tool: &str) -> Answer {
        let p = call_params(tool, json!({}));
        match self {
            InMemoryHost::Modern(h) => h.request("tools/call", p).await,
            InMemoryHost::Legacy(h) => h.request("tools/call", p).await,
        }
    }

    fn links(&self) -> &InMemory {
        match self {
            InMemoryHost::Modern(h) => &h.links,
            InMemoryHost::Legacy(h) => &h.links,
        }
    }

    async fn good_works(&mut self) {
        let a = self.call("good__test_simple_text").await;
        assert_eq!(text(a.result()), SIMPLE_TEXT, "{:?}", a.response);
    }

    async fn finish(self) {
        match self {
            InMemoryHost::Modern(h) => h.finish().await,
            InMemoryHost::Legacy(h) => h.finish().await,
        }
    }
}

/// A hanging upstream: the good upstream answers meanwhile; after `callTimeoutMs` the
/// host gets an error naming the upstream and the timeout, and mcpx tells the upstream
/// the request is cancelled (every legacy revision's basic/utilities/cancellation).
async fn hang(rev: Revision) {
    let start = Instant::now();
    let bad = call_params("bad__test_simple_text", json!({}));
    let (b, b_at, g, g_at, mut host) = bad_and_good(rev, bad).await;
    assert!(g_at < b_at, "{rev}: the good call must answer first");
    assert_eq!(text(g.result()), SIMPLE_TEXT, "{rev}: {:?}", g.response);
    let e = bad_error(&b.response);
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("did not answer") && msg.contains("1.5s"),
        "{rev}: {msg}"
    );
    let elapsed = b_at - start;
    assert!(
        elapsed >= CALL_TIMEOUT && elapsed < CALL_TIMEOUT + Duration::from_millis(100),
        "{rev}: the timeout error came after {elapsed:?}"
    );
    sleep(Duration::from_millis(50)).await;
    let cancelled = host
        .links()
        .requests_to("bad", "notifications/cancelled")
        .into_iter()
        .any(|(_, f)| f["params"]["reason"] == "timed out");
    assert!(cancelled, "{rev}: no notifications/cancelled sent upstream");
    host.good_works().await;
    host.finish().await;
}

#[tokio::test(start_paused = true)]
async fn upstream_hang_legacy_host() {
    hang(Revision::V2025_11_25).await;
}

#[tokio::test(start_paused = true)]
async fn upstream_hang_modern_host() {
    hang(Revision::V2026_07_28).await;
}

/// Calls `bad__test_simple_text` until it answers (within 10 s: the supervisor
/// connects `bad` again after its backoff, 1 s at the defaults); every error meanwhile
/// names the upstream and a restart's state.
async fn restarted(host: &mut InMemoryHost) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let a = host.call("bad__test_simple_text").await;
        if a.response.get("result").is_some() {
            assert_eq!(text(a.result()), SIMPLE_TEXT);
            return;
        }
        let e = bad_error(&a.response);
        let state = e["data"]["state"].as_str().unwrap_or_default();
        assert!(
            ["backoff", "starting"].contains(&state),
            "not a restart's state: {:?}",
            a.response
        );
        assert!(
            Instant::now() < deadline,
            "not restarted in 10 s: {:?}",
            a.response
        );
        sleep(Duration::from_millis(100)).await;
    }
}

/// The bad upstream's connection ends while a call is in flight on it: the call fails
/// at once, naming the upstream; the good upstream serves; the bad one is connected
/// again by its supervisor, and calls meanwhile are told it is restarting.
async fn crash(rev: Revision) {
    let (links, config) = links_and_config(Behaviour::Serves);
    // Ten seconds of work, ended by the kill.
    let bad = call_params(
        "bad__test_tool_with_progress",
        json!({"steps": 100, "delayMs": 100}),
    );
    let mut host = match rev.era() {
        Era::Modern => InMemoryHost::Modern(Host::start(config, links)),
        Era::Legacy => InMemoryHost::Legacy(Box::new(
            LegacyHost::start(config, links, rev, json!({}), refuse_all()).await,
        )),
    };
    let kill_after_sent = async |links: &InMemory| {
        while links.requests_to("bad", "tools/call").is_empty() {
            sleep(Duration::from_millis(10)).await;
        }
        sleep(Duration::from_millis(100)).await;
        links.kill("bad");
        Instant::now()
    };
    let (answer, killed) = match &mut host {
        InMemoryHost::Modern(h) => {
            tokio::join!(h.request("tools/call", bad), kill_after_sent(&h.links))
        }
        InMemoryHost::Legacy(h) => {
            h.send_request("bad", "tools/call", bad).await;
            let links = h.links.clone();
            let killed = kill_after_sent(&links).await;
            (h.response("bad").await, killed)
        }
    };
    assert!(
        killed.elapsed() < Duration::from_millis(100),
        "{rev}: the end was reported {:?} after it",
        killed.elapsed()
    );
    bad_error(&answer.response);
    host.good_works().await;
    restarted(&mut host).await;
    assert_eq!(host.links().connects("bad"), 2, "{rev}");
    host.finish().await;
}

#[tokio::test(start_paused = true)]
async fn upstream_crash_legacy_host() {
    crash(Revision::V2025_11_25).await;
}

#[tokio::test(start_paused = true)]
async fn upstream_crash_modern_host() {
    crash(Revision::V2026_07_28).await;
}

/// An upstream whose connection ends while idle (between calls): its supervisor
/// connects it again, and calls meanwhile are told it is restarting.
#[tokio::test(start_paused = true)]
async fn upstream_exits_while_idle() {
    let (links, config) = links_and_config(Behaviour::Serves);
    let mut host = InMemoryHost::Legacy(Box::new(
        LegacyHost::start(
            config,
            links,
            Revision::V2025_11_25,
            json!({}),
            refuse_all(),
        )
        .await,
    ));
    let a = host.call("bad__test_simple_text").await;
    assert_eq!(text(a.result()), SIMPLE_TEXT);
    host.links().kill("bad");
    sleep(Duration::from_millis(10)).await;
    let a = host.call("bad__test_simple_text").await;
    let state = bad_error(&a.response)["data"]["state"].clone();
    assert!(
        state == "backoff" || state == "starting",
        "{:?}",
        a.response
    );
    restarted(&mut host).await;
    host.good_works().await;
    host.finish().await;
}

/// A host cancels mid-call (every legacy revision's basic/utilities/cancellation): no
/// response for that id (the receiver SHOULD NOT respond), mcpx cancels the upstream's
/// request in turn, and the next call works.
#[tokio::test(start_paused = true)]
async fn host_cancels_mid_call() {
    let (links, config) = links_and_config(Behaviour::Serves);
    let mut h = LegacyHost::start(
        config,
        links,
        Revision::V2025_11_25,
        json!({}),
        refuse_all(),
    )
    .await;
    let start = Instant::now();
    // 20 steps 100 ms apart: two seconds, unless cancelled.
    h.send_request(
        "slow",
        "tools/call",
        json!({"name": "good__test_tool_with_progress",
               "arguments": {"steps": 20, "delayMs": 100},
               "_meta": {"progressToken": "cancel-me"}}),
    )
    .await;
    let first = h.wait_note("notifications/progress").await;
    assert_eq!(first["params"]["progressToken"], "cancel-me", "{first}");
    h.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": "slow", "reason": "changed my mind"}}),
    )
    .await;

    // The next call works, and nothing answers the cancelled one, even after the time
    // it would have taken (a response to it would come before the next call's).
    let next = h.call("good__test_simple_text", json!({})).await;
    assert_eq!(text(next.result()), SIMPLE_TEXT);
    tokio::time::sleep_until(start + Duration::from_millis(2300)).await;
    let next = h.call("good__test_simple_text", json!({})).await;
    assert_eq!(text(next.result()), SIMPLE_TEXT);
    let cancelled = h
        .links
        .requests_to("good", "notifications/cancelled")
        .into_iter()
        .any(|(_, f)| f["params"]["reason"] == "cancelled by the host");
    assert!(cancelled, "the cancellation was not forwarded upstream");
    h.finish().await;
}
