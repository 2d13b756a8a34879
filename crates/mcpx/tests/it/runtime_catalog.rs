//! Acceptance tests of the merged catalog under the new runtime: a storm of
//! `notifications/tools/list_changed` from one upstream is coalesced (a few re-lists
//! of that upstream and a few notifications to each host per second, with the 150 ms
//! `listChangedWindowMs`), and a resource URI two upstreams list is kept by the first
//! in configuration order while the other's is listed as `mcpx://<namespace>/<uri>`,
//! each copy readable from its own upstream.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
use crate::runtime;
use common::R0618;
use runtime::*;

const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// The storm fixture's log (see tests/fixtures/list_changed_storm.py).
fn storm_log(file: &std::path::Path) -> String {
    std::fs::read_to_string(file).unwrap_or_default()
}

/// A legacy stdio upstream sends `notifications/tools/list_changed` 1,000 times a
/// second for 5 s: over the storm at most 50 `tools/list` reach it and at most 50
/// list_changed reach the (legacy, stdio) host; within the second after it, at most
/// 10 more; and mcpx still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_changed_storm_is_coalesced() {
    let files = crate::scratch_dir("rt-storm-files");
    let log = files.join("storm.log");
    let config = json!({"mcpServers": {
        "storm": python_entry("storm", "list_changed_storm.py",
                              &[("STORM_LOG", log.to_str().unwrap())]),
    }});
    let mut gw = Gateway::start("storm", &config, R0618, &[]).await;
    gw.initialize().await;
    let mut notes = gw.take_notes(LIST_CHANGED);
    wait_for(
        Duration::from_secs(20),
        "the storm started",
        || storm_log(&log).contains("start").then_some(()),
        || format!("stderr:\n{}", gw.stderr()),
    )
    .await;

    // During the storm (until the fixture says it has sent everything).
    let d = Deadline::after(Duration::from_secs(30));
    while !storm_log(&log).contains("end") {
        assert!(
            !d.passed(),
            "the storm did not end within 30 s: {}",
            storm_log(&log)
        );
        if let Some(v) = gw.next(Duration::from_millis(50)).await
            && v["method"] == LIST_CHANGED
        {
            notes += 1;
        }
    }
    notes += gw.take_notes(LIST_CHANGED);
    let text = storm_log(&log);
    let sent: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("sent "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    let lists = text.lines().filter(|l| *l == "list").count();
    assert!(
        sent >= 2500,
        "the fixture sent only {sent} of 5000 notifications: mcpx did not read its stdout"
    );
    assert!(lists >= 1, "the upstream's tools were never listed: {text}");
    assert!(
        lists <= 50 && notes <= 50,
        "during the storm {lists} tools/list reached the upstream and {notes} list_changed the host"
    );

    // The second after it: a trailing notification or two, not a queue draining.
    let mut late = 0;
    let d = Deadline::after(Duration::from_secs(1));
    while !d.passed() {
        if let Some(v) = gw.next(d.left()).await
            && v["method"] == LIST_CHANGED
        {
            late += 1;
        }
    }
    late += gw.take_notes(LIST_CHANGED);
    let lists_after = storm_log(&log).lines().filter(|l| *l == "list").count() - lists;
    assert!(
        late <= 10 && lists_after <= 10,
        "in the second after the storm {lists_after} tools/list reached the upstream and {late} list_changed the host"
    );

    assert_eq!(gw.tools().await, ["count"]);
    let r = gw
        .call_until_ok("count", json!({}), Duration::from_secs(5))
        .await;
    assert!(first_text(&r).parse::<usize>().is_ok(), "{r}");
}

/// Every resource URI of `resources/list` (all pages).
async fn resource_uris(gw: &mut Gateway) -> Vec<String> {
    let mut uris = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let v = gw.request("resources/list", params).await;
        let r = v
            .get("result")
            .unwrap_or_else(|| panic!("resources/list: {v}"));
        uris.extend(
            r["resources"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|x| x["uri"].as_str().map(str::to_owned)),
        );
        match r["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return uris,
        }
    }
}

/// The `resources/read` frames mcpx sent upstream so far.
fn reads(gw: &Gateway) -> Vec<Value> {
    gw.wire()
        .into_iter()
        .filter(|f| f["method"] == "resources/read")
        .collect()
}

/// Whether an upstream frame was written for a 2026-07-28 upstream (the protocol
/// version in its `_meta`) rather than a legacy one.
fn modern_frame(f: &Value) -> bool {
    f.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .is_some()
}
