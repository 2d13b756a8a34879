//! The HTTP server end to end: a real listener on 127.0.0.1:0 serving the echo service,
//! driven by reqwest and raw TCP. Every JSON-RPC frame the server sends is validated
//! with the schema tap against the receiving client's revision.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[path = "../../examples/echo/service.rs"]
mod echo;

use parking_lot::Mutex;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use mcpx_protocol::codec::{Limits, parse_frame};
use mcpx_protocol::header::{self, ParamHeader};
use mcpx_protocol::{Frame, Revision};
use mcpx_testkit::tap::tap;
use mcpx_transport::streamable_http::{HttpServerConfig, serve};
use mcpx_transport::{Incoming, Peer, RequestCtx, Service};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::wait;

const R0326: Revision = Revision::V2025_03_26;
const R0618: Revision = Revision::V2025_06_18;
const R1125: Revision = Revision::V2025_11_25;
const R2026: Revision = Revision::V2026_07_28;

/// The echo service, recording each request's outcome, the last legacy peer and the
/// sessions closed; plus a `big` tool: one progress notification, then the echo of
/// `size` bytes (for the SSE event size limit).
#[derive(Default)]
struct Recorder {
    echo: echo::Echo,
    /// (method, cancelled) per finished request.
    done: Mutex<Vec<(String, bool)>>,
    peer: Mutex<Option<Peer>>,
    /// Session ids `session_closed` was called with.
    closed: Mutex<Vec<String>>,
    /// Told of each entry in `done`.
    finished: tokio::sync::Notify,
    /// The method of each request the service was given, as it began.
    started: Mutex<Vec<String>>,
    /// Told of each entry in `started`.
    began: tokio::sync::Notify,
}

impl Recorder {
    /// Waits (at most 10 s) until `f` holds for the finished requests; whether it did.
    async fn done_until(&self, f: impl Fn(&[(String, bool)]) -> bool) -> bool {
        let waiting = async {
            loop {
                let next = self.finished.notified();
                if f(&self.done.lock()) {
                    return;
                }
                next.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .is_ok()
    }

    /// Waits (at most 10 s) until `n` requests for `method` have begun; whether they did.
    async fn started_until(&self, method: &str, n: usize) -> bool {
        let waiting = async {
            loop {
                let next = self.began.notified();
                let count = |s: &[String]| s.iter().filter(|m| *m == method).count();
                if count(&self.started.lock()) >= n {
                    return;
                }
                next.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .is_ok()
    }
}

impl Service for Recorder {
    async fn request(&self, mut req: Incoming, ctx: RequestCtx) -> Frame {
        let token = ctx.cancelled().clone();
        let method = req.frame.method().unwrap_or_default().to_owned();
        self.started.lock().push(method.clone());
        self.began.notify_waiters();
        let params: Value = req
            .frame
            .params()
            .map(|p| serde_json::from_str(p).unwrap())
            .unwrap_or(Value::Null);
        if method == "tools/call" && params["name"] == "big" {
            let p = json!({"progressToken": "big", "progress": 1});
            let raw = serde_json::value::RawValue::from_string(p.to_string()).unwrap();
            ctx.notify(Frame::notification("notifications/progress", Some(&raw)))
                .await
                .unwrap();
            let size = params["arguments"]["size"].as_u64().unwrap() as usize;
            let mut body: Value = serde_json::from_str(req.frame.as_str()).unwrap();
            body["params"]["name"] = json!("echo");
            body["params"]["arguments"] = json!({"text": "x".repeat(size)});
            req.frame = parse_frame(body.to_string(), &Limits::default()).unwrap();
        }
        let r = self.echo.request(req, ctx).await;
        self.done.lock().push((method, token.is_cancelled()));
        self.finished.notify_waiters();
        r
    }
    async fn notification(&self, n: Incoming, peer: Option<Peer>) {
        if peer.is_some() {
            *self.peer.lock() = peer.clone();
        }
        self.echo.notification(n, peer).await;
    }
    fn session_closed(&self, peer: &Peer) {
        let sid = peer.session_id().unwrap_or_default().to_owned();
        self.closed.lock().push(sid);
    }
    fn param_headers(&self) -> mcpx_transport::ParamHeaders {
        self.echo.param_headers()
    }
}

struct Server {
    addr: SocketAddr,
    http: reqwest::Client,
    svc: Arc<Recorder>,
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn config() -> HttpServerConfig {
    HttpServerConfig {
        keep_alive: Duration::from_millis(200),
        header_timeout: Duration::from_secs(2),
        body_timeout: Duration::from_millis(300),
        shutdown_grace: Duration::from_millis(100),
        max_body_bytes: 64 * 1024,
        ..HttpServerConfig::default()
    }
}

async fn start_with(config: HttpServerConfig) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let svc = Arc::new(Recorder::default());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, svc.clone(), config, stop.clone()));
    Server {
        addr,
        http: reqwest::Client::new(),
        svc,
        stop,
    }
}

async fn start() -> Server {
    start_with(config()).await
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn post(&self, body: impl Into<String>) -> reqwest::RequestBuilder {
        self.http
            .post(self.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.into())
    }

    /// A legacy POST in a session; `header` is the MCP-Protocol-Version to send.
    fn legacy(&self, sid: &str, header: Option<Revision>, body: Value) -> reqwest::RequestBuilder {
        let mut b = self.post(body.to_string()).header("mcp-session-id", sid);
        if let Some(r) = header {
            b = b.header("mcp-protocol-version", r.as_str());
        }
        b
    }

    /// initialize + notifications/initialized; returns the session id.
    async fn initialize(&self, rev: Revision) -> String {
        let resp = self
            .post(
                json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion": rev.as_str(), "capabilities": {"roots": {}},
                "clientInfo": {"name":"t","version":"1"}}})
                .to_string(),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(content_type(&resp), "application/json");
        let sid = resp
            .headers()
            .get("mcp-session-id")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(sid.len(), 32);
        assert!(sid.bytes().all(|b| b.is_ascii_hexdigit()));
        let text = resp.text().await.unwrap();
        tap().validate_response(rev, "initialize", &text).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["result"]["protocolVersion"], rev.as_str());
        let resp = self
            .legacy(
                &sid,
                header_for(rev),
                json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 202);
        assert!(resp.bytes().await.unwrap().is_empty());
        sid
    }

    /// A modern POST with the headers a 2026-07-28 client sends.
    fn modern(&self, body: &Value) -> reqwest::RequestBuilder {
        let text = body.to_string();
        let frame = parse_frame(text.clone(), &Limits::default()).unwrap();
        let mut b = self.post(text);
        for (k, v) in mcpx_protocol::header::build(&frame, R2026.as_str(), |_| Vec::new()) {
            b = b.header(k.as_ref(), v);
        }
        b
    }
}

/// 2025-03-26 clients send no MCP-Protocol-Version (B-C8); later ones do.
fn header_for(rev: Revision) -> Option<Revision> {
    (rev != R0326).then_some(rev)
}

fn content_type(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

fn modern_req(id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name":"t","version":"1"}
    });
    json!({"jsonrpc":"2.0","id":id,"method":method,"params":params})
}

/// Checks an HTTP error answer: status and JSON-RPC code; validates the body for
/// `rev` (id-less bodies only where the revision allows them, A-C4).
async fn expect_error(resp: reqwest::Response, status: u16, code: i64, rev: Revision) -> Value {
    assert_eq!(resp.status(), status);
    let text = resp.text().await.unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["code"], code, "{text}");
    if v.get("id").is_some() || rev.facts().error_id_optional {
        tap().validate_frame(rev, &text).unwrap();
    }
    v
}

#[derive(Debug, Default)]
struct Event {
    event: Option<String>,
    id: Option<String>,
    data: String,
}

struct Sse {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    buf: String,
    comments: usize,
}

