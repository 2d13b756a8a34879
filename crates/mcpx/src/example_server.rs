//! `mcpx example-server`: the reference upstream (`mcpx-example-server`) on stdio, or
//! on HTTP (Streamable HTTP and HTTP+SSE on one listener).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use mcpx_example_server::{ExampleServer, Mode};
use mcpx_protocol::{Era, Revision};
use mcpx_transport::stdio::{StdioConfig, serve};
use mcpx_transport::streamable_http::{self, HttpServerConfig};

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
    /// Serve over HTTP on ADDR (e.g. 127.0.0.1:3921): Streamable HTTP at `/mcp` and the
    /// 2024-11-05 HTTP+SSE transport at `/sse` on the same listener. Default: stdio.
    #[arg(long, value_name = "ADDR", conflicts_with = "sse")]
    http: Option<SocketAddr>,
    /// Like `--http`; named for clients of the 2024-11-05 HTTP+SSE transport (`/sse`).
    #[arg(long, value_name = "ADDR")]
    sse: Option<SocketAddr>,
    /// Worker threads of the runtime, as `mcpx serve --threads`: 1 (one thread, the
    /// default unless `$MCPX_THREADS` says otherwise) or 0 (one per core).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// For testing: answer each `server/discover` this many milliseconds late, as a
    /// server under load does.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    discover_delay_ms: u64,
}

impl Args {
    fn mode(&self) -> Mode {
        match self.revision {
            Some(r) => Mode::Strict(r),
            None => Mode::Dual,
        }
    }
}

/// Serves the example server until EOF (stdio) or Ctrl-C. Logs go to stderr.
pub fn run(args: &Args) -> ExitCode {
    let mode = args.mode();
    let server = Arc::new(
        ExampleServer::new(mode)
            .with_discover_delay(std::time::Duration::from_millis(args.discover_delay_ms)),
    );
    let http = args.http.or(args.sse);
    crate::runtime::run("example-server", args.threads, |shutdown| async move {
        match http {
            Some(bind) => {
                let config = HttpServerConfig {
                    bind,
                    // A strict legacy server looks like one to modern clients too.
                    modern: !matches!(mode, Mode::Strict(r) if r.era() == Era::Legacy),
                    ..HttpServerConfig::default()
                };
                let listener = tokio::net::TcpListener::bind(bind)
                    .await
                    .map_err(|e| crate::runtime::listen_failure(bind, &e))?;
                let addr = listener.local_addr()?;
                // One listener serves both: Streamable HTTP at /mcp, HTTP+SSE at /sse.
                eprintln!(
                    "mcpx example-server: Streamable HTTP at http://{addr}{}, HTTP+SSE at http://{addr}{}",
                    config.path, config.sse_path
                );
                streamable_http::serve(listener, server, config, shutdown).await
            }
            None => {
                let (input, output) = mcpx_transport::stdio::stdin_stdout();
                serve(server, input, output, StdioConfig::default(), shutdown).await
            }
        }
    })
}
