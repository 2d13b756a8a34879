//! mcpx's reference upstream: an MCP server with every feature of every revision, for
//! mcpx's tests and for pointing external clients and the conformance suite at.
//!
//! [`ExampleServer`] implements [`mcpx_transport::Service`], so any server transport can
//! carry it. It answers each request in the revision the transport classified it in
//! ([`Verdict`]) and shapes every result for that revision: legacy results never carry
//! `resultType`, `ttlMs` or `cacheScope`; 2026-07-28 results always carry `resultType`,
//! `_meta["io.modelcontextprotocol/serverInfo"]`, and on cacheable methods
//! `ttlMs`/`cacheScope` (2026-07-28 basic/index §resultType, server/utilities/caching).
//!
//! # Modes
//!
//! * [`Mode::Dual`]: both eras, legacy after `initialize` and modern per request
//!   (2026-07-28 basic/versioning §Backward Compatibility).
//! * [`Mode::Strict`]: exactly one revision, refusing everything else with that
//!   revision's own error, as a server that knows only that revision would.
//!
//! # Layout
//!
//! * [`fixtures`]: the catalog (tools, resources, templates, prompts) and the map from
//!   conformance scenarios to fixtures.
//! * [`mod@features`]: per-revision schema features used to shape content.
//! * `mrtr`: `input_required` results and integrity-protected `requestState`.
#![forbid(unsafe_code)]

pub mod features;
pub mod fixtures;
mod mrtr;
mod tasks;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mcpx_protocol::error::{
    INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION, resource_not_found,
};
use mcpx_protocol::logging::Level;
use mcpx_protocol::method::{CACHEABLE_METHODS, client_may_send};
use mcpx_protocol::revision::StructuredContent;
use mcpx_protocol::{Era, Frame, Id, Revision, Verdict, meta};
use mcpx_transport::{Incoming, Peer, RequestCtx, Service};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use crate::features::features;
use crate::fixtures::{Dynamic, PNG, WAV};
use crate::mrtr::{Retry, Round, StateSigner, gather, missing_capabilities};

/// The server's name in `serverInfo`.
pub const SERVER_NAME: &str = "mcpx-example-server";
/// Page size of paginated lists (`resources/list`): small, so pagination is exercised.
pub const PAGE_SIZE: usize = 2;
/// How long a legacy server-to-client request (sampling, elicitation, roots) may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(120);

/// Which revisions the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every revision: legacy after `initialize`, modern per request.
    Dual,
    /// Exactly this revision.
    Strict(Revision),
}

/// A JSON-RPC error to answer with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: &str) -> Self {
        RpcError {
            code,
            message: message.to_owned(),
            data: None,
        }
    }

    pub(crate) fn with_data(code: i64, message: &str, data: Value) -> Self {
        RpcError {
            code,
            message: message.to_owned(),
            data: Some(data),
        }
    }

    fn params(message: &str) -> Self {
        RpcError::new(INVALID_PARAMS, message)
    }
}

/// Something that changed, for `subscriptions/listen` streams and legacy sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    Updated(String),
}

impl Event {
    fn method(&self) -> &'static str {
        match self {
            Event::ToolsChanged => "notifications/tools/list_changed",
            Event::PromptsChanged => "notifications/prompts/list_changed",
            Event::ResourcesChanged => "notifications/resources/list_changed",
            Event::Updated(_) => "notifications/resources/updated",
        }
    }
}

/// A legacy session's state: its log level (`logging/setLevel`) and resource
/// subscriptions (`resources/subscribe`), and the peer to notify.
#[derive(Debug, Default)]
struct Session {
    level: Option<usize>,
    subscribed: HashSet<String>,
    peer: Option<Peer>,
}

/// The eight log levels, in order of severity.
const LEVELS: [&str; 8] = Level::NAMES;

fn level_index(s: &str) -> Option<usize> {
    Level::parse(s).map(|l| l as usize)
}

/// The reference server. Cheap to share: put it in an `Arc` and hand it to a transport.
#[derive(Debug)]
pub struct ExampleServer {
    mode: Mode,
    signer: StateSigner,
    hub: broadcast::Sender<Event>,
    /// Legacy sessions by HTTP session id (`None`: the stdio process).
    sessions: Mutex<HashMap<Option<String>, Session>>,
    dynamic_tool: AtomicBool,
    dynamic_prompt: AtomicBool,
    dynamic_resource: AtomicBool,
    /// Tasks (2025-11-25 core and the 2026-07-28 extension), bounded.
    tasks: std::sync::Arc<tasks::Tasks>,
    /// How long each `server/discover` answer waits (for tests: a server under load).
    discover_delay: Duration,
    /// The 2026-07-28 tools' `x-mcp-header` annotations, published when the tool list
    /// changes, so the Streamable HTTP transport checks `Mcp-Param-*` headers against
    /// the body (2026-07-28 streamable-http §Custom Headers from Tool Parameters).
    param_headers: mcpx_transport::ParamHeaders,
}

/// The `x-mcp-header` annotations of the 2026-07-28 tools listed with `dynamic`.
fn header_table(dynamic: Dynamic) -> mcpx_transport::service::ParamHeaderTable {
    fixtures::tools(Revision::V2026_07_28, dynamic)
        .iter()
        .filter_map(|t| {
            let name = t.get("name").and_then(Value::as_str)?;
            let headers = t
                .get("inputSchema")
                .and_then(|schema| mcpx_protocol::header::param_headers(schema).ok())?;
            (!headers.is_empty()).then(|| (name.to_owned(), headers))
        })
        .collect()
}

impl Default for ExampleServer {
    fn default() -> Self {
        ExampleServer::new(Mode::Dual)
    }
}

fn raw(v: &Value) -> Box<RawValue> {
    // Serialising a `Value` cannot fail; the fallback is unreachable.
    RawValue::from_string(v.to_string()).unwrap_or_else(|_| Box::<RawValue>::default())
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn tool_result(content: Vec<Value>) -> Value {
    json!({ "content": content })
}

fn tool_error(message: &str) -> Value {
    json!({"content": [text(message)], "isError": true})
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect();
    String::from_utf8(bytes?).ok()
}

/// One request being handled.
struct Call<'a> {
    id: &'a Id,
    verdict: Verdict,
    /// The revision to answer in.
    rev: Revision,
    params: Value,
    /// 2026-07-28: the request's `clientCapabilities`; legacy: `{}`.
    caps: Value,
    ctx: RequestCtx,
}

impl Call<'_> {
    fn modern(&self) -> bool {
        self.verdict.era() == Era::Modern
    }

    fn meta(&self, key: &str) -> Option<&Value> {
        self.params.get("_meta").and_then(|m| m.get(key))
    }

    fn str_param(&self, name: &str) -> Option<&str> {
        self.params.get(name).and_then(Value::as_str)
    }
}

impl ExampleServer {
    /// A server in `mode`.
    pub fn new(mode: Mode) -> Self {
        let (hub, _) = broadcast::channel(256);
        ExampleServer {
            mode,
            signer: StateSigner::default(),
            hub,
            sessions: Mutex::new(HashMap::new()),
            dynamic_tool: AtomicBool::new(false),
            dynamic_prompt: AtomicBool::new(false),
            dynamic_resource: AtomicBool::new(false),
            tasks: std::sync::Arc::default(),
            discover_delay: Duration::ZERO,
            param_headers: mcpx_transport::ParamHeaders::new(header_table(Dynamic::default())),
        }
    }

