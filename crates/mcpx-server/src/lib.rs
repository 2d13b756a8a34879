//! The serve seam: mcpx as an MCP server, for hosts of any revision.
//!
//! [`Seam`] is the [`Service`] every host-facing transport serves. It answers the
//! lifecycle itself in the host's revision (`initialize` with the negotiated version,
//! `server/discover`, `ping`, `logging/setLevel`), checks what the host's revision
//! requires of a request (2026-07-28 `_meta` keys), and hands every feature request to
//! a [`Backend`] (the gateway) as a revision-neutral [`Call`]. What comes back, a
//! result written in some revision or a [`Fault`], is lowered to the host's revision
//! here and nowhere else: result shapes through `mcpx_protocol::lower`, error codes
//! through `mcpx_protocol::error::translate_code`, input-validation failures as a
//! protocol error or an `isError` result (register H5, D-C1).
//!
//! Relays toward the host are built here too, because they depend on the host's
//! revision: [`ProgressSink`] (progress tokens, the 2024-11-05 `message` rule) and
//! [`LogSink`] (logs only where the host asked for a level: `logging/setLevel` on
//! legacy, `_meta` `logLevel` on 2026-07-28; register H9, C-C8).
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use mcpx_protocol::error::{
    INVALID_PARAMS, METHOD_NOT_FOUND, URL_ELICITATION_REQUIRED, translate_code,
};
use mcpx_protocol::jsonrpc::{Json, member};
use mcpx_protocol::lower::{ServerInfo, Stamp, lower_result_json};
use mcpx_protocol::method::{client_may_send, tasks_extension_client_method};
use mcpx_protocol::revision::TasksFlavor;
use mcpx_protocol::trace::{self, TraceContext};
use mcpx_protocol::{Era, Frame, Id, Revision, SpecPolicy, meta};
use mcpx_transport::upstream::OFF_LOOP_BYTES;
use mcpx_transport::{Incoming, Peer, RequestCtx, Service};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// What the gateway offers, from which the capabilities of each revision are built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Tools, and whether their list can change.
    pub tools: Option<ListCaps>,
    /// Prompts.
    pub prompts: Option<ListCaps>,
    /// Resources.
    pub resources: Option<ListCaps>,
    /// Resource subscriptions.
    pub resources_subscribe: bool,
    /// `completion/complete`.
    pub completions: bool,
    /// Log messages can be relayed.
    pub logging: bool,
    /// Instructions for the host's model.
    pub instructions: Option<String>,
    /// Tasks: some upstream runs tools as tasks (register H13).
    pub tasks: bool,
}

/// Which capabilities are offered: what the capability gate of every request needs,
/// without building the whole [`Summary`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offered {
    /// Tools.
    pub tools: bool,
    /// Prompts.
    pub prompts: bool,
    /// Resources.
    pub resources: bool,
    /// Resource subscriptions.
    pub resources_subscribe: bool,
    /// Completions.
    pub completions: bool,
    /// Logging.
    pub logging: bool,
    /// Tasks (2025-11-25 core or the 2026-07-28 extension, per host revision; H13).
    pub tasks: bool,
}

impl Summary {
    /// The capabilities this summary offers.
    pub fn offered(&self) -> Offered {
        Offered {
            tools: self.tools.is_some(),
            prompts: self.prompts.is_some(),
            resources: self.resources.is_some(),
            resources_subscribe: self.resources_subscribe,
            completions: self.completions,
            logging: self.logging,
            tasks: self.tasks,
        }
    }
}

/// Capabilities of one list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListCaps {
    /// The list can change (list_changed notifications).
    pub list_changed: bool,
}

