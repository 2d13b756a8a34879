//! mcpx's upstream client: one connection to an upstream MCP server, whatever its era
//! and transport.
//!
//! [`connect`] starts the transport, finds the era (probing `server/discover` first by
//! default, falling back to `initialize` and, on HTTP, to HTTP+SSE) and returns a
//! [`Connection`]. A connection writes each request the way the upstream's revision
//! wants it, relays progress, logs and server-to-client requests back to the caller,
//! and handles cancellation, timeouts, session expiry and broken streams per era.
//!
//! # Layout
//!
//! * [`probe`]: connecting, era probing, the era cache.
//! * [`connection`]: calls, relays, pagination.
//! * [`any`]: one type over the three client transports.
//! * [`error`]: what failed, naming the upstream.
#![forbid(unsafe_code)]

pub mod any;
pub mod connection;
pub mod error;
pub mod probe;

pub use connection::{CallEvent, CallOptions, Connection, ServerFacts, TaskAsks};
pub use error::{AskRefusal, ClientError};
pub use mcpx_transport::oauth::code::UserAuth;
pub use probe::{
    ByteStream, ClientCredentials, DecidedBy, EraCache, Opening, ProtocolPreference, Proxy,
    StreamOpener, Target, TargetTransport, connect,
};