    /// The same server, answering each `server/discover` `delay` late (for tests: a
    /// server under load, whose answer comes after a client's probe gave up waiting).
    pub fn with_discover_delay(mut self, delay: Duration) -> Self {
        self.discover_delay = delay;
        self
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    fn dynamic(&self) -> Dynamic {
        Dynamic {
            tool: self.dynamic_tool.load(Ordering::Relaxed),
            prompt: self.dynamic_prompt.load(Ordering::Relaxed),
            resource: self.dynamic_resource.load(Ordering::Relaxed),
        }
    }

    fn with_session<T>(&self, peer: Option<&Peer>, f: impl FnOnce(&mut Session) -> T) -> T {
        let key = peer.and_then(|p| p.session_id().map(str::to_owned));
        f(self.sessions.lock().entry(key).or_default())
    }

    /// The revision a request is answered in, or the error a server of this mode owes it.
    fn revision_for(&self, req: &Incoming, method: &str) -> Result<Revision, RpcError> {
        let verdict = req.verdict;
        match (self.mode, verdict) {
            (Mode::Dual, v) => Ok(v.revision()),
            (Mode::Strict(r), Verdict::Legacy { .. }) if r.era() == Era::Legacy => Ok(r),
            // A legacy-only server does not know modern requests: what it lacks is
            // -32601; what it has it cannot serve without `initialize`.
            (Mode::Strict(r), Verdict::Modern { .. }) if r.era() == Era::Legacy => {
                Err(if client_may_send(method, r) {
                    RpcError::params(&format!(
                        "this server speaks only MCP {r}: send initialize first; \
                         2026-07-28 per-request _meta is not understood"
                    ))
                } else {
                    RpcError::new(METHOD_NOT_FOUND, &format!("method not found: {method}"))
                })
            }
            (Mode::Strict(r), Verdict::Modern { revision }) if revision == r => Ok(r),
            // A modern-only server: `initialize` and anything else legacy gets
            // UnsupportedProtocolVersion listing what it supports (2026-07-28
            // basic/transports/stdio and basic/versioning: a modern-only server SHOULD
            // list its supported versions in the error to `initialize`).
            (Mode::Strict(r), v) => {
                let requested = req
                    .frame
                    .params()
                    .and_then(|p| serde_json::from_str::<Value>(p).ok())
                    .and_then(|p| {
                        p.get("protocolVersion")
                            .or_else(|| {
                                p.pointer("/_meta/io.modelcontextprotocol~1protocolVersion")
                            })
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    })
                    .unwrap_or_else(|| v.revision().as_str().to_owned());
                Err(RpcError::with_data(
                    UNSUPPORTED_PROTOCOL_VERSION,
                    &format!(
                        "unsupported protocol version {requested:?}; this server supports only {r}"
                    ),
                    json!({"supported": [r.as_str()], "requested": requested}),
                ))
            }
        }
    }

    async fn handle(&self, req: &Incoming, id: &Id, ctx: RequestCtx) -> Result<Value, RpcError> {
        let method = req.frame.method().unwrap_or_default();
        let rev = self.revision_for(req, method)?;
        let params: Value = match req.frame.params() {
            None => json!({}),
            Some(p) => match serde_json::from_str::<Value>(p) {
                Ok(v @ Value::Object(_)) => v,
                _ => return Err(RpcError::params("params must be an object")),
            },
        };
        let modern = req.verdict.era() == Era::Modern;
        let caps = if modern {
            // 2026-07-28 basic/index §_meta: clientCapabilities is required on every
            // request; missing is -32602.
            match params
                .get("_meta")
                .and_then(|m| m.get(meta::CLIENT_CAPABILITIES))
            {
                Some(c @ Value::Object(_)) => c.clone(),
                _ => {
                    return Err(RpcError::params(&format!(
                        "missing required _meta key {:?}",
                        meta::CLIENT_CAPABILITIES
                    )));
                }
            }
        } else {
            json!({})
        };
        // ext-tasks 2026-07-28: tasks/get|update|cancel exist for a modern request
        // through the extension (gated per request in `tasks::Tasks::method`).
        let exists = client_may_send(method, rev)
            || (modern && mcpx_protocol::method::tasks_extension_client_method(method, rev));
        if !exists {
            return Err(RpcError::new(
                METHOD_NOT_FOUND,
                &format!("method not found in MCP {rev}: {method}"),
            ));
        }
        if let Some(peer) = ctx.peer() {
            let p = peer.clone();
            self.with_session(Some(peer), |s| s.peer = Some(p));
        }
        let call = Call {
            id,
            verdict: req.verdict,
            rev,
            params,
            caps,
            ctx,
        };
        if method == "server/discover" && !self.discover_delay.is_zero() {
            tokio::time::sleep(self.discover_delay).await;
        }
        let result = match method {
            "initialize" => Ok(self.initialize(rev)),
            "ping" => Ok(json!({})),
            "server/discover" => Ok(json!({
                "supportedVersions": [rev.as_str()],
                "capabilities": capabilities(rev),
                "instructions": INSTRUCTIONS,
            })),
            "logging/setLevel" => self.set_level(&call),
            "tools/list" => Ok(json!({"tools": *fixtures::tools(rev, self.dynamic())})),
            "tools/call" => self.call_tool(&call).await,
            "resources/list" => self.list_resources(&call),
            "resources/templates/list" => {
                Ok(json!({"resourceTemplates": fixtures::templates(rev)}))
            }
            "resources/read" => self.read_resource(&call),
            "resources/subscribe" | "resources/unsubscribe" => self.subscribe(&call, method),
            "prompts/list" => Ok(json!({"prompts": fixtures::prompts(rev, self.dynamic())})),
            "prompts/get" => self.get_prompt(&call).await,
            "completion/complete" => complete(&call),
            "subscriptions/listen" => self.listen(&call).await,
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" | "tasks/update" => {
                let r = self.task_req(&call);
                self.tasks.method(&r, method).await
            }
            other => Err(RpcError::new(
                METHOD_NOT_FOUND,
                &format!("method not found: {other}"),
            )),
        }?;
        Ok(envelope(result, &call, method))
    }

    fn task_req<'a>(&self, c: &'a Call<'_>) -> tasks::Req<'a> {
        tasks::Req {
            rev: c.rev,
            modern: c.modern(),
            params: &c.params,
            caps: &c.caps,
            session: c.ctx.peer().and_then(|p| p.session_id().map(str::to_owned)),
            cancel: c.ctx.cancelled(),
            ctx: &c.ctx,
        }
    }

    fn initialize(&self, rev: Revision) -> Value {
        json!({
            "protocolVersion": rev.as_str(),
            "capabilities": capabilities(rev),
            "serverInfo": server_info(rev),
            "instructions": INSTRUCTIONS,
        })
    }