impl Summary {
    /// `ServerCapabilities` as `rev` writes them.
    pub fn capabilities(&self, rev: Revision) -> Value {
        let mut caps = serde_json::Map::new();
        let list = |c: &ListCaps| json!({ "listChanged": c.list_changed });
        if let Some(t) = &self.tools {
            caps.insert("tools".into(), list(t));
        }
        if let Some(p) = &self.prompts {
            caps.insert("prompts".into(), list(p));
        }
        if let Some(r) = &self.resources {
            let mut v = list(r);
            v["subscribe"] = json!(self.resources_subscribe);
            caps.insert("resources".into(), v);
        }
        // C-C9: the capability exists from 2025-03-26.
        if self.completions && rev.facts().completions_capability {
            caps.insert("completions".into(), json!({}));
        }
        if self.logging {
            caps.insert("logging".into(), json!({}));
        }
        // H13: 2025-11-25 basic/utilities/tasks §Server Capabilities (task-augmented
        // tools/call, tasks/list, tasks/cancel); ext-tasks §Capability Negotiation.
        if self.tasks {
            match rev.facts().tasks {
                TasksFlavor::None => {}
                TasksFlavor::Core => {
                    caps.insert(
                        "tasks".into(),
                        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
                    );
                }
                TasksFlavor::Extension => {
                    caps.insert(
                        "extensions".into(),
                        json!({ mcpx_protocol::method::TASKS_EXTENSION: {} }),
                    );
                }
            }
        }
        Value::Object(caps)
    }
}

pub use mcpx_protocol::logging::Level;

/// Sends progress for one host request, with the host's own token.
#[derive(Debug, Clone)]
pub struct ProgressSink {
    ctx: RequestCtx,
    token: Box<RawValue>,
    keep_message: bool,
    /// The last progress value relayed for this token.
    last: Arc<Mutex<Option<f64>>>,
}

impl ProgressSink {
    /// Relays one progress notification. `message` is dropped for a 2024-11-05 host
    /// only when the spec policy makes 2024-11-05 dominate (its schema has no
    /// `message`; every later revision does: register, "Decided by those settings").
    ///
    /// Register C-C7: the prose governs over the schema's lowercase "should" (every
    /// revision's basic/utilities/progress: "The progress value MUST increase with each
    /// notification"), so a value that does not exceed the last one relayed for this
    /// token is dropped with a warning.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        {
            let mut last = self.last.lock();
            if let Some(l) = *last
                && progress.partial_cmp(&l) != Some(std::cmp::Ordering::Greater)
            {
                tracing::warn!(
                    progress,
                    last = l,
                    token = %self.token,
                    "dropped a progress notification that does not increase"
                );
                return;
            }
            *last = Some(progress);
        }
        let mut p = json!({ "progressToken": self.token, "progress": progress });
        if let Some(t) = total {
            p["total"] = json!(t);
        }
        if let (Some(m), true) = (message, self.keep_message) {
            p["message"] = json!(m);
        }
        let _ = self
            .ctx
            .notify(notification("notifications/progress", &p))
            .await;
    }
}

/// Sends log messages for one host request, filtered to the level the host asked for.
#[derive(Debug, Clone)]
pub struct LogSink {
    ctx: RequestCtx,
    threshold: Level,
    /// The host's request id, named in each message's `_meta`
    /// ([`meta::RELATED_REQUEST`]): on stdio and HTTP+SSE nothing else tells a host with
    /// several requests in flight which one a log is about.
    id: Id,
}

impl LogSink {
    /// The level below which messages are dropped.
    pub fn threshold(&self) -> Level {
        self.threshold
    }

    /// Relays one log message if it is at or above the threshold.
    pub async fn log(&self, level: Level, logger: Option<&str>, data: &Value) {
        if level < self.threshold {
            return;
        }
        let mut p = json!({ "level": level.as_str(), "data": data,
            "_meta": { meta::RELATED_REQUEST: self.id } });
        if let Some(l) = logger {
            p["logger"] = json!(l);
        }
        let _ = self
            .ctx
            .notify(notification("notifications/message", &p))
            .await;
    }
}

