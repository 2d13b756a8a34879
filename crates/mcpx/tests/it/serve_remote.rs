//! `mcpx serve --http` beyond its defaults: over TLS (`--tls-cert`, `--tls-key`),
//! requiring a bearer token (`--token-file`, RFC 6750 challenges), and accepting more
//! `Host` names (`--allow-host`). The TLS case is checked end to end with mcpx's own
//! client: a second gateway fronts the first as an `https://` upstream.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::process::Stdio;

use mcpx_testkit::tap::tap;
use mcpx_testkit::tls::Identity;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::common;
use common::*;

const TOKEN: &str = "s3cret-token-of-at-least-32-bytes";

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
        let dir = crate::scratch_dir(tag);
        let id = Identity::new();
        std::fs::write(dir.join("cert.pem"), &id.cert_pem).unwrap();
        std::fs::write(dir.join("key.pem"), &id.key_pem).unwrap();
        std::fs::write(dir.join("ca.pem"), &id.ca_pem).unwrap();
        crate::write_token_file(&dir.join("token"), &format!("{TOKEN}\n"));
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
/// any case) → served. A POST's 401 carries a JSON-RPC error with the refused
/// request's id; a GET's, naming no revision, is plain text (issue #24, 11).
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
            let plain = resp.headers()["content-type"] == "text/plain; charset=utf-8";
            let text = resp.text().await.unwrap();
            if method == "GET" {
                assert!(plain && text.contains("Authorization: Bearer"), "{text}");
                continue;
            }
            let body: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(body["error"]["code"], -32600, "{body}");
            assert_eq!(body["id"], 1, "{body}");
            tap().validate_frame(R0618, &text).unwrap();
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

