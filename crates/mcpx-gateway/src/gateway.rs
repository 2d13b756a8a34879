//! The gateway: many upstreams behind one [`Backend`].
//!
//! Requests arrive from the serve seam revision-neutral ([`Call`]). Lists are answered
//! from the merged [`Catalog`]; `tools/call`, `prompts/get`, `resources/read`,
//! `completion/complete` and resource subscriptions are routed to the owning upstream
//! by name or URI, written in that upstream's revision by its [`Connection`], and the
//! answer goes back as a result in the upstream's revision (the seam lowers it) or a
//! [`Fault`] naming the upstream. Progress, logs and cancellation are relayed per call;
//! server-to-client requests (sampling, elicitation, roots) pass between a legacy
//! upstream and a legacy host, and are refused with a clear error across eras.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use mcpx_client::{
    CallEvent, CallOptions, ClientError, Connection, EraCache, ServerFacts, Target, TargetTransport,
};
use mcpx_protocol::error::{
    INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, URL_ELICITATION_REQUIRED,
};
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::lower::elicitation;
use mcpx_protocol::lower::{
    SamplingRefusal, check_sampling_request, lower_sampling_request, sampling_tool_fields,
};
use mcpx_protocol::{Era, Frame, Id, Params, Revision, meta};
use mcpx_server::{Backend, Call, Fault, Level, ListCaps, Offered, Reply, Summary};
use mcpx_transport::Peer;
use mcpx_transport::channel_pool::ChannelPool;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use crate::catalog::{self, Catalog, ListKind, ToolFacts};
use crate::config::{Config, ServerConfig, Transport};
use crate::error::{Cause, GatewayError};
use crate::id::UpstreamId;
use crate::naming::NameRules;
use crate::reload;
use crate::upstream::{self, State, Upstream};

// Gateway tasks (H13): a child module, so it drives calls through the routing here.
#[path = "tasks.rs"]
mod tasks;

/// The upstreams in force, in configuration order; swapped whole by a reload.
#[derive(Debug, Default)]
pub struct Upstreams {
    list: Vec<Arc<Upstream>>,
    by_id: HashMap<UpstreamId, Arc<Upstream>>,
}

impl Upstreams {
    fn new(list: Vec<Arc<Upstream>>) -> Upstreams {
        let by_id = list.iter().map(|u| (u.id.clone(), u.clone())).collect();
        Upstreams { list, by_id }
    }

    /// In configuration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.list.iter()
    }

    /// The upstream of this id.
    pub fn get(&self, id: &str) -> Option<&Arc<Upstream>> {
        self.by_id.get(id)
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// The gateway: the upstreams, the merged catalog, and what hosts hold across requests.
///
/// # Locks
///
/// Every `std::sync` lock here guards one field, is held for a few instructions and
/// never across an `.await`, and no two are held at once, except in
/// [`Gateway::rebuild`], which holds `rebuilding` while it reads `upstreams` and then
/// writes `catalog` (order: `rebuilding`, then `upstreams`, then `catalog`), so that
/// two rebuilds cannot swap in an older catalog over a newer one. The one async lock,
/// `listen_holds`, is held across the upstream call it decides (see there) and is taken
/// before `subscribers`.
///
/// # Invariants
///
/// * The catalog was built from the upstreams in `upstreams` (or their predecessors,
///   until the rebuild a reload ends with): a route names an upstream by id, and an id
///   the upstream set lacks means a reload removed it ([`GatewayError::Removed`]).
/// * Work held across requests names its upstream by [`UpstreamId`] (ask progress
///   routes, url elicitations, subscription holds) or holds the [`Upstream`] itself
///   (parked calls, tasks), never an index.
#[derive(Debug)]
pub struct Gateway {
    /// The configuration in force (swapped whole by a reload).
    config: RwLock<Arc<Config>>,
    era_cache: EraCache,
    upstreams: RwLock<Arc<Upstreams>>,
    catalog: RwLock<Arc<Catalog>>,
    /// Held while a catalog is built and swapped in (see the type's doc).
    rebuilding: Mutex<()>,
    /// Catalog warnings already logged: each is logged once.
    warned: Mutex<std::collections::HashSet<String>>,
    /// Upstreams whose first lists are in the catalog (a host's first request waits
    /// for them, up to `startupWaitMs`).
    listed: Mutex<std::collections::HashSet<UpstreamId>>,
    /// Told whenever an upstream settles or is listed.
    progress: tokio::sync::Notify,
    /// Every upstream settled its first start, or `startupWaitMs` passed: requests no
    /// longer wait.
    settled: std::sync::atomic::AtomicBool,
    /// The supervisors' tasks, for shutdown.
    supervisors: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// List changes, for hosts (legacy sessions and modern listen streams).
    changes: broadcast::Sender<ListKind>,
    /// Upstreams' `notifications/resources/updated`, for modern hosts' listen streams.
    updates: broadcast::Sender<Frame>,
    /// Legacy host sessions seen, to tell them about list changes.
    legacy_peers: Mutex<Vec<Peer>>,
    /// The capabilities offered, kept current as upstreams connect (read per request).
    offered: Mutex<Offered>,
    /// Fired when mcpx shuts down: its listen streams end gracefully (H1).
    stopping: tokio_util::sync::CancellationToken,
    /// Legacy hosts subscribed to each resource URI (as the host names it), with the
    /// token that ends mcpx's own listen stream for it (modern upstreams).
    subscribers: Mutex<HashMap<String, Vec<(Peer, tokio_util::sync::CancellationToken)>>>,
    /// Modern hosts' listens holding mcpx's `resources/subscribe` at a legacy upstream,
    /// counted by (upstream, upstream's URI). That one upstream subscription is shared
    /// with the legacy hosts in `subscribers`; mcpx unsubscribes only when no host of
    /// either kind holds it (D-C4). An async lock, held across the upstream call it
    /// decides, so an unsubscribe cannot overtake a newer subscribe to the same URI.
    listen_holds: tokio::sync::Mutex<HashMap<(UpstreamId, String), usize>>,
    /// Calls of modern hosts to legacy upstreams, parked while the host answers an
    /// `input_required` result, by `requestState` token.
    parked: Mutex<HashMap<String, Parked>>,
    /// Counter for [`Parked::generation`].
    parkings: std::sync::atomic::AtomicU64,
    /// Counter for minted elicitation ids.
    elicitations: std::sync::atomic::AtomicU64,
    /// Each forwarded call's event channel, reused from call to call.
    event_channels: ChannelPool<Box<CallEvent>>,
    /// Url-mode elicitations relayed to 2025-11-25 hosts: (upstream, elicitationId) and
    /// the host session it went to, oldest first, so the upstream's
    /// `notifications/elicitation/complete` reaches that host only (E-12).
    url_elicitations: Mutex<std::collections::VecDeque<(UpstreamId, String, Peer)>>,
    /// The most verbose log level any legacy host asked for, applied to legacy upstreams.
    upstream_log_level: Mutex<Option<Level>>,
    /// Asks relayed to legacy hosts with a progress token: the token mcpx gave the host
    /// (random, so no other host can reach the ask) to the asking upstream and its own
    /// token (C-C6).
    ask_progress: Mutex<HashMap<String, (UpstreamId, Value)>>,
    /// Gateway tasks (H13), bounded by `mcpx.limits.maxTasks`/`taskTtlMs`.
    tasks: tasks::Store,
}

/// the connection.
const LISTEN_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// The `requestState` prefix of a call mcpx parked (followed by a random token).
const PARKED_PREFIX: &str = "mcpx1:";
/// The most questions one parked call may have open at once; more are refused.
const MAX_OPEN_QUESTIONS: usize = 16;
/// How many url-mode elicitations relayed to 2025-11-25 hosts mcpx remembers for
/// their completion notifications (E-12); the oldest is forgotten first (2025-11-25
/// client/elicitation §Completion Notifications: clients ignore unknown ids anyway).
const MAX_URL_ELICITATIONS: usize = 256;

/// A modern host's call to a legacy upstream, waiting for the host's answers.
#[derive(Debug)]
struct Parked {
    upstream: Arc<Upstream>,
    /// The facts of the connection the upstream call runs on, and its generation.
    facts: Arc<ServerFacts>,
    conn_generation: u64,
    method: String,
    /// The tool or prompt name or resource URI the host's call named: a retry must
    /// name the same (E-30).
    target: Option<String>,
    events: tokio::sync::mpsc::Receiver<Box<CallEvent>>,
    task: tokio::task::JoinHandle<Result<Frame, ClientError>>,
    cancel: tokio_util::sync::CancellationToken,
    /// The upstream's questions put to the host and not yet answered, in asking order.
    open: Vec<Question>,
    /// Questions asked so far in this call: numbers the keys mcpx mints.
    asked: usize,
    /// Which parking this is: an expiry timer of an earlier one leaves it alone.
    generation: u64,
    /// Put before each elicitation message when namespaces are in use (E-10).
    label: Option<String>,
}

/// One server-to-client request of a legacy upstream, put to a modern host as an
/// `inputRequests` entry.
#[derive(Debug)]
struct Question {
    key: String,
    method: String,
    params: Value,
    /// Where the host's answer goes (the upstream's pending request).
    reply: tokio::sync::oneshot::Sender<Result<Value, (i64, String)>>,
}

/// 128 random bits, hex: unguessable, so a `requestState` cannot be forged (E-13, E-30).
fn random_token() -> Option<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).ok()?;
    Some(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Names, in an ask's `_meta`, the host request it is sent while serving
/// ([`mcpx_protocol::meta::RELATED_REQUEST`]): on stdio and HTTP+SSE nothing else
/// tells a host with several requests in flight which one asks. An upstream's value
/// names its own request, meaningless to the host, so it is replaced.
fn stamp_related(params: &mut Value, id: &mcpx_protocol::Id) {
    if let Some(o) = params.as_object_mut()
        && let Some(m) = o
            .entry("_meta")
            .or_insert_with(|| json!({}))
            .as_object_mut()
    {
        m.insert(
            mcpx_protocol::meta::RELATED_REQUEST.to_owned(),
            serde_json::to_value(id).unwrap_or(Value::Null),
        );
    }
}

/// A `tools/call` or `prompts/get` routed by its `params.name`.
pub(super) struct Routed<'a> {
    /// The upstream.
    pub(super) upstream: Arc<Upstream>,
    /// The name the host called (mcpx's, possibly namespaced).
    pub(super) exposed: Cow<'a, str>,
    /// The params to send upstream: the host's, borrowed, when the names agree; renamed
    /// otherwise.
    pub(super) params: Cow<'a, Params>,
    /// A tool's facts, read under the same catalog lock as its name (the defaults for a
    /// prompt).
    pub(super) tool: ToolFacts,
}

/// The tool or prompt name, or resource URI, a host's call names.
fn call_target(call: &Call) -> Option<String> {
    let p = call.params.as_ref()?;
    let v = p.member("name").or_else(|| p.member("uri"))?;
    serde_json::from_str(v).ok()
}

/// A modern host's `inputResponses`: absent is none; anything but an object of
/// objects (every answer is a result object) is -32602 (2026-07-28
/// basic/patterns/mrtr: protocol errors in the retry are JSON-RPC errors).
fn input_responses(call: &Call) -> Result<Map<String, Value>, Fault> {
    let Some(raw) = call
        .params
        .as_ref()
        .and_then(|p| p.member("inputResponses"))
    else {
        return Ok(Map::new());
    };
    let bad = |why: &str| fault(INVALID_PARAMS, format!("inputResponses {why}"), call.host);
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => match m.iter().find(|(_, v)| !v.is_object()) {
            Some((k, _)) => Err(bad(&format!("[{k:?}] must be a result object"))),
            None => Ok(m),
        },
        _ => Err(bad("must be an object")),
    }
}

