//! The protocol core of mcpx: everything about MCP that needs no I/O.
//!
//! This crate knows what a JSON-RPC frame is, which of the five MCP revisions a
//! message belongs to, and what each revision allows. It is a set of pure functions
//! and tables: transports, clients and servers above it feed it bytes and headers and
//! act on its answers. Keeping it free of I/O is what lets every rule be tested
//! exhaustively and fuzzed.
//!
//! # Layout
//!
//! * [`jsonrpc`]: the message model ([`Frame`]): raw JSON text plus an index, so
//!   unknown members survive and forwarding re-encodes nothing.
//! * [`codec`]: decoding with limits, batches and the errors bad input gets.
//! * [`params`]: a request's params on their way to the upstream ([`Params`]): valid
//!   text, where `_meta` and `name` are, and the edits the gateway makes of them.
//! * `scan` (private): a JSON object's members as spans of its text, validated without
//!   building values; what [`jsonrpc::member`] and [`jsonrpc::members`] read with.
//! * [`revision`]: [`Revision`], [`Era`] and the per-revision [`revision::Facts`] table,
//!   the one place era rules live.
//! * [`method`]: which methods exist in which revision, in which direction.
//! * [`error`]: error codes and which era may emit which.
//! * [`meta`]: protocol `_meta` keys and reserved prefixes.
//! * [`header`]: the 2026-07-28 HTTP request headers, built and validated.
//! * [`auth`]: an upstream's `WWW-Authenticate` challenge, read and explained (mcpx
//!   runs no user authorization flow).
//! * [`logging`]: log levels.
//! * [`trace`]: W3C trace context, read from a host and written for an upstream.
//! * [`lower`]: results reshaped for the receiver's revision, in one place.
//! * [`classify`]: the era and revision of an incoming message (stdio and HTTP).
//! * [`spec`]: the spec policy (`spec.precedence`, `--mcp-spec`, `spec.lenient`).
//! * [`dispositions`]: the dispositions registry.
#![forbid(unsafe_code)]

pub mod auth;
pub mod classify;
pub mod codec;
pub mod dispositions;
pub mod error;
pub mod header;
pub mod jsonrpc;
pub mod logging;
pub mod lower;
pub mod meta;
pub mod method;
pub mod params;
pub mod revision;
mod scan;
pub mod spec;
pub mod task;
pub mod trace;

pub use classify::{Rejection, Verdict};
pub use codec::{DecodeError, Decoded, Limits};
pub use jsonrpc::{Frame, Id};
pub use params::Params;
pub use revision::{Era, Revision};
pub use spec::SpecPolicy;
