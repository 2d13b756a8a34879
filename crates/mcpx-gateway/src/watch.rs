//! Watching the configuration file for changes, for hot reload.
//!
//! The watch is on the file's directory, not on the file. An editor's atomic save
//! writes a temporary file and renames it over the original. A watch on the file
//! would then follow the old inode, which no longer has the name. A watch on the
//! directory sees every file that takes the name, so it survives any number of
//! atomic saves, and a delete followed by a re-create.
//!
//! Events are kept only when they name the file. Opening the file (mcpx reading it)
//! is not a change.
//!
//! A change is reported after a quiet time: a burst of events closer together than the
//! debounce counts as one change.
//!
//! When the file's name is a symbolic link, a change to the file it points at is not
//! seen: only the link's directory is watched.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// Why a configuration file cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The path names no file (it ends in `..`, or is a root).
    #[error("{path}: not a file name")]
    NoFileName {
        /// The path given.
        path: PathBuf,
    },
    /// The file's directory cannot be resolved (it does not exist, or is not readable).
    #[error("{dir}: {source}")]
    Directory {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The operating system's file watch could not be set up.
    #[error("watching {dir}: {source}")]
    Notify {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: notify::Error,
    },
    /// [`ConfigWatcher::start`] was called outside a tokio runtime.
    #[error("the configuration watcher needs a tokio runtime: {0}")]
    NoRuntime(#[source] tokio::runtime::TryCurrentError),
}

/// Watches one configuration file and reports, debounced, that it may have changed.
///
/// Dropping it stops the watch. The debounce task then ends and the receiver
/// returned by [`ConfigWatcher::start`] yields `None`.
pub struct ConfigWatcher {
    /// Kept alive: dropping it ends the operating system's watch and the callback.
    _watcher: RecommendedWatcher,
}

impl std::fmt::Debug for ConfigWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigWatcher").finish_non_exhaustive()
    }
}

impl ConfigWatcher {
    /// Starts watching `path`.
    ///
    /// The receiver gets one `()` per burst of changes. Events within `debounce` of
    /// each other count as one burst. The `()` is sent `debounce` after the last
    /// event. While an `()` is waiting unread, further bursts add none.
    ///
    /// The file itself need not exist, but its directory must.
    ///
    /// It must be called inside a tokio runtime: the debounce runs in a task it
    /// spawns. Outside one it returns [`WatchError::NoRuntime`].
    pub fn start(
        path: &Path,
        debounce: Duration,
    ) -> Result<(ConfigWatcher, mpsc::Receiver<()>), WatchError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(WatchError::NoRuntime)?;
        let name: OsString = path
            .file_name()
            .ok_or_else(|| WatchError::NoFileName {
                path: path.to_owned(),
            })?
            .to_owned();
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let dir = dir.canonicalize().map_err(|source| WatchError::Directory {
            dir: dir.to_owned(),
            source,
        })?;
        let target = dir.join(&name);

        let (raw_tx, raw_rx) = mpsc::unbounded_channel::<()>();
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
            if names_the_file(&event, &target) {
                // Unbounded: the callback thread never waits. A send fails only once
                // the debounce task has ended, and then nobody is listening.
                let _ = raw_tx.send(());
            }
        })
        .map_err(|source| WatchError::Notify {
            dir: dir.clone(),
            source,
        })?;
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|source| WatchError::Notify {
                dir: dir.clone(),
                source,
            })?;

        let (tx, rx) = mpsc::channel(1);
        runtime.spawn(debounce_task(raw_rx, tx, debounce));
        Ok((ConfigWatcher { _watcher: watcher }, rx))
    }
}

/// Whether a watch event may mean the file changed.
///
/// An error from the watch, or a lost-events notice, counts: the file may have changed
/// unseen. Opening or reading the file does not count.
fn names_the_file(event: &notify::Result<Event>, target: &Path) -> bool {
    match event {
        Err(e) => {
            tracing::warn!(path = %target.display(), error = %e, "configuration watch");
            true
        }
        Ok(e) if e.need_rescan() => true,
        Ok(e) => {
            let is_change = match e.kind {
                EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
                EventKind::Access(_) => false,
                _ => true,
            };
            is_change && e.paths.iter().any(|p| p == target)
        }
    }
}