/// Takes one question a legacy upstream asks during a parked call: refused when the
/// host cannot be asked it, answered from `supplied` when the host sent the answer
/// ahead, else left open for the host.
fn take_question(
    call: &Call,
    p: &mut Parked,
    supplied: &mut Map<String, Value>,
    method: String,
    params: Option<Value>,
    reply: tokio::sync::oneshot::Sender<Result<Value, (i64, String)>>,
) {
    // 2026-07-28 basic/patterns/mrtr §Supported Requests: only these requests may
    // answer input_required (E-26).
    if !mcpx_protocol::method::MRTR_METHODS.contains(&p.method.as_str()) {
        let _ = reply.send(Err((
            INTERNAL_ERROR,
            format!("the client cannot be asked during {}", p.method),
        )));
        return;
    }
    let cap = mcpx_protocol::method::ask_capability(&method).unwrap_or_default();
    // mrtr: never ask for what the client did not declare; the upstream hears
    // -32601, as from a client without the feature, and may degrade (E-25).
    if cap.is_empty() || call.client_capabilities.get(cap).is_none() {
        let _ = reply.send(Err((
            METHOD_NOT_FOUND,
            format!("the client did not declare the capability {method} needs"),
        )));
        return;
    }
    if p.open.len() >= MAX_OPEN_QUESTIONS {
        let _ = reply.send(Err((
            INTERNAL_ERROR,
            format!("more than {MAX_OPEN_QUESTIONS} questions at once"),
        )));
        return;
    }
    let mut params = params.unwrap_or(json!({}));
    tasks::strip_ask_task(&mut params);
    // E-16, E-23: a malformed sampling ask, or one with tools for a host without
    // sampling.tools, is the legacy upstream's error (-32602), not a question.
    if method == "sampling/createMessage"
        && let Err(e) = prepare_sampling(call, &mut params)
    {
        let _ = reply.send(Err((INVALID_PARAMS, e.to_string())));
        return;
    }
    if method == "elicitation/create" {
        // E-11, E-18: checked and shaped for the host (2026 has no elicitationId); a
        // malformed ask, or a mode mcpx did not declare, is the upstream's -32602 (E-14).
        if let Err(e) = elicitation::lower(&mut params, call.host, String::new) {
            let _ = reply.send(Err((INVALID_PARAMS, e.to_string())));
            return;
        }
        label_elicitation(p.label.as_deref(), &mut params);
    }
    if let Some(o) = params.as_object_mut() {
        // The upstream's request id means nothing to the host.
        if let Some(Value::Object(m)) = o.get_mut("_meta") {
            m.remove(mcpx_protocol::meta::RELATED_REQUEST);
            if m.is_empty() {
                o.remove("_meta");
            }
        }
    }
    p.asked += 1;
    // The upstream's own key when it names one (a fixed key lets a host answer ahead
    // and both eras see the same names), else one mcpx mints.
    let named = params
        .get("_meta")
        .and_then(|m| m.get(mcpx_protocol::meta::INPUT_KEY))
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty() && k.len() <= 128 && !p.open.iter().any(|q| q.key == *k))
        .map(str::to_owned);
    let key = named.unwrap_or_else(|| format!("{cap}_{}", p.asked));
    if let Some(answer) = supplied.remove(&key) {
        let _ = reply.send(Ok(answer));
        return;
    }
    // No ask permit (E-15): the host is not being asked until it chooses to retry, and
    // a round it abandons must not hold the upstream's permits for askTimeoutMs. Parked
    // calls are bounded by maxParkedCalls instead.
    p.open.push(Question {
        key,
        method,
        params,
        reply,
    });
}

/// Checks a sampling ask and lowers it to the revision of the host of `call` (E-16:
/// malformed asks are not forwarded; E-23: tools only to a host that declared
/// `sampling.tools`; E-7: what the host's revision cannot represent is refused, never
/// cut). Everything else passes unchanged (E-8, E-27, E-28).
fn prepare_sampling(call: &Call, params: &mut Value) -> Result<(), SamplingRefusal> {
    check_sampling_request(params)?;
    if let Some(field) = sampling_tool_fields(params)
        && call
            .client_capabilities
            .pointer("/sampling/tools")
            .is_none()
    {
        return Err(SamplingRefusal::ToolsNotDeclared(field));
    }
    lower_sampling_request(params, call.host)
}

/// Forgets an ask's progress route when the ask ends (answered, failed or dropped).
struct ProgressRoute<'a> {
    routes: &'a Mutex<HashMap<String, (UpstreamId, Value)>>,
    token: String,
}

impl Drop for ProgressRoute<'_> {
    fn drop(&mut self) {
        if let Ok(mut m) = self.routes.lock() {
            m.remove(&self.token);
        }
    }
}

/// A permit for one sampling or elicitation ask an upstream puts to a host (register
/// E-15): each upstream may have `askMaxPending` of them held by mcpx at once; a further
/// one is refused with -32603. Client rate limiting is a SHOULD for elicitation in
/// 2025-06-18 and 2025-11-25 client/elicitation §Security Considerations and for
/// sampling in every revision (client/sampling §Security Considerations). Roots are
/// not limited.
fn ask_permit(
    asks: &Arc<tokio::sync::Semaphore>,
    method: &str,
) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, (i64, String)> {
    if !matches!(method, "sampling/createMessage" | "elicitation/create") {
        return Ok(None);
    }
    asks.clone().try_acquire_owned().map(Some).map_err(|_| {
        (
            INTERNAL_ERROR,
            format!("too many pending requests: {method} refused"),
        )
    })
}

/// E-10: puts `label` ("[<namespace>] ") before an elicitation's message. 2025-11-25
/// client/elicitation §Security Considerations: clients MUST make clear which server
/// asks; behind mcpx the host sees only mcpx, so the message names the upstream.
/// Labels the elicitations of `inputRequests` (E-10) and removes their
/// `elicitationId`, which 2026 lacks (E-12); whether anything changed.
fn relabel_input_requests(label: Option<&str>, requests: &mut Map<String, Value>) -> bool {
    let mut changed = false;
    for req in requests.values_mut() {
        if req.get("method").and_then(Value::as_str) != Some("elicitation/create") {
            continue;
        }
        if let Some(params) = req.get_mut("params") {
            if let Some(o) = params.as_object_mut() {
                changed |= o.remove("elicitationId").is_some();
            }
            if label.is_some() && params.get("message").is_some_and(Value::is_string) {
                label_elicitation(label, params);
                changed = true;
            }
        }
    }
    changed
}

fn label_elicitation(label: Option<&str>, params: &mut Value) {
    if let (Some(label), Some(Value::String(m))) = (label, params.get_mut("message")) {
        *m = format!("{label}{m}");
    }
}

/// Whether the host of `call` can be put a url-mode elicitation: its revision has url
/// mode and it declared `elicitation.url` (2025-11-25 client/elicitation
/// §Capabilities: an empty `elicitation` object means form mode only).
fn host_takes_url(call: &Call) -> bool {
    elicitation::shape(call.host).modes
        && call
            .client_capabilities
            .pointer("/elicitation/url")
            .is_some()
}

/// How many `input_required` rounds mcpx answers for a legacy host before giving up.
const MAX_INPUT_ROUNDS: usize = 10;

/// Capacity of a forwarded call's event channel (progress, logs and asks, relayed to the
/// host in order).
const EVENT_CAPACITY: usize = 64;
/// Event channels kept for reuse: as many as calls in flight at once, within reason.
const EVENT_CHANNELS_KEPT: usize = 256;

/// Whether mcpx may send `method` to the legacy host of `call`:
///
/// * register A-C8 (every legacy basic/lifecycle §Initialization: the server "SHOULD
///   NOT send requests other than pings and logging before receiving the initialized
///   notification", read literally): no request but `ping` before the host's
///   `notifications/initialized`; notifications are not restricted;
/// * register E-2 (2025-11-25 basic/lifecycle §Operation: "Only use capabilities that
///   were successfully negotiated"): `roots/list`, `sampling/createMessage` and
///   `elicitation/create` only when the host declared `roots`, `sampling` or
///   `elicitation` at `initialize` (`call.client_capabilities`, the session's).
fn host_may_be_asked(call: &Call, method: &str) -> Result<(), (i64, String)> {
    let Some(p) = &call.peer else {
        return Ok(());
    };
    if method != "ping" && !p.is_initialized() {
        return Err((
            INTERNAL_ERROR,
            format!(
                "the client has not sent notifications/initialized, so it cannot be sent {method}"
            ),
        ));
    }
    let Some(cap) = mcpx_protocol::method::ask_capability(method) else {
        return Ok(());
    };
    if call.client_capabilities.get(cap).is_none() {
        return Err((
            INTERNAL_ERROR,
            format!("the client did not declare the {cap} capability needed for {method}"),
        ));
    }
    Ok(())
}

/// `{}` as client capabilities: what mcpx declares for itself where a request carries
/// none of the host's (a legacy upstream's calls). One shared value, not one per call.
pub(crate) fn no_capabilities() -> Arc<Value> {
    static EMPTY: std::sync::LazyLock<Arc<Value>> =
        std::sync::LazyLock::new(|| Arc::new(Value::Object(Map::new())));
    Arc::clone(&EMPTY)
}

fn fault(code: i64, message: String, host: Revision) -> Fault {
    Fault::new(code, message, host)
}

/// A `resources/read` result of a URI the host named `exposed` and the upstream knows
/// as `theirs` (see [`Catalog::resource`]): its contents name the URI as the host does.
fn expose_contents(mut reply: Reply, exposed: &str, theirs: &str) -> Reply {
    let Ok(mut v) = serde_json::from_str::<Value>(reply.result.as_str()) else {
        return reply;
    };
    let mut changed = false;
    if let Some(items) = v.get_mut("contents").and_then(Value::as_array_mut) {
        for item in items {
            if item.get("uri").and_then(Value::as_str) == Some(theirs) {
                item["uri"] = json!(exposed);
                changed = true;
            }
        }
    }
    if changed {
        reply.result = Json::of_value(&v);
    }
    reply
}

/// Takes `old` out of service after a reload replaced or removed it: its calls in
/// flight get up to `drain` to finish, then its supervisor stops it (a child gets
/// SIGTERM, then SIGKILL) and this returns once it has.
async fn retire(old: Arc<Upstream>, drain: Duration) {
    old.retire();
    if !old.supervisor().drain(drain).await {
        tracing::warn!(
            upstream = %old.id,
            "{} call(s) still in flight after {drain:?} (drainMs); stopping it anyway",
            old.supervisor().in_flight()
        );
    }
    let mut status = old.supervisor().watch();
    old.supervisor().command(upstream::Command::Stop);
    let stopped = status
        .wait_for(|s| s.state == upstream::State::Stopped)
        .await;
    if stopped.is_err() {
        tracing::debug!(upstream = %old.id, "its supervisor is gone");
    }
}

fn raw(v: &Value) -> Result<Box<RawValue>, Fault> {
    RawValue::from_string(v.to_string())
        .map_err(|e| fault(INTERNAL_ERROR, e.to_string(), Revision::NEWEST))
}

