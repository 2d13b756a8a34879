//! One live connection to an upstream, in the era and revision the handshake found.
//!
//! [`Connection::call`] sends a request written the way the upstream's revision wants
//! it (modern: the `_meta` envelope on every request; legacy: the session's
//! conventions), relays what belongs to the request back to the caller as
//! [`CallEvent`]s (progress, logs, and the upstream's requests to the client), and
//! returns the response. Progress resets the call's timeout; a hard limit bounds it
//! anyway. Cancelling follows the upstream's era and transport: `notifications/cancelled`
//! on stdio and legacy HTTP, closing the stream on modern Streamable HTTP (register
//! C-C3). A legacy session that expired (HTTP 404) is re-initialised and the request
//! retried once (H10); a modern request whose stream broke is re-issued with a new id
//! only when that is safe (B-C10).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use mcpx_protocol::jsonrpc::Kind;
use mcpx_protocol::params::MetaMembers;
use mcpx_protocol::trace::{self, TraceContext};
use mcpx_protocol::{Era, Frame, Id, Params, Revision, SpecPolicy, meta};
use mcpx_transport::TransportError;
use mcpx_transport::channel_pool::ChannelPool;
use mcpx_transport::upstream::{Exchange, Unsolicited, Upstream};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::any::AnyUpstream;
use crate::error::{AskRefusal, ClientError};

/// How long a response waits for the dispatcher to route the frames that came before
/// it (see `Connection::drive`); normally it has already.
const DISPATCH_CATCH_UP: Duration = Duration::from_millis(100);

/// The 2026-07-28 `_meta` keys of a request's envelope.
const ENVELOPE_KEYS: [&str; 4] = [
    meta::PROTOCOL_VERSION,
    meta::CLIENT_CAPABILITIES,
    meta::CLIENT_INFO,
    meta::LOG_LEVEL,
];

/// Whether a caller's `_meta` member `key` gives way to mcpx's, since mcpx writes the
/// upstream's envelope: its progress token always, its 2026-07-28 envelope keys when
/// they are one (`envelope_keys`: a modern host's request, or a modern upstream), and
/// any key mcpx writes itself (`written`). A legacy host's keys of the envelope's names
/// are its own data and pass (register A-C9). The one statement of the rule, for the
/// spliced path (`Params::with_meta`) and the general one alike.
fn gives_way(key: &str, envelope_keys: bool, written: &[&str]) -> bool {
    key == meta::PROGRESS_TOKEN
        || (envelope_keys && ENVELOPE_KEYS.contains(&key))
        || written.contains(&key)
}

/// A modern envelope's members, with the revision and client capabilities they were
/// written for (see `envelope_cache`).
type CachedEnvelope = (Revision, Arc<Value>, Arc<MetaMembers>);

/// The `_meta` members mcpx writes on a request (as JSON members' text), and their keys
/// (see `Connection::envelope_text`).
type Envelope = (Arc<MetaMembers>, Cow<'static, [&'static str]>);
/// How mcpx's refusal of an upstream's question that no host request can answer ends
/// (a `roots/list` at start-up, say). An upstream that logs the refusal repeats it on
/// its stderr, which is mcpx's, not the upstream's, failure to report.
pub const NOWHERE_TO_ASK: &str = "no host request can answer it";

/// What the handshake learnt about the upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerFacts {
    /// The era.
    pub era: Era,
    /// The revision spoken.
    pub revision: Revision,
    /// `ServerCapabilities`.
    pub capabilities: Value,
    /// The server's `Implementation`, if it said.
    pub info: Value,
    /// Instructions for the model, if any.
    pub instructions: Option<String>,
}

impl ServerFacts {
    /// Whether the upstream declared capability `name` (e.g. `"tools"`).
    pub fn has(&self, name: &str) -> bool {
        self.capabilities.get(name).is_some_and(|v| !v.is_null())
    }
}

/// Something that happened while a call was in flight, for the caller to relay.
#[derive(Debug)]
pub enum CallEvent {
    /// `notifications/progress` for this call.
    Progress {
        /// Progress so far.
        progress: f64,
        /// Total, if known.
        total: Option<f64>,
        /// Message, if any.
        message: Option<String>,
    },
    /// `notifications/message` for this call.
    Log {
        /// The level (wire name).
        level: String,
        /// The logger, if named.
        logger: Option<String>,
        /// The payload.
        data: Value,
    },
    /// The upstream asks the client something (sampling, elicitation, roots): answer
    /// through `reply` with the result, or an error object.
    Ask {
        /// The method.
        method: String,
        /// Its params.
        params: Option<Value>,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<Value, AskRefusal>>,
    },
}

/// How to make one call.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// Where [`CallEvent`]s go; `None` when the caller wants none (then asks are refused).
    ///
    /// Boxed: a channel allocates its first block of 32 slots when made, and a call
    /// makes one; 32 boxes fit glibc's per-thread cache where 32 events (80 bytes
    /// each) did not, and most calls send no event at all.
    pub events: Option<mpsc::Sender<Box<CallEvent>>>,
    /// Ask the upstream for progress (a `progressToken` of mcpx's own).
    pub progress: bool,
    /// The log level to request from a modern upstream (`_meta` logLevel).
    pub log_level: Option<String>,
    /// The client capabilities declared on a modern request (shared with the caller's
    /// own request, which usually declared them).
    pub client_capabilities: Arc<Value>,
    /// How long to wait without news; progress restarts it.
    pub timeout: Duration,
    /// How long to wait at most, whatever progress comes.
    pub max_time: Duration,
    /// Fires when the caller cancels.
    pub cancel: CancellationToken,
    /// Safe to re-issue if a modern stream breaks (B-C10).
    pub idempotent: bool,
    /// Whether log messages and requests that the transport cannot tie to a request
    /// (stdio) may be attributed to this call when it is the only such call in flight.
    /// Off for long-lived calls such as `subscriptions/listen`.
    pub attribute_unsolicited: bool,
    /// Whether the caller's `io.modelcontextprotocol/*` `_meta` keys are a 2026-07-28
    /// envelope (a modern host's request), removed before a legacy upstream sees them.
    /// `false` for a 2025-06-18-or-earlier host, whose such keys are its own opaque data
    /// and reach a legacy upstream unchanged (register A-C9). A modern upstream never
    /// gets the caller's envelope keys: mcpx writes its own.
    pub caller_meta_is_envelope: bool,
    /// The trace context to carry upstream: `_meta` `traceparent` and `tracestate` on
    /// every revision (replacing the caller's own), and on HTTP the headers of those
    /// names as well (register A-C9).
    pub trace: Option<Arc<TraceContext>>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            events: None,
            progress: false,
            log_level: None,
            client_capabilities: Arc::new(json!({})),
            timeout: Duration::from_secs(60),
            max_time: Duration::from_secs(600),
            cancel: CancellationToken::new(),
            idempotent: false,
            attribute_unsolicited: true,
            caller_meta_is_envelope: true,
            trace: None,
        }
    }
}

