//! Accepting connections within a budget, for the listeners any local user can reach:
//! the daemon's Unix socket and TCP listener, and the metrics listener.
//!
//! A connection is *pending* from its accept until a request on it passes the
//! listener's guard (Host, Origin, token: the guard calls [`Admission::admit`]), then
//! *admitted*. The two are counted apart, so connections that never pass the guard
//! (an idle flood, a slowloris, a page's probes) cannot use up the places of those
//! that do:
//!
//! * Pending connections have a budget of their own ([`Limits::max_pending`]) and a
//!   deadline ([`Limits::pending_within`]): one not admitted by then is cut.
//! * Admitted connections are bounded by [`Limits::max_connections`].
//! * At either limit, room is made by cutting one *idle* connection of that kind (no
//!   request in flight): one that has sent nothing yet before one that has, then the
//!   oldest of the peer that holds the most. Only when every
//!   one is busy is the newcomer refused: a new pending connection is closed at once;
//!   a connection admitted over the limit is served its request but stays pending,
//!   so its deadline ends it.
//! * A connection with a request in flight (a response being written, an event
//!   stream open) is never cut: streams have bounds of their own.
//!
//! Peers are told apart by address; on loopback every local user is one peer, so
//! the rule that protects them there is "idle goes first".

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming};
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The bounds of one listener's connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Admitted connections held at once.
    pub max_connections: usize,
    /// Pending connections held at once.
    pub max_pending: usize,
    /// How long a connection may stay pending before it is cut.
    pub pending_within: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_pending: 256,
            pending_within: Duration::from_secs(5),
        }
    }
}

/// Who is at the other end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// A TCP peer, by address.
    Ip(IpAddr),
    /// A Unix socket peer (its uid checked by the listener).
    Local,
}

#[derive(Debug)]
struct Entry {
    peer: Peer,
    admitted: bool,
    /// Whether a byte has come from the peer.
    spoke: bool,
    in_flight: u32,
    cut: CancellationToken,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    /// By age: the smallest key is the oldest.
    conns: BTreeMap<u64, Entry>,
    pending: usize,
    refused: u64,
    warned: Option<Instant>,
}

impl State {
    fn admitted(&self) -> usize {
        self.conns.len() - self.pending
    }

    /// Cuts the idle connection of kind `admitted` that goes first (see the module
    /// doc); `false` when each one of that kind is busy.
    fn cut_one(&mut self, admitted: bool) -> bool {
        let mut per_peer: HashMap<Peer, usize> = HashMap::new();
        for e in self.conns.values().filter(|e| e.admitted == admitted) {
            *per_peer.entry(e.peer).or_default() += 1;
        }
        let victim = self
            .conns
            .iter()
            .filter(|(_, e)| e.admitted == admitted && e.in_flight == 0)
            .min_by_key(|(id, e)| {
                (
                    e.spoke,
                    std::cmp::Reverse(per_peer.get(&e.peer).copied().unwrap_or(0)),
                    **id,
                )
            })
            .map(|(id, _)| *id);
        let Some(id) = victim else { return false };
        if let Some(e) = self.conns.remove(&id) {
            if !e.admitted {
                self.pending -= 1;
            }
            e.cut.cancel();
        }
        true
    }

    /// Counts a refused connection, and says so.
    fn refused(&mut self, what: &str) {
        self.refused += 1;
        self.warn(&format!(
            "refused a connection: {what}, each with a request in flight"
        ));
    }

    /// Logs `message` at most every ten seconds, with the refusals so far.
    fn warn(&mut self, message: &str) {
        let now = Instant::now();
        if self
            .warned
            .is_none_or(|w| now.duration_since(w) >= Duration::from_secs(10))
        {
            self.warned = Some(now);
            tracing::warn!(refused = self.refused, "{message}");
        }
    }
}

/// One listener's connections, counted against its [`Limits`].
#[derive(Debug)]
pub struct Budget {
    limits: Limits,
    state: Mutex<State>,
}

