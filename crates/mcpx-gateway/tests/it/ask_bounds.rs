//! Bounds on asks, in-process on the paused clock: `askMaxPending` per upstream,
//! `maxParkedCalls` for 2026-07-28 hosts' rounds, `maxCallTimeMs` over unanswered
//! asks.
//!
//! In-process versions of `crates/mcpx/tests/ask_elicitation.rs`'s
//! `pending_asks_per_upstream_are_limited_for_legacy_hosts`,
//! `parked_questions_are_bounded_by_max_parked_calls` and
//! `pending_asks_of_a_modern_upstream_are_limited`, and of
//! `crates/mcpx/tests/ask_bounds.rs`'s `max_call_time_bounds_a_modern_upstreams_rounds`.

use std::time::Duration;

use mcpx_protocol::Revision;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::harness::{Host, InMemory, LegacyHost, Upstream, answer_none, config, text};

const R1125: Revision = Revision::V2025_11_25;
const R2026: Revision = Revision::V2026_07_28;

/// A 2025-11-25 host declaring elicitation and answering nothing by itself, in front
/// of one example server speaking `up`, under the global `mcpx` block `global`.
async fn elicitation_host(up: Revision, global: Value) -> LegacyHost {
    LegacyHost::start(
        config(global, &[("up", json!({}))]),
        InMemory::default().with("up", Upstream::strict(up)),
        R1125,
        json!({"elicitation": {}}),
        answer_none(),
    )
    .await
}

fn call(tool: &str) -> Value {
    json!({"name": tool, "arguments": {}})
}

/// mcpx's answers to the upstream's own requests with error `code`.
fn refused_upstream(h: &LegacyHost, code: i64) -> usize {
    h.links
        .sent_to("up")
        .iter()
        .filter(|v| v.get("method").is_none() && v.pointer("/error/code") == Some(&json!(code)))
        .count()
}

/// E-15 (legacy host, legacy upstream): with askMaxPending 2, a third elicitation of
/// the same upstream while two are unanswered is refused upstream with -32603 "too
/// many pending requests" (the example server then fails its tool); answering frees
/// the permits.
#[tokio::test(start_paused = true)]
async fn pending_asks_per_upstream_are_limited_for_legacy_hosts() {
    let mut h = elicitation_host(R1125, json!({"limits": {"askMaxPending": 2}})).await;
    for id in ["c1", "c2", "c3"] {
        h.send_request(id, "tools/call", call("test_elicitation"))
            .await;
    }
    let refused = h.next_response().await;
    let r = refused.result();
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(r).contains("too many pending requests"), "{r}");
    assert_eq!(
        h.asks.len(),
        2,
        "more or fewer than askMaxPending asks: {:?}",
        h.asks
    );
    for a in h.asks.clone() {
        h.send(&json!({"jsonrpc": "2.0", "id": a["id"],
                       "result": {"action": "accept", "content": {"username": "u"}}}))
            .await;
    }
    for _ in 0..2 {
        let done = h.next_response().await;
        assert_ne!(done.result()["isError"], true, "{:?}", done.response);
    }
    assert_eq!(h.asks.len(), 2);
    // The permits are free again.
    h.answer_with(Box::new(|_| {
        Ok(json!({"action": "accept", "content": {"username": "u"}}))
    }));
    let v = h.call("test_elicitation", json!({})).await;
    assert_eq!(h.asks.len(), 3);
    assert_ne!(v.result()["isError"], true, "{:?}", v.response);
    assert_eq!(refused_upstream(&h, -32603), 1);
    h.finish().await;
}