    fn set_level(&self, c: &Call<'_>) -> Result<Value, RpcError> {
        let level = c
            .str_param("level")
            .and_then(level_index)
            .ok_or_else(|| RpcError::params("level must be one of the eight log levels"))?;
        self.with_session(c.ctx.peer(), |s| s.level = Some(level));
        Ok(json!({}))
    }

    /// The level below which log messages for this request are dropped: the session's
    /// `logging/setLevel` (legacy), the request's `_meta` logLevel (2026-07-28
    /// server/utilities/logging: absent means the server MUST NOT log). `None`: no logs.
    fn log_threshold(&self, c: &Call<'_>) -> Option<usize> {
        if c.modern() {
            c.meta(meta::LOG_LEVEL)
                .and_then(Value::as_str)
                .and_then(level_index)
        } else {
            self.with_session(c.ctx.peer(), |s| s.level)
        }
    }

    async fn log(&self, c: &Call<'_>, level: usize, data: Value) {
        let Some(min) = self.log_threshold(c) else {
            return;
        };
        if level < min {
            return;
        }
        // The request it is about, named for clients on stdio and HTTP+SSE, where nothing
        // else says which of several requests in flight a log belongs to (mcpx's
        // extension: meta::RELATED_REQUEST).
        let params = json!({"level": LEVELS[level], "logger": SERVER_NAME, "data": data,
            "_meta": {meta::RELATED_REQUEST: c.id}});
        let _ = c
            .ctx
            .notify(Frame::notification(
                "notifications/message",
                Some(&raw(&params)),
            ))
            .await;
    }

    fn list_resources(&self, c: &Call<'_>) -> Result<Value, RpcError> {
        let all: Vec<Value> = fixtures::resources(c.rev, self.dynamic())
            .iter()
            .map(|r| fixtures::resource_entry(c.rev, r))
            .collect();
        let start = match c.params.get("cursor") {
            None => 0,
            Some(Value::String(s)) => s
                .strip_prefix("c")
                .and_then(unhex)
                .and_then(|t| t.strip_prefix("offset=").and_then(|n| n.parse().ok()))
                .filter(|n: &usize| *n <= all.len())
                .ok_or_else(|| RpcError::params("invalid cursor"))?,
            Some(_) => return Err(RpcError::params("cursor must be a string")),
        };
        let end = (start + PAGE_SIZE).min(all.len());
        let mut result = json!({"resources": all.get(start..end).unwrap_or_default()});
        if end < all.len() {
            // Opaque to clients (every revision's server/utilities/pagination).
            result["nextCursor"] = json!(format!("c{}", hex(&format!("offset={end}"))));
        }
        Ok(result)
    }

    fn read_resource(&self, c: &Call<'_>) -> Result<Value, RpcError> {
        let uri = c
            .str_param("uri")
            .ok_or_else(|| RpcError::params("resources/read needs a string uri"))?;
        let known = fixtures::resources(c.rev, self.dynamic());
        let contents = if uri == "test://confirm-resource" && known.iter().any(|r| r.uri == uri) {
            let req = confirm_request("Reveal the confirm-resource?");
            let answers = match self.modern_inputs(c, vec![("confirm", req)], None)? {
                Round::Ask(v) => return Ok(v),
                Round::Ready(a) => a,
            };
            let action = answers
                .get("confirm")
                .and_then(|a| a.get("action"))
                .and_then(Value::as_str)
                .unwrap_or("cancel");
            json!([{"uri": uri, "mimeType": "text/plain", "text": format!("confirm-resource read after {action}")}])
        } else if let Some(r) = known.iter().find(|r| r.uri == uri) {
            if r.mime == "image/png" {
                json!([{"uri": uri, "mimeType": r.mime, "blob": PNG}])
            } else {
                json!([{"uri": uri, "mimeType": r.mime, "text": format!("This is the content of {uri}.")}])
            }
        } else if let Some((template, value)) = fixtures::match_template(uri) {
            let body = if template.contains("{id}") {
                format!("Data for id {value}")
            } else {
                format!("Profile of {value}")
            };
            json!([{"uri": uri, "mimeType": "text/plain", "text": body}])
        } else {
            // -32002 on legacy, -32602 on 2026-07-28 (server/resources §Error Handling),
            // with the URI in `data` (SEP-2164).
            return Err(RpcError::with_data(
                resource_not_found(c.rev),
                "Resource not found",
                json!({"uri": uri}),
            ));
        };
        Ok(json!({ "contents": contents }))
    }

    fn subscribe(&self, c: &Call<'_>, method: &str) -> Result<Value, RpcError> {
        let uri = c
            .str_param("uri")
            .ok_or_else(|| RpcError::params("a string uri is required"))?
            .to_owned();
        let known = fixtures::resources(c.rev, self.dynamic())
            .iter()
            .any(|r| r.uri == uri)
            || fixtures::match_template(&uri).is_some();
        if !known {
            return Err(RpcError::with_data(
                resource_not_found(c.rev),
                "Resource not found",
                json!({"uri": uri}),
            ));
        }
        self.with_session(c.ctx.peer(), |s| {
            if method == "resources/subscribe" {
                s.subscribed.insert(uri);
            } else {
                s.subscribed.remove(&uri);
            }
        });
        Ok(json!({}))
    }

    async fn get_prompt(&self, c: &Call<'_>) -> Result<Value, RpcError> {
        let name = c
            .str_param("name")
            .ok_or_else(|| RpcError::params("prompts/get needs a string name"))?;
        if !fixtures::prompts(c.rev, self.dynamic())
            .iter()
            .any(|p| p["name"] == name)
        {
            return Err(RpcError::params(&format!("unknown prompt: {name}")));
        }
        let args = c.params.get("arguments").cloned().unwrap_or(json!({}));
        let arg = |n: &str| args.get(n).and_then(Value::as_str).map(str::to_owned);
        let user = |content: Value| json!({"role": "user", "content": content});
        let messages = match name {
            "test_simple_prompt" => vec![user(text("This is a simple prompt for testing."))],
            "test_prompt_with_arguments" => {
                let a1 = arg("arg1")
                    .ok_or_else(|| RpcError::params("missing required argument arg1"))?;
                let a2 = arg("arg2").unwrap_or_default();
                vec![user(text(&format!(
                    "Prompt with arguments: arg1='{a1}', arg2='{a2}'"
                )))]
            }
            "test_prompt_with_embedded_resource" => {
                let uri = arg("resourceUri")
                    .ok_or_else(|| RpcError::params("missing required argument resourceUri"))?;
                vec![
                    user(
                        json!({"type": "resource", "resource": {"uri": uri, "mimeType": "text/plain",
                        "text": "Embedded resource content for testing."}}),
                    ),
                    user(text("Please process the embedded resource above.")),
                ]
            }
            "test_prompt_with_image" => vec![
                user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
                user(text("Please analyze the image above.")),
            ],
            "test_input_required_result_prompt" => {
                let req = elicit_request(
                    "What context should the prompt use?",
                    json!({"context": {"type": "string"}}),
                    &["context"],
                );
                let answers = match self.inputs(c, vec![("user_context", req)]).await? {
                    Asked::Ask(v) => return Ok(v),
                    Asked::Failed(m) => return Err(RpcError::new(INTERNAL_ERROR, &m)),
                    Asked::Got(a) => a,
                };
                let context = answers
                    .get("user_context")
                    .and_then(|a| a.pointer("/content/context"))
                    .and_then(Value::as_str)
                    .unwrap_or("(none)")
                    .to_owned();
                vec![user(text(&format!("Use this context: {context}")))]
            }
            _ => vec![user(text(&format!("This is {name}.")))],
        };
        Ok(json!({"description": format!("The {name} prompt"), "messages": messages}))
    }

