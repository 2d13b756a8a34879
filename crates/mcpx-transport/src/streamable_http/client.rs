//! The Streamable HTTP client, both eras.
//!
//! Every message is a POST to the one MCP endpoint with `Content-Type:
//! application/json` and `Accept: application/json, text/event-stream` (2025-03-26 and
//! later basic/transports §Sending Messages; 2026-07-28 basic/transports/streamable-http
//! §Sending Messages). The era of each request is read from the frame itself: a frame
//! whose `params._meta` carries `io.modelcontextprotocol/protocolVersion` is modern,
//! anything else legacy.
//!
//! * **Modern** (2026-07-28): each POST carries the request metadata headers built by
//!   [`mcpx_protocol::header::build`] (§Request Metadata), including `Mcp-Param-*` for
//!   a `tools/call` of a tool registered with
//!   [`HttpUpstream::set_tool_param_headers`]. No session header, no `Last-Event-ID`:
//!   "Resumable SSE streams via `Last-Event-ID` are not supported" (§Receiving
//!   Messages), so a broken stream ends the exchange with `Closed`. Dropping an
//!   [`Exchange`] closes its response stream, which is the cancellation signal
//!   (§Cancellation).
//! * **Legacy** (2025-03-26..2025-11-25): after a successful `initialize` the client
//!   keeps the `Mcp-Session-Id` the server assigned (§Session Management) and the
//!   negotiated `protocolVersion`; later requests carry the session and, from
//!   2025-06-18, `MCP-Protocol-Version` (§Protocol Version Header; 2025-03-26 defines no
//!   such header, register B-C13). A 404 to a request carrying a session means the
//!   session expired ([`TransportError::SessionExpired`]). A response stream that ends
//!   before its response, after the server sent event ids, is resumed with GET and
//!   `Last-Event-ID` (2025-11-25 basic/transports §Resumability and Redelivery),
//!   waiting the `retry` interval the server asked for (§Sending Messages, item 6).
//!
//! A non-2xx answer is a [`TransportError::Http`] carrying a bounded body and, when the
//! body is a JSON-RPC error, its code, so the layer above can tell a modern server's
//! recognised error from a legacy server's rejection (registers A-C14, B-C9).
//!
//! `https://` URLs are reached over TLS (crate::tls).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use hyper::Method;
use hyper::header::HeaderValue;
use mcpx_protocol::codec::{Decoded, Limits};
use mcpx_protocol::header::{self, ParamHeader};
use mcpx_protocol::jsonrpc::{Kind, member, string_value};
use mcpx_protocol::revision::VersionHeader;
use mcpx_protocol::{Frame, Id, Revision, meta};
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::error::TransportError;
use crate::http_client::{
    Endpoint, Headers, HttpClient, LAST_EVENT_ID, Response, http_error, media_type, parse_http_url,
    read_bounded, sse_events, trace_headers,
};
use crate::upstream::{Exchange, Unsolicited, Upstream};

/// How to reach a Streamable HTTP upstream.
#[derive(Debug, Clone)]
pub struct HttpClientConfig {
    /// The MCP endpoint (`http://…`).
    pub url: String,
    /// Extra headers sent on every request (from configuration: authorisation, …).
    pub headers: Vec<(String, String)>,
    /// Bound on establishing a TCP connection (default 10 s).
    pub connect_timeout: Duration,
    /// How long an idle connection is kept alive for the next request (default 90 s;
    /// zero keeps none).
    pub idle_timeout: Duration,
    /// The most connections kept alive (default 64): enough for as many requests in
    /// flight at once; beyond them a connection carries one exchange and is closed.
    pub max_idle_connections: usize,
    /// Bound on waiting for a response's status and headers (default 30 s). The body
    /// (an SSE stream may last long) is not bounded here; the layer above times out
    /// requests.
    pub request_timeout: Duration,
    /// Frame limits; `max_frame_bytes` bounds an `application/json` body.
    pub limits: Limits,
    /// Largest SSE event, in bytes (default 16 MiB).
    pub max_sse_event_bytes: usize,
    /// How much of an error body is kept (default 64 KiB).
    pub max_error_body_bytes: usize,
    /// Attempts to resume a broken legacy stream, or to reopen the GET stream, before
    /// giving up (default 5).
    pub max_resume_attempts: u32,
    /// Frames queued on the [`Unsolicited`] receiver before reading pauses (default 1024).
    pub unsolicited_queue: usize,
    /// How connections reach the upstream (default: the environment's proxy, if any).
    pub proxy: crate::proxy::Proxy,
    /// OAuth client credentials: every request carries a token got with them (default
    /// none; crate::oauth).
    pub oauth: Option<crate::oauth::ClientCredentials>,
    /// A user's authorization (authorization code): every request carries the stored
    /// token, refreshed as need be (default none; crate::oauth::code).
    pub user_auth: Option<crate::oauth::code::UserAuth>,
}

