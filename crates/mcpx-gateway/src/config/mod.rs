//! Configuration: the `mcpServers` JSON that MCP hosts already use, plus mcpx's own
//! settings.
//!
//! ```jsonc
//! {
//!   // Comments and trailing commas are allowed (JSONC).
//!   "mcpServers": {
//!     "files": { "command": "npx", "args": ["-y", "server-filesystem", "."],
//!                "env": {"K": "v"}, "cwd": "/tmp",
//!                "mcpx": { "namespace": "fs", "tools": { "exclude": ["write_*"] } } },
//!     "remote": { "type": "http", "url": "http://127.0.0.1:8080/mcp",
//!                 "headers": { "Authorization": "Bearer …" } }
//!   },
//!   "mcpx": { "spec": { "precedence": ["2025-11-25"] }, "names": { "separator": "__" } }
//! }
//! ```
//!
//! Keys other hosts add to a server entry (`disabled`, `alwaysAllow`, `autoApprove`,
//! `timeout`, …) are tolerated and ignored, except `disabled: true`, which mcpx
//! honours. Inside mcpx's own blocks every key is known: an unknown one is an error
//! naming the file, line and key.
//!
//! A value that is well-formed but not acceptable is refused with the file and the
//! reason. When the value belongs to one server, the error also gives the line where
//! that server's entry starts.
//!
//! docs/config.md lists every key.
//!
//! `file` holds the file's shape and its JSONC; `parse` turns it into a [`Config`],
//! one step per section; `oauth` checks an upstream's credentials.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use mcpx_client::{ClientCredentials, ProtocolPreference, Proxy, UserAuth};
use mcpx_protocol::SpecPolicy;
use serde::Deserialize;

mod file;
mod oauth;
mod parse;
mod read;

pub use file::strip_jsonc;
pub use parse::parse;
pub use read::{
    DEFAULT_MAX_CONFIG_BYTES, FileKind, MAX_CONFIG_BYTES_ENV, MaxBytesError, max_bytes_from,
    max_config_bytes, read,
};

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid (syntax, types, an unknown key in an `mcpx` block).
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A value is well-formed but not acceptable (a bad pattern, an unknown revision).
    #[error("{path}{}: {message}", .line.map(|l| format!(":{l}")).unwrap_or_default())]
    Value {
        /// The file.
        path: PathBuf,
        /// The 1-based line where the server's entry starts, when the value belongs to
        /// one server and its key was found in the text.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// The path names something other than a regular file (a FIFO, a device, a
    /// directory): it is refused without being read.
    #[error(
        "{path}: {kind}, not a regular file; the configuration is read only from a regular file"
    )]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it names.
        kind: FileKind,
    },
    /// The file is larger than [`max_config_bytes`]: refused before it is parsed.
    #[error(
        "{path}: larger than {max} bytes, the most mcpx reads of a configuration file; set {MAX_CONFIG_BYTES_ENV} to raise it"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap, in bytes.
        max: u64,
    },
    /// `MCPX_MAX_CONFIG_BYTES` is not a number of bytes.
    #[error(transparent)]
    MaxBytes(#[from] MaxBytesError),
    /// The blocking read of [`load_async`] did not finish (it panicked, or the
    /// runtime is shutting down).
    #[error("{path}: the read did not finish: {source}")]
    Unfinished {
        /// The file, or the first one on the search path.
        path: PathBuf,
        /// Why.
        source: tokio::task::JoinError,
    },
    /// No configuration file was found on the search path.
    #[error("no configuration found; looked for {}", .searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    NotFound {
        /// Where it looked.
        searched: Vec<PathBuf>,
    },
}

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// Upstream servers by name, in name order.
    pub servers: BTreeMap<String, ServerConfig>,
    /// mcpx's global settings.
    pub global: Global,
    /// The spec policy built from `mcpx.spec`.
    pub spec: SpecPolicy,
    /// The call history (`mcpx.history`).
    pub history: HistoryConfig,
}

