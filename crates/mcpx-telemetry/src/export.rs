//! The OTLP exporter's HTTP client: hyper's HTTP/1.1, plain or over TLS, on a
//! current-thread runtime of its own.
//!
//! The SDK's batch processor exports from a thread of its own, blocking on the
//! exporter's future; hyper needs a tokio runtime to connect. Exports are spawned on
//! this client's runtime, never on mcpx's: a slow collector costs no request a
//! moment, and the last spans can be flushed after mcpx's runtime has stopped.
//!
//! Each export opens a connection of its own. A batch goes every few seconds, so a
//! pool would save little, and a fresh connection never finds one the collector
//! closed. `https://` collectors are checked against the system's roots, as
//! upstreams are (`mcpx_transport::tls`: `SSL_CERT_FILE` and `SSL_CERT_DIR` too).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// The longest export, connection included (the SDK's own timeout is 10 s).
const EXPORT_WAIT: Duration = Duration::from_secs(10);

/// The largest collector answer read (an OTLP answer is a few bytes; a partial
/// success names the spans it refused).
const MAX_ANSWER: usize = 64 * 1024;

/// Why the exporter could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Its runtime (a thread) could not be started.
    #[error("the exporter's runtime could not start: {0}")]
    Runtime(#[source] std::io::Error),
    /// The SDK refused the exporter's configuration.
    #[error("the OTLP exporter could not be built: {0}")]
    Build(#[source] opentelemetry_otlp::ExporterBuildError),
}

/// An HTTP/1.1 client for the collector.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    runtime: tokio::runtime::Handle,
}

impl Client {
    /// Starts the client's runtime on a thread named `mcpx-otlp`.
    pub(crate) fn start() -> Result<Client, ExportError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ExportError::Runtime)?;
        let handle = runtime.handle().clone();
        std::thread::Builder::new()
            .name("mcpx-otlp".into())
            .spawn(move || runtime.block_on(std::future::pending::<()>()))
            .map_err(ExportError::Runtime)?;
        Ok(Client { runtime: handle })
    }
}

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let timed = async move {
            match tokio::time::timeout(EXPORT_WAIT, exchange(request)).await {
                Ok(r) => r,
                Err(_) => Err(format!("no answer from the collector in {EXPORT_WAIT:?}").into()),
            }
        };
        self.runtime
            .spawn(timed)
            .await
            .map_err(|e| -> HttpError { format!("the export stopped: {e}").into() })?
    }
}

/// One request on a connection of its own.
async fn exchange(request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
    let uri = request.uri().clone();
    let host = uri
        .host()
        .ok_or_else(|| format!("the collector URL {uri} has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(format!("the collector URL {uri} is not http:// or https://").into()),
    };
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let tcp = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("connecting to the collector at {host}:{port}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let (mut parts, body) = request.into_parts();
    // HTTP/1.1 wants the origin form and a Host header.
    parts.uri = uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .map_err(|e| format!("the collector URL {uri}: {e}"))?;
    if !parts.headers.contains_key(hyper::header::HOST)
        && let Some(authority) = uri.authority()
    {
        parts
            .headers
            .insert(hyper::header::HOST, authority.as_str().parse()?);
    }
    let request = hyper::Request::from_parts(parts, Full::new(body));
    if tls {
        let stream = mcpx_transport::tls::connect(&host, tcp).await?;
        send(stream, request).await
    } else {
        send(tcp, request).await
    }
}

async fn send(
    io: impl AsyncRead + AsyncWrite + Send + Unpin + 'static,
    request: hyper::Request<Full<Bytes>>,
) -> Result<Response<Bytes>, HttpError> {
    let (mut sender, connection) = http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let response = sender.send_request(request).await?;
    let (parts, body) = response.into_parts();
    let body = Limited::new(body, MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| -> HttpError { format!("the collector's answer: {e}").into() })?
        .to_bytes();
    Ok(Response::from_parts(parts, body))
}
