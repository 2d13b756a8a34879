//! The database: one table of calls, versioned by `PRAGMA user_version` and brought
//! up to date by [`MIGRATIONS`] when opened.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, params_from_iter};

use crate::HistoryError;
use crate::query::{By, Filter, Group, Minute, quantile_ms};
use crate::record::{Outcome, Record, Row, rfc3339};

/// The schema this mcpx writes.
pub const SCHEMA_VERSION: i64 = 2;

/// Each version's step from the one before: `MIGRATIONS[n]` takes a database from
/// version `n` to `n + 1`. A step runs in one transaction with the new version.
const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
    // 1: the calls.
    "CREATE TABLE calls (
        id INTEGER PRIMARY KEY,
        ts_ms INTEGER NOT NULL,
        duration_us INTEGER NOT NULL,
        client_name TEXT,
        client_version TEXT,
        era TEXT NOT NULL,
        revision TEXT NOT NULL,
        transport TEXT NOT NULL,
        session TEXT,
        upstream TEXT,
        method TEXT NOT NULL,
        target TEXT,
        outcome TEXT NOT NULL,
        error_code INTEGER,
        error_message TEXT,
        request_bytes INTEGER NOT NULL,
        response_bytes INTEGER NOT NULL,
        arguments TEXT,
        result TEXT
     );
     CREATE INDEX calls_ts ON calls (ts_ms);",
    // 2: the trace a call ran under and the subject it was authorized for.
    "ALTER TABLE calls ADD COLUMN trace_id TEXT;
     ALTER TABLE calls ADD COLUMN subject TEXT;",
];

/// The columns a [`Row`] is read from, in its order.
const COLUMNS: &str = "id, ts_ms, duration_us, client_name, client_version, era, revision, \
    transport, session, upstream, method, target, outcome, error_code, error_message, \
    request_bytes, response_bytes, trace_id, subject, arguments, result";

const INSERT: &str = "INSERT INTO calls (ts_ms, duration_us, client_name, client_version, \
    era, revision, transport, session, upstream, method, target, outcome, error_code, \
    error_message, request_bytes, response_bytes, trace_id, subject, arguments, result) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)";

/// Tries of a contended open (see [`Store::open_at`]).
const OPEN_TRIES: u64 = 12;

/// How long a statement waits for another process's write to finish.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// What retention took out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retained {
    /// Calls older than the age limit.
    pub by_age: u64,
    /// The oldest calls, while the database was over its size.
    pub by_size: u64,
}

