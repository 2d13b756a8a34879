//! OAuth client credentials toward a Streamable HTTP upstream (the
//! `io.modelcontextprotocol/oauth-client-credentials` extension, client secret form):
//! mcpx gets a token from the configured token endpoint (`client_secret_basic`,
//! `grant_type=client_credentials`, `resource`, `scope`), sends it as a bearer token, and
//! on a 401 gets a new one and sends the request again; a refused grant is reported.
//! The upstream is `mcpx serve --http --token-file`, which takes one token.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

mod common;
use common::*;

const TOKEN: &str = "the-right-token";

/// `mcpx serve --demo --http` requiring [`TOKEN`].
async fn guarded_gateway() -> (Child, u16) {
    let dir = mcpx_testkit::scratch::dir("oauth-upstream");
    let file = dir.join("token");
    std::fs::write(&file, TOKEN).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args(["serve", "--demo", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&file)
        .env_remove("MCPX_SERVE_TOKEN")
        .stdout(Stdio::null());
    start_listening(cmd).await
}

/// A token endpoint on 127.0.0.1 answering its requests with `answers` in turn (the
/// last one again once they run out); it keeps each request (head and body).
async fn token_endpoint(answers: Vec<String>) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                if conn.read(&mut byte).await.unwrap_or(0) == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            let text = String::from_utf8_lossy(&head).into_owned();
            let length: usize = text
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            let mut body = vec![0u8; length];
            let _ = conn.read_exact(&mut body).await;
            let n = {
                let mut s = kept.lock().unwrap();
                s.push(format!("{text}{}", String::from_utf8_lossy(&body)));
                s.len()
            };
            let answer = answers.get(n - 1).or(answers.last()).unwrap().clone();
            let _ = conn.write_all(answer.as_bytes()).await;
        }
    });
    (port, seen)
}

fn json_answer(status: &str, body: &serde_json::Value) -> String {
    let body = body.to_string();
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn oauth_config(gw: u16, token: u16) -> serde_json::Value {
    json!({"mcpServers": {"up": {"type": "http",
        "url": format!("http://127.0.0.1:{gw}/mcp"),
        "mcpx": {"oauth": {
            "tokenUrl": format!("http://127.0.0.1:{token}/token"),
            "clientId": "mcpx",
            "clientSecret": "pa ss",
            "scope": "mcp:tools"}}}}})
}

/// The first token is refused by the upstream (401): mcpx gets another and the call
/// goes through; both token requests are client-credentials grants for the upstream.
#[tokio::test]
async fn a_token_is_got_used_and_replaced_when_refused() {
    let (_gw, gw) = guarded_gateway().await;
    let (token_port, seen) = token_endpoint(vec![
        json_answer(
            "200 OK",
            &json!({"access_token": "stale", "token_type": "bearer", "expires_in": 3600}),
        ),
        json_answer(
            "200 OK",
            &json!({"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600}),
        ),
    ])
    .await;
    let mut h = Host::start("oauth-front", &oauth_config(gw, token_port), R0618).await;
    h.initialize(json!({})).await;
    let (v, _) = h
        .request(
            "tools/call",
            json!({"name": "everything__test_simple_text", "arguments": {}}),
        )
        .await;
    assert_eq!(
        text(result(&v, "tools/call")),
        "This is a simple text response for testing.",
        "{v}"
    );
    h.finish().await;

    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        2,
        "one token, then one more after the 401: {seen:?}"
    );
    // base64 of `mcpx:pa%20ss`: RFC 6749 §2.3.1 form-encodes the id and secret first.
    let basic = "bWNweDpwYSUyMHNz";
    let resource = format!("resource=http%3A%2F%2F127%2E0%2E0%2E1%3A{gw}%2Fmcp");
    for request in &seen {
        let lower = request.to_ascii_lowercase();
        assert!(lower.starts_with("post /token http/1.1\r\n"), "{request}");
        assert!(
            request.contains(&format!("authorization: Basic {basic}")),
            "{request}"
        );
        assert!(
            lower.contains("content-type: application/x-www-form-urlencoded"),
            "{request}"
        );
        let body = request.rsplit("\r\n\r\n").next().unwrap();
        let fields: Vec<&str> = body.split('&').collect();
        assert!(fields.contains(&"grant_type=client_credentials"), "{body}");
        assert!(fields.contains(&resource.as_str()), "{body}");
        assert!(fields.contains(&"scope=mcp%3Atools"), "{body}");
    }
}

/// A refused grant: the upstream is unavailable, and the token endpoint's error says
/// why.
#[tokio::test]
async fn a_refused_grant_is_reported() {
    let (_gw, gw) = guarded_gateway().await;
    let (token_port, _) = token_endpoint(vec![json_answer(
        "401 Unauthorized",
        &json!({"error": "invalid_client", "error_description": "unknown client"}),
    )])
    .await;
    let line = unavailable_because("oauth-refused", &oauth_config(gw, token_port), &[]).await;
    assert!(
        line.contains(&format!(
            "oauth: the token endpoint http://127.0.0.1:{token_port}/token refused the client credentials (HTTP 401: invalid_client: unknown client)"
        )),
        "{line}"
    );
}
