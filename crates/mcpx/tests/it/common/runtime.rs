//! Helpers of the gateway-runtime tests (`runtime_*.rs`): the supervisor per
//! upstream, hot reload, non-blocking startup, list_changed coalescing and shutdown.
//!
//! * processes, read from `/proc` (Linux): an upstream's child is found among the
//!   children of the `mcpx serve` process by the `MCPX_TEST_UPSTREAM` variable its
//!   configuration gives it, so a test can tell `a`'s child from `b`'s and see whether a
//!   pid changed; signals are sent with `kill(1)`;
//! * [`Gateway`]: `mcpx serve` on stdio driven as a legacy host, every frame it writes
//!   validated against the host's schema, its stderr kept, frames read with a deadline
//!   (a background task reads stdout, so nothing blocks and nothing waits unbounded);
//! * [`HttpGateway`], [`Session`], [`Stream`]: `mcpx serve --http` and its hosts over
//!   Streamable HTTP (a legacy session with its GET stream, a 2026-07-28 listen);
//! * [`Deadline`] and [`wait_for`]: every wait polls a condition with a bound.
//!
//! Each gateway, when dropped, kills the process groups of the upstream children it
//! saw (it looks every 50 ms), so a failing test leaves no `sleep 600` behind.
//!
//! Declared by each test file as
//! `#[path = "common/runtime.rs"] mod runtime;` next to `mod common;`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use parking_lot::Mutex;
use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpx_protocol::Revision;
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// The mcpx binary (`mcpx serve`, `mcpx example-server`, `mcpx probe`).
pub const MCPX: &str = env!("CARGO_BIN_EXE_mcpx");

/// The environment variable that tells the tests which upstream a process is.
pub const TAG_VAR: &str = "MCPX_TEST_UPSTREAM";

// ---- deadlines ----------------------------------------------------------------------

/// A point in time a wait must not pass.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(Instant);

impl Deadline {
    pub fn after(d: Duration) -> Deadline {
        Deadline(Instant::now() + d)
    }

    pub fn passed(&self) -> bool {
        Instant::now() >= self.0
    }

    /// What is left (zero once passed).
    pub fn left(&self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }
}

/// Polls `f` every 20 ms until it returns `Some`, for at most `within`.
pub async fn poll<T>(within: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    crate::wait::poll(within, async || f()).await
}

/// [`poll`], panicking with `what` (and `why()`, for context) when `within` passes.
pub async fn wait_for<T>(
    within: Duration,
    what: &str,
    f: impl FnMut() -> Option<T>,
    why: impl FnOnce() -> String,
) -> T {
    match poll(within, f).await {
        Some(v) => v,
        None => panic!("{what}: not within {within:?}; {}", why()),
    }
}

// ---- processes ----------------------------------------------------------------------

/// A process as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: u32,
    /// `R`, `S`, `D`, `Z` (zombie), `X` (dead), ...
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
}

impl Stat {
    /// Running, sleeping or stopped: neither a zombie nor dead.
    pub fn living(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

pub fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces or parentheses itself.
    let rest = text.get(text.rfind(')')? + 1..)?;
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some(Stat {
        pid,
        state,
        ppid,
        pgrp,
    })
}

/// Every process on the machine.
pub fn processes() -> Vec<Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat)
        .collect()
}

/// Whether `pid` is a living process (a zombie is not).
pub fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|s| s.living())
}

/// The living children of `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|s| s.ppid == pid && s.living())
        .map(|s| s.pid)
        .collect()
}

/// The living members of process group `pgid`.
pub fn group(pgid: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|s| s.pgrp == pgid && s.living())
        .map(|s| s.pid)
        .collect()
}

/// The value of `key` in the environment `pid` started with.
pub fn env_of(pid: u32, key: &str) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    raw.split(|b| *b == 0).find_map(|kv| {
        let kv = std::str::from_utf8(kv).ok()?;
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.to_owned())
    })
}