fn raw(v: &Value) -> Box<RawValue> {
    // A `Value` always serialises to valid JSON.
    RawValue::from_string(v.to_string())
        .unwrap_or_else(|_| RawValue::from_string("null".to_owned()).unwrap_or_default())
}

fn notification(method: &str, params: &Value) -> Frame {
    Frame::notification(method, Some(&raw(params)))
}

/// A feature request from a host, for the gateway.
#[derive(Debug)]
pub struct Call {
    /// The host's request id.
    pub id: Id,
    /// The method.
    pub method: String,
    /// The params as the host sent them (with where the decoder saw `_meta` and
    /// `name`, which the gateway reads and rewrites on every call).
    pub params: Option<mcpx_protocol::Params>,
    /// The host's revision.
    pub host: Revision,
    /// Present when the host asked for progress.
    pub progress: Option<ProgressSink>,
    /// Present when the host asked for logs.
    pub log: Option<LogSink>,
    /// Fires when the host cancels.
    pub cancel: CancellationToken,
    /// The host's legacy connection, for server-to-client requests of the same era.
    pub peer: Option<Peer>,
    /// The host's client capabilities (from `initialize` on legacy, from `_meta` on
    /// modern). Shared: a legacy session's are read once, and a call hands them on to
    /// the upstream's request and to the work of a task.
    pub client_capabilities: Arc<Value>,
    /// The request's context, for notifications related to it (a `subscriptions/listen`
    /// stream) and its cancellation.
    pub ctx: RequestCtx,
    /// The gateway task this call is the underlying work of, if any (2025-11-25
    /// `io.modelcontextprotocol/related-task`, register C-C12). `None` from the seam.
    pub related_task: Option<String>,
    /// With metrics on, the series of the listed tool a `tools/call` names, for its
    /// upstream leg (found once, by the seam).
    pub tool_series: Option<Arc<mcpx_metrics::ToolSeries>>,
    /// The host's trace context: the request's `_meta` `traceparent` (and
    /// `tracestate`), else its HTTP headers'; `None` when neither is valid
    /// ([`host_trace`]).
    pub trace: Option<Arc<TraceContext>>,
}

/// The trace context a host sent with a request: `_meta.traceparent` (with
/// `_meta.tracestate`) when valid, as the carrier of this one message, else the
/// HTTP request's headers (`ctx`). `_meta` is read on every revision: 2026-07-28
/// reserves the keys for this (basic/index §OpenTelemetry trace context), and the
/// earlier revisions give them no other meaning (register A-C9).
pub fn host_trace(frame: &Frame, ctx: &RequestCtx) -> Option<Arc<TraceContext>> {
    let text = |raw: &str| serde_json::from_str::<String>(raw).ok();
    let from_meta = frame
        .params_meta(trace::TRACEPARENT)
        .and_then(text)
        .and_then(|parent| {
            let state = frame.params_meta(trace::TRACESTATE).and_then(text);
            TraceContext::parse(&parent, state.as_deref())
        });
    match from_meta {
        Some(t) => Some(Arc::new(t)),
        None => ctx.trace().cloned(),
    }
}

/// A result, as raw JSON written in `revision`.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The result object (valid JSON: see [`Json`]; not parsed again on its way out).
    pub result: Json,
    /// The revision it is written in.
    pub revision: Revision,
}

/// An error for the host.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// The JSON-RPC code as reported, in `from`'s terms.
    pub code: i64,
    /// The message (names the upstream where one is involved).
    pub message: String,
    /// `error.data`.
    pub data: Option<Value>,
    /// The revision of whoever reported it.
    pub from: Revision,
    /// A tool's input failed validation (register H5, D-C1).
    pub input_validation: bool,
}

impl Fault {
    /// A fault mcpx itself reports, in the host's terms.
    pub fn new(code: i64, message: impl Into<String>, host: Revision) -> Fault {
        Fault {
            code,
            message: message.into(),
            data: None,
            from: host,
            input_validation: false,
        }
    }
}

