//! `callTimeoutMs` bounds a call to an upstream that does not answer in time.
//!
//! In-process version of the timeout half of `crates/mcpx/tests/upstream_client.rs`'s
//! `the_gateway_times_out_calls_but_not_listens` (there a shell script that never
//! answers; here the example server's `slow_compute`, on the paused clock).

use serde_json::json;

use crate::harness::{Host, InMemory, Upstream, config, text};

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
