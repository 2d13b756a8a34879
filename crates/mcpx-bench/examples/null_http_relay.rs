//! The floor of a gateway with an HTTP host: a process that takes the host's HTTP
//! requests and hands each message on without any MCP work. `scripts/bench.sh` runs it
//! as the "relay floor" rows of the HTTP host paths, as `null_relay` is the floor of
//! the stdio one: what the extra process and its HTTP cost on this machine before a
//! gateway does anything of its own.
//!
//! Usage:
//!
//! * `null_http_relay ADDR --http URL` (HTTP → HTTP): every request goes to `URL` as it
//!   came (method, headers, body, streamed) on a kept-alive connection, and its response
//!   comes back as it is, so sessions and SSE work unchanged. Nothing is parsed but HTTP.
//! * `null_http_relay ADDR --stdio CMD [ARGS...]` (HTTP → stdio): one child per HTTP
//!   connection. A host's session keeps its connection and HTTP/1.1 carries one request
//!   at a time, so one connection's messages are the only ones its child sees and ids
//!   never mix (a gateway sharing one child between sessions must renumber them). A
//!   POST's body goes to the child as one line; a message with an `id` and a `method`
//!   is answered with the next line the child writes that has an `id` and no `method`,
//!   as `application/json`; any other message gets 202. GET and DELETE get 405 (no
//!   stream, no session). Those two top-level members are all the JSON it reads.
//!
//! One thread, as `mcpx serve` runs by default.

use std::convert::Infallible;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HOST, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcpx_protocol::jsonrpc::member;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;

type Body = BoxBody<Bytes, hyper::Error>;

/// Where the host's messages go.
enum Upstream {
    Http {
        // Boxed: the client is large beside the other variant.
        client: Box<Client<HttpConnector, Incoming>>,
        url: Uri,
    },
    Stdio {
        program: String,
        args: Vec<String>,
    },
}

/// One HTTP connection's child.
struct Child {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    // Killed when the connection ends.
    _process: tokio::process::Child,
}

fn reply(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(
        Full::new(body.into())
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r
}

/// HTTP → HTTP: the request as it came, to `url`.
async fn forward(
    client: &Client<HttpConnector, Incoming>,
    url: &Uri,
    mut req: Request<Incoming>,
) -> Response<Body> {
    *req.uri_mut() = url.clone();
    // The client writes the upstream's own.
    req.headers_mut().remove(HOST);
    match client.request(req).await {
        Ok(resp) => resp.map(BodyExt::boxed),
        Err(e) => reply(StatusCode::BAD_GATEWAY, e.to_string()),
    }
}

fn is_response(line: &str) -> bool {
    member(line, "id").is_some() && member(line, "method").is_none()
}

/// HTTP → stdio: the POST's body as a line to the child, and for a request the child's
/// answer back.
async fn exchange(child: &Mutex<Child>, req: Request<Incoming>) -> Response<Body> {
    if req.method() != Method::POST {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "");
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return reply(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let Ok(text) = std::str::from_utf8(&body) else {
        return reply(StatusCode::BAD_REQUEST, "not UTF-8");
    };
    let request = member(text, "id").is_some() && member(text, "method").is_some();
    let mut line = Vec::with_capacity(body.len() + 1);
    line.extend_from_slice(text.trim_end().as_bytes());
    line.push(b'\n');
    let mut c = child.lock().await;
    if c.stdin.write_all(&line).await.is_err() || c.stdin.flush().await.is_err() {
        return reply(StatusCode::BAD_GATEWAY, "the child's stdin is closed");
    }
    if !request {
        return reply(StatusCode::ACCEPTED, "");
    }
    let mut answer = String::new();
    loop {
        answer.clear();
        match c.stdout.read_line(&mut answer).await {
            Ok(0) | Err(_) => return reply(StatusCode::BAD_GATEWAY, "the child exited"),
            Ok(_) if is_response(answer.trim_end()) => break,
            // A notification of the child's (a log, progress): not this floor's business.
            Ok(_) => {}
        }
    }
    let mut r = reply(StatusCode::OK, answer.trim_end().to_owned());
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

async fn serve(listener: TcpListener, upstream: Arc<Upstream>) {
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                eprintln!("null_http_relay: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let child = match &*upstream {
                Upstream::Http { .. } => None,
                Upstream::Stdio { program, args } => {
                    let spawned = Command::new(program)
                        .args(args)
                        .stdin(Stdio::piped())
                        .stdout(Stdio::piped())
                        .kill_on_drop(true)
                        .spawn();
                    let mut process = match spawned {
                        Ok(p) => p,
                        Err(e) => {
                            eprintln!("null_http_relay: cannot start {program}: {e}");
                            return;
                        }
                    };
                    let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take())
                    else {
                        return;
                    };
                    Some(Arc::new(Mutex::new(Child {
                        stdin,
                        stdout: BufReader::new(stdout),
                        _process: process,
                    })))
                }
            };
            let service = service_fn(move |req: Request<Incoming>| {
                let upstream = upstream.clone();
                let child = child.clone();
                async move {
                    Ok::<_, Infallible>(match (&*upstream, child) {
                        (Upstream::Http { client, url }, _) => forward(client, url, req).await,
                        (Upstream::Stdio { .. }, Some(child)) => exchange(&child, req).await,
                        (Upstream::Stdio { .. }, None) => {
                            reply(StatusCode::BAD_GATEWAY, "no child")
                        }
                    })
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: null_http_relay ADDR --http URL | null_http_relay ADDR --stdio CMD [ARGS...]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(addr), Some(mode), Some(target)) = (args.first(), args.get(1), args.get(2)) else {
        return usage();
    };
    let upstream = match mode.as_str() {
        "--http" => match target.parse::<Uri>() {
            Ok(url) => Upstream::Http {
                client: Box::new(Client::builder(TokioExecutor::new()).build_http()),
                url,
            },
            Err(e) => {
                eprintln!("null_http_relay: bad URL {target}: {e}");
                return ExitCode::from(2);
            }
        },
        "--stdio" => Upstream::Stdio {
            program: target.clone(),
            args: args[3..].to_vec(),
        },
        _ => return usage(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("null_http_relay: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async {
        let listener = match TcpListener::bind(addr.as_str()).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("null_http_relay: cannot listen on {addr}: {e}");
                return ExitCode::from(1);
            }
        };
        serve(listener, Arc::new(upstream)).await;
        ExitCode::SUCCESS
    })
}
