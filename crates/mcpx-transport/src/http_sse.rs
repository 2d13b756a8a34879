//! The 2024-11-05 HTTP+SSE server (2024-11-05 basic/transports §HTTP with SSE), on the
//! same router as Streamable HTTP (2025-03-26+ §Backwards Compatibility: servers keep
//! hosting the old endpoints beside the new one).
//!
//! `GET {sse_path}` opens a stream and a session; its first event is `endpoint`, whose
//! data is the POST URL `{messages_path}?sessionId=<id>`. `POST {messages_path}` carries
//! the client's messages and is answered 202; every response and server message goes
//! out on the stream as an `event: message`. The session lives as long as its stream.
//!
//! Messages are classified like stdio's (`classify_stdio` with the session's negotiated
//! revision): this transport carries legacy sessions only, so a modern request gets a
//! -32600 error on the stream. Choices: HTTP-level problems (content type, body size
//! or timeout, unreadable JSON, unknown session) are answered on the POST with an HTTP
//! error; JSON-RPC-level errors go on the stream. A batch is admitted only for a
//! 2025-03-26 session; its items are then handled one by one, each response its own
//! event. Closing the stream ends the session without cancelling in-flight requests
//! (register B-C6: disconnection SHOULD NOT be read as cancellation).
//!
//! Where the listener asks for tokens, a session is bound to the token of the GET that
//! opened it: a POST with another token is answered as for an unknown session (404).
//! A refusal's body is valid for the session's revision (`streamable_http::refuse`):
//! the POST's body is read first, so that the error carries the id of the request
//! refused; a batch refused whole is answered for its first request.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use mcpx_protocol::classify::classify_stdio;
use mcpx_protocol::codec::{self, Decoded};
use mcpx_protocol::error::INVALID_REQUEST;
use mcpx_protocol::jsonrpc::{Kind, member};
use mcpx_protocol::{Frame, Revision, Verdict};
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::pending::{InFlight, Pending, cancelled_request_id};
use crate::service::{Incoming, Peer, Related, RequestCtx, Service, boxed_request};
use crate::streamable_http::server::new_session_id;
use crate::streamable_http::{
    App, Credential, OnDrop, To, accepted, accepts, first_request_id, fit_event,
    is_json_content_type, refuse, sse_event, sse_response,
};

/// Frames queued for one stream before senders wait.
const OUT_QUEUE: usize = 256;

/// The open HTTP+SSE sessions.
#[derive(Default)]
pub(crate) struct SseSessions {
    map: Mutex<HashMap<Arc<str>, Arc<SseSession>>>,
}

impl SseSessions {
    /// The session `id`, for a request carrying `owner`: one opened with another
    /// credential is unknown to it.
    fn get(&self, id: &str, owner: Option<Credential>) -> Option<Arc<SseSession>> {
        self.map
            .lock()
            .get(id)
            .filter(|s| s.owner == owner)
            .cloned()
    }
    fn len(&self) -> usize {
        self.map.lock().len()
    }
}

/// One HTTP+SSE session: its stream and, after `initialize`, its legacy peer.
pub(crate) struct SseSession {
    id: Arc<str>,
    /// The credential of the GET that opened it, where the listener asks for one.
    owner: Option<Credential>,
    out: mpsc::Sender<Frame>,
    pending: Arc<Pending>,
    inflight: InFlight,
    peer: Mutex<Option<Peer>>,
}

impl SseSession {
    fn peer(&self) -> Option<Peer> {
        self.peer.lock().clone()
    }

    async fn send(&self, frame: Frame) {
        if self.out.send(frame).await.is_err() {
            tracing::debug!(session = %self.id, "HTTP+SSE stream closed; dropping a frame");
        }
    }
}

