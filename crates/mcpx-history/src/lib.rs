//! mcpx's call history: every call a host made through mcpx, kept in one SQLite
//! database (WAL mode), so that a person can ask later which tools were called, with
//! what, which failed and why, and which server is slow.
//!
//! * [`Record`] (`record.rs`): what one call leaves behind, and [`Outcome`].
//! * [`Store`] (`store.rs`): the database: its schema and migrations, inserts,
//!   queries ([`Filter`]), statistics ([`By`], [`Group`]), the per-minute series, and
//!   retention by age and size.
//! * [`History`] (`writer.rs`): the recorder the call path holds. A call hands it a
//!   record with [`History::record`], which never blocks: a bounded queue feeds one
//!   writer thread that inserts in batches; a record that finds the queue full is
//!   counted as dropped.
//! * [`redact`] (`redact.rs`): captured arguments and results with secret-looking keys
//!   blanked and their size capped, done by the writer, off the call path.
//!
//! The crate knows nothing of MCP: the gateway's layer
//! (`mcpx_gateway::gateway::history`) fills records in.

#![forbid(unsafe_code)]

mod query;
mod record;
pub mod redact;
mod store;
mod writer;

pub use query::{By, Filter, Group, Minute};
pub use record::{Capture, Outcome, Record, Row};
pub use store::{Retained, SCHEMA_VERSION, Store};
pub use writer::{Counts, History, Settings};

use std::path::PathBuf;

/// What can go wrong with the history's database.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// SQLite refused an operation.
    #[error("the call history's database {path}: {source}")]
    Sqlite {
        /// The database.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The database's directory could not be made.
    #[error("cannot create the call history's directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The database was written by a newer mcpx.
    #[error(
        "the call history's database {path} has schema version {found}, newer than this \
         mcpx's {SCHEMA_VERSION}: upgrade mcpx, or move the file away"
    )]
    Newer {
        /// The database.
        path: PathBuf,
        /// Its version.
        found: i64,
    },
    /// No place for the database: neither `XDG_STATE_HOME` nor `HOME` is set.
    #[error(
        "no state directory for the call history: set XDG_STATE_HOME or HOME, or mcpx.history.path"
    )]
    NoStateDir,
    /// The writer thread could not be started.
    #[error("cannot start the call history's writer thread: {0}")]
    Thread(#[source] std::io::Error),
}

impl HistoryError {
    /// SQLite said the database is busy (another connection holds a lock).
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            HistoryError::Sqlite {
                source: rusqlite::Error::SqliteFailure(e, _),
                ..
            } if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }
}

/// The default database: `$XDG_STATE_HOME/mcpx/history.sqlite3`, else
/// `~/.local/state/mcpx/history.sqlite3`.
pub fn default_path() -> Result<PathBuf, HistoryError> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".local/state"),
            None => return Err(HistoryError::NoStateDir),
        },
    };
    Ok(base.join("mcpx").join("history.sqlite3"))
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