impl HttpClientConfig {
    /// A configuration for `url` with every other field at its default.
    pub fn new(url: impl Into<String>) -> Self {
        HttpClientConfig {
            url: url.into(),
            headers: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(90),
            max_idle_connections: 64,
            request_timeout: Duration::from_secs(30),
            limits: Limits::default(),
            max_sse_event_bytes: 16 * 1024 * 1024,
            max_error_body_bytes: 64 * 1024,
            max_resume_attempts: 5,
            unsolicited_queue: 1024,
            proxy: crate::proxy::Proxy::default(),
            oauth: None,
            user_auth: None,
        }
    }
}

/// The legacy session state `initialize` established.
#[derive(Debug, Default, Clone)]
struct Session {
    id: Option<String>,
    version: Option<String>,
}

#[derive(Debug)]
struct Inner {
    client: HttpClient,
    endpoint: Endpoint,
    config: HttpClientConfig,
    session: Mutex<Session>,
    tools: Mutex<HashMap<String, Vec<ParamHeader>>>,
    unsolicited: mpsc::Sender<Frame>,
    server_stream: Mutex<Option<AbortHandle>>,
    /// Where tokens come from, when the upstream takes OAuth tokens.
    tokens: Option<crate::oauth::Tokens>,
}

/// `Authorization` carrying `token`, as a request's extra header.
fn bearer(token: Option<&HeaderValue>) -> Option<(Cow<'static, str>, String)> {
    let value = token?.to_str().ok()?;
    Some((Cow::Borrowed("authorization"), value.to_owned()))
}

/// How one POST travels.
#[derive(Debug, Clone)]
enum Mode {
    /// 2026-07-28: stateless, never resumed.
    Modern,
    /// Legacy; `session` is the session id the POST carried.
    Legacy { session: Option<String> },
}

/// A connection to a Streamable HTTP upstream.
#[derive(Debug)]
pub struct HttpUpstream {
    inner: Arc<Inner>,
}

/// Where a response stream left off.
#[derive(Debug, Default)]
struct StreamState {
    last_event_id: Option<String>,
    retry: Option<Duration>,
    /// Events seen since the last (re)connection.
    progressed: bool,
}

/// How reading a response stream ended.
#[derive(Debug)]
enum StreamEnd {
    /// The response arrived.
    Response,
    /// The stream ended (or broke: the reason) without it.
    Broken(Option<String>),
    /// The exchange was dropped.
    Abandoned,
}

impl HttpUpstream {
    /// A client for `config.url`; nothing is sent until the first request.
    pub fn new(config: HttpClientConfig) -> Result<(HttpUpstream, Unsolicited), TransportError> {
        let url = parse_http_url(&config.url)?;
        let endpoint = Endpoint::new(&url, &config.headers, &config.proxy)?;
        let client = HttpClient::new(
            config.connect_timeout,
            config.idle_timeout,
            config.max_idle_connections,
        );
        let tokens = crate::oauth::Tokens::new(
            config.oauth.as_ref(),
            config.user_auth.as_ref(),
            &url,
            false,
            &client,
            &config.proxy,
            config.request_timeout,
        )?;
        let (tx, rx) = mpsc::channel(config.unsolicited_queue.max(1));
        Ok((
            HttpUpstream {
                inner: Arc::new(Inner {
                    client,
                    endpoint,
                    tokens,
                    config,
                    session: Mutex::new(Session::default()),
                    tools: Mutex::new(HashMap::new()),
                    unsolicited: tx,
                    server_stream: Mutex::new(None),
                }),
            },
            rx,
        ))
    }

