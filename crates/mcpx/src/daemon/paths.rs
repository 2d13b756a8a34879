//! Where a daemon lives: its directory (0700, under `$XDG_RUNTIME_DIR`, else the state
//! directory), its socket (0600) and its record, all named after the configuration
//! file, so there is one daemon per configuration. A socket nobody answers on is
//! stale: it is removed and bound again. A daemon started in the background appends
//! its stderr to a log file under the state directory, kept under [`LOG_MAX`] bytes.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// Why a daemon's files could not be set up or read.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// No `$XDG_RUNTIME_DIR`, `$XDG_STATE_HOME` or `$HOME` to put the socket under.
    #[error("no directory for the daemon's socket: set $XDG_RUNTIME_DIR or $HOME")]
    NoHome,
    /// The directory belongs to someone else.
    #[error("{path}: owned by uid {owner}, not by this user (uid {me})")]
    NotOwned {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's user.
        me: u32,
    },
    /// A daemon already answers on the socket.
    #[error("a daemon for this configuration is already running (socket {socket})")]
    Running {
        /// Its socket.
        socket: PathBuf,
    },
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> PathError + '_ {
    move |source| PathError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The directory every daemon of this user keeps its socket and record in:
/// `$XDG_RUNTIME_DIR/mcpx`; without the variable, `/run/user/<uid>/mcpx` when that
/// runtime directory exists and is this user's (a host may launch `mcpx serve
/// --attach` with a trimmed environment, and must find the daemon a shell started);
/// else `$XDG_STATE_HOME/mcpx/run`, else `~/.local/state/mcpx/run`.
pub fn base_dir() -> Result<PathBuf, PathError> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(run) = var("XDG_RUNTIME_DIR") {
        return Ok(run.join("mcpx"));
    }
    if let Ok(uid) = my_uid() {
        let run = PathBuf::from(format!("/run/user/{uid}"));
        if std::fs::metadata(&run).is_ok_and(|m| m.is_dir() && m.uid() == uid) {
            return Ok(run.join("mcpx"));
        }
    }
    Ok(state_dir()?.join("run"))
}

/// The state directory: `$XDG_STATE_HOME/mcpx`, else `~/.local/state/mcpx`.
pub fn state_dir() -> Result<PathBuf, PathError> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let state = var("XDG_STATE_HOME")
        .or_else(|| var("HOME").map(|h| h.join(".local").join("state")))
        .ok_or(PathError::NoHome)?;
    Ok(state.join("mcpx"))
}

/// Where a daemon started in the background logs: `daemon-<hash>.log` (the hash as
/// its socket's) in `log/` of the [`state_dir`].
pub fn log_file(key: &str) -> Result<PathBuf, PathError> {
    Ok(state_dir()?
        .join("log")
        .join(format!("daemon-{:016x}.log", fnv1a(key))))
}

/// The size past which a daemon's log is rotated.
pub const LOG_MAX: u64 = 4 * 1024 * 1024;

/// How often a running daemon looks at its log's size.
const LOG_LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Rotates the log at `path` once it is over `max` bytes: its text is copied to
/// `<path>.1` (replacing the one before) and the file emptied in place, so that a
/// process appending to it (its stderr, opened with `O_APPEND`) goes on writing at its
/// new start. Lines written between the copy and the emptying are lost. Whether it
/// rotated.
pub fn rotate_log(path: &Path, max: u64) -> Result<bool, PathError> {
    let len = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_at(path)(e)),
    };
    if len <= max {
        return Ok(false);
    }
    let mut old = path.as_os_str().to_owned();
    old.push(".1");
    let old = PathBuf::from(old);
    std::fs::copy(path, &old).map_err(io_at(&old))?;
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(0))
        .map_err(io_at(path))?;
    Ok(true)
}

/// Opens the log at `path` to append to (mode 0600, its directory 0700), rotated first
/// when over [`LOG_MAX`].
pub fn open_log(path: &Path) -> Result<std::fs::File, PathError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = path.parent() {
        ensure_private_dir(dir)?;
    }
    rotate_log(path, LOG_MAX)?;
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(io_at(path))
}

