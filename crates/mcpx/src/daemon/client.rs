//! The command line's side of the daemon: finding the one serving a configuration
//! (its record, then its socket), starting one (`--autostart`), and asking it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::{Method, Request, StatusCode, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::paths::{Place, Record};

/// How long an idle autostarted daemon lives.
pub const AUTOSTART_IDLE: &str = "15m";

/// Largest answer read from the daemon.
const MAX_ANSWER: usize = 256 * 1024 * 1024;

/// Why the daemon could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// Connecting or the exchange failed.
    #[error("the daemon at {socket}: {message}")]
    Transport {
        /// Its socket.
        socket: PathBuf,
        /// What failed.
        message: String,
    },
    /// No answer in time.
    #[error("the daemon did not answer within {} s", .0.as_secs())]
    Timeout(Duration),
}

/// A daemon that answers on its socket.
#[derive(Debug, Clone)]
pub struct Client {
    /// Its record.
    pub record: Record,
    /// The connection that found it answering, for the first request: one connection
    /// fewer for a command that asks once.
    first: std::sync::Arc<parking_lot::Mutex<Option<std::os::unix::net::UnixStream>>>,
}

/// The daemon's answer: its status and its body (JSON, or `null` when it was not).
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body.
    pub body: Value,
}

impl Answer {
    /// The problem's words, when the answer is one: its JSON-RPC error as `error CODE:
    /// MESSAGE` (what the in-process commands print), else its detail.
    pub fn problem(&self) -> Option<String> {
        if self.status.is_success() {
            return None;
        }
        Some(problem_text(&self.body, self.status))
    }
}

/// A problem document in words.
pub fn problem_text(body: &Value, status: StatusCode) -> String {
    if let Some(rpc) = body.get("jsonrpc") {
        return format!(
            "error {}: {}",
            rpc["code"],
            rpc["message"].as_str().unwrap_or("?")
        );
    }
    body.get("detail")
        .and_then(Value::as_str)
        .map_or_else(|| format!("HTTP {status}"), str::to_owned)
}

/// The daemon serving the configuration `key`, if one answers.
pub fn find(key: &str) -> Option<Client> {
    let place = Place::of(key).ok()?;
    let record = Record::read(&place.record)?;
    if record.config != key {
        return None;
    }
    // A socket nobody answers on is a stale daemon's: none then.
    let stream = std::os::unix::net::UnixStream::connect(&record.socket).ok()?;
    Some(Client {
        record,
        first: std::sync::Arc::new(parking_lot::Mutex::new(Some(stream))),
    })
}

/// The daemon answering on the socket at `path`, named directly (`--socket`).
pub fn at_socket(path: &Path) -> Option<Client> {
    let stream = std::os::unix::net::UnixStream::connect(path).ok()?;
    Some(Client {
        record: Record {
            pid: 0,
            socket: path.to_owned(),
            http: None,
            version: String::new(),
            config: String::new(),
        },
        first: std::sync::Arc::new(parking_lot::Mutex::new(Some(stream))),
    })
}

