//! `/metrics` on a listener of its own: `GET` (or `HEAD`) answers with every metric in
//! the Prometheus text format; any other path is 404, any other method 405.
//!
//! It has the guard of every mcpx HTTP listener (`mcpx_transport::origin::Guard`):
//! a `Host` or `Origin` not on its allow-lists is refused (403), so a DNS-rebinding
//! page cannot read upstream and tool names. It asks for no token. Connections are
//! accepted within a `mcpx_transport::listen::Budget`: idle ones, or ones that never
//! pass the guard, make room for a scraper's.

use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ALLOW, CONTENT_TYPE as CONTENT_TYPE_HEADER};
use hyper::{Method, Request, Response, StatusCode};
use mcpx_transport::HttpServerConfig;
use mcpx_transport::listen::{self, Budget, Limits, Serving};
use mcpx_transport::origin::Guard;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::Metrics;

/// The scrape's content type: the Prometheus text format, version 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The path scraped.
pub const PATH: &str = "/metrics";

/// How long a client may take to send a request's head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The listener's connection budget: a few scrapers kept alive, more idle or
/// unchecked connections cut to make room.
const LIMITS: Limits = Limits {
    max_connections: 32,
    max_pending: 256,
    pending_within: Duration::from_secs(5),
};

/// Who may scrape: `Host` values beyond the loopback names (bare hosts, any port,
/// or `host:port`), as `--metrics-allow-host` gives them.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Extra allowed `Host` values.
    pub hosts: Vec<String>,
}

/// Serves `/metrics` on `listener` until `shutdown` fires.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    rules: Rules,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let mut config = HttpServerConfig::default();
    config.allowed_hosts.extend(rules.hosts);
    let guard = Arc::new(Guard::new(&config));
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let answer = match guard.check(&req) {
            Ok(_) => answer(&metrics, &req),
            Err(refused) => {
                let mut r =
                    Response::new(Full::new(Bytes::from(format!("{}\n", refused.message()))));
                *r.status_mut() = refused.status();
                r
            }
        };
        async move { Ok::<_, Infallible>(answer) }
    });
    let serving = Serving {
        settings: mcpx_transport::serve::Settings {
            header_read_timeout: Some(HEADER_TIMEOUT),
            ..Default::default()
        },
        grace: Duration::from_secs(1),
    };
    listen::run(listener, Budget::new(LIMITS), svc, serving, || (), shutdown).await;
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
