//! Test support shared by every mcpx crate's tests. Dev-only: no production code
//! depends on it.
//!
//! # Layout
//!
//! * `dispositions` (feature `dispositions`): decodes the dispositions registry.
//! * [`scratch`]: test directories, swept once their process has exited.
//! * [`shared`]: finds `../shared` (the read-only spec, register and requirements).
//! * [`tap`]: the schema tap: validates any frame against a given revision's
//!   `schema.json`, compiled once per revision and definition.
//! * [`http`]: a scripted HTTP server on 127.0.0.1 (fixed answers, or passed on), keeping
//!   every request.
//! * [`proxy`]: an HTTP proxy on 127.0.0.1 (`CONNECT` and absolute-form requests),
//!   keeping what opened each connection.
//! * [`tls`]: a TLS front on 127.0.0.1 with a certificate authority of its own, for
//!   `https://` upstreams.
#![forbid(unsafe_code)]

#[cfg(feature = "dispositions")]
pub mod dispositions;
pub mod http;
pub mod proxy;
pub mod scratch;
pub mod shared;
pub mod tap;
pub mod tls;

pub use tap::{SchemaTap, TapError};

/// A listener on `127.0.0.1` at a port the system chose, and that port.
pub(crate) async fn loopback_listener() -> (tokio::net::TcpListener, u16) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("local address: {e}"))
        .port();
    (listener, port)
}
