//! Streamable HTTP, both eras on one endpoint.
//!
//! Each request is classified by `classify_http` (header, session, body), then:
//!
//! **Legacy** (2025-03-26..2025-11-25 basic/transports §Streamable HTTP):
//!
//! * A POSTed request is answered with `application/json` when the response is the
//!   first thing the service produces, or with `text/event-stream` as soon as a related
//!   notification or request comes first; the response then ends the stream.
//! * Sessions are minted only by a successful `initialize` result (§Session
//!   Management), ids are 16 random bytes, hex; an unknown session is 404, a
//!   non-initialize request without one is 400 (`ping` excepted: basic/lifecycle allows
//!   it before initialisation), DELETE ends a session (204).
//! * Where the listener asks for tokens, a session is bound to the credential of the
//!   `initialize` that created it (2025-11-25 basic/security_best_practices §Session
//!   Hijacking): to a request with another, its POSTs, GETs and DELETE, the session
//!   does not exist (404, the unknown session's answer, which tells it nothing).
//! * GET opens the session's server stream, where `Peer` messages travel. **Choice:**
//!   one GET stream per session; a second concurrent GET gets 409 Conflict, except a
//!   GET carrying `Last-Event-ID`, which replaces the old connection (the client says
//!   it lost it).
//! * Every legacy SSE event has an id `<stream>-<seq>` (stream 0 is the GET stream,
//!   1.. are POST streams), unique within the session (2025-11-25 §Resumability and
//!   Redelivery). Events are kept in a bounded per-session buffer; a GET with
//!   `Last-Event-ID` replays the events of that stream after that id, then continues it
//!   if it is still live (resumption is "always via HTTP GET", 2025-11-25). Events
//!   evicted from the buffer are lost. Messages for the GET stream while it has never
//!   been opened are dropped with a log line (nowhere to deliver them); once it has
//!   been opened they are buffered across reconnects.
//! * 2025-11-25 §Sending Messages to the Server: a priming event (an id, empty data)
//!   starts each new stream when the revision has `facts().sse_priming`.
//! * Disconnect is not cancellation (register B-C6: "SHOULD NOT"); the request runs on
//!   and its events are buffered for resumption. `notifications/cancelled` cancels,
//!   and the cancelled request's response is not sent (basic/utilities/cancellation:
//!   "Not send a response for the cancelled request"): its SSE stream ends without
//!   it, or, if nothing was streamed yet, the POST gets an empty event stream.
//! * The session's revision governs its requests. **Choice:** a request in a session
//!   without `MCP-Protocol-Version` is served in the session's revision (B-C8's
//!   "assume 2025-03-26" is for clients that never send it, i.e. 2025-03-26
//!   sessions); a header naming another supported legacy revision than the session's
//!   is served in the session's revision too (400 is for unsupported versions only).
//! * Batches: 2025-03-26 only (`codec::admit`), answered with a JSON array, or 202 when
//!   they held no request. Related messages of batched requests go to the GET stream.
//! * `initialize` is always answered with JSON (it has no session yet to stream in);
//!   related messages a service sends before its `initialize` result are dropped.
//!
//! **Modern** (2026-07-28 basic/transports/streamable-http): POST only (GET and DELETE
//! are 405, §Earlier Streamable HTTP Revisions); `Mcp-Session-Id` and `Last-Event-ID`
//! are ignored, no session is minted; `header::validate` checks `Mcp-Method`/`Mcp-Name`,
//! and on `tools/call` the `Mcp-Param-*` headers the tool's `x-mcp-header` annotations
//! name, as [`Service::param_headers`] reports them (400, -32020, §Server Validation);
//! a method the revision lacks is 404 + -32601 (§Protocol Version Header, H10); the
//! response is JSON or a request-scoped SSE stream without ids or priming; closing that
//! stream or the connection before the response cancels the request (§Cancellation,
//! H3). A modern client never sends responses (B-C1): 400.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use mcpx_protocol::classify::{HttpMethod, HttpRequest, Rejection, classify_http};
use mcpx_protocol::codec::{self, Decoded};
use mcpx_protocol::error::modern_http_status;
use mcpx_protocol::error::{INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND};
use mcpx_protocol::header as mcp_header;
use mcpx_protocol::jsonrpc::{Kind, member};
use mcpx_protocol::method::{client_may_send, tasks_extension_client_method};
use mcpx_protocol::trace::TraceContext;
use mcpx_protocol::{Frame, Id, Revision, Verdict};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{
    App, Credential, OnDrop, To, accepted, accepts, error_response, first_request_id, fit_event,
    header_revision, is_json_content_type, json_response, refuse, refuse_with, sse_event,
    sse_response,
};
use crate::pending::{InFlight, Pending, cancelled_request_id};
use crate::service::{Incoming, Peer, Related, RequestCtx, Service, boxed_request};

/// `Last-Event-ID`.
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// `MCP-Protocol-Version` and `Mcp-Session-Id` as parsed names: looking a header up by
/// a `&str` parses (and lower-cases) the name again on every request.
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// Related frames queued per request before the service waits.
pub(crate) const RELATED_QUEUE: usize = 64;

/// The legacy sessions of the Streamable HTTP endpoint.
#[derive(Default)]
pub(crate) struct Sessions {
    /// By the ids mcpx chose (a host's header only looks them up): a fast hash.
    map: Mutex<HashMap<Arc<str>, Arc<Session>, foldhash::fast::RandomState>>,
}

