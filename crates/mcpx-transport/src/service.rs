//! The server-side seam: what a transport hands to the layer above, and what that layer
//! can send back.
//!
//! A transport reads frames, classifies them with `mcpx_protocol::classify`, and calls
//! a [`Service`]: [`Service::request`] for each request (concurrently), and
//! [`Service::notification`] for each notification. The service answers a request by
//! returning the response frame; before that it may send notifications related to the
//! request through [`RequestCtx::notify`] (progress, logging), and, on legacy
//! connections only, requests to the client through [`RequestCtx::request`] (sampling,
//! elicitation, roots, ping).
//!
//! Everything era-specific about *carrying* those frames is the transport's: whether a
//! POST is answered with JSON or SSE, where a server-to-client request travels, what
//! cancels a request. The service sees only frames, verdicts and a cancellation token.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mcpx_protocol::trace::TraceContext;
use mcpx_protocol::{Frame, Revision, Verdict};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::pending::{PeerError, Pending};

/// One message from a client, with the era and revision it is to be handled in.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// The frame as received.
    pub frame: Frame,
    /// Era and revision, from classification.
    pub verdict: Verdict,
}

/// `service.request(req, ctx)` with its future boxed at once, for a transport that
/// runs the request in a future of its own (a task, or a handler it may detach). A
/// request's future is the whole of the service's call path (about 4 KiB for the
/// gateway's), and a future held by value is moved whole before it is first polled:
/// into the enclosing future, then again to be awaited. Boxed, those moves are a
/// pointer's, and the enclosing future is small (callgrind: three 4 KiB copies per
/// call before).
pub fn boxed_request<S: Service>(
    service: &S,
    req: Incoming,
    ctx: RequestCtx,
) -> std::pin::Pin<Box<impl Future<Output = Frame> + Send + '_>> {
    Box::pin(service.request(req, ctx))
}

/// The layer above a server transport: the gateway's serve seam, the example server,
/// a test's echo server.
pub trait Service: Send + Sync + 'static {
    /// Answers one request. The returned frame must be the response to
    /// `req.frame.id()`. Called concurrently for concurrent requests.
    fn request(&self, req: Incoming, ctx: RequestCtx) -> impl Future<Output = Frame> + Send;

    /// Takes one notification from the client. `peer` is the legacy connection it came
    /// on, if any. The transport has already applied `notifications/cancelled` to the
    /// request it names.
    fn notification(&self, n: Incoming, peer: Option<Peer>) -> impl Future<Output = ()> + Send;

    /// A legacy session began: a successful `initialize` opened it. Each session
    /// opened is closed once ([`Service::session_closed`]), unless mcpx exits first.
    /// Default: nothing.
    fn session_opened(&self, _peer: &Peer) {}

    /// A legacy session ended (DELETE, expiry, end of stdio). Default: nothing.
    fn session_closed(&self, _peer: &Peer) {}

    /// Where this service publishes the `x-mcp-header` annotations of the tools it
    /// offers ([`ParamHeaders`]), so the transport can check a modern `tools/call`'s
    /// `Mcp-Param-*` headers against its body (2026-07-28
    /// basic/transports/streamable-http §Custom Headers from Tool Parameters, §Server
    /// Validation: a missing or mismatching header is 400 + -32020). Asked once, when
    /// a server is built for the service; the transport then reads the handle, never
    /// the service. Default: an empty table, so no `Mcp-Param-*` header is expected
    /// or checked. A service that annotates its tools must publish the annotations
    /// it lists.
    fn param_headers(&self) -> ParamHeaders {
        ParamHeaders::default()
    }
}

/// The `x-mcp-header` annotations of a service's tools, by the name each is offered
/// under (from its `inputSchema`, see `mcpx_protocol::header::param_headers`): a
/// snapshot handle the service publishes a new table to when its tools change, and
/// the Streamable HTTP server reads per request. Clones share the table.
#[derive(Debug, Clone, Default)]
pub struct ParamHeaders(Arc<parking_lot::RwLock<Arc<ParamHeaderTable>>>);

/// Tool name to its `Mcp-Param-*` annotations; tools without any are left out.
pub type ParamHeaderTable = HashMap<String, Vec<mcpx_protocol::header::ParamHeader>>;

impl ParamHeaders {
    /// A handle holding `table`.
    pub fn new(table: ParamHeaderTable) -> ParamHeaders {
        ParamHeaders(Arc::new(parking_lot::RwLock::new(Arc::new(table))))
    }

