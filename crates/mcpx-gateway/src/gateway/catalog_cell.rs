//! The catalog cell: the merged catalog in force and everything that decides when it
//! is rebuilt and when a request may read it.
//!
//! It owns the catalog snapshot, the serialised rebuild and what the last one made of
//! each upstream's lists, the coalescing of rebuilds ([`Coalesce`]), the warnings
//! already logged, which upstreams are listed, the first-start waits (`settled`,
//! `described`) and the capabilities offered. Nothing outside this file touches
//! these fields.
//!
//! # Locks
//!
//! Each lock guards one field and is held for a few instructions, never across an
//! `.await`. Only [`CatalogCell::rebuild`] holds two: `rebuilding`, then (while it
//! reads the upstream set it is given) `catalog`, so that two rebuilds cannot swap in
//! an older catalog over a newer one.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mcpx_server::Offered;
use mcpx_transport::ParamHeaders;
use parking_lot::{Mutex, RwLock};

use super::Upstreams;
use super::coalesce::Coalesce;
use crate::catalog::{self, Catalog, ListKind};
use crate::config::Config;
use crate::id::UpstreamId;
use crate::naming::NameRules;
use crate::upstream::{State, Upstream};

/// What the last catalog build made of each upstream's lists, and the lists it made it
/// of: the next build reuses it for the upstreams whose lists are still the same.
type Made = HashMap<UpstreamId, (Arc<catalog::Lists>, catalog::Made)>;

/// A catalog just swapped in, and the kinds of lists hosts see changed by it.
#[derive(Debug)]
pub(super) struct Rebuilt {
    pub(super) catalog: Arc<Catalog>,
    pub(super) changed: Vec<ListKind>,
}

/// The catalog in force and when it may be read (see the module doc).
#[derive(Debug, Default)]
pub(super) struct CatalogCell {
    catalog: RwLock<Arc<Catalog>>,
    /// Held while a catalog is built and swapped in.
    rebuilding: Mutex<Made>,
    /// Lists set and rebuilds due.
    coalesce: Coalesce,
    /// Catalog warnings already logged: each is logged once.
    warned: Mutex<HashSet<String>>,
    /// Upstreams whose first lists are in the catalog.
    listed: Mutex<HashSet<UpstreamId>>,
    /// Told whenever an upstream settles or is listed.
    progress: tokio::sync::Notify,
    /// Every upstream settled its first start, or `startupWaitMs` passed: requests no
    /// longer wait.
    settled: AtomicBool,
    /// Every upstream's capabilities are known (or it settled its first start), or
    /// `capabilityWaitMs` passed: `initialize` and `server/discover` no longer wait.
    described: AtomicBool,
    /// The capabilities offered, kept current as upstreams connect (read per request).
    offered: Mutex<Offered>,
    /// The catalog's tools' `Mcp-Param-*` annotations, published at each swap for the
    /// Streamable HTTP server, which reads them without calling the gateway.
    param_headers: ParamHeaders,
}

impl CatalogCell {
    /// The catalog in force (a snapshot: never held across an await by anyone).
    pub(super) fn snapshot(&self) -> Arc<Catalog> {
        self.catalog.read().clone()
    }

    /// The handle the catalog's `Mcp-Param-*` annotations are published to.
    pub(super) fn param_headers(&self) -> ParamHeaders {
        self.param_headers.clone()
    }

    /// The capabilities offered.
    pub(super) fn offered(&self) -> Offered {
        *self.offered.lock()
    }

    /// Keeps `offered` as the capabilities offered.
    pub(super) fn set_offered(&self, offered: Offered) {
        *self.offered.lock() = offered;
    }

    /// Whether `id`'s first lists are in the catalog.
    pub(super) fn is_listed(&self, id: &UpstreamId) -> bool {
        self.listed.lock().contains(id)
    }

    /// An upstream settled (or changed state): the waits look again.
    pub(super) fn progressed(&self) {
        self.progress.notify_waiters();
    }

