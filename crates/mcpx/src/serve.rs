//! `mcpx serve`: the gateway, as an MCP server for a host (stdio by default, or
//! Streamable HTTP and HTTP+SSE with `--http`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use mcpx_client::EraCache;
use mcpx_gateway::app::{Adjust, App};
use mcpx_gateway::config::{self, Config};
use mcpx_gateway::upstream::State;
use mcpx_transport::stdio::{StdioConfig, serve};
use mcpx_transport::streamable_http::{self, BearerToken, HttpServerConfig};

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
    /// Run the OAuth authorization flow (printing its URL, opening a browser) when an
    /// upstream needs it, instead of failing the call: for `mcpx tools|call|read|
    /// prompt`, which run the gateway while a person is at the keyboard.
    #[arg(long, hide = true)]
    interactive_auth: bool,
    /// Serve over HTTP on ADDR (e.g. 127.0.0.1:3921): Streamable HTTP at `/mcp` and the
    /// 2024-11-05 HTTP+SSE transport at `/sse`. Default: stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// With `--http`: also accept this `Host` (a bare host, any port, or `host:port`;
    /// repeatable). Default: loopback names only (DNS-rebinding protection).
    #[arg(long, value_name = "HOST", requires = "http")]
    allow_host: Vec<String>,
    /// With `--http`: also accept requests from this `Origin` (a bare host, `host:port`,
    /// or a full origin such as `https://app.example`; repeatable).
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    allow_origin: Vec<String>,
    /// With `--http`: require `Authorization: Bearer <token>` on every request, with one
    /// of this file's tokens: one a line (surrounding whitespace ignored; blank lines
    /// and lines starting with `#` skipped). Each legacy session is bound to the token
    /// that opened it. Each token has at least 32 bytes, and the file is readable by
    /// its owner only. Default: `$MCPX_SERVE_TOKEN` (one token), else none.
    #[arg(long, value_name = "FILE", requires = "http")]
    token_file: Option<PathBuf>,
    /// With `--http`: serve over TLS (HTTPS) with the certificate chain in this PEM file
    /// (the server's certificate first); needs `--tls-key`.
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_key"])]
    tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert`, PEM (PKCS #8, PKCS #1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve Prometheus metrics at `http://ADDR/metrics` (e.g. 127.0.0.1:9464), on a
    /// listener of its own with the Host and Origin rules of every mcpx listener (no
    /// token). Works with stdio and `--http` alike. Default: no metrics.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// With `--metrics`: also accept this `Host` on the metrics listener (a bare host,
    /// any port, or `host:port`; repeatable), e.g. the name a scraper uses.
    #[arg(long, value_name = "HOST", requires = "metrics")]
    metrics_allow_host: Vec<String>,
    /// Move one revision to the front of `spec.precedence`.
    #[arg(long, value_name = "REV")]
    mcp_spec: Option<String>,
    /// Bridge this stdio host to the daemon serving the configuration (`mcpx
    /// daemon`), starting one if none runs: the host shares its upstreams instead of
    /// starting its own.
    #[arg(long, conflicts_with_all = ["http", "metrics", "mcp_spec"])]
    attach: bool,
    /// With `--attach`: the daemon's socket (as `mcpx daemon --socket` was given),
    /// instead of the one found from the configuration; no daemon is started.
    #[arg(long, value_name = "PATH", requires = "attach")]
    socket: Option<PathBuf>,
    /// Overrides `limits.startupWaitMs`: how long a host's first list (and a call)
    /// waits, at most, for upstreams still making their first start. `mcpx tools|call|
    /// read|prompt` set it from their `--timeout`.
    #[arg(long, value_name = "MS")]
    startup_wait_ms: Option<u64>,
    /// Worker threads of the runtime: 1 runs every task on one thread (no cross-thread
    /// wake-ups: the lowest latency and CPU per call, measured in docs/performance.md);
    /// 0 is one per core, for many busy HTTP sessions on a many-core machine. Default:
    /// `$MCPX_THREADS`, else 1.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
}

