//! The supervisor: one task per upstream that owns its lifecycle.
//!
//! ```text
//!            ┌──────────── restart, reload ─────────────┐
//!            v                                          │
//! (idle) → starting ──ok──→ ready ──ends──→ backoff ────┤
//!            │                 │               │        │
//!            └──fails──────────┼──────→ backoff / crash loop / needs authorization / failed
//!                              └── stop ──→ stopped
//! ```
//!
//! * **starting**: connecting (spawn or HTTP, then the handshake), bounded by
//!   `connectTimeoutMs` as a whole.
//! * **ready**: the connection serves calls. It ends when the process exits or the
//!   stream closes ([`Link::closed`]), when a call reports the connection broken
//!   ([`Command::Lost`]), when a health check fails, or, for a lazy upstream, when it
//!   was idle for `idleTimeoutMs` (back to **idle**, started again on the next use).
//! * **backoff**: waiting to start again ([`Restarts`](crate::upstream::restarts::Restarts) decides how long).
//! * **crash loop**: too many quick failures in a row; tried again rarely.
//! * **needs authorization**: the upstream refused mcpx's credential; tried again
//!   rarely (a person must act).
//! * **failed**: the policy says not to restart (`onExit`); only a restart or a
//!   reload starts it again.
//! * **stopped**: removed by a reload, or mcpx is shutting down. Final.
//!
//! Calls never start an upstream (but for a lazy one that is idle): they take the
//! connection when ready, wait for a start in progress, and otherwise fail at once
//! with the state and its cause. So a host that retries in a loop cannot make a fork
//! loop.
//!
//! The loop is generic over a [`Link`], so that its timing is tested under tokio's
//! paused time with a scripted link (the tests below); the gateway's link is
//! mcpx-client's [`mcpx_client::Connection`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::restarts::human;
use crate::config::{HealthCheck, RestartPolicy, StartMode};
use crate::error::Cause;

mod link;
mod run;

pub use link::Link;

/// The supervisor's settings (from the upstream's `mcpx` block).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The upstream's name, for logs.
    pub name: String,
    /// When to start again.
    pub restart: RestartPolicy,
    /// Eager (at start) or lazy (on first use).
    pub start: StartMode,
    /// Bounds each start as a whole.
    pub connect_timeout: Duration,
    /// Optional periodic check of a ready connection.
    pub health: Option<HealthCheck>,
    /// Stop a ready connection after this long without calls (lazy upstreams).
    pub idle_timeout: Option<Duration>,
    /// How long a call waits for a start in progress (`startupWaitMs`); a call that
    /// wakes an idle lazy upstream waits up to the connect timeout instead.
    pub call_wait: Duration,
    /// The most calls in flight at once (`maxInFlight`).
    pub max_in_flight: usize,
    /// The most calls waiting for a place (`maxQueued`).
    pub max_queued: usize,
}

/// An upstream's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// A lazy upstream not started (or stopped after being idle).
    Idle,
    /// Connecting. `attempt` is 0 for the first start, else the restart attempt (the
    /// quick failures in a row so far).
    Starting {
        /// Quick failures before this start.
        attempt: u32,
    },
    /// Serving.
    Ready,
    /// Waiting to start again.
    Backoff {
        /// Quick failures in a row.
        attempt: u32,
        /// When it starts again.
        retry_at: Instant,
    },
    /// Too many quick failures in a row.
    CrashLoop {
        /// Quick failures in a row.
        failures: u32,
        /// When it is tried again.
        retry_at: Instant,
    },
    /// The upstream refused mcpx's credential.
    NeedsAuthorization {
        /// When it is tried again.
        retry_at: Instant,
    },
    /// Not restarted, by policy (`onExit`).
    Failed,
    /// Removed, or mcpx is stopping. Final.
    Stopped,
}

