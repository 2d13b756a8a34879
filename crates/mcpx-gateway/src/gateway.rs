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

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use mcpx_client::{
    CallEvent, CallOptions, ClientError, Connection, EraCache, ServerFacts, Target,
    TargetTransport, connect,
};
use mcpx_protocol::error::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND};
use mcpx_protocol::header::param_headers;
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::{Era, Frame, Id, Revision, meta};
use mcpx_server::{Backend, Call, Fault, Level, ListCaps, Offered, Reply, Summary};
use mcpx_transport::Peer;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use crate::config::{Config, ServerConfig, Transport};
use crate::naming::{NameMap, NameRules};

/// The lists the catalog merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    /// `tools/list`
    Tools,
    /// `prompts/list`
    Prompts,
    /// `resources/list`
    Resources,
    /// `resources/templates/list`
    Templates,
}

impl ListKind {
    fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Prompts => "prompts/list",
            ListKind::Resources => "resources/list",
            ListKind::Templates => "resources/templates/list",
        }
    }
    fn key(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::Templates => "resourceTemplates",
        }
    }
    fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources | ListKind::Templates => "resources",
        }
    }
    fn changed_notification(self) -> &'static str {
        match self {
            ListKind::Tools => "notifications/tools/list_changed",
            ListKind::Prompts => "notifications/prompts/list_changed",
            ListKind::Resources | ListKind::Templates => "notifications/resources/list_changed",
        }
    }
}

/// The merged lists.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Each list's items as the host sees them (renamed where names are mapped).
    lists: HashMap<&'static str, Vec<Value>>,
    tool_names: NameMap,
    prompt_names: NameMap,
    /// Tool annotations by (upstream, original name): whether a re-issue is safe (B-C10).
    idempotent_tools: BTreeSet<(usize, String)>,
    /// Resource URIs to their upstream.
    by_uri: HashMap<String, usize>,
    /// URI template prefixes (up to the first `{`) to their upstream, longest first.
    template_prefixes: Vec<(String, usize)>,
}

/// One upstream and its connection.
#[derive(Debug)]
struct Slot {
    name: String,
    namespace: String,
    config: ServerConfig,
    target: Target,
    conn: tokio::sync::Mutex<Option<Connection>>,
    last_error: Mutex<Option<String>>,
    /// What the upstream offered when last connected.
    last_facts: Mutex<Option<Arc<ServerFacts>>>,
}

/// The gateway.
#[derive(Debug)]
pub struct Gateway {
    slots: Vec<Arc<Slot>>,
    config: Config,
    era_cache: EraCache,
    catalog: RwLock<Catalog>,
    /// List changes, for hosts (legacy sessions and modern listen streams).
    changes: broadcast::Sender<ListKind>,
    /// Legacy host sessions seen, to tell them about list changes.
    legacy_peers: Mutex<Vec<Peer>>,
    /// The capabilities offered, kept current as upstreams connect (read per request).
    offered: Mutex<Offered>,
    /// Fired when mcpx shuts down: its listen streams end gracefully (H1).
    stopping: tokio_util::sync::CancellationToken,
    /// Legacy hosts subscribed to each resource URI, with the token that ends mcpx's own
    /// listen stream for it (modern upstreams).
    subscribers: Mutex<HashMap<String, Vec<(Peer, tokio_util::sync::CancellationToken)>>>,
    /// Calls of modern hosts to legacy upstreams, parked while the host answers an
    /// `input_required` result, by `requestState` token.
    parked: Mutex<HashMap<String, Parked>>,
    /// Counter for minted elicitation ids.
    elicitations: std::sync::atomic::AtomicU64,
    /// The most verbose log level any legacy host asked for, applied to legacy upstreams.
    upstream_log_level: Mutex<Option<Level>>,
}

/// A `subscriptions/listen` call has no response to wait for: it lasts as long as
/// the connection.
const LISTEN_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// The `requestState` prefix of a call mcpx parked (followed by a random token).
const PARKED_PREFIX: &str = "mcpx1:";
/// The `inputRequests` key of a parked call's question.
const PARKED_KEY: &str = "mcpx";

/// A modern host's call to a legacy upstream, waiting for the host's answer.
#[derive(Debug)]
struct Parked {
    upstream: usize,
    method: String,
    events: tokio::sync::mpsc::Receiver<CallEvent>,
    task: tokio::task::JoinHandle<Result<Frame, ClientError>>,
    cancel: tokio_util::sync::CancellationToken,
    /// Where the host's answer to the upstream's question goes.
    reply: Option<tokio::sync::oneshot::Sender<Result<Value, (i64, String)>>>,
}

