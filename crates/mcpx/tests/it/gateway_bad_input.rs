//! The gateway under bad input (issue "The gateway": "an upstream that crashes, hangs,
//! writes garbage or an oversized frame; a host that sends garbage or cancels
//! mid-call. The host gets a clear JSON-RPC error naming the upstream, within the
//! timeout; the other upstreams keep working; nothing hangs.").
//!
//! Each test runs `mcpx serve` (a real process) with two upstreams: `good`
//! (`mcpx example-server`) and `bad`, a small Python 3 MCP server written into the
//! test's temporary directory. `bad` speaks just enough legacy MCP (2025-06-18,
//! `"protocol": "legacy"` so mcpx skips the `server/discover` probe) and offers one tool,
//! `boom`, whose `mode` argument picks how it misbehaves. Every frame mcpx sends the
//! host is validated against the host's schema (register invariant: every frame mcpx
//! sends is valid for its receiver's revision).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use mcpx_protocol::{Era, Revision};
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The bad upstream's `callTimeoutMs`.
const CALL_TIMEOUT: Duration = Duration::from_millis(1500);
/// How late past the timeout an answer may come and still count as "within the
/// timeout": a loaded 2-core machine (CI runs builds beside the tests) delays wake-ups
/// by a second or more; a hang is what this bound catches, not speed.
const SLACK: Duration = Duration::from_secs(5);
/// The configured `mcpx.limits.maxFrameBytes`.
const MAX_FRAME: usize = 65536;

/// A legacy (2025-06-18) MCP server on stdio whose tool `boom` misbehaves as told by
/// its `mode` argument. It ignores `server/discover` like a legacy-only server that
/// never answers unknown requests.
const BAD_SERVER: &str = r#"
import json, sys

def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

