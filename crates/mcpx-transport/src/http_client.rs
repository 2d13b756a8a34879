//! The HTTP/1.1 client under both HTTP upstream transports (Streamable HTTP and the
//! 2024-11-05 HTTP+SSE client): hyper's own client connections, kept alive in a small
//! pool of mcpx's.
//!
//! Own code over hyper's connections rather than reqwest or hyper-util's pooled
//! client, because an MCP upstream is one authority reached by few connections: the
//! pool is a short list searched by that authority, and the request target and `Host`
//! are made once per endpoint. What this client does:
//!
//! * a connect timeout; `TCP_NODELAY` (a request is one write, and Nagle's algorithm
//!   would hold a small one back); kept-alive connections, reused when their last
//!   exchange is over (an SSE stream's connection is busy while it lasts), at most 64
//!   of them, each closed when the server closes it or once idle for 90 s (both
//!   configurable: `max_idle_connections`, `idle_timeout`);
//! * a request that a kept connection could not carry (closed before it was written:
//!   the server's idle timeout, racing the request) is sent again on a new one; one
//!   that was written is not (it may have been acted on);
//! * the endpoint's `Uri` and the configured headers are parsed once, when the
//!   transport is built, and a header that is not valid HTTP is refused then, naming it;
//! * credentials in the URL (`http://user:pass@host/mcp`) are sent as `Authorization:
//!   Basic …` (RFC 7617) and not in the request line; a configured `Authorization`
//!   header wins over them, and a configured `Host` header over the URL's;
//! * `https://` URLs over TLS (rustls, the system's root certificates or
//!   `SSL_CERT_FILE`'s: crate::tls), within the same connect timeout; such connections
//!   are kept apart from plain ones to the same authority;
//! * an HTTP proxy, configured or from the environment (`https_proxy`, `no_proxy`, …:
//!   crate::proxy): absolute-form requests for `http://`, a `CONNECT` tunnel for
//!   `https://`, within the same connect timeout.
//!
//! The responses' helpers both clients share are here too: a non-2xx answer as its
//! error, the media type, a bounded body, a bounded SSE event stream.
//!
//! A redirection is not followed here: it is reported ([`TransportError::Redirected`])
//! for the client to decide (mcpx-client's `connect` follows 307 and 308 within the
//! endpoint's origin, and the connection then uses the new URL).

use std::borrow::Cow;
use std::sync::{Arc, LazyLock, Weak};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::{BodyDataStream, BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderName, HeaderValue, WWW_AUTHENTICATE,
};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use percent_encoding::percent_decode_str;
use tokio::net::TcpStream;
use url::Url;

use mcpx_protocol::{Frame, header};

use crate::error::TransportError;

/// Headers for one request, beside the configured ones: names as the protocol spells
/// them (static, but for `Mcp-Param-*`), values as made for this request.
pub(crate) type Headers = Vec<(Cow<'static, str>, String)>;

/// A response; its body is read as it arrives.
pub(crate) type Response = hyper::Response<Incoming>;

/// An HTTP/1.1 client with kept-alive connections (cheap to clone: they are shared).
#[derive(Debug, Clone)]
pub(crate) struct HttpClient {
    connect_timeout: Duration,
    /// How long an idle connection is kept.
    idle_timeout: Duration,
    /// The most connections kept alive; beyond them a connection carries one exchange
    /// and is closed.
    max_kept: usize,
    pool: Arc<Mutex<Pool>>,
}

/// The kept connections, and whether the task that closes the idle ones is running.
#[derive(Debug, Default)]
struct Pool {
    kept: Vec<Kept>,
    reaping: bool,
}

impl Pool {
    /// Drops the connections that are closed or have been idle for `idle`.
    fn prune(&mut self, now: Instant, idle: Duration) {
        (self.kept).retain(|k| !k.sender.is_closed() && now.duration_since(k.used) < idle);
    }
}

/// Closes the connections idle for `idle` while the client lives (`pool` is its
/// pool), so that a client nothing is sent through any more does not hold them: every
/// third of `idle`, as hyper-util's pool did.
async fn reap(pool: Weak<Mutex<Pool>>, idle: Duration) {
    let mut every = tokio::time::interval(idle / 3);
    every.tick().await;
    loop {
        every.tick().await;
        let Some(pool) = pool.upgrade() else { return };
        let mut pool = pool.lock();
        pool.prune(Instant::now(), idle);
    }
}

/// A kept-alive connection: where it goes, its sending half (its connection runs in a
/// task of its own), and when it last carried a request.
struct Kept {
    to: Arc<str>,
    sender: http1::SendRequest<Full<Bytes>>,
    used: Instant,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept").field("to", &self.to).finish()
    }
}

