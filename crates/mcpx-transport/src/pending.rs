//! Requests awaiting a response from the other side, and requests in flight that the
//! other side may cancel. Shared by every transport, both directions.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcpx_protocol::{Frame, Id};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// A request to the peer that got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    /// The connection is gone.
    #[error("the peer's connection is closed")]
    Closed,
    /// No answer within the timeout.
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// Too many requests already await an answer.
    #[error("too many requests already await a response (limit {0})")]
    TooMany(usize),
    /// A modern request has no peer to send requests to.
    #[error("server-to-client requests exist only on legacy connections")]
    NoLegacyPeer,
}

/// Our requests awaiting the peer's responses, by id. Ids are `mcpx-<n>`, never reused
/// on a connection (register A-C2: unique for the session, the stricter legacy rule).
#[derive(Debug)]
pub struct Pending {
    next: AtomicU64,
    /// Keyed by ids this side chose (a peer's responses only look them up), so a fast
    /// hash is safe here; it runs twice on every request.
    waiting: Mutex<HashMap<Id, oneshot::Sender<Frame>, foldhash::fast::RandomState>>,
    limit: usize,
}

impl Pending {
    /// At most `limit` requests await an answer at once.
    pub fn new(limit: usize) -> Self {
        Pending {
            next: AtomicU64::new(1),
            waiting: Mutex::new(HashMap::default()),
            limit,
        }
    }

    /// A fresh request id.
    pub fn next_id(&self) -> Id {
        Id::String(format!(
            "mcpx-{}",
            self.next.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// Registers `id`; the receiver gets the response frame.
    pub fn register(&self, id: Id) -> Result<oneshot::Receiver<Frame>, PeerError> {
        let (tx, rx) = oneshot::channel();
        let mut w = self.waiting.lock();
        if w.len() >= self.limit {
            return Err(PeerError::TooMany(self.limit));
        }
        w.insert(id, tx);
        Ok(rx)
    }

    /// Whether no request awaits an answer.
    pub fn is_empty(&self) -> bool {
        self.waiting.lock().is_empty()
    }

    /// Forgets `id` (timed out, cancelled).
    pub fn forget(&self, id: &Id) {
        self.waiting.lock().remove(id);
    }

    /// Delivers a response frame to whoever awaits its id. Returns the frame back when
    /// nobody does (a late or unknown response).
    pub fn complete(&self, frame: Frame) -> Result<(), Frame> {
        let Some(id) = frame.id().cloned() else {
            return Err(frame);
        };
        let tx = self.waiting.lock().remove(&id);
        match tx {
            Some(tx) => tx.send(frame),
            None => Err(frame),
        }
    }

    /// Fails everything awaiting (the connection closed): the receivers see `Closed`.
    pub fn close_all(&self) {
        self.waiting.lock().clear();
    }

    /// Sends a request built from `method` and `params` on `tx`, and awaits its
    /// response for at most `timeout`. On timeout the request is cancelled with
    /// `notifications/cancelled`, sent on `tx` too (every legacy basic/lifecycle
    /// §Timeouts: the sender "SHOULD issue a cancellation notification for that request
    /// and stop waiting"; register C-C2: this is only ever a legacy connection, as
    /// modern ones carry no server-to-client requests).
    ///
    /// A caller that stops waiting (drops the future: the request it served is over)
    /// does the same: the id is forgotten, so it holds no place of the limit, and the
    /// peer is told with `notifications/cancelled`, unless `tx` is full.
    pub async fn call(
        &self,
        method: &str,
        params: Option<&RawValue>,
        timeout: Duration,
        tx: &mpsc::Sender<Frame>,
    ) -> Result<Frame, PeerError> {
        let id = self.next_id();
        let rx = self.register(id.clone())?;
        let mut open = Open {
            pending: self,
            id: &id,
            tx,
            armed: true,
        };
        if tx.send(Frame::request(&id, method, params)).await.is_err() {
            open.armed = false;
            self.forget(&id);
            return Err(PeerError::Closed);
        }
        let answer = tokio::time::timeout(timeout, rx).await;
        open.armed = false;
        match answer {
            Ok(Ok(frame)) => Ok(frame),
            Ok(Err(_)) => Err(PeerError::Closed),
            Err(_) => {
                self.forget(&id);
                let _ = tx
                    .send(cancelled(&id, &format!("no response within {timeout:?}")))
                    .await;
                Err(PeerError::Timeout(timeout))
            }
        }
    }
}

/// `notifications/cancelled` for our request `id`.
fn cancelled(id: &Id, reason: &str) -> Frame {
    let params = serde_json::json!({ "requestId": id, "reason": reason });
    match RawValue::from_string(params.to_string()) {
        Ok(p) => Frame::notification("notifications/cancelled", Some(&p)),
        Err(_) => Frame::notification("notifications/cancelled", None),
    }
}

/// A request of [`Pending::call`] still awaiting its answer: dropped armed, its caller
/// stopped waiting, so it is forgotten and the peer told.
struct Open<'a> {
    pending: &'a Pending,
    id: &'a Id,
    tx: &'a mpsc::Sender<Frame>,
    armed: bool,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.pending.forget(self.id);
        // Not awaited (a drop cannot wait): a full queue loses the notice, which is
        // only a courtesy (the peer's late answer is dropped as unknown).
        let _ = self
            .tx
            .try_send(cancelled(self.id, "the request it served is over"));
    }
}

/// Requests from the peer that are being handled, so `notifications/cancelled` can
/// reach them.
#[derive(Debug, Default)]
pub struct InFlight {
    tokens: Mutex<HashMap<Id, CancellationToken>>,
}

impl InFlight {
    /// Starts tracking `id`; returns its cancellation token. A duplicate id in flight is
    /// refused (register A-C2: ids are unique among a sender's outstanding requests in
    /// every revision).
    pub fn start(&self, id: &Id) -> Option<CancellationToken> {
        self.start_under(id, None)
    }

