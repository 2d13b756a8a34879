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
    serve(
        Arc::new(echo::Echo),
        tokio::io::stdin(),
        tokio::io::stdout(),
        StdioConfig::default(),
        CancellationToken::new(),
    )
    .await
}
