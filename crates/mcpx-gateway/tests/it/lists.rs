//! Lists and calls through the gateway to several upstreams: names namespaced, a
//! call routed back to its upstream under its own name.
//!
//! In-process versions of `crates/mcpx/tests/first_minute.rs`'s
//! `a_modern_host_gets_capabilities_at_once_and_a_full_first_list` and part of
//! `crates/mcpx/tests/upstream_client.rs`'s
//! `names_are_namespaced_sanitised_bounded_and_collisions_reported`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Host, InMemory, Upstream, config, text};

/// The declared capabilities hold the three lists, each with `listChanged`.
fn assert_declares_lists(caps: &Value) {
    for cap in ["tools", "prompts", "resources"] {
        assert_eq!(caps[cap]["listChanged"], true, "{cap}: {caps}");
    }
}

/// Two upstreams: each one's tools are listed under its namespace, and a call by a
/// namespaced name reaches the upstream it names, by the tool's own name.
#[tokio::test(start_paused = true)]
async fn two_upstreams_are_listed_namespaced_and_called_by_those_names() {
    let links = InMemory::default()
        .with("alpha", Upstream::example())
        .with("beta", Upstream::example());
    let host = Host::start(
        config(json!({}), &[("alpha", json!({})), ("beta", json!({}))]),
        links,
    );
    let (_, names) = host.tool_names().await;
    for want in [
        "alpha__test_simple_text",
        "beta__test_simple_text",
        "alpha__slow_compute",
    ] {
        assert!(names.contains(&want.to_owned()), "{want} not in {names:?}");
    }
    assert!(
        !names
            .iter()
            .any(|n| !n.starts_with("alpha__") && !n.starts_with("beta__")),
        "a name without its namespace: {names:?}"
    );
    let call = host
        .request(
            "tools/call",
            json!({"name": "beta__test_simple_text", "arguments": {}}),
        )
        .await;
    assert_eq!(call.result()["isError"], Value::Null, "{:?}", call.response);
    assert_eq!(
        text(call.result()),
        "This is a simple text response for testing."
    );
    assert!(
        call.related.is_empty(),
        "relayed without a progress token: {:?}",
        call.related
    );
    let unknown = host
        .request(
            "tools/call",
            json!({"name": "gamma__test_simple_text", "arguments": {}}),
        )
        .await;
    let e = unknown.error();
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("gamma__test_simple_text"),
        "{e}"
    );
    host.finish().await;
}

/// `server/discover` is answered at once, with the lists declared, while both
/// upstreams are still starting; the first `tools/list` waits for both (within
/// `startupWaitMs`) and holds their tools, and a call to the slower is answered.
#[tokio::test(start_paused = true)]
async fn discover_is_answered_at_once_and_the_first_list_is_full() {
    let links = InMemory::default()
        .with(
            "slow",
            Upstream::example().starting_after(Duration::from_secs(5)),
        )
        .with(
            "fast",
            Upstream::example().starting_after(Duration::from_secs(2)),
        );
    let host = Host::start(
        config(json!({}), &[("slow", json!({})), ("fast", json!({}))]),
        links,
    );
    let discover = host.request("server/discover", json!({})).await;
    let states: Vec<&str> = host
        .app
        .status()
        .iter()
        .map(|(_, s)| s.state.key())
        .collect();
    assert_eq!(
        states,
        ["starting", "starting"],
        "discover waited for a start"
    );
    assert_declares_lists(&discover.result()["capabilities"]);

    let (list, names) = host.tool_names().await;
    for want in ["slow__test_simple_text", "fast__test_simple_text"] {
        assert!(names.contains(&want.to_owned()), "{want} not in {names:?}");
    }
    assert_eq!(
        list.result()["_meta"]["mcpx/starting"],
        Value::Null,
        "{:?}",
        list.response
    );
    let call = host
        .request(
            "tools/call",
            json!({"name": "slow__test_simple_text", "arguments": {}}),
        )
        .await;
    assert_eq!(call.result()["isError"], Value::Null, "{:?}", call.response);
    assert_eq!(host.links.connects("slow"), 1);
    host.finish().await;
}