    /// Registers the `x-mcp-header` annotations of `tool`'s `inputSchema` (read from
    /// `tools/list` by the layer above with [`header::param_headers`]): a modern
    /// `tools/call` of that tool mirrors the annotated arguments into `Mcp-Param-*`
    /// headers (2026-07-28 basic/transports/streamable-http §Custom Headers from Tool
    /// Parameters). An empty list removes the entry.
    pub fn set_tool_param_headers(&self, tool: impl Into<String>, params: Vec<ParamHeader>) {
        let mut t = self.inner.tools.lock();
        let tool = tool.into();
        if params.is_empty() {
            t.remove(&tool);
        } else {
            t.insert(tool, params);
        }
    }

    /// The legacy session id, if `initialize` established one.
    pub fn session_id(&self) -> Option<String> {
        self.inner.session.lock().id.clone()
    }

    /// The legacy protocol version `initialize` negotiated, if any.
    pub fn negotiated_version(&self) -> Option<String> {
        self.inner.session.lock().version.clone()
    }

    /// Opens the legacy GET stream for server-initiated messages (2025-03-26 and later
    /// basic/transports §Listening for Messages from the Server); its frames arrive on
    /// the [`Unsolicited`] receiver. A dropped stream is reopened (with `Last-Event-ID`
    /// when the server sent event ids) up to `max_resume_attempts` times in a row, with
    /// backoff. Returns `false` when the server answers 405: it offers no such stream.
    pub async fn open_server_stream(&self) -> Result<bool, TransportError> {
        let inner = self.inner.clone();
        let mut state = StreamState::default();
        let resp = match inner.get_stream(&state).await {
            Ok(r) => r,
            Err(TransportError::Http { status: 405, .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        let task = tokio::spawn(async move {
            let mut resp = resp;
            let mut failures = 0u32;
            loop {
                state.progressed = false;
                let end = inner.read_server_stream(resp, &mut state).await;
                if state.progressed {
                    failures = 0;
                }
                failures += 1;
                if failures > inner.config.max_resume_attempts {
                    tracing::warn!("the upstream's GET stream ended ({end:?}); giving up");
                    return;
                }
                tokio::time::sleep(state.retry.unwrap_or(backoff(failures))).await;
                resp = match inner.get_stream(&state).await {
                    Ok(r) => r,
                    Err(TransportError::Http { status: 405, .. }) => return,
                    Err(e) => {
                        tracing::warn!("reopening the upstream's GET stream failed: {e}");
                        return;
                    }
                };
            }
        });
        if let Some(old) = self.inner.server_stream.lock().replace(task.abort_handle()) {
            old.abort();
        }
        Ok(true)
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << attempt.min(6)))
}

impl Inner {
    fn session(&self) -> Session {
        self.session.lock().clone()
    }

    /// The legacy session headers: `Mcp-Session-Id`, and `MCP-Protocol-Version` where
    /// the negotiated revision defines it (2025-06-18 and 2025-11-25 basic/transports
    /// §Protocol Version Header; none in 2025-03-26, register B-C13). A revision this
    /// build does not know gets the header: every later revision has it.
    fn legacy_headers(session: &Session) -> Headers {
        let mut out = Vec::new();
        if let Some(id) = &session.id {
            out.push((Cow::Borrowed(header::SESSION_ID), id.clone()));
        }
        if let Some(v) = &session.version {
            let send = Revision::from_wire(v)
                .is_none_or(|r| r.facts().version_header != VersionHeader::Undefined);
            if send {
                out.push((Cow::Borrowed(header::PROTOCOL_VERSION), v.clone()));
            }
        }
        out
    }

    /// The headers and mode of a POST carrying `frame`.
    fn post_headers(&self, frame: &Frame) -> (Headers, Mode) {
        // Read once per request: not worth the frame's `_meta` cache.
        let modern = frame
            .params_meta_once(meta::PROTOCOL_VERSION)
            .and_then(string_value);
        if let Some(version) = modern {
            let tool_params = |name: &str| self.tools.lock().get(name).cloned().unwrap_or_default();
            return (header::build(frame, &version, tool_params), Mode::Modern);
        }
        // A new `initialize` starts a new session: it carries none.
        if frame.method() == Some("initialize") {
            return (Vec::new(), Mode::Legacy { session: None });
        }
        let session = self.session();
        (
            Self::legacy_headers(&session),
            Mode::Legacy {
                session: session.id,
            },
        )
    }

    /// Turns a non-2xx answer into its error; a 404 to a legacy request that carried a
    /// session clears the session (2025-03-26..2025-11-25 basic/transports §Session
    /// Management, item 4).
    async fn check(&self, resp: Response, mode: &Mode) -> Result<Response, TransportError> {
        if resp.status().is_success() {
            return Ok(resp);
        }
        if resp.status().as_u16() == 404
            && let Mode::Legacy {
                session: Some(sent),
            } = mode
        {
            let mut s = self.session.lock();
            if s.id.as_deref() == Some(sent.as_str()) {
                *s = Session::default();
            }
            return Err(TransportError::SessionExpired);
        }
        Err(http_error(resp, self.config.max_error_body_bytes).await)
    }

    async fn post(&self, frame: Frame) -> Result<(Response, Mode), TransportError> {
        match &self.tokens {
            None => self.post_with(frame, None).await,
            // Boxed: a future is as large as its largest branch, and the token's (its
            // discovery, its fetch) would make every call's larger.
            // No token to send, known at once: the request goes as without tokens,
            // and only a refusal takes the token path. Not through
            // `post_authorized`: its future (boxed, as large as a token fetch) was
            // copied whole on every call (callgrind: about 9 k instructions).
            // The request's text is kept for a retry as the body's bytes (shared, not
            // copied), and decoded again only if the upstream refuses it.
            Some(tokens) if tokens.none_yet() => {
                let (mut headers, mode) = self.post_headers(&frame);
                trace_headers(&frame, &mut headers);
                let body = Bytes::from(frame.into_string());
                match self.send_post(headers, mode, body.clone(), None).await {
                    Err(TransportError::Auth { status, challenge })
                        if tokens.retries(status, 0) =>
                    {
                        // Made here, so within every limit but the size (a request
                        // may be larger than an answer may).
                        let limits = Limits {
                            max_frame_bytes: usize::MAX,
                            ..self.config.limits
                        };
                        let text = String::from_utf8_lossy(&body).into_owned();
                        let again =
                            mcpx_protocol::codec::parse_frame(text, &limits).map_err(|e| {
                                TransportError::Protocol(format!("a request to retry: {e}"))
                            })?;
                        Box::pin(self.post_refused(tokens, again, status, challenge)).await
                    }
                    other => other,
                }
            }
            Some(tokens) => Box::pin(self.post_authorized(tokens, frame)).await,
        }
    }

    /// [`Inner::post_authorized`] after a first refusal of a request sent without a
    /// token.
    async fn post_refused(
        &self,
        tokens: &crate::oauth::Tokens,
        frame: Frame,
        status: u16,
        challenge: Option<String>,
    ) -> Result<(Response, Mode), TransportError> {
        let fresh = tokens
            .refused(status, None, challenge.as_deref(), 0)
            .await?;
        self.post_retried(tokens, frame, Some(fresh), 1).await
    }

    /// [`Inner::post`] with a token (crate::oauth): a refused one is replaced, and the
    /// request sent again (once for client credentials; for a user's authorization as
    /// often as a step-up may, crate::oauth::code).
    async fn post_authorized(
        &self,
        tokens: &crate::oauth::Tokens,
        frame: Frame,
    ) -> Result<(Response, Mode), TransportError> {
        let token = tokens.upfront().await?;
        self.post_retried(tokens, frame, token, 0).await
    }

    /// Sends `frame` with `token`, replacing a refused token as often as `tokens`
    /// allows, `attempt` replacements made already.
    async fn post_retried(
        &self,
        tokens: &crate::oauth::Tokens,
        frame: Frame,
        mut token: Option<HeaderValue>,
        mut attempt: u32,
    ) -> Result<(Response, Mode), TransportError> {
        loop {
            match self.post_with(frame.clone(), token.as_ref()).await {
                Err(TransportError::Auth { status, challenge })
                    if tokens.retries(status, attempt) =>
                {
                    let fresh = tokens
                        .refused(status, token.as_ref(), challenge.as_deref(), attempt)
                        .await?;
                    token = Some(fresh);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// A token's `Authorization` header for a request, if the upstream takes tokens.
    async fn authorization(&self) -> Result<Option<(Cow<'static, str>, String)>, TransportError> {
        match &self.tokens {
            Some(tokens) => Ok(bearer(tokens.upfront().await?.as_ref())),
            None => Ok(None),
        }
    }

    async fn post_with(
        &self,
        frame: Frame,
        token: Option<&HeaderValue>,
    ) -> Result<(Response, Mode), TransportError> {
        let (mut headers, mode) = self.post_headers(&frame);
        trace_headers(&frame, &mut headers);
        let body = Bytes::from(frame.into_string());
        self.send_post(headers, mode, body, token).await
    }

    /// POSTs `body` with `headers` (and `token`'s), and checks the answer.
    async fn send_post(
        &self,
        mut headers: Headers,
        mode: Mode,
        body: Bytes,
        token: Option<&HeaderValue>,
    ) -> Result<(Response, Mode), TransportError> {
        headers.extend(bearer(token));
        let accept = Some("application/json, text/event-stream");
        let timeout = self.config.request_timeout;
        let resp = (self.client)
            .post_body(&self.endpoint, accept, headers, body, timeout)
            .await?;
        let resp = self.check(resp, &mode).await?;
        Ok((resp, mode))
    }

    /// GET on the endpoint: the legacy server stream, or a resumption when
    /// `state.last_event_id` is set (2025-11-25 basic/transports §Resumability and
    /// Redelivery: "Resumption is always via HTTP GET with `Last-Event-ID`").
    async fn get_stream(&self, state: &StreamState) -> Result<Response, TransportError> {
        let session = self.session();
        let mut headers = Self::legacy_headers(&session);
        if let Some(id) = &state.last_event_id {
            headers.push((Cow::Borrowed(LAST_EVENT_ID), id.clone()));
        }
        headers.extend(self.authorization().await?);
        let request =
            self.endpoint
                .request(Method::GET, Some("text/event-stream"), headers, None)?;
        let resp = self
            .client
            .send(
                &self.endpoint,
                request,
                self.config.request_timeout,
                "GET from the upstream",
            )
            .await?;
        let resp = self
            .check(
                resp,
                &Mode::Legacy {
                    session: session.id,
                },
            )
            .await?;
        if media_type(&resp) != "text/event-stream" {
            return Err(TransportError::Protocol(format!(
                "the upstream answered GET with {:?}, not text/event-stream",
                media_type(&resp)
            )));
        }
        Ok(resp)
    }

    /// Records a legacy `initialize` result: the session id from the response that
    /// carried it and the negotiated version (2025-03-26..2025-11-25 basic/transports
    /// §Session Management, item 1).
    fn initialized(&self, session_id: Option<String>, response: &Frame) {
        let version = response
            .result()
            .and_then(|r| member(r, "protocolVersion"))
            .and_then(|v| serde_json::from_str::<String>(v).ok());
        if let Some(version) = version {
            *self.session.lock() = Session {
                id: session_id,
                version: Some(version),
            };
        }
    }

    async fn unsolicited(&self, frame: Frame) {
        if self.unsolicited.send(frame).await.is_err() {
            tracing::debug!("nobody reads unsolicited frames; dropped one");
        }
    }

    /// The messages of one body or event (a big one decoded off the event loop:
    /// [`crate::upstream::OFF_LOOP_BYTES`]).
    async fn decode(&self, data: String) -> Vec<Frame> {
        match crate::upstream::decode_text(data, &self.config.limits).await {
            Ok(Decoded::Single(f)) => vec![f],
            Ok(Decoded::Batch(items)) => items
                .into_iter()
                .filter_map(|i| {
                    i.map_err(|e| tracing::warn!("bad frame from the upstream: {e}"))
                        .ok()
                })
                .collect(),
            Err(e) => {
                tracing::warn!("skipped an undecodable message from the upstream: {e}");
                Vec::new()
            }
        }
    }

    /// Reads one SSE response stream for request `id` into `tx`.
    async fn read_stream(
        &self,
        resp: Response,
        id: &Id,
        init_session: &Option<Option<String>>,
        tx: &mpsc::Sender<Result<Frame, TransportError>>,
        state: &mut StreamState,
    ) -> StreamEnd {
        let mut events = sse_events(resp, self.config.max_sse_event_bytes);
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => return StreamEnd::Broken(Some(e)),
            };
            if let Some(eid) = event.id {
                state.last_event_id = Some(eid);
                state.progressed = true;
            }
            if let Some(ms) = event.retry {
                state.retry = Some(Duration::from_millis(ms.min(60_000)));
            }
            if event.event.as_deref().is_some_and(|e| e != "message") {
                continue;
            }
            let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                continue; // a priming event (2025-11-25 §Sending Messages, item 6)
            };
            for frame in self.decode(data).await {
                match frame.kind() {
                    Kind::Result | Kind::Error if frame.id() == Some(id) => {
                        if let Some(sid) = init_session {
                            self.initialized(sid.clone(), &frame);
                        }
                        return if tx.send(Ok(frame)).await.is_ok() {
                            StreamEnd::Response
                        } else {
                            StreamEnd::Abandoned
                        };
                    }
                    Kind::Result | Kind::Error => self.unsolicited(frame).await,
                    Kind::Request | Kind::Notification => {
                        if tx.send(Ok(frame)).await.is_err() {
                            return StreamEnd::Abandoned;
                        }
                    }
                }
            }
        }
        StreamEnd::Broken(None)
    }

    /// Reads the legacy GET stream into the unsolicited receiver.
    async fn read_server_stream(&self, resp: Response, state: &mut StreamState) -> Option<String> {
        let mut events = sse_events(resp, self.config.max_sse_event_bytes);
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => return Some(e),
            };
            if let Some(eid) = event.id {
                state.last_event_id = Some(eid);
            }
            state.progressed = true;
            if let Some(ms) = event.retry {
                state.retry = Some(Duration::from_millis(ms.min(60_000)));
            }
            if event.event.as_deref().is_some_and(|e| e != "message") {
                continue;
            }
            let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                continue;
            };
            for frame in self.decode(data).await {
                self.unsolicited(frame).await;
            }
        }
        None
    }

