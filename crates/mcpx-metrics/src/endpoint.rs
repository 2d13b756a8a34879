//! `/metrics` on a listener of its own: `GET` (or `HEAD`) answers with every metric in
//! the Prometheus text format; any other path is 404, any other method 405.
//!
//! It is not the MCP endpoint: none of that endpoint's token, Origin or Host rules
//! apply here, so it belongs on a loopback address or behind a scraper's network.

use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ALLOW, CONTENT_TYPE as CONTENT_TYPE_HEADER};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::Metrics;

/// The scrape's content type: the Prometheus text format, version 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The path scraped.
pub const PATH: &str = "/metrics";

/// How long a client may take to send a request's head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 32;

/// Serves `/metrics` on `listener` until `shutdown` fires.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            r = listener.accept(), if conns.len() < MAX_CONNECTIONS => r,
            () = shutdown.cancelled() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("metrics: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        let stop = shutdown.clone();
        conns.spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let metrics = metrics.clone();
                async move { Ok::<_, Infallible>(answer(&metrics, &req)) }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            let conn = builder.serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                () = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                tracing::debug!("metrics: connection ended: {e}");
            }
        });
    }
    drop(listener);
    let drained = tokio::time::timeout(Duration::from_secs(1), async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        conns.abort_all();
    }
    Ok(())
}

fn answer(metrics: &Metrics, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, text: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *r.status_mut() = status;
        r
    };
    if req.uri().path() != PATH {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: metrics are at /metrics\n",
        );
    }
    let head = match *req.method() {
        Method::GET => false,
        Method::HEAD => true,
        _ => {
            let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n");
            r.headers_mut()
                .insert(ALLOW, hyper::header::HeaderValue::from_static("GET, HEAD"));
            return r;
        }
    };
    let text = metrics.render();
    let body = if head {
        Bytes::new()
    } else {
        Bytes::from(text)
    };
    let mut r = Response::new(Full::new(body));
    r.headers_mut().insert(
        CONTENT_TYPE_HEADER,
        hyper::header::HeaderValue::from_static(CONTENT_TYPE),
    );
    r
}
