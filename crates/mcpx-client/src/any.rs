//! One type for every client transport, so a connection can hold whichever it probed.

use std::io::Write;
use std::sync::OnceLock;

use mcpx_protocol::Frame;
use mcpx_transport::TransportError;
use mcpx_transport::child::ChildUpstream;
use mcpx_transport::http_sse_client::SseUpstream;
use mcpx_transport::streamable_http::client::HttpUpstream;
use mcpx_transport::upstream::{Exchange, Upstream};
use parking_lot::Mutex;

/// A connection over stdio, Streamable HTTP or HTTP+SSE.
#[derive(Debug)]
pub enum AnyUpstream {
    /// A child process.
    Child(ChildUpstream),
    /// Streamable HTTP.
    Http(HttpUpstream),
    /// 2024-11-05 HTTP+SSE.
    Sse(SseUpstream),
}

impl AnyUpstream {
    /// The transport's name, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            AnyUpstream::Child(_) => "stdio",
            AnyUpstream::Http(_) => "Streamable HTTP",
            AnyUpstream::Sse(_) => "HTTP+SSE",
        }
    }

    /// Whether this is Streamable HTTP, where closing a modern request's stream is its
    /// cancellation (register C-C3).
    pub fn is_streamable_http(&self) -> bool {
        matches!(self, AnyUpstream::Http(_))
    }

    /// Whether frames related to a request can arrive outside its exchange: on stdio and
    /// HTTP+SSE everything but responses does; on Streamable HTTP a request's frames
    /// travel on its own stream.
    pub fn unsolicited_carries_related(&self) -> bool {
        !matches!(self, AnyUpstream::Http(_))
    }

    /// How many frames the transport has delivered to the connection's unsolicited
    /// receiver (stdio, HTTP+SSE; 0 on Streamable HTTP, where a request's frames travel
    /// on its own stream).
    pub fn unsolicited_sent(&self) -> u64 {
        match self {
            AnyUpstream::Child(c) => c.unsolicited_sent(),
            AnyUpstream::Sse(s) => s.unsolicited_sent(),
            AnyUpstream::Http(_) => 0,
        }
    }

    /// Whether the transport is known to be dead: a child process that exited. HTTP
    /// transports connect per request, so they are never known dead in advance.
    pub fn is_closed(&self) -> bool {
        match self {
            AnyUpstream::Child(c) => c.is_closed(),
            AnyUpstream::Sse(s) => s.is_closed(),
            AnyUpstream::Http(_) => false,
        }
    }

    /// Resolves once the transport is known dead, with the error its requests fail
    /// with: a child that exited or whose stdout could no longer be framed, an
    /// HTTP+SSE stream that ended. Streamable HTTP connects per request and is never
    /// known dead this way, so its future never resolves.
    pub fn closed(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = TransportError> + Send + 'static>> {
        match self {
            AnyUpstream::Child(c) => Box::pin(c.closed()),
            AnyUpstream::Sse(s) => {
                let closed = s.closed();
                Box::pin(async move {
                    TransportError::Closed {
                        detail: closed.await,
                    }
                })
            }
            AnyUpstream::Http(_) => Box::pin(std::future::pending()),
        }
    }

    /// A request timed out after waiting `timeout`: on stdio, gives the connection up
    /// when stdout holds an unfinished line that nothing has added to for half that
    /// long, and returns the error it now fails with (see
    /// [`ChildUpstream::give_up_if_unfinished`]). `None` everywhere else.
    pub fn give_up_if_unfinished(&self, timeout: std::time::Duration) -> Option<TransportError> {
        match self {
            AnyUpstream::Child(c) => c.give_up_if_unfinished(timeout / 2),
            _ => None,
        }
    }

    /// Whether a child exited with status 0 (stdio only).
    pub fn exited_cleanly(&self) -> bool {
        matches!(self, AnyUpstream::Child(c) if c.exited_cleanly())
    }

    /// The child's process id (stdio only).
    pub fn pid(&self) -> Option<u32> {
        match self {
            AnyUpstream::Child(c) => c.pid(),
            _ => None,
        }
    }

    /// The tail of a child's stderr, for error messages.
    pub fn stderr_tail(&self) -> Option<String> {
        match self {
            AnyUpstream::Child(c) => Some(c.stderr_tail()).filter(|s| !s.is_empty()),
            _ => None,
        }
    }
}

/// Where every frame sent upstream is also written, one JSON line each, when
/// `MCPX_WIRE_LOG` names a file: a debugging aid, and how tests check that each frame
/// mcpx sends is valid for the upstream's revision.
fn wire_log(frame: &Frame) {
    static LOG: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();
    let log = LOG.get_or_init(|| {
        let path = std::env::var_os("MCPX_WIRE_LOG")?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()
            .map(Mutex::new)
    });
    if let Some(file) = log.as_ref() {
        let mut f = file.lock();
        let _ = writeln!(f, "{}", frame.as_str().replace(['\n', '\r'], " "));
    }
}

impl Upstream for AnyUpstream {
    async fn request(&self, frame: Frame) -> Result<Exchange, TransportError> {
        wire_log(&frame);
        // The HTTP clients' futures are boxed: each is about twice a child's, and this
        // one is held inside every call's future whatever the transport (sizes by
        // `-Zprint-type-sizes`). An HTTP request allocates far more than one box anyway.
        match self {
            AnyUpstream::Child(u) => u.request(frame).await,
            AnyUpstream::Http(u) => Box::pin(u.request(frame)).await,
            AnyUpstream::Sse(u) => Box::pin(u.request(frame)).await,
        }
    }

    async fn send(&self, frame: Frame) -> Result<(), TransportError> {
        wire_log(&frame);
        match self {
            AnyUpstream::Child(u) => u.send(frame).await,
            AnyUpstream::Http(u) => u.send(frame).await,
            AnyUpstream::Sse(u) => u.send(frame).await,
        }
    }

    async fn close(&self) {
        match self {
            AnyUpstream::Child(u) => u.close().await,
            AnyUpstream::Http(u) => u.close().await,
            AnyUpstream::Sse(u) => u.close().await,
        }
    }
}