/// The call history's settings (`mcpx.history`; docs/history.md).
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryConfig {
    /// Whether calls are recorded (`enabled`, default true).
    pub enabled: bool,
    /// The database (`path`; default `$XDG_STATE_HOME/mcpx/history.sqlite3`).
    pub path: Option<PathBuf>,
    /// What of a call's content is kept (`capture`: `none`, the default, `arguments`
    /// or `all`).
    pub capture: mcpx_history::Capture,
    /// Keys of captured content whose values are blanked (`redact`).
    pub redact: Vec<String>,
    /// The most bytes kept of one captured value (`maxValueBytes`, default 16 KiB).
    pub max_value_bytes: usize,
    /// Calls older than this many days are taken out (`maxAgeDays`, default 30).
    pub max_age_days: u64,
    /// The most the database may take, in MiB (`maxMegabytes`, default 256).
    pub max_megabytes: u64,
    /// Records waiting for the writer at most (`queue`, default 4096).
    pub queue: usize,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        let d = mcpx_history::Settings::at(PathBuf::new());
        HistoryConfig {
            enabled: true,
            path: None,
            capture: d.capture,
            redact: mcpx_history::redact::DEFAULT_PATTERNS
                .iter()
                .map(|p| (*p).to_owned())
                .collect(),
            max_value_bytes: d.max_value_bytes,
            max_age_days: 30,
            max_megabytes: 256,
            queue: d.queue,
        }
    }
}

impl HistoryConfig {
    /// The recorder's settings; `None` when recording is off. The database's default
    /// place needs `XDG_STATE_HOME` or `HOME`.
    pub fn settings(&self) -> Result<Option<mcpx_history::Settings>, mcpx_history::HistoryError> {
        if !self.enabled {
            return Ok(None);
        }
        let path = match &self.path {
            Some(p) => p.clone(),
            None => mcpx_history::default_path()?,
        };
        Ok(Some(mcpx_history::Settings {
            path,
            capture: self.capture,
            redact: mcpx_history::redact::Redactor::new(&self.redact),
            max_value_bytes: self.max_value_bytes,
            max_age: Duration::from_secs(self.max_age_days.saturating_mul(24 * 3600)),
            max_bytes: self.max_megabytes.saturating_mul(1024 * 1024),
            queue: self.queue.max(1),
        }))
    }
}

/// How to reach one upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking stdio.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment.
        env: BTreeMap<String, String>,
        /// Working directory.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint URL.
        url: String,
        /// Extra headers sent with every request.
        headers: BTreeMap<String, String>,
    },
    /// The 2024-11-05 HTTP+SSE transport.
    Sse {
        /// The SSE URL.
        url: String,
        /// Extra headers.
        headers: BTreeMap<String, String>,
    },
}

/// One upstream server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// How to reach it.
    pub transport: Transport,
    /// `disabled: true` in the host's format.
    pub disabled: bool,
    /// mcpx's per-server settings.
    pub mcpx: ServerSettings,
}

/// A name filter: an exact name, a glob (`*`, `?`) or a `/regex/`.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// Matches one name.
    Exact(String),
    /// `*` matches any run, `?` one character.
    Glob(String),
    /// A regular expression (the `regex` crate's syntax), unanchored unless it says so.
    Regex(regex::Regex),
}

/// A name filter that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// A `/regex/` that does not compile.
    #[error("pattern {pattern}: {source}")]
    Regex {
        /// The pattern as written, slashes included.
        pattern: String,
        /// Why it does not compile.
        source: regex::Error,
    },
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Pattern::Exact(a), Pattern::Exact(b)) | (Pattern::Glob(a), Pattern::Glob(b)) => a == b,
            (Pattern::Regex(a), Pattern::Regex(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

impl Eq for Pattern {}

impl Pattern {
    /// Parses `exact`, `glob*` or `/regex/`.
    pub fn parse(s: &str) -> Result<Pattern, PatternError> {
        if s.len() >= 2 && s.starts_with('/') && s.ends_with('/') {
            let body = &s[1..s.len() - 1];
            regex::Regex::new(body)
                .map(Pattern::Regex)
                .map_err(|source| PatternError::Regex {
                    pattern: s.to_owned(),
                    source,
                })
        } else if s.contains(['*', '?']) {
            Ok(Pattern::Glob(s.to_owned()))
        } else {
            Ok(Pattern::Exact(s.to_owned()))
        }
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Pattern::Exact(s) => s == name,
            Pattern::Glob(g) => glob(g.as_bytes(), name.as_bytes()),
            Pattern::Regex(r) => r.is_match(name),
        }
    }
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    match (p.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => glob(&p[1..], s) || (!s.is_empty() && glob(p, &s[1..])),
        (Some(b'?'), Some(_)) => glob(&p[1..], &s[1..]),
        (Some(a), Some(b)) if a == b => glob(&p[1..], &s[1..]),
        _ => false,
    }
}

/// Include/exclude filters for an upstream's tools.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolFilter {
    /// When non-empty, only matching tools are exposed.
    pub include: Vec<Pattern>,
    /// Matching tools are hidden (applied after `include`).
    pub exclude: Vec<Pattern>,
}

