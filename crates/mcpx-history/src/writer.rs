//! The recorder: a bounded queue the call path puts records on without waiting, and
//! one writer thread that redacts what was captured and inserts in batches.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use crate::redact::Redactor;
use crate::{Capture, HistoryError, Record, Store};

/// Records inserted in one transaction at most.
const MAX_BATCH: usize = 512;

/// How long the writer lets records gather after a write before the next one. A
/// transaction costs far more than a row, and a thread woken per record costs a
/// context switch per call: so under load the writer wakes at most this often and
/// writes what gathered meanwhile, and when idle it sleeps until a record comes.
const LINGER: Duration = Duration::from_millis(50);

/// How often retention runs (and once at start).
const RETAIN_EVERY: Duration = Duration::from_secs(600);

/// Tries of a batch SQLite refused (another process held the database past the busy
/// timeout) before its records are counted as dropped.
const TRIES: usize = 3;

/// The recorder's settings (`mcpx.history`).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The database.
    pub path: PathBuf,
    /// What of a call's content is kept.
    pub capture: Capture,
    /// Which keys of captured content are blanked.
    pub redact: Redactor,
    /// The most bytes kept of one captured value (arguments, or a result).
    pub max_value_bytes: usize,
    /// Calls older than this are taken out.
    pub max_age: Duration,
    /// The most the database's pages in use may take; the oldest calls go first.
    pub max_bytes: u64,
    /// Records waiting for the writer at most; past it, a record is dropped.
    pub queue: usize,
}

impl Settings {
    /// The defaults, with the database at `path`.
    pub fn at(path: PathBuf) -> Settings {
        Settings {
            path,
            capture: Capture::None,
            redact: Redactor::default(),
            max_value_bytes: 16 * 1024,
            max_age: Duration::from_secs(30 * 24 * 3600),
            max_bytes: 256 * 1024 * 1024,
            queue: 8192,
        }
    }
}

/// How the recorder has done since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Records put on the queue.
    pub recorded: u64,
    /// Records lost: the queue was full, or the database refused them.
    pub dropped: u64,
    /// Records written.
    pub written: u64,
}

#[derive(Debug, Default)]
struct Counters {
    recorded: AtomicU64,
    dropped: AtomicU64,
    written: AtomicU64,
}

// Boxed: the queue's slots are allocated (and touched) up front, so a slot the size of
// a record would cost every process its queue's size in memory before its first call.
enum Msg {
    Record(Box<Record>),
    /// Answered once everything before it is written.
    Flush(std::sync::mpsc::SyncSender<()>),
}

/// The recorder a gateway holds. Dropping it lets the writer finish what is queued
/// and stop.
#[derive(Debug, Clone)]
pub struct History {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tx: SyncSender<Msg>,
    counters: Arc<Counters>,
    settings: Settings,
    written: tokio::sync::watch::Receiver<i64>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Msg::Record(_) => f.write_str("Record"),
            Msg::Flush(_) => f.write_str("Flush"),
        }
    }
}

impl History {
    /// Opens the database (migrating it) and starts the writer thread.
    pub fn open(settings: Settings) -> Result<History, HistoryError> {
        let store = Store::open(&settings.path)?;
        let last = store.last_id()?;
        let (tx, rx) = sync_channel(settings.queue.max(1));
        let counters = Arc::new(Counters::default());
        let (written_tx, written) = tokio::sync::watch::channel(last);
        let writer = Writer {
            store,
            rx,
            counters: counters.clone(),
            settings: settings.clone(),
            written: written_tx,
        };
        std::thread::Builder::new()
            .name("mcpx-history".into())
            .spawn(move || writer.run())
            .map_err(HistoryError::Thread)?;
        Ok(History {
            inner: Arc::new(Inner {
                tx,
                counters,
                settings,
                written,
            }),
        })
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// Queues `record` for the writer, without waiting: when the queue is full the
    /// record is dropped, and counted.
    pub fn record(&self, record: Box<Record>) {
        let c = &self.inner.counters;
        match self.inner.tx.try_send(Msg::Record(record)) {
            Ok(()) => c.recorded.fetch_add(1, Ordering::Relaxed),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                c.dropped.fetch_add(1, Ordering::Relaxed)
            }
        };
    }

