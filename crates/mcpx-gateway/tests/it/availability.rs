//! Upstreams that are down, silent or late do not hold up hosts or take their tools
//! out of the list; on the paused clock.
//!
//! In-process versions of `crates/mcpx/tests/runtime_availability.rs`'s
//! `a_down_upstream_keeps_its_tools_listed` and
//! `a_silent_upstream_does_not_hold_up_a_stdio_host`, and of
//! `crates/mcpx/tests/runtime_catalog.rs`'s
//! `a_resource_uri_listed_twice_is_kept_by_the_first_and_namespaced_for_the_other`.

use std::time::Duration;

use mcpx_protocol::Revision;
use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

use crate::harness::{Behaviour, Host, InMemory, LegacyHost, Upstream, config, refuse_all, text};

const SIMPLE_TEXT: &str = "This is a simple text response for testing.";
const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// `data.state` of an error for upstream `name`, after checking it is -32603 naming
/// the upstream.
fn not_ready_state(v: &Value, name: &str) -> String {
    let err = v
        .get("error")
        .unwrap_or_else(|| panic!("expected an error for upstream {name}, got {v}"));
    assert_eq!(err["code"], -32603, "not -32603: {v}");
    let message = err["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("upstream {name}")), "{v}");
    assert_eq!(err["data"]["upstream"], name, "data.upstream: {v}");
    err["data"]["state"].as_str().unwrap_or_default().to_owned()
}

/// An idle upstream's connection ends, and while it waits 5 s to be connected again
/// (`backoffMs`) another upstream announces a tool change: the (legacy) host is told,
/// the merged list mcpx rebuilds still holds every tool of the one that is down, and
/// they are callable once it is back.
#[tokio::test(start_paused = true)]
async fn a_down_upstream_keeps_its_tools_listed() {
    let links = InMemory::default()
        .with("a", Upstream::example())
        .with("b", Upstream::example());
    let mut h = LegacyHost::start(
        config(
            json!({}),
            &[
                ("a", json!({"restart": {"backoffMs": 5000}})),
                ("b", json!({})),
            ],
        ),
        links,
        Revision::V2025_11_25,
        json!({}),
        refuse_all(),
    )
    .await;
    for name in ["a__test_simple_text", "b__test_simple_text"] {
        let v = h.call(name, json!({})).await;
        assert_eq!(text(v.result()), SIMPLE_TEXT, "{:?}", v.response);
    }
    let before: Vec<String> = h
        .tool_names()
        .await
        .into_iter()
        .filter(|n| n.starts_with("a__"))
        .collect();
    assert!(
        before.contains(&"a__test_simple_text".to_owned()),
        "{before:?}"
    );

    h.links.kill("a");
    let killed = Instant::now();
    sleep(Duration::from_millis(200)).await;
    let v = h.call("b__test_trigger_tool_change", json!({})).await;
    assert!(v.result()["content"].is_array(), "{:?}", v.response);
    if !h.notes.iter().any(|n| n["method"] == LIST_CHANGED) {
        h.wait_note(LIST_CHANGED).await;
    }
    let after = h.tool_names().await;
    assert!(
        after.contains(&"b__test_dynamic_tool".to_owned()),
        "b's change is not in the list: {after:?}"
    );
    assert!(killed.elapsed() < Duration::from_secs(5));
    assert_eq!(h.links.connects("a"), 1, "a was connected again before 5 s");
    let missing: Vec<&String> = before.iter().filter(|n| !after.contains(n)).collect();
    assert!(
        missing.is_empty(),
        "a's tools left the list while it was down: {missing:?}; list: {after:?}"
    );

    tokio::time::sleep_until(killed + Duration::from_secs(6)).await;
    assert_eq!(h.links.connects("a"), 2, "a was not connected again");
    let v = h.call("a__test_simple_text", json!({})).await;
    assert_eq!(text(v.result()), SIMPLE_TEXT, "{:?}", v.response);
    h.finish().await;
}

/// Two upstreams, one of which never answers anything (its handshake included): a
/// stdio host's `initialize` is answered within 2.5 s, the other upstream serves, and
/// a call to the silent one's tool gets -32603 with `data.state` `starting` (or
/// `backoff`) once `startupWaitMs` (1 s) passed.
#[tokio::test(start_paused = true)]
async fn a_silent_upstream_does_not_hold_up_a_stdio_host() {
    let links = InMemory::default()
        .with("mute", Upstream::example().behaving(Behaviour::Silent))
        .with("ok", Upstream::example());
    let began = Instant::now();
    let mut h = LegacyHost::start(
        config(
            json!({"limits": {"startupWaitMs": 1000}}),
            &[("mute", json!({})), ("ok", json!({}))],
        ),
        links,
        Revision::V2025_11_25,
        json!({}),
        refuse_all(),
    )
    .await;
    assert!(
        began.elapsed() <= Duration::from_millis(2500),
        "initialize was answered {:?} after the start",
        began.elapsed()
    );
    let v = h.call("mute__test_simple_text", json!({})).await;
    let state = not_ready_state(&v.response, "mute");
    assert!(
        state == "starting" || state == "backoff",
        "{:?}",
        v.response
    );
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "the call was answered {:?} after the start",
        began.elapsed()
    );
    let v = h.call("ok__test_simple_text", json!({})).await;
    assert_eq!(text(v.result()), SIMPLE_TEXT, "{:?}", v.response);
    h.finish().await;
}

