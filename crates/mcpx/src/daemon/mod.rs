//! `mcpx daemon`: one warm gateway per configuration file, on a Unix socket (and, when
//! asked, a loopback TCP listener), with the `/v1` control API beside MCP's `/mcp` and
//! `/sse`. The command-line client (`mcpx tools`, `call`, …) finds it through its
//! record and asks it instead of starting a gateway of its own.
//!
//! * `paths.rs`: the directory, socket and record; stale sockets.
//! * `listen.rs`: the listeners, the peer's uid check, the TCP rules.
//! * `api.rs`: the operation table, from which the routes and the OpenAPI document
//!   are made; `ops/`: each operation's handler; `problem.rs`: RFC 9457 errors.
//! * `invoke.rs`: MCP requests of the gateway, in-process, as a 2026-07-28 host.
//! * `events.rs`: the event ring behind `GET /v1/events`.
//! * `hosts.rs`: hosts' sessions (`/mcp`, `/sse`, attached), their calls tracked.
//! * `client.rs`: the command-line side: finding, starting and asking a daemon.

pub mod api;
pub mod cli;
pub mod client;
pub mod events;
pub mod hosts;
pub mod invoke;
pub mod listen;
pub mod ops;
pub mod paths;
pub mod problem;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcpx_client::EraCache;
use mcpx_gateway::app::{App, ReloadError, ReloadTrigger};
use mcpx_gateway::config;
use mcpx_gateway::reload::Plan;
use mcpx_transport::streamable_http::{self, BearerToken, HttpServerConfig};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use self::events::Events;
use self::paths::{Place, Record};
use self::problem::Problem;

/// Arguments of `mcpx daemon`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration file (as for `mcpx serve`). Default: `$MCPX_CONFIG`, then
    /// `./.mcpx.json`, `./.mcp.json`, `~/.config/mcpx/config.json`.
    #[arg(long, value_name = "FILE", conflicts_with = "demo")]
    config: Option<PathBuf>,
    /// Front the built-in example servers instead of a configuration.
    #[arg(long)]
    demo: bool,
    /// Listen on this Unix socket instead of the one named after the configuration
    /// (`$XDG_RUNTIME_DIR/mcpx/daemon-<hash>.sock`, else under the state directory).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Also listen on TCP at ADDR (loopback, e.g. 127.0.0.1:3922): `/v1`, `/mcp` and
    /// `/sse`. It needs a token (`--token-file`), since every local user can reach a
    /// loopback port, unless `--allow-any-local-user` is given. Another address also
    /// needs `--allow-host`.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// With `--http` on a loopback address: serve it without a token, to every local
    /// user (the Unix socket still serves only this user).
    #[arg(long, requires = "http")]
    allow_any_local_user: bool,
    /// Connections held at once per listener, counted once a request on them has
    /// passed the listener's checks; at the limit the oldest idle one makes room.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// TCP connections held at once that no request has yet passed the checks on
    /// (each cut after `--pending-timeout` if none does); at the limit the oldest idle
    /// one makes room, one that has sent nothing first.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    max_pending_connections: u32,
    /// How long a TCP connection may stay open before a request on it passes the
    /// checks (`5s`, `500ms`).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pending_timeout: Duration,
    /// Listeners of `GET /v1/events` at once; at the limit the oldest is cut.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    max_event_subscribers: u32,
    /// Stop after this long with no request and no connection open (e.g. `15m`,
    /// `90s`, `1h`). Default: never.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    idle_exit: Option<Duration>,
    /// With `--http`: also accept this `Host` (as for `mcpx serve`; repeatable).
    #[arg(long, value_name = "HOST", requires = "http")]
    allow_host: Vec<String>,
    /// With `--http`: also accept requests from this `Origin` (repeatable).
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    allow_origin: Vec<String>,
    /// With `--http`: require `Authorization: Bearer <token>` on the TCP listener, with
    /// one of this file's tokens (one a line, each at least 32 bytes; the file readable
    /// by its owner only). Default: `$MCPX_SERVE_TOKEN`, else none. The socket asks
    /// for none: its uid check is its access control.
    #[arg(long, value_name = "FILE", requires = "http")]
    token_file: Option<PathBuf>,
    /// Worker threads of the runtime (as for `mcpx serve`). Default: `$MCPX_THREADS`,
    /// else 1.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// The file this daemon's stderr is appended to, when a command started it in the
    /// background (`--autostart`, `serve --attach`): named by `mcpx status`, and kept
    /// under a bound (see docs/daemon.md). Set by that command, not by hand.
    #[arg(long, value_name = "FILE", hide = true)]
    log_file: Option<PathBuf>,
}

