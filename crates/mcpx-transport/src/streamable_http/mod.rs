//! The HTTP server: Streamable HTTP for both eras on one endpoint, and the 2024-11-05
//! HTTP+SSE transport beside it, on one listener.
//!
//! * `POST|GET|DELETE {path}` (default `/mcp`): Streamable HTTP. Each request is
//!   classified by `mcpx_protocol::classify::classify_http`; legacy requests
//!   (2025-03-26..2025-11-25) get sessions, a GET stream, event ids and resumption;
//!   modern requests (2026-07-28) are stateless and closing their stream cancels them.
//!   See `server.rs` for the rules and the choices taken.
//! * `GET {sse_path}` and `POST {messages_path}?sessionId=…` (defaults `/sse`,
//!   `/messages`): the 2024-11-05 HTTP+SSE transport (`http_sse.rs`).
//!
//! Every request first passes the edge guards (`origin.rs`): the header limits (431),
//! `Origin`/`Host` allow-lists (403), the bearer tokens (401), the body size limit
//! (413), the body read timeout (408). The header read timeout, and hyper's own
//! ceilings on a head (twice the header limits), are enforced by the connection itself
//! ([`serve`]). Where tokens are asked for, each legacy session is bound to the one
//! that created it (`Credential`). Every refusal's body is valid for the revision
//! the request names (`refuse`).

pub mod client;

use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use hyper_util::service::TowerToHyperService;
use mcpx_protocol::codec::Limits;
use mcpx_protocol::error::INTERNAL_ERROR;
use mcpx_protocol::jsonrpc::Kind;
use mcpx_protocol::{Frame, Id, Revision};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::channel_pool::ChannelPool;

/// Related-frames channels kept for reuse: as many as requests in flight at once, within
/// reason (each is about 1.3 KiB).
const RELATED_CHANNELS_KEPT: usize = 256;
use tokio_util::sync::CancellationToken;

use crate::http_sse;
use crate::origin;
use crate::service::Service;

pub(crate) mod server;

/// The HTTP server's settings. Every bound is configurable; [`Default`] gives the
/// values documented on each field.
#[derive(Debug, Clone)]
pub struct HttpServerConfig {
    /// Where [`serve`]'s caller should bind (default `127.0.0.1:3921`; loopback only,
    /// 2025-06-18 basic/transports §Security Warning). Informational for [`serve`],
    /// which takes a bound listener.
    pub bind: SocketAddr,
    /// The Streamable HTTP endpoint (default `/mcp`).
    pub path: String,
    /// Serve the modern era (2026-07-28) beside the legacy one (default true). A
    /// legacy-only server answers modern requests as legacy servers do (400 without a
    /// session), so dual-era clients probing it fall back to `initialize`.
    pub modern: bool,
    /// The HTTP+SSE stream endpoint (default `/sse`).
    pub sse_path: String,
    /// The HTTP+SSE message endpoint (default `/messages`).
    pub messages_path: String,
    /// Allowed `Origin` values: bare hosts (any scheme and port), `host:port`, or full
    /// origins (default `localhost`, `127.0.0.1`, `[::1]`).
    pub allowed_origins: Vec<String>,
    /// Allowed `Host` values: bare hosts (any port) or `host:port` (default
    /// `localhost`, `127.0.0.1`, `[::1]`).
    pub allowed_hosts: Vec<String>,
    /// Largest request body, in bytes (default 4 MiB); larger bodies get 413.
    pub max_body_bytes: usize,
    /// Largest SSE event payload, in bytes (default 4 MiB). A larger response is
    /// replaced by a JSON-RPC error (-32603) for its request; a larger notification or
    /// server request is dropped with a log line.
    pub max_sse_event_bytes: usize,
    /// Interval of `: keep-alive` comments on open SSE streams (default 15 s).
    pub keep_alive: Duration,
    /// Time allowed to receive a request's headers (default 10 s).
    pub header_timeout: Duration,
    /// Most header fields a request may carry (default 100); more get 431 with a
    /// JSON-RPC error body. The HTTP layer itself parses at most twice this many (at
    /// least 100) and answers a request with more 431 without a body.
    pub max_header_count: usize,
    /// Largest header section a request may carry, in bytes (default 64 KiB): each
    /// field's name and value, plus 4 bytes for `: ` and the line end. A larger one
    /// gets 431 with a JSON-RPC error body. The HTTP layer itself reads a head of at
    /// most twice this (at least 408 KiB, hyper's default) and answers a larger one
    /// 431 without a body.
    pub max_header_bytes: usize,
    /// Time allowed to receive a request's body once its headers are in (default
    /// 30 s); a client that does not finish gets 408.
    pub body_timeout: Duration,
    /// Events kept per legacy session for `Last-Event-ID` replay (default 256).
    pub replay_buffer: usize,
    /// Most legacy sessions at once, per transport (default 1024); an `initialize`
    /// beyond it gets 503.
    pub max_sessions: usize,
    /// A legacy session unused this long (and with no GET stream open) expires
    /// (default 30 min).
    pub session_idle_timeout: Duration,
    /// Our requests to one client awaiting answers (default 64).
    pub max_pending: usize,
    /// How long [`serve`] lets open connections finish after shutdown (default 5 s).
    pub shutdown_grace: Duration,
    /// Frame limits for decoding bodies.
    pub limits: Limits,
    /// The tokens a request may carry as `Authorization: Bearer <token>` (default
    /// none: no token is asked for). When there is one, a request without an accepted
    /// token gets 401 with a `WWW-Authenticate: Bearer` challenge, and each legacy
    /// session is bound to the token that created it: another token's requests in it
    /// are answered as in an unknown session (404).
    pub bearer_tokens: Vec<BearerToken>,
    /// TLS: connections are accepted over TLS with this identity (default none: plain
    /// HTTP).
    pub tls: Option<TlsIdentity>,
}

