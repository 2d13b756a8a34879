//! The edge guards of every HTTP listener: the limits on a request's header fields
//! (431), `Origin` and `Host` allow-lists (DNS-rebinding protection), optional bearer
//! tokens (401 without one, RFC 6750), the request body size limit and the body read
//! timeout.
//!
//! 2025-06-18 basic/transports §Security Warning (and 2025-11-25, 2026-07-28
//! streamable-http §Security Warning): servers "MUST validate the `Origin` header on all
//! incoming connections to prevent DNS rebinding attacks", "SHOULD bind only to
//! localhost (127.0.0.1)" when running locally. A foreign `Origin` or `Host` is answered
//! 403 naming the header.
//!
//! A refusal's body is valid for the revision the request names
//! (`streamable_http::refuse`): a POST's body is read, within the body limits, for the
//! id of the request refused, and the JSON-RPC error carries it. Without one (a GET, a
//! notification, an unreadable body), the error omits `id` where the revision allows
//! it (its `MCP-Protocol-Version` 2025-11-25 or later), and elsewhere the answer is
//! the message as plain text: no JSON-RPC error without an id is valid for 2024-11-05
//! to 2025-06-18.
//!
//! Choices (the spec leaves them open):
//!
//! * A request without `Origin` is allowed (non-browser clients do not send it; a
//!   browser always does, so a rebinding page cannot omit it). A request without `Host`
//!   (HTTP/1.0) is allowed for the same reason; HTTP/1.1 requires it.
//! * `Origin: null` is refused unless `"null"` is in the allow-list.
//! * An allow-list entry is either a bare host (`localhost`, `127.0.0.1`, `[::1]`), which
//!   matches that host on any port (and, for origins, any scheme), or `host:port`, which
//!   matches exactly; an origin entry may also be a full origin (`https://app.example`),
//!   compared exactly (case-insensitively).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use mcpx_protocol::codec::Limits;
use mcpx_protocol::error::INVALID_REQUEST;

use crate::streamable_http::{BearerToken, Credential, HttpServerConfig, To, refuse};

/// The limits a listener reads a request body within.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    pub(crate) max_bytes: usize,
    pub(crate) timeout: Duration,
    pub(crate) frame: Limits,
}

/// The header limits, the allow-lists (normalised to lower case), the bearer tokens a
/// request must carry one of, if any are set, and the body limits a refusal reads the
/// body within.
#[derive(Debug, Clone)]
pub struct Guard {
    origins: Vec<String>,
    hosts: Vec<String>,
    tokens: Vec<BearerToken>,
    max_header_count: usize,
    max_header_bytes: usize,
    body: BodyLimits,
}

/// Splits `host[:port]` (with `[v6]` literals) into host and port.
fn split_authority(a: &str) -> (&str, Option<&str>) {
    if a.starts_with('[') {
        return match a.find(']') {
            Some(end) => {
                let (h, rest) = a.split_at(end + 1);
                (h, rest.strip_prefix(':'))
            }
            None => (a, None),
        };
    }
    match a.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, Some(p)),
        _ => (a, None),
    }
}

/// Whether `authority` matches an entry of `list` (entries lower-cased by
/// [`Guard::new`]; the authority compared case-insensitively, without a lower-cased
/// copy: this runs on every request).
fn authority_allowed<'a>(list: impl IntoIterator<Item = &'a String>, authority: &str) -> bool {
    let (host, port) = split_authority(authority.trim());
    list.into_iter().any(|entry| {
        let (eh, ep) = split_authority(entry);
        eh.eq_ignore_ascii_case(host)
            && (ep.is_none() || ep.zip(port).is_some_and(|(a, b)| a.eq_ignore_ascii_case(b)))
    })
}

impl Guard {
    /// The guard of a listener configured with `config`: its allow-lists, tokens and
    /// header limits.
    pub fn new(config: &HttpServerConfig) -> Self {
        let norm = |v: &[String]| v.iter().map(|s| s.trim().to_ascii_lowercase()).collect();
        Guard {
            origins: norm(&config.allowed_origins),
            hosts: norm(&config.allowed_hosts),
            tokens: config.bearer_tokens.clone(),
            max_header_count: config.max_header_count,
            max_header_bytes: config.max_header_bytes,
            body: BodyLimits {
                max_bytes: config.max_body_bytes,
                timeout: config.body_timeout,
                frame: config.limits,
            },
        }
    }

    /// The limits a refused request's body is read within.
    pub(crate) fn body_limits(&self) -> BodyLimits {
        self.body
    }

