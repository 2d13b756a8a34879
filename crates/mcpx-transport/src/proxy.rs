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

use std::net::IpAddr;
use std::sync::LazyLock;

use hyper::header::HeaderValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
        let url = match self {
            Proxy::Direct => return Ok(None),
            Proxy::Via(url) => url.as_str(),
            Proxy::Environment => match ENVIRONMENT.choose(upstream) {
                Some(url) => url,
                None => return Ok(None),
            },
        };
        route(url).map(Some)
    }
}

/// A proxy's route from its URL.
fn route(text: &str) -> Result<Route, TransportError> {
    let bad = |why: &str| {
        // Never echo the credentials a malformed URL may hold.
        let shown = Url::parse(text).map_or_else(
            |_| "(unparsable)".to_owned(),
            |mut u| {
                let _ = u.set_username("");
                let _ = u.set_password(None);
                u.to_string()
            },
        );
        TransportError::Io(format!("proxy {shown}: {why}"))
    };
    let mut url = Url::parse(text).map_err(|e| bad(&e.to_string()))?;
    if url.scheme() != "http" {
        return Err(bad(&format!(
            "only http:// proxies are supported, not {}://",
            url.scheme()
        )));
    }
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => return Err(bad("no host")),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let authorization =
        crate::http_client::take_basic_credentials(&mut url).map_err(|e| bad(&e))?;
    Ok(Route {
        url: url.to_string(),
        host,
        port,
        authorization,
    })
}

/// The environment's proxy settings, read once.
static ENVIRONMENT: LazyLock<Settings> =
    LazyLock::new(|| Settings::read(|name| std::env::var(name).ok()));

/// Proxy settings as the environment gives them.
#[derive(Debug, Default)]
struct Settings {
    http: Option<String>,
    https: Option<String>,
    all: Option<String>,
    no_proxy: Vec<String>,
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
        };
        Settings {
            http: get("http_proxy"),
            https: get("https_proxy"),
            all: get("all_proxy"),
            no_proxy: get("no_proxy")
                .map(|v| {
                    v.split(',')
                        .map(|e| e.trim().to_ascii_lowercase())
                        .filter(|e| !e.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The proxy URL for `upstream`, if any.
    fn choose(&self, upstream: &Url) -> Option<&str> {
        let host = match upstream.host()? {
            url::Host::Domain(d) => d.to_ascii_lowercase(),
            url::Host::Ipv4(a) => a.to_string(),
            url::Host::Ipv6(a) => a.to_string(),
        };
        if loopback(&host) || self.bypassed(&host) {
            return None;
        }
        let scheme = match upstream.scheme() {
            "https" => &self.https,
            _ => &self.http,
        };
        scheme.as_deref().or(self.all.as_deref())
    }

    /// Whether `no_proxy` lists `host` (lower-case; an IPv6 address without brackets).
    fn bypassed(&self, host: &str) -> bool {
        self.no_proxy.iter().any(|entry| {
            if entry == "*" {
                return true;
            }
            // An entry may carry brackets or a port (`[::1]:8080`, `host:443`); it
            // names the host either way.
            let entry = entry
                .strip_prefix('[')
                .and_then(|e| e.split_once(']'))
                .map_or_else(
                    || match entry.rsplit_once(':') {
                        Some((h, port))
                            if !h.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) =>
                        {
                            h
                        }
                        _ => entry.as_str(),
                    },
                    |(h, _)| h,
                );
            let entry = entry.strip_prefix("*.").unwrap_or(entry);
            let entry = entry.strip_prefix('.').unwrap_or(entry);
            host == entry
                || (entry.parse::<IpAddr>().is_err()
                    && host
                        .strip_suffix(entry)
                        .is_some_and(|rest| rest.ends_with('.')))
        })
    }
}

/// `localhost`, its subdomains, and loopback addresses.
fn loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<IpAddr>().is_ok_and(|a| a.is_loopback())
}

/// The most a proxy's answer to `CONNECT` may take before its blank line.
const MAX_CONNECT_HEAD: usize = 16 * 1024;

/// Opens a tunnel to `host:port` through the proxy `stream` is connected to (`route`):
/// `CONNECT`, then the proxy's answer, which must be 2xx (RFC 9110 §9.3.6). After it,
/// `stream` carries the upstream's bytes.
pub(crate) async fn tunnel(
    stream: &mut TcpStream,
    route: &Route,
    host: &str,
    port: u16,
) -> Result<(), String> {
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(a) = &route.authorization {
        head.push_str("Proxy-Authorization: ");
        head.push_str(a.to_str().unwrap_or_default());
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let failed = |e: std::io::Error| format!("proxy {}: CONNECT {authority}: {e}", route.url);
    stream.write_all(head.as_bytes()).await.map_err(failed)?;
    // The answer's head, read to its blank line. Nothing follows it before mcpx
    // writes: the upstream speaks second in TLS.
    let mut answer = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    let end = loop {
        let n = stream.read(&mut chunk).await.map_err(failed)?;
        if n == 0 {
            return Err(format!(
                "proxy {}: CONNECT {authority}: the proxy closed the connection",
                route.url
            ));
        }
        answer.extend_from_slice(chunk.get(..n).unwrap_or_default());
        if let Some(at) = memchr::memmem::find(&answer, b"\r\n\r\n") {
            break at + 4;
        }
        if answer.len() > MAX_CONNECT_HEAD {
            return Err(format!(
                "proxy {}: CONNECT {authority}: an answer longer than {MAX_CONNECT_HEAD} bytes",
                route.url
            ));
        }
    };
    let status_line = answer
        .split(|b| *b == b'\r')
        .next()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let code = status_line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok());
    if !status_line.starts_with("HTTP/1.") || !code.is_some_and(|c| (200..300).contains(&c)) {
        return Err(format!(
            "proxy {} refused CONNECT {authority}: {status_line}",
            route.url
        ));
    }
    if end != answer.len() {
        return Err(format!(
            "proxy {}: CONNECT {authority}: bytes after the answer, before the tunnel was used",
            route.url
        ));
    }
    Ok(())
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

    fn choose<'a>(s: &'a Settings, url: &str) -> Option<&'a str> {
        s.choose(&Url::parse(url).unwrap_or_else(|e| panic!("{url}: {e}")))
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
            Some("http://plain:3128")
        );
        assert_eq!(
            choose(&s, "https://mcp.example/mcp"),
            Some("http://secure:3128")
        );
        let s = settings(&[("all_proxy", "http://any:3128")]);
        assert_eq!(
            choose(&s, "https://mcp.example/mcp"),
            Some("http://any:3128")
        );
        assert_eq!(choose(&settings(&[]), "https://mcp.example/mcp"), None);
    }

    #[test]
    fn the_lower_case_variable_wins_and_empty_is_none() {
        let s = settings(&[
            ("https_proxy", "http://lower:1"),
            ("HTTPS_PROXY", "http://upper:1"),
        ]);
        assert_eq!(choose(&s, "https://a.example/"), Some("http://lower:1"));
        let s = settings(&[("https_proxy", " "), ("HTTPS_PROXY", "http://upper:1")]);
        assert_eq!(choose(&s, "https://a.example/"), Some("http://upper:1"));
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
            assert_eq!(choose(&s, proxied), Some("http://p:1"), "{proxied}");
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