/// One legacy session.
pub(crate) struct Session {
    id: Arc<str>,
    /// The credential of the request that created it, where the listener asks for
    /// one: only requests carrying the same one find the session.
    owner: Option<Credential>,
    peer: Peer,
    inflight: InFlight,
    log: Mutex<Log>,
    last_seen: Mutex<Instant>,
    closed: CancellationToken,
    channel_capacity: usize,
}

/// The session's SSE streams and the replay buffer.
struct Log {
    cap: usize,
    buffer: VecDeque<Buffered>,
    streams: HashMap<u64, Slot>,
    next_stream: u64,
    /// The GET stream has been opened at least once.
    get_opened: bool,
}

struct Buffered {
    stream: u64,
    seq: u64,
    event: Bytes,
}

struct Slot {
    next_seq: u64,
    tx: Option<mpsc::Sender<Bytes>>,
}

/// The GET stream's number.
const GET_STREAM: u64 = 0;

/// What looking a session up found.
enum Lookup {
    /// The session, now touched.
    Live(Arc<Session>),
    /// It had expired: it is now removed and closed; the service must hear of it.
    Expired(Arc<Session>),
    /// No such session.
    Unknown,
}

impl Sessions {
    /// The session `id`, for a request carrying `owner`: one created with another
    /// credential is unknown to it (and not touched).
    fn get(&self, id: &str, idle: std::time::Duration, owner: Option<Credential>) -> Lookup {
        let mut map = self.map.lock();
        let Some(s) = map.get(id).filter(|s| s.owner == owner).cloned() else {
            return Lookup::Unknown;
        };
        if s.expired(idle) {
            map.remove(id);
            drop(map);
            s.close();
            return Lookup::Expired(s);
        }
        s.touch();
        Lookup::Live(s)
    }

    /// Removes the session `id` if `owner` created it.
    fn remove(&self, id: &str, owner: Option<Credential>) -> Option<Arc<Session>> {
        let mut map = self.map.lock();
        if map.get(id)?.owner != owner {
            return None;
        }
        map.remove(id)
    }

    /// Drops expired sessions; returns them so the service hears of it.
    fn reap(&self, idle: std::time::Duration) -> Vec<Arc<Session>> {
        let mut map = self.map.lock();
        let dead: Vec<Arc<str>> = map
            .iter()
            .filter(|(_, s)| s.expired(idle))
            .map(|(k, _)| k.clone())
            .collect();
        dead.iter().filter_map(|k| map.remove(k)).collect()
    }

    fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// Removes the session idle the longest among those that nothing holds (no GET
    /// stream open, no request in flight either way), to make room for a new host of
    /// `owner`: abandoned sessions must not lock new hosts out. `owner`'s own idle
    /// sessions go first, so that a flood under one token evicts its own before any
    /// other token's. `None` when every session is busy.
    fn evict_idlest(&self, owner: Option<Credential>) -> Option<Arc<Session>> {
        let mut map = self.map.lock();
        let idlest = map
            .iter()
            .filter(|(_, s)| s.idle())
            .map(|(k, s)| (s.owner != owner, *s.last_seen.lock(), k.clone()))
            .min_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)))
            .map(|(_, _, k)| k)?;
        map.remove(&idlest)
    }

    fn insert(&self, s: Arc<Session>) {
        self.map.lock().insert(s.id.clone(), s);
    }
}

