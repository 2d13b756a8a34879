//! The first minute: upstreams that take seconds to start (as `npx` and `uvx` servers
//! do) against hosts that ask at once.
//!
//! * `initialize` and `server/discover` are answered at once, with `tools`, `prompts`
//!   and `resources` declared for upstreams that are configured but not up yet;
//! * a host's first `tools/list` waits for every first start (up to `startupWaitMs`)
//!   and holds every upstream's tools; an upstream still starting at the limit is
//!   named in the list's `_meta` (`mcpx/starting`) and joins with `list_changed`;
//! * a legacy session is told of list changes from its handshake on;
//! * `mcpx tools` and `mcpx call` without a daemon list and call the slow upstream's
//!   tools, and with a `--timeout` shorter than its start they name it.
//!
//! The slow upstreams are `sh -c "sleep N; exec mcpx example-server"`: while the shell
//! sleeps, the upstream's process is still `sh`, which the tests read from `/proc` to
//! tell "answered before the upstream was up" without measuring time.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use mcpx_protocol::Revision;
use serde_json::{Value, json};

use crate::common;
use crate::runtime;
use common::R1125;
use runtime::*;

const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// An upstream that is ready `secs` seconds after it is started.
fn slow_entry(tag: &str, secs: u32) -> Value {
    sh_entry(tag, &format!("sleep {secs}; exec {MCPX} example-server"))
}

/// Whether upstream `tag` of `gw` is still starting: it has no process yet, or its
/// process is the shell that sleeps before it becomes the example server.
fn still_sleeping(gw: &mut Gateway, tag: &str) -> bool {
    !gw.upstream_pid(tag)
        .is_some_and(|pid| cmdline(pid).starts_with(&format!("{MCPX} example-server")))
}

/// The `_meta` `mcpx/starting` names of a list result.
fn starting(result: &Value) -> Vec<String> {
    result["_meta"]["mcpx/starting"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn names_of(result: &Value) -> Vec<String> {
    tool_names(result)
}

/// The declared capabilities hold the three lists, each with `listChanged`.
fn assert_declares_lists(caps: &Value, what: &str) {
    for cap in ["tools", "prompts", "resources"] {
        assert_eq!(
            caps[cap]["listChanged"], true,
            "{what}: {cap} not declared with listChanged: {caps}"
        );
    }
}

/// A legacy host: `initialize` is answered while both upstreams are still starting,
/// with the lists declared (none is up to say so); its first `tools/list` holds both
/// upstreams' tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_host_gets_capabilities_at_once_and_a_full_first_list() {
    let config = json!({"mcpServers": {
        "slow": slow_entry("slow", 5),
        "fast": slow_entry("fast", 2),
    }});
    let mut gw = Gateway::start("fm-legacy", &config, R1125, &[]).await;
    let init = gw.initialize().await;
    assert!(
        still_sleeping(&mut gw, "slow") && still_sleeping(&mut gw, "fast"),
        "initialize was answered only after an upstream was up"
    );
    assert_declares_lists(&init["result"]["capabilities"], "initialize");

    let list = gw.request("tools/list", json!({})).await;
    let result = &list["result"];
    let names = names_of(result);
    for want in ["slow__test_simple_text", "fast__test_simple_text"] {
        assert!(
            names.contains(&want.to_owned()),
            "the first list lacks {want}: {names:?}\nstderr:\n{}",
            gw.stderr()
        );
    }
    assert!(starting(result).is_empty(), "nothing is starting: {result}");
    // Its first call to the slow upstream is answered too.
    let r = gw.call("slow__test_simple_text", json!({})).await;
    assert_eq!(r["result"]["isError"], Value::Null, "{r}");
}

/// A 2026-07-28 host over stdio: `server/discover` is answered at once with the lists
/// declared, and its first `tools/list` holds the slow upstream's tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_host_gets_capabilities_at_once_and_a_full_first_list() {
    let config = json!({"mcpServers": {
        "slow": slow_entry("slow", 5),
        "fast": slow_entry("fast", 2),
    }});
    let rev = Revision::V2026_07_28;
    let mut gw = Gateway::start("fm-modern", &config, rev, &[]).await;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": rev.as_str(),
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "fm-test", "version": "1"},
    });
    let discover = gw
        .request("server/discover", json!({"_meta": meta.clone()}))
        .await;
    assert!(
        still_sleeping(&mut gw, "slow") && still_sleeping(&mut gw, "fast"),
        "server/discover was answered only after an upstream was up"
    );
    assert_declares_lists(&discover["result"]["capabilities"], "server/discover");

    let list = gw.request("tools/list", json!({"_meta": meta})).await;
    let names = names_of(&list["result"]);
    assert!(
        names.contains(&"slow__test_simple_text".to_owned()),
        "the first list lacks the slow upstream's tools: {names:?}"
    );
    assert!(starting(&list["result"]).is_empty(), "{list}");
}

