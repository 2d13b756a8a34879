//! The client-side seam: one connection from mcpx to an upstream server, whatever the
//! transport.
//!
//! An [`Upstream`] sends frames and returns, for each request, an [`Exchange`]: the
//! frames the transport ties to that request, ending with its response. On Streamable
//! HTTP those are the POST's SSE stream (related notifications, and on legacy
//! server-to-client requests) and the final response; on stdio the transport cannot
//! tie notifications to a request, so an exchange yields only the response and all
//! other frames arrive on the connection's [`Unsolicited`] receiver, where the layer
//! above matches progress tokens and answers server requests.
//!
//! Dropping an exchange before its response closes its stream. On modern HTTP that is
//! the cancellation signal (2026-07-28 basic/patterns/cancellation; register C-C3); on
//! every other transport and era the layer above sends `notifications/cancelled`
//! itself.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mcpx_protocol::codec::{self, DecodeError, DecodeErrorKind, Decoded, Limits};
use mcpx_protocol::jsonrpc::Kind;
use mcpx_protocol::{Frame, Id};
use tokio::sync::{mpsc, oneshot};

use crate::error::TransportError;

/// Frames from the upstream that belong to no exchange.
pub type Unsolicited = mpsc::Receiver<Frame>;

/// The transport's end of [`Unsolicited`]: it counts the frames it delivered.
///
/// A transport reads frames in order and hands each response to its exchange after
/// every frame read before it went to [`Unsolicited`]. So when a response arrives,
/// [`SentCount::get`] counts every unsolicited frame sent before it, and a client that
/// counts what it has taken off [`Unsolicited`] knows when it has caught up: the
/// progress and logs that preceded a response are then routed, and nothing is left
/// to chance or to a sleep.
#[derive(Debug, Clone)]
pub struct UnsolicitedSender {
    tx: mpsc::Sender<Frame>,
    sent: SentCount,
}

/// How many frames an [`UnsolicitedSender`] has delivered (shared, read anywhere).
#[derive(Debug, Clone, Default)]
pub struct SentCount(Arc<AtomicU64>);

impl SentCount {
    /// Frames delivered so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// A bounded unsolicited channel of `capacity` frames, counted.
pub fn unsolicited(capacity: usize) -> (UnsolicitedSender, Unsolicited) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    (
        UnsolicitedSender {
            tx,
            sent: SentCount::default(),
        },
        rx,
    )
}

impl UnsolicitedSender {
    /// Delivers `frame`, waiting for room; `false` when nobody reads any more.
    pub async fn send(&self, frame: Frame) -> bool {
        let ok = self.tx.send(frame).await.is_ok();
        if ok {
            self.sent.0.fetch_add(1, Ordering::Release);
        }
        ok
    }

    /// The count, to read from elsewhere.
    pub fn count(&self) -> SentCount {
        self.sent.clone()
    }
}

/// The frames of one request: related messages, then the response.
#[derive(Debug)]
pub struct Exchange {
    source: Source,
    done: bool,
}

/// Where an exchange's frames come from.
enum Source {
    /// A stream of frames, the response last (HTTP: the POST's SSE stream).
    Stream(mpsc::Receiver<Result<Frame, TransportError>>),
    /// The response, already read (a Streamable HTTP `application/json` answer): taken
    /// by the first `next`.
    Answered(Option<Result<Frame, TransportError>>),
    /// The response alone, awaited by id (stdio, HTTP+SSE): read straight from the
    /// dispatcher's oneshot, with no task in between.
    Once {
        rx: oneshot::Receiver<Frame>,
        /// The connection (for its error when it closes before the response), and the
        /// id to forget when the exchange is dropped before its response; `None` once
        /// the response (or the error) is in.
        awaited: Option<(Arc<dyn Awaited>, Id)>,
    },
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Stream(_) => f.write_str("Stream"),
            Source::Answered(_) => f.write_str("Answered"),
            Source::Once { .. } => f.write_str("Once"),
        }
    }
}

/// A connection whose responses are awaited by id ([`Exchange::once`]): shared by its
/// exchanges (a reference count each, no allocation per request).
pub(crate) trait Awaited: Send + Sync {
    /// The error an exchange ends with when the connection closed before its response.
    fn closed_error(&self) -> TransportError;
    /// Stops awaiting `id` (its exchange was dropped).
    fn forget(&self, id: &Id);
}

impl Drop for Exchange {
    fn drop(&mut self) {
        if let Source::Once { awaited, .. } = &mut self.source
            && let Some((connection, id)) = awaited.take()
        {
            connection.forget(&id);
        }
    }
}

impl Exchange {
    /// An exchange fed by `rx`; the transport sends the response last and then drops
    /// its sender.
    pub fn new(rx: mpsc::Receiver<Result<Frame, TransportError>>) -> Self {
        Exchange {
            source: Source::Stream(rx),
            done: false,
        }
    }

    /// An exchange whose only frame is `response`, already at hand (or the error that
    /// took its place).
    pub fn answered(response: Result<Frame, TransportError>) -> Self {
        Exchange {
            source: Source::Answered(Some(response)),
            done: false,
        }
    }

    /// An exchange whose only frame is the response to `id` delivered on `rx`, by
    /// `connection`: its error when `rx`'s sender goes away first, and it forgets `id`
    /// when the exchange is dropped before the response arrived.
    pub(crate) fn once(rx: oneshot::Receiver<Frame>, connection: Arc<dyn Awaited>, id: Id) -> Self {
        Exchange {
            source: Source::Once {
                rx,
                awaited: Some((connection, id)),
            },
            done: false,
        }
    }