/// Methods whose re-issue is always safe: they only read (B-C10: every `*/list`,
/// `*/read` and `*/get`, `server/discover`, `completion/complete`).
fn idempotent_method(method: &str) -> bool {
    matches!(method, "server/discover" | "completion/complete" | "ping")
        || method.ends_with("/list")
        || method.ends_with("/read")
        || method.ends_with("/get")
}

/// A result whose `resultType` makes it invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ResultTypeError {
    /// A task, on a request that did not declare the tasks extension.
    #[error(
        "the result has resultType \"task\", but mcpx did not declare the io.modelcontextprotocol/tasks extension on that request"
    )]
    UndeclaredTask,
    /// A value not known (its JSON text).
    #[error(
        "the result has resultType {0}, which mcpx does not recognise (2026-07-28 basic/index: such a result is invalid)"
    )]
    Unknown(String),
}

/// Checks a result's `resultType` (register A-C22). Absent means `"complete"` in every
/// case; `"complete"` and `"input_required"` are known; `"task"` only when the request
/// declared the tasks extension; any other value "MUST be considered invalid"
/// (2026-07-28 basic/index §resultType).
fn check_result_type(frame: &Frame, client_capabilities: &Value) -> Result<(), ResultTypeError> {
    // Where the decoder saw it: no walk over the result.
    let Some(raw) = frame.result_type() else {
        return Ok(());
    };
    // The common answers, as written without escapes: no parse, no capability lookup.
    if raw == "\"complete\"" || raw == "\"input_required\"" {
        return Ok(());
    }
    let tasks = client_capabilities
        .get("extensions")
        .and_then(|e| e.get(mcpx_protocol::method::TASKS_EXTENSION))
        .is_some();
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::String(t)) if t == "complete" || t == "input_required" => Ok(()),
        Ok(Value::String(t)) if t == "task" && tasks => Ok(()),
        Ok(Value::String(t)) if t == "task" => Err(ResultTypeError::UndeclaredTask),
        _ => Err(ResultTypeError::Unknown(raw.to_owned())),
    }
}

/// Frames the dispatcher routes to one call.
type CallRoute = mpsc::Sender<Frame>;

/// Every key here is one mcpx chose (its request ids and progress tokens; the upstream
/// only looks them up), so the maps use a fast hash: each call inserts and removes.
#[derive(Debug, Default)]
struct Routes {
    /// Our progress tokens, to the call that owns them.
    progress: HashMap<String, CallRoute, foldhash::fast::RandomState>,
    /// Calls in flight that unattributable frames may belong to, by request id.
    calls: HashMap<i64, CallRoute, foldhash::fast::RandomState>,
    /// Every call in flight, by request id (for a server-sent `notifications/cancelled`).
    by_id: HashMap<i64, CallRoute, foldhash::fast::RandomState>,
    /// The upstream's own tasks that mcpx is following, by the upstream's task id: where
    /// their asks go ([`Connection::route_task_asks`]).
    tasks: HashMap<String, mpsc::Sender<Box<CallEvent>>, foldhash::fast::RandomState>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) up: AnyUpstream,
    pub(crate) facts: Mutex<Arc<ServerFacts>>,
    next_id: AtomicI64,
    routes: Mutex<Routes>,
    pub(crate) policy: SpecPolicy,
    pub(crate) client_info: Value,
    changes: broadcast::Sender<Frame>,
    /// Re-runs the legacy handshake after a session expired.
    pub(crate) legacy_capabilities: Value,
    /// The last modern envelope written, as `_meta` members' text, with what it was
    /// written for (the revision and the client capabilities): a gateway's calls carry
    /// the same capabilities call after call, so the text is reused, not re-encoded.
    envelope_cache: Mutex<Option<CachedEnvelope>>,
    /// Extensions mcpx itself uses toward this upstream, declared in every modern
    /// request's `clientCapabilities.extensions` beside the caller's (the OAuth client
    /// credentials one, when configured), if any.
    client_extensions: Option<Map<String, Value>>,
    /// How many unsolicited frames the dispatcher has finished with (routed, answered
    /// or dropped), against the transport's `unsolicited_sent`: see `Connection::drive`.
    dispatched: watch::Sender<u64>,
    /// Each call's route (the frames the dispatcher routes to it), reused from call to
    /// call.
    route_channels: ChannelPool<Frame>,
    /// The upstream's requests put to a host and not yet answered, by the upstream's
    /// id: firing one withdraws that ask (the upstream cancelled it).
    open_asks: Mutex<HashMap<Id, oneshot::Sender<()>>>,
}

/// Capacity of a call's route channel.
const ROUTE_CAPACITY: usize = 64;
/// Route channels kept for reuse per connection: as many as calls in flight at once,
/// within reason (each is about 1.3 KiB).
const ROUTE_CHANNELS_KEPT: usize = 64;

/// A connection to one upstream.
#[derive(Debug, Clone)]
pub struct Connection {
    pub(crate) inner: Arc<Inner>,
}

impl Connection {
    /// A connection over `up`, whose handshake found `facts`. Request ids start above
    /// the handshake's.
    pub(crate) fn new(
        target: &crate::probe::Target,
        up: AnyUpstream,
        unsolicited: Unsolicited,
        facts: ServerFacts,
    ) -> Connection {
        let (changes, _) = broadcast::channel(256);
        let inner = Arc::new(Inner {
            name: target.name.clone(),
            up,
            facts: Mutex::new(Arc::new(facts)),
            next_id: AtomicI64::new(10),
            routes: Mutex::new(Routes::default()),
            policy: target.policy.clone(),
            client_info: target.client_info.clone(),
            changes,
            legacy_capabilities: target.legacy_capabilities.clone(),
            client_extensions: crate::probe::client_extensions(target),
            envelope_cache: Mutex::new(None),
            dispatched: watch::Sender::new(0),
            route_channels: ChannelPool::new(ROUTE_CAPACITY, ROUTE_CHANNELS_KEPT),
            open_asks: Mutex::new(HashMap::new()),
        });
        tokio::spawn(dispatch(Arc::downgrade(&inner), unsolicited));
        Connection { inner }
    }

    /// The upstream's configured name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// What the handshake learnt (shared: reading it is cheap, on every call).
    pub fn facts(&self) -> Arc<ServerFacts> {
        self.inner.facts.lock().clone()
    }

    /// Sends the upstream's asks that name its task `task` (related-task) to `events`,
    /// as [`CallEvent::Ask`]s, until the returned guard is dropped: a 2025-11-25 task
    /// asks on the session while it is `input_required` (basic/utilities/tasks §Input
    /// Required Status), on stdio and the legacy GET stream outside any call, so only
    /// its id ties the ask to whoever follows the task. (Asks on a call's own stream,
    /// such as `tasks/result`'s, are that call's, as ever.)
    pub fn route_task_asks(&self, task: &str, events: mpsc::Sender<Box<CallEvent>>) -> TaskAsks {
        self.inner
            .routes
            .lock()
            .tasks
            .insert(task.to_owned(), events);
        TaskAsks {
            inner: self.inner.clone(),
            task: task.to_owned(),
        }
    }

    /// Notifications that are about the upstream, not a request: list_changed,
    /// resources/updated. Each subscriber sees each one.
    pub fn changes(&self) -> broadcast::Receiver<Frame> {
        self.inner.changes.subscribe()
    }

