//! `mcpx log` and `mcpx stats`: the call history (crates/mcpx-history) from the
//! command line.
//!
//! * this file: the options both commands take, which database they read, and the
//!   times `--since` and `--until` accept.
//! * [`log`]: the calls themselves, `--follow` and `--purge`.
//! * [`follow`]: new calls as they are written.
//! * [`stats`]: the calls grouped, with error rates and latency percentiles.
//! * [`table`]: aligned columns, and the outcome's colour on a terminal.
//!
//! Both commands only read the database (`--purge` deletes from it); a database that
//! is not there means no call was recorded yet, which is not an error.

pub mod follow;
pub mod log;
pub mod stats;
pub mod table;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcpx_gateway::config::{self, ConfigError};
use mcpx_history::{Filter, HistoryError, Store};

/// A line on stdout; a closed stdout (`mcpx log | head`) ends the command quietly.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout().lock(), $($t)*).is_err() {
            std::process::exit(0);
        }
    }};
}
pub(crate) use say;

/// Which database, and which calls of it: the options `log` and `stats` share.
#[derive(Debug, clap::Args)]
pub struct Common {
    /// The configuration file whose database (`mcpx.history.path`) is read. Default:
    /// `$MCPX_CONFIG`, then `./.mcpx.json`, `./.mcp.json`,
    /// `~/.config/mcpx/config.json`; with none of them,
    /// `$XDG_STATE_HOME/mcpx/history.sqlite3`.
    #[arg(long, value_name = "FILE", conflicts_with = "db")]
    config: Option<PathBuf>,
    /// The database to read, named directly.
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
    /// Calls that started at or after WHEN: a duration ago (`90s`, `15m`, `2h`, `1d`)
    /// or a time in UTC (`2026-01-02T03:04:05Z`, `2026-01-02 03:04`, `2026-01-02`).
    #[arg(long, value_name = "WHEN", value_parser = parse_when)]
    since: Option<When>,
    /// Calls that started before WHEN (as for --since).
    #[arg(long, value_name = "WHEN", value_parser = parse_when)]
    until: Option<When>,
    /// Calls to this upstream (its name in the configuration).
    #[arg(long, value_name = "NAME")]
    upstream: Option<String>,
    /// Calls whose tool, prompt or resource URI matches GLOB (`*`, `?`, `[…]`;
    /// case-sensitive), as the host named it.
    #[arg(long, value_name = "GLOB")]
    tool: Option<String>,
    /// Calls of the host whose `clientInfo.name` is NAME.
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl Common {
    /// The calls these options pick, times taken from `now_ms`.
    fn filter(&self, now_ms: i64) -> Filter {
        Filter {
            since_ms: self.since.map(|w| w.ms(now_ms)),
            until_ms: self.until.map(|w| w.ms(now_ms)),
            upstream: self.upstream.clone(),
            tool: self.tool.clone(),
            host: self.host.clone(),
            ..Filter::default()
        }
    }
}

/// A time on the command line: a duration before now, or a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// This long before the command ran.
    Ago(Duration),
    /// This moment.
    At(SystemTime),
}

impl When {
    /// The time in ms since the Unix epoch, a duration counted back from `now_ms`.
    fn ms(self, now_ms: i64) -> i64 {
        match self {
            When::Ago(d) => now_ms.saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            When::At(t) => t
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        }
    }
}

// Result<_, String>: clap prints the words as the option's error and exits 2.
/// `--since`/`--until`: a duration (`humantime`'s: `90s`, `15m`, `2h`, `1d`, `1h30m`)
/// or an RFC 3339 time in UTC (`T` or a space between date and time, `Z` or nothing
/// after it, seconds optional), or a date alone (its midnight, UTC).
pub fn parse_when(s: &str) -> Result<When, String> {
    let s = s.trim();
    if let Ok(d) = humantime::parse_duration(s) {
        return Ok(When::Ago(d));
    }
    let text = match (s.len(), s.strip_suffix('Z')) {
        // A date alone: its midnight.
        (10, _) => format!("{s}T00:00:00Z"),
        // Minutes without seconds (`2026-01-02 03:04`, `…T03:04Z`).
        (16, _) => format!("{s}:00Z"),
        (17, Some(minutes)) => format!("{minutes}:00Z"),
        _ => s.to_owned(),
    };
    humantime::parse_rfc3339_weak(&text)
        .map(When::At)
        .map_err(|_| {
            format!(
                "{s:?} is neither a duration (90s, 15m, 2h, 1d) nor a time in UTC \
                 (2026-01-02T03:04:05Z, 2026-01-02 03:04, 2026-01-02)"
            )
        })
}