/// Keeps the log at `path` under [`LOG_MAX`] (looking every [`LOG_LOOK_EVERY`]) until
/// `stop`.
pub async fn keep_log_bounded(path: PathBuf, stop: tokio_util::sync::CancellationToken) {
    let mut tick = tokio::time::interval(LOG_LOOK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        if let Err(e) = rotate_log(&path, LOG_MAX) {
            tracing::warn!("the daemon's log is not rotated: {e}");
        }
    }
}

/// This process's user id: the owner of `/proc/self`.
pub fn my_uid() -> Result<u32, PathError> {
    let p = Path::new("/proc/self");
    std::fs::metadata(p).map(|m| m.uid()).map_err(io_at(p))
}

/// Creates `dir` (mode 0700) if needed; an existing one must be this user's, and is
/// made 0700 if it was not.
pub fn ensure_private_dir(dir: &Path) -> Result<(), PathError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_at(dir))?;
    let meta = std::fs::metadata(dir).map_err(io_at(dir))?;
    let me = my_uid()?;
    if meta.uid() != me {
        return Err(PathError::NotOwned {
            path: dir.to_owned(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o777 != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io_at(dir))?;
    }
    Ok(())
}

/// What names a daemon: the configuration file's absolute path, or `<demo>`.
pub fn config_key(config: Option<&Path>) -> String {
    match config {
        None => "<demo>".to_owned(),
        Some(p) => std::fs::canonicalize(p)
            .unwrap_or_else(|_| p.to_owned())
            .to_string_lossy()
            .into_owned(),
    }
}

/// FNV-1a, 64 bits: a stable name for a key (the same in every build, unlike std's
/// hasher), short enough for a socket path.
fn fnv1a(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The files of the daemon for one configuration.
#[derive(Debug, Clone)]
pub struct Place {
    /// The directory (0700).
    pub dir: PathBuf,
    /// The socket it listens on by default.
    pub socket: PathBuf,
    /// Its record (pid, socket, address, version, configuration).
    pub record: PathBuf,
}

impl Place {
    /// The place of the daemon for `key`, in [`base_dir`].
    pub fn of(key: &str) -> Result<Place, PathError> {
        Ok(Place::in_dir(base_dir()?, key))
    }

    /// The place of the daemon for `key` in `dir`.
    pub fn in_dir(dir: PathBuf, key: &str) -> Place {
        let name = format!("daemon-{:016x}", fnv1a(key));
        Place {
            socket: dir.join(format!("{name}.sock")),
            record: dir.join(format!("{name}.json")),
            dir,
        }
    }
}

/// What a running daemon writes about itself, for clients to find it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Its process id.
    pub pid: u32,
    /// Its Unix socket.
    pub socket: PathBuf,
    /// Its TCP listener's address, if it has one.
    pub http: Option<String>,
    /// mcpx's version.
    pub version: String,
    /// The configuration key ([`config_key`]).
    pub config: String,
}

impl Record {
    /// The record as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "pid": self.pid,
            "socket": self.socket.to_string_lossy(),
            "http": self.http,
            "version": self.version,
            "config": self.config,
        })
    }

    /// A record read back; `None` when it is not one.
    pub fn from_json(v: &Value) -> Option<Record> {
        Some(Record {
            pid: u32::try_from(v.get("pid")?.as_u64()?).ok()?,
            socket: PathBuf::from(v.get("socket")?.as_str()?),
            http: v.get("http").and_then(Value::as_str).map(str::to_owned),
            version: v.get("version")?.as_str()?.to_owned(),
            config: v.get("config")?.as_str()?.to_owned(),
        })
    }

    /// Writes the record to `path` (mode 0600), whole: written aside, then renamed.
    pub fn write(&self, path: &Path) -> Result<(), PathError> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let aside = path.with_extension(format!("json.{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&aside)
            .map_err(io_at(&aside))?;
        f.write_all(self.to_json().to_string().as_bytes())
            .map_err(io_at(&aside))?;
        drop(f);
        std::fs::rename(&aside, path).map_err(io_at(path))
    }

    /// The record at `path`, if there is a readable one (at most 64 KiB).
    pub fn read(path: &Path) -> Option<Record> {
        let meta = std::fs::metadata(path).ok()?;
        if meta.len() > 64 * 1024 {
            return None;
        }
        let text = std::fs::read_to_string(path).ok()?;
        Record::from_json(&serde_json::from_str(&text).ok()?)
    }
}

