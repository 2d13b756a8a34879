//! Connecting: starting the transport and finding the upstream's era.
//!
//! Under the default preference mcpx probes `server/discover` first, the SHOULD for
//! dual-era clients (2026-07-28 server/discover §When to Call; register D-C10):
//!
//! * a `DiscoverResult` listing 2026-07-28 means modern;
//! * on HTTP, a 4xx whose body is a recognised modern JSON-RPC error (-32020, -32021,
//!   -32022, or -32601 with 404) also means modern (A-C14, B-C9);
//! * any other error, or any other 4xx (except 401 and 403, which are reported, not
//!   probed past), means legacy: `initialize`, offering the newest legacy revision and
//!   accepting the server's counter-offer when mcpx supports it (A-C6: otherwise mcpx
//!   disconnects and says why);
//! * no answer within the probe timeout proves nothing (a loaded modern server answers
//!   late): the discover request stays awaited, `initialize` goes out on the same
//!   connection, and the first conclusive answer within the handshake timeout decides.
//!   A modern `DiscoverResult` wins, and the `initialize` answer is then ignored; a
//!   successful `InitializeResult` means legacy; an `initialize` error waits for the
//!   discover answer (`race`);
//! * on HTTP, an `initialize` POST answered 400, 404 or 405 falls back to the
//!   2024-11-05 HTTP+SSE transport at the same URL (B-C9).
//!
//! The era found is remembered per server identity ([`EraCache`]) when a completed
//! handshake established it, never when a legacy era only followed a probe timeout; a
//! cached era is tried first and, if it fails, the upstream is probed afresh.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use mcpx_protocol::jsonrpc::{Kind, member};
use mcpx_protocol::{Era, Frame, Id, Limits, Revision, SpecPolicy, meta};
use mcpx_transport::TransportError;
use mcpx_transport::child::{ChildConfig, ChildUpstream};
use mcpx_transport::http_sse_client::{SseClientConfig, SseUpstream};
pub use mcpx_transport::oauth::ClientCredentials;
pub use mcpx_transport::proxy::Proxy;
use mcpx_transport::streamable_http::client::{HttpClientConfig, HttpUpstream};
use mcpx_transport::upstream::{Unsolicited, Upstream};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::any::AnyUpstream;
use crate::connection::{Connection, ServerFacts};
use crate::error::ClientError;

/// Which era to speak to an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProtocolPreference {
    /// `server/discover` first, legacy when that fails (default).
    #[default]
    PreferModern,
    /// `initialize` first, modern when the server refuses it as a modern server does.
    PreferLegacy,
    /// Modern only.
    Modern,
    /// Legacy only.
    Legacy,
}

/// How to reach an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetTransport {
    /// A child process.
    Stdio {
        /// Program.
        command: String,
        /// Arguments.
        args: Vec<String>,
        /// Extra environment.
        env: Vec<(String, String)>,
        /// Working directory.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// Endpoint URL.
        url: String,
        /// Extra headers.
        headers: Vec<(String, String)>,
    },
    /// HTTP+SSE (2024-11-05).
    Sse {
        /// SSE URL.
        url: String,
        /// Extra headers.
        headers: Vec<(String, String)>,
    },
    /// The stdio transport's framing over a byte stream the opener makes: a server in
    /// this process (in-process tests).
    Stream(StreamOpener),
}

/// A reader and a writer speaking newline-delimited JSON-RPC, as a stdio child's
/// stdout and stdin do.
pub type ByteStream = (
    Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
);

/// The future of a [`StreamOpener`]'s stream.
pub type Opening = Pin<Box<dyn Future<Output = std::io::Result<ByteStream>> + Send>>;

/// Opens a new byte stream to a server for each connection
/// ([`TargetTransport::Stream`]): a server in this process, say, over
/// `tokio::io::duplex`. Two openers are equal when they are the same one.
#[derive(Clone)]
pub struct StreamOpener {
    name: String,
    open: std::sync::Arc<dyn Fn() -> Opening + Send + Sync>,
}