impl Sse {
    fn new(resp: reqwest::Response) -> Self {
        assert_eq!(content_type(&resp), "text/event-stream");
        assert_eq!(resp.headers()["cache-control"], "no-cache");
        assert_eq!(resp.headers()["x-accel-buffering"], "no");
        Sse {
            body: Box::pin(resp.bytes_stream()),
            buf: String::new(),
            comments: 0,
        }
    }

    /// The next event (comments counted and skipped); `None` at the end.
    async fn next(&mut self) -> Option<Event> {
        tokio::time::timeout(Duration::from_secs(3), self.next_inner())
            .await
            .expect("an SSE event within 3 s")
    }

    /// Reads until a keep-alive comment comes (at most 3 s); an event first panics.
    async fn keep_alive(&mut self) {
        let seen = self.comments;
        let reading = async {
            while self.comments == seen {
                while let Some(i) = self.buf.find("\n\n") {
                    let block: String = self.buf.drain(..i + 2).collect();
                    let lines: Vec<&str> = block.lines().filter(|l| !l.is_empty()).collect();
                    assert!(
                        lines.iter().all(|l| l.starts_with(':')),
                        "an event on a quiet stream: {block:?}"
                    );
                    self.comments += lines.len();
                }
                if self.comments > seen {
                    break;
                }
                match self.body.next().await {
                    Some(Ok(b)) => self.buf.push_str(std::str::from_utf8(&b).unwrap()),
                    _ => panic!("the stream ended before a keep-alive comment"),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(3), reading)
            .await
            .expect("a keep-alive comment within 3 s");
    }

    async fn next_inner(&mut self) -> Option<Event> {
        loop {
            while let Some(i) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..i + 2).collect();
                let mut ev = Event::default();
                let mut data = Vec::new();
                let mut any = false;
                for line in block.lines() {
                    if line.starts_with(':') {
                        self.comments += 1;
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                        any = true;
                    } else if let Some(v) = line.strip_prefix("id:") {
                        ev.id = Some(v.trim().to_owned());
                        any = true;
                    } else if let Some(v) = line.strip_prefix("event:") {
                        ev.event = Some(v.trim().to_owned());
                        any = true;
                    }
                }
                if any {
                    ev.data = data.join("\n");
                    return Some(ev);
                }
            }
            match self.body.next().await {
                Some(Ok(b)) => self.buf.push_str(std::str::from_utf8(&b).unwrap()),
                _ => return None,
            }
        }
    }
}

#[tokio::test]
async fn legacy_sessions_in_each_revision() {
    let s = start().await;
    for rev in [R0326, R0618, R1125] {
        let sid = s.initialize(rev).await;
        let h = header_for(rev);
        let resp = s
            .legacy(
                &sid,
                h,
                json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(content_type(&resp), "application/json");
        tap()
            .validate_response(rev, "tools/list", &resp.text().await.unwrap())
            .unwrap();
        let resp = s
            .legacy(
                &sid,
                h,
                json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
                       "params":{"name":"echo","arguments":{"text":"hi"}}}),
            )
            .send()
            .await
            .unwrap();
        let text = resp.text().await.unwrap();
        tap().validate_response(rev, "tools/call", &text).unwrap();
        assert!(text.contains("\"hi\""));

        // Unknown session: 404. No session: 400.
        let resp = s
            .legacy(
                "00ff",
                h,
                json!({"jsonrpc":"2.0","id":3,"method":"tools/list"}),
            )
            .send()
            .await
            .unwrap();
        expect_error(resp, 404, -32600, rev).await;
        let resp = s
            .post(json!({"jsonrpc":"2.0","id":4,"method":"tools/list"}).to_string())
            .send()
            .await
            .unwrap();
        expect_error(resp, 400, -32600, rev).await;

        // DELETE: 204, then the session is gone.
        let del = || {
            s.http
                .delete(s.url("/mcp"))
                .header("mcp-session-id", sid.as_str())
        };
        assert_eq!(del().send().await.unwrap().status(), 204);
        assert_eq!(del().send().await.unwrap().status(), 404);
        let resp = s
            .legacy(
                &sid,
                h,
                json!({"jsonrpc":"2.0","id":5,"method":"tools/list"}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404);
    }
}

