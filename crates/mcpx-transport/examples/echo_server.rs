//! `cargo run -p mcpx-transport --example echo_server [-- --http ADDR]`: the echo
//! service over stdio (default), or with `--http ADDR` over Streamable HTTP (`/mcp`,
//! both eras) and HTTP+SSE (`/sse`, `/messages`) on one listener.
#![allow(missing_docs)]

#[path = "echo/service.rs"]
mod echo;

use std::sync::Arc;

use mcpx_transport::stdio::{StdioConfig, serve};
use mcpx_transport::streamable_http::{self, HttpServerConfig};
use tokio_util::sync::CancellationToken;

fn usage() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "usage: echo_server [--http ADDR]   (ADDR like 127.0.0.1:3921)",
    )
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut http = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--http" => http = Some(args.next().ok_or_else(usage)?),
            _ => return Err(usage()),
        }
    }
    let shutdown = CancellationToken::new();
    {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            shutdown.cancel();
        });
    }
    match http {
        Some(addr) => {
            let config = HttpServerConfig {
                bind: addr.parse().map_err(|_| usage())?,
                ..HttpServerConfig::default()
            };
            let listener = tokio::net::TcpListener::bind(config.bind).await?;
            eprintln!(
                "echo_server: listening on http://{}/mcp",
                listener.local_addr()?
            );
            streamable_http::serve(listener, Arc::new(echo::Echo), config, shutdown).await
        }
        None => {
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
                shutdown,
            )
            .await
        }
    }
}
