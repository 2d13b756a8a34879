//! mcpx as a client of its upstreams, proven on the wire: request ids (A-C2), era
//! probing past a refused `initialize` (A-C13), timeouts (A-C18), `resultType` (A-C22),
//! re-issue after a broken stream (B-C10), the protocol version header (B-C13), mcpx
//! doing no authorization (B-C14..B-C18) and name mapping (D-C13).
//!
//! Upstreams are real: a recording Streamable HTTP server (axum, 127.0.0.1) that
//! speaks just enough MCP and checks every frame mcpx sends against the schema of the
//! revision it speaks, or a scripted stdio server (`sh`). mcpx is either the client
//! library (`mcpx_client::connect`) or the `mcpx serve` binary with a host on stdio or
//! HTTP. Each test names the register ids it proves (see dispositions.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use parking_lot::Mutex;
use std::collections::HashSet;
use std::convert::Infallible;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt, stream};
use mcpx_client::{
    CallOptions, ClientError, EraCache, ProtocolPreference, Target, TargetTransport,
};
use mcpx_protocol::{Era, Revision};
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::common;

const R0326: Revision = Revision::V2025_03_26;
const R0618: Revision = Revision::V2025_06_18;
const R1125: Revision = Revision::V2025_11_25;
const R2026: Revision = Revision::V2026_07_28;
const PV: &str = "io.modelcontextprotocol/protocolVersion";

// ---- a recording Streamable HTTP upstream -------------------------------------------

/// One HTTP request the upstream received.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    headers: HeaderMap,
    text: String,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    fn rpc(&self) -> &str {
        self.body["method"].as_str().unwrap_or("")
    }
}

/// What the test's script answers to a request (`None`: the default behaviour).
type Script = dyn Fn(&Seen, &Ctx) -> Option<Response> + Send + Sync;

/// What a script may use.
struct Ctx {
    /// How many requests with this JSON-RPC method (and tool name, for tools/call)
    /// came before this one.
    nth: usize,
    /// Counts response streams dropped by the client.
    dropped: Arc<AtomicUsize>,
}

#[derive(Clone)]
struct St {
    /// `None`: modern (2026-07-28); `Some(rev)`: legacy at `rev`.
    legacy: Option<Revision>,
    tools: Value,
    seen: Arc<Mutex<Vec<Seen>>>,
    bad_frames: Arc<Mutex<Vec<String>>>,
    sessions: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
    script: Arc<Script>,
}

struct Upstream {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    bad_frames: Arc<Mutex<Vec<String>>>,
    dropped: Arc<AtomicUsize>,
}

impl Upstream {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().clone()
    }
    fn calls(&self, method: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.rpc() == method)
            .collect()
    }
    /// Every frame mcpx sent was valid for the revision it was written in.
    fn assert_frames_valid(&self) {
        let bad = self.bad_frames.lock().clone();
        assert!(bad.is_empty(), "frames mcpx sent upstream: {bad:#?}");
    }
    /// Register B-C13/B-C15: mcpx only ever talked to the MCP endpoint (no
    /// `/.well-known/…`, no `/register`, `/token`, `/authorize`).
    fn assert_only_the_endpoint(&self) {
        for s in self.seen() {
            assert_eq!(s.path, "/mcp", "{} {}", s.method, s.path);
        }
    }
}

fn json_response(v: Value) -> Response {
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(v.to_string()))
        .unwrap()
}

fn result(id: &Value, r: Value) -> Response {
    json_response(json!({"jsonrpc":"2.0","id":id,"result":r}))
}

/// An SSE response of `events` (JSON-RPC messages), each after `gap`, then `tail`:
/// the end of the stream, or (`pending`) a stream that never ends. `drop_count` is
/// incremented when the client drops the stream.
fn sse(events: Vec<Value>, gap: Duration, pending: bool, drop_count: Arc<AtomicUsize>) -> Response {
    struct OnDrop(Arc<AtomicUsize>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let guard = OnDrop(drop_count);
    let body = stream::iter(events).then(move |e| async move {
        tokio::time::sleep(gap).await;
        Ok::<_, Infallible>(Bytes::from(format!("data: {e}\n\n")))
    });
    let body: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = Result<Bytes, Infallible>> + Send>,
    > = if pending {
        Box::pin(body.chain(stream::pending()))
    } else {
        Box::pin(body)
    };
    let body = body.map(move |x| {
        let _ = &guard;
        x
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(body))
        .unwrap()
}

fn progress(token: &Value, n: usize) -> Value {
    json!({"jsonrpc":"2.0","method":"notifications/progress",
           "params":{"progressToken": token, "progress": n}})
}

fn modern_result(mut r: Value, cacheable: bool) -> Value {
    r["resultType"] = json!("complete");
    if cacheable {
        r["ttlMs"] = json!(0);
        r["cacheScope"] = json!("private");
    }
    r
}

async fn handle(
    State(st): State<St>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let seen = Seen {
        method: method.clone(),
        path: uri.path().to_owned(),
        headers,
        text: text.clone(),
        body: body.clone(),
    };
    let key = |s: &Seen| (s.rpc().to_owned(), s.body["params"]["name"].clone());
    let nth = {
        let mut all = st.seen.lock();
        let nth = all.iter().filter(|s| key(s) == key(&seen)).count();
        all.push(seen.clone());
        nth
    };
    if seen.path != "/mcp" {
        return StatusCode::NOT_FOUND.into_response();
    }
    if method == Method::POST {
        // The frame mcpx sent, checked against the schema of the revision it is
        // written in: modern frames carry the version in `_meta`.
        let rev = match body["params"]["_meta"][PV].as_str() {
            Some(v) => Revision::from_wire(v).unwrap_or(R2026),
            None => st.legacy.unwrap_or(R2026),
        };
        if let Err(e) = tap().validate_frame(rev, &text) {
            st.bad_frames.lock().push(format!("{rev}: {e}: {text}"));
        }
    }
    let ctx = Ctx {
        nth,
        dropped: st.dropped.clone(),
    };
    if let Some(r) = (st.script)(&seen, &ctx) {
        return r;
    }
    let id = body.get("id").cloned().unwrap_or(Value::Null);
    match (method.as_str(), st.legacy) {
        ("GET", _) => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        ("DELETE", _) => StatusCode::OK.into_response(),
        ("POST", _) if id.is_null() => StatusCode::ACCEPTED.into_response(),
        ("POST", None) => match seen.rpc() {
            "server/discover" => result(
                &id,
                modern_result(
                    json!({"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},
                           "_meta":{"io.modelcontextprotocol/serverInfo":{"name":"rec","version":"1"}}}),
                    true,
                ),
            ),
            "tools/list" => result(&id, modern_result(json!({"tools": st.tools}), true)),
            "tools/call" => {
                let name = seen.body["params"]["name"].as_str().unwrap_or("");
                result(
                    &id,
                    modern_result(
                        json!({"content":[{"type":"text","text": format!("ok {name}")}]}),
                        false,
                    ),
                )
            }
            _ => result(&id, modern_result(json!({}), false)),
        },
        ("POST", Some(rev)) => match seen.rpc() {
            // A legacy server knows no server/discover: a plain 400 (A-C14).
            "server/discover" => (StatusCode::BAD_REQUEST, "Bad Request").into_response(),
            "initialize" => {
                let n = st.sessions.fetch_add(1, Ordering::SeqCst) + 1;
                let mut r = result(
                    &id,
                    json!({"protocolVersion": rev.as_str(), "capabilities": {"tools":{}},
                           "serverInfo": {"name":"rec","version":"1"}}),
                );
                r.headers_mut()
                    .insert("mcp-session-id", format!("s{n}").parse().unwrap());
                r
            }
            "tools/list" => result(&id, json!({"tools": st.tools})),
            "tools/call" => {
                let name = seen.body["params"]["name"].as_str().unwrap_or("");
                result(
                    &id,
                    json!({"content":[{"type":"text","text": format!("ok {name}")}]}),
                )
            }
            _ => result(&id, json!({})),
        },
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

async fn upstream(
    legacy: Option<Revision>,
    tools: Value,
    script: impl Fn(&Seen, &Ctx) -> Option<Response> + Send + Sync + 'static,
) -> Upstream {
    let st = St {
        legacy,
        tools,
        seen: Arc::default(),
        bad_frames: Arc::default(),
        sessions: Arc::default(),
        dropped: Arc::default(),
        script: Arc::new(script),
    };
    let up = Upstream {
        port: 0,
        seen: st.seen.clone(),
        bad_frames: st.bad_frames.clone(),
        dropped: st.dropped.clone(),
    };
    let app = Router::new().fallback(handle).with_state(st);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Upstream { port, ..up }
}

fn no_script(_: &Seen, _: &Ctx) -> Option<Response> {
    None
}

fn tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}})
}

