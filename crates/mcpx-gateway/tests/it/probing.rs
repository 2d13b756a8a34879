//! Finding an upstream's era, on the paused clock: a `server/discover` answer that
//! comes after the probe's wait still makes a 2026-07-28 upstream modern.
//!
//! In-process version of the `mcpx serve` half of `crates/mcpx/tests/probing.rs`'s
//! `a_late_discover_answer_is_used` (the era cache file and `mcpx probe` stay there).

use std::time::Duration;

use mcpx_protocol::Revision;
use serde_json::json;

use crate::harness::{Host, InMemory, Upstream, config};

/// A 2026-07-28 upstream (refusing `initialize`) whose `server/discover` answer comes
/// 1.5 s late, past `probeTimeoutMs` (300): `initialize` goes out at 300 ms, its
/// refusal is not the end, and the late answer makes the upstream modern, connected
/// once, its lists asked in 2026-07-28.
#[tokio::test(start_paused = true)]
async fn a_late_discover_answer_is_used() {
    let links = InMemory::default().with(
        "up",
        Upstream::strict(Revision::V2026_07_28).discovering_after(Duration::from_millis(1500)),
    );
    let host = Host::start(
        config(
            json!({"limits": {"startupWaitMs": 30_000}}),
            &[("up", json!({"probeTimeoutMs": 300}))],
        ),
        links,
    );
    let (_, tools) = host.tool_names().await;
    assert!(tools.iter().any(|t| t == "test_simple_text"), "{tools:?}");
    let sent = host.links.sent_to("up");
    let methods: Vec<&str> = sent.iter().filter_map(|f| f["method"].as_str()).collect();
    assert_eq!(methods[0], "server/discover", "{methods:?}");
    let discover_at = host.links.requests_to("up", "server/discover")[0].0;
    let init = host.links.requests_to("up", "initialize");
    let [(init_at, _)] = &init[..] else {
        panic!("one initialize expected: {methods:?}")
    };
    assert!(
        *init_at - discover_at >= Duration::from_millis(300)
            && *init_at - discover_at < Duration::from_millis(350),
        "initialize went out {:?} after the probe",
        *init_at - discover_at
    );
    assert!(
        !methods.contains(&"notifications/initialized"),
        "{methods:?}"
    );
    let (_, list) = &host.links.requests_to("up", "tools/list")[0];
    assert_eq!(
        list["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
        "{list}"
    );
    assert_eq!(host.links.connects("up"), 1, "connected more than once");
    host.finish().await;
}
