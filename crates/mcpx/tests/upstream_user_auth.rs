//! A user's authorization toward an HTTP upstream (the authorization-code grant, issue
//! #21), over real sockets and real processes: an authorization server and a protected
//! MCP upstream on 127.0.0.1 (one axum app, both counted), `mcpx auth login` through a
//! `$BROWSER` script that follows the authorization server's redirect to mcpx's
//! callback, `mcpx auth status`, the token store's modes, refresh at expiry (once for
//! 20 concurrent calls in one process; once for two processes), `invalid_grant`, an
//! HTTP+SSE upstream, and `mcpx auth logout`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};

mod common;
use common::*;

#[derive(Default)]
struct Counts {
    registrations: usize,
    authorizations: usize,
    code_grants: usize,
    refresh_grants: usize,
    refused_refreshes: usize,
}

#[derive(Default)]
struct As {
    port: u16,
    counts: Counts,
    /// Access tokens the upstream takes.
    valid: Vec<String>,
    /// Refresh tokens the token endpoint takes.
    refreshable: Vec<String>,
    /// The code challenge of the pending authorization.
    challenge: Option<String>,
    /// `expires_in` of the tokens the refresh grants give, in turn (the last again).
    refresh_lifetimes: Vec<u64>,
    /// What the authorization and token requests carried.
    resources: Vec<String>,
    next: usize,
    /// Whether the token endpoint refuses every refresh (invalid_grant).
    revoke_refresh: bool,
    /// The open HTTP+SSE stream, if any.
    sse: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// Requests to the HTTP+SSE upstream's endpoints that carried a good token.
    sse_authorized: usize,
}

type Shared = Arc<Mutex<As>>;

fn base(s: &As) -> String {
    format!("http://127.0.0.1:{}", s.port)
}

fn form(body: &[u8]) -> HashMap<String, String> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

fn json_answer(status: StatusCode, v: Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}