impl HttpClient {
    /// A client whose connections are established within `connect_timeout`, kept
    /// while idle for `idle_timeout`, at most `max_kept` of them.
    pub(crate) fn new(
        connect_timeout: Duration,
        idle_timeout: Duration,
        max_kept: usize,
    ) -> HttpClient {
        HttpClient {
            connect_timeout,
            // `Duration::ZERO` would make the reaper's interval panic; and a connection
            // idle for no time at all is one not kept.
            idle_timeout: idle_timeout.max(Duration::from_millis(3)),
            max_kept: if idle_timeout.is_zero() { 0 } else { max_kept },
            pool: Arc::default(),
        }
    }

    /// Sends `request` (made by `to`), bounding the wait for the status line and
    /// headers by `timeout` (the body is read later, unbounded here: an SSE stream may
    /// last). `what` names the exchange in an error, with `to`'s address.
    pub(crate) async fn send(
        &self,
        to: &Endpoint,
        request: Request<Full<Bytes>>,
        timeout: Duration,
        what: &str,
    ) -> Result<Response, TransportError> {
        match tokio::time::timeout(timeout, self.exchange(to, request)).await {
            Err(_) => Err(TransportError::Timeout(timeout)),
            Ok(Err(e)) => Err(TransportError::Io(format!("{what} ({}): {e}", to.uri))),
            Ok(Ok(r)) => Ok(r),
        }
    }

    /// `request` on a kept connection to `to` that is free, else on a new one.
    // Result<_, String>: the words (with their causes) are all `send` uses, in its
    // TransportError.
    async fn exchange(
        &self,
        to: &Endpoint,
        request: Request<Full<Bytes>>,
    ) -> Result<Response, String> {
        let request = match self.send_kept(to, request) {
            Err(request) => request,
            Ok(sent) => match sent.await {
                Ok(response) => return Ok(response),
                // Not written: the connection closed first. Once more, on a new one.
                Err(mut e) => match e.take_message() {
                    Some(request) => request,
                    None => return Err(chain(e.error())),
                },
            },
        };
        let mut sender = self.connect(to).await?;
        let sent = sender.send_request(request);
        self.keep(to, sender);
        sent.await.map_err(|e| chain(&e))
    }

    /// Starts `request` on a kept connection to `to` that is free (its last exchange
    /// over); `request` back when there is none. A closed connection is never free;
    /// closed and idle ones are dropped by `keep` and by the reaper, not on every
    /// request.
    #[allow(clippy::type_complexity, clippy::result_large_err)]
    fn send_kept(
        &self,
        to: &Endpoint,
        request: Request<Full<Bytes>>,
    ) -> Result<
        impl Future<Output = Result<Response, hyper::client::conn::TrySendError<Request<Full<Bytes>>>>>
        + use<>,
        Request<Full<Bytes>>,
    > {
        let mut pool = self.pool.lock();
        match (pool.kept)
            .iter_mut()
            .find(|k| k.sender.is_ready() && *k.to == *to.authority)
        {
            Some(k) => {
                k.used = Instant::now();
                Ok(k.sender.try_send_request(request))
            }
            None => Err(request),
        }
    }

    /// Keeps `sender` for later requests to `to`, unless `max_kept` connections that
    /// are still open and not idle too long are kept already.
    fn keep(&self, to: &Endpoint, sender: http1::SendRequest<Full<Bytes>>) {
        let mut pool = self.pool.lock();
        let now = Instant::now();
        pool.prune(now, self.idle_timeout);
        if pool.kept.len() >= self.max_kept {
            return;
        }
        pool.kept.push(Kept {
            to: to.authority.clone(),
            sender,
            used: now,
        });
        // Started with the first connection kept: inside the runtime, which the
        // client's construction need not be.
        if !pool.reaping {
            pool.reaping = true;
            tokio::spawn(reap(Arc::downgrade(&self.pool), self.idle_timeout));
        }
    }

