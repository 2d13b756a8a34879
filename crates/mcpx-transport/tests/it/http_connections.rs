//! The upstream HTTP client's connections, seen from a raw HTTP/1.1 server on
//! 127.0.0.1 that counts them: kept alive and reused, one per exchange in flight, a
//! closed one not used again; and the exact request head each carries.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcpx_protocol::{Frame, Id};
use mcpx_transport::streamable_http::client::{HttpClientConfig, HttpUpstream};
use mcpx_transport::upstream::Upstream;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Barrier, mpsc};

/// What the server does after answering a request.
#[derive(Clone, Copy)]
enum After {
    /// Waits for the next request on the same connection.
    KeepAlive,
    /// Closes the connection, as a server whose idle timeout is shorter than the
    /// client's does (no `Connection: close` announced it).
    Close,
}

struct RawServer {
    url: String,
    /// Connections accepted so far.
    accepted: Arc<AtomicUsize>,
    /// Each request's head (request line and headers), as received.
    heads: mpsc::UnboundedReceiver<String>,
    /// A message when a connection was closed by the server.
    closed: mpsc::UnboundedReceiver<()>,
}

/// A server answering every POST with a JSON-RPC result for its id; with `barrier`,
/// each answer waits until that many requests are in (on any connections).
async fn raw_server(after: After, barrier: Option<Arc<Barrier>>) -> RawServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp?x=1", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let (heads_tx, heads) = mpsc::unbounded_channel();
    let (closed_tx, closed) = mpsc::unbounded_channel();
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            let (heads_tx, closed_tx, barrier) =
                (heads_tx.clone(), closed_tx.clone(), barrier.clone());
            tokio::spawn(async move {
                serve(stream, after, barrier, heads_tx).await;
                let _ = closed_tx.send(());
            });
        }
    });
    RawServer {
        url,
        accepted,
        heads,
        closed,
    }
}

async fn serve(
    mut stream: TcpStream,
    after: After,
    barrier: Option<Arc<Barrier>>,
    heads: mpsc::UnboundedSender<String>,
) {
    let mut buf = Vec::new();
    loop {
        // One request: its head, then Content-Length bytes of body.
        let end = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8(buf[..end].to_vec()).unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map_or(0, |n| n.trim().parse().unwrap());
        while buf.len() < end + length {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the body was cut short");
            buf.extend_from_slice(&chunk[..n]);
        }
        let body: Value = serde_json::from_slice(&buf[end..end + length]).unwrap();
        buf.drain(..end + length);
        heads.send(head).unwrap();
        if let Some(b) = &barrier {
            b.wait().await;
        }
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": body["id"], "result": {}});
        let answer = answer.to_string();
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        stream.write_all(response.as_bytes()).await.unwrap();
        if let After::Close = after {
            return;
        }
    }
}

fn client(url: &str) -> HttpUpstream {
    client_with(url, |_| {})
}

fn client_with(url: &str, set: impl FnOnce(&mut HttpClientConfig)) -> HttpUpstream {
    let mut cfg = HttpClientConfig::new(url.to_owned());
    cfg.request_timeout = Duration::from_secs(10);
    set(&mut cfg);
    HttpUpstream::new(cfg).unwrap().0
}

/// Waits (boundedly) for the server to see a connection closed.
async fn closed(srv: &mut RawServer) {
    tokio::time::timeout(Duration::from_secs(10), srv.closed.recv())
        .await
        .expect("no connection was closed")
        .unwrap();
}

async fn call(up: &HttpUpstream, id: i64) -> Frame {
    let params = RawValue::from_string("{}".to_owned()).unwrap();
    let frame = Frame::request(&Id::Number(id), "tools/list", Some(&params));
    let response = tokio::time::timeout(Duration::from_secs(10), async {
        up.request(frame).await?.response(|_| {}).await
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(response.id(), Some(&Id::Number(id)));
    response
}

#[tokio::test]
async fn one_connection_carries_one_exchange_after_another() {
    let mut srv = raw_server(After::KeepAlive, None).await;
    let up = client(&srv.url);
    for id in 1..=5 {
        call(&up, id).await;
    }
    assert_eq!(srv.accepted.load(Ordering::SeqCst), 1);
    // The exact head: origin form with the query, `Host` first, nothing else added.
    let authority = srv.url["http://".len()..]
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let head = srv.heads.recv().await.unwrap();
    assert_eq!(
        head,
        format!(
            "POST /mcp?x=1 HTTP/1.1\r\nhost: {authority}\r\naccept: application/json, \
             text/event-stream\r\ncontent-type: application/json\r\ncontent-length: 58\r\n\r\n"
        )
    );
}

#[tokio::test]
async fn exchanges_in_flight_at_once_get_a_connection_each_and_keep_them() {
    let barrier = Arc::new(Barrier::new(2));
    let srv = raw_server(After::KeepAlive, Some(barrier)).await;
    let up = client(&srv.url);
    // Neither is answered until both are in: on one connection they would deadlock.
    tokio::join!(call(&up, 1), call(&up, 2));
    assert_eq!(srv.accepted.load(Ordering::SeqCst), 2);
    // Both kept: two more at once need no new connection.
    tokio::join!(call(&up, 3), call(&up, 4));
    assert_eq!(srv.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_connection_the_server_closed_is_not_used_again() {
    let mut srv = raw_server(After::Close, None).await;
    let up = client(&srv.url);
    for id in 1..=3 {
        call(&up, id).await;
        // The server has closed it; the client reads that close as it comes.
        closed(&mut srv).await;
        // real sleep: the client's pool reads the close on its own; nothing signals it.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(srv.accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn an_idle_connection_is_closed_by_the_client_after_its_idle_timeout() {
    let mut srv = raw_server(After::KeepAlive, None).await;
    let up = client_with(&srv.url, |c| c.idle_timeout = Duration::from_millis(300));
    call(&up, 1).await;
    // Nothing more is sent, and the client lives on: its pool closes the connection.
    closed(&mut srv).await;
    assert_eq!(srv.accepted.load(Ordering::SeqCst), 1);
    // The next request opens a new one.
    call(&up, 2).await;
    assert_eq!(srv.accepted.load(Ordering::SeqCst), 2);
    drop(up);
}

#[tokio::test]
async fn with_no_idle_connections_allowed_each_exchange_has_its_own() {
    let mut srv = raw_server(After::KeepAlive, None).await;
    let up = client_with(&srv.url, |c| c.max_idle_connections = 0);
    for id in 1..=3 {
        call(&up, id).await;
        // Closed by the client once its exchange is over.
        closed(&mut srv).await;
    }
    assert_eq!(srv.accepted.load(Ordering::SeqCst), 3);
}
