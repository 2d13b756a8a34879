//! `mcpx bench`: the load generator (`mcpx-bench`) against one MCP server: `tools/call`
//! at N concurrent sessions, calls/s and latency percentiles, one human line or JSON.

use std::process::ExitCode;
use std::time::Duration;

use mcpx_bench::{Budget, Options};
use mcpx_client::TargetTransport;
use mcpx_protocol::Era;

/// The era to speak, as a command-line value.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum EraArg {
    /// `initialize` per session (the newest legacy revision the server accepts).
    Legacy,
    /// 2026-07-28, stateless.
    Modern,
}

/// Arguments of `mcpx bench`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["stdio", "http"])))]
pub struct Args {
    /// Start the server as a child process, one per session: the command line, split on
    /// whitespace (e.g. "mcpx example-server").
    #[arg(long, value_name = "CMD ARGS")]
    stdio: Option<String>,
    /// The server's Streamable HTTP endpoint (e.g. http://127.0.0.1:3921/mcp).
    #[arg(long, value_name = "URL")]
    http: Option<String>,
    /// The era to speak.
    #[arg(long, value_enum, default_value = "legacy")]
    era: EraArg,
    /// Concurrent sessions (one call in flight each).
    #[arg(long, default_value_t = 1)]
    sessions: usize,
    /// Seconds to measure (default 3 unless --calls is given).
    #[arg(long, value_name = "SECS", conflicts_with = "calls")]
    duration: Option<f64>,
    /// Calls to measure, shared by the sessions.
    #[arg(long, value_name = "N")]
    calls: Option<u64>,
    /// Seconds of warm-up before measuring.
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    warmup: f64,
    /// The tool to call.
    #[arg(long, default_value = "test_simple_text")]
    tool: String,
    /// The tool's arguments (a JSON object).
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,
    /// The client capabilities a 2026-07-28 call declares in its `_meta` (a JSON
    /// object), e.g. a real host's, which are larger than the default `{}`.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    client_capabilities: String,
    /// Report the peak RSS (VmHWM) of this process, e.g. the gateway's.
    #[arg(long, value_name = "PID")]
    watch_pid: Option<u32>,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Worker threads of the load generator's runtime.
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

/// Options that do not make a run.
#[derive(Debug, thiserror::Error)]
enum OptionsError {
    /// A number of seconds that is not a duration.
    #[error("--{what} {s}: {source}")]
    Seconds {
        what: &'static str,
        s: f64,
        source: std::time::TryFromFloatSecsError,
    },
    /// `--stdio ""`.
    #[error("--stdio: empty command")]
    EmptyCommand,
    /// Neither `--stdio` nor `--http`.
    #[error("give --stdio or --http")]
    NoTarget,
    /// An option's JSON does not parse.
    #[error("--{0}: {1}")]
    Json(&'static str, #[source] serde_json::Error),
    /// An option's JSON is not an object.
    #[error("--{0}: not a JSON object")]
    NotObject(&'static str),
}

fn seconds(s: f64, what: &'static str) -> Result<Duration, OptionsError> {
    Duration::try_from_secs_f64(s).map_err(|source| OptionsError::Seconds { what, s, source })
}

fn options(args: &Args) -> Result<Options, OptionsError> {
    let transport = match (&args.stdio, &args.http) {
        (Some(cmd), _) => {
            let mut words = cmd.split_whitespace().map(str::to_owned);
            let command = words.next().ok_or(OptionsError::EmptyCommand)?;
            TargetTransport::Stdio {
                command,
                args: words.collect(),
                env: Vec::new(),
                cwd: None,
            }
        }
        (None, Some(url)) => TargetTransport::Http {
            url: url.clone(),
            headers: Vec::new(),
        },
        (None, None) => return Err(OptionsError::NoTarget),
    };
    let arguments: serde_json::Value =
        serde_json::from_str(&args.args).map_err(|e| OptionsError::Json("args", e))?;
    if !arguments.is_object() {
        return Err(OptionsError::NotObject("args"));
    }
    let client_capabilities: serde_json::Value = serde_json::from_str(&args.client_capabilities)
        .map_err(|e| OptionsError::Json("client-capabilities", e))?;
    if !client_capabilities.is_object() {
        return Err(OptionsError::NotObject("client-capabilities"));
    }
    let budget = match (args.calls, args.duration) {
        (Some(n), _) => Budget::Calls(n),
        (None, d) => Budget::Duration(seconds(d.unwrap_or(3.0), "duration")?),
    };
    Ok(Options {
        transport,
        era: match args.era {
            EraArg::Legacy => Era::Legacy,
            EraArg::Modern => Era::Modern,
        },
        sessions: args.sessions,
        budget,
        warmup: seconds(args.warmup, "warmup")?,
        tool: args.tool.clone(),
        arguments,
        client_capabilities,
        watch_pid: args.watch_pid,
    })
}

/// Runs the benchmark and prints its report on stdout.
pub fn run(args: &Args) -> ExitCode {
    crate::runtime::init_logging();
    let opts = match options(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("mcpx bench: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpx bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(mcpx_bench::run(&opts));
    runtime.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(report) => {
            if args.json {
                match serde_json::to_string(&report) {
                    Ok(j) => println!("{j}"),
                    Err(e) => {
                        eprintln!("mcpx bench: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            } else {
                println!("{}", report.human());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcpx bench: {e}");
            ExitCode::FAILURE
        }
    }
}