    /// A new connection to `to`, its HTTP/1.1 exchanges run by a task of its own
    /// (which ends when the connection closes, or when every sender is dropped and its
    /// last exchange is over).
    // Result<_, String>: as `send`, whose words these become.
    async fn connect(&self, to: &Endpoint) -> Result<http1::SendRequest<Full<Bytes>>, String> {
        // Through a proxy, the TCP connection is the proxy's.
        let (host, port) = match &to.route {
            Some(r) => (r.host.as_str(), r.port),
            None => (to.host.as_str(), to.port),
        };
        let via = to
            .route
            .as_ref()
            .map(|r| format!(" to proxy {}", r.url))
            .unwrap_or_default();
        let timed_out = |_| format!("connect{via} timed out after {:?}", self.connect_timeout);
        // One bound for the TCP connection, the proxy's tunnel and the TLS handshake.
        let deadline = tokio::time::Instant::now() + self.connect_timeout;
        let mut stream = tokio::time::timeout_at(deadline, TcpStream::connect((host, port)))
            .await
            .map_err(timed_out)?
            .map_err(|e| format!("connect{via}: {e}"))?;
        stream
            .set_nodelay(true)
            .map_err(|e| format!("connect: TCP_NODELAY: {e}"))?;
        if to.tls {
            if let Some(route) = &to.route {
                let tunnel = crate::proxy::tunnel(stream, route, &to.host, to.port);
                stream = tokio::time::timeout_at(deadline, tunnel)
                    .await
                    .map_err(timed_out)?
                    .map_err(|e| chain(&e))?;
            }
            let stream = tokio::time::timeout_at(deadline, crate::tls::connect(&to.host, stream))
                .await
                .map_err(timed_out)??;
            return handshake(stream).await;
        }
        handshake(stream).await
    }
}

// Result<_, String>: as `HttpClient::send`, whose words these become.
/// HTTP/1.1 over `io`, its exchanges run by a task of its own.
async fn handshake<T>(io: T) -> Result<http1::SendRequest<Full<Bytes>>, String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| chain(&e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("upstream HTTP connection ended: {}", chain(&e));
        }
    });
    Ok(sender)
}

impl HttpClient {
    /// POSTs a JSON-RPC message (`Content-Type: application/json`) to `endpoint`, with
    /// `Accept: accept` when given and `headers`, bounding the wait for the answer's
    /// head by `timeout`. The frame's text becomes the body without a copy. A
    /// request whose `_meta` carries a trace context carries it in the `traceparent`
    /// and `tracestate` headers too ([`trace_headers`]).
    pub(crate) async fn post(
        &self,
        endpoint: &Endpoint,
        accept: Option<&'static str>,
        mut headers: Headers,
        frame: Frame,
        timeout: Duration,
    ) -> Result<Response, TransportError> {
        trace_headers(&frame, &mut headers);
        let body = Bytes::from(frame.into_string());
        self.post_body(endpoint, accept, headers, body, timeout)
            .await
    }

