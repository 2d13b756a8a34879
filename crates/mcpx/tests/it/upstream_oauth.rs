//! OAuth client credentials toward a Streamable HTTP upstream (the
//! `io.modelcontextprotocol/oauth-client-credentials` extension, client secret form):
//! mcpx gets a token from the configured token endpoint (`client_secret_basic`,
//! `grant_type=client_credentials`, `resource`, `scope`), sends it as a bearer token, and
//! on a 401 gets a new one and sends the request again; a refused grant is reported.
//! The upstream is `mcpx serve --http --token-file`, which takes one token.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};

use mcpx_testkit::http::{Answer, ScriptedHttp};
use serde_json::json;
use tokio::process::{Child, Command};

use crate::common;
use common::*;

const TOKEN: &str = "the-right-token-of-at-least-32-bytes";

/// `mcpx serve --demo --http` requiring [`TOKEN`].
async fn guarded_gateway(tag: &str) -> (Child, u16) {
    let dir = crate::scratch_dir(&format!("oauth-upstream-{tag}"));
    let file = dir.join("token");
    crate::write_token_file(&file, TOKEN);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args(["serve", "--demo", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&file)
        .env_remove("MCPX_SERVE_TOKEN")
        .stdout(Stdio::null());
    start_listening(cmd).await
}

/// A token endpoint answering its requests with `answers` in turn (the last one again
/// once they run out).
async fn token_endpoint(answers: Vec<Answer>) -> ScriptedHttp {
    let n = AtomicUsize::new(0);
    ScriptedHttp::start(move |_| {
        let i = n.fetch_add(1, Ordering::Relaxed);
        answers.get(i).or(answers.last()).unwrap().clone()
    })
    .await
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
    let tokens = token_endpoint(vec![
        Answer::json(
            "200 OK",
            &json!({"access_token": "stale", "token_type": "bearer", "expires_in": 3600}),
        ),
        Answer::json(
            "200 OK",
            &json!({"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600}),
        ),
    ])
    .await;
    let mut h = Host::start("oauth-front", &oauth_config(gw, tokens.port), R0618).await;
    h.initialize(json!({})).await;
    h.calls_simple_text("everything__test_simple_text").await;
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

    let seen = tokens.seen();
    assert_eq!(
        seen.len(),
        2,
        "one token, then one more after the 401: {seen:?}"
    );
    // base64 of `mcpx:pa+ss`: RFC 6749 §2.3.1 form-encodes the id and secret first, as
    // Appendix B says (a space as `+`; `-`, `.`, `_`, `*` as they are).
    let basic = "Basic bWNweDpwYStzcw==";
    let resource = format!("resource=http%3A%2F%2F127.0.0.1%3A{gw}%2Fmcp");
    for request in &seen {
        assert_eq!(request.line(), "POST /token HTTP/1.1", "{request:?}");
        assert_eq!(request.header("authorization"), Some(basic), "{request:?}");
        assert_eq!(
            request.header("content-type"),
            Some("application/x-www-form-urlencoded"),
            "{request:?}"
        );
        let body = &request.body;
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
    let tokens = token_endpoint(vec![Answer::json(
        "401 Unauthorized",
        &json!({"error": "invalid_client", "error_description": "unknown client"}),
    )])
    .await;
    let token_port = tokens.port;
    let line = unavailable_because("oauth-refused", &oauth_config(gw, token_port), &[]).await;
    assert!(
        line.contains(&format!(
            "oauth: the token endpoint http://127.0.0.1:{token_port}/token refused the client credentials (HTTP 401: invalid_client: unknown client)"
        )),
        "{line}"
    );
}

/// The port a request was sent to (its `Host`).
fn own_port(r: &mcpx_testkit::http::Request) -> String {
    r.header("host")
        .and_then(|h| h.strip_prefix("127.0.0.1:"))
        .unwrap_or("0")
        .to_owned()
}

/// No `tokenUrl`: the upstream's 401 names its Protected Resource Metadata (and a
/// scope), which names the authorization server, whose OpenID Connect metadata (the
/// OAuth one missing) names the token endpoint; the grant asks for the challenge's scope.
/// Without `resource_metadata` in the challenge, the well-known URIs are tried,
/// path-inserted first.
#[tokio::test]
async fn the_token_endpoint_is_discovered() {
    let (_gw, gw) = guarded_gateway("discovered").await;
    let auth_server = ScriptedHttp::start(|r| {
        let line = r.line();
        if line.starts_with("GET /.well-known/openid-configuration/tenant ") {
            let port = own_port(r);
            Answer::json(
                "200 OK",
                &json!({"issuer": format!("http://127.0.0.1:{port}/tenant"),
                "token_endpoint": format!("http://127.0.0.1:{port}/tenant/token")}),
            )
        } else if line.starts_with("POST /tenant/token ") {
            Answer::json(
                "200 OK",
                &json!({"access_token": TOKEN, "token_type": "Bearer", "expires_in": 60}),
            )
        } else {
            Answer::not_found()
        }
    })
    .await;
    let auth = auth_server.port;

    for in_challenge in [true, false] {
        let front_server = ScriptedHttp::start(move |r| {
            let line = r.line();
            let me = own_port(r);
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
                Answer::json("200 OK", &prm)
            } else if line.starts_with("GET /") && !line.starts_with("GET /mcp") {
                Answer::not_found()
            } else if !r
                .header("authorization")
                .is_some_and(|a| a.to_ascii_lowercase().starts_with("bearer "))
            {
                let challenge = if in_challenge {
                    format!(
                        r#"Bearer resource_metadata="http://127.0.0.1:{me}/prm", scope="mcp:all""#
                    )
                } else {
                    "Bearer".to_owned()
                };
                Answer::empty(
                    "401 Unauthorized",
                    &[&format!("WWW-Authenticate: {challenge}")],
                )
            } else {
                Answer::Forward(gw)
            }
        })
        .await;
        let front = front_server.port;
        let config = json!({"mcpServers": {"up": {"type": "http",
            "url": format!("http://127.0.0.1:{front}/mcp"),
            "mcpx": {"oauth": {"clientId": "mcpx", "clientSecret": "s"}}}}});
        let mut h = Host::start("oauth-discover", &config, R0618).await;
        h.initialize(json!({})).await;
        h.calls_simple_text("everything__test_simple_text").await;
        h.finish().await;
        let front_seen: Vec<String> = front_server
            .seen()
            .iter()
            .map(|r| r.line().to_owned())
            .collect();
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
    let auth_seen = auth_server.seen();
    let lines: Vec<&str> = auth_seen.iter().map(|r| r.line()).collect();
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
        auth_seen[2].body.ends_with("&scope=mcp%3Aall"),
        "{:?}",
        auth_seen[2]
    );
    assert!(!auth_seen[5].body.contains("scope="), "{:?}", auth_seen[5]);
}