    /// Builds the catalog from the lists of the upstreams `read` gives (with the
    /// configuration in force) and swaps it in.
    pub(super) fn rebuild(&self, read: impl FnOnce() -> (Arc<Config>, Arc<Upstreams>)) -> Rebuilt {
        let mut serial = self.rebuilding.lock();
        // Every list set up to here is read below.
        let covers = self.coalesce.covers();
        let previous = std::mem::take(&mut *serial);
        let (config, ups) = read();
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
                previous: previous
                    .get(&u.id)
                    .filter(|(was, _)| Arc::ptr_eq(was, l))
                    .map(|(_, made)| made),
            })
            .collect();
        let mut built = catalog::build(&rules, &sources);
        drop(sources);
        *serial = ups
            .iter()
            .zip(lists)
            .zip(std::mem::take(&mut built.made))
            .map(|((u, l), made)| (u.id.clone(), (l, made)))
            .collect();
        drop(previous);
        {
            let mut warned = self.warned.lock();
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
        // Under `rebuilding`, like the swap: two rebuilds publish in their order.
        self.param_headers.publish(
            fresh
                .tools()
                .filter_map(|(name, _)| {
                    let headers = fresh.param_headers(name);
                    (!headers.is_empty()).then(|| (name.to_owned(), headers.to_vec()))
                })
                .collect(),
        );
        let before = std::mem::replace(&mut *self.catalog.write(), fresh.clone());
        self.coalesce.built(covers);
        drop(serial);
        let changed = fresh.changed_since(&before);
        Rebuilt {
            catalog: fresh,
            changed,
        }
    }

    /// Upstream `id` has set its lists: `rebuild` runs unless a rebuild already holds
    /// them ([`Coalesce::covering`]), then `id` counts as listed. Returns the kinds of
    /// lists hosts see changed, for this caller to announce (none when another
    /// rebuild covered them: that one's caller announces them).
    pub(super) async fn lists_set(
        &self,
        id: &UpstreamId,
        rebuild: impl FnOnce() -> Vec<ListKind>,
    ) -> Vec<ListKind> {
        let ticket = self.coalesce.ticket();
        // In the catalog before it counts as listed: a host's first request, which
        // waits for that, must find its tools.
        let changed = self
            .coalesce
            .covering(ticket, rebuild)
            .await
            .unwrap_or_default();
        self.listed.lock().insert(id.clone());
        self.progress.notify_waiters();
        changed
    }

    /// Whether `u` is still on its first start, or up but not yet listed.
    fn first_start_pending(&self, u: &Upstream) -> bool {
        let s = u.status();
        !s.settled || (s.state == State::Ready && !self.is_listed(&u.id))
    }

    /// Waits until `done` holds, looking again each time an upstream settles or is
    /// listed, for at most `within`; whether it came to hold.
    async fn wait_progress(&self, within: Duration, done: impl Fn() -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done() {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return false;
            }
        }
    }

    /// Whether what the gateway declares is known (see [`CatalogCell::describe`]).
    pub(super) fn is_described(&self) -> bool {
        self.described.load(Ordering::Relaxed)
    }

    /// Waits, up to `within`, until every upstream `ups` gives that mcpx has not met
    /// before (not in the era cache) has settled its first start and, if it came up,
    /// is listed. Then (or once the wait ran out) the gateway counts as described.
    pub(super) async fn describe(&self, within: Duration, ups: impl Fn() -> Arc<Upstreams>) {
        self.wait_progress(within, || {
            !ups()
                .iter()
                .any(|u| !u.is_remembered() && self.first_start_pending(u))
        })
        .await;
        self.described.store(true, Ordering::Relaxed);
    }

    /// Whether every upstream has settled its first start (or one wait for that ran
    /// out): then nothing waits for first starts again.
    pub(super) fn is_settled(&self) -> bool {
        self.settled.load(Ordering::Relaxed)
    }

    /// Waits, up to `within`, until every upstream `ups` gives has settled its first
    /// start and those that came up are listed. Then (or once the wait ran out) the
    /// gateway counts as settled.
    pub(super) async fn settle(&self, within: Duration, ups: impl Fn() -> Arc<Upstreams>) {
        if self.is_settled() {
            return;
        }
        self.wait_progress(within, || {
            !ups().iter().any(|u| self.first_start_pending(u))
        })
        .await;
        self.settled.store(true, Ordering::Relaxed);
    }

    /// Waits until `id`'s lists are in the catalog, up to `within`.
    pub(super) async fn wait_listed(&self, id: &UpstreamId, within: Duration) {
        self.wait_progress(within, || self.is_listed(id)).await;
    }

    /// Of `ups`, those still making their first start, or up but not yet listed: what
    /// a list answered now lacks (`_meta` [`mcpx_protocol::meta::STARTING`]).
    pub(super) fn starting(&self, ups: &Upstreams) -> Vec<String> {
        let listed = self.listed.lock();
        // The common case, on every list: every upstream listed, nothing to look at.
        if ups.iter().all(|u| listed.contains(&u.id)) {
            return Vec::new();
        }
        let unlisted: Vec<&Arc<Upstream>> =
            ups.iter().filter(|u| !listed.contains(&u.id)).collect();
        drop(listed);
        unlisted
            .into_iter()
            .filter(|u| {
                let s = u.status();
                !s.settled || s.state == State::Ready
            })
            .map(|u| u.id.as_str().to_owned())
            .collect()
    }
}