/// A fresh session id: 16 random bytes, hex (2025-03-26 §Session Management: globally
/// unique, cryptographically secure, visible ASCII).
pub(crate) fn new_session_id() -> Option<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).ok()?;
    Some(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl Session {
    fn touch(&self) {
        *self.last_seen.lock() = Instant::now();
    }

    fn get_connected(&self) -> bool {
        (self.log.lock().streams.get(&GET_STREAM))
            .and_then(|s| s.tx.as_ref())
            .is_some_and(|tx| !tx.is_closed())
    }

    /// Whether nothing holds the session: no GET stream open, no request of the host
    /// in flight, no request to the host awaiting its answer.
    fn idle(&self) -> bool {
        !self.get_connected() && self.inflight.is_empty() && self.peer.pending.is_empty()
    }

    fn expired(&self, idle: std::time::Duration) -> bool {
        let stale = self.last_seen.lock().elapsed() > idle;
        stale && !self.get_connected()
    }

    /// Ends the session: streams close, pending requests fail, in-flight requests are
    /// cancelled (the client ended the session; nothing can be delivered any more).
    fn close(&self) {
        self.closed.cancel();
        self.peer.pending.close_all();
        self.inflight.cancel_all();
        self.log.lock().streams.clear();
    }

    /// A new POST stream.
    fn open_stream(&self) -> u64 {
        let mut l = self.log.lock();
        let n = l.next_stream;
        l.next_stream += 1;
        l.streams.insert(
            n,
            Slot {
                next_seq: 0,
                tx: None,
            },
        );
        n
    }

    /// Attaches a new connection to `stream`: queues the priming event (fresh streams
    /// of revisions with `sse_priming`) or the replay of buffered events after
    /// `after`, then live events. A stream that is no longer live ends after the
    /// replay.
    fn attach(&self, stream: u64, after: Option<u64>, prime: bool) -> mpsc::Receiver<Bytes> {
        let (tx, rx) = mpsc::channel(self.channel_capacity);
        let mut l = self.log.lock();
        if let Some(after) = after {
            for b in l
                .buffer
                .iter()
                .filter(|b| b.stream == stream && b.seq > after)
            {
                let _ = tx.try_send(b.event.clone());
            }
        }
        if stream == GET_STREAM {
            l.get_opened = true;
        }
        if let Some(slot) = l.streams.get_mut(&stream) {
            if prime {
                // 2025-11-25 basic/transports §Resumability and Redelivery: "an SSE event
                // consisting of an event ID and an empty data field".
                let id = format!("{stream}-{}", slot.next_seq);
                slot.next_seq += 1;
                let _ = tx.try_send(sse_event(None, Some(&id), ""));
            }
            slot.tx = Some(tx);
        }
        rx
    }

    /// Assigns `data` the next id of `stream`, buffers it, and sends it to the
    /// stream's connection if one is attached.
    async fn emit(&self, stream: u64, data: &str) {
        let target = {
            let mut l = self.log.lock();
            if stream == GET_STREAM && !l.get_opened {
                tracing::info!(
                    session = %self.id,
                    "no GET stream was ever opened; dropping a server message"
                );
                return;
            }
            let cap = l.cap;
            let Some(slot) = l.streams.get_mut(&stream) else {
                return;
            };
            let seq = slot.next_seq;
            slot.next_seq += 1;
            let event = sse_event(None, Some(&format!("{stream}-{seq}")), data);
            let tx = slot.tx.clone();
            if cap > 0 {
                l.buffer.push_back(Buffered {
                    stream,
                    seq,
                    event: event.clone(),
                });
                while l.buffer.len() > cap {
                    l.buffer.pop_front();
                }
            }
            tx.map(|tx| (tx, event))
        };
        if let Some((tx, event)) = target {
            // A closed connection is not cancellation (B-C6): the event stays buffered.
            let _ = tx.send(event).await;
        }
    }

    /// The stream is complete: its connection ends after what is queued.
    fn end(&self, stream: u64) {
        self.log.lock().streams.remove(&stream);
    }
}

fn header_str(headers: &HeaderMap, name: HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A header for `header::validate`, looked up case-insensitively (RFC 9110 field
/// names; 2026-07-28 streamable-http §Case Sensitivity, register B-C21). A value that
/// is not visible ASCII is passed on as a single DEL, which no body value matches and
/// `decode_value` refuses: "Servers MUST reject requests with a recognized
/// `Mcp-Param-{Name}` header that contains invalid characters" (§Server Behavior for
/// Custom Headers).
fn modern_header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|v| v.to_str().unwrap_or("\u{7f}"))
}

/// The tool a `tools/call` names (`params.name`); `None` for other methods.
fn tool_name(frame: &Frame) -> Option<std::borrow::Cow<'_, str>> {
    if frame.method() != Some("tools/call") {
        return None;
    }
    mcpx_protocol::jsonrpc::string_value(frame.params_name()?)
}

fn rejection_response(r: &Rejection, to: To<'_>) -> Response {
    let status = StatusCode::from_u16(r.http_status).unwrap_or(StatusCode::BAD_REQUEST);
    refuse_with(status, to, &r.message, |id| r.to_response(id))
}

fn bad_request(to: To<'_>, msg: &str) -> Response {
    refuse(StatusCode::BAD_REQUEST, to, INVALID_REQUEST, msg)
}

/// An unknown session, an expired one, or one another credential created: the same
/// answer, so that it says nothing of sessions the client does not hold.
fn session_not_found(to: To<'_>) -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        to,
        INVALID_REQUEST,
        "session not found (it expired or was terminated); start a new one with initialize",
    )
}

/// What a legacy-only server (2025-03-26..2025-11-25) answers a request that is
/// neither `initialize` nor in a session: 400, with no 2026 error code, so that a
/// dual-era client probing it recognises a legacy server (2026-07-28
/// streamable-http §Backward Compatibility; register A-C14).
fn legacy_only_refusal(frame: &Frame, revision: Option<Revision>) -> Response {
    bad_request(
        To::new(frame.id(), revision),
        "missing Mcp-Session-Id: this server speaks only initialize-based protocol revisions",
    )
}

/// `POST {path}`.
pub(crate) async fn post<S: Service>(State(app): State<Arc<App<S>>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let headers = parts.headers;
    let owner = Credential::of_request(&parts.extensions);
    if !is_json_content_type(&headers) {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            To::new(None, header_revision(&headers)),
            INVALID_REQUEST,
            "Content-Type must be application/json",
        );
    }
    // Every revision's §Sending Messages: the client lists both types. Lenient: a
    // missing Accept is fine; one that admits neither is 406.
    if !accepts(&headers, &["application/json", "text/event-stream"]) {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            To::new(None, header_revision(&headers)),
            INVALID_REQUEST,
            "Accept must admit application/json or text/event-stream",
        );
    }
    let cfg = &app.config;
    let decoded = match super::read_frames(&headers, body, cfg).await {
        Ok(d) => d,
        Err(r) => return r,
    };
    let protocol_version = header_str(&headers, PROTOCOL_VERSION);
    let session_id = header_str(&headers, SESSION_ID);
    let trace = super::header_trace(&headers);
    let frame = match decoded {
        Decoded::Single(f) => f,
        // Boxed here and below: a rare path's future (which holds a whole service
        // call) stays out of every POST's, which axum boxes per request.
        batch @ Decoded::Batch(_) => {
            return Box::pin(post_batch(&app, batch, protocol_version, session_id, owner)).await;
        }
    };
    let verdict = match classify_http(&HttpRequest {
        method: HttpMethod::Post,
        protocol_version,
        session_id,
        body: Some(&frame),
    }) {
        Ok(v) => v,
        // A legacy-only server knows none of the 2026 rules it would be applying.
        Err(_) if !cfg.modern => return legacy_only_refusal(&frame, header_revision(&headers)),
        Err(r) => return rejection_response(&r, To::new(frame.id(), header_revision(&headers))),
    };
    match verdict {
        Verdict::Modern { .. } if !cfg.modern => {
            legacy_only_refusal(&frame, Some(verdict.revision()))
        }
        Verdict::Modern { .. } => modern_post(&app, &headers, frame, verdict, trace).await,
        Verdict::Legacy { .. } => {
            let http = Legacy {
                protocol_version,
                session_id,
                owner,
            };
            legacy_post(&app, frame, verdict, http, trace).await
        }
    }
}

