//! mcpx's transports: how frames get between mcpx and its peers.
//!
//! The server side carries host connections to a [`Service`]; the client side carries
//! mcpx's own connections to upstream servers ([`upstream::Upstream`]). Both eras run
//! side by side on every transport; what a message *means* is not decided here, only
//! how it travels: framing, sessions (legacy HTTP), streams, what cancels a request,
//! limits and timeouts. Era and revision come from `mcpx_protocol::classify`.
//!
//! # Layout
//!
//! * [`service`]: the server-side seam ([`Service`], [`RequestCtx`], [`Peer`]).
//! * [`pending`]: requests awaiting responses, and in-flight requests to cancel.
//! * [`stdio`]: the stdio server (newline-delimited JSON on stdin/stdout).
//! * [`streamable_http`]: the HTTP server (and, in [`streamable_http::client`], the
//!   client): Streamable HTTP (both eras) and, beside it,
//!   the 2024-11-05 HTTP+SSE transport (`http_sse.rs`); the edge guards (Origin/Host
//!   allow-lists, body limits and timeouts) are in `origin.rs`.
//! * [`upstream`]: the client-side seam ([`upstream::Upstream`], [`upstream::Exchange`]).
//! * [`error`]: transport errors.
//! * [`channel_pool`]: bounded channels kept for reuse by the per-call paths.
//! * [`child`]: the stdio client (an upstream server as a child process).
//! * [`http_sse_client`]: the 2024-11-05 HTTP+SSE client.
//! * `http_client.rs`: the HTTP/1.1 client under both HTTP clients (hyper-util's pool),
//!   and the response helpers they share.
#![forbid(unsafe_code)]

pub mod channel_pool;
pub mod child;
pub mod error;
pub(crate) mod http_client;
pub(crate) mod http_sse;
pub mod http_sse_client;
pub mod oauth;
pub(crate) mod origin;
pub mod pending;
pub mod proxy;
pub mod service;
pub mod stdio;
pub mod streamable_http;
pub(crate) mod tls;
pub mod upstream;

pub use error::TransportError;
pub use service::{Incoming, Peer, RequestCtx, Service};
pub use streamable_http::HttpServerConfig;