impl State {
    /// Every [`State::key`].
    pub const KEYS: &'static [&'static str] = &[
        "idle",
        "starting",
        "ready",
        "backoff",
        "crash_loop",
        "needs_authorization",
        "failed",
        "stopped",
    ];

    /// The state in one word, as in a host's error `data.state` and `mcpx probe`.
    pub fn key(&self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Starting { .. } => "starting",
            State::Ready => "ready",
            State::Backoff { .. } => "backoff",
            State::CrashLoop { .. } => "crash_loop",
            State::NeedsAuthorization { .. } => "needs_authorization",
            State::Failed => "failed",
            State::Stopped => "stopped",
        }
    }

    /// The state in words, as of `now`: "restarting (attempt 3, next in 4 s)".
    pub fn phrase(&self, now: Instant) -> String {
        let until = |t: &Instant| human(t.saturating_duration_since(now));
        match self {
            State::Idle => "idle (start: lazy)".to_owned(),
            State::Starting { attempt: 0 } => "starting".to_owned(),
            State::Starting { attempt } => format!("restarting (attempt {attempt})"),
            State::Ready => "ready".to_owned(),
            State::Backoff { attempt, retry_at } => format!(
                "restarting (attempt {attempt}, next in {})",
                until(retry_at)
            ),
            State::CrashLoop { failures, retry_at } => format!(
                "in a crash loop ({failures} quick failures in a row; next try in {})",
                until(retry_at)
            ),
            State::NeedsAuthorization { retry_at } => {
                format!("in need of authorization (next try in {})", until(retry_at))
            }
            State::Failed => "failed, and not restarted (restart.onExit)".to_owned(),
            State::Stopped => "stopped".to_owned(),
        }
    }
}

/// What the supervisor publishes about its upstream.
#[derive(Debug, Clone)]
pub struct Status {
    /// The state.
    pub state: State,
    /// Starts after the first one.
    pub restarts: u32,
    /// The process id while ready (stdio).
    pub pid: Option<u32>,
    /// What it last failed with (kept after it recovers, for reports: a report of a
    /// ready upstream shows it as past, with its time).
    pub last_error: Option<Arc<Cause>>,
    /// When it failed with `last_error`.
    pub last_error_at: Option<Instant>,
    /// Whether a first start has ended (in either way): what a host's first request
    /// waits for, up to `startupWaitMs`.
    pub settled: bool,
}

impl Status {
    fn new(state: State) -> Status {
        let settled = !matches!(state, State::Starting { .. });
        Status {
            state,
            restarts: 0,
            pid: None,
            last_error: None,
            last_error_at: None,
            settled,
        }
    }
}

/// What the rest of mcpx asks of a supervisor.
#[derive(Debug)]
pub enum Command {
    /// A call found the connection of generation `generation` broken.
    Lost {
        /// The connection's generation (a report about an older one is ignored).
        generation: u64,
        /// Why.
        cause: Cause,
    },
    /// Start now: a lazy upstream's first use.
    Wake,
    /// Stop (if ready) and start again now, forgiving earlier failures.
    Restart,
    /// Stop for good.
    Stop,
}

/// Capacity of a supervisor's command queue. Commands are rare; when it is full, a
/// `Lost` or `Wake` is dropped (the supervisor has work queued that covers it).
const COMMANDS: usize = 16;

/// Calls in flight and the last use, for idle stops and drains.
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    /// Milliseconds since `epoch` of the last call's end.
    last_used: AtomicU64,
    epoch: Instant,
    /// Whether `last_used` is kept (an idle timeout is set).
    idle: bool,
    /// Someone waits for the calls in flight to end (a drain, an idle stop): only
    /// then does the last call's end notify `drained`.
    draining: std::sync::atomic::AtomicBool,
    /// Told when the last call in flight ends.
    drained: tokio::sync::Notify,
    /// The most calls in flight at once (`maxInFlight`).
    max: usize,
    /// Calls waiting for a place, and the most that may (`maxQueued`).
    queued: AtomicUsize,
    max_queued: usize,
    /// Told when a call ends while others wait.
    slot_free: tokio::sync::Notify,
}