/// `GET {sse_path}`.
///
/// Its refusals have no JSON-RPC id to give, and no revision is negotiated yet: their
/// body is plain text (`refuse`).
pub(crate) async fn get<S: Service>(State(app): State<Arc<App<S>>>, req: Request) -> Response {
    if !accepts(req.headers(), &["text/event-stream"]) {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            To::default(),
            INVALID_REQUEST,
            "Accept must admit text/event-stream",
        );
    }
    let cfg = &app.config;
    if app.sse_sessions.len() >= cfg.max_sessions {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            To::default(),
            INVALID_REQUEST,
            &format!("too many HTTP+SSE sessions (limit {})", cfg.max_sessions),
        );
    }
    let Some(sid) = new_session_id() else {
        return refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            To::default(),
            INVALID_REQUEST,
            "no randomness for a session id",
        );
    };
    let sid: Arc<str> = sid.into();
    let (out_tx, mut out_rx) = mpsc::channel::<Frame>(OUT_QUEUE);
    let session = Arc::new(SseSession {
        id: sid.clone(),
        owner: Credential::of_request(req.extensions()),
        out: out_tx,
        pending: Arc::new(Pending::new(cfg.max_pending)),
        inflight: InFlight::default(),
        peer: Mutex::new(None),
    });
    (app.sse_sessions.map.lock()).insert(sid.clone(), session.clone());
    let (tx, rx) = mpsc::channel::<Bytes>(OUT_QUEUE);
    // 2024-11-05 §HTTP with SSE: "When a client connects, the server MUST send an
    // endpoint event containing a URI for the client to use for sending messages."
    let endpoint = format!("{}?sessionId={sid}", cfg.messages_path);
    let _ = tx.try_send(sse_event(Some("endpoint"), None, &endpoint));
    let max = cfg.max_sse_event_bytes;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tx.closed() => break,
                f = out_rx.recv() => match f {
                    Some(f) => {
                        if let Some(f) = fit_event(f, max)
                            && tx.send(sse_event(Some("message"), None, f.as_str())).await.is_err()
                        {
                            break;
                        }
                    }
                    None => break,
                },
            }
        }
    });
    let cleanup = {
        let app = app.clone();
        OnDrop::new(move || {
            let removed = app.sse_sessions.map.lock().remove(&sid);
            if let Some(s) = removed {
                s.pending.close_all();
                if let Some(peer) = s.peer() {
                    app.service.session_closed(&peer);
                }
            }
        })
    };
    sse_response(rx, cfg.keep_alive, app.shutdown.clone(), cleanup)
}

fn session_param(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("sessionId="))
        .filter(|v| !v.is_empty())
}

/// `POST {messages_path}?sessionId=…`.
pub(crate) async fn post<S: Service>(State(app): State<Arc<App<S>>>, req: Request) -> Response {
    let owner = Credential::of_request(req.extensions());
    let sid = session_param(req.uri().query()).map(str::to_owned);
    let session = sid.as_deref().and_then(|s| app.sse_sessions.get(s, owner));
    let revision = session.as_ref().and_then(|s| s.peer()).map(|p| p.revision);
    if !is_json_content_type(req.headers()) {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            To::new(None, revision),
            INVALID_REQUEST,
            "Content-Type must be application/json",
        );
    }
    let cfg = &app.config;
    let (parts, body) = req.into_parts();
    let trace = crate::streamable_http::header_trace(&parts.headers);
    // Read before the session is checked, so that a refusal can name the request.
    let decoded = crate::streamable_http::read_frames(&parts.headers, body, cfg).await;
    let first = decoded.as_ref().ok().and_then(first_request_id);
    let to = To::new(first.as_ref(), revision);
    if sid.is_none() {
        return refuse(
            StatusCode::BAD_REQUEST,
            to,
            INVALID_REQUEST,
            "missing sessionId query parameter",
        );
    }
    let Some(session) = session else {
        return refuse(
            StatusCode::NOT_FOUND,
            to,
            INVALID_REQUEST,
            "unknown HTTP+SSE session",
        );
    };
    let decoded = match decoded {
        Ok(d) => d,
        Err(r) => return r,
    };
    match decoded {
        Decoded::Single(frame) => handle(&app, &session, frame, trace).await,
        batch @ Decoded::Batch(_) => {
            let rev = revision.unwrap_or(Revision::OLDEST);
            match codec::admit(batch, rev) {
                Err(e) => {
                    // Refused whole: answered for its first request (as on /mcp).
                    let to = To::new(first.as_ref(), Some(rev));
                    return refuse(StatusCode::BAD_REQUEST, to, e.code(), &e.kind.to_string());
                }
                Ok(items) => {
                    for item in items {
                        match item {
                            Ok(frame) => handle(&app, &session, frame, trace.clone()).await,
                            Err(e) => session.send(e.to_response()).await,
                        }
                    }
                }
            }
        }
    }
    accepted()
}

