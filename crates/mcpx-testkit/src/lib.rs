//! Test support shared by every mcpx crate's tests. Dev-only: no production code
//! depends on it.
//!
//! # Layout
//!
//! * [`scratch`]: test directories, swept once their process has exited.
//! * [`shared`]: finds `../shared` (the read-only spec, register and requirements).
//! * [`tap`]: the schema tap: validates any frame against a given revision's
//!   `schema.json`, compiled once per revision and definition.
//! * [`proxy`]: an HTTP proxy on 127.0.0.1 (`CONNECT` and absolute-form requests),
//!   keeping what opened each connection.
//! * [`tls`]: a TLS front on 127.0.0.1 with a certificate authority of its own, for
//!   `https://` upstreams.
#![forbid(unsafe_code)]

pub mod proxy;
pub mod scratch;
pub mod shared;
pub mod tap;
pub mod tls;

pub use tap::{SchemaTap, TapError};