#[tokio::test]
async fn get_stream_priming_notify_conflict_and_replay() {
    let s = start().await;
    let sid = s.initialize(R1125).await;
    let get = |last: Option<&str>| {
        let mut b = s
            .http
            .get(s.url("/mcp"))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", sid.as_str())
            .header("mcp-protocol-version", R1125.as_str());
        if let Some(l) = last {
            b = b.header("last-event-id", l);
        }
        b
    };
    let resp = get(None).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut sse = Sse::new(resp);
    // 2025-11-25: the priming event (an id and empty data) comes first.
    let prime = sse.next().await.unwrap();
    assert_eq!(prime.id.as_deref(), Some("0-0"));
    assert_eq!(prime.data, "");
    // A second GET while one is open: 409.
    assert_eq!(get(None).send().await.unwrap().status(), 409);

    let peer = s.svc.peer.lock().clone().unwrap();
    assert_eq!(peer.revision(), R1125);
    assert_eq!(peer.session_id(), Some(sid.as_str()));
    let changed = Frame::notification("notifications/tools/list_changed", None);
    peer.notify(changed.clone()).await.unwrap();
    let ev = sse.next().await.unwrap();
    assert_eq!(ev.id.as_deref(), Some("0-1"));
    tap().validate_frame(R1125, &ev.data).unwrap();
    // Quiet streams get keep-alive comments.
    sse.keep_alive().await;
    peer.notify(changed.clone()).await.unwrap();
    let ev = sse.next().await.unwrap();
    assert_eq!(ev.id.as_deref(), Some("0-2"));
    assert!(sse.comments >= 1, "no keep-alive comment");
    drop(sse);

    // Sent while disconnected: buffered, replayed after Last-Event-ID. The server
    // sees the close when it reads it: until then a GET is the second one, a 409.
    peer.notify(changed.clone()).await.unwrap();
    peer.notify(changed).await.unwrap();
    let resp = wait::poll_every(
        Duration::from_secs(3),
        Duration::from_millis(20),
        async || {
            let resp = get(Some("0-1")).send().await.unwrap();
            (resp.status() != 409).then_some(resp)
        },
    )
    .await
    .expect("the closed GET stream was still open after 3 s");
    assert_eq!(resp.status(), 200);
    let mut sse = Sse::new(resp);
    for want in ["0-2", "0-3", "0-4"] {
        let ev = sse.next().await.unwrap();
        assert_eq!(ev.id.as_deref(), Some(want));
        tap().validate_frame(R1125, &ev.data).unwrap();
    }

    // GET without a session: 405; unknown session: 404.
    let resp = s
        .http
        .get(s.url("/mcp"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    let resp = s
        .http
        .get(s.url("/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", "abcd")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}

#[tokio::test]
async fn ask_travels_on_the_post_stream_and_the_answer_completes_it() {
    let s = start().await;
    let sid = s.initialize(R0618).await;
    let resp = s
        .legacy(
            &sid,
            Some(R0618),
            json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask","arguments":{}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut sse = Sse::new(resp);
    let ev = sse.next().await.unwrap();
    assert!(ev.id.is_some(), "legacy stream events carry ids");
    tap().validate_frame(R0618, &ev.data).unwrap();
    let req: Value = serde_json::from_str(&ev.data).unwrap();
    assert_eq!(req["method"], "roots/list");
    let answer =
        json!({"jsonrpc":"2.0","id":req["id"],"result":{"roots":[{"uri":"file:///w","name":"w"}]}});
    let resp = s.legacy(&sid, Some(R0618), answer).send().await.unwrap();
    assert_eq!(resp.status(), 202);
    let ev = sse.next().await.unwrap();
    tap()
        .validate_response(R0618, "tools/call", &ev.data)
        .unwrap();
    assert!(ev.data.contains("file:///w"));
    assert!(sse.next().await.is_none(), "the response ends the stream");
}

#[tokio::test]
async fn legacy_progress_stream_primes_and_disconnect_does_not_cancel() {
    let s = start().await;
    let sid = s.initialize(R1125).await;
    let call = |id: i64, steps: u64| {
        s.legacy(
            &sid,
            Some(R1125),
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                   "params":{"name":"slow","arguments":{"steps":steps},"_meta":{"progressToken":"p"}}}),
        )
    };
    let mut sse = Sse::new(call(1, 2).send().await.unwrap());
    let prime = sse.next().await.unwrap();
    assert_eq!(prime.data, "");
    let p = sse.next().await.unwrap();
    assert!(p.id.is_some());
    assert!(p.data.contains("notifications/progress"));
    tap().validate_frame(R1125, &p.data).unwrap();
    tap()
        .validate_frame(R1125, &sse.next().await.unwrap().data)
        .unwrap();
    let last = sse.next().await.unwrap();
    tap()
        .validate_response(R1125, "tools/call", &last.data)
        .unwrap();

    // Closing the stream mid-call does not cancel (B-C6).
    let mut sse = Sse::new(call(2, 4).send().await.unwrap());
    sse.next().await.unwrap();
    sse.next().await.unwrap();
    drop(sse);
    // The call goes on to its end.
    let calls = |d: &[(String, bool)]| d.iter().filter(|(m, _)| m == "tools/call").count();
    s.svc.done_until(|d| calls(d) == 2).await;
    let done = s.svc.done.lock().clone();
    assert!(
        done.iter().filter(|(m, c)| m == "tools/call" && !c).count() == 2,
        "{done:?}"
    );
}

#[tokio::test]
async fn batches_only_in_2025_03_26() {
    let s = start().await;
    let sid = s.initialize(R0326).await;
    let batch = json!([
        {"jsonrpc":"2.0","id":1,"method":"tools/list"},
        {"jsonrpc":"2.0","method":"notifications/roots/list_changed"},
        {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}}
    ]);
    let resp = s.legacy(&sid, None, batch.clone()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let arr: Vec<Value> = resp.json_value().await;
    assert_eq!(arr.len(), 2);
    for r in &arr {
        let method = if r["id"] == 1 {
            "tools/list"
        } else {
            "tools/call"
        };
        tap()
            .validate_response(R0326, method, &r.to_string())
            .unwrap();
    }
    let notes = json!([{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]);
    let resp = s.legacy(&sid, None, notes).send().await.unwrap();
    assert_eq!(resp.status(), 202);

    let sid = s.initialize(R0618).await;
    let resp = s.legacy(&sid, Some(R0618), batch).send().await.unwrap();
    expect_error(resp, 400, -32600, R0618).await;
}

trait JsonValue {
    async fn json_value<T: serde::de::DeserializeOwned>(self) -> T;
}

impl JsonValue for reqwest::Response {
    async fn json_value<T: serde::de::DeserializeOwned>(self) -> T {
        serde_json::from_str(&self.text().await.unwrap()).unwrap()
    }
}

#[tokio::test]
async fn modern_requests_json_and_errors() {
    let s = start().await;
    let resp = s
        .modern(&modern_req(1, "tools/list", json!({})))
        .header("mcp-session-id", "ignored")
        .header("last-event-id", "0-3")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(content_type(&resp), "application/json");
    assert!(resp.headers().get("mcp-session-id").is_none());
    tap()
        .validate_response(R2026, "tools/list", &resp.text().await.unwrap())
        .unwrap();
    let resp = s
        .modern(&modern_req(2, "server/discover", json!({})))
        .send()
        .await
        .unwrap();
    tap()
        .validate_response(R2026, "server/discover", &resp.text().await.unwrap())
        .unwrap();

    let call = modern_req(
        3,
        "tools/call",
        json!({"name":"echo","arguments":{"text":"x"}}),
    );
    let raw = |headers: &[(&str, &str)]| {
        let mut b = s
            .post(call.to_string())
            .header("mcp-protocol-version", "2026-07-28");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b
    };
    // Mcp-Method missing or wrong, Mcp-Name missing or wrong: 400 -32020.
    for hs in [
        vec![("mcp-name", "echo")],
        vec![("mcp-method", "tools/list"), ("mcp-name", "echo")],
        vec![("mcp-method", "tools/call")],
        vec![("mcp-method", "tools/call"), ("mcp-name", "slow")],
        vec![
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?c2xvdw==?="),
        ],
    ] {
        let resp = raw(&hs).send().await.unwrap();
        expect_error(resp, 400, -32020, R2026).await;
    }
    // The Base64 form of the right name is accepted.
    let resp = raw(&[
        ("mcp-method", "tools/call"),
        ("mcp-name", "=?base64?ZWNobw==?="),
    ])
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    tap()
        .validate_response(R2026, "tools/call", &resp.text().await.unwrap())
        .unwrap();

    // Unsupported version: 400 -32022.
    let resp = s
        .post(modern_req(4, "tools/list", json!({})).to_string())
        .header("mcp-protocol-version", "2099-01-01")
        .header("mcp-method", "tools/list")
        .send()
        .await
        .unwrap();
    expect_error(resp, 400, -32022, R2026).await;
    // Missing _meta: 400 -32602.
    let resp = s
        .post(json!({"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}).to_string())
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .send()
        .await
        .unwrap();
    expect_error(resp, 400, -32602, R2026).await;
    // Methods 2026-07-28 lacks: 404 -32601 (H10), never reaching the service.
    let before = s.svc.done.lock().len();
    for m in ["initialize", "ping", "no/such"] {
        let resp = s.modern(&modern_req(6, m, json!({}))).send().await.unwrap();
        expect_error(resp, 404, -32601, R2026).await;
    }
    assert_eq!(s.svc.done.lock().len(), before);
    // GET and DELETE: 405.
    for m in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let resp = s
            .http
            .request(m, s.url("/mcp"))
            .header("mcp-protocol-version", "2026-07-28")
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 405);
    }
    // A notification: 202.
    let n = json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,
        "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}});
    let resp = s.modern(&n).send().await.unwrap();
    assert_eq!(resp.status(), 202);
}

#[tokio::test]
async fn modern_progress_stream_and_close_cancels() {
    let s = start().await;
    let slow = |id: i64, steps: u64| {
        let mut req = modern_req(
            id,
            "tools/call",
            json!({"name":"slow","arguments":{"steps":steps}}),
        );
        req["params"]["_meta"]["progressToken"] = json!(id);
        s.modern(&req)
    };
    let mut sse = Sse::new(slow(1, 2).send().await.unwrap());
    for _ in 0..2 {
        let ev = sse.next().await.unwrap();
        assert!(ev.id.is_none(), "no event ids in 2026-07-28");
        assert!(ev.data.contains("notifications/progress"));
        tap().validate_frame(R2026, &ev.data).unwrap();
    }
    let ev = sse.next().await.unwrap();
    tap()
        .validate_response(R2026, "tools/call", &ev.data)
        .unwrap();
    assert!(sse.next().await.is_none());

    let mut sse = Sse::new(slow(2, 40).send().await.unwrap());
    sse.next().await.unwrap();
    drop(sse);
    let cancelled = |d: &[(String, bool)]| d.contains(&("tools/call".into(), true));
    s.svc.done_until(cancelled).await;
    let done = s.svc.done.lock().clone();
    assert!(done.contains(&("tools/call".into(), true)), "{done:?}");

    // Without a progress token the answer would be JSON: dropping the connection
    // while waiting for it cancels too.
    let req = modern_req(
        3,
        "tools/call",
        json!({"name":"slow","arguments":{"steps":40}}),
    );
    let r = s
        .modern(&req)
        .timeout(Duration::from_millis(150))
        .send()
        .await;
    assert!(r.is_err());
    let cancelled = |d: &[(String, bool)]| {
        d.iter()
            .filter(|d| **d == ("tools/call".into(), true))
            .count()
    };
    s.svc.done_until(|d| cancelled(d) >= 2).await;
    let done = s.svc.done.lock().clone();
    assert_eq!(
        done.iter()
            .filter(|d| **d == ("tools/call".into(), true))
            .count(),
        2,
        "{done:?}"
    );
}

#[tokio::test]
async fn http_sse_transport() {
    let s = start().await;
    let resp = s
        .http
        .get(s.url("/sse"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut sse = Sse::new(resp);
    let ep = sse.next().await.unwrap();
    assert_eq!(ep.event.as_deref(), Some("endpoint"));
    assert!(ep.data.starts_with("/messages?sessionId="));
    let post = |body: Value| {
        s.http
            .post(s.url(&ep.data))
            .header("content-type", "application/json")
            .body(body.to_string())
    };
    let rev = Revision::V2024_11_05;
    let resp = post(
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 202);
    let ev = sse.next().await.unwrap();
    assert_eq!(ev.event.as_deref(), Some("message"));
    tap()
        .validate_response(rev, "initialize", &ev.data)
        .unwrap();
    let resp = post(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let resp = post(json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let ev = sse.next().await.unwrap();
    tap()
        .validate_response(rev, "tools/list", &ev.data)
        .unwrap();
    // Unknown session: 404.
    let resp = s
        .http
        .post(s.url("/messages?sessionId=nope"))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}

#[tokio::test]
async fn edge_guards() {
    let s = start().await;
    let list = json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}).to_string();
    let resp = s
        .post(list.clone())
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    let v = expect_error(resp, 403, -32600, R1125).await;
    assert!(v["error"]["message"].as_str().unwrap().contains("Origin"));
    let resp = s
        .post(list.clone())
        .header("origin", "http://localhost:5173")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400, "allowed origin reaches the endpoint");

    // A foreign Host (DNS rebinding), over raw TCP to control the header.
    let reply = raw(
        s.addr,
        format!(
            "POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{list}",
            list.len()
        ),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
    assert!(reply.contains("Host"));

    // Oversize body: 413 naming the limit.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"pad":"{}"}}}}"#,
        "x".repeat(70 * 1024)
    );
    let resp = s.post(big).send().await.unwrap();
    let v = expect_error(resp, 413, -32600, R1125).await;
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&(64 * 1024).to_string())
    );
    // Malformed JSON: 400 -32700.
    let resp = s.post("{not json").send().await.unwrap();
    expect_error(resp, 400, -32700, R1125).await;
    // Wrong content type: 415; an Accept admitting neither type: 406.
    let resp = s
        .http
        .post(s.url("/mcp"))
        .header("content-type", "text/plain")
        .body(list.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 415);
    let resp = s
        .http
        .post(s.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "text/html")
        .body(list)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 406);
}

async fn raw(addr: SocketAddr, request: String) -> String {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(3), tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                out.extend_from_slice(&buf[..n]);
                if out.windows(4).any(|w| w == b"\r\n\r\n") && out.ends_with(b"}") {
                    break;
                }
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_stalled_body_is_cut_off_without_stalling_others() {
    // Long enough that a loaded machine still serves the other client first.
    let body_timeout = Duration::from_millis(1500);
    let s = start_with(HttpServerConfig {
        body_timeout,
        ..config()
    })
    .await;
    let mut tcp = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let started = std::time::Instant::now();
    tcp.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\":",
            s.addr
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    // Another client is served meanwhile: the stalled one is still waiting then.
    let sid = s.initialize(R1125).await;
    assert!(!sid.is_empty());
    still_waiting(&tcp, started);
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(2), tcp.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.ends_with(b"}") {
            break;
        }
    }
    let reply = String::from_utf8_lossy(&out);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert_ended_by_timeout(started, body_timeout);
}

/// Asserts that the server has neither answered nor closed `tcp` yet.
fn still_waiting(tcp: &tokio::net::TcpStream, started: std::time::Instant) {
    let mut probe = [0u8; 1];
    match tcp.try_read(&mut probe) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!(
            "the stalled connection was already answered or closed after {:?}: {other:?}",
            started.elapsed()
        ),
    }
}

/// The headers a 2026-07-28 client sends with `body`, given the called tool's
/// `x-mcp-header` annotations.
fn modern_headers(body: &Value, params: &[ParamHeader]) -> Vec<(String, String)> {
    let frame = parse_frame(body.to_string(), &Limits::default()).unwrap();
    header::build(&frame, R2026.as_str(), |_| params.to_vec())
        .into_iter()
        .map(|(k, v)| (k.into_owned(), v))
        .collect()
}

impl Server {
    /// A POST of `body` with exactly `headers` (beside Content-Type and Accept).
    fn post_with(&self, body: &Value, headers: &[(String, String)]) -> reqwest::RequestBuilder {
        let mut b = self.post(body.to_string());
        for (k, v) in headers {
            b = b.header(k.as_str(), v.as_str());
        }
        b
    }
}

#[tokio::test]
async fn modern_mcp_param_headers_are_checked_against_the_body() {
    let s = start().await;
    // As a client does: the annotations come from the listed inputSchema.
    let resp = s
        .modern(&modern_req(1, "tools/list", json!({})))
        .send()
        .await
        .unwrap();
    let text = resp.text().await.unwrap();
    tap().validate_response(R2026, "tools/list", &text).unwrap();
    let list: Value = serde_json::from_str(&text).unwrap();
    let tool = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "region")
        .unwrap()
        .clone();
    let params = header::param_headers(&tool["inputSchema"]).unwrap();
    assert_eq!(params.len(), 2);
    assert_eq!(
        Some(&params),
        s.svc.param_headers().snapshot().get("region")
    );
    let call = |id: i64, args: Value| {
        modern_req(
            id,
            "tools/call",
            json!({"name": "region", "arguments": args}),
        )
    };
    let ok = |resp: reqwest::Response| async move {
        assert_eq!(resp.status(), 200);
        let text = resp.text().await.unwrap();
        tap().validate_response(R2026, "tools/call", &text).unwrap();
        text
    };

    // Matching headers: accepted.
    let body = call(2, json!({"region": "us-west1", "n": 42}));
    let hs = modern_headers(&body, &params);
    assert!(hs.contains(&("Mcp-Param-Region".into(), "us-west1".into())));
    assert!(hs.contains(&("Mcp-Param-N".into(), "42".into())));
    let text = ok(s.post_with(&body, &hs).send().await.unwrap()).await;
    assert!(text.contains("us-west1"), "{text}");
    // A non-ASCII value travels Base64-encoded (§Value Encoding) and is decoded
    // before the comparison; `n` absent, so no Mcp-Param-N.
    let body = call(3, json!({"region": "Zürich, 世界"}));
    let hs = modern_headers(&body, &params);
    let region = hs.iter().find(|(k, _)| k == "Mcp-Param-Region").unwrap();
    assert!(region.1.starts_with("=?base64?"), "{region:?}");
    assert!(!hs.iter().any(|(k, _)| k == "Mcp-Param-N"));
    ok(s.post_with(&body, &hs).send().await.unwrap()).await;
    // Integers compare numerically (§Server Validation): `42.0` matches 42.
    let body = call(4, json!({"region": "r", "n": 42}));
    let mut hs = modern_headers(&body, &[]);
    hs.push(("Mcp-Param-Region".into(), "r".into()));
    hs.push(("Mcp-Param-N".into(), "42.0".into()));
    ok(s.post_with(&body, &hs).send().await.unwrap()).await;
    // A null argument: the header is not expected (§Server Behavior for Custom Headers).
    let body = call(5, json!({"region": null, "n": 1}));
    ok(s.post_with(&body, &modern_headers(&body, &params))
        .send()
        .await
        .unwrap())
    .await;

    // 400 -32020: a header missing while the argument is present; a mismatching
    // value (string, integer); a header whose argument is absent; invalid characters.
    let base = call(6, json!({"region": "us-west1", "n": 42}));
    let good = modern_headers(&base, &params);
    let without = |name: &str| -> Vec<(String, String)> {
        good.iter().filter(|(k, _)| k != name).cloned().collect()
    };
    let with = |name: &str, v: &str| -> Vec<(String, String)> {
        let mut hs = without(name);
        hs.push((name.into(), v.into()));
        hs
    };
    let absent_n = call(7, json!({"region": "us-west1"}));
    let mut extra_n = modern_headers(&absent_n, &params);
    extra_n.push(("Mcp-Param-N".into(), "42".into()));
    for (body, hs, why) in [
        (&base, without("Mcp-Param-Region"), "missing"),
        (&base, without("Mcp-Param-N"), "missing"),
        (
            &base,
            with("Mcp-Param-Region", "eu-west1"),
            "does not match",
        ),
        (&base, with("Mcp-Param-N", "43"), "does not match"),
        (&base, with("Mcp-Param-N", "=?base64?!!?="), "Base64"),
        (&absent_n, extra_n, "absent"),
    ] {
        let resp = s.post_with(body, &hs).send().await.unwrap();
        let v = expect_error(resp, 400, -32020, R2026).await;
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(why), "{msg}");
    }
    // A raw non-ASCII byte is an invalid character, not a value.
    let mut b = s.post(base.to_string());
    for (k, v) in without("Mcp-Param-Region") {
        b = b.header(k, v);
    }
    let resp = b
        .header(
            "mcp-param-region",
            reqwest::header::HeaderValue::from_bytes(b"us-west\xff").unwrap(),
        )
        .send()
        .await
        .unwrap();
    expect_error(resp, 400, -32020, R2026).await;

    // Unannotated tools: an unknown Mcp-Param-* header is ignored.
    let body = modern_req(
        8,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "t"}}),
    );
    let mut hs = modern_headers(&body, &[]);
    hs.push(("Mcp-Param-Region".into(), "anything".into()));
    ok(s.post_with(&body, &hs).send().await.unwrap()).await;
    // Legacy sessions have no Mcp-Param-* headers (2026-07-28 only).
    let sid = s.initialize(R1125).await;
    let resp = s
        .legacy(
            &sid,
            Some(R1125),
            json!({"jsonrpc":"2.0","id":9,"method":"tools/call",
                   "params":{"name":"region","arguments":{"region":"x","n":1}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    tap()
        .validate_response(R1125, "tools/call", &resp.text().await.unwrap())
        .unwrap();
}

/// The JSON body of a raw HTTP/1.1 reply.
fn raw_body(reply: &str) -> &str {
    reply.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

#[tokio::test]
async fn an_sse_response_over_the_event_limit_becomes_an_error() {
    let s = start_with(HttpServerConfig {
        max_sse_event_bytes: 2048,
        ..config()
    })
    .await;
    let big = |id: i64, size: usize| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
               "params":{"name":"big","arguments":{"size":size}}})
    };
    // Legacy: the progress notification opens an SSE stream; the response over the
    // limit is replaced by -32603 for its request, which still ends the stream.
    let sid = s.initialize(R1125).await;
    let mut sse = Sse::new(
        s.legacy(&sid, Some(R1125), big(1, 4096))
            .send()
            .await
            .unwrap(),
    );
    assert_eq!(sse.next().await.unwrap().data, "", "priming");
    let p = sse.next().await.unwrap();
    tap().validate_frame(R1125, &p.data).unwrap();
    let e = sse.next().await.unwrap();
    assert!(e.id.is_some());
    tap().validate_frame(R1125, &e.data).unwrap();
    let v: Value = serde_json::from_str(&e.data).unwrap();
    assert_eq!(v["id"], 1);
    assert_eq!(v["error"]["code"], -32603);
    assert!(v["error"]["message"].as_str().unwrap().contains("2048"));
    assert!(sse.next().await.is_none());
    // Under the limit the same call is answered whole; the session still serves.
    let mut sse = Sse::new(
        s.legacy(&sid, Some(R1125), big(2, 100))
            .send()
            .await
            .unwrap(),
    );
    sse.next().await.unwrap();
    sse.next().await.unwrap();
    let r = sse.next().await.unwrap();
    tap()
        .validate_response(R1125, "tools/call", &r.data)
        .unwrap();
    // A JSON answer is not an SSE event: no limit.
    let resp = s
        .legacy(
            &sid,
            Some(R1125),
            json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
                   "params":{"name":"echo","arguments":{"text":"y".repeat(4096)}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(content_type(&resp), "application/json");
    tap()
        .validate_response(R1125, "tools/call", &resp.text().await.unwrap())
        .unwrap();

    // Modern: the same on a request-scoped stream.
    let mut req = modern_req(
        4,
        "tools/call",
        json!({"name":"big","arguments":{"size":4096}}),
    );
    req["params"]["_meta"]["progressToken"] = json!("big");
    let mut sse = Sse::new(s.modern(&req).send().await.unwrap());
    tap()
        .validate_frame(R2026, &sse.next().await.unwrap().data)
        .unwrap();
    let e = sse.next().await.unwrap();
    tap().validate_frame(R2026, &e.data).unwrap();
    let v: Value = serde_json::from_str(&e.data).unwrap();
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(4), json!(-32603))
    );
    assert!(sse.next().await.is_none());
    let resp = s
        .modern(&modern_req(5, "tools/list", json!({})))
        .send()
        .await
        .unwrap();
    tap()
        .validate_response(R2026, "tools/list", &resp.text().await.unwrap())
        .unwrap();
}

#[tokio::test]
async fn a_stalled_header_is_cut_off_without_stalling_others() {
    // Long enough that a loaded machine still serves the other client first.
    let header_timeout = Duration::from_millis(1500);
    let s = start_with(HttpServerConfig {
        header_timeout,
        ..config()
    })
    .await;
    let started = std::time::Instant::now();
    let mut half_line = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    half_line.write_all(b"POST /m").await.unwrap();
    let mut half_headers = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    half_headers
        .write_all(format!("POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Ty", s.addr).as_bytes())
        .await
        .unwrap();
    // Another client is served meanwhile: the stalled ones are still waiting then.
    let sid = s.initialize(R1125).await;
    assert!(!sid.is_empty());
    still_waiting(&half_line, started);
    still_waiting(&half_headers, started);
    for tcp in [&mut half_line, &mut half_headers] {
        let mut out = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            match tokio::time::timeout(header_timeout + Duration::from_secs(2), tcp.read(&mut buf))
                .await
            {
                Ok(Ok(0) | Err(_)) => break,
                Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
                Err(_) => panic!("still connected after {:?}", started.elapsed()),
            }
        }
        // Closed, possibly after a 408.
        let reply = String::from_utf8_lossy(&out);
        assert!(
            reply.is_empty() || reply.starts_with("HTTP/1.1 408"),
            "{reply}"
        );
    }
    assert_ended_by_timeout(started, header_timeout);
}

