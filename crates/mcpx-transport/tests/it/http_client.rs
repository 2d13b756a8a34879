//! The Streamable HTTP client (both eras) against small axum servers on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use parking_lot::Mutex;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use futures_util::stream;
use mcpx_protocol::header::{ParamHeader, encode_value};
use mcpx_protocol::jsonrpc::Kind;
use mcpx_protocol::{Frame, Id};
use mcpx_transport::TransportError;
use mcpx_transport::streamable_http::client::{HttpClientConfig, HttpUpstream};
use mcpx_transport::upstream::Upstream;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Value,
}

#[derive(Clone)]
struct St {
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Told of each request `seen` records.
    arrived: Arc<tokio::sync::Notify>,
    dropped: mpsc::UnboundedSender<()>,
}

struct DropGuard(mpsc::UnboundedSender<()>);
impl Drop for DropGuard {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

fn sse(chunks: Vec<String>) -> Response {
    let s = stream::iter(
        chunks
            .into_iter()
            .map(|c| Ok::<_, Infallible>(Bytes::from(c))),
    );
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(s))
        .unwrap()
}

fn json(v: Value) -> Response {
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(v.to_string()))
        .unwrap()
}

fn result(id: &Value, r: Value) -> Value {
    serde_json::json!({"jsonrpc":"2.0","id":id,"result":r})
}

async fn handle(
    State(st): State<St>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = uri.path().to_owned();
    st.seen.lock().push(Seen {
        method: method.clone(),
        path: path.clone(),
        headers: headers.clone(),
        body: body.clone(),
    });
    st.arrived.notify_waiters();
    let id = body.get("id").cloned().unwrap_or(Value::Null);
    let rpc_method = body.get("method").and_then(Value::as_str).unwrap_or("");
    match (method.as_str(), path.as_str()) {
        ("POST", "/json" | "/expiring") if rpc_method == "initialize" => {
            let v = body["params"]["protocolVersion"].clone();
            let mut r = json(result(
                &id,
                serde_json::json!({"protocolVersion": v, "capabilities": {}, "serverInfo": {"name":"t","version":"1"}}),
            ));
            r.headers_mut()
                .insert("mcp-session-id", "sess-1".parse().unwrap());
            r
        }
        ("POST", "/expiring") => StatusCode::NOT_FOUND.into_response(),
        ("POST", "/json") if id.is_null() => StatusCode::ACCEPTED.into_response(),
        ("POST", "/json") => json(result(&id, serde_json::json!({"ok": true}))),
        ("DELETE", "/json") => StatusCode::OK.into_response(),
        ("POST", "/sse") => sse(vec![
            ": keep-alive comment\n\n".to_owned(),
            format!(
                "data: {}\n\n",
                serde_json::json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}})
            ),
            format!(
                "event: message\ndata: {}\n\n",
                result(&id, serde_json::json!({"done": 1}))
            ),
        ]),
        ("POST", "/broken") => {
            *LAST_ID.lock() = Some(id);
            sse(vec!["id: e1\nretry: 10\ndata: \n\n".to_owned()])
        }
        ("GET", "/broken") => {
            let id = LAST_ID.lock().clone().unwrap();
            sse(vec![format!(
                "id: e2\ndata: {}\n\n",
                result(&id, serde_json::json!({"resumed": true}))
            )])
        }
        ("POST", "/modern400") => Response::builder()
            .status(400)
            .header("content-type", "application/json")
            .body(Body::from(
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"Header mismatch"}}"#,
            ))
            .unwrap(),
        ("POST", "/html400") => Response::builder()
            .status(400)
            .header("content-type", "text/html")
            .body(Body::from("<html><body>Bad Request</body></html>"))
            .unwrap(),
        ("POST", "/hang") => {
            let guard = DropGuard(st.dropped.clone());
            let first = format!(
                "data: {}\n\n",
                serde_json::json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}})
            );
            let s = stream::iter(vec![Ok::<_, Infallible>(Bytes::from(first))])
                .chain(stream::pending())
                .map(move |x| {
                    let _ = &guard;
                    x
                });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(s))
                .unwrap()
        }
        ("GET", "/gs") => sse(vec![format!(
            "id: g1\ndata: {}\n\n",
            serde_json::json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})
        )]),
        // A JSON body holding a notification before the response and one after it (a
        // batch).
        ("POST", "/json-batch") => Response::builder()
            .header("content-type", "application/json; charset=utf-8")
            .body(Body::from(
                serde_json::json!([
                    {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}},
                    result(&id, serde_json::json!({"ok": 2})),
                    {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"after"}},
                ])
                .to_string(),
            ))
            .unwrap(),
        // A JSON body answering some other request.
        ("POST", "/json-other") => json(result(&serde_json::json!(999), serde_json::json!({}))),
        // A redirect to a path that answers: mcpx must not follow it.
        ("POST", "/moved") => Response::builder()
            .status(StatusCode::TEMPORARY_REDIRECT)
            .header("location", "/json")
            .body(Body::empty())
            .unwrap(),
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

