//! mcpx's upstream client against a real `mcpx example-server --http`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use mcpx_client::{CallOptions, EraCache, Target, TargetTransport, connect};
use mcpx_protocol::{Era, Revision};

use crate::common;

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
    let (_server, port) = common::example_http(&[]).await;
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
        .call(
            "tools/list",
            Some(&common::params("{}")),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(frame.result().is_some(), "{frame}");
}

/// A-C14, B-C9: the probe reads a legacy-only server's 400 (no modern error body) as
/// "legacy" and initialises; a modern server answers discover.
#[tokio::test]
async fn probing_finds_each_era_over_http() {
    let (_legacy, port) = common::example_http(&["--revision", "2025-06-18"]).await;
    let conn = connect(&target(port), &EraCache::disabled()).await.unwrap();
    assert_eq!(
        (conn.facts().era, conn.facts().revision),
        (Era::Legacy, Revision::V2025_06_18)
    );
    let (_modern, port) = common::example_http(&["--revision", "2026-07-28"]).await;
    let conn = connect(&target(port), &EraCache::disabled()).await.unwrap();
    assert_eq!(conn.facts().era, Era::Modern);
}

/// Issue #32 over HTTP: a 2026-07-28 server whose `server/discover` answer comes after
/// the probe's wait is modern, though its refusal of the `initialize` POST (400) came
/// first, and the era cache says so. A dual server, answering `initialize`, is legacy
/// then, and that era is not cached: it only followed a timeout.
#[tokio::test]
async fn a_late_discover_answer_is_used_over_http() {
    let dir = crate::scratch_dir("client-http-late-discover");
    let cache = EraCache::at(dir.join("eras.json"));
    let late = ["--discover-delay-ms", "1500"];
    let (_modern, port) =
        common::example_http(&[&["--revision", "2026-07-28"][..], &late[..]].concat()).await;
    let mut t = target(port);
    t.probe_timeout = std::time::Duration::from_millis(300);
    let conn = connect(&t, &cache).await.unwrap();
    assert_eq!(
        (conn.facts().era, conn.facts().revision),
        (Era::Modern, Revision::V2026_07_28)
    );
    conn.close().await;
    assert_eq!(
        cache.get(&t.transport.identity()),
        Some((Era::Modern, Revision::V2026_07_28))
    );

    // Discover answers long after initialize, whatever the machine's speed.
    let (_dual, port) = common::example_http(&["--discover-delay-ms", "60000"]).await;
    let mut t = target(port);
    t.probe_timeout = std::time::Duration::from_millis(300);
    let conn = connect(&t, &cache).await.unwrap();
    assert_eq!(conn.facts().era, Era::Legacy);
    conn.close().await;
    assert_eq!(cache.get(&t.transport.identity()), None);
    let _ = std::fs::remove_dir_all(&dir);
}

/// B-C9, A-C14: an HTTP URL where only the 2024-11-05 transport answers (the example
/// server's `/sse`: POST is refused) is reached by falling back to HTTP+SSE after the
/// modern probe and `initialize` over POST both fail with a 4xx.
#[tokio::test]
async fn http_falls_back_to_http_sse() {
    let (_server, port) = common::example_http(&[]).await;
    let target = Target::new(
        "old",
        TargetTransport::Http {
            url: format!("http://127.0.0.1:{port}/sse"),
            headers: Vec::new(),
        },
    );
    let conn = connect(&target, &EraCache::disabled()).await.unwrap();
    assert_eq!(conn.facts().era, Era::Legacy);
    assert_eq!(conn.transport_kind(), "HTTP+SSE");
    let frame = conn
        .call(
            "tools/list",
            Some(&common::params("{}")),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(frame.result().is_some(), "{frame}");
}

/// B-C9, A-C14: 401 and 403 are reported, never probed past (no initialize, no GET).
#[tokio::test]
async fn auth_errors_are_reported_not_probed_past() {
    for status in ["401 Unauthorized", "403 Forbidden"] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
        let log = seen.clone();
        let reply = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                let mut buf = vec![0u8; 16384];
                let n = tokio::io::AsyncReadExt::read(&mut s, &mut buf)
                    .await
                    .unwrap_or(0);
                let text = String::from_utf8_lossy(&buf[..n]).to_string();
                log.lock()
                    .push(text.lines().next().unwrap_or_default().to_owned());
                let _ = tokio::io::AsyncWriteExt::write_all(&mut s, reply.as_bytes()).await;
            }
        });
        let err = connect(&target(port), &EraCache::disabled())
            .await
            .unwrap_err();
        assert!(err.to_string().contains(&status[..3]), "{status}: {err}");
        let requests = seen.lock().clone();
        assert_eq!(requests.len(), 1, "{status}: probed past: {requests:?}");
        assert!(requests[0].starts_with("POST"), "{requests:?}");
    }
}

/// B-C8: on the modern path a body written in 2026-07-28 without the
/// `MCP-Protocol-Version` header is a HeaderMismatch (400, -32020); a legacy session's
/// request without it is served (as 2025-03-26 when the session is, see
/// `crates/mcpx-transport/tests/it/http_server.rs`).
#[tokio::test]
async fn a_modern_body_without_the_version_header_is_a_header_mismatch() {
    let (_server, port) = common::example_http(&[]).await;
    let body = serde_json::json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{
        "io.modelcontextprotocol/protocolVersion":"2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":{}}}})
    .to_string();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Method: tools/list\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut s, req.as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut s, &mut out)
        .await
        .unwrap();
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    let json = out.split("\r\n\r\n").nth(1).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["error"]["code"], -32020, "{v}");
    mcpx_testkit::tap::tap()
        .validate_frame(Revision::V2026_07_28, json)
        .unwrap();
}
