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
use mcpx_protocol::{Era, Frame, Id, Revision, meta};
use mcpx_server::{Backend, Call, Fault, Level, ListCaps, Reply, Summary};
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
}

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

    /// The connection of upstream `i`, connecting (again) when there is none.
    async fn connection(self: &Arc<Self>, i: usize) -> Result<Connection, String> {
        let slot = &self.slots[i];
        let mut guard = slot.conn.lock().await;
        if let Some(c) = guard.as_ref() {
            return Ok(c.clone());
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
                self.watch(i, &conn);
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
                    let opts = CallOptions {
                        timeout: Duration::from_secs(365 * 24 * 3600),
                        max_time: Duration::from_secs(365 * 24 * 3600),
                        ..CallOptions::default()
                    };
                    if let Err(e) = conn.call("subscriptions/listen", Some(&params), opts).await {
                        tracing::debug!(upstream = conn.name(), "listen ended: {e}");
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

    async fn relay_resource_updated(&self, frame: &Frame) {
        let peers: Vec<Peer> = self
            .legacy_peers
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default();
        for peer in peers {
            let _ = peer.notify(frame.clone()).await;
        }
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
                                Some(prev) if *prev != *i => tracing::warn!(
                                    "resource {uri} is offered by {} and {}; reads go to {}",
                                    self.slots[*prev].name,
                                    self.slots[*i].name,
                                    self.slots[*prev].name
                                ),
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
            result: result.to_string(),
            revision: Revision::NEWEST,
        })
    }

    fn route_name(&self, call: &Call, prompts: bool) -> Result<(usize, String, Value), Fault> {
        let mut params: Value = call
            .params
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(json!({}));
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| fault(INVALID_PARAMS, "params.name is required".into(), call.host))?
            .to_owned();
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
        params["name"] = json!(original);
        Ok((i, original.to_owned(), params))
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
        params: &Value,
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
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let host_modern = call.host.era() == Era::Modern;
        let opts = CallOptions {
            events: Some(tx),
            progress: call.progress.is_some(),
            log_level: call.log.as_ref().map(|l| l.threshold().as_str().to_owned()),
            // A modern upstream may only ask (MRTR) for what the host can answer.
            client_capabilities: if host_modern && facts.era == Era::Modern {
                call.client_capabilities.clone()
            } else {
                json!({})
            },
            timeout: slot.config.mcpx.call_timeout,
            max_time: self.config.global.max_call_time,
            cancel: call.cancel.clone(),
            idempotent,
        };
        let text = params.to_string();
        let fut = conn.call(method, Some(&text), opts);
        tokio::pin!(fut);
        let outcome = loop {
            tokio::select! {
                r = &mut fut => break r,
                Some(ev) = rx.recv() => self.on_event(call, &facts, &slot.name, ev).await,
            }
        };
        match outcome {
            Ok(frame) => self.answer(call, &facts, &slot.name, method, frame),
            Err(e) => {
                if matches!(
                    e,
                    ClientError::Transport { .. } | ClientError::Handshake { .. }
                ) {
                    self.drop_connection(i, &e.to_string()).await;
                }
                Err(fault(INTERNAL_ERROR, e.to_string(), call.host))
            }
        }
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
        let result = frame.result().unwrap_or("{}").to_owned();
        if facts.era == Era::Modern && call.host.era() == Era::Legacy {
            let input_required = serde_json::from_str::<Value>(&result)
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
            result: json!({ "_meta": tag }).to_string(),
            revision: Revision::NEWEST,
        })
    }
}

/// The gateway behind the serve seam.
#[derive(Debug, Clone)]
pub struct GatewayBackend(pub Arc<Gateway>);

impl Backend for GatewayBackend {
    fn summary(&self) -> Summary {
        let gw = &self.0;
        let catalog = gw.catalog.read();
        let has = |k: &str| {
            catalog
                .as_ref()
                .map(|c| c.lists.get(k).is_some_and(|l| !l.is_empty()))
                .unwrap_or(false)
        };
        let instructions: Vec<String> = gw
            .slots
            .iter()
            .filter_map(|s| {
                let c = s.conn.try_lock().ok()?.clone()?;
                let i = c.facts().instructions?;
                Some(format!("[{}] {i}", s.name))
            })
            .collect();
        // The lists can always change: upstreams come and go.
        let list = Some(ListCaps { list_changed: true });
        Summary {
            tools: list.filter(|_| has("tools") || !gw.slots.is_empty()),
            prompts: list.filter(|_| has("prompts") || !gw.slots.is_empty()),
            resources: list
                .filter(|_| has("resources") || has("resourceTemplates") || !gw.slots.is_empty()),
            resources_subscribe: true,
            completions: true,
            logging: true,
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
                gw.forward(
                    &call,
                    i,
                    &call.method,
                    &params,
                    call.method == "resources/read",
                )
                .await
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
                gw.forward(&call, i, "completion/complete", &params, true)
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
