//! Elicitations across revisions, in-process: url mode only to hosts that declared it,
//! the 2025-06-18 shape, and the user's choice as a result both ways.
//!
//! In-process versions of `crates/mcpx/tests/ask_elicitation.rs`'s
//! `url_elicitations_reach_only_hosts_that_declared_url_mode`,
//! `elicitations_take_the_2025_06_18_shape` and
//! `decline_and_cancel_are_results_in_both_directions`.

use mcpx_protocol::{Era, Revision};
use serde_json::{Value, json};

use crate::harness::{Host, InMemory, LegacyHost, Responder, Upstream, config, text};

const SIGN_IN: &str = "https://example.com/mcpx/sign-in";
const R0618: Revision = Revision::V2025_06_18;
const R1125: Revision = Revision::V2025_11_25;
const R2026: Revision = Revision::V2026_07_28;

fn links(up: Revision) -> InMemory {
    InMemory::default().with("up", Upstream::strict(up))
}

async fn legacy(up: Revision, rev: Revision, caps: Value, responder: Responder) -> LegacyHost {
    LegacyHost::start(
        config(json!({}), &[("up", json!({}))]),
        links(up),
        rev,
        caps,
        responder,
    )
    .await
}

fn modern(up: Revision) -> Host {
    Host::start(config(json!({}), &[("up", json!({}))]), links(up))
}

/// mcpx's answers to the upstream's own requests (responses it sent upstream).
fn answers_upstream(frames: &[Value]) -> Vec<&Value> {
    frames
        .iter()
        .filter(|v| v.get("method").is_none() && v.get("id").is_some())
        .collect()
}

/// E-9, E-19, E-11, E-12: a legacy upstream's url-mode elicitation reaches only hosts
/// that declared url mode, never as a form: a 2025-06-18 host and a 2026-07-28 host
/// without `elicitation.url` get -32603 carrying the URL, a 2025-11-25 host without it
/// -32042 with the elicitation in data; each time the upstream's ask is answered
/// "cancel" and its call cancelled. A 2025-11-25 host with url mode gets the request
/// with its elicitationId and then the upstream's completion notification, once; a
/// 2026-07-28 host gets it without elicitationId and never a completion notification.
#[tokio::test(start_paused = true)]
async fn url_elicitations_reach_only_hosts_that_declared_url_mode() {
    let tool = "test_elicitation_url";
    for (rev, caps) in [
        (R0618, json!({"elicitation": {}})),
        (R1125, json!({"elicitation": {}})),
        (R1125, json!({"elicitation": {"form": {}}})),
        (R2026, json!({"elicitation": {}})),
    ] {
        let tag = format!("{rev} {}", caps["elicitation"]);
        let (v, frames) = if rev.era() == Era::Legacy {
            let mut h = legacy(R1125, rev, caps.clone(), Box::new(|_| Ok(json!({})))).await;
            let v = h.call(tool, json!({})).await;
            assert!(h.asks.is_empty(), "{tag}: {:?}", h.asks);
            // The answer upstream may follow the host's.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let frames = h.links.sent_to("up");
            h.finish().await;
            (v.response, frames)
        } else {
            let h = modern(R1125);
            let v = h.call_as(tool, caps.clone(), json!({})).await;
            // The answer upstream may follow the host's.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let frames = h.links.sent_to("up");
            h.finish().await;
            (v.response, frames)
        };
        let code = &v["error"]["code"];
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(SIGN_IN), "{tag}: {v}");
        if rev == R1125 {
            assert_eq!(code, -32042, "{tag}: {v}");
            let e = &v["error"]["data"]["elicitations"][0];
            assert_eq!(e["mode"], "url", "{tag}: {v}");
            assert_eq!(e["url"], SIGN_IN, "{tag}: {v}");
            assert_eq!(e["elicitationId"], "mcpx-elicitation-1", "{tag}: {v}");
        } else {
            assert_eq!(code, -32603, "{tag}: {v}");
        }
        let answers = answers_upstream(&frames);
        assert!(
            answers
                .iter()
                .any(|a| a["result"] == json!({"action": "cancel"})),
            "{tag}: {answers:?}"
        );
        assert!(
            frames
                .iter()
                .any(|f| f["method"] == "notifications/cancelled"),
            "{tag}: the upstream call was not cancelled: {frames:?}"
        );
    }

    // A 2025-11-25 host that declared url mode: the request, then the completion.
    let mut h = legacy(
        R1125,
        R1125,
        json!({"elicitation": {"url": {}}}),
        Box::new(|_| Ok(json!({"action": "accept"}))),
    )
    .await;
    let v = h.call(tool, json!({})).await;
    assert_eq!(text(v.result()), "URL elicitation: accept");
    assert_eq!(h.asks.len(), 1, "{:?}", h.asks);
    let p = &h.asks[0]["params"];
    assert_eq!(p["mode"], "url");
    assert_eq!(p["url"], SIGN_IN);
    assert_eq!(p["elicitationId"], "mcpx-elicitation-1");
    const COMPLETE: &str = "notifications/elicitation/complete";
    if !h.notes.iter().any(|n| n["method"] == COMPLETE) {
        h.wait_note(COMPLETE).await;
    }
    let done: Vec<&Value> = h.notes.iter().filter(|n| n["method"] == COMPLETE).collect();
    assert_eq!(done.len(), 1, "{:?}", h.notes);
    assert_eq!(done[0]["params"]["elicitationId"], "mcpx-elicitation-1");
    // Relayed once: the completed elicitation is forgotten.
    h.request("ping", json!({})).await;
    let n = h.notes.iter().filter(|n| n["method"] == COMPLETE).count();
    assert_eq!(n, 1, "{:?}", h.notes);
    h.finish().await;

    // A 2026-07-28 host that declared url mode: no elicitationId, no notification.
    let h = modern(R1125);
    let caps = json!({"elicitation": {"url": {}}});
    let v = h.call_as(tool, caps.clone(), json!({})).await;
    let r = v.result();
    let ask = &r["inputRequests"]["sign_in"];
    assert_eq!(ask["params"]["mode"], "url", "{r}");
    assert_eq!(ask["params"]["url"], SIGN_IN, "{r}");
    assert!(ask["params"].get("elicitationId").is_none(), "{r}");
    let v = h
        .call_as(
            tool,
            caps,
            json!({"requestState": r["requestState"],
                   "inputResponses": {"sign_in": {"action": "accept"}}}),
        )
        .await;
    assert_eq!(text(v.result()), "URL elicitation: accept");
    assert!(
        v.related.iter().all(|n| n["method"] != COMPLETE),
        "{:?}",
        v.related
    );
    h.finish().await;
}