/// Why the HTTP listener's settings are not usable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListenerError {
    /// The token file could not be read.
    #[error("--token-file {}: {source}", file.display())]
    TokenFileRead {
        file: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The token file's text is not tokens.
    #[error("--token-file {}: {why}", file.display())]
    TokenFileBad {
        file: std::path::PathBuf,
        why: &'static str,
    },
    /// The token file can be read by others than its owner.
    #[error(
        "--token-file {}: readable by group or others (mode {mode:o}); allow its owner only (chmod 600)",
        file.display()
    )]
    TokenFileOpen { file: std::path::PathBuf, mode: u32 },
    /// A token of the file is too short to resist guessing.
    #[error(
        "--token-file {}: the token on line {line} has {len} bytes; tokens need at least {MIN_TOKEN_BYTES} (e.g. `openssl rand -hex 32`)",
        file.display()
    )]
    TokenFileShort {
        file: std::path::PathBuf,
        line: usize,
        len: usize,
    },
    /// `$MCPX_SERVE_TOKEN` is set but empty.
    #[error("${} is empty", config::SERVE_TOKEN_ENV)]
    EmptyToken,
    /// `$MCPX_SERVE_TOKEN` is too short to resist guessing.
    #[error(
        "${env} has {0} bytes; tokens need at least {MIN_TOKEN_BYTES} (e.g. `openssl rand -hex 32`)",
        env = config::SERVE_TOKEN_ENV
    )]
    ShortToken(usize),
    /// The certificate or key could not be used. A message is all that
    /// `TlsIdentity::from_pem_files` gives.
    #[error("{0}")]
    Tls(String),
}

/// The fewest bytes a bearer token may have: 32 (256 bits as hex is 64).
pub(crate) const MIN_TOKEN_BYTES: usize = 32;

/// The tokens a listener asks for: those of `file` (`--token-file`), else
/// `$MCPX_SERVE_TOKEN`'s, else none. A file that its group or others can read is
/// refused, and so is a token shorter than [`MIN_TOKEN_BYTES`].
pub(crate) fn tokens(file: Option<&std::path::Path>) -> Result<Vec<BearerToken>, ListenerError> {
    use std::os::unix::fs::PermissionsExt;
    let Some(file) = file else {
        return match std::env::var(config::SERVE_TOKEN_ENV) {
            Err(_) => Ok(Vec::new()),
            Ok(t) => {
                let token = BearerToken::new(&t).ok_or(ListenerError::EmptyToken)?;
                match t.trim().len() {
                    n if n < MIN_TOKEN_BYTES => Err(ListenerError::ShortToken(n)),
                    _ => Ok(vec![token]),
                }
            }
        };
    };
    let read = |source| ListenerError::TokenFileRead {
        file: file.to_owned(),
        source,
    };
    let mut opened = std::fs::File::open(file).map_err(read)?;
    let mode = opened.metadata().map_err(read)?.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(ListenerError::TokenFileOpen {
            file: file.to_owned(),
            mode: mode & 0o777,
        });
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(&mut opened, 1 << 20), &mut text)
        .map_err(read)?;
    if let Some((line, len)) = text
        .lines()
        .map(str::trim)
        .enumerate()
        .find(|(_, l)| !l.is_empty() && !l.starts_with('#') && l.len() < MIN_TOKEN_BYTES)
        .map(|(i, l)| (i + 1, l.len()))
    {
        return Err(ListenerError::TokenFileShort {
            file: file.to_owned(),
            line,
            len,
        });
    }
    BearerToken::from_lines(&text).map_err(|why| ListenerError::TokenFileBad {
        file: file.to_owned(),
        why,
    })
}

/// The HTTP listener's settings from the command line (and `$MCPX_SERVE_TOKEN`).
fn listener_config(args: &Args, bind: SocketAddr) -> Result<HttpServerConfig, ListenerError> {
    let mut config = HttpServerConfig {
        bind,
        ..HttpServerConfig::default()
    };
    config.allowed_hosts.extend(args.allow_host.iter().cloned());
    config
        .allowed_origins
        .extend(args.allow_origin.iter().cloned());
    config.bearer_tokens = tokens(args.token_file.as_deref())?;
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        config.tls = Some(
            mcpx_transport::streamable_http::TlsIdentity::from_pem_files(cert, key)
                .map_err(ListenerError::Tls)?,
        );
    }
    Ok(config)
}

/// A configuration that could not be loaded, in words: with `hint` (the `--demo`
/// suggestion) only when no file was found at all. After a file's own error (its
/// syntax, a value) the hint would only distract from what to fix.
pub(crate) fn config_failure(e: &config::ConfigError, hint: &str) -> String {
    match e {
        config::ConfigError::NotFound { .. } => format!("{e}\n({hint})"),
        _ => e.to_string(),
    }
}

/// The hint after "no configuration found" for the commands that take `--demo`.
pub(crate) const DEMO_HINT: &str = "try --demo for the built-in example servers";

/// Why the built-in configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    /// The running binary's path is not known.
    #[error("cannot find the mcpx binary: {0}")]
    Exe(#[source] std::io::Error),
    /// The configuration does not parse.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
}

