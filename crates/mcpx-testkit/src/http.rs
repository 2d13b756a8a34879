//! A scripted HTTP/1.1 server for tests, on `127.0.0.1`: one request a connection,
//! each answered as a route function says (a whole response written as given, or the
//! request passed on to another local port and its answer copied back), every request
//! kept for the test to check. For what a real server would not do on request (a
//! redirect, a refused grant, a metadata document) or to watch what a client sends.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// A request as received.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request line and headers, ending in the blank line.
    pub head: String,
    /// The body (`Content-Length` bytes), as text.
    pub body: String,
}

impl Request {
    /// The request line (`POST /token HTTP/1.1`).
    pub fn line(&self) -> &str {
        self.head.lines().next().unwrap_or_default()
    }

    /// The value of header `name` (any case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
        })
    }
}

/// How a request is answered.
#[derive(Debug, Clone)]
pub enum Answer {
    /// This whole response, then the connection closes.
    Fixed(String),
    /// The request, passed to `127.0.0.1:port` with `Connection: close`, and its
    /// answer copied back.
    Forward(u16),
}

impl Answer {
    /// `status` (e.g. `"200 OK"`) with `body` as JSON.
    pub fn json(status: &str, body: &serde_json::Value) -> Answer {
        let body = body.to_string();
        Answer::Fixed(format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ))
    }

    /// `status` with `headers` (each `Name: value`) and no body.
    pub fn empty(status: &str, headers: &[&str]) -> Answer {
        let mut head = format!("HTTP/1.1 {status}\r\n");
        for h in headers {
            head.push_str(h);
            head.push_str("\r\n");
        }
        head.push_str("Content-Length: 0\r\nConnection: close\r\n\r\n");
        Answer::Fixed(head)
    }

    /// 404.
    pub fn not_found() -> Answer {
        Answer::empty("404 Not Found", &[])
    }
}

/// A running server; it stops when dropped.
#[derive(Debug)]
pub struct ScriptedHttp {
    /// Its port at `127.0.0.1`.
    pub port: u16,
    seen: Arc<Mutex<Vec<Request>>>,
    accept: JoinHandle<()>,
}

impl Drop for ScriptedHttp {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl ScriptedHttp {
    /// A server answering each request as `route` says.
    pub async fn start(route: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> ScriptedHttp {
        let (listener, port) = crate::loopback_listener().await;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        let route = Arc::new(route);
        let accept = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(serve(conn, route.clone(), kept.clone()));
            }
        });
        ScriptedHttp { port, seen, accept }
    }

    /// The requests so far, in order.
    pub fn seen(&self) -> Vec<Request> {
        self.seen.lock().clone()
    }
}

async fn serve(
    mut conn: TcpStream,
    route: Arc<impl Fn(&Request) -> Answer>,
    seen: Arc<Mutex<Vec<Request>>>,
) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte).await {
            Ok(1) if head.len() < 64 * 1024 => head.push(byte[0]),
            _ => return,
        }
    }
    let mut request = Request {
        head: String::from_utf8_lossy(&head).into_owned(),
        body: String::new(),
    };
    let length: usize = request
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    if conn.read_exact(&mut body).await.is_err() {
        return;
    }
    request.body = String::from_utf8_lossy(&body).into_owned();
    let answer = route(&request);
    seen.lock().push(request.clone());
    match answer {
        Answer::Fixed(a) => {
            let _ = conn.write_all(a.as_bytes()).await;
        }
        Answer::Forward(port) => {
            let Ok(mut up) = TcpStream::connect(("127.0.0.1", port)).await else {
                return;
            };
            // One exchange: the server closes after its answer.
            let mut lines: Vec<&str> = request
                .head
                .trim_end()
                .lines()
                .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
                .collect();
            lines.push("Connection: close");
            let head = format!("{}\r\n\r\n", lines.join("\r\n"));
            if up.write_all(head.as_bytes()).await.is_ok() && up.write_all(&body).await.is_ok() {
                let _ = tokio::io::copy(&mut up, &mut conn).await;
            }
        }
    }
}