impl ToolFilter {
    /// Whether a tool is exposed.
    pub fn allows(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| p.matches(name)))
            && !self.exclude.iter().any(|p| p.matches(name))
    }
}

/// What mcpx does when a stdio upstream's process exits (or an HTTP upstream's
/// connection fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnExit {
    /// Start it again, whatever the exit status (`"always"`, the default).
    #[default]
    Always,
    /// Start it again unless it exited with status 0 (`"on-failure"`).
    OnFailure,
    /// Leave it stopped (`"never"`).
    Never,
}

/// When and how often an upstream is started again (`mcpx.restart`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Whether to restart at all (`onExit`, default [`OnExit::Always`]).
    pub on_exit: OnExit,
    /// Quick failures in a row before the upstream is in a crash loop (`maxRestarts`,
    /// default 5, at least 1).
    pub max_restarts: u32,
    /// The first retry's delay (`backoffMs`, default 1 s). It doubles per attempt.
    pub backoff: Duration,
    /// The longest delay between retries (`maxBackoffMs`, default 30 s, at least
    /// `backoff`).
    pub max_backoff: Duration,
    /// Uptime after which the failure count is reset (`resetAfterMs`, default 60 s).
    /// A failure sooner than this after a start is quick.
    pub reset_after: Duration,
    /// How often a crash-looping upstream is tried again (`crashLoopRetryMs`, default
    /// 5 min).
    pub crash_loop_retry: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            on_exit: OnExit::Always,
            max_restarts: 5,
            backoff: Duration::from_millis(1000),
            max_backoff: Duration::from_millis(30_000),
            reset_after: Duration::from_millis(60_000),
            crash_loop_retry: Duration::from_millis(300_000),
        }
    }
}

impl RestartPolicy {
    /// The delay before attempt `attempt` (1-based): `backoff * 2^(attempt-1)`, capped
    /// at `max_backoff`. It does not overflow; attempt 0 counts as 1.
    pub fn delay(&self, attempt: u32) -> Duration {
        let doubled = 2u32
            .checked_pow(attempt.saturating_sub(1))
            .and_then(|factor| self.backoff.checked_mul(factor));
        doubled.map_or(self.max_backoff, |d| d.min(self.max_backoff))
    }
}

/// When an upstream is first started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartMode {
    /// When mcpx starts (`"eager"`, the default).
    #[default]
    Eager,
    /// On the first call that needs it (`"lazy"`).
    Lazy,
}

/// A periodic check that an upstream still answers (`mcpx.healthCheck`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthCheck {
    /// Time between checks (`intervalMs`, required, at least 100 ms).
    pub interval: Duration,
    /// How long one check may take (`timeoutMs`, default 5 s).
    pub timeout: Duration,
}

