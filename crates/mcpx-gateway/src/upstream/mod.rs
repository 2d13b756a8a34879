//! One configured upstream: its identity, settings, last known lists and facts, and
//! the supervisor that owns its connection.
//!
//! * [`supervisor`]: the lifecycle task and its states (generic over a [`Link`]).
//! * [`restarts`]: the restart policy, a pure state machine.
//!
//! An [`Upstream`] is shared (`Arc`) by the gateway's upstream set, the catalog's
//! routes and every call in flight on it. A reload that changes or removes the
//! upstream's entry makes a new `Upstream` (or none) and retires this one: calls in
//! flight finish on it, new ones go to its successor, and work held for it by id
//! (parked calls, tasks, subscriptions) finds no upstream of that id, or a new one.

pub mod restarts;
pub mod supervisor;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mcpx_client::{CallOptions, ClientError, Connection, EraCache, ServerFacts, Target, connect};
use mcpx_protocol::{Era, Params};
use mcpx_transport::TransportError;
use parking_lot::Mutex;
use serde_json::json;

use crate::catalog::Lists;
use crate::config::ServerConfig;
use crate::error::{Cause, GatewayError};
use crate::id::UpstreamId;
pub use supervisor::{Busy, Command, InFlight, Link, Settings, State, Status, Supervisor};

/// A connection being made, as a [`Connector`] returns it.
pub type Connecting<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<Connection, ClientError>> + Send + 'a>>;

/// How each [`ClientLink`] connects: the factory of the supervisors' links, which the
/// app is started with ([`crate::app::App::start_linked`]). [`Connect`], the default,
/// is mcpx-client's [`connect`] to the configured target; a test's connector reaches
/// an upstream by its name ([`Target::name`]) some other way, such as a server in the
/// same process over [`mcpx_client::TargetTransport::Stream`]. Called once per
/// connection attempt, never per request.
pub trait Connector: std::fmt::Debug + Send + Sync + 'static {
    /// Connects to `target` (the upstream [`Target::name`] names), remembering its era
    /// in `era_cache`.
    fn connect<'a>(&'a self, target: &'a Target, era_cache: &'a EraCache) -> Connecting<'a>;
}

/// The default [`Connector`]: mcpx-client's [`connect`] to the configured target.
#[derive(Debug, Clone, Copy, Default)]
pub struct Connect;

impl Connector for Connect {
    fn connect<'a>(&'a self, target: &'a Target, era_cache: &'a EraCache) -> Connecting<'a> {
        Box::pin(connect(target, era_cache))
    }
}

/// How the gateway reaches an upstream: a [`Connector`] (by default mcpx-client's
/// [`connect`]) and the [`Connection`] it makes.
#[derive(Debug)]
pub struct ClientLink {
    target: Target,
    era_cache: EraCache,
    connector: Arc<dyn Connector>,
}

impl Link for ClientLink {
    type Conn = Connection;

    async fn connect(&self) -> Result<Connection, Cause> {
        self.connector
            .connect(&self.target, &self.era_cache)
            .await
            .map_err(Cause::Client)
    }

    fn closed(&self, conn: &Connection) -> impl Future<Output = (Cause, bool)> + Send + 'static {
        let closed = conn.closed();
        let conn = conn.clone();
        async move {
            let cause = match closed.await {
                ClientError::Transport {
                    source: TransportError::Closed { detail },
                    ..
                } => Cause::Closed(without_own_refusals(&detail)),
                // Its stdout could no longer be framed (`data.cause` "framing").
                other => Cause::Client(other),
            };
            (cause, conn.exited_cleanly())
        }
    }

    async fn close(&self, conn: &Connection) {
        conn.close().await;
    }

    /// `ping` to a legacy upstream; `server/discover` to a 2026-07-28 one, which has
    /// no `ping`.
    async fn check(&self, conn: &Connection) -> Result<(), Cause> {
        let method = match conn.facts().era {
            Era::Modern => "server/discover",
            Era::Legacy => "ping",
        };
        let params = Params::of_value(&json!({}));
        conn.call(method, Some(&params), CallOptions::default())
            .await
            .map(drop)
            .map_err(Cause::HealthCheck)
    }

    fn pid(&self, conn: &Connection) -> Option<u32> {
        conn.pid()
    }
}