/// A bearer token a listener accepts; shown as `***` in debug output.
#[derive(Clone)]
pub struct BearerToken {
    token: Arc<[u8]>,
    credential: Credential,
}

impl BearerToken {
    /// The token `text` (surrounding whitespace removed); `None` when it is empty.
    pub fn new(text: &str) -> Option<BearerToken> {
        let t = text.trim();
        (!t.is_empty()).then(|| BearerToken {
            token: Arc::from(t.as_bytes()),
            credential: Credential::of(t.as_bytes()),
        })
    }

    /// The tokens of a token file: one per line, surrounding whitespace removed; blank
    /// lines and lines starting with `#` are skipped. An error when there is none.
    pub fn from_lines(text: &str) -> Result<Vec<BearerToken>, &'static str> {
        let tokens: Vec<BearerToken> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with('#'))
            .filter_map(BearerToken::new)
            .collect();
        if tokens.is_empty() {
            return Err("no token (one a line; blank lines and # comments are skipped)");
        }
        Ok(tokens)
    }

    /// Whether `presented` is the token, compared in time independent of where they
    /// first differ.
    pub(crate) fn matches(&self, presented: &[u8]) -> bool {
        let ours = &self.token;
        let mut diff = u8::from(presented.len() != ours.len());
        for (i, b) in ours.iter().enumerate() {
            diff |= b ^ presented.get(i).copied().unwrap_or(!b);
        }
        diff == 0
    }

    /// Whether `presented` (a request's bearer credential) is this token; for
    /// listeners of mcpx's own beside this transport's (the daemon's `/v1` API).
    pub fn accepts(&self, presented: &str) -> bool {
        self.matches(presented.as_bytes())
    }

    /// The fingerprint a request carrying this token is known by.
    pub(crate) fn credential(&self) -> Credential {
        self.credential
    }
}

/// Who a request authenticated as, on a listener that asks for credentials: a
/// fingerprint of the credential it carried (the first 16 bytes of its SHA-256,
/// computed once when the listener is configured), never the credential itself.
/// Each legacy session keeps the one that created it (2025-11-25
/// basic/security_best_practices §Session Hijacking: bind the session to the user), and
/// it travels with a request as an extension set by the edge guard.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Credential([u8; 16]);