/// The living children of `parent` tagged `tag` (see [`TAG_VAR`]).
pub fn tagged_children(parent: u32, tag: &str) -> Vec<u32> {
    children(parent)
        .into_iter()
        .filter(|p| env_of(*p, TAG_VAR).as_deref() == Some(tag))
        .collect()
}

/// The command line of `pid`, its arguments joined by spaces.
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Kills the process groups it holds when dropped: what a test started outside a
/// gateway (or learnt of from a pid file) is not left behind when it fails.
#[derive(Debug, Default)]
pub struct KillGroups(pub Vec<u32>);

impl Drop for KillGroups {
    fn drop(&mut self) {
        let own = stat(std::process::id()).map(|s| s.pgrp);
        for g in &self.0 {
            if Some(*g) != own && *g > 1 {
                signal_group(*g, "KILL");
            }
        }
    }
}

/// Waits at most `within` until no living process is left in any of `pgids`; panics
/// naming what is left.
pub async fn groups_end(pgids: &[u32], within: Duration, what: &str) {
    let left = poll(within, || {
        let left: Vec<(u32, String)> = pgids
            .iter()
            .flat_map(|g| group(*g))
            .map(|p| (p, cmdline(p)))
            .collect();
        left.is_empty().then_some(())
    })
    .await;
    if left.is_none() {
        let left: Vec<(u32, String)> = pgids
            .iter()
            .flat_map(|g| group(*g))
            .map(|p| (p, cmdline(p)))
            .collect();
        panic!("{what}: upstream processes still running {within:?} later: {left:?}");
    }
}

