//! From the file's shape to a [`Config`]: one step per section, each checking its
//! values and naming the key in its message.

use super::file::{
    FileDoc, FileGlobal, FileHealthCheck, FileOauth, FileRestart, FileServer, FileServerMcpx,
    FileToolFilter, server_lines, strip_jsonc, without_position,
};
use super::oauth::{Grant, grant};
use super::*;

/// Parses configuration text read from `path` (used in messages).
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
    let clean = strip_jsonc(text);
    let doc: FileDoc = serde_json::from_str(&clean).map_err(|e| ConfigError::Invalid {
        path: path.to_owned(),
        line: e.line(),
        column: e.column(),
        message: without_position(&e.to_string()),
    })?;
    let value_err = |line: Option<usize>, message: String| ConfigError::Value {
        path: path.to_owned(),
        line,
        message,
    };
    let spec = SpecPolicy::default()
        .with_precedence(&doc.mcpx.spec.precedence)
        .and_then(|p| p.with_lenient(&doc.mcpx.spec.lenient))
        .map_err(|e| value_err(None, format!("mcpx.spec: {e}")))?;
    let mut global = global(&doc.mcpx);
    check_global(&global, &|m| value_err(None, m))?;
    let lines = server_lines(&clean);
    let mut servers = BTreeMap::new();
    for (name, s) in doc.mcp_servers {
        let line = lines.get(&name).copied();
        let err = |m: &str| value_err(line, format!("mcpServers.{name}: {m}"));
        let server = server(&name, s, &err)?;
        servers.insert(name, server);
    }
    if doc.mcpx.limits.startup_wait_ms.is_none() {
        global.startup_wait = default_startup_wait(&servers);
    }
    let history = history(&doc.mcpx.history, path, &|m| value_err(None, m))?;
    Ok(Config {
        servers,
        global,
        spec,
        history,
    })
}

/// The `mcpx.history` section, with the defaults filled in. A relative `path` is
/// the configuration file's directory's.
fn history(
    h: &super::file::FileHistory,
    config_path: &Path,
    err: &dyn Fn(String) -> ConfigError,
) -> Result<HistoryConfig, ConfigError> {
    let d = HistoryConfig::default();
    let capture = match h.capture.as_deref() {
        None => d.capture,
        Some(c) => mcpx_history::Capture::parse(c).ok_or_else(|| {
            err(format!(
                "mcpx.history.capture {c:?} is not one of \"none\", \"arguments\", \"all\""
            ))
        })?,
    };
    let path = h.path.as_ref().map(|p| {
        if p.is_relative() {
            config_path
                .parent()
                .map_or_else(|| p.clone(), |dir| dir.join(p))
        } else {
            p.clone()
        }
    });
    if h.max_megabytes == Some(0) {
        return Err(err("mcpx.history.maxMegabytes must be at least 1".into()));
    }
    Ok(HistoryConfig {
        enabled: h.enabled.unwrap_or(d.enabled),
        path,
        capture,
        redact: h.redact.clone().unwrap_or(d.redact),
        max_value_bytes: h.max_value_bytes.unwrap_or(d.max_value_bytes),
        max_age_days: h.max_age_days.unwrap_or(d.max_age_days),
        max_megabytes: h.max_megabytes.unwrap_or(d.max_megabytes),
        queue: h.queue.unwrap_or(d.queue).max(1),
    })
}