/// The gateway, as the seam sees it.
pub trait Backend: Send + Sync + 'static {
    /// What is offered (capabilities, instructions).
    fn summary(&self) -> Summary;

    /// Which capabilities are offered; asked on every request, so a backend with a
    /// costly [`Backend::summary`] should keep this at hand. Default: from the summary.
    fn offered(&self) -> Offered {
        self.summary().offered()
    }

    /// Answers a feature request.
    fn call(&self, call: Call) -> impl Future<Output = Result<Reply, Fault>> + Send;

    /// Resolves when what the backend declares is known well enough to answer
    /// `initialize` or `server/discover`: awaited before those, so it must be cheap once
    /// resolved (a gateway waits, briefly and boundedly, for upstreams still starting,
    /// so that it declares what they declare). Default: at once.
    fn described(&self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Whether [`Backend::described`] would resolve at once: checked first, so that
    /// the common case awaits nothing. Default: true.
    fn is_described(&self) -> bool {
        true
    }

    /// A legacy session began (its `initialize` succeeded): from now on it is told
    /// of list changes, whether or not it has made another request. Default: nothing.
    fn session_opened(&self, _peer: &Peer) {}

    /// A legacy host asked for log messages at `level` and above (`logging/setLevel`).
    /// The backend arranges for its sources to produce them. Default: nothing.
    fn log_level_requested(&self, _level: Level) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Where the backend publishes its tools' `x-mcp-header` annotations, by the
    /// name each is offered under (for the Streamable HTTP transport's `Mcp-Param-*`
    /// checks): asked once per server built. Default: an empty table.
    fn param_headers(&self) -> mcpx_transport::ParamHeaders {
        mcpx_transport::ParamHeaders::default()
    }

    /// A notification from a host (other than `initialized` and `cancelled`, which the
    /// seam and the transport handle). Default: ignored.
    fn notification(
        &self,
        _method: &str,
        _params: Option<&str>,
        _host: Revision,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// The serve seam.
#[derive(Debug)]
pub struct Seam<B> {
    backend: Arc<B>,
    info: ServerInfo,
    policy: SpecPolicy,
    /// Legacy log levels by session (`""` for the stdio process).
    levels: Mutex<HashMap<String, Level, foldhash::fast::RandomState>>,
    /// The last 2026-07-28 `clientCapabilities` read, as its text and its value. A
    /// modern client sends the same object on every request; parsing it into a tree
    /// (an allocation or more per member) on every call is what this saves. One
    /// entry: another object replaces it (then each differing request parses, as
    /// before).
    capabilities: Mutex<Option<(Box<str>, Arc<Value>)>>,
    /// Where each request's duration, outcome and bytes are recorded, if anywhere.
    metrics: Option<Arc<mcpx_metrics::Metrics>>,
}

/// The key of a session's log level in [`Seam::levels`].
fn session_id(peer: Option<&Peer>) -> &str {
    peer.and_then(Peer::session_id).unwrap_or_default()
}

impl<B: Backend> Seam<B> {
    /// A seam answering as `name`/`version`, under `policy`.
    pub fn new(backend: Arc<B>, name: &str, version: &str, policy: SpecPolicy) -> Self {
        Seam {
            backend,
            info: ServerInfo::new(json!({ "name": name, "version": version })),
            policy,
            levels: Mutex::new(HashMap::default()),
            capabilities: Mutex::new(None),
            metrics: None,
        }
    }

    /// Records every request's duration and outcome (the host's leg), the bytes
    /// exchanged with hosts, and legacy sessions, in `metrics`.
    pub fn with_metrics(mut self, metrics: Option<Arc<mcpx_metrics::Metrics>>) -> Self {
        self.metrics = metrics;
        self
    }

    /// What is offered, once the backend has described itself (it waits, briefly,
    /// during the first requests only).
    async fn offered_once_described(&self) -> Offered {
        if !self.backend.is_described() {
            self.backend.described().await;
        }
        self.backend.offered()
    }

    /// The value of a 2026-07-28 request's `clientCapabilities` text (`null` when it is
    /// not JSON), shared with the last request that sent the same text.
    fn client_capabilities(&self, text: &str) -> Arc<Value> {
        let mut last = self.capabilities.lock();
        if let Some((seen, value)) = last.as_ref()
            && **seen == *text
        {
            return Arc::clone(value);
        }
        let value = Arc::new(serde_json::from_str(text).unwrap_or(Value::Null));
        *last = Some((text.into(), Arc::clone(&value)));
        value
    }

    fn ok(&self, id: &Id, method: &str, result: &Value, host: Revision) -> Frame {
        let text = Json::of_value(result);
        let stamp = Stamp {
            server_info: Some(&self.info),
        };
        match lower_result_json(method, &text, host, host, stamp) {
            Ok(None) => Frame::result_response_json(id, &text),
            Ok(Some(r)) => Frame::result_response_json(id, &r),
            Err(e) => Frame::error_response(Some(id), -32603, &e.to_string(), None),
        }
    }

    fn fault(&self, id: &Id, method: &str, f: Fault, host: Revision) -> Frame {
        if f.input_validation && host.facts().input_validation_is_tool_error {
            // 2025-11-25 server/tools §Error Handling: input validation errors are tool
            // execution errors, reported in the result with isError.
            let result = json!({
                "content": [{ "type": "text", "text": f.message }],
                "isError": true,
            });
            return self.ok(id, method, &result, host);
        }
        let code = translate_code(f.code, method, f.from, host);
        let mut message =
            if code == f.code || f.code == mcpx_protocol::error::RESOURCE_NOT_FOUND_LEGACY {
                f.message
            } else {
                format!("{} (error {} from the upstream)", f.message, f.code)
            };
        if f.code == URL_ELICITATION_REQUIRED && code != f.code {
            // Register A-C11: -32042 exists only in 2025-11-25 (2026-07-28 basic/index
            // §Error codes: MUST NOT emit it); other hosts get an error whose message
            // carries the URLs the user is asked to open.
            let urls = elicitation_urls(f.data.as_ref());
            if !urls.is_empty() {
                message = format!("{message}; open {} to continue", urls.join(", "));
            }
        }
        Frame::error_response(Some(id), code, &message, f.data.as_ref())
    }

    async fn answer(
        &self,
        req: Incoming,
        ctx: &RequestCtx,
        tool_series: Option<Arc<mcpx_metrics::ToolSeries>>,
    ) -> Frame {
        let frame = req.frame;
        let host = req.verdict.revision();
        let id = frame.id().cloned().unwrap_or(Id::Number(0));
        let method = frame.method().unwrap_or_default();
        // ext-tasks 2026-07-28: tasks/get|update|cancel exist for modern hosts through the
        // extension, gated below on the request's own declaration.
        let extension_method = tasks_extension_client_method(method, host);
        if !client_may_send(method, host) && !extension_method {
            return Frame::error_response(
                Some(&id),
                METHOD_NOT_FOUND,
                &format!("method not found in protocol revision {host}: {method}"),
                None,
            );
        }
        let modern = host.era() == Era::Modern;
        let caps = if modern {
            // 2026-07-28 basic/index §_meta: clientCapabilities is required (A-C12).
            match frame.params_meta(meta::CLIENT_CAPABILITIES) {
                Some(c) => self.client_capabilities(c),
                None => {
                    return Frame::error_response(
                        Some(&id),
                        INVALID_PARAMS,
                        &format!("missing required _meta key {:?}", meta::CLIENT_CAPABILITIES),
                        None,
                    );
                }
            }
        } else {
            // Legacy: declared once, at initialize, for the session (A-C16).
            ctx.peer().map_or_else(
                || Arc::new(Value::Null),
                |p| p.client_capabilities().clone(),
            )
        };
        // What is declared depends on upstreams that may still be starting: the
        // handshakes wait for them, briefly (the lists are declared from the
        // configuration whatever comes of it, and the backend's lists wait for
        // first starts themselves).
        if matches!(method, "initialize" | "server/discover") && !self.backend.is_described() {
            // Boxed: only the first handshakes wait.
            Box::pin(self.backend.described()).await;
        }
        match method {
            "initialize" => {
                let summary = self.backend.summary();
                let mut result = json!({
                    "protocolVersion": host.as_str(),
                    "capabilities": summary.capabilities(host),
                    "serverInfo": self.info.value(),
                });
                if let Some(i) = &summary.instructions {
                    result["instructions"] = json!(i);
                }
                return self.ok(&id, method, &result, host);
            }
            "server/discover" => {
                let summary = self.backend.summary();
                let mut result = json!({
                    "supportedVersions": Revision::of_era(Era::Modern).map(Revision::as_str).collect::<Vec<_>>(),
                    "capabilities": summary.capabilities(host),
                    // mcpx's capabilities follow its configuration, which can be
                    // reloaded: hosts should not cache them (H12: the fields are required).
                    "ttlMs": 0,
                    "cacheScope": "private",
                });
                if let Some(i) = &summary.instructions {
                    result["instructions"] = json!(i);
                }
                return self.ok(&id, method, &result, host);
            }
            "ping" => return self.ok(&id, method, &json!({}), host),
            "logging/setLevel" if !Box::pin(self.offered_once_described()).await.logging => {
                return Frame::error_response(
                    Some(&id),
                    METHOD_NOT_FOUND,
                    "logging/setLevel is not available: no upstream offers logging",
                    None,
                );
            }
            "logging/setLevel" => {
                let level = frame
                    .params()
                    .and_then(|p| member(p, "level"))
                    .and_then(|l| serde_json::from_str::<String>(l).ok());
                return match level.as_deref().and_then(Level::parse) {
                    Some(l) => {
                        self.levels
                            .lock()
                            .insert(session_id(ctx.peer()).to_owned(), l);
                        self.backend.log_level_requested(l).await;
                        self.ok(&id, method, &json!({}), host)
                    }
                    None => Frame::error_response(
                        Some(&id),
                        INVALID_PARAMS,
                        &format!(
                            "invalid log level {level:?}; expected one of {}",
                            Level::NAMES.join(", ")
                        ),
                        None,
                    ),
                };
            }
            _ => {}
        }
        // A-C7 (2026-07-28 schema MethodNotFoundError: "or one gated behind a server
        // capability the server did not advertise"): in every era, a method whose
        // capability mcpx does not offer is -32601 (404 on modern HTTP).
        let mut o = self.backend.offered();
        let gated = |o: &Offered| match method {
            "tools/list" | "tools/call" => o.tools,
            "prompts/list" | "prompts/get" => o.prompts,
            "resources/list" | "resources/read" | "resources/templates/list" => o.resources,
            "resources/subscribe" | "resources/unsubscribe" => o.resources_subscribe,
            "completion/complete" => o.completions,
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" | "tasks/update" => {
                o.tasks
            }
            _ => true,
        };
        if !gated(&o) && !self.backend.is_described() {
            // A modern host's first request may be any: before refusing it, what the
            // upstreams still starting offer is waited for, briefly (boxed: rare).
            o = Box::pin(self.offered_once_described()).await;
        }
        let offered = gated(&o);
        if !offered {
            return Frame::error_response(
                Some(&id),
                METHOD_NOT_FOUND,
                &format!("{method} is not available: no upstream offers the capability it needs"),
                None,
            );
        }
        // ext-tasks §Error Handling: a request that did not declare the extension gets
        // -32021 naming it (register C-C13).
        if extension_method && !mcpx_protocol::task::declares_extension(&caps) {
            return Frame::error_response(
                Some(&id),
                mcpx_protocol::error::MISSING_REQUIRED_CLIENT_CAPABILITY,
                &format!(
                    "{method} needs the {} extension",
                    mcpx_protocol::method::TASKS_EXTENSION
                ),
                Some(&mcpx_protocol::task::required_extension_data()),
            );
        }
        // Logging: only where the host asked (H9, C-C8).
        let threshold = if modern {
            match frame.params_meta(meta::LOG_LEVEL) {
                None => None,
                Some(raw_level) => match serde_json::from_str::<String>(raw_level)
                    .ok()
                    .as_deref()
                    .and_then(Level::parse)
                {
                    Some(l) => Some(l),
                    // 2026-07-28 server/utilities/logging: an invalid level SHOULD be
                    // rejected.
                    None => {
                        return Frame::error_response(
                            Some(&id),
                            INVALID_PARAMS,
                            &format!("invalid _meta {:?}: {raw_level}", meta::LOG_LEVEL),
                            None,
                        );
                    }
                },
            }
        } else {
            self.levels.lock().get(session_id(ctx.peer())).copied()
        };
        let progress = frame
            .params_meta(meta::PROGRESS_TOKEN)
            .map(|t| ProgressSink {
                ctx: ctx.clone(),
                token: raw_str(t),
                last: Arc::default(),
                keep_message: !(host == Revision::V2024_11_05 && self.policy.dominates(host)),
            });
        let log = threshold.map(|threshold| LogSink {
            ctx: ctx.clone(),
            threshold,
            id: id.clone(),
        });
        let call = Call {
            id: id.clone(),
            method: method.to_owned(),
            params: mcpx_protocol::Params::of(&frame),
            host,
            progress,
            log,
            cancel: ctx.cancelled().clone(),
            peer: ctx.peer().cloned(),
            client_capabilities: caps,
            ctx: ctx.clone(),
            related_task: None,
            tool_series,
            trace: host_trace(&frame, ctx),
        };
        match self.backend.call(call).await {
            Ok(reply) if reply.result.as_str().len() >= OFF_LOOP_BYTES => {
                // Boxed: a passthrough call's future holds nothing of this branch.
                Box::pin(respond_off_loop(id, method, reply, host, &self.info)).await
            }
            Ok(reply) => respond(&id, method, reply, host, &self.info),
            Err(f) => self.fault(&id, method, f, host),
        }
    }
}

/// The response to a request whose backend answered with `reply`: the result lowered
/// to the host's revision (and stamped), or the error that took its place.
fn respond(id: &Id, method: &str, reply: Reply, host: Revision, info: &ServerInfo) -> Frame {
    let stamp = Stamp {
        server_info: Some(info),
    };
    match lower_result_json(method, &reply.result, reply.revision, host, stamp) {
        Ok(None) => Frame::result_response_json(id, &reply.result),
        Ok(Some(r)) => Frame::result_response_json(id, &r),
        Err(e) => Frame::error_response(Some(id), -32603, &e.to_string(), None),
    }
}

/// [`respond`] on tokio's blocking pool, for a result of
/// [`OFF_LOOP_BYTES`] or more: lowering may parse and write the result again, and
/// copying it into its response and freeing it hold the thread for as long as a read
/// of it, tens of milliseconds for tens of MiB. On the default single-threaded runtime
/// that would hold up every other host's and upstream's calls.
async fn respond_off_loop(
    id: Id,
    method: &str,
    reply: Reply,
    host: Revision,
    info: &ServerInfo,
) -> Frame {
    let (method, info, for_error) = (method.to_owned(), info.clone(), id.clone());
    tokio::task::spawn_blocking(move || respond(&id, &method, reply, host, &info))
        .await
        .unwrap_or_else(|e| {
            let message = format!("the result could not be written: {e}");
            Frame::error_response(Some(&for_error), -32603, &message, None)
        })
}

/// The URLs of a 2025-11-25 `URLElicitationRequiredError`'s `data.elicitations`.
fn elicitation_urls(data: Option<&Value>) -> Vec<String> {
    data.and_then(|d| d.get("elicitations"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|e| e.get("url").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn raw_str(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned())
        .unwrap_or_else(|_| RawValue::from_string("null".to_owned()).unwrap_or_default())
}

impl<B: Backend> Service for Seam<B> {
    async fn request(&self, req: Incoming, ctx: RequestCtx) -> Frame {
        // The host's leg: timed from here to the response, when metrics are on (one
        // check otherwise). One `answer` future either way.
        let leg = match self.metrics.as_deref() {
            None => None,
            Some(m) => {
                let started = std::time::Instant::now();
                m.host_received(req.frame.as_str().len());
                let method = req.frame.method().unwrap_or_default();
                let tool = (method == "tools/call")
                    .then(|| req.frame.params_name())
                    .flatten();
                Some(m.host_request_since(method, tool, started))
            }
        };
        let tool_series = leg.as_ref().and_then(mcpx_metrics::HostTiming::tool);
        let response = self.answer(req, &ctx, tool_series).await;
        if let (Some(m), Some(timing)) = (self.metrics.as_deref(), leg) {
            m.host_sent(response.as_str().len());
            timing.end(&response, ctx.cancelled().is_cancelled());
        }
        response
    }

    async fn notification(&self, n: Incoming, _peer: Option<Peer>) {
        if let Some(m) = &self.metrics {
            m.host_received(n.frame.as_str().len());
        }
        let method = n.frame.method().unwrap_or_default();
        if matches!(
            method,
            "notifications/initialized" | "notifications/cancelled"
        ) {
            return;
        }
        self.backend
            .notification(method, n.frame.params(), n.verdict.revision())
            .await;
    }

    fn param_headers(&self) -> mcpx_transport::ParamHeaders {
        self.backend.param_headers()
    }

    fn session_opened(&self, peer: &Peer) {
        if let Some(m) = &self.metrics {
            m.session_opened();
        }
        self.backend.session_opened(peer);
    }

    fn session_closed(&self, peer: &Peer) {
        if let Some(m) = &self.metrics {
            m.session_closed();
        }
        self.levels.lock().remove(session_id(Some(peer)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend that is never called: the tests only use the seam's own state.
    struct NoBackend;

    impl Backend for NoBackend {
        fn summary(&self) -> Summary {
            Summary::default()
        }

        async fn call(&self, _call: Call) -> Result<Reply, Fault> {
            Err(Fault::new(-32603, "not called", Revision::V2026_07_28))
        }
    }

    #[test]
    fn client_capabilities_are_parsed_once_per_object_sent() {
        let seam = Seam::new(Arc::new(NoBackend), "t", "1", SpecPolicy::default());
        let first = seam.client_capabilities(r#"{"roots":{"listChanged":true}}"#);
        let again = seam.client_capabilities(r#"{"roots":{"listChanged":true}}"#);
        assert!(
            Arc::ptr_eq(&first, &again),
            "the same text shares one value"
        );
        assert_eq!(*first, json!({"roots": {"listChanged": true}}));
        // Another object replaces the one kept; its value is its own.
        let other = seam.client_capabilities(r#"{"sampling":{}}"#);
        assert_eq!(*other, json!({"sampling": {}}));
        let back = seam.client_capabilities(r#"{"roots":{"listChanged":true}}"#);
        assert!(!Arc::ptr_eq(&first, &back));
        assert_eq!(back, first);
        // Not JSON: null, as before the cache.
        assert_eq!(*seam.client_capabilities("{"), Value::Null);
    }
}
