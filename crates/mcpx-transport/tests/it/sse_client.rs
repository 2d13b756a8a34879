//! The 2024-11-05 HTTP+SSE client against a small axum server on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use mcpx_protocol::jsonrpc::Kind;
use mcpx_protocol::{Frame, Id};
use mcpx_transport::TransportError;
use mcpx_transport::http_sse_client::{SseClientConfig, SseUpstream};
use mcpx_transport::upstream::Upstream;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{broadcast, mpsc};

#[derive(Clone)]
struct St {
    /// Events for the (one) connected SSE stream.
    events: broadcast::Sender<String>,
    endpoint: String,
}

async fn sse(State(st): State<St>) -> Response {
    let first = format!("event: endpoint\ndata: {}\n\n", st.endpoint);
    let rx = st.events.subscribe();
    let rest = futures_util::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await {
            Ok(ev) if ev == "CLOSE" => None,
            Ok(ev) => Some((ev, rx)),
            Err(_) => None,
        }
    });
    let s = futures_util::stream::iter(vec![first])
        .chain(rest)
        .map(|e| Ok::<_, Infallible>(Bytes::from(e)));
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(s))
        .unwrap()
}

async fn messages(State(st): State<St>, body: Bytes) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap();
    let Some(id) = v.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let method = v["method"].as_str().unwrap_or("").to_owned();
    let events = st.events.clone();
    tokio::spawn(async move {
        // real sleep: the answer comes after the 202, as from a real server; axum
        // tells this handler nothing of its 202 having gone out.
        tokio::time::sleep(Duration::from_millis(20)).await;
        if method == "die" {
            let _ = events.send("CLOSE".to_owned());
            return;
        }
        let note = serde_json::json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}});
        let _ = events.send(format!("event: message\ndata: {note}\n\n"));
        let r = serde_json::json!({"jsonrpc":"2.0","id":id,"result":{"method":method}});
        let _ = events.send(format!("event: message\ndata: {r}\n\n"));
    });
    StatusCode::ACCEPTED.into_response()
}

async fn server(endpoint: impl FnOnce(&str) -> String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (events, _) = broadcast::channel(64);
    let st = St {
        events,
        endpoint: endpoint(&base),
    };
    let app = Router::new()
        .route("/sse", get(sse))
        .route("/messages", post(messages))
        .with_state(st);
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

fn req(id: i64, method: &str) -> Frame {
    let p = RawValue::from_string("{}".to_owned()).unwrap();
    Frame::request(&Id::Number(id), method, Some(&p))
}

async fn connect(base: &str) -> (SseUpstream, mpsc::Receiver<Frame>) {
    let mut cfg = SseClientConfig::new(format!("{base}/sse"));
    cfg.endpoint_timeout = Duration::from_secs(2);
    SseUpstream::connect(cfg).await.unwrap()
}

#[tokio::test]
async fn round_trip_over_the_sse_stream() {
    let base = server(|_| "/messages?session_id=abc".to_owned()).await;
    let (up, mut un) = connect(&base).await;
    assert_eq!(
        up.endpoint().as_str(),
        format!("{base}/messages?session_id=abc")
    );
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        up.request(req(1, "initialize"))
            .await
            .unwrap()
            .response(|_| {}),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(r.kind(), Kind::Result);
    assert_eq!(r.id(), Some(&Id::Number(1)));
    let n = tokio::time::timeout(Duration::from_secs(5), un.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n.method(), Some("notifications/message"));
    up.send(Frame::notification("notifications/initialized", None))
        .await
        .unwrap();
    let r = up
        .request(req(2, "tools/list"))
        .await
        .unwrap()
        .response(|_| {})
        .await
        .unwrap();
    assert!(r.as_str().contains("tools/list"));
    up.close().await;
}

#[tokio::test]
async fn stream_end_closes_pending_exchanges() {
    let base = server(|_| "messages".to_owned()).await;
    let (up, _un) = connect(&base).await;
    let err = tokio::time::timeout(
        Duration::from_secs(5),
        up.request(req(1, "die")).await.unwrap().response(|_| {}),
    )
    .await
    .unwrap()
    .unwrap_err();
    assert!(matches!(err, TransportError::Closed { .. }), "{err:?}");
}

#[tokio::test]
async fn endpoint_on_another_origin_is_refused() {
    let base = server(|_| "http://127.0.0.2:9/messages".to_owned()).await;
    let err = SseUpstream::connect(SseClientConfig::new(format!("{base}/sse")))
        .await
        .unwrap_err();
    assert!(matches!(err, TransportError::Protocol(_)), "{err:?}");
}

#[tokio::test]
async fn missing_endpoint_event_times_out() {
    // A plain SSE stream that never names an endpoint.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new().route(
        "/sse",
        get(|| async {
            let s = futures_util::stream::pending::<Result<Bytes, Infallible>>();
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(s))
                .unwrap()
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut cfg = SseClientConfig::new(format!("{base}/sse"));
    cfg.endpoint_timeout = Duration::from_millis(300);
    let err = SseUpstream::connect(cfg).await.unwrap_err();
    assert!(matches!(err, TransportError::Timeout(_)), "{err:?}");
}