    /// The next frame: a related notification or request, or the response (after which
    /// `None`). An error ends the exchange.
    pub async fn next(&mut self) -> Option<Result<Frame, TransportError>> {
        if self.done {
            return None;
        }
        let item = match &mut self.source {
            Source::Stream(rx) => rx.recv().await,
            Source::Answered(response) => response.take(),
            Source::Once { rx, awaited } => {
                let r = rx.await;
                // Answered (or the connection is gone): nothing left to forget.
                let connection = awaited.take();
                Some(r.map_err(|_| match connection {
                    Some((c, _)) => c.closed_error(),
                    None => TransportError::Closed {
                        detail: "the connection closed before the response".to_owned(),
                    },
                }))
            }
        };
        match &item {
            Some(Ok(f)) if matches!(f.kind(), Kind::Result | Kind::Error) => self.done = true,
            Some(Err(_)) => self.done = true,
            Some(Ok(_)) => {}
            None => {
                self.done = true;
                return Some(Err(TransportError::Closed {
                    detail: "the stream ended before the response".to_owned(),
                }));
            }
        }
        item
    }

    /// Waits for the response, handing every related frame to `on_related`.
    pub async fn response(
        mut self,
        mut on_related: impl FnMut(Frame),
    ) -> Result<Frame, TransportError> {
        while let Some(item) = self.next().await {
            let f = item?;
            if matches!(f.kind(), Kind::Result | Kind::Error) {
                return Ok(f);
            }
            on_related(f);
        }
        Err(TransportError::Closed {
            detail: "the stream ended before the response".to_owned(),
        })
    }
}

/// One connection to an upstream server.
pub trait Upstream: Send + Sync + 'static {
    /// Sends a request; its frames come back on the returned exchange.
    fn request(
        &self,
        frame: Frame,
    ) -> impl Future<Output = Result<Exchange, TransportError>> + Send;

    /// Sends a notification, or a response to a request the upstream sent us.
    fn send(&self, frame: Frame) -> impl Future<Output = Result<(), TransportError>> + Send;

    /// Closes the connection (ends a legacy HTTP session with DELETE; stops a child
    /// process: close stdin, wait, SIGTERM, wait, SIGKILL).
    fn close(&self) -> impl Future<Output = ()> + Send;
}

/// Messages of at least this many bytes from an upstream are decoded on tokio's
/// blocking pool (`decode_line`, `decode_text`), and results as large are written
/// into a host's response there too (by `mcpx-server`), so that the event loop goes on
/// serving every other upstream and host meanwhile. Smaller ones are handled in place,
/// as before, with no task and no allocation more.
///
/// Decoding (UTF-8, the member walk that validates and indexes the text) runs at about
/// 1 GB/s, so a message of this size holds the loop for about a millisecond, the order
/// of a few calls' own cost; a 60 MiB one held it for tens of milliseconds, and its
/// lowering for a host for a hundred more. Handing work to the pool and back costs a
/// few microseconds and two context switches, as much as decoding some 10 KiB: far
/// below a MiB it would cost more than it saves.
pub const OFF_LOOP_BYTES: usize = 1 << 20;

/// Decodes a line an upstream sent: in place when it is smaller than
/// [`OFF_LOOP_BYTES`], on the blocking pool otherwise (its copy out of the read buffer,
/// when it needs one, with it).
pub(crate) async fn decode_line(
    line: bytes::BytesMut,
    limits: &Limits,
) -> Result<Decoded, DecodeError> {
    if line.len() < OFF_LOOP_BYTES {
        return codec::decode_bytes(Vec::from(line), limits);
    }
    let limits = *limits;
    // Boxed: the future of every message's decoding holds only a pointer for this.
    Box::pin(off_loop(move || {
        codec::decode_bytes(Vec::from(line), &limits)
    }))
    .await
}

/// [`decode_line`] of text (an HTTP body, an SSE event's data).
pub(crate) async fn decode_text(text: String, limits: &Limits) -> Result<Decoded, DecodeError> {
    if text.len() < OFF_LOOP_BYTES {
        return codec::decode(text, limits);
    }
    let limits = *limits;
    Box::pin(off_loop(move || codec::decode(text, &limits))).await
}

async fn off_loop(
    decode: impl FnOnce() -> Result<Decoded, DecodeError> + Send + 'static,
) -> Result<Decoded, DecodeError> {
    match tokio::task::spawn_blocking(decode).await {
        Ok(decoded) => decoded,
        // Decoding never panics, so this is a runtime shutting down.
        Err(e) => Err(DecodeError {
            kind: DecodeErrorKind::Parse(format!("decoding was cut short: {e}")),
            id: None,
        }),
    }
}

/// Resolves once `closed` holds why a connection closed, with that reason; `gone`
/// when the sender is dropped first (the connection is gone with everything). What
/// the child and HTTP+SSE transports' `closed` return.
pub(crate) fn when_closed(
    closed: &tokio::sync::watch::Sender<Option<String>>,
    gone: &'static str,
) -> impl std::future::Future<Output = String> + Send + 'static {
    let mut rx = closed.subscribe();
    async move {
        match rx.wait_for(Option::is_some).await {
            Ok(detail) => detail.clone().unwrap_or_default(),
            Err(_) => gone.to_owned(),
        }
    }
}
