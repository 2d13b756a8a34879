//! The 2024-11-05 HTTP+SSE client.
//!
//! 2024-11-05 basic/transports §HTTP with SSE: the client opens an SSE stream with GET;
//! the server MUST first send an `endpoint` event whose data is the URI the client
//! POSTs every message to; every server message (responses included) then arrives on
//! the SSE stream as a `message` event. So responses are matched to requests by id
//! ([`Pending`]) and everything else goes to the [`Unsolicited`] receiver.
//!
//! The endpoint is resolved against the SSE URL; one on another origin is refused
//! (the client would otherwise send its messages, and any configured credentials, to
//! a host the configuration never named). When the SSE stream ends the connection is
//! closed: every pending exchange ends with [`TransportError::Closed`] (2024-11-05
//! defines no resumption).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use hyper::Method;
use mcpx_protocol::codec::{Decoded, Limits};
use mcpx_protocol::jsonrpc::Kind;
use mcpx_protocol::{Frame, Id};
use tokio::sync::watch;
use tokio::task::AbortHandle;
use url::Url;

use crate::child::peer_error;
use crate::error::TransportError;
use crate::http_client::{Endpoint, HttpClient};
use crate::http_client::{http_error, media_type, parse_http_url, sse_events};
use crate::pending::Pending;
use crate::upstream::{Awaited, Exchange, SentCount, Unsolicited, Upstream, unsolicited};

/// How to reach a 2024-11-05 HTTP+SSE upstream.
#[derive(Debug, Clone)]
pub struct SseClientConfig {
    /// The SSE endpoint (`http://…/sse`).
    pub url: String,
    /// Extra headers sent on every request (from configuration).
    pub headers: Vec<(String, String)>,
    /// Bound on establishing a TCP connection (default 10 s).
    pub connect_timeout: Duration,
    /// How long an idle connection is kept alive for the next request (default 90 s;
    /// zero keeps none).
    pub idle_timeout: Duration,
    /// The most connections kept alive (default 64): enough for as many requests in
    /// flight at once; beyond them a connection carries one exchange and is closed.
    pub max_idle_connections: usize,
    /// Bound on waiting for a response's status and headers (default 30 s).
    pub request_timeout: Duration,
    /// Bound on waiting for the `endpoint` event after the stream opened (default 10 s).
    pub endpoint_timeout: Duration,
    /// Frame limits.
    pub limits: Limits,
    /// Largest SSE event, in bytes (default 16 MiB).
    pub max_sse_event_bytes: usize,
    /// How much of an error body is kept (default 64 KiB).
    pub max_error_body_bytes: usize,
    /// Requests awaiting a response at once (default 256).
    pub max_pending: usize,
    /// Frames queued on the [`Unsolicited`] receiver before reading pauses (default 1024).
    pub unsolicited_queue: usize,
    /// How connections reach the upstream (default: the environment's proxy, if any).
    pub proxy: crate::proxy::Proxy,
    /// A user's authorization (authorization code): the stream's GET and every POST
    /// carry the stored token (default none; crate::oauth::code).
    pub user_auth: Option<crate::oauth::code::UserAuth>,
}

impl SseClientConfig {
    /// A configuration for `url` with every other field at its default.
    pub fn new(url: impl Into<String>) -> Self {
        SseClientConfig {
            url: url.into(),
            headers: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(90),
            max_idle_connections: 64,
            request_timeout: Duration::from_secs(30),
            endpoint_timeout: Duration::from_secs(10),
            limits: Limits::default(),
            max_sse_event_bytes: 16 * 1024 * 1024,
            max_error_body_bytes: 64 * 1024,
            max_pending: 256,
            unsolicited_queue: 1024,
            proxy: crate::proxy::Proxy::default(),
            user_auth: None,
        }
    }
}

#[derive(Debug)]
struct Shared {
    client: HttpClient,
    /// Where messages are POSTed (the `endpoint` event's URI), with the configured
    /// headers.
    post_to: Endpoint,
    endpoint: Url,
    config: SseClientConfig,
    pending: Arc<Pending>,
    closed: watch::Sender<Option<String>>,
    /// Frames delivered to [`Unsolicited`] so far.
    unsolicited_sent: SentCount,
    /// Where tokens come from, for an upstream that needs a user's authorization.
    tokens: Option<crate::oauth::Tokens>,
}

/// `Authorization: token`, as a request's extra header.
fn bearer(token: Option<&hyper::header::HeaderValue>) -> crate::http_client::Headers {
    token
        .and_then(|t| t.to_str().ok())
        .map(|v| (std::borrow::Cow::Borrowed("authorization"), v.to_owned()))
        .into_iter()
        .collect()
}