#[tokio::test]
async fn at_max_sessions_the_idlest_free_session_makes_room() {
    let s = start_with(HttpServerConfig {
        max_sessions: 2,
        ..config()
    })
    .await;
    let get = |sid: &str| {
        s.http
            .get(s.url("/mcp"))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", sid)
            .header("mcp-protocol-version", R1125.as_str())
            .send()
    };
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion": R1125.as_str(), "capabilities": {},
        "clientInfo": {"name":"t","version":"1"}}});
    // Two sessions, each holding a GET stream open: nothing can make room.
    let a = s.initialize(R1125).await;
    let b = s.initialize(R1125).await;
    let stream_a = get(&a).await.unwrap();
    let stream_b = get(&b).await.unwrap();
    assert_eq!(
        (stream_a.status().as_u16(), stream_b.status().as_u16()),
        (200, 200)
    );
    let resp = s.post(init.to_string()).send().await.unwrap();
    assert!(resp.headers().get("mcp-session-id").is_none());
    let v = expect_error(resp, 503, -32603, R1125).await;
    assert_eq!(v["id"], 0);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("limit 2"),
        "{v}"
    );
    // The refused initialize opened nothing; the live sessions still serve.
    let resp = s
        .legacy(
            &a,
            Some(R1125),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // Abandoned sessions do not lock new hosts out: with b's stream closed and b
    // used less recently than a, b is evicted for the next host, and a is untouched.
    // Until the server has read b's close, b is not free: refused like the one above.
    drop(stream_b);
    let resp = wait::poll_every(
        Duration::from_secs(3),
        Duration::from_millis(20),
        async || {
            let resp = s.post(init.to_string()).send().await.unwrap();
            (resp.status() != 503).then_some(resp)
        },
    )
    .await
    .expect("no room for a new host 3 s after b's stream closed");
    assert_eq!(resp.status(), 200);
    let c = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let resp = s
        .legacy(
            &c,
            Some(R1125),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    assert_eq!(*s.svc.closed.lock(), vec![b.clone()]);
    let resp = s
        .legacy(
            &b,
            Some(R1125),
            json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404, "the evicted session is gone");
    for sid in [&a, &c] {
        let resp = s
            .legacy(
                sid,
                Some(R1125),
                json!({"jsonrpc":"2.0","id":3,"method":"tools/list"}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
    drop(stream_a);
}

#[tokio::test]
async fn idle_sessions_expire_unless_used_or_streaming() {
    // Margins wide enough for a loaded machine: the busy session is used every 100 ms
    // against an idle timeout of 700 ms, and the idle one waits 1.2 s.
    let s = start_with(HttpServerConfig {
        session_idle_timeout: Duration::from_millis(700),
        ..config()
    })
    .await;
    let idle = s.initialize(R1125).await;
    let busy = s.initialize(R1125).await;
    let streaming = s.initialize(R1125).await;
    let list = |id: i64| json!({"jsonrpc":"2.0","id":id,"method":"tools/list"});
    let resp = s
        .http
        .get(s.url("/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", streaming.as_str())
        .header("mcp-protocol-version", R1125.as_str())
        .send()
        .await
        .unwrap();
    let mut sse = Sse::new(resp);
    sse.next().await.unwrap();
    for i in 0..12 {
        // real sleep: the session idle timeout runs on the server's clock, over TCP.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let resp = s.legacy(&busy, Some(R1125), list(i)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        resp.bytes().await.unwrap();
    }
    // 1.2 s unused: 404, the client must initialise again (§Session Management).
    let resp = s.legacy(&idle, Some(R1125), list(9)).send().await.unwrap();
    expect_error(resp, 404, -32600, R1125).await;
    assert_eq!(*s.svc.closed.lock(), vec![idle.clone()]);
    let resp = s.legacy(&idle, Some(R1125), list(9)).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    // An open GET stream keeps its session alive.
    let resp = s
        .legacy(&streaming, Some(R1125), list(10))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    tap()
        .validate_response(R1125, "tools/list", &resp.text().await.unwrap())
        .unwrap();
    drop(sse);
}

#[tokio::test]
async fn a_dropped_post_stream_resumes_with_get_and_last_event_id() {
    let s = start().await;
    let sid = s.initialize(R1125).await;
    let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
        "params":{"name":"slow","arguments":{"steps":6},"_meta":{"progressToken":"p"}}});
    let mut sse = Sse::new(s.legacy(&sid, Some(R1125), call).send().await.unwrap());
    let prime = sse.next().await.unwrap();
    assert_eq!(prime.data, "");
    let p1 = sse.next().await.unwrap();
    tap().validate_frame(R1125, &p1.data).unwrap();
    let last = p1.id.clone().unwrap();
    let (stream, seq) = last.split_once('-').unwrap();
    let seq: u64 = seq.parse().unwrap();
    drop(sse);
    // Events sent while disconnected are kept for the stream they belong to: here
    // the rest of the stream, the call having finished.
    assert!(
        s.svc
            .done_until(|d| d.iter().any(|(m, _)| m == "tools/call"))
            .await,
        "the call never finished"
    );
    let resp = s
        .http
        .get(s.url("/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", sid.as_str())
        .header("mcp-protocol-version", R1125.as_str())
        .header("last-event-id", last.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut sse = Sse::new(resp);
    // 2025-11-25 §Resumability and Redelivery: the events after Last-Event-ID on that
    // stream, in order, then the rest of it, ending with the response.
    let mut progress = Vec::new();
    let mut n = seq;
    let response = loop {
        let ev = sse
            .next()
            .await
            .expect("the resumed stream ends with the response");
        n += 1;
        assert_eq!(ev.id.unwrap(), format!("{stream}-{n}"));
        tap().validate_frame(R1125, &ev.data).unwrap();
        let v: Value = serde_json::from_str(&ev.data).unwrap();
        if v.get("id").is_some() {
            break ev.data;
        }
        progress.push(v["params"]["progress"].as_u64().unwrap());
    };
    assert_eq!(progress, vec![2, 3, 4, 5, 6]);
    tap()
        .validate_response(R1125, "tools/call", &response)
        .unwrap();
    assert!(response.contains("done after 6 steps"));
    assert!(sse.next().await.is_none(), "the response ends the stream");
}

#[tokio::test]
async fn notifications_cancelled_cancels_a_legacy_request() {
    let s = start().await;
    let sid = s.initialize(R1125).await;
    let cancel = |id: i64| {
        json!({"jsonrpc":"2.0","method":"notifications/cancelled",
               "params":{"requestId":id,"reason":"test"}})
    };
    // On an SSE stream: it ends without the response.
    let call = json!({"jsonrpc":"2.0","id":9,"method":"tools/call",
        "params":{"name":"slow","arguments":{"steps":40},"_meta":{"progressToken":"p"}}});
    let mut sse = Sse::new(s.legacy(&sid, Some(R1125), call).send().await.unwrap());
    sse.next().await.unwrap();
    tap()
        .validate_frame(R1125, &sse.next().await.unwrap().data)
        .unwrap();
    let started = std::time::Instant::now();
    let resp = s.legacy(&sid, Some(R1125), cancel(9)).send().await.unwrap();
    assert_eq!(resp.status(), 202);
    assert!(resp.bytes().await.unwrap().is_empty());
    while let Some(ev) = sse.next().await {
        tap().validate_frame(R1125, &ev.data).unwrap();
        let v: Value = serde_json::from_str(&ev.data).unwrap();
        assert!(v.get("id").is_none(), "a response was sent: {}", ev.data);
    }
    // The call would run 40 × 50 ms = 2 s; cancelled, its stream ends long before.
    assert!(started.elapsed() < Duration::from_millis(1500));
    assert_eq!(
        *s.svc.done.lock().last().unwrap(),
        ("tools/call".to_owned(), true)
    );

    // Awaiting a JSON answer: the POST gets an event stream with no response.
    let call = json!({"jsonrpc":"2.0","id":10,"method":"tools/call",
        "params":{"name":"slow","arguments":{"steps":40}}});
    let pending = tokio::spawn(s.legacy(&sid, Some(R1125), call).send());
    // The first call (id 9) and this one.
    assert!(
        s.svc.started_until("tools/call", 2).await,
        "the second call never began"
    );
    let resp = s
        .legacy(&sid, Some(R1125), cancel(10))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let resp = pending.await.unwrap().unwrap();
    assert_eq!(resp.status(), 200);
    let mut sse = Sse::new(resp);
    assert!(sse.next().await.is_none());
    let done = s.svc.done.lock().clone();
    assert_eq!(
        done.iter()
            .filter(|d| **d == ("tools/call".into(), true))
            .count(),
        2,
        "{done:?}"
    );
    // The id is free again and the session serves on.
    let resp = s
        .legacy(
            &sid,
            Some(R1125),
            json!({"jsonrpc":"2.0","id":10,"method":"tools/call",
                   "params":{"name":"echo","arguments":{"text":"again"}}}),
        )
        .send()
        .await
        .unwrap();
    tap()
        .validate_response(R1125, "tools/call", &resp.text().await.unwrap())
        .unwrap();
}

/// Register B-C21: header names are compared case-insensitively. Raw TCP, so the
/// spelling on the wire is exactly the one written here.
#[tokio::test]
async fn header_names_are_case_insensitive() {
    let s = start().await;
    let sid = s.initialize(R1125).await;
    let req = |method: &str, headers: &[String], body: &str| {
        format!(
            "{method} /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{}Content-Length: {}\r\n\r\n{body}",
            s.addr,
            headers
                .iter()
                .map(|h| format!("{h}\r\n"))
                .collect::<String>(),
            body.len()
        )
    };
    let list = json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}).to_string();
    for (sid_name, pv_name) in [
        ("mcp-session-id", "mcp-protocol-version"),
        ("MCP-SESSION-ID", "MCP-PROTOCOL-VERSION"),
        ("Mcp-Session-Id", "MCP-Protocol-Version"),
        ("mCp-SeSsIoN-iD", "Mcp-Protocol-Version"),
    ] {
        let reply = raw(
            s.addr,
            req(
                "POST",
                &[
                    format!("{sid_name}: {sid}"),
                    format!("{pv_name}: 2025-11-25"),
                ],
                &list,
            ),
        )
        .await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        tap()
            .validate_response(R1125, "tools/list", raw_body(&reply))
            .unwrap();
        // An unsupported version under any spelling is still seen (and refused).
        let reply = raw(
            s.addr,
            req(
                "POST",
                &[
                    format!("{sid_name}: {sid}"),
                    format!("{pv_name}: 2099-01-01"),
                ],
                &list,
            ),
        )
        .await;
        assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
        // Another supported legacy version is served in the session's revision
        // (2025-11-25 basic/transports: 400 is for invalid or unsupported versions; the
        // conformance suite's server-sse-multiple-streams relies on it).
        let reply = raw(
            s.addr,
            req(
                "POST",
                &[
                    format!("{sid_name}: {sid}"),
                    format!("{pv_name}: 2025-03-26"),
                ],
                &list,
            ),
        )
        .await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        tap()
            .validate_response(R1125, "tools/list", raw_body(&reply))
            .unwrap();
    }
    // Modern: Mcp-Method, Mcp-Name, Mcp-Param-* in any case.
    let body = modern_req(
        2,
        "tools/call",
        json!({"name":"region","arguments":{"region":"eu","n":7}}),
    )
    .to_string();
    let reply = raw(
        s.addr,
        req(
            "POST",
            &[
                "mcp-protocol-version: 2026-07-28".into(),
                "MCP-METHOD: tools/call".into(),
                "mcp-name: region".into(),
                "MCP-PARAM-REGION: eu".into(),
                "mcp-param-n: 7".into(),
            ],
            &body,
        ),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    tap()
        .validate_response(R2026, "tools/call", raw_body(&reply))
        .unwrap();
    // Header *values* stay case-sensitive (§Case Sensitivity).
    let reply = raw(
        s.addr,
        req(
            "POST",
            &[
                "MCP-Protocol-Version: 2026-07-28".into(),
                "Mcp-Method: TOOLS/CALL".into(),
                "Mcp-Name: region".into(),
                "Mcp-Param-Region: eu".into(),
                "Mcp-Param-N: 7".into(),
            ],
            &body,
        ),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    tap().validate_frame(R2026, raw_body(&reply)).unwrap();
    // DELETE with the session header in capitals.
    let reply = raw(
        s.addr,
        req("DELETE", &[format!("MCP-SESSION-ID: {sid}")], ""),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 204"), "{reply}");
}

#[tokio::test]
async fn foreign_host_with_allowed_origin_and_null_origin_are_refused() {
    let s = start().await;
    let list = json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}).to_string();
    let req = |host: &str, origin: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{list}",
            list.len()
        )
    };
    for (host, origin, named) in [
        ("evil.example", "http://localhost:5173", "Host"),
        ("evil.example:80", "http://127.0.0.1", "Host"),
        (&s.addr.to_string(), "null", "Origin"),
        (&format!("localhost:{}", s.addr.port()), "null", "Origin"),
    ] {
        let reply = raw(s.addr, req(host, origin)).await;
        assert!(
            reply.starts_with("HTTP/1.1 403"),
            "{host} {origin}: {reply}"
        );
        let body = raw_body(&reply);
        let v: Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], -32600);
        // The refused request's id, read from its body: valid for every revision.
        assert_eq!(v["id"], 1, "{body}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(named),
            "{body}"
        );
        for rev in [R0326, R0618, R1125] {
            tap().validate_frame(rev, body).unwrap();
        }
    }
    // The allowed pair reaches the endpoint (400: no session).
    let reply = raw(s.addr, req(&s.addr.to_string(), "http://localhost:5173")).await;
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
}