static LAST_ID: Mutex<Option<Value>> = Mutex::new(None);

struct Server {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    arrived: Arc<tokio::sync::Notify>,
    dropped: mpsc::UnboundedReceiver<()>,
}

impl Server {
    fn seen(&self, path: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .iter()
            .filter(|s| s.path == path)
            .cloned()
            .collect()
    }

    /// Waits (at most 10 s) until `n` requests to `path` have come; those seen by then.
    async fn seen_until(&self, path: &str, n: usize) -> Vec<Seen> {
        let waiting = async {
            loop {
                let next = self.arrived.notified();
                if self.seen(path).len() >= n {
                    return;
                }
                next.await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(10), waiting).await;
        self.seen(path)
    }
}

async fn server() -> Server {
    let (tx, rx) = mpsc::unbounded_channel();
    let st = St {
        seen: Arc::default(),
        arrived: Arc::default(),
        dropped: tx,
    };
    let seen = st.seen.clone();
    let arrived = st.arrived.clone();
    let app = Router::new().fallback(handle).with_state(st);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server {
        base: format!("http://{addr}"),
        seen,
        arrived,
        dropped: rx,
    }
}

fn client(url: String) -> HttpUpstream {
    let mut cfg = HttpClientConfig::new(url);
    cfg.request_timeout = Duration::from_secs(5);
    HttpUpstream::new(cfg).unwrap().0
}

fn req(id: i64, method: &str, params: &str) -> Frame {
    let p = RawValue::from_string(params.to_owned()).unwrap();
    Frame::request(&Id::Number(id), method, Some(&p))
}

fn init(id: i64, version: &str) -> Frame {
    req(
        id,
        "initialize",
        &format!(
            r#"{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}"#
        ),
    )
}

fn h<'a>(s: &'a Seen, name: &str) -> Option<&'a str> {
    s.headers.get(name).and_then(|v| v.to_str().ok())
}