async fn handle(
    State(st): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let mut s = st.lock().unwrap();
    let b = base(&s);
    match (method.as_str(), path.as_str()) {
        ("GET", "/.well-known/oauth-protected-resource/sse") => json_answer(
            StatusCode::OK,
            json!({"resource": format!("{b}/sse"), "authorization_servers": [format!("{b}/as")],
                   "scopes_supported": ["mcp"]}),
        ),
        ("GET", "/sse") | ("POST", "/messages") => {
            let token = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_owned);
            if !token.is_some_and(|t| s.valid.contains(&t)) {
                let meta = format!("{b}/.well-known/oauth-protected-resource/sse");
                return (
                    StatusCode::UNAUTHORIZED,
                    [(
                        "www-authenticate",
                        format!(r#"Bearer resource_metadata="{meta}""#),
                    )],
                )
                    .into_response();
            }
            s.sse_authorized += 1;
            if method == Method::GET {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
                tx.send("event: endpoint\ndata: /messages\n\n".to_owned())
                    .unwrap();
                s.sse = Some(tx);
                let stream = futures_util::stream::unfold(rx, |mut rx| async move {
                    rx.recv()
                        .await
                        .map(|e| (Ok::<_, std::convert::Infallible>(Bytes::from(e)), rx))
                });
                return (
                    StatusCode::OK,
                    [("content-type", "text/event-stream")],
                    axum::body::Body::from_stream(stream),
                )
                    .into_response();
            }
            let req: Value = serde_json::from_slice(&body).unwrap_or_default();
            if let Some(answer) = answer_rpc(&req)
                && let Some(tx) = &s.sse
            {
                let _ = tx.send(format!("event: message\ndata: {answer}\n\n"));
            }
            StatusCode::ACCEPTED.into_response()
        }
        ("GET", "/.well-known/oauth-protected-resource/mcp") => json_answer(
            StatusCode::OK,
            json!({"resource": format!("{b}/mcp"), "authorization_servers": [format!("{b}/as")],
                   "scopes_supported": ["mcp"]}),
        ),
        ("GET", "/.well-known/oauth-authorization-server/as") => json_answer(
            StatusCode::OK,
            json!({
                "issuer": format!("{b}/as"),
                "authorization_endpoint": format!("{b}/as/authorize"),
                "token_endpoint": format!("{b}/as/token"),
                "registration_endpoint": format!("{b}/as/register"),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "authorization_response_iss_parameter_supported": true,
                "scopes_supported": ["mcp", "offline_access"],
            }),
        ),
        ("POST", "/as/register") => {
            s.counts.registrations += 1;
            let req: Value = serde_json::from_slice(&body).unwrap_or_default();
            assert_eq!(req["application_type"], "native", "{req}");
            json_answer(
                StatusCode::CREATED,
                json!({"client_id": "mcpx-client-1", "redirect_uris": req["redirect_uris"],
                       "token_endpoint_auth_method": "none"}),
            )
        }
        ("GET", "/as/authorize") => {
            s.counts.authorizations += 1;
            let q = form(uri.query().unwrap_or("").as_bytes());
            assert_eq!(q["code_challenge_method"], "S256", "{q:?}");
            assert_eq!(q["client_id"], "mcpx-client-1", "{q:?}");
            assert_eq!(q["scope"], "mcp offline_access", "{q:?}");
            s.resources.push(q["resource"].clone());
            s.challenge = Some(q["code_challenge"].clone());
            let to = format!(
                "{}?code=the-code&state={}&iss={}",
                q["redirect_uri"],
                url::form_urlencoded::byte_serialize(q["state"].as_bytes()).collect::<String>(),
                url::form_urlencoded::byte_serialize(format!("{b}/as").as_bytes())
                    .collect::<String>()
            );
            (StatusCode::FOUND, [("location", to)]).into_response()
        }
        ("POST", "/as/token") => {
            let f = form(&body);
            s.resources
                .push(f.get("resource").cloned().unwrap_or_default());
            let lifetime = match f.get("grant_type").map(String::as_str) {
                Some("authorization_code") => {
                    s.counts.code_grants += 1;
                    let verifier = f.get("code_verifier").cloned().unwrap_or_default();
                    let digest = ring_sha256(verifier.as_bytes());
                    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
                    if f.get("code").map(String::as_str) != Some("the-code")
                        || s.challenge.as_deref() != Some(challenge.as_str())
                    {
                        return json_answer(
                            StatusCode::BAD_REQUEST,
                            json!({"error": "invalid_grant"}),
                        );
                    }
                    // Already within mcpx's refresh margin: the first use refreshes.
                    1
                }
                Some("refresh_token") => {
                    let rt = f.get("refresh_token").cloned().unwrap_or_default();
                    if s.revoke_refresh || !s.refreshable.contains(&rt) {
                        s.counts.refused_refreshes += 1;
                        return json_answer(
                            StatusCode::BAD_REQUEST,
                            json!({"error": "invalid_grant", "error_description": "revoked"}),
                        );
                    }
                    s.counts.refresh_grants += 1;
                    let i = s.counts.refresh_grants - 1;
                    *s.refresh_lifetimes
                        .get(i)
                        .or(s.refresh_lifetimes.last())
                        .unwrap()
                }
                _ => {
                    return json_answer(
                        StatusCode::BAD_REQUEST,
                        json!({"error": "unsupported_grant_type"}),
                    );
                }
            };
            s.next += 1;
            let (at, rt) = (format!("at-{}", s.next), format!("rt-{}", s.next));
            s.valid.push(at.clone());
            s.refreshable = vec![rt.clone()];
            json_answer(
                StatusCode::OK,
                json!({"access_token": at, "token_type": "Bearer", "expires_in": lifetime,
                       "refresh_token": rt, "scope": "mcp offline_access"}),
            )
        }
        ("POST", "/mcp") => {
            let token = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_owned);
            if !token.is_some_and(|t| s.valid.contains(&t)) {
                let meta = format!("{b}/.well-known/oauth-protected-resource/mcp");
                return (
                    StatusCode::UNAUTHORIZED,
                    [(
                        "www-authenticate",
                        format!(r#"Bearer resource_metadata="{meta}""#),
                    )],
                )
                    .into_response();
            }
            let req: Value = serde_json::from_slice(&body).unwrap_or_default();
            let id = req.get("id").cloned();
            let result = match req["method"].as_str() {
                Some("initialize") => json!({"protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}}, "serverInfo": {"name": "locked", "version": "1"}}),
                Some("tools/list") => {
                    json!({"tools": [{"name": "hello", "inputSchema": {"type": "object"}}]})
                }
                Some("tools/call") => json!({"content": [{"type": "text", "text": "hi"}]}),
                Some("ping") => json!({}),
                _ => return StatusCode::ACCEPTED.into_response(),
            };
            match id {
                Some(id) => json_answer(
                    StatusCode::OK,
                    json!({"jsonrpc": "2.0", "id": id, "result": result}),
                ),
                None => StatusCode::ACCEPTED.into_response(),
            }
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The answer to a JSON-RPC request of the HTTP+SSE upstream's (none to a
/// notification).
fn answer_rpc(req: &Value) -> Option<Value> {
    let id = req.get("id").cloned()?;
    let result = match req["method"].as_str() {
        Some("initialize") => json!({"protocolVersion": req["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "locked", "version": "1"}}),
        Some("tools/list") => {
            json!({"tools": [{"name": "hello", "inputSchema": {"type": "object"}}]})
        }
        Some("tools/call") => json!({"content": [{"type": "text", "text": "hi"}]}),
        _ => json!({}),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn ring_sha256(b: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, b)
        .as_ref()
        .to_vec()
}

async fn server(refresh_lifetimes: Vec<u64>) -> Shared {
    let st: Shared = Arc::new(Mutex::new(As {
        refresh_lifetimes,
        ..As::default()
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    st.lock().unwrap().port = listener.local_addr().unwrap().port();
    let app = Router::new().fallback(handle).with_state(st.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    st
}

const BROWSER: &str = r#"#!/usr/bin/env python3
import sys, urllib.request, urllib.error
class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None
try:
    urllib.request.build_opener(NoRedirect).open(sys.argv[1], timeout=10)
except urllib.error.HTTPError as e:
    urllib.request.urlopen(e.headers["Location"], timeout=10).read()
"#;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Setup {
    dir: PathBuf,
    config: PathBuf,
    state: PathBuf,
    browser: PathBuf,
}

fn setup(tag: &str, port: u16) -> Setup {
    setup_as(tag, port, "http", "mcp")
}

fn setup_as(tag: &str, port: u16, kind: &str, path: &str) -> Setup {
    let dir = temp_dir(tag);
    let config = dir.join("mcpx.json");
    let cfg = json!({"mcpServers": {"up": {"type": kind,
        "url": format!("http://127.0.0.1:{port}/{path}"),
        "mcpx": {"protocol": "legacy", "oauth": {"callbackPort": free_port()}}}}});
    std::fs::write(&config, cfg.to_string()).unwrap();
    let browser = dir.join("browser.py");
    std::fs::write(&browser, BROWSER).unwrap();
    std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
    Setup {
        state: dir.join("state"),
        dir,
        config,
        browser,
    }
}

impl Setup {
    fn mcpx(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpx"));
        c.args(args)
            .arg("--config")
            .arg(&self.config)
            .env("XDG_STATE_HOME", &self.state)
            .env("XDG_CACHE_HOME", self.dir.join("cache"))
            .env("BROWSER", &self.browser)
            .kill_on_drop(true);
        c
    }

    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(Duration::from_secs(60), self.mcpx(args).output())
            .await
            .unwrap()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn store(&self) -> PathBuf {
        self.state.join("mcpx").join("oauth")
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn tool_call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "hello", "arguments": {}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_status_refresh_once_per_expiry_and_logout() {
    // Refreshes: at the gateway's start (64 s: within the 60 s margin four seconds later), at
    // the burst (64 s again), at the two processes (an hour).
    let st = server(vec![64, 64, 3600]).await;
    let port = st.lock().unwrap().port;
    let s = setup("user-auth", port);

    // Before a login: status says so; nothing is stored.
    let (ok, out, _) = s.run(&["auth", "status"]).await;
    assert!(
        ok && out.contains("needs login (`mcpx auth login up`)"),
        "{out}"
    );

    let (ok, out, err) = s.run(&["auth", "login", "up"]).await;
    assert!(ok, "{out}\n{err}");
    let b = format!("http://127.0.0.1:{port}");
    assert!(out.contains(&format!("authorized by {b}/as")), "{out}");
    // The URL is printed; no token ever is.
    assert!(err.contains(&format!("{b}/as/authorize?")), "{err}");
    assert!(!out.contains("at-1") && !err.contains("at-1") && !err.contains("rt-1"));
    {
        let a = st.lock().unwrap();
        assert_eq!(
            (
                a.counts.registrations,
                a.counts.authorizations,
                a.counts.code_grants
            ),
            (1, 1, 1)
        );
        // RFC 8707: the Protected Resource Metadata's resource, on both requests.
        assert_eq!(a.resources, [format!("{b}/mcp"), format!("{b}/mcp")]);
    }

    let (ok, out, _) = s.run(&["auth", "status"]).await;
    assert!(ok, "{out}");
    assert!(out.contains("authorized"), "{out}");
    assert!(out.contains(&format!("issuer {b}/as")), "{out}");
    assert!(out.contains("scope mcp offline_access"), "{out}");
    assert!(!out.contains("at-") && !out.contains("rt-"), "{out}");

    // The store: 0700 directories, 0600 files, the token in the tokens file only.
    let store = s.store();
    assert_eq!(mode(&store), 0o700);
    let mut files = 0;
    for sub in ["tokens", "clients", "upstreams"] {
        assert_eq!(mode(&store.join(sub)), 0o700, "{sub}");
        for e in std::fs::read_dir(store.join(sub)).unwrap() {
            let p = e.unwrap().path();
            assert_eq!(mode(&p), 0o600, "{p:?}");
            let text = std::fs::read_to_string(&p).unwrap();
            if sub != "tokens" {
                assert!(!text.contains("at-1"), "{p:?}: {text}");
            }
            files += 1;
        }
    }
    assert!(files >= 3, "{files}");

    // One gateway process: its start refreshes the expiring token (no login), then 20
    // concurrent calls at the next expiry share one refresh.
    let mut h = Host::start_env(
        "user-auth-gw",
        &serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap(),
        R1125,
        &[],
        &[("XDG_STATE_HOME", s.state.as_os_str())],
    )
    .await;
    h.initialize(json!({})).await;
    let (r, _) = h
        .request("tools/call", json!({"name": "hello", "arguments": {}}))
        .await;
    assert_eq!(text(result(&r, "tools/call")), "hi", "{r}");
    assert_eq!(st.lock().unwrap().counts.refresh_grants, 1);
    // The refreshed token (64 s) comes within mcpx's 60 s margin.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    for id in 1000..1020 {
        h.send(&tool_call(id)).await;
    }
    let mut answered = 0;
    while answered < 20 {
        let f = h.next_frame("a tools/call answer").await;
        if f["id"].as_u64().is_some_and(|i| (1000..1020).contains(&i)) {
            assert_eq!(text(&f["result"]), "hi", "{f}");
            answered += 1;
        }
    }
    assert_eq!(
        st.lock().unwrap().counts.refresh_grants,
        2,
        "20 calls, one refresh"
    );
    assert_eq!(st.lock().unwrap().counts.authorizations, 1, "no login");
    h.finish().await;

    // Two processes at the next expiry: one refresh between them (the store's lock,
    // the store re-read after taking it).
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let (a, b2) = tokio::join!(s.run(&["call", "hello"]), s.run(&["call", "hello"]));
    assert!(a.0 && a.1.contains("hi"), "{a:?}");
    assert!(b2.0 && b2.1.contains("hi"), "{b2:?}");
    {
        let a = st.lock().unwrap();
        assert_eq!(a.counts.refresh_grants, 3, "two processes, one refresh");
        assert_eq!(a.counts.authorizations, 1, "no login");
    }

    // Logout deletes the token set; status says a login is needed.
    let (ok, out, _) = s.run(&["auth", "logout", "up"]).await;
    assert!(ok && out.contains("logged out"), "{out}");
    let (ok, out, _) = s.run(&["auth", "status"]).await;
    assert!(ok && out.contains("needs login"), "{out}");
    assert_eq!(
        std::fs::read_dir(store.join("tokens"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "json")
            })
            .count(),
        0
    );
}

/// A refresh refused with `invalid_grant` deletes the stored token set (it is still
/// the refused one), and `mcpx serve`, which runs no login by itself, reports the
/// upstream unavailable with the reason and `mcpx auth login up`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_refresh_deletes_the_token_and_serve_names_the_login() {
    let st = server(vec![3600]).await;
    let port = st.lock().unwrap().port;
    let s = setup("user-auth-revoked", port);
    let (ok, out, err) = s.run(&["auth", "login", "up"]).await;
    assert!(ok, "{out}\n{err}");
    st.lock().unwrap().revoke_refresh = true;
    let line = unavailable_because(
        "user-auth-revoked-gw",
        &serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap(),
        &[("XDG_STATE_HOME", s.state.as_os_str())],
    )
    .await;
    assert!(line.contains("run `mcpx auth login up`"), "{line}");
    assert!(line.contains("revoked"), "{line}");
    assert!(!line.contains("rt-1") && !line.contains("at-1"), "{line}");
    assert_eq!(st.lock().unwrap().counts.refused_refreshes, 1);
    assert_eq!(
        st.lock().unwrap().counts.authorizations,
        1,
        "serve ran no login"
    );
    let (ok, out, _) = s.run(&["auth", "status"]).await;
    assert!(ok && out.contains("needs login"), "{out}");
}

/// An HTTP+SSE upstream gets the same as a Streamable HTTP one: `mcpx auth login` reads
/// the challenge of the stream's GET, and the stream's GET and every POST carry the
/// stored token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_upstream_is_authorized_the_same_way() {
    let st = server(vec![3600]).await;
    let port = st.lock().unwrap().port;
    let s = setup_as("user-auth-sse", port, "sse", "sse");
    let (ok, out, err) = s.run(&["auth", "login", "up"]).await;
    assert!(ok, "{out}\n{err}");
    let sse = format!("http://127.0.0.1:{port}/sse");
    assert_eq!(st.lock().unwrap().resources, [sse.clone(), sse]);
    let (ok, out, err) = s.run(&["call", "hello"]).await;
    assert!(ok && out.contains("hi"), "{out}\n{err}");
    let a = st.lock().unwrap();
    // The GET, and the POSTs of initialize, initialized, tools/list and tools/call.
    assert!(a.sse_authorized >= 5, "{}", a.sse_authorized);
    assert_eq!(a.counts.authorizations, 1, "no second login");
}

/// An upstream that needs no authorization is not stopped by a token store mcpx cannot
/// use (no state directory at all: neither HOME nor XDG_STATE_HOME): its calls go
/// without a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_state_directory_stops_no_open_upstream() {
    let (_ex, port) = example_http(&[]).await;
    let cfg = json!({"mcpServers": {"open": {"type": "http",
        "url": format!("http://127.0.0.1:{port}/mcp")}}});
    let dir = temp_dir("user-auth-nostate");
    let config = dir.join("mcpx.json");
    std::fs::write(&config, cfg.to_string()).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(["call", "test_simple_text", "--config"])
        .arg(&config)
        .env_remove("HOME")
        .env_remove("XDG_STATE_HOME")
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains(SIMPLE_TEXT),
        "{stdout}\n{stderr}"
    );
}

/// Two logins to one server at once: the second cannot bind the callback port, takes
/// that for the first's login, and waits for its tokens instead of starting a second
/// flow (one authorization at the server; both succeed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_login_waits_for_the_first() {
    let st = server(vec![3600]).await;
    let port = st.lock().unwrap().port;
    let s = setup("user-auth-twice", port);
    // The first's browser takes a while, so that the second starts meanwhile.
    let slow = s.dir.join("slow-browser.sh");
    std::fs::write(
        &slow,
        format!("#!/bin/sh\nsleep 2\nexec {} \"$1\"\n", s.browser.display()),
    )
    .unwrap();
    std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut first = s.mcpx(&["auth", "login", "up"]);
    first.env("BROWSER", &slow);
    let first = first.output();
    let second = async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        s.run(&["auth", "login", "up"]).await
    };
    let (first, second) = tokio::join!(first, second);
    let first = first.unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(second.0, "{}\n{}", second.1, second.2);
    assert!(second.2.contains("waiting for its result"), "{}", second.2);
    assert!(second.1.contains("authorized by"), "{}", second.1);
    assert_eq!(st.lock().unwrap().counts.authorizations, 1, "one flow");
}