/// 128 random bits, hex: unguessable, so a `requestState` cannot be forged (E-13, E-30).
fn random_token() -> Option<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).ok()?;
    Some(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// How many `input_required` rounds mcpx answers for a legacy host before giving up.
const MAX_INPUT_ROUNDS: usize = 10;
/// How long a host may take to answer a relayed request (sampling may involve a person).
const ASK_TIMEOUT: Duration = Duration::from_secs(300);

fn fault(code: i64, message: String, host: Revision) -> Fault {
    Fault::new(code, message, host)
}

fn raw(v: &Value) -> Result<Box<RawValue>, Fault> {
    RawValue::from_string(v.to_string())
        .map_err(|e| fault(INTERNAL_ERROR, e.to_string(), Revision::NEWEST))
}

impl Gateway {
    /// A gateway for `config`. Call [`Gateway::start`] to connect the upstreams.
    pub fn new(config: Config, era_cache: EraCache) -> Arc<Gateway> {
        let info = json!({ "name": "mcpx", "version": env!("CARGO_PKG_VERSION") });
        let slots = config
            .servers
            .iter()
            .filter(|(_, s)| !s.disabled)
            .map(|(name, s)| {
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
                let mut target = Target::new(name.clone(), transport);
                target.preference = s.mcpx.protocol;
                target.handshake_timeout = s.mcpx.connect_timeout;
                target.limits.max_frame_bytes = config.global.max_frame_bytes;
                target.client_info = info.clone();
                target.policy = config.spec.clone();
                // Same-era asks are relayed to legacy hosts, so mcpx declares them.
                target.legacy_capabilities =
                    json!({ "roots": {}, "sampling": {}, "elicitation": {} });
                Arc::new(Slot {
                    name: name.clone(),
                    namespace: s.mcpx.namespace.clone().unwrap_or_else(|| name.clone()),
                    config: s.clone(),
                    target,
                    conn: tokio::sync::Mutex::new(None),
                    last_error: Mutex::new(None),
                    last_facts: Mutex::new(None),
                })
            })
            .collect();
        let (changes, _) = broadcast::channel(64);
        Arc::new(Gateway {
            slots,
            config,
            era_cache,
            catalog: RwLock::new(Catalog::default()),
            changes,
            legacy_peers: Mutex::new(Vec::new()),
            stopping: tokio_util::sync::CancellationToken::new(),
            offered: Mutex::new(Offered::default()),
            elicitations: std::sync::atomic::AtomicU64::new(1),
            subscribers: Mutex::new(HashMap::new()),
            parked: Mutex::new(HashMap::new()),
            upstream_log_level: Mutex::new(None),
        })
    }

    /// Connects every upstream (concurrently) and builds the catalog. Upstreams that
    /// fail are reported and retried on use; the others serve.
    pub async fn start(self: &Arc<Self>) {
        let mut tasks = tokio::task::JoinSet::new();
        for (i, _) in self.slots.iter().enumerate() {
            let gw = self.clone();
            tasks.spawn(async move {
                let _ = gw.connection(i).await;
            });
        }
        while tasks.join_next().await.is_some() {}
        self.refresh().await;
    }

    /// Begins shutting down: hosts' `subscriptions/listen` streams end gracefully.
    pub fn shutdown(&self) {
        self.stopping.cancel();
    }

    /// Names and last errors of upstreams that are not connected.
    pub fn unavailable(&self) -> Vec<(String, String)> {
        self.slots
            .iter()
            .filter_map(|s| {
                let e = s.last_error.lock().ok()?.clone()?;
                Some((s.name.clone(), e))
            })
            .collect()
    }

    /// The connection of upstream `i`, connecting (again) when there is none or the one
    /// held is known dead (a stdio upstream that exited between calls).
    async fn connection(self: &Arc<Self>, i: usize) -> Result<Connection, String> {
        let slot = &self.slots[i];
        let mut guard = slot.conn.lock().await;
        if let Some(c) = guard.as_ref() {
            if !c.is_closed() {
                return Ok(c.clone());
            }
            // Nothing was sent on it for this request, so connecting again is safe for
            // any method; the old one is already gone (issue "The gateway": an upstream
            // that crashes; the next use reconnects).
            tracing::warn!(upstream = %slot.name, "connection lost while idle; connecting again");
            if let Some(old) = guard.take() {
                old.close().await;
            }
        }
        let connecting = connect(&slot.target, &self.era_cache);
        let result = match tokio::time::timeout(
            slot.config.mcpx.connect_timeout + Duration::from_secs(5),
            connecting,
        )
        .await
        {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "upstream {}: no connection within {:?}",
                slot.name, slot.config.mcpx.connect_timeout
            )),
        };
        match result {
            Ok(conn) => {
                let facts = conn.facts();
                tracing::info!(upstream = %slot.name, era = %facts.era, revision = %facts.revision, transport = conn.transport_kind(), "connected");
                if let Ok(mut e) = slot.last_error.lock() {
                    *e = None;
                }
                if let Ok(mut f) = slot.last_facts.lock() {
                    *f = Some(facts.clone());
                }
                let offered = GatewayBackend(self.clone()).summary().offered();
                if let Ok(mut o) = self.offered.lock() {
                    *o = offered;
                }
                self.watch(i, &conn);
                let level = self.upstream_log_level.lock().ok().and_then(|l| *l);
                if let Some(level) = level {
                    self.apply_log_level(&conn, level).await;
                }
                *guard = Some(conn.clone());
                Ok(conn)
            }
            Err(e) => {
                tracing::warn!(upstream = %slot.name, "{e}");
                if let Ok(mut last) = slot.last_error.lock() {
                    *last = Some(e.clone());
                }
                Err(e)
            }
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
        let params = json!({ "level": level.as_str() }).to_string();
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
            for i in 0..self.slots.len() {
                let conn = self.slots[i].conn.lock().await.clone();
                if let Some(conn) = conn {
                    self.apply_log_level(&conn, level).await;
                }
            }
        }
    }

    /// Forgets a connection that failed, so the next use reconnects.
    async fn drop_connection(&self, i: usize, why: &str) {
        let slot = &self.slots[i];
        let old = slot.conn.lock().await.take();
        if let Some(c) = old {
            tracing::warn!(upstream = %slot.name, "connection lost: {why}");
            if let Ok(mut e) = slot.last_error.lock() {
                *e = Some(why.to_owned());
            }
            c.close().await;
        }
    }

    /// Follows an upstream's list changes: refresh the catalog, tell the hosts. A modern
    /// upstream only reports changes on a `subscriptions/listen` stream, which mcpx opens.
    fn watch(self: &Arc<Self>, i: usize, conn: &Connection) {
        let mut rx = conn.changes();
        let gw = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let frame = match rx.recv().await {
                    Ok(f) => f,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                let Some(gw) = gw.upgrade() else { return };
                let kind = match frame.method() {
                    Some("notifications/tools/list_changed") => ListKind::Tools,
                    Some("notifications/prompts/list_changed") => ListKind::Prompts,
                    Some("notifications/resources/list_changed") => ListKind::Resources,
                    Some("notifications/resources/updated") => {
                        gw.relay_resource_updated(&frame).await;
                        continue;
                    }
                    _ => continue,
                };
                tracing::debug!(upstream = %gw.slots[i].name, ?kind, "list changed");
                gw.refresh().await;
                gw.announce(kind).await;
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
                let params = json!({ "notifications": filter }).to_string();
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
                                // The connection failed: whoever reconnects listens anew.
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

    /// `notifications/resources/updated` goes to the legacy hosts that subscribed to
    /// that URI.
    async fn relay_resource_updated(&self, frame: &Frame) {
        let uri = frame
            .params()
            .and_then(|p| mcpx_protocol::jsonrpc::member(p, "uri"))
            .and_then(|u| serde_json::from_str::<String>(u).ok())
            .unwrap_or_default();
        let peers: Vec<Peer> = self
            .subscribers
            .lock()
            .ok()
            .and_then(|s| {
                s.get(&uri)
                    .map(|v| v.iter().map(|(p, _)| p.clone()).collect())
            })
            .unwrap_or_default();
        for peer in peers {
            let _ = peer.notify(frame.clone()).await;
        }
    }

    /// `resources/subscribe` and `resources/unsubscribe` from a legacy host. A legacy
    /// upstream gets them as they are; a modern one has no such methods, so mcpx holds
    /// a `subscriptions/listen` stream with `resourceSubscriptions` for the URI instead
    /// (register D-C4).
    async fn subscription(
        self: &Arc<Self>,
        call: &Call,
        i: usize,
        uri: &str,
        params: &Value,
    ) -> Result<Reply, Fault> {
        let subscribe = call.method == "resources/subscribe";
        let peer = call.peer.clone();
        let key = peer
            .as_ref()
            .and_then(Peer::session_id)
            .unwrap_or_default()
            .to_owned();
        let conn = self.connection(i).await.map_err(|e| {
            fault(
                INTERNAL_ERROR,
                format!("upstream {} is unavailable: {e}", self.slots[i].name),
                call.host,
            )
        })?;
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
                format!(
                    "upstream {} does not support resource subscriptions",
                    self.slots[i].name
                ),
                call.host,
            ));
        }
        if !modern {
            self.forward(call, i, &call.method, &params.to_string(), true)
                .await?;
        }
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
                {
                    let token = tokio_util::sync::CancellationToken::new();
                    if modern {
                        let params = json!({ "notifications": { "resourceSubscriptions": [uri] } })
                            .to_string();
                        let conn = conn.clone();
                        let stop = token.clone();
                        tokio::spawn(async move {
                            let opts = CallOptions {
                                timeout: LISTEN_LIFETIME,
                                max_time: LISTEN_LIFETIME,
                                attribute_unsolicited: false,
                                cancel: stop,
                                ..CallOptions::default()
                            };
                            if let Err(e) =
                                conn.call("subscriptions/listen", Some(&params), opts).await
                            {
                                tracing::debug!(
                                    upstream = conn.name(),
                                    "resource listen ended: {e}"
                                );
                            }
                        });
                    }
                    entry.push((peer, token));
                }
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
        Ok(Reply {
            result: Json::of_value(&json!({})),
            revision: call.host,
        })
    }

    fn remember_peer(&self, peer: &Option<Peer>) {
        let Some(peer) = peer else { return };
        if let Ok(mut peers) = self.legacy_peers.lock() {
            let key = peer.session_id().map(str::to_owned);
            if !peers
                .iter()
                .any(|p| p.session_id().map(str::to_owned) == key)
            {
                peers.push(peer.clone());
            }
        }
    }

    /// Rebuilds the catalog from every connected upstream.
    pub async fn refresh(self: &Arc<Self>) {
        let rules = NameRules {
            separator: self.config.global.separator.clone(),
            max_len: self.config.global.max_name_len,
            prefix: self.slots.len() > 1,
        };
        let mut raw: Vec<(usize, ListKind, Vec<Value>)> = Vec::new();
        for i in 0..self.slots.len() {
            let conn = match self.slots[i].conn.lock().await.clone() {
                Some(c) => c,
                None => continue,
            };
            let facts = conn.facts();
            for kind in [
                ListKind::Tools,
                ListKind::Prompts,
                ListKind::Resources,
                ListKind::Templates,
            ] {
                if !facts.has(kind.capability()) {
                    continue;
                }
                let opts = CallOptions {
                    timeout: self.slots[i].config.mcpx.call_timeout,
                    ..CallOptions::default()
                };
                match conn.list_all(kind.method(), kind.key(), opts, 1000).await {
                    Ok(items) => raw.push((i, kind, items)),
                    Err(e) => {
                        tracing::warn!(upstream = %self.slots[i].name, "{} failed: {e}", kind.method());
                        if matches!(e, ClientError::Transport { .. }) {
                            self.drop_connection(i, &e.to_string()).await;
                        }
                    }
                }
            }
        }
        let mut catalog = Catalog::default();
        for kind in [ListKind::Tools, ListKind::Prompts] {
            let mut names: Vec<(usize, String)> = Vec::new();
            for (i, k, items) in &raw {
                if *k != kind {
                    continue;
                }
                for item in items {
                    let Some(n) = item.get("name").and_then(Value::as_str) else {
                        continue;
                    };
                    if kind == ListKind::Tools && !self.slots[*i].config.mcpx.tools.allows(n) {
                        continue;
                    }
                    names.push((*i, n.to_owned()));
                }
            }
            let map = NameMap::build(
                &rules,
                names
                    .iter()
                    .map(|(i, n)| (self.slots[*i].namespace.as_str(), n.as_str())),
            );
            for c in &map.collisions {
                tracing::warn!(
                    "name collision: {} from {} and {} from {} both map to {}; the second is shown as {}",
                    c.kept.1,
                    c.kept.0,
                    c.renamed.1,
                    c.renamed.0,
                    c.wanted,
                    c.renamed.2
                );
            }
            let mut entries = Vec::new();
            for (i, k, items) in &raw {
                if *k != kind {
                    continue;
                }
                let conn = self.slots[*i].conn.lock().await.clone();
                for item in items {
                    let Some(n) = item.get("name").and_then(Value::as_str) else {
                        continue;
                    };
                    let Some(exposed) = map.exposed(&self.slots[*i].namespace, n) else {
                        continue;
                    };
                    let mut def = item.clone();
                    if kind == ListKind::Tools {
                        // 2026-07-28 streamable-http §Custom Headers: a tool whose
                        // x-mcp-header annotations are invalid MUST be excluded.
                        match param_headers(item.get("inputSchema").unwrap_or(&Value::Null)) {
                            Ok(hs) => {
                                if let Some(c) = &conn {
                                    c.set_tool_param_headers(n, hs);
                                }
                            }
                            Err(why) => {
                                tracing::warn!(upstream = %self.slots[*i].name, tool = n, "excluded: {why}");
                                continue;
                            }
                        }
                        let annotations = item.get("annotations");
                        let safe = |k: &str| {
                            annotations.and_then(|a| a.get(k)).and_then(Value::as_bool)
                                == Some(true)
                        };
                        if safe("readOnlyHint") || safe("idempotentHint") {
                            catalog.idempotent_tools.insert((*i, n.to_owned()));
                        }
                    }
                    def["name"] = json!(exposed);
                    entries.push(def);
                }
            }
            catalog.lists.insert(kind.key(), entries);
            match kind {
                ListKind::Tools => catalog.tool_names = map,
                _ => catalog.prompt_names = map,
            }
        }
        let mut uri_clashes: std::collections::BTreeMap<(usize, usize), Vec<String>> =
            std::collections::BTreeMap::new();
        for kind in [ListKind::Resources, ListKind::Templates] {
            let mut entries = Vec::new();
            for (i, k, items) in &raw {
                if *k != kind {
                    continue;
                }
                for item in items {
                    match kind {
                        ListKind::Resources => {
                            let Some(uri) = item.get("uri").and_then(Value::as_str) else {
                                continue;
                            };
                            // The first upstream to offer a URI serves its reads; a clash is
                            // reported, never silent (D-C13's rule for names, applied to URIs).
                            match catalog.by_uri.get(uri) {
                                Some(prev) if *prev != *i => {
                                    uri_clashes
                                        .entry((*prev, *i))
                                        .or_default()
                                        .push(uri.to_owned());
                                }
                                Some(_) => {}
                                None => {
                                    catalog.by_uri.insert(uri.to_owned(), *i);
                                }
                            }
                        }
                        _ => {
                            if let Some(t) = item.get("uriTemplate").and_then(Value::as_str) {
                                let prefix = t.split('{').next().unwrap_or(t).to_owned();
                                catalog.template_prefixes.push((prefix, *i));
                            }
                        }
                    }
                    entries.push(item.clone());
                }
            }
            catalog.lists.insert(kind.key(), entries);
        }
        for ((kept, other), uris) in &uri_clashes {
            tracing::warn!(
                "{} resource URI(s) are offered by both {} and {}; reads go to {} (e.g. {})",
                uris.len(),
                self.slots[*kept].name,
                self.slots[*other].name,
                self.slots[*kept].name,
                uris.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            );
        }
        catalog
            .template_prefixes
            .sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        if let Ok(mut c) = self.catalog.write() {
            *c = catalog;
        }
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
        let page = self.config.global.page_size.max(1);
        let catalog = self
            .catalog
            .read()
            .map_err(|_| fault(INTERNAL_ERROR, "catalog lock poisoned".into(), call.host))?;
        let all = catalog
            .lists
            .get(kind.key())
            .map(Vec::as_slice)
            .unwrap_or_default();
        if start > all.len() {
            return Err(fault(
                INVALID_PARAMS,
                format!("cursor {start} is past the end"),
                call.host,
            ));
        }
        let end = (start + page).min(all.len());
        let items = &all[start..end];
        let mut result = json!({ kind.key(): items });
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
    fn route_name(&self, call: &Call, prompts: bool) -> Result<(usize, String, String), Fault> {
        let raw = call.params.as_deref().unwrap_or("{}");
        let name: String = mcpx_protocol::jsonrpc::member(raw, "name")
            .and_then(|n| serde_json::from_str(n).ok())
            .ok_or_else(|| fault(INVALID_PARAMS, "params.name is required".into(), call.host))?;
        let catalog = self
            .catalog
            .read()
            .map_err(|_| fault(INTERNAL_ERROR, "catalog lock poisoned".into(), call.host))?;
        let map = if prompts {
            &catalog.prompt_names
        } else {
            &catalog.tool_names
        };
        let (ns, original) = map.resolve(&name).ok_or_else(|| {
            // 2025-11-25 server/tools §Error Handling: an unknown tool is a protocol error
            // (register D-C14).
            fault(
                INVALID_PARAMS,
                format!(
                    "unknown {}: {name}",
                    if prompts { "prompt" } else { "tool" }
                ),
                call.host,
            )
        })?;
        let i = self
            .slots
            .iter()
            .position(|s| s.namespace == ns)
            .ok_or_else(|| {
                fault(
                    INTERNAL_ERROR,
                    format!("no upstream for namespace {ns}"),
                    call.host,
                )
            })?;
        if original == name {
            return Ok((i, original.to_owned(), raw.to_owned()));
        }
        let mut params: Value = serde_json::from_str(raw).unwrap_or(json!({}));
        params["name"] = json!(original);
        Ok((i, original.to_owned(), params.to_string()))
    }

    fn route_uri(&self, call: &Call, uri: &str) -> Result<usize, Fault> {
        let catalog = self
            .catalog
            .read()
            .map_err(|_| fault(INTERNAL_ERROR, "catalog lock poisoned".into(), call.host))?;
        if let Some(i) = catalog.by_uri.get(uri) {
            return Ok(*i);
        }
        if let Some((_, i)) = catalog
            .template_prefixes
            .iter()
            .find(|(p, _)| !p.is_empty() && uri.starts_with(p.as_str()))
        {
            return Ok(*i);
        }
        if self.slots.len() == 1 {
            return Ok(0);
        }
        Err(Fault {
            code: mcpx_protocol::error::resource_not_found(call.host),
            message: format!("resource not found: {uri}"),
            data: Some(json!({ "uri": uri })),
            from: call.host,
            input_validation: false,
        })
    }

    /// Sends `method` with `params` to upstream `i` for `call`, relaying events.
    async fn forward(
        self: &Arc<Self>,
        call: &Call,
        i: usize,
        method: &str,
        params: &str,
        idempotent: bool,
    ) -> Result<Reply, Fault> {
        let slot = &self.slots[i];
        let conn = self.connection(i).await.map_err(|e| {
            fault(
                INTERNAL_ERROR,
                format!("upstream {} is unavailable: {e}", slot.name),
                call.host,
            )
        })?;
        let facts = conn.facts();
        let host_modern = call.host.era() == Era::Modern;
        if host_modern && facts.era == Era::Legacy {
            return self
                .forward_parking(call, i, conn, method, params, idempotent)
                .await;
        }
        // The params as sent: the caller's text until an input round rewrites them.
        let mut text = std::borrow::Cow::Borrowed(params);
        // A 2026-07-28 upstream asks for input with `input_required` results (MRTR). A
        // modern host gets them as they are and retries itself; for a legacy host mcpx
        // asks it with wire requests and retries for it (register E-1), a bounded
        // number of rounds.
        let mut rounds = 0;
        loop {
            let (tx, mut rx) = tokio::sync::mpsc::channel(64);
            let opts = CallOptions {
                events: Some(tx),
                progress: call.progress.is_some(),
                log_level: call.log.as_ref().map(|l| l.threshold().as_str().to_owned()),
                // A modern upstream may only ask for what the host can answer: the
                // host's own capabilities (per request on modern, from initialize on
                // legacy, where mcpx answers for it).
                client_capabilities: if facts.era == Era::Modern {
                    call.client_capabilities.clone()
                } else {
                    json!({})
                },
                timeout: slot.config.mcpx.call_timeout,
                max_time: self.config.global.max_call_time,
                cancel: call.cancel.clone(),
                idempotent,
                attribute_unsolicited: true,
            };
            let outcome = {
                let fut = conn.call(method, Some(&text), opts);
                tokio::pin!(fut);
                loop {
                    tokio::select! {
                        // Events were sent before the response: relay them first.
                        biased;
                        Some(ev) = rx.recv() => self.on_event(call, &facts, &slot.name, ev).await,
                        r = &mut fut => break r,
                    }
                }
            };
            while let Ok(ev) = rx.try_recv() {
                self.on_event(call, &facts, &slot.name, ev).await;
            }
            let frame = match outcome {
                Ok(frame) => frame,
                Err(e) => {
                    if matches!(
                        e,
                        ClientError::Transport { .. } | ClientError::Handshake { .. }
                    ) {
                        self.drop_connection(i, &e.to_string()).await;
                    }
                    return Err(fault(INTERNAL_ERROR, e.to_string(), call.host));
                }
            };
            let input_required = facts.era == Era::Modern
                && !host_modern
                && frame
                    .result()
                    .and_then(|r| mcpx_protocol::jsonrpc::member(r, "resultType"))
                    == Some("\"input_required\"");
            if !input_required {
                return self.answer(call, &facts, &slot.name, method, frame);
            }
            rounds += 1;
            if rounds > MAX_INPUT_ROUNDS {
                return Err(fault(
                    INTERNAL_ERROR,
                    format!(
                        "upstream {} asked for input more than {MAX_INPUT_ROUNDS} times",
                        slot.name
                    ),
                    call.host,
                ));
            }
            let result: Value = frame
                .result()
                .and_then(|r| serde_json::from_str(r).ok())
                .unwrap_or(Value::Null);
            let mut responses = Map::new();
            if let Some(Value::Object(requests)) = result.get("inputRequests") {
                for (key, req) in requests {
                    let m = req
                        .get("method")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let p = req.get("params").cloned();
                    match self.ask_legacy_host(call, &slot.name, m, p).await {
                        Ok(answer) => {
                            responses.insert(key.clone(), answer);
                        }
                        Err((code, msg)) => return Err(fault(code, msg, call.host)),
                    }
                }
            }
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
            text = std::borrow::Cow::Owned(params.to_string());
        }
    }

    /// A modern host's call to a legacy upstream. The upstream may ask the client
    /// something (sampling, elicitation, roots) with a wire request in the middle of the
    /// call; a modern host can only be asked with an `input_required` result (MRTR). So
    /// the upstream call runs in its own task; when it asks, mcpx parks it, answers the
    /// host `input_required` with a `requestState` naming the parked call, and resumes
    /// it when the host retries with the answer (register E-1, E-13).
    async fn forward_parking(
        self: &Arc<Self>,
        call: &Call,
        i: usize,
        conn: Connection,
        method: &str,
        params: &str,
        idempotent: bool,
    ) -> Result<Reply, Fault> {
        // A legacy upstream logs at its session's level: a modern host's per-request
        // logLevel lowers it like a legacy host's logging/setLevel (H9, C-C8).
        if let Some(log) = &call.log {
            self.lower_upstream_log_level(log.threshold()).await;
        }
        let slot = &self.slots[i];
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let cancel = tokio_util::sync::CancellationToken::new();
        let opts = CallOptions {
            events: Some(tx),
            progress: call.progress.is_some(),
            log_level: call.log.as_ref().map(|l| l.threshold().as_str().to_owned()),
            client_capabilities: json!({}),
            timeout: slot.config.mcpx.call_timeout,
            max_time: self.config.global.max_call_time,
            cancel: cancel.clone(),
            idempotent,
            attribute_unsolicited: true,
        };
        let text = params.to_owned();
        let method_owned = method.to_owned();
        let task = tokio::spawn(async move { conn.call(&method_owned, Some(&text), opts).await });
        let parked = Parked {
            upstream: i,
            method: method.to_owned(),
            events: rx,
            task,
            cancel,
            reply: None,
        };
        self.run_parked(call, parked).await
    }

    /// Drives a (possibly resumed) parked call until it answers or asks again.
    async fn run_parked(self: &Arc<Self>, call: &Call, mut p: Parked) -> Result<Reply, Fault> {
        let name = self.slots[p.upstream].name.clone();
        let facts = match self.slots[p.upstream].conn.lock().await.as_ref() {
            Some(c) => c.facts(),
            None => {
                p.cancel.cancel();
                return Err(fault(
                    INTERNAL_ERROR,
                    format!("upstream {name}: connection lost"),
                    call.host,
                ));
            }
        };
        loop {
            tokio::select! {
                // Events were sent before the call ended: relay them first.
                biased;
                joined = &mut p.task, if p.events.is_empty() => {
                    let outcome = joined.map_err(|e| fault(INTERNAL_ERROR, format!("upstream {name}: {e}"), call.host))?;
                    while let Ok(ev) = p.events.try_recv() {
                        if !matches!(ev, CallEvent::Ask { .. }) {
                            self.on_event(call, &facts, &name, ev).await;
                        }
                    }
                    return match outcome {
                        Ok(frame) => self.answer(call, &facts, &name, &p.method, frame),
                        Err(e) => {
                            // As in `forward`: a dead connection is dropped, so the next
                            // use connects again instead of failing forever.
                            if matches!(
                                e,
                                ClientError::Transport { .. } | ClientError::Handshake { .. }
                            ) {
                                self.drop_connection(p.upstream, &e.to_string()).await;
                            }
                            Err(fault(INTERNAL_ERROR, e.to_string(), call.host))
                        }
                    };
                }
                () = call.cancel.cancelled() => {
                    p.cancel.cancel();
                    return Err(fault(INTERNAL_ERROR, "cancelled".into(), call.host));
                }
                Some(ev) = p.events.recv() => match ev {
                    CallEvent::Ask { method, params, reply } => {
                        let cap = match method.as_str() {
                            "sampling/createMessage" => "sampling",
                            "elicitation/create" => "elicitation",
                            "roots/list" => "roots",
                            _ => "",
                        };
                        // 2026-07-28 basic/patterns/mrtr: never ask for what the client
                        // did not declare.
                        if cap.is_empty() || call.client_capabilities.get(cap).is_none() {
                            let _ = reply.send(Err((INTERNAL_ERROR, format!("the client did not declare the {cap} capability needed for {method}"))));
                            continue;
                        }
                        let mut params = params.unwrap_or(json!({}));
                        if let Some(o) = params.as_object_mut() {
                            // 2026 has no elicitationId (E-11).
                            o.remove("elicitationId");
                        }
                        let token = random_token().ok_or_else(|| fault(INTERNAL_ERROR, "no randomness".into(), call.host))?;
                        p.reply = Some(reply);
                        let result = json!({
                            "resultType": "input_required",
                            "inputRequests": { PARKED_KEY: { "method": method, "params": params } },
                            "requestState": format!("{PARKED_PREFIX}{token}"),
                        });
                        self.park(token, p);
                        return Ok(Reply { result: Json::of_value(&result), revision: Revision::NEWEST });
                    }
                    other => self.on_event(call, &facts, &name, other).await,
                },
            }
        }
    }

    fn park(self: &Arc<Self>, token: String, p: Parked) {
        if let Ok(mut parked) = self.parked.lock() {
            parked.insert(token.clone(), p);
        }
        // A host that never comes back: the upstream's question is answered with an
        // error after the ask timeout, and its call is cancelled (E-6).
        let gw = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(ASK_TIMEOUT).await;
            let Some(gw) = gw.upgrade() else { return };
            let stale = gw.parked.lock().ok().and_then(|mut m| m.remove(&token));
            if let Some(mut p) = stale {
                if let Some(reply) = p.reply.take() {
                    let _ = reply.send(Err((
                        INTERNAL_ERROR,
                        "the client did not answer in time".into(),
                    )));
                }
                p.cancel.cancel();
            }
        });
    }

    /// A modern host's retry of a parked call: hand the answer to the upstream and go on.
    async fn resume(
        self: &Arc<Self>,
        call: &Call,
        state: &str,
        params: &Value,
    ) -> Result<Reply, Fault> {
        let token = state.strip_prefix(PARKED_PREFIX).unwrap_or_default();
        let parked = self.parked.lock().ok().and_then(|mut m| m.remove(token));
        let Some(mut p) = parked else {
            return Err(fault(
                INVALID_PARAMS,
                "unknown or expired requestState".into(),
                call.host,
            ));
        };
        let answer = params
            .pointer(&format!("/inputResponses/{PARKED_KEY}"))
            .cloned();
        let Some(answer) = answer else {
            // mrtr: a retry missing the answer is asked again (E-24).
            let result = json!({ "resultType": "input_required", "requestState": state });
            let token = token.to_owned();
            self.park(token, p);
            return Ok(Reply {
                result: Json::of_value(&result),
                revision: Revision::NEWEST,
            });
        };
        if let Some(reply) = p.reply.take() {
            let _ = reply.send(Ok(answer));
        }
        self.run_parked(call, p).await
    }

    /// Asks a legacy host, with a wire request in its revision, what a modern
    /// upstream's `inputRequests` entry asks (register E-1, E-11).
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
        let mut params = params.unwrap_or(json!({}));
        if method == "elicitation/create" {
            let url_mode = params.get("mode").and_then(Value::as_str) == Some("url");
            match call.host {
                // 2025-11-25 URL mode needs an elicitationId, which 2026 removed (E-11).
                Revision::V2025_11_25 if url_mode && params.get("elicitationId").is_none() => {
                    params["elicitationId"] = json!(format!("mcpx-{}", self.next_elicitation()));
                }
                Revision::V2025_06_18 if url_mode => {
                    return Err((
                        INTERNAL_ERROR,
                        format!(
                            "upstream {upstream} asks for a URL-mode elicitation, which 2025-06-18 clients cannot show"
                        ),
                    ));
                }
                Revision::V2025_06_18 => {
                    if let Some(o) = params.as_object_mut() {
                        o.remove("mode");
                    }
                }
                _ => {}
            }
        }
        let raw = RawValue::from_string(params.to_string())
            .map_err(|e| (INTERNAL_ERROR, e.to_string()))?;
        match call.ctx.request(method, Some(&raw), ASK_TIMEOUT).await {
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
        // Taken from the decoded frame: not parsed again on its way to the host.
        let result = frame
            .result_json()
            .unwrap_or_else(|| Json::of_value(&json!({})));
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

    async fn on_event(&self, call: &Call, facts: &ServerFacts, name: &str, ev: CallEvent) {
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
                let answer = self.ask(call, facts, name, &method, params).await;
                let _ = reply.send(answer);
            }
        }
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
        let raw = params
            .map(|p| RawValue::from_string(p.to_string()))
            .transpose()
            .map_err(|e| (INTERNAL_ERROR, e.to_string()))?;
        match call
            .ctx
            .request(method, raw.as_deref(), Duration::from_secs(300))
            .await
        {
            Ok(frame) => match (frame.result(), frame.error()) {
                (Some(r), _) => {
                    serde_json::from_str(r).map_err(|e| (INTERNAL_ERROR, e.to_string()))
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

    /// `subscriptions/listen` from a modern host: acknowledge the kinds mcpx can deliver,
    /// then deliver them, tagged with the listen id, until the host cancels.
    async fn listen(&self, call: &Call) -> Result<Reply, Fault> {
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
            }
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

impl Backend for GatewayBackend {
    fn offered(&self) -> Offered {
        self.0.offered.lock().map(|o| *o).unwrap_or_default()
    }

    async fn log_level_requested(&self, level: Level) {
        self.0.lower_upstream_log_level(level).await;
    }

    fn param_headers(&self, tool: &str) -> Vec<mcpx_protocol::header::ParamHeader> {
        let Ok(catalog) = self.0.catalog.read() else {
            return Vec::new();
        };
        catalog
            .lists
            .get("tools")
            .and_then(|tools| {
                tools
                    .iter()
                    .find(|t| t.get("name").and_then(Value::as_str) == Some(tool))
            })
            .and_then(|t| t.get("inputSchema"))
            .and_then(|schema| param_headers(schema).ok())
            .unwrap_or_default()
    }

    fn summary(&self) -> Summary {
        let gw = &self.0;
        // D-C7: a capability is declared iff some upstream offers it (as last seen: an
        // upstream that is down now keeps what it offered), the same set in
        // InitializeResult and DiscoverResult.
        let facts: Vec<Arc<ServerFacts>> = gw
            .slots
            .iter()
            .filter_map(|s| s.last_facts.lock().ok()?.clone())
            .collect();
        let any = |cap: &str| facts.iter().any(|f| f.has(cap));
        let instructions: Vec<String> = gw
            .slots
            .iter()
            .filter_map(|s| {
                let i = s.last_facts.lock().ok()?.as_ref()?.instructions.clone()?;
                Some(format!("[{}] {i}", s.name))
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
            instructions: (!instructions.is_empty()).then(|| instructions.join("\n\n")),
        }
    }

    async fn call(&self, call: Call) -> Result<Reply, Fault> {
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
                    .as_deref()
                    .and_then(|p| mcpx_protocol::jsonrpc::member(p, "requestState"))
                    .is_some_and(|s| s.starts_with(&format!("\"{PARKED_PREFIX}"))) =>
            {
                let params: Value = call
                    .params
                    .as_deref()
                    .and_then(|p| serde_json::from_str(p).ok())
                    .unwrap_or(json!({}));
                let state = params
                    .get("requestState")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                gw.resume(&call, &state, &params).await
            }
            "tools/call" | "prompts/get" => {
                let prompts = call.method == "prompts/get";
                let (i, original, params) = gw.route_name(&call, prompts)?;
                let idempotent = prompts
                    || gw
                        .catalog
                        .read()
                        .map(|c| c.idempotent_tools.contains(&(i, original)))
                        .unwrap_or(false);
                gw.forward(&call, i, &call.method, &params, idempotent)
                    .await
            }
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                let params: Value = call
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
                let i = gw.route_uri(&call, &uri)?;
                match call.method.as_str() {
                    "resources/subscribe" | "resources/unsubscribe" => {
                        gw.subscription(&call, i, &uri, &params).await
                    }
                    _ => {
                        gw.forward(&call, i, &call.method, &params.to_string(), true)
                            .await
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
                let i = match r.get("type").and_then(Value::as_str) {
                    Some("ref/prompt") => {
                        let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
                        let catalog = gw
                            .catalog
                            .read()
                            .map_err(|_| fault(INTERNAL_ERROR, "lock".into(), call.host))?;
                        let (ns, original) =
                            catalog.prompt_names.resolve(name).ok_or_else(|| {
                                fault(INVALID_PARAMS, format!("unknown prompt: {name}"), call.host)
                            })?;
                        let i = gw.slots.iter().position(|s| s.namespace == ns).unwrap_or(0);
                        params["ref"]["name"] = json!(original);
                        i
                    }
                    Some("ref/resource") => {
                        let uri = r
                            .get("uri")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        gw.route_uri(&call, &uri)?
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
                let facts = gw.slots[i].conn.lock().await.as_ref().map(|c| c.facts());
                if let Some(f) = facts
                    .filter(|f| f.revision.facts().completions_capability && !f.has("completions"))
                {
                    return Ok(Reply {
                        result: Json::of_value(
                            &json!({ "completion": { "values": [], "hasMore": false } }),
                        ),
                        revision: f.revision,
                    });
                }
                gw.forward(&call, i, "completion/complete", &params.to_string(), true)
                    .await
            }
            "subscriptions/listen" => gw.listen(&call).await,
            other => Err(fault(
                METHOD_NOT_FOUND,
                format!("method not found: {other}"),
                call.host,
            )),
        }
    }
}
