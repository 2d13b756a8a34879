//! The gateway: many upstreams behind one [`Backend`].
//!
//! Requests arrive from the serve seam revision-neutral ([`Call`]). Lists are answered
//! from the merged [`Catalog`]; `tools/call`, `prompts/get`, `resources/read`,
//! `completion/complete` and resource subscriptions are routed to the owning upstream
//! by name or URI, written in that upstream's revision by its [`Connection`], and the
//! answer goes back as a result in the upstream's revision (the seam lowers it) or a
//! [`Fault`] naming the upstream. Progress, logs and cancellation are relayed per call;
//! server-to-client requests (sampling, elicitation, roots) are bridged between eras.
//!
//! This file holds [`Gateway`], which composes owned parts, each in a child module
//! with private fields and methods of its own: `upstream_set`, `catalog_cell`,
//! `subscriptions`, `asks` (the ask broker) and `tasks` (the task store). The call
//! path is `call/` (admit, bridge, rounds, send, observe), one handler per method is
//! `handlers/`, routing is `route.rs`, and the host request's span is a layer
//! (`observe::Observed`). Only this file adds methods to `Gateway`.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use std::time::Duration;

use mcpx_client::{
    CallEvent, CallOptions, ClientError, Connection, EraCache, ServerFacts, Target, TargetTransport,
};
use mcpx_metrics::{Metrics, Sample, Source, UpstreamSample};
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::{Era, Frame, Id, Params, Revision, meta};
use mcpx_server::{Backend, Call, Fault, Level, ListCaps, Offered, Reply, Summary};
use mcpx_transport::Peer;
use mcpx_transport::channel_pool::ChannelPool;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use crate::catalog::{Catalog, ListKind};
use crate::config::{Config, ServerConfig, Transport};
use crate::error::{Cause, GatewayError};
use crate::id::UpstreamId;
use crate::reload;
use crate::upstream::{self, State, Upstream};

// One owned part or layer per child module; none adds methods to `Gateway`.
mod asks;
mod call;
mod catalog_cell;
mod coalesce;
mod handlers;
pub mod history;
mod method;
// The host request's server span.
pub mod observe;
mod route;
mod subscriptions;
// Gateway tasks (H13): they drive calls through the call path.
mod tasks;
mod upstream_set;

use asks::*;
use method::Method;
use route::Routed;
pub use upstream_set::Upstreams;

/// The gateway: the upstreams, the merged catalog, and what hosts hold across requests.
///
/// Its fields are owned parts; each keeps its own state private and its locks to
/// itself. `Gateway`'s methods, all in this file, are of these kinds:
///
/// * construction and accessors: `new`, `with_metrics`, `linked`, `config`,
///   `upstreams`, `upstream`, `catalog`, `metrics`, `tasks_held`, `statuses`;
/// * lifecycle: `start`, `spawn_upstream`, `on_ready`, `watch`, `reload`,
///   `shutdown`, `stop_upstreams`, and the catalog's `rebuild`, `relist`,
///   `schedule_relist`, `described`, `settled`, `list_lazy`, `wait_listed`;
/// * routing: `route_name`, `route_uri` and their waiting forms, which read a
///   catalog snapshot and the upstream set through `route.rs`;
/// * the call path's entries: `forward`, `answer`, `upstream_leg`;
/// * the ask broker's entries: `asking` builds what the broker needs of the
///   gateway (the upstream, its label, the ask timeout, the task store) and
///   `on_event`, `ask_legacy_host_all`, `offer_login` and the relabelling helpers
///   hand it over, so that the broker never holds the gateway;
/// * metrics hooks: `observe_catalog`, `observe_restarts`, and [`Source`].
///
/// # Locks
///
/// Every lock is `parking_lot`'s (no poisoning) and private to the part that
/// owns it. None is held across an `.await` or while another part's lock is taken,
/// with two exceptions, each documented in its file: the catalog cell's rebuild
/// takes `rebuilding`, then `catalog`; and `subscriptions` holds its async listen
/// lock across the upstream call it decides.
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
    /// The upstreams in force, how they connect and their supervisors.
    upstreams: upstream_set::UpstreamSet,
    /// The merged catalog and when requests may read it.
    catalog: catalog_cell::CatalogCell,
    /// Fired when mcpx shuts down: its listen streams end gracefully (H1).
    stopping: tokio_util::sync::CancellationToken,
    /// Each forwarded call's event channel, reused from call to call.
    event_channels: ChannelPool<Box<CallEvent>>,
    /// What hosts are told and subscribed to.
    subs: subscriptions::Subscriptions,
    /// What the ask bridge holds across requests.
    asks: asks::AskBroker,
    /// Gateway tasks (H13), bounded by `mcpx.limits.maxTasks`/`taskTtlMs`.
    tasks: tasks::Store,
    /// Where calls are measured, when metrics are on (`mcpx serve --metrics`).
    metrics: Option<Arc<mcpx_metrics::Metrics>>,
}