/// E-15 (legacy host, modern upstream): an inputRequests ask over the limit fails the
/// host's request with -32603 "too many pending requests".
#[tokio::test(start_paused = true)]
async fn pending_asks_of_a_modern_upstream_are_limited() {
    let mut h = elicitation_host(R2026, json!({"limits": {"askMaxPending": 1}})).await;
    let tool = "test_input_required_result_elicitation";
    for id in ["c1", "c2"] {
        h.send_request(id, "tools/call", call(tool)).await;
    }
    let over = h.next_response().await;
    assert_eq!(over.error()["code"], -32603, "{:?}", over.response);
    assert!(
        over.error()["message"]
            .as_str()
            .unwrap()
            .contains("too many pending requests"),
        "{:?}",
        over.response
    );
    assert_eq!(h.asks.len(), 1, "{:?}", h.asks);
    let ask = h.asks[0].clone();
    h.send(&json!({"jsonrpc": "2.0", "id": ask["id"],
                   "result": {"action": "accept", "content": {"name": "Bo"}}}))
        .await;
    let within = h.next_response().await;
    assert_eq!(text(within.result()), "Hello, Bo!");
    assert_eq!(h.asks.len(), 1, "{:?}", h.asks);
    h.finish().await;
}

/// E-15 (modern host, legacy upstream): questions parked for a 2026-07-28 host's retry
/// hold no ask permit: with askMaxPending 1, two rounds are put to the host at once.
/// Parked calls are bounded by maxParkedCalls instead: past it the upstream's
/// question is refused (-32603) and its call ends without a round; an answered round
/// frees its place.
#[tokio::test(start_paused = true)]
async fn parked_questions_are_bounded_by_max_parked_calls() {
    let links = InMemory::default().with("up", Upstream::strict(R1125));
    let h = Host::start(
        config(
            json!({"limits": {"askMaxPending": 1, "maxParkedCalls": 2}}),
            &[("up", json!({}))],
        ),
        links,
    );
    let caps = json!({"elicitation": {}, "sampling": {}, "roots": {}});
    let elicit = "test_input_required_result_elicitation";
    let v = h.call_as(elicit, caps.clone(), json!({})).await;
    let first = v.result()["requestState"].clone();
    let v = h
        .call_as(
            "test_input_required_result_sampling",
            caps.clone(),
            json!({}),
        )
        .await;
    assert_eq!(
        v.result()["resultType"],
        "input_required",
        "{:?}",
        v.response
    );
    let v = h.call_as(elicit, caps.clone(), json!({})).await;
    let r = v.result();
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(r).contains("too many calls waiting"), "{r}");
    let v = h
        .call_as(
            elicit,
            caps.clone(),
            json!({"requestState": first, "inputResponses": {
                "user_name": {"action": "accept", "content": {"name": "Al"}}}}),
        )
        .await;
    assert_eq!(text(v.result()), "Hello, Al!");
    let v = h.call_as(elicit, caps, json!({})).await;
    assert_eq!(
        v.result()["resultType"],
        "input_required",
        "{:?}",
        v.response
    );
    h.finish().await;
}

/// A-C18, E-1: `maxCallTimeMs` (2 s) bounds a legacy host's call to a 2026-07-28
/// upstream whose `input_required` question mcpx puts to the host, who does not
/// answer (`askTimeoutMs` 120 s): the host gets the timeout error after 2 s and its
/// open ask is cancelled.
#[tokio::test(start_paused = true)]
async fn max_call_time_bounds_a_modern_upstreams_rounds() {
    let mut h = elicitation_host(
        R2026,
        json!({"limits": {"maxCallTimeMs": 2000, "askTimeoutMs": 120_000}}),
    )
    .await;
    let sent_at = Instant::now();
    let v = h
        .call("test_input_required_result_elicitation", json!({}))
        .await;
    let took = sent_at.elapsed();
    assert_eq!(h.asks.len(), 1, "{:?}", h.asks);
    assert_eq!(h.asks[0]["method"], "elicitation/create");
    assert_eq!(v.error()["code"], -32603, "{:?}", v.response);
    assert!(
        v.error()["message"].as_str().unwrap().contains("timed out"),
        "{:?}",
        v.response
    );
    assert!(
        took >= Duration::from_millis(2000) && took < Duration::from_millis(2100),
        "the call took {took:?} (maxCallTimeMs 2000)"
    );
    h.request("ping", json!({})).await;
    let cancelled: Vec<&Value> = h
        .notes
        .iter()
        .filter(|n| n["method"] == "notifications/cancelled")
        .map(|n| &n["params"]["requestId"])
        .collect();
    assert_eq!(cancelled, [&h.asks[0]["id"]], "{:?}", h.notes);
    h.finish().await;
}