/// Why a call found no place among an upstream's calls in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy {
    /// `maxInFlight`.
    pub in_flight: usize,
    /// `maxQueued`.
    pub queued: usize,
    /// How long it waited in the queue; `None` when the queue was full.
    pub waited: Option<Duration>,
}

/// Holds a call's place in the queue: given back when dropped.
struct Queued<'a>(&'a AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One upstream's supervisor: the handle calls use, and the task's state.
#[derive(Debug)]
pub struct Supervisor<L: Link> {
    link: L,
    settings: Settings,
    /// The ready connection and its generation. Never held across an await; no other
    /// lock is taken while it is held.
    conn: Mutex<Option<(u64, L::Conn)>>,
    status: watch::Sender<Status>,
    commands: mpsc::Sender<Command>,
    activity: Activity,
}

/// Holds one call's place in [`Supervisor`]'s count of calls in flight.
#[derive(Debug)]
pub struct InFlight<'a> {
    activity: &'a Activity,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let a = self.activity;
        // Reading the clock is most of this guard's cost: only idle stops need it.
        if a.idle {
            let now = u64::try_from(a.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
            a.last_used.store(now, Ordering::Relaxed);
        }
        if a.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 && a.draining.load(Ordering::Acquire) {
            a.drained.notify_waiters();
        }
        if a.queued.load(Ordering::Acquire) > 0 {
            a.slot_free.notify_one();
        }
    }
}

/// Why a ready connection stopped serving.
enum Served {
    Failed { cause: Cause, clean: bool },
    IdleStop,
    Restart,
    Stop,
}

/// What a wait outside `ready` ended with.
enum Woken {
    Start,
    Stop,
}

impl<L: Link> Supervisor<L> {
    /// A supervisor for `link` and the receiver of its commands, for [`Self::run`].
    pub fn new(link: L, settings: Settings) -> (Arc<Self>, mpsc::Receiver<Command>) {
        let first = match settings.start {
            StartMode::Lazy => State::Idle,
            StartMode::Eager => State::Starting { attempt: 0 },
        };
        let (commands, rx) = mpsc::channel(COMMANDS);
        let idle = settings.idle_timeout.is_some();
        let (max_in_flight, max_queued) = (settings.max_in_flight.max(1), settings.max_queued);
        let s = Arc::new(Supervisor {
            link,
            settings,
            conn: Mutex::new(None),
            status: watch::Sender::new(Status::new(first)),
            commands,
            activity: Activity {
                in_flight: AtomicUsize::new(0),
                last_used: AtomicU64::new(0),
                epoch: Instant::now(),
                idle,
                draining: std::sync::atomic::AtomicBool::new(false),
                max: max_in_flight,
                queued: AtomicUsize::new(0),
                max_queued,
                slot_free: tokio::sync::Notify::new(),
                drained: tokio::sync::Notify::new(),
            },
        });
        (s, rx)
    }