/// What a legacy request's HTTP headers and guard say of its session.
#[derive(Clone, Copy)]
struct Legacy<'a> {
    protocol_version: Option<&'a str>,
    session_id: Option<&'a str>,
    /// The credential the request carried (`None` where none is asked for).
    owner: Option<Credential>,
}

/// The session a legacy message belongs to, or the answer it gets instead (for the
/// request `id`, if it has one).
fn legacy_session<S: Service>(
    app: &App<S>,
    http: Legacy<'_>,
    id: Option<&Id>,
) -> Result<Arc<Session>, Box<Response>> {
    let Legacy {
        protocol_version,
        session_id,
        owner,
    } = http;
    // Without a session, the revision the request names is its header's (read only
    // for a refusal).
    let to = || {
        To::new(
            id,
            protocol_version.and_then(|v| Revision::from_wire(v.trim())),
        )
    };
    let Some(sid) = session_id else {
        return Err(Box::new(bad_request(
            to(),
            "missing Mcp-Session-Id: send initialize first (2025-03-26+ basic/transports §Session Management)",
        )));
    };
    let session = match app
        .sessions
        .get(sid, app.config.session_idle_timeout, owner)
    {
        Lookup::Live(s) => s,
        Lookup::Expired(dead) => {
            // An expired session ends like a deleted one (`Service::session_closed`).
            app.service.session_closed(&dead.peer);
            return Err(Box::new(session_not_found(to())));
        }
        Lookup::Unknown => return Err(Box::new(session_not_found(to()))),
    };
    if let Some(h) = protocol_version.map(str::trim)
        && Revision::from_wire(h) != Some(session.peer.revision)
    {
        // 2025-11-25 basic/transports §Protocol Version Header: 400 is for an "invalid or
        // unsupported" version, and classification has already refused those. A
        // supported one that differs from the session's is served in the session's
        // revision, which governs everything the session does.
        tracing::debug!(
            header = h,
            session = %session.peer.revision,
            "MCP-Protocol-Version differs from the session's revision; serving the session's"
        );
    }
    Ok(session)
}

async fn legacy_post<S: Service>(
    app: &Arc<App<S>>,
    frame: Frame,
    verdict: Verdict,
    http: Legacy<'_>,
    trace: Option<Arc<TraceContext>>,
) -> Response {
    if let Verdict::Legacy {
        initialize: true, ..
    } = verdict
    {
        // Boxed, as the other rare paths below: each holds a whole service call.
        return Box::pin(initialize(app, frame, verdict, http.owner)).await;
    }
    if http.session_id.is_none() && frame.kind() == Kind::Request && frame.method() == Some("ping")
    {
        // basic/lifecycle §Initialization: pings are allowed before initialisation.
        let (tx, _rx) = mpsc::channel(1);
        let ctx = RequestCtx::new(CancellationToken::new(), Related(tx), None);
        let response = Box::pin(app.service.request(Incoming { frame, verdict }, ctx)).await;
        return json_response(StatusCode::OK, response.into_string());
    }
    let session = match legacy_session(app, http, frame.id()) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let verdict = Verdict::Legacy {
        revision: session.peer.revision,
        initialize: false,
    };
    match frame.kind() {
        Kind::Request => legacy_request(app, session, frame, verdict, trace).await,
        Kind::Notification => {
            if let Some(id) = (frame.method() == Some("notifications/cancelled"))
                .then(|| cancelled_request_id(&frame))
                .flatten()
            {
                session.inflight.cancel(&id);
            }
            let peer = session.peer.clone();
            peer.observe(&frame);
            Box::pin(
                app.service
                    .notification(Incoming { frame, verdict }, Some(peer)),
            )
            .await;
            accepted()
        }
        Kind::Result | Kind::Error => {
            if let Err(f) = session.peer.pending.complete(frame) {
                tracing::warn!(frame = %f, "dropped a response to no pending request");
            }
            accepted()
        }
    }
}