/// One configured upstream.
#[derive(Debug)]
pub struct Upstream {
    /// Its stable identity (the server's name).
    pub id: UpstreamId,
    /// The prefix of its names when several upstreams are merged.
    pub namespace: String,
    /// Its configuration entry.
    pub config: ServerConfig,
    supervisor: Arc<Supervisor<ClientLink>>,
    /// What it listed when last asked. Never held across an await.
    lists: Mutex<Arc<Lists>>,
    /// What it offered when last connected. Never held across an await.
    facts: Mutex<Option<Arc<ServerFacts>>>,
    /// What its last completed handshake found, remembered in the era cache: declared
    /// for it until it connects.
    remembered: Option<Arc<ServerFacts>>,
    /// One permit per sampling or elicitation ask of this upstream that mcpx may hold
    /// toward hosts at once (`askMaxPending`, register E-15).
    pub asks: Arc<tokio::sync::Semaphore>,
    /// A re-list is scheduled (list changes are coalesced).
    pub(crate) relist_scheduled: AtomicBool,
    /// Replaced or removed by a reload.
    retired: AtomicBool,
    /// It replaced a predecessor (a reload changed its entry): hosts' subscriptions
    /// at the predecessor are taken up on its first connection.
    inherited: AtomicBool,
}

impl Upstream {
    /// An upstream for entry `config` named `id`, reached at `target` by `connector`,
    /// and the receiver its supervisor's task ([`Upstream::supervisor`]`.run`) reads.
    pub fn new(
        id: UpstreamId,
        config: ServerConfig,
        target: Target,
        connector: Arc<dyn Connector>,
        era_cache: EraCache,
        ask_max_pending: usize,
        call_wait: std::time::Duration,
    ) -> (Arc<Upstream>, tokio::sync::mpsc::Receiver<Command>) {
        let settings = Settings {
            name: id.to_string(),
            restart: config.mcpx.restart.clone(),
            start: config.mcpx.start,
            connect_timeout: config.mcpx.connect_timeout,
            health: config.mcpx.health_check,
            idle_timeout: config.mcpx.idle_timeout,
            call_wait,
            max_in_flight: config.mcpx.max_in_flight,
            max_queued: config.mcpx.max_queued,
        };
        let remembered = era_cache.facts(&target.transport.identity()).map(Arc::new);
        let (supervisor, commands) = Supervisor::new(
            ClientLink {
                target,
                era_cache,
                connector,
            },
            settings,
        );
        let up = Arc::new(Upstream {
            namespace: config
                .mcpx
                .namespace
                .clone()
                .unwrap_or_else(|| id.as_str().to_owned()),
            id,
            config,
            supervisor,
            lists: Mutex::new(Arc::new(Lists::default())),
            facts: Mutex::new(None),
            remembered,
            asks: Arc::new(tokio::sync::Semaphore::new(ask_max_pending)),
            relist_scheduled: AtomicBool::new(false),
            retired: AtomicBool::new(false),
            inherited: AtomicBool::new(false),
        });
        (up, commands)
    }

    /// Its supervisor.
    pub fn supervisor(&self) -> &Arc<Supervisor<ClientLink>> {
        &self.supervisor
    }

    /// Its target (how mcpx reaches it).
    pub fn target(&self) -> &Target {
        &self.supervisor.link().target
    }

    /// The ready connection with its generation, waiting for a start in progress;
    /// else why there is none, as the error a host gets.
    pub async fn connection(&self) -> Result<(u64, Connection), GatewayError> {
        match self.live() {
            Some(c) => Ok(c),
            // Boxed: waiting is the exception, and its future would otherwise sit in
            // every call's.
            None => Box::pin(self.connection_slow()).await,
        }
    }

    /// The ready connection with its generation, if it is live now: the common case,
    /// without a future (a call's path takes this, and awaits
    /// [`Upstream::connection_slow`] only when it is `None`).
    pub fn live(&self) -> Option<(u64, Connection)> {
        self.supervisor.ready().filter(|c| !c.1.is_closed())
    }