/// A duration that does not read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No number first.
    #[error("{0:?}: expected a number and a unit, e.g. 15m")]
    NoNumber(String),
    /// A unit not known.
    #[error("{text:?}: unknown unit {unit:?} (ms, s, m or h)")]
    Unit { text: String, unit: String },
}

/// `15m`, `90s`, `1h`, `500ms` or a number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| DurationError::NoNumber(text.to_owned()))?;
    let secs = |k: u64| Duration::from_secs(n.saturating_mul(k));
    match unit.trim() {
        "" | "s" => Ok(secs(1)),
        "ms" => Ok(Duration::from_millis(n)),
        "m" | "min" => Ok(secs(60)),
        "h" => Ok(secs(3600)),
        u => Err(DurationError::Unit {
            text: text.to_owned(),
            unit: u.to_owned(),
        }),
    }
}

/// Connections open and the last request, for `--idle-exit`.
#[derive(Debug)]
pub struct Activity {
    open: AtomicUsize,
    last_ms: AtomicU64,
    epoch: Instant,
}

/// One open connection, counted while it lives.
#[derive(Debug)]
pub struct Open(Arc<Activity>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.touch();
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Activity {
    fn new() -> Arc<Activity> {
        Arc::new(Activity {
            open: AtomicUsize::new(0),
            last_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    /// Counts a connection open until the guard is dropped.
    pub fn open(self: &Arc<Self>) -> Open {
        self.open.fetch_add(1, Ordering::AcqRel);
        self.touch();
        Open(self.clone())
    }

    fn touch(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Release);
    }

    /// How long nothing has been open: `None` while a connection is.
    fn idle_for(&self) -> Option<Duration> {
        if self.open.load(Ordering::Acquire) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last_ms.load(Ordering::Acquire));
        Some(self.epoch.elapsed().saturating_sub(last))
    }
}

/// Finished calls kept for the status page.
pub const RECENT_CALLS: usize = 50;

/// Through what a call came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `POST /v1/call`.
    Api,
    /// A host's MCP session (`/mcp`, `/sse` or an attached stdio session).
    Host,
}

impl Via {
    /// `api` or `host`, as the events and the status page say it.
    pub fn key(self) -> &'static str {
        match self {
            Via::Api => "api",
            Via::Host => "host",
        }
    }
}

/// A call, while it runs.
#[derive(Debug, Clone)]
struct CallInfo {
    tool: String,
    via: Via,
    started: Instant,
    started_at_ms: u128,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// What the handlers share.
#[derive(Debug)]
pub struct Daemon {
    /// The gateway.
    pub app: Arc<App>,
    /// When the daemon started.
    pub started: Instant,
    /// Its events.
    pub events: Arc<Events>,
    /// Fired to stop it.
    pub stop: CancellationToken,
    /// The configuration key.
    pub key: String,
    /// Connections and requests, for `--idle-exit`.
    pub activity: Arc<Activity>,
    /// The file its stderr is appended to, when started in the background.
    pub log: Option<PathBuf>,
    calls: Mutex<std::collections::HashMap<u64, CallInfo>>,
    next_call: AtomicU64,
    /// The last finished calls, the newest last.
    recent: Mutex<std::collections::VecDeque<Value>>,
    /// The last reload's event data.
    last_reload: Mutex<Option<Value>>,
    /// Turns at the call history's database (`ops::history::READERS` at once).
    pub history_readers: tokio::sync::Semaphore,
}

/// A call being tracked: in `/v1/tasks` while it runs, and in the events.
pub struct Tracked<'a> {
    daemon: &'a Daemon,
    id: u64,
    _open: Open,
}