fn http_target(url: String) -> Target {
    Target::new(
        "rec",
        TargetTransport::Http {
            url,
            headers: Vec::new(),
        },
    )
}

fn temp_dir(tag: &str) -> PathBuf {
    crate::scratch_dir(&format!("upc-{tag}"))
}

/// A scripted stdio upstream: `sh -c script`, each line it reads appended to `log`.
fn stdio_target(script: &str, log: &std::path::Path) -> Target {
    Target::new(
        "sh",
        TargetTransport::Stdio {
            command: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![("LOG".into(), log.display().to_string())],
            cwd: None,
        },
    )
}

/// The prelude of scripted stdio upstreams: `out` writes a line; `$id` is the request's
/// numeric id.
const SH_PRELUDE: &str = r#"out() { printf '%s\n' "$1"; }
while IFS= read -r line; do
  printf '%s\n' "$line" >> "$LOG"
  id=$(printf '%s' "$line" | grep -o '"id":[0-9][0-9]*' | head -n 1 | cut -d: -f2)
  [ -z "$id" ] && continue
"#;

const SH_DISCOVER_OK: &str = r#"    *'"method":"server/discover"'*)
      out '{"jsonrpc":"2.0","id":'"$id"',"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"ttlMs":0,"cacheScope":"private","resultType":"complete"}}' ;;
"#;

fn logged_methods(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["method"].as_str().map(str::to_owned))
        .collect()
}

// ---- a host driving `mcpx serve` on stdio -------------------------------------------

struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    rev: Revision,
    next_id: i64,
    dir: PathBuf,
}

impl Host {
    /// `mcpx serve --config` with `config`; a legacy host is initialised.
    async fn start(tag: &str, config: &Value, rev: Revision) -> Host {
        let dir = temp_dir(tag);
        let cfg = dir.join("mcpx.json");
        std::fs::write(&cfg, config.to_string()).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpx"))
            .args(["serve", "--config"])
            .arg(&cfg)
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .env("MCPX_WIRE_LOG", dir.join("wire.jsonl"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("stderr.txt")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut h = Host {
            child,
            stdin,
            lines,
            rev,
            next_id: 1,
            dir,
        };
        if rev.era() == Era::Legacy {
            h.request(
                "initialize",
                json!({"protocolVersion": rev.as_str(), "capabilities": {},
                       "clientInfo": {"name": "upc", "version": "1"}}),
            )
            .await;
            let s = h.stdin.as_mut().unwrap();
            s.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
                .await
                .unwrap();
            s.flush().await.unwrap();
        }
        h
    }

    /// Sends a request in the host's revision; returns the response (validated with the
    /// schema tap against the host's revision).
    async fn request(&mut self, method: &str, mut params: Value) -> Value {
        if self.rev.era() == Era::Modern {
            params["_meta"] = json!({
                PV: self.rev.as_str(),
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "upc", "version": "1"},
            });
        }
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        let s = self.stdin.as_mut().unwrap();
        s.write_all(format!("{frame}\n").as_bytes()).await.unwrap();
        s.flush().await.unwrap();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method}"))
                .unwrap()
                .expect("mcpx closed stdout");
            let v: Value = serde_json::from_str(&line).unwrap();
            let check = if v.get("result").is_some() && v.get("id") == Some(&json!(id)) {
                tap().validate_response(self.rev, method, &line)
            } else {
                tap().validate_frame(self.rev, &line)
            };
            check.unwrap_or_else(|e| panic!("to the host ({}): {e}: {line}", self.rev));
            if v.get("id") == Some(&json!(id)) && v.get("method").is_none() {
                return v;
            }
        }
    }

    async fn call_tool(&mut self, name: &str) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": {}}))
            .await
    }

    fn wire(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("wire.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.txt")).unwrap_or_default()
    }

    async fn finish(mut self) {
        drop(self.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn error_of<'a>(v: &'a Value, what: &str) -> &'a Value {
    v.get("error")
        .unwrap_or_else(|| panic!("{what}: expected an error, got {v}"))
}