impl StreamOpener {
    /// An opener called `name` (its era-cache identity is `stream:<name>`) that calls
    /// `open` for each connection.
    pub fn new(
        name: impl Into<String>,
        open: impl Fn() -> Opening + Send + Sync + 'static,
    ) -> StreamOpener {
        StreamOpener {
            name: name.into(),
            open: std::sync::Arc::new(open),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for StreamOpener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamOpener")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl PartialEq for StreamOpener {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && std::sync::Arc::ptr_eq(&self.open, &other.open)
    }
}

impl Eq for StreamOpener {}

impl TargetTransport {
    /// What identifies the server for the era cache.
    pub fn identity(&self) -> String {
        match self {
            // The command and each argument after a space: none after a command
            // without arguments.
            TargetTransport::Stdio { command, args, .. } => {
                let mut s = format!("stdio:{command}");
                for a in args {
                    s.push(' ');
                    s.push_str(a);
                }
                s
            }
            TargetTransport::Http { url, .. } => format!("http:{url}"),
            TargetTransport::Sse { url, .. } => format!("sse:{url}"),
            TargetTransport::Stream(opener) => format!("stream:{}", opener.name),
        }
    }
}

/// Everything needed to connect to one upstream.
#[derive(Debug, Clone)]
pub struct Target {
    /// The configured name (used in every message about it).
    pub name: String,
    /// How to reach it.
    pub transport: TargetTransport,
    /// Which era to try.
    pub preference: ProtocolPreference,
    /// How long the `server/discover` probe waits before deciding "legacy" (default 10 s).
    pub probe_timeout: Duration,
    /// How long each handshake request may take (default 30 s).
    pub handshake_timeout: Duration,
    /// Frame limits.
    pub limits: Limits,
    /// mcpx's `Implementation`.
    pub client_info: Value,
    /// Capabilities mcpx declares to a legacy upstream at `initialize`.
    pub legacy_capabilities: Value,
    /// The spec policy.
    pub policy: SpecPolicy,
    /// How an HTTP upstream's connections go (default: the environment's proxy, if
    /// any; `mcpx_transport::proxy`).
    pub proxy: Proxy,
    /// OAuth client credentials for a Streamable HTTP upstream (`mcpx_transport::oauth`).
    pub oauth: Option<ClientCredentials>,
    /// A user's authorization for an HTTP upstream (`mcpx_transport::oauth::code`).
    pub user_auth: Option<mcpx_transport::oauth::code::UserAuth>,
    /// A stdio upstream's stderr is also copied to this process's stderr (default
    /// false; `mcpx_transport::child::ChildConfig::echo_stderr`).
    pub echo_stderr: bool,
    /// Variables of mcpx's environment a stdio upstream does not inherit
    /// (`mcpx_transport::child::ChildConfig::env_remove`).
    pub env_remove: Vec<String>,
    /// When set, the only variables of mcpx's environment a stdio upstream inherits
    /// (`mcpx_transport::child::ChildConfig::env_inherit_only`).
    pub env_inherit_only: Option<Vec<String>>,
    /// Requests a stdio or HTTP+SSE connection may have awaiting answers (default:
    /// the transport's, 256).
    pub max_pending: Option<usize>,
    /// How long a Streamable HTTP request may wait for its response headers (default:
    /// the transport's, 30 s). The gateway sets the upstream's call timeout, so that an
    /// upstream withholding its headers cannot hold a call past it.
    pub request_timeout: Option<Duration>,
}

impl Target {
    /// A target with default timeouts.
    pub fn new(name: impl Into<String>, transport: TargetTransport) -> Target {
        Target {
            name: name.into(),
            transport,
            preference: ProtocolPreference::default(),
            probe_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(30),
            limits: Limits::default(),
            client_info: json!({ "name": "mcpx", "version": env!("CARGO_PKG_VERSION") }),
            legacy_capabilities: json!({}),
            policy: SpecPolicy::default(),
            proxy: Proxy::default(),
            oauth: None,
            user_auth: None,
            echo_stderr: false,
            env_remove: Vec::new(),
            env_inherit_only: None,
            max_pending: None,
            request_timeout: None,
        }
    }
}

/// The era of each server identity, remembered on disk (`$XDG_CACHE_HOME/mcpx/eras.json`
/// or `~/.cache/mcpx/eras.json`).
///
/// Only what a completed handshake established is remembered ([`DecidedBy`]): a legacy
/// era that merely followed a probe timeout is not, since a loaded modern server looks
/// the same. A legacy entry written before mcpx recorded how it was decided may be such
/// a fallback, so it is not trusted: the server is probed afresh.
#[derive(Debug, Clone, Default)]
pub struct EraCache {
    path: Option<PathBuf>,
}

/// What established a cached era.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DecidedBy {
    /// The server's answer to `server/discover`: a `DiscoverResult` (modern), or an
    /// answer saying it is not modern, with `initialize` then accepted (legacy).
    Discover,
    /// `initialize`, tried first and accepted (a legacy or prefer-legacy preference, or
    /// a legacy era cached before).
    Initialize,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct CachedEra {
    era: Era,
    revision: Revision,
    /// Absent in entries written before mcpx recorded it.
    #[serde(default, rename = "decidedBy", skip_serializing_if = "Option::is_none")]
    decided_by: Option<DecidedBy>,
    /// The `ServerCapabilities` the handshake found: what a gateway declares for the
    /// server before it is up again. Absent in entries written before mcpx kept them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    capabilities: Option<Value>,
    /// The server's instructions, as the handshake found them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    instructions: Option<String>,
}

impl CachedEra {
    /// Whether the entry can be tried first: a modern era only ever came from a
    /// `DiscoverResult`, a legacy one only counts when a handshake decided it.
    fn trusted(&self) -> bool {
        self.era == Era::Modern || self.decided_by.is_some()
    }
}

impl EraCache {
    /// The cache at the default place, or none when no home directory is known.
    pub fn default_location() -> EraCache {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
        EraCache {
            path: base.map(|b| b.join("mcpx").join("eras.json")),
        }
    }

    /// A cache in a given file.
    pub fn at(path: PathBuf) -> EraCache {
        EraCache { path: Some(path) }
    }

    /// No cache.
    pub fn disabled() -> EraCache {
        EraCache { path: None }
    }

