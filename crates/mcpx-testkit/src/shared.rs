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

/// Reads a file under `shared/`, failing with a message that says where it looked.
pub fn read_shared(rel: &str) -> Result<String, String> {
    let path = shared_dir().join(rel);
    std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "cannot read {} ({e}); the tests need the read-only shared/ folder beside the \
             repository, or MCPX_SHARED_DIR pointing at it",
            path.display()
        )
    })
}

/// `schema.json` of a revision, as text.
pub fn schema_text(rev: mcpx_protocol::Revision) -> Result<String, String> {
    read_shared(&format!("spec/{}/schema/schema.json", rev.as_str()))
}
