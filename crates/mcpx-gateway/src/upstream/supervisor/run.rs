//! The supervisor's task: a small state machine. Each [`Step`] is one state of the
//! diagram in the module doc above; each step's function returns the next step.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Command, Link, Served, State, Supervisor, Woken, wait_for_stop};
use crate::config::StartMode;
use crate::error::Cause;
use crate::upstream::restarts::{Ending, Next, Restarts};

/// The step the supervisor takes next.
enum Step<C> {
    /// Idle (a lazy upstream): wait for a call to wake it.
    Idle,
    /// Connect.
    Start,
    /// Serve a new connection until it ends.
    Serve(C),
    /// A start failed or a connection ended: wait as the restart policy says.
    Down {
        /// Why.
        cause: Cause,
        /// What the restart policy says.
        next: Next,
    },
    /// Stop. Final.
    Stop,
}

/// What the steps carry from one to the next.
struct Run<F> {
    restarts: Restarts,
    /// The last connection's generation.
    generation: u64,
    /// Quick failures in a row, shown while starting again.
    attempt: u32,
    commands: mpsc::Receiver<Command>,
    on_ready: F,
}

impl<L: Link> Supervisor<L> {
    /// The supervisor's task: runs until [`Command::Stop`], or until every handle is
    /// gone. `before_start` is awaited before the first start (a replaced upstream's
    /// predecessor stopping); `on_ready` is told of every new connection.
    pub async fn run(
        self: Arc<Self>,
        commands: mpsc::Receiver<Command>,
        before_start: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
        on_ready: impl Fn(&L::Conn) + Send + Sync + 'static,
    ) {
        if let Some(f) = before_start {
            f.await;
        }
        let mut run = Run {
            restarts: Restarts::new(self.settings.restart.clone()),
            generation: 0,
            attempt: 0,
            commands,
            on_ready,
        };
        let mut step = match self.settings.start {
            StartMode::Lazy => Step::Idle,
            StartMode::Eager => Step::Start,
        };
        loop {
            step = match step {
                Step::Idle => self.idle_step(&mut run).await,
                Step::Start => self.start_step(&mut run).await,
                Step::Serve(conn) => self.serve_step(conn, &mut run).await,
                Step::Down { cause, next } => self.down_step(cause, next, &mut run).await,
                Step::Stop => return self.stopped(),
            };
        }
    }

    /// Idle until a call wakes the upstream (or a restart or reload starts it).
    async fn idle_step<F>(&self, run: &mut Run<F>) -> Step<L::Conn> {
        self.set_state(State::Idle);
        match self.wait(&mut run.commands, None, true).await {
            Woken::Stop => Step::Stop,
            Woken::Start => {
                run.attempt = 0;
                Step::Start
            }
        }
    }

    /// One start, bounded by the connect timeout. A restart meanwhile begins it again.
    async fn start_step<F>(&self, run: &mut Run<F>) -> Step<L::Conn> {
        self.set_state(State::Starting {
            attempt: run.attempt,
        });
        let started = tokio::select! {
            r = tokio::time::timeout(self.settings.connect_timeout, self.link.connect()) => r,
            stop = wait_for_stop(&mut run.commands) => {
                return if stop { Step::Stop } else { Step::Start };
            }
        };
        let cause = match started {
            Ok(Ok(conn)) => return Step::Serve(conn),
            Ok(Err(cause)) => cause,
            Err(_) => Cause::ConnectTimeout(self.settings.connect_timeout),
        };
        let next = run
            .restarts
            .after_failure(Ending::StartFailed, Instant::now());
        Step::Down { cause, next }
    }

    /// Publishes `conn` as ready, serves it until it ends, then closes it.
    async fn serve_step<F: Fn(&L::Conn)>(&self, conn: L::Conn, run: &mut Run<F>) -> Step<L::Conn> {
        run.generation += 1;
        let pid = self.link.pid(&conn);
        *self.conn.lock() = Some((run.generation, conn.clone()));
        self.set(|s| {
            s.pid = pid;
            s.settled = true;
            s.state = State::Ready;
        });
        (run.on_ready)(&conn);
        let up_since = Instant::now();
        let served = self.serve(&conn, run.generation, &mut run.commands).await;
        *self.conn.lock() = None;
        self.set(|s| s.pid = None);
        self.link.close(&conn).await;
        match served {
            Served::Stop => Step::Stop,
            Served::Restart => {
                run.restarts.forgive();
                run.restarts.count_restart();
                run.attempt = 0;
                let restarts = run.restarts.restarts();
                self.set(|s| s.restarts = restarts);
                Step::Start
            }
            Served::IdleStop => {
                tracing::info!(
                    upstream = %self.settings.name,
                    "stopped after {} idle (idleTimeoutMs)",
                    self.idle_text()
                );
                Step::Idle
            }
            Served::Failed { cause, clean } => {
                let ending = Ending::Ended { up_since, clean };
                let next = run.restarts.after_failure(ending, Instant::now());
                Step::Down { cause, next }
            }
        }
    }

    /// Publishes the failure and waits as `next` says, or for a restart or reload.
    async fn down_step<F>(&self, cause: Cause, next: Next, run: &mut Run<F>) -> Step<L::Conn> {
        let needs_auth = cause.needs_authorization();
        let cause = Arc::new(cause);
        let (state, retry_at) = self.down_state(next, needs_auth, run);
        tracing::warn!(
            upstream = %self.settings.name,
            state = state.key(),
            "upstream {} is unavailable, {}: {cause}",
            self.settings.name,
            state.phrase(Instant::now())
        );
        self.set(|s| {
            s.last_error = Some(cause.clone());
            s.last_error_at = Some(Instant::now());
            s.settled = true;
            s.state = state;
        });
        match self.wait(&mut run.commands, retry_at, false).await {
            Woken::Stop => return Step::Stop,
            Woken::Start => {
                run.restarts.count_restart();
                let restarts = run.restarts.restarts();
                self.set(|s| s.restarts = restarts);
            }
        }
        if retry_at.is_none_or(|t| Instant::now() < t) {
            // Started before its time: by a restart or a reload.
            run.restarts.forgive();
            run.attempt = 0;
        }
        Step::Start
    }

    /// The state after a failure, and when it starts again (`None`: only a restart
    /// or reload starts it). A refused credential is tried again rarely, whatever
    /// the policy.
    fn down_state<F>(
        &self,
        next: Next,
        needs_auth: bool,
        run: &mut Run<F>,
    ) -> (State, Option<Instant>) {
        match next {
            _ if needs_auth => {
                let at = Instant::now() + self.settings.restart.crash_loop_retry;
                (State::NeedsAuthorization { retry_at: at }, Some(at))
            }
            Next::Retry { attempt, at } => {
                run.attempt = attempt;
                (
                    State::Backoff {
                        attempt,
                        retry_at: at,
                    },
                    Some(at),
                )
            }
            Next::CrashLoop { failures, at } => {
                run.attempt = failures;
                (
                    State::CrashLoop {
                        failures,
                        retry_at: at,
                    },
                    Some(at),
                )
            }
            Next::GiveUp => (State::Failed, None),
        }
    }
}
