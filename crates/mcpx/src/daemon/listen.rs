//! The daemon's listeners: its Unix socket (only this user's processes are served: the
//! peer's uid is checked on every connection) and, when asked, a TCP listener behind
//! the same Host, Origin and token rules as `mcpx serve --http`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::service::TowerToHyperService;
use mcpx_transport::streamable_http::BearerToken;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::Activity;
use super::problem::Problem;

/// Time allowed for a request's head.
const HEADER_WITHIN: Duration = Duration::from_secs(10);
/// How long open connections get to finish once the daemon stops.
const GRACE: Duration = Duration::from_secs(3);
/// Most connections served at once, per listener.
pub const MAX_CONNECTIONS: usize = 1024;

/// Who the TCP listener lets in, for the `/v1` routes (the MCP routes apply the same
/// rules themselves).
#[derive(Debug)]
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

const LOOPBACK: &[&str] = &["localhost", "127.0.0.1", "[::1]"];

/// `host[:port]` split, IPv6 brackets kept.
fn split_host(authority: &str) -> (&str, Option<&str>) {
    if let Some(end) = authority.find(']') {
        let (h, rest) = authority.split_at(end + 1);
        return (h, rest.strip_prefix(':'));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    }
}

impl TcpRules {
    fn host_ok(&self, host: &str) -> bool {
        let (name, _) = split_host(host);
        LOOPBACK.iter().any(|l| l.eq_ignore_ascii_case(name))
            || self
                .hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host) || h.eq_ignore_ascii_case(name))
    }

    /// A browser's page may use the API only when it is the daemon's own (a loopback
    /// origin on its port) or one allowed by `--allow-origin`.
    fn origin_ok(&self, origin: &str) -> bool {
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .unwrap_or(origin);
        let (name, port) = split_host(authority);
        let own = LOOPBACK.iter().any(|l| l.eq_ignore_ascii_case(name))
            && port.and_then(|p| p.parse::<u16>().ok()) == Some(self.port);
        own || self.origins.iter().any(|o| {
            o.eq_ignore_ascii_case(origin)
                || o.eq_ignore_ascii_case(authority)
                || o.eq_ignore_ascii_case(name)
        })
    }
}

/// The `/v1` routes' guard on the TCP listener: Host (DNS rebinding), Origin (no
/// other page), token.
pub async fn guard(State(rules): State<Arc<TcpRules>>, req: Request, next: Next) -> Response {
    match check(&rules, req.headers()) {
        Ok(()) => next.run(req).await,
        Err(refused) => refused,
    }
}

/// The refusal's detail for a `Host` header that no rule allows, or that is missing
/// or not text: the value as the client sent it, quoted, never Rust's debug form.
fn host_refusal(host: Option<&str>) -> String {
    match host {
        Some(h) => format!(
            "Host \"{}\" is not allowed (--allow-host)",
            h.escape_default()
        ),
        None => "the request has no Host header that is text; it is not allowed (--allow-host)"
            .to_owned(),
    }
}

/// What [`guard`] decides: `Err` is the refusal.
#[allow(clippy::result_large_err)]
fn check(rules: &TcpRules, headers: &axum::http::HeaderMap) -> Result<(), Response> {
    use axum::http::StatusCode;
    let text = |h: header::HeaderName| headers.get(h).and_then(|v| v.to_str().ok());
    match text(header::HOST) {
        Some(h) if rules.host_ok(h) => {}
        h => {
            return Err(
                Problem::new(StatusCode::FORBIDDEN, "host-refused", host_refusal(h))
                    .into_response(),
            );
        }
    }
    if let Some(o) = text(header::ORIGIN)
        && !rules.origin_ok(o)
    {
        return Err(Problem::new(
            StatusCode::FORBIDDEN,
            "origin-refused",
            format!("Origin {o} is not allowed (--allow-origin)"),
        )
        .into_response());
    }
    if !rules.tokens.is_empty() {
        let presented = text(header::AUTHORIZATION)
            .and_then(|a| a.strip_prefix("Bearer "))
            .map(str::trim);
        if !presented.is_some_and(|p| rules.tokens.iter().any(|t| t.accepts(p))) {
            let mut r = Problem::new(
                StatusCode::UNAUTHORIZED,
                "token-required",
                "a bearer token is required",
            )
            .into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
            return Err(r);
        }
    }
    Ok(())
}

