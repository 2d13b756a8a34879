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
//! The server side:
//!
//! * [`service`]: the server-side seam ([`Service`], [`RequestCtx`], [`Peer`]).
//! * [`stdio`]: the stdio server (newline-delimited JSON on stdin/stdout).
//! * [`streamable_http`]: the HTTP server, Streamable HTTP (both eras) with the
//!   2024-11-05 HTTP+SSE transport beside it (`http_sse.rs`), on one listener; the edge
//!   guards (Origin/Host allow-lists, the bearer token, body limits and timeouts) are
//!   in [`origin`].
//! * [`serve`]: one HTTP/1.1 connection served with graceful shutdown, for every
//!   HTTP listener (this crate's, the daemon's, the OAuth redirect's).
//! * [`origin`]: the guard every HTTP listener applies (Host, Origin, absolute-form
//!   targets, bearer tokens, header limits).
//! * [`listen`]: accepting within a budget that idle and unauthenticated
//!   connections cannot use up (the daemon's listeners, the metrics listener).
//! * [`json_api`]: what a JSON API over HTTP (the daemon's `/v1`) reads of a request:
//!   query parameters, whether a body is JSON, the body as an object.
//!
//! The client side:
//!
//! * [`upstream`]: the client-side seam ([`upstream::Upstream`], [`upstream::Exchange`]).
//! * [`child`]: the stdio client (an upstream server as a child process).
//! * [`streamable_http::client`]: the Streamable HTTP client.
//! * [`http_sse_client`]: the 2024-11-05 HTTP+SSE client.
//! * `http_client.rs`: the HTTP/1.1 client under both HTTP clients: hyper's client
//!   connections, kept alive in a small pool of mcpx's own (a short list searched by
//!   authority), the request target and `Host` made once per endpoint, and the
//!   response helpers both clients share.
//! * [`sse`]: the event-stream reader both SSE clients use (sse-stream's parser behind
//!   mcpx's bound on an event's size).
//! * `tls.rs`: TLS for `https://` upstreams (rustls, the system's root certificates).
//! * [`proxy`]: the HTTP proxy an upstream's connections go through, configured or
//!   from the environment.
//! * [`oauth`]: OAuth tokens for an HTTP upstream. A machine client gets them by
//!   client credentials, with a secret or a signed JWT. When a user must authorize,
//!   [`oauth::code`] runs the authorization code flow with PKCE, and
//!   [`oauth::store`] keeps the user's tokens.
//!
//! Both sides:
//!
//! * [`pending`]: requests awaiting responses, and in-flight requests to cancel.
//! * [`channel_pool`]: bounded channels kept for reuse by the per-call paths.
//! * [`error`]: transport errors.
#![forbid(unsafe_code)]

pub mod channel_pool;
pub mod child;
pub mod error;
pub(crate) mod http_client;
pub(crate) mod http_sse;
pub mod http_sse_client;
pub mod json_api;
pub mod listen;
pub mod oauth;
pub mod origin;
pub mod pending;
pub mod proxy;
pub mod serve;
pub mod service;
pub mod sse;
pub mod stdio;
pub mod streamable_http;
pub mod tls;
pub mod upstream;

pub use error::TransportError;
pub use service::{Carrier, Incoming, ParamHeaders, Peer, RequestCtx, Service};
pub use streamable_http::HttpServerConfig;
