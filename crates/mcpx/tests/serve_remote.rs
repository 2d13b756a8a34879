//! `mcpx serve --http` beyond its defaults: over TLS (`--tls-cert`, `--tls-key`),
//! requiring a bearer token (`--token-file`, RFC 6750 challenges), and accepting more
//! `Host` names (`--allow-host`). The TLS case is checked end to end with mcpx's own
//! client: a second gateway fronts the first as an `https://` upstream.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::process::Stdio;

use mcpx_testkit::tls::Identity;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

mod common;
use common::*;

const TOKEN: &str = "s3cret-token";

/// `mcpx serve --demo --http 127.0.0.1:0` with `args`; its port.
async fn gateway(args: &[&str]) -> (Child, u16) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args(["serve", "--demo", "--http", "127.0.0.1:0"])
        .args(args)
        .env_remove("MCPX_SERVE_TOKEN")
        .stdout(Stdio::null());
    start_listening(cmd).await
}

/// The files of a TLS identity and a token, in a test directory.
struct Files {
    dir: PathBuf,
}

impl Files {
    fn new(tag: &str) -> Files {
        let dir = mcpx_testkit::scratch::dir(tag);
        let id = Identity::new();
        std::fs::write(dir.join("cert.pem"), &id.cert_pem).unwrap();
        std::fs::write(dir.join("key.pem"), &id.key_pem).unwrap();
        std::fs::write(dir.join("ca.pem"), &id.ca_pem).unwrap();
        std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
        Files { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }
}

/// A gateway over TLS requiring a token, fronted by a second gateway that reaches it
/// as an `https://` upstream with the token: the call goes through both. With a wrong
/// token the second gateway reports the first's 401 challenge.
#[tokio::test]
async fn a_tls_listener_requiring_a_token_serves_a_gateway_in_front() {
    let files = Files::new("serve-tls");
    let (_first, port) = gateway(&[
        "--tls-cert",
        &files.path("cert.pem"),
        "--tls-key",
        &files.path("key.pem"),
        "--token-file",
        &files.path("token"),
    ])
    .await;
    let ca = files.dir.join("ca.pem");
    let upstream = |token: &str| {
        json!({"mcpServers": {"first": {"type": "http",
            "url": format!("https://127.0.0.1:{port}/mcp"),
            "headers": {"Authorization": format!("Bearer {token}")}}}})
    };
    let mut h = Host::start_env(
        "serve-tls-front",
        &upstream(TOKEN),
        R0618,
        &[],
        &[("SSL_CERT_FILE", ca.as_os_str())],
    )
    .await;
    h.initialize(json!({})).await;
    h.calls_simple_text("everything__test_simple_text").await;
    h.finish().await;

    // A wrong token: the first gateway's challenge, reported by the second.
    let line = unavailable_because(
        "serve-tls-wrong",
        &upstream("wrong"),
        &[("SSL_CERT_FILE", ca.as_os_str())],
    )
    .await;
    assert!(
        line.contains("401") && line.contains("invalid_token"),
        "{line}"
    );
}

/// The token on plain HTTP, every endpoint: no credentials → 401 with a bare
/// `Bearer` challenge, a wrong token → 401 `invalid_token`, the right one (scheme in
/// any case) → served. Each 401 carries an id-less JSON-RPC error.
#[tokio::test]
async fn a_token_is_required_on_every_endpoint() {
    let files = Files::new("serve-token");
    let (_gw, port) = gateway(&["--token-file", &files.path("token")]).await;
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},
        "clientInfo":{"name":"t","version":"1"}}});
    for (method, path) in [
        ("POST", "/mcp"),
        ("GET", "/mcp"),
        ("GET", "/sse"),
        ("POST", "/messages"),
    ] {
        for (auth, challenge) in [
            (None, r#"Bearer realm="mcpx""#),
            (
                Some("Bearer nope"),
                r#"Bearer realm="mcpx", error="invalid_token""#,
            ),
            (
                Some("Basic czNjcmV0LXRva2Vu"),
                r#"Bearer realm="mcpx", error="invalid_token""#,
            ),
        ] {
            let mut req = client
                .request(method.parse().unwrap(), format!("{base}{path}"))
                .header("Accept", "application/json, text/event-stream")
                .header("Content-Type", "application/json");
            if let Some(a) = auth {
                req = req.header("Authorization", a);
            }
            if method == "POST" {
                req = req.body(init.to_string());
            }
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status(), 401, "{method} {path} {auth:?}");
            assert_eq!(
                resp.headers()["www-authenticate"].to_str().unwrap(),
                challenge,
                "{method} {path} {auth:?}"
            );
            let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
            assert_eq!(body["error"]["code"], -32600, "{body}");
            assert!(body.get("id").is_none_or(Value::is_null), "{body}");
        }
    }
    let resp = client
        .post(format!("{base}/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("Authorization", format!("bearer {TOKEN}"))
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(
        text.contains("\"protocolVersion\":\"2025-06-18\""),
        "{text}"
    );
}

/// `--allow-host`: a name beyond the loopback ones is accepted; others still get 403.
#[tokio::test]
async fn more_hosts_can_be_allowed() {
    let (_gw, port) = gateway(&["--allow-host", "mcpx.internal.example"]).await;
    let client = reqwest::Client::new();
    let discover = json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{
        "io.modelcontextprotocol/protocolVersion":"2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":{},
        "io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}});
    let send = |host: &'static str| {
        client
            .post(format!("http://127.0.0.1:{port}/mcp"))
            .header("Host", host)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "server/discover")
            .body(discover.to_string())
            .send()
    };
    assert_eq!(
        send("mcpx.internal.example:8443").await.unwrap().status(),
        200
    );
    assert_eq!(send("elsewhere.example").await.unwrap().status(), 403);
}