fn text_of(v: &Value) -> &str {
    v["result"]["content"][0]["text"].as_str().unwrap_or("")
}

// ---- A-C2 ----------------------------------------------------------------------------

/// A-C2: request ids come from one counter per upstream connection and are never
/// reused, even across legacy session renewals: every second `tools/call` is answered
/// 404 (the session expired), so mcpx initialises again, twice, and retries.
#[tokio::test]
async fn request_ids_are_never_reused_on_a_connection() {
    let up = upstream(Some(R1125), json!([tool("t")]), |s, ctx| {
        (s.rpc() == "tools/call" && ctx.nth % 2 == 1).then(|| StatusCode::NOT_FOUND.into_response())
    })
    .await;
    let conn = mcpx_client::connect(&http_target(up.url()), &EraCache::disabled())
        .await
        .unwrap();
    assert_eq!(conn.facts().era, Era::Legacy);
    for _ in 0..3 {
        let f = conn
            .call(
                "tools/call",
                Some(&common::params(r#"{"name":"t","arguments":{}}"#)),
                CallOptions::default(),
            )
            .await
            .unwrap();
        assert!(f.result().is_some(), "{f}");
    }
    let ids: Vec<Value> = up
        .seen()
        .iter()
        .filter(|s| s.method == Method::POST && s.body.get("id").is_some())
        .map(|s| s.body["id"].clone())
        .collect();
    assert_eq!(up.calls("initialize").len(), 3, "two renewals expected");
    let unique: HashSet<String> = ids.iter().map(Value::to_string).collect();
    assert_eq!(unique.len(), ids.len(), "an id was reused: {ids:?}");
    up.assert_frames_valid();
}

/// A-C2: on stdio, a notification whose `subscriptionId` names no open listen (here a
/// listen the upstream ended, and an id never used) is dropped; the open listen's
/// notification gets through.
#[tokio::test]
async fn notifications_for_no_open_listen_are_dropped() {
    let script = format!(
        r#"first=""
{SH_PRELUDE}  case "$line" in
{SH_DISCOVER_OK}    *'"method":"subscriptions/listen"'*)
      out '{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"_meta":{{"io.modelcontextprotocol/subscriptionId":'"$id"'}},"notifications":{{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true}}}}}}'
      if [ -z "$first" ]; then
        first=$id
        out '{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":'"$id"',"reason":"bye"}}}}'
      else
        out '{{"jsonrpc":"2.0","method":"notifications/prompts/list_changed","params":{{"_meta":{{"io.modelcontextprotocol/subscriptionId":'"$first"'}}}}}}'
        out '{{"jsonrpc":"2.0","method":"notifications/resources/list_changed","params":{{"_meta":{{"io.modelcontextprotocol/subscriptionId":424242}}}}}}'
        out '{{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{{"_meta":{{"io.modelcontextprotocol/subscriptionId":'"$id"'}}}}}}'
      fi ;;
  esac
done
"#
    );
    let dir = temp_dir("a-c2-listen");
    let log = dir.join("log");
    let conn = mcpx_client::connect(&stdio_target(&script, &log), &EraCache::disabled())
        .await
        .unwrap();
    assert_eq!(conn.facts().era, Era::Modern);
    let mut changes = conn.changes();
    let listen = |conn: mcpx_client::Connection| async move {
        let opts = CallOptions {
            attribute_unsolicited: false,
            ..CallOptions::default()
        };
        conn.call(
            "subscriptions/listen",
            Some(&common::params(
                r#"{"notifications":{"toolsListChanged":true}}"#,
            )),
            opts,
        )
        .await
    };
    // The first listen is ended by the upstream.
    let first = tokio::time::timeout(Duration::from_secs(10), listen(conn.clone()))
        .await
        .unwrap();
    assert!(
        matches!(first, Err(ClientError::EndedByUpstream { .. })),
        "{first:?}"
    );
    // The second stays open; of the three notifications only its own is delivered.
    let second = tokio::spawn(listen(conn.clone()));
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let f = changes.recv().await.unwrap();
            if f.method().is_some_and(|m| m.ends_with("list_changed")) {
                return f;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(
        got.method(),
        Some("notifications/tools/list_changed"),
        "a stale notification got through: {got}"
    );
    second.abort();
    conn.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A-C2, server side, through the gateway: a host request reusing the id of one still
/// in flight is refused -32600 (and never reaches the upstream); once that request is
/// answered the id may be used again; each host request gets a fresh upstream id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_ids_in_flight_are_unique_and_mapped_to_fresh_upstream_ids() {
    let script = format!(
        r#"{SH_PRELUDE}  case "$line" in
    *'"method":"server/discover"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"error":{{"code":-32601,"message":"Method not found"}}}}' ;;
    *'"method":"initialize"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"s","version":"1"}}}}}}' ;;
    *'"method":"tools/list"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"tools":[{{"name":"slow","inputSchema":{{"type":"object"}}}},{{"name":"fast","inputSchema":{{"type":"object"}}}}]}}}}' ;;
    *'"name":"slow"'*)
      sleep 1
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"content":[{{"type":"text","text":"slow"}}]}}}}' ;;
    *'"method":"tools/call"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"content":[{{"type":"text","text":"fast"}}]}}}}' ;;
  esac