    fn read(&self) -> BTreeMap<String, CachedEra> {
        self.path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// The cached era of `identity`, when it can be trusted (a legacy entry that does
    /// not say how it was decided cannot).
    pub fn get(&self, identity: &str) -> Option<(Era, Revision)> {
        self.read()
            .get(identity)
            .filter(|c| c.trusted())
            .map(|c| (c.era, c.revision))
    }

    /// What the last completed handshake with `identity` found (its era, revision,
    /// capabilities and instructions), when the entry can be trusted and holds them:
    /// what the server will most likely declare again.
    pub fn facts(&self, identity: &str) -> Option<ServerFacts> {
        let c = self.read().remove(identity).filter(CachedEra::trusted)?;
        Some(ServerFacts {
            era: c.era,
            revision: c.revision,
            capabilities: c.capabilities?,
            info: Value::Null,
            instructions: c.instructions,
        })
    }

    /// Remembers the era of `identity`, as `decided_by` established it, with the
    /// capabilities and instructions of `facts` when given. Failures are logged, never
    /// fatal.
    pub fn put(
        &self,
        identity: &str,
        era: Era,
        revision: Revision,
        decided_by: DecidedBy,
        facts: Option<&ServerFacts>,
    ) {
        let Some(path) = &self.path else { return };
        let mut all = self.read();
        let entry = CachedEra {
            era,
            revision,
            decided_by: Some(decided_by),
            capabilities: facts.map(|f| f.capabilities.clone()),
            instructions: facts.and_then(|f| f.instructions.clone()),
        };
        if all.get(identity) == Some(&entry) {
            return;
        }
        all.insert(identity.to_owned(), entry);
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            std::fs::write(&tmp, serde_json::to_vec_pretty(&all)?)?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = write() {
            tracing::debug!("era cache {}: {e}", path.display());
        }
    }

    /// Forgets `identity` (its cached era failed).
    pub fn forget(&self, identity: &str) {
        let Some(path) = &self.path else { return };
        let mut all = self.read();
        if all.remove(identity).is_some() {
            let _ = serde_json::to_vec_pretty(&all).map(|b| std::fs::write(path, b));
        }
    }
}

fn handshake_err(target: &Target, message: impl Into<String>) -> ClientError {
    ClientError::Handshake {
        upstream: target.name.clone(),
        message: message.into(),
    }
}

fn transport_err(target: &Target, source: TransportError) -> ClientError {
    ClientError::Transport {
        upstream: target.name.clone(),
        source,
    }
}

async fn open(target: &Target) -> Result<(AnyUpstream, Unsolicited), ClientError> {
    match &target.transport {
        TargetTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut c = ChildConfig::new(command.clone(), args.clone());
            c.env = env.clone();
            c.env_remove = target.env_remove.clone();
            if let Some(n) = target.max_pending {
                c.max_pending = n;
            }
            c.env_inherit_only = target.env_inherit_only.clone();
            c.cwd = cwd.clone();
            c.limits = target.limits;
            c.echo_stderr = target.echo_stderr;
            ChildUpstream::spawn(c)
                .map(|(u, rx)| (AnyUpstream::Child(u), rx))
                .map_err(|e| transport_err(target, e))
        }
        TargetTransport::Http { url, headers } => {
            let mut c = HttpClientConfig::new(url.clone());
            c.headers = headers.clone();
            if let Some(t) = target.request_timeout {
                c.request_timeout = t;
            }
            c.limits = target.limits;
            c.proxy = target.proxy.clone();
            c.oauth = target.oauth.clone();
            c.user_auth = target.user_auth.clone();
            HttpUpstream::new(c)
                .map(|(u, rx)| (AnyUpstream::Http(u), rx))
                .map_err(|e| transport_err(target, e))
        }
        TargetTransport::Sse { url, headers } => open_sse(target, url, headers).await,
        TargetTransport::Stream(opener) => {
            let (reader, writer) = (opener.open)()
                .await
                .map_err(|e| transport_err(target, TransportError::Io(e.to_string())))?;
            let mut c = ChildConfig::new(opener.name.clone(), Vec::<String>::new());
            if let Some(n) = target.max_pending {
                c.max_pending = n;
            }
            c.limits = target.limits;
            let (u, rx) = ChildUpstream::over_stream(reader, writer, &c);
            Ok((AnyUpstream::Child(u), rx))
        }
    }
}

async fn open_sse(
    target: &Target,
    url: &str,
    headers: &[(String, String)],
) -> Result<(AnyUpstream, Unsolicited), ClientError> {
    let mut c = SseClientConfig::new(url.to_owned());
    c.headers = headers.to_vec();
    c.user_auth = target.user_auth.clone();
    c.limits = target.limits;
    c.proxy = target.proxy.clone();
    if let Some(n) = target.max_pending {
        c.max_pending = n;
    }
    SseUpstream::connect(c)
        .await
        .map(|(u, rx)| (AnyUpstream::Sse(u), rx))
        .map_err(|e| transport_err(target, e))
}

/// A handshake request's answer, still to come.
type Answer<'a> = Pin<Box<dyn Future<Output = Result<Frame, Probe>> + Send + 'a>>;

/// Sends one handshake request; its answer is the returned future's.
fn ask<'a>(
    up: &'a AnyUpstream,
    id: i64,
    method: &str,
    params: &Value,
) -> Result<Answer<'a>, Probe> {
    let raw = RawValue::from_string(params.to_string()).map_err(|e| Probe::Fatal(e.to_string()))?;
    let frame = Frame::request(&Id::Number(id), method, Some(&raw));
    Ok(Box::pin(async move {
        let x = up.request(frame).await.map_err(Probe::Transport)?;
        x.response(|f| tracing::debug!(frame = %f, "ignored during the handshake"))
            .await
            .map_err(Probe::Transport)
    }))
}

/// One handshake request/response, bounded by `timeout`.
async fn exchange(
    up: &AnyUpstream,
    id: i64,
    method: &str,
    params: &Value,
    timeout: Duration,
) -> Result<Frame, Probe> {
    let answer = ask(up, id, method, params)?;
    tokio::time::timeout(timeout, answer)
        .await
        .unwrap_or(Err(Probe::Timeout))
}

#[derive(Debug)]
enum Probe {
    Timeout,
    Transport(TransportError),
    Fatal(String),
}

/// What a `server/discover` probe concluded.
enum Discovered<'a> {
    Modern(ServerFacts),
    /// The server answered, and not as a modern server.
    Legacy,
    /// No answer within the probe timeout: the answer, still awaited. That proves
    /// nothing: a modern server under load answers late.
    Late(Answer<'a>),
}

/// One `server/discover` request's outcome within the probe timeout.
enum Asked<'a> {
    Answered(Result<Frame, Probe>),
    Late(Answer<'a>),
}

/// What a `server/discover` answer refusing the version asked for (-32022) lists as
/// supported (2026-07-28 schema `UnsupportedProtocolVersionError`:
/// `error.data.supported`), from a JSON-RPC error frame or the error response an HTTP
/// 400 carried; `None` for any other answer.
fn refused_version(outcome: &Result<Frame, Probe>) -> Option<Vec<String>> {
    use mcpx_protocol::error::UNSUPPORTED_PROTOCOL_VERSION;
    let data: Value = match outcome {
        Ok(f) => {
            let e = f
                .error()
                .filter(|e| e.code == UNSUPPORTED_PROTOCOL_VERSION)?;
            e.data
                .as_deref()
                .and_then(|d| serde_json::from_str(d).ok())
                .unwrap_or(Value::Null)
        }
        Err(Probe::Transport(TransportError::Http {
            code: Some(UNSUPPORTED_PROTOCOL_VERSION),
            body,
            ..
        })) => serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|r| r.pointer("/error/data").cloned())
            .unwrap_or(Value::Null),
        _ => return None,
    };
    let supported = data.get("supported").and_then(Value::as_array);
    Some(
        supported
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
    )
}