    /// Announces a change to modern listeners and legacy sessions.
    async fn announce(&self, ev: Event) {
        let _ = self.hub.send(ev.clone());
        let peers: Vec<Peer> = self
            .sessions
            .lock()
            .values()
            .filter(|s| match &ev {
                Event::Updated(uri) => s.subscribed.contains(uri),
                _ => true,
            })
            .filter_map(|s| s.peer.clone())
            .collect();
        let params = match &ev {
            Event::Updated(uri) => Some(raw(&json!({ "uri": uri }))),
            _ => None,
        };
        for peer in peers {
            let _ = peer
                .notify(Frame::notification(ev.method(), params.as_deref()))
                .await;
        }
    }

    /// `subscriptions/listen` (2026-07-28 basic/patterns/subscriptions): the
    /// acknowledgement first, then only the requested kinds, each tagged with the
    /// listen request's id; open until the client cancels it.
    async fn listen(&self, c: &Call<'_>) -> Result<Value, RpcError> {
        let filter = match c.params.get("notifications") {
            None => json!({}),
            Some(f @ Value::Object(_)) => f.clone(),
            Some(_) => return Err(RpcError::params("notifications must be an object")),
        };
        let flag = |k: &str| filter.get(k).and_then(Value::as_bool).unwrap_or(false);
        let uris: Vec<String> = filter
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let mut granted = Map::new();
        for k in [
            "toolsListChanged",
            "promptsListChanged",
            "resourcesListChanged",
        ] {
            if flag(k) {
                granted.insert(k.to_owned(), json!(true));
            }
        }
        if !uris.is_empty() {
            granted.insert("resourceSubscriptions".into(), json!(uris));
        }
        let sub_id = serde_json::to_value(c.id).unwrap_or(Value::Null);
        let tag = json!({ meta::SUBSCRIPTION_ID: sub_id });
        // Subscribe before acknowledging, so nothing after the ack is missed.
        let mut rx = self.hub.subscribe();
        let ack = json!({"_meta": tag, "notifications": granted});
        let _ = c
            .ctx
            .notify(Frame::notification(
                "notifications/subscriptions/acknowledged",
                Some(&raw(&ack)),
            ))
            .await;
        loop {
            let ev = tokio::select! {
                // Cancellation first: nothing is delivered after the client cancelled.
                biased;
                () = c.ctx.cancelled().cancelled() => break,
                ev = rx.recv() => match ev {
                    Ok(ev) => ev,
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "subscription lagged");
                        continue;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
            };
            let wanted = match &ev {
                Event::ToolsChanged => flag("toolsListChanged"),
                Event::PromptsChanged => flag("promptsListChanged"),
                Event::ResourcesChanged => flag("resourcesListChanged"),
                Event::Updated(uri) => uris.contains(uri),
            };
            if !wanted {
                continue;
            }
            let mut params = json!({ "_meta": tag });
            if let Event::Updated(uri) = &ev {
                params["uri"] = json!(uri);
            }
            if c.ctx
                .notify(Frame::notification(ev.method(), Some(&raw(&params))))
                .await
                .is_err()
            {
                break;
            }
        }
        // Cancelled: the transport sends no response. Otherwise this is the graceful end.
        Ok(json!({ "_meta": tag }))
    }

    /// Asks the client for input on a modern request: -32021 for undeclared
    /// capabilities, else one MRTR round.
    fn modern_inputs(
        &self,
        c: &Call<'_>,
        reqs: Vec<(&str, Value)>,
        state: Option<Value>,
    ) -> Result<Round, RpcError> {
        if !c.modern() {
            return Err(RpcError::new(
                INTERNAL_ERROR,
                "input_required is modern only",
            ));
        }
        if let Some(e) = missing_capabilities(&c.caps, &reqs) {
            return Err(e);
        }
        let retry = Retry::read(&c.params, &self.signer)?;
        gather(&retry, &reqs, state.map(|s| self.signer.sign(&s)))
    }

    /// Asks the client for input in either era: server-to-client requests on legacy
    /// (all at once, see [`Self::legacy_asks`]), one MRTR round on 2026-07-28.
    async fn inputs(&self, c: &Call<'_>, reqs: Vec<(&str, Value)>) -> Result<Asked, RpcError> {
        if c.modern() {
            return Ok(match self.modern_inputs(c, reqs, None)? {
                Round::Ask(v) => Asked::Ask(v),
                Round::Ready(m) => Asked::Got(m),
            });
        }
        let mut got = Map::new();
        for (key, outcome) in self.legacy_asks(c, reqs).await {
            match outcome {
                Ok(v) => {
                    got.insert(key, v);
                }
                Err((_, m)) => return Ok(Asked::Failed(m)),
            }
        }
        Ok(Asked::Got(got))
    }

    /// Legacy: puts every question to the client at once, each a server-to-client
    /// request whose `_meta` names the key the 2026-07-28 form of the fixture uses
    /// ([`meta::INPUT_KEY`]), and waits for every answer (or the client's cancel).
    /// Asking at once is what lets a gateway put them to a modern client in one
    /// `input_required` round, as the 2026-07-28 form does.
    async fn legacy_asks(
        &self,
        c: &Call<'_>,
        reqs: Vec<(&str, Value)>,
    ) -> Vec<(String, Result<Value, (i64, String)>)> {
        let mut set = tokio::task::JoinSet::new();
        for (i, (key, req)) in reqs.into_iter().enumerate() {
            let method = req
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let mut params = req.get("params").cloned().unwrap_or(json!({}));
            if let Some(o) = params.as_object_mut()
                && let Some(m) = o
                    .entry("_meta")
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
            {
                m.insert(meta::INPUT_KEY.to_owned(), json!(key));
                m.insert(meta::RELATED_REQUEST.to_owned(), json!(c.id));
            }
            let ctx = c.ctx.clone();
            let key = key.to_owned();
            set.spawn(async move {
                let outcome = match ctx.request(&method, Some(&raw(&params)), ASK_TIMEOUT).await {
                    Err(e) => Err((INTERNAL_ERROR, format!("{method} failed: {e}"))),
                    Ok(f) => match f.error() {
                        Some(e) => Err((
                            e.code,
                            format!(
                                "the client answered {method} with error {}: {}",
                                e.code, e.message
                            ),
                        )),
                        None => Ok(f
                            .result()
                            .and_then(|r| serde_json::from_str(r).ok())
                            .unwrap_or(Value::Null)),
                    },
                };
                (i, key, outcome)
            });
        }
        let mut out = tokio::select! {
            out = set.join_all() => out,
            // Dropping the set aborts the asks still waiting.
            () = c.ctx.cancelled().cancelled() => Vec::new(),
        };
        out.sort_by_key(|(i, ..)| *i);
        out.into_iter().map(|(_, k, o)| (k, o)).collect()
    }