/// Sends `sig` (a name `kill(1)` knows: `KILL`, `TERM`, `HUP`) to `pid`.
pub fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Sends `sig` to every member of process group `pgid`.
pub fn signal_group(pgid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg("--")
        .arg(format!("-{pgid}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// A free port on 127.0.0.1 at the moment of asking (for a server that must come up
/// later on a port known in advance).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// ---- configurations -----------------------------------------------------------------

/// A server entry for `mcpx example-server args…`, tagged `tag`.
pub fn example_entry(tag: &str, args: &[&str]) -> Value {
    let mut all = vec!["example-server"];
    all.extend_from_slice(args);
    json!({"command": MCPX, "args": all, "env": {TAG_VAR: tag}})
}

/// A server entry for `sh -c script`, tagged `tag`.
pub fn sh_entry(tag: &str, script: &str) -> Value {
    json!({"command": "sh", "args": ["-c", script], "env": {TAG_VAR: tag}})
}

/// A server entry for the Python fixture `name` (in `tests/fixtures/`), tagged `tag`,
/// with `env`.
pub fn python_entry(tag: &str, name: &str, env: &[(&str, &str)]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let mut vars = serde_json::Map::new();
    vars.insert(TAG_VAR.to_owned(), json!(tag));
    for (k, v) in env {
        vars.insert((*k).to_owned(), json!(v));
    }
    json!({"command": "python3", "args": [script], "env": vars})
}

/// `entry` with `settings` merged into its `mcpx` block.
pub fn with_mcpx(mut entry: Value, settings: Value) -> Value {
    for (k, v) in settings.as_object().unwrap() {
        entry["mcpx"][k] = v.clone();
    }
    entry
}

/// Writes `config` to `path` the way editors and deploy tools do: a temporary file in
/// the same directory, then an atomic rename over the old one.
pub fn replace_file(path: &Path, text: &str) {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The `test_simple_text` answer of the example server.
pub const SIMPLE_TEXT: &str = "This is a simple text response for testing.";

/// The text of a tool result's first content block.
pub fn first_text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Checks `v` is the error the contract gives a call to a tool of upstream `name`
/// that is not ready (-32603, the message naming it, `data.upstream` and
/// `data.state`); returns the state.
pub fn not_ready_state(v: &Value, name: &str) -> String {
    let err = v
        .get("error")
        .unwrap_or_else(|| panic!("expected an error for upstream {name}, got {v}"));
    assert_eq!(err["code"], -32603, "not -32603: {v}");
    let message = err["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("upstream {name}")),
        "the message does not name upstream {name}: {v}"
    );
    assert_eq!(err["data"]["upstream"], name, "data.upstream: {v}");
    let state = err["data"]["state"].as_str().unwrap_or_default().to_owned();
    assert!(
        [
            "starting",
            "backoff",
            "crash_loop",
            "needs_authorization",
            "failed",
            "stopped"
        ]
        .contains(&state.as_str()),
        "data.state is not a known state: {v}"
    );
    let lower = message.to_lowercase();
    let words: &[&str] = match state.as_str() {
        "starting" => &["starting"],
        "backoff" => &["restarting", "backoff", "back off", "backing off"],
        "crash_loop" => &["crash loop", "crash_loop", "crash-loop"],
        "needs_authorization" => &["authoriz"],
        "failed" => &["fail"],
        _ => &["stop"],
    };
    assert!(
        words.iter().any(|w| lower.contains(w)),
        "the message does not say the state {state}: {v}"
    );
    state
}

/// A host's tool names in `tools/list` results.
pub fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

// ---- the upstream processes a gateway started ---------------------------------------

/// The process groups of the upstreams a gateway started: recorded every 50 ms while
/// the gateway lives (and whenever a test looks), all killed when it is dropped, so a
/// failing test, or an mcpx that dies before its upstreams, leaves none behind.
#[derive(Debug)]
struct Groups {
    parent: u32,
    pgids: Arc<Mutex<BTreeSet<u32>>>,
}

fn record_groups(parent: u32, into: &Mutex<BTreeSet<u32>>) {
    for p in children(parent) {
        if let Some(s) = stat(p) {
            into.lock().insert(s.pgrp);
        }
    }
}

impl Groups {
    /// Starts recording the groups of `parent`'s children.
    fn watch(parent: u32) -> Groups {
        let pgids = Arc::new(Mutex::new(BTreeSet::new()));
        let weak = Arc::downgrade(&pgids);
        tokio::spawn(async move {
            while let Some(p) = weak.upgrade() {
                record_groups(parent, &p);
                drop(p);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Groups { parent, pgids }
    }

    fn record(&self) {
        record_groups(self.parent, &self.pgids);
    }

    fn kill_all(&self) {
        self.record();
        let own = stat(std::process::id()).map(|s| s.pgrp);
        for g in std::mem::take(&mut *self.pgids.lock()) {
            // Never this test process's own group.
            if Some(g) != own && g > 1 {
                signal_group(g, "KILL");
            }
        }
    }
}

/// Keeps the text of a child's stderr; the task ends at the pipe's end.
fn keep_stderr(
    stderr: tokio::process::ChildStderr,
    into: Arc<Mutex<String>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            let mut s = into.lock();
            s.push_str(&l);
            s.push('\n');
        }
    })
}

// ---- mcpx serve on stdio ------------------------------------------------------------

/// One line mcpx wrote to the host: its text, and its JSON or why it is invalid.
type Line = (String, Result<Value, String>);

/// `mcpx serve` on stdio, with this test as its (legacy) host.
pub struct Gateway {
    child: Child,
    /// mcpx's pid.
    pub pid: u32,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<Line>,
    /// Frames read while waiting for something else (notifications, requests).
    pub backlog: VecDeque<Value>,
    pub rev: Revision,
    next_id: i64,
    /// The test's directory (config, cache, wire log).
    pub dir: PathBuf,
    /// The configuration file.
    pub cfg: PathBuf,
    stderr: Arc<Mutex<String>>,
    /// The task keeping `stderr`, until it is waited for.
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
    groups: Groups,
}

impl Gateway {
    /// Starts `mcpx serve --config <config> args…` as a host of `rev` would.
    pub async fn start(tag: &str, config: &Value, rev: Revision, args: &[&str]) -> Gateway {
        Gateway::start_env(tag, config, rev, args, &[]).await
    }

    /// [`Gateway::start`] with more environment (which wins over the test's own, e.g.
    /// `XDG_CACHE_HOME` to share an era cache between two gateways).
    pub async fn start_env(
        tag: &str,
        config: &Value,
        rev: Revision,
        args: &[&str],
        env: &[(&str, &Path)],
    ) -> Gateway {
        let dir = crate::scratch_dir(&format!("rt-{tag}"));
        let cfg = config_file(&dir, config);
        let mut child = Command::new(MCPX)
            .args(["serve", "--config"])
            .arg(&cfg)
            .args(args)
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .env("MCPX_WIRE_LOG", dir.join("wire.jsonl"))
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        let stdin = child.stdin.take();
        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr_reader = Some(keep_stderr(child.stderr.take().unwrap(), stderr.clone()));
        let (tx, lines) = mpsc::unbounded_channel();
        let stdout = child.stdout.take().unwrap();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                let checked = tap()
                    .validate_frame(rev, &l)
                    .map_err(|e| e.to_string())
                    .and_then(|()| serde_json::from_str(&l).map_err(|e| e.to_string()));
                if tx.send((l, checked)).is_err() {
                    return;
                }
            }
        });
        Gateway {
            child,
            pid,
            stdin,
            lines,
            backlog: VecDeque::new(),
            rev,
            next_id: 1,
            dir,
            cfg,
            stderr,
            stderr_reader,
            groups: Groups::watch(pid),
        }
    }

    /// Waits (bounded) for mcpx to exit and for its stderr to be read to the end, so
    /// that a panic can quote its last words.
    async fn last_words(&mut self) {
        let _ = self.wait_exit(Duration::from_secs(2)).await;
        if let Some(reader) = self.stderr_reader.take() {
            // An upstream that outlives mcpx may hold the pipe: bounded.
            let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
        }
    }

    pub async fn send(&mut self, v: &Value) {
        let s = self.stdin.as_mut().expect("stdin already closed");
        let sent = match s.write_all(format!("{v}\n").as_bytes()).await {
            Ok(()) => s.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            // mcpx is gone: say why, from what it wrote last.
            self.last_words().await;
            panic!(
                "cannot write to mcpx ({e}): it exited; its stderr:\n{}",
                self.stderr()
            );
        }
    }

    /// The next line mcpx writes within `within` (the line and its frame); `None` when
    /// none comes (or mcpx closed stdout).
    async fn next_line(&mut self, within: Duration) -> Option<(String, Value)> {
        match tokio::time::timeout(within, self.lines.recv()).await {
            Ok(Some((line, Ok(v)))) => Some((line, v)),
            Ok(Some((line, Err(e)))) => panic!("to the host ({}): {e}\nline: {line}", self.rev),
            Ok(None) | Err(_) => None,
        }
    }

    /// The next frame (the backlog's first, else a new one) within `within`.
    pub async fn next(&mut self, within: Duration) -> Option<Value> {
        if let Some(v) = self.backlog.pop_front() {
            return Some(v);
        }
        self.next_line(within).await.map(|(_, v)| v)
    }

    /// Sends a request; returns its id.
    pub async fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        let mut frame = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            frame["params"] = params;
        }
        self.send(&frame).await;
        id
    }

    /// The response to request `id` (of `method`) within `within`; frames before it go
    /// to the backlog.
    pub async fn response(&mut self, id: i64, method: &str, within: Duration) -> Option<Value> {
        let d = Deadline::after(within);
        loop {
            let (line, v) = self.next_line(d.left()).await?;
            if v.get("id") == Some(&json!(id)) && v.get("method").is_none() {
                if v.get("result").is_some() {
                    tap()
                        .validate_response(self.rev, method, &line)
                        .unwrap_or_else(|e| panic!("to the host: {e}"));
                }
                return Some(v);
            }
            self.backlog.push_back(v);
        }
    }

    /// A request answered within 20 s (else a panic naming it).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params).await;
        match self.response(id, method, Duration::from_secs(20)).await {
            Some(v) => v,
            None => {
                let closed = self.lines.is_closed() && self.lines.is_empty();
                if closed {
                    self.last_words().await;
                }
                panic!(
                    "no answer to {method} ({}); mcpx's stderr:\n{}",
                    if closed {
                        "mcpx closed its stdout"
                    } else {
                        "not within 20 s"
                    },
                    self.stderr()
                )
            }
        }
    }

    /// A legacy host's handshake (no capabilities); returns the response.
    pub async fn initialize(&mut self) -> Value {
        let v = self.request("initialize", self.init_params()).await;
        self.initialized().await;
        v
    }

    pub fn init_params(&self) -> Value {
        json!({"protocolVersion": self.rev.as_str(), "capabilities": {},
               "clientInfo": {"name": "mcpx-runtime-tests", "version": "1"}})
    }

    pub async fn initialized(&mut self) {
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// `tools/call` of `name` with `arguments`: the response (a result or an error).
    pub async fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// Calls `name` until it answers with a result that is not a tool error, for at
    /// most `within` (an upstream that is still starting answers with an error);
    /// returns the result.
    pub async fn call_until_ok(&mut self, name: &str, arguments: Value, within: Duration) -> Value {
        let mut last = Value::Null;
        let every = Duration::from_millis(100);
        let ok = crate::wait::poll_every(within, every, async || {
            last = self.call(name, arguments.clone()).await;
            last.get("result").filter(|r| r["isError"] != true).cloned()
        })
        .await;
        ok.unwrap_or_else(|| {
            panic!(
                "{name} did not become callable within {within:?}; last answer: {last}\nmcpx's stderr:\n{}",
                self.stderr()
            )
        })
    }

    /// Every tool name the host sees (all pages).
    pub async fn tools(&mut self) -> Vec<String> {
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let v = self.request("tools/list", params).await;
            let r = v.get("result").unwrap_or_else(|| panic!("tools/list: {v}"));
            names.extend(tool_names(r));
            match r["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return names,
            }
        }
    }

    /// Polls `tools/list` until `pred` holds for the names, for at most `within`;
    /// returns the names.
    pub async fn tools_until(
        &mut self,
        within: Duration,
        what: &str,
        pred: impl Fn(&[String]) -> bool,
    ) -> Vec<String> {
        let mut last = Vec::new();
        let every = Duration::from_millis(100);
        let found = crate::wait::poll_every(within, every, async || {
            last = self.tools().await;
            pred(&last).then(|| last.clone())
        })
        .await;
        found.unwrap_or_else(|| panic!("{what}: not within {within:?}; tools: {last:?}"))
    }

    /// Reads what mcpx has written until it has been quiet for `quiet` (for at most
    /// 5 s) and forgets it: what came before a point in the test is not taken for
    /// what comes after.
    pub async fn drain(&mut self, quiet: Duration) {
        let d = Deadline::after(Duration::from_secs(5));
        while !d.passed() && self.next_line(quiet.min(d.left())).await.is_some() {}
        self.backlog.clear();
    }

    /// Removes the notifications `method` from the backlog; returns how many there were.
    pub fn take_notes(&mut self, method: &str) -> usize {
        let before = self.backlog.len();
        self.backlog.retain(|v| v["method"] != method);
        before - self.backlog.len()
    }

    /// Whether a notification `method` is in the backlog or arrives within `within`
    /// (it is consumed; other frames stay in the backlog).
    pub async fn wait_note(&mut self, method: &str, within: Duration) -> bool {
        if self.take_notes(method) > 0 {
            return true;
        }
        let d = Deadline::after(within);
        while let Some((_, v)) = self.next_line(d.left()).await {
            if v["method"] == method {
                return true;
            }
            self.backlog.push_back(v);
        }
        false
    }

    /// What mcpx wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().clone()
    }

    /// Frames mcpx sent upstream so far (`MCPX_WIRE_LOG`; every upstream in one file).
    pub fn wire(&self) -> Vec<Value> {
        wire(&self.dir)
    }

    /// The living children of mcpx (their groups are recorded for cleanup).
    pub fn children(&mut self) -> Vec<u32> {
        self.groups.record();
        children(self.pid)
    }

    /// The one living child of mcpx tagged `tag`, if there is exactly one.
    pub fn upstream_pid(&mut self, tag: &str) -> Option<u32> {
        self.groups.record();
        match tagged_children(self.pid, tag)[..] {
            [p] => Some(p),
            _ => None,
        }
    }

    /// Waits (at most `within`) for a child tagged `tag` that is not `old`.
    pub async fn wait_upstream(&mut self, tag: &str, old: Option<u32>, within: Duration) -> u32 {
        let pid = self.pid;
        let found = poll(within, || {
            tagged_children(pid, tag)
                .into_iter()
                .find(|p| Some(*p) != old)
        })
        .await;
        self.groups.record();
        found.unwrap_or_else(|| {
            panic!(
                "no {}child of mcpx for upstream {tag} within {within:?} (children: {:?}); mcpx's stderr:\n{}",
                if old.is_some() { "new " } else { "" },
                children(pid),
                self.stderr()
            )
        })
    }

    /// Closes mcpx's stdin (the host goes away).
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Waits at most `within` for mcpx to exit.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(within, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.groups.kill_all();
    }
}

