//! The host side of mcpx's end-to-end tests: `mcpx serve` started as a real process
//! on stdio, driven as a host of one revision, with every frame it sends the host
//! validated against that revision's schema (the schema tap), and the frames it sends
//! upstream read back from `MCPX_WIRE_LOG`. Shared by the tests in this folder
//! (`mod common;`); each uses what it needs.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use mcpx_protocol::{Era, Revision};
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

pub const R2411: Revision = Revision::V2024_11_05;
pub const R0326: Revision = Revision::V2025_03_26;
pub const R0618: Revision = Revision::V2025_06_18;
pub const R1125: Revision = Revision::V2025_11_25;
pub const R2026: Revision = Revision::V2026_07_28;

/// Starts an mcpx HTTP server (`serve --http` or `example-server --http`) whose command
/// binds `127.0.0.1:0`, and returns it with the port it announced on stderr.
///
/// Letting the server bind port 0 itself is what makes parallel tests safe: picking a
/// "free" port first and handing it over races with every other test doing the same
/// (two servers on one port, and one test talking to the other's server).
pub async fn start_listening(mut cmd: Command) -> (Child, u16) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    let port = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            let rest = (line.split("at http://127.0.0.1:").nth(1))
                .or_else(|| line.split("at https://127.0.0.1:").nth(1));
            if let Some(rest) = rest {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                return digits.parse::<u16>().ok();
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        None
    })
    .await
    .ok()
    .flatten();
    let Some(port) = port else {
        panic!("the server announced no port; its stderr:\n{seen}");
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
    (child, port)
}

/// mcpx talking to a host (this test) on stdio.
pub struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    /// The revision the host speaks.
    pub rev: Revision,
    /// The id of the next request the host sends.
    pub next_id: i64,
    /// The test's own directory (config, era cache, wire log).
    pub dir: PathBuf,
}

/// Params from text the test knows to be valid.
pub fn params(text: &str) -> mcpx_protocol::Params {
    mcpx_protocol::Params::parse(text.to_owned()).expect("valid params")
}

pub fn temp_dir(tag: &str) -> PathBuf {
    crate::scratch_dir(&format!("test-{tag}"))
}

/// A config with one upstream: `mcpx example-server --revision <rev>`.
pub fn example(rev: Revision) -> Value {
    json!({"mcpServers": {"up": {
        "command": env!("CARGO_BIN_EXE_mcpx"),
        "args": ["example-server", "--revision", rev.as_str()],
    }}})
}

/// A config with one scripted upstream (`sh -c script`).
pub fn scripted(script: &str) -> Value {
    json!({"mcpServers": {"up": {"command": "sh", "args": ["-c", script]}}})
}

pub fn modern_meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "mcpx-tests", "version": "1"},
    })
}

impl Host {
    pub async fn start(tag: &str, config: &Value, rev: Revision) -> Host {
        Host::start_with(tag, config, rev, &[]).await
    }

    /// [`Host::start`], with more arguments for `mcpx serve`.
    pub async fn start_with(tag: &str, config: &Value, rev: Revision, args: &[&str]) -> Host {
        Host::start_env(tag, config, rev, args, &[]).await
    }

    /// [`Host::start_with`], with more environment variables for `mcpx serve`.
    pub async fn start_env(
        tag: &str,
        config: &Value,
        rev: Revision,
        args: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Host {
        let dir = temp_dir(tag);
        let cfg = dir.join("mcpx.json");
        std::fs::write(&cfg, config.to_string()).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpx"))
            .args(["serve", "--config"])
            .arg(&cfg)
            .args(args)
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .env("MCPX_WIRE_LOG", dir.join("wire.jsonl"))
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Host {
            child,
            stdin,
            lines,
            rev,
            next_id: 1,
            dir,
        }
    }

    /// `initialize` with `capabilities`, without `notifications/initialized`.
    pub async fn initialize_only(&mut self, capabilities: Value) -> Value {
        let (init, _) = self
            .raw_request(
                "initialize",
                json!({"protocolVersion": self.rev.as_str(), "capabilities": capabilities,
                       "clientInfo": {"name": "mcpx-tests", "version": "1"}}),
            )
            .await;
        init
    }

    pub async fn initialized(&mut self) {
        self.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await;
    }

    /// A legacy host's handshake with `capabilities`; returns the InitializeResult.
    pub async fn initialize(&mut self, capabilities: Value) -> Value {
        let init = self.initialize_only(capabilities).await;
        self.initialized().await;
        init
    }

    pub async fn send(&mut self, v: &Value) {
        self.send_line(&v.to_string()).await;
    }

    /// Sends `line` as written (text a `Value` cannot hold, such as a lone surrogate
    /// escape), then a newline.
    pub async fn send_line(&mut self, line: &str) {
        let s = self.stdin.as_mut().unwrap();
        s.write_all(line.as_bytes()).await.unwrap();
        s.write_all(b"\n").await.unwrap();
        s.flush().await.unwrap();
    }

    pub async fn next_line(&mut self, what: &str) -> String {
        tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("{}: no answer to {what}", self.rev))
            .unwrap()
            .expect("mcpx closed stdout")
    }

