//! Bounded polls: where a test waits for what it cannot be told of (a file another
//! process writes, a status it must ask for, a process's state), it polls here.
//! Every poll has a bound, and the caller panics with what it waited for.

use std::time::Duration;

use tokio::time::Instant;

/// How often a poll looks: often enough that a wait ends soon after its condition
/// holds, seldom enough that a poll that asks mcpx something does not load it.
pub const EVERY: Duration = Duration::from_millis(20);

/// Runs `f` every `every` until it gives `Some`, for at most `within`; `None` when
/// `within` passed first. `f` runs at least once, and once more at the bound.
pub async fn poll_every<T>(
    within: Duration,
    every: Duration,
    mut f: impl AsyncFnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        tokio::time::sleep(every.min(left)).await;
    }
}

/// [`poll_every`], every [`EVERY`].
pub async fn poll<T>(within: Duration, f: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    poll_every(within, EVERY, f).await
}

/// Whether `f` came to hold within `within` (polled every [`EVERY`]).
pub async fn until(within: Duration, mut f: impl AsyncFnMut() -> bool) -> bool {
    poll(within, async || f().await.then_some(()))
        .await
        .is_some()
}