/// The call history's database.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens (or creates, with its directory, mode 0700) the database at `path`, in WAL
    /// mode, and migrates it to [`SCHEMA_VERSION`].
    pub fn open(path: &Path) -> Result<Store, HistoryError> {
        Store::open_at(path, SCHEMA_VERSION)
    }

    /// As [`Store::open`], migrating only as far as `version` (the migration tests
    /// make older databases so).
    #[doc(hidden)]
    pub fn open_at(path: &Path, version: i64) -> Result<Store, HistoryError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            make_dir(dir)?;
        }
        make_file(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| sql(path, e))?;
        let mut store = Store {
            conn,
            path: path.to_owned(),
        };
        // Processes that open a new database at the same moment contend for it: the
        // switch to WAL and a schema step each need the write lock, and SQLite may
        // answer "busy" at once rather than wait (when waiting could deadlock). Opening
        // is rare, so it is tried again, for up to about two seconds.
        let mut tries = 0;
        loop {
            match store.prepare().and_then(|()| store.migrate(version)) {
                Err(e) if e.is_busy() && tries < OPEN_TRIES => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20 * tries));
                }
                other => return other.map(|()| store),
            }
        }
    }

    /// Runs `sql` as it is (the tests make old and locked databases so).
    #[doc(hidden)]
    pub fn execute_sql(&self, sql_text: &str) -> Result<(), HistoryError> {
        self.conn.execute_batch(sql_text).map_err(|e| self.err(e))
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, e: rusqlite::Error) -> HistoryError {
        sql(&self.path, e)
    }

    /// The connection's settings: WAL (readers never wait for the writer), a busy
    /// timeout (several mcpx processes may write one database), pages freed as rows
    /// go (so retention by size shrinks the file).
    fn prepare(&mut self) -> Result<(), HistoryError> {
        self.conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| self.err(e))?;
        // auto_vacuum takes effect only before the first table; harmless after.
        // A small page cache: the writer appends at the table's and the index's right
        // edges, and a reader scans once; SQLite's default (2 MiB) would be most of an
        // idle mcpx's memory beyond its own.
        self.conn
            .execute_batch(
                "PRAGMA auto_vacuum = INCREMENTAL;
                 PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = NORMAL;
                 PRAGMA cache_size = -256;",
            )
            .map_err(|e| self.err(e))
    }

    /// The database's schema version.
    pub fn version(&self) -> Result<i64, HistoryError> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    fn migrate(&mut self, to: i64) -> Result<(), HistoryError> {
        let found = self.version()?;
        if found > SCHEMA_VERSION {
            return Err(HistoryError::Newer {
                path: self.path.clone(),
                found,
            });
        }
        for v in found..to.min(SCHEMA_VERSION) {
            let step = MIGRATIONS[usize::try_from(v).unwrap_or(0)];
            // Immediate: the write lock first, then the version read again. Another
            // process opening the database at the same time (a daemon's writer and
            // `mcpx log --follow` waiting for the file) may have taken the step.
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| sql(&self.path, e))?;
            let current: i64 = tx
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(|e| sql(&self.path, e))?;
            if current > v {
                tx.commit().map_err(|e| sql(&self.path, e))?;
                continue;
            }
            tx.execute_batch(step)
                .and_then(|()| tx.execute_batch(&format!("PRAGMA user_version = {}", v + 1)))
                .and_then(|()| tx.commit())
                .map_err(|e| sql(&self.path, e))?;
            tracing::debug!(path = %self.path.display(), version = v + 1, "call history migrated");
        }
        Ok(())
    }

    /// Inserts `records` in one transaction; returns the last one's number.
    pub fn insert(&mut self, records: &[Record]) -> Result<i64, HistoryError> {
        let tx = self.conn.transaction().map_err(|e| sql(&self.path, e))?;
        {
            let mut stmt = tx.prepare_cached(INSERT).map_err(|e| sql(&self.path, e))?;
            for r in records {
                stmt.execute(rusqlite::params![
                    r.ts_ms,
                    r.duration_us,
                    r.client_name.as_deref(),
                    r.client_version.as_deref(),
                    r.era.as_ref(),
                    r.revision.as_ref(),
                    r.transport.as_ref(),
                    r.session.as_deref(),
                    r.upstream.as_deref(),
                    r.method.as_ref(),
                    r.target,
                    r.outcome.as_str(),
                    r.error_code,
                    r.error_message,
                    r.request_bytes,
                    r.response_bytes,
                    r.trace_id,
                    r.subject,
                    r.arguments,
                    r.result,
                ])
                .map_err(|e| sql(&self.path, e))?;
            }
        }
        let last = tx.last_insert_rowid();
        tx.commit().map_err(|e| sql(&self.path, e))?;
        Ok(last)
    }

    /// The calls `filter` picks, oldest first; with a limit, the latest that many.
    pub fn calls(&self, filter: &Filter) -> Result<Vec<Row>, HistoryError> {
        let (cond, args) = filter.clause();
        let limit = filter
            .limit
            .map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
        // The latest `limit` (by number, which follows the order written), then put
        // back in order.
        let sql_text = format!("SELECT {COLUMNS} FROM calls {cond} ORDER BY id DESC LIMIT {limit}");
        let mut stmt = self.conn.prepare(&sql_text).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params_from_iter(args), read_row)
            .map_err(|e| self.err(e))?;
        let mut out = rows
            .collect::<Result<Vec<Row>, _>>()
            .map_err(|e| self.err(e))?;
        out.reverse();
        Ok(out)
    }

    /// The number of the last call written (0 when there is none).
    pub fn last_id(&self) -> Result<i64, HistoryError> {
        self.conn
            .query_row("SELECT coalesce(max(id), 0) FROM calls", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    /// How many calls `filter` picks (its limit aside).
    pub fn count(&self, filter: &Filter) -> Result<u64, HistoryError> {
        let (cond, args) = filter.clause();
        self.conn
            .query_row(
                &format!("SELECT count(*) FROM calls {cond}"),
                params_from_iter(args),
                |r| r.get::<_, i64>(0),
            )
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(|e| self.err(e))
    }

    /// The calls `filter` picks, grouped `by`, the most called first (then by key).
    pub fn stats(&self, filter: &Filter, by: By) -> Result<Vec<Group>, HistoryError> {
        let (cond, args) = filter.clause();
        let key = by.key();
        let sql_text = format!(
            "SELECT {key} AS k, duration_us, outcome <> 'result' FROM calls {cond} \
             ORDER BY k, duration_us"
        );
        let mut stmt = self.conn.prepare(&sql_text).map_err(|e| self.err(e))?;
        let mut rows = stmt
            .query(params_from_iter(args))
            .map_err(|e| self.err(e))?;
        let mut groups: Vec<Group> = Vec::new();
        let mut durations: Vec<i64> = Vec::new();
        let mut current: Option<(String, u64)> = None;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let k: String = row.get(0).map_err(|e| self.err(e))?;
            let d: i64 = row.get(1).map_err(|e| self.err(e))?;
            let failed: bool = row.get(2).map_err(|e| self.err(e))?;
            if current.as_ref().is_some_and(|(ck, _)| *ck != k) {
                if let Some((ck, errors)) = current.take() {
                    groups.push(group(by, ck, errors, &durations));
                }
                durations.clear();
            }
            let entry = current.get_or_insert((k, 0));
            entry.1 += u64::from(failed);
            durations.push(d);
        }
        if let Some((ck, errors)) = current {
            groups.push(group(by, ck, errors, &durations));
        }
        groups.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.key.cmp(&b.key)));
        Ok(groups)
    }

    /// Calls per minute by outcome, for the minutes `filter` covers that had any.
    pub fn minutes(&self, filter: &Filter) -> Result<Vec<Minute>, HistoryError> {
        let (cond, args) = filter.clause();
        let sql_text = format!(
            "SELECT (ts_ms / 60000) * 60000 AS m, outcome, count(*) FROM calls {cond} \
             GROUP BY m, outcome ORDER BY m"
        );
        let mut stmt = self.conn.prepare(&sql_text).map_err(|e| self.err(e))?;
        let mut rows = stmt
            .query(params_from_iter(args))
            .map_err(|e| self.err(e))?;
        let mut out: Vec<Minute> = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let start_ms: i64 = row.get(0).map_err(|e| self.err(e))?;
            let outcome: String = row.get(1).map_err(|e| self.err(e))?;
            let n: i64 = row.get(2).map_err(|e| self.err(e))?;
            if out.last().is_none_or(|m| m.start_ms != start_ms) {
                out.push(Minute {
                    start_ms,
                    outcomes: BTreeMap::new(),
                });
            }
            if let Some(m) = out.last_mut() {
                m.outcomes.insert(outcome, u64::try_from(n).unwrap_or(0));
            }
        }
        Ok(out)
    }

    /// Removes every call `filter` picks (its limit aside); returns how many.
    pub fn purge(&mut self, filter: &Filter) -> Result<u64, HistoryError> {
        let (cond, args) = filter.clause();
        let n = self
            .conn
            .execute(&format!("DELETE FROM calls {cond}"), params_from_iter(args))
            .map_err(|e| self.err(e))?;
        self.shrink()?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// The bytes the database's pages in use take (its file may hold free pages too
    /// until they are given back).
    pub fn used_bytes(&self) -> Result<u64, HistoryError> {
        self.conn
            .query_row(
                "SELECT (page_count - freelist_count) * page_size \
                 FROM pragma_page_count, pragma_freelist_count, pragma_page_size",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(|e| self.err(e))
    }

    /// Takes out calls that started before `now_ms - max_age`, then the oldest calls
    /// while the pages in use exceed `max_bytes`, and gives the freed pages back.
    pub fn retain(
        &mut self,
        now_ms: i64,
        max_age: Duration,
        max_bytes: u64,
    ) -> Result<Retained, HistoryError> {
        let age_ms = i64::try_from(max_age.as_millis()).unwrap_or(i64::MAX);
        let by_age = self
            .conn
            .execute(
                "DELETE FROM calls WHERE ts_ms < ?",
                [now_ms.saturating_sub(age_ms)],
            )
            .map_err(|e| self.err(e))?;
        let mut by_size = 0u64;
        // Each round takes out what the excess holds at the average row's size, plus
        // a tenth of the limit's worth, so a few rounds suffice.
        for _ in 0..8 {
            let used = self.used_bytes()?;
            if used <= max_bytes {
                break;
            }
            let rows = self.count(&Filter::default())?;
            if rows == 0 {
                break;
            }
            let per_row = (used / rows).max(1);
            let excess = used - max_bytes + max_bytes / 10;
            let take = (excess / per_row).clamp(1, rows);
            let n = self
                .conn
                .execute(
                    "DELETE FROM calls WHERE id IN (SELECT id FROM calls ORDER BY id LIMIT ?)",
                    [i64::try_from(take).unwrap_or(i64::MAX)],
                )
                .map_err(|e| self.err(e))?;
            by_size += u64::try_from(n).unwrap_or(0);
            self.shrink()?;
        }
        if by_age > 0 {
            self.shrink()?;
        }
        Ok(Retained {
            by_age: u64::try_from(by_age).unwrap_or(0),
            by_size,
        })
    }

    /// Gives free pages back to the file system and truncates the WAL.
    fn shrink(&mut self) -> Result<(), HistoryError> {
        // Each step of the pragma frees one page: step it to its end.
        {
            let mut stmt = self
                .conn
                .prepare("PRAGMA incremental_vacuum")
                .map_err(|e| sql(&self.path, e))?;
            let mut rows = stmt.query([]).map_err(|e| sql(&self.path, e))?;
            while rows.next().map_err(|e| sql(&self.path, e))?.is_some() {}
        }
        // A reader in another process may hold the WAL: then it is truncated later.
        let _ = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        Ok(())
    }
}

fn group(by: By, key: String, errors: u64, sorted_us: &[i64]) -> Group {
    let calls = sorted_us.len() as u64;
    let (key, upstream, error_code) = match by {
        By::Tool => match key.split_once('\u{1f}') {
            Some((u, t)) => (
                t.to_owned(),
                Some(u.to_owned()).filter(|u| !u.is_empty()),
                None,
            ),
            None => (key, None, None),
        },
        By::Error => match key.split_once('\u{1f}') {
            Some((o, c)) => (o.to_owned(), None, c.parse().ok()),
            None => (key, None, None),
        },
        By::Upstream | By::Host => (key, None, None),
    };
    #[allow(clippy::cast_precision_loss)]
    let total_ms = sorted_us.iter().map(|d| *d as f64).sum::<f64>() / 1000.0;
    #[allow(clippy::cast_precision_loss)]
    let error_rate = if calls == 0 {
        0.0
    } else {
        errors as f64 / calls as f64
    };
    Group {
        key,
        upstream,
        error_code,
        calls,
        errors,
        error_rate,
        p50_ms: quantile_ms(sorted_us, 0.50),
        p95_ms: quantile_ms(sorted_us, 0.95),
        p99_ms: quantile_ms(sorted_us, 0.99),
        total_ms,
    }
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    let outcome: String = r.get(12)?;
    let ts_ms: i64 = r.get(1)?;
    Ok(Row {
        id: r.get(0)?,
        time: rfc3339(ts_ms),
        record: Record {
            ts_ms,
            duration_us: r.get(2)?,
            client_name: r.get::<_, Option<String>>(3)?.map(Arc::from),
            client_version: r.get::<_, Option<String>>(4)?.map(Arc::from),
            era: Cow::Owned(r.get(5)?),
            revision: Cow::Owned(r.get(6)?),
            transport: Cow::Owned(r.get(7)?),
            session: r.get::<_, Option<String>>(8)?.map(Arc::from),
            upstream: r.get::<_, Option<String>>(9)?.map(Arc::from),
            method: Cow::Owned(r.get(10)?),
            target: r.get(11)?,
            // A value this mcpx does not know (a newer one wrote it) reads as an error.
            outcome: Outcome::parse(&outcome).unwrap_or(Outcome::Error),
            error_code: r.get(13)?,
            error_message: r.get(14)?,
            request_bytes: r.get(15)?,
            response_bytes: r.get(16)?,
            trace_id: r.get(17)?,
            subject: r.get(18)?,
            arguments: r.get(19)?,
            result: r.get(20)?,
        },
    })
}

fn sql(path: &Path, source: rusqlite::Error) -> HistoryError {
    HistoryError::Sqlite {
        path: path.to_owned(),
        source,
    }
}

/// Creates the database's file, mode 0600, if it is not there (SQLite gives its WAL
/// and shared-memory files the same mode).
fn make_file(path: &Path) -> Result<(), HistoryError> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(HistoryError::Dir {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Makes `dir` (mode 0700: the history says what a user did).
fn make_dir(dir: &Path) -> Result<(), HistoryError> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| HistoryError::Dir {
            path: dir.to_owned(),
            source,
        })
}