/// How many connections a [`Budget`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Pending connections.
    pub pending: usize,
    /// Admitted connections.
    pub admitted: usize,
    /// Connections refused since the start, every place being busy.
    pub refused: u64,
}

impl Budget {
    /// A budget with these limits.
    pub fn new(limits: Limits) -> Arc<Budget> {
        Arc::new(Budget {
            limits,
            state: Mutex::new(State::default()),
        })
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// How many connections it holds.
    pub fn counts(&self) -> Counts {
        let s = self.state.lock();
        Counts {
            pending: s.pending,
            admitted: s.admitted(),
            refused: s.refused,
        }
    }

    /// Counts a new connection from `peer`, pending or already `admitted` (a peer
    /// the listener has checked itself), making room if needed; `None`: refused.
    pub fn open(self: &Arc<Self>, peer: Peer, admitted: bool) -> Option<Ticket> {
        let mut s = self.state.lock();
        let (held, limit) = if admitted {
            (s.admitted(), self.limits.max_connections)
        } else {
            (s.pending, self.limits.max_pending)
        };
        if held >= limit && !s.cut_one(admitted) {
            s.refused(if admitted {
                "every admitted place is taken"
            } else {
                "every pending place is taken"
            });
            return None;
        }
        s.next += 1;
        let id = s.next;
        let cut = CancellationToken::new();
        s.conns.insert(
            id,
            Entry {
                peer,
                admitted,
                spoke: false,
                in_flight: 0,
                cut: cut.clone(),
            },
        );
        if !admitted {
            s.pending += 1;
        }
        Some(Ticket {
            admission: Admission {
                budget: self.clone(),
                id,
            },
            cut,
            opened: tokio::time::Instant::now(),
        })
    }

    fn admit(&self, id: u64) {
        let mut s = self.state.lock();
        match s.conns.get(&id) {
            Some(e) if !e.admitted => {}
            _ => return,
        }
        if s.admitted() >= self.limits.max_connections && !s.cut_one(true) {
            s.warn(
                "a connection passed the checks with every admitted place busy: it is served, not kept",
            );
            return;
        }
        if let Some(e) = s.conns.get_mut(&id) {
            e.admitted = true;
            s.pending -= 1;
        }
    }

    fn spoke(&self, id: u64) {
        if let Some(e) = self.state.lock().conns.get_mut(&id) {
            e.spoke = true;
        }
    }

    fn admitted(&self, id: u64) -> bool {
        self.state.lock().conns.get(&id).is_some_and(|e| e.admitted)
    }

    fn busy(&self, id: u64, by: i32) {
        if let Some(e) = self.state.lock().conns.get_mut(&id) {
            e.in_flight = e.in_flight.saturating_add_signed(by);
        }
    }

    fn close(&self, id: u64) {
        let mut s = self.state.lock();
        if let Some(e) = s.conns.remove(&id)
            && !e.admitted
        {
            s.pending -= 1;
        }
    }
}

/// One connection's place in a [`Budget`], given back when dropped.
#[derive(Debug)]
pub struct Ticket {
    admission: Admission,
    cut: CancellationToken,
    opened: tokio::time::Instant,
}

impl Ticket {
    /// The handle a guard admits the connection with.
    pub fn admission(&self) -> Admission {
        self.admission.clone()
    }

    /// Resolves when the connection must end: cut to make room, or still pending at
    /// its deadline.
    pub async fn ended(&self) {
        let deadline = self.opened + self.admission.budget.limits.pending_within;
        tokio::select! {
            () = self.cut.cancelled() => {}
            () = async {
                tokio::time::sleep_until(deadline).await;
                if self.admission.admitted() {
                    self.cut.cancelled().await;
                }
            } => {}
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.budget.close(self.admission.id);
    }
}

/// A connection's admission, carried by each of its requests as an extension: the
/// listener's guard calls [`Admission::admit`] when a request passes it.
#[derive(Debug, Clone)]
pub struct Admission {
    budget: Arc<Budget>,
    id: u64,
}

impl Admission {
    /// The connection passed the guard: it is admitted (when there is room).
    pub fn admit(&self) {
        self.budget.admit(self.id);
    }