impl Credential {
    fn of(secret: &[u8]) -> Credential {
        let digest = ring::digest::digest(&ring::digest::SHA256, secret);
        let mut fp = [0u8; 16];
        for (d, s) in fp.iter_mut().zip(digest.as_ref()) {
            *d = *s;
        }
        Credential(fp)
    }

    /// The credential a request carried, as the edge guard found it (`None` where no
    /// credential is asked for).
    pub(crate) fn of_request(extensions: &axum::http::Extensions) -> Option<Credential> {
        extensions.get::<Credential>().copied()
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A few bytes of the fingerprint tell two credentials apart in a debug log.
        let [a, b, c, d, ..] = self.0;
        write!(f, "Credential({a:02x}{b:02x}{c:02x}{d:02x}…)")
    }
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(***)")
    }
}

/// A listener's TLS identity: its certificate chain and private key.
#[derive(Clone)]
pub struct TlsIdentity(tokio_rustls::TlsAcceptor);

impl TlsIdentity {
    /// The identity in two PEM files: the certificate chain (the server's certificate
    /// first) and its private key (PKCS #8, PKCS #1 or SEC1). ALPN offers `http/1.1`.
    // Result<_, String>: the words are all the caller (mcpx's listener settings,
    // themselves Result<_, String>) uses.
    pub fn from_pem_files(
        certificates: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<TlsIdentity, String> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let chain = CertificateDer::pem_file_iter(certificates)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("{}: {e}", certificates.display()))?;
        if chain.is_empty() {
            return Err(format!("{}: no certificate", certificates.display()));
        }
        let key =
            PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
            .map_err(|e| format!("TLS: {e}"))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsIdentity(tokio_rustls::TlsAcceptor::from(Arc::new(
            config,
        ))))
    }
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsIdentity")
    }
}

impl Default for HttpServerConfig {
    fn default() -> Self {
        let local = || vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()];
        HttpServerConfig {
            bind: SocketAddr::from((Ipv4Addr::LOCALHOST, 3921)),
            path: "/mcp".into(),
            modern: true,
            sse_path: "/sse".into(),
            messages_path: "/messages".into(),
            allowed_origins: local(),
            allowed_hosts: local(),
            max_body_bytes: 4 * 1024 * 1024,
            max_sse_event_bytes: 4 * 1024 * 1024,
            keep_alive: Duration::from_secs(15),
            header_timeout: Duration::from_secs(10),
            max_header_count: 100,
            max_header_bytes: 64 * 1024,
            body_timeout: Duration::from_secs(30),
            replay_buffer: 256,
            max_sessions: 1024,
            session_idle_timeout: Duration::from_secs(30 * 60),
            max_pending: 64,
            shutdown_grace: Duration::from_secs(5),
            limits: Limits::default(),
            bearer_tokens: Vec::new(),
            tls: None,
        }
    }
}

/// What every handler shares.
pub(crate) struct App<S> {
    pub(crate) service: Arc<S>,
    /// The service's tools' `Mcp-Param-*` annotations, read per modern `tools/call`.
    pub(crate) param_headers: crate::service::ParamHeaders,
    pub(crate) config: HttpServerConfig,
    pub(crate) sessions: server::Sessions,
    pub(crate) sse_sessions: http_sse::SseSessions,
    /// Ends every open SSE stream (server shutdown).
    pub(crate) shutdown: CancellationToken,
    /// Each POSTed request's related-frames channel, reused from request to request.
    pub(crate) related_channels: ChannelPool<Frame>,
}

/// The router serving `service`: Streamable HTTP on `config.path`, HTTP+SSE on
/// `config.sse_path` and `config.messages_path`, all behind the Origin/Host guard.
/// Serve it with [`serve`] (which adds the header read timeout), or any axum server.
pub fn router<S: Service>(service: Arc<S>, config: HttpServerConfig) -> Router {
    build(service, config, CancellationToken::new()).router
}

