//! The call history through the real gateway, on the paused clock: every outcome a
//! call can have is recorded with who made it, what it reached and why it failed, in
//! a real database of the test's own.

use std::time::Duration;

use mcpx_history::{Filter, Outcome, Row, Store};
use mcpx_protocol::Revision;
use serde_json::{Value, json};
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

use crate::harness::{Behaviour, Host, InMemory, LegacyHost, Upstream, config, refuse_all};

/// `good` (the dual example server, `callTimeoutMs` 300 ms) and `bad` (a legacy one),
/// recording into a database of `name`'s, capturing `capture`.
fn setup(
    name: &str,
    capture: &str,
) -> (InMemory, mcpx_gateway::config::Config, std::path::PathBuf) {
    let db = mcpx_testkit::scratch::dir(name).join("history.sqlite3");
    let links = InMemory::default().with("good", Upstream::example()).with(
        "bad",
        Upstream::strict(Revision::V2025_06_18).behaving(Behaviour::Serves),
    );
    let config = config(
        json!({"history": {"path": db, "capture": capture}}),
        &[
            ("good", json!({"callTimeoutMs": 300})),
            (
                "bad",
                json!({"protocol": "legacy", "connectTimeoutMs": 5000}),
            ),
        ],
    );
    (links, config, db)
}

/// Every call recorded so far, once the recorder has written them.
async fn rows(app: &mcpx_gateway::app::App, db: &std::path::Path) -> Vec<Row> {
    app.history().expect("history on").flush().await;
    Store::open(db).unwrap().calls(&Filter::default()).unwrap()
}

fn call(tool: &str, arguments: Value) -> Value {
    json!({"name": tool, "arguments": arguments})
}