    /// The link.
    pub fn link(&self) -> &L {
        &self.link
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Follows the status.
    pub fn watch(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    /// Sends a command; a full queue drops `Lost` and `Wake` (see `COMMANDS`).
    pub fn command(&self, c: Command) {
        if let Err(mpsc::error::TrySendError::Full(c)) = self.commands.try_send(c)
            && matches!(c, Command::Restart | Command::Stop)
        {
            // Restart and Stop must arrive: wait for room in the background.
            let tx = self.commands.clone();
            tokio::spawn(async move {
                let _ = tx.send(c).await;
            });
        }
    }

    /// The ready connection and its generation, without waiting: the common case.
    pub fn ready(&self) -> Option<(u64, L::Conn)> {
        self.conn.lock().clone()
    }

    /// The ready connection, waiting for a start in progress (up to `call_wait`), and
    /// waking a lazy upstream that is idle (then up to the connect timeout).
    /// Otherwise the status that explains why there is none.
    pub async fn connection(&self) -> Result<(u64, L::Conn), Status> {
        if let Some(c) = self.ready() {
            return Ok(c);
        }
        let mut rx = self.status.subscribe();
        let wait = if rx.borrow().state == State::Idle {
            self.settings.connect_timeout
        } else {
            self.settings.call_wait.min(self.settings.connect_timeout)
        };
        let deadline = Instant::now() + wait;
        let mut woke = false;
        loop {
            let status = rx.borrow_and_update().clone();
            match status.state {
                State::Ready => {
                    if let Some(c) = self.ready() {
                        return Ok(c);
                    }
                }
                State::Idle if !woke => {
                    woke = true;
                    self.command(Command::Wake);
                }
                State::Idle | State::Starting { .. } => {}
                _ => return Err(status),
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => return Err(self.status()),
            }
        }
    }

    /// Counts a call in flight until the guard drops, if fewer than `maxInFlight` are:
    /// the common case, without a future.
    pub fn try_begin_call(&self) -> Option<InFlight<'_>> {
        let a = &self.activity;
        if a.in_flight.fetch_add(1, Ordering::AcqRel) < a.max {
            return Some(InFlight { activity: a });
        }
        a.in_flight.fetch_sub(1, Ordering::AcqRel);
        None
    }

    /// [`Supervisor::try_begin_call`], waiting in the upstream's bounded queue (at
    /// most `maxQueued` calls) up to `within` for a place. Calls beyond the queue, or
    /// that wait too long, are refused; the connection and the other calls are never
    /// touched.
    pub async fn begin_call_queued(&self, within: Duration) -> Result<InFlight<'_>, Busy> {
        let a = &self.activity;
        let busy = |waited| Busy {
            in_flight: a.max,
            queued: a.max_queued,
            waited,
        };
        if a.queued.fetch_add(1, Ordering::AcqRel) >= a.max_queued {
            a.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(busy(None));
        }
        let _queued = Queued(&a.queued);
        let deadline = Instant::now() + within;
        loop {
            let freed = a.slot_free.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(call) = self.try_begin_call() {
                return Ok(call);
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return self.try_begin_call().ok_or(busy(Some(within)));
            }
        }
    }

    /// Counts a call in flight until the guard drops, whatever the limit (tests).
    #[cfg(test)]
    pub fn begin_call(&self) -> InFlight<'_> {
        self.activity.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight {
            activity: &self.activity,
        }
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> usize {
        self.activity.in_flight.load(Ordering::Acquire)
    }

    /// Waits until no call is in flight, or `within` has passed; whether it drained.
    pub async fn drain(&self, within: Duration) -> bool {
        tokio::time::timeout(within, self.quiet()).await.is_ok()
    }