/// An upstream ready after 15 s, beyond a 10 s `startupWaitMs`: the first list holds
/// the 5 s upstream's tools and names the other in `_meta`; it joins with
/// `list_changed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_beyond_the_startup_wait_is_named_and_joins_later() {
    let config = json!({
        "mcpx": {"limits": {"startupWaitMs": 10_000}},
        "mcpServers": {
            "five": slow_entry("five", 5),
            "fifteen": slow_entry("fifteen", 15),
        },
    });
    let mut gw = Gateway::start("fm-beyond", &config, R1125, &[]).await;
    let init = gw.initialize().await;
    assert_declares_lists(&init["result"]["capabilities"], "initialize");
    let list = gw.request("tools/list", json!({})).await;
    let result = &list["result"];
    let names = names_of(result);
    assert!(
        names.contains(&"five__test_simple_text".to_owned()),
        "the first list lacks the 5 s upstream: {names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("fifteen__")),
        "the 15 s upstream cannot be in a list answered at 10 s: {names:?}"
    );
    assert_eq!(starting(result), ["fifteen"], "{result}");
    // The 5 s upstream's own announcement may have come before the list's answer.
    gw.drain(Duration::from_millis(300)).await;
    assert!(
        gw.wait_note(LIST_CHANGED, Duration::from_secs(20)).await,
        "no list_changed when the 15 s upstream joined; stderr:\n{}",
        gw.stderr()
    );
    let list = gw.request("tools/list", json!({})).await;
    assert!(
        names_of(&list["result"]).contains(&"fifteen__test_simple_text".to_owned()),
        "the list after list_changed: {list}"
    );
    assert!(starting(&list["result"]).is_empty(), "{list}");
}

/// A config file for the one-shot commands.
fn one_shot_config(tag: &str, config: &Value) -> std::path::PathBuf {
    let dir = crate::scratch_dir(tag);
    let file = dir.join("mcpx.json");
    std::fs::write(&file, config.to_string()).unwrap();
    file
}