    /// [`Upstream::connection`] when [`Upstream::live`] has none: tells the supervisor
    /// of a connection found dead, waits for a start in progress, wakes a lazy
    /// upstream, or says why there is no connection.
    pub async fn connection_slow(&self) -> Result<(u64, Connection), GatewayError> {
        if let Some((generation, c)) = self.supervisor.ready()
            && c.is_closed()
        {
            // The process exited between calls: tell the supervisor (it may not have
            // seen it yet), and wait, briefly, until it has taken the connection out.
            let mut status = self.supervisor.watch();
            self.lost(
                generation,
                Cause::Closed("the upstream process exited".to_owned()),
            );
            let seen = async {
                while self
                    .supervisor
                    .ready()
                    .is_some_and(|(g, _)| g == generation)
                {
                    if status.changed().await.is_err() {
                        return;
                    }
                }
            };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), seen).await;
        }
        self.supervisor
            .connection()
            .await
            .map_err(|status| self.unavailable(&status))
    }

    /// The ready connection now, if any (no waiting, no waking).
    pub fn ready(&self) -> Option<Connection> {
        self.supervisor.ready().map(|(_, c)| c)
    }

    /// The error for a call that finds the upstream in `status`.
    pub fn unavailable(&self, status: &Status) -> GatewayError {
        if status.state == State::Stopped && !self.is_current() {
            return GatewayError::Removed {
                upstream: self.id.clone(),
            };
        }
        GatewayError::Unavailable {
            upstream: self.id.clone(),
            state: status.state.key(),
            phrase: status.state.phrase(tokio::time::Instant::now()),
            cause: status.last_error.clone(),
        }
    }

    /// A call found connection `generation` broken.
    pub fn lost(&self, generation: u64, cause: Cause) {
        self.supervisor.command(Command::Lost { generation, cause });
    }

    /// The supervisor's status.
    pub fn status(&self) -> Status {
        self.supervisor.status()
    }

    /// What it listed when last asked.
    pub fn lists(&self) -> Arc<Lists> {
        self.lists.lock().clone()
    }

    /// How many tools it listed: `None` while that is not known, because it never
    /// connected or its first `tools/list` has not been answered (a status shows it
    /// as listing, not as 0 tools). An upstream that does not offer tools has 0.
    pub fn tool_count(&self) -> Option<usize> {
        if let Some(tools) = self.lists().get(crate::catalog::ListKind::Tools) {
            return Some(tools.len());
        }
        self.facts().filter(|f| !f.has("tools")).map(|_| 0)
    }

    /// Replaces what it listed.
    pub fn set_lists(&self, lists: Lists) {
        *self.lists.lock() = Arc::new(lists);
    }

    /// Starts from a predecessor's lists and facts (a reload that changed the entry):
    /// its tools stay listed while it starts again.
    pub fn inherit(&self, from: &Upstream) {
        self.inherited.store(true, Ordering::Release);
        self.set_lists((*from.lists()).clone());
        let facts = from.facts();
        *self.facts.lock() = facts;
    }

    /// What it offered when last connected.
    pub fn facts(&self) -> Option<Arc<ServerFacts>> {
        self.facts.lock().clone()
    }

    /// What it offers as far as mcpx knows: its facts when it has connected, else
    /// what its last handshake found (the era cache), else nothing known.
    pub fn declared_facts(&self) -> Option<Arc<ServerFacts>> {
        self.facts().or_else(|| self.remembered.clone())
    }

    /// Whether mcpx remembers what its last handshake found (the era cache).
    pub fn is_remembered(&self) -> bool {
        self.remembered.is_some()
    }

    /// Records what a new connection offers.
    pub fn set_facts(&self, facts: Arc<ServerFacts>) {
        *self.facts.lock() = Some(facts);
    }

    /// Whether the gateway still routes to this upstream (false once a reload
    /// replaced or removed it).
    pub fn is_current(&self) -> bool {
        !self.retired.load(Ordering::Acquire)
    }

    /// Whether it replaced a predecessor (see [`Upstream::inherit`]).
    pub fn inherited(&self) -> bool {
        self.inherited.load(Ordering::Acquire)
    }

    /// Marks it replaced or removed by a reload.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }
}

/// `detail` (an exit and the tail of the upstream's stderr) without the lines that
/// only repeat mcpx's own refusal of a question no host request could answer: the
/// upstream's failure is what it reports, not what mcpx told it.
fn without_own_refusals(detail: &str) -> String {
    let own = mcpx_client::connection::NOWHERE_TO_ASK;
    let Some((head, tail)) = detail
        .split_once("; stderr: ")
        .filter(|_| detail.contains(own))
    else {
        return detail.to_owned();
    };
    let kept: String = tail
        .split_inclusive('\n')
        .filter(|l| !l.contains(own))
        .collect();
    match kept.trim_end() {
        "" => head.to_owned(),
        kept => format!("{head}; stderr: {kept}"),
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::without_own_refusals;

    #[test]
    fn an_upstream_quoting_mcpx_refusal_is_not_reported_as_its_failure() {
        let detail = "exited with status 1; stderr: starting\n\
            Failed to request roots: {\"code\":-32603,\"message\":\"mcpx cannot forward roots/list here: no host request can answer it\"}\n\
            Error: ENOENT /nope\n";
        assert_eq!(
            without_own_refusals(detail),
            "exited with status 1; stderr: starting\nError: ENOENT /nope"
        );
        assert_eq!(
            without_own_refusals("exited with status 2"),
            "exited with status 2"
        );
        let only = "exited with status 1; stderr: roots: no host request can answer it\n";
        assert_eq!(without_own_refusals(only), "exited with status 1");
    }
}
