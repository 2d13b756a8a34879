//! When to start an upstream again: the restart policy as a pure state machine.
//!
//! The supervisor asks [`Restarts::after_failure`] each time a start fails or a
//! connection that was up ends, and gets back what to do next. No clock is read here:
//! the caller passes the instants, so the rules are tested without time passing.
//!
//! * A failure is *quick* when the upstream never came up, or was up for less than
//!   `resetAfter`. A longer uptime forgives every earlier failure.
//! * Quick failures in a row are retried after `backoff`, doubling per failure up to
//!   `maxBackoff`, less a random jitter of up to a quarter (drawn from a seedable
//!   `fastrand` generator), so upstreams that failed together do not retry together.
//! * More than `maxRestarts` quick failures in a row is a crash loop: the next try is
//!   `crashLoopRetry` later, and each further quick failure waits as long again.
//! * `onExit: never` gives up at the first failure; `on-failure` gives up when a
//!   process exited with status 0 and retries otherwise.

use std::time::Duration;

use fastrand::Rng;
use tokio::time::Instant;

use crate::config::{OnExit, RestartPolicy};

/// What the supervisor does after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Start again at `at`; `attempt` counts the quick failures so far (1 for the first).
    Retry {
        /// The quick failures in a row, this one included.
        attempt: u32,
        /// When to start again.
        at: Instant,
    },
    /// Too many quick failures in a row: start again only at `at`.
    CrashLoop {
        /// The quick failures in a row, this one included.
        failures: u32,
        /// When to try again.
        at: Instant,
    },
    /// The policy says not to start it again (until a reload or a restart asks).
    GiveUp,
}

/// How a connection ended, as far as the policy cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The start failed (spawn, handshake, timeout): it never came up.
    StartFailed,
    /// It was up since the instant given and then failed (exited, broke, failed a
    /// health check). `clean` is an exit with status 0.
    Ended {
        /// When it came up.
        up_since: Instant,
        /// Whether a process exited with status 0.
        clean: bool,
    },
}

/// The restart counters of one upstream.
#[derive(Debug, Clone)]
pub struct Restarts {
    policy: RestartPolicy,
    /// Quick failures in a row.
    quick: u32,
    /// Starts after the first one, ever (reported, never reset).
    restarts: u32,
    /// Draws the jitter of each backoff.
    rng: Rng,
}

/// The largest share of a backoff delay the jitter takes off.
const JITTER: f64 = 0.25;

impl Restarts {
    /// Counters at zero under `policy`.
    pub fn new(policy: RestartPolicy) -> Restarts {
        Restarts::with_rng(policy, Rng::new())
    }

    /// Counters at zero under `policy`, the jitter drawn from `rng` (seeded in tests).
    pub fn with_rng(policy: RestartPolicy, rng: Rng) -> Restarts {
        Restarts {
            policy,
            quick: 0,
            restarts: 0,
            rng,
        }
    }

    /// Starts after the first one so far.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// Counts a start that is not the first.
    pub fn count_restart(&mut self) {
        self.restarts = self.restarts.saturating_add(1);
    }

    /// Forgets the quick failures (a restart asked for by a person or a reload).
    pub fn forgive(&mut self) {
        self.quick = 0;
    }

    /// What to do after `ending` at `now`.
    pub fn after_failure(&mut self, ending: Ending, now: Instant) -> Next {
        match (self.policy.on_exit, ending) {
            (OnExit::Never, _) => return Next::GiveUp,
            (OnExit::OnFailure, Ending::Ended { clean: true, .. }) => return Next::GiveUp,
            _ => {}
        }
        if let Ending::Ended { up_since, .. } = ending
            && now.saturating_duration_since(up_since) >= self.policy.reset_after
        {
            self.quick = 0;
        }
        self.quick = self.quick.saturating_add(1);
        if self.quick > self.policy.max_restarts {
            return Next::CrashLoop {
                failures: self.quick,
                at: now + self.policy.crash_loop_retry,
            };
        }
        let delay = self.policy.delay(self.quick);
        Next::Retry {
            attempt: self.quick,
            at: now + jittered(delay, self.rng.f64()),
        }
    }
}

/// `delay` less `draw` (in `0.0..1.0`) times its jitter share: between three quarters
/// of `delay` and all of it.
fn jittered(delay: Duration, draw: f64) -> Duration {
    delay.saturating_sub(delay.mul_f64(draw.clamp(0.0, 1.0) * JITTER))
}

