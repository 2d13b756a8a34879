//! `mcpx daemon` as a real process for the daemon's tests: started on a configuration
//! of example servers in a scratch directory (its own `$XDG_RUNTIME_DIR`), asked over
//! its real Unix socket (hyper's client) and its TCP listener (reqwest). Every wait is
//! bounded.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The longest any single exchange in these tests may take.
pub const WITHIN: Duration = Duration::from_secs(20);

/// Two example upstreams: one that speaks every revision (`everything`) and one that
/// speaks only 2025-03-26 (`legacy`), as `--demo` has them.
pub fn two_examples() -> Value {
    let exe = env!("CARGO_BIN_EXE_mcpx");
    json!({"mcpServers": {
        "everything": {"command": exe, "args": ["example-server"]},
        "legacy": {"command": exe, "args": ["example-server", "--revision", "2025-03-26"]},
    }})
}

/// A running daemon.
pub struct Daemon {
    pub child: Child,
    /// The test's directory.
    pub dir: PathBuf,
    /// Its `$XDG_RUNTIME_DIR`.
    pub run: PathBuf,
    /// The configuration file.
    pub config: PathBuf,
    /// The socket it announced.
    pub socket: PathBuf,
    /// Its TCP port, with `--http`.
    pub port: Option<u16>,
    /// Its stderr so far (kept by a task).
    pub stderr: std::sync::Arc<parking_lot::Mutex<String>>,
}