impl Awaited for Shared {
    fn closed_error(&self) -> TransportError {
        TransportError::Closed {
            detail: self
                .closed
                .borrow()
                .clone()
                .unwrap_or_else(|| "the SSE stream is closed".to_owned()),
        }
    }

    fn forget(&self, id: &Id) {
        self.pending.forget(id);
    }
}

impl Shared {
    fn is_closed(&self) -> bool {
        self.closed.borrow().is_some()
    }

    fn close(&self, detail: String) {
        self.closed.send_if_modified(|c| {
            if c.is_none() {
                *c = Some(detail);
                true
            } else {
                false
            }
        });
        self.pending.close_all();
    }

    /// POSTs `frame` to the endpoint; 200 and 202 are both taken as accepted
    /// (2024-11-05 leaves the status open; servers answer 202).
    async fn post(&self, frame: Frame) -> Result<(), TransportError> {
        if self.is_closed() {
            return Err(self.closed_error());
        }
        let timeout = self.config.request_timeout;
        // Boxed, as every token path: their futures (a token fetch, a refresh) would
        // otherwise make every POST's as large.
        let mut token = match &self.tokens {
            Some(t) if !t.none_yet() => Box::pin(t.upfront()).await?,
            _ => None,
        };
        let mut attempt = 0;
        loop {
            let resp = (self.client)
                .post(
                    &self.post_to,
                    None,
                    bearer(token.as_ref()),
                    frame.clone(),
                    timeout,
                )
                .await?;
            if resp.status().is_success() {
                return Ok(());
            }
            match (
                http_error(resp, self.config.max_error_body_bytes).await,
                &self.tokens,
            ) {
                (TransportError::Auth { status, challenge }, Some(tokens))
                    if tokens.retries(status, attempt) =>
                {
                    token = Some(
                        Box::pin(tokens.refused(
                            status,
                            token.as_ref(),
                            challenge.as_deref(),
                            attempt,
                        ))
                        .await?,
                    );
                    attempt += 1;
                }
                (e, _) => return Err(e),
            }
        }
    }
}

/// A connection to a 2024-11-05 HTTP+SSE upstream.
#[derive(Debug)]
pub struct SseUpstream {
    shared: Arc<Shared>,
    reader: AbortHandle,
}

/// The messages of one event (a big one decoded off the event loop:
/// [`crate::upstream::OFF_LOOP_BYTES`]).
async fn decode(data: String, limits: &Limits) -> Vec<Frame> {
    match crate::upstream::decode_text(data, limits).await {
        Ok(Decoded::Single(f)) => vec![f],
        Ok(Decoded::Batch(items)) => items.into_iter().filter_map(Result::ok).collect(),
        Err(e) => {
            tracing::warn!("skipped an undecodable message from the upstream: {e}");
            Vec::new()
        }
    }
}

impl SseUpstream {
    /// How many frames went to its [`Unsolicited`] receiver so far (see
    /// [`crate::upstream::UnsolicitedSender`]).
    pub fn unsolicited_sent(&self) -> u64 {
        self.shared.unsolicited_sent.get()
    }

