//! An HTTP proxy for tests, on `127.0.0.1`: `CONNECT` opens a tunnel, a request in
//! absolute form is passed on to the host it names; either way only to `127.0.0.1`
//! (anything else is refused with 403, so a test cannot reach further). It keeps the
//! head of what opened each connection, for tests to check what a client sent.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// A running proxy; it stops when dropped.
#[derive(Debug)]
pub struct TestProxy {
    /// Its port at `127.0.0.1`.
    pub port: u16,
    heads: Arc<Mutex<Vec<String>>>,
    accept: JoinHandle<()>,
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl TestProxy {
    /// A proxy that tunnels and forwards.
    pub async fn start() -> TestProxy {
        TestProxy::run(None).await
    }

    /// A proxy that answers everything with `status` (e.g. `407 Proxy Authentication
    /// Required`) and closes.
    pub async fn refusing(status: &'static str) -> TestProxy {
        TestProxy::run(Some(status)).await
    }

    /// The heads (request line and headers) that opened each connection so far.
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().clone()
    }

    async fn run(refuse: Option<&'static str>) -> TestProxy {
        let (listener, port) = crate::loopback_listener().await;
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let heads = kept.clone();
                tokio::spawn(serve(client, heads, refuse));
            }
        });
        TestProxy {
            port,
            heads,
            accept,
        }
    }
}

async fn serve(mut client: TcpStream, heads: Arc<Mutex<Vec<String>>>, refuse: Option<&str>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte: what follows the head belongs to the upstream.
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte).await {
            Ok(1) if head.len() < 64 * 1024 => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    heads.lock().push(text.clone());
    if let Some(status) = refuse {
        let _ = client
            .write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes())
            .await;
        return;
    }
    let mut words = text.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let authority = if method == "CONNECT" {
        target
    } else {
        target
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or("")
    };
    let port = authority
        .strip_prefix("127.0.0.1:")
        .and_then(|p| p.parse::<u16>().ok());
    let Some(port) = port else {
        let _ = client
            .write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            .await;
        return;
    };
    let Ok(mut upstream) = TcpStream::connect(("127.0.0.1", port)).await else {
        let _ = client
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            .await;
        return;
    };
    let started = if method == "CONNECT" {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
    } else {
        upstream.write_all(&head).await
    };
    if started.is_ok() {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
}