    /// [`HttpClient::post`] of a body made already (its headers, the trace context's
    /// included, made by the caller): a body kept for a retry is shared, not copied.
    pub(crate) async fn post_body(
        &self,
        endpoint: &Endpoint,
        accept: Option<&'static str>,
        headers: Headers,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Response, TransportError> {
        let request = endpoint.request(Method::POST, accept, headers, Some(body))?;
        self.send(endpoint, request, timeout, "POST to the upstream")
            .await
    }
}

/// The `traceparent` and `tracestate` headers of a request whose `params._meta` has
/// those keys, as mcpx writes them for an upstream (register A-C9): the same context in
/// both carriers, so that an HTTP-level tracer and the MCP server agree. Most frames
/// have none, which a search of the text tells before `_meta` is read.
pub(crate) fn trace_headers(frame: &Frame, headers: &mut Headers) {
    use mcpx_protocol::trace::{TRACEPARENT, TRACESTATE, TraceContext};
    if memchr::memmem::find(frame.as_str().as_bytes(), TRACEPARENT.as_bytes()).is_none() {
        return;
    }
    let text = |key| {
        frame
            .params_meta(key)
            .and_then(|raw| serde_json::from_str::<String>(raw).ok())
    };
    // Parsed again: a host's own `_meta` keys may have passed through as they were,
    // and only a valid context becomes a header.
    let Some(t) = text(TRACEPARENT)
        .and_then(|parent| TraceContext::parse(&parent, text(TRACESTATE).as_deref()))
    else {
        return;
    };
    headers.push((Cow::Borrowed(TRACEPARENT), t.traceparent()));
    if let Some(state) = t.tracestate {
        headers.push((Cow::Borrowed(TRACESTATE), state.into()));
    }
}

/// An HTTP endpoint with the headers sent on every request to it, parsed once.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The URL, credentials taken out (for error messages).
    uri: Uri,
    /// The request target (origin form: the path and query).
    target: Uri,
    /// Where connections go: the scheme and authority as a kept connection is known
    /// by, and the host (an IPv6 address without its brackets) and port to connect to.
    authority: Arc<str>,
    host: String,
    port: u16,
    /// `https://`: connections are TLS (crate::tls).
    tls: bool,
    /// The proxy connections go through, if any (crate::proxy).
    route: Option<crate::proxy::Route>,
    /// `Host`, unless it is configured.
    host_header: Option<HeaderValue>,
    /// The configured headers.
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Endpoint {
    /// `url` (already checked to be `http://` or `https://`) with the configured
    /// `headers`, reached as `proxy` says; a header that is not valid HTTP, or a proxy
    /// URL mcpx cannot use, is an error naming it. Credentials in `url` become an
    /// `Authorization: Basic` header, unless `headers` has an `Authorization` of its own.
    pub(crate) fn new(
        url: &Url,
        headers: &[(String, String)],
        proxy: &crate::proxy::Proxy,
    ) -> Result<Endpoint, TransportError> {
        let route = proxy.route(url)?;
        let mut url = url.clone();
        let credentials = take_basic_credentials(&mut url)
            .map_err(|e| TransportError::Io(format!("the URL's credentials: {e}")))?;
        let invalid =
            |e: &dyn std::fmt::Display| TransportError::Io(format!("invalid URL {url}: {e}"));
        let uri = Uri::try_from(url.as_str()).map_err(|e| invalid(&e))?;
        // RFC 9112 §3.2.2: to a proxy, a request names its target in absolute form
        // (an `https://` upstream's requests go inside a tunnel, in origin form).
        let absolute = route.is_some() && url.scheme() == "http";
        let target = if absolute {
            Uri::try_from(url[..url::Position::AfterQuery].to_owned())
        } else {
            Uri::try_from(url[url::Position::BeforePath..url::Position::AfterQuery].to_owned())
        }
        .map_err(|e| invalid(&e))?;
        let Some(authority) = uri.authority().cloned() else {
            return Err(invalid(&"no host"));
        };
        let host = authority.host();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
            .to_owned();
        let tls = url.scheme() == "https";
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let mut headers: Vec<(HeaderName, HeaderValue)> = headers
            .iter()
            .map(|(k, v)| header(k, v).map_err(|e| format!("configured header {k:?}: {e}")))
            .collect::<Result<_, _>>()
            .map_err(TransportError::Io)?;
        if let Some(value) = credentials
            && !headers.iter().any(|(k, _)| k == AUTHORIZATION)
        {
            headers.insert(0, (AUTHORIZATION, value));
        }
        if absolute && let Some(a) = route.as_ref().and_then(|r| r.authorization.clone()) {
            headers.push((hyper::header::PROXY_AUTHORIZATION, a));
        }
        // RFC 9112 §3.2: every request carries `Host`, the target URI's authority.
        let host_header = match headers.iter().any(|(k, _)| k == HOST) {
            true => None,
            false => Some(HeaderValue::try_from(authority.as_str()).map_err(|e| invalid(&e))?),
        };
        Ok(Endpoint {
            uri,
            target,
            authority: match &route {
                Some(r) => format!("{}://{authority} via {}", url.scheme(), r.url),
                None => format!("{}://{authority}", url.scheme()),
            }
            .into(),
            host,
            port,
            tls,
            route,
            host_header,
            headers,
        })
    }

    /// The request target (origin form, or absolute form through a proxy).
    pub(crate) fn target(&self) -> &Uri {
        &self.target
    }

    /// `Host`, unless configured among the headers.
    pub(crate) fn host_header(&self) -> Option<&HeaderValue> {
        self.host_header.as_ref()
    }

    /// A request to the endpoint: `Host`, `Accept: accept` when given, the configured
    /// headers, then `extra` (each appended, as given); with a body, `Content-Type:
    /// application/json`. `extra`'s values become header values without a copy.
    pub(crate) fn request(
        &self,
        method: Method,
        accept: Option<&'static str>,
        extra: Headers,
        body: Option<Bytes>,
    ) -> Result<Request<Full<Bytes>>, TransportError> {
        let json = body.is_some();
        let mut request = Request::new(Full::new(body.unwrap_or_default()));
        *request.method_mut() = method;
        *request.uri_mut() = self.target.clone();
        let headers = request.headers_mut();
        // Room for every header at once: an empty map grows twice on the way to the
        // eight or so a modern request has.
        headers.reserve(3 + self.headers.len() + extra.len());
        if let Some(host) = &self.host_header {
            headers.append(HOST, host.clone());
        }
        if let Some(accept) = accept {
            headers.append(ACCEPT, HeaderValue::from_static(accept));
        }
        for (k, v) in &self.headers {
            headers.append(k.clone(), v.clone());
        }
        for (k, v) in extra {
            let invalid =
                |e: String| TransportError::Protocol(format!("request header {k:?}: {e}"));
            let name = protocol_name(&k).map_or_else(
                || HeaderName::from_bytes(k.as_bytes()).map_err(|e| invalid(e.to_string())),
                Ok,
            )?;
            let value = HeaderValue::try_from(v).map_err(|e| invalid(e.to_string()))?;
            headers.append(name, value);
        }
        if json {
            headers.append(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        Ok(request)
    }
}

// Result<_, String>: the words are all a caller uses (in its TransportError::Io).
/// Takes the user name and password out of `url` (RFC 7617: percent-decoded, joined
/// as `user:password`) and makes them an `Authorization: Basic` value (marked
/// sensitive), if it has any: an upstream's URL credentials, and a proxy's
/// (`Proxy-Authorization`, crate::proxy).
pub(crate) fn take_basic_credentials(url: &mut Url) -> Result<Option<HeaderValue>, String> {
    if url.username().is_empty() && url.password().is_none() {
        return Ok(None);
    }
    let mut credentials: Vec<u8> = percent_decode_str(url.username()).collect();
    credentials.push(b':');
    credentials.extend(percent_decode_str(url.password().unwrap_or_default()));
    // An `http://` URL has a host, so neither can fail; if one did, the credentials
    // would stay in the URL, and the request line (origin form) does not carry them.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    let mut value = HeaderValue::try_from(format!("Basic {}", B64.encode(credentials)))
        .map_err(|e| e.to_string())?;
    value.set_sensitive(true);
    Ok(Some(value))
}

/// The SSE resumption header (a legacy stream's GET).
pub(crate) const LAST_EVENT_ID: &str = "Last-Event-ID";

/// The protocol's own header names, parsed once from their spelling: they go on every
/// request, and `http` keeps each parsed custom name in a buffer of its own (an
/// allocation per parse), while a clone of one parsed here is a reference count.
fn protocol_name(name: &str) -> Option<HeaderName> {
    static NAMES: LazyLock<Vec<(&str, HeaderName)>> = LazyLock::new(|| {
        let spelled = [
            header::PROTOCOL_VERSION,
            header::METHOD,
            header::NAME,
            header::SESSION_ID,
            LAST_EVENT_ID,
        ];
        (spelled.into_iter())
            .filter_map(|n| Some((n, HeaderName::from_bytes(n.as_bytes()).ok()?)))
            .collect()
    });
    NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, h)| h.clone())
}

/// Why a configured header is not one HTTP can carry.
#[derive(Debug, thiserror::Error)]
enum BadHeader {
    #[error(transparent)]
    Name(#[from] hyper::header::InvalidHeaderName),
    #[error(transparent)]
    Value(#[from] hyper::header::InvalidHeaderValue),
}

/// A header from its name and value as text.
fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), BadHeader> {
    let name = HeaderName::from_bytes(name.as_bytes())?;
    let value = HeaderValue::from_str(value)?;
    Ok((name, value))
}

/// The body of `response` as a stream of its data chunks.
fn body_stream(response: Response) -> BodyDataStream<Incoming> {
    BodyDataStream::new(response.into_body())
}

// Result<_, String>: the words are all a caller uses (in its TransportError).
/// Reads at most `max` bytes of a body; the flag says whether more was cut off.
pub(crate) async fn read_bounded(
    response: Response,
    max: usize,
) -> Result<(Vec<u8>, bool), String> {
    let mut out = Vec::new();
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| chain(&e))?;
        let Ok(chunk) = frame.into_data() else {
            continue; // trailers
        };
        let room = max.saturating_sub(out.len());
        if chunk.len() > room {
            out.extend_from_slice(chunk.get(..room).unwrap_or_default());
            return Ok((out, true));
        }
        out.extend_from_slice(&chunk);
    }
    Ok((out, false))
}

