//! Issue #39: what the configuration path names cannot stop the gateway. A FIFO, a
//! device or a directory is refused without being opened in a way that blocks, a
//! file over `MCPX_MAX_CONFIG_BYTES` (4 MiB by default) without being parsed, and the
//! configuration in force keeps serving.
//!
//! The FIFO test runs on the real clock: the file watcher's events come from the
//! operating system. Its runtime is on a thread of its own, so that a runtime stuck
//! in `open(2)` fails the test instead of hanging it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mcpx_client::EraCache;
use mcpx_gateway::config;
use serde_json::json;

use crate::harness::{Host, InMemory, Upstream};

/// The default `MCPX_MAX_CONFIG_BYTES`.
const CAP: usize = 4 * 1024 * 1024;

/// A configuration file of upstreams `names`, each an in-memory example server under
/// its own namespace, reloads debounced 20 ms.
fn file_text(names: &[&str]) -> String {
    let servers: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .map(|n| ((*n).to_owned(), json!({"command": "in-memory"})))
        .collect();
    json!({"mcpServers": servers, "mcpx": {"limits": {"reloadDebounceMs": 20}}}).to_string()
}

/// A host on the gateway started from `file`, with upstreams `a` and `b`; `c` is
/// served in memory too, for a reload to add.
fn start(file: &Path) -> Host {
    std::fs::write(file, file_text(&["a", "b"])).unwrap();
    let (path, config) = config::load(Some(file)).unwrap();
    let links = InMemory::default()
        .with("a", Upstream::example())
        .with("b", Upstream::example())
        .with("c", Upstream::example());
    Host::start_with(config, Some(path), links, EraCache::disabled())
}

/// The namespaces of the tools the host lists.
async fn namespaces(host: &Host) -> Vec<String> {
    let (_, names) = host.tool_names().await;
    let spaces: BTreeSet<String> = names
        .iter()
        .filter_map(|n| n.split_once("__").map(|(ns, _)| ns.to_owned()))
        .collect();
    spaces.into_iter().collect()
}

/// Runs `body` on a runtime of one thread (as `mcpx serve`'s), on a thread of its
/// own, failing the test when it has not ended within `within`. Then `unblock` is
/// called first, so that a thread stuck in a read can end.
fn on_own_runtime(
    within: Duration,
    unblock: impl FnOnce(),
    body: impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = ()>>> + Send + 'static,
) {
    let (done, ended) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(body());
        let _ = done.send(());
    });
    if ended.recv_timeout(within).is_err() {
        unblock();
        panic!(
            "the gateway's runtime was stuck for {within:?} (it may have ended since: {})",
            thread.is_finished()
        );
    }
    thread.join().unwrap();
}

/// Opens the FIFO at `path` for writing without blocking and closes it at once: a
/// reader stuck in `open(2)` on it goes on, and reads an end of file.
fn release_reader(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path);
}

/// The configuration file replaced by a FIFO that no one writes, and the watcher's
/// reload (the way SIGHUP takes too): the reload is refused, naming the FIFO, at
/// once, and the host's `tools/list` is answered from the configuration in force.
#[test]
fn a_fifo_at_the_configuration_path_is_refused_and_the_gateway_answers() {
    let dir = mcpx_testkit::scratch::dir("config-fifo");
    let file = dir.join("mcpx.json");
    let fifo = file.clone();
    on_own_runtime(
        Duration::from_secs(20),
        move || release_reader(&fifo),
        move || {
            Box::pin(async move {
                let host = start(&file);
                assert_eq!(namespaces(&host).await, ["a", "b"]);
                let (tx, mut reloads) = tokio::sync::mpsc::unbounded_channel();
                host.app.on_reload(Arc::new(move |trigger, outcome| {
                    let _ = tx.send((
                        trigger,
                        outcome.as_ref().map(|_| ()).map_err(|e| e.to_string()),
                    ));
                }));
                host.app.watch().unwrap();
                std::fs::remove_file(&file).unwrap();
                nix::unistd::mkfifo(&file, nix::sys::stat::Mode::S_IRWXU).unwrap();
                let (trigger, outcome) =
                    tokio::time::timeout(Duration::from_secs(10), reloads.recv())
                        .await
                        .expect("no reload within 10 s of the file's replacement")
                        .unwrap();
                assert_eq!(trigger.key(), "file");
                let e = outcome.expect_err("a FIFO was read as a configuration");
                assert!(
                    e.starts_with(&file.display().to_string()) && e.contains("FIFO"),
                    "the refusal does not name the path and what it is: {e}"
                );
                let listed = tokio::time::timeout(Duration::from_secs(5), namespaces(&host))
                    .await
                    .expect("tools/list was not answered within 5 s");
                assert_eq!(listed, ["a", "b"]);
                host.finish().await;
            })
        },
    );
}

/// A file one byte over the cap, valid and adding upstream `c`, is refused before it
/// is parsed: the error names the cap and the variable that raises it, and `a` and
/// `b` alone still serve. A file of exactly the cap is read.
#[tokio::test(start_paused = true)]
async fn a_file_over_the_cap_is_refused_and_the_old_configuration_serves() {
    let dir = mcpx_testkit::scratch::dir("config-cap");
    let file = dir.join("mcpx.json");
    let host = start(&file);
    assert_eq!(namespaces(&host).await, ["a", "b"]);
    let padded = |len: usize| {
        let text = file_text(&["a", "b", "c"]);
        format!("{text}{}", " ".repeat(len - text.len()))
    };
    std::fs::write(&file, padded(CAP + 1)).unwrap();
    let e = host
        .app
        .reload()
        .expect_err("a file over the cap was read")
        .to_string();
    assert!(
        e.starts_with(&file.display().to_string())
            && e.contains(&CAP.to_string())
            && e.contains("MCPX_MAX_CONFIG_BYTES"),
        "the refusal does not name the file, the cap and how to raise it: {e}"
    );
    assert_eq!(namespaces(&host).await, ["a", "b"]);
    std::fs::write(&file, padded(CAP)).unwrap();
    let plan = host.app.reload().unwrap();
    assert_eq!(plan.added, ["c"]);
    host.finish().await;
}

/// A directory and a device (`/dev/zero`, which never ends) at the configuration
/// path are refused by what they are, without being read. On another thread: a read
/// of `/dev/zero` would otherwise hang the test.
#[test]
fn a_directory_and_a_device_are_refused_by_what_they_are() {
    let dir = mcpx_testkit::scratch::dir("config-kinds");
    for (path, kind) in [
        (dir.clone(), "a directory"),
        (PathBuf::from("/dev/zero"), "a character device"),
    ] {
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || {
            let _ = tx.send(config::load(Some(&p)).map(drop).map_err(|e| e.to_string()));
        });
        let e = rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("loading {} did not end within 5 s", path.display()))
            .expect_err("read as a configuration");
        assert!(
            e.starts_with(&path.display().to_string())
                && e.contains(kind)
                && e.contains("not a regular file"),
            "{}: {e}",
            path.display()
        );
    }
}