/// The `mcpx.names` and `mcpx.limits` sections, with the defaults filled in.
/// `startupWaitMs` is filled in from the servers when not set ([`parse`]).
fn global(g: &FileGlobal) -> Global {
    let (names, limits, d) = (&g.names, &g.limits, Global::default());
    let ms = |v: Option<u64>, default: Duration| v.map_or(default, Duration::from_millis);
    Global {
        separator: names.separator.clone().unwrap_or(d.separator),
        max_name_len: names.max_length.unwrap_or(d.max_name_len),
        max_frame_bytes: limits.max_frame_bytes.unwrap_or(d.max_frame_bytes),
        max_call_time: ms(limits.max_call_time_ms, d.max_call_time),
        page_size: limits.page_size.unwrap_or(d.page_size).max(1),
        ask_timeout: ms(limits.ask_timeout_ms, d.ask_timeout),
        ask_gather: ms(limits.ask_gather_ms, d.ask_gather),
        ask_max_pending: limits.ask_max_pending.unwrap_or(d.ask_max_pending).max(1),
        max_parked: limits.max_parked_calls.unwrap_or(d.max_parked),
        max_tasks: limits.max_tasks.unwrap_or(d.max_tasks),
        task_ttl: ms(limits.task_ttl_ms, d.task_ttl).max(Duration::from_secs(1)),
        task_poll_interval: ms(limits.task_poll_interval_ms, d.task_poll_interval)
            .max(Duration::from_millis(10)),
        startup_wait: ms(limits.startup_wait_ms, d.startup_wait),
        capability_wait: ms(limits.capability_wait_ms, d.capability_wait),
        drain_timeout: ms(limits.drain_ms, d.drain_timeout),
        list_changed_window: ms(limits.list_changed_window_ms, d.list_changed_window),
        reload_debounce: ms(limits.reload_debounce_ms, d.reload_debounce),
        max_sessions: limits.max_sessions.unwrap_or(d.max_sessions).max(1),
        session_idle: ms(limits.session_idle_ms, d.session_idle),
        max_header_count: limits.max_header_count.unwrap_or(d.max_header_count),
        max_header_bytes: limits.max_header_bytes.unwrap_or(d.max_header_bytes),
    }
}

/// Refuses global settings that would make mcpx unusable.
fn check_global(g: &Global, err: &dyn Fn(String) -> ConfigError) -> Result<(), ConfigError> {
    // Fewer than the few fields every request carries (`Host`, `Content-Type`,
    // `Accept`, `Content-Length`, …) would refuse every request.
    if g.max_header_count < 8 {
        return Err(err(format!(
            "mcpx.limits.maxHeaderCount {} is too small (at least 8)",
            g.max_header_count
        )));
    }
    if g.max_header_bytes < 1024 {
        return Err(err(format!(
            "mcpx.limits.maxHeaderBytes {} is too small (at least 1024)",
            g.max_header_bytes
        )));
    }
    if g.max_name_len < 16 {
        return Err(err(format!(
            "mcpx.names.maxLength {} is too short (at least 16)",
            g.max_name_len
        )));
    }
    if !g
        .separator
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"_.-".contains(&c))
        || g.separator.is_empty()
    {
        return Err(err(format!(
            "mcpx.names.separator {:?} must be non-empty and use only [A-Za-z0-9_.-]",
            g.separator
        )));
    }
    Ok(())
}

