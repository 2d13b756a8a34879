//! The gateway matrix: every host revision × every upstream revision, over stdio.
//!
//! Each cell runs `mcpx serve` (a real process) fronting `mcpx example-server
//! --revision <upstream>` (a real child of it) and drives it as a host speaking
//! `<host>`: `tools/list`, `tools/call` with progress, a structured-output tool where
//! the upstream has one, `resources/read`, `prompts/get`. Every frame mcpx sends the
//! host is validated against the host's schema; every frame it sends the upstream
//! (recorded through `MCPX_WIRE_LOG`) against the upstream's.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use mcpx_protocol::{Era, Revision};
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};

use crate::common;
use common::*;

async fn cell(host_rev: Revision, up_rev: Revision) {
    let tag = format!("matrix-{host_rev}-{up_rev}");
    let mut host = Host::start(&tag, &example(up_rev), host_rev).await;
    if host_rev.era() == Era::Legacy {
        let init = host.initialize(json!({})).await;
        assert_eq!(
            result(&init, "initialize")["protocolVersion"],
            host_rev.as_str(),
            "{tag}"
        );
    }

    let (list, _) = host.request("tools/list", json!({})).await;
    let tools: Vec<String> = result(&list, "tools/list")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        tools.contains(&"test_tool_with_progress".to_owned()),
        "{tag}: {tools:?}"
    );

    let (call, notes) = host
        .request(
            "tools/call",
            json!({"name": "test_tool_with_progress", "arguments": {},
                   "_meta": {"progressToken": "matrix-progress"}}),
        )
        .await;
    assert!(
        result(&call, "tools/call")["content"].is_array(),
        "{tag}: {call}"
    );
    let progress: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "{tag}: no progress relayed");
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "matrix-progress")
    );

    if tools.contains(&"test_structured_content".to_owned()) {
        let (call, _) = host
            .request(
                "tools/call",
                json!({"name": "test_structured_content", "arguments": {}}),
            )
            .await;
        let r = result(&call, "structured");
        if host_rev < Revision::V2025_06_18 {
            assert!(r.get("structuredContent").is_none(), "{tag}: {r}");
        } else {
            assert!(r["structuredContent"].is_object(), "{tag}: {r}");
        }
    }

    let (read, _) = host
        .request("resources/read", json!({"uri": "test://static-text"}))
        .await;
    assert!(
        result(&read, "resources/read")["contents"][0]["text"]
            .as_str()
            .is_some(),
        "{tag}: {read}"
    );
    let (prompt, _) = host
        .request("prompts/get", json!({"name": "test_simple_prompt"}))
        .await;
    assert!(
        result(&prompt, "prompts/get")["messages"].is_array(),
        "{tag}"
    );
    let wire = host.finish().await;

    // Everything mcpx sent upstream is valid for the upstream's revision.
    assert!(wire.len() >= 5, "{tag}: wire log too short");
    for frame in &wire {
        tap()
            .validate_frame(up_rev, &frame.to_string())
            .unwrap_or_else(|e| panic!("{tag}: to the upstream: {e}"));
    }
}

/// Progress an upstream on stdio sends right before its response reaches the host
/// before that response, all of it, in order: the response waits until the
/// connection's dispatcher has routed every frame the transport read before it
/// (`UnsolicitedSender`), not for a guessed moment. 40 notifications with no delay
/// between them, then the result, in each era, on one thread and on two (where the
/// dispatcher and the call run in parallel: without the wait, the last notifications
/// were lost in about half the runs there).
#[tokio::test]
async fn progress_just_before_a_response_is_relayed_before_it() {
    for (rev, threads) in [(R1125, "1"), (R2026, "1"), (R1125, "2"), (R2026, "2")] {
        let tag = format!("progress-burst-{rev}-{threads}");
        let mut host = Host::start_with(&tag, &example(rev), rev, &["--threads", threads]).await;
        if rev.era() == Era::Legacy {
            host.initialize(json!({})).await;
        }
        let (response, notes) = host
            .request(
                "tools/call",
                json!({"name": "test_tool_with_progress",
                       "arguments": {"steps": 40, "delayMs": 0},
                       "_meta": {"progressToken": "burst"}}),
            )
            .await;
        assert!(
            response["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("40 steps")),
            "{tag}: {response}"
        );
        let progress: Vec<f64> = notes
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .map(|n| {
                n["params"]["progress"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{n}"))
            })
            .collect();
        let want: Vec<f64> = (1..=40).map(f64::from).collect();
        assert_eq!(progress, want, "{tag}");
        host.finish_checked(rev).await;
    }
}