    /// Replaces the table every clone of this handle reads.
    pub fn publish(&self, table: ParamHeaderTable) {
        *self.0.write() = Arc::new(table);
    }

    /// The table in force (a snapshot: a later publish does not change it).
    pub fn snapshot(&self) -> Arc<ParamHeaderTable> {
        self.0.read().clone()
    }
}

/// Where frames related to one request go: the request's SSE stream on HTTP, stdout on
/// stdio.
#[derive(Debug, Clone)]
pub(crate) struct Related(pub(crate) mpsc::Sender<Frame>);

/// What a service may do while answering one request.
#[derive(Debug, Clone)]
pub struct RequestCtx {
    cancel: CancellationToken,
    related: Related,
    peer: Option<Peer>,
    carrier: Carrier,
    /// The trace context of the HTTP request that carried this one (its
    /// `traceparent` and `tracestate` headers), if it had a valid one.
    trace: Option<Arc<TraceContext>>,
}

/// The transport a host's request arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// stdio.
    Stdio,
    /// Streamable HTTP.
    StreamableHttp,
    /// The 2024-11-05 HTTP+SSE transport.
    Sse,
    /// Made in-process, not read from a transport (the daemon's `/v1` API).
    InProcess,
}

impl Carrier {
    /// Its name in the call history: `stdio`, `streamable_http`, `sse` or `api`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Carrier::Stdio => "stdio",
            Carrier::StreamableHttp => "streamable_http",
            Carrier::Sse => "sse",
            Carrier::InProcess => "api",
        }
    }
}

/// The client is gone, or the request's stream was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the client's stream for this request is closed")]
pub struct Closed;

impl RequestCtx {
    pub(crate) fn new(cancel: CancellationToken, related: Related, peer: Option<Peer>) -> Self {
        RequestCtx {
            cancel,
            related,
            peer,
            carrier: Carrier::StreamableHttp,
            trace: None,
        }
    }

    /// Attaches the trace context of the HTTP request that carried this one.
    pub(crate) fn with_trace(mut self, trace: Option<Arc<TraceContext>>) -> Self {
        self.trace = trace;
        self
    }

    /// The trace context the transport carried this request with (HTTP headers);
    /// `None` on stdio, and when there was none or it was invalid. The message's own
    /// `_meta` may carry one too: the service decides between them.
    pub fn trace(&self) -> Option<&Arc<TraceContext>> {
        self.trace.as_ref()
    }

    /// The context of a request made in-process rather than read from a transport
    /// (the daemon's `/v1` API): `cancel` cancels it, related frames (progress, logs)
    /// go to `related`, and there is no legacy peer, as for a modern request.
    pub fn in_process(cancel: CancellationToken, related: mpsc::Sender<Frame>) -> Self {
        let mut ctx = RequestCtx::new(cancel, Related(related), None);
        ctx.carrier = Carrier::InProcess;
        ctx
    }

    /// Marks a request that arrived on stdio.
    pub(crate) fn on_stdio(mut self) -> Self {
        self.carrier = Carrier::Stdio;
        self
    }

    /// Marks a request that arrived on the 2024-11-05 HTTP+SSE transport.
    pub(crate) fn on_sse(mut self) -> Self {
        self.carrier = Carrier::Sse;
        self
    }

    /// The transport the request arrived on.
    pub fn carrier(&self) -> Carrier {
        self.carrier
    }

    /// Whether the request arrived on stdio. A few rules depend on the transport
    /// itself, not the revision: on 2026-07-28 stdio a server ending a
    /// `subscriptions/listen` sends `notifications/cancelled` for it first (schema
    /// CancelledNotification: "On stdio, the server also sends this notification";
    /// register H1), on HTTP it does not.
    pub fn is_stdio(&self) -> bool {
        self.carrier == Carrier::Stdio
    }