/// Probes with `server/discover`, taking request ids from `ids`. A refusal of the
/// version asked for (-32022) is answered as 2026-07-28 basic/versioning §Protocol
/// Version Negotiation says, by retrying with a mutually supported version: once, with
/// the newest modern revision the refusal lists; a refusal listing only legacy
/// revisions means legacy; one listing none mcpx speaks ends the connection.
async fn discover<'a>(
    target: &Target,
    up: &'a AnyUpstream,
    ids: &mut i64,
) -> Result<Discovered<'a>, ClientError> {
    let mut version = Revision::NEWEST;
    let mut retried = false;
    loop {
        let asked = discover_as(target, up, *ids, version).await;
        *ids += 1;
        let outcome = match asked {
            Asked::Answered(outcome) => outcome,
            Asked::Late(answer) => return Ok(Discovered::Late(answer)),
        };
        let Some(supported) = refused_version(&outcome) else {
            return discovered(target, outcome);
        };
        let known: Vec<Revision> = supported
            .iter()
            .filter_map(|v| Revision::from_wire(v))
            .collect();
        match known.iter().filter(|r| r.era() == Era::Modern).max() {
            Some(&r) if !retried => {
                tracing::debug!(upstream = %target.name, "{version} refused; retrying with {r}");
                retried = true;
                version = r;
            }
            Some(_) => {
                return Err(handshake_err(
                    target,
                    format!(
                        "the server refused protocol version {version} again, though it lists it as supported"
                    ),
                ));
            }
            None if !known.is_empty() => return Ok(Discovered::Legacy),
            None => {
                return Err(handshake_err(
                    target,
                    format!(
                        "the server refused protocol version {version} and supports {}; mcpx supports {}",
                        if supported.is_empty() {
                            "no version it named".to_owned()
                        } else {
                            supported.join(", ")
                        },
                        Revision::wire_names_newest_first().join(", ")
                    ),
                ));
            }
        }
    }
}

/// The extensions mcpx declares itself toward `target` (2026-07-28
/// `ClientCapabilities.extensions`): the OAuth client credentials one when it gets its
/// tokens that way (the extension's client guide: "Declare support").
pub(crate) fn client_extensions(target: &Target) -> Option<Map<String, Value>> {
    let mut ours = Map::new();
    if target.oauth.is_some() {
        ours.insert(
            "io.modelcontextprotocol/oauth-client-credentials".to_owned(),
            json!({}),
        );
    }
    (!ours.is_empty()).then_some(ours)
}

/// Adds `ours` to `capabilities.extensions` (the caller's own entries win).
pub(crate) fn declare_extensions(capabilities: &mut Value, ours: &Map<String, Value>) {
    if !capabilities.is_object() {
        *capabilities = json!({});
    }
    let Some(caps) = capabilities.as_object_mut() else {
        return;
    };
    let extensions = caps.entry("extensions").or_insert_with(|| json!({}));
    if let Some(e) = extensions.as_object_mut() {
        for (k, v) in ours {
            e.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// One `server/discover` request asking for `version`, awaited for the probe timeout.
async fn discover_as<'a>(
    target: &Target,
    up: &'a AnyUpstream,
    id: i64,
    version: Revision,
) -> Asked<'a> {
    let mut capabilities = json!({});
    if let Some(ours) = client_extensions(target) {
        declare_extensions(&mut capabilities, &ours);
    }
    let params = json!({ "_meta": {
        meta::PROTOCOL_VERSION: version.as_str(),
        meta::CLIENT_CAPABILITIES: capabilities,
        meta::CLIENT_INFO: target.client_info,
    }});
    let mut answer = match ask(up, id, "server/discover", &params) {
        Ok(a) => a,
        Err(e) => return Asked::Answered(Err(e)),
    };
    match tokio::time::timeout(target.probe_timeout, &mut answer).await {
        Ok(outcome) => Asked::Answered(outcome),
        Err(_) => {
            tracing::debug!(
                upstream = %target.name,
                "no answer to server/discover within {:?}; still awaiting it",
                target.probe_timeout
            );
            Asked::Late(answer)
        }
    }
}

/// The modern facts a late `server/discover` answer gives, or `None` when it does not
/// show a modern server (a refusal among them: by then `initialize` is on its way, so
/// the version is not retried).
fn late_discovered(target: &Target, outcome: Result<Frame, Probe>) -> Option<ServerFacts> {
    if refused_version(&outcome).is_some() {
        tracing::debug!(upstream = %target.name, "server/discover refused the version, late");
        return None;
    }
    match discovered(target, outcome) {
        Ok(Discovered::Modern(facts)) => Some(facts),
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(upstream = %target.name, "server/discover, late: {e}");
            None
        }
    }
}

/// Waits for a late `server/discover` answer, up to the handshake timeout, where
/// nothing else is to be tried (a modern preference, or `initialize` already refused):
/// the modern facts it gives, or `None` when it does not show a modern server.
async fn settle(target: &Target, late: Answer<'_>) -> Result<Option<ServerFacts>, ClientError> {
    match tokio::time::timeout(target.handshake_timeout, late).await {
        Ok(outcome) => Ok(late_discovered(target, outcome)),
        Err(_) => Err(handshake_err(
            target,
            format!(
                "no answer to server/discover within {:?}",
                target.probe_timeout + target.handshake_timeout
            ),
        )),
    }
}