/// What [`serve`] serves: the router, and what its [`Front`] needs beside it.
struct Built<S> {
    app: Arc<App<S>>,
    guard: Arc<origin::Guard>,
    router: Router,
}

fn build<S: Service>(
    service: Arc<S>,
    config: HttpServerConfig,
    shutdown: CancellationToken,
) -> Built<S> {
    let guard = Arc::new(origin::Guard::new(&config));
    let (path, sse_path, messages_path) = (
        config.path.clone(),
        config.sse_path.clone(),
        config.messages_path.clone(),
    );
    let app = Arc::new(App {
        param_headers: service.param_headers(),
        service,
        config,
        sessions: server::Sessions::default(),
        sse_sessions: http_sse::SseSessions::default(),
        shutdown,
        related_channels: ChannelPool::new(server::RELATED_QUEUE, RELATED_CHANNELS_KEPT),
    });
    let router = Router::new()
        .route(
            &path,
            post(server::post::<S>)
                .get(server::get::<S>)
                .delete(server::delete::<S>),
        )
        // The endpoint with a trailing slash (a client configured with `…/mcp/`):
        // 308, which keeps the method and body, to the endpoint itself.
        .route(
            &format!("{path}/"),
            axum::routing::any(moved_to(path.clone())),
        )
        .route(&sse_path, get(http_sse::get::<S>))
        .route(&messages_path, post(http_sse::post::<S>))
        .with_state(app.clone())
        .layer(origin::GuardLayer(guard.clone()));
    Built { app, guard, router }
}

/// A handler answering 308 Permanent Redirect to `path` (the request's query kept).
fn moved_to(
    path: String,
) -> impl Fn(axum::http::Uri) -> std::future::Ready<Response> + Clone + Send + 'static {
    move |uri: axum::http::Uri| {
        let location = match uri.query() {
            Some(q) => format!("{path}?{q}"),
            None => path.clone(),
        };
        let mut response = StatusCode::PERMANENT_REDIRECT.into_response();
        if let Ok(v) = HeaderValue::try_from(location) {
            response.headers_mut().insert(header::LOCATION, v);
        }
        std::future::ready(response)
    }
}

/// The service of each connection [`serve`] accepts: a POST to the MCP path (every
/// call) goes straight to its handler, behind the same Origin/Host guard; every other
/// request goes through the router, which serves that POST the same way.
///
/// Why: the router's dispatch on each request (route and method matching, two clones
/// of boxed services, an extension map for path parameters, a boxed future per layer)
/// was about a tenth of an HTTP call's instructions and nine of its allocations
/// (callgrind and dhat, docs/performance.md).
struct Front<S> {
    app: Arc<App<S>>,
    guard: Arc<origin::Guard>,
    router: TowerToHyperService<Router>,
}

type FrontFuture = futures_util::future::Either<
    futures_util::future::BoxFuture<'static, Result<Response, Infallible>>,
    hyper_util::service::TowerToHyperServiceFuture<
        Router,
        axum::http::Request<hyper::body::Incoming>,
    >,
>;

impl<S: Service> hyper::service::Service<axum::http::Request<hyper::body::Incoming>> for Front<S> {
    type Response = Response;
    type Error = Infallible;
    type Future = FrontFuture;

    fn call(&self, req: axum::http::Request<hyper::body::Incoming>) -> FrontFuture {
        // A browser's request (an allowed `Origin`): CORS. Others (no `Origin`, every
        // non-browser client) take the path below untouched.
        if let Some(origin) = req
            .headers()
            .get(header::ORIGIN)
            .filter(|o| o.to_str().is_ok_and(|o| self.guard.origin_allowed(o)))
            .cloned()
        {
            if req.method() == axum::http::Method::OPTIONS {
                let answer = origin::preflight(&self.guard, req.headers(), &origin);
                return futures_util::future::Either::Left(Box::pin(std::future::ready(Ok(
                    answer,
                ))));
            }
            let answer = self.answer(req);
            return futures_util::future::Either::Left(Box::pin(async move {
                let mut response = answer.await?;
                origin::allow(&mut response, &origin);
                Ok(response)
            }));
        }
        self.answer(req)
    }
}