/// Serves `router` on one accepted connection until it closes or `stop` fires.
async fn connection<T>(stream: T, router: Router, stop: CancellationToken)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let settings = mcpx_transport::serve::Settings {
        header_read_timeout: Some(HEADER_WITHIN),
        upgrades: true,
        ..Default::default()
    };
    mcpx_transport::serve::connection(stream, TowerToHyperService::new(router), stop, settings)
        .await;
}

/// Waits for the connections still open, up to [`GRACE`].
async fn drain(mut conns: JoinSet<()>) {
    let drained =
        tokio::time::timeout(GRACE, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        conns.abort_all();
    }
}

/// Serves the Unix socket until `stop`. A peer of another user is refused.
pub async fn serve_unix(
    listener: tokio::net::UnixListener,
    router: Router,
    uid: u32,
    activity: Arc<Activity>,
    stop: CancellationToken,
) {
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = stop.cancelled() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        match stream.peer_cred() {
            Ok(c) if c.uid() == uid => {}
            Ok(c) => {
                tracing::warn!("refused a connection from uid {} (not {uid})", c.uid());
                continue;
            }
            Err(e) => {
                tracing::warn!("refused a connection whose peer is unknown: {e}");
                continue;
            }
        }
        if conns.len() >= MAX_CONNECTIONS {
            tracing::warn!("refused a connection: {MAX_CONNECTIONS} open");
            continue;
        }
        let (router, stop, open) = (router.clone(), stop.clone(), activity.open());
        conns.spawn(async move {
            connection(stream, router, stop).await;
            drop(open);
        });
    }
    drain(conns).await;
}

/// Serves the TCP listener until `stop`.
pub async fn serve_tcp(
    listener: tokio::net::TcpListener,
    router: Router,
    activity: Arc<Activity>,
    stop: CancellationToken,
) {
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = stop.cancelled() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if conns.len() >= MAX_CONNECTIONS {
            tracing::warn!("refused a connection: {MAX_CONNECTIONS} open");
            continue;
        }
        let _ = stream.set_nodelay(true);
        let (router, stop, open) = (router.clone(), stop.clone(), activity.open());
        conns.spawn(async move {
            connection(stream, router, stop).await;
            drop(open);
        });
    }
    drain(conns).await;
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
    fn a_refused_host_is_named_as_sent() {
        assert_eq!(
            host_refusal(Some("evil.example")),
            "Host \"evil.example\" is not allowed (--allow-host)"
        );
        let none = host_refusal(None);
        assert!(!none.contains("None"), "{none}");
        assert!(none.contains("no Host header"), "{none}");
    }

    #[test]
    fn only_loopback_hosts_and_the_daemons_own_origin_pass_by_default() {
        let rules = TcpRules {
            port: 4000,
            hosts: vec![],
            origins: vec![],
            tokens: vec![],
        };
        assert!(rules.host_ok("127.0.0.1:4000"));
        assert!(rules.host_ok("[::1]:4000"));
        assert!(!rules.host_ok("evil.example:4000"));
        assert!(rules.origin_ok("http://127.0.0.1:4000"));
        assert!(rules.origin_ok("http://localhost:4000"));
        assert!(
            !rules.origin_ok("http://localhost:5000"),
            "another port's page"
        );
        assert!(!rules.origin_ok("https://evil.example"));
        let allowed = TcpRules {
            origins: vec!["https://app.example".into()],
            hosts: vec!["box.lan".into()],
            ..rules
        };
        assert!(allowed.origin_ok("https://app.example"));
        assert!(allowed.host_ok("box.lan:4000"));
    }
}