/// How mcpx reaches the upstream `name` of `config` (`s`): its transport, era
/// preference, timeouts, proxy and limits, and what mcpx declares to it.
pub fn upstream_target(config: &Config, name: &str, s: &ServerConfig) -> Target {
    let transport = match &s.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => TargetTransport::Stdio {
            command: command.clone(),
            args: args.clone(),
            env: env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            cwd: cwd.clone(),
        },
        Transport::Http { url, headers } => TargetTransport::Http {
            url: url.clone(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        },
        Transport::Sse { url, headers } => TargetTransport::Sse {
            url: url.clone(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        },
    };
    let mut target = Target::new(name, transport);
    target.preference = s.mcpx.protocol;
    target.handshake_timeout = s.mcpx.connect_timeout;
    target.proxy = s.mcpx.proxy.clone();
    target.oauth = s.mcpx.oauth.clone();
    target.limits.max_frame_bytes = config.global.max_frame_bytes;
    target.client_info = json!({ "name": "mcpx", "version": env!("CARGO_PKG_VERSION") });
    target.policy = config.spec.clone();
    // Same-era asks are relayed to legacy hosts, so mcpx declares them.
    // Roots without listChanged (E-3): each ask gets the roots of the host
    // whose request it serves (E-21), so there is no one list whose
    // changes mcpx could announce, and modern hosts cannot signal them.
    // Both elicitation modes: a url-mode ask reaches a host that can take
    // it, and ends the request of one that cannot (E-9), so only another
    // mode is one mcpx did not declare (E-14; 2025-11-25
    // client/elicitation §Capabilities).
    target.legacy_capabilities = json!({
        "roots": {},
        "sampling": {},
        "elicitation": { "form": {}, "url": {} },
    });
    target
}

impl Gateway {
    /// A gateway for `config`. Call [`Gateway::start`] to start the upstreams'
    /// supervisors.
    pub fn new(config: Config, era_cache: EraCache) -> Arc<Gateway> {
        let (changes, _) = broadcast::channel(64);
        let (updates, _) = broadcast::channel(64);
        Arc::new(Gateway {
            config: RwLock::new(Arc::new(config)),
            era_cache,
            upstreams: RwLock::new(Arc::new(Upstreams::default())),
            catalog: RwLock::new(Arc::new(Catalog::default())),
            rebuilding: Mutex::new(()),
            warned: Mutex::new(std::collections::HashSet::new()),
            listed: Mutex::new(std::collections::HashSet::new()),
            progress: tokio::sync::Notify::new(),
            settled: std::sync::atomic::AtomicBool::new(false),
            supervisors: Mutex::new(Vec::new()),
            changes,
            updates,
            legacy_peers: Mutex::new(Vec::new()),
            stopping: tokio_util::sync::CancellationToken::new(),
            offered: Mutex::new(Offered::default()),
            elicitations: std::sync::atomic::AtomicU64::new(1),
            event_channels: ChannelPool::new(EVENT_CAPACITY, EVENT_CHANNELS_KEPT),
            url_elicitations: Mutex::new(std::collections::VecDeque::new()),
            subscribers: Mutex::new(HashMap::new()),
            listen_holds: tokio::sync::Mutex::new(HashMap::new()),
            parked: Mutex::new(HashMap::new()),
            parkings: std::sync::atomic::AtomicU64::new(0),
            upstream_log_level: Mutex::new(None),
            ask_progress: Mutex::new(HashMap::new()),
            tasks: tasks::Store::default(),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .map(|c| c.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// The upstreams in force.
    pub fn upstreams(&self) -> Arc<Upstreams> {
        self.upstreams
            .read()
            .map(|u| u.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// The upstream named `id`, if the configuration in force has it.
    pub fn upstream(&self, id: &str) -> Option<Arc<Upstream>> {
        self.upstreams().get(id).cloned()
    }

    /// The catalog in force (a snapshot: never held across an await by anyone).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .map(|c| c.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Whether names carry namespaces (several upstreams are configured).
    fn namespaced(&self) -> bool {
        self.upstreams().len() > 1
    }

    /// Starts a supervisor for every configured upstream and returns at once: hosts
    /// are served while upstreams connect, and each joins the catalog as it comes up
    /// (hosts are told with `list_changed`).
    pub fn start(self: &Arc<Self>) {
        let config = self.config();
        let mut list = Vec::new();
        for (name, s) in config.servers.iter().filter(|(_, s)| !s.disabled) {
            list.push(self.spawn_upstream(&config, name, s, None));
        }
        if let Ok(mut u) = self.upstreams.write() {
            *u = Arc::new(Upstreams::new(list));
        }
        self.rebuild();
    }

    /// Makes upstream `name` and starts its supervisor; `predecessor` (a reload's
    /// changed entry) is drained and stopped before it starts, and lends it its lists.
    fn spawn_upstream(
        self: &Arc<Self>,
        config: &Config,
        name: &str,
        s: &ServerConfig,
        predecessor: Option<Arc<Upstream>>,
    ) -> Arc<Upstream> {
        let target = upstream_target(config, name, s);
        let (up, commands) = Upstream::new(
            UpstreamId::new(name),
            s.clone(),
            target,
            self.era_cache.clone(),
            config.global.ask_max_pending,
        );
        let before = predecessor.map(|old| {
            up.inherit(&old);
            let drain = config.global.drain_timeout;
            Box::pin(async move { retire(old, drain).await })
                as std::pin::Pin<Box<dyn Future<Output = ()> + Send>>
        });
        let gw = Arc::downgrade(self);
        let weak_up = Arc::downgrade(&up);
        let span = tracing::info_span!("upstream", upstream = %up.id);
        let task = tokio::spawn(tracing::Instrument::instrument(
            up.supervisor().clone().run(commands, before, move |conn| {
                if let (Some(gw), Some(up)) = (gw.upgrade(), weak_up.upgrade()) {
                    gw.on_ready(&up, conn);
                }
            }),
            span,
        ));
        // Every settling (first start ended) wakes the startup wait.
        let gw = Arc::downgrade(self);
        let mut status = up.supervisor().watch();
        tokio::spawn(async move {
            while status.changed().await.is_ok() {
                let Some(gw) = gw.upgrade() else { return };
                gw.progress.notify_waiters();
            }
        });
        if let Ok(mut t) = self.supervisors.lock() {
            t.retain(|h| !h.is_finished());
            t.push(task);
        }
        up
    }

    /// Waits, up to `startupWaitMs`, until every upstream has settled its first start
    /// and those that came up are listed: what a host's `initialize` or
    /// `server/discover` waits for, so that the first answer offers what is ready
    /// without waiting for the slowest upstream.
    pub async fn settled(&self) {
        if self.settled.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        // Boxed: awaited on every request, and only the first ones wait.
        Box::pin(self.settle()).await;
    }

    async fn settle(&self) {
        let wait = self.config().global.startup_wait;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let pending = self.upstreams().iter().any(|u| {
                let s = u.status();
                !s.settled
                    || (s.state == State::Ready
                        && !self.listed.lock().is_ok_and(|l| l.contains(&u.id)))
            });
            if !pending || tokio::time::timeout_at(deadline, notified).await.is_err() {
                self.settled
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                return;
            }
        }
    }

    /// Begins shutting down: hosts' `subscriptions/listen` streams end gracefully.
    pub fn shutdown(&self) {
        self.stopping.cancel();
    }

    /// Stops every upstream (a child gets stdin closed, then SIGTERM to its process
    /// group, then SIGKILL) and waits for their supervisors, up to `within`.
    pub async fn stop_upstreams(&self, within: Duration) {
        for up in self.upstreams().iter() {
            up.retire();
            up.supervisor().command(upstream::Command::Stop);
        }
        let tasks: Vec<_> = self
            .supervisors
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default();
        let all = futures_util::future::join_all(tasks);
        if tokio::time::timeout(within, all).await.is_err() {
            tracing::warn!("some upstreams did not stop within {within:?}");
        }
    }

    /// Each upstream's status, in configuration order.
    pub fn statuses(&self) -> Vec<(Arc<Upstream>, upstream::Status)> {
        self.upstreams()
            .iter()
            .map(|u| (u.clone(), u.status()))
            .collect()
    }

    /// A supervisor's new connection: its facts and capabilities are taken in now
    /// (before the upstream is seen ready), then it is listed, watched and given the
    /// hosts' log level.
    fn on_ready(self: &Arc<Self>, up: &Arc<Upstream>, conn: &Connection) {
        let facts = conn.facts();
        tracing::info!(upstream = %up.id, era = %facts.era, revision = %facts.revision, transport = conn.transport_kind(), pid = ?conn.pid(), "connected");
        up.set_facts(facts);
        self.update_offered();
        self.watch(up, conn);
        let gw = self.clone();
        let up = up.clone();
        let conn = conn.clone();
        tokio::spawn(async move {
            let level = gw.upstream_log_level.lock().ok().and_then(|l| *l);
            if let Some(level) = level {
                gw.apply_log_level(&conn, level).await;
            }
            gw.relist(&up).await;
            // A first connection has nothing to subscribe again to.
            if up.supervisor().ready().is_some_and(|(g, _)| g > 1) {
                gw.resubscribe(&up, &conn).await;
            }
        });
    }

    /// The capabilities offered, as the upstreams' last facts say.
    fn update_offered(&self) {
        let offered = GatewayBackend::summary_of(self).offered();
        if let Ok(mut o) = self.offered.lock() {
            *o = offered;
        }
    }

    /// A legacy upstream's log level is its session's: mcpx sets it to the most
    /// verbose level any host asked for, and filters per host (H9). Modern upstreams
    /// get the level per request instead.
    async fn apply_log_level(&self, conn: &Connection, level: Level) {
        let facts = conn.facts();
        if facts.era != Era::Legacy || !facts.has("logging") {
            return;
        }
        let params = Params::of_value(&json!({ "level": level.as_str() }));
        if let Err(e) = conn
            .call("logging/setLevel", Some(&params), CallOptions::default())
            .await
        {
            tracing::debug!(upstream = conn.name(), "logging/setLevel: {e}");
        }
    }

    /// Lowers the log level of the legacy upstreams' sessions to `level` if it is more
    /// verbose than the current one (hosts' own thresholds filter what they get; H9).
    async fn lower_upstream_log_level(&self, level: Level) {
        let lower = {
            let Ok(mut current) = self.upstream_log_level.lock() else {
                return;
            };
            if current.is_some_and(|c| c <= level) {
                false
            } else {
                *current = Some(level);
                true
            }
        };
        if lower {
            for up in self.upstreams().iter() {
                if let Some(conn) = up.ready() {
                    self.apply_log_level(&conn, level).await;
                }
            }
        }
    }

    /// Follows an upstream's list changes (coalesced: see [`Gateway::schedule_relist`]),
    /// resource updates and url elicitations' completions. A modern upstream only
    /// reports list changes on a `subscriptions/listen` stream, which mcpx opens.
    fn watch(self: &Arc<Self>, up: &Arc<Upstream>, conn: &Connection) {
        let mut rx = conn.changes();
        let gw = Arc::downgrade(self);
        let id = up.id.clone();
        let weak_up = Arc::downgrade(up);
        tokio::spawn(async move {
            loop {
                let frame = match rx.recv().await {
                    Ok(f) => f,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                let (Some(gw), Some(up)) = (gw.upgrade(), weak_up.upgrade()) else {
                    return;
                };
                match frame.method() {
                    Some(
                        "notifications/tools/list_changed"
                        | "notifications/prompts/list_changed"
                        | "notifications/resources/list_changed",
                    ) => gw.schedule_relist(&up),
                    Some("notifications/resources/updated") => {
                        gw.relay_resource_updated(&id, &frame).await;
                    }
                    Some("notifications/elicitation/complete") => {
                        gw.relay_elicitation_complete(&id, &frame).await;
                    }
                    _ => {}
                }
            }
        });
        let facts = conn.facts();
        if facts.era == Era::Modern {
            let wanted: Vec<(&str, &str)> = [
                ("tools", "toolsListChanged"),
                ("prompts", "promptsListChanged"),
                ("resources", "resourcesListChanged"),
            ]
            .into_iter()
            .filter(|(cap, _)| {
                facts
                    .capabilities
                    .pointer(&format!("/{cap}/listChanged"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            })
            .collect();
            if !wanted.is_empty() {
                let filter: Map<String, Value> = wanted
                    .iter()
                    .map(|(_, k)| ((*k).to_owned(), json!(true)))
                    .collect();
                let params = Params::of_value(&json!({ "notifications": filter }));
                let conn = conn.clone();
                tokio::spawn(async move {
                    // C-C15: a listen ends by our cancel, the upstream's teardown or the
                    // transport closing; while the connection lives mcpx opens it again
                    // (no state survives, so nothing is replayed), backing off.
                    let mut pause = Duration::from_millis(200);
                    while !conn.is_closed() {
                        let opts = CallOptions {
                            timeout: LISTEN_LIFETIME,
                            max_time: LISTEN_LIFETIME,
                            attribute_unsolicited: false,
                            ..CallOptions::default()
                        };
                        match conn.call("subscriptions/listen", Some(&params), opts).await {
                            Ok(_) | Err(ClientError::EndedByUpstream { .. }) => {
                                tracing::debug!(
                                    upstream = conn.name(),
                                    "listen ended by the upstream; opening it again"
                                );
                            }
                            Err(e) => {
                                // The connection failed: the next one listens anew.
                                tracing::debug!(upstream = conn.name(), "listen ended: {e}");
                                break;
                            }
                        }
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(30));
                    }
                });
            }
        }
    }

    /// Re-lists `up` once `listChangedWindowMs` after the first of a burst of its list
    /// changes: a storm of `list_changed` costs one re-list per window, and hosts are
    /// told only of lists that really changed.
    fn schedule_relist(self: &Arc<Self>, up: &Arc<Upstream>) {
        if up
            .relist_scheduled
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        let window = self.config().global.list_changed_window;
        let gw = Arc::downgrade(self);
        let up = Arc::downgrade(up);
        tokio::spawn(async move {
            tokio::time::sleep(window).await;
            let (Some(gw), Some(up)) = (gw.upgrade(), up.upgrade()) else {
                return;
            };
            up.relist_scheduled
                .store(false, std::sync::atomic::Ordering::Release);
            tracing::debug!(upstream = %up.id, "lists changed; listing again");
            gw.relist(&up).await;
        });
    }

    /// Tells every host that a list changed: legacy sessions by notification, modern
    /// hosts on their `subscriptions/listen` streams.
    async fn announce(&self, kind: ListKind) {
        let _ = self.changes.send(kind);
        let peers: Vec<Peer> = self
            .legacy_peers
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default();
        for peer in peers {
            let _ = peer
                .notify(Frame::notification(kind.changed_notification(), None))
                .await;
        }
    }

    /// `notifications/resources/updated` of upstream `id` goes to the legacy hosts that
    /// subscribed to that URI (as the host names it: see [`Catalog::exposed_uri`]), and
    /// to modern hosts' listen streams.
    async fn relay_resource_updated(&self, id: &UpstreamId, frame: &Frame) {
        let uri = frame
            .params()
            .and_then(|p| mcpx_protocol::jsonrpc::member(p, "uri"))
            .and_then(|u| serde_json::from_str::<String>(u).ok())
            .unwrap_or_default();
        let exposed = self.catalog().exposed_uri(id, &uri).into_owned();
        let frame = if exposed == uri {
            frame.clone()
        } else {
            let mut params: Value = frame
                .params()
                .and_then(|p| serde_json::from_str(p).ok())
                .unwrap_or_else(|| json!({}));
            params["uri"] = json!(exposed);
            match raw(&params) {
                Ok(p) => Frame::notification("notifications/resources/updated", Some(&p)),
                Err(_) => return,
            }
        };
        let peers: Vec<Peer> = self
            .subscribers
            .lock()
            .ok()
            .and_then(|s| {
                s.get(&exposed)
                    .map(|v| v.iter().map(|(p, _)| p.clone()).collect())
            })
            .unwrap_or_default();
        for peer in peers {
            let _ = peer.notify(frame.clone()).await;
        }
        let _ = self.updates.send(frame);
    }

    /// A new connection of `up` has no subscriptions: mcpx subscribes again to every
    /// URI hosts hold at it (a legacy upstream's `resources/subscribe`, a modern one's
    /// listen per legacy host's subscription).
    async fn resubscribe(self: &Arc<Self>, up: &Arc<Upstream>, conn: &Connection) {
        let facts = conn.facts();
        if !facts
            .capabilities
            .pointer("/resources/subscribe")
            .and_then(Value::as_bool)
            .unwrap_or(false)
        {
            return;
        }
        let catalog = self.catalog();
        let mut uris: Vec<(String, Vec<tokio_util::sync::CancellationToken>)> = self
            .subscribers
            .lock()
            .map(|s| {
                s.iter()
                    .filter_map(|(exposed, subs)| {
                        let (owner, theirs) = catalog.resource(exposed)?;
                        (*owner == up.id).then(|| {
                            (
                                theirs.to_owned(),
                                subs.iter().map(|(_, t)| t.clone()).collect(),
                            )
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        if facts.era == Era::Legacy {
            let holds = self.listen_holds.lock().await;
            for (id, uri) in holds.keys() {
                if *id == up.id && !uris.iter().any(|(u, _)| u == uri) {
                    uris.push((uri.clone(), Vec::new()));
                }
            }
            drop(holds);
            for (uri, _) in uris {
                let params = Params::of_value(&json!({ "uri": uri }));
                if let Err(e) = conn
                    .call("resources/subscribe", Some(&params), CallOptions::default())
                    .await
                {
                    tracing::warn!(upstream = %up.id, "subscribing again to {uri}: {e}");
                }
            }
        } else {
            for (uri, tokens) in uris {
                for t in tokens {
                    self.listen_for_updates(conn, &uri, t);
                }
            }
        }
    }

    /// Subscribes mcpx at the upstream owning `uri` for a modern host's listen stream
    /// (register D-C4): `resources/subscribe` on a legacy upstream, a listen of its own
    /// with `resourceSubscriptions` on a modern one (ended by `stop`). `None` when no
    /// upstream that declared `resources.subscribe` owns the URI; else the upstream
    /// and its own URI.
    async fn subscribe_upstream(
        self: &Arc<Self>,
        call: &Call,
        uri: &str,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Option<(Arc<Upstream>, String)> {
        let (up, theirs) = self.route_uri(call, uri).ok()?;
        let (_, conn) = up.connection().await.ok()?;
        let facts = conn.facts();
        let subscribable = facts
            .capabilities
            .pointer("/resources/subscribe")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if !subscribable {
            return None;
        }
        if facts.era == Era::Legacy {
            let mut holds = self.listen_holds.lock().await;
            let params = Params::of_value(&json!({ "uri": theirs }));
            let f = conn
                .call("resources/subscribe", Some(&params), CallOptions::default())
                .await
                .ok()?;
            f.result()?;
            *holds.entry((up.id.clone(), theirs.clone())).or_default() += 1;
            return Some((up, theirs));
        }
        self.listen_for_updates(&conn, &theirs, stop.clone());
        Some((up, theirs))
    }

    /// Ends what [`Gateway::subscribe_upstream`] began for a listen stream that ended: a
    /// legacy upstream is unsubscribed unless another listen or a legacy host still
    /// holds the URI (modern upstreams' listens end with the stream's token). `exposed`
    /// is the URI as the host named it, `theirs` the upstream's.
    async fn unsubscribe_upstream(
        self: &Arc<Self>,
        up: &Arc<Upstream>,
        exposed: &str,
        theirs: &str,
    ) {
        let mut holds = self.listen_holds.lock().await;
        let key = (up.id.clone(), theirs.to_owned());
        let Some(n) = holds.get_mut(&key) else {
            return;
        };
        *n = n.saturating_sub(1);
        if *n > 0 {
            return;
        }
        holds.remove(&key);
        let held = self
            .subscribers
            .lock()
            .map(|s| s.get(exposed).is_some_and(|v| !v.is_empty()))
            .unwrap_or(true);
        if let Some(conn) = up.ready().filter(|c| !held && c.facts().era == Era::Legacy) {
            let params = Params::of_value(&json!({ "uri": theirs }));
            let _ = conn
                .call(
                    "resources/unsubscribe",
                    Some(&params),
                    CallOptions::default(),
                )
                .await;
        }
    }

    /// mcpx's own `subscriptions/listen` at a modern upstream for one resource's
    /// updates, until `stop`.
    fn listen_for_updates(
        &self,
        conn: &Connection,
        uri: &str,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let params =
            Params::of_value(&json!({ "notifications": { "resourceSubscriptions": [uri] } }));
        let conn = conn.clone();
        tokio::spawn(async move {
            let opts = CallOptions {
                timeout: LISTEN_LIFETIME,
                max_time: LISTEN_LIFETIME,
                attribute_unsolicited: false,
                cancel: stop,
                ..CallOptions::default()
            };
            if let Err(e) = conn.call("subscriptions/listen", Some(&params), opts).await {
                tracing::debug!(upstream = conn.name(), "resource listen ended: {e}");
            }
        });
    }

    /// `resources/subscribe` and `resources/unsubscribe` from a legacy host. A legacy
    /// upstream gets them as they are; a modern one has no such methods, so mcpx holds
    /// a `subscriptions/listen` stream with `resourceSubscriptions` for the URI instead
    /// (register D-C4). `uri` is as the host named it; `params` are for the upstream
    /// (its own URI).
    async fn subscription(
        self: &Arc<Self>,
        call: &Call,
        up: &Arc<Upstream>,
        uri: &str,
        params: &Value,
    ) -> Result<Reply, Fault> {
        let subscribe = call.method == "resources/subscribe";
        let theirs = params
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or(uri)
            .to_owned();
        let peer = call.peer.clone();
        let key = peer
            .as_ref()
            .and_then(Peer::session_id)
            .unwrap_or_default()
            .to_owned();
        let (_, conn) = up.connection().await.map_err(|e| e.to_fault(call.host))?;
        let facts = conn.facts();
        let modern = facts.era == Era::Modern;
        let subscribable = facts
            .capabilities
            .pointer("/resources/subscribe")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if !subscribable {
            // A-C7: only upstreams that declared resources.subscribe are asked.
            return Err(fault(
                METHOD_NOT_FOUND,
                format!("upstream {} does not support resource subscriptions", up.id),
                call.host,
            ));
        }
        // One upstream subscription serves every legacy host subscribed to the URI and
        // every modern host's listen that asked for it: a subscribe always reaches the
        // upstream (idempotent, 2025-11-25 server/resources §Subscriptions), an
        // unsubscribe only when the last host of either kind lets go.
        let holds = if modern {
            None
        } else {
            Some(self.listen_holds.lock().await)
        };
        if !modern && subscribe {
            self.forward(call, up, &call.method, &Params::of_value(params), true)
                .await?;
        }
        let others_remain = {
            let mut subs = self
                .subscribers
                .lock()
                .map_err(|_| fault(INTERNAL_ERROR, "lock poisoned".into(), call.host))?;
            let entry = subs.entry(uri.to_owned()).or_default();
            let already = entry
                .iter()
                .any(|(p, _)| p.session_id().unwrap_or_default() == key);
            if subscribe {
                if let (Some(peer), false) = (peer, already) {
                    let token = tokio_util::sync::CancellationToken::new();
                    if modern {
                        self.listen_for_updates(&conn, &theirs, token.clone());
                    }
                    entry.push((peer, token));
                }
            } else {
                entry.retain(|(p, token)| {
                    let mine = p.session_id().unwrap_or_default() == key;
                    if mine {
                        token.cancel();
                    }
                    !mine
                });
            }
            let remain = !entry.is_empty();
            if !remain {
                subs.remove(uri);
            }
            remain
        };
        let listens_remain = holds.as_ref().is_some_and(|h| {
            h.get(&(up.id.clone(), theirs.clone()))
                .is_some_and(|n| *n > 0)
        });
        if !modern && !subscribe && !others_remain && !listens_remain {
            self.forward(call, up, &call.method, &Params::of_value(params), true)
                .await?;
        }
        Ok(Reply {
            result: Json::of_value(&json!({})),
            revision: call.host,
        })
    }

    fn remember_peer(&self, peer: &Option<Peer>) {
        let Some(peer) = peer else { return };
        if let Ok(mut peers) = self.legacy_peers.lock() {
            let key = peer.session_id();
            if !peers.iter().any(|p| p.session_id() == key) {
                peers.push(peer.clone());
            }
        }
    }

    /// Fetches `up`'s lists (those its capabilities offer), keeps them, rebuilds the
    /// catalog and tells hosts of the lists that changed. A list that fails keeps
    /// its last known items.
    pub async fn relist(self: &Arc<Self>, up: &Arc<Upstream>) {
        let Some((generation, conn)) = up.supervisor().ready() else {
            return;
        };
        let facts = conn.facts();
        let mut lists = (*up.lists()).clone();
        for kind in ListKind::ALL {
            if !facts.has(kind.capability()) {
                lists.set(kind, None);
                continue;
            }
            let opts = CallOptions {
                timeout: up.config.mcpx.call_timeout,
                ..CallOptions::default()
            };
            match conn.list_all(kind.method(), kind.key(), opts, 1000).await {
                Ok(items) => lists.set(kind, Some(items)),
                Err(e) => {
                    tracing::warn!(upstream = %up.id, "{} failed: {e}", kind.method());
                    if e.breaks_connection() {
                        up.lost(generation, Cause::Client(e));
                        break;
                    }
                }
            }
        }
        up.set_lists(lists);
        if let Ok(mut l) = self.listed.lock() {
            l.insert(up.id.clone());
        }
        self.progress.notify_waiters();
        self.rebuild_and_announce().await;
    }

    /// Builds the catalog from every upstream's last known lists and swaps it in
    /// (see the type's doc on locks); returns the kinds of lists hosts see changed.
    fn rebuild(&self) -> Vec<ListKind> {
        let _serial = self.rebuilding.lock();
        let config = self.config();
        let ups = self.upstreams();
        let rules = NameRules {
            separator: config.global.separator.clone(),
            max_len: config.global.max_name_len,
            prefix: ups.len() > 1,
        };
        let lists: Vec<Arc<catalog::Lists>> = ups.iter().map(|u| u.lists()).collect();
        let sources: Vec<catalog::Source<'_>> = ups
            .iter()
            .zip(&lists)
            .map(|(u, l)| catalog::Source {
                id: &u.id,
                namespace: &u.namespace,
                tools: &u.config.mcpx.tools,
                lists: l,
            })
            .collect();
        let built = catalog::build(&rules, &sources);
        if let Ok(mut warned) = self.warned.lock() {
            for w in &built.warnings {
                if warned.insert(w.key.clone()) {
                    tracing::warn!("{}", w.message);
                }
            }
        }
        for (id, tool, headers) in &built.tool_headers {
            if let Some(c) = ups.get(id.as_str()).and_then(|u| u.ready()) {
                c.set_tool_param_headers(tool, headers.clone());
            }
        }
        let fresh = Arc::new(built.catalog);
        let before = match self.catalog.write() {
            Ok(mut c) => std::mem::replace(&mut *c, fresh.clone()),
            Err(_) => return Vec::new(),
        };
        drop(_serial);
        self.update_offered();
        fresh.changed_since(&before)
    }

    /// [`Gateway::rebuild`], then one notification per changed list to every host.
    async fn rebuild_and_announce(&self) {
        let mut sent = Vec::new();
        for kind in self.rebuild() {
            let note = kind.changed_notification();
            if !sent.contains(&note) {
                sent.push(note);
                self.announce(kind).await;
            }
        }
    }

    /// Applies a new configuration, diffed by server name against the one in force
    /// ([`reload::plan`]): unchanged upstreams keep their connections (and their
    /// calls in flight); a changed one starts again once its predecessor has drained
    /// (`drainMs`) and stopped, listing its last known tools meanwhile; a removed one
    /// drains and stops; an added one starts. Hosts are told of the lists that
    /// change.
    pub fn reload(self: &Arc<Self>, new: Config) -> reload::Plan {
        let old = self.config();
        let plan = reload::plan(&old, &new);
        let new = Arc::new(new);
        if let Ok(mut c) = self.config.write() {
            *c = new.clone();
        }
        let current = self.upstreams();
        let mut list = Vec::new();
        for (name, s) in new.servers.iter().filter(|(_, s)| !s.disabled) {
            match current.get(name) {
                Some(up) if plan.unchanged.iter().any(|n| n == name) => list.push(up.clone()),
                Some(up) => {
                    up.retire();
                    list.push(self.spawn_upstream(&new, name, s, Some(up.clone())));
                }
                None => list.push(self.spawn_upstream(&new, name, s, None)),
            }
        }
        for up in current.iter() {
            if plan.removed.iter().any(|n| *n == up.id.as_str()) {
                up.retire();
                tokio::spawn(retire(up.clone(), new.global.drain_timeout));
            }
        }
        if let Ok(mut u) = self.upstreams.write() {
            *u = Arc::new(Upstreams::new(list));
        }
        tracing::info!("configuration reloaded: {plan}");
        for what in &plan.restart_needed {
            tracing::warn!("{what} changed: it applies after mcpx restarts");
        }
        let gw = self.clone();
        tokio::spawn(async move { gw.rebuild_and_announce().await });
        plan
    }
    /// One page of a merged list, written as 2026-07-28 (the seam lowers it).
    fn list(&self, call: &Call, kind: ListKind) -> Result<Reply, Fault> {
        let cursor = call
            .params
            .as_deref()
            .and_then(|p| serde_json::from_str::<Value>(p).ok())
            .and_then(|p| p.get("cursor").and_then(Value::as_str).map(str::to_owned));
        let start = match cursor.as_deref() {
            None => 0,
            Some(c) => c
                .strip_prefix("mcpx:")
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| fault(INVALID_PARAMS, format!("invalid cursor {c:?}"), call.host))?,
        };
        let page = self.config().global.page_size.max(1);
        let catalog = self.catalog();
        let all = catalog.list(kind);
        if start > all.len() {
            return Err(fault(
                INVALID_PARAMS,
                format!("cursor {start} is past the end"),
                call.host,
            ));
        }
        let end = (start + page).min(all.len());
        let items = &all[start..end];
        let shaped = (kind == ListKind::Tools)
            .then(|| tasks::shape_tools(items, call.host))
            .flatten();
        let mut result = json!({ kind.key(): shaped.as_deref().unwrap_or(items) });
        if end < all.len() {
            result["nextCursor"] = json!(format!("mcpx:{end}"));
        }
        Ok(Reply {
            result: Json::of_value(&result),
            revision: Revision::NEWEST,
        })
    }

    /// The upstream of a `tools/call` or `prompts/get`, the upstream's own name for it,
    /// and the params to send it: the host's text as it came when the name passes
    /// through unchanged (nothing re-encoded), else with `name` rewritten.
    ///
    /// A name the catalog does not list, in the namespace of an upstream that is not
    /// ready, gets that upstream's state and cause (its tools may simply not be known
    /// yet), never "unknown tool".
    fn route_name<'a>(&self, call: &'a Call, prompts: bool) -> Result<Routed<'a>, Fault> {
        let required = || fault(INVALID_PARAMS, "params.name is required".into(), call.host);
        let raw = call.params.as_ref().ok_or_else(required)?;
        // Where the decoder saw `name` (a walk when it could not tell), and whether it
        // is given only once.
        let (name_span, _) = raw.sole_member("name").unwrap_or((0..0, false));
        let name = raw
            .get(name_span)
            .and_then(mcpx_protocol::jsonrpc::string_value)
            .ok_or_else(required)?;
        let catalog = self.catalog();
        let found = if prompts {
            catalog.prompt(&name)
        } else {
            catalog.tool(&name)
        };
        let Some(found) = found else {
            if let Some(owner) = catalog.owner_of_name(&name)
                && let Some(up) = self.upstream(owner.as_str())
            {
                let status = up.status();
                if status.state != upstream::State::Ready {
                    return Err(up.unavailable(&status).to_fault(call.host));
                }
            }
            // 2025-11-25 server/tools §Error Handling: an unknown tool is a protocol error
            // (register D-C14).
            return Err(fault(
                INVALID_PARAMS,
                format!(
                    "unknown {}: {name}",
                    if prompts { "prompt" } else { "tool" }
                ),
                call.host,
            ));
        };
        let up = self.upstream(found.upstream.as_str()).ok_or_else(|| {
            GatewayError::Removed {
                upstream: found.upstream.clone(),
            }
            .to_fault(call.host)
        })?;
        let original = found.original;
        let params = if original == name {
            Cow::Borrowed(raw)
        } else if let Some(renamed) = raw.with_name(original) {
            // The upstream's name in place of the exposed one; every other byte of the
            // host's params is kept (no re-encoding, no reordering of its members).
            Cow::Owned(renamed)
        } else {
            // A name given twice: re-encoded with the one name the upstream must see.
            let mut params: Value = serde_json::from_str(raw).unwrap_or(json!({}));
            params["name"] = json!(original);
            Cow::Owned(Params::of_value(&params))
        };
        let tool = found.facts;
        Ok(Routed {
            upstream: up,
            exposed: name,
            params,
            tool,
        })
    }

    /// The upstream serving resource `uri` (as a host names it) and the URI to send
    /// it (see [`Catalog::resource`]).
    fn route_uri(&self, call: &Call, uri: &str) -> Result<(Arc<Upstream>, String), Fault> {
        let catalog = self.catalog();
        if let Some((id, theirs)) = catalog.resource(uri) {
            let up = self.upstream(id.as_str()).ok_or_else(|| {
                GatewayError::Removed {
                    upstream: id.clone(),
                }
                .to_fault(call.host)
            })?;
            return Ok((up, theirs.to_owned()));
        }
        Err(Fault {
            code: mcpx_protocol::error::resource_not_found(call.host),
            message: format!("resource not found: {uri}"),
            data: Some(json!({ "uri": uri })),
            from: call.host,
            input_validation: false,
        })
    }

    /// Sends `method` with `params` to upstream `up` for `call`, relaying events.
    async fn forward(
        self: &Arc<Self>,
        call: &Call,
        up: &Arc<Upstream>,
        method: &str,
        params: &Params,
        idempotent: bool,
    ) -> Result<Reply, Fault> {
        let (generation, conn) = up.connection().await.map_err(|e| e.to_fault(call.host))?;
        let _in_flight = up.supervisor().begin_call();
        let facts = conn.facts();
        let host_modern = call.host.era() == Era::Modern;
        if host_modern && facts.era == Era::Legacy {
            // Boxed: the rarer path's future stays out of every call's.
            return Box::pin(self.forward_parking(call, up, conn, method, params, idempotent))
                .await;
        }
        let max_call_time = self.config().global.max_call_time;
        // The params as sent: the caller's text until an input round rewrites them.
        let mut text = std::borrow::Cow::Borrowed(params);
        // A 2026-07-28 upstream asks for input with `input_required` results (MRTR). A
        // modern host gets them as they are and retries itself; for a legacy host mcpx
        // asks it with wire requests and retries for it (register E-1), a bounded
        // number of rounds.
        let mut rounds = 0;
        loop {
            let (tx, mut rx) = self.event_channels.take();
            // Fired by the host's cancellation, or when an ask ends the host's request
            // before the upstream answers (E-9).
            let cancel = call.cancel.child_token();
            let mut ended: Option<Fault> = None;
            let opts = CallOptions {
                // A clone: `tx` outlives the call, so that the channel can go back to
                // the pool once the call is over.
                events: Some(tx.clone()),
                progress: call.progress.is_some(),
                log_level: call.log.as_ref().map(|l| l.threshold().as_str().to_owned()),
                // A modern upstream may only ask for what the host can answer: the
                // host's own capabilities (per request on modern, from initialize on
                // legacy, where mcpx answers for it).
                client_capabilities: if facts.era == Era::Modern {
                    call.client_capabilities.clone()
                } else {
                    no_capabilities()
                },
                timeout: up.config.mcpx.call_timeout,
                max_time: max_call_time,
                cancel: cancel.clone(),
                idempotent,
                attribute_unsolicited: true,
                caller_meta_is_envelope: host_modern,
            };
            let outcome = {
                let fut = conn.call(method, Some(&text), opts);
                tokio::pin!(fut);
                loop {
                    tokio::select! {
                        // Events were sent before the response: relay them first.
                        biased;
                        Some(ev) = rx.recv() => {
                            // Boxed, as events are the exception (and the call's
                            // future is live meanwhile: the two would be laid out side
                            // by side).
                            if let Some(f) = Box::pin(self.on_event(call, &facts, up.id.as_str(), *ev)).await {
                                cancel.cancel();
                                ended.get_or_insert(f);
                            }
                        }
                        r = &mut fut => break r,
                    }
                }
            };
            while let Ok(ev) = rx.try_recv() {
                if let Some(f) = Box::pin(self.on_event(call, &facts, up.id.as_str(), *ev)).await {
                    ended.get_or_insert(f);
                }
            }
            self.event_channels.give(tx, rx);
            if let Some(f) = ended {
                return Err(f);
            }
            let frame = match outcome {
                Ok(frame) => frame,
                Err(e) => {
                    if e.breaks_connection() {
                        // The supervisor starts it again (a call never does).
                        up.lost(generation, Cause::Client(e.clone()));
                    }
                    return Err(GatewayError::Client(e).to_fault(call.host));
                }
            };
            let input_required = facts.era == Era::Modern
                && !host_modern
                && frame
                    .result()
                    .and_then(|r| mcpx_protocol::jsonrpc::first_member(r, "resultType"))
                    == Some("\"input_required\"");
            if !input_required {
                return self.answer(call, &facts, up.id.as_str(), method, frame);
            }
            rounds += 1;
            if rounds > MAX_INPUT_ROUNDS {
                return Err(fault(
                    INTERNAL_ERROR,
                    format!(
                        "upstream {} asked for input more than {MAX_INPUT_ROUNDS} times",
                        up.id
                    ),
                    call.host,
                ));
            }
            let result: Value = frame
                .result()
                .and_then(|r| serde_json::from_str(r).ok())
                .unwrap_or(Value::Null);
            let responses = match result.get("inputRequests") {
                Some(Value::Object(requests)) => {
                    Box::pin(self.ask_legacy_host_all(call, up.id.as_str(), requests.iter()))
                        .await?
                }
                _ => Map::new(),
            };
            // The retry: the original params, the answers, and the state echoed
            // verbatim (2026-07-28 basic/patterns/mrtr).
            let mut params: Value = serde_json::from_str(&text).unwrap_or(json!({}));
            params["inputResponses"] = Value::Object(responses);
            match result.get("requestState") {
                Some(state) => params["requestState"] = state.clone(),
                None => {
                    if let Some(o) = params.as_object_mut() {
                        o.remove("requestState");
                    }
                }
            }
            text = std::borrow::Cow::Owned(Params::of_value(&params));
        }
    }

    /// A modern host's call to a legacy upstream. The upstream may ask the client
    /// something (sampling, elicitation, roots) with wire requests in the middle of the
    /// call; a modern host can only be asked with an `input_required` result (MRTR). So
    /// the upstream call runs in its own task; when it asks, mcpx gathers the questions
    /// it sends back to back, parks the call, answers the host `input_required` with a
    /// `requestState` naming the parked call, and resumes it when the host retries
    /// with the answers (register E-1, E-13, E-24).
    async fn forward_parking(
        self: &Arc<Self>,
        call: &Call,
        up: &Arc<Upstream>,
        conn: Connection,
        method: &str,
        params: &Params,
        idempotent: bool,
    ) -> Result<Reply, Fault> {
        // Answers the host sent ahead, for questions the upstream has yet to ask.
        let supplied = input_responses(call)?;
        // A legacy upstream logs at its session's level: a modern host's per-request
        // logLevel lowers it like a legacy host's logging/setLevel (H9, C-C8).
        if let Some(log) = &call.log {
            self.lower_upstream_log_level(log.threshold()).await;
        }
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let cancel = tokio_util::sync::CancellationToken::new();
        let opts = CallOptions {
            events: Some(tx),
            progress: call.progress.is_some(),
            log_level: call.log.as_ref().map(|l| l.threshold().as_str().to_owned()),
            client_capabilities: no_capabilities(),
            timeout: up.config.mcpx.call_timeout,
            max_time: self.config().global.max_call_time,
            cancel: cancel.clone(),
            idempotent,
            attribute_unsolicited: true,
            caller_meta_is_envelope: true,
        };
        // inputResponses and requestState are mcpx's to consume: a legacy revision
        // has neither.
        let text = if params.member("inputResponses").is_some()
            || params.member("requestState").is_some()
        {
            let mut v: Value = serde_json::from_str(params).unwrap_or(json!({}));
            if let Some(o) = v.as_object_mut() {
                o.remove("inputResponses");
                o.remove("requestState");
            }
            Params::of_value(&v)
        } else {
            params.clone()
        };
        let method_owned = method.to_owned();
        let facts = conn.facts();
        let conn_generation = up.supervisor().ready().map_or(0, |(g, _)| g);
        // Boxed: see mcpx_transport::stdio (the harness moves a spawned future by value).
        let task = tokio::spawn(Box::pin(async move {
            conn.call(&method_owned, Some(&text), opts).await
        }));
        let parked = Parked {
            upstream: up.clone(),
            facts,
            conn_generation,
            method: method.to_owned(),
            target: call_target(call),
            events: rx,
            task,
            cancel,
            open: Vec::new(),
            asked: 0,
            generation: 0,
            label: self.label(up),
        };
        self.run_parked(call, parked, supplied).await
    }

    /// Drives a (possibly resumed) parked call until it answers, or asks questions
    /// `supplied` does not answer.
    async fn run_parked(
        self: &Arc<Self>,
        call: &Call,
        mut p: Parked,
        mut supplied: Map<String, Value>,
    ) -> Result<Reply, Fault> {
        let name = p.upstream.id.to_string();
        let facts = p.facts.clone();
        // Set while questions are open: when the gathering window closes.
        let mut gathered_by: Option<tokio::time::Instant> = None;
        loop {
            let window = async {
                match gathered_by {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                // Events were sent before the call ended: relay them first.
                biased;
                joined = &mut p.task, if p.events.is_empty() => {
                    let outcome = joined.map_err(|e| fault(INTERNAL_ERROR, format!("upstream {name}: {e}"), call.host))?;
                    while let Ok(ev) = p.events.try_recv() {
                        if !matches!(*ev, CallEvent::Ask { .. }) {
                            let _ = self.on_event(call, &facts, &name, *ev).await;
                        }
                    }
                    return match outcome {
                        Ok(frame) => self.answer(call, &facts, &name, &p.method, frame),
                        Err(e) => {
                            // As in `forward`: the supervisor hears of a dead connection.
                            if e.breaks_connection() {
                                p.upstream.lost(p.conn_generation, Cause::Client(e.clone()));
                            }
                            Err(GatewayError::Client(e).to_fault(call.host))
                        }
                    };
                }
                () = call.cancel.cancelled() => {
                    p.cancel.cancel();
                    return Err(fault(INTERNAL_ERROR, "cancelled".into(), call.host));
                }
                Some(ev) = p.events.recv() => match *ev {
                    CallEvent::Ask { method, params, reply } => {
                        // E-9: a url-mode question the host cannot take ends its
                        // request; the upstream hears "cancel" and its call is cancelled.
                        if mcpx_protocol::method::MRTR_METHODS.contains(&p.method.as_str())
                            && let Some(f) = self.url_refusal(call, &name, &method, params.as_ref())
                        {
                            let _ = reply.send(Ok(json!({ "action": "cancel" })));
                            p.cancel.cancel();
                            return Err(f);
                        }
                        take_question(call, &mut p, &mut supplied, method, params, reply);
                        // Each question restarts the window: questions sent back to
                        // back go to the host in one round.
                        if !p.open.is_empty() {
                            gathered_by = Some(tokio::time::Instant::now() + self.config().global.ask_gather);
                        }
                    }
                    other => {
                        let _ = self.on_event(call, &facts, &name, other).await;
                    }
                },
                () = window => {
                    if !self.may_park() {
                        // Too many calls already wait for hosts' answers: the upstream
                        // hears -32603 for these questions and degrades or fails.
                        for q in p.open.drain(..) {
                            let _ = q.reply.send(Err((
                                INTERNAL_ERROR,
                                format!(
                                    "too many calls waiting for clients' answers (maxParkedCalls {})",
                                    self.config().global.max_parked
                                ),
                            )));
                        }
                        gathered_by = None;
                        continue;
                    }
                    return self.put_questions(call, p, None);
                }
            }
        }
    }

    /// Parks `p` and answers the host `input_required` with its open questions, under
    /// a new `requestState` or, when asking again for what a retry lacked, the same
    /// one (E-24).
    fn put_questions(
        self: &Arc<Self>,
        call: &Call,
        p: Parked,
        token: Option<String>,
    ) -> Result<Reply, Fault> {
        let token = match token.or_else(random_token) {
            Some(t) => t,
            None => {
                p.cancel.cancel();
                return Err(fault(INTERNAL_ERROR, "no randomness".into(), call.host));
            }
        };
        let requests: Map<String, Value> = p
            .open
            .iter()
            .map(|q| {
                (
                    q.key.clone(),
                    json!({ "method": q.method, "params": q.params }),
                )
            })
            .collect();
        let result = json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": format!("{PARKED_PREFIX}{token}"),
        });
        self.park(token, p);
        Ok(Reply {
            result: Json::of_value(&result),
            revision: Revision::NEWEST,
        })
    }

    /// Whether another call may be parked (`mcpx.limits.maxParkedCalls`).
    fn may_park(&self) -> bool {
        self.parked
            .lock()
            .map(|m| m.len() < self.config().global.max_parked)
            .unwrap_or(false)
    }

    fn park(self: &Arc<Self>, token: String, mut p: Parked) {
        let generation = self
            .parkings
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        p.generation = generation;
        if let Ok(mut parked) = self.parked.lock() {
            parked.insert(token.clone(), p);
        }
        // A host that never comes back: after the ask timeout an open elicitation is
        // answered "cancel" and any other question with an error, and the upstream
        // call is cancelled (E-6, E-24).
        let gw = Arc::downgrade(self);
        let timeout = self.config().global.ask_timeout;
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let Some(gw) = gw.upgrade() else { return };
            let stale = gw.parked.lock().ok().and_then(|mut m| match m.get(&token) {
                Some(p) if p.generation == generation => m.remove(&token),
                _ => None,
            });
            if let Some(p) = stale {
                for q in p.open {
                    let answer = if q.method == "elicitation/create" {
                        Ok(json!({ "action": "cancel" }))
                    } else {
                        Err((INTERNAL_ERROR, "the client did not answer in time".into()))
                    };
                    let _ = q.reply.send(answer);
                }
                p.cancel.cancel();
            }
        });
    }

    /// A modern host's retry of a parked call: hand its answers to the upstream and go
    /// on.
    async fn resume(self: &Arc<Self>, call: &Call, state: &str) -> Result<Reply, Fault> {
        let token = state.strip_prefix(PARKED_PREFIX).unwrap_or_default();
        let parked = self.parked.lock().ok().and_then(|mut m| m.remove(token));
        let Some(mut p) = parked else {
            // 2026-07-28 basic/patterns/mrtr: state that fails its integrity check
            // is rejected; an unknown token is what a forged or replayed one is.
            return Err(fault(
                INVALID_PARAMS,
                "unknown or expired requestState".into(),
                call.host,
            ));
        };
        let checked = if call.method != p.method || call_target(call) != p.target {
            Err(fault(
                INVALID_PARAMS,
                "requestState belongs to another request".into(),
                call.host,
            ))
        } else {
            input_responses(call)
        };
        let mut supplied = match checked {
            Ok(s) => s,
            Err(f) => {
                // The parked call stays for a well-formed retry.
                if let Ok(mut m) = self.parked.lock() {
                    m.insert(token.to_owned(), p);
                }
                return Err(f);
            }
        };
        for q in std::mem::take(&mut p.open) {
            match supplied.remove(&q.key) {
                Some(answer) => {
                    let _ = q.reply.send(Ok(answer));
                }
                None => p.open.push(q),
            }
        }
        if !p.open.is_empty() {
            // mrtr: a retry missing answers is asked again for them (E-24).
            return self.put_questions(call, p, Some(token.to_owned()));
        }
        self.run_parked(call, p, supplied).await
    }

    /// Asks a legacy host, with a wire request in its revision, what a modern
    /// upstream's `inputRequests` entry asks (register E-1, E-11).
    /// Puts each of a 2026-07-28 upstream's `inputRequests` (`requests`, by key) to
    /// the legacy host of `call` with [`Self::ask_legacy_host`], one after the other;
    /// the answers by the same keys. A question the host cannot be shown or refuses
    /// fails the whole (E-9: a url-mode elicitation is not retried, the host learns the
    /// URL from the error).
    pub(super) async fn ask_legacy_host_all<'r>(
        &self,
        call: &Call,
        upstream: &str,
        requests: impl Iterator<Item = (&'r String, &'r Value)>,
    ) -> Result<Map<String, Value>, Fault> {
        let mut responses = Map::new();
        for (key, req) in requests {
            let method = req
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let params = req.get("params").cloned();
            if let Some(f) = self.url_refusal(call, upstream, method, params.as_ref()) {
                return Err(f);
            }
            let answer = self
                .ask_legacy_host(call, upstream, method, params)
                .await
                .map_err(|(code, msg)| fault(code, msg, call.host))?;
            responses.insert(key.clone(), answer);
        }
        Ok(responses)
    }

    async fn ask_legacy_host(
        &self,
        call: &Call,
        upstream: &str,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, (i64, String)> {
        if call.peer.is_none() || !mcpx_protocol::method::server_may_send(method, call.host) {
            return Err((
                INTERNAL_ERROR,
                format!(
                    "upstream {upstream} needs {method}, which this client's protocol revision {} cannot carry",
                    call.host
                ),
            ));
        }
        host_may_be_asked(call, method)?;
        let mut params = params.unwrap_or(json!({}));
        // The modern upstream cannot be told (its ask has no error channel): the host's
        // request fails, -32602 when the host lacks sampling.tools (E-23), else -32603
        // (E-7, E-16).
        if method == "sampling/createMessage"
            && let Err(e) = prepare_sampling(call, &mut params)
        {
            let code = match e {
                SamplingRefusal::ToolsNotDeclared(_) => INVALID_PARAMS,
                _ => INTERNAL_ERROR,
            };
            return Err((code, format!("upstream {upstream}: {e}")));
        }
        let up = self.upstream(upstream);
        if method == "elicitation/create" {
            // E-11, E-18: shaped for the host (a 2025-11-25 url-mode ask gets a minted
            // elicitationId); what the host cannot be shown fails its request, since a
            // modern upstream has no error channel for it.
            elicitation::lower(&mut params, call.host, || {
                format!("mcpx-{}", self.next_elicitation())
            })
            .map_err(|e| (INTERNAL_ERROR, format!("upstream {upstream}: {e}")))?;
            label_elicitation(
                up.as_ref().and_then(|u| self.label(u)).as_deref(),
                &mut params,
            );
        }
        let _permit = match &up {
            Some(up) => ask_permit(&up.asks, method)?,
            None => None,
        };
        stamp_related(&mut params, &call.id);
        let raw = RawValue::from_string(params.to_string())
            .map_err(|e| (INTERNAL_ERROR, e.to_string()))?;
        match call
            .ctx
            .request(method, Some(&raw), self.config().global.ask_timeout)
            .await
        {
            Ok(frame) => match (frame.result(), frame.error()) {
                (Some(r), _) => {
                    serde_json::from_str(r).map_err(|e| (INTERNAL_ERROR, e.to_string()))
                }
                // E-6: the host's refusal fails the original request.
                (_, Some(e)) => Err((
                    INTERNAL_ERROR,
                    format!("the client refused {method}: {}", e.message),
                )),
                _ => Err((INTERNAL_ERROR, "empty answer".into())),
            },
            Err(e) => Err((
                INTERNAL_ERROR,
                format!("the client did not answer {method}: {e}"),
            )),
        }
    }

    /// E-10: "[<namespace>] ", put before upstream `i`'s elicitation messages when
    /// namespaces are in use (several upstreams; names are then prefixed too).
    fn label(&self, up: &Upstream) -> Option<String> {
        self.namespaced().then(|| format!("[{}] ", up.namespace))
    }

    /// E-9, E-19: a url-mode elicitation of upstream `name` for a host that declared
    /// elicitation but cannot take url mode (a 2025-06-18 host, or one without
    /// `elicitation.url`). mcpx never turns it into a form (2025-11-25
    /// client/elicitation §User Interaction Model: sensitive data goes by url, never
    /// by form), so it ends the host's request: with -32042 and the elicitation in
    /// `data.elicitations` for a 2025-11-25 host (client/elicitation §URL Elicitation
    /// Required Error, read as a MUST: E-19), else with -32603 whose message carries
    /// the URL (2026-07-28 basic/index §Error Codes: -32042 MUST NOT be emitted).
    /// Hosts that declared no elicitation are refused as for any undeclared ask.
    fn url_refusal(
        &self,
        call: &Call,
        name: &str,
        method: &str,
        params: Option<&Value>,
    ) -> Option<Fault> {
        if method != "elicitation/create"
            || host_takes_url(call)
            || !elicitation::shape(call.host).exists
            || call.client_capabilities.get("elicitation").is_none()
        {
            return None;
        }
        let params = params?;
        if elicitation::mode(params).ok()? != elicitation::Mode::Url {
            return None;
        }
        let url = params
            .get("url")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut shown = json!({
            "message": params.get("message").and_then(Value::as_str).unwrap_or_default(),
        });
        label_elicitation(
            self.upstream(name)
                .and_then(|up| self.label(&up))
                .as_deref(),
            &mut shown,
        );
        let message = shown["message"].as_str().unwrap_or_default().to_owned();
        let text = format!(
            "upstream {name} needs the user to open {url} ({message}); this client cannot show url-mode elicitations"
        );
        if !mcpx_protocol::error::may_emit(call.host, URL_ELICITATION_REQUIRED) {
            return Some(fault(INTERNAL_ERROR, text, call.host));
        }
        let id = params
            .get("elicitationId")
            .and_then(Value::as_str)
            .map_or_else(
                || format!("mcpx-{}", self.next_elicitation()),
                str::to_owned,
            );
        let mut f = fault(URL_ELICITATION_REQUIRED, text, call.host);
        f.data = Some(json!({ "elicitations": [{
            "mode": "url", "elicitationId": id, "url": url, "message": message,
        }]}));
        Some(f)
    }

    /// Remembers that upstream `i`'s url-mode elicitation `id` went to `peer`, when the
    /// host's revision has completion notifications (E-12: 2025-11-25 only).
    fn note_url_elicitation(&self, host: Revision, up: &UpstreamId, id: &str, peer: &Peer) {
        if !mcpx_protocol::method::server_may_send("notifications/elicitation/complete", host) {
            return;
        }
        if let Ok(mut m) = self.url_elicitations.lock() {
            m.retain(|(u, e, _)| !(u == up && e == id));
            m.push_back((up.clone(), id.to_owned(), peer.clone()));
            while m.len() > MAX_URL_ELICITATIONS {
                m.pop_front();
            }
        }
    }

    /// E-12: the elicitations of an upstream's -32042 that reach a 2025-11-25 host
    /// unchanged (A-C11) are remembered like relayed ones, for their completion.
    fn note_required_elicitations(&self, call: &Call, name: &str, data: Option<&str>) {
        let (Some(up), Some(peer)) = (self.upstream(name), &call.peer) else {
            return;
        };
        let data: Value = data
            .and_then(|d| serde_json::from_str(d).ok())
            .unwrap_or(Value::Null);
        for e in data
            .get("elicitations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(id) = e.get("elicitationId").and_then(Value::as_str) {
                self.note_url_elicitation(call.host, &up.id, id, peer);
            }
        }
    }

    /// E-12: an upstream's `notifications/elicitation/complete` goes, unchanged, to
    /// the 2025-11-25 host its elicitation went to, once; one naming an elicitation
    /// mcpx did not relay that way (unknown, completed, or put to a 2026-07-28 host,
    /// whose revision has no such notification) is dropped (2025-11-25
    /// client/elicitation §Completion Notifications: only to the client that
    /// initiated the elicitation; clients ignore unknown ids).
    async fn relay_elicitation_complete(&self, up: &UpstreamId, frame: &Frame) {
        let id = frame
            .params()
            .and_then(|p| mcpx_protocol::jsonrpc::member(p, "elicitationId"))
            .and_then(|v| serde_json::from_str::<String>(v).ok());
        let peer = id.as_ref().and_then(|id| {
            let mut m = self.url_elicitations.lock().ok()?;
            let at = m.iter().position(|(u, e, _)| u == up && e == id)?;
            m.remove(at).map(|(_, _, p)| p)
        });
        match peer {
            Some(peer) => {
                let _ = peer.notify(frame.clone()).await;
            }
            None => tracing::debug!(
                upstream = %up,
                elicitation = ?id,
                "dropped notifications/elicitation/complete for no relayed elicitation"
            ),
        }
    }

    /// A 2026-07-28 upstream's `input_required` result passes to a modern host as it
    /// is (its `requestState` untouched: E-32), except that elicitation messages are
    /// labelled when namespaces are in use (E-10) and an `elicitationId`, which 2026
    /// lacks, is removed (E-12). `None` when nothing changes.
    fn relabel_input_required(&self, name: &str, result: &str) -> Option<Json> {
        let label = self.upstream(name).and_then(|up| self.label(&up));
        if label.is_none() && !result.contains("\"elicitationId\"") {
            return None;
        }
        let mut v: Value = serde_json::from_str(result).ok()?;
        if v.get("resultType").and_then(Value::as_str) != Some("input_required") {
            return None;
        }
        let requests = v.get_mut("inputRequests").and_then(Value::as_object_mut)?;
        relabel_input_requests(label.as_deref(), requests).then(|| Json::of_value(&v))
    }

    /// Shapes a 2026-07-28 upstream's `inputRequests` for a modern host, in place, as
    /// [`Self::relabel_input_required`] does (an upstream task's, ext-tasks §Input
    /// Requests, are the same requests).
    pub(super) fn relabel_requests(&self, name: &str, requests: &mut Map<String, Value>) {
        let label = self.upstream(name).and_then(|up| self.label(&up));
        relabel_input_requests(label.as_deref(), requests);
    }

    fn next_elicitation(&self) -> u64 {
        self.elicitations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    fn answer(
        &self,
        call: &Call,
        facts: &ServerFacts,
        name: &str,
        method: &str,
        frame: Frame,
    ) -> Result<Reply, Fault> {
        if let Some(e) = frame.error() {
            if e.code == URL_ELICITATION_REQUIRED {
                self.note_required_elicitations(call, name, e.data.as_deref());
            }
            return Err(Fault {
                code: e.code,
                message: format!("upstream {name}: {}", e.message),
                data: e.data.as_deref().and_then(|d| serde_json::from_str(d).ok()),
                from: facts.revision,
                // Up to 2025-06-18 a tool's invalid input is a -32602 protocol error; hosts
                // from 2025-11-25 get it as an isError result (H5, D-C1).
                input_validation: method == "tools/call"
                    && e.code == INVALID_PARAMS
                    && !facts.revision.facts().input_validation_is_tool_error,
            });
        }
        // Taken from the decoded frame, not copied out of it: not parsed again on its
        // way to the host.
        let mut result = frame
            .into_result_json()
            .unwrap_or_else(|| Json::of_value(&json!({})));
        if facts.era == Era::Modern
            && call.host.era() == Era::Modern
            && let Some(relabelled) = self.relabel_input_required(name, result.as_str())
        {
            result = relabelled;
        }
        if facts.era == Era::Modern && call.host.era() == Era::Legacy {
            let input_required = serde_json::from_str::<Value>(result.as_str())
                .ok()
                .and_then(|v| {
                    v.get("resultType")
                        .and_then(Value::as_str)
                        .map(|t| t == "input_required")
                })
                .unwrap_or(false);
            if input_required {
                return Err(fault(
                    INTERNAL_ERROR,
                    format!(
                        "upstream {name} (2026-07-28) needs input from the client (an input_required result); mcpx does not yet bridge that to a {} client",
                        call.host
                    ),
                    call.host,
                ));
            }
        }
        Ok(Reply {
            result,
            revision: facts.revision,
        })
    }

    /// Relays one event of an upstream call. `Some` when it ends the host's request
    /// (E-9); the caller then cancels the upstream call.
    async fn on_event(
        &self,
        call: &Call,
        facts: &ServerFacts,
        name: &str,
        ev: CallEvent,
    ) -> Option<Fault> {
        match ev {
            CallEvent::Progress {
                progress,
                total,
                message,
            } => {
                if let Some(p) = &call.progress {
                    p.progress(progress, total, message.as_deref()).await;
                }
            }
            CallEvent::Log {
                level,
                logger,
                data,
            } => {
                if let (Some(l), Some(level)) = (&call.log, Level::parse(&level)) {
                    l.log(level, logger.as_deref(), &data).await;
                }
            }
            CallEvent::Ask {
                method,
                params,
                reply,
            } => {
                // E-9: a url-mode elicitation the legacy host cannot take ends its
                // request; the upstream's ask is answered "cancel".
                if facts.era == Era::Legacy
                    && call.host.era() == Era::Legacy
                    && call.peer.is_some()
                    && let Some(f) = self.url_refusal(call, name, &method, params.as_ref())
                {
                    let _ = reply.send(Ok(json!({ "action": "cancel" })));
                    return Some(f);
                }
                let answer = self.ask(call, facts, name, &method, params).await;
                let _ = reply.send(answer);
            }
        }
        None
    }

    /// Relays a server-to-client request from an upstream to the host, within one era.
    async fn ask(
        &self,
        call: &Call,
        facts: &ServerFacts,
        name: &str,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, (i64, String)> {
        if facts.era != Era::Legacy || call.host.era() != Era::Legacy || call.peer.is_none() {
            return Err((
                INTERNAL_ERROR,
                format!(
                    "mcpx cannot relay {method} from upstream {name} ({}) to this client ({}): requests across protocol eras are not bridged yet",
                    facts.revision, call.host
                ),
            ));
        }
        if !mcpx_protocol::method::server_may_send(method, call.host) {
            return Err((
                METHOD_NOT_FOUND,
                format!(
                    "{method} does not exist in this client's protocol revision {}",
                    call.host
                ),
            ));
        }
        host_may_be_asked(call, method)?;
        let mut params = params.unwrap_or(json!({}));
        // E-7, E-16, E-23: the asking upstream hears -32602.
        if method == "sampling/createMessage" {
            prepare_sampling(call, &mut params).map_err(|e| (INVALID_PARAMS, e.to_string()))?;
        }
        let up = self.upstream(name);
        if method == "elicitation/create" {
            // E-11, E-18: shaped for the host; what it cannot be shown, a malformed
            // ask, or a mode mcpx did not declare is the upstream's -32602 (E-14).
            let mode = elicitation::lower(&mut params, call.host, || {
                format!("mcpx-{}", self.next_elicitation())
            })
            .map_err(|e| (INVALID_PARAMS, e.to_string()))?;
            label_elicitation(
                up.as_ref().and_then(|u| self.label(u)).as_deref(),
                &mut params,
            );
            if let (elicitation::Mode::Url, Some(up), Some(peer), Some(id)) = (
                mode,
                &up,
                &call.peer,
                params.get("elicitationId").and_then(Value::as_str),
            ) {
                self.note_url_elicitation(call.host, &up.id, id, peer);
            }
        }
        let _permit = match &up {
            Some(up) => ask_permit(&up.asks, method)?,
            None => None,
        };
        // C-C12: the upstream's own related-task (its task's id, when the ask came from
        // one), kept for the answer that goes back to it.
        let theirs = params
            .get("_meta")
            .and_then(|m| m.get(meta::RELATED_TASK))
            .cloned();
        stamp_related(&mut params, &call.id);
        tasks::ask_params(&mut params, call);
        let _route = self.route_ask_progress(name, &mut params);
        let raw = RawValue::from_string(params.to_string())
            .map(Some)
            .map_err(|e| (INTERNAL_ERROR, e.to_string()))?;
        // 2025-11-25 basic/utilities/tasks §Input Required Status: a gateway task whose
        // work waits on this ask is input_required until it is answered (C-C12).
        let _waiting = self.tasks.waiting(call);
        let timeout = self.config().global.ask_timeout;
        let sent = match (&call.related_task, &call.peer) {
            // A task's work outlives the request that created it (answered with the
            // CreateTaskResult), so its asks go on the session: on HTTP the GET stream
            // (§Input Required Status: "clients SHOULD expect messages to be delivered
            // on any SSE stream, including the HTTP GET stream").
            (Some(_), Some(peer)) => peer.request(method, raw.as_deref(), timeout).await,
            _ => call.ctx.request(method, raw.as_deref(), timeout).await,
        };
        match sent {
            Ok(frame) => match (frame.result(), frame.error()) {
                (Some(r), _) => {
                    let mut v: Value =
                        serde_json::from_str(r).map_err(|e| (INTERNAL_ERROR, e.to_string()))?;
                    tasks::answer_upstream(&mut v, theirs, facts.revision);
                    Ok(v)
                }
                (_, Some(e)) => Err((e.code, e.message.clone())),
                _ => Err((INTERNAL_ERROR, "empty answer".into())),
            },
            Err(e) => Err((
                INTERNAL_ERROR,
                format!("the client did not answer {method}: {e}"),
            )),
        }
    }

    /// C-C6 (2025-11-25 basic/utilities/progress: "Either side can send progress
    /// notifications"): an ask a legacy upstream sends with a progress token reaches the
    /// legacy host with a token of mcpx's own, so the host's progress on it can go back
    /// to that upstream alone, with the upstream's token. Returns the route, forgotten
    /// when dropped.
    fn route_ask_progress(&self, upstream: &str, params: &mut Value) -> Option<ProgressRoute<'_>> {
        let id = self.upstream(upstream)?.id.clone();
        let meta = params.get_mut("_meta")?.as_object_mut()?;
        let theirs = meta.get(meta::PROGRESS_TOKEN)?.clone();
        let token = format!("mcpx-ask-{}", random_token()?);
        meta.insert(meta::PROGRESS_TOKEN.to_owned(), json!(token));
        self.ask_progress
            .lock()
            .ok()?
            .insert(token.clone(), (id, theirs));
        Some(ProgressRoute {
            routes: &self.ask_progress,
            token,
        })
    }

    /// A legacy host's `notifications/progress`: relayed to the upstream whose ask it
    /// reports on, if that ask is still open and the upstream's revision lets a client
    /// send progress (C-C6: never a modern upstream). Anything else is dropped.
    async fn relay_ask_progress(&self, params: Option<&str>) {
        let Some(mut params) = params.and_then(|p| serde_json::from_str::<Value>(p).ok()) else {
            return;
        };
        let Some(token) = params.get("progressToken").and_then(Value::as_str) else {
            return;
        };
        let route = self
            .ask_progress
            .lock()
            .ok()
            .and_then(|m| m.get(token).cloned());
        let Some((id, theirs)) = route else {
            return;
        };
        let conn = self.upstream(id.as_str()).and_then(|u| u.ready());
        let Some(conn) = conn else { return };
        if !mcpx_protocol::method::client_may_send("notifications/progress", conn.facts().revision)
        {
            return;
        }
        params["progressToken"] = theirs;
        let _ = conn.notify("notifications/progress", Some(params)).await;
    }

    /// `subscriptions/listen` from a modern host: acknowledge the kinds mcpx can deliver,
    /// then deliver them, tagged with the listen id, until the host cancels.
    async fn listen(self: &Arc<Self>, call: &Call) -> Result<Reply, Fault> {
        let params: Value = call
            .params
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(json!({}));
        let requested = params.get("notifications").cloned().unwrap_or(json!({}));
        let want = |k: &str| requested.get(k).and_then(Value::as_bool).unwrap_or(false);
        let mut granted = Map::new();
        for k in [
            "toolsListChanged",
            "promptsListChanged",
            "resourcesListChanged",
        ] {
            if want(k) {
                granted.insert(k.to_owned(), json!(true));
            }
        }
        // D-C4 (2026-07-28 server/resources §Capabilities, schema SubscriptionFilter):
        // a modern host subscribes to resources with `resourceSubscriptions`; mcpx
        // subscribes at the owning upstreams and grants the URIs it could.
        let stop = tokio_util::sync::CancellationToken::new();
        let _stop_upstream_listens = stop.clone().drop_guard();
        let mut urx = self.updates.subscribe();
        let mut watched: Vec<(String, Arc<Upstream>, String)> = Vec::new();
        if let Some(uris) = requested
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
        {
            for uri in uris.iter().filter_map(Value::as_str) {
                if watched.iter().any(|(u, _, _)| u == uri) {
                    continue;
                }
                if let Some((up, theirs)) = self.subscribe_upstream(call, uri, &stop).await {
                    watched.push((uri.to_owned(), up, theirs));
                }
            }
            if !watched.is_empty() {
                let uris: Vec<&str> = watched.iter().map(|(u, _, _)| u.as_str()).collect();
                granted.insert("resourceSubscriptions".to_owned(), json!(uris));
            }
        }
        let sub_id = match &call.id {
            Id::Number(n) => json!(n),
            Id::String(s) => json!(s),
        };
        let tag = json!({ meta::SUBSCRIPTION_ID: sub_id });
        let mut rx = self.changes.subscribe();
        let ack = json!({ "_meta": tag, "notifications": Value::Object(granted.clone()) });
        let _ = call
            .ctx
            .notify(Frame::notification(
                "notifications/subscriptions/acknowledged",
                Some(&raw(&ack)?),
            ))
            .await;
        loop {
            tokio::select! {
                () = call.cancel.cancelled() => break,
                () = self.stopping.cancelled() => {
                    // H1 reading (2026-07-28 basic/patterns/cancellation and
                    // subscriptions, schema CancelledNotification): mcpx ends the stream
                    // on its own; on stdio it first sends notifications/cancelled for the
                    // listen id (the MUST), then the result (the SHOULD); on HTTP only
                    // the result, and the stream closes.
                    if call.ctx.is_stdio() {
                        let p = json!({ "requestId": sub_id, "reason": "mcpx is shutting down" });
                        let _ = call.ctx.notify(Frame::notification("notifications/cancelled", Some(&raw(&p)?))).await;
                    }
                    break;
                }
                change = rx.recv() => {
                    let kind = match change {
                        Ok(k) => k,
                        Err(broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(broadcast::error::RecvError::Closed) => break,
                    };
                    let key = match kind {
                        ListKind::Tools => "toolsListChanged",
                        ListKind::Prompts => "promptsListChanged",
                        ListKind::Resources | ListKind::Templates => "resourcesListChanged",
                    };
                    if granted.contains_key(key) {
                        let p = json!({ "_meta": tag });
                        let _ = call.ctx.notify(Frame::notification(kind.changed_notification(), Some(&raw(&p)?))).await;
                    }
                }
                update = urx.recv(), if !watched.is_empty() => {
                    let frame = match update {
                        Ok(f) => f,
                        Err(broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(broadcast::error::RecvError::Closed) => break,
                    };
                    let uri = frame
                        .params()
                        .and_then(|p| mcpx_protocol::jsonrpc::member(p, "uri"))
                        .and_then(|u| serde_json::from_str::<String>(u).ok())
                        .unwrap_or_default();
                    if watched.iter().any(|(u, _, _)| *u == uri) {
                        // Tagged with this listen's id, not the upstream's.
                        let p = json!({ "uri": uri, "_meta": tag });
                        let _ = call.ctx.notify(Frame::notification("notifications/resources/updated", Some(&raw(&p)?))).await;
                    }
                }
            }
        }
        for (uri, up, theirs) in &watched {
            self.unsubscribe_upstream(up, uri, theirs).await;
        }
        // A graceful end (2026-07-28 basic/patterns/subscriptions §Graceful Closure).
        Ok(Reply {
            result: Json::of_value(&json!({ "_meta": tag })),
            revision: Revision::NEWEST,
        })
    }
}

/// The gateway behind the serve seam.
#[derive(Debug, Clone)]
pub struct GatewayBackend(pub Arc<Gateway>);

impl GatewayBackend {
    /// What the gateway offers, from its upstreams' last facts.
    fn summary_of(gw: &Gateway) -> Summary {
        // D-C7: a capability is declared iff some upstream offers it (as last seen: an
        // upstream that is down now keeps what it offered), the same set in
        // InitializeResult and DiscoverResult.
        let ups = gw.upstreams();
        let facts: Vec<Arc<ServerFacts>> = ups.iter().filter_map(|u| u.facts()).collect();
        let any = |cap: &str| facts.iter().any(|f| f.has(cap));
        let instructions: Vec<String> = ups
            .iter()
            .filter_map(|u| {
                let i = u.facts()?.instructions.clone()?;
                Some(format!("[{}] {i}", u.id))
            })
            .collect();
        // The lists can always change: upstreams come, go and change.
        let list = |cap: &str| any(cap).then_some(ListCaps { list_changed: true });
        Summary {
            tools: list("tools"),
            prompts: list("prompts"),
            resources: list("resources"),
            resources_subscribe: facts.iter().any(|f| {
                f.capabilities
                    .pointer("/resources/subscribe")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            }),
            // C-C9: a 2024-11-05 server could complete without declaring it.
            completions: any("completions")
                || facts.iter().any(|f| {
                    !f.revision.facts().completions_capability
                        && (f.has("prompts") || f.has("resources"))
                }),
            logging: any("logging"),
            tasks: tasks::offered(&facts),
            instructions: (!instructions.is_empty()).then(|| instructions.join("\n\n")),
        }
    }
}

impl Backend for GatewayBackend {
    fn offered(&self) -> Offered {
        self.0.offered.lock().map(|o| *o).unwrap_or_default()
    }

    async fn log_level_requested(&self, level: Level) {
        self.0.lower_upstream_log_level(level).await;
    }

    /// A host's notification. Client-sent progress exists only in the legacy era
    /// (2026-07-28 basic/patterns/progress: the server sends it); it is relayed per
    /// C-C6. `notifications/roots/list_changed` is not forwarded (E-3): mcpx declares
    /// `roots` to legacy upstreams without `listChanged`.
    async fn notification(&self, method: &str, params: Option<&str>, host: Revision) {
        if method == "notifications/progress"
            && mcpx_protocol::method::client_may_send(method, host)
        {
            self.0.relay_ask_progress(params).await;
        }
    }

    fn param_headers(&self, tool: &str) -> Vec<mcpx_protocol::header::ParamHeader> {
        // Read at the last rebuild, with the list the host sees (a tool whose
        // annotations are invalid is not listed, so it has none here either).
        self.0.catalog().param_headers(tool).to_vec()
    }

    async fn ready(&self) {
        self.0.settled().await;
    }

    fn summary(&self) -> Summary {
        GatewayBackend::summary_of(&self.0)
    }
    // Not an `async fn`: one would move `call` into a local of its own and keep both
    // copies in the future (rustc does not overlap them), half a kilobyte more on every
    // call. Every rarer branch below is boxed for the same reason: a future is as large
    // as its largest branch, and a call's is moved and allocated on every call.
    #[allow(clippy::manual_async_fn)]
    fn call(&self, call: Call) -> impl Future<Output = Result<Reply, Fault>> + Send {
        async move {
            let gw = &self.0;
            gw.remember_peer(&call.peer);
            match call.method.as_str() {
                "tools/list" => gw.list(&call, ListKind::Tools),
                "prompts/list" => gw.list(&call, ListKind::Prompts),
                "resources/list" => gw.list(&call, ListKind::Resources),
                "resources/templates/list" => gw.list(&call, ListKind::Templates),
                "tools/call" | "prompts/get" | "resources/read"
                    if call
                        .params
                        .as_ref()
                        .and_then(|p| p.member("requestState"))
                        .is_some_and(|s| s.starts_with(&format!("\"{PARKED_PREFIX}"))) =>
                {
                    let state: String = call
                        .params
                        .as_ref()
                        .and_then(|p| p.member("requestState"))
                        .and_then(|s| serde_json::from_str(s).ok())
                        .unwrap_or_default();
                    Box::pin(gw.resume(&call, &state)).await
                }
                "tools/call" => tasks::tools_call(gw, &call).await,
                "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" | "tasks/update" => {
                    tasks::method(gw, &call).await
                }
                // tools/call goes through `tasks` (above); this arm serves prompts/get.
                "prompts/get" => {
                    let Routed {
                        upstream, params, ..
                    } = gw.route_name(&call, true)?;
                    // prompts/get changes nothing: safe to re-issue (B-C10).
                    gw.forward(&call, &upstream, &call.method, &params, true)
                        .await
                }
                "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                    let mut params: Value = call
                        .params
                        .as_deref()
                        .and_then(|p| serde_json::from_str(p).ok())
                        .unwrap_or(json!({}));
                    let uri = params
                        .get("uri")
                        .and_then(Value::as_str)
                        .ok_or_else(|| {
                            fault(INVALID_PARAMS, "params.uri is required".into(), call.host)
                        })?
                        .to_owned();
                    let (up, theirs) = gw.route_uri(&call, &uri)?;
                    if theirs != uri {
                        params["uri"] = json!(theirs);
                    }
                    match call.method.as_str() {
                        "resources/subscribe" | "resources/unsubscribe" => {
                            Box::pin(gw.subscription(&call, &up, &uri, &params)).await
                        }
                        _ => {
                            let reply = gw
                                .forward(&call, &up, &call.method, &Params::of_value(&params), true)
                                .await?;
                            Ok(if theirs == uri {
                                reply
                            } else {
                                expose_contents(reply, &uri, &theirs)
                            })
                        }
                    }
                }
                "completion/complete" => {
                    let mut params: Value = call
                        .params
                        .as_deref()
                        .and_then(|p| serde_json::from_str(p).ok())
                        .unwrap_or(json!({}));
                    let r = params.get("ref").cloned().unwrap_or(Value::Null);
                    let up = match r.get("type").and_then(Value::as_str) {
                        Some("ref/prompt") => {
                            let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
                            let catalog = gw.catalog();
                            let found = catalog.prompt(name).ok_or_else(|| {
                                fault(INVALID_PARAMS, format!("unknown prompt: {name}"), call.host)
                            })?;
                            let up = gw.upstream(found.upstream.as_str()).ok_or_else(|| {
                                GatewayError::Removed {
                                    upstream: found.upstream.clone(),
                                }
                                .to_fault(call.host)
                            })?;
                            params["ref"]["name"] = json!(found.original);
                            up
                        }
                        Some("ref/resource") => {
                            let uri = r
                                .get("uri")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned();
                            let (up, theirs) = gw.route_uri(&call, &uri)?;
                            params["ref"]["uri"] = json!(theirs);
                            up
                        }
                        _ => {
                            return Err(fault(
                                INVALID_PARAMS,
                                "params.ref must be ref/prompt or ref/resource".into(),
                                call.host,
                            ));
                        }
                    };
                    // C-C9: from 2025-03-26 a server that completes declares `completions`;
                    // an upstream that did not is not asked (a 2024-11-05 one, which had no
                    // such capability, is). Its answer is "no suggestions".
                    let facts = up.ready().map(|c| c.facts());
                    if let Some(f) = facts.filter(|f| {
                        f.revision.facts().completions_capability && !f.has("completions")
                    }) {
                        return Ok(Reply {
                            result: Json::of_value(
                                &json!({ "completion": { "values": [], "hasMore": false } }),
                            ),
                            revision: f.revision,
                        });
                    }
                    gw.forward(
                        &call,
                        &up,
                        "completion/complete",
                        &Params::of_value(&params),
                        true,
                    )
                    .await
                }
                "subscriptions/listen" => Box::pin(gw.listen(&call)).await,
                other => Err(fault(
                    METHOD_NOT_FOUND,
                    format!("method not found: {other}"),
                    call.host,
                )),
            }
        }
    }
}
