//! The tests of the `mcpx` binary, one test binary: each module was a test file of its
//! own. They run the binary as a child process, with upstreams as child processes and
//! sockets on 127.0.0.1, and run in parallel threads: each test has its own
//! directories, ports and environment (passed to the child, never set on this process).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The test modules' claims on scratch directory names: name -> module.
static CLAIMS: parking_lot::Mutex<BTreeMap<String, String>> =
    parking_lot::Mutex::new(BTreeMap::new());

/// [`mcpx_testkit::scratch::dir`] for a test of this binary. Its directories are per
/// process and name, and every module's tests share this process: a name that a test
/// of another module has taken panics, where it would empty that test's directory.
pub fn scratch_dir(name: &str) -> PathBuf {
    // libtest names each test's thread `module::test`; a test's own tasks on a runtime's
    // workers are not told apart, and neither is a serial run (on the main thread).
    let thread = std::thread::current();
    if let Some((module, _)) = thread.name().and_then(|n| n.split_once("::")) {
        let mut claims = CLAIMS.lock();
        let owner = claims
            .entry(name.to_owned())
            .or_insert_with(|| module.to_owned());
        assert!(
            owner == module,
            "the scratch directory {name:?} is taken by the tests of {owner}; \
             {module} needs a name of its own"
        );
    }
    mcpx_testkit::scratch::dir(name)
}

// The shared harnesses.
/// Writes a token file as `--token-file` takes one: `text` (tokens of at least 32
/// bytes), readable by its owner only.
pub fn write_token_file(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[path = "common/authz.rs"]
mod authz;
mod common;
mod daemon_support;
#[path = "common/runtime.rs"]
mod runtime;
mod wait;

mod ask_bounds;
mod ask_bridge;
mod ask_elicitation;
mod ask_sampling_roots;
mod cli;
mod cli_doc;
mod cli_inspect;
mod client_http;
mod daemon_api;
mod daemon_history;
mod daemon_lifecycle;
mod dispositions;
mod dispositions_wire;
mod example_server;
mod first_minute;
mod gateway_bad_input;
mod gateway_cancel;
mod gateway_env;
mod gateway_load;
mod gateway_lone_surrogate;
mod gateway_matrix;
mod gateway_recovery;
mod hardening;
mod history_cli;
mod import;
mod metrics;
mod probing;
mod runtime_availability;
mod runtime_catalog;
mod runtime_reload;
mod runtime_sessions;
mod runtime_supervisor;
mod serve_remote;
mod serve_side;
mod tasks;
mod traces;
mod upstream_ask_withdrawn;
mod upstream_client;
mod upstream_framing;
mod upstream_oauth;
mod upstream_proxy;
mod upstream_redirect;
mod upstream_timeout;
mod upstream_tls;
mod upstream_user_auth;
mod upstream_user_auth_url;