/// A `subscriptions/listen` call has no response to wait for: it lasts as long as
/// the connection.
const LISTEN_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// Capacity of a forwarded call's event channel (progress, logs and asks, relayed to the
/// host in order).
const EVENT_CAPACITY: usize = 64;

/// Event channels kept for reuse: as many as calls in flight at once, within reason.
const EVENT_CHANNELS_KEPT: usize = 256;

/// `{}` as client capabilities: what mcpx declares for itself where a request carries
/// none of the host's (a legacy upstream's calls). One shared value, not one per call.
pub(in crate::gateway) fn no_capabilities() -> Arc<Value> {
    static EMPTY: std::sync::LazyLock<Arc<Value>> =
        std::sync::LazyLock::new(|| Arc::new(Value::Object(Map::new())));
    Arc::clone(&EMPTY)
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
        .map_err(|e| GatewayError::Internal(e.to_string()).to_fault(Revision::NEWEST))
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
    let stdio = matches!(transport, TargetTransport::Stdio { .. });
    let mut target = Target::new(name, transport);
    if stdio {
        // Secrets stay where they belong: a child never inherits mcpx's own.
        target.env_remove = config.secret_env();
        if s.mcpx.environment == crate::config::Environment::Minimal {
            target.env_inherit_only = Some(
                crate::config::Environment::MINIMAL
                    .iter()
                    .map(|k| (*k).to_owned())
                    .collect(),
            );
        }
    }
    target.preference = s.mcpx.protocol;
    target.handshake_timeout = s.mcpx.connect_timeout;
    target.probe_timeout = s.mcpx.probe_timeout;
    target.proxy = s.mcpx.proxy.clone();
    target.oauth = s.mcpx.oauth.clone();
    target.user_auth = s.mcpx.user_auth.clone();
    // Room above the calls in flight for what mcpx sends besides them (lists,
    // listens, health checks, tasks' polls): the transport's own limit is never what
    // refuses a call.
    target.max_pending = Some(s.mcpx.max_in_flight.saturating_add(64));
    // A call's timeout bounds the wait for an HTTP upstream's response headers too.
    target.request_timeout = Some(s.mcpx.call_timeout);
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
        Gateway::with_metrics(config, era_cache, None)
    }

    /// [`Gateway::new`], measuring calls in `metrics` (when `Some`) and reporting its
    /// upstreams' states, calls in flight, parked calls and tasks there at each scrape.
    pub fn with_metrics(
        config: Config,
        era_cache: EraCache,
        metrics: Option<Arc<mcpx_metrics::Metrics>>,
    ) -> Arc<Gateway> {
        Gateway::linked(config, era_cache, metrics, Arc::new(upstream::Connect))
    }

    /// [`Gateway::with_metrics`], whose upstreams connect by `connector` (a test's
    /// in-process servers; [`upstream::Connect`] connects as configured).
    pub fn linked(
        config: Config,
        era_cache: EraCache,
        metrics: Option<Arc<mcpx_metrics::Metrics>>,
        connector: Arc<dyn upstream::Connector>,
    ) -> Arc<Gateway> {
        let gateway = Arc::new(Gateway {
            config: RwLock::new(Arc::new(config)),
            upstreams: upstream_set::UpstreamSet::new(connector, era_cache),
            catalog: catalog_cell::CatalogCell::default(),
            stopping: tokio_util::sync::CancellationToken::new(),
            event_channels: ChannelPool::new(EVENT_CAPACITY, EVENT_CHANNELS_KEPT),
            subs: subscriptions::Subscriptions::new(),
            asks: asks::AskBroker::default(),
            tasks: tasks::Store::default(),
            metrics,
        });
        if let Some(m) = &gateway.metrics {
            let source: std::sync::Weak<Gateway> = Arc::downgrade(&gateway);
            m.set_source(source);
        }
        gateway
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<Config> {
        self.config.read().clone()
    }

    /// The upstreams in force.
    pub fn upstreams(&self) -> Arc<Upstreams> {
        self.upstreams.current()
    }

    /// The upstream named `id`, if the configuration in force has it.
    pub fn upstream(&self, id: &str) -> Option<Arc<Upstream>> {
        self.upstreams().get(id).cloned()
    }

    /// The catalog in force (a snapshot: never held across an await by anyone).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.snapshot()
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
        self.upstreams.replace(list);
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
        let (up, commands) = self.upstreams.make(config, name, s);
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
        let weak_up = Arc::downgrade(&up);
        tokio::spawn(async move {
            let mut restarts = 0;
            while status.changed().await.is_ok() {
                let Some(gw) = gw.upgrade() else { return };
                gw.catalog.progressed();
                let now = status.borrow().restarts;
                if let Some(up) = weak_up.upgrade() {
                    gw.observe_restarts(&up, &mut restarts, now);
                }
            }
        });
        self.upstreams.track(task);
        up
    }

    /// Whether what the gateway declares is known: every upstream connected or
    /// settled its first start, or one wait for that took `capabilityWaitMs`.
    pub fn is_described(&self) -> bool {
        self.catalog.is_described()
    }

    /// Waits, up to `capabilityWaitMs`, until every upstream not met before (not in the
    /// era cache) has settled its first start and, if it came up, is listed: what
    /// `initialize` and `server/discover` wait for, briefly, so that they declare what
    /// the upstreams declare (logging, completions, subscriptions, tasks,
    /// instructions). The lists are declared whatever comes of it; a slower upstream
    /// joins them later, with `list_changed`.
    pub async fn described(&self) {
        let within = self.config().global.capability_wait;
        self.catalog.describe(within, || self.upstreams()).await;
    }

    /// Whether every upstream has settled its first start (or one wait for that
    /// took `startupWaitMs`): then nothing waits for first starts again.
    pub fn is_settled(&self) -> bool {
        self.catalog.is_settled()
    }

    /// Waits, up to `startupWaitMs`, until every upstream has settled its first start
    /// (ready, failed, in a crash loop, in need of authorization) and those that came
    /// up are listed: what a host's first list waits for, so that it is the full
    /// list, and what a name not known yet waits for before it is refused.
    pub async fn settled(&self) {
        if self.catalog.is_settled() {
            return;
        }
        // Boxed: awaited on every request, and only the first ones wait.
        let within = self.config().global.startup_wait;
        Box::pin(self.catalog.settle(within, || self.upstreams())).await;
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
        let tasks = self.upstreams.take_supervisors();
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
            if let Some(level) = gw.upstreams.log_level() {
                gw.apply_log_level(&conn, level).await;
            }
            gw.relist(&up).await;
            // A first connection has nothing to subscribe again to, unless it
            // replaced a predecessor (a reload changed the entry).
            if up.inherited() || up.supervisor().ready().is_some_and(|(g, _)| g > 1) {
                gw.subs.resubscribe(&gw.catalog(), &up, &conn).await;
            }
        });
    }

    /// The capabilities offered, as the upstreams' last facts say.
    fn update_offered(&self) {
        self.catalog
            .set_offered(GatewayBackend::summary_of(self).offered());
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
        if self.upstreams.lower_log_level(level) {
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
                        gw.subs
                            .relay_resource_updated(&gw.catalog(), &id, &frame)
                            .await;
                    }
                    Some("notifications/elicitation/complete") => {
                        gw.asks.relay.relay_elicitation_complete(&id, &frame).await;
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
                    if self.stopping.is_cancelled() || !up.is_current() {
                        // mcpx is stopping it: nothing the user needs to hear of.
                        tracing::debug!(upstream = %up.id, "{} failed while stopping: {e}", kind.method());
                    } else {
                        tracing::warn!(upstream = %up.id, "{} failed: {e}", kind.method());
                    }
                    if e.breaks_connection() {
                        up.lost(generation, Cause::Client(e));
                        break;
                    }
                }
            }
        }
        up.set_lists(lists);
        let changed = self.catalog.lists_set(&up.id, || self.rebuild()).await;
        self.announce_changed(changed).await;
    }

    /// Sends `method` with `params` to upstream `up` for `call` by the call path
    /// (`call/`), relaying events, and takes the answer for the host.
    async fn forward(
        self: &Arc<Self>,
        call: &Call,
        up: &Arc<Upstream>,
        taken: Option<(u64, Connection)>,
        method: &str,
        params: &Params,
        idempotent: bool,
    ) -> Result<Reply, Fault> {
        call::forward(self, call, up, taken, method, params, idempotent).await
    }

    /// The host's reply to an upstream's answer (see [`call::answer`]).
    fn answer(
        &self,
        call: &Call,
        facts: &ServerFacts,
        name: &str,
        method: &str,
        frame: Frame,
    ) -> Result<Reply, Fault> {
        call::answer(self, call, facts, name, method, frame)
    }

    /// Starts timing the upstream leg of `call` (`None` with metrics off).
    fn upstream_leg(&self, call: &Call, up: &Upstream, method: &str) -> Option<call::UpstreamLeg> {
        call::leg(self.metrics.as_deref(), call, up, method)
    }

    /// E-10: "[<namespace>] ", put before upstream `up`'s elicitation messages when
    /// namespaces are in use (several upstreams; names are then prefixed too).
    fn label(&self, up: &Upstream) -> Option<String> {
        self.namespaced().then(|| format!("[{}] ", up.namespace))
    }

    /// What the ask broker needs to put upstream `name`'s asks to a host.
    fn asking<'a>(&'a self, name: &'a str) -> Asking<'a> {
        let up = self.upstream(name);
        Asking {
            name,
            label: up.as_ref().and_then(|u| self.label(u)),
            up,
            timeout: self.config().global.ask_timeout,
            tasks: &self.tasks,
        }
    }

    /// Relays one event of upstream `name`'s call for `call`: progress and logs to
    /// the host, an ask through the ask broker. `Some` when it ends the host's
    /// request (E-9); the caller then cancels the upstream call.
    async fn on_event(
        &self,
        call: &Call,
        facts: &ServerFacts,
        name: &str,
        ev: CallEvent,
    ) -> Option<Fault> {
        match ev {
            CallEvent::Ask {
                method,
                params,
                reply,
            } => {
                let asking = self.asking(name);
                self.asks
                    .relay
                    .on_ask(&asking, call, facts, (method, params), reply)
                    .await
            }
            other => {
                call::relay_event(call, other).await;
                None
            }
        }
    }

    /// [`Self::on_event`], except that an ask is started in `asks`, beside the call,
    /// instead of awaited: the caller polls `asks` with the call.
    async fn on_event_beside<'a>(
        &'a self,
        call: &'a Call,
        facts: &'a ServerFacts,
        name: &'a str,
        ev: CallEvent,
        asks: &mut Asks<'a>,
    ) -> Option<Fault> {
        match ev {
            CallEvent::Ask {
                method,
                params,
                reply,
            } => self.asks.relay.ask_beside(
                self.asking(name),
                call,
                facts,
                (method, params),
                reply,
                asks,
            ),
            other => {
                call::relay_event(call, other).await;
                None
            }
        }
    }

    /// Puts a 2026-07-28 upstream's `inputRequests` to the legacy host of `call`
    /// ([`asks::relay::Relay::ask_legacy_host_all`]).
    async fn ask_legacy_host_all<'r>(
        &self,
        call: &Call,
        upstream: &str,
        requests: impl Iterator<Item = (&'r String, &'r Value)>,
    ) -> Result<Map<String, Value>, Fault> {
        let asking = self.asking(upstream);
        self.asks
            .relay
            .ask_legacy_host_all(&asking, call, requests)
            .await
    }

    /// A 2026-07-28 upstream's `input_required` result, shaped for a modern host
    /// ([`asks::relabel_input_required`]); `None` when nothing changes.
    fn relabel_input_required(&self, name: &str, result: &str) -> Option<Json> {
        let label = self.upstream(name).and_then(|up| self.label(&up));
        asks::relabel_input_required(label.as_deref(), result)
    }

    /// Shapes upstream `name`'s `inputRequests` for a modern host, in place, as
    /// [`Self::relabel_input_required`] does (an upstream task's, ext-tasks §Input
    /// Requests, are the same requests).
    fn relabel_requests(&self, name: &str, requests: &mut Map<String, Value>) {
        let label = self.upstream(name).and_then(|up| self.label(&up));
        relabel_input_requests(label.as_deref(), requests);
    }

    /// E-12: the elicitations of upstream `name`'s -32042 are remembered for their
    /// completion.
    fn note_required_elicitations(&self, call: &Call, name: &str, data: Option<&str>) {
        if let Some(up) = self.upstream(name) {
            self.asks
                .relay
                .note_required_elicitations(call, &up.id, data);
        }
    }

    /// `f`, a host call's failure, offered to the host as a login when it is for
    /// want of a user's authorization of an upstream (B-C15); else `f`.
    async fn offer_login(self: &Arc<Self>, asker: login::Asker, f: Fault) -> Result<Reply, Fault> {
        let Some(up) = login::needing_authorization(&f).and_then(|n| self.upstream(n)) else {
            return Err(f);
        };
        let gw = Arc::downgrade(self);
        let listed: login::Listed = Box::new(move |up, within| {
            let gw = gw.upgrade()?;
            Some(Box::pin(async move { gw.wait_listed(&up, within).await }))
        });
        let to = login::LoginTo {
            label: self.label(&up),
            up,
            ask_timeout: self.config().global.ask_timeout,
            listed,
        };
        let mint = || self.asks.relay.mint_elicitation_id();
        self.asks.logins.offer(asker, f, to, mint).await
    }

    /// The upstream of a `tools/call` or `prompts/get`, its own name and the params
    /// to send it ([`route::name`]).
    fn route_name<'a>(&self, call: &'a Call, prompts: bool) -> Result<route::Routed<'a>, Fault> {
        route::name(&self.catalog(), &self.upstreams(), call, prompts)
    }

    /// The upstream serving resource `uri` and the URI to send it ([`route::uri`]).
    fn route_uri(&self, call: &Call, uri: &str) -> Result<(Arc<Upstream>, String), Fault> {
        route::uri(&self.catalog(), &self.upstreams(), call, uri)
    }

    /// [`Gateway::route_uri`], and when the URI is not known while upstreams are
    /// still making their first start, again once they have (up to `startupWaitMs`):
    /// its upstream may not be listed yet.
    async fn route_uri_once_settled(
        &self,
        call: &Call,
        uri: &str,
    ) -> Result<(Arc<Upstream>, String), Fault> {
        match self.route_uri(call, uri) {
            Err(_) if !self.is_settled() => {
                self.settled().await;
                self.route_uri(call, uri)
            }
            routed => routed,
        }
    }

    /// After [`Gateway::route_name`] refused `call` with `refused`: a name of an upstream that is starting,
    /// lazy and idle, or up but not yet listed, waits (up to the upstream's connect
    /// timeout) for it to come up and be listed, and is then routed again (else `refused` stands): a lazy
    /// upstream starts on its first use, and a host's first call need not fail for
    /// an upstream that is about to be ready.
    async fn route_once_started<'a>(
        self: &Arc<Self>,
        call: &'a Call,
        prompts: bool,
        refused: Fault,
    ) -> Result<Routed<'a>, Fault> {
        let Some(name) = call_target(call) else {
            return Err(refused);
        };
        let owner = self.catalog().owner_of_name(&name).cloned();
        let Some(up) = owner.and_then(|id| self.upstream(id.as_str())) else {
            // No upstream's namespace: known, perhaps, once the first starts end.
            if !self.is_settled() {
                self.settled().await;
                return self.route_name(call, prompts);
            }
            return Err(refused);
        };
        let listed = self.catalog.is_listed(&up.id);
        match up.status().state {
            State::Idle | State::Starting { .. } => {
                up.connection().await.map_err(|e| e.to_fault(call.host))?;
            }
            // Up, but its first lists are still on their way.
            State::Ready if !listed => {}
            _ => return Err(refused),
        }
        self.wait_listed(&up, up.config.mcpx.connect_timeout).await;
        self.route_name(call, prompts)
    }

    /// The upstreams still making their first start, or up but not yet listed: what
    /// a list answered now lacks (`_meta` [`mcpx_protocol::meta::STARTING`]).
    fn starting(&self) -> Vec<String> {
        self.catalog.starting(&self.upstreams())
    }

    /// Waits until `up`'s lists are in the catalog, up to `within`.
    async fn wait_listed(&self, up: &Upstream, within: Duration) {
        self.catalog.wait_listed(&up.id, within).await;
    }

    /// Starts the lazy upstreams that were never listed, and waits for their lists
    /// (up to `startupWaitMs`): a host's list is a use of every upstream in it.
    async fn list_lazy(&self) {
        let waiting: Vec<Arc<Upstream>> = self
            .upstreams()
            .iter()
            .filter(|u| {
                u.config.mcpx.start == crate::config::StartMode::Lazy
                    && !self.catalog.is_listed(&u.id)
            })
            .cloned()
            .collect();
        if waiting.is_empty() {
            return;
        }
        let within = self.config().global.startup_wait;
        for up in &waiting {
            up.supervisor().command(upstream::Command::Wake);
        }
        let all = waiting.iter().map(|up| self.wait_listed(up, within));
        futures_util::future::join_all(all).await;
    }

    /// The registry, when metrics are on.
    pub fn metrics(&self) -> Option<&Arc<Metrics>> {
        self.metrics.as_ref()
    }

    /// Gateway tasks held for hosts (H13), as the metrics' `mcpx_tasks` gauge counts
    /// them.
    pub fn tasks_held(&self) -> usize {
        self.tasks.len()
    }

    /// Hands the catalog's tool names, with their upstreams, to the registry: the
    /// only values `gen_ai_tool_name` takes (else `other`).
    fn observe_catalog(&self, catalog: &Catalog) {
        if let Some(m) = &self.metrics {
            m.set_tools(catalog.tools().map(|(name, up)| (name, up.as_str())));
        }
    }

    /// Counts `up`'s restarts as its supervisor publishes them.
    fn observe_restarts(&self, up: &Upstream, seen: &mut u32, now: u32) {
        if let Some(m) = &self.metrics
            && now > *seen
        {
            m.restarted(up.id.as_str(), u64::from(now - *seen));
        }
        *seen = now;
    }

    /// Builds the catalog from every upstream's last known lists and swaps it in;
    /// returns the kinds of lists hosts see changed.
    fn rebuild(&self) -> Vec<ListKind> {
        let rebuilt = self.catalog.rebuild(|| (self.config(), self.upstreams()));
        self.observe_catalog(&rebuilt.catalog);
        self.update_offered();
        rebuilt.changed
    }

    /// [`Gateway::rebuild`], then one notification per changed list to every host.
    async fn rebuild_and_announce(&self) {
        let changed = self.rebuild();
        self.announce_changed(changed).await;
    }

    /// One notification per changed list to every host.
    async fn announce_changed(&self, changed: Vec<ListKind>) {
        let mut sent = Vec::new();
        for kind in changed {
            let note = kind.changed_notification();
            if !sent.contains(&note) {
                sent.push(note);
                self.subs.announce(kind).await;
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
        *self.config.write() = new.clone();
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
        self.upstreams.replace(list);
        tracing::info!("configuration reloaded: {plan}");
        for what in &plan.restart_needed {
            tracing::warn!("{what} changed: it applies after mcpx restarts");
        }
        let gw = self.clone();
        tokio::spawn(async move { gw.rebuild_and_announce().await });
        plan
    }
}

/// The gateway behind the serve seam: each host request dispatched to its handler.
#[derive(Debug, Clone)]
pub struct GatewayBackend(pub Arc<Gateway>);

/// What the serve seam holds: the gateway, its calls recorded in the call history,
/// with the host request's span around it.
pub type Served = observe::Observed<history::Recorded>;

/// The backend a serve seam for `gateway` holds, recording in `history` when given.
pub fn served(gateway: Arc<Gateway>, history: Option<mcpx_history::History>) -> Served {
    observe::Observed(history::Recorded::new(GatewayBackend(gateway), history))
}

impl GatewayBackend {
    /// What the gateway offers, from its upstreams' last facts.
    fn summary_of(gw: &Gateway) -> Summary {
        // D-C7: a capability is declared iff some upstream offers it (as last seen: an
        // upstream that is down now keeps what it offered), the same set in
        // InitializeResult and DiscoverResult.
        let ups = gw.upstreams();
        // An upstream not connected yet declares what its last handshake found (the
        // era cache), if mcpx has met it before.
        let known: Vec<Option<Arc<ServerFacts>>> = ups.iter().map(|u| u.declared_facts()).collect();
        let facts: Vec<&Arc<ServerFacts>> = known.iter().flatten().collect();
        let any = |cap: &str| facts.iter().any(|f| f.has(cap));
        let instructions: Vec<String> = ups
            .iter()
            .zip(&known)
            .filter_map(|(u, f)| {
                let i = f.as_ref()?.instructions.clone()?;
                Some(format!("[{}] {i}", u.id))
            })
            .collect();
        // A list is declared from the configuration: an upstream not yet connected
        // may offer it, so a host told at once (its `initialize` does not wait for
        // the upstreams' starts) still lists. Once connected, its facts say.
        let may = |cap: &str| known.iter().any(|f| f.as_ref().is_none_or(|f| f.has(cap)));
        // The lists can always change: upstreams come, go and change.
        let list = |cap: &str| may(cap).then_some(ListCaps { list_changed: true });
        Summary {
            tools: list("tools"),
            prompts: list("prompts"),
            resources: list("resources"),
            resources_subscribe: facts.iter().any(|f| subscriptions::subscribable(f)),
            // C-C9: a 2024-11-05 server could complete without declaring it.
            completions: any("completions")
                || facts.iter().any(|f| {
                    !f.revision.facts().completions_capability
                        && (f.has("prompts") || f.has("resources"))
                }),
            logging: any("logging"),
            tasks: tasks::offered(facts.iter().copied()),
            instructions: (!instructions.is_empty()).then(|| instructions.join("\n\n")),
        }
    }
}

/// Whose `requestState` a host's request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resumes {
    /// None of mcpx's.
    Nothing,
    /// A call parked at a legacy upstream (`asks::PARKED_PREFIX`, register E-1).
    Parked,
    /// A 2026-07-28 host's retry after a login it was asked for
    /// (`login::LOGIN_STATE_PREFIX`, register B-C15).
    Login,
}

