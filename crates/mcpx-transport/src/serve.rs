//! Serving one accepted HTTP/1.1 connection, with graceful shutdown.
//!
//! Each of mcpx's HTTP listeners (the Streamable HTTP and HTTP+SSE front, the
//! daemon's, the OAuth redirect's) serves its connections with [`connection`].
//! Shutdown is per connection: hyper-util's `GracefulShutdown` would watch every
//! connection of a listener, but each accept loop already holds its connections in a
//! `JoinSet` and bounds their drain itself.

use std::pin::Pin;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::service::HttpService;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio_util::sync::CancellationToken;

/// How a connection is served: hyper's defaults where a field is `None`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Settings {
    /// The most a request's head may take to arrive (`None`: unbounded).
    pub header_read_timeout: Option<Duration>,
    /// The most header fields a request may have.
    pub max_headers: Option<usize>,
    /// The connection's read buffer, and so the most a request's head may take; at
    /// least hyper's minimum (8 KiB), which panics below it.
    pub max_buf_size: Option<usize>,
    /// Whether a service may upgrade the connection (`hyper::upgrade`). Without it,
    /// the connection's end shuts its stream down (a TLS `close_notify`); with it,
    /// the stream is handed on or dropped.
    pub upgrades: bool,
}

/// Serves HTTP/1.1 with `service` on `stream` (plain or TLS) until the connection
/// closes, or gracefully once `shutdown` fires: the exchange under way ends, then the
/// connection. An error ends the connection and is logged at debug.
pub async fn connection<T, S, B>(
    stream: T,
    service: S,
    shutdown: CancellationToken,
    settings: Settings,
) where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    // Without a timer, hyper bounds no head's time.
    if let Some(timeout) = settings.header_read_timeout {
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(timeout);
    }
    if let Some(fields) = settings.max_headers {
        builder.max_headers(fields);
    }
    if let Some(bytes) = settings.max_buf_size {
        builder.max_buf_size(bytes);
    }
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    if settings.upgrades {
        until_shutdown(conn.with_upgrades(), shutdown, |c| c.graceful_shutdown()).await;
    } else {
        until_shutdown(conn, shutdown, |c| c.graceful_shutdown()).await;
    }
}

/// Runs `conn` to its end, or `graceful` on it once `shutdown` fires and then to its end.
async fn until_shutdown<C, E>(
    conn: C,
    shutdown: CancellationToken,
    graceful: impl FnOnce(Pin<&mut C>),
) where
    C: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        () = shutdown.cancelled() => {
            graceful(conn.as_mut());
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!("connection ended: {e}");
    }
}
