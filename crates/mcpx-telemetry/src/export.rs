//! The OTLP exporter's HTTP client: hyper's, on a current-thread runtime of its own.
//!
//! The SDK's batch processor exports from a thread of its own, blocking on the
//! exporter's future; hyper needs a tokio runtime to connect. Exports are spawned on
//! this client's runtime, never on mcpx's: a slow collector costs no request a
//! moment, and the last spans can be flushed after mcpx's runtime has stopped.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client as Hyper;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};

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
    hyper: Hyper<HttpConnector, Full<Bytes>>,
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
        let hyper = {
            let _entered = handle.enter();
            Hyper::builder(TokioExecutor::new()).build_http()
        };
        Ok(Client {
            runtime: handle,
            hyper,
        })
    }
}

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let request = hyper::Request::from_parts(parts, Full::new(body));
        let hyper = self.hyper.clone();
        let exchange = async move {
            let response = hyper.request(request).await?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| -> HttpError { format!("the collector's answer: {e}").into() })?
                .to_bytes();
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        };
        let timed = async move {
            match tokio::time::timeout(EXPORT_WAIT, exchange).await {
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