/// Binds the Unix socket at `path` (mode 0600). A socket file there that nobody
/// answers on is stale and replaced; one a daemon answers on is left alone
/// ([`PathError::Running`]). The claim is atomic: the socket is bound under a name of
/// this process's, then hard-linked to `path`, which fails if another process got
/// there first.
pub fn bind_socket(path: &Path) -> Result<tokio::net::UnixListener, PathError> {
    let aside = path.with_extension(format!("sock.{}", std::process::id()));
    let _ = std::fs::remove_file(&aside);
    let listener = tokio::net::UnixListener::bind(&aside).map_err(io_at(&aside))?;
    let claimed = (|| {
        std::fs::set_permissions(&aside, std::fs::Permissions::from_mode(0o600))
            .map_err(io_at(&aside))?;
        for _ in 0..2 {
            match std::fs::hard_link(&aside, path) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if answers(path) {
                        return Err(PathError::Running {
                            socket: path.to_owned(),
                        });
                    }
                    tracing::info!("{}: stale socket, replaced", path.display());
                    std::fs::remove_file(path).map_err(io_at(path))?;
                }
                Err(e) => return Err(io_at(path)(e)),
            }
        }
        Err(PathError::Running {
            socket: path.to_owned(),
        })
    })();
    let _ = std::fs::remove_file(&aside);
    claimed.map(|()| listener)
}

/// Whether something accepts connections on the socket at `path`.
pub fn answers(path: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(path).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_the_same_files_every_time_and_others_differ() {
        let a = Place::in_dir(PathBuf::from("/r"), "/home/u/a.json");
        let again = Place::in_dir(PathBuf::from("/r"), "/home/u/a.json");
        let b = Place::in_dir(PathBuf::from("/r"), "/home/u/b.json");
        assert_eq!(a.socket, again.socket);
        assert_ne!(a.socket, b.socket);
        assert_eq!(a.socket.extension().and_then(|e| e.to_str()), Some("sock"));
        assert_eq!(a.record.extension().and_then(|e| e.to_str()), Some("json"));
        // FNV-1a's published test vector: the name is stable across builds.
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_log_over_its_bound_is_kept_once_and_emptied_in_place() {
        let dir = std::env::temp_dir().join(format!("mcpx-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("d.log");
        let _ = std::fs::remove_file(&log);
        assert!(!rotate_log(&log, 10).unwrap(), "no file: nothing to rotate");
        std::fs::write(&log, "0123456789").unwrap();
        assert!(!rotate_log(&log, 10).unwrap(), "at the bound: kept");
        // A writer that appends, as the daemon's stderr does.
        let mut w = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::io::Write::write_all(&mut w, b"abc\n").unwrap();
        assert!(rotate_log(&log, 10).unwrap());
        assert_eq!(
            std::fs::read_to_string(dir.join("d.log.1")).unwrap(),
            "0123456789abc\n"
        );
        assert_eq!(std::fs::metadata(&log).unwrap().len(), 0);
        std::io::Write::write_all(&mut w, b"next\n").unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "next\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let r = Record {
            pid: 42,
            socket: PathBuf::from("/r/x.sock"),
            http: Some("127.0.0.1:1".into()),
            version: "0.1.0".into(),
            config: "/c.json".into(),
        };
        assert_eq!(Record::from_json(&r.to_json()), Some(r));
        assert_eq!(Record::from_json(&json!({"pid": "x"})), None);
    }
}
