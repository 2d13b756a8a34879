//! Scratch directories for tests (configs, era caches, wire logs), under one root in
//! the system's temp directory: `mcpx-tests/<pid>-<name>`.
//!
//! A test process's directories stay after it exits, so that a failure's wire log can
//! be read; the next test process to ask for a directory removes those of every process
//! that is no longer running. `cargo test` stops at the first test binary that fails,
//! so that binary's directories are the ones left; nothing piles up in the temp
//! directory from run to run.

use std::path::{Path, PathBuf};
use std::sync::Once;

/// The root of every test's scratch directory.
pub fn root() -> PathBuf {
    std::env::temp_dir().join("mcpx-tests")
}

/// A fresh, empty directory for this process and `name` (emptied if it exists).
///
/// # Panics
///
/// When the directory cannot be created: a test cannot run without it.
pub fn dir(name: &str) -> PathBuf {
    static SWEEP: Once = Once::new();
    let root = root();
    SWEEP.call_once(|| sweep(&root));
    let d = root.join(format!("{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    if let Err(e) = std::fs::create_dir_all(&d) {
        panic!("cannot create the test directory {}: {e}", d.display());
    }
    d
}

/// Removes the directories of processes that have exited. Where that cannot be told
/// (no `/proc`), nothing is removed.
fn sweep(root: &Path) {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !proc.join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_process_s_directories_are_swept_and_a_live_one_s_kept() {
        let root = root().join(format!("sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        // No process has pid 0 in /proc; this one is alive.
        let dead = root.join("0-old");
        let alive = root.join(format!("{}-new", std::process::id()));
        let other = root.join("not-a-pid");
        for d in [&dead, &alive, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        sweep(&root);
        if Path::new("/proc/self").exists() {
            assert!(!dead.exists());
        }
        assert!(alive.exists());
        assert!(other.exists());
        let _ = std::fs::remove_dir_all(&root);
    }
}
