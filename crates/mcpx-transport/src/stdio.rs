//! The stdio server: newline-delimited JSON-RPC on stdin and stdout, logs on stderr.
//!
//! Every revision's basic/transports §stdio: messages are delimited by newlines and
//! MUST NOT contain embedded newlines; the server MUST NOT write anything to stdout
//! that is not a valid MCP message. Requests are handled concurrently (bounded by
//! [`StdioConfig::max_in_flight`], which applies backpressure by pausing reads), except
//! `initialize`, which is handled before the next line is read so that everything
//! after it is classified in the negotiated revision. At EOF in-flight requests are
//! drained for up to [`StdioConfig::drain_timeout`], then cancelled.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use futures_util::StreamExt;
use mcpx_protocol::classify::classify_stdio;
use mcpx_protocol::codec::{self, DecodeError, DecodeErrorKind, Decoded, Limits};
use mcpx_protocol::error::INVALID_REQUEST;
use mcpx_protocol::jsonrpc::{Kind, member};
use mcpx_protocol::{Frame, Revision, Verdict};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::codec::{Decoder, FramedRead};
use tokio_util::sync::CancellationToken;

use crate::pending::{InFlight, Pending, cancelled_request_id};
use crate::service::{Incoming, Peer, Related, RequestCtx, Service, boxed_request};

/// Bounds of a stdio connection. All configurable.
#[derive(Debug, Clone)]
pub struct StdioConfig {
    /// Frame limits; `max_frame_bytes` (default 64 MiB) bounds one line.
    pub limits: Limits,
    /// Requests handled at once before reading pauses (default 64).
    pub max_in_flight: usize,
    /// Frames queued for stdout before senders wait (default 1024).
    pub outbound_queue: usize,
    /// Our requests to the client awaiting answers (default 64).
    pub max_pending: usize,
    /// How long in-flight requests may finish after EOF (default 30 s).
    pub drain_timeout: Duration,
}

