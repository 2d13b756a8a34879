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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use mcpx_client::{ClientCredentials, ProtocolPreference, Proxy, UserAuth};
use mcpx_protocol::SpecPolicy;
use serde::Deserialize;

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

// ---- the file's shape -------------------------------------------------------------

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileDoc {
    #[serde(default)]
    mcp_servers: BTreeMap<String, FileServer>,
    #[serde(default)]
    mcpx: FileGlobal,
}

/// A host's server entry: unknown keys tolerated (no `deny_unknown_fields`).
#[derive(Deserialize)]
struct FileServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    mcpx: FileServerMcpx,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileServerMcpx {
    namespace: Option<String>,
    #[serde(default)]
    tools: FileToolFilter,
    #[serde(default)]
    protocol: ProtocolPreference,
    call_timeout_ms: Option<u64>,
    connect_timeout_ms: Option<u64>,
    probe_timeout_ms: Option<u64>,
    proxy: Option<String>,
    oauth: Option<FileOauth>,
    #[serde(default)]
    restart: FileRestart,
    start: Option<String>,
    idle_timeout_ms: Option<u64>,
    health_check: Option<FileHealthCheck>,
    environment: Option<String>,
    max_in_flight: Option<usize>,
    max_queued: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileRestart {
    on_exit: Option<String>,
    max_restarts: Option<u32>,
    backoff_ms: Option<u64>,
    max_backoff_ms: Option<u64>,
    reset_after_ms: Option<u64>,
    crash_loop_retry_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileHealthCheck {
    interval_ms: u64,
    timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileOauth {
    grant: Option<String>,
    token_url: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    client_secret_env: Option<String>,
    private_key_file: Option<PathBuf>,
    client_metadata_url: Option<String>,
    callback_port: Option<u16>,
    scope: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileToolFilter {
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileGlobal {
    #[serde(default)]
    spec: FileSpec,
    #[serde(default)]
    names: FileNames,
    #[serde(default)]
    limits: FileLimits,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    #[serde(default)]
    precedence: Vec<String>,
    #[serde(default)]
    lenient: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileNames {
    separator: Option<String>,
    max_length: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileLimits {
    max_frame_bytes: Option<usize>,
    max_call_time_ms: Option<u64>,
    page_size: Option<usize>,
    ask_timeout_ms: Option<u64>,
    ask_gather_ms: Option<u64>,
    ask_max_pending: Option<usize>,
    max_parked_calls: Option<usize>,
    max_tasks: Option<usize>,
    task_ttl_ms: Option<u64>,
    task_poll_interval_ms: Option<u64>,
    startup_wait_ms: Option<u64>,
    capability_wait_ms: Option<u64>,
    drain_ms: Option<u64>,
    list_changed_window_ms: Option<u64>,
    reload_debounce_ms: Option<u64>,
    max_sessions: Option<usize>,
    session_idle_ms: Option<u64>,
    max_header_count: Option<usize>,
    max_header_bytes: Option<usize>,
}

/// Blanks out `//` and `/* */` comments and trailing commas, keeping every other byte
/// (and every newline) in place, so JSON error positions still point into the file.
pub fn strip_jsonc(text: &str) -> String {
    let mut out = text.as_bytes().to_vec();
    blank_comments(&mut out);
    blank_trailing_commas(&mut out);
    // Whole comments (every byte of their characters) and ASCII commas were replaced
    // by ASCII spaces, so this is still UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// Walks the bytes outside JSON strings; `f(i)` handles byte `i` and returns the index
/// to continue from.
fn outside_strings(b: &[u8], mut f: impl FnMut(usize) -> usize) {
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        if in_str {
            match b[i] {
                b'\\' => i += 1,
                b'"' => in_str = false,
                _ => {}
            }
            i += 1;
        } else if b[i] == b'"' {
            in_str = true;
            i += 1;
        } else {
            i = f(i).max(i + 1);
        }
    }
}

fn blank_comments(out: &mut [u8]) {
    let b = out.to_vec();
    outside_strings(&b, |i| {
        let end = match (b[i], b.get(i + 1)) {
            (b'/', Some(b'/')) => b[i..]
                .iter()
                .position(|c| *c == b'\n')
                .map_or(b.len(), |n| i + n),
            (b'/', Some(b'*')) => b[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(b.len(), |n| i + 2 + n + 2),
            _ => return i + 1,
        };
        for o in &mut out[i..end] {
            if *o != b'\n' {
                *o = b' ';
            }
        }
        end
    });
}

fn blank_trailing_commas(out: &mut [u8]) {
    let b = out.to_vec();
    outside_strings(&b, |i| {
        if b[i] == b',' {
            let next = b[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
            if matches!(next, Some(b'}') | Some(b']')) {
                out[i] = b' ';
            }
        }
        i + 1
    });
}

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
    check_global(&global).map_err(|m| value_err(None, m))?;
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
    Ok(Config {
        servers,
        global,
        spec,
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
fn check_global(g: &Global) -> Result<(), String> {
    // Fewer than the few fields every request carries (`Host`, `Content-Type`,
    // `Accept`, `Content-Length`, …) would refuse every request.
    if g.max_header_count < 8 {
        return Err(format!(
            "mcpx.limits.maxHeaderCount {} is too small (at least 8)",
            g.max_header_count
        ));
    }
    if g.max_header_bytes < 1024 {
        return Err(format!(
            "mcpx.limits.maxHeaderBytes {} is too small (at least 1024)",
            g.max_header_bytes
        ));
    }
    if g.max_name_len < 16 {
        return Err(format!(
            "mcpx.names.maxLength {} is too short (at least 16)",
            g.max_name_len
        ));
    }
    if !g
        .separator
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"_.-".contains(&c))
        || g.separator.is_empty()
    {
        return Err(format!(
            "mcpx.names.separator {:?} must be non-empty and use only [A-Za-z0-9_.-]",
            g.separator
        ));
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
fn has_authorization(headers: &BTreeMap<String, String>) -> bool {
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

/// The 1-based line of each server's key in the top-level `mcpServers` object.
///
/// `clean` is the text with comments blanked ([`strip_jsonc`]), so a quoted name in a
/// comment is not taken for a key. Keys are compared decoded, so an escaped name is
/// found too. A name given twice gets the line of its last entry, the one serde keeps.
fn server_lines(clean: &str) -> BTreeMap<String, usize> {
    let b = clean.as_bytes();
    let mut lines = BTreeMap::new();
    let mut line = 1;
    let mut depth = 0usize;
    // The last string seen and the line it is on: a key when a `:` follows.
    let mut last: Option<(usize, usize, usize)> = None;
    // Whether the value being entered is the root's `mcpServers`.
    let mut servers_next = false;
    let mut in_servers = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => line += 1,
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                last = Some((start, (i + 1).min(b.len()), line));
            }
            b':' => {
                let key = last.take().and_then(|(s, e, l)| {
                    Some((serde_json::from_str::<String>(clean.get(s..e)?).ok()?, l))
                });
                match key {
                    Some((k, _)) if depth == 1 => servers_next = k == "mcpServers",
                    Some((k, l)) if depth == 2 && in_servers => {
                        lines.insert(k, l);
                    }
                    _ => {}
                }
            }
            b'{' | b'[' => {
                depth += 1;
                in_servers |= servers_next && depth == 2 && b[i] == b'{';
                servers_next = false;
            }
            b'}' | b']' => {
                if depth == 2 {
                    in_servers = false;
                }
                depth = depth.saturating_sub(1);
            }
            b',' => {
                last = None;
                servers_next = false;
            }
            _ => {}
        }
        i += 1;
    }
    lines
}

/// serde_json appends " at line L column C"; the error carries those separately.
fn without_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
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
/// (`--config`, `$MCPX_CONFIG`) must exist.
pub fn load(explicit: Option<&Path>) -> Result<(PathBuf, Config), ConfigError> {
    let paths = search_path(explicit);
    let must_exist = explicit.is_some() || std::env::var_os("MCPX_CONFIG").is_some();
    for p in &paths {
        match std::fs::read_to_string(p) {
            Ok(text) => return parse(&text, p).map(|c| (p.clone(), c)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => continue,
            Err(source) => {
                return Err(ConfigError::Read {
                    path: p.clone(),
                    source,
                });
            }
        }
    }
    Err(ConfigError::NotFound { searched: paths })
}

/// What an upstream's `mcpx.oauth` configures.
enum Grant {
    /// The client credentials grant.
    Client(ClientCredentials),
    /// A user's authorization (authorization code).
    User(UserAuth),
}

/// An upstream's `mcpx.oauth`: `grant` is `client_credentials` (the default when a
/// secret or key is given) or `authorization_code` (else the default).
fn grant(
    o: FileOauth,
    name: &str,
    transport: &Transport,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<Grant, ConfigError> {
    // A secret, a key or a token endpoint says client credentials.
    let has_secret = o.client_secret.is_some()
        || o.client_secret_env.is_some()
        || o.private_key_file.is_some()
        || o.token_url.is_some();
    match o.grant.as_deref() {
        Some("client_credentials") => client_credentials(o, transport, err).map(Grant::Client),
        None if has_secret => client_credentials(o, transport, err).map(Grant::Client),
        Some("authorization_code") | None => user_auth(o, name, transport, err).map(Grant::User),
        Some(other) => Err(err(&format!(
            "mcpx.oauth.grant is \"authorization_code\" or \"client_credentials\", not {other:?}"
        ))),
    }
}

/// The authorization-code grant's settings, for an `http` or `sse` upstream without
/// its own `Authorization` header.
fn user_auth(
    o: FileOauth,
    name: &str,
    transport: &Transport,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<UserAuth, ConfigError> {
    match transport {
        Transport::Http { headers, .. } | Transport::Sse { headers, .. }
            if has_authorization(headers) =>
        {
            return Err(err(
                "mcpx.oauth and an Authorization header both give the upstream's credential; keep one",
            ));
        }
        Transport::Http { .. } | Transport::Sse { .. } => {}
        Transport::Stdio { .. } => {
            return Err(err("mcpx.oauth is for http and sse upstreams"));
        }
    }
    if o.token_url.is_some() || o.private_key_file.is_some() {
        return Err(err(
            "mcpx.oauth.tokenUrl and privateKeyFile are for the client_credentials grant; the authorization_code grant discovers its endpoints",
        ));
    }
    if let Some(u) = &o.client_metadata_url
        && !u.starts_with("https://")
    {
        return Err(err("mcpx.oauth.clientMetadataUrl must be an https:// URL"));
    }
    let client_secret = match (o.client_secret, o.client_secret_env) {
        (Some(s), None) => Some(s),
        (None, Some(var)) => Some(secret_from_env(&var, err)?),
        (None, None) => None,
        (Some(_), Some(_)) => {
            return Err(err(
                "mcpx.oauth takes one of clientSecret and clientSecretEnv, not both",
            ));
        }
    };
    if client_secret.is_some() && o.client_id.is_none() {
        return Err(err("mcpx.oauth.clientSecret needs a clientId"));
    }
    if o.callback_port == Some(0) {
        return Err(err("mcpx.oauth.callbackPort must be a port (1-65535)"));
    }
    Ok(UserAuth {
        upstream: name.to_owned(),
        client_id: o.client_id,
        client_secret,
        client_metadata_url: o.client_metadata_url,
        scope: o.scope,
        callback_port: o.callback_port,
        store: None,
    })
}

/// An upstream's `mcpx.oauth` client credentials: for an `http` upstream without its
/// own `Authorization` header, with the secret given once (inline, by the environment
/// variable naming it, read now, or as a private key's file, read now).
fn client_credentials(
    o: FileOauth,
    transport: &Transport,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<ClientCredentials, ConfigError> {
    match transport {
        Transport::Http { headers, .. } if has_authorization(headers) => {
            return Err(err(
                "mcpx.oauth and an Authorization header both give the upstream's credential; keep one",
            ));
        }
        Transport::Http { .. } => {}
        _ => {
            return Err(err(
                "mcpx.oauth's client_credentials grant is for http upstreams (Streamable HTTP)",
            ));
        }
    }
    if o.client_metadata_url.is_some() || o.callback_port.is_some() {
        return Err(err(
            "mcpx.oauth.clientMetadataUrl and callbackPort are for the authorization_code grant",
        ));
    }
    let Some(client_id) = o.client_id else {
        return Err(err(
            "mcpx.oauth's client_credentials grant needs a clientId",
        ));
    };
    if let Some(t) = &o.token_url
        && !(t.starts_with("https://") || t.starts_with("http://"))
    {
        return Err(err(
            "mcpx.oauth.tokenUrl must be an http:// or https:// URL",
        ));
    }
    let (client_secret, private_key) = client_secret(
        o.client_secret,
        o.client_secret_env,
        o.private_key_file,
        err,
    )?;
    Ok(ClientCredentials {
        token_url: o.token_url,
        client_id,
        client_secret,
        private_key,
        scope: o.scope,
    })
}

/// The client credentials grant's secret, given once: inline, by the environment
/// variable naming it (read now), or as a private key's file (read now, and checked).
/// A key gives an empty secret.
fn client_secret(
    secret: Option<String>,
    env: Option<String>,
    key_file: Option<PathBuf>,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<(String, Option<String>), ConfigError> {
    match (secret, env, key_file) {
        (Some(s), None, None) => Ok((s, None)),
        (None, Some(var), None) => Ok((secret_from_env(&var, err)?, None)),
        (None, None, Some(path)) => {
            let key_err = |e: &dyn std::fmt::Display| {
                err(&format!(
                    "mcpx.oauth.privateKeyFile {}: {e}",
                    path.display()
                ))
            };
            let pem = std::fs::read_to_string(&path).map_err(|e| key_err(&e))?;
            mcpx_transport::oauth::check_private_key(&pem).map_err(|e| key_err(&e))?;
            Ok((String::new(), Some(pem)))
        }
        _ => Err(err(
            "mcpx.oauth needs exactly one of clientSecret, clientSecretEnv and privateKeyFile",
        )),
    }
}

/// The value of `mcpx.oauth.clientSecretEnv`'s variable.
fn secret_from_env(var: &str, err: &dyn Fn(&str) -> ConfigError) -> Result<String, ConfigError> {
    std::env::var(var).map_err(|_| {
        err(&format!(
            "mcpx.oauth.clientSecretEnv names {var}, which is not set"
        ))
    })
}

#[cfg(test)]
mod tests {
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
