//! Coalesced catalog rebuilds: the lists several upstreams set at once are built into
//! one catalog (see [`Coalesce::covering`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How [`super::catalog_cell::CatalogCell`] folds rebuilds together: `set` counts the lists
/// upstreams have set (each `relist` takes the next number as its ticket), `built`
/// is the highest number a built catalog holds, `due` says a caller has taken the
/// next rebuild and will run it shortly, and `rebuilt` wakes the callers waiting for
/// it.
#[derive(Debug, Default)]
pub(super) struct Coalesce {
    set: AtomicU64,
    built: AtomicU64,
    due: AtomicBool,
    rebuilt: tokio::sync::Notify,
}

impl Coalesce {
    /// The ticket of lists just set.
    pub(super) fn ticket(&self) -> u64 {
        self.set.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// What a rebuild that reads the lists now holds: every ticket up to this one.
    pub(super) fn covers(&self) -> u64 {
        self.set.load(Ordering::SeqCst)
    }

    /// A rebuild that read the lists at `covers` is in place.
    pub(super) fn built(&self, covers: u64) {
        self.built.fetch_max(covers, Ordering::SeqCst);
    }

    /// Runs `rebuild` (which calls [`Coalesce::covers`] before it reads the lists and
    /// [`Coalesce::built`] once its catalog is in place) unless a rebuild already
    /// holds `ticket`'s lists; `None` when another caller's did.
    ///
    /// Each upstream's arrival or `list_changed` sets its lists, and a rebuild walks
    /// every upstream's. When many set theirs at once (50 upstreams starting), one
    /// rebuild each would cost the square of their number. So the first caller to
    /// find no rebuild due takes it, and yields once first: the others whose lists
    /// came in the same turn set them meanwhile, find it due, and wait for it.
    pub(super) async fn covering<T>(&self, ticket: u64, rebuild: impl FnOnce() -> T) -> Option<T> {
        loop {
            if self.built.load(Ordering::SeqCst) >= ticket {
                return None;
            }
            if !self.due.swap(true, Ordering::SeqCst) {
                // Cleared (and the waiters told) even if this future is dropped at
                // the yield, so that they never wait for a rebuild nobody runs.
                let due = Due(self);
                tokio::task::yield_now().await;
                // Cleared before the lists are read: lists set after this need a
                // rebuild of their own.
                self.due.store(false, Ordering::SeqCst);
                let made = rebuild();
                drop(due);
                return Some(made);
            }
            let rebuilt = self.rebuilt.notified();
            tokio::pin!(rebuilt);
            rebuilt.as_mut().enable();
            if self.built.load(Ordering::SeqCst) >= ticket || !self.due.load(Ordering::SeqCst) {
                continue;
            }
            rebuilt.await;
        }
    }
}

/// The rebuild a caller took: when it ends (run, or the caller dropped at its
/// yield), no rebuild is due any longer and the waiters look again.
struct Due<'a>(&'a Coalesce);

impl Drop for Due<'_> {
    fn drop(&mut self) {
        self.0.due.store(false, Ordering::SeqCst);
        self.0.rebuilt.notify_waiters();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use parking_lot::Mutex;

    use super::Coalesce;

    /// Ten callers set their lists in one turn: one rebuild holds them all, and none
    /// returns before a rebuild holding its lists is in place.
    #[tokio::test]
    async fn lists_set_in_one_turn_are_built_once_and_each_caller_waits_for_it() {
        let c = Arc::new(Coalesce::default());
        let lists = Arc::new(Mutex::new(Vec::new()));
        let builds: Arc<Mutex<Vec<Vec<u32>>>> = Arc::default();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..10u32 {
            let (c, lists, builds) = (c.clone(), lists.clone(), builds.clone());
            tasks.spawn(async move {
                lists.lock().push(i);
                let ticket = c.ticket();
                c.covering(ticket, || {
                    let covers = c.covers();
                    let seen = lists.lock().clone();
                    builds.lock().push(seen);
                    c.built(covers);
                })
                .await;
                assert!(
                    builds.lock().iter().any(|b| b.contains(&i)),
                    "caller {i} returned before its lists were built"
                );
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.unwrap();
        }
        let builds = builds.lock();
        assert_eq!(builds.len(), 1, "{builds:?}");
        assert_eq!(builds[0].len(), 10, "{builds:?}");
    }

    /// Lists set after a rebuild read them get a rebuild of their own.
    #[tokio::test]
    async fn lists_set_later_are_built_again() {
        let c = Coalesce::default();
        let first = c.ticket();
        assert_eq!(c.covering(first, || c.built(c.covers())).await, Some(()));
        assert_eq!(c.covering(first, || c.built(c.covers())).await, None);
        let second = c.ticket();
        assert_eq!(c.covering(second, || c.built(c.covers())).await, Some(()));
    }

    /// A caller that took the rebuild and was dropped at its yield leaves none due:
    /// the next caller rebuilds instead of waiting for ever.
    #[tokio::test]
    async fn a_dropped_taker_leaves_no_rebuild_due() {
        let c = Coalesce::default();
        let first = c.ticket();
        {
            let taker = c.covering(first, || c.built(c.covers()));
            tokio::pin!(taker);
            assert!(futures_util::poll!(taker.as_mut()).is_pending());
        }
        let second = c.ticket();
        let next = c.covering(second, || c.built(c.covers()));
        let ran = tokio::time::timeout(Duration::from_secs(5), next).await;
        assert_eq!(ran.ok(), Some(Some(())));
    }
}
