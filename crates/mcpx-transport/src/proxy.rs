//! HTTP proxies between mcpx and its HTTP upstreams.
//!
//! An upstream's connections go through a proxy when its configuration names one
//! ([`Proxy::Via`]), or, by default ([`Proxy::Environment`]), when the environment does
//! as curl and most HTTP clients read it: `http_proxy` for `http://` upstreams,
//! `https_proxy` for `https://` ones, `all_proxy` for either, each also upper-case (the
//! lower-case one wins), and `no_proxy` (or `NO_PROXY`): a comma-separated list of
//! hosts reached directly, each matching itself and its subdomains (`example.com` and
//! `.example.com` both match `api.example.com`), an IP address matching itself, `*`
//! matching every host. A loopback upstream (`localhost`, `127.0.0.0/8`, `::1`) is
//! always reached directly from the environment's settings: a proxy elsewhere cannot
//! reach this machine's loopback. The environment is read once, when the first
//! upstream is built.
//!
//! The proxy is an `http://` one, optionally with credentials in its URL (sent as
//! `Proxy-Authorization: Basic`, RFC 9110 §11.7.1). An `http://` upstream's requests
//! go to it in absolute form (RFC 9112 §3.2.2); an `https://` upstream's connection is
//! a tunnel opened with `CONNECT` (RFC 9110 §9.3.6), TLS running end to end inside it.
//!
//! hyper-util's [`Matcher`] matches the environment's settings. A small wrapper keeps
//! what it does otherwise: it reads the upper-case name first and takes an empty value,
//! it knows no port or `*.` in a `no_proxy` entry, and its `*` skips IP addresses.
//! The tunnel is hyper's own `CONNECT` and upgrade: hyper-util's `Tunnel` drops the
//! proxy's status line, which mcpx's message names.

use std::net::IpAddr;
use std::sync::LazyLock;

use bytes::Bytes;
use http_body_util::Empty;
use hyper::header::{HOST, HeaderValue, PROXY_AUTHORIZATION};
use hyper::{Method, Request};
use hyper_util::client::proxy::matcher::{Intercept, Matcher};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use url::Url;

use crate::error::TransportError;

/// How an HTTP upstream is reached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Proxy {
    /// Through the proxy the environment names for the upstream's URL, if any (the
    /// module documentation says how it is read).
    #[default]
    Environment,
    /// Directly, whatever the environment says.
    Direct,
    /// Through the `http://` proxy at this URL.
    Via(String),
}

/// The proxy a connection goes through: where it is, and the credentials it is given.
#[derive(Clone)]
pub(crate) struct Route {
    /// The proxy's URL without credentials, for messages.
    pub(crate) url: String,
    pub(crate) host: String,
    pub(crate) port: u16,
    /// `Proxy-Authorization`, from the URL's credentials.
    pub(crate) authorization: Option<HeaderValue>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The credentials stay out of logs.
        f.debug_struct("Route").field("url", &self.url).finish()
    }
}

impl Proxy {
    /// The proxy a connection to `upstream` goes through, if any; an error when the
    /// proxy's URL is not one mcpx can use.
    pub(crate) fn route(&self, upstream: &Url) -> Result<Option<Route>, TransportError> {
        match self {
            Proxy::Direct => Ok(None),
            Proxy::Via(url) => route(url).map(Some),
            Proxy::Environment => match ENVIRONMENT.choose(upstream) {
                Some(intercept) => ENVIRONMENT
                    .unusable(&intercept)
                    .map_or_else(|| intercepted(&intercept).map(Some), |e| Err(e.clone())),
                None => Ok(None),
            },
        }
    }
}

/// An error for the proxy `shown` (its URL without credentials).
fn bad(shown: &str, why: &str) -> TransportError {
    TransportError::Io(format!("proxy {shown}: {why}"))
}

/// The message for a proxy URL of another scheme than `http`.
fn only_http(scheme: &str) -> String {
    format!("only http:// proxies are supported, not {scheme}://")
}

/// A proxy's route from its URL.
fn route(text: &str) -> Result<Route, TransportError> {
    // Never echo the credentials a malformed URL may hold.
    let shown = Url::parse(text).map_or_else(
        |_| "(unparsable)".to_owned(),
        |mut u| {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        },
    );
    let mut url = Url::parse(text).map_err(|e| bad(&shown, &e.to_string()))?;
    if url.scheme() != "http" {
        return Err(bad(&shown, &only_http(url.scheme())));
    }
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => return Err(bad(&shown, "no host")),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let authorization =
        crate::http_client::take_basic_credentials(&mut url).map_err(|e| bad(&shown, &e))?;
    Ok(Route {
        url: url.to_string(),
        host,
        port,
        authorization,
    })
}