async fn call(up: &HttpUpstream, frame: Frame) -> Result<Frame, TransportError> {
    tokio::time::timeout(Duration::from_secs(10), async {
        up.request(frame).await?.response(|_| {}).await
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn legacy_2025_06_18_session_and_version_headers() {
    let srv = server().await;
    let up = client(format!("{}/json", srv.base));
    let r = call(&up, init(1, "2025-06-18")).await.unwrap();
    assert_eq!(r.kind(), Kind::Result);
    assert_eq!(up.session_id().as_deref(), Some("sess-1"));
    assert_eq!(up.negotiated_version().as_deref(), Some("2025-06-18"));
    up.send(Frame::notification("notifications/initialized", None))
        .await
        .unwrap();
    let r = call(&up, req(2, "tools/list", "{}")).await.unwrap();
    assert_eq!(r.id(), Some(&Id::Number(2)));
    let seen = srv.seen("/json");
    assert_eq!(seen[0].body["method"], "initialize");
    assert_eq!(h(&seen[0], "mcp-session-id"), None);
    assert_eq!(h(&seen[0], "content-type"), Some("application/json"));
    assert_eq!(
        h(&seen[0], "accept"),
        Some("application/json, text/event-stream")
    );
    for s in &seen[1..] {
        assert_eq!(h(s, "mcp-session-id"), Some("sess-1"));
        assert_eq!(h(s, "mcp-protocol-version"), Some("2025-06-18"));
        assert_eq!(h(s, "mcp-method"), None);
    }
    // A server without a GET stream answers 405.
    assert!(!up.open_server_stream().await.unwrap());
    up.close().await;
    let seen = srv.seen("/json");
    let delete = seen.last().unwrap();
    assert_eq!(delete.method, Method::DELETE);
    assert_eq!(h(delete, "mcp-session-id"), Some("sess-1"));
}

#[tokio::test]
async fn legacy_2025_03_26_sends_no_version_header() {
    let srv = server().await;
    let up = client(format!("{}/json", srv.base));
    call(&up, init(1, "2025-03-26")).await.unwrap();
    call(&up, req(2, "tools/list", "{}")).await.unwrap();
    let seen = srv.seen("/json");
    assert_eq!(h(&seen[1], "mcp-session-id"), Some("sess-1"));
    assert_eq!(h(&seen[1], "mcp-protocol-version"), None, "register B-C13");
}

#[tokio::test]
async fn modern_headers_from_the_frame() {
    let srv = server().await;
    let up = client(format!("{}/json", srv.base));
    // A legacy session on the same client must not leak into modern requests.
    call(&up, init(1, "2025-11-25")).await.unwrap();
    up.set_tool_param_headers(
        "wetter-☀",
        vec![ParamHeader {
            name: "Region".to_owned(),
            path: vec!["region".to_owned()],
        }],
    );
    let frame = req(
        2,
        "tools/call",
        r#"{"name":"wetter-☀","arguments":{"region":"eu-west"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#,
    );
    call(&up, frame).await.unwrap();
    let seen = srv.seen("/json");
    let s = &seen[1];
    assert_eq!(h(s, "mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(h(s, "mcp-method"), Some("tools/call"));
    let name = h(s, "mcp-name").unwrap();
    assert!(name.starts_with("=?base64?"), "{name}");
    assert_eq!(name, encode_value("wetter-☀"));
    assert_eq!(h(s, "mcp-param-region"), Some("eu-west"));
    assert_eq!(h(s, "mcp-session-id"), None);
    assert_eq!(h(s, "last-event-id"), None);
}

#[tokio::test]
async fn sse_related_frames_then_response() {
    let srv = server().await;
    let up = client(format!("{}/sse", srv.base));
    let mut ex = up
        .request(req(7, "tools/call", r#"{"name":"x"}"#))
        .await
        .unwrap();
    let first = ex.next().await.unwrap().unwrap();
    assert_eq!(first.method(), Some("notifications/progress"));
    let second = ex.next().await.unwrap().unwrap();
    assert_eq!(second.kind(), Kind::Result);
    assert_eq!(second.id(), Some(&Id::Number(7)));
    assert!(ex.next().await.is_none());
}

#[tokio::test]
async fn legacy_stream_resumes_with_last_event_id() {
    let srv = server().await;
    let up = client(format!("{}/broken", srv.base));
    let r = call(&up, req(3, "tools/call", r#"{"name":"x"}"#))
        .await
        .unwrap();
    assert!(r.as_str().contains("resumed"), "{r}");
    let seen = srv.seen("/broken");
    let get = seen.iter().find(|s| s.method == Method::GET).unwrap();
    assert_eq!(h(get, "last-event-id"), Some("e1"));
    assert_eq!(h(get, "accept"), Some("text/event-stream"));
}

#[tokio::test]
async fn modern_stream_is_never_resumed() {
    let srv = server().await;
    let up = client(format!("{}/broken", srv.base));
    let frame = req(
        3,
        "tools/call",
        r#"{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#,
    );
    let err = call(&up, frame).await.unwrap_err();
    let TransportError::Closed { detail } = err else {
        panic!("{err:?}")
    };
    assert!(
        detail.contains("stream broke before the response"),
        "{detail}"
    );
    assert!(srv.seen("/broken").iter().all(|s| s.method == Method::POST));
}

#[tokio::test]
async fn expired_session_is_reported_and_cleared() {
    let srv = server().await;
    let up = client(format!("{}/expiring", srv.base));
    call(&up, init(1, "2025-11-25")).await.unwrap();
    let err = call(&up, req(2, "tools/list", "{}")).await.unwrap_err();
    assert_eq!(err, TransportError::SessionExpired);
    assert_eq!(up.session_id(), None);
    // Without a session, a 404 is just an HTTP error.
    let err = call(&up, req(3, "tools/list", "{}")).await.unwrap_err();
    assert_eq!(err.http_status(), Some(404));
}

#[tokio::test]
async fn error_bodies_and_modern_recognition() {
    let srv = server().await;
    let up = client(format!("{}/modern400", srv.base));
    let err = call(&up, req(1, "server/discover", "{}"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            TransportError::Http {
                status: 400,
                code: Some(-32020),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_recognised_modern_error());

    let up = client(format!("{}/html400", srv.base));
    let err = call(&up, init(1, "2025-11-25")).await.unwrap_err();
    let TransportError::Http { status, body, code } = &err else {
        panic!("{err:?}")
    };
    assert_eq!((*status, *code), (400, None));
    assert!(body.contains("Bad Request"));
    assert!(!err.is_recognised_modern_error());

    let up = client(format!("{}/nothing", srv.base));
    let err = call(&up, init(1, "2025-11-25")).await.unwrap_err();
    assert_eq!(err.http_status(), Some(405));
}

#[tokio::test]
async fn dropping_the_exchange_closes_the_stream() {
    let mut srv = server().await;
    let up = client(format!("{}/hang", srv.base));
    let frame = req(
        1,
        "tools/call",
        r#"{"name":"slow","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#,
    );
    let mut ex = up.request(frame).await.unwrap();
    let first = ex.next().await.unwrap().unwrap();
    assert_eq!(first.method(), Some("notifications/progress"));
    drop(ex);
    tokio::time::timeout(Duration::from_secs(5), srv.dropped.recv())
        .await
        .expect("the server saw the stream closed")
        .unwrap();
}

#[tokio::test]
async fn get_stream_feeds_unsolicited() {
    let srv = server().await;
    let mut cfg = HttpClientConfig::new(format!("{}/gs", srv.base));
    cfg.max_resume_attempts = 1;
    let (up, mut un) = HttpUpstream::new(cfg).unwrap();
    assert!(up.open_server_stream().await.unwrap());
    let f = tokio::time::timeout(Duration::from_secs(5), un.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(f.method(), Some("notifications/tools/list_changed"));
    // The stream ended; the reopen carries the last event id.
    let gets = srv.seen_until("/gs", 2).await;
    assert!(gets.len() >= 2, "{gets:?}");
    assert_eq!(h(&gets[1], "last-event-id"), Some("g1"));
}

/// `https://` is taken (TLS: crates/mcpx/tests/it/upstream_tls.rs); any other scheme is
/// refused when the upstream is built, naming the two it could be.
#[tokio::test]
async fn only_http_and_https_urls_are_taken() {
    assert!(HttpUpstream::new(HttpClientConfig::new("https://127.0.0.1:1/mcp")).is_ok());
    let err = HttpUpstream::new(HttpClientConfig::new("ws://127.0.0.1:1/mcp")).unwrap_err();
    let TransportError::Io(msg) = err else {
        panic!()
    };
    assert!(
        msg.contains(r#"unsupported URL scheme "ws""#)
            && msg.contains("only http:// and https:// are supported"),
        "{msg}"
    );
}

#[tokio::test]
async fn configured_headers_go_on_every_request_and_bad_ones_are_refused_up_front() {
    let srv = server().await;
    let mut cfg = HttpClientConfig::new(format!("{}/json", srv.base));
    cfg.headers = vec![
        ("Authorization".to_owned(), "Bearer t0k".to_owned()),
        ("X-Trace".to_owned(), "a".to_owned()),
        ("X-Trace".to_owned(), "b".to_owned()),
    ];
    let up = HttpUpstream::new(cfg).unwrap().0;
    call(&up, init(1, "2025-06-18")).await.unwrap();
    call(&up, req(2, "tools/list", "{}")).await.unwrap();
    up.close().await;
    let seen = srv.seen("/json");
    assert_eq!(seen.len(), 3, "{seen:?}");
    for s in &seen {
        assert_eq!(h(s, "authorization"), Some("Bearer t0k"), "{}", s.method);
        let traces: Vec<_> = s.headers.get_all("x-trace").iter().collect();
        assert_eq!(traces, ["a", "b"], "both values, in order");
        assert_eq!(h(s, "host"), Some(srv.base.trim_start_matches("http://")));
    }

    // Not valid HTTP: refused when the upstream is built, naming the header, rather
    // than failing every request.
    for (name, value) in [("bad name", "v"), ("X-Ok", "line\nbreak")] {
        let mut cfg = HttpClientConfig::new(format!("{}/json", srv.base));
        cfg.headers = vec![(name.to_owned(), value.to_owned())];
        let Err(TransportError::Io(msg)) = HttpUpstream::new(cfg) else {
            panic!("{name:?}: {value:?} was accepted")
        };
        assert!(
            msg.contains(&format!("configured header {name:?}")),
            "{msg}"
        );
    }
}

/// The transport reports a redirection with its `Location` and does not follow it
/// (mcpx-client's `connect` decides: crates/mcpx/tests/it/upstream_redirect.rs).
#[tokio::test]
async fn a_redirect_is_an_answer_not_followed() {
    let srv = server().await;
    let up = client(format!("{}/moved", srv.base));
    let err = call(&up, req(1, "tools/list", "{}")).await.unwrap_err();
    assert!(
        matches!(&err, TransportError::Redirected { status: 307, location } if location == "/json"),
        "{err:?}"
    );
    assert_eq!(srv.seen("/moved").len(), 1);
    assert!(srv.seen("/json").is_empty(), "the redirect was followed");
}

#[tokio::test]
async fn an_unreachable_upstream_is_named_in_the_error() {
    // A port nothing listens on: bound, then closed.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let up = client(url.clone());
    let err = call(&up, req(1, "tools/list", "{}")).await.unwrap_err();
    let TransportError::Io(msg) = err else {
        panic!("{err:?}")
    };
    assert!(
        msg.starts_with(&format!("POST to the upstream ({url}): ")),
        "{msg}"
    );
    assert!(msg.contains("refused"), "{msg}");
}

#[tokio::test]
async fn credentials_in_the_url_are_sent_as_basic_authorization() {
    let srv = server().await;
    let hostport = srv.base.trim_start_matches("http://").to_owned();
    // Percent-encoded in the URL, sent decoded: "user:p@ss:w".
    let up = client(format!("http://user:p%40ss%3Aw@{hostport}/json"));
    call(&up, req(1, "tools/list", "{}")).await.unwrap();
    let seen = srv.seen("/json");
    assert_eq!(h(&seen[0], "authorization"), Some("Basic dXNlcjpwQHNzOnc="));
    assert_eq!(
        h(&seen[0], "host"),
        Some(hostport.as_str()),
        "no credentials in Host"
    );

    // A configured Authorization header wins: the request carries it alone.
    let mut cfg = HttpClientConfig::new(format!("http://user:pw@{hostport}/json"));
    cfg.headers = vec![("Authorization".to_owned(), "Bearer t0k".to_owned())];
    let up = HttpUpstream::new(cfg).unwrap().0;
    call(&up, req(2, "tools/list", "{}")).await.unwrap();
    let seen = srv.seen("/json");
    let auth: Vec<_> = seen[1].headers.get_all("authorization").iter().collect();
    assert_eq!(auth, ["Bearer t0k"]);
}

#[tokio::test]
async fn a_json_answer_is_read_whole_and_what_else_it_holds_is_unsolicited() {
    let srv = server().await;
    let mut cfg = HttpClientConfig::new(format!("{}/json-batch", srv.base));
    cfg.request_timeout = Duration::from_secs(5);
    let (up, mut unsolicited) = HttpUpstream::new(cfg).unwrap();
    let r = call(&up, req(7, "tools/list", "{}")).await.unwrap();
    assert_eq!(r.id(), Some(&Id::Number(7)));
    assert_eq!(r.result(), Some(r#"{"ok":2}"#));
    let note = unsolicited.recv().await.unwrap();
    assert_eq!(note.method(), Some("notifications/message"));
    // The one after the response is not dropped either.
    let after = unsolicited.try_recv().unwrap();
    assert!(after.params().unwrap().contains("after"), "{after}");

    // A body without the response is an error, not a wait.
    let up = client(format!("{}/json-other", srv.base));
    let err = call(&up, req(8, "tools/list", "{}")).await.unwrap_err();
    assert!(
        matches!(&err, TransportError::Protocol(m) if m.contains("holds no response")),
        "{err:?}"
    );

    // A body over the frame limit is refused, not decoded.
    let mut cfg = HttpClientConfig::new(format!("{}/json", srv.base));
    cfg.limits.max_frame_bytes = 16;
    let up = HttpUpstream::new(cfg).unwrap().0;
    let err = call(&up, req(9, "tools/list", "{}")).await.unwrap_err();
    assert!(
        matches!(&err, TransportError::Protocol(m) if m.contains("exceeds the limit of 16 bytes")),
        "{err:?}"
    );
}