/// `initialize`: answered with JSON; a successful result opens a session at the
/// revision it names (every legacy basic/lifecycle §Version Negotiation).
async fn initialize<S: Service>(
    app: &Arc<App<S>>,
    frame: Frame,
    verdict: Verdict,
    owner: Option<Credential>,
) -> Response {
    let cfg = &app.config;
    for dead in app.sessions.reap(cfg.session_idle_timeout) {
        dead.close();
        app.service.session_closed(&dead.peer);
    }
    if app.sessions.len() >= cfg.max_sessions {
        match app.sessions.evict_idlest(owner) {
            Some(old) => {
                tracing::info!(
                    "{} sessions (maxSessions): the one idle the longest makes room",
                    cfg.max_sessions
                );
                old.close();
                app.service.session_closed(&old.peer);
            }
            None => {
                return error_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    frame.id(),
                    INTERNAL_ERROR,
                    &format!(
                        "too many sessions (limit {}), each with a stream open or a request in flight",
                        cfg.max_sessions
                    ),
                );
            }
        }
    }
    let Some(sid) = new_session_id() else {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            frame.id(),
            INTERNAL_ERROR,
            "no randomness for a session id",
        );
    };
    let (tx, mut rx) = mpsc::channel::<Frame>(RELATED_QUEUE);
    // Related frames before the initialize result have no stream to go to.
    let drain = tokio::spawn(async move {
        while let Some(f) = rx.recv().await {
            tracing::info!(frame = %f, "dropped a message sent before the initialize result");
        }
    });
    let ctx = RequestCtx::new(CancellationToken::new(), Related(tx), None);
    let initialize_params: Option<Arc<str>> = frame.params().map(Arc::from);
    let response = app.service.request(Incoming { frame, verdict }, ctx).await;
    drain.abort();
    let revision = response
        .result()
        .and_then(|r| member(r, "protocolVersion"))
        .and_then(|v| serde_json::from_str::<String>(v).ok())
        .and_then(|v| Revision::from_wire(&v));
    let Some(revision) = revision else {
        return json_response(StatusCode::OK, response.into_string());
    };
    let sid: Arc<str> = sid.into();
    let (out_tx, mut out_rx) = mpsc::channel::<Frame>(RELATED_QUEUE);
    let mut streams = HashMap::new();
    streams.insert(
        GET_STREAM,
        Slot {
            next_seq: 0,
            tx: None,
        },
    );
    let session = Arc::new(Session {
        id: sid.clone(),
        owner,
        peer: Peer::open(
            revision,
            Some(sid.clone()),
            out_tx,
            Arc::new(Pending::new(cfg.max_pending)),
            initialize_params,
        ),
        inflight: InFlight::default(),
        log: Mutex::new(Log {
            cap: cfg.replay_buffer,
            buffer: VecDeque::new(),
            streams,
            next_stream: 1,
            get_opened: false,
        }),
        last_seen: Mutex::new(Instant::now()),
        closed: CancellationToken::new(),
        channel_capacity: cfg.replay_buffer + RELATED_QUEUE,
    });
    // The GET stream's pump: Peer::notify/request frames become stream-0 events.
    {
        let session = session.clone();
        let max = cfg.max_sse_event_bytes;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    f = out_rx.recv() => match f {
                        Some(f) => {
                            if let Some(f) = fit_event(f, max) {
                                session.emit(GET_STREAM, f.as_str()).await;
                            }
                        }
                        None => break,
                    },
                    () = session.closed.cancelled() => break,
                }
            }
        });
    }
    app.service.session_opened(&session.peer);
    app.sessions.insert(session);
    let mut resp = json_response(StatusCode::OK, response.into_string());
    if let Ok(v) = HeaderValue::from_str(&sid) {
        resp.headers_mut().insert(mcp_header::SESSION_ID, v);
    }
    resp
}

/// What a service produced first for a request.
enum First {
    Related(Frame),
    Response(Result<Frame, oneshot::error::RecvError>),
}

/// A request's handler (the service's future and what follows its answer). It runs
/// inside the HTTP handler's own task until the answer or a first related frame (no
/// task spawned per request, no wake-up across tasks on the way back). Whatever of it is
/// left when the HTTP handler moves on (to a stream) or is dropped (the connection
/// closed) is spawned, so the request still runs to its end, as it always did.
struct Handler(Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>);

impl Handler {
    /// Runs what is left of the handler in a task of its own.
    fn detach(&mut self) {
        if let Some(task) = self.0.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(task);
        }
    }
}

impl Drop for Handler {
    fn drop(&mut self) {
        self.detach();
    }
}

/// Starts the service on a request; returns the related frames, the response, and the
/// handler to drive (see [`first`]). A sender of the related frames is returned too, so
/// that a request answered with a plain response can give the channel back to the pool
/// (`App::related_channels`).
fn start_request<S: Service>(
    app: &Arc<App<S>>,
    frame: Frame,
    verdict: Verdict,
    token: CancellationToken,
    peer: Option<Peer>,
    trace: Option<Arc<TraceContext>>,
    on_done: impl FnOnce() + Send + 'static,
) -> (
    mpsc::Sender<Frame>,
    mpsc::Receiver<Frame>,
    oneshot::Receiver<Frame>,
    Handler,
) {
    let (rtx, rrx) = app.related_channels.take();
    let (done_tx, done_rx) = oneshot::channel();
    let ctx = RequestCtx::new(token, Related(rtx.clone()), peer).with_trace(trace);
    let service = app.service.clone();
    let task = Box::pin(async move {
        let response = boxed_request(&*service, Incoming { frame, verdict }, ctx).await;
        on_done();
        let _ = done_tx.send(response);
    });
    (rtx, rrx, done_rx, Handler(Some(task)))
}