/// The server ended the exchange because `timeout` ran out: not before it (50 ms of
/// timer slack), and not long after it (a generous bound for a loaded machine).
fn assert_ended_by_timeout(started: std::time::Instant, timeout: Duration) {
    let elapsed = started.elapsed();
    assert!(
        elapsed >= timeout - Duration::from_millis(50),
        "{elapsed:?}"
    );
    assert!(elapsed < timeout + Duration::from_secs(2), "{elapsed:?}");
}

/// RFC 9112 §3.2: an HTTP/1.1 request without `Host`, or with two, is a bad request
/// (400, with a JSON-RPC error body); an absolute-form target's authority is the one
/// checked against the allowed hosts (§3.2.2: the `Host` is then ignored).
#[tokio::test]
async fn the_host_a_request_names_is_required_once_and_checked() {
    let s = start().await;
    let list = json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}).to_string();
    let req = |target: &str, hosts: &[String]| {
        let hosts: String = hosts.iter().map(|h| format!("Host: {h}\r\n")).collect();
        format!(
            "POST {target} HTTP/1.1\r\n{hosts}Connection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{list}",
            list.len()
        )
    };
    let here = s.addr.to_string();
    for (target, hosts, status, named) in [
        ("/mcp", vec![], "400", "must carry a Host header"),
        (
            "/mcp",
            vec![here.clone(), here.clone()],
            "400",
            "only one Host header",
        ),
        (
            "http://evil.example/mcp",
            vec![here.clone()],
            "403",
            "evil.example",
        ),
    ] {
        let reply = raw(s.addr, req(target, &hosts)).await;
        assert!(
            reply.starts_with(&format!("HTTP/1.1 {status}")),
            "{target} {hosts:?}: {reply}"
        );
        let body = raw_body(&reply);
        let v: Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], -32600, "{body}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(named),
            "{body}"
        );
    }
    // An absolute-form target naming this server is served like its origin form,
    // whatever Host says (400 here: a legacy request without a session).
    let reply = raw(
        s.addr,
        req(&format!("http://{here}/mcp"), &["evil.example".to_owned()]),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert!(!reply.contains("allowed hosts"), "{reply}");
}