    /// Resolves when no call is in flight.
    async fn quiet(&self) {
        self.activity.draining.store(true, Ordering::Release);
        loop {
            let notified = self.activity.drained.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.in_flight() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Notes a use now (the start of a connection counts as one).
    fn touch(&self) {
        let a = &self.activity;
        let now = u64::try_from(a.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        a.last_used.store(now, Ordering::Relaxed);
    }

    /// Resolves when the connection has had no call for `idleTimeoutMs`; never
    /// without one.
    async fn idle(&self) {
        let Some(idle) = self.settings.idle_timeout else {
            return std::future::pending().await;
        };
        loop {
            self.quiet().await;
            let last = Duration::from_millis(self.activity.last_used.load(Ordering::Relaxed));
            let at = self.activity.epoch + last + idle;
            if Instant::now() >= at && self.in_flight() == 0 {
                return;
            }
            tokio::time::sleep_until(at).await;
        }
    }

    fn set(&self, f: impl FnOnce(&mut Status)) {
        self.status.send_modify(f);
    }

    fn set_state(&self, state: State) {
        self.set(|s| {
            if !matches!(state, State::Starting { .. }) {
                s.settled = true;
            }
            s.state = state;
        });
    }

    fn stopped(&self) {
        *self.conn.lock() = None;
        self.set_state(State::Stopped);
    }

    fn idle_text(&self) -> String {
        self.settings.idle_timeout.map(human).unwrap_or_default()
    }

    /// Waits outside `ready` until `until` (if any) or a command that starts or stops.
    /// `Wake` starts only when `wake_starts` (an idle lazy upstream); a call never
    /// shortens a backoff.
    async fn wait(
        &self,
        commands: &mut mpsc::Receiver<Command>,
        until: Option<Instant>,
        wake_starts: bool,
    ) -> Woken {
        loop {
            let timer = async {
                match until {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = timer => return Woken::Start,
                c = commands.recv() => match c {
                    None | Some(Command::Stop) => return Woken::Stop,
                    Some(Command::Restart) => return Woken::Start,
                    Some(Command::Wake) if wake_starts => return Woken::Start,
                    Some(Command::Wake | Command::Lost { .. }) => {}
                },
            }
        }
    }

    /// Serves `conn` until it ends.
    async fn serve(
        &self,
        conn: &L::Conn,
        generation: u64,
        commands: &mut mpsc::Receiver<Command>,
    ) -> Served {
        let closed = self.link.closed(conn);
        tokio::pin!(closed);
        let mut health = self.settings.health.map(|h| {
            let mut t = tokio::time::interval_at(Instant::now() + h.interval, h.interval);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            (t, h.timeout)
        });
        self.touch();
        loop {
            let idle = self.idle();
            let tick = async {
                match health.as_mut() {
                    Some((t, _)) => {
                        t.tick().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                (cause, clean) = &mut closed => {
                    return Served::Failed { cause, clean };
                }
                c = commands.recv() => match c {
                    None | Some(Command::Stop) => return Served::Stop,
                    Some(Command::Restart) => return Served::Restart,
                    Some(Command::Lost { generation: g, cause }) if g == generation => {
                        return Served::Failed { cause, clean: false };
                    }
                    Some(Command::Lost { .. } | Command::Wake) => {}
                },
                () = tick => {
                    let within = health.as_ref().map_or(Duration::ZERO, |(_, t)| *t);
                    match tokio::time::timeout(within, self.link.check(conn)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(cause)) => return Served::Failed { cause, clean: false },
                        Err(_) => {
                            return Served::Failed { cause: Cause::HealthTimeout(within), clean: false };
                        }
                    }
                }
                () = idle => return Served::IdleStop,
            }
        }
    }
}

/// Reads commands while a start is in progress: `true` on Stop (or when every handle
/// is gone); `false` on Restart (the start in progress is abandoned and begun again);
/// `Lost` and `Wake` are moot then.
async fn wait_for_stop(commands: &mut mpsc::Receiver<Command>) -> bool {
    loop {
        match commands.recv().await {
            None | Some(Command::Stop) => return true,
            Some(Command::Restart) => return false,
            Some(Command::Lost { .. } | Command::Wake) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    //! The supervisor's timing under tokio's paused time, with a scripted link.
    use super::*;
    use crate::config::OnExit;
    use std::collections::VecDeque;

    /// A link whose starts succeed or fail as scripted; a started connection lives
    /// until the test ends it.
    #[derive(Default)]
    struct Scripted {
        /// `true`: the next start succeeds. Empty: starts fail.
        outcomes: Mutex<VecDeque<bool>>,
        starts: Mutex<Vec<Instant>>,
        /// The live connection's end, fired by the test: (detail, clean).
        end: Mutex<Option<tokio::sync::oneshot::Sender<(String, bool)>>>,
        healthy: std::sync::atomic::AtomicBool,
    }

    type End = tokio::sync::oneshot::Receiver<(String, bool)>;

    #[derive(Clone)]
    struct Conn(Arc<Mutex<Option<End>>>);

    impl Link for Arc<Scripted> {
        type Conn = Conn;
        async fn connect(&self) -> Result<Conn, Cause> {
            self.starts.lock().push(Instant::now());
            if self.outcomes.lock().pop_front().unwrap_or(false) {
                let (tx, rx) = tokio::sync::oneshot::channel();
                *self.end.lock() = Some(tx);
                Ok(Conn(Arc::new(Mutex::new(Some(rx)))))
            } else {
                Err(Cause::Closed("exited with status 1".into()))
            }
        }
        fn closed(&self, c: &Conn) -> impl Future<Output = (Cause, bool)> + Send + 'static {
            let rx = c.0.lock().take();
            async move {
                match rx {
                    Some(rx) => match rx.await {
                        Ok((detail, clean)) => (Cause::Closed(detail), clean),
                        Err(_) => std::future::pending().await,
                    },
                    None => std::future::pending().await,
                }
            }
        }
        async fn close(&self, _: &Conn) {}
        async fn check(&self, _: &Conn) -> Result<(), Cause> {
            if self.healthy.load(Ordering::Relaxed) {
                Ok(())
            } else {
                Err(Cause::Closed("unhealthy".into()))
            }
        }
        fn pid(&self, _: &Conn) -> Option<u32> {
            Some(42)
        }
    }

    fn settings() -> Settings {
        Settings {
            name: "up".into(),
            restart: RestartPolicy {
                on_exit: OnExit::Always,
                max_restarts: 3,
                backoff: Duration::from_secs(1),
                max_backoff: Duration::from_secs(30),
                reset_after: Duration::from_secs(60),
                crash_loop_retry: Duration::from_secs(300),
            },
            start: StartMode::Eager,
            connect_timeout: Duration::from_secs(5),
            health: None,
            idle_timeout: None,
            call_wait: Duration::from_secs(1),
            max_in_flight: 256,
            max_queued: 1024,
        }
    }

    fn start(
        link: &Arc<Scripted>,
        settings: Settings,
    ) -> (Arc<Supervisor<Arc<Scripted>>>, tokio::task::JoinHandle<()>) {
        let (s, rx) = Supervisor::new(link.clone(), settings);
        let task = tokio::spawn(s.clone().run(rx, None, |_| {}));
        (s, task)
    }

    async fn until_state(s: &Supervisor<Arc<Scripted>>, key: &str) -> Status {
        let mut rx = s.watch();
        tokio::time::timeout(Duration::from_secs(3600), async {
            loop {
                let st = rx.borrow_and_update().clone();
                if st.state.key() == key {
                    return st;
                }
                rx.changed().await.unwrap();
            }
        })
        .await
        .unwrap()
    }

    fn offsets(link: &Scripted, t0: Instant) -> Vec<u64> {
        link.starts
            .lock()
            .iter()
            .map(|t| t.duration_since(t0).as_millis() as u64)
            .collect()
    }

    /// Asserts a start at `at` ms came `delay` ms after a failure at `failed` ms, less
    /// the backoff's jitter (at most a quarter of it).
    fn assert_after(at: u64, failed: u64, delay: u64) {
        let wait = at
            .checked_sub(failed)
            .unwrap_or_else(|| panic!("{at} < {failed}"));
        assert!(
            (delay - delay / 4..=delay).contains(&wait),
            "started {wait} ms after the failure, not {delay} ms less at most a quarter"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_command_backs_off_doubling_then_crash_loops() {
        let t0 = Instant::now();
        let link = Arc::new(Scripted::default());
        let (s, _task) = start(&link, settings());
        let st = until_state(&s, "crash_loop").await;
        // The first start, then 1 s, 2 s, 4 s later (less jitter): 4 starts, then the
        // crash loop.
        let o = offsets(&link, t0);
        assert_eq!(o.len(), 4, "{o:?}");
        assert_eq!(o[0], 0);
        for (i, delay) in [(1, 1000), (2, 2000), (3, 4000)] {
            assert_after(o[i], o[i - 1], delay);
        }
        assert!(matches!(st.state, State::CrashLoop { failures: 4, .. }));
        assert!(st.last_error.is_some());
        assert_eq!(st.restarts, 3);
        // Nothing more until crashLoopRetry.
        tokio::time::sleep(Duration::from_secs(299)).await;
        assert_eq!(link.starts.lock().len(), 4);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(link.starts.lock().len(), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn an_exit_is_restarted_and_a_long_uptime_resets_the_count() {
        let t0 = Instant::now();
        let link = Arc::new(Scripted::default());
        link.outcomes.lock().extend([true, true, true]);
        let (s, _task) = start(&link, settings());
        until_state(&s, "ready").await;
        assert_eq!(s.status().pid, Some(42));
        // Up for 2 min, then it exits: restarted after the first backoff.
        tokio::time::sleep(Duration::from_secs(120)).await;
        let end = link.end.lock().take().unwrap();
        end.send(("exited with status 3".into(), false)).unwrap();
        let st = until_state(&s, "backoff").await;
        assert!(
            matches!(st.state, State::Backoff { attempt: 1, .. }),
            "{st:?}"
        );
        assert!(st.last_error.unwrap().to_string().contains("status 3"));
        until_state(&s, "ready").await;
        let o = offsets(&link, t0);
        assert_eq!(o.len(), 2, "{o:?}");
        assert_after(o[1], 120_000, 1000);
        // Exiting at once after that restart is the second quick failure in a row:
        // 2 s.
        let end = link.end.lock().take().unwrap();
        end.send(("exited with status 3".into(), false)).unwrap();
        until_state(&s, "backoff").await;
        until_state(&s, "ready").await;
        let o = offsets(&link, t0);
        assert_eq!(o.len(), 3, "{o:?}");
        assert_after(o[2], o[1], 2000);
    }

    /// Issue #32: a recovered upstream's last error is kept with the time it failed
    /// (a report shows it as past), not the time it recovered.
    #[tokio::test(start_paused = true)]
    async fn a_recovered_upstream_keeps_its_last_error_and_its_time() {
        let t0 = Instant::now();
        let link = Arc::new(Scripted::default());
        link.outcomes.lock().extend([false, true]);
        let (s, _task) = start(&link, settings());
        let st = until_state(&s, "backoff").await;
        assert_eq!(st.last_error_at, Some(t0));
        let st = until_state(&s, "ready").await;
        let o = offsets(&link, t0);
        assert_eq!(o.len(), 2, "{o:?}");
        assert_after(o[1], 0, 1000);
        assert!(st.last_error.is_some());
        assert_eq!(st.last_error_at, Some(t0), "when it failed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_start_times_out_at_the_connect_timeout() {
        struct Hangs;
        impl Link for Hangs {
            type Conn = ();
            async fn connect(&self) -> Result<(), Cause> {
                std::future::pending().await
            }
            fn closed(&self, _: &()) -> impl Future<Output = (Cause, bool)> + Send + 'static {
                std::future::pending()
            }
            async fn close(&self, _: &()) {}
            async fn check(&self, _: &()) -> Result<(), Cause> {
                Ok(())
            }
            fn pid(&self, _: &()) -> Option<u32> {
                None
            }
        }
        let t0 = Instant::now();
        let (s, rx) = Supervisor::new(Hangs, settings());
        tokio::spawn(s.clone().run(rx, None, |_| {}));
        let mut w = s.watch();
        loop {
            if w.borrow_and_update().state.key() == "backoff" {
                break;
            }
            w.changed().await.unwrap();
        }
        assert_eq!(t0.elapsed(), Duration::from_secs(5));
        let st = s.status();
        assert_eq!(
            st.last_error.unwrap().to_string(),
            "no connection within 5 s (connectTimeoutMs)"
        );
        // A call during the backoff fails at once, with the state.
        let err = s.connection().await.err().unwrap();
        assert_eq!(err.state.key(), "backoff");
        assert_eq!(t0.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn lazy_upstreams_start_on_use_and_stop_when_idle() {
        let link = Arc::new(Scripted::default());
        link.outcomes.lock().extend([true, true]);
        let (s, _task) = start(
            &link,
            Settings {
                start: StartMode::Lazy,
                idle_timeout: Some(Duration::from_secs(10)),
                ..settings()
            },
        );
        assert!(until_state(&s, "idle").await.settled);
        assert!(link.starts.lock().is_empty());
        let (_, _conn) = s.connection().await.unwrap();
        {
            let _call = s.begin_call();
            // A call in flight keeps it up past the idle timeout.
            tokio::time::sleep(Duration::from_secs(30)).await;
            assert_eq!(s.status().state, State::Ready);
        }
        let t = Instant::now();
        until_state(&s, "idle").await;
        assert_eq!(t.elapsed(), Duration::from_secs(10));
        s.connection().await.unwrap();
        assert_eq!(link.starts.lock().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_health_check_restarts_and_restart_forgives_a_crash_loop() {
        let link = Arc::new(Scripted::default());
        link.outcomes.lock().extend([true]);
        link.healthy.store(false, Ordering::Relaxed);
        let (s, _task) = start(
            &link,
            Settings {
                health: Some(HealthCheck {
                    interval: Duration::from_secs(15),
                    timeout: Duration::from_secs(5),
                }),
                ..settings()
            },
        );
        until_state(&s, "ready").await;
        let st = until_state(&s, "backoff").await;
        assert!(st.last_error.unwrap().to_string().contains("unhealthy"));
        until_state(&s, "crash_loop").await;
        let n = link.starts.lock().len();
        link.outcomes.lock().push_back(true);
        s.command(Command::Restart);
        until_state(&s, "ready").await;
        assert_eq!(link.starts.lock().len(), n + 1);
    }

    #[tokio::test(start_paused = true)]
    async fn calls_beyond_the_limit_wait_in_a_bounded_queue() {
        let link = Arc::new(Scripted::default());
        let (s, _rx) = Supervisor::new(
            link,
            Settings {
                max_in_flight: 2,
                max_queued: 1,
                ..settings()
            },
        );
        let first = s.try_begin_call().unwrap();
        let _second = s.try_begin_call().unwrap();
        assert!(s.try_begin_call().is_none());
        // One may wait; it gets the place the first call gives back.
        let s2 = s.clone();
        let waiting = tokio::spawn(async move {
            s2.begin_call_queued(Duration::from_secs(10))
                .await
                .map(drop)
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        // The queue is full: refused at once.
        let refused = s
            .begin_call_queued(Duration::from_secs(10))
            .await
            .unwrap_err();
        assert_eq!(refused.waited, None);
        drop(first);
        assert_eq!(waiting.await.unwrap(), Ok(()));
        // A wait longer than allowed is refused, saying how long it waited.
        let _third = s.try_begin_call().unwrap();
        let t0 = Instant::now();
        let late = s
            .begin_call_queued(Duration::from_secs(3))
            .await
            .unwrap_err();
        assert_eq!(late.waited, Some(Duration::from_secs(3)));
        assert_eq!(t0.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn stop_is_final_and_a_lost_report_of_an_old_connection_is_ignored() {
        let link = Arc::new(Scripted::default());
        link.outcomes.lock().extend([true]);
        let (s, task) = start(&link, settings());
        until_state(&s, "ready").await;
        let (generation, _) = s.ready().unwrap();
        s.command(Command::Lost {
            generation: generation + 7,
            cause: Cause::Closed("old".into()),
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(s.status().state, State::Ready);
        s.command(Command::Stop);
        task.await.unwrap();
        assert_eq!(s.status().state, State::Stopped);
        assert!(s.ready().is_none());
        assert_eq!(s.connection().await.err().unwrap().state, State::Stopped);
    }
}