/// What a `server/discover` answer (other than a version refusal) says of the server.
fn discovered<'a>(
    target: &Target,
    outcome: Result<Frame, Probe>,
) -> Result<Discovered<'a>, ClientError> {
    match outcome {
        Ok(f) if f.kind() == Kind::Result => {
            let r: Value = f
                .result()
                .and_then(|r| serde_json::from_str(r).ok())
                .unwrap_or(Value::Null);
            let supported: Vec<&str> = r
                .get("supportedVersions")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let revision = supported
                .iter()
                .filter_map(|v| Revision::from_wire(v))
                .filter(|r| r.era() == Era::Modern)
                .max();
            match revision {
                Some(revision) => Ok(Discovered::Modern(ServerFacts {
                    era: Era::Modern,
                    revision,
                    capabilities: r.get("capabilities").cloned().unwrap_or(json!({})),
                    info: r
                        .pointer(&format!("/_meta/{}", meta::SERVER_INFO.replace('/', "~1")))
                        .cloned()
                        .unwrap_or(Value::Null),
                    instructions: r
                        .get("instructions")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                })),
                None if supported.is_empty() => Ok(Discovered::Legacy),
                None => Err(handshake_err(
                    target,
                    format!(
                        "the server supports {} and mcpx supports {} (modern) and the legacy revisions",
                        supported.join(", "),
                        Revision::NEWEST
                    ),
                )),
            }
        }
        // Any other error: legacy (2026-07-28 basic/versioning: "Do not key on one
        // error code"). No answer at all is a late answer (`discover_as`); here it is
        // one that never came.
        Ok(_) | Err(Probe::Timeout) => Ok(Discovered::Legacy),
        Err(Probe::Transport(e)) if e.is_recognised_modern_error() => {
            Ok(Discovered::Modern(ServerFacts {
                era: Era::Modern,
                revision: Revision::NEWEST,
                capabilities: json!({}),
                info: Value::Null,
                instructions: None,
            }))
        }
        Err(Probe::Transport(e)) => match e.http_status() {
            Some(401 | 403) => Err(transport_err(target, e)),
            Some(s) if (400..500).contains(&s) => Ok(Discovered::Legacy),
            _ => Err(transport_err(target, e)),
        },
        Err(Probe::Fatal(m)) => Err(handshake_err(target, m)),
    }
}

/// Runs the legacy handshake on `up`. `Ok(None)` means the transport refused the POST in
/// a way that calls for the HTTP+SSE fallback.
async fn initialize(
    target: &Target,
    up: &AnyUpstream,
    id: i64,
) -> Result<Option<ServerFacts>, ClientError> {
    let facts = initialize_answer(target, up, id).await?;
    if facts.is_some() {
        initialized(target, up).await?;
    }
    Ok(facts)
}

/// Sends `notifications/initialized`, which ends the legacy handshake.
async fn initialized(target: &Target, up: &AnyUpstream) -> Result<(), ClientError> {
    up.send(Frame::notification("notifications/initialized", None))
        .await
        .map_err(|e| transport_err(target, e))
}

/// `initialize` and what its answer says, without `notifications/initialized`: when
/// `server/discover` may still answer, the handshake is ended only once legacy won.
async fn initialize_answer(
    target: &Target,
    up: &AnyUpstream,
    id: i64,
) -> Result<Option<ServerFacts>, ClientError> {
    let params = json!({
        "protocolVersion": Revision::NEWEST_LEGACY.as_str(),
        "capabilities": target.legacy_capabilities,
        "clientInfo": target.client_info,
    });
    let f = match exchange(up, id, "initialize", &params, target.handshake_timeout).await {
        Ok(f) => f,
        Err(Probe::Timeout) => {
            return Err(handshake_err(
                target,
                format!(
                    "no answer to initialize within {:?}",
                    target.handshake_timeout
                ),
            ));
        }
        Err(Probe::Transport(e)) if matches!(e.http_status(), Some(400 | 404 | 405)) => {
            return Ok(None);
        }
        Err(Probe::Transport(e)) => return Err(transport_err(target, e)),
        Err(Probe::Fatal(m)) => return Err(handshake_err(target, m)),
    };
    if let Some(e) = f.error() {
        return Err(handshake_err(
            target,
            format!("initialize was refused: error {}: {}", e.code, e.message),
        ));
    }
    let r: Value = f
        .result()
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or(Value::Null);
    let offered = r
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(revision) = Revision::from_wire(offered).filter(|r| r.era() == Era::Legacy) else {
        // A-C6: the schema's MUST: disconnect when the offered version is unsupported.
        return Err(handshake_err(
            target,
            format!(
                "the server offered protocol version {offered:?}; mcpx supports {}",
                Revision::wire_names_newest_first().join(", ")
            ),
        ));
    };
    Ok(Some(ServerFacts {
        era: Era::Legacy,
        revision,
        capabilities: r.get("capabilities").cloned().unwrap_or(json!({})),
        info: r.get("serverInfo").cloned().unwrap_or(Value::Null),
        instructions: r
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }))
}

/// Legacy over `up`, or, on HTTP, over HTTP+SSE when the POST was refused.
async fn legacy(
    target: &Target,
    up: AnyUpstream,
    rx: Unsolicited,
    id: i64,
) -> Result<(AnyUpstream, Unsolicited, ServerFacts), ClientError> {
    let answer = initialize(target, &up, id).await?;
    legacy_after(target, up, rx, id, answer).await
}

/// Legacy over `up`, `initialize` having been answered (`answer`, with the handshake
/// ended), or, on HTTP, over HTTP+SSE when the POST was refused (`None`).
async fn legacy_after(
    target: &Target,
    up: AnyUpstream,
    rx: Unsolicited,
    id: i64,
    answer: Option<ServerFacts>,
) -> Result<(AnyUpstream, Unsolicited, ServerFacts), ClientError> {
    if let Some(facts) = answer {
        if let AnyUpstream::Http(h) = &up {
            // The session's GET stream carries server notifications and requests.
            if let Err(e) = h.open_server_stream().await {
                tracing::debug!(upstream = %target.name, "no GET stream: {e}");
            }
        }
        return Ok((up, rx, facts));
    }
    let TargetTransport::Http { url, headers } = &target.transport else {
        return Err(handshake_err(
            target,
            "initialize was refused by the transport",
        ));
    };
    // B-C9: the 2024-11-05 HTTP+SSE transport at the same URL is the last fallback.
    tracing::info!(upstream = %target.name, "Streamable HTTP refused initialize; trying HTTP+SSE");
    up.close().await;
    let (sse, rx) = open_sse(target, url, headers).await?;
    match initialize(target, &sse, id + 1).await? {
        Some(facts) => Ok((sse, rx, facts)),
        None => Err(handshake_err(
            target,
            "neither Streamable HTTP nor HTTP+SSE accepted initialize",
        )),
    }
}