    /// Registers the `x-mcp-header` annotations of an upstream tool, so that calls to it
    /// over Streamable HTTP mirror them into `Mcp-Param-*` headers (2026-07-28). A no-op
    /// on other transports.
    pub fn set_tool_param_headers(
        &self,
        tool: &str,
        headers: Vec<mcpx_protocol::header::ParamHeader>,
    ) {
        if let AnyUpstream::Http(h) = &self.inner.up {
            h.set_tool_param_headers(tool, headers);
        }
    }

    /// Whether the connection is known to be dead (a stdio upstream that exited), so
    /// that a caller can connect again before using it rather than fail a request on it.
    pub fn is_closed(&self) -> bool {
        self.inner.up.is_closed()
    }

    /// Resolves once the connection is known dead (a child that exited or whose
    /// stdout could no longer be framed, an HTTP+SSE stream that ended), with the
    /// error its calls fail with; never for Streamable HTTP, whose failures show on
    /// requests instead.
    pub fn closed(&self) -> impl Future<Output = ClientError> + Send + 'static {
        let closed = self.inner.up.closed();
        let upstream = self.inner.name.clone();
        async move {
            ClientError::Transport {
                upstream,
                source: closed.await,
            }
        }
    }

    /// Whether a stdio upstream's process exited with status 0.
    pub fn exited_cleanly(&self) -> bool {
        self.inner.up.exited_cleanly()
    }

    /// The child's process id, for a stdio upstream.
    pub fn pid(&self) -> Option<u32> {
        self.inner.up.pid()
    }

    /// The transport's name (stdio, Streamable HTTP, HTTP+SSE).
    pub fn transport_kind(&self) -> &'static str {
        self.inner.up.kind()
    }

    /// Closes the connection (a legacy HTTP session ends with DELETE; a child process
    /// is stopped).
    pub async fn close(&self) {
        self.inner.up.close().await;
    }

    /// The next request id. Ids come from one counter per connection and are never
    /// reused while it lives, in either era (register A-C2: the legacy rule, unique in
    /// the session, satisfies the 2026-07-28 one, unique among requests in flight, and a
    /// stale `subscriptionId` can then never name a newer listen).
    pub(crate) fn next_id(&self) -> i64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn transport_err(&self, source: TransportError) -> ClientError {
        let source = match (source, self.inner.up.stderr_tail()) {
            (TransportError::Closed { detail }, Some(tail)) if !detail.contains("stderr") => {
                TransportError::Closed {
                    detail: format!("{detail}; stderr: {tail}"),
                }
            }
            (s, _) => s,
        };
        if matches!(
            source,
            TransportError::Auth { .. } | TransportError::NeedsAuthorization(_)
        ) {
            return ClientError::Unauthorized {
                upstream: self.inner.name.clone(),
                source,
            };
        }
        ClientError::Transport {
            upstream: self.inner.name.clone(),
            source,
        }
    }

    /// The request frame for `method`, written for the upstream's revision.
    fn build(
        &self,
        id: i64,
        method: &str,
        params: Option<&Params>,
        opts: &CallOptions,
        progress_token: Option<&str>,
    ) -> Result<Frame, ClientError> {
        let facts = self.facts();
        if let Some(frame) = self.build_spliced(id, method, params, opts, progress_token, &facts) {
            return frame;
        }
        let mut obj: Map<String, Value> = match params {
            None => Map::new(),
            Some(p) => serde_json::from_str(p.as_str()).map_err(|e| ClientError::Protocol {
                upstream: self.inner.name.clone(),
                message: format!("params for {method} are not a JSON object: {e}"),
            })?,
        };
        let envelope = self.envelope_text(&facts, opts, progress_token);
        // The caller's own envelope (a host's 2026 `_meta` keys, its progress token)
        // means nothing upstream: mcpx writes the upstream's envelope itself.
        if let Some(Value::Object(m)) = obj.get_mut("_meta") {
            let envelope_keys = opts.caller_meta_is_envelope || facts.era == Era::Modern;
            let written: &[&str] = envelope.as_ref().map_or(&[], |(_, keys)| keys);
            m.retain(|k, _| !gives_way(k, envelope_keys, written));
            if m.is_empty() {
                obj.remove("_meta");
            }
        }
        // The general path is rare: the envelope's text is read back as members.
        let envelope = envelope.and_then(|(members, _)| {
            serde_json::from_str::<Map<String, Value>>(&format!("{{{}}}", members.as_str())).ok()
        });
        if let Some(envelope) = envelope {
            let m = obj
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(m) = m.as_object_mut() {
                m.extend(envelope);
            }
        }
        let raw = RawValue::from_string(Value::Object(obj).to_string()).map_err(|e| {
            ClientError::Protocol {
                upstream: self.inner.name.clone(),
                message: e.to_string(),
            }
        })?;
        Ok(Frame::request(&Id::Number(id), method, Some(&raw)))
    }

    /// The `_meta` members mcpx writes on a request to this upstream, with the keys it
    /// writes; `None` when there are none. A 2026-07-28 request without a log level or
    /// a progress token (most calls) gets the cached envelope itself, not a copy.
    fn envelope_text(
        &self,
        facts: &ServerFacts,
        opts: &CallOptions,
        progress_token: Option<&str>,
    ) -> Option<Envelope> {
        /// The keys of [`Connection::modern_envelope`]'s members.
        const MODERN_KEYS: [&str; 3] = [
            meta::PROTOCOL_VERSION,
            meta::CLIENT_CAPABILITIES,
            meta::CLIENT_INFO,
        ];
        if facts.era != Era::Modern && progress_token.is_none() && opts.trace.is_none() {
            return None;
        }
        let mut members = MetaMembers::default();
        // Made only past the cached envelope's early return (no allocation there).
        let mut keys = Vec::new();
        if facts.era == Era::Modern {
            // 2026-07-28 basic/index §_meta: required on every request (A-C12).
            let envelope = self.modern_envelope(facts.revision, &opts.client_capabilities);
            if opts.log_level.is_none() && progress_token.is_none() && opts.trace.is_none() {
                return Some((envelope, Cow::Borrowed(&MODERN_KEYS)));
            }
            keys.reserve(7);
            members.extend(&envelope);
            keys.extend(MODERN_KEYS);
            if let Some(l) = &opts.log_level {
                members.push(meta::LOG_LEVEL, &json!(l));
                keys.push(meta::LOG_LEVEL);
            }
        }
        if let Some(t) = progress_token {
            members.push(meta::PROGRESS_TOKEN, &json!(t));
            keys.push(meta::PROGRESS_TOKEN);
        }
        if let Some(t) = &opts.trace {
            members.push(trace::TRACEPARENT, &json!(t.traceparent()));
            keys.push(trace::TRACEPARENT);
            // The caller's `tracestate` goes with the caller's `traceparent`.
            keys.push(trace::TRACESTATE);
            if let Some(state) = &t.tracestate {
                members.push(trace::TRACESTATE, &json!(state));
            }
        }
        Some((Arc::new(members), Cow::Owned(keys)))
    }

    /// The protocol version, client capabilities and client info members of a modern
    /// envelope, encoded once per revision and capabilities (see `envelope_cache`).
    fn modern_envelope(&self, revision: Revision, capabilities: &Arc<Value>) -> Arc<MetaMembers> {
        let mut cache = self.inner.envelope_cache.lock();
        // The same capabilities come as the same `Arc` (a host's, shared from call to
        // call by the serve seam): compared by pointer before by value.
        if let Some((rev, caps, members)) = cache.as_ref()
            && *rev == revision
            && (Arc::ptr_eq(caps, capabilities) || caps == capabilities)
        {
            return Arc::clone(members);
        }
        let mut members = MetaMembers::default();
        members.push(meta::PROTOCOL_VERSION, &json!(revision.as_str()));
        match &self.inner.client_extensions {
            None => members.push(meta::CLIENT_CAPABILITIES, capabilities),
            // Merged here, on a cache miss only: the merged text is what is cached.
            Some(ours) => {
                let mut merged = capabilities.as_ref().clone();
                crate::probe::declare_extensions(&mut merged, ours);
                members.push(meta::CLIENT_CAPABILITIES, &merged);
            }
        }
        members.push(meta::CLIENT_INFO, &self.inner.client_info);
        let members = Arc::new(members);
        *cache = Some((revision, capabilities.clone(), Arc::clone(&members)));
        members
    }

    /// The common case of [`Connection::build`] without re-encoding the caller's params:
    /// an object without `_meta` is forwarded as it is, with mcpx's envelope (if any)
    /// appended; an object with one `_meta` object gets only that `_meta` rewritten (the
    /// caller's envelope keys replaced by mcpx's). `None` when the general path is
    /// needed (no envelope to write over a caller's `_meta`, a `_meta` that is not an
    /// object, appears twice or repeats a key, params that are not an object).
    ///
    /// The params are valid JSON ([`Params`]), and so is what `Params::with_meta` makes
    /// of them: the request is written without checking them again. Where the decoder
    /// saw the host's `_meta`, it is not looked for again either.
    fn build_spliced(
        &self,
        id: i64,
        method: &str,
        params: Option<&Params>,
        opts: &CallOptions,
        progress_token: Option<&str>,
        facts: &ServerFacts,
    ) -> Option<Result<Frame, ClientError>> {
        let envelope = self.envelope_text(facts, opts, progress_token);
        let empty;
        let params = match params {
            Some(p) => p,
            None => {
                empty = Params::empty();
                &empty
            }
        };
        if !params.is_object() {
            return None;
        }
        // The params to send: the caller's own when nothing is added to them.
        let sent = match (params.sole_member("_meta"), envelope) {
            (None, None) => Cow::Borrowed(params),
            // The caller's `_meta` (a host's 2026 envelope, its progress token) without
            // an envelope to write: the general path decides.
            (Some(_), None) => return None,
            // Its envelope keys give way to mcpx's, in place; the rest of the params
            // stays byte for byte.
            (_, Some((envelope, written))) => {
                let envelope_keys = opts.caller_meta_is_envelope || facts.era == Era::Modern;
                Cow::Owned(params.with_meta(|k| !gives_way(k, envelope_keys, &written), &envelope)?)
            }
        };
        Some(Ok(Frame::request_with_params(
            &Id::Number(id),
            method,
            Some(&sent),
        )))
    }

    /// Sends a notification (in the upstream's revision: `_meta` added on modern).
    pub async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), ClientError> {
        let raw = params
            .map(|p| RawValue::from_string(p.to_string()))
            .transpose()
            .map_err(|e| ClientError::Protocol {
                upstream: self.inner.name.clone(),
                message: e.to_string(),
            })?;
        self.inner
            .up
            .send(Frame::notification(method, raw.as_deref()))
            .await
            .map_err(|e| self.transport_err(e))
    }

    /// Calls `method` with raw JSON `params` (an object, or none) and returns the
    /// response frame: a result or an error response. Transport problems, timeouts and
    /// cancellation are `Err`.
    pub async fn call(
        &self,
        method: &str,
        params: Option<&Params>,
        opts: CallOptions,
    ) -> Result<Frame, ClientError> {
        let mut reissued = false;
        let mut reinitialised = false;
        loop {
            match self.call_once(method, params, &opts).await {
                Err(Attempt::SessionExpired) if !reinitialised => {
                    // H10, B-C7: "MUST start a new session": initialise again, retry once.
                    reinitialised = true;
                    Box::pin(crate::probe::reinitialise(self)).await?;
                }
                Err(Attempt::StreamBroke(e)) if !reissued => {
                    let modern = self.facts().era == Era::Modern;
                    if modern && (opts.idempotent || idempotent_method(method)) {
                        // 2026-07-28 changelog: re-issue "as a new request with a new
                        // request ID" (B-C10), only where that is safe.
                        reissued = true;
                        tracing::info!(upstream = %self.inner.name, method, "re-issuing after a broken stream");
                        continue;
                    }
                    if modern {
                        return Err(ClientError::ResultUnknown {
                            upstream: self.inner.name.clone(),
                            method: method.to_owned(),
                        });
                    }
                    return Err(self.transport_err(e));
                }
                Err(Attempt::SessionExpired) => {
                    return Err(self.transport_err(TransportError::SessionExpired));
                }
                Err(Attempt::StreamBroke(e)) => return Err(self.transport_err(e)),
                Err(Attempt::Failed(e)) => return Err(e),
                Ok(frame) => {
                    if let Err(message) = check_result_type(&frame, &opts.client_capabilities) {
                        tracing::warn!(upstream = %self.inner.name, method, "invalid result: {message}");
                        return Err(ClientError::Protocol {
                            upstream: self.inner.name.clone(),
                            message: format!("{method}: {message}"),
                        });
                    }
                    return Ok(frame);
                }
            }
        }
    }

    async fn call_once(
        &self,
        method: &str,
        params: Option<&Params>,
        opts: &CallOptions,
    ) -> Result<Frame, Attempt> {
        let id = self.next_id();
        if opts.trace.is_some() {
            // The upstream leg's span (the caller's), when traces are on.
            tracing::Span::current().record("jsonrpc.request.id", id);
        }
        let token = opts
            .progress
            .then(|| format!("mcpx-{}-{id}", self.inner.name));
        let frame = self
            .build(id, method, params, opts, token.as_deref())
            .map_err(Attempt::Failed)?;
        let (route_tx, mut route_rx) = self.inner.route_channels.take();
        {
            let mut routes = self.inner.routes.lock();
            if opts.attribute_unsolicited {
                routes.calls.insert(id, route_tx.clone());
            }
            routes.by_id.insert(id, route_tx.clone());
            if let Some(t) = &token {
                routes.progress.insert(t.clone(), route_tx.clone());
            }
        }
        let cleanup = RouteGuard {
            inner: self.inner.clone(),
            id,
            token: token.clone(),
        };
        // One timer for the whole call, reset by progress in `drive`. (The wait for an
        // HTTP upstream's response headers has the transport's own timer, which is
        // the upstream's call timeout: see `probe::open`.)
        let start = Instant::now();
        let timer = tokio::time::sleep_until((start + opts.timeout).min(start + opts.max_time));
        tokio::pin!(timer);
        // And one wait for the host's cancellation (a future that registers with the
        // token once, however often it is polled).
        let cancelled = opts.cancel.cancelled();
        tokio::pin!(cancelled);
        let sent = self.inner.up.request(frame).await;
        let exchange = match sent {
            Ok(x) => x,
            Err(TransportError::SessionExpired) => return Err(Attempt::SessionExpired),
            // An HTTP upstream that withheld its response headers for the whole call
            // timeout: the request is gone with the connection (a 2026-07-28 one's
            // cancellation), and a legacy upstream is told.
            Err(TransportError::Timeout(after)) if self.inner.up.is_streamable_http() => {
                Box::pin(self.cancel(id, "timed out")).await;
                return Err(Attempt::Failed(ClientError::Timeout {
                    upstream: self.inner.name.clone(),
                    method: method.to_owned(),
                    after,
                }));
            }
            Err(e @ TransportError::Closed { .. }) => return Err(Attempt::StreamBroke(e)),
            // 2026-07-28 Streamable HTTP ties some JSON-RPC errors to 4xx statuses
            // (-32020..-32022 and a malformed request's -32602 are 400, -32601 is 404):
            // such a body is the request's answer, not a transport failure.
            Err(TransportError::Http {
                body,
                code: Some(_),
                ..
            }) if self.facts().era == Era::Modern => {
                match mcpx_protocol::codec::parse_frame(body, &mcpx_protocol::Limits::default()) {
                    Ok(f) if f.kind() == Kind::Error => return Ok(f.with_id(&Id::Number(id))),
                    Ok(_) | Err(_) => {
                        return Err(Attempt::Failed(ClientError::Protocol {
                            upstream: self.inner.name.clone(),
                            message: format!(
                                "{method}: an HTTP error without a JSON-RPC error body"
                            ),
                        }));
                    }
                }
            }
            Err(e) => return Err(Attempt::Failed(self.transport_err(e))),
        };
        let outcome = self
            .drive(
                id,
                method,
                exchange,
                &mut route_rx,
                opts,
                start,
                timer,
                cancelled,
            )
            .await;
        // The routes are gone with the guard: the channel may serve the next call.
        drop(cleanup);
        self.inner.route_channels.give(route_tx, route_rx);
        outcome
    }

    /// Runs one exchange to its response, relaying events, honouring the timeouts and
    /// cancellation. `timer` and `cancelled` are the call's, made when it started at
    /// `start`.
    #[allow(clippy::too_many_arguments)]
    async fn drive(
        &self,
        id: i64,
        method: &str,
        mut exchange: Exchange,
        routed: &mut mpsc::Receiver<Frame>,
        opts: &CallOptions,
        start: Instant,
        mut timer: std::pin::Pin<&mut tokio::time::Sleep>,
        mut cancelled: std::pin::Pin<&mut tokio_util::sync::WaitForCancellationFuture<'_>>,
    ) -> Result<Frame, Attempt> {
        let hard = start + opts.max_time;
        let mut deadline = (start + opts.timeout).min(hard);
        loop {
            let frame = tokio::select! {
                // Frames routed from outside the exchange (stdio) were sent before the
                // response that may be ready at the same time: take them first.
                biased;
                Some(f) = routed.recv() => f,
                item = exchange.next() => match item {
                    Some(Ok(f)) => f,
                    Some(Err(e @ TransportError::Closed { .. })) => return Err(Attempt::StreamBroke(e)),
                    Some(Err(TransportError::SessionExpired)) => return Err(Attempt::SessionExpired),
                    Some(Err(e)) => return Err(Attempt::Failed(self.transport_err(e))),
                    None => return Err(Attempt::StreamBroke(TransportError::Closed {
                        detail: "the stream ended before the response".into(),
                    })),
                },
                () = &mut cancelled => {
                    Box::pin(self.cancel(id, "cancelled by the host")).await;
                    return Err(Attempt::Failed(ClientError::Cancelled {
                        upstream: self.inner.name.clone(),
                        method: method.to_owned(),
                    }));
                }
                () = &mut timer => {
                    // A stdio upstream that stopped in the middle of a line will never
                    // answer this or anything else: the connection is given up, with
                    // that reason rather than a timeout's.
                    if let Some(e) = self.inner.up.give_up_if_unfinished(opts.timeout.min(opts.max_time)) {
                        return Err(Attempt::Failed(self.transport_err(e)));
                    }
                    Box::pin(self.cancel(id, "timed out")).await;
                    return Err(Attempt::Failed(ClientError::Timeout {
                        upstream: self.inner.name.clone(),
                        method: method.to_owned(),
                        after: deadline - start,
                    }));
                }
            };
            match frame.kind() {
                Kind::Result | Kind::Error => {
                    // Whatever the upstream sent before its response still belongs to the
                    // call. On stdio and HTTP+SSE those frames reach it through the
                    // dispatcher, which may still be moving them: wait until it has
                    // finished with every frame the transport delivered before this
                    // response (`UnsolicitedSender`), then take what it routed here.
                    // (Only progress and logs can be overtaken: an ask blocks the upstream
                    // until it is answered, so it always comes before the response.)
                    let relayed = opts.progress || opts.log_level.is_some();
                    if relayed && self.inner.up.unsolicited_carries_related() {
                        let before = self.inner.up.unsolicited_sent();
                        let mut dispatched = self.inner.dispatched.subscribe();
                        // Bounded: a dispatcher stuck on someone else's full channel
                        // must not hold this response back.
                        if tokio::time::timeout(
                            DISPATCH_CATCH_UP,
                            dispatched.wait_for(|n| *n >= before),
                        )
                        .await
                        .is_err()
                        {
                            tracing::debug!(upstream = %self.inner.name, method, "the dispatcher did not catch up with the response; relaying what it routed");
                        }
                        while let Ok(f) = routed.try_recv() {
                            match f.kind() {
                                Kind::Notification => {
                                    self.relay(&f, opts).await;
                                }
                                Kind::Request => self.answer_ask(f, AskRoute::of(&opts.events)),
                                _ => {}
                            }
                        }
                    }
                    return Ok(frame);
                }
                Kind::Notification if frame.method() == Some("notifications/cancelled") => {
                    // The upstream withdrew one of its own questions: the call goes on.
                    if self.inner.withdraw(&frame) {
                        continue;
                    }
                    // The upstream ended this request itself (H1: a listen's teardown;
                    // its result may follow, or not, so this is the end either way).
                    if cancelled_id(&frame) == Some(id) {
                        return Err(Attempt::Failed(ClientError::EndedByUpstream {
                            upstream: self.inner.name.clone(),
                            method: method.to_owned(),
                        }));
                    }
                    tracing::debug!(upstream = %self.inner.name, method, "ignored a notifications/cancelled naming no request of this call");
                }
                Kind::Notification => {
                    if self.relay(&frame, opts).await {
                        // Progress restarts the clock (register A-C18), within `max_time`.
                        deadline = (Instant::now() + opts.timeout).min(hard);
                        timer.as_mut().reset(deadline);
                    }
                }
                Kind::Request => self.answer_ask(frame, AskRoute::of(&opts.events)),
            }
        }
    }

    /// Relays a notification that belongs to a call. Returns whether it was progress.
    async fn relay(&self, frame: &Frame, opts: &CallOptions) -> bool {
        let Some(events) = &opts.events else {
            if frame.method().is_some_and(|m| {
                m.ends_with("list_changed") || m == "notifications/resources/updated"
            }) {
                let _ = self.inner.changes.send(frame.clone());
            }
            return frame.method() == Some("notifications/progress");
        };
        let params: Value = frame
            .params()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null);
        match frame.method() {
            Some("notifications/progress") => {
                let _ = events
                    .send(Box::new(CallEvent::Progress {
                        progress: params
                            .get("progress")
                            .and_then(Value::as_f64)
                            .unwrap_or(0.0),
                        total: params.get("total").and_then(Value::as_f64),
                        message: params
                            .get("message")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                    }))
                    .await;
                true
            }
            Some(
                "notifications/tools/list_changed"
                | "notifications/prompts/list_changed"
                | "notifications/resources/list_changed"
                | "notifications/resources/updated"
                | "notifications/elicitation/complete",
            ) => {
                // On a subscriptions/listen stream (2026-07-28): news about the upstream.
                // A url elicitation's completion (2025-11-25), sent on the call's
                // stream, belongs to the elicitation rather than the call (E-12).
                let _ = self.inner.changes.send(frame.clone());
                false
            }
            Some("notifications/message") => {
                let _ = events
                    .send(Box::new(CallEvent::Log {
                        level: params
                            .get("level")
                            .and_then(Value::as_str)
                            .unwrap_or("info")
                            .to_owned(),
                        logger: params
                            .get("logger")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        data: params.get("data").cloned().unwrap_or(Value::Null),
                    }))
                    .await;
                false
            }
            _ => false,
        }
    }

    /// Answers a request the upstream sent to the client while a call was in flight
    /// (or naming a task mcpx follows). It never waits: its callers are the
    /// connection's reader and a call's driver, which must go on taking frames, and
    /// an upstream may ask many questions at once (each a request of its own), more
    /// than a host may be asked. The ask goes to `events` for the caller to put to a
    /// host, and the answer is awaited in a task of its own; when `events` is full,
    /// closed or absent the ask is refused at once (-32603, the code every legacy
    /// revision has for a request the client cannot serve). Every answer is written
    /// by a task, so the reader never waits for the upstream to read its stdin either.
    fn answer_ask(&self, frame: Frame, to: AskRoute<'_>) {
        let Some(id) = frame.id().cloned() else {
            return;
        };
        let method = frame.method().unwrap_or_default().to_owned();
        if self.facts().era == Era::Modern && self.inner.policy.governs(Revision::V2026_07_28) {
            // H2: "Servers MUST NOT initiate JSON-RPC requests" (2026-07-28 basic/patterns);
            // dropped while 2026-07-28 is held strictly.
            tracing::warn!(upstream = %self.inner.name, %method, "dropped a request from a 2026-07-28 server (forbidden in that revision; allow with spec.lenient)");
            return;
        }
        let refused = |why: String| Answer::Now(Err(AskRefusal::new(-32603, why)));
        let too_many = || {
            refused(format!(
                "too many pending requests: {method} refused (mcpx holds more of this server's requests than it can put to the client)"
            ))
        };
        let answer = match (&method[..], to) {
            ("ping", _) => Answer::Now(Ok(json!({}))),
            (_, AskRoute::Busy) => too_many(),
            (_, AskRoute::To(events)) => {
                let (tx, rx) = oneshot::channel();
                let params = frame.params().and_then(|p| serde_json::from_str(p).ok());
                let ask = Box::new(CallEvent::Ask {
                    method: method.clone(),
                    params,
                    reply: tx,
                });
                match events.try_send(ask) {
                    Ok(()) => {
                        // Open until answered: the upstream may withdraw it meanwhile.
                        let (withdraw, withdrawn) = oneshot::channel();
                        self.inner.open_asks.lock().insert(id.clone(), withdraw);
                        Answer::Later(rx, withdrawn)
                    }
                    Err(mpsc::error::TrySendError::Full(_)) => too_many(),
                    Err(mpsc::error::TrySendError::Closed(_)) => refused(format!(
                        "mcpx could not forward {method}: the host request is gone"
                    )),
                }
            }
            (_, AskRoute::Nowhere) => refused(format!(
                "mcpx cannot forward {method} here: {NOWHERE_TO_ASK}"
            )),
        };
        let conn = self.clone();
        tokio::spawn(async move {
            let answer = match answer {
                Answer::Now(a) => a,
                Answer::Later(rx, withdrawn) => {
                    let answer = tokio::select! {
                        a = rx => Some(a.unwrap_or_else(|_| {
                            Err(AskRefusal::new(
                                -32603,
                                format!("mcpx could not forward {method}: no answer from the host"),
                            ))
                        })),
                        // Cancelled by the upstream: the host's side is dropped with
                        // `rx` (the gateway withdraws the question there), and the
                        // upstream gets no response (every revision's cancellation
                        // page).
                        Ok(()) = withdrawn => None,
                    };
                    conn.inner.open_asks.lock().remove(&id);
                    match answer {
                        Some(a) => a,
                        None => return,
                    }
                }
            };
            conn.respond(&id, &method, answer).await;
        });
    }

    /// Sends the client's answer to the upstream's request `id`.
    async fn respond(&self, id: &Id, method: &str, answer: Result<Value, AskRefusal>) {
        let response = match answer {
            Ok(v) => match RawValue::from_string(v.to_string()) {
                Ok(raw) => Frame::result_response(id, &raw),
                Err(e) => Frame::error_response(Some(id), -32603, &e.to_string(), None),
            },
            Err(AskRefusal { code, message: msg }) => {
                Frame::error_response(Some(id), code, &msg, None)
            }
        };
        if let Err(e) = self.inner.up.send(response).await {
            tracing::warn!(upstream = %self.inner.name, "could not answer {method}: {e}");
        }
    }

    /// Tells the upstream a request is cancelled, in its era's way. On modern Streamable
    /// HTTP, dropping the exchange (which the caller does by returning) closes the
    /// stream, and that is the signal (2026-07-28 basic/patterns/cancellation; C-C3).
    async fn cancel(&self, id: i64, reason: &str) {
        let modern = self.facts().era == Era::Modern;
        if modern && self.inner.up.is_streamable_http() {
            return;
        }
        let params = json!({ "requestId": id, "reason": reason });
        if let Err(e) = self.notify("notifications/cancelled", Some(params)).await {
            tracing::debug!("could not send notifications/cancelled: {e}");
        }
    }

    /// Every item of a paginated list (`tools/list` with key `"tools"`, ...). A missing
    /// `nextCursor` ends the list in every revision; an empty string ends it only where
    /// the revision says so (2026-07-28 server/utilities/pagination: "" is a valid
    /// cursor; H8). At most `max_pages` pages are fetched.
    pub async fn list_all(
        &self,
        method: &str,
        key: &str,
        opts: CallOptions,
        max_pages: usize,
    ) -> Result<Vec<Value>, ClientError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..max_pages.max(1) {
            let params = match &cursor {
                Some(c) => Params::of_value(&json!({ "cursor": c })),
                None => Params::empty(),
            };
            let frame = self.call(method, Some(&params), opts.clone()).await?;
            if let Some(e) = frame.error() {
                return Err(ClientError::Remote {
                    upstream: self.inner.name.clone(),
                    error: e.clone(),
                });
            }
            let result: Value = frame
                .result()
                .and_then(|r| serde_json::from_str(r).ok())
                .unwrap_or(Value::Null);
            match result.get(key) {
                Some(Value::Array(a)) => items.extend(a.iter().cloned()),
                _ => {
                    return Err(ClientError::Protocol {
                        upstream: self.inner.name.clone(),
                        message: format!("{method} result has no `{key}` array"),
                    });
                }
            }
            let next = result.get("nextCursor").and_then(Value::as_str);
            let revision = self.facts().revision;
            cursor = match next {
                None => return Ok(items),
                Some("") if !revision.facts().empty_cursor_is_cursor => return Ok(items),
                Some(c) => Some(c.to_owned()),
            };
        }
        Err(ClientError::Protocol {
            upstream: self.inner.name.clone(),
            message: format!("{method} did not end after {max_pages} pages"),
        })
    }
}