    /// Fires when the client cancels the request: `notifications/cancelled` (stdio, and
    /// legacy HTTP), or closing the response stream on modern HTTP (2026-07-28
    /// basic/patterns/cancellation; register H3). A dropped legacy HTTP connection does
    /// not fire it (2025-11-25 basic/transports: "SHOULD NOT").
    pub fn cancelled(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Sends a notification related to this request (progress, a log message).
    pub async fn notify(&self, frame: Frame) -> Result<(), Closed> {
        self.related.0.send(frame).await.map_err(|_| Closed)
    }

    /// The legacy connection this request came on; `None` on modern requests, to which a
    /// server never sends requests (2026-07-28 basic/patterns: "Servers MUST NOT initiate
    /// JSON-RPC requests").
    pub fn peer(&self) -> Option<&Peer> {
        self.peer.as_ref()
    }

    /// Sends a request to the client, related to this request (so on HTTP it travels on
    /// this request's SSE stream), and waits for the client's response.
    pub async fn request(
        &self,
        method: &str,
        params: Option<&RawValue>,
        timeout: Duration,
    ) -> Result<Frame, PeerError> {
        let peer = self.peer.as_ref().ok_or(PeerError::NoLegacyPeer)?;
        peer.pending
            .call(method, params, timeout, &self.related.0)
            .await
    }
}

/// A legacy connection (a stdio process after `initialize`, an HTTP session): what the
/// server can reach outside any one request.
#[derive(Debug, Clone)]
pub struct Peer {
    pub(crate) revision: Revision,
    pub(crate) session_id: Option<Arc<str>>,
    pub(crate) outbound: mpsc::Sender<Frame>,
    pub(crate) pending: Arc<Pending>,
    /// The `params` of the `initialize` request that opened the session.
    pub(crate) initialize_params: Option<Arc<str>>,
    /// Their `capabilities`, read once: every request of the session carries them
    /// (register A-C16), and re-reading the params cost each call a walk of them.
    pub(crate) client_capabilities: Arc<Value>,
    /// The client sent `notifications/initialized` on this connection.
    pub(crate) initialized: Arc<AtomicBool>,
}

impl Peer {
    /// The legacy connection an `initialize` with `initialize_params` opened at
    /// `revision`. Its client capabilities are read here, once (`null` when there are
    /// none, or they are not JSON).
    pub(crate) fn open(
        revision: Revision,
        session_id: Option<Arc<str>>,
        outbound: mpsc::Sender<Frame>,
        pending: Arc<Pending>,
        initialize_params: Option<Arc<str>>,
    ) -> Peer {
        let client_capabilities = Arc::new(
            initialize_params
                .as_deref()
                .and_then(|p| mcpx_protocol::jsonrpc::member(p, "capabilities"))
                .and_then(|c| serde_json::from_str(c).ok())
                .unwrap_or(Value::Null),
        );
        Peer {
            revision,
            session_id,
            outbound,
            pending,
            initialize_params,
            client_capabilities,
            initialized: Arc::default(),
        }
    }

    /// The client capabilities the session declared at `initialize` (`null` when it
    /// declared none).
    pub fn client_capabilities(&self) -> &Arc<Value> {
        &self.client_capabilities
    }

    /// The raw `params` of the `initialize` request that opened this session (the
    /// client's capabilities and info live there for the whole session).
    pub fn initialize_params(&self) -> Option<&str> {
        self.initialize_params.as_deref()
    }

    /// [`Peer::initialize_params`], shared: the same `Arc` for every request of the
    /// session, so a reader can tell a session it has seen by pointer.
    pub fn initialize_shared(&self) -> Option<&Arc<str>> {
        self.initialize_params.as_ref()
    }

    /// Whether the client has sent `notifications/initialized`. Before it, every legacy
    /// basic/lifecycle §Initialization says the server "SHOULD NOT send requests other
    /// than pings and logging" (register A-C8, read literally: requests only).
    pub fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::Acquire)
    }

    /// Records `frame` if it is the client's `notifications/initialized`.
    pub(crate) fn observe(&self, frame: &Frame) {
        if frame.method() == Some("notifications/initialized") {
            self.initialized.store(true, Ordering::Release);
        }
    }

    /// The negotiated revision.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// The HTTP session id; `None` on stdio.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// [`Peer::session_id`], shared.
    pub fn session_shared(&self) -> Option<&Arc<str>> {
        self.session_id.as_ref()
    }

    /// Whether the connection or session is gone (nothing reads its outbound frames any
    /// more): a closed, expired, evicted or deleted session.
    pub fn is_closed(&self) -> bool {
        self.outbound.is_closed()
    }

    /// Sends an unsolicited notification (list_changed, resources/updated, a log message).
    /// On HTTP it travels on the session's GET stream; when none is open it is dropped
    /// with a log line, as there is no other way to deliver it.
    pub async fn notify(&self, frame: Frame) -> Result<(), Closed> {
        self.outbound.send(frame).await.map_err(|_| Closed)
    }

    /// Sends an unsolicited request to the client (on HTTP, on the GET stream) and waits
    /// for its response.
    pub async fn request(
        &self,
        method: &str,
        params: Option<&RawValue>,
        timeout: Duration,
    ) -> Result<Frame, PeerError> {
        self.pending
            .call(method, params, timeout, &self.outbound)
            .await
    }
}
