//! Moved HTTP endpoints: mcpx follows a 307 or 308 within the endpoint's origin (the
//! method and body kept) and uses the new URL from then on; a redirection to another
//! origin is refused with the reason, so configured credentials go nowhere else. mcpx's
//! own listener answers its endpoint with a trailing slash with 308 to the endpoint.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Stdio;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

mod common;
use common::*;

async fn example_http() -> (Child, u16) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args(["example-server", "--http", "127.0.0.1:0"])
        .stdout(Stdio::null());
    start_listening(cmd).await
}

/// An HTTP server on 127.0.0.1 answering each request (any method) by its path from
/// `routes` (a whole response, head and body), 404 otherwise, one request a connection.
async fn scripted_http(routes: Vec<(&'static str, String)>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let routes = routes.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if conn.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let path = text.split_whitespace().nth(1).unwrap_or("").to_owned();
                let answer = routes
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, a)| a.clone())
                    .unwrap_or_else(|| {
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_owned()
                    });
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

fn redirect(status: &str, location: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
}

/// `…/mcp/` on mcpx's own listener is 308 to `/mcp`; mcpx's client, configured with
/// it, follows and works.
#[tokio::test]
async fn a_moved_endpoint_is_followed_within_its_origin() {
    let (_server, port) = example_http().await;
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("http://127.0.0.1:{port}/mcp/?x=1"))
        .header("Content-Type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 308);
    assert_eq!(r.headers()["location"], "/mcp?x=1");

    let config = json!({"mcpServers": {"up": {"type": "http",
        "url": format!("http://127.0.0.1:{port}/mcp/")}}});
    let mut h = Host::start("redirect-follow", &config, R0618).await;
    h.initialize(json!({})).await;
    let (v, _) = h
        .request(
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        )
        .await;
    assert_eq!(
        text(result(&v, "tools/call")),
        "This is a simple text response for testing.",
        "{v}"
    );
    let wire = h.finish().await;
    assert!(!wire.is_empty());
}

/// The same for the HTTP+SSE transport's stream, and the new place's own answer is
/// what is reported (here a 404: the redirection was followed).
#[tokio::test]
async fn a_moved_sse_stream_is_followed() {
    let port = scripted_http(vec![("/sse", redirect("307 Temporary Redirect", "/sse2"))]).await;
    let config = json!({"mcpServers": {"old": {"type": "sse",
        "url": format!("http://127.0.0.1:{port}/sse")}}});
    let line = unavailable_because("redirect-sse", &config, &[]).await;
    assert!(line.contains("HTTP 404") && !line.contains("307"), "{line}");
}

/// Another origin (here another port): refused, saying where and why.
#[tokio::test]
async fn a_redirect_to_another_origin_is_refused() {
    let port = scripted_http(vec![(
        "/mcp",
        redirect("308 Permanent Redirect", "http://127.0.0.1:1/mcp"),
    )])
    .await;
    let config = json!({"mcpServers": {"up": {"type": "http",
        "url": format!("http://127.0.0.1:{port}/mcp")}}});
    let line = unavailable_because("redirect-origin", &config, &[]).await;
    assert!(
        line.contains("HTTP 308: the upstream moved to http://127.0.0.1:1/mcp, another origin"),
        "{line}"
    );
}

/// A 301 (which would turn a POST into a GET) is reported, not followed.
#[tokio::test]
async fn a_301_is_reported_not_followed() {
    let port = scripted_http(vec![("/mcp", redirect("301 Moved Permanently", "/new"))]).await;
    let config = json!({"mcpServers": {"up": {"type": "http",
        "url": format!("http://127.0.0.1:{port}/mcp")}}});
    let line = unavailable_because("redirect-301", &config, &[]).await;
    assert!(
        line.contains("HTTP 301: the upstream moved to /new"),
        "{line}"
    );
}