    /// Opens the SSE stream and waits for the `endpoint` event.
    pub async fn connect(
        config: SseClientConfig,
    ) -> Result<(SseUpstream, Unsolicited), TransportError> {
        let url = parse_http_url(&config.url)?;
        let client = HttpClient::new(
            config.connect_timeout,
            config.idle_timeout,
            config.max_idle_connections,
        );
        let stream = Endpoint::new(&url, &config.headers, &config.proxy)?;
        let tokens = crate::oauth::Tokens::new(
            None,
            config.user_auth.as_ref(),
            &url,
            true,
            &client,
            &config.proxy,
            config.request_timeout,
        )?;
        let mut token = match &tokens {
            Some(t) => t.upfront().await?,
            None => None,
        };
        let mut attempt = 0;
        let resp = loop {
            let request = stream.request(
                Method::GET,
                Some("text/event-stream"),
                bearer(token.as_ref()),
                None,
            )?;
            let resp = client
                .send(
                    &stream,
                    request,
                    config.request_timeout,
                    "GET of the SSE stream",
                )
                .await?;
            if resp.status().is_success() {
                break resp;
            }
            match (http_error(resp, config.max_error_body_bytes).await, &tokens) {
                (TransportError::Auth { status, challenge }, Some(t))
                    if t.retries(status, attempt) =>
                {
                    token = Some(
                        t.refused(status, token.as_ref(), challenge.as_deref(), attempt)
                            .await?,
                    );
                    attempt += 1;
                }
                (e, _) => return Err(e),
            }
        };
        if media_type(&resp) != "text/event-stream" {
            return Err(TransportError::Protocol(format!(
                "the SSE endpoint answered with {:?}, not text/event-stream",
                media_type(&resp)
            )));
        }
        let mut events = sse_events(resp, config.max_sse_event_bytes);
        let (un_tx, un_rx) = unsolicited(config.unsolicited_queue);

        // 2024-11-05 §HTTP with SSE: "the server MUST send an `endpoint` event".
        let wait_endpoint = async {
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| TransportError::Closed {
                    detail: format!("the SSE stream broke before the endpoint event: {e}"),
                })?;
                match event.event.as_deref() {
                    Some("endpoint") => {
                        let data = event.data.unwrap_or_default();
                        return url.join(data.trim()).map_err(|e| {
                            TransportError::Protocol(format!("invalid endpoint {data:?}: {e}"))
                        });
                    }
                    _ => {
                        // Messages before the endpoint: nothing can be pending yet.
                        if let Some(data) = event.data.filter(|d| !d.trim().is_empty()) {
                            for frame in decode(data, &config.limits).await {
                                un_tx.send(frame).await;
                            }
                        }
                    }
                }
            }
            Err(TransportError::Closed {
                detail: "the SSE stream ended before the endpoint event".to_owned(),
            })
        };
        let endpoint = tokio::time::timeout(config.endpoint_timeout, wait_endpoint)
            .await
            .map_err(|_| TransportError::Timeout(config.endpoint_timeout))??;
        if endpoint.origin() != url.origin() {
            return Err(TransportError::Protocol(format!(
                "the endpoint {endpoint} is not on the SSE stream's origin {}",
                url.origin().ascii_serialization()
            )));
        }

        let post_to = Endpoint::new(&endpoint, &config.headers, &config.proxy)?;
        let (closed, _) = watch::channel(None);
        let shared = Arc::new(Shared {
            client,
            post_to,
            endpoint,
            pending: Arc::new(Pending::new(config.max_pending.max(1))),
            config,
            closed,
            unsolicited_sent: un_tx.count(),
            tokens,
        });
        let reader = {
            let shared = shared.clone();
            tokio::spawn(async move {
                let limits = shared.config.limits;
                let mut reason = None;
                while let Some(event) = events.next().await {
                    let event = match event {
                        Ok(e) => e,
                        Err(e) => {
                            reason = Some(e);
                            break;
                        }
                    };
                    if event.event.as_deref().is_some_and(|e| e != "message") {
                        tracing::debug!(event = ?event.event, "ignored an SSE event");
                        continue;
                    }
                    let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                        continue;
                    };
                    for frame in decode(data, &limits).await {
                        match frame.kind() {
                            Kind::Result | Kind::Error => {
                                if let Err(f) = shared.pending.complete(frame) {
                                    tracing::warn!(frame = %f, "dropped a response to no pending request");
                                }
                            }
                            Kind::Request | Kind::Notification => {
                                un_tx.send(frame).await;
                            }
                        }
                    }
                }
                shared.close(match reason {
                    Some(r) => format!("the SSE stream broke: {r}"),
                    None => "the SSE stream ended".to_owned(),
                });
            })
            .abort_handle()
        };
        Ok((SseUpstream { shared, reader }, un_rx))
    }

    /// The URL messages are POSTed to (from the `endpoint` event).
    pub fn endpoint(&self) -> &Url {
        &self.shared.endpoint
    }

    /// Whether the SSE stream has ended (every further request fails).
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Resolves once the SSE stream has ended, with why.
    pub fn closed(&self) -> impl Future<Output = String> + Send + 'static {
        crate::upstream::when_closed(&self.shared.closed, "the SSE stream is closed")
    }
}

impl Upstream for SseUpstream {
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
        if self.shared.is_closed() {
            return Err(self.shared.closed_error());
        }
        let rx = self
            .shared
            .pending
            .register(id.clone())
            .map_err(peer_error)?;
        if let Err(e) = self.shared.post(frame).await {
            self.shared.pending.forget(&id);
            return Err(e);
        }
        Ok(Exchange::once(rx, self.shared.clone(), id))
    }

    async fn send(&self, frame: Frame) -> Result<(), TransportError> {
        self.shared.post(frame).await
    }

    async fn close(&self) {
        self.reader.abort();
        self.shared.close("closed by mcpx".to_owned());
    }
}

impl Drop for SseUpstream {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