/// Sends one `()` on `out` for each burst of inputs on `raw`: `debounce` after the
/// last input of the burst. Ends when `raw` closes or `out`'s receiver is dropped.
async fn debounce_task(
    mut raw: mpsc::UnboundedReceiver<()>,
    out: mpsc::Sender<()>,
    debounce: Duration,
) {
    while raw.recv().await.is_some() {
        loop {
            match tokio::time::timeout(debounce, raw.recv()).await {
                Ok(Some(())) => continue,
                Ok(None) => return,
                Err(_quiet) => break,
            }
        }
        match out.try_send(()) {
            // Full: a change is already waiting to be read, and it covers this one.
            Ok(()) | Err(mpsc::error::TrySendError::Full(())) => {}
            Err(mpsc::error::TrySendError::Closed(())) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::time::Instant;

    const DEBOUNCE: Duration = Duration::from_millis(300);
    const EXPECT_WITHIN: Duration = Duration::from_secs(5);

    /// A fresh directory under the system's temporary directory, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let dir = std::env::temp_dir()
                .join(format!("mcpx-watch-{tag}-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    async fn expect_event(rx: &mut mpsc::Receiver<()>) {
        let got = tokio::time::timeout(EXPECT_WITHIN, rx.recv()).await;
        assert_eq!(
            got,
            Ok(Some(())),
            "expected a change within {EXPECT_WITHIN:?}"
        );
    }

    async fn expect_quiet(rx: &mut mpsc::Receiver<()>) {
        let wait = DEBOUNCE + Duration::from_millis(500);
        let got = tokio::time::timeout(wait, rx.recv()).await;
        assert!(
            got.is_err(),
            "expected no change within {wait:?}, got {got:?}"
        );
    }

    fn atomic_save(dir: &Path, file: &Path, text: &str) {
        let tmp = dir.join(".mcpx.json.tmp~");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, file).unwrap();
    }

    #[tokio::test]
    async fn a_plain_write_is_one_change() {
        let dir = TempDir::new("write");
        let file = dir.0.join("mcpx.json");
        std::fs::write(&file, "{}").unwrap();
        let (_w, mut rx) = ConfigWatcher::start(&file, DEBOUNCE).unwrap();
        std::fs::write(&file, r#"{"mcpServers": {}}"#).unwrap();
        expect_event(&mut rx).await;
        expect_quiet(&mut rx).await;
    }

    #[tokio::test]
    async fn each_atomic_save_is_a_change() {
        let dir = TempDir::new("rename");
        let file = dir.0.join("mcpx.json");
        std::fs::write(&file, "{}").unwrap();
        let (_w, mut rx) = ConfigWatcher::start(&file, DEBOUNCE).unwrap();
        atomic_save(&dir.0, &file, r#"{"a": 1}"#);
        expect_event(&mut rx).await;
        expect_quiet(&mut rx).await;
        atomic_save(&dir.0, &file, r#"{"a": 2}"#);
        expect_event(&mut rx).await;
        atomic_save(&dir.0, &file, r#"{"a": 3}"#);
        expect_event(&mut rx).await;
        expect_quiet(&mut rx).await;
    }

    #[tokio::test]
    async fn a_delete_and_re_create_is_seen() {
        let dir = TempDir::new("recreate");
        let file = dir.0.join("mcpx.json");
        std::fs::write(&file, "{}").unwrap();
        let (_w, mut rx) = ConfigWatcher::start(&file, DEBOUNCE).unwrap();
        std::fs::remove_file(&file).unwrap();
        expect_event(&mut rx).await;
        std::fs::write(&file, "{}").unwrap();
        expect_event(&mut rx).await;
        std::fs::write(&file, r#"{"b": 1}"#).unwrap();
        expect_event(&mut rx).await;
    }

    #[tokio::test]
    async fn ten_quick_writes_are_one_change() {
        let dir = TempDir::new("burst");
        let file = dir.0.join("mcpx.json");
        std::fs::write(&file, "{}").unwrap();
        let (_w, mut rx) = ConfigWatcher::start(&file, DEBOUNCE).unwrap();
        let started = Instant::now();
        for i in 0..10 {
            std::fs::write(&file, format!(r#"{{"n": {i}}}"#)).unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        expect_event(&mut rx).await;
        // Sent a debounce after the last write, not before.
        assert!(started.elapsed() >= DEBOUNCE + Duration::from_millis(180));
        expect_quiet(&mut rx).await;
    }

    #[tokio::test]
    async fn another_file_in_the_directory_is_not_a_change() {
        let dir = TempDir::new("other");
        let file = dir.0.join("mcpx.json");
        std::fs::write(&file, "{}").unwrap();
        let (_w, mut rx) = ConfigWatcher::start(&file, DEBOUNCE).unwrap();
        std::fs::write(dir.0.join("other.json"), "{}").unwrap();
        std::fs::write(dir.0.join("mcpx.json.bak"), "{}").unwrap();
        // Reading the file is not a change either.
        let _ = std::fs::read_to_string(&file).unwrap();
        expect_quiet(&mut rx).await;
    }

    #[tokio::test]
    async fn dropping_the_watcher_closes_the_receiver() {
        let dir = TempDir::new("drop");
        let file = dir.0.join("mcpx.json");
        let (w, mut rx) = ConfigWatcher::start(&file, DEBOUNCE).unwrap();
        drop(w);
        let got = tokio::time::timeout(EXPECT_WITHIN, rx.recv()).await;
        assert_eq!(got, Ok(None));
    }

    #[tokio::test]
    async fn a_missing_directory_is_an_error_naming_it() {
        let dir = TempDir::new("missing");
        let missing = dir.0.join("nowhere");
        let e = ConfigWatcher::start(&missing.join("mcpx.json"), DEBOUNCE).unwrap_err();
        assert!(
            matches!(&e, WatchError::Directory { dir, .. } if *dir == missing),
            "{e:?}"
        );
        assert!(
            e.to_string().starts_with(&missing.display().to_string()),
            "{e}"
        );
    }

    #[test]
    fn outside_a_runtime_is_an_error() {
        let e = ConfigWatcher::start(Path::new("mcpx.json"), DEBOUNCE).unwrap_err();
        assert!(matches!(e, WatchError::NoRuntime(_)), "{e:?}");
    }
}