    /// Whether the connection is admitted.
    pub fn admitted(&self) -> bool {
        self.budget.admitted(self.id)
    }

    /// Admits the connection of `req`, if it carries an admission.
    pub fn admit_request<B>(req: &hyper::Request<B>) {
        if let Some(a) = req.extensions().get::<Admission>() {
            a.admit();
        }
    }

    fn begin(&self) -> InFlight {
        self.budget.busy(self.id, 1);
        InFlight(self.clone())
    }
}

/// A request in flight on a connection, until its response's body ends.
#[derive(Debug)]
struct InFlight(Admission);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.budget.busy(self.0.id, -1);
    }
}

/// A response body that keeps its request counted in flight until it ends.
#[derive(Debug)]
pub struct Counted<B> {
    inner: B,
    _in_flight: InFlight,
}

impl<B> Body for Counted<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// A connection's service: `inner`, with each request carrying the connection's
/// [`Admission`] and counted in flight until its response ends.
#[derive(Debug, Clone)]
pub struct Counting<S> {
    inner: S,
    admission: Admission,
}

impl<S, B> hyper::service::Service<hyper::Request<Incoming>> for Counting<S>
where
    S: hyper::service::Service<hyper::Request<Incoming>, Response = hyper::Response<B>>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Unpin,
{
    type Response = hyper::Response<Counted<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn call(&self, mut req: hyper::Request<Incoming>) -> Self::Future {
        let in_flight = self.admission.begin();
        req.extensions_mut().insert(self.admission.clone());
        let answer = self.inner.call(req);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|inner| Counted {
                inner,
                _in_flight: in_flight,
            }))
        })
    }
}

/// A connection's stream, which marks its entry when the first bytes come.
struct Heard<T> {
    inner: T,
    admission: Option<Admission>,
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Heard<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before
            && let Some(a) = self.admission.take()
        {
            a.budget.spoke(a.id);
        }
        polled
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Heard<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A listener [`run`] accepts from.
pub trait Accept: Send + 'static {
    /// Its connections.
    type Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static;

    /// The next connection, its peer and whether it is admitted already; `Ok(None)`
    /// for one the listener refused itself (it was closed).
    fn accept(
        &mut self,
    ) -> impl Future<Output = io::Result<Option<(Self::Stream, Peer, bool)>>> + Send;
}

impl Accept for tokio::net::TcpListener {
    type Stream = tokio::net::TcpStream;

    async fn accept(&mut self) -> io::Result<Option<(Self::Stream, Peer, bool)>> {
        let (stream, addr) = tokio::net::TcpListener::accept(self).await?;
        let _ = stream.set_nodelay(true);
        Ok(Some((stream, Peer::Ip(addr.ip()), false)))
    }
}

/// How [`run`] serves: hyper's settings for each connection, and how long open
/// connections get to finish once `stop` fires.
#[derive(Debug, Clone, Copy)]
pub struct Serving {
    /// Each connection's settings.
    pub settings: crate::serve::Settings,
    /// The drain's bound at shutdown.
    pub grace: Duration,
}