async fn handle<S: Service>(
    app: &Arc<App<S>>,
    session: &Arc<SseSession>,
    frame: Frame,
    trace: Option<Arc<mcpx_protocol::trace::TraceContext>>,
) {
    let peer = session.peer();
    let verdict = match classify_stdio(peer.as_ref().map(|p| p.revision), &frame) {
        Ok(Verdict::Modern { .. }) => {
            if frame.kind() == Kind::Request {
                session
                    .send(Frame::error_response(
                        frame.id(),
                        INVALID_REQUEST,
                        "the HTTP+SSE transport carries legacy sessions only; use Streamable HTTP",
                        None,
                    ))
                    .await;
            }
            return;
        }
        Ok(v) => v,
        Err(r) => {
            match frame.kind() {
                Kind::Request => session.send(r.to_response(frame.id())).await,
                _ => tracing::warn!(frame = %frame, "dropped: {}", r.message),
            }
            return;
        }
    };
    match frame.kind() {
        Kind::Request => {
            let Some(id) = frame.id().cloned() else {
                return;
            };
            let initialize = matches!(
                verdict,
                Verdict::Legacy {
                    initialize: true,
                    ..
                }
            );
            let Some(token) = session.inflight.start(&id) else {
                session
                    .send(Frame::error_response(
                        Some(&id),
                        INVALID_REQUEST,
                        &format!("request id {id} is already in flight"),
                        None,
                    ))
                    .await;
                return;
            };
            let cancelled = token.clone();
            let ctx = RequestCtx::new(token, Related(session.out.clone()), peer)
                .with_trace(trace)
                .on_sse();
            let initialize_params: Option<Arc<str>> = frame.params().map(Arc::from);
            let incoming = Incoming { frame, verdict };
            if initialize {
                // Completed before the POST is answered, so that everything after it is
                // classified in the negotiated revision.
                let response = app.service.request(incoming, ctx).await;
                session.inflight.finish(&id);
                let revision = response
                    .result()
                    .and_then(|r| member(r, "protocolVersion"))
                    .and_then(|v| serde_json::from_str::<String>(v).ok())
                    .and_then(|v| Revision::from_wire(&v));
                let first = session.peer().is_none();
                if let Some(revision) = revision {
                    *session.peer.lock() = Some(Peer::open(
                        revision,
                        Some(session.id.clone()),
                        session.out.clone(),
                        session.pending.clone(),
                        initialize_params,
                    ));
                }
                if let Some(peer) = session.peer().filter(|_| first) {
                    app.service.session_opened(&peer);
                }
                session.send(response).await;
                return;
            }
            let (app, session) = (app.clone(), session.clone());
            tokio::spawn(async move {
                let response = boxed_request(&*app.service, incoming, ctx).await;
                if let Some(r) = session.inflight.answer(&id, &cancelled, response) {
                    session.send(r).await;
                }
            });
        }
        Kind::Notification => {
            if let Some(id) = (frame.method() == Some("notifications/cancelled"))
                .then(|| cancelled_request_id(&frame))
                .flatten()
            {
                session.inflight.cancel(&id);
            }
            if let Some(p) = &peer {
                p.observe(&frame);
            }
            app.service
                .notification(Incoming { frame, verdict }, peer)
                .await;
        }
        Kind::Result | Kind::Error => {
            if let Err(f) = session.pending.complete(frame) {
                tracing::warn!(frame = %f, "dropped a response to no pending request");
            }
        }
    }
}