/// How a start that outlived the probe's wait ended.
enum Raced {
    /// The late `DiscoverResult` came first.
    Modern(ServerFacts),
    /// `initialize` was accepted (the handshake not yet ended), or, `None`, refused by
    /// the transport in a way that calls for the HTTP+SSE fallback; `server/discover`
    /// gave nothing conclusive.
    Legacy(Option<ServerFacts>),
}

/// The probe's wait passed with `late`, the `server/discover` answer, still awaited:
/// `initialize` (id `id`) goes out on the same connection, and the first conclusive
/// answer decides. A modern `DiscoverResult` wins outright: the `initialize` answer,
/// whatever it is, is then ignored, and nothing more is sent for it. A successful
/// `InitializeResult` means legacy. An `initialize` error (a modern-only server's
/// -32022, say) does not end the start: the discover answer is awaited until the
/// handshake timeout, and only then is that error the start's.
async fn race(
    target: &Target,
    up: &AnyUpstream,
    late: Answer<'_>,
    id: i64,
) -> Result<Raced, ClientError> {
    let deadline = tokio::time::Instant::now() + target.handshake_timeout;
    let init = initialize_answer(target, up, id);
    tokio::pin!(init);
    let mut late = Some(late);
    let mut init_done = false;
    // An inconclusive `initialize` outcome, held while discover may still answer.
    let mut held: Option<Result<Option<ServerFacts>, ClientError>> = None;
    loop {
        tokio::select! {
            // Both answers at hand: the modern one wins, as it would have in time.
            biased;
            outcome = awaited(&mut late) => {
                late = None;
                if let Some(facts) = late_discovered(target, outcome) {
                    tracing::info!(
                        upstream = %target.name,
                        "server/discover answered late: a modern server"
                    );
                    return Ok(Raced::Modern(facts));
                }
                if let Some(r) = held.take() {
                    return r.map(Raced::Legacy);
                }
            }
            answer = &mut init, if !init_done => {
                init_done = true;
                match answer {
                    Ok(Some(facts)) => return Ok(Raced::Legacy(Some(facts))),
                    other if late.is_none() => return other.map(Raced::Legacy),
                    other => held = Some(other),
                }
            }
            () = tokio::time::sleep_until(deadline), if late.is_some() => {
                late = None;
                if let Some(r) = held.take() {
                    return r.map(Raced::Legacy).map_err(|e| no_discover_either(target, e));
                }
            }
        }
    }
}

/// The late discover answer, or never when there is none to await.
async fn awaited(late: &mut Option<Answer<'_>>) -> Result<Frame, Probe> {
    match late {
        Some(answer) => answer.await,
        None => std::future::pending().await,
    }
}

/// `initialize` was refused, and `server/discover` never answered either: the refusal,
/// saying so.
fn no_discover_either(target: &Target, e: ClientError) -> ClientError {
    match e {
        ClientError::Handshake { message, .. } => handshake_err(
            target,
            format!(
                "{message}, and server/discover had no answer within {:?}",
                target.probe_timeout + target.handshake_timeout
            ),
        ),
        other => other,
    }
}

/// Connects to `target`, finding its era.
pub async fn connect(target: &Target, cache: &EraCache) -> Result<Connection, ClientError> {
    let mut moved: Option<Target> = None;
    for _ in 0..=MAX_REDIRECTS {
        let now = moved.as_ref().unwrap_or(target);
        match connect_to(now, cache).await {
            Err(ClientError::Transport {
                source: TransportError::Redirected { status, location },
                ..
            }) if matches!(status, 307 | 308) => {
                moved = Some(redirected(now, status, &location)?);
            }
            other => return other,
        }
    }
    Err(handshake_err(
        target,
        format!("more than {MAX_REDIRECTS} redirections"),
    ))
}

/// The most redirections [`connect`] follows.
const MAX_REDIRECTS: usize = 5;

/// `target` moved to `location` (a 307 or 308, which keep the request's method and
/// body, RFC 9110 §15.4.8, §15.4.9): the same target at the new URL, within the same
/// origin (an `http://` endpoint may move to `https://` on the same host), so that the
/// configured headers, credentials among them, go nowhere they were not meant for.
fn redirected(target: &Target, status: u16, location: &str) -> Result<Target, ClientError> {
    let (TargetTransport::Http { url, .. } | TargetTransport::Sse { url, .. }) = &target.transport
    else {
        return Err(handshake_err(target, "a redirection outside HTTP"));
    };
    let from = url::Url::parse(url).map_err(|e| handshake_err(target, e.to_string()))?;
    let to = from
        .join(location)
        .map_err(|e| handshake_err(target, format!("HTTP {status} to {location:?}: {e}")))?;
    let same_host = from.host_str() == to.host_str();
    let upgrade = from.scheme() == "http" && to.scheme() == "https" && same_host;
    if to.origin() != from.origin() && !upgrade {
        return Err(handshake_err(
            target,
            format!(
                "HTTP {status}: the upstream moved to {to}, another origin; mcpx follows a redirection only within the endpoint's origin (its headers would go elsewhere): configure that URL if it is the upstream"
            ),
        ));
    }
    tracing::info!(upstream = %target.name, "HTTP {status}: {from} moved to {to}; using it");
    let mut moved = target.clone();
    match &mut moved.transport {
        TargetTransport::Http { url, .. } | TargetTransport::Sse { url, .. } => {
            *url = to.to_string();
        }
        TargetTransport::Stdio { .. } | TargetTransport::Stream(_) => {}
    }
    Ok(moved)
}

