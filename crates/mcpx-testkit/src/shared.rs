//! Locating the read-only `shared/` folder (spec, register, requirements).
//!
//! It sits beside the repository (`<repo>/../shared`) on developer machines and in CI;
//! `MCPX_SHARED_DIR` overrides that.

use std::path::PathBuf;

/// The repository root (the workspace directory).
pub fn repo_root() -> PathBuf {
    // crates/mcpx-testkit -> crates -> root
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// The `shared/` folder: `$MCPX_SHARED_DIR`, else `<repo>/../shared`.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("MCPX_SHARED_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => repo_root().join("../shared"),
    }
}

/// A file under `shared/` that cannot be read: where it was looked for, and why.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot read {} ({source}); the tests need the read-only shared/ folder beside the \
     repository, or MCPX_SHARED_DIR pointing at it",
    path.display()
)]
pub struct SharedError {
    /// The file looked for.
    pub path: PathBuf,
    /// Why it could not be read.
    pub source: std::io::Error,
}

/// Reads a file under `shared/`, failing with an error that says where it looked.
pub fn read_shared(rel: &str) -> Result<String, SharedError> {
    let path = shared_dir().join(rel);
    std::fs::read_to_string(&path).map_err(|source| SharedError { path, source })
}

/// `schema.json` of a revision, as text.
pub fn schema_text(rev: mcpx_protocol::Revision) -> Result<String, SharedError> {
    read_shared(&format!("spec/{}/schema/schema.json", rev.as_str()))
}