/// Serves `service` on each connection `listener` accepts, within `budget`, until
/// `stop`; then waits up to `serving.grace` for open connections. `hold` is called
/// for each connection, and what it gives is dropped when the connection ends.
pub async fn run<L, S, B, H>(
    mut listener: L,
    budget: Arc<Budget>,
    service: S,
    serving: Serving,
    hold: impl Fn() -> H,
    stop: CancellationToken,
) where
    L: Accept,
    S: hyper::service::Service<hyper::Request<Incoming>, Response = hyper::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    H: Send + 'static,
{
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = stop.cancelled() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let (stream, peer, admitted) = match accepted {
            Ok(Some(a)) => a,
            Ok(None) => continue,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(ticket) = budget.open(peer, admitted) else {
            continue;
        };
        let svc = Counting {
            inner: service.clone(),
            admission: ticket.admission(),
        };
        let stream = Heard {
            inner: stream,
            admission: (!admitted).then(|| ticket.admission()),
        };
        let (stop, held) = (stop.clone(), hold());
        conns.spawn(async move {
            tokio::select! {
                () = crate::serve::connection(stream, svc, stop, serving.settings) => {}
                // Only an idle or a pending connection is cut: dropping it closes it.
                () = ticket.ended() => {}
            }
            drop(ticket);
            drop(held);
        });
        // The new connection's task reads its head before more are accepted: under a
        // flood, a host's request is then in flight (never cut) at once.
        tokio::task::yield_now().await;
    }
    let drained = tokio::time::timeout(serving.grace, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        conns.abort_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: Peer = Peer::Ip(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));

    fn budget(max_connections: usize, max_pending: usize) -> Arc<Budget> {
        Budget::new(Limits {
            max_connections,
            max_pending,
            pending_within: Duration::from_secs(5),
        })
    }

    #[test]
    fn a_full_pending_budget_cuts_its_oldest_idle_connection() {
        let b = budget(4, 2);
        let first = b.open(LOCAL, false).unwrap();
        let second = b.open(LOCAL, false).unwrap();
        let third = b.open(LOCAL, false).unwrap();
        assert!(first.cut.is_cancelled(), "the oldest went");
        assert!(!second.cut.is_cancelled() && !third.cut.is_cancelled());
        assert_eq!(b.counts().pending, 2);
    }

    #[test]
    fn a_connection_that_has_sent_nothing_goes_before_one_that_has() {
        let b = budget(4, 2);
        let spoke = b.open(LOCAL, false).unwrap();
        b.spoke(spoke.admission.id);
        let silent = b.open(LOCAL, false).unwrap();
        let _third = b.open(LOCAL, false).unwrap();
        assert!(silent.cut.is_cancelled(), "the silent one, though newer");
        assert!(!spoke.cut.is_cancelled());
    }

    #[test]
    fn a_connection_with_a_request_in_flight_is_never_cut() {
        let b = budget(4, 1);
        let busy = b.open(LOCAL, false).unwrap();
        let _req = busy.admission().begin();
        assert!(
            b.open(LOCAL, false).is_none(),
            "refused: the one place is busy"
        );
        assert!(!busy.cut.is_cancelled());
        assert_eq!(b.counts().refused, 1);
    }

    #[test]
    fn pending_connections_never_take_an_admitted_place() {
        let b = budget(1, 1);
        let host = b.open(LOCAL, false).unwrap();
        host.admission().admit();
        assert_eq!(
            b.counts(),
            Counts {
                pending: 0,
                admitted: 1,
                refused: 0
            }
        );
        for _ in 0..10 {
            let _flood = b.open(LOCAL, false).unwrap();
        }
        assert!(!host.cut.is_cancelled(), "the flood cut only its own kind");
        drop(host);
        assert_eq!(
            b.counts().admitted,
            0,
            "a dropped ticket gives its place back"
        );
    }

    #[test]
    fn the_peer_holding_the_most_loses_first() {
        let b = budget(3, 8);
        let other = Peer::Ip(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)));
        let theirs = b.open(other, true).unwrap();
        let a = b.open(LOCAL, true).unwrap();
        let c = b.open(LOCAL, true).unwrap();
        let _d = b.open(LOCAL, true).unwrap();
        assert!(a.cut.is_cancelled(), "the oldest of the biggest peer");
        assert!(!theirs.cut.is_cancelled() && !c.cut.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_still_pending_at_its_deadline_ends() {
        let b = budget(4, 4);
        let pending = b.open(LOCAL, false).unwrap();
        let admitted = b.open(LOCAL, false).unwrap();
        admitted.admission().admit();
        tokio::time::timeout(Duration::from_secs(6), pending.ended())
            .await
            .expect("cut at 5 s");
        assert!(
            tokio::time::timeout(Duration::from_secs(60), admitted.ended())
                .await
                .is_err(),
            "an admitted connection has no deadline"
        );
    }
}
