//! Moved HTTP endpoints: mcpx follows a 307 or 308 within the endpoint's origin (the
//! method and body kept) and uses the new URL from then on; a redirection to another
//! origin is refused with the reason, so configured credentials go nowhere else. mcpx's
//! own listener answers its endpoint with a trailing slash with 308 to the endpoint.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use mcpx_testkit::http::{Answer, ScriptedHttp};
use serde_json::json;

use crate::common;
use common::*;

/// A server answering `path` with a redirection (`status` to `location`), 404 to the
/// rest.
async fn redirecting(
    path: &'static str,
    status: &'static str,
    location: &'static str,
) -> ScriptedHttp {
    ScriptedHttp::start(move |r| {
        if r.line().split_whitespace().nth(1) == Some(path) {
            Answer::empty(status, &[&format!("Location: {location}")])
        } else {
            Answer::not_found()
        }
    })
    .await
}

/// `…/mcp/` on mcpx's own listener is 308 to `/mcp`; mcpx's client, configured with
/// it, follows and works.
#[tokio::test]
async fn a_moved_endpoint_is_followed_within_its_origin() {
    let (_server, port) = example_http(&[]).await;
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("http://127.0.0.1:{port}/mcp/?x=1"))
        .header("Content-Type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 308);
    assert_eq!(r.headers()["location"], "/mcp?x=1");

    let config = json!({"mcpServers": {"up": {"type": "http",
        "url": format!("http://127.0.0.1:{port}/mcp/")}}});
    let mut h = Host::start("redirect-follow", &config, R0618).await;
    h.initialize(json!({})).await;
    h.calls_simple_text("test_simple_text").await;
    h.finish().await;
}

/// The same for the HTTP+SSE transport's stream, and the new place's own answer is
/// what is reported (here a 404: the redirection was followed).
#[tokio::test]
async fn a_moved_sse_stream_is_followed() {
    let server = redirecting("/sse", "307 Temporary Redirect", "/sse2").await;
    let port = server.port;
    let config = json!({"mcpServers": {"old": {"type": "sse",
        "url": format!("http://127.0.0.1:{port}/sse")}}});
    let line = unavailable_because("redirect-sse", &config, &[]).await;
    assert!(line.contains("HTTP 404") && !line.contains("307"), "{line}");
    let asked: Vec<String> = server.seen().iter().map(|r| r.line().to_owned()).collect();
    assert_eq!(
        asked[..2],
        ["GET /sse HTTP/1.1", "GET /sse2 HTTP/1.1"],
        "{asked:?}"
    );
}

/// Another origin (here another port): refused, saying where and why.
#[tokio::test]
async fn a_redirect_to_another_origin_is_refused() {
    let server = redirecting("/mcp", "308 Permanent Redirect", "http://127.0.0.1:1/mcp").await;
    let port = server.port;
    let config = json!({"mcpServers": {"up": {"type": "http",
        "url": format!("http://127.0.0.1:{port}/mcp")}}});
    let line = unavailable_because("redirect-origin", &config, &[]).await;
    assert!(
        line.contains("HTTP 308: the upstream moved to http://127.0.0.1:1/mcp, another origin"),
        "{line}"
    );
}

/// A 301 (which would turn a POST into a GET) is reported, not followed.
#[tokio::test]
async fn a_301_is_reported_not_followed() {
    let server = redirecting("/mcp", "301 Moved Permanently", "/new").await;
    let port = server.port;
    let config = json!({"mcpServers": {"up": {"type": "http",
        "url": format!("http://127.0.0.1:{port}/mcp")}}});
    let line = unavailable_because("redirect-301", &config, &[]).await;
    assert!(
        line.contains("HTTP 301: the upstream moved to /new"),
        "{line}"
    );
}