    /// The legacy forms of the asking fixtures whose 2026-07-28 form carries state
    /// between `input_required` rounds: the same questions under the same keys, as
    /// server-to-client requests. A legacy call simply waits for the answers, so it
    /// needs no `requestState`; a gateway in front mints its own (E-13).
    async fn legacy_asking_fixture(&self, c: &Call<'_>, name: &str) -> Result<Value, RpcError> {
        let content = match name {
            "test_input_required_result_multi_round" => {
                let mut answers = Vec::new();
                for (key, step) in [("step1", 1), ("step2", 2)] {
                    match self.inputs(c, vec![(key, step_question(step))]).await? {
                        Asked::Got(a) => answers.push(a.get(key).cloned().unwrap_or_default()),
                        Asked::Failed(m) => return Ok(tool_error(&m)),
                        Asked::Ask(v) => return Ok(v),
                    }
                }
                let field = |i: usize, f: &str| {
                    answers[i]
                        .pointer(&format!("/content/{f}"))
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_owned()
                };
                format!(
                    "{}'s favorite color is {}",
                    field(0, "name"),
                    field(1, "color")
                )
            }
            "test_input_required_result_multiple_inputs" => {
                match self.inputs(c, multiple_questions()).await? {
                    Asked::Got(a) => multiple_answer(&a),
                    Asked::Failed(m) => return Ok(tool_error(&m)),
                    Asked::Ask(v) => return Ok(v),
                }
            }
            "test_input_required_result_capabilities" => {
                // A legacy server cannot tell which questions a gateway's client can
                // answer: it asks them all and uses the answers it gets (a client that
                // cannot answer one refuses it with -32601).
                let got: Map<String, Value> = self
                    .legacy_asks(c, capability_questions())
                    .await
                    .into_iter()
                    .filter_map(|(k, o)| o.ok().map(|v| (k, v)))
                    .collect();
                if got.is_empty() {
                    return Ok(tool_error("the client answered none of the questions"));
                }
                format!("answered: {}", Value::Object(got))
            }
            // request_state and tampered_state: one confirmation.
            _ => match self
                .inputs(c, vec![("confirm", confirm_request("Please confirm"))])
                .await?
            {
                Asked::Got(a) => format!(
                    "state-ok: confirmed within the call; ok = {}",
                    a.get("confirm")
                        .and_then(|r| r.pointer("/content/ok"))
                        .cloned()
                        .unwrap_or(Value::Null)
                ),
                Asked::Failed(m) => return Ok(tool_error(&m)),
                Asked::Ask(v) => return Ok(v),
            },
        };
        Ok(tool_result(vec![text(&content)]))
    }