/// The embedded default configuration: mcpx's own example servers.
pub(crate) fn demo_config() -> Result<Config, DemoError> {
    let exe = std::env::current_exe().map_err(DemoError::Exe)?;
    let exe = exe.to_string_lossy();
    let text = serde_json::json!({
        "mcpServers": {
            "everything": { "command": exe, "args": ["example-server"] },
            "legacy": { "command": exe, "args": ["example-server", "--revision", "2025-03-26"] }
        }
    })
    .to_string();
    Ok(config::parse(&text, std::path::Path::new("<demo>"))?)
}

/// Runs the gateway until the host goes away (stdio) or Ctrl-C/SIGTERM, then stops
/// every upstream before exiting.
pub fn run(args: &Args) -> ExitCode {
    mcpx_transport::oauth::code::allow_interactive_login(args.interactive_auth);
    if args.attach {
        return attach(args);
    }
    let loaded = if args.demo {
        demo_config().map(|c| (None, c)).map_err(|e| e.to_string())
    } else {
        config::load(args.config.as_deref())
            .map(|(path, c)| {
                tracing::info!("configuration: {}", path.display());
                (Some(path), c)
            })
            .map_err(|e| {
                config_failure(
                    &e,
                    "try `mcpx serve --demo` to front the built-in example servers",
                )
            })
    };
    let (path, mut config) = match loaded {
        Ok(c) => c,
        Err(e) => {
            crate::runtime::init_logging();
            eprintln!("mcpx serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    // `--mcp-spec` and `--startup-wait-ms`, applied to this configuration and to
    // every reload.
    let adjust: Option<Adjust> =
        (args.mcp_spec.is_some() || args.startup_wait_ms.is_some()).then(|| {
            let (front, wait) = (args.mcp_spec.clone(), args.startup_wait_ms);
            Arc::new(move |c: &mut Config| {
                if let Some(rev) = &front {
                    c.spec = c.spec.clone().with_front(rev).map_err(|e| e.to_string())?;
                }
                if let Some(ms) = wait {
                    c.global.startup_wait = std::time::Duration::from_millis(ms);
                }
                Ok(())
            }) as Adjust
        });
    if let Some(adjust) = &adjust
        && let Err(e) = adjust(&mut config)
    {
        eprintln!("mcpx serve: {e}");
        return ExitCode::FAILURE;
    }
    let http = match args
        .http
        .map(|bind| listener_config(args, bind))
        .transpose()
    {
        Ok(h) => h,
        Err(e) => {
            crate::runtime::init_logging();
            eprintln!("mcpx serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    let metrics = match args
        .metrics
        .map(|_| mcpx_metrics::Metrics::new())
        .transpose()
    {
        Ok(m) => m.map(Arc::new),
        Err(e) => {
            crate::runtime::init_logging();
            eprintln!("mcpx serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    let metrics_bind = args.metrics;
    let metrics_hosts = args.metrics_allow_host.clone();
    crate::runtime::run("serve", args.threads, |shutdown| async move {
        let max_frame = config.global.max_frame_bytes;
        let (max_sessions, session_idle) = (config.global.max_sessions, config.global.session_idle);
        let (max_header_count, max_header_bytes) = (
            config.global.max_header_count,
            config.global.max_header_bytes,
        );
        // The metrics listener first: a scraper may come before the first host.
        if let (Some(bind), Some(metrics)) = (metrics_bind, &metrics) {
            let rules = mcpx_metrics::Rules {
                hosts: metrics_hosts.clone(),
            };
            serve_metrics(bind, metrics.clone(), rules, shutdown.clone()).await?;
        }
        // Upstreams start in the background: the listener is up at once, and a host's
        // first list waits at most `startupWaitMs` for them.
        let app =
            App::start_with_metrics(config, path, adjust, EraCache::default_location(), metrics);
        report_first_failures(&app);
        if let Err(e) = app.watch() {
            mcpx_telemetry::notice(&format!(
                "mcpx serve: the configuration file is not watched (reload with SIGHUP): {e}"
            ));
        }
        {
            // On shutdown the gateway ends its hosts' listen streams gracefully first.
            let gateway = app.gateway().clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                shutdown.cancelled().await;
                gateway.shutdown();
            });
        }
        let served = match http {
            Some(mut config) => {
                config.limits.max_frame_bytes = max_frame;
                config.max_sessions = max_sessions;
                config.session_idle_timeout = session_idle;
                config.max_header_count = max_header_count;
                config.max_header_bytes = max_header_bytes;
                match listen(config.bind) {
                    Err(e) => Err(crate::runtime::listen_failure(config.bind, &e)),
                    Ok(listener) => {
                        let addr = listener.local_addr()?;
                        let scheme = if config.tls.is_some() {
                            "https"
                        } else {
                            "http"
                        };
                        mcpx_telemetry::notice(&format!(
                            "mcpx serve: Streamable HTTP at {scheme}://{addr}{}, HTTP+SSE at {scheme}://{addr}{}",
                            config.path, config.sse_path
                        ));
                        if !addr.ip().is_loopback() && config.bearer_tokens.is_empty() {
                            mcpx_telemetry::notice(&format!(
                                "mcpx serve: warning: {addr} is not a loopback address and no token is required (--token-file): whoever reaches it can use every upstream"
                            ));
                        }
                        streamable_http::serve(listener, app.seam(), config, shutdown).await
                    }
                }
            }
            None => {
                let (input, output) = mcpx_transport::stdio::stdin_stdout();
                let mut config = StdioConfig::default();
                config.limits.max_frame_bytes = max_frame;
                serve(app.seam(), input, output, config, shutdown).await
            }
        };
        // No upstream process outlives mcpx: each is stopped (stdin, SIGTERM to its
        // process group, SIGKILL) before the process exits.
        app.shutdown().await;
        served
    })
}

/// `mcpx serve --attach`: stdio bridged to the daemon for the configuration.
fn attach(args: &Args) -> ExitCode {
    let (config, demo, socket) = (args.config.clone(), args.demo, args.socket.clone());
    crate::runtime::run("serve", Some(1), |_shutdown| async move {
        let within = std::time::Duration::from_secs(60);
        let client = match socket {
            Some(path) => crate::daemon::client::at_socket(&path)
                .ok_or_else(|| format!("--socket {}: no daemon answers", path.display()))?,
            None => crate::daemon::client::daemon_for(config.as_deref(), demo, true, within)
                .await?
                .ok_or("no daemon")?,
        };
        crate::daemon::client::attach(&client)
            .await
            .map_err(|e| e.to_string())
    })
}

/// Connections the kernel queues on the HTTP listener before mcpx accepts them:
/// `listen`'s backlog, which the kernel caps at `net.core.somaxconn`. tokio's own,
/// 1024, is below a thousand hosts' connections arriving at once (a host's 1,000
/// concurrent calls over HTTP/1.1 open as many): the kernel drops the SYNs past it,
/// and each of those connections waits a second for its retry.
const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `bind` with [`LISTEN_BACKLOG`], as `TcpListener::bind` makes one
/// otherwise (`SO_REUSEADDR`, non-blocking).
fn listen(bind: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if bind.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(bind)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Binds `bind` and serves `/metrics` there in the background, until `shutdown`.
async fn serve_metrics(
    bind: SocketAddr,
    metrics: Arc<mcpx_metrics::Metrics>,
    rules: mcpx_metrics::Rules,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(bind).await.map_err(|e| {
        let e = crate::runtime::listen_failure(bind, &e);
        std::io::Error::new(e.kind(), format!("--metrics: {e}"))
    })?;
    let addr = listener.local_addr()?;
    mcpx_telemetry::notice(&format!(
        "mcpx serve: metrics at http://{addr}{}",
        mcpx_metrics::PATH
    ));
    if !addr.ip().is_loopback() {
        mcpx_telemetry::notice(&format!(
            "mcpx serve: warning: {addr} is not a loopback address and metrics need no token: whoever reaches it can read them (the names of upstreams and tools, call counts); a scraper's Host needs --metrics-allow-host"
        ));
    }
    tokio::spawn(async move {
        if let Err(e) = mcpx_metrics::serve(listener, metrics, rules, shutdown).await {
            tracing::warn!("metrics listener: {e}");
        }
    });
    Ok(())
}

/// Says on stderr, once per upstream, when its first start fails, whatever the log
/// level: the person who started mcpx learns why an upstream is missing (and `mcpx
/// tools`, whose gateway runs with `MCPX_LOG=error`, shows it beside the list).
fn report_first_failures(app: &App) {
    for (up, _) in app.gateway().statuses() {
        let mut status = up.supervisor().watch();
        tokio::spawn(async move {
            let Ok(st) = status.wait_for(|s| s.settled).await else {
                return;
            };
            if st.state == State::Ready || st.state == State::Idle {
                return;
            }
            // Stopped by mcpx itself (the host closed stdin, a signal, a reload that
            // removed it) before it was ready: nothing went wrong with it.
            if st.state == State::Stopped {
                tracing::debug!(upstream = %up.id, "stopped before it was ready");
                return;
            }
            let why = st.last_error.as_ref().map_or_else(
                || st.state.phrase(tokio::time::Instant::now()),
                |c| c.to_string(),
            );
            mcpx_telemetry::notice(&format!(
                "mcpx serve: upstream {} is unavailable: {why}",
                up.id
            ));
        });
    }
}