    /// The next frame, validated against the host's schema.
    pub async fn next_frame(&mut self, what: &str) -> Value {
        let line = self.next_line(what).await;
        tap()
            .validate_frame(self.rev, &line)
            .unwrap_or_else(|e| panic!("to the host: {e}"));
        serde_json::from_str(&line).unwrap()
    }

    /// Sends `params` as written; returns the response and the frames before it, all
    /// validated against the host's schema. Requests from mcpx are not answered.
    pub async fn raw_request(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let id = self.next_id;
        self.next_id += 1;
        let mut frame = json!({"jsonrpc":"2.0","id":id,"method":method});
        if !params.is_null() {
            frame["params"] = params;
        }
        self.send(&frame).await;
        let mut notes = Vec::new();
        loop {
            let line = self.next_line(method).await;
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id") == Some(&json!(id)) && v.get("method").is_none() {
                if v.get("result").is_some() {
                    tap()
                        .validate_response(self.rev, method, &line)
                        .unwrap_or_else(|e| panic!("to the host: {e}"));
                } else {
                    tap()
                        .validate_frame(self.rev, &line)
                        .unwrap_or_else(|e| panic!("to the host: {e}"));
                }
                return (v, notes);
            }
            tap()
                .validate_frame(self.rev, &line)
                .unwrap_or_else(|e| panic!("to the host: {e}"));
            notes.push(v);
        }
    }

    /// Sends a request and answers every request mcpx sends meanwhile with the frames
    /// `answer` returns for it (in order). Returns the response, the requests mcpx
    /// sent, and the notifications, all validated against the host's schema.
    pub async fn exchange(
        &mut self,
        method: &str,
        params: Value,
        answer: &mut dyn FnMut(&Value) -> Vec<Value>,
    ) -> (Value, Vec<Value>, Vec<Value>) {
        let id = self.next_id;
        self.next_id += 1;
        let mut frame = json!({"jsonrpc":"2.0","id":id,"method":method});
        if !params.is_null() {
            frame["params"] = params;
        }
        self.send(&frame).await;
        let (mut asks, mut notes) = (Vec::new(), Vec::new());
        loop {
            let v = self.next_frame(method).await;
            if v.get("id") == Some(&json!(id)) && v.get("method").is_none() {
                if v.get("result").is_some() {
                    tap()
                        .validate_response(self.rev, method, &v.to_string())
                        .unwrap_or_else(|e| panic!("to the host: {e}"));
                }
                return (v, asks, notes);
            }
            if v.get("id").is_some() && v.get("method").is_some() {
                for f in answer(&v) {
                    self.send(&f).await;
                }
                asks.push(v);
            } else {
                notes.push(v);
            }
        }
    }

    /// A request written for the host's revision (modern hosts add the `_meta` keys,
    /// with no client capabilities).
    pub async fn request(&mut self, method: &str, mut params: Value) -> (Value, Vec<Value>) {
        if self.rev.era() == Era::Modern {
            let meta = modern_meta(json!({}));
            for (k, v) in meta.as_object().unwrap() {
                if params
                    .pointer(&format!("/_meta/{}", k.replace('/', "~1")))
                    .is_none()
                {
                    params["_meta"][k] = v.clone();
                }
            }
        }
        self.raw_request(method, params).await
    }

    /// Frames mcpx sent the upstream so far (`MCPX_WIRE_LOG`); a line still being
    /// written is skipped.
    pub fn wire(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("wire.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Ends the host (mcpx sees EOF and exits); returns every frame mcpx sent the
    /// upstream. Each line of the log must be JSON.
    pub async fn finish(mut self) -> Vec<Value> {
        drop(self.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
        let wire = std::fs::read_to_string(self.dir.join("wire.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("wire log: {e}: {l}")))
            .collect();
        let _ = std::fs::remove_dir_all(&self.dir);
        wire
    }
}

impl Host {
    /// [`Host::finish`], with every frame mcpx sent the upstream validated against the
    /// upstream's revision `up`.
    pub async fn finish_checked(self, up: Revision) -> Vec<Value> {
        let wire = self.finish().await;
        for f in &wire {
            tap()
                .validate_frame(up, &f.to_string())
                .unwrap_or_else(|e| panic!("to the upstream ({up}): {e}\n{f}"));
        }
        wire
    }
}

pub fn result<'a>(v: &'a Value, what: &str) -> &'a Value {
    v.get("result")
        .unwrap_or_else(|| panic!("{what}: expected a result, got {v}"))
}

pub fn error_code(v: &Value, what: &str) -> i64 {
    v.pointer("/error/code")
        .and_then(Value::as_i64)
        .unwrap_or_else(|| panic!("{what}: expected an error, got {v}"))
}

pub async fn host(tag: &str, config: &Value, rev: Revision) -> Host {
    let mut h = Host::start(tag, config, rev).await;
    if rev.era() == Era::Legacy {
        h.initialize_only(json!({})).await;
        h.initialized().await;
    }
    h
}

/// The frames in `wire` with `method` (a method name is either a request's or a
/// notification's, never both).
pub fn sent<'a>(wire: &'a [Value], method: &str) -> Vec<&'a Value> {
    wire.iter().filter(|v| v["method"] == method).collect()
}