/// The route of a proxy the environment names (its URL parsed by [`Matcher`], the
/// credentials taken out of it).
fn intercepted(intercept: &Intercept) -> Result<Route, TransportError> {
    let uri = intercept.uri();
    let shown = uri.to_string();
    let scheme = uri.scheme_str().unwrap_or("http");
    if scheme != "http" {
        return Err(bad(&shown, &only_http(scheme)));
    }
    let host = match uri.host() {
        Some(h) => h.trim_start_matches('[').trim_end_matches(']').to_owned(),
        None => return Err(bad(&shown, "no host")),
    };
    Ok(Route {
        url: shown,
        host,
        port: uri.port_u16().unwrap_or(80),
        authorization: intercept.basic_auth().cloned(),
    })
}

/// The environment's proxy settings, read once.
static ENVIRONMENT: LazyLock<Settings> =
    LazyLock::new(|| Settings::read(|name| std::env::var(name).ok()));

/// Proxy settings as the environment gives them.
struct Settings {
    matcher: Matcher,
    /// `no_proxy` is `*`: [`Matcher`]'s `*` matches names only, not IP addresses.
    all_direct: bool,
    /// The proxy variables whose URL mcpx cannot use, by the placeholder host the
    /// matcher was given for each, with why: an upstream they choose is refused,
    /// never reached directly behind the user's back.
    unusable: Vec<(String, TransportError)>,
}

impl Settings {
    /// The settings `var` gives (the lower-case name first, then the upper-case one;
    /// an empty value is none).
    fn read(var: impl Fn(&str) -> Option<String>) -> Settings {
        let get = |name: &str| {
            [name.to_owned(), name.to_ascii_uppercase()]
                .iter()
                .filter_map(|n| var(n))
                .map(|v| v.trim().to_owned())
                .find(|v| !v.is_empty())
                .unwrap_or_default()
        };
        let no_proxy: Vec<String> = get("no_proxy")
            .split(',')
            .map(|e| no_proxy_host(&e.trim().to_ascii_lowercase()))
            .filter(|e| !e.is_empty())
            .collect();
        let mut unusable = Vec::new();
        let mut usable = |name: &str| {
            let url = get(name);
            match route(&url) {
                Err(e) if !url.is_empty() => {
                    let placeholder = format!("mcpx-unusable-{}.invalid", name.replace('_', "-"));
                    unusable.push((placeholder.clone(), e));
                    format!("http://{placeholder}")
                }
                _ => url,
            }
        };
        let (http, https, all) = (
            usable("http_proxy"),
            usable("https_proxy"),
            usable("all_proxy"),
        );
        Settings {
            all_direct: no_proxy.iter().any(|e| e == "*"),
            matcher: Matcher::builder()
                .http(http)
                .https(https)
                .all(all)
                .no(no_proxy.join(","))
                .build(),
            unusable,
        }
    }

    /// Why the proxy `intercept` names cannot be used, when it is an unusable one.
    fn unusable(&self, intercept: &Intercept) -> Option<&TransportError> {
        let host = intercept.uri().host()?;
        self.unusable
            .iter()
            .find(|(placeholder, _)| placeholder == host)
            .map(|(_, e)| e)
    }

    /// The proxy for `upstream`, if any.
    fn choose(&self, upstream: &Url) -> Option<Intercept> {
        let host = match upstream.host()? {
            url::Host::Domain(d) => d.to_ascii_lowercase(),
            url::Host::Ipv4(a) => a.to_string(),
            url::Host::Ipv6(a) => a.to_string(),
        };
        if loopback(&host) || self.all_direct {
            return None;
        }
        let uri = upstream.as_str().parse::<hyper::Uri>().ok()?;
        self.matcher.intercept(&uri)
    }
}

/// The host a `no_proxy` entry names: without brackets or a port (`[::1]:8080`,
/// `host:443`), and with a leading `*.` as a leading `.`.
fn no_proxy_host(entry: &str) -> String {
    let host = entry
        .strip_prefix('[')
        .and_then(|e| e.split_once(']'))
        .map_or_else(
            || match entry.rsplit_once(':') {
                Some((h, port)) if !h.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
                    h
                }
                _ => entry,
            },
            |(h, _)| h,
        );
    match host.strip_prefix("*.") {
        Some(domain) => format!(".{domain}"),
        None => host.to_owned(),
    }
}

/// `localhost`, its subdomains, and loopback addresses.
fn loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<IpAddr>().is_ok_and(|a| a.is_loopback())
}