/// Drives the handler until it produces its first related frame or its response.
async fn first(
    rrx: &mut mpsc::Receiver<Frame>,
    done: &mut oneshot::Receiver<Frame>,
    handler: &mut Handler,
) -> First {
    loop {
        tokio::select! {
            biased;
            Some(f) = rrx.recv() => return First::Related(f),
            r = &mut *done => return First::Response(r),
            () = async {
                match handler.0.as_mut() {
                    Some(task) => task.await,
                    None => std::future::pending().await,
                }
            } => handler.0 = None,
        }
    }
}

fn lost_response(id: &Id) -> Response {
    error_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        Some(id),
        INTERNAL_ERROR,
        "the request's handler failed without a response",
    )
}

async fn legacy_request<S: Service>(
    app: &Arc<App<S>>,
    session: Arc<Session>,
    frame: Frame,
    verdict: Verdict,
    trace: Option<Arc<TraceContext>>,
) -> Response {
    let Some(id) = frame.id().cloned() else {
        return bad_request(
            To::new(None, Some(session.peer.revision)),
            "a request without an id",
        );
    };
    let Some(token) = session.inflight.start(&id) else {
        return json_response(
            StatusCode::OK,
            Frame::error_response(
                Some(&id),
                INVALID_REQUEST,
                &format!("request id {id} is already in flight"),
                None,
            )
            .into_string(),
        );
    };
    let done = {
        let (session, id) = (session.clone(), id.clone());
        move || session.inflight.finish(&id)
    };
    // Every revision's basic/utilities/cancellation: the receiver of a cancellation
    // SHOULD "not send a response for the cancelled request" (as stdio does).
    let cancelled = token.clone();
    let (rtx, mut rrx, mut done_rx, mut handler) = start_request(
        app,
        frame,
        verdict,
        token,
        Some(session.peer.clone()),
        trace,
        done,
    );
    let f = match first(&mut rrx, &mut done_rx, &mut handler).await {
        First::Response(Ok(_)) if cancelled.is_cancelled() => {
            // The POST still needs an answer: an event stream that ends without the
            // response (§Sending Messages to the Server allows SSE for any request).
            tracing::debug!(%id, "request cancelled; its response is not sent");
            let (_, rx) = mpsc::channel(1);
            return sse_response(
                rx,
                app.config.keep_alive,
                app.shutdown.clone(),
                OnDrop::none(),
            );
        }
        First::Response(Ok(r)) => {
            // The handler is done: the channel may serve the next request.
            app.related_channels.give(rtx, rrx);
            return json_response(StatusCode::OK, r.into_string());
        }
        First::Response(Err(_)) => return lost_response(&id),
        First::Related(f) => f,
    };
    drop(rtx);
    // The rest of the request outlives this handler: it runs beside the stream's pump.
    handler.detach();
    let stream = session.open_stream();
    let prime = session.peer.revision.facts().sse_priming;
    let rx = session.attach(stream, None, prime);
    let max = app.config.max_sse_event_bytes;
    {
        let session = session.clone();
        tokio::spawn(async move {
            if let Some(f) = fit_event(f, max) {
                session.emit(stream, f.as_str()).await;
            }
            loop {
                tokio::select! {
                    biased;
                    Some(f) = rrx.recv() => {
                        if let Some(f) = fit_event(f, max) {
                            session.emit(stream, f.as_str()).await;
                        }
                    }
                    r = &mut done_rx => {
                        let r = r.unwrap_or_else(|_| {
                            Frame::error_response(
                                Some(&id),
                                INTERNAL_ERROR,
                                "the request's handler failed without a response",
                                None,
                            )
                        });
                        // The response ends the stream; a cancelled request's response
                        // is not sent (basic/utilities/cancellation), the stream just ends.
                        if cancelled.is_cancelled() {
                            tracing::debug!(%id, "request cancelled; its response is not sent");
                        } else if let Some(r) = fit_event(r, max) {
                            session.emit(stream, r.as_str()).await;
                        }
                        break;
                    }
                }
            }
            session.end(stream);
        });
    }
    sse_response(
        rx,
        app.config.keep_alive,
        app.shutdown.clone(),
        OnDrop::none(),
    )
}

