//! Bounded polls: where a test waits for what nothing tells it of (a child's output,
//! a process's state, a server's view of a closed stream), it polls here. Every poll
//! has a bound, and the caller panics with what it waited for.

use std::time::Duration;

use tokio::time::Instant;

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

/// Whether `f` came to hold within `within`, polled every 20 ms.
pub async fn until(within: Duration, mut f: impl AsyncFnMut() -> bool) -> bool {
    poll_every(within, Duration::from_millis(20), async || {
        f().await.then_some(())
    })
    .await
    .is_some()
}