def text(i, t):
    out({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": t}]}})

for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    i = msg.get("id")
    m = msg.get("method")
    if i is None or m is None:
        continue  # notifications (initialized, cancelled) and responses
    if m == "initialize":
        out({"jsonrpc": "2.0", "id": i, "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "bad", "version": "0"}}})
    elif m == "tools/list":
        out({"jsonrpc": "2.0", "id": i, "result": {"tools": [{
            "name": "boom", "description": "misbehaves",
            "inputSchema": {"type": "object", "properties": {"mode": {"type": "string"}}}}]}})
    elif m == "tools/call":
        mode = ((msg.get("params") or {}).get("arguments") or {}).get("mode", "ok")
        if mode == "crash":
            sys.stderr.write("bad server: fatal: the boom went off\n")
            sys.stderr.flush()
            sys.exit(3)
        elif mode == "hang":
            pass
        elif mode == "garbage":
            sys.stdout.write("this is not JSON\n{\"half\": a frame\n")
            sys.stdout.flush()
        elif mode == "garbage_then_answer":
            sys.stdout.write("Banner: starting the boom\n[1, 2\n")
            sys.stdout.flush()
            text(i, "answered after garbage")
        elif mode == "answer_then_exit":
            text(i, "last words")
            sys.stderr.write("bad server: exiting while idle\n")
            sys.stderr.flush()
            sys.exit(0)
        elif mode == "oversized":
            text(i, "x" * 100000)
        else:
            text(i, "ok")
    elif m == "ping":
        out({"jsonrpc": "2.0", "id": i, "result": {}})
    elif m != "server/discover":
        out({"jsonrpc": "2.0", "id": i, "error": {"code": -32601, "message": "no " + m}})
"#;

struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    rev: Revision,
    next_id: i64,
    /// Methods of requests sent and not yet answered, to validate their responses.
    methods: HashMap<i64, String>,
    dir: PathBuf,
}

fn temp_dir(tag: &str) -> PathBuf {
    crate::scratch_dir(&format!("bad-{tag}"))
}

fn config(dir: &Path) -> Value {
    let script = dir.join("bad_server.py");
    std::fs::write(&script, BAD_SERVER).unwrap();
    json!({
        "mcpServers": {
            "good": { "command": env!("CARGO_BIN_EXE_mcpx"), "args": ["example-server"] },
            "bad": {
                "command": "python3",
                "args": ["-u", script.to_string_lossy()],
                "mcpx": {
                    "protocol": "legacy",
                    "callTimeoutMs": CALL_TIMEOUT.as_millis() as u64,
                    "connectTimeoutMs": 5000
                }
            }
        },
        "mcpx": { "limits": { "maxFrameBytes": MAX_FRAME } }
    })
}

impl Host {
    /// Starts `mcpx serve` with the two upstreams and, for a legacy host, initialises.
    async fn start(tag: &str, rev: Revision) -> Host {
        let dir = temp_dir(tag);
        let cfg = dir.join("mcpx.json");
        std::fs::write(&cfg, config(&dir).to_string()).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpx"))
            .args(["serve", "--config"])
            .arg(&cfg)
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .env("MCPX_WIRE_LOG", dir.join("wire.jsonl"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut host = Host {
            child,
            stdin,
            lines,
            rev,
            next_id: 1,
            methods: HashMap::new(),
            dir,
        };
        if rev.era() == Era::Legacy {
            let init = host
                .request(
                    "initialize",
                    json!({"protocolVersion": rev.as_str(), "capabilities": {},
                           "clientInfo": {"name": "bad-input", "version": "1"}}),
                )
                .await;
            assert_eq!(init["result"]["protocolVersion"], rev.as_str(), "{init}");
            host.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
                .await;
        }
        host
    }

    async fn send_raw(&mut self, line: &str) {
        let s = self.stdin.as_mut().unwrap();
        s.write_all(line.as_bytes()).await.unwrap();
        s.write_all(b"\n").await.unwrap();
        s.flush().await.unwrap();
    }

    async fn send(&mut self, v: &Value) {
        self.send_raw(&v.to_string()).await;
    }

    /// Sends a request written for the host's revision; returns its id.
    async fn call(&mut self, method: &str, mut params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        if self.rev.era() == Era::Modern {
            params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(self.rev.as_str());
            params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
        }
        self.send(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
            .await;
        self.methods.insert(id, method.to_owned());
        id
    }

    /// The next frame from mcpx, validated against the host's schema (a response to a
    /// request of ours also against that method's result type). A list change (the
    /// upstream's tools joining the catalog after the handshake) is skipped: these
    /// tests are about requests.
    async fn recv(&mut self, within: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let v = self.recv_any(deadline).await?;
            let method = v["method"].as_str().unwrap_or_default();
            if !(method.starts_with("notifications/") && method.ends_with("/list_changed")) {
                return Some(v);
            }
        }
    }

    /// [`Host::recv`], list changes included.
    async fn recv_any(&mut self, deadline: tokio::time::Instant) -> Option<Value> {
        let line = match tokio::time::timeout_at(deadline, self.lines.next_line()).await {
            Err(_) => return None,
            Ok(l) => l.unwrap().expect("mcpx closed stdout"),
        };
        let v: Value = serde_json::from_str(&line).unwrap();
        let is_response = v.get("result").is_some() || v.get("error").is_some();
        let method = v
            .get("id")
            .and_then(Value::as_i64)
            .filter(|_| is_response)
            .and_then(|id| self.methods.remove(&id));
        match method {
            Some(m) => tap()
                .validate_response(self.rev, &m, &line)
                .unwrap_or_else(|e| panic!("{}: to the host: {e}\n{line}", self.rev)),
            None => tap()
                .validate_frame(self.rev, &line)
                .unwrap_or_else(|e| panic!("{}: to the host: {e}\n{line}", self.rev)),
        }
        Some(v)
    }

    /// Reads until the response to `id` (at most 10 s); frames before it are returned
    /// too.
    async fn response(&mut self, id: i64) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .recv(left)
                .await
                .unwrap_or_else(|| panic!("no response to request {id}"));
            if v.get("id") == Some(&json!(id)) && v.get("method").is_none() {
                return (v, before);
            }
            before.push(v);
        }
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.call(method, params).await;
        self.response(id).await.0
    }

    async fn tool(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// The good upstream still answers.
    async fn good_works(&mut self) {
        let r = self.tool("good__test_simple_text", json!({})).await;
        assert!(r["result"]["content"][0]["text"].is_string(), "{r}");
    }

    /// Everything mcpx sent its upstreams (`MCPX_WIRE_LOG`).
    fn wire(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("wire.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    async fn finish(mut self) {
        drop(self.stdin.take());
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("mcpx did not exit after the host closed stdin");
        assert!(status.unwrap().success(), "mcpx serve failed");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Host {
    /// Calls `bad__boom` until it answers (the supervisor restarts `bad` within its
    /// backoff, 1 s at the defaults); every error meanwhile names the upstream and a
    /// state of a restart.
    async fn restarted(&mut self) {
        let mut last = Value::Null;
        let every = Duration::from_millis(100);
        let restarted = crate::wait::poll_every(Duration::from_secs(10), every, async || {
            last = self.tool("bad__boom", json!({"mode": "ok"})).await;
            if last["result"]["content"][0]["text"] == "ok" {
                return Some(());
            }
            let e = error(&last, "while restarting");
            let state = e["data"]["state"].as_str().unwrap_or_default();
            assert!(
                ["backoff", "starting"].contains(&state),
                "not a restart's state: {last}"
            );
            None
        })
        .await;
        assert!(restarted.is_some(), "not restarted in 10 s: {last}");
    }
}

/// The error of a response, which must name the upstream.
fn error<'a>(v: &'a Value, what: &str) -> &'a Value {
    let e = v
        .get("error")
        .unwrap_or_else(|| panic!("{what}: expected an error, got {v}"));
    let msg = e["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("upstream bad"),
        "{what}: error does not name the upstream: {v}"
    );
    e
}

/// A crashing upstream: the host's call fails at once, naming the upstream and quoting
/// its exit status and stderr; the good upstream keeps serving; the crashed upstream
/// is started again by its supervisor.
async fn crash(rev: Revision) {
    let mut host = Host::start(&format!("crash-{rev}"), rev).await;
    let tools = host.request("tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"bad__boom"), "{names:?}");
    assert!(names.contains(&"good__test_simple_text"), "{names:?}");

    let start = Instant::now();
    let r = host.tool("bad__boom", json!({"mode": "crash"})).await;
    let e = error(&r, "crash");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("status 3"), "no exit status: {msg}");
    assert!(msg.contains("the boom went off"), "no stderr tail: {msg}");
    assert!(
        start.elapsed() < CALL_TIMEOUT,
        "the crash was reported after {:?}",
        start.elapsed()
    );

    host.good_works().await;

    // mcpx starts the upstream again by itself, after its backoff; a call meanwhile
    // is told why it cannot be served, and never starts it.
    host.restarted().await;
    host.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_crash_legacy_host() {
    crash(Revision::V2025_11_25).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_crash_modern_host() {
    crash(Revision::V2026_07_28).await;
}

/// A hanging upstream: the good upstream answers meanwhile; after `callTimeoutMs` the
/// host gets an error naming the upstream and the timeout, and mcpx tells the upstream
/// the request is cancelled (every legacy revision's basic/utilities/cancellation).
async fn hang(rev: Revision) {
    let mut host = Host::start(&format!("hang-{rev}"), rev).await;
    let start = Instant::now();
    let bad = host
        .call(
            "tools/call",
            json!({"name": "bad__boom", "arguments": {"mode": "hang"}}),
        )
        .await;
    let good = host
        .call(
            "tools/call",
            json!({"name": "good__test_simple_text", "arguments": {}}),
        )
        .await;
    let first = host.recv(Duration::from_secs(10)).await.unwrap();
    assert_eq!(
        first["id"], good,
        "the good call must answer first: {first}"
    );
    assert!(first["result"].is_object(), "{first}");

    let (r, _) = host.response(bad).await;
    let elapsed = start.elapsed();
    let e = error(&r, "hang");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("did not answer") && msg.contains("1.5s"),
        "{msg}"
    );
    assert!(
        elapsed >= CALL_TIMEOUT - Duration::from_millis(100) && elapsed < CALL_TIMEOUT + SLACK,
        "timeout error after {elapsed:?}"
    );

    let cancelled = host
        .wire()
        .into_iter()
        .any(|f| f["method"] == "notifications/cancelled" && f["params"]["reason"] == "timed out");
    assert!(cancelled, "no notifications/cancelled sent upstream");
    host.good_works().await;
    host.finish().await;
}

/// Garbage lines on the upstream's stdout that are not JSON at all are skipped
/// (2025-11-25 basic/transports §stdio: the server MUST NOT write anything that is not
/// a valid MCP message; mcpx tolerates it): an answer after garbage arrives. A line
/// that starts like a message and is not JSON means the stream can no longer be
/// framed: the call fails at once with that reason, and the upstream is restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_garbage() {
    let mut host = Host::start("garbage", Revision::V2025_11_25).await;
    let r = host
        .tool("bad__boom", json!({"mode": "garbage_then_answer"}))
        .await;
    assert_eq!(
        r["result"]["content"][0]["text"], "answered after garbage",
        "{r}"
    );

    let start = Instant::now();
    let r = host.tool("bad__boom", json!({"mode": "garbage"})).await;
    let e = error(&r, "garbage");
    assert!(e["message"].as_str().unwrap().contains("not JSON"), "{r}");
    assert_eq!(e["data"]["cause"], "framing", "{r}");
    assert!(
        start.elapsed() < CALL_TIMEOUT,
        "the garbage was reported after {:?}",
        start.elapsed()
    );

    host.good_works().await;
    host.restarted().await;
    host.finish().await;
}

/// An oversized response (over `mcpx.limits.maxFrameBytes`) is refused: the host gets
/// an error naming the upstream and the limit, before the call's timeout; the good
/// upstream keeps serving, and the bad one is restarted (its stream was given up as
/// the line crossed the limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_oversized_frame() {
    let mut host = Host::start("oversized", Revision::V2025_11_25).await;
    let start = Instant::now();
    let r = host.tool("bad__boom", json!({"mode": "oversized"})).await;
    let e = error(&r, "oversized");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains(&MAX_FRAME.to_string()),
        "no limit named: {msg}"
    );
    assert!(
        start.elapsed() < CALL_TIMEOUT,
        "the oversized frame was reported after {:?}",
        start.elapsed()
    );
    assert_eq!(e["data"]["cause"], "framing", "{r}");
    host.good_works().await;
    host.restarted().await;
    host.finish().await;
}

/// A host's garbage gets the right JSON-RPC errors (every revision's basic §JSON-RPC:
/// -32700 parse error, -32600 invalid request, -32601 method not found; an unknown
/// tool is -32602, 2025-11-25 server/tools §Error Handling), and the gateway goes on.
async fn host_garbage(rev: Revision) {
    let mut host = Host::start(&format!("host-garbage-{rev}"), rev).await;

    host.send_raw("this is not JSON {").await;
    let r = host.recv(Duration::from_secs(5)).await.unwrap();
    assert_eq!(r["error"]["code"], -32700, "{r}");

    host.send(&json!({"jsonrpc": "1.0", "id": 900, "method": "tools/list"}))
        .await;
    let r = host.recv(Duration::from_secs(5)).await.unwrap();
    assert_eq!(r["error"]["code"], -32600, "{r}");

    let r = host.tool("nobody__no_such_tool", json!({})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nobody__no_such_tool"),
        "{r}"
    );

    let r = host.request("no/such/method", json!({})).await;
    assert_eq!(r["error"]["code"], -32601, "{r}");

    host.good_works().await;
    host.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_garbage_legacy() {
    host_garbage(Revision::V2025_11_25).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_garbage_modern() {
    host_garbage(Revision::V2026_07_28).await;
}
