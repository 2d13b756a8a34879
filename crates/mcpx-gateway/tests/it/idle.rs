//! Lazy start and idle stop, on the paused clock: a lazy upstream is not connected
//! until a host needs it; an upstream with `idleTimeoutMs` is stopped after that long
//! without calls, its tools stay listed, and the next call connects it again.
//!
//! In-process version of `crates/mcpx/tests/runtime_supervisor.rs`'s
//! `a_lazy_upstream_starts_on_use_and_stops_when_idle`.

use std::time::Duration;

use serde_json::json;
use tokio::time::{Instant, sleep};

use crate::harness::{Host, InMemory, Upstream, config, text};

const SIMPLE_TEXT: &str = "This is a simple text response for testing.";

/// The state the app reports for upstream `name`.
fn state(host: &Host, name: &str) -> String {
    host.app
        .status()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, s)| s.state.key().to_owned())
        .unwrap_or_else(|| panic!("no upstream {name}"))
}

/// A lazy upstream with a 1.5 s `idleTimeoutMs`: not connected before a host's first
/// list, which connects it and holds its tools; disconnected 1.5 s after its last
/// use (not before), its tools still listed; the next call connects it again.
#[tokio::test(start_paused = true)]
async fn a_lazy_upstream_starts_on_use_and_stops_when_idle() {
    let links = InMemory::default()
        .with("eager", Upstream::example())
        .with("sleepy", Upstream::example());
    let host = Host::start(
        config(
            json!({}),
            &[
                ("eager", json!({})),
                ("sleepy", json!({"start": "lazy", "idleTimeoutMs": 1500})),
            ],
        ),
        links,
    );
    sleep(Duration::from_secs(5)).await;
    assert_eq!(host.links.connects("eager"), 1);
    assert_eq!(
        host.links.connects("sleepy"),
        0,
        "the lazy upstream started before any use"
    );
    assert_eq!(state(&host, "sleepy"), "idle");

    let (_, names) = host.tool_names().await;
    let listed = Instant::now();
    assert!(
        names.contains(&"sleepy__test_simple_text".to_owned()),
        "the first list did not start the lazy upstream: {names:?}"
    );
    assert_eq!(host.links.connects("sleepy"), 1);
    assert_eq!(host.links.open("sleepy"), 1);

    sleep(Duration::from_millis(1400)).await;
    assert_eq!(host.links.open("sleepy"), 1, "stopped before idleTimeoutMs");
    sleep(Duration::from_millis(200)).await;
    assert_eq!(
        host.links.open("sleepy"),
        0,
        "still connected {:?} after its last use",
        listed.elapsed()
    );
    assert_eq!(state(&host, "sleepy"), "idle");
    assert_eq!(
        host.links.open("eager"),
        1,
        "the eager upstream was stopped"
    );

    let (_, names) = host.tool_names().await;
    assert!(
        names.contains(&"sleepy__test_simple_text".to_owned()),
        "an idle upstream's tools left the list: {names:?}"
    );
    let call = host
        .request(
            "tools/call",
            json!({"name": "sleepy__test_simple_text", "arguments": {}}),
        )
        .await;
    assert_eq!(text(call.result()), SIMPLE_TEXT, "{:?}", call.response);
    assert_eq!(host.links.connects("sleepy"), 2, "not connected again");
    host.finish().await;
}

/// An eager upstream with `idleTimeoutMs` is stopped too, counted from its last call
/// (a call in flight keeps it up), and started again by the next call.
#[tokio::test(start_paused = true)]
async fn an_eager_upstream_stops_when_idle_and_a_call_restarts_it() {
    let links = InMemory::default().with("up", Upstream::example());
    let host = Host::start(
        config(json!({}), &[("up", json!({"idleTimeoutMs": 2000}))]),
        links,
    );
    // A call of 5 s: longer than the idle timeout, which does not run meanwhile.
    let call = host
        .request(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 5, "label": "a"}}),
        )
        .await;
    assert_eq!(
        text(call.result()),
        "computed a after 5 s",
        "{:?}",
        call.response
    );
    let ended = Instant::now();
    assert_eq!(host.links.open("up"), 1, "stopped with a call in flight");
    sleep(Duration::from_millis(1900)).await;
    assert_eq!(host.links.open("up"), 1, "stopped before idleTimeoutMs");
    sleep(Duration::from_millis(200)).await;
    assert_eq!(
        host.links.open("up"),
        0,
        "still connected {:?} after its last call",
        ended.elapsed()
    );
    let call = host
        .request(
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        )
        .await;
    assert_eq!(text(call.result()), SIMPLE_TEXT, "{:?}", call.response);
    assert_eq!(host.links.connects("up"), 2);
    host.finish().await;
}
