//! `mcpx serve`: the gateway, as an MCP server for a host (stdio by default, or
//! Streamable HTTP and HTTP+SSE with `--http`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use mcpx_client::EraCache;
use mcpx_gateway::config::{self, Config};
use mcpx_gateway::gateway::{Gateway, GatewayBackend};
use mcpx_server::Seam;
use mcpx_transport::stdio::{StdioConfig, serve};
use mcpx_transport::streamable_http::{self, HttpServerConfig};

/// Arguments of `mcpx serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration file (`mcpServers` JSON). Default: `$MCPX_CONFIG`, then
    /// `./.mcpx.json`, `./.mcp.json`, `~/.config/mcpx/config.json`.
    #[arg(long, value_name = "FILE", conflicts_with = "demo")]
    config: Option<PathBuf>,
    /// Front the built-in example servers instead of a configuration: one that speaks
    /// every revision and one that speaks only 2025-03-26.
    #[arg(long)]
    demo: bool,
    /// Serve over HTTP on ADDR (e.g. 127.0.0.1:3921): Streamable HTTP at `/mcp` and the
    /// 2024-11-05 HTTP+SSE transport at `/sse`. Default: stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Move one revision to the front of `spec.precedence`.
    #[arg(long, value_name = "REV")]
    mcp_spec: Option<String>,
    /// Worker threads of the runtime: 1 runs every task on one thread (no cross-thread
    /// wake-ups: the lowest latency and CPU per call, measured in docs/performance.md);
    /// 0 is one per core, for many busy HTTP sessions on a many-core machine. Default:
    /// `$MCPX_THREADS`, else 1.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
}

/// The embedded default configuration: mcpx's own example servers.
fn demo_config() -> Result<Config, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the mcpx binary: {e}"))?;
    let exe = exe.to_string_lossy();
    let text = serde_json::json!({
        "mcpServers": {
            "everything": { "command": exe, "args": ["example-server"] },
            "legacy": { "command": exe, "args": ["example-server", "--revision", "2025-03-26"] }
        }
    })
    .to_string();
    config::parse(&text, std::path::Path::new("<demo>")).map_err(|e| e.to_string())
}

/// Runs the gateway until the host goes away (stdio) or Ctrl-C.
pub fn run(args: &Args) -> ExitCode {
    let loaded = if args.demo {
        demo_config()
    } else {
        config::load(args.config.as_deref())
            .map(|(path, c)| {
                tracing::info!("configuration: {}", path.display());
                c
            })
            .map_err(|e| {
                format!("{e}\n(try `mcpx serve --demo` to front the built-in example servers)")
            })
    };
    let mut config = match loaded {
        Ok(c) => c,
        Err(e) => {
            crate::runtime::init_logging();
            eprintln!("mcpx serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(rev) = &args.mcp_spec {
        match config.spec.clone().with_front(rev) {
            Ok(p) => config.spec = p,
            Err(e) => {
                eprintln!("mcpx serve: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let http = args.http;
    crate::runtime::run("serve", args.threads, |shutdown| async move {
        let policy = config.spec.clone();
        let max_frame = config.global.max_frame_bytes;
        let gateway = Gateway::new(config, EraCache::default_location());
        gateway.start().await;
        for (name, why) in gateway.unavailable() {
            eprintln!("mcpx serve: upstream {name} is unavailable: {why}");
        }
        {
            // On shutdown the gateway ends its hosts' listen streams gracefully first.
            let gateway = gateway.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                shutdown.cancelled().await;
                gateway.shutdown();
            });
        }
        let seam = Arc::new(Seam::new(
            Arc::new(GatewayBackend(gateway)),
            "mcpx",
            env!("CARGO_PKG_VERSION"),
            policy,
        ));
        match http {
            Some(bind) => {
                let mut config = HttpServerConfig {
                    bind,
                    ..HttpServerConfig::default()
                };
                config.limits.max_frame_bytes = max_frame;
                let listener = tokio::net::TcpListener::bind(bind).await?;
                let addr = listener.local_addr()?;
                eprintln!(
                    "mcpx serve: Streamable HTTP at http://{addr}{}, HTTP+SSE at http://{addr}{}",
                    config.path, config.sse_path
                );
                streamable_http::serve(listener, seam, config, shutdown).await
            }
            None => {
                let (input, output) = mcpx_transport::stdio::stdin_stdout();
                let mut config = StdioConfig::default();
                config.limits.max_frame_bytes = max_frame;
                serve(seam, input, output, config, shutdown).await
            }
        }
    })
}