    /// How it has done.
    pub fn counts(&self) -> Counts {
        let c = &self.inner.counters;
        Counts {
            recorded: c.recorded.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            written: c.written.load(Ordering::Relaxed),
        }
    }

    /// The number of the last record written, updated after each batch: a follower
    /// reads the rows after the one it saw.
    pub fn written(&self) -> tokio::sync::watch::Receiver<i64> {
        self.inner.written.clone()
    }

    /// Waits until every record queued before this call is written (or lost).
    pub async fn flush(&self) {
        let (ack_tx, ack_rx) = sync_channel(1);
        let tx = self.inner.tx.clone();
        // The queue may be full: wait for room off the runtime's threads.
        let sent = tokio::task::spawn_blocking(move || {
            tx.send(Msg::Flush(ack_tx)).is_ok() && ack_rx.recv().is_ok()
        })
        .await;
        if !matches!(sent, Ok(true)) {
            tracing::debug!("the call history's writer is gone");
        }
    }
}

struct Writer {
    store: Store,
    rx: Receiver<Msg>,
    counters: Arc<Counters>,
    settings: Settings,
    written: tokio::sync::watch::Sender<i64>,
}

impl Writer {
    fn run(mut self) {
        let mut next_retain = Instant::now();
        let mut batch: Vec<Record> = Vec::with_capacity(64);
        let mut acks = Vec::new();
        loop {
            if Instant::now() >= next_retain {
                self.retain();
                next_retain = Instant::now() + RETAIN_EVERY;
            }
            // Idle: sleep until a record (or a flush) comes, or retention is due.
            let wait = next_retain.saturating_duration_since(Instant::now());
            let first = match self.rx.recv_timeout(wait) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let mut next = Some(first);
            let mut gone = false;
            while let Some(m) = next.take() {
                match m {
                    Msg::Record(r) => batch.push(*r),
                    Msg::Flush(ack) => acks.push(ack),
                }
                if batch.len() < MAX_BATCH {
                    next = match self.rx.try_recv() {
                        Ok(m) => Some(m),
                        Err(std::sync::mpsc::TryRecvError::Empty) => None,
                        Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                            gone = true;
                            None
                        }
                    };
                }
            }
            let full = batch.len() >= MAX_BATCH;
            if !batch.is_empty() {
                self.write(&mut batch);
            }
            for ack in acks.drain(..) {
                let _ = ack.send(());
            }
            if gone {
                return;
            }
            // Let the next records gather (see LINGER), unless there are more already.
            if !full {
                std::thread::sleep(LINGER);
            }
        }
    }

    fn write(&mut self, batch: &mut Vec<Record>) {
        let (redact, cap) = (&self.settings.redact, self.settings.max_value_bytes);
        for r in batch.iter_mut() {
            if let Some(a) = r.arguments.as_mut() {
                *a = redact.keep(a, cap);
            }
            if let Some(res) = r.result.as_mut() {
                *res = redact.keep(res, cap);
            }
        }
        let n = batch.len() as u64;
        for attempt in 1..=TRIES {
            match self.store.insert(batch) {
                Ok(last) => {
                    self.counters.written.fetch_add(n, Ordering::Relaxed);
                    self.written.send_replace(last);
                    batch.clear();
                    return;
                }
                Err(e) if attempt < TRIES => {
                    tracing::debug!(error = %e, attempt, "call history: a batch is retried");
                }
                Err(e) => {
                    tracing::warn!(error = %e, records = n, "call history: a batch was lost");
                }
            }
        }
        self.counters.dropped.fetch_add(n, Ordering::Relaxed);
        batch.clear();
    }

    fn retain(&mut self) {
        let s = &self.settings;
        match self.store.retain(crate::now_ms(), s.max_age, s.max_bytes) {
            Ok(r) if r.by_age + r.by_size > 0 => {
                tracing::info!(
                    by_age = r.by_age,
                    by_size = r.by_size,
                    "call history: old calls taken out"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "call history: retention failed"),
        }
    }
}