impl Tracked<'_> {
    /// Publishes the end of a `/v1/call`: its duration and outcome.
    pub fn finish(self, r: &Result<Value, Problem>, cancelled: bool) {
        let (outcome, detail) = match r {
            _ if cancelled => ("cancelled", None),
            Ok(v) if v.get("isError") == Some(&Value::Bool(true)) => {
                ("tool_error", Some(tool_error_text(v)))
            }
            Ok(_) => ("ok", None),
            Err(p) => ("error", Some(p.detail.clone())),
        };
        self.end(outcome, detail);
    }

    /// Publishes the call's end: `outcome` (`ok`, `tool_error`, `error` or
    /// `cancelled`) and, for an error, its reason.
    pub fn end(self, outcome: &'static str, detail: Option<String>) {
        let info = self.daemon.calls.lock().remove(&self.id);
        let Some(info) = info else { return };
        let mut data = json!({
            "id": self.id,
            "tool": info.tool,
            "via": info.via.key(),
            "phase": "end",
            "outcome": outcome,
            "startedAtMs": info.started_at_ms,
            "durationMs": info.started.elapsed().as_secs_f64() * 1000.0,
        });
        if let Some(d) = detail {
            data["detail"] = json!(d);
        }
        {
            let mut recent = self.daemon.recent.lock();
            if recent.len() == RECENT_CALLS {
                recent.pop_front();
            }
            recent.push_back(data.clone());
        }
        self.daemon.events.publish("call", data);
    }
}

/// A tool's error result in words: its text content, else its JSON.
pub fn tool_error_text(result: &Value) -> String {
    let texts: Vec<&str> = result["content"]
        .as_array()
        .map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect())
        .unwrap_or_default();
    if texts.is_empty() {
        "the tool reported an error (no text)".to_owned()
    } else {
        texts.join("\n")
    }
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.daemon.calls.lock().remove(&self.id);
    }
}

impl Daemon {
    /// A daemon's shared state, with no call made and no reload yet.
    pub fn new(
        app: Arc<App>,
        key: String,
        stop: CancellationToken,
        activity: Arc<Activity>,
        log: Option<PathBuf>,
    ) -> Daemon {
        Daemon {
            app,
            started: Instant::now(),
            events: Arc::new(Events::default()),
            stop,
            key,
            activity,
            log,
            calls: Mutex::new(std::collections::HashMap::new()),
            next_call: AtomicU64::new(0),
            recent: Mutex::new(std::collections::VecDeque::with_capacity(RECENT_CALLS)),
            last_reload: Mutex::new(None),
            history_readers: tokio::sync::Semaphore::new(ops::history::READERS),
        }
    }

    /// Starts tracking a call of `tool` through `via`.
    pub fn track_call(&self, tool: &str, via: Via) -> Tracked<'_> {
        let id = self.next_call.fetch_add(1, Ordering::Relaxed) + 1;
        let info = CallInfo {
            tool: tool.to_owned(),
            via,
            started: Instant::now(),
            started_at_ms: now_ms(),
        };
        self.calls.lock().insert(id, info);
        self.events.publish(
            "call",
            json!({"id": id, "tool": tool, "via": via.key(), "phase": "start"}),
        );
        Tracked {
            daemon: self,
            id,
            _open: self.activity.open(),
        }
    }

    /// The calls in flight, through `/v1/call` and hosts' sessions, the oldest first.
    pub fn calls_in_flight(&self) -> Vec<Value> {
        let c = self.calls.lock();
        let mut v: Vec<(u64, Value)> = c
            .iter()
            .map(|(id, i)| {
                (
                    *id,
                    json!({"id": id, "tool": i.tool, "via": i.via.key(),
                        "startedAtMs": i.started_at_ms,
                        "elapsedMs": i.started.elapsed().as_secs_f64() * 1000.0}),
                )
            })
            .collect();
        v.sort_by_key(|(id, _)| *id);
        v.into_iter().map(|(_, v)| v).collect()
    }

    /// The last finished calls ([`RECENT_CALLS`] at most), the newest first.
    pub fn recent_calls(&self) -> Vec<Value> {
        self.recent.lock().iter().rev().cloned().collect()
    }

    /// The last reload's outcome, if there was one.
    pub fn last_reload(&self) -> Option<Value> {
        self.last_reload.lock().clone()
    }

    /// Records a reload and publishes it: `ok` with its plan, or the error.
    pub fn reloaded(&self, trigger: ReloadTrigger, outcome: &Result<Plan, ReloadError>) {
        let mut data = json!({"trigger": trigger.key(), "atMs": now_ms()});
        match outcome {
            Ok(plan) => {
                data["ok"] = json!(true);
                data["plan"] = json!(plan.to_string());
                if !plan.restart_needed.is_empty() {
                    data["restartNeeded"] = json!(plan.restart_needed);
                }
            }
            Err(e) => {
                data["ok"] = json!(false);
                data["error"] = json!(e.to_string());
            }
        }
        *self.last_reload.lock() = Some(data.clone());
        self.events.publish("reload", data);
    }
}