impl Default for StdioConfig {
    fn default() -> Self {
        StdioConfig {
            limits: Limits::default(),
            max_in_flight: 64,
            outbound_queue: 1024,
            max_pending: 64,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// A line, or the size of a line that was over the limit.
#[derive(Debug)]
pub(crate) enum Line {
    /// A line's bytes, without its newline (taken out of the read buffer, not copied:
    /// the copy to a `Vec` is the consumer's, which may make it off the event loop).
    Frame(BytesMut),
    /// An over-long line, and how many of its bytes were read: all of it when it was
    /// skipped to its end (a host's), or as many as had come when it crossed the limit
    /// (an upstream's, [`LineCodec::upstream`]).
    TooLong { size: usize },
}

/// What the upstream side's codec publishes of a line it holds unfinished: its length
/// so far, and when its last byte came (see [`LineCodec::upstream`]). Written by the
/// reader only; read by whoever decides that the line will never be finished.
#[derive(Debug)]
pub(crate) struct Unfinished {
    base: std::time::Instant,
    /// Bytes of a line read so far with no newline yet; 0 when none is held.
    len: AtomicUsize,
    /// When its last byte came, in µs since `base`.
    last_us: AtomicU64,
}

impl Unfinished {
    pub(crate) fn new() -> Self {
        Unfinished {
            base: std::time::Instant::now(),
            len: AtomicUsize::new(0),
            last_us: AtomicU64::new(0),
        }
    }

    fn note(&self, len: usize) {
        if len > 0 {
            // The time first, then the length (Release): whoever sees the length sees
            // a time at least as new.
            let us = u64::try_from(self.base.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.last_us.store(us, Ordering::Relaxed);
        }
        self.len.store(len, Ordering::Release);
    }

    /// The unfinished line's length so far and how long since its last byte came, if
    /// a line is unfinished.
    pub(crate) fn get(&self) -> Option<(usize, Duration)> {
        let len = self.len.load(Ordering::Acquire);
        if len == 0 {
            return None;
        }
        let last = Duration::from_micros(self.last_us.load(Ordering::Relaxed));
        Some((len, self.base.elapsed().saturating_sub(last)))
    }
}

/// The read buffer a big line leaves in its place (the size of tokio-util's first).
const READ_BUFFER: usize = 8 * 1024;

/// Splits input at `\n`, bounding line length without ever buffering more than the
/// limit.
///
/// On the server side ([`LineCodec::new`]) an over-long line is skipped to its end and
/// reported once, and the host gets an error for it. On the upstream side
/// ([`LineCodec::upstream`]) it is reported as soon as it crosses the limit, since the
/// stream ends there (see [`crate::child`]), and the line held unfinished between
/// reads is published in an [`Unfinished`].
#[derive(Debug)]
pub(crate) struct LineCodec {
    max: usize,
    /// Bytes of an over-long line discarded so far, while skipping it.
    skipping: Option<usize>,
    /// How much of the buffer is known to hold no newline: a line that arrives in many
    /// reads (a large result) is searched once, not again from its start on every read.
    searched: usize,
    /// The upstream side's: an over-long line is reported when it crosses the limit,
    /// and an unfinished line is published here.
    unfinished: Option<Arc<Unfinished>>,
}

impl LineCodec {
    pub(crate) fn new(max: usize) -> Self {
        LineCodec {
            max,
            skipping: None,
            searched: 0,
            unfinished: None,
        }
    }

    /// The codec of an upstream's stdout: a line over `max` is reported as it crosses
    /// the limit, and the line held unfinished is published in `unfinished`.
    pub(crate) fn upstream(max: usize, unfinished: Arc<Unfinished>) -> Self {
        LineCodec {
            unfinished: Some(unfinished),
            ..LineCodec::new(max)
        }
    }
}

impl Decoder for LineCodec {
    type Item = Line;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<Line>> {
        loop {
            let from = self.searched.min(buf.len());
            let newline =
                memchr::memchr(b'\n', buf.get(from..).unwrap_or_default()).map(|i| from + i);
            // Whatever happens below, the buffer is consumed up to the newline (or
            // cleared) except when it is kept whole, waiting for the rest of a line.
            self.searched = 0;
            if let Some(skipped) = self.skipping.take() {
                match newline {
                    Some(i) => {
                        buf.advance(i + 1);
                        return Ok(Some(Line::TooLong { size: skipped + i }));
                    }
                    None => {
                        self.skipping = Some(skipped + buf.len());
                        buf.clear();
                        return Ok(None);
                    }
                }
            }
            match newline {
                Some(i) if i > self.max => {
                    buf.advance(i + 1);
                    return Ok(Some(Line::TooLong { size: i }));
                }
                Some(i) => {
                    // A big line that is all the buffer holds (a large result, after
                    // which the upstream waits) takes the buffer, allocation and all,
                    // so that no copy of it is ever made; a small one is split off.
                    let mut line = if i + 1 == buf.len() && i >= crate::upstream::OFF_LOOP_BYTES {
                        std::mem::replace(buf, BytesMut::with_capacity(READ_BUFFER))
                    } else {
                        buf.split_to(i + 1)
                    };
                    // Nothing is known unfinished until the next look (the rest may
                    // hold whole lines, which the reader takes before it reads again).
                    if let Some(u) = &self.unfinished {
                        u.note(0);
                    }
                    line.truncate(i);
                    if line.last() == Some(&b'\r') {
                        line.truncate(i - 1);
                    }
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue; // blank lines carry nothing
                    }
                    return Ok(Some(Line::Frame(line)));
                }
                None if buf.len() > self.max => {
                    let size = buf.len();
                    buf.clear();
                    if let Some(u) = &self.unfinished {
                        u.note(0);
                        return Ok(Some(Line::TooLong { size }));
                    }
                    self.skipping = Some(size);
                    return Ok(None);
                }
                None => {
                    self.searched = buf.len();
                    if let Some(u) = &self.unfinished {
                        u.note(buf.len());
                    }
                    return Ok(None);
                }
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<Line>> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        if let Some(size) = self.skipping.take() {
            return Ok(Some(Line::TooLong { size }));
        }
        if buf.is_empty() || buf.iter().all(u8::is_ascii_whitespace) {
            buf.clear();
            return Ok(None);
        }
        // A last line without its newline still counts.
        Ok(Some(Line::Frame(buf.split())))
    }
}

/// A frame's text with any raw CR or LF replaced by a space. In valid JSON those bytes
/// can only be whitespace between tokens (inside strings they are escaped), so this
/// keeps the meaning and makes the frame one line.
pub(crate) fn one_line(frame: &Frame) -> std::borrow::Cow<'_, str> {
    let s = frame.as_str();
    if memchr::memchr2(b'\n', b'\r', s.as_bytes()).is_some() {
        std::borrow::Cow::Owned(s.replace(['\n', '\r'], " "))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

struct Conn<S> {
    service: Arc<S>,
    out: mpsc::Sender<Frame>,
    /// Batch response arrays (2025-03-26), already one line each.
    batches: mpsc::Sender<String>,
    inflight: InFlight,
    /// Parent of every `subscriptions/listen` request's cancellation token: at EOF the
    /// client is gone, and a listen, which only its client ends, ends with it
    /// (2026-07-28 basic/transports/stdio §Shutdown: servers SHOULD exit promptly when
    /// stdin closes). Other requests drain.
    listens: CancellationToken,
    pending: Arc<Pending>,
    /// The legacy session `initialize` opened on this process, if any.
    peer: Mutex<Option<Peer>>,
}

impl<S: Service> Conn<S> {
    fn peer(&self) -> Option<Peer> {
        self.peer.lock().clone()
    }

    fn process_revision(&self) -> Option<Revision> {
        self.peer().map(|p| p.revision)
    }

    async fn write(&self, frame: Frame) {
        if self.out.send(frame).await.is_err() {
            tracing::debug!("stdout closed; dropping a frame");
        }
    }

    /// Handles one frame. Requests are spawned onto `tasks` (holding a permit of
    /// `slots`), except `initialize`, which completes before this returns.
    async fn handle(
        self: &Arc<Self>,
        frame: Frame,
        tasks: &mut JoinSet<()>,
        slots: &Arc<Semaphore>,
    ) {
        let verdict = match classify_stdio(self.process_revision(), &frame) {
            Ok(v) => v,
            Err(rejection) => {
                match frame.kind() {
                    Kind::Request => self.write(rejection.to_response(frame.id())).await,
                    _ => tracing::warn!(frame = %frame, "dropped: {}", rejection.message),
                }
                return;
            }
        };
        match frame.kind() {
            Kind::Request => self.request(frame, verdict, tasks, slots).await,
            Kind::Notification => {
                if let Some(id) = (frame.method() == Some("notifications/cancelled"))
                    .then(|| cancelled_request_id(&frame))
                    .flatten()
                {
                    self.inflight.cancel(&id);
                }
                let peer = match verdict {
                    Verdict::Legacy { .. } => self.peer(),
                    Verdict::Modern { .. } => None,
                };
                if let Some(p) = &peer {
                    p.observe(&frame);
                }
                self.service
                    .notification(Incoming { frame, verdict }, peer)
                    .await;
            }
            Kind::Result | Kind::Error => {
                if let Err(f) = self.pending.complete(frame) {
                    tracing::warn!(frame = %f, "dropped a response to no pending request");
                }
            }
        }
    }

    async fn request(
        self: &Arc<Self>,
        frame: Frame,
        verdict: Verdict,
        tasks: &mut JoinSet<()>,
        slots: &Arc<Semaphore>,
    ) {
        let Some(id) = frame.id().cloned() else {
            return;
        };
        // A subscriptions/listen never ends on its own: it ends with its client.
        let listen = frame.method() == Some("subscriptions/listen");
        let parent = listen.then_some(&self.listens);
        let Some(token) = self.inflight.start_under(&id, parent) else {
            let msg = format!("request id {id} is already in flight");
            self.write(Frame::error_response(
                Some(&id),
                INVALID_REQUEST,
                &msg,
                None,
            ))
            .await;
            return;
        };
        let peer = match verdict {
            Verdict::Legacy { .. } => self.peer(),
            Verdict::Modern { .. } => None,
        };
        let initialize = matches!(
            verdict,
            Verdict::Legacy {
                initialize: true,
                ..
            }
        );
        let cancelled = token.clone();
        let ctx = RequestCtx::new(token, Related(self.out.clone()), peer).on_stdio();
        let incoming = Incoming { frame, verdict };
        if initialize {
            let params: Option<Arc<str>> = incoming.frame.params().map(Arc::from);
            let response = self.service.request(incoming, ctx).await;
            self.inflight.finish(&id);
            self.open_session(&response, params);
            self.write(response).await;
            return;
        }
        let conn = self.clone();
        start_held(
            tasks,
            slots,
            Box::pin(async move {
                let response = boxed_request(&*conn.service, incoming, ctx).await;
                if let Some(r) = conn.inflight.answer(&id, &cancelled, response) {
                    conn.write(r).await;
                }
            }),
        )
        .await;
    }

    /// A successful `initialize` result makes the process legacy at the revision the
    /// server answered with.
    fn open_session(&self, response: &Frame, initialize_params: Option<Arc<str>>) {
        let revision = response
            .result()
            .and_then(|r| member(r, "protocolVersion"))
            .and_then(|v| serde_json::from_str::<String>(v).ok())
            .and_then(|v| Revision::from_wire(&v));
        let first = self.peer().is_none();
        if let Some(revision) = revision {
            *self.peer.lock() = Some(Peer::open(
                revision,
                None,
                self.out.clone(),
                self.pending.clone(),
                initialize_params,
            ));
        }
        if let Some(peer) = self.peer().filter(|_| first) {
            self.service.session_opened(&peer);
        }
    }
}

/// Writes `line` and its newline in one write where the writer allows it (a vectored
/// write on a pipe; one buffer otherwise), so that the reader wakes once per line: two
/// writes let it wake for the line, find no newline, and wake again for the newline.
pub(crate) async fn write_line<W: AsyncWrite + Unpin>(w: &mut W, line: &str) -> io::Result<()> {
    let line = line.as_bytes();
    if !w.is_write_vectored() {
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line);
        buf.push(b'\n');
        return w.write_all(&buf).await;
    }
    let total = line.len() + 1;
    let mut done = 0;
    while done < total {
        let n = match line.get(done..) {
            Some(rest) if !rest.is_empty() => {
                w.write_vectored(&[io::IoSlice::new(rest), io::IoSlice::new(b"\n")])
                    .await?
            }
            _ => w.write(b"\n").await?,
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        done += n;
    }
    Ok(())
}

/// The process's stdin, for [`serve`]: see [`stdin_stdout`].
pub type StdIn = tokio_util::either::Either<tokio::net::unix::pipe::Receiver, tokio::io::Stdin>;
/// The process's stdout, for [`serve`]: see [`stdin_stdout`].
pub type StdOut = tokio_util::either::Either<tokio::net::unix::pipe::Sender, tokio::io::Stdout>;

/// The process's stdin and stdout for [`serve`] (call it inside the runtime). Where they
/// are pipes (as when a host launches the server) they are read and written
/// non-blocking on the runtime's own thread; tokio's `stdin()`/`stdout()` (a terminal,
/// a file, a socket) hand every read and every write to a blocking-pool thread and
/// back, two cross-thread wake-ups per line.
pub fn stdin_stdout() -> (StdIn, StdOut) {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    use tokio_util::either::Either;
    let input = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd)
        .map_or_else(|_| Either::Right(tokio::io::stdin()), Either::Left);
    let output = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Sender::from_owned_fd)
        .map_or_else(|_| Either::Right(tokio::io::stdout()), Either::Left);
    (input, output)
}

/// Serves `service` on `reader`/`writer` (stdin/stdout) until EOF or `shutdown`.
pub async fn serve<S, R, W>(
    service: Arc<S>,
    reader: R,
    mut writer: W,
    config: StdioConfig,
    shutdown: CancellationToken,
) -> io::Result<()>
where
    S: Service,
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, mut out_rx) = mpsc::channel::<Frame>(config.outbound_queue.max(1));
    let (batch_tx, mut batch_rx) = mpsc::channel::<String>(16);
    let stop_writer = CancellationToken::new();
    let writer_task = {
        let stop = stop_writer.clone();
        tokio::spawn(async move {
            // Made once: a `cancelled()` made per frame would join and leave the
            // token's waiter list for every response.
            let stopped = stop.cancelled();
            tokio::pin!(stopped);
            loop {
                tokio::select! {
                    f = out_rx.recv() => match f {
                        Some(frame) => write_line(&mut writer, &one_line(&frame)).await?,
                        None => break,
                    },
                    Some(line) = batch_rx.recv() => write_line(&mut writer, &line).await?,
                    () = &mut stopped => break,
                }
                while let Ok(frame) = out_rx.try_recv() {
                    write_line(&mut writer, &one_line(&frame)).await?;
                }
                writer.flush().await?;
            }
            // Stopped: whatever is queued still goes out.
            while let Ok(frame) = out_rx.try_recv() {
                write_line(&mut writer, &one_line(&frame)).await?;
            }
            while let Ok(line) = batch_rx.try_recv() {
                write_line(&mut writer, &line).await?;
            }
            writer.flush().await
        })
    };

    let conn = Arc::new(Conn {
        service,
        out: out_tx,
        batches: batch_tx,
        inflight: InFlight::default(),
        listens: CancellationToken::new(),
        pending: Arc::new(Pending::new(config.max_pending)),
        peer: Mutex::new(None),
    });
    let slots = Arc::new(Semaphore::new(config.max_in_flight.max(1)));
    let mut tasks = JoinSet::new();
    let mut lines = FramedRead::new(reader, LineCodec::new(config.limits.max_frame_bytes));
    let mut read_error = None;

    // Made once, as the writer's (above).
    let shut = shutdown.cancelled();
    tokio::pin!(shut);
    loop {
        let line = tokio::select! {
            l = lines.next() => l,
            () = &mut shut => break,
        };
        let bytes = match line {
            None => break,
            Some(Err(e)) => {
                read_error = Some(e);
                break;
            }
            Some(Ok(Line::TooLong { size })) => {
                let err = DecodeError {
                    kind: DecodeErrorKind::TooLarge {
                        size,
                        limit: config.limits.max_frame_bytes,
                    },
                    id: None,
                };
                conn.write(err.to_response()).await;
                continue;
            }
            Some(Ok(Line::Frame(bytes))) => bytes,
        };
        match codec::decode_bytes(Vec::from(bytes), &config.limits) {
            Err(e) => conn.write(e.to_response()).await,
            Ok(Decoded::Single(frame)) => conn.handle(frame, &mut tasks, &slots).await,
            Ok(batch @ Decoded::Batch(_)) => {
                let rev = conn.process_revision().unwrap_or(Revision::NEWEST_LEGACY);
                handle_batch(&conn, batch, rev, &config, &mut tasks, &slots).await;
            }
        }
    }

    // At EOF listens end with their client; they would otherwise hold the process until
    // the drain timeout. On shutdown the service ends them itself, gracefully (H1).
    if !shutdown.is_cancelled() {
        conn.listens.cancel();
    }
    // Drain: let in-flight requests finish, then cancel what remains.
    let drained = tokio::time::timeout(config.drain_timeout, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            in_flight = conn.inflight.len(),
            "drain timeout: cancelling requests still in flight"
        );
        conn.inflight.cancel_all();
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        tasks.abort_all();
    }
    conn.pending.close_all();
    if let Some(peer) = conn.peer() {
        conn.service.session_closed(&peer);
    }
    stop_writer.cancel();
    match writer_task.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Ok(Err(e)) => return Err(e),
        Err(e) => return Err(io::Error::other(e)),
    }
    match read_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// A batch (2025-03-26 only): every request handled, the responses written as one array
/// (JSON-RPC 2.0 §6); no line at all when the batch held only notifications.
///
/// The batch's requests run in a task of `tasks` (holding one permit of `slots`, as one
/// request would), not in the reader: a batched request may ask the client something
/// (2025-03-26 allows server-to-client requests during a request), and the client's
/// answer arrives on stdin, which only a reader still reading can take.
async fn handle_batch<S: Service>(
    conn: &Arc<Conn<S>>,
    batch: Decoded,
    rev: Revision,
    config: &StdioConfig,
    tasks: &mut JoinSet<()>,
    slots: &Arc<Semaphore>,
) {
    let items = match codec::admit(batch, rev) {
        Ok(items) => items,
        Err(e) => return conn.write(e.to_response()).await,
    };
    let mut responses: Vec<String> = Vec::new();
    let mut requests = Vec::new();
    for item in items {
        match item {
            Err(e) => responses.push(e.to_response().into_string()),
            Ok(frame) if frame.kind() == Kind::Request => requests.push(frame),
            Ok(frame) => {
                // Notifications and responses: as if received alone.
                let mut none = JoinSet::new();
                let slots = Arc::new(Semaphore::new(1));
                conn.handle(frame, &mut none, &slots).await;
            }
        }
    }
    if requests.is_empty() {
        send_batch(conn, responses).await;
        return;
    }
    let limit = config.max_in_flight.max(1);
    let conn = conn.clone();
    start_held(
        tasks,
        slots,
        Box::pin(async move {
            let answered = answer_batch(&conn, requests, limit).await;
            responses.extend(answered.iter().map(|f| one_line(f).into_owned()));
            send_batch(&conn, responses).await;
        }),
    )
    .await;
}

/// Runs `work` (a request, or a batch's requests) in a task of `tasks` once a permit of
/// `slots` is free, holding it until the work ends: at most `max_in_flight` at once,
/// and the reader waits here (reads no further) when they are all taken.
///
/// `work` comes boxed: the task harness moves its future by value more than once
/// (spawn, completion, output), and moving a box is moving a pointer (callgrind once
/// found most of the gateway's per-call instructions in these copies). The service's
/// own future, several KiB, is boxed apart inside it ([`boxed_request`]), so that
/// `work` itself is small.
async fn start_held(
    tasks: &mut JoinSet<()>,
    slots: &Arc<Semaphore>,
    work: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
) {
    let Ok(permit) = slots.clone().acquire_owned().await else {
        return;
    };
    // Finished tasks are reaped here, as the next one starts, rather than by waking
    // the reader as each one ends (a wake-up and a poll of the line reader per call).
    // The set holds no more than `max_in_flight` tasks: every task in it was running,
    // holding a permit, when this one's permit was granted.
    while tasks.try_join_next().is_some() {}
    tasks.spawn(async move {
        work.await;
        drop(permit);
    });
}

/// The responses to a batch's requests, in their order, at most `limit` at once.
async fn answer_batch<S: Service>(
    conn: &Arc<Conn<S>>,
    requests: Vec<Frame>,
    limit: usize,
) -> Vec<Frame> {
    let futures = requests.into_iter().map(|frame| {
        let conn = conn.clone();
        async move {
            let id = frame.id().cloned()?;
            let verdict = match classify_stdio(conn.process_revision(), &frame) {
                Ok(v) => v,
                Err(r) => return Some(r.to_response(Some(&id))),
            };
            let Some(token) = conn.inflight.start(&id) else {
                let msg = format!("request id {id} is already in flight");
                return Some(Frame::error_response(
                    Some(&id),
                    INVALID_REQUEST,
                    &msg,
                    None,
                ));
            };
            let peer = conn.peer();
            let ctx = RequestCtx::new(token, Related(conn.out.clone()), peer).on_stdio();
            let response = conn.service.request(Incoming { frame, verdict }, ctx).await;
            conn.inflight.finish(&id);
            Some(response)
        }
    });
    let answered: Vec<Option<Frame>> = futures_util::stream::iter(futures)
        .buffered(limit)
        .collect()
        .await;
    answered.into_iter().flatten().collect()
}

/// Writes a batch's responses as one array; nothing when there are none.
async fn send_batch<S: Service>(conn: &Arc<Conn<S>>, responses: Vec<String>) {
    if responses.is_empty() {
        return;
    }
    if conn
        .batches
        .send(format!("[{}]", responses.join(",")))
        .await
        .is_err()
    {
        tracing::debug!("stdout closed; dropping a batch response");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(codec: &mut LineCodec, chunks: &[&str]) -> Vec<String> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut push = |l: Line| {
            out.push(match l {
                Line::Frame(b) => String::from_utf8(b.to_vec()).unwrap(),
                Line::TooLong { size } => format!("<too long: {size}>"),
            })
        };
        for c in chunks {
            buf.extend_from_slice(c.as_bytes());
            while let Some(l) = codec.decode(&mut buf).unwrap() {
                push(l);
            }
        }
        while let Some(l) = codec.decode_eof(&mut buf).unwrap() {
            push(l);
        }
        out
    }

    #[test]
    fn lines_split_and_bound() {
        let mut c = LineCodec::new(5);
        assert_eq!(
            feed(&mut c, &["ab\ncd", "e\r\n\n  \n123456789", "0\nxy"]),
            ["ab", "cde", "<too long: 10>", "xy"]
        );
        // An over-long line split across many reads is reported once, whole.
        let mut c = LineCodec::new(3);
        assert_eq!(
            feed(&mut c, &["abcd", "efgh", "ij\nok\n"]),
            ["<too long: 10>", "ok"]
        );
        let mut c = LineCodec::new(3);
        assert_eq!(feed(&mut c, &["abcdef"]), ["<too long: 6>"]);
        // A line arriving a byte at a time (each read searches only the new bytes),
        // then two lines and the start of a third in one read.
        let mut c = LineCodec::new(64);
        let bytes: Vec<String> = "{\"a\":1}\n".chars().map(String::from).collect();
        let mut chunks: Vec<&str> = bytes.iter().map(String::as_str).collect();
        chunks.extend(["x\ny\nz", "z\n"]);
        assert_eq!(feed(&mut c, &chunks), ["{\"a\":1}", "x", "y", "zz"]);
    }

    #[test]
    fn an_upstream_line_over_the_limit_is_reported_as_it_crosses_it() {
        let unfinished = Arc::new(Unfinished::new());
        let mut c = LineCodec::upstream(5, unfinished.clone());
        let mut buf = BytesMut::new();
        buf.extend_from_slice(b"ab\ncd");
        assert!(matches!(c.decode(&mut buf).unwrap(), Some(Line::Frame(l)) if &l[..] == b"ab"));
        assert!(c.decode(&mut buf).unwrap().is_none());
        // The unfinished "cd" is published, and was just added to.
        let (len, since) = unfinished.get().unwrap();
        assert_eq!(len, 2);
        assert!(since < Duration::from_secs(5), "{since:?}");
        // Past the limit, with no newline in sight: reported now, not at its end.
        buf.extend_from_slice(b"efgh");
        assert!(matches!(
            c.decode(&mut buf).unwrap(),
            Some(Line::TooLong { size: 6 })
        ));
        assert!(unfinished.get().is_none());
        // A line that ends is no longer unfinished.
        let mut c = LineCodec::upstream(64, unfinished.clone());
        let mut buf = BytesMut::from(&b"{\"a\""[..]);
        assert!(c.decode(&mut buf).unwrap().is_none());
        assert_eq!(unfinished.get().map(|u| u.0), Some(4));
        buf.extend_from_slice(b":1}\n");
        assert!(matches!(c.decode(&mut buf).unwrap(), Some(Line::Frame(_))));
        assert!(c.decode(&mut buf).unwrap().is_none());
        assert!(unfinished.get().is_none());
    }

    #[test]
    fn frames_are_written_on_one_line() {
        let f = codec::parse_frame(
            "{\n  \"jsonrpc\": \"2.0\",\r\n  \"method\": \"a\\nb\"\n}".to_owned(),
            &Limits::default(),
        )
        .unwrap();
        let line = one_line(&f);
        assert!(!line.contains('\n') && !line.contains('\r'));
        let again = codec::parse_frame(line.into_owned(), &Limits::default()).unwrap();
        assert_eq!(again.method(), Some("a\nb"));
    }
}
