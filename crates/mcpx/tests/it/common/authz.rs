//! The authorization server and protected MCP upstream of the tests of a user's
//! authorization (issue #21): one axum app on 127.0.0.1 that counts what it is asked,
//! a `$BROWSER` script that follows the authorization server's redirect to mcpx's
//! callback, and a configuration for one upstream `up` with its own state directory.
//! Included with `#[path]` by the tests that need it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use parking_lot::Mutex;
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};

use super::common::temp_dir;

#[derive(Default)]
pub struct Counts {
    pub registrations: usize,
    pub authorizations: usize,
    pub code_grants: usize,
    pub refresh_grants: usize,
    pub refused_refreshes: usize,
}

#[derive(Default)]
pub struct As {
    pub port: u16,
    pub counts: Counts,
    /// Access tokens the upstream takes.
    pub valid: Vec<String>,
    /// Refresh tokens the token endpoint takes.
    pub refreshable: Vec<String>,
    /// The code challenge of the pending authorization.
    pub challenge: Option<String>,
    /// `expires_in` of the tokens the refresh grants give, in turn (the last again).
    pub refresh_lifetimes: Vec<u64>,
    /// What the authorization and token requests carried.
    pub resources: Vec<String>,
    pub next: usize,
    /// Whether the token endpoint refuses every refresh (invalid_grant).
    pub revoke_refresh: bool,
    /// The open HTTP+SSE stream, if any.
    pub sse: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// Requests to the HTTP+SSE upstream's endpoints that carried a good token.
    pub sse_authorized: usize,
}

pub type Shared = Arc<Mutex<As>>;

pub fn base(s: &As) -> String {
    format!("http://127.0.0.1:{}", s.port)
}

pub fn form(body: &[u8]) -> HashMap<String, String> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

pub fn json_answer(status: StatusCode, v: Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}

pub async fn handle(
    State(st): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let mut s = st.lock();
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
pub fn answer_rpc(req: &Value) -> Option<Value> {
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

pub fn ring_sha256(b: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, b)
        .as_ref()
        .to_vec()
}

pub async fn server(refresh_lifetimes: Vec<u64>) -> Shared {
    let st: Shared = Arc::new(Mutex::new(As {
        refresh_lifetimes,
        ..As::default()
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    st.lock().port = listener.local_addr().unwrap().port();
    let app = Router::new().fallback(handle).with_state(st.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    st
}

pub const BROWSER: &str = r#"#!/usr/bin/env python3
import sys, urllib.request, urllib.error
class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None
try:
    urllib.request.build_opener(NoRedirect).open(sys.argv[1], timeout=10)
except urllib.error.HTTPError as e:
    urllib.request.urlopen(e.headers["Location"], timeout=10).read()
"#;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Setup {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub state: PathBuf,
    pub browser: PathBuf,
}

pub fn setup(tag: &str, port: u16) -> Setup {
    setup_as(tag, port, "http", "mcp")
}

pub fn setup_as(tag: &str, port: u16, kind: &str, path: &str) -> Setup {
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
    pub fn mcpx(&self, args: &[&str]) -> tokio::process::Command {
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

    pub async fn run(&self, args: &[&str]) -> (bool, String, String) {
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

    pub fn store(&self) -> PathBuf {
        self.state.join("mcpx").join("oauth")
    }
}

pub fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

pub fn tool_call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "hello", "arguments": {}}})
}
