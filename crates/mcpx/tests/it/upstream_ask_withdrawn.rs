//! A Streamable HTTP upstream that withdraws its own question (`notifications/cancelled`
//! for the `sampling/createMessage` it sent on the call's stream) has not ended the
//! call: mcpx withdraws the question from the host too and relays the call's result.
//! Found by the soak (`scripts/bench.sh soak`): mcpx's client took any
//! `notifications/cancelled` on a call's stream for the end of the call.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;

use mcpx_protocol::Revision;
use serde_json::{Value, json};
use tokio::process::Command;

use crate::common;
use common::{Host, result, start_listening, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_upstream_that_withdraws_its_question_still_answers_the_call() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/withdrawing_http.py");
    let mut cmd = Command::new("python3");
    cmd.arg(script);
    let (_upstream, port) = start_listening(cmd).await;
    let config = json!({"mcpServers": {"w": {"type": "http",
        "url": format!("http://127.0.0.1:{port}/mcp"),
        "mcpx": {"protocol": "legacy"}}}});
    let host = Host::start("withdrawing-http", &config, Revision::V2025_06_18).await;
    withdrawn_but_answered(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_upstream_that_withdraws_its_question_still_answers_the_call() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/withdrawing_stdio.py");
    let config = json!({"mcpServers": {"w": {"command": "python3", "args": [script],
        "mcpx": {"protocol": "legacy"}}}});
    let host = Host::start("withdrawing-stdio", &config, Revision::V2025_06_18).await;
    withdrawn_but_answered(host).await;
}

/// The host does not answer the question; the upstream withdraws it.
async fn withdrawn_but_answered(mut host: Host) {
    host.initialize(json!({"sampling": {}})).await;
    let (r, asks, notes) = host
        .exchange(
            "tools/call",
            json!({"name": "withdraw", "arguments": {}}),
            &mut |_| Vec::new(),
        )
        .await;
    assert_eq!(
        text(result(&r, "withdraw")),
        "done without an answer",
        "{r}"
    );
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!(asks[0]["method"], "sampling/createMessage");
    // The host was told the question is withdrawn, under the id mcpx gave it.
    let withdrawn: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/cancelled")
        .collect();
    assert_eq!(withdrawn.len(), 1, "{notes:?}");
    assert_eq!(
        withdrawn[0]["params"]["requestId"], asks[0]["id"],
        "{notes:?}"
    );
    host.finish().await;
}
