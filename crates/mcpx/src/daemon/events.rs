//! The daemon's events (supervisor states, catalog changes, calls through `/v1` and
//! hosts' sessions, reloads): a bounded ring, numbered from 1, so that a client of
//! `GET /v1/events` can resume with `?since=SEQ` (or `Last-Event-ID`), and a broadcast
//! for those listening.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use mcpx_gateway::app::App;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// Events kept for resumption.
pub const KEPT: usize = 1024;

/// How often the upstreams' states and the catalog are looked at.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// The least time between two `history` events: the writes between are told as one.
pub const HISTORY_EVERY: Duration = Duration::from_millis(250);

/// One event.
#[derive(Debug)]
pub struct Event {
    /// Its number: 1, 2, … in the order published.
    pub seq: u64,
    /// `upstream`, `catalog`, `call`, `restart`, `reload` or `history`.
    pub kind: &'static str,
    /// What it says.
    pub data: Value,
}

/// Listeners at once by default (`--max-event-subscribers`).
pub const MAX_SUBSCRIBERS: usize = 256;

/// The ring, the live feed and its listeners.
#[derive(Debug)]
pub struct Events {
    ring: Mutex<(u64, VecDeque<Arc<Event>>)>,
    live: broadcast::Sender<Arc<Event>>,
    listeners: Arc<Listeners>,
}

/// The listeners, the oldest first, each with the token that cuts it.
#[derive(Debug)]
struct Listeners {
    max: std::sync::atomic::AtomicUsize,
    held: Mutex<(u64, VecDeque<(u64, CancellationToken)>)>,
}

/// A listener's place, given back when dropped.
#[derive(Debug)]
pub struct Place {
    listeners: Arc<Listeners>,
    id: u64,
    /// Fired when a newer listener took the place (the bound was reached).
    pub cut: CancellationToken,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.listeners
            .held
            .lock()
            .1
            .retain(|(id, _)| *id != self.id);
    }
}

/// What a new listener gets: the events after the one it named, whether some it
/// asked for are no longer kept, and the feed of those to come.
#[derive(Debug)]
pub struct Subscription {
    /// The kept events after `since`.
    pub backlog: Vec<Arc<Event>>,
    /// Events after `since` that are no longer kept: the first kept one's number.
    pub gap: Option<u64>,
    /// Events published from now on.
    pub live: broadcast::Receiver<Arc<Event>>,
    /// Its place among the listeners.
    pub place: Place,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            ring: Mutex::new((0, VecDeque::with_capacity(KEPT))),
            live: broadcast::channel(KEPT).0,
            listeners: Arc::new(Listeners {
                max: std::sync::atomic::AtomicUsize::new(MAX_SUBSCRIBERS),
                held: Mutex::new((0, VecDeque::new())),
            }),
        }
    }
}

impl Events {
    /// Publishes an event.
    pub fn publish(&self, kind: &'static str, data: Value) {
        let mut ring = self.ring.lock();
        ring.0 += 1;
        let event = Arc::new(Event {
            seq: ring.0,
            kind,
            data,
        });
        if ring.1.len() == KEPT {
            ring.1.pop_front();
        }
        ring.1.push_back(event.clone());
        // Under the lock: a subscriber gets each event once, from the backlog or live.
        let _ = self.live.send(event);
    }

    /// The last event's number (0 before the first).
    pub fn last(&self) -> u64 {
        self.ring.lock().0
    }