/// An error and its sources, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(src) = cur {
        s.push_str(": ");
        s.push_str(&src.to_string());
        cur = src.source();
    }
    s
}

/// Checks that `url` is one this client can reach (`http://` or `https://`).
pub(crate) fn parse_http_url(url: &str) -> Result<Url, TransportError> {
    let parsed =
        Url::parse(url).map_err(|e| TransportError::Io(format!("invalid URL {url:?}: {e}")))?;
    match parsed.scheme() {
        "http" | "https" => Ok(parsed),
        other => Err(TransportError::Io(format!(
            "unsupported URL scheme {other:?} in {url}; only http:// and https:// are supported"
        ))),
    }
}

/// The JSON-RPC error code of a body, if the body is a JSON-RPC error response.
fn jsonrpc_error_code(body: &str) -> Option<i64> {
    let v: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
    if v.get("jsonrpc")?.as_str()? != "2.0" {
        return None;
    }
    v.get("error")?.get("code")?.as_i64()
}

/// A non-2xx response as a [`TransportError::Http`], with a bounded body; a 401, or a
/// 403 with a `WWW-Authenticate` challenge, as a [`TransportError::Auth`] carrying the
/// challenge (mcpx reports it and does nothing else: no discovery, no retry; registers
/// B-C15, B-C18).
pub(crate) async fn http_error(resp: Response, max_body: usize) -> TransportError {
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get(WWW_AUTHENTICATE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    if status == 401 || (status == 403 && challenge.is_some()) {
        return TransportError::Auth { status, challenge };
    }
    if let (301 | 302 | 303 | 307 | 308, Some(location)) = (
        status,
        resp.headers()
            .get(hyper::header::LOCATION)
            .and_then(|l| l.to_str().ok()),
    ) {
        return TransportError::Redirected {
            status,
            location: location.to_owned(),
        };
    }
    let body = match read_bounded(resp, max_body).await {
        Ok((bytes, _)) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => format!("(body unreadable: {e})"),
    };
    let code = jsonrpc_error_code(&body);
    TransportError::Http { status, body, code }
}

/// The media type of a response, lowercased, without parameters.
pub(crate) fn media_type<B>(resp: &hyper::Response<B>) -> Cow<'_, str> {
    let media = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map_or("", str::trim);
    // Read on every answer, and nearly always written in lower case already.
    if media.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(media.to_ascii_lowercase())
    } else {
        Cow::Borrowed(media)
    }
}

