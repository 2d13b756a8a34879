//! Upstream resource subscriptions and who holds them.
//!
//! In-process version of the absences in `crates/mcpx/tests/it/serve_side.rs`'s
//! `an_upstream_subscription_outlives_a_legacy_unsubscribe_while_a_listen_holds_it`:
//! on the paused clock, "no unsubscribe" is checked after every timer the gateway
//! could have set has run, instead of after a real wait.

use std::sync::Arc;
use std::time::Duration;

use mcpx_protocol::Revision;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::harness::{Answer, Host, InMemory, LegacyHost, Upstream, answer_none, config};

const URI: &str = "test://static-text";

/// Long enough, on the paused clock, for anything the gateway does after a holder
/// goes: the clock moves on only once every task is idle.
const SETTLE: Duration = Duration::from_secs(60);

/// How many `method` requests the gateway sent upstream `up`.
fn sent(host: &Host, method: &str) -> usize {
    host.links
        .sent_to("up")
        .iter()
        .filter(|f| f["method"] == method)
        .count()
}

/// Waits on the paused clock until the gateway has sent `n` `method` requests upstream.
async fn until_sent(host: &Host, method: &str, n: usize) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    while sent(host, method) < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} {method} sent upstream, not {n}: {:?}",
            sent(host, method),
            host.links.sent_to("up")
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A modern host's `subscriptions/listen` for [`URI`], open until `end` is cancelled.
fn listen(host: &Arc<Host>, end: &CancellationToken) -> tokio::task::JoinHandle<Answer> {
    let (host, end) = (Arc::clone(host), end.clone());
    tokio::spawn(async move {
        host.request_cancellable(
            "subscriptions/listen",
            json!({"notifications": {"resourceSubscriptions": [URI]}}),
            end,
        )
        .await
    })
}

/// D-C4 across eras (legacy upstream): mcpx's one upstream subscription to a URI is
/// held by legacy hosts' subscriptions and modern hosts' listens alike, and ends only
/// when the last holder of either kind lets go: a legacy host's unsubscribe leaves it
/// to the listens, one listen's end to the other, and the last one's end unsubscribes
/// once.
#[tokio::test(start_paused = true)]
async fn an_upstream_subscription_outlives_a_legacy_unsubscribe_while_a_listen_holds_it() {
    let links = InMemory::default().with("up", Upstream::strict(Revision::V2025_11_25));
    let host = Arc::new(Host::start(config(json!({}), &[("up", json!({}))]), links));
    // Two listens, each subscribing upstream.
    let (first_end, second_end) = (CancellationToken::new(), CancellationToken::new());
    let first = listen(&host, &first_end);
    until_sent(&host, "resources/subscribe", 1).await;
    let second = listen(&host, &second_end);
    until_sent(&host, "resources/subscribe", 2).await;

    // A legacy host subscribes and lets go: the listens still hold the subscription.
    let mut legacy = LegacyHost::attach(
        Arc::clone(&host.app),
        Arc::clone(&host.links),
        Revision::V2025_11_25,
        json!({}),
        answer_none(),
    )
    .await;
    for method in ["resources/subscribe", "resources/unsubscribe"] {
        let a = legacy.request(method, json!({"uri": URI})).await;
        assert_eq!(a.result(), &json!({}), "{method}: {:?}", a.response);
    }
    assert_eq!(sent(&host, "resources/subscribe"), 3);
    tokio::time::sleep(SETTLE).await;
    assert_eq!(
        sent(&host, "resources/unsubscribe"),
        0,
        "the legacy unsubscribe let go"
    );

    // The first listen ends: the second still holds it.
    first_end.cancel();
    let ended = first.await.unwrap();
    assert_ended(&ended);
    tokio::time::sleep(SETTLE).await;
    assert_eq!(
        sent(&host, "resources/unsubscribe"),
        0,
        "one listen's end let go"
    );

    // The last holder goes: mcpx unsubscribes, once.
    second_end.cancel();
    assert_ended(&second.await.unwrap());
    until_sent(&host, "resources/unsubscribe", 1).await;
    tokio::time::sleep(SETTLE).await;
    assert_eq!(
        sent(&host, "resources/unsubscribe"),
        1,
        "unsubscribed twice"
    );
    let unsubscribe = host
        .links
        .sent_to("up")
        .into_iter()
        .find(|f| f["method"] == "resources/unsubscribe")
        .unwrap();
    assert_eq!(unsubscribe["params"]["uri"], URI, "{unsubscribe}");

    // One gateway under both hosts: the legacy host's finish stops it and checks
    // every frame the upstream saw.
    legacy.finish().await;
}

/// A listen the host cancelled was acknowledged first, with its subscription.
fn assert_ended(a: &Answer) {
    let ack: Vec<&Value> = a
        .related
        .iter()
        .filter(|f| f["method"] == "notifications/subscriptions/acknowledged")
        .collect();
    assert_eq!(ack.len(), 1, "{:?}", a.related);
    assert_eq!(
        ack[0]["params"]["notifications"]["resourceSubscriptions"],
        json!([URI]),
        "{}",
        ack[0]
    );
}
