//! The gateway matrix in-process: every host revision × every upstream revision.
//! Each cell lists tools, calls one with progress, a structured-output tool where
//! the upstream has one, reads a resource and gets a prompt. Every frame to the host
//! is checked against the host's schema (by the hosts), every frame to and from the
//! upstream against the upstream's (by the tap).
//!
//! In-process versions of `crates/mcpx/tests/gateway_matrix.rs`'s
//! `every_host_revision_through_every_upstream_revision` and
//! `progress_just_before_a_response_is_relayed_before_it`.

use mcpx_protocol::{Era, Revision};
use serde_json::{Value, json};

use crate::harness::{Answer, Host, InMemory, LegacyHost, Upstream, config, refuse_all};

/// A host of either era.
enum AnyHost {
    Modern(Host),
    Legacy(Box<LegacyHost>),
}

impl AnyHost {
    async fn start(host_rev: Revision, up_rev: Revision) -> AnyHost {
        let links = InMemory::default().with("up", Upstream::strict(up_rev));
        let config = config(json!({}), &[("up", json!({}))]);
        match host_rev.era() {
            Era::Modern => AnyHost::Modern(Host::start(config, links)),
            Era::Legacy => AnyHost::Legacy(Box::new(
                LegacyHost::start(config, links, host_rev, json!({}), refuse_all()).await,
            )),
        }
    }

    async fn request(&mut self, method: &str, params: Value) -> Answer {
        match self {
            AnyHost::Modern(h) => h.request(method, params).await,
            AnyHost::Legacy(h) => h.request(method, params).await,
        }
    }

    async fn finish(self) {
        match self {
            AnyHost::Modern(h) => h.finish().await,
            AnyHost::Legacy(h) => h.finish().await,
        }
    }
}

async fn cell(host_rev: Revision, up_rev: Revision) {
    let tag = format!("{host_rev} host, {up_rev} upstream");
    let mut host = AnyHost::start(host_rev, up_rev).await;

    let list = host.request("tools/list", json!({})).await;
    let tools: Vec<String> = list.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        tools.contains(&"test_tool_with_progress".to_owned()),
        "{tag}: {tools:?}"
    );

    let call = host
        .request(
            "tools/call",
            json!({"name": "test_tool_with_progress", "arguments": {},
                   "_meta": {"progressToken": "matrix-progress"}}),
        )
        .await;
    assert!(
        call.result()["content"].is_array(),
        "{tag}: {:?}",
        call.response
    );
    let progress: Vec<&Value> = call
        .related
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "{tag}: no progress relayed");
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "matrix-progress"),
        "{tag}: {progress:?}"
    );

    if tools.contains(&"test_structured_content".to_owned()) {
        let call = host
            .request(
                "tools/call",
                json!({"name": "test_structured_content", "arguments": {}}),
            )
            .await;
        let r = call.result();
        if host_rev < Revision::V2025_06_18 {
            assert!(r.get("structuredContent").is_none(), "{tag}: {r}");
        } else {
            assert!(r["structuredContent"].is_object(), "{tag}: {r}");
        }
    }

    let read = host
        .request("resources/read", json!({"uri": "test://static-text"}))
        .await;
    assert!(
        read.result()["contents"][0]["text"].as_str().is_some(),
        "{tag}: {:?}",
        read.response
    );
    let prompt = host
        .request("prompts/get", json!({"name": "test_simple_prompt"}))
        .await;
    assert!(prompt.result()["messages"].is_array(), "{tag}");
    host.finish().await;
}

#[tokio::test(start_paused = true)]
async fn every_host_revision_through_every_upstream_revision() {
    for host in Revision::ALL {
        for up in Revision::ALL {
            cell(host, up).await;
        }
    }
}

/// 40 progress notifications an upstream sends with no delay between them, then its
/// result: the host gets all of them, in order, before the response, in each era.
async fn progress_burst() {
    for rev in [Revision::V2025_11_25, Revision::V2026_07_28] {
        let mut host = AnyHost::start(rev, rev).await;
        let a = host
            .request(
                "tools/call",
                json!({"name": "test_tool_with_progress",
                       "arguments": {"steps": 40, "delayMs": 0},
                       "_meta": {"progressToken": "burst"}}),
            )
            .await;
        assert!(
            a.result()["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("40 steps")),
            "{rev}: {:?}",
            a.response
        );
        let progress: Vec<f64> = a
            .related
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .map(|n| n["params"]["progress"].as_f64().unwrap())
            .collect();
        let want: Vec<f64> = (1..=40).map(f64::from).collect();
        assert_eq!(progress, want, "{rev}");
        host.finish().await;
    }
}

#[tokio::test]
async fn progress_just_before_a_response_is_relayed_before_it_on_one_thread() {
    progress_burst().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_just_before_a_response_is_relayed_before_it_on_two_threads() {
    progress_burst().await;
}