    /// Like [`InFlight::start`], the token being a child of `parent` (cancelling the
    /// parent cancels it) when one is given.
    pub fn start_under(
        &self,
        id: &Id,
        parent: Option<&CancellationToken>,
    ) -> Option<CancellationToken> {
        let mut t = self.tokens.lock();
        if t.contains_key(id) {
            return None;
        }
        let token = parent.map_or_else(CancellationToken::new, CancellationToken::child_token);
        t.insert(id.clone(), token.clone());
        Some(token)
    }

    /// Stops tracking `id`.
    pub fn finish(&self, id: &Id) {
        self.tokens.lock().remove(id);
    }

    /// Stops tracking `id`, whose handling produced `response`: the response to send,
    /// or `None` when the request was cancelled meanwhile (`cancelled` is its token).
    /// Every revision's basic/utilities/cancellation: the receiver of a cancellation
    /// SHOULD "not send a response for the cancelled request".
    pub fn answer(&self, id: &Id, cancelled: &CancellationToken, response: Frame) -> Option<Frame> {
        self.finish(id);
        if cancelled.is_cancelled() {
            tracing::debug!(%id, "request cancelled; its response is not sent");
            return None;
        }
        Some(response)
    }

    /// Cancels `id` if it is in flight.
    pub fn cancel(&self, id: &Id) -> bool {
        let token = self.tokens.lock().get(id).cloned();
        token.map(|t| t.cancel()).is_some()
    }

    /// Cancels everything (the connection closed and its era treats that as cancellation).
    pub fn cancel_all(&self) {
        for token in self.tokens.lock().values() {
            token.cancel();
        }
    }

    /// How many requests are in flight.
    pub fn len(&self) -> usize {
        self.tokens.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The `requestId` a `notifications/cancelled` names.
pub fn cancelled_request_id(frame: &Frame) -> Option<Id> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum RawId {
        N(i64),
        S(String),
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        request_id: RawId,
    }
    let p: Params = frame.params_as()?.ok()?;
    Some(match p.request_id {
        RawId::N(n) => Id::Number(n),
        RawId::S(s) => Id::String(s),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A caller that stops waiting (its request is over) leaves no place taken, and
    /// the peer is told its request is cancelled (register C-C2).
    #[tokio::test]
    async fn a_request_given_up_is_forgotten_and_cancelled() {
        let pending = Pending::new(1);
        let (tx, mut rx) = mpsc::channel(8);
        let mut asked = Box::pin(pending.call("roots/list", None, Duration::from_secs(60), &tx));
        // Polled until the request is out, then given up.
        tokio::select! {
            biased;
            _ = &mut asked => panic!("answered without an answer"),
            () = tokio::task::yield_now() => {}
        }
        let request = rx.recv().await.unwrap();
        assert_eq!(request.method(), Some("roots/list"));
        assert!(!pending.is_empty());
        drop(asked);
        assert!(pending.is_empty());
        let note = rx.recv().await.unwrap();
        assert_eq!(note.method(), Some("notifications/cancelled"));
        let id = serde_json::to_string(request.id().unwrap()).unwrap();
        assert!(note.params().unwrap().contains(&id), "{:?}", note.params());
        // Its place is free.
        assert!(pending.register(pending.next_id()).is_ok());
    }

    /// An answered request sends nothing more.
    #[tokio::test]
    async fn an_answered_request_is_not_cancelled() {
        let pending = std::sync::Arc::new(Pending::new(4));
        let (tx, mut rx) = mpsc::channel(8);
        let p = pending.clone();
        let asker =
            tokio::spawn(async move { p.call("ping", None, Duration::from_secs(60), &tx).await });
        let request = rx.recv().await.unwrap();
        let raw = RawValue::from_string("{}".to_owned()).unwrap();
        let answer = Frame::result_response(request.id().unwrap(), &raw);
        assert!(pending.complete(answer).is_ok());
        assert!(asker.await.unwrap().is_ok());
        assert!(
            rx.recv().await.is_none(),
            "something was sent after the answer"
        );
    }
}
