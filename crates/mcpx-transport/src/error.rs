//! Errors of the client-side transports, with what the layer above needs to decide
//! what to do next (era probing, session recovery, reporting).

use mcpx_protocol::error::is_recognised_modern_error;

/// Why a transport could not carry a frame to an upstream, or its answer back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The connection is closed (a child exited, a stream ended). `detail` quotes what
    /// is known: an exit status, the tail of the child's stderr.
    #[error("connection closed: {detail}")]
    Closed {
        /// What is known about why.
        detail: String,
    },
    /// An I/O error (connect, read, write).
    #[error("{0}")]
    Io(String),
    /// A child process could not be started (no such program, no permission).
    #[error("{}", spawn_text(.command, .reason, *.not_found))]
    Spawn {
        /// The program.
        command: String,
        /// Why, in words: the operating system's reason, or where the program was
        /// looked for.
        reason: String,
        /// The program itself was not found (not in `PATH`, no such file).
        not_found: bool,
    },
    /// An HTTP status that is not a success, with the body and, when the body is a
    /// JSON-RPC error, its code (register A-C14, B-C9).
    #[error("HTTP {status}{}: {}", .code.map(|c| format!(" (JSON-RPC error {c})")).unwrap_or_default(), short(.body))]
    Http {
        /// The status.
        status: u16,
        /// The body (truncated to a bounded size).
        body: String,
        /// The JSON-RPC error code in the body, if the body is a JSON-RPC error.
        code: Option<i64>,
    },
    /// A redirection (3xx with a `Location`): the endpoint has moved. The transport
    /// does not follow it; the client decides (mcpx-client's `connect` follows 307 and
    /// 308 within the same origin).
    #[error("HTTP {status}: the upstream moved to {location}")]
    Redirected {
        /// The status (301, 302, 303, 307 or 308).
        status: u16,
        /// The `Location`, as the upstream wrote it (maybe relative).
        location: String,
    },
    /// The upstream refused the credential: a 401, or a 403 carrying a
    /// `WWW-Authenticate` challenge (`insufficient_scope`). For an upstream with a
    /// configured credential this is reported with what the challenge says (registers
    /// B-C15, B-C18; [`mcpx_protocol::auth::explain`]), never acted on, but for the one
    /// new token an OAuth client credentials upstream gets (crate::oauth); for one with
    /// a user's authorization it leads to a refresh, a login or a step-up
    /// (crate::oauth::code), or to [`TransportError::NeedsAuthorization`].
    #[error("{}", mcpx_protocol::auth::explain(*.status, .challenge.as_deref()))]
    Auth {
        /// 401 or 403.
        status: u16,
        /// The `WWW-Authenticate` value, if any.
        challenge: Option<String>,
    },
    /// The upstream needs a user's authorization that this process cannot get now, or
    /// the authorization flow failed: the text names the upstream, the step and what
    /// to do (`mcpx auth login NAME`; crate::oauth::code).
    #[error("{0}")]
    NeedsAuthorization(String),
    /// A legacy request carrying a session got 404: the session has expired and the
    /// client must initialise again (2025-03-26..2025-11-25 §Session Management).
    #[error("session expired (HTTP 404 on a request carrying Mcp-Session-Id)")]
    SessionExpired,
    /// The peer sent something unusable (not JSON-RPC, wrong content type, oversize).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// No answer in time.
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The upstream's output can no longer be split into messages (a stdio line over
    /// the frame limit, left unfinished, or two messages run together), so nothing it
    /// writes from there on can be trusted to be what it seems: the connection is given
    /// up, as a closed one is. The text says what it wrote, and the tail of its stderr.
    #[error("its output can no longer be framed: {0}")]
    Framing(String),
}

fn short(body: &str) -> String {
    const MAX: usize = 300;
    if body.len() <= MAX {
        return body.to_owned();
    }
    let mut cut = MAX;
    while !body.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &body[..cut])
}

impl TransportError {
    /// Whether this is an HTTP answer carrying a recognised modern JSON-RPC error: the
    /// sign that the server is modern (2026-07-28 basic/transports/streamable-http
    /// §Backward Compatibility; register A-C14, B-C9).
    pub fn is_recognised_modern_error(&self) -> bool {
        match self {
            TransportError::Http {
                status,
                code: Some(code),
                ..
            } => is_recognised_modern_error(*status, *code),
            _ => false,
        }
    }

    /// The HTTP status, if this is an HTTP error.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            TransportError::Http { status, .. }
            | TransportError::Auth { status, .. }
            | TransportError::Redirected { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// [`TransportError::Spawn`]'s text: `command not found: X (not in PATH)`, else
/// `cannot start "X": why`.
fn spawn_text(command: &str, reason: &str, not_found: bool) -> String {
    if not_found {
        format!("command not found: {command} ({reason})")
    } else {
        format!("cannot start {command:?}: {reason}")
    }
}