/// mcpx's settings for one upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSettings {
    /// The prefix of this upstream's names when several upstreams are merged
    /// (default: the server's key).
    pub namespace: Option<String>,
    /// Which tools to expose.
    pub tools: ToolFilter,
    /// Which era to speak.
    pub protocol: ProtocolPreference,
    /// How long a call may take without progress (default 60 s).
    pub call_timeout: Duration,
    /// How long connecting and probing may take (default 30 s).
    pub connect_timeout: Duration,
    /// How long the `server/discover` probe waits before `initialize` goes out too
    /// (`probeTimeoutMs`, default 10 s; a later discover answer still counts).
    pub probe_timeout: Duration,
    /// How an HTTP upstream's connections go: the environment's proxy (default),
    /// directly (`"proxy": "none"`), or through the `http://` proxy named.
    pub proxy: Proxy,
    /// OAuth client credentials for an `http` upstream (`"oauth": {"grant":
    /// "client_credentials", "tokenUrl", "clientId", "clientSecret" or
    /// "clientSecretEnv" or "privateKeyFile", "scope"}`).
    pub oauth: Option<ClientCredentials>,
    /// A user's authorization (the authorization-code grant) for an `http` or `sse`
    /// upstream: `"oauth": {"grant": "authorization_code", …}`, or the defaults for one
    /// with neither an `oauth` block nor an `Authorization` header.
    pub user_auth: Option<UserAuth>,
    /// When and how often the upstream is started again (`restart`).
    pub restart: RestartPolicy,
    /// When the upstream is first started (`start`, default eager).
    pub start: StartMode,
    /// Stop the child after this long with no call (`idleTimeoutMs`; stdio upstreams
    /// only; default: never).
    pub idle_timeout: Option<Duration>,
    /// A periodic check that the upstream answers (`healthCheck`; default: none).
    pub health_check: Option<HealthCheck>,
    /// What a stdio upstream inherits of mcpx's environment (`environment`).
    pub environment: Environment,
    /// The environment variables this entry's `…Env` settings read (mcpx's secrets:
    /// no stdio upstream inherits them).
    pub secret_env: Vec<String>,
    /// The most calls mcpx has in flight at the upstream at once (`maxInFlight`,
    /// default 256); more wait in a queue.
    pub max_in_flight: usize,
    /// The most calls that wait for a place (`maxQueued`, default 1024); a call
    /// beyond is refused, and the others are never touched.
    pub max_queued: usize,
}

/// What a stdio upstream inherits of mcpx's environment. In either case it never
/// inherits mcpx's own secrets (`MCPX_SERVE_TOKEN`, the OTLP headers, and every
/// variable an `…Env` setting names), and its entry's `env` is added last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Environment {
    /// All of it (`"inherit"`, the default), but mcpx's secrets.
    #[default]
    Inherit,
    /// Only `PATH`, `HOME`, `LANG`, `TMPDIR` and `USER` (`"minimal"`).
    Minimal,
}

impl Environment {
    /// The variables a `minimal` environment keeps.
    pub const MINIMAL: [&str; 5] = ["PATH", "HOME", "LANG", "TMPDIR", "USER"];
}

/// mcpx's own secret in its environment: the listener's bearer token.
pub const SERVE_TOKEN_ENV: &str = "MCPX_SERVE_TOKEN";

/// The variables that hold the OTLP collector's credentials (headers such as an API
/// key): mcpx's, for its own exports. Upstreams get the other `OTEL_*` variables.
pub const OTLP_HEADERS_ENV: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
];

impl Config {
    /// Every variable of mcpx's environment that holds one of its secrets: the serve
    /// token, the OTLP collector's headers and what every entry's `…Env` settings
    /// name. No stdio upstream inherits them.
    pub fn secret_env(&self) -> Vec<String> {
        let mut v = vec![SERVE_TOKEN_ENV.to_owned()];
        v.extend(OTLP_HEADERS_ENV.map(str::to_owned));
        for s in self.servers.values() {
            for e in &s.mcpx.secret_env {
                if !v.contains(e) {
                    v.push(e.clone());
                }
            }
        }
        v
    }
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            namespace: None,
            tools: ToolFilter::default(),
            protocol: ProtocolPreference::default(),
            call_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(10),
            proxy: Proxy::default(),
            oauth: None,
            user_auth: None,
            restart: RestartPolicy::default(),
            start: StartMode::default(),
            idle_timeout: None,
            health_check: None,
            environment: Environment::default(),
            secret_env: Vec::new(),
            max_in_flight: 256,
            max_queued: 1024,
        }
    }
}