impl<S: Service> Front<S> {
    /// The answer to `req`, CORS aside.
    fn answer(&self, req: axum::http::Request<hyper::body::Incoming>) -> FrontFuture {
        if req.method() == axum::http::Method::POST && req.uri().path() == self.app.config.path {
            let (app, guard) = (self.app.clone(), self.guard.clone());
            let mut req = req.map(Body::new);
            return futures_util::future::Either::Left(Box::pin(async move {
                match origin::check(&guard, &req) {
                    // Boxed: a refusal's body read stays out of every POST's future.
                    Err(refused) => {
                        return Ok(Box::pin(refused.answer(guard.body_limits(), req)).await);
                    }
                    Ok(Some(credential)) => {
                        req.extensions_mut().insert(credential);
                    }
                    Ok(None) => {}
                }
                Ok(server::post(axum::extract::State(app), req).await)
            }));
        }
        futures_util::future::Either::Right(hyper::service::Service::call(&self.router, req))
    }
}

/// Serves `service` on `listener` until `shutdown`: one task per connection, each with
/// the header read timeout; on shutdown, open SSE streams end, connections finish
/// gracefully for up to `config.shutdown_grace`, then are dropped.
pub async fn serve<S: Service>(
    listener: TcpListener,
    service: Arc<S>,
    config: HttpServerConfig,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let head = Head::of(&config);
    let header_timeout = config.header_timeout;
    let grace = config.shutdown_grace;
    let tls = config.tls.clone();
    let built = build(service, config, shutdown.clone());
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = shutdown.cancelled() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                // Each message is written whole (one response, or one SSE event); Nagle's
                // algorithm would only hold a write back behind the previous one's ACK.
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!("TCP_NODELAY: {e}");
                }
                stream
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let svc = Front {
            app: built.app.clone(),
            guard: built.guard.clone(),
            router: TowerToHyperService::new(built.router.clone()),
        };
        let stop = shutdown.clone();
        match &tls {
            None => conns.spawn(crate::serve::connection(stream, svc, stop, head.settings())),
            Some(TlsIdentity(acceptor)) => {
                let accepting = acceptor.accept(stream);
                conns.spawn(async move {
                    // The handshake within the header read timeout: a client that
                    // stalls it holds a task no longer than one that stalls its head.
                    match tokio::time::timeout(header_timeout, accepting).await {
                        Ok(Ok(stream)) => {
                            crate::serve::connection(stream, svc, stop, head.settings()).await;
                        }
                        Ok(Err(e)) => tracing::debug!("TLS handshake failed: {e}"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                })
            }
        };
    }
    drop(listener);
    let drained =
        tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        conns.abort_all();
    }
    Ok(())
}

/// hyper's own limit on a request's head, its read buffer's default (8 KiB + 400 KiB).
const HYPER_HEAD_BYTES: usize = 8192 + 4096 * 100;
/// hyper's header field slots per request by default, held on the stack; more are
/// allocated on the heap for every request.
const HYPER_HEADER_FIELDS: usize = 100;

/// How hyper reads a request's head: within the header read timeout, and with room for
/// twice the configured header limits (at least hyper's defaults). The guard enforces
/// the limits themselves, so that a request over them gets 431 with a JSON-RPC body;
/// past hyper's own ceilings hyper answers 431 itself, without a body.
#[derive(Debug, Clone, Copy)]
struct Head {
    timeout: Duration,
    fields: usize,
    bytes: usize,
}

impl Head {
    /// How a connection is served with these bounds.
    fn settings(self) -> crate::serve::Settings {
        crate::serve::Settings {
            header_read_timeout: Some(self.timeout),
            max_headers: Some(self.fields),
            max_buf_size: Some(self.bytes),
            upgrades: false,
        }
    }

    fn of(config: &HttpServerConfig) -> Head {
        Head {
            timeout: config.header_timeout,
            fields: config
                .max_header_count
                .saturating_mul(2)
                .max(HYPER_HEADER_FIELDS),
            bytes: config
                .max_header_bytes
                .saturating_mul(2)
                .max(HYPER_HEAD_BYTES),
        }
    }
}