    async fn call_tool(&self, c: &Call<'_>) -> Result<Value, RpcError> {
        let name = c
            .str_param("name")
            .ok_or_else(|| RpcError::params("tools/call needs a string name"))?;
        let tools = fixtures::tools(c.rev, self.dynamic());
        let def = tools
            .iter()
            .find(|t| t["name"] == name)
            .ok_or_else(|| RpcError::params(&format!("unknown tool: {name}")))?;
        let args = match c.params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(a @ Value::Object(_)) => a.clone(),
            Some(_) => return Err(RpcError::params("arguments must be an object")),
        };
        if let Err(why) = validate(&def["inputSchema"], &args) {
            let message = format!("invalid arguments for {name}: {why}");
            // 2025-11-25 server/tools §Error Handling: input validation errors are tool
            // execution errors (isError) so the model can correct itself; before, they
            // were protocol errors (-32602).
            return if c.rev.facts().input_validation_is_tool_error {
                Ok(tool_error(&message))
            } else {
                Err(RpcError::params(&message))
            };
        }
        let mut args = args;
        // `test_tool_with_task` gathers its input on the request (MRTR) and only then
        // becomes a task (SEP-2663 451f5e1); a request without the extension is refused
        // by the tasks layer (-32021) before anything is asked.
        if name == "test_tool_with_task"
            && c.modern()
            && mcpx_protocol::task::declares_extension(&c.caps)
        {
            match self.modern_inputs(c, vec![("user_name", name_question())], None)? {
                Round::Ask(v) => return Ok(v),
                Round::Ready(a) => {
                    args["user_name"] = a
                        .get("user_name")
                        .and_then(|r| r.pointer("/content/name"))
                        .cloned()
                        .unwrap_or(Value::Null);
                }
            }
        }
        if let Some(r) = self.tasks.tool_call(&self.task_req(c), name, &args).await {
            return r;
        }
        let f = features(c.rev);
        let got = |a: &Map<String, Value>, k: &str| a.get(k).cloned().unwrap_or(Value::Null);
        let content = match name {
            "test_simple_text" => vec![text("This is a simple text response for testing.")],
            "test_image_content" => {
                vec![json!({"type": "image", "data": PNG, "mimeType": "image/png"})]
            }
            "test_audio_content" => {
                vec![json!({"type": "audio", "data": WAV, "mimeType": "audio/wav"})]
            }
            "test_embedded_resource" => vec![embedded("test://embedded-resource")],
            "test_multiple_content_types" => vec![
                text("Multiple content types test:"),
                json!({"type": "image", "data": PNG, "mimeType": "image/png"}),
                embedded("test://mixed-content-resource"),
            ],
            "test_resource_link" => {
                vec![json!({"type": "resource_link", "uri": "test://static-text",
                "name": "static-text", "mimeType": "text/plain"})]
            }
            "test_error_handling" => {
                return Ok(tool_error(
                    "This tool intentionally returns an error for testing.",
                ));
            }
            "test_add" => {
                let a = args["a"].as_f64().unwrap_or_default();
                let b = args["b"].as_f64().unwrap_or_default();
                vec![text(&format!("The sum of {a} and {b} is {}", a + b))]
            }
            "test_custom_headers" => vec![text(&format!("arguments: {args}"))],
            "test_structured_content" => {
                let v = json!({"temperature": 22.5, "conditions": "Partly cloudy"});
                return Ok(json!({"content": [text(&v.to_string())], "structuredContent": v}));
            }
            "test_structured_value"
                if c.rev.facts().structured_content == StructuredContent::AnyValue =>
            {
                let v = json!([1, 2, 3]);
                return Ok(json!({"content": [text(&v.to_string())], "structuredContent": v}));
            }
            "test_tool_with_progress" => {
                let steps = args.get("steps").and_then(Value::as_u64).unwrap_or(3);
                let delay = args.get("delayMs").and_then(Value::as_u64).unwrap_or(50);
                let token = c.params.pointer("/_meta/progressToken").cloned();
                for i in 1..=steps {
                    tokio::select! {
                        () = c.ctx.cancelled().cancelled() => {
                            // Every revision's cancellation page: no response is sent.
                            return Err(RpcError::new(INTERNAL_ERROR, "cancelled"));
                        }
                        () = tokio::time::sleep(Duration::from_millis(delay)) => {}
                    }
                    if let Some(t) = &token {
                        let mut p = json!({"progressToken": t, "progress": i, "total": steps});
                        if f.progress_message {
                            p["message"] = json!(format!("step {i} of {steps}"));
                        }
                        let _ = c
                            .ctx
                            .notify(Frame::notification(
                                "notifications/progress",
                                Some(&raw(&p)),
                            ))
                            .await;
                    }
                }
                vec![text(&format!(
                    "Progress test completed after {steps} steps."
                ))]
            }
            "test_tool_with_logging" | "test_logging_tool" => {
                for (i, level) in LEVELS.iter().enumerate() {
                    self.log(c, i, json!(format!("a {level} message from {name}")))
                        .await;
                }
                vec![text("Logged one message at each level.")]
            }
            "test_trigger_tool_change" => {
                let on = !self.dynamic_tool.fetch_xor(true, Ordering::Relaxed);
                self.param_headers.publish(header_table(self.dynamic()));
                self.announce(Event::ToolsChanged).await;
                vec![text(&format!(
                    "test_dynamic_tool is now {}",
                    if on { "listed" } else { "gone" }
                ))]
            }
            "test_trigger_prompt_change" => {
                let on = !self.dynamic_prompt.fetch_xor(true, Ordering::Relaxed);
                self.announce(Event::PromptsChanged).await;
                vec![text(&format!(
                    "test_dynamic_prompt is now {}",
                    if on { "listed" } else { "gone" }
                ))]
            }
            "test_trigger_resource_change" => {
                let on = !self.dynamic_resource.fetch_xor(true, Ordering::Relaxed);
                self.announce(Event::ResourcesChanged).await;
                vec![text(&format!(
                    "test://dynamic-resource is now {}",
                    if on { "listed" } else { "gone" }
                ))]
            }
            "test_trigger_resource_update" => {
                let uri = args
                    .get("uri")
                    .and_then(Value::as_str)
                    .unwrap_or("test://watched-resource")
                    .to_owned();
                self.announce(Event::Updated(uri.clone())).await;
                vec![text(&format!("announced an update of {uri}"))]
            }
            "test_dynamic_tool" => vec![text("The dynamic tool answers.")],
            // The legacy forms of the 2026-07-28 asking fixtures: the same questions
            // under the same keys, as server-to-client requests (see `legacy_asks`).
            "test_missing_capability" if !c.modern() => {
                let ask = vec![(
                    "capital_question",
                    sampling_request("What is the capital of France?", 100),
                )];
                match self.legacy_asks(c, ask).await.pop() {
                    Some((_, Ok(a))) => vec![text(&format!("LLM response: {}", sampled_text(&a)))],
                    // A client without sampling answers -32601: the tool cannot run.
                    // -32021 is in JSON-RPC's implementation-defined server-error range,
                    // so a legacy client may be sent it; 2026-07-28 gives it this meaning
                    // (basic/index §_meta), which a gateway relays unchanged (E-25).
                    Some((_, Err((METHOD_NOT_FOUND, _)))) => {
                        return Err(RpcError::with_data(
                            MISSING_REQUIRED_CLIENT_CAPABILITY,
                            "test_missing_capability needs the sampling capability",
                            json!({"requiredCapabilities": {"sampling": {}}}),
                        ));
                    }
                    Some((_, Err((_, m)))) => return Ok(tool_error(&m)),
                    None => return Err(RpcError::new(INTERNAL_ERROR, "cancelled")),
                }
            }
            "test_input_required_result_request_state"
            | "test_input_required_result_tampered_state"
            | "test_input_required_result_multiple_inputs"
            | "test_input_required_result_multi_round"
            | "test_input_required_result_capabilities"
                if !c.modern() =>
            {
                return self.legacy_asking_fixture(c, name).await;
            }
            "test_sampling" | "test_input_required_result_sampling" | "test_missing_capability" => {
                let prompt = args
                    .get("prompt")
                    .and_then(Value::as_str)
                    .unwrap_or("What is the capital of France?");
                let key = if name == "test_sampling" {
                    "sampling"
                } else {
                    "capital_question"
                };
                match self
                    .inputs(c, vec![(key, sampling_request(prompt, 100))])
                    .await?
                {
                    Asked::Ask(v) => return Ok(v),
                    Asked::Failed(m) => return Ok(tool_error(&m)),
                    Asked::Got(a) => vec![text(&format!(
                        "LLM response: {}",
                        sampled_text(&got(&a, key))
                    ))],
                }
            }
            "test_elicitation"
            | "test_input_required_result_elicitation"
            | "test_streaming_elicitation" => {
                let (key, req) = if name == "test_elicitation" {
                    let message = args
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("Please provide your information");
                    (
                        "user_info",
                        elicit_request(
                            message,
                            json!({
                                "username": {"type": "string", "description": "Your username"},
                                "email": {"type": "string", "description": "Your email address", "format": "email"}
                            }),
                            &["username", "email"],
                        ),
                    )
                } else {
                    ("user_name", name_question())
                };
                match self.inputs(c, vec![(key, req)]).await? {
                    Asked::Ask(v) => return Ok(v),
                    Asked::Failed(m) => return Ok(tool_error(&m)),
                    Asked::Got(a) => {
                        let r = got(&a, key);
                        match (
                            r["action"].as_str(),
                            r.pointer("/content/name").and_then(Value::as_str),
                        ) {
                            (Some("accept"), Some(n)) => vec![text(&format!("Hello, {n}!"))],
                            (Some("accept"), None) => {
                                vec![text(&format!("User provided: {}", r["content"]))]
                            }
                            (action, _) => vec![text(&format!(
                                "The user did not accept ({}).",
                                action.unwrap_or("no action")
                            ))],
                        }
                    }
                }
            }
            "test_elicitation_sep1034_defaults" | "test_elicitation_sep1330_enums" => {
                let req = if name == "test_elicitation_sep1034_defaults" {
                    elicit_request(
                        "Please review and update the form fields with defaults",
                        json!({
                            "name": {"type": "string", "description": "User name", "default": "John Doe"},
                            "age": {"type": "integer", "description": "User age", "default": 30},
                            "score": {"type": "number", "description": "User score", "default": 95.5},
                            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                            "verified": {"type": "boolean", "description": "Verification status", "default": true}
                        }),
                        &[],
                    )
                } else {
                    elicit_request(
                        "Please select options from the enum fields",
                        json!({
                            "untitledSingle": {"type": "string", "description": "Untitled single-select", "enum": ["option1", "option2", "option3"]},
                            "titledSingle": {"type": "string", "description": "Titled single-select", "oneOf": [
                                {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}]},
                            "legacyEnum": {"type": "string", "description": "Legacy titled enum", "enum": ["opt1", "opt2"], "enumNames": ["Option One", "Option Two"]},
                            "untitledMulti": {"type": "array", "description": "Untitled multi-select", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                            "titledMulti": {"type": "array", "description": "Titled multi-select", "items": {"anyOf": [
                                {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}]}}
                        }),
                        &[],
                    )
                };
                match self.inputs(c, vec![("form", req)]).await? {
                    Asked::Ask(v) => return Ok(v),
                    Asked::Failed(m) => return Ok(tool_error(&m)),
                    Asked::Got(a) => {
                        vec![text(&format!("Elicitation completed: {}", got(&a, "form")))]
                    }
                }
            }
            "test_elicitation_url" => {
                let mut p = json!({"mode": "url", "message": "Please sign in to continue",
                    "url": "https://example.com/mcpx/sign-in"});
                if f.elicitation_id {
                    p["elicitationId"] = json!("mcpx-elicitation-1");
                }
                let req = json!({"method": "elicitation/create", "params": p});
                match self.inputs(c, vec![("sign_in", req)]).await? {
                    Asked::Ask(v) => return Ok(v),
                    Asked::Failed(m) => return Ok(tool_error(&m)),
                    Asked::Got(a) => {
                        let action = got(&a, "sign_in")["action"]
                            .as_str()
                            .unwrap_or("cancel")
                            .to_owned();
                        if f.elicitation_id && action == "accept" {
                            // 2025-11-25 client/elicitation §URL Mode: the server MAY
                            // notify completion of the out-of-band interaction.
                            let n = json!({"elicitationId": "mcpx-elicitation-1"});
                            let _ = c
                                .ctx
                                .notify(Frame::notification(
                                    "notifications/elicitation/complete",
                                    Some(&raw(&n)),
                                ))
                                .await;
                        }
                        vec![text(&format!("URL elicitation: {action}"))]
                    }
                }
            }
            "test_list_roots" | "test_input_required_result_list_roots" => {
                let req = json!({"method": "roots/list", "params": {}});
                match self.inputs(c, vec![("client_roots", req)]).await? {
                    Asked::Ask(v) => return Ok(v),
                    Asked::Failed(m) => return Ok(tool_error(&m)),
                    Asked::Got(a) => vec![text(&format!(
                        "Client roots: {}",
                        root_uris(&got(&a, "client_roots"))
                    ))],
                }
            }
            "test_input_required_result_request_state"
            | "test_input_required_result_tampered_state" => {
                let state = json!({"tool": name, "step": 1});
                let retry = Retry::read(&c.params, &self.signer)?;
                let req = confirm_request("Please confirm");
                match self.modern_inputs(c, vec![("confirm", req)], Some(state))? {
                    Round::Ask(v) => return Ok(v),
                    Round::Ready(a) => {
                        if retry.step_of(name).is_none() {
                            return Err(RpcError::params(
                                "requestState is missing or belongs to another request",
                            ));
                        }
                        let ok = got(&a, "confirm")
                            .pointer("/content/ok")
                            .cloned()
                            .unwrap_or(Value::Null);
                        vec![text(&format!("state-ok: requestState verified; ok = {ok}"))]
                    }
                }
            }
            // Without a task (the extension undeclared), the questions these ask as a
            // task's inputRequests are asked on the request.
            "confirm_delete" => {
                let file = tasks::filename(&args);
                let q = tasks::confirm_delete_request(file);
                match self.inputs(c, vec![("confirm", q)]).await? {
                    Asked::Ask(v) => return Ok(v),
                    Asked::Failed(m) => return Ok(tool_error(&m)),
                    Asked::Got(a) => vec![text(&tasks::confirm_delete_text(file, &a))],
                }
            }
            "multi_input" => match self.inputs(c, tasks::multi_input_requests()).await? {
                Asked::Ask(v) => return Ok(v),
                Asked::Failed(m) => return Ok(tool_error(&m)),
                Asked::Got(a) => vec![text(&tasks::multi_input_text(&a))],
            },
            "test_input_required_result_multiple_inputs" => {
                match self.modern_inputs(
                    c,
                    multiple_questions(),
                    Some(json!({"tool": name, "step": 1})),
                )? {
                    Round::Ask(v) => return Ok(v),
                    Round::Ready(a) => vec![text(&multiple_answer(&a))],
                }
            }
            "test_input_required_result_multi_round" => {
                let retry = Retry::read(&c.params, &self.signer)?;
                let step2 = step_question(2);
                match retry.step_of(name).cloned() {
                    Some(s) if s["step"] == 2 => {
                        match self.modern_inputs(c, vec![("step2", step2)], Some(s.clone()))? {
                            Round::Ask(v) => return Ok(v),
                            Round::Ready(a) => vec![text(&format!(
                                "{}'s favorite color is {}",
                                s["name"].as_str().unwrap_or("?"),
                                got(&a, "step2")
                                    .pointer("/content/color")
                                    .and_then(Value::as_str)
                                    .unwrap_or("?")
                            ))],
                        }
                    }
                    _ => {
                        let step1 = step_question(1);
                        match self.modern_inputs(
                            c,
                            vec![("step1", step1)],
                            Some(json!({"tool": name, "step": 1})),
                        )? {
                            Round::Ask(v) => return Ok(v),
                            Round::Ready(a) => {
                                let who = got(&a, "step1")
                                    .pointer("/content/name")
                                    .cloned()
                                    .unwrap_or(json!("?"));
                                let state = self
                                    .signer
                                    .sign(&json!({"tool": name, "step": 2, "name": who}));
                                return Ok(json!({"resultType": "input_required",
                                    "inputRequests": {"step2": step2}, "requestState": state}));
                            }
                        }
                    }
                }
            }
            "test_input_required_result_capabilities" => {
                let candidates = capability_questions();
                let usable: Vec<(&str, Value)> = candidates
                    .into_iter()
                    .filter(|(_, r)| mrtr::client_can(&c.caps, r))
                    .collect();
                if usable.is_empty() {
                    let need = [("capital_question", sampling_request("", 1))];
                    return Err(missing_capabilities(&c.caps, &need)
                        .unwrap_or_else(|| RpcError::new(INTERNAL_ERROR, "no capability")));
                }
                match self.modern_inputs(c, usable, None)? {
                    Round::Ask(v) => return Ok(v),
                    Round::Ready(a) => vec![text(&format!("answered: {}", Value::Object(a)))],
                }
            }
            other => vec![text(&format!("{other} has nothing to do in MCP {}", c.rev))],
        };
        Ok(tool_result(content))
    }
}