/// `mcpx ARGS…` without a daemon (an empty runtime directory): its output.
async fn mcpx(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(MCPX)
        .args(args)
        .env("XDG_RUNTIME_DIR", dir.join("run"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env_remove("MCPX_AUTOSTART")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap()
}

/// `mcpx tools` and `mcpx call` without a daemon: the slow upstream's tools are
/// listed and called; with `--timeout 2` both fail naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_commands_wait_for_a_slow_upstream_within_their_timeout() {
    let config = json!({"mcpServers": {
        "slow": slow_entry("slow", 5),
        "fast": example_entry("fast", &[]),
    }});
    let file = one_shot_config("fm-oneshot", &config);
    let dir = file.parent().unwrap().to_owned();
    std::fs::create_dir_all(dir.join("run")).unwrap();
    let cfg = file.to_str().unwrap();

    let out = mcpx(&dir, &["tools", "--config", cfg]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("slow__test_simple_text"),
        "mcpx tools: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let out = mcpx(&dir, &["call", "slow__test_simple_text", "--config", cfg]).await;
    assert!(
        out.status.success(),
        "mcpx call: {}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );

    let out = mcpx(&dir, &["tools", "--config", cfg, "--timeout", "2"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("upstream slow is still starting"),
        "mcpx tools --timeout 2: {}\nstderr:\n{stderr}",
        out.status
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("fast__test_simple_text"),
        "what is up is still listed"
    );
    let out = mcpx(
        &dir,
        &[
            "call",
            "slow__test_simple_text",
            "--config",
            cfg,
            "--timeout",
            "2",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("slow") && stderr.contains("starting"),
        "mcpx call --timeout 2: {}\nstderr:\n{stderr}",
        out.status
    );
}

/// A legacy session that has made no request since its handshake is told when a
/// slow upstream joins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_requests_is_told_of_a_late_upstream() {
    let config = json!({
        "mcpx": {"limits": {"startupWaitMs": 100}},
        "mcpServers": {
            "late": slow_entry("late", 2),
            "fast": example_entry("fast", &[]),
        },
    });
    let mut gw = Gateway::start("fm-quiet", &config, R1125, &[]).await;
    gw.initialize().await;
    assert!(
        gw.wait_note(LIST_CHANGED, Duration::from_secs(20)).await,
        "no list_changed reached a session that made no request; stderr:\n{}",
        gw.stderr()
    );
}

/// What a server declared at its last handshake is remembered (the era cache): a
/// second gateway declares it at once, while the server is still starting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_server_is_declared_from_the_era_cache_at_once() {
    let files = crate::scratch_dir("fm-cache-files");
    let gate = files.join("gate");
    let cache = files.join("cache");
    // Starts once `gate` is gone: the same command (the cache's key) in both runs.
    let script = format!(
        "while [ -e {} ]; do sleep 0.05; done; exec {MCPX} example-server --revision 2025-03-26",
        gate.display()
    );
    let config = json!({"mcpServers": {
        "gated": sh_entry("gated", &script),
        "other": sh_entry("other", &script),
    }});
    let caps_of = |v: &Value| v["result"]["capabilities"].clone();

    // Unknown and held back: the lists are declared, logging is not (nothing says so).
    std::fs::write(&gate, "").unwrap();
    let mut gw = Gateway::start_env(
        "fm-cache-0",
        &config,
        R1125,
        &[],
        &[("XDG_CACHE_HOME", &cache)],
    )
    .await;
    let caps = caps_of(&gw.initialize().await);
    assert!(still_sleeping(&mut gw, "gated"), "the gate did not hold");
    assert_declares_lists(&caps, "unknown");
    assert!(caps.get("logging").is_none(), "{caps}");
    drop(gw);

    // Met once: its handshake is remembered.
    std::fs::remove_file(&gate).unwrap();
    let mut gw = Gateway::start_env(
        "fm-cache-1",
        &config,
        R1125,
        &[],
        &[("XDG_CACHE_HOME", &cache)],
    )
    .await;
    gw.initialize().await;
    gw.tools().await;
    drop(gw);

    // Held back again: declared at once as it was found, logging included.
    std::fs::write(&gate, "").unwrap();
    let mut gw = Gateway::start_env(
        "fm-cache-2",
        &config,
        R1125,
        &[],
        &[("XDG_CACHE_HOME", &cache)],
    )
    .await;
    let caps = caps_of(&gw.initialize().await);
    assert!(still_sleeping(&mut gw, "gated"), "the gate did not hold");
    assert_declares_lists(&caps, "remembered");
    assert!(
        caps.get("logging").is_some(),
        "the remembered logging: {caps}"
    );
    std::fs::remove_file(&gate).unwrap();
}

/// A resource URI two upstreams list belongs to the first in configuration order
/// from the host's first list on, even when the other is up first: it does not change
/// owner as the first joins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_resource_uri_has_its_owner_from_the_first_list() {
    let config = json!({"mcpServers": {
        "a": slow_entry("a", 2),
        "b": example_entry("b", &[]),
    }});
    let mut gw = Gateway::start("fm-owner", &config, R1125, &[]).await;
    gw.initialize().await;
    let v = gw.request("resources/list", json!({})).await;
    let uris: Vec<&str> = v["result"]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("resources/list: {v}"))
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert!(
        uris.contains(&"test://static-text") && uris.contains(&"mcpx://b/test://static-text"),
        "a owns test://static-text, b's copy is namespaced: {uris:?}"
    );
    let read = gw
        .request("resources/read", json!({"uri": "test://static-text"}))
        .await;
    assert!(read["result"]["contents"].is_array(), "{read}");
}
