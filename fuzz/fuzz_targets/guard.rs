//! Any request head, as the guard of every mcpx HTTP listener judges it
//! (mcpx_transport::origin::Guard: the daemon's `/v1` and status page, `/mcp`, `/sse`,
//! the metrics listener), configured as the daemon's TCP listener on port 4000 with
//! one token:
//!
//! * no head panics it;
//! * a request it lets pass names exactly one authority (its absolute-form target's,
//!   else its one `Host`), and that authority's host is a loopback name;
//! * it carries no `Origin`, or the daemon's own (`http://` and a loopback name on
//!   port 4000), byte for byte but for case;
//! * it carries `Authorization` with the `Bearer` scheme in any case and the token;
//! * a request with two `Host` headers and no absolute-form target never passes.
//!
//! Input: a request head as it comes off the wire (parsed by httparse, as hyper does).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpx_transport::HttpServerConfig;
use mcpx_transport::origin::Guard;
use mcpx_transport::streamable_http::BearerToken;

const TOKEN: &str = "a-token-of-the-daemon-that-is-long-enough";
const OWN: [&str; 3] = ["http://localhost:4000", "http://127.0.0.1:4000", "http://[::1]:4000"];

/// The host part of `host[:port]`, `[v6]` kept whole.
fn host_of(authority: &str) -> &str {
    let a = authority.trim();
    if a.starts_with('[') {
        return a.find(']').map_or(a, |end| &a[..=end]);
    }
    match a.rsplit_once(':') {
        Some((h, _)) if !h.contains(':') => h,
        _ => a,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut head = httparse::Request::new(&mut fields);
    let Ok(httparse::Status::Complete(_)) = head.parse(data) else {
        return;
    };
    let (Some(method), Some(path), Some(version)) = (head.method, head.path, head.version) else {
        return;
    };
    let mut req = http::Request::builder().method(method).uri(path).version(if version == 1 {
        http::Version::HTTP_11
    } else {
        http::Version::HTTP_10
    });
    for h in head.headers.iter() {
        req = req.header(h.name, h.value);
    }
    let Ok(req) = req.body(()) else {
        return;
    };

    let mut config = HttpServerConfig::default();
    config.allowed_origins = OWN.iter().map(|o| (*o).to_owned()).collect();
    config.bearer_tokens = BearerToken::new(TOKEN).into_iter().collect();
    let guard = Guard::new(&config);
    let passed = guard.check(&req).is_ok();

    let hosts: Vec<&http::HeaderValue> = req.headers().get_all(http::header::HOST).iter().collect();
    let absolute = req.uri().authority().map(|a| a.as_str().to_owned());
    if hosts.len() > 1 && absolute.is_none() {
        assert!(!passed, "two Host headers passed: {req:?}");
    }
    if !passed {
        return;
    }
    let authority = match &absolute {
        Some(a) => Some(a.clone()),
        None => hosts.first().map(|h| h.to_str().expect("a passing Host is text").to_owned()),
    };
    if let Some(a) = authority {
        let host = host_of(&a);
        assert!(
            ["localhost", "127.0.0.1", "[::1]"].iter().any(|l| l.eq_ignore_ascii_case(host)),
            "a foreign authority passed: {a:?}"
        );
    } else {
        assert_eq!(req.version(), http::Version::HTTP_10, "only HTTP/1.0 may omit Host");
    }
    if let Some(o) = req.headers().get(http::header::ORIGIN) {
        let o = o.to_str().expect("a passing Origin is text").trim();
        assert!(OWN.iter().any(|own| own.eq_ignore_ascii_case(o)), "a foreign Origin passed: {o:?}");
    }
    let auth = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .expect("a request without a token passed")
        .as_bytes();
    assert!(auth.len() > 7 && auth[..7].eq_ignore_ascii_case(b"bearer "), "{auth:?}");
    assert_eq!(auth[7..].trim_ascii(), TOKEN.as_bytes());
});