/// A raw HTTP/1.1 request to this server (`Connection: close`), with `headers` after
/// `Host`, `Content-Type` and `Accept`.
fn raw_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[String],
    body: &str,
) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{}Content-Length: {}\r\n\r\n{body}",
        headers
            .iter()
            .map(|h| format!("{h}\r\n"))
            .collect::<String>(),
        body.len()
    )
}

/// The header fields `X-Pad-1: x` … `X-Pad-n: x`.
fn padding(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("X-Pad-{i}: x")).collect()
}

/// The status line and body of a raw reply that is not JSON-RPC: plain text.
fn plain_text(reply: &str) -> &str {
    let head = reply.split_once("\r\n\r\n").map_or(reply, |(h, _)| h);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; charset=utf-8"),
        "{reply}"
    );
    raw_body(reply)
}

/// Issue #24, 9: a request over the header limits (`max_header_count`, default 100
/// fields; `max_header_bytes`, default 64 KiB) gets 431 with a JSON-RPC error body
/// (the request's id read from its body), not hyper's empty 431; only past twice the
/// limit does hyper answer itself, without a body. The server goes on.
#[tokio::test]
async fn requests_over_the_header_limits_get_431_with_a_body() {
    let s = start().await;
    let list = json!({"jsonrpc":"2.0","id":7,"method":"tools/list"}).to_string();
    let with = |extra: Vec<String>| {
        let mut h = vec!["MCP-Protocol-Version: 2025-06-18".to_owned()];
        h.extend(extra);
        h
    };
    // 120 padding fields and 6 others: over 100.
    let reply = raw(
        s.addr,
        raw_request(s.addr, "POST", "/mcp", &with(padding(120)), &list),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply}");
    let body = raw_body(&reply);
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["id"], 7, "{body}");
    assert_eq!(v["error"]["code"], -32600, "{body}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("126 header fields; this server accepts at most 100"),
        "{body}"
    );
    tap().validate_frame(R0618, body).unwrap();

    // A header section over 64 KiB, in one field.
    let big = vec![format!("X-Big: {}", "y".repeat(70 * 1024))];
    let reply = raw(
        s.addr,
        raw_request(s.addr, "POST", "/mcp", &with(big), &list),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply}");
    let body = raw_body(&reply);
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["id"], 7, "{body}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 65536"),
        "{body}"
    );
    tap().validate_frame(R0618, body).unwrap();

    // A GET has no id: id-less where the revision allows it (2025-11-25), else text.
    let mut h = vec!["MCP-Protocol-Version: 2025-11-25".to_owned()];
    h.extend(padding(120));
    let reply = raw(s.addr, raw_request(s.addr, "GET", "/mcp", &h, "")).await;
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply}");
    let body = raw_body(&reply);
    assert!(
        serde_json::from_str::<Value>(body)
            .unwrap()
            .get("id")
            .is_none()
    );
    tap().validate_frame(R1125, body).unwrap();
    let reply = raw(
        s.addr,
        raw_request(s.addr, "GET", "/mcp", &padding(120), ""),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply}");
    assert!(plain_text(&reply).contains("at most 100"), "{reply}");

    // Past twice the limit, hyper's own 431, without a body (docs/http.md).
    let reply = raw(
        s.addr,
        raw_request(s.addr, "POST", "/mcp", &with(padding(250)), &list),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply}");
    assert_eq!(raw_body(&reply), "", "{reply}");

    // Within the limits: served (400 here, a legacy request without a session).
    let reply = raw(
        s.addr,
        raw_request(s.addr, "POST", "/mcp", &with(padding(90)), &list),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
}