    /// Whether `req` may pass: the credential it carried (`None` where no token is
    /// asked for), or why not. In order: more header fields, or a larger header
    /// section, than the limits (431); no `Host`, or two (400); a foreign `Host` (an
    /// absolute-form target's authority stands for it) or `Origin` (403); no accepted
    /// token (401, the scheme's case ignored, tokens compared in constant time). A
    /// request that passes admits its connection ([`crate::listen::Admission`]).
    pub fn check<B>(&self, req: &axum::http::Request<B>) -> Result<Option<Credential>, Refusal> {
        let passed = check(self, req);
        if passed.is_ok() {
            crate::listen::Admission::admit_request(req);
        }
        passed
    }

    /// Whether a `Host` header value is allowed.
    pub(crate) fn host_allowed(&self, host: &str) -> bool {
        authority_allowed(&self.hosts, host)
    }

    /// Whether an `Origin` header value is allowed.
    pub(crate) fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        if self.origins.contains(&origin) {
            return true; // a full origin entry, or "null" listed explicitly
        }
        let Some((_scheme, authority)) = origin.split_once("://") else {
            return false;
        };
        if authority.contains('/') {
            return false; // an origin has no path
        }
        authority_allowed(
            self.origins.iter().filter(|e| !e.contains("://")),
            authority,
        )
    }
}

/// The authority a request names (RFC 9112 §3.2): an absolute-form target's (its
/// `Host` is then ignored, §3.2.2), else its one `Host`. A bad request (400): an
/// HTTP/1.1 request without `Host`, or one with more than one.
fn authority<B>(req: &axum::http::Request<B>) -> Result<Option<header::HeaderValue>, &'static str> {
    if let Some(a) = req.uri().authority() {
        return Ok(header::HeaderValue::from_str(a.as_str()).ok());
    }
    let mut hosts = req.headers().get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => Err("a request may carry only one Host header"),
        (Some(h), None) => Ok(Some(h.clone())),
        (None, _) if req.version() == axum::http::Version::HTTP_11 => {
            Err("an HTTP/1.1 request must carry a Host header")
        }
        (None, _) => Ok(None),
    }
}

/// Why the guard refuses a request: its status, the message, and the challenge of a
/// 401. The listeners of this crate answer it with a JSON-RPC body; others, their own.
#[derive(Debug)]
pub struct Refusal {
    status: StatusCode,
    message: String,
    challenge: Option<&'static str>,
}

impl Refusal {
    fn new(status: StatusCode, message: String) -> Refusal {
        Refusal {
            status,
            message,
            challenge: None,
        }
    }

    /// The answer's status: 400, 401, 403 or 431.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Why, in words.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `WWW-Authenticate` challenge of a 401.
    pub fn challenge(&self) -> Option<&'static str> {
        self.challenge
    }

    /// The answer to `req`, with a body valid for the revision it names. A POST's body
    /// is read for the id of the request refused, within `limits` (unless the client
    /// waits for `100 Continue`: it has not sent the body, and is not asked for it just
    /// to be refused).
    pub(crate) async fn answer(self, limits: BodyLimits, req: Request) -> Response {
        let revision = crate::streamable_http::header_revision(req.headers());
        let continues = req
            .headers()
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        let id = if req.method() == axum::http::Method::POST && !continues {
            let (parts, body) = req.into_parts();
            match read_body(&parts.headers, body, limits.max_bytes, limits.timeout).await {
                Ok(bytes) => mcpx_protocol::codec::decode_bytes(bytes, &limits.frame)
                    .ok()
                    .and_then(|d| crate::streamable_http::first_request_id(&d)),
                Err(_) => None,
            }
        } else {
            None
        };
        let to = To {
            id: id.as_ref(),
            revision,
        };
        let mut r = refuse(self.status, to, INVALID_REQUEST, &self.message);
        if let Some(challenge) = self.challenge {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static(challenge),
            );
        }
        r
    }
}

/// The size of a header section as [`HttpServerConfig::max_header_bytes`] counts it:
/// each field's name and value, and 4 bytes for `: ` and the line end.
fn header_bytes(headers: &axum::http::HeaderMap) -> usize {
    headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum()
}