/// [`connect`] without following redirections.
async fn connect_to(target: &Target, cache: &EraCache) -> Result<Connection, ClientError> {
    let identity = target.transport.identity();
    let cached = cache.get(&identity).map(|(era, _)| era);
    let first = match (target.preference, cached) {
        (ProtocolPreference::Modern, _) => Era::Modern,
        (ProtocolPreference::Legacy, _) => Era::Legacy,
        (_, Some(era)) => era,
        (ProtocolPreference::PreferModern, None) => Era::Modern,
        (ProtocolPreference::PreferLegacy, None) => Era::Legacy,
    };
    let attempt = try_era(target, first).await;
    let (up, rx, facts, decided_by) = match attempt {
        Ok(x) => x,
        Err(e)
            if cached.is_some()
                && !says_nothing_of_the_era(&e)
                && !matches!(
                    target.preference,
                    ProtocolPreference::Modern | ProtocolPreference::Legacy
                ) =>
        {
            // The cached era failed: forget it and probe afresh, the other era first.
            tracing::info!(upstream = %target.name, "cached era failed ({e}); probing again");
            cache.forget(&identity);
            let other = if first == Era::Modern {
                Era::Legacy
            } else {
                Era::Modern
            };
            try_era(target, other).await?
        }
        Err(e) => return Err(e),
    };
    match decided_by {
        Some(by) => cache.put(&identity, facts.era, facts.revision, by, Some(&facts)),
        None => tracing::debug!(
            upstream = %target.name,
            "legacy after a probe timeout: not remembered, the next start probes again"
        ),
    }
    Ok(Connection::new(target, up, rx, facts))
}

/// Whether `e` ended a start without the server saying anything of its era: the
/// process could not be started or exited, or the connection could not be made or
/// closed. Trying the other era then would only start the process again at once;
/// the next start is the caller's to decide (the gateway's supervisor backs off).
fn says_nothing_of_the_era(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Transport {
            source: TransportError::Closed { .. }
                | TransportError::Spawn { .. }
                | TransportError::Io(_),
            ..
        }
    )
}

/// A connection, its era and what established it (`None`: a legacy era that only
/// followed a probe timeout, not to be remembered).
type Connected = (AnyUpstream, Unsolicited, ServerFacts, Option<DecidedBy>);

/// What the probe of a connection found, its borrow of the connection ended.
enum Found {
    Modern(ServerFacts),
    /// `server/discover` was answered, not as a modern server.
    Legacy,
    /// Legacy after a probe timeout: the race's `initialize` outcome (see [`Raced`]).
    LegacyAfterTimeout(Option<ServerFacts>),
}

/// Opens the transport and tries `era` first; under a "prefer" preference the other
/// era follows when the probe says so.
async fn try_era(target: &Target, era: Era) -> Result<Connected, ClientError> {
    let (up, rx) = open(target).await?;
    match era {
        Era::Modern => {
            let mut ids = 1;
            let found = match discover(target, &up, &mut ids).await? {
                Discovered::Modern(facts) => Found::Modern(facts),
                Discovered::Legacy => Found::Legacy,
                // Only discover is to be tried: its answer is awaited the longer.
                Discovered::Late(late) if target.preference == ProtocolPreference::Modern => {
                    match settle(target, late).await? {
                        Some(facts) => Found::Modern(facts),
                        None => Found::Legacy,
                    }
                }
                Discovered::Late(late) => match race(target, &up, late, ids).await? {
                    Raced::Modern(facts) => Found::Modern(facts),
                    Raced::Legacy(answer) => Found::LegacyAfterTimeout(answer),
                },
            };
            match found {
                Found::Modern(facts) => Ok((up, rx, facts, Some(DecidedBy::Discover))),
                Found::Legacy if target.preference == ProtocolPreference::Modern => {
                    up.close().await;
                    Err(handshake_err(
                        target,
                        "the server is not a modern (2026-07-28) server, and protocol is \"modern\"",
                    ))
                }
                Found::Legacy => legacy(target, up, rx, ids)
                    .await
                    .map(|(up, rx, facts)| (up, rx, facts, Some(DecidedBy::Discover))),
                Found::LegacyAfterTimeout(answer) => {
                    if answer.is_some() {
                        initialized(target, &up).await?;
                    }
                    // Legacy, but only because discover was late: not remembered.
                    legacy_after(target, up, rx, ids, answer)
                        .await
                        .map(|(up, rx, facts)| (up, rx, facts, None))
                }
            }
        }
        Era::Legacy => match legacy(target, up, rx, 1).await {
            Ok((up, rx, facts)) => Ok((up, rx, facts, Some(DecidedBy::Initialize))),
            Err(e)
                if target.preference == ProtocolPreference::Legacy
                    || says_nothing_of_the_era(&e) =>
            {
                Err(e)
            }
            Err(_) => {
                // Legacy tried first, but not required (prefer-legacy, or a legacy
                // era cached): initialize was refused, as a modern-only server does.
                let (up, rx) = open(target).await?;
                let found = match discover(target, &up, &mut 1).await? {
                    Discovered::Modern(facts) => Some(facts),
                    Discovered::Legacy => None,
                    // initialize was refused already: only discover is left to wait for.
                    Discovered::Late(late) => settle(target, late).await?,
                };
                match found {
                    Some(facts) => Ok((up, rx, facts, Some(DecidedBy::Discover))),
                    None => {
                        up.close().await;
                        Err(handshake_err(
                            target,
                            "the server accepted neither initialize nor server/discover",
                        ))
                    }
                }
            }
        },
    }
}

/// Runs the legacy handshake again on a connection whose session expired (H10).
pub(crate) async fn reinitialise(conn: &Connection) -> Result<(), ClientError> {
    let inner = &conn.inner;
    let target = Target {
        legacy_capabilities: inner.legacy_capabilities.clone(),
        client_info: inner.client_info.clone(),
        ..Target::new(
            inner.name.clone(),
            TargetTransport::Stdio {
                command: String::new(),
                args: Vec::new(),
                env: Vec::new(),
                cwd: None,
            },
        )
    };
    tracing::info!(upstream = %inner.name, "session expired; initialising again");
    // A new session, but the same connection: its id comes from the connection's
    // counter like every other (register A-C2).
    match initialize(&target, &inner.up, conn.next_id()).await? {
        Some(facts) => {
            *inner.facts.lock() = std::sync::Arc::new(facts);
            Ok(())
        }
        None => Err(handshake_err(
            &target,
            "the server refused to initialise a new session",
        )),
    }
}

