//! `mcpx status`, `mcpx restart NAME`, `mcpx reload` and `mcpx stop`: the daemon of a
//! configuration, from the command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use axum::http::Method;
use serde_json::Value;

use super::client::{self, Client};

/// Which daemon: the one serving this configuration.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// The configuration file (as for `mcpx serve`). Default: `$MCPX_CONFIG`, then
    /// `./.mcpx.json`, `./.mcp.json`, `~/.config/mcpx/config.json`.
    #[arg(long, value_name = "FILE", conflicts_with = "demo")]
    config: Option<PathBuf>,
    /// The daemon of the built-in example servers (`mcpx daemon --demo`).
    #[arg(long)]
    demo: bool,
    /// Print the daemon's JSON answer instead of text.
    #[arg(long)]
    json: bool,
    /// How long to wait for the daemon, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    timeout: u64,
}

/// Arguments of `mcpx restart`.
#[derive(Debug, clap::Args)]
pub struct Restart {
    /// The upstream's name, as in the configuration.
    name: String,
    #[command(flatten)]
    target: Target,
}

macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout().lock(), $($t)*).is_err() {
            std::process::exit(0);
        }
    }};
}

/// Why a command against the daemon failed.
#[derive(Debug, thiserror::Error)]
enum CliError {
    /// The configuration file could not be found or read.
    #[error("{0}")]
    Config(String),
    /// No daemon serves the configuration.
    #[error("no daemon serves this configuration (start one with `mcpx daemon`)")]
    NoDaemon,
    /// No daemon serves the configuration, and the file does not parse.
    #[error(
        "no daemon serves this configuration (start one with `mcpx daemon`); and the file does not parse: {0}"
    )]
    NoDaemonBroken(String),
    /// The daemon could not be asked.
    #[error(transparent)]
    Ask(#[from] client::AskError),
    /// The daemon answered a problem, in words.
    #[error("{0}")]
    Problem(String),
    /// The daemon's socket still answers after the limit.
    #[error("the daemon did not stop within {} s", .0.as_secs())]
    NotStopped(Duration),
}

