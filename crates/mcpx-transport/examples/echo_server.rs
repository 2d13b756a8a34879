//! `cargo run -p mcpx-transport --example echo_server`: the echo service over stdio.
//! (Streamable HTTP and HTTP+SSE flags arrive with those transports.)
#![allow(missing_docs)]

#[path = "echo/service.rs"]
mod echo;

use std::sync::Arc;

use mcpx_transport::stdio::{StdioConfig, serve};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut config = StdioConfig::default();
    // Tests lower the frame limit to exercise it without writing 64 MiB.
    if let Some(n) = std::env::var("ECHO_MAX_FRAME_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.limits.max_frame_bytes = n;
    }
    serve(
        Arc::new(echo::Echo),
        tokio::io::stdin(),
        tokio::io::stdout(),
        config,
        CancellationToken::new(),
    )
    .await
}