/// Reads `params.protocolVersion` of an initialize request (for tests and logs).
pub fn requested_version(frame: &Frame) -> Option<String> {
    frame
        .params()
        .and_then(|p| member(p, "protocolVersion"))
        .and_then(|v| serde_json::from_str(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stdio target running `script` under `sh`, with a short probe timeout.
    fn target(script: &str) -> Target {
        let mut t = Target::new(
            "up",
            TargetTransport::Stdio {
                command: "sh".to_owned(),
                args: vec!["-c".to_owned(), script.to_owned()],
                env: Vec::new(),
                cwd: None,
            },
        );
        t.probe_timeout = Duration::from_millis(100);
        t.handshake_timeout = Duration::from_secs(20);
        t
    }

    /// A script that logs every line it reads to `log`; `cases` answers them (`$id` is
    /// the request's id).
    fn script(log: &std::path::Path, cases: &str) -> String {
        format!(
            r#"while IFS= read -r line; do
  printf '%s\n' "$line" >> '{}'
  id=$(printf '%s' "$line" | grep -o '"id":[0-9][0-9]*' | head -n 1 | cut -d: -f2)
  case "$line" in
{cases}
  esac
done
"#,
            log.display()
        )
    }

    const DISCOVER_RESULT: &str = r#"{"jsonrpc":"2.0","id":'"$d"',"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private","resultType":"complete"}}"#;

    /// A legacy era concluded only because `server/discover` had no answer within the
    /// probe's wait is used, but not remembered: the next start probes again.
    #[tokio::test]
    async fn a_legacy_era_after_a_probe_timeout_is_not_cached() {
        let d = mcpx_testkit::scratch::dir("probe-timeout-legacy");
        let log = d.join("log");
        let t = target(&script(
            &log,
            r#"    *'"method":"initialize"'*)
      printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}}' ;;"#,
        ));
        let cache = EraCache::at(d.join("eras.json"));
        let conn = connect(&t, &cache).await.unwrap();
        assert_eq!(conn.facts().era, Era::Legacy);
        assert_eq!(conn.facts().revision, Revision::V2025_11_25);
        conn.close().await;
        assert_eq!(cache.get(&t.transport.identity()), None);
        assert!(!d.join("eras.json").exists(), "nothing was written");
        let sent = std::fs::read_to_string(&log).unwrap();
        assert!(sent.contains("\"notifications/initialized\""), "{sent}");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A modern server whose `server/discover` answer comes after the probe's wait, and
    /// after it refused `initialize` (-32022), is modern: the refusal does not end the
    /// start, nothing more is sent for `initialize`, and the era is remembered. The
    /// script answers discover only once `initialize` came, so its answer is late
    /// whatever the machine's speed.
    #[tokio::test]
    async fn a_late_discover_answer_wins_over_a_refused_initialize() {
        let d = mcpx_testkit::scratch::dir("probe-late-modern");
        let log = d.join("log");
        let t = target(&script(
            &log,
            &format!(
                r#"    *'"method":"server/discover"'*) d=$id ;;
    *'"method":"initialize"'*)
      printf '%s\n' '{{"jsonrpc":"2.0","id":'"$id"',"error":{{"code":-32022,"message":"Unsupported protocol version","data":{{"supported":["2026-07-28"],"requested":"2025-11-25"}}}}}}'
      printf '%s\n' '{DISCOVER_RESULT}' ;;"#
            ),
        ));
        let cache = EraCache::at(d.join("eras.json"));
        let conn = connect(&t, &cache).await.unwrap();
        assert_eq!(conn.facts().era, Era::Modern);
        assert_eq!(conn.facts().revision, Revision::NEWEST);
        conn.close().await;
        assert_eq!(
            cache.get(&t.transport.identity()),
            Some((Era::Modern, Revision::NEWEST))
        );
        let text = std::fs::read_to_string(d.join("eras.json")).unwrap();
        assert!(text.contains(r#""decidedBy": "discover""#), "{text}");
        let sent = std::fs::read_to_string(&log).unwrap();
        let methods: Vec<String> = sent
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["method"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(methods[..2], ["server/discover", "initialize"], "{sent}");
        assert!(
            !methods.iter().any(|m| m == "notifications/initialized"),
            "{sent}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Entries written before mcpx recorded what decided them: a legacy one may be a
    /// timeout's fallback and is not trusted; a modern one only ever came from a
    /// `DiscoverResult` and is.
    #[test]
    fn an_old_legacy_entry_is_not_trusted() {
        let d = mcpx_testkit::scratch::dir("era-cache-old");
        let path = d.join("eras.json");
        std::fs::write(
            &path,
            r#"{"stdio:old-legacy": {"era": "legacy", "revision": "2025-11-25"},
                "stdio:old-modern": {"era": "modern", "revision": "2026-07-28"},
                "stdio:new-legacy": {"era": "legacy", "revision": "2025-06-18", "decidedBy": "discover"}}"#,
        )
        .unwrap();
        let cache = EraCache::at(path);
        assert_eq!(cache.get("stdio:old-legacy"), None);
        assert_eq!(
            cache.get("stdio:old-modern"),
            Some((Era::Modern, Revision::V2026_07_28))
        );
        assert_eq!(
            cache.get("stdio:new-legacy"),
            Some((Era::Legacy, Revision::V2025_06_18))
        );
        // A handshake's answer replaces the untrusted entry.
        cache.put(
            "stdio:old-legacy",
            Era::Modern,
            Revision::V2026_07_28,
            DecidedBy::Discover,
            None,
        );
        assert_eq!(
            cache.get("stdio:old-legacy"),
            Some((Era::Modern, Revision::V2026_07_28))
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