/// mcpx's global settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Global {
    /// Between namespace and name (default `__`).
    pub separator: String,
    /// Longest name shown to a host (default 64).
    pub max_name_len: usize,
    /// Largest frame, bytes (default 64 MiB).
    pub max_frame_bytes: usize,
    /// Longest a request may wait, whatever progress it makes (default 600 s).
    pub max_call_time: Duration,
    /// Items per page of a merged list (default 100).
    pub page_size: usize,
    /// How long a client may take to answer a question relayed from an upstream
    /// (sampling, elicitation, roots; sampling may involve a person; default 300 s).
    pub ask_timeout: Duration,
    /// How long mcpx waits, after a legacy upstream's server-to-client request, for
    /// more of them before putting what it has to a 2026-07-28 client in one
    /// `input_required` round (default 20 ms): a legacy server that asks several
    /// questions at once sends them back to back.
    pub ask_gather: Duration,
    /// How many sampling and elicitation asks of one upstream mcpx holds toward hosts
    /// at once (default 4; register E-15); a further one is refused.
    pub ask_max_pending: usize,
    /// How many calls of 2026-07-28 hosts may wait, parked, for the host's retry with
    /// answers to a legacy upstream's questions (default 256); past it the upstream's
    /// further questions are refused.
    pub max_parked: usize,
    /// The most gateway tasks held at once, running or finished (default 1024): a
    /// task-augmented call beyond it is refused (register H13; 2025-11-25
    /// basic/utilities/tasks §Resource Management).
    pub max_tasks: usize,
    /// How long a gateway task is kept from its creation (default 1 h); also the most
    /// a 2025-11-25 host's `task.ttl` may ask for. An expired task is cancelled and
    /// forgotten.
    pub task_ttl: Duration,
    /// The polling interval suggested to hosts and used for upstream tasks (default 500 ms).
    pub task_poll_interval: Duration,
    /// How long a host's first list waits for upstreams still making their first
    /// start (`startupWaitMs`; default: the longest `connectTimeoutMs` of the eager
    /// servers, the time a start may take, or 30 s without one).
    pub startup_wait: Duration,
    /// How long a host's `initialize` or `server/discover` waits, at most, for
    /// upstreams on their first start whose capabilities are not known yet
    /// (`capabilityWaitMs`, default 1 s): what they declare besides the lists
    /// (logging, completions, subscriptions, tasks, instructions) comes from them.
    pub capability_wait: Duration,
    /// How long calls in flight on an upstream that a reload changes or removes may
    /// take to finish before it is stopped (`drainMs`, default 10 s).
    pub drain_timeout: Duration,
    /// An upstream's `list_changed` notifications within this window cause one
    /// re-list and one notification to hosts (`listChangedWindowMs`, default 150 ms).
    pub list_changed_window: Duration,
    /// Changes to the configuration file within this time of each other cause one
    /// reload (`reloadDebounceMs`, default 300 ms).
    pub reload_debounce: Duration,
    /// The most legacy Streamable HTTP sessions of hosts at once (`maxSessions`,
    /// default 1024); at the limit the one idle the longest with nothing open makes
    /// room for a new host.
    pub max_sessions: usize,
    /// A legacy session unused this long, with no GET stream open, expires
    /// (`sessionIdleMs`, default 30 min).
    pub session_idle: Duration,
    /// The most header fields a host's HTTP request may carry (`maxHeaderCount`,
    /// default 100); more get 431.
    pub max_header_count: usize,
    /// The largest header section of a host's HTTP request, in bytes (`maxHeaderBytes`,
    /// default 64 KiB; names and values, plus 4 bytes a field); larger gets 431.
    pub max_header_bytes: usize,
}

impl Default for Global {
    fn default() -> Self {
        Global {
            separator: "__".to_owned(),
            max_name_len: 64,
            max_frame_bytes: 64 * 1024 * 1024,
            max_call_time: Duration::from_secs(600),
            page_size: 100,
            ask_timeout: Duration::from_secs(300),
            ask_gather: Duration::from_millis(20),
            ask_max_pending: 4,
            max_parked: 256,
            max_tasks: 1024,
            task_ttl: Duration::from_secs(3600),
            task_poll_interval: Duration::from_millis(500),
            startup_wait: Duration::from_secs(30),
            capability_wait: Duration::from_millis(1000),
            drain_timeout: Duration::from_millis(10_000),
            list_changed_window: Duration::from_millis(150),
            reload_debounce: Duration::from_millis(300),
            max_sessions: 1024,
            session_idle: Duration::from_secs(30 * 60),
            max_header_count: 100,
            max_header_bytes: 64 * 1024,
        }
    }
}

/// Where mcpx looks for its configuration, in order: `--config`, `$MCPX_CONFIG`,
/// `./.mcpx.json`, `./.mcp.json`, `~/.config/mcpx/config.json`.
pub fn search_path(explicit: Option<&Path>) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if let Some(p) = explicit {
        paths.push(p.to_owned());
        return paths;
    }
    if let Some(p) = std::env::var_os("MCPX_CONFIG") {
        paths.push(PathBuf::from(p));
        return paths;
    }
    paths.push(PathBuf::from(".mcpx.json"));
    paths.push(PathBuf::from(".mcp.json"));
    if let Some(home) = std::env::var_os("HOME") {
        paths.push(PathBuf::from(home).join(".config/mcpx/config.json"));
    }
    paths
}