    /// Sets the most listeners held at once (at least 1).
    pub fn bound_subscribers(&self, max: usize) {
        (self.listeners.max).store(max.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// A place for a new listener; at the bound, the oldest listener is cut.
    fn place(&self) -> Place {
        let max = self
            .listeners
            .max
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut held = self.listeners.held.lock();
        while held.1.len() >= max {
            if let Some((_, cut)) = held.1.pop_front() {
                cut.cancel();
            }
        }
        held.0 += 1;
        let (id, cut) = (held.0, CancellationToken::new());
        held.1.push_back((id, cut.clone()));
        Place {
            listeners: self.listeners.clone(),
            id,
            cut,
        }
    }

    /// How many listen now.
    #[cfg(test)]
    fn subscribers(&self) -> usize {
        self.listeners.held.lock().1.len()
    }

    /// Listens from after event `since` (`None`: from now). A `since` at or past the
    /// last event is from now, with no gap.
    pub fn subscribe(&self, since: Option<u64>) -> Subscription {
        let place = self.place();
        let ring = self.ring.lock();
        let live = self.live.subscribe();
        let Some(since) = since.filter(|s| *s < ring.0) else {
            return Subscription {
                backlog: Vec::new(),
                gap: None,
                live,
                place,
            };
        };
        let backlog: Vec<Arc<Event>> = ring.1.iter().filter(|e| e.seq > since).cloned().collect();
        let first_kept = ring.1.front().map_or(ring.0 + 1, |e| e.seq);
        // `since < ring.0`, so `since + 1` cannot overflow.
        let gap = (since + 1 < first_kept).then_some(first_kept);
        Subscription {
            backlog,
            gap,
            live,
            place,
        }
    }
}

/// What is published about one upstream: what changes when it does.
fn upstream_view(name: &str, st: &mcpx_gateway::upstream::Status) -> Value {
    json!({
        "name": name,
        "state": st.state.key(),
        "restarts": st.restarts,
        "pid": st.pid,
        "lastError": st.last_error.as_ref().map(|e| e.to_string()),
        "lastErrorAt": st.last_error_at.map(crate::daemon::ops::info::wall_time),
    })
}

/// Publishes a change of each upstream's state and of the catalog, looking every
/// [`LOOK_EVERY`], until `stop`.
pub async fn watch(app: Arc<App>, events: Arc<Events>, stop: CancellationToken) {
    let mut seen: std::collections::HashMap<String, Value> = std::collections::HashMap::new();
    let mut catalog = app.gateway().catalog();
    let mut tick = tokio::time::interval(LOOK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        let mut now = std::collections::HashMap::new();
        for (name, st) in app.status() {
            let view = upstream_view(&name, &st);
            if seen.get(&name) != Some(&view) {
                events.publish("upstream", view.clone());
            }
            now.insert(name, view);
        }
        for gone in seen.keys().filter(|k| !now.contains_key(*k)) {
            events.publish("upstream", json!({"name": gone, "state": "removed"}));
        }
        seen = now;
        let current = app.gateway().catalog();
        if !Arc::ptr_eq(&current, &catalog) {
            use mcpx_gateway::catalog::ListKind;
            events.publish(
                "catalog",
                json!({
                    "tools": current.list(ListKind::Tools).len(),
                    "prompts": current.list(ListKind::Prompts).len(),
                    "resources": current.list(ListKind::Resources).len(),
                }),
            );
            catalog = current;
        }
    }
}

/// Publishes a `history` event, `{"lastId": N}`, when the call history's writer has
/// written calls (`written` is its last row's number), at most one every
/// [`HISTORY_EVERY`], until `stop` or the writer's end.
pub async fn follow_history(
    mut written: tokio::sync::watch::Receiver<i64>,
    events: Arc<Events>,
    stop: CancellationToken,
) {
    // What was written before the daemon started is no news.
    written.borrow_and_update();
    loop {
        tokio::select! {
            r = written.changed() => if r.is_err() { return },
            () = stop.cancelled() => return,
        }
        let last = *written.borrow_and_update();
        events.publish("history", json!({ "lastId": last }));
        // Writes meanwhile mark the value changed: the next event says the last.
        tokio::select! {
            () = tokio::time::sleep(HISTORY_EVERY) => {}
            () = stop.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_resumes_after_the_event_it_names_and_is_told_of_a_gap() {
        let events = Events::default();
        for i in 0..3 {
            events.publish("call", json!(i));
        }
        let s = events.subscribe(Some(1));
        assert_eq!(
            s.backlog.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert_eq!(s.gap, None);
        assert!(events.subscribe(None).backlog.is_empty());
        for i in 0..KEPT {
            events.publish("call", json!(i));
        }
        let s = events.subscribe(Some(0));
        assert_eq!(s.backlog.len(), KEPT);
        assert_eq!(s.gap, Some(4), "events 1 to 3 are no longer kept");
        assert_eq!(events.last(), 3 + KEPT as u64);
        let beyond = events.subscribe(Some(u64::MAX));
        assert!(
            beyond.backlog.is_empty() && beyond.gap.is_none(),
            "no overflow"
        );
    }

    #[test]
    fn at_the_bound_the_oldest_listener_is_cut() {
        let events = Events::default();
        events.bound_subscribers(2);
        let first = events.subscribe(None);
        let second = events.subscribe(None);
        let third = events.subscribe(None);
        assert!(first.place.cut.is_cancelled());
        assert!(!second.place.cut.is_cancelled() && !third.place.cut.is_cancelled());
        drop(third);
        assert_eq!(
            events.subscribers(),
            1,
            "a dropped listener gives its place back"
        );
    }

    #[tokio::test]
    async fn writes_are_told_as_history_events_at_most_four_a_second() {
        let events = Arc::new(Events::default());
        let (tx, rx) = tokio::sync::watch::channel(7);
        let stop = CancellationToken::new();
        let mut sub = events.subscribe(None);
        let follower = tokio::spawn(follow_history(rx, events.clone(), stop.clone()));
        tokio::task::yield_now().await;
        tx.send_replace(8);
        let first = tokio::time::timeout(Duration::from_secs(5), sub.live.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (first.kind, &first.data),
            ("history", &json!({"lastId": 8}))
        );
        // Three writes within the pause: one event, with the last number.
        for n in 9..=11 {
            tx.send_replace(n);
        }
        let second = tokio::time::timeout(Duration::from_secs(5), sub.live.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(second.data, json!({"lastId": 11}));
        assert!(
            second.seq == first.seq + 1 && sub.live.try_recv().is_err(),
            "coalesced"
        );
        drop(tx);
        follower.await.unwrap();
    }
}