/// `d` in words for a message: `250 ms`, `4 s`, `2 min`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    // A wait just under a second (a timer read a moment after it was set) reads
    // as "1 s".
    if ms < 950 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        format!("{} s", ms.div_ceil(1000))
    } else {
        format!("{} min", ms.div_ceil(60_000))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn policy() -> RestartPolicy {
        RestartPolicy {
            on_exit: OnExit::Always,
            max_restarts: 3,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(4),
            reset_after: Duration::from_secs(60),
            crash_loop_retry: Duration::from_secs(300),
        }
    }

    /// Counters under `policy()` with a seeded jitter.
    fn restarts(seed: u64) -> Restarts {
        Restarts::with_rng(policy(), Rng::with_seed(seed))
    }

    /// Asserts `next` retries as attempt `attempt`, `full` after `now` less its jitter.
    fn assert_retry(next: Next, attempt: u32, now: Instant, full: Duration) {
        let Next::Retry { attempt: a, at } = next else {
            panic!("expected retry {attempt}, got {next:?}");
        };
        assert_eq!(a, attempt, "{next:?}");
        let wait = at - now;
        assert!(
            wait <= full && wait >= full.mul_f64(1.0 - JITTER),
            "retry {attempt} after {wait:?}, expected {full:?} less at most a quarter"
        );
    }

    #[test]
    fn quick_failures_back_off_doubling_then_crash_loop() {
        for seed in 0..50 {
            let t0 = Instant::now();
            let mut r = restarts(seed);
            for (attempt, secs) in [(1, 1), (2, 2), (3, 4)] {
                let next = r.after_failure(Ending::StartFailed, t0);
                assert_retry(next, attempt, t0, Duration::from_secs(secs));
            }
            // The crash loop's wait has no jitter.
            for failures in [4, 5] {
                assert_eq!(
                    r.after_failure(Ending::StartFailed, t0),
                    Next::CrashLoop {
                        failures,
                        at: t0 + Duration::from_secs(300)
                    }
                );
            }
        }
    }

    #[test]
    fn the_jitter_spreads_retries_and_follows_its_seed() {
        let t0 = Instant::now();
        let first = |seed| restarts(seed).after_failure(Ending::StartFailed, t0);
        let waits: BTreeSet<Duration> = (0..20)
            .map(|seed| match first(seed) {
                Next::Retry { at, .. } => at - t0,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(waits.len() > 10, "20 seeds drew {} delays", waits.len());
        assert_eq!(first(3), first(3));
        let d = Duration::from_secs(4);
        assert_eq!(jittered(d, 0.0), d);
        assert_eq!(jittered(d, 0.5), Duration::from_millis(3500));
        assert_eq!(jittered(d, 1.0), Duration::from_secs(3));
    }

    #[test]
    fn a_sustained_uptime_forgives_earlier_failures() {
        let t0 = Instant::now();
        let mut r = restarts(1);
        for _ in 0..3 {
            r.after_failure(Ending::StartFailed, t0);
        }
        let later = t0 + Duration::from_secs(100);
        let next = r.after_failure(
            Ending::Ended {
                up_since: t0 + Duration::from_secs(10),
                clean: false,
            },
            later,
        );
        assert_retry(next, 1, later, Duration::from_secs(1));
        // Up for less than resetAfter: still quick.
        let next = r.after_failure(
            Ending::Ended {
                up_since: later,
                clean: false,
            },
            later + Duration::from_secs(5),
        );
        assert!(matches!(next, Next::Retry { attempt: 2, .. }), "{next:?}");
    }

    #[test]
    fn on_exit_never_and_on_failure() {
        let t0 = Instant::now();
        let mut never = Restarts::new(RestartPolicy {
            on_exit: OnExit::Never,
            ..policy()
        });
        assert_eq!(never.after_failure(Ending::StartFailed, t0), Next::GiveUp);
        let mut on_failure = Restarts::new(RestartPolicy {
            on_exit: OnExit::OnFailure,
            ..policy()
        });
        let clean = Ending::Ended {
            up_since: t0,
            clean: true,
        };
        let crashed = Ending::Ended {
            up_since: t0,
            clean: false,
        };
        assert_eq!(on_failure.after_failure(clean, t0), Next::GiveUp);
        assert!(matches!(
            on_failure.after_failure(crashed, t0),
            Next::Retry { attempt: 1, .. }
        ));
    }

    #[test]
    fn forgiving_starts_the_count_again() {
        let t0 = Instant::now();
        let mut r = Restarts::new(policy());
        for _ in 0..4 {
            r.after_failure(Ending::StartFailed, t0);
        }
        r.forgive();
        assert!(matches!(
            r.after_failure(Ending::StartFailed, t0),
            Next::Retry { attempt: 1, .. }
        ));
    }

    #[test]
    fn durations_in_words() {
        assert_eq!(human(Duration::from_millis(250)), "250 ms");
        assert_eq!(human(Duration::from_millis(3200)), "4 s");
        assert_eq!(human(Duration::from_secs(300)), "5 min");
    }
}