/// Writes `config` to `dir/config/mcpx.json`: a directory of its own, so that what a
/// watcher of the file's directory sees is the file's changes only (not the wire log's
/// or the era cache's writes in `dir`).
fn config_file(dir: &Path, config: &Value) -> PathBuf {
    let cfg = dir.join("config").join("mcpx.json");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, serde_json::to_string_pretty(config).unwrap()).unwrap();
    cfg
}

/// The frames in `dir/wire.jsonl` (a line being written is skipped).
pub fn wire(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("wire.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

// ---- mcpx serve --http --------------------------------------------------------------

/// `mcpx serve --http 127.0.0.1:0`.
pub struct HttpGateway {
    child: Child,
    pub pid: u32,
    pub port: u16,
    pub dir: PathBuf,
    pub cfg: PathBuf,
    /// From the spawn to the `Streamable HTTP at http://…` line on stderr.
    pub announced_after: Duration,
    stderr: Arc<Mutex<String>>,
    groups: Groups,
}

impl HttpGateway {
    /// Starts it on `config`; waits at most 20 s for it to announce its address.
    pub async fn start(tag: &str, config: &Value, args: &[&str]) -> HttpGateway {
        HttpGateway::start_within(tag, config, args, Duration::from_secs(20)).await
    }

    /// [`HttpGateway::start`], waiting at most `within` for the address.
    pub async fn start_within(
        tag: &str,
        config: &Value,
        args: &[&str],
        within: Duration,
    ) -> HttpGateway {
        HttpGateway::start_env(tag, config, args, &[], within).await
    }

    /// [`HttpGateway::start_within`], with `env` set for mcpx.
    pub async fn start_env(
        tag: &str,
        config: &Value,
        args: &[&str],
        env: &[(&str, &str)],
        within: Duration,
    ) -> HttpGateway {
        let dir = crate::scratch_dir(&format!("rt-{tag}"));
        let cfg = config_file(&dir, config);
        let started = Instant::now();
        let mut child = Command::new(MCPX)
            .args(["serve", "--config"])
            .arg(&cfg)
            .args(["--http", "127.0.0.1:0"])
            .args(args)
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .env("MCPX_WIRE_LOG", dir.join("wire.jsonl"))
            .env_remove("MCPX_SERVE_TOKEN")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        // Detached: nothing here waits for the end of its stderr.
        drop(keep_stderr(child.stderr.take().unwrap(), stderr.clone()));
        // Built before the wait, so that a panic drops it: mcpx and its upstreams
        // are killed.
        let mut gw = HttpGateway {
            child,
            pid,
            port: 0,
            dir,
            cfg,
            announced_after: Duration::ZERO,
            stderr,
            groups: Groups::watch(pid),
        };
        let port = poll(within, || {
            let text = gw.stderr.lock();
            let rest = text.split("Streamable HTTP at http://127.0.0.1:").nth(1)?;
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u16>().ok()
        })
        .await;
        gw.announced_after = started.elapsed();
        let Some(port) = port else {
            panic!(
                "mcpx serve --http announced no address within {within:?}; its stderr:\n{}",
                gw.stderr()
            );
        };
        gw.port = port;
        gw
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().clone()
    }

    pub fn wire(&self) -> Vec<Value> {
        wire(&self.dir)
    }

    pub fn upstream_pid(&mut self, tag: &str) -> Option<u32> {
        self.groups.record();
        match tagged_children(self.pid, tag)[..] {
            [p] => Some(p),
            _ => None,
        }
    }

    pub fn children(&mut self) -> Vec<u32> {
        self.groups.record();
        children(self.pid)
    }

    pub async fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(within, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }
}

impl Drop for HttpGateway {
    fn drop(&mut self) {
        self.groups.kill_all();
    }
}

/// An HTTP client that never goes through a proxy (127.0.0.1 only).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// The JSON frames of an SSE body, or the one JSON body.
pub fn frames(body: &str) -> Vec<Value> {
    if body.trim_start().starts_with('{') {
        return serde_json::from_str(body).into_iter().collect();
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        // A line cut by the end of what was read (a live stream) is skipped.
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// Validates each frame against `rev`'s schema.
pub fn validate_all(rev: Revision, frames: &[Value]) {
    for f in frames {
        tap()
            .validate_frame(rev, &f.to_string())
            .unwrap_or_else(|e| panic!("to the host: {e}"));
    }
}

/// A legacy host's session over Streamable HTTP.
#[derive(Clone)]
pub struct Session {
    client: reqwest::Client,
    url: String,
    /// The id of the session's next request (shared by its clones).
    next_id: Arc<std::sync::atomic::AtomicI64>,
    pub sid: String,
    pub rev: Revision,
}

impl Session {
    /// `initialize` (answered, body and all, within `within`) and
    /// `notifications/initialized`.
    pub async fn open(url: &str, rev: Revision, within: Duration) -> Session {
        let client = client();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": rev.as_str(), "capabilities": {},
            "clientInfo": {"name": "mcpx-runtime-tests", "version": "1"}}});
        let (sid, body) = tokio::time::timeout(within, async {
            let resp = client
                .post(url)
                .header("Accept", "application/json, text/event-stream")
                .header("Content-Type", "application/json")
                .body(init.to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            let sid = resp.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_owned();
            (sid, resp.text().await.unwrap())
        })
        .await
        .unwrap_or_else(|_| panic!("initialize was not answered within {within:?}"));
        let f = frames(&body);
        validate_all(rev, &f);
        assert!(
            f.iter().any(|v| v["id"] == 0 && v["result"].is_object()),
            "{body}"
        );
        let s = Session {
            client,
            url: url.to_owned(),
            next_id: Arc::new(std::sync::atomic::AtomicI64::new(1)),
            sid,
            rev,
        };
        let r = s
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
        s
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        self.client
            .post(&self.url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .header("Mcp-Session-Id", &self.sid)
            .header("MCP-Protocol-Version", self.rev.as_str())
            .body(body.to_string())
    }

    /// Ends the session (`DELETE`); the status.
    pub async fn delete(&self) -> u16 {
        self.client
            .delete(&self.url)
            .header("Mcp-Session-Id", &self.sid)
            .header("MCP-Protocol-Version", self.rev.as_str())
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    /// A request; its response within 30 s.
    pub async fn request(&self, method: &str, params: Value) -> Value {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let body = tokio::time::timeout(Duration::from_secs(30), async {
            self.post(&frame)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        })
        .await
        .unwrap_or_else(|_| panic!("no answer to {method} (id {id}) within 30 s"));
        let f = frames(&body);
        validate_all(self.rev, &f);
        let resp = f
            .into_iter()
            .find(|v| v["id"] == id && v.get("method").is_none())
            .unwrap_or_else(|| panic!("no response to {method} in {body}"));
        if resp.get("result").is_some() {
            tap()
                .validate_response(self.rev, method, &resp.to_string())
                .unwrap_or_else(|e| panic!("to the host: {e}"));
        }
        resp
    }

    /// Every tool name (all pages).
    pub async fn tools(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let v = self.request("tools/list", params).await;
            let r = v.get("result").unwrap_or_else(|| panic!("tools/list: {v}"));
            names.extend(tool_names(r));
            match r["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return names,
            }
        }
    }

    /// The session's GET stream, read in the background.
    pub async fn get_stream(&self) -> Stream {
        let resp = tokio::time::timeout(
            Duration::from_secs(10),
            self.client
                .get(&self.url)
                .header("Accept", "text/event-stream")
                .header("Mcp-Session-Id", &self.sid)
                .header("MCP-Protocol-Version", self.rev.as_str())
                .send(),
        )
        .await
        .expect("the GET stream did not open within 10 s")
        .unwrap();
        assert_eq!(resp.status(), 200, "GET stream");
        Stream::read(resp)
    }
}

/// The `_meta` of a 2026-07-28 request.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "mcpx-runtime-tests", "version": "1"},
    })
}