fn fail(message: &str) -> ExitCode {
    crate::runtime::init_logging();
    eprintln!("mcpx daemon: {message}");
    ExitCode::FAILURE
}

use crate::serve::ListenerError;

/// The tokens `--token-file` (or `$MCPX_SERVE_TOKEN`) names, with `--http`.
fn tokens(args: &Args) -> Result<Vec<BearerToken>, ListenerError> {
    if args.http.is_none() {
        return Ok(Vec::new());
    }
    crate::serve::tokens(args.token_file.as_deref())
}

/// `--http` on loopback without a token serves every local user: refused unless
/// `--allow-any-local-user` says so.
#[derive(Debug, thiserror::Error)]
#[error(
    "--http {0}: every local user can reach this port, so it needs a token (--token-file or $MCPX_SERVE_TOKEN); --allow-any-local-user serves it without one"
)]
struct NeedsToken(SocketAddr);

/// Runs the daemon until SIGTERM, Ctrl-C, `POST /v1/shutdown` or `--idle-exit`.
pub fn run(args: &Args) -> ExitCode {
    let loaded = if args.demo {
        crate::serve::demo_config()
            .map(|c| (None, c))
            .map_err(|e| e.to_string())
    } else {
        config::load(args.config.as_deref())
            .map(|(path, c)| (Some(path), c))
            .map_err(|e| e.to_string())
    };
    let (path, config) = match loaded {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let key = paths::config_key(path.as_deref());
    let place = match Place::of(&key) {
        Ok(p) => p,
        Err(e) => return fail(&e.to_string()),
    };
    let tokens = match tokens(args) {
        Ok(t) => t,
        Err(e) => return fail(&e.to_string()),
    };
    let http = args.http;
    let rules = http.map(|addr| listen::TcpRules {
        port: addr.port(),
        hosts: args.allow_host.clone(),
        origins: args.allow_origin.clone(),
        tokens: tokens.clone(),
    });
    if let (Some(addr), Some(rules)) = (http, &rules) {
        if let Err(e) = listen::bind_allowed(addr, rules) {
            return fail(&e.to_string());
        }
        if rules.tokens.is_empty() && !args.allow_any_local_user {
            return fail(&NeedsToken(addr).to_string());
        }
    }
    if args.pending_timeout < Duration::from_millis(100) {
        return fail(&format!(
            "--pending-timeout {:?} is too short: a request needs at least 100ms to arrive",
            args.pending_timeout
        ));
    }
    let limits = mcpx_transport::listen::Limits {
        max_connections: args.max_connections as usize,
        max_pending: args.max_pending_connections as usize,
        pending_within: args.pending_timeout,
    };
    let max_subscribers = args.max_event_subscribers as usize;
    let socket = args.socket.clone().unwrap_or_else(|| place.socket.clone());
    let log = args.log_file.clone();
    let idle_exit = args.idle_exit;
    let (allow_host, allow_origin) = (args.allow_host.clone(), args.allow_origin.clone());
    let open_to_all = tokens.is_empty();
    crate::runtime::run("daemon", args.threads, |stop| async move {
        // TCP first: when its port is taken, no socket file is left behind.
        let tcp =
            match http {
                Some(addr) => Some(tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                    format!("--http: {}", crate::runtime::listen_failure(addr, &e))
                })?),
                None => None,
            };
        paths::ensure_private_dir(&place.dir)?;
        let unix = paths::bind_socket(&socket)?;
        let uid = paths::my_uid()?;
        let tcp_addr = tcp.as_ref().and_then(|l| l.local_addr().ok());
        let mcp_limits = (
            config.global.max_frame_bytes,
            config.global.max_sessions,
            config.global.session_idle,
            config.global.max_header_count,
            config.global.max_header_bytes,
        );
        let app = App::start(config, path, None, EraCache::default_location());
        let activity = Activity::new();
        activity.touch();
        let daemon = Arc::new(Daemon::new(
            app.clone(),
            key.clone(),
            stop.clone(),
            activity.clone(),
            log.clone(),
        ));
        daemon.events.bound_subscribers(max_subscribers);
        {
            // Every reload (the watcher's, SIGHUP's, /v1/reload's) is an event. Weak:
            // the app outlives no daemon through its observer.
            let d = Arc::downgrade(&daemon);
            app.on_reload(Arc::new(move |trigger, outcome| {
                if let Some(d) = d.upgrade() {
                    d.reloaded(trigger, outcome);
                }
            }));
        }
        if let Err(e) = app.watch() {
            mcpx_telemetry::notice(&format!(
                "mcpx daemon: the configuration file is not watched (reload with SIGHUP): {e}"
            ));
        }
        tokio::spawn(events::watch(
            app.clone(),
            daemon.events.clone(),
            stop.clone(),
        ));
        if let Some(history) = app.history() {
            tokio::spawn(events::follow_history(
                history.written(),
                daemon.events.clone(),
                stop.clone(),
            ));
        }
        if let Some(file) = log.clone() {
            tokio::spawn(paths::keep_log_bounded(file, stop.clone()));
        }
        {
            let gateway = app.gateway().clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                stop.cancelled().await;
                gateway.shutdown();
            });
        }
        // MCP beside /v1: the socket's asks for no token; TCP's guard is the one
        // `/v1` has.
        let mcp_config =
            |bind: SocketAddr, tokens: Vec<BearerToken>, origins: Option<Vec<String>>| {
                let mut c = HttpServerConfig {
                    bind,
                    ..HttpServerConfig::default()
                };
                c.allowed_hosts.extend(allow_host.iter().cloned());
                match origins {
                    Some(o) => c.allowed_origins = o,
                    None => c.allowed_origins.extend(allow_origin.iter().cloned()),
                }
                c.bearer_tokens = tokens;
                c.limits.max_frame_bytes = mcp_limits.0;
                c.max_sessions = mcp_limits.1;
                c.session_idle_timeout = mcp_limits.2;
                c.max_header_count = mcp_limits.3;
                c.max_header_bytes = mcp_limits.4;
                c
            };
        let unbound: SocketAddr = ([127, 0, 0, 1], 0).into();
        let unix_router = api::router(daemon.clone())
            .merge(streamable_http::router(
                hosts::Observed::new(daemon.clone()),
                mcp_config(unbound, Vec::new(), None),
            ))
            .fallback(api::no_route);
        let mut served = vec![tokio::spawn(listen::serve_unix(
            unix,
            unix_router,
            uid,
            mcpx_transport::listen::Budget::new(limits),
            activity.clone(),
            stop.clone(),
        ))];
        if let (Some(listener), Some(addr), Some(rules)) = (tcp, tcp_addr, rules) {
            let rules = listen::TcpRules {
                port: addr.port(),
                ..rules
            };
            let config = mcp_config(addr, tokens, Some(rules.origins()));
            let guard = Arc::new(mcpx_transport::origin::Guard::new(&config));
            let v1 = api::router(daemon.clone())
                .route_layer(axum::middleware::from_fn_with_state(guard, listen::guard));
            let tcp_router = v1
                .merge(streamable_http::router(
                    hosts::Observed::new(daemon.clone()),
                    config,
                ))
                .fallback(api::no_route);
            served.push(tokio::spawn(listen::serve_tcp(
                listener,
                tcp_router,
                mcpx_transport::listen::Budget::new(limits),
                activity.clone(),
                stop.clone(),
            )));
        }
        let record = Record {
            pid: std::process::id(),
            socket: socket.clone(),
            http: tcp_addr.map(|a| a.to_string()),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            config: key.clone(),
        };
        record.write(&place.record)?;
        let who = if open_to_all {
            " (no token: every local user may use it, --allow-any-local-user)"
        } else {
            " (a token required)"
        };
        mcpx_telemetry::notice(&format!(
            "mcpx daemon: serving {key} on {}{}",
            socket.display(),
            tcp_addr
                .map(|a| format!(" and http://{a}{who}"))
                .unwrap_or_default()
        ));
        if let Some(idle) = idle_exit {
            let (activity, stop) = (activity.clone(), stop.clone());
            tokio::spawn(async move {
                let every = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
                loop {
                    tokio::select! {
                        () = tokio::time::sleep(every) => {}
                        () = stop.cancelled() => return,
                    }
                    if activity.idle_for().is_some_and(|d| d >= idle) {
                        tracing::info!("stopping: idle for {idle:?} (--idle-exit)");
                        stop.cancel();
                        return;
                    }
                }
            });
        }
        stop.cancelled().await;
        // The record and the socket go first: a client now starts afresh.
        if Record::read(&place.record).is_some_and(|r| r.pid == record.pid) {
            let _ = std::fs::remove_file(&place.record);
        }
        let _ = std::fs::remove_file(&socket);
        for s in served {
            let _ = s.await;
        }
        app.shutdown().await;
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3d").is_err());
    }
}