/// Reads a POST body within the configured size and time limits and decodes it: the
/// frames, or the answer the request gets instead (413/408 from the body guards, 413
/// for a frame over the limit, 400 with the decode error otherwise).
pub(crate) async fn read_frames(
    headers: &axum::http::HeaderMap,
    body: axum::body::Body,
    cfg: &HttpServerConfig,
) -> Result<mcpx_protocol::Decoded, Response> {
    let bytes = crate::origin::read_body(headers, body, cfg.max_body_bytes, cfg.body_timeout)
        .await
        .map_err(|e| e.to_response())?;
    mcpx_protocol::codec::decode_bytes(bytes, &cfg.limits).map_err(|e| {
        let status = match e.kind {
            mcpx_protocol::codec::DecodeErrorKind::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        json_response(status, e.to_response().into_string())
    })
}

pub(crate) fn json_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// What a refusal can tell its receiver in a JSON-RPC error: the id of the request
/// refused and the revision the request names, where they are known.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct To<'a> {
    pub(crate) id: Option<&'a Id>,
    pub(crate) revision: Option<Revision>,
}

impl<'a> To<'a> {
    /// The request `id` (if it has one), in `revision` (if known).
    pub(crate) fn new(id: Option<&'a Id>, revision: Option<Revision>) -> To<'a> {
        To { id, revision }
    }
}

/// A refusal with a body valid for its receiver's revision: a JSON-RPC error with the
/// request's id where it was read; without an id where the revision allows that
/// (2025-11-25 on: `JSONRPCErrorResponse.id` is optional); otherwise no JSON-RPC error
/// can be valid (2024-11-05..2025-06-18 require the id, and a revision not known may
/// be one of them), and the message goes as plain text.
///
/// An error about text whose id could not be read (a parse error, a body over the
/// limit) is register A-C4's, and omits the id in every revision: see
/// [`error_response`].
pub(crate) fn refuse(status: StatusCode, to: To<'_>, code: i64, message: &str) -> Response {
    refuse_with(status, to, message, |id| {
        Frame::error_response(id, code, message, None)
    })
}

/// [`refuse`] with the JSON-RPC error made by `error` for the id.
pub(crate) fn refuse_with(
    status: StatusCode,
    to: To<'_>,
    message: &str,
    error: impl FnOnce(Option<&Id>) -> Frame,
) -> Response {
    if to.id.is_some() || to.revision.is_some_and(|r| r.facts().error_id_optional) {
        return json_response(status, error(to.id).into_string());
    }
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        format!("{message}\n"),
    )
        .into_response()
}

/// The trace context of an HTTP request: its `traceparent` header (one; two make it
/// invalid, W3C §traceparent Header) and its `tracestate` headers, joined as W3C
/// §tracestate Header combines them. `None` without a valid `traceparent`.
pub(crate) fn header_trace(
    headers: &axum::http::HeaderMap,
) -> Option<Arc<mcpx_protocol::trace::TraceContext>> {
    use mcpx_protocol::trace::{TRACEPARENT, TRACESTATE, TraceContext};
    let mut parents = headers.get_all(TRACEPARENT).iter();
    let parent = parents.next()?.to_str().ok()?;
    if parents.next().is_some() {
        return None;
    }
    let mut states = headers.get_all(TRACESTATE).iter();
    let state = match (states.next(), states.next()) {
        (None, _) => None,
        (Some(one), None) => one.to_str().ok().map(std::borrow::Cow::Borrowed),
        (Some(first), Some(second)) => {
            let mut all = vec![first, second];
            all.extend(states);
            let parts: Option<Vec<&str>> = all.iter().map(|v| v.to_str().ok()).collect();
            parts.map(|p| std::borrow::Cow::Owned(p.join(",")))
        }
    };
    TraceContext::parse(parent, state.as_deref()).map(Arc::new)
}

