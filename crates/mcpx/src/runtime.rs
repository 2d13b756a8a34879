//! What every long-running command shares: logs on stderr, a tokio runtime, and a
//! shutdown token that Ctrl-C (or SIGTERM) fires.

use std::future::Future;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

/// Logs go to stderr only (stdout may be the MCP stream), filtered by `MCPX_LOG`
/// (`warn` by default; e.g. `MCPX_LOG=debug` or `MCPX_LOG=mcpx_client=debug`), as
/// text or, with `MCPX_LOG_FORMAT=json`, one JSON object a line; traces go to the
/// OTLP endpoint the `OTEL_*` variables name, if any (crates/mcpx-telemetry).
pub(crate) fn init_logging() {
    mcpx_telemetry::init();
}

/// Why a listener on `addr` could not be made, naming the address:
/// `cannot listen on 127.0.0.1:8080: address already in use`.
pub(crate) fn listen_failure(addr: std::net::SocketAddr, e: &std::io::Error) -> std::io::Error {
    use std::io::ErrorKind;
    let why = match e.kind() {
        ErrorKind::AddrInUse => "address already in use".to_owned(),
        ErrorKind::AddrNotAvailable => {
            "address not available (no interface of this machine has it)".to_owned()
        }
        ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => e.to_string(),
    };
    std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {why}"))
}

/// `$MCPX_THREADS` that is not a number (its value).
#[derive(Debug, thiserror::Error)]
#[error("MCPX_THREADS={0}: not a number of threads")]
struct ThreadsError(String);

/// The worker threads a command asked for: `--threads N`, else `$MCPX_THREADS`, else 1
/// (a current-thread runtime); 0 is one per core (`None`, for [`build_runtime`]).
fn threads(arg: Option<usize>) -> Result<Option<usize>, ThreadsError> {
    let n = match arg {
        Some(n) => n,
        None => match std::env::var("MCPX_THREADS") {
            Ok(v) => v
                .trim()
                .parse::<usize>()
                .map_err(|_| ThreadsError(v.clone()))?,
            Err(_) => 1,
        },
    };
    Ok((n > 0).then_some(n))
}

/// The runtime's worker threads: `Some(1)` is a current-thread runtime (every task on
/// the calling thread: no cross-thread wake-ups), `Some(n)` a multi-threaded runtime of
/// `n` workers, `None` one worker per core (tokio's default).
fn build_runtime(threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    match threads {
        Some(1) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Some(n) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n.max(1))
            .enable_all()
            .build(),
        None => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    }
}

/// Keeps a timer due within [`ANCHOR_PERIOD`] in the runtime's timer wheel, always.
///
/// Every call arms a deadline (its timeout). Tokio wakes its driver (an eventfd write,
/// then one more `epoll_wait`) whenever a new timer is due before the earliest one it
/// is parked for, and with no other timer pending, every call's deadline is. With this
/// tick pending, a deadline seconds away never is: two system calls fewer per call, for
/// one wake-up a second. (Seen with `strace -f` on `mcpx serve`: a `write` to the
/// runtime's own eventfd right after each request went upstream.)
async fn timer_anchor() {
    let mut tick = tokio::time::interval(ANCHOR_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
    }
}

/// See [`timer_anchor`]: shorter than any sensible call timeout.
const ANCHOR_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs `main` on a runtime of the threads asked for (`--threads`, see [`threads`])
/// with a shutdown token fired by Ctrl-C or SIGTERM; reports an error on stderr as
/// `mcpx <command>: <error>`.
pub(crate) fn run<F, Fut, E>(command: &str, threads_arg: Option<usize>, main: F) -> ExitCode
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    init_logging();
    let threads = match threads(threads_arg) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mcpx {command}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match build_runtime(threads) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpx {command}: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        let on_signal = shutdown.clone();
        tokio::spawn(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                Some(()) = async { match term.as_mut() { Some(t) => t.recv().await, None => std::future::pending().await } } => {}
            }
            on_signal.cancel();
        });
        tokio::spawn(timer_anchor());
        main(shutdown).await
    });
    // Background tasks (a reader blocked on stdin) must not keep the process alive.
    runtime.shutdown_background();
    // The last spans, exported from the exporter's own thread.
    mcpx_telemetry::shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpx {command}: {e}");
            ExitCode::FAILURE
        }
    }
}
