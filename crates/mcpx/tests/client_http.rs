//! mcpx's upstream client against a real `mcpx example-server --http`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::TcpListener;
use std::process::Stdio;
use std::time::Duration;

use mcpx_client::{CallOptions, EraCache, Target, TargetTransport, connect};
use mcpx_protocol::{Era, Revision};
use tokio::process::{Child, Command};

async fn example_server(args: &[&str]) -> (Child, u16) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .arg("example-server")
        .args(args)
        .arg("--http")
        .arg(format!("127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return (child, port);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("example server did not listen");
}

fn target(port: u16) -> Target {
    Target::new(
        "ex",
        TargetTransport::Http {
            url: format!("http://127.0.0.1:{port}/mcp"),
            headers: Vec::new(),
        },
    )
}

/// H10, B-C7 (modern half): on 2026-07-28 Streamable HTTP a 404 carries -32601 for a
/// method the server does not have; mcpx's client reads it as that answer (not as a
/// dead session, and not as a transport failure).
#[tokio::test]
async fn a_modern_404_is_method_not_found() {
    let (_server, port) = example_server(&[]).await;
    let conn = connect(&target(port), &EraCache::disabled()).await.unwrap();
    assert_eq!(conn.facts().era, Era::Modern);
    // `ping` does not exist in 2026-07-28.
    let frame = conn
        .call("ping", None, CallOptions::default())
        .await
        .unwrap();
    assert_eq!(frame.error().map(|e| e.code), Some(-32601), "{frame}");
    // The connection is still good.
    let frame = conn
        .call("tools/list", Some("{}"), CallOptions::default())
        .await
        .unwrap();
    assert!(frame.result().is_some(), "{frame}");
}

/// A-C14, B-C9: the probe reads a legacy-only server's 400 (no modern error body) as
/// "legacy" and initialises; a modern server answers discover.
#[tokio::test]
async fn probing_finds_each_era_over_http() {
    let (_legacy, port) = example_server(&["--revision", "2025-06-18"]).await;
    let conn = connect(&target(port), &EraCache::disabled()).await.unwrap();
    assert_eq!(
        (conn.facts().era, conn.facts().revision),
        (Era::Legacy, Revision::V2025_06_18)
    );
    let (_modern, port) = example_server(&["--revision", "2026-07-28"]).await;
    let conn = connect(&target(port), &EraCache::disabled()).await.unwrap();
    assert_eq!(conn.facts().era, Era::Modern);
}