    /// The response in an `application/json` answer to request `id`: the body read
    /// (bounded) and decoded, every other message in it, before or after the response,
    /// delivered as unsolicited (none is dropped).
    async fn read_json(
        &self,
        resp: Response,
        id: &Id,
        init_session: Option<Option<String>>,
    ) -> Result<Frame, TransportError> {
        let (bytes, cut) = read_bounded(resp, self.config.limits.max_frame_bytes)
            .await
            .map_err(|e| TransportError::Io(format!("reading the response failed: {e}")))?;
        if cut {
            return Err(TransportError::Protocol(format!(
                "the response exceeds the limit of {} bytes",
                self.config.limits.max_frame_bytes
            )));
        }
        // Valid UTF-8 (every real body) is taken as it is, not copied; invalid bytes
        // are replaced, as before, and the decoder decides.
        let text = String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        let mut response = None;
        let mut init_session = init_session;
        for frame in self.decode(text).await {
            match frame.kind() {
                Kind::Result | Kind::Error if response.is_none() && frame.id() == Some(id) => {
                    if let Some(sid) = init_session.take() {
                        self.initialized(sid, &frame);
                    }
                    response = Some(frame);
                }
                _ => self.unsolicited(frame).await,
            }
        }
        response.ok_or_else(|| {
            TransportError::Protocol(
                "the JSON response body holds no response to the request".to_owned(),
            )
        })
    }