done
"#
    );
    let config = json!({"mcpServers": {"up": {"command": "sh", "args": ["-c", script],
        "env": {"LOG": "/dev/null"}}}});
    let mut h = Host::start("a-c2-server", &config, R1125).await;
    let call = |name: &str| json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":name,"arguments":{}}});
    let s = h.stdin.as_mut().unwrap();
    for f in [call("slow"), call("fast")] {
        s.write_all(format!("{f}\n").as_bytes()).await.unwrap();
    }
    s.flush().await.unwrap();
    let mut answers = Vec::new();
    while answers.len() < 2 {
        let line = tokio::time::timeout(Duration::from_secs(20), h.lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 7 {
            tap().validate_frame(R1125, &line).unwrap();
            answers.push(v);
        }
    }
    let refused = answers.iter().find(|v| v.get("error").is_some()).unwrap();
    assert_eq!(refused["error"]["code"], -32600, "{answers:?}");
    let served = answers.iter().find(|v| v.get("result").is_some()).unwrap();
    assert_eq!(text_of(served), "slow", "{answers:?}");
    // Answered: id 7 is free again.
    h.next_id = 7;
    let r = h.call_tool("fast").await;
    assert_eq!(text_of(&r), "fast", "{r}");
    let ids: Vec<Value> = h
        .wire()
        .into_iter()
        .filter(|f| f["method"] == "tools/call")
        .map(|f| f["id"].clone())
        .collect();
    assert_eq!(
        ids.len(),
        2,
        "the refused request reached the upstream: {ids:?}"
    );
    assert_ne!(
        ids[0], ids[1],
        "one upstream id for two host requests: {ids:?}"
    );
    h.finish().await;
}

// ---- A-C13 ---------------------------------------------------------------------------