/// The outcome of asking the client for input.
enum Asked {
    /// Every answer, by key.
    Got(Map<String, Value>),
    /// 2026-07-28: the `input_required` result to return.
    Ask(Value),
    /// Legacy: the client failed or refused; reported as a tool error.
    Failed(String),
}

const INSTRUCTIONS: &str =
    "mcpx's reference server: every MCP feature, with the conformance suite's fixtures.";

fn server_info(rev: Revision) -> Value {
    let mut v = json!({"name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION")});
    if features(rev).titles {
        v["title"] = json!("mcpx example server");
    }
    v
}

/// The server's capabilities in `rev`.
fn capabilities(rev: Revision) -> Value {
    let mut c = json!({
        "tools": {"listChanged": true},
        "resources": {"subscribe": true, "listChanged": true},
        "prompts": {"listChanged": true},
        "logging": {},
    });
    // 2025-03-26 onwards: `completion/complete` needs the declared capability (C-C9).
    if rev.facts().completions_capability {
        c["completions"] = json!({});
    }
    tasks::capabilities(rev, &mut c);
    c
}

/// Shapes a result for the era: 2026-07-28 results carry `resultType`, `serverInfo` in
/// `_meta`, and on cacheable complete results `ttlMs`/`cacheScope` (schema
/// `CacheableResult`; 2026-07-28 server/utilities/caching). Legacy results pass as built.
fn envelope(mut result: Value, c: &Call<'_>, method: &str) -> Value {
    if !c.rev.facts().result_type || !c.modern() {
        return result;
    }
    let Some(o) = result.as_object_mut() else {
        return result;
    };
    let complete = !o.contains_key("resultType");
    if complete {
        o.insert("resultType".into(), json!("complete"));
        if CACHEABLE_METHODS.contains(&method) {
            o.insert("ttlMs".into(), json!(0));
            o.insert("cacheScope".into(), json!("public"));
        }
    }
    let meta = o.entry("_meta").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.insert(meta::SERVER_INFO.into(), server_info(c.rev));
    }
    result
}