/// `mcpx serve --config FILE --http 127.0.0.1:0` with `args`, FILE holding `mcpx` as its
/// top-level block and one upstream (`mcpx example-server`); its port.
async fn gateway_with(dir: &std::path::Path, mcpx: Value, args: &[&str]) -> (Child, u16) {
    let config = json!({
        "mcpServers": {"everything": {"command": env!("CARGO_BIN_EXE_mcpx"), "args": ["example-server"]}},
        "mcpx": mcpx,
    });
    let file = dir.join("config.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args(["serve", "--config"])
        .arg(&file)
        .args(["--http", "127.0.0.1:0"])
        .args(args)
        .env_remove("MCPX_SERVE_TOKEN")
        .stdout(Stdio::null());
    start_listening(cmd).await
}

/// Issue #24, 10: with several tokens (`--token-file`, one a line, `#` comments and
/// blank lines skipped), each legacy session is bound to the token that opened it.
/// Another accepted token gets 404 in it, as for an unknown session: its requests, a
/// GET stream (plain or resuming with `Last-Event-ID`, which would take the owner's
/// stream over) and a DELETE. The owner's session and stream go on; the same holds
/// for an HTTP+SSE session.
#[tokio::test]
async fn legacy_sessions_are_bound_to_the_token_that_opened_them() {
    let dir = crate::scratch_dir("serve-bound");
    let tokens = dir.join("tokens");
    crate::write_token_file(
        &tokens,
        "# one token a host\nalpha-token-of-at-least-32-bytes\n\n  beta-token-of-at-least-32-bytes!  \n",
    );
    let (_gw, port) = gateway(&["--token-file", &tokens.to_string_lossy()]).await;
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let (alpha, beta) = (
        "Bearer alpha-token-of-at-least-32-bytes",
        "Bearer beta-token-of-at-least-32-bytes!",
    );
    let req = |method: reqwest::Method, auth: &str, sid: Option<&str>| {
        let mut b = client
            .request(method, &url)
            .header("Authorization", auth)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .header("MCP-Protocol-Version", "2025-06-18");
        if let Some(sid) = sid {
            b = b.header("Mcp-Session-Id", sid);
        }
        b
    };
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},
        "clientInfo":{"name":"t","version":"1"}}});
    let resp = req(reqwest::Method::POST, alpha, None)
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "the first token is accepted");
    let sid = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    let resp = req(reqwest::Method::POST, alpha, Some(&sid))
        .body(initialized.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    // The owner's GET stream.
    let stream = req(reqwest::Method::GET, alpha, Some(&sid))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);

    // The other token: 404 for a request, as for an unknown session.
    let list = json!({"jsonrpc":"2.0","id":2,"method":"tools/list"});
    let resp = req(reqwest::Method::POST, beta, Some(&sid))
        .body(list.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let text = resp.text().await.unwrap();
    let unknown = req(
        reqwest::Method::POST,
        beta,
        Some("0123456789abcdef0123456789abcdef"),
    )
    .body(list.to_string())
    .send()
    .await
    .unwrap();
    assert_eq!(
        unknown.text().await.unwrap(),
        text,
        "the same answer as no session"
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["id"], 2, "{text}");
    tap().validate_frame(R0618, &text).unwrap();
    // Its GET streams, resuming or not, and its DELETE.
    for last in [None, Some("0-0")] {
        let mut b = req(reqwest::Method::GET, beta, Some(&sid));
        if let Some(l) = last {
            b = b.header("Last-Event-ID", l);
        }
        let resp = b.send().await.unwrap();
        assert_eq!(resp.status(), 404, "GET, Last-Event-ID {last:?}");
    }
    let resp = req(reqwest::Method::DELETE, beta, Some(&sid))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);

    // The owner's session goes on, its stream still its own.
    let resp = req(reqwest::Method::POST, alpha, Some(&sid))
        .body(list.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    tap()
        .validate_response(R0618, "tools/list", &resp.text().await.unwrap())
        .unwrap();
    let resp = req(reqwest::Method::GET, alpha, Some(&sid))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 409, "the owner's stream is still open");
    drop(stream);
    let resp = req(reqwest::Method::DELETE, alpha, Some(&sid))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);

    // HTTP+SSE: the POSTs of another token find no session.
    let sse = client
        .get(format!("http://127.0.0.1:{port}/sse"))
        .header("Authorization", alpha)
        .header("Accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status(), 200);
    let mut body = sse.bytes_stream();
    let mut seen = String::new();
    let endpoint = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        use futures_util::StreamExt;
        loop {
            seen.push_str(std::str::from_utf8(&body.next().await.unwrap().unwrap()).unwrap());
            if let Some(line) = seen.lines().find_map(|l| l.strip_prefix("data: ")) {
                return line.to_owned();
            }
        }
    })
    .await
    .unwrap();
    let post = |auth: &'static str| {
        client
            .post(format!("http://127.0.0.1:{port}{endpoint}"))
            .header("Authorization", auth)
            .header("Content-Type", "application/json")
            .body(init.to_string())
            .send()
    };
    let resp = post(beta).await.unwrap();
    assert_eq!(resp.status(), 404);
    let v: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(v["id"], 1, "{v}");
    assert_eq!(post(alpha).await.unwrap().status(), 202);
}

/// Issue #24, 9: the header limits are settings (`mcpx.limits.maxHeaderCount`,
/// `maxHeaderBytes`), and a request over one gets 431 with a JSON-RPC error naming
/// the refused request.
#[tokio::test]
async fn header_limits_are_settings_and_answered_with_a_body() {
    let dir = crate::scratch_dir("serve-header-limits");
    let limits = json!({"limits": {"maxHeaderCount": 20, "maxHeaderBytes": 2048}});
    let (_gw, port) = gateway_with(&dir, limits, &[]).await;
    let client = reqwest::Client::new();
    let list = json!({"jsonrpc":"2.0","id":3,"method":"tools/list"});
    let send = |pad: usize, each: usize| {
        let mut b = client
            .post(format!("http://127.0.0.1:{port}/mcp"))
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .header("MCP-Protocol-Version", "2025-06-18");
        for i in 0..pad {
            b = b.header(format!("x-pad-{i}"), "p".repeat(each));
        }
        b.body(list.to_string()).send()
    };
    for (pad, each, limit) in [(30, 1, "at most 20"), (2, 3000, "at most 2048")] {
        let resp = send(pad, each).await.unwrap();
        assert_eq!(resp.status(), 431, "{pad} × {each}");
        let text = resp.text().await.unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["id"], 3, "{text}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(limit),
            "{text}"
        );
        tap().validate_frame(R0618, &text).unwrap();
    }
    // Within them: served (400, a legacy request without a session).
    assert_eq!(send(5, 10).await.unwrap().status(), 400);
}