/// Why a `CONNECT` tunnel was not opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TunnelError {
    /// The exchange with the proxy failed.
    #[error("proxy {proxy}: CONNECT {authority}")]
    Exchange {
        proxy: String,
        authority: String,
        #[source]
        source: hyper::Error,
    },
    /// The proxy answered with another status than 2xx.
    #[error("proxy {proxy} refused CONNECT {authority}: {status_line}")]
    Refused {
        proxy: String,
        authority: String,
        status_line: String,
    },
    /// The proxy sent bytes after its answer, before mcpx wrote any.
    #[error(
        "proxy {proxy}: CONNECT {authority}: bytes after the answer, before the tunnel was used"
    )]
    Early { proxy: String, authority: String },
}

/// Opens a tunnel to `host:port` through the proxy `stream` is connected to (`route`):
/// `CONNECT`, then the proxy's answer, which must be 2xx (RFC 9110 §9.3.6). The
/// stream it gives back carries the upstream's bytes.
pub(crate) async fn tunnel(
    stream: TcpStream,
    route: &Route,
    host: &str,
    port: u16,
) -> Result<TcpStream, TunnelError> {
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let exchange = |source| TunnelError::Exchange {
        proxy: route.url.clone(),
        authority: authority.clone(),
        source,
    };
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
        .await
        .map_err(exchange)?;
    // The connection's task ends with the upgrade (or the exchange's failure).
    tokio::spawn(connection.with_upgrades());
    let mut request = Request::new(Empty::new());
    *request.method_mut() = Method::CONNECT;
    // An authority in authority form parses as a URI; a header value likewise.
    *request.uri_mut() = authority
        .parse()
        .map_err(|_| refused(route, &authority, "an unusable authority".to_owned()))?;
    let headers = request.headers_mut();
    if let Ok(h) = HeaderValue::from_str(&authority) {
        headers.insert(HOST, h);
    }
    if let Some(a) = &route.authorization {
        headers.insert(PROXY_AUTHORIZATION, a.clone());
    }
    let answer = sender.send_request(request).await.map_err(exchange)?;
    let status = answer.status();
    if !status.is_success() {
        let reason = answer
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
            .or_else(|| status.canonical_reason().map(str::to_owned))
            .unwrap_or_default();
        let line = format!("{:?} {} {reason}", answer.version(), status.as_u16());
        return Err(refused(route, &authority, line.trim_end().to_owned()));
    }
    let upgraded = hyper::upgrade::on(answer).await.map_err(exchange)?;
    match upgraded.downcast::<TokioIo<TcpStream>>() {
        Ok(parts) if parts.read_buf.is_empty() => Ok(parts.io.into_inner()),
        _ => Err(TunnelError::Early {
            proxy: route.url.clone(),
            authority,
        }),
    }
}