/// The revision a request's `MCP-Protocol-Version` names, if it names one mcpx knows.
pub(crate) fn header_revision(headers: &axum::http::HeaderMap) -> Option<Revision> {
    headers
        .get(mcpx_protocol::header::PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Revision::from_wire(v.trim()))
}

/// The id of the first request in a decoded body (of a batch, its first request's):
/// what a refusal of the whole body answers (see docs/http.md, Refusals).
pub(crate) fn first_request_id(decoded: &mcpx_protocol::Decoded) -> Option<Id> {
    let request_id = |f: &Frame| {
        (f.kind() == Kind::Request)
            .then(|| f.id().cloned())
            .flatten()
    };
    match decoded {
        mcpx_protocol::Decoded::Single(f) => request_id(f),
        mcpx_protocol::Decoded::Batch(items) => items
            .iter()
            .find_map(|item| item.as_ref().ok().and_then(request_id)),
    }
}

/// An HTTP error with a JSON-RPC error body (`id` omitted when `None`, register A-C4).
pub(crate) fn error_response(
    status: StatusCode,
    id: Option<&Id>,
    code: i64,
    message: &str,
) -> Response {
    json_response(
        status,
        Frame::error_response(id, code, message, None).into_string(),
    )
}

/// An empty 202 Accepted (a notification or response was received).
pub(crate) fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

/// The SSE comment sent on quiet streams.
const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// One SSE event. `data` may span lines; each becomes a `data:` line.
pub(crate) fn sse_event(event: Option<&str>, id: Option<&str>, data: &str) -> Bytes {
    let mut s = String::with_capacity(data.len() + 32);
    if let Some(e) = event {
        s.push_str("event: ");
        s.push_str(e);
        s.push('\n');
    }
    if let Some(id) = id {
        s.push_str("id: ");
        s.push_str(id);
        s.push('\n');
    }
    for line in data.split('\n') {
        s.push_str("data: ");
        s.push_str(line.trim_end_matches('\r'));
        s.push('\n');
    }
    s.push('\n');
    Bytes::from(s)
}

/// The frame to put on an SSE stream in place of `frame`, within the event size limit
/// `max`: a response too large becomes a -32603 error for its request; any other frame
/// too large is dropped with a log line (`None`).
pub(crate) fn fit_event(frame: Frame, max: usize) -> Option<Frame> {
    let len = frame.as_str().len();
    if len <= max {
        return Some(frame);
    }
    match frame.kind() {
        Kind::Result | Kind::Error => Some(Frame::error_response(
            frame.id(),
            INTERNAL_ERROR,
            &format!("the response of {len} bytes exceeds the SSE event size limit of {max} bytes"),
            None,
        )),
        _ => {
            tracing::warn!(
                method = frame.method().unwrap_or_default(),
                "dropped a {len}-byte message over the SSE event size limit of {max} bytes"
            );
            None
        }
    }
}

/// Runs a closure when dropped: cleanup tied to an SSE body's lifetime.
pub(crate) struct OnDrop(Option<Box<dyn FnOnce() + Send>>);

impl OnDrop {
    pub(crate) fn new(f: impl FnOnce() + Send + 'static) -> Self {
        OnDrop(Some(Box::new(f)))
    }
    pub(crate) fn none() -> Self {
        OnDrop(None)
    }
}

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// How long an SSE stream may keep delivering after shutdown, for responses already on
/// their way.
const STREAM_DRAIN: Duration = Duration::from_secs(2);