/// Issue #24, 11: a refusal's body is valid for the revision the request names. A 403
/// for a foreign `Origin` carries the refused request's id (2025-03-26 and 2025-06-18
/// require one); a refused notification gets an id-less error only where the revision
/// allows it, else plain text.
#[tokio::test]
async fn a_foreign_origin_refusal_carries_the_request_id_or_no_json_rpc_body() {
    let s = start().await;
    let foreign = |rev: Option<Revision>, body: Value| {
        let mut b = s
            .post(body.to_string())
            .header("origin", "http://evil.example");
        if let Some(r) = rev {
            b = b.header("mcp-protocol-version", r.as_str());
        }
        b
    };
    let list = |id: i64| json!({"jsonrpc":"2.0","id":id,"method":"tools/list"});
    let note = json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"});
    for rev in [R0326, R0618, R1125] {
        let resp = foreign(header_for(rev), list(5)).send().await.unwrap();
        assert_eq!(resp.status(), 403);
        let text = resp.text().await.unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["id"], 5, "{rev}: {text}");
        tap().validate_frame(rev, &text).unwrap();
    }
    // A notification has no id: plain text for 2025-06-18, id-less for 2025-11-25.
    let resp = foreign(Some(R0618), note.clone()).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(content_type(&resp), "text/plain; charset=utf-8");
    assert!(resp.text().await.unwrap().contains("Origin"));
    let resp = foreign(Some(R1125), note.clone()).send().await.unwrap();
    let v = expect_error(resp, 403, -32600, R1125).await;
    assert!(v.get("id").is_none());
    // A GET naming no revision: plain text.
    let resp = s
        .http
        .get(s.url("/mcp"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(content_type(&resp), "text/plain; charset=utf-8");
}

/// Issue #24, 11: a batch refused whole (a revision without batches, no session, an
/// unknown one) is answered for its first request, whose id every revision's schema
/// accepts; on /mcp and on HTTP+SSE. One with no request gets an id-less error only
/// where the revision allows it, else plain text.
#[tokio::test]
async fn a_refused_batch_is_answered_for_its_first_request() {
    let s = start().await;
    let list = |id: i64| json!({"jsonrpc":"2.0","id":id,"method":"tools/list"});
    let note = json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"});
    let batch = json!([note.clone(), list(3), list(4)]);
    for rev in [R0618, R1125] {
        let sid = s.initialize(rev).await;
        let resp = s
            .legacy(&sid, Some(rev), batch.clone())
            .send()
            .await
            .unwrap();
        let v = expect_error(resp, 400, -32600, rev).await;
        assert_eq!(v["id"], 3, "{rev}: {v}");
        tap().validate_frame(rev, &v.to_string()).unwrap();
        // Notifications only: nothing to name; plain text where an id is required.
        let resp = s
            .legacy(&sid, Some(rev), json!([note.clone()]))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400);
        if rev.facts().error_id_optional {
            expect_error(resp, 400, -32600, rev).await;
        } else {
            assert_eq!(content_type(&resp), "text/plain; charset=utf-8");
        }
    }
    // A 2025-03-26 batch without a session, or in an unknown one.
    let resp = s.post(batch.to_string()).send().await.unwrap();
    let v = expect_error(resp, 400, -32600, R0326).await;
    assert_eq!(v["id"], 3);
    tap().validate_frame(R0326, &v.to_string()).unwrap();
    let resp = s.legacy("nope", None, batch.clone()).send().await.unwrap();
    let v = expect_error(resp, 404, -32600, R0326).await;
    assert_eq!(v["id"], 3);
    tap().validate_frame(R0326, &v.to_string()).unwrap();

    // HTTP+SSE, a 2024-11-05 session: a batch refused on the POST, with the first id.
    let resp = s
        .http
        .get(s.url("/sse"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let mut sse = Sse::new(resp);
    let ep = sse.next().await.unwrap().data;
    let post = |body: Value| {
        s.http
            .post(s.url(&ep))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    assert_eq!(post(init).await.unwrap().status(), 202);
    sse.next().await.unwrap();
    let resp = post(json!([list(8), list(9)])).await.unwrap();
    let v = expect_error(resp, 400, -32600, Revision::V2024_11_05).await;
    assert_eq!(v["id"], 8);
    tap()
        .validate_frame(Revision::V2024_11_05, &v.to_string())
        .unwrap();
    // An unknown HTTP+SSE session: 404, naming the request.
    let resp = s
        .http
        .post(s.url("/messages?sessionId=nope"))
        .header("content-type", "application/json")
        .body(list(10).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let v: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(v["id"], 10);
}
