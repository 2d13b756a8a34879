//! mcpx-transport's tests, one test binary: each module was a test file of its own.
//! They run in parallel threads, each with its own listeners on 127.0.0.1:0 and its
//! own child processes.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod child;
mod http_client;
mod http_connections;
mod http_server;
mod oauth_callback;
mod sse_client;
mod stdio_server;
mod wait;