/// Where [`Connection::answer_ask`] takes an upstream's request.
#[derive(Clone, Copy)]
enum AskRoute<'a> {
    /// To the caller whose call it serves, as a [`CallEvent::Ask`].
    To(&'a mpsc::Sender<Box<CallEvent>>),
    /// Nowhere: no host request can answer it.
    Nowhere,
    /// Its call already holds as many of the upstream's requests as it can take.
    Busy,
}

impl<'a> AskRoute<'a> {
    /// To a call's events, if it takes any.
    fn of(events: &'a Option<mpsc::Sender<Box<CallEvent>>>) -> AskRoute<'a> {
        events.as_ref().map_or(AskRoute::Nowhere, AskRoute::To)
    }
}

/// A client's answer to an upstream's request: known now, or awaited from the host.
enum Answer {
    Now(Result<Value, AskRefusal>),
    /// The host's answer to come, unless the upstream withdraws the ask first (the
    /// second receiver fires; see [`Inner::withdraw`]).
    Later(
        oneshot::Receiver<Result<Value, AskRefusal>>,
        oneshot::Receiver<()>,
    ),
}

impl Inner {
    /// Withdraws the open ask a `notifications/cancelled` from the upstream names, if
    /// it names one; whether it did.
    fn withdraw(&self, frame: &Frame) -> bool {
        let mut open = self.open_asks.lock();
        if open.is_empty() {
            return false;
        }
        let Some(raw) = frame
            .params()
            .and_then(|p| mcpx_protocol::jsonrpc::member(p, "requestId"))
        else {
            return false;
        };
        let id = match raw.parse::<i64>() {
            Ok(n) => Id::Number(n),
            Err(_) => match serde_json::from_str::<String>(raw) {
                Ok(s) => Id::String(s),
                Err(_) => return false,
            },
        };
        match open.remove(&id) {
            Some(tx) => {
                tracing::debug!(upstream = %self.name, %id, "the upstream withdrew its request");
                let _ = tx.send(());
                true
            }
            None => false,
        }
    }
}

/// The numeric request id a `notifications/cancelled` names (mcpx's ids are numbers).
pub(crate) fn cancelled_id(frame: &Frame) -> Option<i64> {
    let p = frame.params()?;
    mcpx_protocol::jsonrpc::member(p, "requestId")?.parse().ok()
}

/// How one attempt at a call ended, when it did not produce a response.
#[derive(Debug)]
enum Attempt {
    SessionExpired,
    StreamBroke(TransportError),
    Failed(ClientError),
}

/// Keeps an upstream task's asks routed ([`Connection::route_task_asks`]); dropping it
/// forgets the route, and later asks naming the task are refused as any unattributed
/// ask is.
#[derive(Debug)]
pub struct TaskAsks {
    inner: Arc<Inner>,
    task: String,
}

impl Drop for TaskAsks {
    fn drop(&mut self) {
        self.inner.routes.lock().tasks.remove(&self.task);
    }
}

/// Forgets a call's routes when it ends, however it ends.
struct RouteGuard {
    inner: Arc<Inner>,
    id: i64,
    token: Option<String>,
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        {
            let mut r = self.inner.routes.lock();
            r.calls.remove(&self.id);
            r.by_id.remove(&self.id);
            if let Some(t) = &self.token {
                r.progress.remove(t);
            }
        }
    }
}

