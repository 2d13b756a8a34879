//! The first list and a slow upstream: `startupWaitMs` bounds the wait, and an
//! upstream still starting then is named in the list's `_meta` (`mcpx/starting`).
//!
//! In-process version of `crates/mcpx/tests/first_minute.rs`'s
//! `an_upstream_beyond_the_startup_wait_is_named_and_joins_later` (there for a legacy
//! host told by `list_changed`; here a modern host, which lists again).

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Host, InMemory, Upstream, config};

fn starting(result: &Value) -> Vec<String> {
    result["_meta"]["mcpx/starting"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Ready after 5 s and after 15 s, with a 10 s `startupWaitMs`: the first list holds
/// the first one's tools and names the other as starting; once it is up, a list
/// holds its tools and names nothing.
#[tokio::test(start_paused = true)]
async fn an_upstream_beyond_the_startup_wait_is_named_and_listed_once_up() {
    let links = InMemory::default()
        .with(
            "five",
            Upstream::example().starting_after(Duration::from_secs(5)),
        )
        .with(
            "fifteen",
            Upstream::example().starting_after(Duration::from_secs(15)),
        );
    let global = json!({"limits": {"startupWaitMs": 10_000}});
    let host = Host::start(
        config(global, &[("five", json!({})), ("fifteen", json!({}))]),
        links,
    );
    let started = tokio::time::Instant::now();
    let (list, names) = host.tool_names().await;
    assert!(
        names.contains(&"five__test_simple_text".to_owned()),
        "the first list lacks the 5 s upstream: {names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("fifteen__")),
        "the 15 s upstream in a list answered at 10 s: {names:?}"
    );
    assert_eq!(starting(list.result()), ["fifteen"], "{:?}", list.response);

    // The paused clock passes the rest of the slow start at once.
    tokio::time::sleep_until(started + Duration::from_secs(16)).await;
    let (list, names) = host.tool_names().await;
    assert!(
        names.contains(&"fifteen__test_simple_text".to_owned()),
        "the list once the 15 s upstream is up: {names:?}"
    );
    assert!(starting(list.result()).is_empty(), "{:?}", list.response);
    host.finish().await;
}