/// Why no daemon could be started in the background.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The running binary's path is not known.
    #[error("cannot find the mcpx binary: {0}")]
    Exe(#[source] std::io::Error),
    /// The daemon's process could not be started.
    #[error("cannot start the daemon: {0}")]
    Spawn(#[source] std::io::Error),
    /// It exited at once; its log says why.
    #[error("the daemon exited at once ({status}); its log {} says why", log.display())]
    ExitedLogged {
        status: std::process::ExitStatus,
        log: PathBuf,
    },
    /// It exited at once, with no log.
    #[error("the daemon exited at once ({0}); run `mcpx daemon` to see why")]
    Exited(std::process::ExitStatus),
    /// It did not answer in time.
    #[error("the daemon did not answer within {} s", .0.as_secs())]
    Late(Duration),
}

/// Why `mcpx serve --attach`'s session with the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The socket failed.
    #[error("{}: {source}", socket.display())]
    Socket {
        socket: PathBuf,
        source: std::io::Error,
    },
    /// No answer to the upgrade in time.
    #[error("the daemon did not answer the attach within 10 s")]
    Late,
    /// The daemon closed the connection before its answer.
    #[error("the daemon closed the connection")]
    Closed,
    /// The answer's head is over [`MAX_UPGRADE_HEAD`].
    #[error("the daemon's answer to the attach is too long")]
    TooLong,
    /// The daemon answered other than 101.
    #[error("the daemon refused the attach: {0}")]
    Refused(String),
    /// Standard output failed.
    #[error("stdout: {0}")]
    Stdout(#[source] std::io::Error),
    /// The session broke.
    #[error("the session with the daemon: {0}")]
    Session(#[source] std::io::Error),
}

/// Starts a daemon for `config` (`None`: `--demo`) in the background, detached from
/// this terminal's process group, stopping after [`AUTOSTART_IDLE`] idle; waits up to
/// `within` for it to answer.
pub async fn start_daemon(
    config: Option<&Path>,
    key: &str,
    within: Duration,
) -> Result<Client, StartError> {
    let exe = std::env::current_exe().map_err(StartError::Exe)?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("daemon").args(["--idle-exit", AUTOSTART_IDLE]);
    match config {
        Some(p) => cmd.arg("--config").arg(p),
        None => cmd.arg("--demo"),
    };
    {
        use std::os::unix::process::CommandExt as _;
        // Its own process group: Ctrl-C in this terminal does not reach it.
        cmd.process_group(0);
    }
    // Its stderr (every log line) is appended to its log file: nobody reads it live.
    // A log that cannot be opened is said, and the daemon started all the same.
    let log = super::paths::log_file(key).and_then(|log| {
        let out = super::paths::open_log(&log)?;
        Ok((log, out))
    });
    let (log, stderr) = match log {
        Ok((log, out)) => {
            cmd.arg("--log-file").arg(&log);
            (Some(log), std::process::Stdio::from(out))
        }
        Err(e) => {
            mcpx_telemetry::notice(&format!(
                "mcpx: the daemon started in the background has no log: {e}"
            ));
            (None, std::process::Stdio::null())
        }
    };
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr);
    let mut child = cmd.spawn().map_err(StartError::Spawn)?;
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(c) = find(key) {
            // Reaped in the background: the daemon outlives this command.
            std::thread::spawn(move || child.wait());
            return Ok(c);
        }
        if let Ok(Some(status)) = child.try_wait() {
            // Another command's daemon may have won the race for the socket.
            if let Some(c) = find(key) {
                return Ok(c);
            }
            return Err(match log {
                Some(log) => StartError::ExitedLogged { status, log },
                None => StartError::Exited(status),
            });
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(StartError::Late(within));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

impl Client {
    /// Sends one request and returns the response, its body unread.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        accept: &str,
    ) -> Result<hyper::Response<hyper::body::Incoming>, AskError> {
        let socket = &self.record.socket;
        let err = |message: String| AskError::Transport {
            socket: socket.clone(),
            message,
        };
        let first = self.first.lock().take();
        let stream = match first.map(|s| {
            s.set_nonblocking(true)?;
            tokio::net::UnixStream::from_std(s)
        }) {
            Some(Ok(s)) => s,
            _ => tokio::net::UnixStream::connect(socket)
                .await
                .map_err(|e| err(e.to_string()))?,
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| err(e.to_string()))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let bytes = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "localhost")
            .header(header::ACCEPT, accept)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(bytes))
            .map_err(|e| err(e.to_string()))?;
        sender
            .send_request(req)
            .await
            .map_err(|e| err(e.to_string()))
    }

    /// One request; the answer whole, within `within`.
    pub async fn ask(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        within: Duration,
    ) -> Result<Answer, AskError> {
        let exchange = async {
            let response = self.send(method, path, body, "application/json").await?;
            let status = response.status();
            let bytes = http_body_util::Limited::new(response.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| AskError::Transport {
                    socket: self.record.socket.clone(),
                    message: e.to_string(),
                })?
                .to_bytes();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            Ok(Answer { status, body })
        };
        tokio::time::timeout(within, exchange)
            .await
            .map_err(|_| AskError::Timeout(within))?
    }

    /// `GET /v1/events`: the server-sent events from now on, the body unread (the
    /// stream is as long as the daemon lives). Connecting and the answer's head are
    /// bounded by `within`.
    pub async fn events(&self, within: Duration) -> Result<hyper::body::Incoming, AskError> {
        let response = tokio::time::timeout(
            within,
            self.send(Method::GET, "/v1/events", None, super::api::SSE),
        )
        .await
        .map_err(|_| AskError::Timeout(within))??;
        if !response.status().is_success() {
            return Err(AskError::Transport {
                socket: self.record.socket.clone(),
                message: format!("GET /v1/events answered {}", response.status()),
            });
        }
        Ok(response.into_body())
    }

    /// `POST /v1/call` as NDJSON: `on_event(kind, data)` for each progress or log
    /// event; the last event (`result` or `problem`) is returned.
    pub async fn call_streamed(
        &self,
        body: &Value,
        within: Duration,
        mut on_event: impl FnMut(&str, &Value),
    ) -> Result<(String, Value), AskError> {
        let exchange = async {
            let response = self
                .send(Method::POST, "/v1/call", Some(body), super::api::NDJSON)
                .await?;
            let status = response.status();
            let terr = |message: String| AskError::Transport {
                socket: self.record.socket.clone(),
                message,
            };
            let mut body = response.into_body();
            if !status.is_success() {
                let bytes = http_body_util::Limited::new(body, MAX_ANSWER)
                    .collect()
                    .await
                    .map_err(|e| terr(e.to_string()))?
                    .to_bytes();
                let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                return Ok(("problem".to_owned(), v));
            }
            let mut line = Vec::new();
            let mut last = None;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| terr(e.to_string()))?;
                let Some(data) = frame.data_ref() else {
                    continue;
                };
                for &b in data.iter() {
                    if b != b'\n' {
                        if line.len() >= MAX_ANSWER {
                            return Err(terr("an event over the size limit".into()));
                        }
                        line.push(b);
                        continue;
                    }
                    let v: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
                    line.clear();
                    let kind = v["event"].as_str().unwrap_or("").to_owned();
                    match kind.as_str() {
                        "result" | "problem" => last = Some((kind, v["data"].clone())),
                        _ => on_event(&kind, &v["data"]),
                    }
                }
            }
            last.ok_or_else(|| terr("the stream ended without a result".into()))
        };
        tokio::time::timeout(within, exchange)
            .await
            .map_err(|_| AskError::Timeout(within))?
    }
}