/// E-11: to a 2025-06-18 host an elicitation is sent in 2025-06-18's shape (no mode,
/// defaults only on booleans; validated against the 2025-06-18 schema by the host);
/// multi-select fields have no 2025-06-18 form, so that ask is refused to the
/// upstream with -32602 and never reaches the host. A 2025-11-25 host gets the same
/// asks unchanged.
#[tokio::test(start_paused = true)]
async fn elicitations_take_the_2025_06_18_shape() {
    let mut h = legacy(
        R1125,
        R0618,
        json!({"elicitation": {}}),
        Box::new(|_| Ok(json!({"action": "accept", "content": {"name": "Ann"}}))),
    )
    .await;
    let v = h.call("test_elicitation_sep1034_defaults", json!({})).await;
    assert!(
        text(v.result()).starts_with("Elicitation completed"),
        "{:?}",
        v.response
    );
    let p = &h.asks[0]["params"];
    assert!(p.get("mode").is_none(), "{p}");
    let props = &p["requestedSchema"]["properties"];
    for field in ["name", "age", "score", "status"] {
        assert!(props[field].get("default").is_none(), "{field}: {p}");
    }
    assert_eq!(props["verified"]["default"], true, "{p}");
    assert_eq!(
        props["status"]["enum"],
        json!(["active", "inactive", "pending"])
    );

    let v = h.call("test_elicitation_sep1330_enums", json!({})).await;
    assert_eq!(h.asks.len(), 1, "{:?}", h.asks);
    let r = v.result();
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(r).contains("-32602"), "{r}");
    let frames = h.links.sent_to("up");
    assert!(
        answers_upstream(&frames)
            .iter()
            .any(|a| a.pointer("/error/code") == Some(&json!(-32602))),
        "{frames:?}"
    );
    h.finish().await;

    // 2025-11-25 has every shape: the same ask passes unchanged.
    let mut h = legacy(
        R1125,
        R1125,
        json!({"elicitation": {}}),
        Box::new(|_| Ok(json!({"action": "accept", "content": {}}))),
    )
    .await;
    let v = h.call("test_elicitation_sep1330_enums", json!({})).await;
    assert_ne!(v.result()["isError"], true, "{:?}", v.response);
    let props = &h.asks[0]["params"]["requestedSchema"]["properties"];
    assert!(props["titledSingle"]["oneOf"].is_array(), "{props}");
    assert_eq!(props["untitledMulti"]["type"], "array", "{props}");
    h.finish().await;
}

/// E-14: between eras no error codes stand for the user's choice: a modern host's
/// decline reaches a legacy upstream as an ElicitResult "decline", and a legacy host's
/// cancel reaches a modern upstream as an inputResponses entry "cancel".
#[tokio::test(start_paused = true)]
async fn decline_and_cancel_are_results_in_both_directions() {
    let tool = "test_input_required_result_elicitation";
    let h = modern(R1125);
    let caps = json!({"elicitation": {}});
    let v = h.call_as(tool, caps.clone(), json!({})).await;
    let state = v.result()["requestState"].clone();
    let v = h
        .call_as(
            tool,
            caps,
            json!({"requestState": state, "inputResponses": {"user_name": {"action": "decline"}}}),
        )
        .await;
    assert_eq!(text(v.result()), "The user did not accept (decline).");
    let frames = h.links.sent_to("up");
    assert!(
        answers_upstream(&frames)
            .iter()
            .any(|a| a["result"] == json!({"action": "decline"})),
        "{frames:?}"
    );
    h.finish().await;

    let mut h = legacy(
        R2026,
        R1125,
        json!({"elicitation": {}}),
        Box::new(|_| Ok(json!({"action": "cancel"}))),
    )
    .await;
    let v = h.call(tool, json!({})).await;
    assert_eq!(h.asks.len(), 1);
    assert_eq!(text(v.result()), "The user did not accept (cancel).");
    let frames = h.links.sent_to("up");
    assert!(
        frames.iter().any(|f| f["method"] == "tools/call"
            && f["params"]["inputResponses"]["user_name"] == json!({"action": "cancel"})),
        "{frames:?}"
    );
    h.finish().await;
}