async fn modern_post<S: Service>(
    app: &Arc<App<S>>,
    headers: &HeaderMap,
    frame: Frame,
    verdict: Verdict,
    trace: Option<Arc<TraceContext>>,
) -> Response {
    let rev = verdict.revision();
    match frame.kind() {
        Kind::Result | Kind::Error => {
            // 2026-07-28 §Sending Messages: "The client MUST NOT send JSON-RPC responses."
            return bad_request(
                To::new(None, Some(rev)),
                "modern (2026-07-28) clients never send JSON-RPC responses",
            );
        }
        Kind::Notification => {
            if let Err(r) = mcp_header::validate(&frame, |n| modern_header(headers, n), &[]) {
                return rejection_response(&r, To::new(None, Some(rev)));
            }
            // Boxed: a notification's handling stays out of every request's future.
            Box::pin(app.service.notification(Incoming { frame, verdict }, None)).await;
            return accepted();
        }
        Kind::Request => {}
    }
    let Some(id) = frame.id().cloned() else {
        return bad_request(To::new(None, Some(rev)), "a request without an id");
    };
    // 2026-07-28 streamable-http §Custom Headers from Tool Parameters: the called
    // tool's `x-mcp-header` annotations name the `Mcp-Param-*` headers to check.
    let table = tool_name(&frame).map(|tool| (tool, app.param_headers.snapshot()));
    let params = table
        .as_ref()
        .and_then(|(tool, t)| t.get(tool.as_ref()))
        .map_or(&[][..], Vec::as_slice);
    if let Err(r) = mcp_header::validate(&frame, |n| modern_header(headers, n), params) {
        return rejection_response(&r, To::new(Some(&id), Some(rev)));
    }
    let method = frame.method().unwrap_or_default();
    // ext-tasks 2026-07-28 §Supported Methods: the extension's methods exist for modern
    // requests; whether this request negotiated the extension is the service's to judge
    // (-32021 otherwise).
    if !client_may_send(method, rev) && !tasks_extension_client_method(method, rev) {
        // 2026-07-28 streamable-http §Protocol Version Header: an unknown method "MUST
        // respond with 404 Not Found and a JSON-RPC error with code -32601" (H10).
        return error_response(
            StatusCode::NOT_FOUND,
            Some(&id),
            METHOD_NOT_FOUND,
            &format!("method not found in {rev}: {method}"),
        );
    }
    let token = CancellationToken::new();
    let (rtx, mut rrx, mut done_rx, mut handler) =
        start_request(app, frame, verdict, token.clone(), None, trace, || {});
    // 2026-07-28 streamable-http §Cancellation (H3): the client going away before the
    // response cancels the request. Until the response leaves, dropping this handler
    // (the connection closed) fires the token.
    let guard = token.clone().drop_guard();
    let f = match first(&mut rrx, &mut done_rx, &mut handler).await {
        First::Response(Ok(r)) => {
            guard.disarm();
            // The handler is done: the channel may serve the next request.
            app.related_channels.give(rtx, rrx);
            // 2026-07-28 ties some errors to statuses: -32020/-32021/-32022 and a
            // malformed request's -32602 are 400, an unknown method's -32601 is 404
            // (basic/index §_meta, streamable-http §Protocol Version Header).
            let status = r
                .error()
                .and_then(|e| modern_http_status(e.code))
                .and_then(|s| StatusCode::from_u16(s).ok())
                .unwrap_or(StatusCode::OK);
            return json_response(status, r.into_string());
        }
        First::Response(Err(_)) => {
            guard.disarm();
            return lost_response(&id);
        }
        First::Related(f) => f,
    };
    drop(rtx);
    // The rest of the request outlives this handler: it runs beside the stream's pump.
    handler.detach();
    let (tx, rx) = mpsc::channel::<Bytes>(RELATED_QUEUE);
    let max = app.config.max_sse_event_bytes;
    // From here the pump owns the cancellation: it fires when the stream closes early.
    guard.disarm();
    tokio::spawn(async move {
        let send = |f: Frame| {
            let tx = tx.clone();
            async move {
                match fit_event(f, max) {
                    // 2026-07-28 §Receiving Messages: no event ids, no resumption.
                    Some(f) => tx.send(sse_event(None, None, f.as_str())).await.is_ok(),
                    None => true,
                }
            }
        };
        let mut open = send(f).await;
        while open {
            tokio::select! {
                biased;
                () = tx.closed() => open = false,
                Some(f) = rrx.recv() => open = send(f).await,
                r = &mut done_rx => {
                    if let Ok(r) = r {
                        let _ = send(r).await;
                    }
                    return;
                }
            }
        }
        tracing::debug!("modern response stream closed before the response: cancelling");
        token.cancel();
    });
    sse_response(
        rx,
        app.config.keep_alive,
        app.shutdown.clone(),
        OnDrop::none(),
    )
}

/// A batch POST: 2025-03-26 only.
///
/// A batch refused whole (no session, an unknown one, a revision without batches) is
/// answered for its first request: the error carries that request's id, which every
/// revision's schema accepts (2024-11-05..2025-06-18 require an id; one error is all
/// an HTTP answer can carry there, having no batch form). A batch with no request in it
/// gets an error without an id where the revision allows that, else plain text
/// (`refuse`; docs/http.md, Refusals).
async fn post_batch<S: Service>(
    app: &Arc<App<S>>,
    batch: Decoded,
    protocol_version: Option<&str>,
    session_id: Option<&str>,
    owner: Option<Credential>,
) -> Response {
    let first = first_request_id(&batch);
    let verdict = match classify_http(&HttpRequest {
        method: HttpMethod::Post,
        protocol_version,
        session_id,
        body: None,
    }) {
        Ok(v) => v,
        Err(r) => return rejection_response(&r, To::new(first.as_ref(), None)),
    };
    let http = Legacy {
        protocol_version,
        session_id,
        owner,
    };
    let session = match verdict {
        Verdict::Legacy { .. } => match legacy_session(app, http, first.as_ref()) {
            Ok(s) => Some(s),
            Err(r) => return *r,
        },
        Verdict::Modern { .. } => None,
    };
    let rev = session
        .as_ref()
        .map_or(verdict.revision(), |s| s.peer.revision);
    let to = To::new(first.as_ref(), Some(rev));
    let items = match codec::admit(batch, rev) {
        Ok(items) => items,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, to, e.code(), &e.kind.to_string()),
    };
    // Only a 2025-03-26 session gets here (the one revision with batches).
    let Some(session) = session else {
        return bad_request(to, "batches need a legacy session");
    };
    let verdict = Verdict::Legacy {
        revision: rev,
        initialize: false,
    };
    let mut responses: Vec<String> = Vec::new();
    let mut requests = Vec::new();
    for item in items {
        match item {
            Err(e) => responses.push(e.to_response().into_string()),
            Ok(f) if f.kind() == Kind::Request => requests.push(f),
            Ok(f) => {
                let sid = session.id.clone();
                let http = Legacy {
                    protocol_version: None,
                    session_id: Some(&sid),
                    owner,
                };
                let _ = legacy_post(app, f, verdict, http, None).await;
            }
        }
    }
    let futures = requests.into_iter().map(|frame| {
        let session = session.clone();
        let app = app.clone();
        async move {
            let id = frame.id().cloned()?;
            let Some(token) = session.inflight.start(&id) else {
                return Some(Frame::error_response(
                    Some(&id),
                    INVALID_REQUEST,
                    &format!("request id {id} is already in flight"),
                    None,
                ));
            };
            let cancelled = token.clone();
            // Related frames of batched requests travel on the GET stream.
            let ctx = RequestCtx::new(
                token,
                Related(session.peer.outbound.clone()),
                Some(session.peer.clone()),
            );
            let r = app.service.request(Incoming { frame, verdict }, ctx).await;
            session.inflight.finish(&id);
            // basic/utilities/cancellation: no response for a cancelled request.
            (!cancelled.is_cancelled()).then_some(r)
        }
    });
    let answered: Vec<Option<Frame>> = futures_util::future::join_all(futures).await;
    responses.extend(answered.into_iter().flatten().map(Frame::into_string));
    if responses.is_empty() {
        return accepted();
    }
    json_response(StatusCode::OK, format!("[{}]", responses.join(",")))
}