// ---- 2026-07-28 hosts and input_required rounds ------------------------------

/// A modern host in front of the legacy example server.
pub async fn bridged(tag: &str) -> Host {
    Host::start(tag, &example(R1125), R2026).await
}

/// `tools/call` of `tool` from a modern host declaring `caps`, with `extra` params.
pub async fn call(h: &mut Host, tool: &str, caps: Value, extra: Value) -> Value {
    let mut meta = modern_meta(json!({}));
    meta["io.modelcontextprotocol/clientCapabilities"] = caps;
    let mut params = json!({"name": tool, "arguments": {}, "_meta": meta});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    let (v, notes) = h.raw_request("tools/call", params).await;
    // 2026-07-28 basic/patterns: never a server-to-client request on the wire.
    assert!(notes.iter().all(|n| n.get("id").is_none()), "{notes:?}");
    v
}

pub fn all_caps() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

pub fn elicited(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

pub fn sampled(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"})
}

pub fn roots() -> Value {
    json!({"roots": [{"uri": "file:///bridge", "name": "bridge"}]})
}

pub fn text(r: &Value) -> String {
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Starts `mcpx serve` on `config` with `env` and returns the line of its stderr that
/// says an upstream is unavailable (and why), within 20 s.
pub async fn unavailable_because(
    tag: &str,
    config: &Value,
    env: &[(&str, &std::ffi::OsStr)],
) -> String {
    let dir = temp_dir(tag);
    let cfg = dir.join("mcpx.json");
    std::fs::write(&cfg, config.to_string()).unwrap();
    let mut gw = Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(gw.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(l) = stderr.next_line().await.unwrap() {
            if l.contains("unavailable") {
                return l;
            }
        }
        panic!("mcpx serve ended without saying an upstream is unavailable");
    })
    .await
    .expect("mcpx serve said nothing of its upstream");
    let _ = gw.kill().await;
    line
}

/// `mcpx example-server --http 127.0.0.1:0` with `args`; the child and its port.
pub async fn example_http(args: &[&str]) -> (Child, u16) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.arg("example-server")
        .args(args)
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::null());
    start_listening(cmd).await
}

/// The example server's text every `test_simple_text` answers.
pub const SIMPLE_TEXT: &str = "This is a simple text response for testing.";

impl Host {
    /// Calls the tool `name` (the example server's `test_simple_text`, as this host
    /// sees it) and checks its answer.
    pub async fn calls_simple_text(&mut self, name: &str) {
        let (v, _) = self
            .request("tools/call", json!({"name": name, "arguments": {}}))
            .await;
        assert_eq!(text(result(&v, "tools/call")), SIMPLE_TEXT, "{v}");
    }
}