/// Whether `req` may pass the guard: the credential it carried (`None` where no token
/// is asked for), or why it is refused. In order: more header fields, or a larger
/// header section, than the limits (431); no `Host`, or two (400); a foreign `Host` or
/// `Origin` (403); no accepted token (401).
pub(crate) fn check<B>(
    guard: &Guard,
    req: &axum::http::Request<B>,
) -> Result<Option<Credential>, Refusal> {
    let headers = req.headers();
    if headers.len() > guard.max_header_count {
        return Err(Refusal::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "the request has {} header fields; this server accepts at most {}",
                headers.len(),
                guard.max_header_count
            ),
        ));
    }
    let bytes = header_bytes(headers);
    if bytes > guard.max_header_bytes {
        return Err(Refusal::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "the request's header fields take {bytes} bytes; this server accepts at most {}",
                guard.max_header_bytes
            ),
        ));
    }
    let host = authority(req)
        .map_err(|why| Refusal::new(StatusCode::BAD_REQUEST, format!("{why} (RFC 9112 §3.2)")))?;
    if let Some(host) = &host {
        let ok = host.to_str().is_ok_and(|h| guard.host_allowed(h));
        if !ok {
            let shown = String::from_utf8_lossy(host.as_bytes()).into_owned();
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                format!(
                    "Host {shown:?} is not in this server's allowed hosts (DNS-rebinding protection)"
                ),
            ));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin.to_str().is_ok_and(|o| guard.origin_allowed(o));
        if !ok {
            let shown = String::from_utf8_lossy(origin.as_bytes()).into_owned();
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                format!(
                    "Origin {shown:?} is not in this server's allowed origins (DNS-rebinding protection)"
                ),
            ));
        }
    }
    if guard.tokens.is_empty() {
        return Ok(None);
    }
    // RFC 6750 §3: no credentials, a bare challenge; wrong ones, `invalid_token`.
    let presented = headers.get(header::AUTHORIZATION).map(|v| {
        let v = v.as_bytes();
        match v.get(..7) {
            Some(scheme) if scheme.eq_ignore_ascii_case(b"bearer ") => {
                v.get(7..).unwrap_or_default().trim_ascii()
            }
            _ => b"",
        }
    });
    let challenge = match presented {
        None => r#"Bearer realm="mcpx""#,
        Some(p) => {
            // Every token compared, so the time taken says nothing of which matched.
            let mut found = None;
            for t in &guard.tokens {
                if t.matches(p) {
                    found = Some(t.credential());
                }
            }
            if found.is_some() {
                return Ok(found);
            }
            r#"Bearer realm="mcpx", error="invalid_token""#
        }
    };
    Err(Refusal {
        challenge: Some(challenge),
        ..Refusal::new(
            StatusCode::UNAUTHORIZED,
            "this server requires Authorization: Bearer with one of its tokens".to_owned(),
        )
    })
}

/// The request headers a browser may send to an MCP endpoint (CORS preflight), beyond
/// the CORS-safelisted ones: the protocol's own, `Authorization` (a token), and any
/// `Mcp-Param-*` (2026-07-28 streamable-http §Custom Headers).
const ALLOWED_REQUEST_HEADERS: &[&str] = &[
    "content-type",
    "accept",
    "authorization",
    "last-event-id",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
];

/// The response headers a browser's script may read: the session id, the negotiated
/// revision, and an authorization challenge.
const EXPOSED: &str = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate";

/// The answer to a CORS preflight (`OPTIONS`) from the allowed `origin`: 204 naming the
/// methods and the requested headers it may use (each one MCP defines), or 403 when
/// the `Host` is foreign. No token is asked for: a browser sends none on a preflight
/// (Fetch §CORS-preflight request); the request that follows is checked as any other.
pub(crate) fn preflight(
    guard: &Guard,
    headers: &axum::http::HeaderMap,
    origin: &header::HeaderValue,
) -> Response {
    if let Some(host) = headers.get(header::HOST)
        && !host.to_str().is_ok_and(|h| guard.host_allowed(h))
    {
        // Not an MCP message, and no revision named: the message as text.
        let shown = String::from_utf8_lossy(host.as_bytes()).into_owned();
        return refuse(
            StatusCode::FORBIDDEN,
            To::default(),
            INVALID_REQUEST,
            &format!(
                "Host {shown:?} is not in this server's allowed hosts (DNS-rebinding protection)"
            ),
        );
    }
    let requested = headers
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let allowed: Vec<&str> = requested
        .split(',')
        .map(str::trim)
        .filter(|h| {
            let h = h.to_ascii_lowercase();
            ALLOWED_REQUEST_HEADERS.contains(&h.as_str()) || h.starts_with("mcp-param-")
        })
        .collect();
    let mut response = StatusCode::NO_CONTENT.into_response();
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        header::HeaderValue::from_static("GET, POST, DELETE"),
    );
    if let Ok(v) = header::HeaderValue::try_from(allowed.join(", "))
        && !allowed.is_empty()
    {
        h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, v);
    }
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        header::HeaderValue::from_static("600"),
    );
    h.insert(
        header::VARY,
        header::HeaderValue::from_static("Origin, Access-Control-Request-Headers"),
    );
    response
}

/// Lets the allowed `origin`'s script read `response` (CORS).
pub(crate) fn allow(response: &mut Response, origin: &header::HeaderValue) {
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        header::HeaderValue::from_static(EXPOSED),
    );
    h.append(header::VARY, header::HeaderValue::from_static("Origin"));
}

