//! The daemon's listeners: its Unix socket (only this user's processes are served: the
//! peer's uid is checked on every connection) and, when asked, a TCP listener behind
//! the same Host, Origin and token rules as `mcpx serve --http`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::service::TowerToHyperService;
use mcpx_transport::listen::{self, Budget, Peer, Serving};
use mcpx_transport::origin::Guard;
use mcpx_transport::streamable_http::BearerToken;
use tokio_util::sync::CancellationToken;

use super::Activity;
use super::problem::Problem;

/// Time allowed for a request's head.
const HEADER_WITHIN: Duration = Duration::from_secs(10);
/// How long open connections get to finish once the daemon stops.
const GRACE: Duration = Duration::from_secs(3);

/// Who the TCP listener lets in: the rules of its guard, which `/v1`, the status page
/// and the MCP routes share.
#[derive(Debug, Clone)]
pub struct TcpRules {
    /// The listener's port.
    pub port: u16,
    /// Extra `Host` values (`--allow-host`): bare hosts or `host:port`.
    pub hosts: Vec<String>,
    /// Extra `Origin` values (`--allow-origin`): bare hosts, `host:port` or origins.
    pub origins: Vec<String>,
    /// Tokens, one of which a request must carry (none: no token asked for).
    pub tokens: Vec<BearerToken>,
}

impl TcpRules {
    /// The `Origin` allow-list: the daemon's own page (`http://` and a loopback host
    /// on its port: the listener is plain HTTP, so no `https://` origin is its own),
    /// then `--allow-origin`.
    pub fn origins(&self) -> Vec<String> {
        let port = self.port;
        let mut v: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|h| format!("http://{h}:{port}"))
            .collect();
        v.extend(self.origins.iter().cloned());
        v
    }
}

/// The `/v1` routes' guard on the TCP listener: the transport's [`Guard`] (as for
/// `/mcp`), its refusal as a problem document.
pub async fn guard(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    match guard.check(&req) {
        Ok(_) => next.run(req).await,
        Err(refused) => {
            let kind = match refused.status() {
                StatusCode::UNAUTHORIZED => "token-required",
                StatusCode::FORBIDDEN => "host-or-origin-refused",
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "headers-too-large",
                _ => "bad-request",
            };
            let mut r = Problem::new(refused.status(), kind, refused.message()).into_response();
            if let Some(c) = refused.challenge() {
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static(c),
                );
            }
            r
        }
    }
}

/// How each connection is served.
fn serving() -> Serving {
    Serving {
        settings: mcpx_transport::serve::Settings {
            header_read_timeout: Some(HEADER_WITHIN),
            upgrades: true,
            ..Default::default()
        },
        grace: GRACE,
    }
}

/// The Unix socket, each peer's uid checked: only this user's processes are served.
struct UnixAccept {
    listener: tokio::net::UnixListener,
    uid: u32,
}

impl listen::Accept for UnixAccept {
    type Stream = tokio::net::UnixStream;

    async fn accept(&mut self) -> std::io::Result<Option<(Self::Stream, Peer, bool)>> {
        let (stream, _) = self.listener.accept().await?;
        match stream.peer_cred() {
            Ok(c) if c.uid() == self.uid => Ok(Some((stream, Peer::Local, true))),
            Ok(c) => {
                tracing::warn!(
                    "refused a connection from uid {} (not {})",
                    c.uid(),
                    self.uid
                );
                Ok(None)
            }
            Err(e) => {
                tracing::warn!("refused a connection whose peer is unknown: {e}");
                Ok(None)
            }
        }
    }
}

/// Serves the Unix socket until `stop`, within `budget` (its own: TCP peers never
/// take its places). A peer of another user is refused.
pub async fn serve_unix(
    listener: tokio::net::UnixListener,
    router: Router,
    uid: u32,
    budget: Arc<Budget>,
    activity: Arc<Activity>,
    stop: CancellationToken,
) {
    let accept = UnixAccept { listener, uid };
    let service = TowerToHyperService::new(router);
    listen::run(accept, budget, service, serving(), || activity.open(), stop).await;
}

/// Serves the TCP listener until `stop`, within `budget`: a connection counts as
/// admitted once a request on it passes the guard.
pub async fn serve_tcp(
    listener: tokio::net::TcpListener,
    router: Router,
    budget: Arc<Budget>,
    activity: Arc<Activity>,
    stop: CancellationToken,
) {
    let service = TowerToHyperService::new(router);
    listen::run(
        listener,
        budget,
        service,
        serving(),
        || activity.open(),
        stop,
    )
    .await;
}

/// A TCP address the daemon refuses to bind.
#[derive(Debug, thiserror::Error)]
#[error(
    "--http {0}: not a loopback address; binding it needs --allow-host and a token (--token-file or $MCPX_SERVE_TOKEN)"
)]
pub struct NotAllowed(SocketAddr);

/// Whether `addr` may be bound: loopback, or another address with `--allow-host` and a
/// token both given.
pub fn bind_allowed(addr: SocketAddr, rules: &TcpRules) -> Result<(), NotAllowed> {
    if addr.ip().is_loopback() || (!rules.hosts.is_empty() && !rules.tokens.is_empty()) {
        Ok(())
    } else {
        Err(NotAllowed(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemons_own_origin_is_plain_http_on_its_port() {
        let rules = TcpRules {
            port: 4000,
            hosts: vec![],
            origins: vec!["https://app.example".into()],
            tokens: vec![],
        };
        assert_eq!(
            rules.origins(),
            [
                "http://localhost:4000",
                "http://127.0.0.1:4000",
                "http://[::1]:4000",
                "https://app.example"
            ]
        );
    }
}