/// One `mcpServers` entry: its transport, then its `mcpx` block.
fn server(
    name: &str,
    s: FileServer,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<ServerConfig, ConfigError> {
    let transport = match (s.kind.as_deref(), s.command, s.url) {
        (None | Some("stdio"), Some(command), None) => Transport::Stdio {
            command,
            args: s.args,
            env: s.env,
            cwd: s.cwd,
        },
        (Some("sse"), None, Some(url)) => Transport::Sse {
            url,
            headers: s.headers,
        },
        (
            None | Some("http") | Some("streamable-http") | Some("streamableHttp"),
            None,
            Some(url),
        ) => Transport::Http {
            url,
            headers: s.headers,
        },
        (_, Some(_), Some(_)) => return Err(err("has both `command` and `url`")),
        (_, None, None) => return Err(err("needs `command` (stdio) or `url` (http, sse)")),
        (Some(t), _, _) => {
            return Err(err(&format!(
                "unknown type {t:?}; expected stdio, http or sse"
            )));
        }
    };
    let mcpx = settings(name, s.mcpx, &transport, err)?;
    Ok(ServerConfig {
        transport,
        disabled: s.disabled,
        mcpx,
    })
}

/// An upstream's `mcpx` block, with the defaults filled in and checked.
fn settings(
    name: &str,
    m: FileServerMcpx,
    transport: &Transport,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<ServerSettings, ConfigError> {
    let d = ServerSettings::default();
    let secret_env = m.oauth.as_ref().and_then(|o| o.client_secret_env.clone());
    let (oauth, user_auth) = credentials(name, m.oauth, transport, err)?;
    Ok(ServerSettings {
        namespace: m.namespace,
        tools: tool_filter(&m.tools, err)?,
        protocol: m.protocol,
        call_timeout: m
            .call_timeout_ms
            .map_or(d.call_timeout, Duration::from_millis),
        connect_timeout: m
            .connect_timeout_ms
            .map_or(d.connect_timeout, Duration::from_millis),
        probe_timeout: match m.probe_timeout_ms {
            None => d.probe_timeout,
            Some(0) => return Err(err("mcpx.probeTimeoutMs must be at least 1")),
            Some(ms) => Duration::from_millis(ms),
        },
        max_in_flight: match m.max_in_flight {
            None => d.max_in_flight,
            Some(0) => return Err(err("mcpx.maxInFlight must be at least 1")),
            Some(n) => n,
        },
        max_queued: m.max_queued.unwrap_or(d.max_queued),
        secret_env: secret_env.into_iter().collect(),
        environment: environment(m.environment.as_deref(), transport, err)?,
        oauth,
        user_auth,
        proxy: proxy(m.proxy.as_deref(), err)?,
        restart: restart_policy(&m.restart, err)?,
        start: start_mode(m.start.as_deref(), err)?,
        idle_timeout: idle_timeout(m.idle_timeout_ms, transport, err)?,
        health_check: match &m.health_check {
            None => None,
            Some(h) => Some(health_check(h, err)?),
        },
    })
}

/// An upstream's `mcpx.tools`.
fn tool_filter(
    t: &FileToolFilter,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<ToolFilter, ConfigError> {
    let all = |ps: &[String]| -> Result<Vec<Pattern>, ConfigError> {
        ps.iter()
            .map(|p| Pattern::parse(p).map_err(|e| err(&e.to_string())))
            .collect()
    };
    Ok(ToolFilter {
        include: all(&t.include)?,
        exclude: all(&t.exclude)?,
    })
}

/// An upstream's credentials: its `mcpx.oauth`, else, for an `http` or `sse`
/// upstream without an `Authorization` header, a user's authorization with the
/// defaults (used when the upstream asks for one).
fn credentials(
    name: &str,
    oauth: Option<FileOauth>,
    transport: &Transport,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<(Option<ClientCredentials>, Option<UserAuth>), ConfigError> {
    Ok(
        match oauth.map(|o| grant(o, name, transport, err)).transpose()? {
            Some(Grant::Client(c)) => (Some(c), None),
            Some(Grant::User(u)) => (None, Some(u)),
            None => match transport {
                Transport::Http { headers, .. } | Transport::Sse { headers, .. }
                    if !has_authorization(headers) =>
                {
                    let user = UserAuth {
                        upstream: name.to_owned(),
                        ..UserAuth::default()
                    };
                    (None, Some(user))
                }
                _ => (None, None),
            },
        },
    )
}

/// Whether `headers` set `Authorization` (in any case).
pub(super) fn has_authorization(headers: &BTreeMap<String, String>) -> bool {
    headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization"))
}

/// An upstream's `mcpx.environment`.
fn environment(
    e: Option<&str>,
    transport: &Transport,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<Environment, ConfigError> {
    match (e, transport) {
        (None | Some("inherit"), _) => Ok(Environment::Inherit),
        (Some("minimal"), Transport::Stdio { .. }) => Ok(Environment::Minimal),
        (Some("minimal"), _) => Err(err("mcpx.environment is for stdio upstreams")),
        (Some(other), _) => Err(err(&format!(
            "mcpx.environment is \"inherit\" or \"minimal\", not {other:?}"
        ))),
    }
}

/// An upstream's `mcpx.proxy`. A refused URL is shown without its credentials.
fn proxy(p: Option<&str>, err: &dyn Fn(&str) -> ConfigError) -> Result<Proxy, ConfigError> {
    match p {
        None => Ok(Proxy::Environment),
        Some("none") => Ok(Proxy::Direct),
        Some(url) if url.starts_with("http://") => Ok(Proxy::Via(url.to_owned())),
        Some(other) => Err(err(&format!(
            "mcpx.proxy is \"none\" or an http:// proxy URL, not {:?}",
            other.split('@').next_back().unwrap_or_default()
        ))),
    }
}

/// An upstream's `mcpx.start`.
fn start_mode(
    s: Option<&str>,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<StartMode, ConfigError> {
    match s {
        None | Some("eager") => Ok(StartMode::Eager),
        Some("lazy") => Ok(StartMode::Lazy),
        Some(other) => Err(err(&format!(
            "mcpx.start is \"eager\" or \"lazy\", not {other:?}"
        ))),
    }
}

/// An upstream's `mcpx.idleTimeoutMs`: for a stdio upstream only.
fn idle_timeout(
    ms: Option<u64>,
    transport: &Transport,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<Option<Duration>, ConfigError> {
    match (ms, transport) {
        (None, _) => Ok(None),
        (Some(0), _) => Err(err("mcpx.idleTimeoutMs must be at least 1")),
        (Some(ms), Transport::Stdio { .. }) => Ok(Some(Duration::from_millis(ms))),
        (Some(_), _) => Err(err(
            "mcpx.idleTimeoutMs is for stdio upstreams (a child process mcpx can stop)",
        )),
    }
}

/// `startupWaitMs` when the file does not set it: the time a start may take, the
/// longest `connectTimeoutMs` of the eager servers (30 s, the default connect timeout,
/// without one), so that a host's first list holds every server that starts within it.
fn default_startup_wait(servers: &BTreeMap<String, ServerConfig>) -> Duration {
    servers
        .values()
        .filter(|s| !s.disabled && s.mcpx.start == StartMode::Eager)
        .map(|s| s.mcpx.connect_timeout)
        .max()
        .unwrap_or(ServerSettings::default().connect_timeout)
}

/// An upstream's `mcpx.restart`, with the defaults filled in and checked.
fn restart_policy(
    r: &FileRestart,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<RestartPolicy, ConfigError> {
    let d = RestartPolicy::default();
    let ms = |v: Option<u64>, default: Duration| v.map_or(default, Duration::from_millis);
    let policy = RestartPolicy {
        on_exit: match r.on_exit.as_deref() {
            None | Some("always") => OnExit::Always,
            Some("on-failure") => OnExit::OnFailure,
            Some("never") => OnExit::Never,
            Some(other) => {
                return Err(err(&format!(
                    "mcpx.restart.onExit is \"always\", \"on-failure\" or \"never\", not {other:?}"
                )));
            }
        },
        max_restarts: r.max_restarts.unwrap_or(d.max_restarts),
        backoff: ms(r.backoff_ms, d.backoff),
        max_backoff: ms(r.max_backoff_ms, d.max_backoff),
        reset_after: ms(r.reset_after_ms, d.reset_after),
        crash_loop_retry: ms(r.crash_loop_retry_ms, d.crash_loop_retry),
    };
    if policy.max_restarts == 0 {
        return Err(err("mcpx.restart.maxRestarts must be at least 1"));
    }
    if policy.backoff.is_zero() {
        return Err(err("mcpx.restart.backoffMs must be at least 1"));
    }
    if policy.max_backoff < policy.backoff {
        return Err(err(&format!(
            "mcpx.restart.maxBackoffMs ({} ms) must be at least backoffMs ({} ms)",
            policy.max_backoff.as_millis(),
            policy.backoff.as_millis()
        )));
    }
    if policy.crash_loop_retry.is_zero() {
        return Err(err("mcpx.restart.crashLoopRetryMs must be at least 1"));
    }
    Ok(policy)
}

/// An upstream's `mcpx.healthCheck`, checked.
fn health_check(
    h: &FileHealthCheck,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<HealthCheck, ConfigError> {
    if h.interval_ms < 100 {
        return Err(err(&format!(
            "mcpx.healthCheck.intervalMs must be at least 100, not {}",
            h.interval_ms
        )));
    }
    if h.timeout_ms == Some(0) {
        return Err(err("mcpx.healthCheck.timeoutMs must be at least 1"));
    }
    Ok(HealthCheck {
        interval: Duration::from_millis(h.interval_ms),
        timeout: Duration::from_millis(h.timeout_ms.unwrap_or(5000)),
    })
}