/// An `mcpx` command with the test's environment: its runtime, cache and state
/// directories and wire log.
pub fn mcpx(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    c.args(args)
        .env("XDG_RUNTIME_DIR", dir.join("run"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("MCPX_WIRE_LOG", dir.join("wire.jsonl"))
        .env_remove("MCPX_AUTOSTART")
        .env_remove("MCPX_SERVE_TOKEN")
        .env_remove("MCPX_CONFIG")
        .current_dir(dir)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    c
}

/// Runs `mcpx ARGS` to its end (bounded); its exit status, stdout and stderr.
pub async fn run(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = tokio::time::timeout(
        WITHIN,
        mcpx(dir, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output(),
    )
    .await
    .expect("mcpx finishes in time")
    .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Frames mcpx sent upstream so far (`MCPX_WIRE_LOG`).
pub fn wire(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("wire.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

impl Daemon {
    /// Starts `mcpx daemon --config <config> ARGS` in a fresh directory named `tag`,
    /// and waits until it announces its socket (and port).
    pub async fn start(tag: &str, config: &Value, args: &[&str]) -> Daemon {
        let dir = crate::scratch_dir(&format!("daemon-{tag}"));
        Daemon::start_in(dir, config, args).await
    }

    /// [`Daemon::start`] in `dir`, which may hold an earlier daemon's files.
    pub async fn start_in(dir: PathBuf, config: &Value, args: &[&str]) -> Daemon {
        let cfg = dir.join("mcpx.json");
        std::fs::write(&cfg, config.to_string()).unwrap();
        let mut all = vec!["daemon", "--config", cfg.to_str().unwrap()];
        all.extend_from_slice(args);
        let mut child = mcpx(&dir, &all)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr = std::sync::Arc::new(parking_lot::Mutex::new(String::new()));
        let announced = tokio::time::timeout(WITHIN, async {
            while let Ok(Some(line)) = lines.next_line().await {
                stderr.lock().push_str(&format!("{line}\n"));
                if let Some(rest) = line.split(" on ").nth(1)
                    && line.starts_with("mcpx daemon: serving")
                {
                    let (socket, http) = match rest.split_once(" and http://") {
                        Some((s, h)) => (s, Some(h)),
                        None => (rest, None),
                    };
                    let port = http.and_then(|h| {
                        let addr = h.split_whitespace().next()?;
                        addr.rsplit(':').next()?.parse::<u16>().ok()
                    });
                    return Some((PathBuf::from(socket), port));
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        let Some((socket, port)) = announced else {
            panic!(
                "the daemon announced no socket; its stderr:\n{}",
                stderr.lock()
            );
        };
        let keep = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                keep.lock().push_str(&format!("{line}\n"));
            }
        });
        Daemon {
            child,
            run: dir.join("run"),
            dir,
            config: cfg,
            socket,
            port,
            stderr,
        }
    }

    /// One request over the Unix socket: the status and the body as JSON (`null` when
    /// it is not JSON), with the response's content type.
    pub async fn ask_full(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> (u16, String, Value) {
        tokio::time::timeout(WITHIN, async {
            let stream = tokio::net::UnixStream::connect(&self.socket).await.unwrap();
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .unwrap();
            tokio::spawn(conn);
            let mut req = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header("host", "localhost");
            // A body is JSON (`/v1` refuses any other), unless the test names a type.
            if body.is_some()
                && !headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            {
                req = req.header("content-type", "application/json");
            }
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            let req = req
                .body(Full::new(Bytes::from(body.unwrap_or("").to_owned())))
                .unwrap();
            let resp = sender.send_request(req).await.unwrap();
            let status = resp.status().as_u16();
            let media = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            if media.starts_with("text/event-stream") {
                // An endless stream: its first chunk only.
                let mut body = resp.into_body();
                let first = body.frame().await.unwrap().unwrap();
                let text = String::from_utf8_lossy(first.data_ref().unwrap()).into_owned();
                return (status, media, Value::String(text));
            }
            let bytes = resp.into_body().collect().await.unwrap().to_bytes();
            (
                status,
                media,
                serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            )
        })
        .await
        .unwrap_or_else(|_| panic!("{method} {path}: no answer within {WITHIN:?}"))
    }

    /// GET over the socket, the body as text (the status page).
    pub async fn get_text(&self, path: &str) -> (u16, String) {
        tokio::time::timeout(WITHIN, async {
            let stream = tokio::net::UnixStream::connect(&self.socket).await.unwrap();
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .unwrap();
            tokio::spawn(conn);
            let req = hyper::Request::get(path)
                .header("host", "localhost")
                .body(Full::new(Bytes::new()))
                .unwrap();
            let resp = sender.send_request(req).await.unwrap();
            let status = resp.status().as_u16();
            let bytes = resp.into_body().collect().await.unwrap().to_bytes();
            (status, String::from_utf8_lossy(&bytes).into_owned())
        })
        .await
        .unwrap_or_else(|_| panic!("GET {path}: no answer within {WITHIN:?}"))
    }

    /// GET over the socket.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let (s, _, v) = self.ask_full("GET", path, None, &[]).await;
        (s, v)
    }

    /// POST of `body` over the socket.
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let text = body.to_string();
        let (s, _, v) = self
            .ask_full(
                "POST",
                path,
                Some(&text),
                &[("content-type", "application/json")],
            )
            .await;
        (s, v)
    }

    /// The TCP listener's base URL.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port.expect("--http"))
    }

    /// Waits until `check` holds for `GET /v1/status`, or panics after [`WITHIN`].
    pub async fn wait_status(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let mut last = Value::Null;
        let every = Duration::from_millis(50);
        let reached = crate::wait::poll_every(WITHIN, every, async || {
            last = self.get("/v1/status").await.1;
            check(&last).then(|| last.clone())
        })
        .await;
        reached.unwrap_or_else(|| panic!("{what}: not reached; last status {last}"))
    }

    /// Waits until every upstream is ready and its tools are listed (the example
    /// servers all have tools; the list comes a moment after the state).
    pub async fn ready(&self) -> Value {
        self.wait_status("every upstream ready and listed", |v| {
            v["upstreams"].as_array().is_some_and(|u| {
                !u.is_empty()
                    && u.iter()
                        .all(|u| u["state"] == "ready" && u["tools"].as_u64() > Some(0))
            })
        })
        .await
    }

    /// Sends SIGTERM and waits for the exit; whether it exited 0.
    pub async fn terminate(&mut self) -> bool {
        let pid = self.child.id().expect("running");
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let status = tokio::time::timeout(WITHIN, self.child.wait())
            .await
            .expect("the daemon stops in time")
            .unwrap();
        status.success()
    }
}

/// Whether process `pid` is alive.
pub fn alive(pid: u64) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}