/// The client request an upstream's ask or log says it serves (`_meta` key
/// [`mcpx_protocol::meta::RELATED_REQUEST`]; mcpx's own request ids are integers).
fn related_request(frame: &Frame) -> Option<i64> {
    let meta = mcpx_protocol::jsonrpc::member(frame.params()?, "_meta")?;
    mcpx_protocol::jsonrpc::member(meta, mcpx_protocol::meta::RELATED_REQUEST)?
        .parse()
        .ok()
}

/// The upstream task a request names (`_meta` related-task, 2025-11-25
/// basic/utilities/tasks §Associating Task-Related Messages).
fn related_task(frame: &Frame) -> Option<String> {
    let related: Value = serde_json::from_str(frame.params_meta(meta::RELATED_TASK)?).ok()?;
    Some(related.get("taskId")?.as_str()?.to_owned())
}

/// Routes frames that arrive outside any exchange (stdio, the legacy GET stream).
async fn dispatch(inner: std::sync::Weak<Inner>, mut rx: Unsolicited) {
    while let Some(frame) = rx.recv().await {
        let Some(inner) = inner.upgrade() else { return };
        // 2025-11-25 basic/utilities/tasks §Input Required Status: an ask naming (with
        // related-task) an upstream task that mcpx follows goes where that task's asks
        // go, whatever calls are in flight: the task outlives the request that created
        // it, and its asks may come while no call is open, or beside unrelated ones.
        let task_asks = (frame.kind() == Kind::Request)
            .then(|| related_task(&frame))
            .flatten()
            .and_then(|t| inner.routes.lock().tasks.get(&t).cloned());
        if let Some(events) = task_asks {
            let conn = Connection {
                inner: inner.clone(),
            };
            conn.answer_ask(frame, AskRoute::To(&events));
            inner.dispatched.send_modify(|n| *n += 1);
            continue;
        }
        let route = {
            let routes = inner.routes.lock();
            match (frame.kind(), frame.method()) {
                (Kind::Notification, Some("notifications/progress")) => frame
                    .params()
                    .and_then(|p| mcpx_protocol::jsonrpc::member(p, "progressToken"))
                    .and_then(|t| serde_json::from_str::<String>(t).ok())
                    .and_then(|t| routes.progress.get(&t).cloned()),
                // An ask or a log naming the request it serves (mcpx's extension,
                // see `meta::RELATED_REQUEST`) goes to that request, however many are
                // in flight.
                (Kind::Request, _) | (Kind::Notification, Some("notifications/message"))
                    if related_request(&frame).is_some() =>
                {
                    related_request(&frame).and_then(|id| routes.calls.get(&id).cloned())
                }
                // stdio cannot tie logs or asks to a request; when exactly one call is
                // in flight it is the only candidate, otherwise nothing is attributed.
                (Kind::Notification, Some("notifications/message")) | (Kind::Request, _) => {
                    (routes.calls.len() == 1)
                        .then(|| routes.calls.values().next().cloned())
                        .flatten()
                }
                // 2026-07-28 stdio: a server ends a subscriptions/listen stream with
                // notifications/cancelled for it (H1); it goes to that call.
                // A legacy server withdrawing one of its own questions names its
                // own id: that ask is withdrawn, wherever it was routed.
                (Kind::Notification, Some("notifications/cancelled")) => {
                    if inner.withdraw(&frame) {
                        None
                    } else {
                        crate::connection::cancelled_id(&frame)
                            .and_then(|id| routes.by_id.get(&id).cloned())
                    }
                }
                // A notification tagged with a subscriptionId belongs to that listen
                // (2026-07-28 schema NotificationMetaObject); one naming no open listen
                // is stale and dropped (register A-C2: ids are never reused, so it
                // cannot be mistaken for a newer listen's).
                (Kind::Notification, _) => match frame.params_meta(meta::SUBSCRIPTION_ID) {
                    Some(raw) => {
                        let open = raw
                            .parse::<i64>()
                            .ok()
                            .and_then(|id| routes.by_id.get(&id).cloned());
                        if open.is_none() {
                            tracing::debug!(upstream = %inner.name, subscription = raw, "dropped a notification for no open listen");
                        }
                        open
                    }
                    None => {
                        let _ = inner.changes.send(frame.clone());
                        None
                    }
                },
                _ => None,
            }
        };
        match route {
            // An ask never waits for its call to take it: a call that has more of the
            // upstream's requests than it takes (it is refusing or asking as fast as
            // it can) must not stop this reader, which every other call's frames
            // pass through. It is refused at once instead.
            Some(tx) if frame.kind() == Kind::Request => {
                if let Err(e) = tx.try_send(frame) {
                    let conn = Connection {
                        inner: inner.clone(),
                    };
                    match e {
                        mpsc::error::TrySendError::Full(f) => conn.answer_ask(f, AskRoute::Busy),
                        mpsc::error::TrySendError::Closed(f) => {
                            conn.answer_ask(f, AskRoute::Nowhere);
                        }
                    }
                }
            }
            Some(tx) => {
                let _ = tx.send(frame).await;
            }
            None if frame.kind() == Kind::Request => {
                let conn = Connection {
                    inner: inner.clone(),
                };
                conn.answer_ask(frame, AskRoute::Nowhere);
            }
            None => {}
        }
        inner.dispatched.send_modify(|n| *n += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The caller's `_meta`, rewritten as text: its envelope gives way to mcpx's, its
    /// other members keep their bytes (register A-C9 for which keys are the envelope).
    #[test]
    fn the_callers_meta_keeps_its_members_and_gives_way_to_the_envelope() {
        let pv = meta::PROTOCOL_VERSION;
        let caller = format!(
            r#"{{"{pv}":"2026-07-28", "x.example/k" : [1, 2.50, "\u00e9"],"progressToken":7,"{}":"debug"}}"#,
            meta::LOG_LEVEL
        );
        let params = |meta: &str| Params::parse(format!(r#"{{"a":1,"_meta":{meta}}}"#)).unwrap();
        let mut envelope = MetaMembers::default();
        envelope.push(pv, &json!("2026-07-28"));
        envelope.push(meta::PROGRESS_TOKEN, &json!("t1"));
        let env = envelope.as_str();
        let written = [pv, meta::PROGRESS_TOKEN];
        let rewrite = |meta: &str, envelope_keys: bool, envelope: &MetaMembers| {
            params(meta)
                .with_meta(|k| !gives_way(k, envelope_keys, &written), envelope)
                .map(|p| p.as_str().to_owned())
        };
        // A modern caller's envelope keys are its envelope: dropped.
        assert_eq!(
            rewrite(&caller, true, &envelope).unwrap(),
            format!(r#"{{"a":1,"_meta":{{"x.example/k":[1, 2.50, "\u00e9"],{env}}}}}"#)
        );
        // A legacy host's keys of those names are its own data (A-C9), except the ones
        // mcpx writes itself and the progress token.
        let out = rewrite(&caller, false, &envelope).unwrap();
        assert_eq!(
            out,
            format!(
                r#"{{"a":1,"_meta":{{"x.example/k":[1, 2.50, "\u00e9"],"{}":"debug",{env}}}}}"#,
                meta::LOG_LEVEL
            )
        );
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["_meta"][meta::PROGRESS_TOKEN], "t1");
        // Nothing left of the caller's, nothing to write.
        assert_eq!(
            rewrite(r#"{"progressToken":1}"#, true, &MetaMembers::default()).unwrap(),
            r#"{"a":1,"_meta":{}}"#
        );
        assert_eq!(
            rewrite("{}", true, &envelope).unwrap(),
            format!(r#"{{"a":1,"_meta":{{{env}}}}}"#)
        );
        // The general path decides a repeated key or a `_meta` that is no object.
        assert_eq!(rewrite(r#"{"a":1,"a":2}"#, true, &envelope), None);
        assert_eq!(rewrite("[1]", true, &envelope), None);
    }

    /// B-C10: which methods are re-issued after a broken modern stream without
    /// knowing anything about the tool.
    #[test]
    fn idempotent_methods() {
        for m in [
            "server/discover",
            "completion/complete",
            "tools/list",
            "prompts/list",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "prompts/get",
            "tasks/get",
        ] {
            assert!(idempotent_method(m), "{m}");
        }
        for m in [
            "tools/call",
            "subscriptions/listen",
            "resources/subscribe",
            "tasks/cancel",
            "tasks/update",
            "logging/setLevel",
        ] {
            assert!(!idempotent_method(m), "{m}");
        }
    }

    /// A-C22: absent is "complete"; "task" needs the declared extension.
    #[test]
    fn result_types() {
        let r = |t: &str| {
            let raw = RawValue::from_string(t.to_owned()).unwrap();
            Frame::result_response(&Id::Number(1), &raw)
        };
        let none = json!({});
        let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
        assert!(check_result_type(&r("{}"), &none).is_ok());
        assert!(check_result_type(&r(r#"{"resultType":"complete"}"#), &none).is_ok());
        assert!(check_result_type(&r(r#"{"resultType":"input_required"}"#), &none).is_ok());
        assert!(check_result_type(&r(r#"{"resultType":"task"}"#), &none).is_err());
        assert!(check_result_type(&r(r#"{"resultType":"task"}"#), &tasks).is_ok());
        let e = check_result_type(&r(r#"{"resultType":"Complete"}"#), &tasks).unwrap_err();
        assert!(e.to_string().contains("\"Complete\""), "{e}");
        assert!(check_result_type(&r(r#"{"resultType":null}"#), &none).is_err());
        // An error response has no result to check.
        let err = Frame::error_response(Some(&Id::Number(1)), -32603, "x", None);
        assert!(check_result_type(&err, &none).is_ok());
    }
}
