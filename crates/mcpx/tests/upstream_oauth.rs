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
async fn guarded_gateway(tag: &str) -> (Child, u16) {
    let dir = mcpx_testkit::scratch::dir(&format!("oauth-upstream-{tag}"));
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
    let (_gw, gw) = guarded_gateway("replaced").await;
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
    let wire = h.finish().await;
    // The extension's client guide: "Declare support", on every request (2026-07-28
    // clientCapabilities.extensions), discovery included.
    let declared: Vec<_> = wire
        .iter()
        .filter_map(|f| f.pointer("/params/_meta/io.modelcontextprotocol~1clientCapabilities"))
        .collect();
    assert!(!declared.is_empty(), "{wire:?}");
    for caps in declared {
        assert_eq!(
            caps["extensions"]["io.modelcontextprotocol/oauth-client-credentials"],
            json!({}),
            "{caps}"
        );
    }
    assert!(
        wire.iter().any(|f| f["method"] == "server/discover"),
        "{wire:?}"
    );

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
    let (_gw, gw) = guarded_gateway("refused").await;
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

/// How [`http_server`] answers a request.
#[derive(Clone)]
enum Answer {
    /// This whole response.
    Fixed(String),
    /// The request, passed to `127.0.0.1:port` (one exchange, then closed).
    Forward(u16),
}

/// An HTTP server on 127.0.0.1 answering each request (head, with its body) as `route`
/// says, one request a connection; it keeps each request's line (and `| body`).
async fn http_server(
    route: impl Fn(&str) -> Answer + Send + Sync + 'static,
) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let route = Arc::new(route);
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let (route, kept) = (route.clone(), kept.clone());
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
                let line = text.lines().next().unwrap_or("");
                kept.lock().unwrap().push(if body.is_empty() {
                    line.to_owned()
                } else {
                    format!("{line} | {}", String::from_utf8_lossy(&body))
                });
                match route(&text) {
                    Answer::Fixed(a) => {
                        let _ = conn.write_all(a.as_bytes()).await;
                    }
                    Answer::Forward(port) => {
                        let Ok(mut up) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                        else {
                            return;
                        };
                        // One exchange: the server closes after its answer.
                        let mut lines: Vec<&str> = text
                            .trim_end()
                            .lines()
                            .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
                            .collect();
                        lines.push("Connection: close");
                        let head = format!("{}\r\n\r\n", lines.join("\r\n"));
                        let _ = up.write_all(head.as_bytes()).await;
                        let _ = up.write_all(&body).await;
                        let _ = tokio::io::copy(&mut up, &mut conn).await;
                    }
                }
            });
        }
    });
    (port, seen)
}

fn not_found() -> Answer {
    Answer::Fixed(
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned(),
    )
}

fn json_doc(body: &serde_json::Value) -> Answer {
    Answer::Fixed(json_answer("200 OK", body))
}

/// No `tokenUrl`: the upstream's 401 names its Protected Resource Metadata (and a
/// scope), which names the authorization server, whose OpenID Connect metadata (the
/// OAuth one missing) names the token endpoint; the grant asks for the challenge's scope.
/// Without `resource_metadata` in the challenge, the well-known URIs are tried,
/// path-inserted first.
#[tokio::test]
async fn the_token_endpoint_is_discovered() {
    let (_gw, gw) = guarded_gateway("discovered").await;
    let (auth, auth_seen) = http_server(|head| {
        let line = head.lines().next().unwrap_or("");
        if line.starts_with("GET /.well-known/openid-configuration/tenant ") {
            let port = head
                .lines()
                .find_map(|l| l.strip_prefix("host: 127.0.0.1:"))
                .unwrap_or("0")
                .trim()
                .to_owned();
            json_doc(&json!({"issuer": format!("http://127.0.0.1:{port}/tenant"),
                "token_endpoint": format!("http://127.0.0.1:{port}/tenant/token")}))
        } else if line.starts_with("POST /tenant/token ") {
            json_doc(&json!({"access_token": TOKEN, "token_type": "Bearer", "expires_in": 60}))
        } else {
            not_found()
        }
    })
    .await;

    for in_challenge in [true, false] {
        let (front, front_seen) = http_server(move |head| {
            let line = head.lines().next().unwrap_or("");
            let me = head
                .lines()
                .find_map(|l| l.strip_prefix("host: 127.0.0.1:"))
                .unwrap_or("0")
                .trim()
                .to_owned();
            let prm = json!({"resource": format!("http://127.0.0.1:{me}/mcp"),
                "authorization_servers": [format!("http://127.0.0.1:{auth}/tenant")]});
            // The metadata is where the challenge says, or (without it) at the root
            // well-known URI.
            let metadata = if in_challenge {
                "GET /prm "
            } else {
                "GET /.well-known/oauth-protected-resource "
            };
            if line.starts_with(metadata) {
                json_doc(&prm)
            } else if line.starts_with("GET /") && !line.starts_with("GET /mcp") {
                not_found()
            } else if !head.to_ascii_lowercase().contains("\r\nauthorization: bearer") {
                let challenge = if in_challenge {
                    format!(r#"Bearer resource_metadata="http://127.0.0.1:{me}/prm", scope="mcp:all""#)
                } else {
                    "Bearer".to_owned()
                };
                Answer::Fixed(format!(
                    "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: {challenge}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                ))
            } else {
                Answer::Forward(gw)
            }
        })
        .await;
        let config = json!({"mcpServers": {"up": {"type": "http",
            "url": format!("http://127.0.0.1:{front}/mcp"),
            "mcpx": {"oauth": {"clientId": "mcpx", "clientSecret": "s"}}}}});
        let mut h = Host::start("oauth-discover", &config, R0618).await;
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
        let front_seen = front_seen.lock().unwrap().clone();
        let looked: Vec<&String> = front_seen
            .iter()
            .filter(|l| l.starts_with("GET /prm") || l.starts_with("GET /.well-known"))
            .collect();
        if in_challenge {
            assert_eq!(looked, ["GET /prm HTTP/1.1"], "{front_seen:?}");
        } else {
            assert_eq!(
                looked,
                [
                    "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1",
                    "GET /.well-known/oauth-protected-resource HTTP/1.1"
                ],
                "{front_seen:?}"
            );
        }
    }
    let auth_seen = auth_seen.lock().unwrap().clone();
    let lines: Vec<&str> = auth_seen
        .iter()
        .map(|l| l.split(" | ").next().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "GET /.well-known/oauth-authorization-server/tenant HTTP/1.1",
            "GET /.well-known/openid-configuration/tenant HTTP/1.1",
            "POST /tenant/token HTTP/1.1",
        ]
        .repeat(2),
        "each gateway discovers once and gets one token"
    );
    // The challenge's scope is asked for; without one, none.
    assert!(
        auth_seen[2].ends_with("&scope=mcp%3Aall"),
        "{}",
        auth_seen[2]
    );
    assert!(!auth_seen[5].contains("scope="), "{}", auth_seen[5]);
}