/// The SSE events of a response body, each bounded to `max_event` bytes (an event
/// over the bound ends the stream with an error): [`crate::sse`].
// Result<_, String>: as `sse::bounded`.
pub(crate) fn sse_events(
    resp: Response,
    max_event: usize,
) -> impl Stream<Item = Result<crate::sse::Event, String>> + Send + Unpin {
    let chunks = body_stream(resp).map(|chunk| chunk.map_err(|e| std::io::Error::other(chain(&e))));
    crate::sse::bounded(chunks, max_event)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The media type: lower case, without parameters or spaces; borrowed from the
    /// header when it is written in lower case already.
    #[test]
    fn media_types_are_compared_in_lower_case() {
        let with = |v: &str| {
            let mut r = hyper::Response::new(());
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_str(v).unwrap());
            r
        };
        let lower = with("application/json; charset=utf-8");
        assert!(matches!(
            media_type(&lower),
            Cow::Borrowed("application/json")
        ));
        let upper = with(" Text/Event-Stream ;x=1");
        assert_eq!(media_type(&upper), "text/event-stream");
        assert_eq!(media_type(&hyper::Response::new(())), "");
    }

    /// The names kept are what parsing the protocol's spelling gives.
    #[test]
    fn protocol_names_are_the_parsed_ones() {
        for name in [
            header::PROTOCOL_VERSION,
            header::METHOD,
            header::NAME,
            header::SESSION_ID,
            LAST_EVENT_ID,
        ] {
            let parsed = HeaderName::from_bytes(name.as_bytes()).ok();
            assert_eq!(protocol_name(name), parsed, "{name}");
        }
        assert_eq!(protocol_name("Mcp-Param-Region"), None);
        assert_eq!(
            protocol_name("mcp-method"),
            None,
            "only the protocol's spelling"
        );
    }
}