#[tokio::test(start_paused = true)]
async fn every_outcome_is_recorded_with_its_fields() {
    let (links, config, db) = setup("history-outcomes", "none");
    let host = Host::start(config, links);

    let ok = host
        .request("tools/call", call("good__test_simple_text", json!({})))
        .await;
    assert!(ok.response.get("result").is_some(), "{:?}", ok.response);
    host.request("tools/call", call("good__test_error_handling", json!({})))
        .await;
    host.request("tools/call", call("nowhere__tool", json!({})))
        .await;
    let slow = host
        .request(
            "tools/call",
            call("good__slow_compute", json!({"seconds": 600})),
        )
        .await;
    assert!(slow.response.get("error").is_some(), "{:?}", slow.response);
    // Cancelled by the host while it runs.
    let cancel = CancellationToken::new();
    let cancelled = host.request_cancellable(
        "tools/call",
        call(
            "good__test_tool_with_progress",
            json!({"steps": 20, "delayMs": 100}),
        ),
        cancel.clone(),
    );
    let (_, ()) = tokio::join!(cancelled, async {
        sleep(Duration::from_millis(150)).await;
        cancel.cancel();
    });
    // A resource (the first server that lists it serves it).
    let listed = host.request("resources/list", json!({})).await;
    let uri = listed.response["result"]["resources"]
        .as_array()
        .and_then(|r| {
            r.iter()
                .find_map(|r| r["uri"].as_str().filter(|u| u.contains("static-text")))
        })
        .expect("a static-text resource")
        .to_owned();
    host.request("resources/read", json!({"uri": uri})).await;
    // The bad upstream's connection ends mid-call.
    let crashed = host.request(
        "tools/call",
        call(
            "bad__test_tool_with_progress",
            json!({"steps": 100, "delayMs": 100}),
        ),
    );
    let (crash, ()) = tokio::join!(crashed, async {
        while host.links.requests_to("bad", "tools/call").is_empty() {
            sleep(Duration::from_millis(10)).await;
        }
        sleep(Duration::from_millis(100)).await;
        host.links.kill("bad");
    });
    assert!(
        crash.response.get("error").is_some(),
        "{:?}",
        crash.response
    );
    // A prompt and a resource.
    host.request(
        "prompts/get",
        json!({"name": "good__test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}}),
    )
    .await;

    let rows = rows(&host.app, &db).await;
    let got: Vec<(&str, Option<&str>, Option<&str>, Outcome)> = rows
        .iter()
        .map(|r| {
            (
                r.record.method.as_ref(),
                r.record.target.as_deref(),
                r.record.upstream.as_deref(),
                r.record.outcome,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "tools/call",
                Some("good__test_simple_text"),
                Some("good"),
                Outcome::Result
            ),
            (
                "tools/call",
                Some("good__test_error_handling"),
                Some("good"),
                Outcome::ToolError
            ),
            ("tools/call", Some("nowhere__tool"), None, Outcome::Error),
            (
                "tools/call",
                Some("good__slow_compute"),
                Some("good"),
                Outcome::Timeout
            ),
            (
                "tools/call",
                Some("good__test_tool_with_progress"),
                Some("good"),
                Outcome::Cancelled
            ),
            (
                "resources/read",
                Some(uri.as_str()),
                Some("bad"),
                Outcome::Result
            ),
            (
                "tools/call",
                Some("bad__test_tool_with_progress"),
                Some("bad"),
                Outcome::Transport
            ),
            (
                "prompts/get",
                Some("good__test_prompt_with_arguments"),
                Some("good"),
                Outcome::Result
            ),
        ],
        "{rows:#?}"
    );
    let [
        ok,
        tool_error,
        unknown,
        timeout,
        cancelled,
        _,
        transport,
        ..,
    ] = &rows[..]
    else {
        panic!("{rows:?}");
    };
    // Who made the call: the 2026-07-28 host's `_meta` clientInfo, in-process.
    let r = &ok.record;
    assert_eq!(r.client_name.as_deref(), Some("in-process-host"));
    assert_eq!(r.client_version.as_deref(), Some("0"));
    assert_eq!(
        (r.era.as_ref(), r.revision.as_ref(), r.transport.as_ref()),
        ("modern", "2026-07-28", "api")
    );
    assert_eq!(r.session, None);
    assert!(r.request_bytes > 0 && r.response_bytes > 0, "{r:?}");
    assert_eq!((r.error_code, r.error_message.as_deref()), (None, None));
    assert_eq!(
        (r.arguments.as_deref(), r.result.as_deref()),
        (None, None),
        "capture none"
    );
    // Why it failed.
    assert!(
        tool_error
            .record
            .error_message
            .as_deref()
            .is_some_and(|m| !m.is_empty()),
        "{tool_error:?}"
    );
    assert_eq!(unknown.record.error_code, Some(-32602));
    assert!(
        unknown
            .record
            .error_message
            .as_deref()
            .unwrap()
            .contains("nowhere__tool"),
        "{unknown:?}"
    );
    assert_eq!(timeout.record.error_code, Some(-32603));
    // The paused clock's durations: the timeout took `callTimeoutMs`, the cancelled
    // call as long as the host waited.
    assert!(
        (300_000..400_000).contains(&timeout.record.duration_us),
        "{timeout:?}"
    );
    assert!(
        (150_000..250_000).contains(&cancelled.record.duration_us),
        "{cancelled:?}"
    );
    assert!(
        transport
            .record
            .error_message
            .as_deref()
            .unwrap()
            .contains("bad"),
        "{transport:?}"
    );
    let counts = host.app.history().unwrap().counts();
    assert_eq!((counts.recorded, counts.dropped, counts.written), (8, 0, 8));
}

#[tokio::test(start_paused = true)]
async fn a_legacy_session_is_recorded_with_its_client_and_captured_arguments() {
    let (links, config, db) = setup("history-legacy", "all");
    let mut host = LegacyHost::start(
        config,
        links,
        Revision::V2025_06_18,
        json!({}),
        refuse_all(),
    )
    .await;
    host.call(
        "good__test_simple_text",
        json!({"note": "hi", "auth": {"apiKey": "k-123"}}),
    )
    .await;
    let rows = rows(&host.app, &db).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0].record;
    assert_eq!(r.client_name.as_deref(), Some("in-process-legacy-host"));
    assert_eq!(
        (r.era.as_ref(), r.revision.as_ref(), r.transport.as_ref()),
        ("legacy", "2025-06-18", "stdio")
    );
    let args: Value = serde_json::from_str(r.arguments.as_deref().unwrap()).unwrap();
    assert_eq!(
        args,
        json!({"note": "hi", "auth": {"apiKey": "[redacted]"}})
    );
    let result: Value = serde_json::from_str(r.result.as_deref().unwrap()).unwrap();
    assert!(result["content"].is_array(), "{result}");
}

#[tokio::test(start_paused = true)]
async fn lists_are_not_recorded_and_history_can_be_off() {
    let (links, config, db) = setup("history-lists", "none");
    let host = Host::start(config, links);
    host.request("tools/list", json!({})).await;
    assert!(rows(&host.app, &db).await.is_empty());

    let links = InMemory::default().with("good", Upstream::example());
    let off = Host::start(
        crate::harness::config(
            json!({"history": {"enabled": false, "path": db}}),
            &[("good", json!({}))],
        ),
        links,
    );
    off.request("tools/call", call("test_simple_text", json!({})))
        .await;
    assert!(off.app.history().is_none());
}
