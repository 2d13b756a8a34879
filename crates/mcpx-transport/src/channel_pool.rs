//! Bounded channels kept for reuse, for the per-call channels of the hot path.
//!
//! Every forwarded call opens two channels that nearly always stay empty: the one its
//! upstream connection routes the call's related frames on (progress, logs, asks), and
//! the one the gateway takes the call's events from. A pool hands a finished call's
//! channel to the next one instead of allocating and freeing it per call. Own code
//! because no crate pools tokio channels with the reuse check below.
//!
//! A channel goes back only when nothing can tell it was used: it is empty, nobody but
//! the returning caller can send on it (one sender, no weak ones), and no send slot is
//! reserved. A frame meant for one call can then never reach another.

use parking_lot::Mutex;

use tokio::sync::mpsc::{self, Receiver, Sender};

/// A pool of bounded channels of one capacity.
#[derive(Debug)]
pub struct ChannelPool<T> {
    capacity: usize,
    keep: usize,
    free: Mutex<Vec<(Sender<T>, Receiver<T>)>>,
}

impl<T> ChannelPool<T> {
    /// Channels of `capacity` messages, at most `keep` of them kept.
    pub fn new(capacity: usize, keep: usize) -> Self {
        ChannelPool {
            capacity: capacity.max(1),
            keep,
            free: Mutex::new(Vec::new()),
        }
    }

    /// A channel: a kept one, or a new one.
    pub fn take(&self) -> (Sender<T>, Receiver<T>) {
        let kept = self.free.lock().pop();
        kept.unwrap_or_else(|| mpsc::channel(self.capacity))
    }

    /// Returns a channel taken with [`take`](Self::take); it is kept only if it is as a
    /// new one would be (see the module's doc), else dropped.
    pub fn give(&self, tx: Sender<T>, rx: Receiver<T>) {
        let unused = rx.is_empty()
            && rx.sender_strong_count() == 1
            && rx.sender_weak_count() == 0
            && tx.capacity() == self.capacity
            && tx.max_capacity() == self.capacity;
        if !unused {
            return;
        }
        let mut free = self.free.lock();
        if free.len() < self.keep {
            free.push((tx, rx));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_channel_nobody_else_can_use_is_kept() {
        let pool = ChannelPool::<u32>::new(4, 8);
        // Unused: kept, and handed out again.
        let (tx, rx) = pool.take();
        pool.give(tx, rx);
        assert_eq!(pool.free.lock().len(), 1);
        let (tx, mut rx) = pool.take();
        assert_eq!(pool.free.lock().len(), 0);
        tx.send(1).await.unwrap();
        assert_eq!(rx.recv().await, Some(1));

        // A message left unread: dropped with the channel.
        tx.send(2).await.unwrap();
        pool.give(tx, rx);
        assert_eq!(pool.free.lock().len(), 0);

        // Another sender still alive: dropped.
        let (tx, rx) = pool.take();
        let other = tx.clone();
        pool.give(tx, rx);
        assert_eq!(pool.free.lock().len(), 0);
        drop(other);

        // A weak sender: dropped.
        let (tx, rx) = pool.take();
        let weak = tx.downgrade();
        pool.give(tx, rx);
        assert_eq!(pool.free.lock().len(), 0);
        drop(weak);

        // A slot reserved by an owned permit (which holds a sender): dropped.
        let (tx, rx) = pool.take();
        let tx2 = tx.clone();
        let permit = tx2.reserve_owned().await.unwrap();
        pool.give(tx, rx);
        assert_eq!(pool.free.lock().len(), 0);
        drop(permit);
    }

    #[test]
    fn at_most_keep_channels_are_kept() {
        let pool = ChannelPool::<u32>::new(4, 2);
        let taken: Vec<_> = (0..3).map(|_| pool.take()).collect();
        for (tx, rx) in taken {
            pool.give(tx, rx);
        }
        assert_eq!(pool.free.lock().len(), 2);
    }
}