/// Most bytes of the daemon's answer to the upgrade, before the session's own.
const MAX_UPGRADE_HEAD: usize = 16 * 1024;

/// `mcpx serve --attach`: bridges this process's stdin and stdout to a stdio session
/// with the daemon (`GET /v1/attach`, upgraded), byte for byte, until either side
/// ends.
pub async fn attach(client: &Client) -> Result<(), AttachError> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let socket = &client.record.socket;
    let failed = |source| AttachError::Socket {
        socket: socket.clone(),
        source,
    };
    let mut stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(failed)?;
    let head = format!(
        "GET /v1/attach HTTP/1.1\r\nHost: localhost\r\nConnection: upgrade\r\nUpgrade: {}\r\n\r\n",
        super::ops::attach::PROTOCOL
    );
    stream.write_all(head.as_bytes()).await.map_err(failed)?;
    // The answer's head, up to its blank line; what follows is the session's.
    let mut got = Vec::with_capacity(512);
    let end = loop {
        let mut buf = [0u8; 512];
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .map_err(|_| AttachError::Late)?
            .map_err(failed)?;
        if n == 0 {
            return Err(AttachError::Closed);
        }
        got.extend_from_slice(&buf[..n]);
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if got.len() > MAX_UPGRADE_HEAD {
            return Err(AttachError::TooLong);
        }
    };
    let status_line = String::from_utf8_lossy(&got[..end]);
    if !status_line.starts_with("HTTP/1.1 101") {
        let first = status_line.lines().next().unwrap_or("");
        return Err(AttachError::Refused(first.to_owned()));
    }
    let (mut from_daemon, mut to_daemon) = stream.into_split();
    let (mut stdin, mut stdout) = mcpx_transport::stdio::stdin_stdout();
    stdout
        .write_all(&got[end..])
        .await
        .map_err(AttachError::Stdout)?;
    let up = async {
        let _ = tokio::io::copy(&mut stdin, &mut to_daemon).await;
        // The host is done: the daemon's session drains and ends.
        let _ = to_daemon.shutdown().await;
        std::future::pending::<()>().await;
    };
    let down = async {
        let copied = tokio::io::copy(&mut from_daemon, &mut stdout).await;
        let _ = stdout.flush().await;
        copied
    };
    tokio::select! {
        () = up => Ok(()),
        r = down => r.map(|_| ()).map_err(AttachError::Session),
    }
}

// Result<_, String>: the words are all the command line prints before it exits 1.
/// The configuration file and daemon key of `--config FILE` / `--demo` (the file as
/// `mcpx serve` would find it).
pub fn key_of(config: Option<&Path>, demo: bool) -> Result<(Option<PathBuf>, String), String> {
    if demo {
        return Ok((None, super::paths::config_key(None)));
    }
    let (file, _) = mcpx_gateway::config::load(config)
        .map_err(|e| crate::serve::config_failure(&e, crate::serve::DEMO_HINT))?;
    let key = super::paths::config_key(Some(&file));
    Ok((Some(file), key))
}

// Result<_, String>: the words are all the command line prints before it exits 1.
/// The daemon key of `--config FILE` / `--demo` when the file may not parse: the
/// file as `mcpx serve` would find it, and its parse error if it has one (a daemon
/// started on an earlier version of the file still serves it, and is found by its
/// path). A file not found or not readable is an error.
pub fn key_of_file(config: Option<&Path>, demo: bool) -> Result<(String, Option<String>), String> {
    use mcpx_gateway::config::ConfigError;
    if demo {
        return Ok((super::paths::config_key(None), None));
    }
    let e = match mcpx_gateway::config::load(config) {
        Ok((file, _)) => return Ok((super::paths::config_key(Some(&file)), None)),
        Err(e) => e,
    };
    match &e {
        ConfigError::Invalid { path, .. } | ConfigError::Value { path, .. } => {
            Ok((super::paths::config_key(Some(path)), Some(e.to_string())))
        }
        _ => Err(format!(
            "{e}\n(try --demo for the built-in example servers)"
        )),
    }
}

// Result<_, String>: the words are all the command line prints before it exits 1.
/// The daemon for `--config FILE` / `--demo`: the one running, else (with
/// `autostart`) one started now, else none.
pub async fn daemon_for(
    config: Option<&Path>,
    demo: bool,
    autostart: bool,
    within: Duration,
) -> Result<Option<Client>, String> {
    let (file, key) = key_of(config, demo)?;
    if let Some(c) = find(&key) {
        return Ok(Some(c));
    }
    if !autostart {
        return Ok(None);
    }
    start_daemon(file.as_deref(), &key, within)
        .await
        .map(Some)
        .map_err(|e| e.to_string())
}