/// An SSE response streaming the encoded events of `rx`, with `: keep-alive` comments
/// every `keep_alive`, ending when `rx` ends or `shutdown` fires. `on_drop` runs when
/// the body is dropped (the stream ended or the client went away).
pub(crate) fn sse_response(
    rx: mpsc::Receiver<Bytes>,
    keep_alive: Duration,
    shutdown: CancellationToken,
    on_drop: OnDrop,
) -> Response {
    struct St {
        rx: mpsc::Receiver<Bytes>,
        tick: tokio::time::Interval,
        shutdown: CancellationToken,
        /// Set at shutdown: until then, what is already on its way still goes out (a
        /// request ending gracefully writes its response, register H1).
        deadline: Option<tokio::time::Instant>,
        _guard: OnDrop,
    }
    let period = keep_alive.max(Duration::from_millis(10));
    let tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    let st = St {
        rx,
        tick,
        shutdown,
        deadline: None,
        _guard: on_drop,
    };
    let stream = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(deadline) = st.deadline {
                return tokio::select! {
                    biased;
                    m = st.rx.recv() => m.map(|b| (Ok::<_, Infallible>(b), st)),
                    () = tokio::time::sleep_until(deadline) => None,
                };
            }
            tokio::select! {
                biased;
                () = st.shutdown.cancelled() => {
                    st.deadline = Some(tokio::time::Instant::now() + STREAM_DRAIN);
                }
                m = st.rx.recv() => return m.map(|b| (Ok::<_, Infallible>(b), st)),
                _ = st.tick.tick() => return Some((Ok(Bytes::from_static(KEEP_ALIVE)), st)),
            }
        }
    });
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            ),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

/// Whether a `Content-Type` is `application/json` (parameters ignored).
pub(crate) fn is_json_content_type(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// Whether an `Accept` header (if any) admits one of `types`; a missing header admits
/// everything, as do `*/*` and `type/*`. Media types compare case-insensitively
/// (RFC 9110 §8.3.1); checked on every POST, so without allocating.
pub(crate) fn accepts(headers: &axum::http::HeaderMap, types: &[&str]) -> bool {
    let mut any = false;
    for value in headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
    {
        any = true;
        let admits = value
            .split(',')
            .filter_map(|item| item.split(';').next())
            .map(str::trim)
            .any(|m| {
                m == "*/*"
                    || types.iter().any(|t| {
                        m.eq_ignore_ascii_case(t)
                            || m.strip_suffix("/*").is_some_and(|major| {
                                t.split('/')
                                    .next()
                                    .is_some_and(|tm| tm.eq_ignore_ascii_case(major))
                            })
                    })
            });
        if admits {
            return true;
        }
    }
    !any
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_accept(values: &[&str]) -> axum::http::HeaderMap {
        let mut h = axum::http::HeaderMap::new();
        for v in values {
            if let Ok(v) = HeaderValue::from_str(v) {
                h.append(header::ACCEPT, v);
            }
        }
        h
    }

    #[test]
    fn token_files_hold_a_token_a_line() {
        let tokens = BearerToken::from_lines("# hosts\n alpha \n\n#beta\ngamma\r\n").unwrap();
        let fingerprints: Vec<Credential> = tokens.iter().map(BearerToken::credential).collect();
        assert_eq!(tokens.len(), 2);
        assert!(tokens[0].matches(b"alpha") && !tokens[0].matches(b"gamma"));
        assert!(tokens[1].matches(b"gamma"));
        assert_ne!(fingerprints[0], fingerprints[1]);
        assert_eq!(
            BearerToken::new("alpha").map(|t| t.credential()),
            Some(fingerprints[0])
        );
        assert!(!format!("{:?}", tokens[0]).contains("alpha"));
        assert!(BearerToken::from_lines("# none\n\n").is_err());
    }

    #[test]
    fn accept_lists() {
        let both = ["application/json", "text/event-stream"];
        assert!(accepts(&with_accept(&[]), &both), "no Accept admits all");
        assert!(accepts(
            &with_accept(&["application/json, text/event-stream"]),
            &both
        ));
        assert!(accepts(&with_accept(&["Application/JSON; q=0.9"]), &both));
        assert!(accepts(&with_accept(&["text/html", "text/*"]), &both));
        assert!(accepts(&with_accept(&["*/*"]), &["text/event-stream"]));
        assert!(accepts(&with_accept(&["TEXT/*"]), &["text/event-stream"]));
        assert!(!accepts(&with_accept(&["text/html"]), &both));
        assert!(!accepts(&with_accept(&["image/*, text/plain"]), &both));
        assert!(!accepts(
            &with_accept(&["application/json"]),
            &["text/event-stream"]
        ));
    }
}
