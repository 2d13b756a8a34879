//! The HTTP/1.1 client under both HTTP upstream transports (Streamable HTTP and the
//! 2024-11-05 HTTP+SSE client): hyper-util's pooled client, the one reqwest wraps.
//!
//! mcpx used reqwest until its per-request layers showed in the profile: its
//! `FollowRedirect` layer (installed whatever the redirect policy) parses each request's
//! `Uri` and each response's into a `url::Url`, and its retry and redirect futures wrap
//! every send; together about a fifth of an HTTP → HTTP call's instructions
//! (docs/performance.md, eleventh round). An MCP endpoint needs none of it, so this
//! client does the rest of what reqwest did here and no more:
//!
//! * a connect timeout; `TCP_NODELAY` (a request is one write, and Nagle's algorithm
//!   would hold a small one back); kept-alive, pooled connections, idle ones closed
//!   after 90 s;
//! * the endpoint's `Uri` and the configured headers are parsed once, when the
//!   transport is built, and a header that is not valid HTTP is refused then, naming
//!   it (reqwest refused it on every send);
//! * credentials in the URL (`http://user:pass@host/mcp`) are sent as `Authorization:
//!   Basic …` (RFC 7617) and not in the request line; a configured `Authorization`
//!   header wins over them (reqwest sent both).
//!
//! The responses' helpers both clients share are here too: a non-2xx answer as its
//! error, the media type, a bounded body, a bounded SSE event stream.
//!
//! What it does not do, and reqwest did: follow redirects (a 3xx is a non-2xx answer
//! like any other, reported with its status), and read proxy settings from the
//! environment (`HTTP_PROXY`, `NO_PROXY`): upstreams are reached directly. Neither
//! has a use on an MCP endpoint that this build can reach (`http://` only, no TLS).