    /// Carries a streamed answer to a request (`text/event-stream`, resumed where the
    /// revision allows) into its exchange; any other `media` type is an error.
    async fn run_exchange(
        self: Arc<Self>,
        resp: Response,
        media: &str,
        mode: Mode,
        id: Id,
        init_session: Option<Option<String>>,
        tx: mpsc::Sender<Result<Frame, TransportError>>,
    ) {
        if media != "text/event-stream" {
            let _ = tx
                .send(Err(TransportError::Protocol(format!(
                    "the upstream answered a request with {media:?} (status {}), not application/json or text/event-stream",
                    resp.status().as_u16()
                ))))
                .await;
            return;
        }
        let mut state = StreamState::default();
        let mut resp = resp;
        let mut failures = 0u32;
        loop {
            state.progressed = false;
            let end = self
                .read_stream(resp, &id, &init_session, &tx, &mut state)
                .await;
            let reason = match end {
                StreamEnd::Response | StreamEnd::Abandoned => return,
                StreamEnd::Broken(reason) => reason,
            };
            let resumable = match &mode {
                // 2026-07-28 §Receiving Messages: no resumption.
                Mode::Modern => false,
                Mode::Legacy { .. } => {
                    let negotiated = self.session().version;
                    negotiated
                        .as_deref()
                        .and_then(Revision::from_wire)
                        .is_none_or(|r| r.facts().resumable_sse)
                }
            };
            if !resumable || state.last_event_id.is_none() {
                let detail = match (&mode, reason) {
                    (Mode::Modern, Some(r)) => format!("stream broke before the response: {r}"),
                    (Mode::Modern, None) => "stream broke before the response".to_owned(),
                    (_, Some(r)) => format!("the stream ended before the response: {r}"),
                    (_, None) => "the stream ended before the response".to_owned(),
                };
                let _ = tx.send(Err(TransportError::Closed { detail })).await;
                return;
            }
            if state.progressed {
                failures = 0;
            }
            failures += 1;
            if failures > self.config.max_resume_attempts {
                let _ = tx
                    .send(Err(TransportError::Closed {
                        detail: format!(
                            "the stream ended before the response and {} resumption attempts failed",
                            self.config.max_resume_attempts
                        ),
                    }))
                    .await;
                return;
            }
            // The server's `retry` MUST be respected (2025-11-25 §Sending Messages, 6).
            tokio::time::sleep(state.retry.unwrap_or(backoff(failures))).await;
            resp = match self.get_stream(&state).await {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
        }
    }
}

impl Upstream for HttpUpstream {
    async fn request(&self, frame: Frame) -> Result<Exchange, TransportError> {
        let Some(id) = frame
            .id()
            .cloned()
            .filter(|_| frame.kind() == Kind::Request)
        else {
            return Err(TransportError::Protocol(
                "Upstream::request needs a request frame with an id".to_owned(),
            ));
        };
        let initialize = frame.method() == Some("initialize");
        let (resp, mode) = self.inner.post(frame).await?;
        let init_session = (matches!(mode, Mode::Legacy { .. }) && initialize).then(|| {
            resp.headers()
                .get(header::SESSION_ID)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        });
        // A JSON answer is one body holding the response: read here, with no task and
        // no channel in between (most calls). Dropping this future drops the body, as
        // dropping the exchange would: the connection closes.
        if media_type(&resp) == "application/json" {
            let response = self.inner.read_json(resp, &id, init_session).await;
            return Ok(Exchange::answered(response));
        }
        let media = media_type(&resp).into_owned();
        let (tx, rx) = mpsc::channel(16);
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let closed = tx.clone();
            // Dropping the exchange drops the response body: the connection closes,
            // which on modern HTTP cancels the request (2026-07-28 §Cancellation).
            tokio::select! {
                () = inner.run_exchange(resp, &media, mode, id, init_session, tx) => {}
                () = closed.closed() => {}
            }
        });
        Ok(Exchange::new(rx))
    }

    async fn send(&self, frame: Frame) -> Result<(), TransportError> {
        // 202 Accepted is the expected answer (2025-03-26..2025-11-25 §Sending
        // Messages, item 4; 2026-07-28 §Sending Messages, item 5); any 2xx is taken.
        let (_resp, _mode) = self.inner.post(frame).await?;
        Ok(())
    }

    async fn close(&self) {
        if let Some(task) = self.inner.server_stream.lock().take() {
            task.abort();
        }
        let session = self.inner.session();
        *self.inner.session.lock() = Session::default();
        if session.id.is_none() {
            return;
        }
        // 2025-03-26..2025-11-25 §Session Management, item 5: DELETE ends the session;
        // 405 means the server does not let clients end sessions.
        let inner = &self.inner;
        let delete = async {
            let accept = Some("application/json, text/event-stream");
            let mut headers = Inner::legacy_headers(&session);
            headers.extend(inner.authorization().await?);
            let request = (inner.endpoint).request(Method::DELETE, accept, headers, None)?;
            let timeout = inner.config.request_timeout;
            (inner.client)
                .send(&inner.endpoint, request, timeout, "DELETE")
                .await
        };
        match delete.await {
            Ok(r) if r.status().is_success() || r.status().as_u16() == 405 => {}
            Ok(r) => tracing::debug!(
                status = r.status().as_u16(),
                "DELETE of the session refused"
            ),
            Err(e) => tracing::debug!("DELETE of the session failed: {e}"),
        }
    }
}

impl Drop for HttpUpstream {
    fn drop(&mut self) {
        if let Some(task) = self.inner.server_stream.lock().take() {
            task.abort();
        }
    }
}