/// Every resource URI of `resources/list`, all pages.
async fn resource_uris(h: &Host) -> Vec<String> {
    let mut uris = Vec::new();
    let mut cursor: Option<Value> = None;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let v = h.request("resources/list", params).await;
        let r = v.result();
        for res in r["resources"].as_array().unwrap() {
            uris.push(res["uri"].as_str().unwrap().to_owned());
        }
        match r.get("nextCursor") {
            Some(c) if !c.is_null() => cursor = Some(c.clone()),
            _ => return uris,
        }
    }
}

/// Whether a frame was written for a 2026-07-28 upstream (the protocol version in
/// its `_meta`) rather than a legacy one.
fn modern_frame(f: &Value) -> bool {
    f.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .is_some()
}

/// Two example servers list the same resource URIs; `a` (first by name) speaks only
/// 2026-07-28, `b` only 2025-06-18. The list holds each URI twice, plain (a's) and as
/// `mcpx://b/<uri>` (b's); reading the plain one reaches a with the URI, reading the
/// `mcpx://` one reaches b with the plain URI; both read the example's text.
#[tokio::test(start_paused = true)]
async fn a_resource_uri_listed_twice_is_kept_by_the_first_and_namespaced_for_the_other() {
    let links = InMemory::default()
        .with("a", Upstream::strict(Revision::V2026_07_28))
        .with("b", Upstream::strict(Revision::V2025_06_18));
    let h = Host::start(
        config(json!({}), &[("a", json!({})), ("b", json!({}))]),
        links,
    );
    let uris = resource_uris(&h).await;
    for u in [
        "test://static-text",
        "test://static-binary",
        "test://watched-resource",
        "test://example-resource",
        "test://embedded-resource",
    ] {
        let plain = uris.iter().filter(|x| *x == u).count();
        let other = uris
            .iter()
            .filter(|x| **x == format!("mcpx://b/{u}"))
            .count();
        assert_eq!((plain, other), (1, 1), "{u}: {uris:?}");
        assert!(
            !uris.contains(&format!("mcpx://a/{u}")),
            "the first upstream's copy was renamed: {uris:?}"
        );
    }
    // Only a (2026-07-28) has this one: listed as it is.
    assert!(
        uris.contains(&"test://confirm-resource".to_owned()),
        "{uris:?}"
    );

    let expected = "This is the content of test://static-text.";
    let v = h
        .request("resources/read", json!({"uri": "test://static-text"}))
        .await;
    assert_eq!(
        v.result()["contents"][0]["text"],
        expected,
        "{:?}",
        v.response
    );
    let reads_a = h.links.requests_to("a", "resources/read");
    let [(_, f)] = &reads_a[..] else {
        panic!("one read of a expected: {reads_a:?}")
    };
    assert_eq!(f["params"]["uri"], "test://static-text", "{f}");
    assert!(modern_frame(f), "{f}");
    assert!(h.links.requests_to("b", "resources/read").is_empty());

    let v = h
        .request(
            "resources/read",
            json!({"uri": "mcpx://b/test://static-text"}),
        )
        .await;
    assert_eq!(
        v.result()["contents"][0]["text"],
        expected,
        "{:?}",
        v.response
    );
    let reads_b = h.links.requests_to("b", "resources/read");
    let [(_, f)] = &reads_b[..] else {
        panic!("one read of b expected: {reads_b:?}")
    };
    assert_eq!(
        f["params"]["uri"], "test://static-text",
        "b was not given its own URI: {f}"
    );
    assert!(!modern_frame(f), "{f}");
    assert_eq!(h.links.requests_to("a", "resources/read").len(), 1);
    h.finish().await;
}
