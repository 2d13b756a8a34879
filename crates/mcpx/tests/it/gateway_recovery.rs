//! Register H10 / B-C7, client side: a legacy HTTP upstream whose session is gone (it
//! restarted) answers 404 to a request carrying the old `Mcp-Session-Id`; mcpx starts a
//! new session and retries the request once, and the host never notices.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Stdio;
use std::time::Duration;

use mcpx_protocol::Revision;
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use crate::common;
use common::start_listening;

/// The example server (2025-11-25 only) on Streamable HTTP at `bind`.
async fn example_server(bind: &str) -> (Child, u16) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args(["example-server", "--revision", "2025-11-25", "--http", bind])
        .stdout(Stdio::null());
    start_listening(cmd).await
}

#[tokio::test]
async fn an_expired_legacy_session_is_renewed_and_the_request_retried() {
    let (mut upstream, port) = example_server("127.0.0.1:0").await;
    let dir = crate::scratch_dir("recovery");
    let cfg = dir.join("mcpx.json");
    std::fs::write(
        &cfg,
        json!({"mcpServers": {"up": {"type": "http", "url": format!("http://127.0.0.1:{port}/mcp")}}})
            .to_string(),
    )
    .unwrap();
    let wire = dir.join("wire.jsonl");
    let _ = std::fs::remove_file(&wire);
    let mut gw = Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("MCPX_WIRE_LOG", &wire)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = gw.stdin.take().unwrap();
    let mut lines = BufReader::new(gw.stdout.take().unwrap()).lines();
    let rev = Revision::V2025_06_18;
    let mut ask = async |id: i64, method: &str, params: Value| -> Value {
        let line = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string();
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
        loop {
            let l = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
                .await
                .expect("no answer")
                .unwrap()
                .unwrap();
            let v: Value = serde_json::from_str(&l).unwrap();
            if v["id"] == json!(id) {
                tap().validate_response(rev, method, &l).unwrap();
                return v;
            }
        }
    };
    let init = ask(
        1,
        "initialize",
        json!({"protocolVersion": rev.as_str(), "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    )
    .await;
    assert_eq!(init["result"]["protocolVersion"], rev.as_str());
    let call = json!({"name": "test_simple_text", "arguments": {}});
    let first = ask(2, "tools/call", call.clone()).await;
    assert!(first["result"]["content"].is_array(), "{first}");

    // The upstream restarts: every session it had is gone.
    upstream.kill().await.unwrap();
    let _ = upstream.wait().await;
    // Back on the same port, as a restarted server would be.
    let (_upstream, _) = example_server(&format!("127.0.0.1:{port}")).await;

    let second = ask(3, "tools/call", call).await;
    assert!(second["result"]["content"].is_array(), "{second}");
    let log = std::fs::read_to_string(&wire).unwrap();
    let inits = log
        .lines()
        .filter(|l| l.contains("\"method\":\"initialize\""))
        .count();
    assert_eq!(inits, 2, "a new session was started once:\n{log}");
    let _ = std::fs::remove_dir_all(&dir);
}