/// `ms` since the Unix epoch as an RFC 3339 time, UTC, to the millisecond.
fn rfc3339(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

/// Why `mcpx log` or `mcpx stats` failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration that names the database could not be loaded.
    #[error("{0}\n(name the database with --db PATH)")]
    Config(#[source] ConfigError),
    /// The database could not be opened, read or written.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// No runtime for `--follow`.
    #[error("cannot start a runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// The database to read, and the daemon whose events say when it was written.
#[derive(Debug, Clone)]
pub struct Database {
    /// Where it is.
    pub path: PathBuf,
    /// The daemon key of the configuration it belongs to, when it was found through
    /// one (the daemon serving that configuration writes it).
    pub daemon_key: Option<String>,
}

impl Database {
    /// The database of `common`: `--db`, else the configuration's
    /// `mcpx.history.path`, else the default (also when no configuration is found).
    pub fn of(common: &Common) -> Result<Database, Error> {
        if let Some(p) = &common.db {
            return Ok(Database {
                path: p.clone(),
                daemon_key: None,
            });
        }
        match config::load(common.config.as_deref()) {
            Ok((file, cfg)) => {
                let path = match cfg.history.path {
                    Some(p) => p,
                    None => mcpx_history::default_path()?,
                };
                Ok(Database {
                    path,
                    daemon_key: Some(crate::daemon::paths::config_key(Some(&file))),
                })
            }
            Err(ConfigError::NotFound { .. }) => Ok(Database {
                path: mcpx_history::default_path()?,
                daemon_key: None,
            }),
            Err(e) => Err(Error::Config(e)),
        }
    }

    /// The database opened, or `None` when it is not there: it is not created.
    pub fn open(&self) -> Result<Option<Store>, Error> {
        if !self.path.exists() {
            return Ok(None);
        }
        Ok(Some(Store::open(&self.path)?))
    }

    /// Says on stderr that nothing was recorded yet.
    pub fn say_missing(&self) {
        say_missing(&self.path);
    }
}

fn say_missing(path: &Path) {
    eprintln!("no calls recorded yet (database {})", path.display());
}

/// Prints `v` as one JSON text on stdout.
fn print_json(v: &impl serde::Serialize) {
    match serde_json::to_string(v) {
        Ok(s) => say!("{s}"),
        Err(e) => eprintln!("mcpx: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_times_are_read() {
        let now = 1_000_000_000_000;
        let ms = |s: &str| parse_when(s).map(|w| w.ms(now));
        assert_eq!(ms("90s"), Ok(now - 90_000));
        assert_eq!(ms("15m"), Ok(now - 900_000));
        assert_eq!(ms("2h"), Ok(now - 7_200_000));
        assert_eq!(ms("1d"), Ok(now - 86_400_000));
        assert_eq!(ms("2026-01-02T03:04:05Z"), Ok(1_767_323_045_000));
        assert_eq!(ms("2026-01-02T03:04:05.250Z"), Ok(1_767_323_045_250));
        assert_eq!(ms("2026-01-02 03:04:05"), Ok(1_767_323_045_000));
        assert_eq!(ms("2026-01-02 03:04"), Ok(1_767_323_040_000));
        assert_eq!(ms("2026-01-02T03:04Z"), Ok(1_767_323_040_000));
        assert_eq!(ms("2026-01-02"), Ok(1_767_312_000_000));
    }

    #[test]
    fn anything_else_is_refused_with_what_is_accepted() {
        for bad in [
            "",
            "yesterday",
            "5 parsecs",
            "2026-13-45",
            "-1h",
            "2026-01-02T25:00",
        ] {
            let e = parse_when(bad).unwrap_err();
            assert!(e.contains("neither a duration"), "{bad}: {e}");
        }
    }
}