use std::borrow::Cow;
use std::sync::LazyLock;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::{BodyDataStream, BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue, WWW_AUTHENTICATE,
};
use hyper::{Method, Request, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use percent_encoding::percent_decode_str;
use url::Url;

use mcpx_protocol::{Frame, header};

use crate::error::TransportError;

/// Headers for one request, beside the configured ones: names as the protocol spells
/// them (static, but for `Mcp-Param-*`), values as made for this request.
pub(crate) type Headers = Vec<(Cow<'static, str>, String)>;

/// A response; its body is read as it arrives.
pub(crate) type Response = hyper::Response<Incoming>;

/// How long an idle pooled connection is kept (reqwest's default).
const POOL_IDLE: Duration = Duration::from_secs(90);

/// A pooled HTTP/1.1 client (cheap to clone: the pool is shared).
#[derive(Debug, Clone)]
pub(crate) struct HttpClient {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl HttpClient {
    /// A client whose connections are established within `connect_timeout`.
    pub(crate) fn new(connect_timeout: Duration) -> HttpClient {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE)
            .build(connector);
        HttpClient { client }
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
        match tokio::time::timeout(timeout, self.client.request(request)).await {
            Err(_) => Err(TransportError::Timeout(timeout)),
            Ok(Err(e)) => Err(TransportError::Io(format!(
                "{what} ({}): {}",
                to.uri,
                chain(&e)
            ))),
            Ok(Ok(r)) => Ok(r),
        }
    }
}

impl HttpClient {
    /// POSTs a JSON-RPC message (`Content-Type: application/json`) to `endpoint`, with
    /// `Accept: accept` when given and `headers`, bounding the wait for the answer's
    /// head by `timeout`.
    pub(crate) async fn post(
        &self,
        endpoint: &Endpoint,
        accept: Option<&'static str>,
        headers: Headers,
        frame: &Frame,
        timeout: Duration,
    ) -> Result<Response, TransportError> {
        let body = Some(frame.as_str().to_owned());
        let request = endpoint.request(Method::POST, accept, headers, body)?;
        self.send(endpoint, request, timeout, "POST to the upstream")
            .await
    }
}

/// An HTTP endpoint with the headers sent on every request to it, parsed once.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    uri: Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Endpoint {
    /// `url` (already checked to be `http://`) with the configured `headers`; a header
    /// that is not valid HTTP is an error naming it. Credentials in `url` become an
    /// `Authorization: Basic` header, unless `headers` has an `Authorization` of its own.
    pub(crate) fn new(url: &Url, headers: &[(String, String)]) -> Result<Endpoint, TransportError> {
        let mut url = url.clone();
        let credentials = take_credentials(&mut url);
        let uri = Uri::try_from(url.as_str())
            .map_err(|e| TransportError::Io(format!("invalid URL {url}: {e}")))?;
        let mut headers: Vec<(HeaderName, HeaderValue)> = headers
            .iter()
            .map(|(k, v)| header(k, v).map_err(|e| format!("configured header {k:?}: {e}")))
            .collect::<Result<_, _>>()
            .map_err(TransportError::Io)?;
        if let Some(credentials) = credentials
            && !headers.iter().any(|(k, _)| k == AUTHORIZATION)
        {
            let mut value = HeaderValue::try_from(format!("Basic {}", B64.encode(credentials)))
                .map_err(|e| TransportError::Io(format!("the URL's credentials: {e}")))?;
            value.set_sensitive(true);
            headers.insert(0, (AUTHORIZATION, value));
        }
        Ok(Endpoint { uri, headers })
    }

    /// A request to the endpoint: `Accept: accept` when given, the configured headers,
    /// then `extra` (each appended, as given); with a body, `Content-Type:
    /// application/json`. `extra`'s values become header values without a copy.
    pub(crate) fn request(
        &self,
        method: Method,
        accept: Option<&'static str>,
        extra: Headers,
        body: Option<String>,
    ) -> Result<Request<Full<Bytes>>, TransportError> {
        let json = body.is_some();
        let mut request = Request::new(Full::new(body.map_or_else(Bytes::new, Bytes::from)));
        *request.method_mut() = method;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
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

/// Takes the user name and password out of `url`, percent-decoded and joined as Basic
/// authentication writes them (`user:password`), if it has any.
fn take_credentials(url: &mut Url) -> Option<Vec<u8>> {
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    let mut credentials: Vec<u8> = percent_decode_str(url.username()).collect();
    credentials.push(b':');
    credentials.extend(percent_decode_str(url.password().unwrap_or_default()));
    // An `http://` URL has a host, so neither can fail; if one did, the credentials
    // would stay in the URL, and the request line (origin form) does not carry them.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    Some(credentials)
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

/// A header from its name and value as text.
fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), String> {
    let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
    let value = HeaderValue::from_str(value).map_err(|e| e.to_string())?;
    Ok((name, value))
}

/// The body of `response` as a stream of its data chunks.
fn body_stream(response: Response) -> BodyDataStream<Incoming> {
    BodyDataStream::new(response.into_body())
}

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

/// Checks that `url` is one this build can reach (http only).
pub(crate) fn parse_http_url(url: &str) -> Result<Url, TransportError> {
    let parsed =
        Url::parse(url).map_err(|e| TransportError::Io(format!("invalid URL {url:?}: {e}")))?;
    match parsed.scheme() {
        "http" => Ok(parsed),
        "https" => Err(TransportError::Io(format!(
            "https upstreams are not supported by this build (no TLS): {url}; use http:// or a TLS-terminating proxy"
        ))),
        other => Err(TransportError::Io(format!(
            "unsupported URL scheme {other:?} in {url}; only http:// is supported"
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
    let body = match read_bounded(resp, max_body).await {
        Ok((bytes, _)) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => format!("(body unreadable: {e})"),
    };
    let code = jsonrpc_error_code(&body);
    TransportError::Http { status, body, code }
}

/// The media type of a response, lowercased, without parameters.
pub(crate) fn media_type(resp: &Response) -> String {
    resp.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// The SSE events of a response body, each bounded to `max_event` bytes (an event
/// over the bound ends the stream with an error).
pub(crate) fn sse_events(
    resp: Response,
    max_event: usize,
) -> impl Stream<Item = Result<sse_stream::Sse, String>> + Send + Unpin {
    // Bytes since the last blank line (the end of an event). CR, LF and CRLF all end a
    // line (the SSE grammar); two line ends in a row end an event.
    let mut run = 0usize;
    let mut last_was_eol = false;
    let mut prev_cr = false;
    let bytes = body_stream(resp).map(move |chunk| {
        let chunk = chunk.map_err(|e| std::io::Error::other(chain(&e)))?;
        for &b in chunk.iter() {
            if b == b'\n' && prev_cr {
                prev_cr = false;
                continue;
            }
            if b == b'\r' || b == b'\n' {
                if last_was_eol {
                    run = 0;
                }
                last_was_eol = true;
                prev_cr = b == b'\r';
            } else {
                last_was_eol = false;
                prev_cr = false;
                run += 1;
                if run > max_event {
                    return Err(std::io::Error::other(format!(
                        "an SSE event exceeds the limit of {max_event} bytes"
                    )));
                }
            }
        }
        Ok(chunk)
    });
    Box::pin(sse_stream::SseByteStream::new(bytes)).map(|r| r.map_err(|e| e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
