//! The upstream set: the upstreams in force, how they connect, their supervisors'
//! tasks and the log level their legacy sessions were given.
//!
//! Nothing outside this file touches these fields. Each lock guards one field and is
//! held for a few instructions, never across an `.await`.

use std::collections::HashMap;
use std::sync::Arc;

use mcpx_client::EraCache;
use mcpx_server::Level;
use parking_lot::{Mutex, RwLock};

use crate::config::{Config, ServerConfig};
use crate::id::UpstreamId;
use crate::upstream::{self, Upstream};

/// The upstreams in force, in configuration order; swapped whole by a reload.
#[derive(Debug, Default)]
pub struct Upstreams {
    list: Vec<Arc<Upstream>>,
    by_id: HashMap<UpstreamId, Arc<Upstream>, foldhash::fast::RandomState>,
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

    /// The upstream of `id`, looked for first at `position` (where the catalog found
    /// it: the same unless a reload changed the set since).
    pub fn at(&self, position: usize, id: &UpstreamId) -> Option<&Arc<Upstream>> {
        match self.list.get(position) {
            Some(u) if u.id == *id => Some(u),
            _ => self.get(id.as_str()),
        }
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

/// The upstreams in force and what makes and stops them (see the module doc).
#[derive(Debug)]
pub(super) struct UpstreamSet {
    current: RwLock<Arc<Upstreams>>,
    /// How each upstream's supervisor connects ([`upstream::Connector`]).
    connector: Arc<dyn upstream::Connector>,
    era_cache: EraCache,
    /// The supervisors' tasks, for shutdown.
    supervisors: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The most verbose log level any legacy host asked for, applied to legacy
    /// upstreams.
    log_level: Mutex<Option<Level>>,
}

impl UpstreamSet {
    /// An empty set whose upstreams will connect by `connector`.
    pub(super) fn new(connector: Arc<dyn upstream::Connector>, era_cache: EraCache) -> UpstreamSet {
        UpstreamSet {
            current: RwLock::new(Arc::new(Upstreams::default())),
            connector,
            era_cache,
            supervisors: Mutex::new(Vec::new()),
            log_level: Mutex::new(None),
        }
    }

    /// The upstreams in force.
    pub(super) fn current(&self) -> Arc<Upstreams> {
        self.current.read().clone()
    }

    /// Puts `list` in force, in this order.
    pub(super) fn replace(&self, list: Vec<Arc<Upstream>>) {
        *self.current.write() = Arc::new(Upstreams::new(list));
    }

    /// A new upstream `name` of `config` (`s`), not started: its supervisor runs on
    /// the commands' receiver.
    pub(super) fn make(
        &self,
        config: &Config,
        name: &str,
        s: &ServerConfig,
    ) -> (
        Arc<Upstream>,
        tokio::sync::mpsc::Receiver<upstream::Command>,
    ) {
        let target = super::upstream_target(config, name, s);
        Upstream::new(
            UpstreamId::new(name),
            s.clone(),
            target,
            self.connector.clone(),
            self.era_cache.clone(),
            config.global.ask_max_pending,
            config.global.startup_wait,
        )
    }

    /// Keeps a supervisor's task, for [`UpstreamSet::take_supervisors`].
    pub(super) fn track(&self, task: tokio::task::JoinHandle<()>) {
        let mut t = self.supervisors.lock();
        t.retain(|h| !h.is_finished());
        t.push(task);
    }

    /// The supervisors' tasks, to wait for at shutdown.
    pub(super) fn take_supervisors(&self) -> Vec<tokio::task::JoinHandle<()>> {
        std::mem::take(&mut *self.supervisors.lock())
    }

    /// The log level legacy upstreams' sessions were given, if any.
    pub(super) fn log_level(&self) -> Option<Level> {
        *self.log_level.lock()
    }

    /// Keeps `level` if it is more verbose than the one given so far; whether it was.
    pub(super) fn lower_log_level(&self, level: Level) -> bool {
        let mut current = self.log_level.lock();
        if current.is_some_and(|c| c <= level) {
            return false;
        }
        *current = Some(level);
        true
    }
}