/// A 2026-07-28 host's `subscriptions/listen` (id `id`) for `notifications`, read in
/// the background once acknowledged (within 10 s).
pub async fn listen(url: &str, id: &str, notifications: Value) -> Stream {
    let req = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
        "notifications": notifications, "_meta": modern_meta()}});
    let resp = tokio::time::timeout(
        Duration::from_secs(10),
        client()
            .post(url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "subscriptions/listen")
            .body(req.to_string())
            .send(),
    )
    .await
    .expect("subscriptions/listen not answered within 10 s")
    .unwrap();
    assert_eq!(resp.status(), 200, "subscriptions/listen");
    let stream = Stream::read(resp);
    let acked = poll(Duration::from_secs(10), || {
        stream.frames().into_iter().find(|f| {
            f["method"] == "notifications/subscriptions/acknowledged"
                && f["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == id
        })
    })
    .await;
    assert!(
        acked.is_some(),
        "no acknowledgement of the listen: {}",
        stream.text()
    );
    stream
}

/// A response body (SSE) read in the background as it comes.
pub struct Stream {
    text: Arc<Mutex<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl Stream {
    fn read(mut resp: reqwest::Response) -> Stream {
        let text = Arc::new(Mutex::new(String::new()));
        let into = text.clone();
        let task = tokio::spawn(async move {
            while let Ok(Some(chunk)) = resp.chunk().await {
                into.lock().push_str(&String::from_utf8_lossy(&chunk));
            }
        });
        Stream { text, task }
    }

    /// All read so far.
    pub fn text(&self) -> String {
        self.text.lock().clone()
    }

    /// How much has been read so far (bytes).
    pub fn len(&self) -> usize {
        self.text.lock().len()
    }

    /// The frames read so far.
    pub fn frames(&self) -> Vec<Value> {
        frames(&self.text())
    }

    /// The frames read after the first `from` bytes.
    pub fn frames_after(&self, from: usize) -> Vec<Value> {
        let t = self.text();
        frames(t.get(from..).unwrap_or_default())
    }

    /// Waits (at most `within`) until nothing has been read for `quiet`.
    pub async fn settle(&self, quiet: Duration, within: Duration) {
        let mut last = (self.len(), Instant::now());
        // Quiet or not, the wait ends at `within`.
        let _ = crate::wait::poll(within, async || {
            let n = self.len();
            if n != last.0 {
                last = (n, Instant::now());
            }
            (last.1.elapsed() >= quiet).then_some(())
        })
        .await;
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.task.abort();
    }
}