fn embedded(uri: &str) -> Value {
    json!({"type": "resource", "resource": {"uri": uri, "mimeType": "text/plain",
        "text": "This is an embedded resource content."}})
}

/// The name question the asking fixtures share (key `user_name`).
fn name_question() -> Value {
    elicit_request(
        "What is your name?",
        json!({"name": {"type": "string"}}),
        &["name"],
    )
}

/// The two questions of `test_input_required_result_multi_round` (keys `step1`, `step2`).
fn step_question(step: u8) -> Value {
    if step == 1 {
        elicit_request(
            "Step 1: What is your name?",
            json!({"name": {"type": "string"}}),
            &["name"],
        )
    } else {
        elicit_request(
            "Step 2: What is your favorite color?",
            json!({"color": {"type": "string"}}),
            &["color"],
        )
    }
}

/// The three questions of `test_input_required_result_multiple_inputs`.
fn multiple_questions() -> Vec<(&'static str, Value)> {
    vec![
        ("user_name", name_question()),
        ("greeting", sampling_request("Generate a greeting", 50)),
        (
            "client_roots",
            json!({"method": "roots/list", "params": {}}),
        ),
    ]
}

/// What `test_input_required_result_multiple_inputs` answers with.
fn multiple_answer(a: &Map<String, Value>) -> String {
    let got = |k: &str| a.get(k).cloned().unwrap_or(Value::Null);
    format!(
        "name: {}; greeting: {}; roots: {}",
        got("user_name")
            .pointer("/content/name")
            .and_then(Value::as_str)
            .unwrap_or("?"),
        sampled_text(&got("greeting")),
        root_uris(&got("client_roots"))
    )
}

/// The questions `test_input_required_result_capabilities` may ask (it asks only those
/// the client can answer).
fn capability_questions() -> Vec<(&'static str, Value)> {
    vec![
        ("user_name", name_question()),
        (
            "capital_question",
            sampling_request("What is the capital of France?", 100),
        ),
    ]
}

fn elicit_request(message: &str, props: Value, required: &[&str]) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message,
        "requestedSchema": {"type": "object", "properties": props, "required": required}}})
}

fn confirm_request(message: &str) -> Value {
    elicit_request(message, json!({"ok": {"type": "boolean"}}), &["ok"])
}

fn sampling_request(prompt: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": max_tokens}})
}

fn sampled_text(r: &Value) -> String {
    r.pointer("/content/text")
        .and_then(Value::as_str)
        .map_or_else(|| r["content"].to_string(), str::to_owned)
}

fn root_uris(r: &Value) -> String {
    let uris: Vec<&str> = r["roots"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["uri"].as_str()).collect())
        .unwrap_or_default();
    if uris.is_empty() {
        "(none)".into()
    } else {
        uris.join(", ")
    }
}

/// `completion/complete` on prompt arguments and template variables.
fn complete(c: &Call<'_>) -> Result<Value, RpcError> {
    let kind = c.params.pointer("/ref/type").and_then(Value::as_str);
    let reference = match kind {
        Some("ref/prompt") => c.params.pointer("/ref/name"),
        Some("ref/resource") => c.params.pointer("/ref/uri"),
        _ => None,
    }
    .and_then(Value::as_str)
    .ok_or_else(|| {
        RpcError::params("ref must be a ref/prompt with a name or a ref/resource with a uri")
    })?;
    let arg = c
        .params
        .pointer("/argument/name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::params("argument.name is required"))?;
    let value = c
        .params
        .pointer("/argument/value")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let all = fixtures::completions(reference, arg)
        .ok_or_else(|| RpcError::params(&format!("nothing to complete for {reference}")))?;
    let values: Vec<&str> = all.into_iter().filter(|v| v.starts_with(value)).collect();
    Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}

/// Arguments the tool's `inputSchema` refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ArgumentError {
    /// A required argument is missing.
    #[error("missing required argument {0:?}")]
    Missing(String),
    /// An argument the schema does not list, where it allows no others.
    #[error("unexpected argument {0:?}")]
    Unexpected(String),
    /// An argument of another type.
    #[error("argument {name:?} must be of type {ty}")]
    Type { name: String, ty: String },
}

/// Checks `args` against the subset of JSON Schema the catalog uses: `required` and the
/// `type` of each listed property.
fn validate(schema: &Value, args: &Value) -> Result<(), ArgumentError> {
    for r in schema["required"].as_array().into_iter().flatten() {
        if let Some(k) = r.as_str()
            && args.get(k).is_none()
        {
            return Err(ArgumentError::Missing(k.to_owned()));
        }
    }
    let Some(props) = schema["properties"].as_object() else {
        return Ok(());
    };
    for (k, v) in args.as_object().into_iter().flatten() {
        let Some(ty) = props.get(k).and_then(|p| p["type"].as_str()) else {
            if schema["additionalProperties"] == json!(false) && !props.contains_key(k) {
                return Err(ArgumentError::Unexpected(k.clone()));
            }
            continue;
        };
        let ok = match ty {
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_i64() || v.is_u64(),
            "boolean" => v.is_boolean(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            _ => true,
        };
        if !ok {
            return Err(ArgumentError::Type {
                name: k.clone(),
                ty: ty.to_owned(),
            });
        }
    }
    Ok(())
}

impl Service for ExampleServer {
    async fn request(&self, req: Incoming, ctx: RequestCtx) -> Frame {
        let id = req.frame.id().cloned().unwrap_or(Id::Number(0));
        match self.handle(&req, &id, ctx).await {
            Ok(v) => Frame::result_response(&id, &raw(&v)),
            Err(e) => Frame::error_response(Some(&id), e.code, &e.message, e.data.as_ref()),
        }
    }

    fn param_headers(&self) -> mcpx_transport::ParamHeaders {
        self.param_headers.clone()
    }

    async fn notification(&self, n: Incoming, _peer: Option<Peer>) {
        tracing::debug!(
            method = n.frame.method().unwrap_or_default(),
            "notification"
        );
    }

    fn session_closed(&self, peer: &Peer) {
        self.sessions
            .lock()
            .remove(&peer.session_id().map(str::to_owned));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_covers_required_and_types() {
        let s =
            json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]});
        assert!(validate(&s, &json!({"a": 1})).is_ok());
        assert!(validate(&s, &json!({})).is_err());
        assert!(validate(&s, &json!({"a": "x"})).is_err());
    }

    #[test]
    fn cursors_are_opaque_and_round_trip() {
        let c = format!("c{}", hex("offset=2"));
        assert!(!c.contains("offset"));
        assert_eq!(unhex(&c[1..]).as_deref(), Some("offset=2"));
    }
}