/// The guard as a tower layer around every route: the refusals of [`check`], the route
/// otherwise (with the request's credential as an extension, where tokens are asked
/// for).
///
/// A plain layer rather than `axum::middleware::from_fn`: that boxes a ~1 KB future
/// and clones the inner service on every request; this calls the route's own future
/// (callgrind, docs/performance.md).
#[derive(Debug, Clone)]
pub(crate) struct GuardLayer(pub(crate) Arc<Guard>);

impl<S> tower_layer::Layer<S> for GuardLayer {
    type Service = Guarded<S>;

    fn layer(&self, inner: S) -> Guarded<S> {
        Guarded {
            guard: self.0.clone(),
            inner,
        }
    }
}

/// A route behind the [`GuardLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Guarded<S> {
    guard: Arc<Guard>,
    inner: S,
}

impl<S> tower_service::Service<Request> for Guarded<S>
where
    S: tower_service::Service<Request, Response = Response>,
    S::Error: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = futures_util::future::Either<
        futures_util::future::BoxFuture<'static, Result<Response, S::Error>>,
        S::Future,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        // Ready when the route is: the route is called only after this (tower's
        // contract), so no clone of it is needed to call it.
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        match self.guard.check(&req) {
            Err(refused) => {
                let limits = self.guard.body_limits();
                futures_util::future::Either::Left(Box::pin(async move {
                    Ok(refused.answer(limits, req).await)
                }))
            }
            Ok(credential) => {
                if let Some(c) = credential {
                    req.extensions_mut().insert(c);
                }
                futures_util::future::Either::Right(self.inner.call(req))
            }
        }
    }
}

/// Why a request body could not be read.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Larger than the limit (413).
    TooLarge { limit: usize },
    /// Not complete within the body timeout (408).
    Timeout(Duration),
    /// The connection failed (400).
    Io(String),
}

impl BodyError {
    /// The HTTP answer, with a JSON-RPC error body naming the problem.
    pub(crate) fn to_response(&self) -> Response {
        let (status, msg) = match self {
            BodyError::TooLarge { limit } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body exceeds the limit of {limit} bytes"),
            ),
            BodyError::Timeout(t) => (
                StatusCode::REQUEST_TIMEOUT,
                format!("request body not received within {} ms", t.as_millis()),
            ),
            BodyError::Io(e) => (
                StatusCode::BAD_REQUEST,
                format!("could not read the request body: {e}"),
            ),
        };
        // The body was not read: its id is unreadable (register A-C4).
        crate::streamable_http::error_response(status, None, INVALID_REQUEST, &msg)
    }
}

/// Reads a whole request body, at most `limit` bytes, within `timeout`. A declared
/// `Content-Length` over the limit is refused before anything is read.
pub(crate) async fn read_body(
    headers: &axum::http::HeaderMap,
    mut body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<Vec<u8>, BodyError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge { limit });
    }
    let read = async move {
        let mut buf = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| BodyError::Io(e.to_string()))?;
            if let Ok(data) = frame.into_data() {
                if buf.len() + data.len() > limit {
                    return Err(BodyError::TooLarge { limit });
                }
                buf.extend_from_slice(&data);
            }
        }
        Ok(buf)
    };
    tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| BodyError::Timeout(timeout))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(origins: &[&str], hosts: &[&str]) -> Guard {
        let list = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
        Guard::new(&HttpServerConfig {
            allowed_origins: list(origins),
            allowed_hosts: list(hosts),
            ..HttpServerConfig::default()
        })
    }

    #[test]
    fn allow_lists() {
        let g = guard(
            &["localhost", "127.0.0.1", "[::1]", "https://app.example"],
            &["localhost", "127.0.0.1", "[::1]"],
        );
        assert!(g.host_allowed("localhost:3921"));
        assert!(g.host_allowed("127.0.0.1"));
        assert!(g.host_allowed("[::1]:80"));
        assert!(g.host_allowed("LOCALHOST:1"));
        assert!(!g.host_allowed("evil.example"));
        assert!(!g.host_allowed("localhost.evil.example:80"));
        assert!(g.origin_allowed("http://localhost:5173"));
        assert!(g.origin_allowed("http://[::1]:5173"));
        assert!(g.origin_allowed("https://app.example"));
        assert!(!g.origin_allowed("https://app.example:444"));
        assert!(!g.origin_allowed("http://evil.example"));
        assert!(!g.origin_allowed("null"));
        let exact = guard(&["localhost:8080"], &["localhost:8080"]);
        assert!(exact.host_allowed("localhost:8080"));
        assert!(exact.host_allowed(" LocalHost:8080 "));
        assert!(!exact.host_allowed("localhost"));
        assert!(!exact.host_allowed("localhost:8081"));
    }
}