/// Runs `work` against the daemon of `target`; a missing daemon is an error. The
/// daemon is found by the configuration file's path, so a file that no longer parses
/// still finds the daemon serving it: `work` is then given the parse error.
fn with_daemon(
    command: &str,
    target: &Target,
    work: impl AsyncFnOnce(&Client, Duration, Option<&str>) -> Result<bool, CliError>,
) -> ExitCode {
    crate::runtime::init_logging();
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        eprintln!("mcpx {command}: cannot start a runtime");
        return ExitCode::FAILURE;
    };
    let limit = Duration::from_secs(target.timeout);
    let outcome = rt.block_on(async {
        let (key, broken) =
            client::key_of_file(target.config.as_deref(), target.demo).map_err(CliError::Config)?;
        let Some(client) = client::find(&key) else {
            return Err(match broken {
                Some(e) => CliError::NoDaemonBroken(e),
                None => CliError::NoDaemon,
            });
        };
        work(&client, limit, broken.as_deref()).await
    });
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("mcpx {command}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `text` on one line: its first line, with ` …` when more followed (a table's
/// columns stay aligned; `--json` has the whole text).
pub fn one_line(text: &str) -> String {
    let mut lines = text.trim().lines();
    let first = lines.next().unwrap_or("").trim_end();
    if lines.next().is_some() {
        format!("{first} …")
    } else {
        first.to_owned()
    }
}

/// A reload's outcome (its event's data) in words.
fn reload_words(r: &Value) -> String {
    let trigger = match r["trigger"].as_str() {
        Some("file") => "the file changed",
        Some("sighup") => "SIGHUP",
        Some("asked") => "asked",
        _ => "?",
    };
    if r["ok"] == Value::Bool(true) {
        format!("ok ({trigger}): {}", r["plan"].as_str().unwrap_or("?"))
    } else {
        format!(
            "failed ({trigger}): {}",
            one_line(r["error"].as_str().unwrap_or("?"))
        )
    }
}

/// One request of the daemon: its JSON answer, or the problem in words.
async fn ask(
    client: &Client,
    method: Method,
    path: &str,
    limit: Duration,
) -> Result<Value, CliError> {
    let answer = client.ask(method, path, None, limit).await?;
    match answer.problem() {
        Some(p) => Err(CliError::Problem(p)),
        None => Ok(answer.body),
    }
}

fn print_json(v: &Value) {
    match serde_json::to_string_pretty(v) {
        Ok(s) => say!("{s}"),
        Err(e) => eprintln!("mcpx: {e}"),
    }
}

/// `mcpx status`: the daemon and each upstream's state; the configuration file's
/// parse error, if it has one.
pub fn status(target: &Target) -> ExitCode {
    with_daemon("status", target, async |client, limit, broken| {
        let health = ask(client, Method::GET, "/v1/health", limit).await?;
        let status = ask(client, Method::GET, "/v1/status", limit).await?;
        if target.json {
            let mut v = serde_json::json!({"daemon": health, "upstreams": status["upstreams"]});
            if let Some(e) = broken {
                v["configError"] = Value::from(e);
            }
            print_json(&v);
            return Ok(true);
        }
        say!(
            "daemon: pid {}, mcpx {}, up {:.0} s, {}",
            health["pid"],
            health["version"].as_str().unwrap_or("?"),
            health["uptimeSeconds"].as_f64().unwrap_or(0.0),
            client.record.socket.display()
        );
        if let Some(log) = health["log"].as_str() {
            say!("log: {log}");
        }
        if health["lastReload"].is_object() {
            say!("last reload: {}", reload_words(&health["lastReload"]));
        }
        if let Some(e) = broken {
            say!(
                "configuration: does not parse, the daemon goes on with the one it loaded: {}",
                one_line(e)
            );
        }
        let ups = status["upstreams"].as_array().cloned().unwrap_or_default();
        let width = ups
            .iter()
            .filter_map(|u| u["name"].as_str())
            .map(str::len)
            .max()
            .unwrap_or(0);
        for u in &ups {
            say!("{}", status_line(u, width));
        }
        Ok(true)
    })
}

/// One upstream's line of `mcpx status`, from its `/v1/status` entry. Tools not yet
/// listed are "listing tools" (ready) or "tools not known yet", never "0 tools". A
/// ready upstream's last error is past: "earlier error at TIME".
fn status_line(u: &Value, width: usize) -> String {
    let mut line = format!(
        "{:width$}  {}",
        u["name"].as_str().unwrap_or("?"),
        u["phrase"].as_str().unwrap_or("?")
    );
    if let (Some(era), Some(rev)) = (u["era"].as_str(), u["revision"].as_str()) {
        line.push_str(&format!(", {era} {rev}"));
    }
    if let Some(pid) = u["pid"].as_u64() {
        line.push_str(&format!(", pid {pid}"));
    }
    let ready = u["state"] == "ready";
    let tools = match u["tools"].as_u64() {
        Some(n) => crate::inspect::counted(&n.to_string(), "tool"),
        None if ready => "listing tools".to_owned(),
        None => "tools not known yet".to_owned(),
    };
    line.push_str(&format!(
        ", {tools}, {}",
        crate::inspect::counted(&u["restarts"].to_string(), "restart")
    ));
    if let Some(e) = u["lastError"].as_str() {
        let what = if ready { "earlier error" } else { "last error" };
        let at = u["lastErrorAt"]
            .as_str()
            .map(|t| format!(" at {t}"))
            .unwrap_or_default();
        line.push_str(&format!("; {what}{at}: {}", one_line(e)));
    }
    line
}

/// `mcpx restart NAME`.
pub fn restart(r: &Restart) -> ExitCode {
    with_daemon("restart", &r.target, async |client, limit, _| {
        let path = format!(
            "/v1/servers/{}/restart",
            percent_encoding::utf8_percent_encode(&r.name, percent_encoding::NON_ALPHANUMERIC)
        );
        let v = ask(client, Method::POST, &path, limit).await?;
        if r.target.json {
            print_json(&v);
        } else {
            say!("{}: restarting", r.name);
        }
        Ok(true)
    })
}

/// `mcpx reload`.
pub fn reload(target: &Target) -> ExitCode {
    // With a file that does not parse the daemon is asked all the same: it says why
    // (with the place in the file), and the failed reload is one of its events.
    with_daemon("reload", target, async |client, limit, _| {
        let v = ask(client, Method::POST, "/v1/reload", limit).await?;
        if target.json {
            print_json(&v);
        } else {
            say!("reloaded: {}", v["plan"].as_str().unwrap_or("?"));
        }
        Ok(true)
    })
}

/// `mcpx stop`: stops the daemon and waits until its socket is gone.
pub fn stop(target: &Target) -> ExitCode {
    with_daemon("stop", target, async |client, limit, broken| {
        if let Some(e) = broken {
            eprintln!("mcpx stop: the configuration file does not parse: {e}");
        }
        let v = ask(client, Method::POST, "/v1/shutdown", limit).await?;
        let deadline = tokio::time::Instant::now() + limit;
        while super::paths::answers(&client.record.socket) {
            if tokio::time::Instant::now() >= deadline {
                return Err(CliError::NotStopped(limit));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if target.json {
            print_json(&v);
        } else {
            say!("stopped (pid {})", client.record.pid);
        }
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_text_of_many_lines_is_shown_by_its_first() {
        assert_eq!(one_line("exited; stderr: a\nb\n"), "exited; stderr: a …");
        assert_eq!(one_line("one line\n"), "one line");
        assert_eq!(one_line(""), "");
    }

    /// Issue #32: a ready upstream not yet listed said "0 tools", and a recovered
    /// one's last error read as current, with no time.
    #[test]
    fn a_line_says_what_is_known_and_when() {
        let listing = json!({"name": "a", "state": "ready", "phrase": "ready",
            "restarts": 0, "tools": null, "lastError": null});
        assert_eq!(
            status_line(&listing, 1),
            "a  ready, listing tools, 0 restarts"
        );
        let down = json!({"name": "a", "state": "starting", "phrase": "starting",
            "restarts": 0, "tools": null});
        assert_eq!(
            status_line(&down, 1),
            "a  starting, tools not known yet, 0 restarts"
        );
        let recovered = json!({"name": "a", "state": "ready", "phrase": "ready",
            "restarts": 1, "tools": 2, "lastError": "exited with status 1",
            "lastErrorAt": "2026-01-02T03:04:05.000Z"});
        assert_eq!(
            status_line(&recovered, 1),
            "a  ready, 2 tools, 1 restart; earlier error at 2026-01-02T03:04:05.000Z: exited with status 1"
        );
        let failing = json!({"name": "a", "state": "backoff", "phrase": "restarting",
            "restarts": 1, "tools": 2, "lastError": "exited with status 1",
            "lastErrorAt": "2026-01-02T03:04:05.000Z"});
        assert!(
            status_line(&failing, 1)
                .ends_with("; last error at 2026-01-02T03:04:05.000Z: exited with status 1")
        );
    }
}
