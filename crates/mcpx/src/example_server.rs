//! `mcpx example-server`: the reference upstream (`mcpx-example-server`) on stdio.
//!
//! `--http ADDR` and `--sse ADDR` (Streamable HTTP, and the 2024-11-05 HTTP+SSE
//! transport) are added when the Streamable HTTP server lands
//! (`mcpx_transport::streamable_http::server`).

use std::process::ExitCode;
use std::sync::Arc;

use mcpx_example_server::{ExampleServer, Mode};
use mcpx_protocol::Revision;
use mcpx_transport::stdio::{StdioConfig, serve};
use tokio_util::sync::CancellationToken;

/// Arguments of `mcpx example-server`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Serve exactly this revision and refuse every other one with that revision's
    /// own errors (2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25 or 2026-07-28).
    #[arg(long, value_name = "REV", conflicts_with = "dual")]
    revision: Option<Revision>,
    /// Serve every revision: legacy after `initialize`, 2026-07-28 per request (the default).
    #[arg(long)]
    dual: bool,
}

impl Args {
    fn mode(&self) -> Mode {
        match self.revision {
            Some(r) => Mode::Strict(r),
            None => Mode::Dual,
        }
    }
}

/// Serves the example server on stdin/stdout until EOF or Ctrl-C. Logs go to stderr
/// (`MCPX_LOG`, e.g. `MCPX_LOG=debug`).
pub fn run(args: &Args) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCPX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpx example-server: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let server = Arc::new(ExampleServer::new(args.mode()));
    let result = runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        let on_signal = shutdown.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                on_signal.cancel();
            }
        });
        serve(
            server,
            tokio::io::stdin(),
            tokio::io::stdout(),
            StdioConfig::default(),
            shutdown,
        )
        .await
    });
    // Background tasks (a reader blocked on stdin) must not keep the process alive.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpx example-server: {e}");
            ExitCode::FAILURE
        }
    }
}