/// CORS, for browser clients: an allowed `Origin`'s preflight gets 204 with the methods
/// and the MCP headers it asked for (others left out, no token asked for); its requests'
/// answers name it in `Access-Control-Allow-Origin` and expose the session id and the
/// challenge, a 401 included; a foreign origin gets 403 without CORS headers; a request
/// without `Origin` gets none.
#[tokio::test]
async fn browsers_of_allowed_origins_get_cors() {
    let files = Files::new("serve-cors");
    let (_gw, port) = gateway(&["--token-file", &files.path("token")]).await;
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let origin = "http://localhost:6274";
    let get =
        |r: &reqwest::Response, h: &str| r.headers().get(h).map(|v| v.to_str().unwrap().to_owned());

    let pre = client
        .request(reqwest::Method::OPTIONS, &url)
        .header("Origin", origin)
        .header("Access-Control-Request-Method", "POST")
        .header(
            "Access-Control-Request-Headers",
            "content-type, mcp-protocol-version, Mcp-Param-Region, authorization, x-other",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 204);
    assert_eq!(
        get(&pre, "access-control-allow-origin").as_deref(),
        Some(origin)
    );
    assert_eq!(
        get(&pre, "access-control-allow-headers").as_deref(),
        Some("content-type, mcp-protocol-version, Mcp-Param-Region, authorization")
    );
    assert_eq!(
        get(&pre, "access-control-allow-methods").as_deref(),
        Some("GET, POST, DELETE")
    );
    assert!(get(&pre, "access-control-max-age").is_some());

    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},
        "clientInfo":{"name":"t","version":"1"}}});
    let post = |auth: Option<String>, origin: Option<&'static str>| {
        let mut req = client
            .post(&url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(init.to_string());
        if let Some(a) = auth {
            req = req.header("Authorization", a);
        }
        if let Some(o) = origin {
            req = req.header("Origin", o);
        }
        req.send()
    };
    let r = post(Some(format!("Bearer {TOKEN}")), Some(origin))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        get(&r, "access-control-allow-origin").as_deref(),
        Some(origin)
    );
    assert!(
        get(&r, "access-control-expose-headers")
            .unwrap()
            .contains("Mcp-Session-Id"),
        "{:?}",
        r.headers()
    );
    assert!(get(&r, "mcp-session-id").is_some());
    assert_eq!(get(&r, "vary").as_deref(), Some("Origin"));

    // A 401 the page can read.
    let r = post(None, Some(origin)).await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        get(&r, "access-control-allow-origin").as_deref(),
        Some(origin)
    );
    assert!(
        get(&r, "access-control-expose-headers")
            .unwrap()
            .contains("WWW-Authenticate")
    );

    // No Origin: no CORS headers.
    let r = post(Some(format!("Bearer {TOKEN}")), None).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(get(&r, "access-control-allow-origin").is_none());

    // A foreign origin: 403, nothing for the page to read.
    let pre = client
        .request(reqwest::Method::OPTIONS, &url)
        .header("Origin", "http://evil.example")
        .header("Access-Control-Request-Method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 403);
    assert!(get(&pre, "access-control-allow-origin").is_none());
    let r = post(Some(format!("Bearer {TOKEN}")), Some("http://evil.example"))
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(get(&r, "access-control-allow-origin").is_none());
}