/// Loads the first configuration on the search path. An explicitly named file
/// (`--config`, `$MCPX_CONFIG`) must exist. Each file is read by [`read`]: only a
/// regular file, of at most [`max_config_bytes`]. It blocks on the disk: an async
/// caller uses [`load_async`].
pub fn load(explicit: Option<&Path>) -> Result<(PathBuf, Config), ConfigError> {
    let max = max_config_bytes()?;
    let paths = search_path(explicit);
    let must_exist = explicit.is_some() || std::env::var_os("MCPX_CONFIG").is_some();
    for p in &paths {
        match read(p, max) {
            Ok(text) => return parse(&text, p).map(|c| (p.clone(), c)),
            Err(ConfigError::Read { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound && !must_exist =>
            {
                continue;
            }
            Err(e) => return Err(e),
        }
    }
    Err(ConfigError::NotFound { searched: paths })
}

/// [`load`] on a blocking thread (`tokio::task::spawn_blocking`), so that a slow
/// disk does not hold up the runtime's other tasks. Must be called inside a tokio
/// runtime.
pub async fn load_async(explicit: Option<PathBuf>) -> Result<(PathBuf, Config), ConfigError> {
    let path = explicit
        .clone()
        .or_else(|| search_path(None).into_iter().next())
        .unwrap_or_default();
    tokio::task::spawn_blocking(move || load(explicit.as_deref()))
        .await
        .map_err(|source| ConfigError::Unfinished { path, source })?
}

#[cfg(test)]
mod tests {
    use super::file::server_lines;
    use super::*;

    #[test]
    fn patterns() {
        let p = |s: &str| Pattern::parse(s).unwrap();
        assert!(p("read_file").matches("read_file"));
        assert!(!p("read_file").matches("read_files"));
        assert!(p("read_*").matches("read_file"));
        assert!(p("get_?").matches("get_x") && !p("get_?").matches("get_xy"));
        assert!(p("/^write.*$/").matches("write_file"));
        assert!(!p("/^write.*$/").matches("overwrite"));
        assert!(p("/file/").matches("overwrite_file_now"));
        assert!(p("/^[a-c]+_[0-9]?$/").matches("abc_1"));
        assert!(!p("/^[a-c]+_[0-9]?$/").matches("abd_1"));
        assert!(p("/^[^x]+$/").matches("abc") && !p("/^[^x]+$/").matches("axc"));
        assert!(p("/^(read|list)_/").matches("list_dir"));
        assert!(Pattern::parse("/(a/").is_err());
    }

    #[test]
    fn the_probe_timeout_is_ten_seconds_unless_set_and_at_least_one_ms() {
        let with = |mcpx: &str| {
            parse(
                &format!(r#"{{"mcpServers": {{"up": {{"command": "x"{mcpx}}}}}}}"#),
                Path::new("mcpx.json"),
            )
            .map(|c| c.servers["up"].mcpx.probe_timeout)
        };
        assert_eq!(with("").unwrap(), Duration::from_secs(10));
        assert_eq!(
            with(r#", "mcpx": {"probeTimeoutMs": 300}"#).unwrap(),
            Duration::from_millis(300)
        );
        let e = with(r#", "mcpx": {"probeTimeoutMs": 0}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("mcpx.probeTimeoutMs must be at least 1"), "{e}");
    }

    #[test]
    fn an_upstreams_proxy_is_the_environment_none_or_an_http_url() {
        let with = |proxy: &str| {
            let mcpx = if proxy.is_empty() {
                String::new()
            } else {
                format!(r#", "mcpx": {{"proxy": {proxy}}}"#)
            };
            parse(
                &format!(
                    r#"{{"mcpServers": {{"up": {{"url": "https://mcp.example/mcp"{mcpx}}}}}}}"#
                ),
                Path::new("mcpx.json"),
            )
            .map(|c| c.servers["up"].mcpx.proxy.clone())
        };
        assert_eq!(with("").unwrap(), Proxy::Environment);
        assert_eq!(with(r#""none""#).unwrap(), Proxy::Direct);
        assert_eq!(
            with(r#""http://u:p@proxy.example:3128""#).unwrap(),
            Proxy::Via("http://u:p@proxy.example:3128".to_owned())
        );
        let e = with(r#""socks5://u:secret@proxy.example""#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mcpx.proxy is \"none\" or an http:// proxy URL"),
            "{e}"
        );
        assert!(!e.contains("secret"), "{e}");
    }

    #[test]
    fn oauth_is_for_http_upstreams_with_one_secret_and_no_authorization_header() {
        let parse_one = |server: &str| {
            parse(
                &format!(r#"{{"mcpServers": {{"up": {server}}}}}"#),
                Path::new("mcpx.json"),
            )
        };
        let oauth = r#""oauth": {"tokenUrl": "https://as.example/token", "clientId": "c", "clientSecret": "s", "scope": "a b"}"#;
        let c = parse_one(&format!(
            r#"{{"url": "https://mcp.example/mcp", "mcpx": {{{oauth}}}}}"#
        ))
        .unwrap();
        let got = c.servers["up"].mcpx.oauth.clone().unwrap();
        assert_eq!(
            (
                got.token_url.as_deref(),
                got.client_id.as_str(),
                got.client_secret.as_str()
            ),
            (Some("https://as.example/token"), "c", "s")
        );
        assert!(!format!("{got:?}").contains("\"s\""), "{got:?}");
        for (server, why) in [
            (
                format!(r#"{{"type": "sse", "url": "https://mcp.example/sse", "mcpx": {{{oauth}}}}}"#),
                "client_credentials grant is for http upstreams",
            ),
            (
                format!(
                    r#"{{"url": "https://mcp.example/mcp", "headers": {{"Authorization": "Bearer x"}}, "mcpx": {{{oauth}}}}}"#
                ),
                "mcpx.oauth and an Authorization header both give",
            ),
            (
                r#"{"url": "https://mcp.example/mcp", "mcpx": {"oauth": {"tokenUrl": "https://as.example/token", "clientId": "c"}}}"#.to_owned(),
                "exactly one of clientSecret, clientSecretEnv and privateKeyFile",
            ),
            (
                r#"{"url": "https://mcp.example/mcp", "mcpx": {"oauth": {"tokenUrl": "https://as.example/token", "clientId": "c", "clientSecretEnv": "MCPX_TEST_SURELY_UNSET_VAR"}}}"#.to_owned(),
                "names MCPX_TEST_SURELY_UNSET_VAR, which is not set",
            ),
        ] {
            let e = parse_one(&server).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn the_authorization_code_grant_is_explicit_or_the_default_of_http_and_sse() {
        let parse_one = |server: &str| {
            parse(
                &format!(r#"{{"mcpServers": {{"up": {server}}}}}"#),
                Path::new("mcpx.json"),
            )
        };
        // No oauth block and no Authorization header: the defaults, for http and sse.
        for kind in ["http", "sse"] {
            let c = parse_one(&format!(r#"{{"type": "{kind}", "url": "https://h/x"}}"#)).unwrap();
            let u = c.servers["up"].mcpx.user_auth.clone().unwrap();
            assert_eq!(u.upstream, "up");
            assert_eq!(u.client_id, None);
            assert!(c.servers["up"].mcpx.oauth.is_none());
        }
        // An Authorization header, or stdio: none.
        let c = parse_one(r#"{"url": "https://h/x", "headers": {"authorization": "Bearer t"}}"#)
            .unwrap();
        assert!(c.servers["up"].mcpx.user_auth.is_none());
        let c = parse_one(r#"{"command": "x"}"#).unwrap();
        assert!(c.servers["up"].mcpx.user_auth.is_none());
        // Pre-registered, with a secret: the grant must be said, as a secret alone
        // means client credentials.
        let c = parse_one(
            r#"{"type": "sse", "url": "https://h/sse", "mcpx": {"oauth": {"grant": "authorization_code", "clientId": "c", "clientSecret": "s", "callbackPort": 4321, "scope": "a"}}}"#,
        )
        .unwrap();
        let u = c.servers["up"].mcpx.user_auth.clone().unwrap();
        assert_eq!(
            (
                u.client_id.as_deref(),
                u.client_secret.as_deref(),
                u.callback_port,
                u.scope.as_deref()
            ),
            (Some("c"), Some("s"), Some(4321), Some("a"))
        );
        assert!(!format!("{u:?}").contains("\"s\""), "{u:?}");
        assert!(c.servers["up"].mcpx.oauth.is_none());
        let c = parse_one(
            r#"{"url": "https://h/x", "mcpx": {"oauth": {"clientMetadataUrl": "https://me.example/client.json"}}}"#,
        )
        .unwrap();
        let u = c.servers["up"].mcpx.user_auth.clone().unwrap();
        assert_eq!(
            u.client_metadata_url.as_deref(),
            Some("https://me.example/client.json")
        );
        for (server, why) in [
            (
                r#"{"command": "x", "mcpx": {"oauth": {"grant": "authorization_code"}}}"#,
                "for http and sse upstreams",
            ),
            (
                r#"{"url": "https://h/x", "mcpx": {"oauth": {"grant": "password"}}}"#,
                "not \"password\"",
            ),
            (
                r#"{"url": "https://h/x", "mcpx": {"oauth": {"grant": "authorization_code", "tokenUrl": "https://a/t"}}}"#,
                "are for the client_credentials grant",
            ),
            (
                r#"{"url": "https://h/x", "mcpx": {"oauth": {"clientMetadataUrl": "http://me/c.json"}}}"#,
                "must be an https:// URL",
            ),
            (
                r#"{"url": "https://h/x", "mcpx": {"oauth": {"grant": "authorization_code", "clientSecret": "s"}}}"#,
                "needs a clientId",
            ),
            (
                r#"{"url": "https://h/x", "mcpx": {"oauth": {"callbackPort": 0}}}"#,
                "must be a port",
            ),
            (
                r#"{"url": "https://h/x", "headers": {"Authorization": "x"}, "mcpx": {"oauth": {}}}"#,
                "both give",
            ),
            (
                r#"{"url": "https://h/x", "mcpx": {"oauth": {"clientId": "c", "privateKeyFile": "/nonexistent/key.pem"}}}"#,
                "privateKeyFile /nonexistent/key.pem",
            ),
        ] {
            let e = parse_one(server).unwrap_err().to_string();
            assert!(e.contains(why), "{server}: {e}");
        }
    }

    #[test]
    fn restart_delay_doubles_up_to_the_cap_without_overflow() {
        let p = RestartPolicy::default();
        let ms = Duration::from_millis;
        assert_eq!(p.delay(0), ms(1000));
        assert_eq!(p.delay(1), ms(1000));
        assert_eq!(p.delay(2), ms(2000));
        assert_eq!(p.delay(5), ms(16_000));
        assert_eq!(p.delay(6), ms(30_000));
        assert_eq!(p.delay(40), ms(30_000));
        assert_eq!(p.delay(u32::MAX), ms(30_000));
        let huge = RestartPolicy {
            backoff: Duration::MAX / 2,
            max_backoff: Duration::MAX,
            ..RestartPolicy::default()
        };
        assert_eq!(huge.delay(2), Duration::MAX - Duration::from_nanos(1));
        assert_eq!(huge.delay(3), Duration::MAX);
    }

    #[test]
    fn server_lines_are_the_lines_of_the_keys_in_mcp_servers() {
        let text = "{\n  // \"b\": in a comment\n  \"other\": {\"b\": 1},\n  \"mcpServers\": {\n    \"a\": {\"env\": {\"b\": \"x\"}},\n\n    \"b\": {},\n    \"q\\u0022\": {\"args\": [\"a\", {\"c\": 1}]}, \"c\": {}\n  },\n  \"mcpx\": {\"d\": {}}\n}";
        let lines = server_lines(&strip_jsonc(text));
        let want: BTreeMap<String, usize> = [("a", 5), ("b", 7), ("q\"", 8), ("c", 8)]
            .into_iter()
            .map(|(k, l)| (k.to_owned(), l))
            .collect();
        assert_eq!(lines, want);
    }

    #[test]
    fn jsonc_keeps_positions() {
        let text = "{\n  // c\n  \"a\": [1, 2,], /* x\n y */ \"b\": \"//not a comment\",\n}";
        let clean = strip_jsonc(text);
        assert_eq!(clean.len(), text.len());
        assert_eq!(clean.matches('\n').count(), text.matches('\n').count());
        let v: serde_json::Value = serde_json::from_str(&clean).unwrap();
        assert_eq!(v["b"], "//not a comment");
        assert_eq!(v["a"], serde_json::json!([1, 2]));
    }
}