/// A-C13: an upstream that refuses `initialize` with -32601 or -32602 (either reading of
/// a modern-only server) is taken as modern and probed with `server/discover` (here
/// under `protocol: prefer-legacy`, so initialize comes first).
#[tokio::test]
async fn initialize_refused_as_a_modern_server_does_means_discover() {
    for code in [-32601, -32602] {
        let script = format!(
            r#"{SH_PRELUDE}  case "$line" in
{SH_DISCOVER_OK}    *'"method":"initialize"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"error":{{"code":{code},"message":"no"}}}}' ;;
  esac
done
"#
        );
        let dir = temp_dir(&format!("a-c13{code}"));
        let log = dir.join("log");
        let mut target = stdio_target(&script, &log);
        target.preference = ProtocolPreference::PreferLegacy;
        let conn = mcpx_client::connect(&target, &EraCache::disabled())
            .await
            .unwrap_or_else(|e| panic!("{code}: {e}"));
        assert_eq!(
            (conn.facts().era, conn.facts().revision),
            (Era::Modern, R2026),
            "{code}"
        );
        assert!(conn.facts().has("tools"));
        let m = logged_methods(&log);
        assert_eq!(m, ["initialize", "server/discover"], "{code}");
        conn.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}

// ---- A-C18 ---------------------------------------------------------------------------

/// A tools/call answered by a stream that never ends; every other request as usual.
fn hanging_calls(s: &Seen, ctx: &Ctx) -> Option<Response> {
    (s.rpc() == "tools/call").then(|| sse(Vec::new(), Duration::ZERO, true, ctx.dropped.clone()))
}

async fn wait_for(what: &str, f: impl Fn() -> bool) {
    let every = Duration::from_millis(50);
    let seen =
        crate::wait::poll_every(Duration::from_secs(10), every, async || f().then_some(())).await;
    assert!(seen.is_some(), "timed out waiting for {what}");
}

fn short_timeout() -> CallOptions {
    CallOptions {
        timeout: Duration::from_millis(400),
        ..CallOptions::default()
    }
}

/// A-C18 (modern HTTP): a request that times out is cancelled by closing its response
/// stream, with no `notifications/cancelled` (2026-07-28 basic/patterns/cancellation
/// §Transport-specific cancellation); the caller gets "upstream request timed out".
#[tokio::test]
async fn a_modern_http_timeout_closes_the_stream() {
    let up = upstream(None, json!([tool("t")]), hanging_calls).await;
    let conn = mcpx_client::connect(&http_target(up.url()), &EraCache::disabled())
        .await
        .unwrap();
    assert_eq!(conn.facts().era, Era::Modern);
    let err = conn
        .call(
            "tools/call",
            Some(&common::params(r#"{"name":"t","arguments":{}}"#)),
            short_timeout(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err:?}");
    assert!(
        err.to_string().contains("upstream request timed out"),
        "{err}"
    );
    wait_for("the stream to close", || {
        up.dropped.load(Ordering::SeqCst) == 1
    })
    .await;
    assert!(
        up.calls("notifications/cancelled").is_empty(),
        "{:?}",
        up.seen()
    );
    up.assert_frames_valid();
}

/// A-C18 (legacy HTTP): a request that times out is cancelled with
/// `notifications/cancelled` naming it (2025-11-25 basic/lifecycle §Timeouts).
#[tokio::test]
async fn a_legacy_http_timeout_sends_cancelled() {
    let up = upstream(Some(R1125), json!([tool("t")]), hanging_calls).await;
    let conn = mcpx_client::connect(&http_target(up.url()), &EraCache::disabled())
        .await
        .unwrap();
    assert_eq!(conn.facts().era, Era::Legacy);
    let err = conn
        .call(
            "tools/call",
            Some(&common::params(r#"{"name":"t","arguments":{}}"#)),
            short_timeout(),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("upstream request timed out"),
        "{err}"
    );
    let call_id = up.calls("tools/call")[0].body["id"].clone();
    let cancels = up.calls("notifications/cancelled");
    assert_eq!(cancels.len(), 1, "{:?}", up.seen());
    assert_eq!(cancels[0].body["params"]["requestId"], call_id);
    assert_eq!(cancels[0].header("mcp-session-id"), Some("s1"));
    up.assert_frames_valid();
}

/// A-C18: each progress notification restarts the timeout, up to the hard limit. A
/// call whose progress keeps coming for longer than the timeout completes; one whose
/// progress never ends fails at the hard limit.
#[tokio::test]
async fn progress_restarts_the_timeout_up_to_the_limit() {
    let up = upstream(None, json!([tool("slow"), tool("endless")]), |s, ctx| {
        if s.rpc() != "tools/call" {
            return None;
        }
        let token = s.body["params"]["_meta"]["progressToken"].clone();
        let id = s.body["id"].clone();
        let mut events: Vec<Value> = (1..=12).map(|n| progress(&token, n)).collect();
        let endless = s.body["params"]["name"] == "endless";
        if !endless {
            events.push(json!({"jsonrpc":"2.0","id":id,"result":{
                "content":[{"type":"text","text":"done"}],"resultType":"complete"}}));
        } else {
            events.extend((13..=400).map(|n| progress(&token, n)));
        }
        Some(sse(
            events,
            Duration::from_millis(100),
            endless,
            ctx.dropped.clone(),
        ))
    })
    .await;
    let conn = mcpx_client::connect(&http_target(up.url()), &EraCache::disabled())
        .await
        .unwrap();
    // 12 progress notifications 100 ms apart: 1.2 s, three times the 400 ms timeout.
    let opts = CallOptions {
        progress: true,
        timeout: Duration::from_millis(400),
        max_time: Duration::from_secs(30),
        ..CallOptions::default()
    };
    let f = conn
        .call(
            "tools/call",
            Some(&common::params(r#"{"name":"slow","arguments":{}}"#)),
            opts.clone(),
        )
        .await
        .unwrap();
    assert!(f.result().is_some_and(|r| r.contains("done")), "{f}");
    let opts = CallOptions {
        max_time: Duration::from_millis(1500),
        ..opts
    };
    let err = conn
        .call(
            "tools/call",
            Some(&common::params(r#"{"name":"endless","arguments":{}}"#)),
            opts,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err:?}");
    up.assert_frames_valid();
}

/// A-C18 through the gateway: with `callTimeoutMs` 300, a hanging tools/call reaches
/// the host as -32603 "upstream request timed out" and is cancelled on stdio with
/// `notifications/cancelled`; the `subscriptions/listen` mcpx keeps open on the same
/// upstream is exempt (it is neither cancelled nor reopened).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_times_out_calls_but_not_listens() {
    let script = format!(
        r#"{SH_PRELUDE}  case "$line" in
{SH_DISCOVER_OK}    *'"method":"tools/list"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"tools":[{{"name":"hang","inputSchema":{{"type":"object"}}}}],"ttlMs":0,"cacheScope":"private","resultType":"complete"}}}}' ;;
    *'"method":"subscriptions/listen"'*)
      out '{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"_meta":{{"io.modelcontextprotocol/subscriptionId":'"$id"'}},"notifications":{{"toolsListChanged":true}}}}}}' ;;
  esac
done
"#
    );
    let dir = temp_dir("a-c18-gw-log");
    let config = json!({"mcpServers": {"up": {"command": "sh", "args": ["-c", script],
        "env": {"LOG": dir.join("log").display().to_string()},
        "mcpx": {"callTimeoutMs": 300}}}});
    let mut h = Host::start("a-c18-gw", &config, R1125).await;
    let r = h.call_tool("hang").await;
    let e = error_of(&r, "hang");
    assert_eq!(e["code"], -32603, "{r}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("upstream request timed out") && msg.contains("up"),
        "{msg}"
    );
    // Five more calls time out, one after another: well past several call timeouts,
    // the listen is still the only one, uncancelled.
    for _ in 0..5 {
        let r = h.call_tool("hang").await;
        assert_eq!(error_of(&r, "hang")["code"], -32603, "{r}");
    }
    // The last cancellation may follow its error to the host: wait for it (bounded).
    let count =
        |wire: &[Value], method: &str| wire.iter().filter(|f| f["method"] == method).count();
    crate::wait::until(Duration::from_secs(5), async || {
        count(&h.wire(), "notifications/cancelled") >= 6
    })
    .await;
    let wire = h.wire();
    assert_eq!(
        count(&wire, "subscriptions/listen"),
        1,
        "the listen was timed out and reopened: {wire:?}"
    );
    // Each call, and only the calls, cancelled.
    let call_ids: Vec<&Value> = wire
        .iter()
        .filter(|f| f["method"] == "tools/call")
        .map(|f| &f["id"])
        .collect();
    assert_eq!(call_ids.len(), 6, "{wire:?}");
    let cancelled: Vec<&Value> = wire
        .iter()
        .filter(|f| f["method"] == "notifications/cancelled")
        .map(|f| &f["params"]["requestId"])
        .collect();
    assert_eq!(cancelled, call_ids, "{wire:?}");
    h.finish().await;
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- A-C22 ---------------------------------------------------------------------------

/// A 2026-07-28 stdio upstream whose tools/call result has the resultType named by the
/// tool: `absent` (none), `complete`, `banana`, `task`, `number` (5).
fn result_type_script() -> String {
    format!(
        r#"{SH_PRELUDE}  case "$line" in
{SH_DISCOVER_OK}    *'"method":"tools/list"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"tools":[{{"name":"absent","inputSchema":{{"type":"object"}}}},{{"name":"complete","inputSchema":{{"type":"object"}}}},{{"name":"banana","inputSchema":{{"type":"object"}}}}],"ttlMs":0,"cacheScope":"private","resultType":"complete"}}}}' ;;
    *'"name":"absent"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"content":[{{"type":"text","text":"a"}}]}}}}' ;;
    *'"name":"complete"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"content":[{{"type":"text","text":"c"}}],"resultType":"complete"}}}}' ;;
    *'"name":"banana"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"content":[],"resultType":"banana"}}}}' ;;
    *'"name":"task"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"resultType":"task","task":{{"taskId":"t1","status":"working"}}}}}}' ;;
    *'"name":"number"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"content":[],"resultType":5}}}}' ;;
  esac
done
"#
    )
}

/// Params that are not valid JSON cannot be made, whichever part of them is broken:
/// outside `_meta`, inside `_meta` (in a member mcpx replaces with its own envelope, or
/// one it keeps), or around it. So none reaches the upstream: `Connection::build` writes
/// the request from [`mcpx_protocol::Params`], valid by construction, without checking
/// it again (the `_meta` rewriting keeps it valid: tests/params_props.rs in
/// mcpx-protocol). A valid call with a caller `_meta` goes through, and only it is sent.
#[tokio::test]
async fn invalid_params_never_reach_the_upstream() {
    let dir = temp_dir("bad-params");
    let log = dir.join("log");
    let conn = mcpx_client::connect(
        &stdio_target(&result_type_script(), &log),
        &EraCache::disabled(),
    )
    .await
    .unwrap();
    // Every line the upstream read, JSON or not.
    let lines = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let before = lines();
    let pv = mcpx_protocol::meta::PROTOCOL_VERSION;
    for bad in [
        r#"{"name":"complete","arguments":{},"_meta":{}"#.to_owned(),
        r#"{"name":"complete" "arguments":{},"_meta":{}}"#.to_owned(),
        r#"{"name":"complete","arguments":{x},"_meta":{}}"#.to_owned(),
        r#"{"name":"complete","_meta":{"k":tru}}"#.to_owned(),
        format!(r#"{{"name":"complete","_meta":{{"{pv}":tru}}}}"#),
        format!(r#"{{"name":"complete","_meta":{{"{pv}":"2026-07-28",}}}}"#),
        r#"{"name":"complete","_meta":{"progressToken":1}} x"#.to_owned(),
        r#"{"name":"complete","_meta":{"progressToken":1},}"#.to_owned(),
        r#"{"name":"complete","_meta":{"progressToken":"a\qb"}}"#.to_owned(),
    ] {
        assert!(mcpx_protocol::Params::parse(bad.clone()).is_err(), "{bad}");
    }
    let good = format!(r#"{{"name":"complete","arguments":{{}},"_meta":{{"{pv}":"x","k":1}}}}"#);
    assert!(
        conn.call(
            "tools/call",
            Some(&common::params(&good)),
            CallOptions::default()
        )
        .await
        .is_ok()
    );
    // The log does see what is sent: one line, valid JSON, the caller's `k` kept.
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    let sent: Vec<&str> = log_text.lines().skip(before).collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let v: Value = serde_json::from_str(sent[0]).unwrap();
    assert_eq!(v["params"]["_meta"]["k"], 1, "{v}");
    conn.close().await;
}

/// A-C22, client side: an absent resultType is "complete"; "task" is accepted only when
/// the request declared the tasks extension; any other value is an error naming it.
#[tokio::test]
async fn unrecognised_result_types_are_invalid() {
    let dir = temp_dir("a-c22");
    let conn = mcpx_client::connect(
        &stdio_target(&result_type_script(), &dir.join("log")),
        &EraCache::disabled(),
    )
    .await
    .unwrap();
    let call = |name: &str, caps: Value| {
        let conn = conn.clone();
        let params = mcpx_protocol::Params::of_value(&json!({"name": name, "arguments": {}}));
        async move {
            let opts = CallOptions {
                client_capabilities: std::sync::Arc::new(caps),
                ..CallOptions::default()
            };
            conn.call("tools/call", Some(&params), opts).await
        }
    };
    assert!(call("absent", json!({})).await.is_ok());
    assert!(call("complete", json!({})).await.is_ok());
    for (name, needle) in [("banana", "\"banana\""), ("number", "5"), ("task", "tasks")] {
        let err = call(name, json!({})).await.unwrap_err();
        assert!(
            matches!(err, ClientError::Protocol { .. }),
            "{name}: {err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("resultType") && msg.contains(needle),
            "{name}: {msg}"
        );
    }
    let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    assert!(call("task", tasks).await.is_ok());
    conn.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A-C22 through the gateway: an absent resultType reaches a modern host as
/// "complete" and a legacy host without the member; an unrecognised one reaches every
/// host as -32603 naming the value and the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_types_through_the_gateway() {
    for rev in [R1125, R2026] {
        let dir = temp_dir(&format!("a-c22-gw-log-{rev}"));
        let config = json!({"mcpServers": {"up": {"command": "sh",
            "args": ["-c", result_type_script()],
            "env": {"LOG": dir.join("log").display().to_string()}}}});
        let mut h = Host::start(&format!("a-c22-gw-{rev}"), &config, rev).await;
        for name in ["absent", "complete"] {
            let r = h.call_tool(name).await;
            let got = r["result"].get("resultType");
            if rev.era() == Era::Modern {
                assert_eq!(got, Some(&json!("complete")), "{rev} {name}: {r}");
            } else {
                assert_eq!(got, None, "{rev} {name}: {r}");
            }
        }
        let r = h.call_tool("banana").await;
        let e = error_of(&r, "banana");
        assert_eq!(e["code"], -32603, "{rev}: {r}");
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains("banana") && msg.contains("up"), "{rev}: {msg}");
        h.finish().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}

// ---- B-C10 ---------------------------------------------------------------------------

/// B-C10 through the gateway: a modern upstream's first answer to every tools/call is a
/// stream that ends without the response. A tool annotated readOnlyHint or
/// idempotentHint is re-issued once under a new id and answers; an unannotated one is
/// not re-issued, and the host gets -32603 saying the result is unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_streams_reissue_only_safe_calls() {
    let tools = json!([
        {"name":"ro","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},
        {"name":"idem","inputSchema":{"type":"object"},"annotations":{"idempotentHint":true}},
        {"name":"rw","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false}},
    ]);
    let up = upstream(None, tools, |s, ctx| {
        (s.rpc() == "tools/call" && ctx.nth == 0)
            .then(|| sse(Vec::new(), Duration::ZERO, false, ctx.dropped.clone()))
    })
    .await;
    let config = json!({"mcpServers": {"up": {"type": "http", "url": up.url()}}});
    let mut h = Host::start("b-c10", &config, R1125).await;
    for name in ["ro", "idem"] {
        let r = h.call_tool(name).await;
        assert_eq!(text_of(&r), format!("ok {name}"), "{r}");
    }
    let r = h.call_tool("rw").await;
    let e = error_of(&r, "rw");
    assert_eq!(e["code"], -32603, "{r}");
    assert!(
        e["message"].as_str().unwrap().contains("result is unknown"),
        "{r}"
    );
    let calls = up.calls("tools/call");
    for (name, want) in [("ro", 2), ("idem", 2), ("rw", 1)] {
        let ids: Vec<Value> = calls
            .iter()
            .filter(|s| s.body["params"]["name"] == name)
            .map(|s| s.body["id"].clone())
            .collect();
        assert_eq!(ids.len(), want, "{name}: {ids:?}");
        if want == 2 {
            assert_ne!(ids[0], ids[1], "{name}: re-issued under the same id");
        }
    }
    up.assert_frames_valid();
    h.finish().await;
}

// ---- B-C13 ---------------------------------------------------------------------------

/// B-C13: MCP-Protocol-Version carries the negotiated version on every request after
/// initialize to a 2025-06-18 upstream, never to a 2025-03-26 one, and on every POST to
/// a modern one; and mcpx makes no authorization discovery requests (every request goes
/// to the MCP endpoint).
#[tokio::test]
async fn protocol_version_header_per_upstream_revision() {
    for legacy in [Some(R0326), Some(R0618), None] {
        let up = upstream(legacy, json!([tool("t")]), no_script).await;
        let conn = mcpx_client::connect(&http_target(up.url()), &EraCache::disabled())
            .await
            .unwrap();
        let f = conn
            .call(
                "tools/call",
                Some(&common::params(r#"{"name":"t","arguments":{}}"#)),
                CallOptions::default(),
            )
            .await
            .unwrap();
        assert!(f.result().is_some(), "{f}");
        conn.close().await;
        let seen = up.seen();
        assert!(seen.iter().any(|s| s.rpc() == "tools/call"));
        for s in seen.iter().filter(|s| s.method == Method::POST) {
            let modern_frame = s.body["params"]["_meta"][PV].is_string();
            let got = s.header("mcp-protocol-version");
            let want = match legacy {
                _ if modern_frame => Some("2026-07-28"),
                None => Some("2026-07-28"),
                Some(_) if s.rpc() == "initialize" => None,
                Some(R0326) => None,
                Some(r) => Some(r.as_str()),
            };
            assert_eq!(got, want, "{legacy:?}: {} {}", s.rpc(), s.text);
        }
        up.assert_only_the_endpoint();
        up.assert_frames_valid();
    }
}

// ---- B-C14, B-C15, B-C16, B-C17 (mcpx serving HTTP) ----------------------------------

async fn serve_http(tag: &str, config: &Value) -> (Child, u16, PathBuf) {
    let dir = temp_dir(tag);
    let cfg = dir.join("mcpx.json");
    std::fs::write(&cfg, config.to_string()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args(["serve", "--config"])
        .arg(&cfg)
        .args(["--http", "127.0.0.1:0"])
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .stdout(Stdio::null());
    let (child, port) = common::start_listening(cmd).await;
    (child, port, dir)
}

/// The JSON-RPC response in a body that is JSON or SSE.
fn response_in(body: &str, id: i64) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(body.trim()) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v["id"] == id && v.get("method").is_none())
        .unwrap_or_else(|| panic!("no response {id} in {body}"))
}

/// B-C14, B-C15, B-C16, B-C17, mcpx as an HTTP server: it serves no authorization
/// endpoints (no registration, no Protected Resource Metadata, no authorization-server
/// metadata: 404), never answers 401 nor sends WWW-Authenticate, serves a host the same
/// with or without a token, and never passes a host's token on: the upstream sees only
/// its configured static header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_authorization_as_a_server_and_no_token_passthrough() {
    let up = upstream(None, json!([tool("t")]), no_script).await;
    let config = json!({"mcpServers": {"up": {"type": "http", "url": up.url(),
        "headers": {"Authorization": "Bearer configured-token"}}}});
    let (_mcpx, port, dir) = serve_http("b-c16", &config).await;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut statuses = Vec::new();
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
        "/register",
        "/authorize",
        "/token",
    ] {
        for method in [reqwest::Method::GET, reqwest::Method::POST] {
            let r = http
                .request(method.clone(), format!("{base}{path}"))
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 404, "{method} {path}");
            assert!(r.headers().get("www-authenticate").is_none(), "{path}");
            statuses.push(r.status().as_u16());
        }
    }
    // A 2026-07-28 host's tools/call, with no token, a bearer token and a junk one.
    let mut texts = Vec::new();
    for (n, auth) in [
        None,
        Some("Bearer host-secret-token"),
        Some("Basic !!junk!!"),
    ]
    .into_iter()
    .enumerate()
    {
        let id = n as i64 + 1;
        let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
            "name":"t","arguments":{},"_meta":{PV:"2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":{},
            "io.modelcontextprotocol/clientInfo":{"name":"h","version":"1"}}}});
        let mut rb = http
            .post(format!("{base}/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "t")
            .body(body.to_string());
        if let Some(a) = auth {
            rb = rb.header("authorization", a);
        }
        let r = rb.send().await.unwrap();
        let status = r.status().as_u16();
        assert!(r.headers().get("www-authenticate").is_none());
        let text = r.text().await.unwrap();
        assert_eq!(status, 200, "{auth:?}: {text}");
        let v = response_in(&text, id);
        texts.push(text_of(&v).to_owned());
    }
    assert_eq!(texts, ["ok t", "ok t", "ok t"]);
    assert!(!statuses.contains(&401));
    // The upstream saw only the configured credential, never the host's.
    let seen = up.seen();
    assert!(seen.iter().any(|s| s.rpc() == "tools/call"));
    for s in &seen {
        assert_eq!(
            s.header("authorization"),
            Some("Bearer configured-token"),
            "{} {}",
            s.rpc(),
            s.text
        );
        let all = format!("{:?} {}", s.headers, s.text);
        assert!(
            !all.contains("host-secret-token") && !all.contains("junk"),
            "{all}"
        );
    }
    up.assert_only_the_endpoint();
    let _ = std::fs::remove_dir_all(&dir);
}

/// B-C15, B-C14 (client side): `mcpx serve` runs no authorization flow by itself. An
/// upstream (no credential configured) answering 401 with a `resource_metadata`
/// challenge is reported (stderr: the upstream, the status, the metadata URL, and
/// `mcpx auth login locked`, the command that authorizes it) and nothing else happens:
/// no metadata fetch, no registration, no retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_401_is_reported_not_followed() {
    let up = upstream(None, json!([tool("t")]), |s, _| {
        let meta = format!(
            "http://{}/.well-known/oauth-protected-resource/mcp",
            s.header("host").unwrap_or("")
        );
        Some(
            Response::builder()
                .status(401)
                .header(
                    "www-authenticate",
                    format!(r#"Bearer resource_metadata="{meta}", scope="files:read""#),
                )
                .body(Body::empty())
                .unwrap(),
        )
    })
    .await;
    let config = json!({"mcpServers": {"locked": {"type": "http", "url": up.url()}}});
    let mut h = Host::start("b-c15", &config, R1125).await;
    // mcpx itself still serves the host.
    let r = h.request("tools/list", json!({})).await;
    assert!(r.get("result").is_some() || r.get("error").is_some(), "{r}");
    let stderr = h.stderr();
    let line = stderr
        .lines()
        .find(|l| l.contains("locked") && l.contains("401"))
        .unwrap_or_else(|| panic!("401 not reported: {stderr}"));
    let meta = format!(
        "http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp",
        up.port
    );
    assert!(
        line.contains(&meta) && line.contains("run `mcpx auth login locked`"),
        "{line}"
    );
    let seen = up.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    up.assert_only_the_endpoint();
    h.finish().await;
}

// ---- B-C18 ---------------------------------------------------------------------------

/// B-C18: a 403 `insufficient_scope` on a tools/call reaches the host as -32603 naming
/// the upstream and the scope; mcpx neither retries it nor asks for a new token (the
/// same configured credential on every request, nothing but the MCP endpoint), and the
/// connection stays up (no new discovery, other tools still work). B-C15 at run time: a
/// 401 reaches the host as -32603 naming the upstream and saying to configure headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_scope_is_surfaced_without_step_up() {
    let up = upstream(None, json!([tool("write"), tool("read"), tool("expired")]), |s, _| {
        if s.rpc() == "tools/call" && s.body["params"]["name"] == "expired" {
            // B-C15 at run time: the credential stopped working.
            return Some(
                Response::builder()
                    .status(401)
                    .header("www-authenticate", r#"Bearer error="invalid_token""#)
                    .body(Body::empty())
                    .unwrap(),
            );
        }
        (s.rpc() == "tools/call" && s.body["params"]["name"] == "write").then(|| {
            Response::builder()
                .status(403)
                .header(
                    "www-authenticate",
                    r#"Bearer error="insufficient_scope", scope="files:write", resource_metadata="http://127.0.0.1:1/.well-known/oauth-protected-resource""#,
                )
                .body(Body::empty())
                .unwrap()
        })
    })
    .await;
    let config = json!({"mcpServers": {"files": {"type": "http", "url": up.url(),
        "headers": {"Authorization": "Bearer configured-token"}}}});
    let mut h = Host::start("b-c18", &config, R1125).await;
    for _ in 0..2 {
        let r = h.call_tool("write").await;
        let e = error_of(&r, "write");
        assert_eq!(e["code"], -32603, "{r}");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains("files")
                && msg.contains("insufficient_scope")
                && msg.contains("files:write"),
            "{msg}"
        );
    }
    let r = h.call_tool("expired").await;
    let e = error_of(&r, "expired");
    assert_eq!(e["code"], -32603, "{r}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("files") && msg.contains("401") && msg.contains("headers"),
        "{msg}"
    );
    let r = h.call_tool("read").await;
    assert_eq!(text_of(&r), "ok read", "{r}");
    let writes = up
        .calls("tools/call")
        .into_iter()
        .filter(|s| s.body["params"]["name"] == "write")
        .count();
    assert_eq!(writes, 2, "a 403 was retried");
    assert_eq!(
        up.calls("server/discover").len(),
        1,
        "the connection was dropped"
    );
    for s in up.seen() {
        assert_eq!(s.header("authorization"), Some("Bearer configured-token"));
    }
    up.assert_only_the_endpoint();
    up.assert_frames_valid();
    h.finish().await;
}

// ---- D-C13 ---------------------------------------------------------------------------

/// A legacy (2025-06-18) stdio upstream offering `names` (a JSON array of tool names);
/// tools/call answers "<ns>:<name>".
fn named_tools(ns: &str, names: &[&str]) -> Value {
    let tools: Vec<Value> = names.iter().map(|n| tool(n)).collect();
    let list = json!({"tools": tools}).to_string();
    let script = format!(
        r#"{SH_PRELUDE}  case "$line" in
    *'"method":"server/discover"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"error":{{"code":-32601,"message":"Method not found"}}}}' ;;
    *'"method":"initialize"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"protocolVersion":"2025-06-18","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"{ns}","version":"1"}}}}}}' ;;
    *'"method":"tools/list"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{list}}}' ;;
    *'"method":"tools/call"'*)
      name=$(printf '%s' "$line" | sed -n 's/.*"name":"\([^"]*\)".*/\1/p')
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"content":[{{"type":"text","text":"{ns}:'"$name"'"}}]}}}}' ;;
    *)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{}}}}' ;;
  esac
done
"#
    );
    json!({"command": "sh", "args": ["-c", script], "env": {"LOG": "/dev/null"}})
}