impl Resumes {
    fn of(call: &Call) -> Resumes {
        let Some(state) = call
            .params
            .as_ref()
            .and_then(|p| p.member("requestState"))
            .and_then(|s| s.strip_prefix('"'))
        else {
            return Resumes::Nothing;
        };
        if state.starts_with(PARKED_PREFIX) {
            Resumes::Parked
        } else if call.host.era() == Era::Modern && state.starts_with(login::LOGIN_STATE_PREFIX) {
            Resumes::Login
        } else {
            Resumes::Nothing
        }
    }
}

impl Backend for GatewayBackend {
    fn offered(&self) -> Offered {
        self.0.catalog.offered()
    }

    async fn described(&self) {
        self.0.described().await;
    }

    fn is_described(&self) -> bool {
        self.0.is_described()
    }

    fn session_opened(&self, peer: &Peer) {
        // Told of list changes from its start: an upstream may join before the
        // session's first request.
        self.0.subs.remember_peer(&Some(peer.clone()));
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
            let gw = &self.0;
            let ready = |id: &UpstreamId| gw.upstream(id.as_str()).and_then(|u| u.ready());
            gw.asks.relay.relay_progress(params, ready).await;
        }
    }

    fn param_headers(&self) -> mcpx_transport::ParamHeaders {
        // Published at each rebuild, with the list the host sees (a tool whose
        // annotations are invalid is not listed, so it has none here either).
        self.0.catalog.param_headers()
    }

    fn summary(&self) -> Summary {
        GatewayBackend::summary_of(&self.0)
    }
    // Not an `async fn`: one would move `call` into a local of its own and keep both
    // copies in the future (rustc does not overlap them), half a kilobyte more on every
    // call. Every rarer branch below is boxed for the same reason: a future is as large
    // as its largest branch, and a call's is moved and allocated on every call.
    #[allow(clippy::manual_async_fn)]
    fn call(&self, mut call: Call) -> impl Future<Output = Result<Reply, Fault>> + Send {
        let method = Method::of(&call.method);
        let asker = login::Asker::of(&call).map(|a| (self.0.clone(), a));
        let call_future = async move {
            let gw = &self.0;
            gw.subs.remember_peer(&call.peer);
            // The request's `requestState`, looked for once: a parked call's (E-1),
            // or a login's (B-C15).
            let resumes = Resumes::of(&call);
            // B-C15: a 2026-07-28 host's retry after it was asked to authorize an
            // upstream waits for the flow, then goes on as its call (boxed: rare).
            if resumes == Resumes::Login {
                call.params = Box::pin(
                    gw.asks
                        .logins
                        .retried(&call, gw.config().global.ask_timeout),
                )
                .await?;
            }
            if resumes == Resumes::Parked && method.may_resume() {
                let state: String = call
                    .params
                    .as_ref()
                    .and_then(|p| p.member("requestState"))
                    .and_then(|s| serde_json::from_str(s).ok())
                    .unwrap_or_default();
                return Box::pin(call::resume(gw, &call, &state)).await;
            }
            handlers::dispatch(gw, &call, method).await
        };
        // B-C15: a host that can be asked to open a url is asked to authorize an
        // upstream that needs it (boxed: the exception). Other hosts' calls are not
        // wrapped: a `then` costs every poll of the call, and its drop.
        use futures_util::future::Either;
        match asker {
            None => Either::Left(call_future),
            Some((gw, asker)) => {
                Either::Right(futures_util::FutureExt::then(call_future, move |outcome| {
                    match outcome {
                        Err(f) => {
                            Either::Left(Box::pin(async move { gw.offer_login(asker, f).await }))
                        }
                        ok => Either::Right(std::future::ready(ok)),
                    }
                }))
            }
        }
    }
}

impl Source for Gateway {
    fn sample(&self) -> Sample {
        Sample {
            states: upstream::State::KEYS,
            upstreams: self
                .upstreams()
                .iter()
                .map(|u| UpstreamSample {
                    name: u.id.to_string(),
                    state: u.status().state.key(),
                    in_flight: u.supervisor().in_flight(),
                })
                .collect(),
            parked_calls: self.asks.parked.len(),
            tasks: self.tasks.len(),
        }
    }
}