/// `GET {path}`: the legacy session's server stream.
pub(crate) async fn get<S: Service>(State(app): State<Arc<App<S>>>, req: Request) -> Response {
    let headers = req.headers();
    let owner = Credential::of_request(req.extensions());
    let protocol_version = header_str(headers, PROTOCOL_VERSION);
    let session_id = header_str(headers, SESSION_ID);
    let verdict = classify_http(&HttpRequest {
        method: HttpMethod::Get,
        protocol_version,
        session_id,
        body: None,
    });
    // A GET carries no JSON-RPC message: its refusals have no id to give.
    let named = To::new(None, header_revision(headers));
    if matches!(verdict, Ok(Verdict::Modern { .. })) || session_id.is_none() {
        // 2026-07-28 §Earlier Streamable HTTP Revisions: GET is 405 for modern
        // clients; legacy §Listening for Messages: 405 where no stream is offered
        // (without a session there is none).
        return method_not_allowed(named);
    }
    if !accepts(headers, &["text/event-stream"]) {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            named,
            INVALID_REQUEST,
            "Accept must admit text/event-stream",
        );
    }
    let http = Legacy {
        protocol_version,
        session_id,
        owner,
    };
    let session = match legacy_session(&app, http, None) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    // 2025-03-26+ §Resumability and Redelivery, where the revision has it.
    let resumable = session.peer.revision.facts().resumable_sse;
    let last = header_str(headers, LAST_EVENT_ID)
        .filter(|_| resumable)
        .and_then(|v| {
            let (s, n) = v.trim().split_once('-')?;
            Some((s.parse::<u64>().ok()?, n.parse::<u64>().ok()?))
        });
    let rx = match last {
        Some((stream, seq)) => session.attach(stream, Some(seq), false),
        None => {
            if session.get_connected() {
                return refuse(
                    StatusCode::CONFLICT,
                    To::new(None, Some(session.peer.revision)),
                    INVALID_REQUEST,
                    "this session's GET stream is already open",
                );
            }
            let prime = session.peer.revision.facts().sse_priming;
            session.attach(GET_STREAM, None, prime)
        }
    };
    sse_response(
        rx,
        app.config.keep_alive,
        app.shutdown.clone(),
        OnDrop::none(),
    )
}

/// `DELETE {path}`: ends a legacy session (2025-03-26+ §Session Management), if the
/// request's credential created it.
pub(crate) async fn delete<S: Service>(State(app): State<Arc<App<S>>>, req: Request) -> Response {
    let headers = req.headers();
    let owner = Credential::of_request(req.extensions());
    let protocol_version = header_str(headers, PROTOCOL_VERSION);
    let session_id = header_str(headers, SESSION_ID);
    let verdict = classify_http(&HttpRequest {
        method: HttpMethod::Delete,
        protocol_version,
        session_id,
        body: None,
    });
    let named = To::new(None, header_revision(headers));
    if matches!(verdict, Ok(Verdict::Modern { .. })) {
        return method_not_allowed(named);
    }
    let Some(sid) = session_id else {
        return bad_request(named, "missing Mcp-Session-Id");
    };
    match app.sessions.remove(sid, owner) {
        Some(session) => {
            session.close();
            app.service.session_closed(&session.peer);
            axum::response::IntoResponse::into_response(StatusCode::NO_CONTENT)
        }
        None => session_not_found(named),
    }
}

fn method_not_allowed(to: To<'_>) -> Response {
    let mut r = refuse(
        StatusCode::METHOD_NOT_ALLOWED,
        to,
        INVALID_REQUEST,
        "no server stream is offered here: GET and DELETE exist only for legacy sessions",
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsed_header_names_are_the_protocol_crates() {
        for (parsed, name) in [
            (PROTOCOL_VERSION, mcp_header::PROTOCOL_VERSION),
            (SESSION_ID, mcp_header::SESSION_ID),
        ] {
            assert_eq!(HeaderName::from_bytes(name.as_bytes()).ok(), Some(parsed));
        }
    }
}