/// D-C13: with several upstreams every name is `<namespace>__<name>`, within
/// `[A-Za-z0-9_.-]` and the configured length (here 40), a long name shortened with a
/// hash in it; names that collide after that are all kept (the later one renamed), each
/// routes to its own upstream tool, and the collision is logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_namespaced_sanitised_bounded_and_collisions_reported() {
    let long = "l".repeat(60);
    let a = ["x y", "x_y", long.as_str(), "h\u{e9}llo"];
    let config = json!({
        "mcpServers": {"a": named_tools("a", &a), "b": named_tools("b", &["x y"])},
        "mcpx": {"names": {"maxLength": 40}},
    });
    let mut h = Host::start("d-c13", &config, R1125).await;
    let r = h.request("tools/list", json!({})).await;
    let names: Vec<String> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
    let unique: HashSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), 5, "{names:?}");
    for n in &names {
        assert!(n.len() <= 40, "{n}");
        assert!(
            n.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)),
            "{n}"
        );
    }
    assert!(names.contains(&"a__x_y".to_owned()) && names.contains(&"b__x_y".to_owned()));
    assert!(names.contains(&"a__h_llo".to_owned()), "{names:?}");
    // Every exposed name reaches its own upstream and original name.
    let mut reached = HashSet::new();
    for n in &names {
        let r = h.call_tool(n).await;
        reached.insert(text_of(&r).to_owned());
    }
    let want: HashSet<String> = a
        .iter()
        .map(|n| format!("a:{n}"))
        .chain(["b:x y".to_owned()])
        .collect();
    assert_eq!(reached, want);
    let stderr = h.stderr();
    assert!(
        stderr.contains("name collision") && stderr.contains("a__x_y"),
        "{stderr}"
    );
    h.finish().await;
}