/// [`TunnelError::Refused`], with the proxy's status line.
fn refused(route: &Route, authority: &str, status_line: String) -> TunnelError {
    TunnelError::Refused {
        proxy: route.url.clone(),
        authority: authority.to_owned(),
        status_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as B64;

    fn settings(vars: &[(&str, &str)]) -> Settings {
        Settings::read(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    /// The proxy's URL (without credentials) for `url`, if any.
    fn choose(s: &Settings, url: &str) -> Option<String> {
        s.choose(&Url::parse(url).unwrap_or_else(|e| panic!("{url}: {e}")))
            .map(|i| i.uri().to_string())
    }

    #[test]
    fn each_scheme_has_its_variable_and_all_proxy_is_the_fallback() {
        let s = settings(&[
            ("http_proxy", "http://plain:3128"),
            ("HTTPS_PROXY", "http://secure:3128"),
            ("ALL_PROXY", "http://any:3128"),
        ]);
        assert_eq!(
            choose(&s, "http://mcp.example/mcp"),
            Some("http://plain:3128/".to_owned())
        );
        assert_eq!(
            choose(&s, "https://mcp.example/mcp"),
            Some("http://secure:3128/".to_owned())
        );
        let s = settings(&[("all_proxy", "http://any:3128")]);
        assert_eq!(
            choose(&s, "https://mcp.example/mcp"),
            Some("http://any:3128/".to_owned())
        );
        assert_eq!(choose(&settings(&[]), "https://mcp.example/mcp"), None);
    }

    #[test]
    fn an_unusable_environment_proxy_is_refused_not_bypassed() {
        let s = settings(&[("https_proxy", "not a url"), ("no_proxy", "direct.example")]);
        let up = Url::parse("https://mcp.example/mcp").unwrap();
        let chosen = s.choose(&up).expect("the unusable proxy is still chosen");
        let e = s.unusable(&chosen).expect("and refused");
        assert!(e.to_string().starts_with("proxy (unparsable): "), "{e}");
        let direct = Url::parse("https://direct.example/").unwrap();
        assert!(s.choose(&direct).is_none(), "no_proxy still applies");
        let s = settings(&[("http_proxy", "https://secure:3128")]);
        let chosen = s.choose(&Url::parse("http://a.example/").unwrap()).unwrap();
        assert!(
            s.unusable(&chosen)
                .unwrap()
                .to_string()
                .contains("only http:// proxies are supported, not https://"),
        );
    }

    #[test]
    fn the_lower_case_variable_wins_and_empty_is_none() {
        let s = settings(&[
            ("https_proxy", "http://lower:1"),
            ("HTTPS_PROXY", "http://upper:1"),
        ]);
        assert_eq!(
            choose(&s, "https://a.example/"),
            Some("http://lower:1/".to_owned())
        );
        let s = settings(&[("https_proxy", " "), ("HTTPS_PROXY", "http://upper:1")]);
        assert_eq!(
            choose(&s, "https://a.example/"),
            Some("http://upper:1/".to_owned())
        );
    }

    #[test]
    fn no_proxy_and_loopback_go_direct() {
        let s = settings(&[
            ("https_proxy", "http://p:1"),
            (
                "no_proxy",
                "internal.example, .corp.example,10.1.2.3,[fd00::1]:443,api.other.example:8443",
            ),
        ]);
        for direct in [
            "https://internal.example/mcp",
            "https://mcp.internal.example/mcp",
            "https://corp.example/",
            "https://a.b.corp.example/",
            "https://10.1.2.3:9000/",
            "https://[fd00::1]/",
            "https://API.other.example/",
            "https://localhost:3000/mcp",
            "https://127.0.0.1:3000/mcp",
            "https://127.9.9.9/",
            "https://[::1]:3000/mcp",
        ] {
            assert_eq!(choose(&s, direct), None, "{direct}");
        }
        for proxied in [
            "https://notinternal.example/",
            "https://example/",
            "https://10.1.2.30/",
            "https://other.example/",
        ] {
            assert_eq!(
                choose(&s, proxied),
                Some("http://p:1/".to_owned()),
                "{proxied}"
            );
        }
        let s = settings(&[("https_proxy", "http://p:1"), ("NO_PROXY", "*")]);
        assert_eq!(choose(&s, "https://anything.example/"), None);
    }

    #[test]
    fn a_route_takes_the_credentials_out_of_the_url() {
        let r = route("http://us%40er:p%3Ass@proxy.example:8080").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.host.as_str(), r.port), ("proxy.example", 8080));
        assert_eq!(r.url, "http://proxy.example:8080/");
        assert_eq!(
            r.authorization
                .as_ref()
                .map(|a| a.to_str().unwrap_or_default()),
            Some(format!("Basic {}", B64.encode("us@er:p:ss")).as_str())
        );
        assert!(!format!("{r:?}").contains("Basic"));
        let r = route("http://[::1]:3128").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (r.host.as_str(), r.port, r.authorization),
            ("::1", 3128, None)
        );
    }

    #[test]
    fn the_environment_s_proxy_gives_its_credentials_and_must_be_http() {
        let upstream = Url::parse("https://mcp.example/").unwrap_or_else(|e| panic!("{e}"));
        let s = settings(&[("https_proxy", "http://us%40er:p%3Ass@proxy.example:8080")]);
        let i = s.choose(&upstream).unwrap_or_else(|| panic!("no proxy"));
        let r = intercepted(&i).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.host.as_str(), r.port), ("proxy.example", 8080));
        assert_eq!(r.url, "http://proxy.example:8080/");
        assert_eq!(
            r.authorization
                .as_ref()
                .map(|a| a.to_str().unwrap_or_default()),
            Some(format!("Basic {}", B64.encode("us@er:p:ss")).as_str())
        );
        let s = settings(&[("https_proxy", "http://[::1]:3128")]);
        let i = s.choose(&upstream).unwrap_or_else(|| panic!("no proxy"));
        let r = intercepted(&i).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.host.as_str(), r.port), ("::1", 3128));
        let s = settings(&[("all_proxy", "socks5://user:secret@proxy.example:1080")]);
        let i = s.choose(&upstream).unwrap_or_else(|| panic!("no proxy"));
        let e = s
            .unusable(&i)
            .unwrap_or_else(|| panic!("a socks proxy is usable"))
            .to_string();
        assert!(
            e.contains("only http:// proxies are supported, not socks5://"),
            "{e}"
        );
        assert!(!e.contains("secret"), "{e}");
    }

    #[test]
    fn only_http_proxies_are_taken_and_errors_hide_credentials() {
        let e = route("https://user:secret@proxy.example")
            .unwrap_err()
            .to_string();
        assert!(e.contains("only http:// proxies are supported"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let e = route("socks5://proxy.example:1080")
            .unwrap_err()
            .to_string();
        assert!(e.contains("socks5://"), "{e}");
        assert!(route("not a url").is_err());
    }
}
