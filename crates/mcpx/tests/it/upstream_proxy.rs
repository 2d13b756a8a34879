//! HTTP proxies between mcpx and its HTTP upstreams: a configured proxy carries an
//! `http://` upstream's requests in absolute form and an `https://` upstream's
//! connection in a `CONNECT` tunnel (TLS inside it), with the credentials of its URL;
//! the environment's proxy settings never apply to a loopback upstream; a proxy that
//! refuses says so.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::ffi::OsStr;

use mcpx_testkit::proxy::TestProxy;
use mcpx_testkit::tls::TlsFront;
use serde_json::{Value, json};

use crate::common;
use common::*;

/// Whether `head` has the header `name: value` (the name in any case).
fn has(head: &str, name: &str, value: &str) -> bool {
    head.lines().any(|l| {
        l.split_once(':')
            .is_some_and(|(n, v)| n.eq_ignore_ascii_case(name) && v.trim() == value)
    })
}

/// The proxy's credentials (`u:p`), as `Proxy-Authorization` carries them.
const BASIC_U_P: &str = "Basic dTpw";

/// One upstream `url` reached as `proxy` says (`None`: the default, the environment);
/// a legacy host initialises, lists the tools and calls one.
async fn call_through(tag: &str, url: &str, proxy: Option<&str>, env: &[(&str, &OsStr)]) {
    let mut up = json!({"type": "http", "url": url});
    if let Some(p) = proxy {
        up["mcpx"] = json!({"proxy": p});
    }
    let config = json!({"mcpServers": {"up": up}});
    let mut h = Host::start_env(tag, &config, R0618, &[], env).await;
    h.initialize(json!({})).await;
    h.calls_simple_text("test_simple_text").await;
    h.finish().await;
}

fn request_line(head: &str) -> String {
    head.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_configured_proxy_carries_http_and_https_upstreams() {
    let (_server, port) = example_http(&[]).await;
    let proxy = TestProxy::start().await;
    let via = format!("http://u:p@127.0.0.1:{}", proxy.port);

    // http://: requests in absolute form, each with the proxy's credentials.
    let url = format!("http://127.0.0.1:{port}/mcp");
    call_through("proxy-http", &url, Some(&via), &[]).await;
    let heads = proxy.heads();
    assert!(!heads.is_empty(), "nothing went through the proxy");
    for head in &heads {
        let line = request_line(head);
        assert!(
            line == format!("POST http://127.0.0.1:{port}/mcp HTTP/1.1")
                || line == format!("GET http://127.0.0.1:{port}/mcp HTTP/1.1"),
            "{head}"
        );
        assert!(has(head, "proxy-authorization", BASIC_U_P), "{head}");
        assert!(has(head, "host", &format!("127.0.0.1:{port}")), "{head}");
    }

    // https://: a CONNECT tunnel with the credentials, TLS inside it.
    let front = TlsFront::start(port).await;
    let dir = crate::scratch_dir("test-proxy-ca");
    let bundle = dir.join("ca.pem");
    std::fs::write(&bundle, &front.ca_pem).unwrap();
    let before = proxy.heads().len();
    let url = format!("https://127.0.0.1:{}/mcp", front.port);
    call_through(
        "proxy-https",
        &url,
        Some(&via),
        &[("SSL_CERT_FILE", bundle.as_os_str())],
    )
    .await;
    let heads = proxy.heads();
    let tunnels = &heads[before..];
    assert!(!tunnels.is_empty(), "no tunnel: {heads:?}");
    for head in tunnels {
        assert_eq!(
            request_line(head),
            format!("CONNECT 127.0.0.1:{} HTTP/1.1", front.port),
            "{head}"
        );
        assert!(has(head, "proxy-authorization", BASIC_U_P), "{head}");
        assert!(
            has(head, "host", &format!("127.0.0.1:{}", front.port)),
            "{head}"
        );
    }
}

/// The environment's proxy is not used for a loopback upstream (it could not reach
/// this machine's loopback), and `"proxy": "none"` ignores the environment.
#[tokio::test]
async fn loopback_and_none_go_direct_whatever_the_environment_says() {
    let (_server, port) = example_http(&[]).await;
    let proxy = TestProxy::start().await;
    let env_proxy = format!("http://127.0.0.1:{}", proxy.port);
    let env = [
        ("http_proxy", OsStr::new(&env_proxy)),
        ("HTTPS_PROXY", OsStr::new(&env_proxy)),
        ("ALL_PROXY", OsStr::new(&env_proxy)),
    ];
    let url = format!("http://127.0.0.1:{port}/mcp");
    call_through("proxy-env-loopback", &url, None, &env).await;
    call_through("proxy-none", &url, Some("none"), &env).await;
    assert_eq!(proxy.heads(), Vec::<String>::new());
}

/// A proxy that refuses the tunnel: the upstream is unavailable, and mcpx says which
/// proxy refused what, with its status.
#[tokio::test]
async fn a_refusing_proxy_is_named_with_its_answer() {
    let proxy = TestProxy::refusing("407 Proxy Authentication Required").await;
    let config: Value = json!({"mcpServers": {"up": {"type": "http",
        "url": "https://127.0.0.1:9/mcp",
        "mcpx": {"proxy": format!("http://127.0.0.1:{}", proxy.port)}}}});
    let line = unavailable_because("proxy-refused", &config, &[]).await;
    assert!(
        line.contains(&format!(
            "proxy http://127.0.0.1:{}/ refused CONNECT 127.0.0.1:9: HTTP/1.1 407 Proxy Authentication Required",
            proxy.port
        )),
        "{line}"
    );
}
