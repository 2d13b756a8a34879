//! `https://` upstreams: mcpx reaches them over TLS, trusting the system's root
//! certificates or, as here, the bundle `SSL_CERT_FILE` names; an upstream whose
//! certificate no trusted authority signed is refused, and the call says why.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use mcpx_testkit::tls::{TlsFront, unrelated_ca_pem};
use serde_json::json;
use tokio::process::Child;

use crate::common;
use common::*;

/// `mcpx example-server --http` (both eras) behind a TLS front.
async fn https_example() -> (Child, TlsFront) {
    let (server, port) = example_http(&[]).await;
    (server, TlsFront::start(port).await)
}

/// A gateway host whose `mcpx serve` trusts the roots in `ca_pem` only.
async fn host_trusting(tag: &str, config: &serde_json::Value, ca_pem: &str) -> Host {
    let dir = crate::scratch_dir(&format!("test-{tag}-ca"));
    let bundle = dir.join("ca.pem");
    std::fs::write(&bundle, ca_pem).unwrap();
    let env = [
        ("SSL_CERT_FILE", bundle.as_os_str()),
        // No directory of the system's certificates either.
        ("SSL_CERT_DIR", dir.as_os_str()),
    ];
    let mut h = Host::start_env(tag, config, R0618, &[], &env).await;
    h.initialize(json!({})).await;
    h
}

/// Streamable HTTP (2026-07-28, as the probe finds it) and the 2024-11-05 HTTP+SSE
/// transport, both over TLS: the tool list and a call go through.
#[tokio::test]
async fn an_https_upstream_is_reached_over_tls() {
    let (_server, front) = https_example().await;
    for (tag, kind, path) in [("tls-http", "http", "mcp"), ("tls-sse", "sse", "sse")] {
        let config = json!({"mcpServers": {"up": {"type": kind,
            "url": format!("https://127.0.0.1:{}/{path}", front.port)}}});
        let mut h = host_trusting(tag, &config, &front.ca_pem).await;
        let (list, _) = h.request("tools/list", json!({})).await;
        assert!(
            result(&list, "tools/list")["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == "test_simple_text"),
            "{kind}: {list}"
        );
        h.calls_simple_text("test_simple_text").await;
        h.finish().await;
    }
}

/// A certificate no trusted authority signed: no connection, and mcpx says why (on
/// stderr, as for any upstream it cannot reach; the host sees a gateway without tools).
#[tokio::test]
async fn an_untrusted_certificate_is_refused() {
    let (_server, front) = https_example().await;
    let dir = crate::scratch_dir("test-tls-untrusted-ca");
    let bundle = dir.join("ca.pem");
    std::fs::write(&bundle, unrelated_ca_pem()).unwrap();
    let config = json!({"mcpServers": {"up": {"type": "http",
        "url": format!("https://127.0.0.1:{}/mcp", front.port)}}});
    let line = unavailable_because(
        "tls-untrusted",
        &config,
        &[
            ("SSL_CERT_FILE", bundle.as_os_str()),
            ("SSL_CERT_DIR", dir.as_os_str()),
        ],
    )
    .await;
    assert!(
        line.contains("TLS handshake with 127.0.0.1")
            && line.contains("invalid peer certificate")
            && line.contains("UnknownIssuer"),
        "{line}"
    );
}
