//! The `mcpx` binary, run as a child process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn mcpx(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(args)
        .output()
        .expect("run mcpx");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn version_and_help() {
    let (ok, out, _) = mcpx(&["--version"]);
    assert!(ok);
    assert_eq!(out.trim(), format!("mcpx {}", env!("CARGO_PKG_VERSION")));
    let (ok, out, _) = mcpx(&["--help"]);
    assert!(ok);
    assert!(out.contains("conformance"));
    assert!(out.contains("example-server"));
    assert!(out.contains("serve "));
    assert!(out.contains("bench "));
    for daemon_command in ["daemon ", "status ", "restart ", "reload ", "stop "] {
        assert!(
            out.contains(daemon_command),
            "--help lists {daemon_command}"
        );
    }
    // The hidden developers' command does not appear.
    assert!(!out.contains("docs "), "--help lists docs");
}

#[test]
fn conformance_lists_118_ids_with_counts() {
    let (ok, out, err) = mcpx(&["conformance"]);
    assert!(ok, "{err}");
    let rows: Vec<&str> = out.lines().skip(1).take_while(|l| !l.is_empty()).collect();
    assert_eq!(rows.len(), 118);
    assert!(rows[0].starts_with("H1 "));
    assert!(rows[117].starts_with("E-32 "));
    let last = out.lines().last().unwrap();
    assert!(last.starts_with("118 items: "), "{last}");
    assert!(
        last.contains(" done, ") && last.contains(" planned"),
        "{last}"
    );
}

#[test]
fn conformance_json_is_for_machines() {
    let (ok, out, _) = mcpx(&["conformance", "--json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 118);
    let done = v["counts"]["done"].as_u64().unwrap();
    let planned = v["counts"]["planned"].as_u64().unwrap();
    assert_eq!(done + planned, 118);
    for item in items {
        for key in ["id", "kind", "status", "behaviour", "site", "tests"] {
            assert!(item.get(key).is_some(), "{key} missing in {item}");
        }
    }
    let (ok, out, _) = mcpx(&["conformance", "--json", "--status", "planned"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["items"].as_array().unwrap().len() as u64, planned);
}

#[test]
fn unknown_arguments_are_refused_clearly() {
    let (ok, _, err) = mcpx(&["conformance", "--status", "undisposed"]);
    assert!(!ok);
    assert!(err.contains("possible values: done, planned"), "{err}");
}

/// The lines of `out` under the heading line `heading`, up to the next blank line,
/// joined as one text.
fn section(out: &str, heading: &str) -> String {
    out.lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn conformance_id_prints_one_item_whole() {
    let items = mcpx_testkit::dispositions::registry().unwrap();
    let want = mcpx_protocol::dispositions::find(&items, "E-12").unwrap();
    let (ok, out, err) = mcpx(&["conformance", "E-12"]);
    assert!(ok, "{err}");
    assert_eq!(
        out.lines().next().unwrap(),
        format!("E-12: {}", want.title),
        "{out}"
    );
    assert!(want.title.starts_with("elicitationId, "), "{}", want.title);
    let site = format!("site     {}", want.site);
    for line in [
        "area     E",
        "kind     peer-settled",
        "status   done",
        &site,
    ] {
        assert!(out.lines().any(|l| l == line), "no line {line:?} in\n{out}");
    }
    assert_eq!(section(&out, "behaviour"), want.behaviour.trim(), "{out}");
    let tests: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "tests")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(tests, want.tests, "{out}");
    assert!(!out.contains("\nspec\n"), "E-12 has no spec note:\n{out}");
    // Prose is wrapped for a terminal.
    let behaviour = out.lines().skip_while(|l| *l != "behaviour").skip(1);
    for l in behaviour.take_while(|l| !l.is_empty()) {
        assert!(l.starts_with("  ") && l.chars().count() <= 88, "{l:?}");
    }
    // The id in any case; the spec note when there is one; JSON for machines.
    let (ok, lower, _) = mcpx(&["conformance", "e-12"]);
    assert!(ok && lower == out);
    let e13 = mcpx_protocol::dispositions::find(&items, "E-13").unwrap();
    let (ok, out, _) = mcpx(&["conformance", "E-13"]);
    assert!(ok);
    assert_eq!(section(&out, "spec"), e13.spec.as_deref().unwrap().trim());
    let (ok, out, _) = mcpx(&["conformance", "E-12", "--json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["id"], "E-12");
    assert_eq!(v["title"], want.title.as_str());
    assert_eq!(v["area"], "E");
}

#[test]
fn conformance_with_an_unknown_id_exits_1_saying_how_to_list_the_ids() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(["conformance", "E-99"])
        .output()
        .expect("run mcpx");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"E-99\" is not a register id"), "{err}");
    assert!(err.contains("`mcpx conformance` lists every id"), "{err}");
}

#[test]
fn conformance_verbose_shows_each_title() {
    let (ok, out, _) = mcpx(&["conformance", "--verbose", "--status", "done"]);
    assert!(ok);
    assert!(
        out.contains(
            "\n         title: Subscription teardown, 2026-07-28 (three sources disagree)\n"
        ),
        "{out}"
    );
}

/// Runs `mcpx args…` in a scratch directory of its own (HOME and the XDG directories
/// in it, no daemon to find), stdin closed: its exit code and stderr.
fn mcpx_in(tag: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = crate::scratch_dir(tag);
    let out = Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(args)
        .current_dir(&dir)
        .env("HOME", &dir)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_RUNTIME_DIR", dir.join("run"))
        .env_remove("MCPX_CONFIG")
        .env_remove("MCPX_AUTOSTART")
        .env_remove("MCPX_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run mcpx");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue #32: a port that is taken is named in the error, for each listener.
#[test]
fn a_taken_port_is_named() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let refusal = format!("cannot listen on {addr}: address already in use");
    for (tag, args, prefix) in [
        (
            "port-serve",
            vec!["serve", "--demo", "--http", &addr],
            "mcpx serve: ",
        ),
        (
            "port-metrics",
            vec!["serve", "--demo", "--metrics", &addr],
            "mcpx serve: --metrics: ",
        ),
        (
            "port-daemon",
            vec![
                "daemon",
                "--demo",
                "--http",
                &addr,
                "--allow-any-local-user",
            ],
            "mcpx daemon: --http: ",
        ),
    ] {
        let (code, err) = mcpx_in(tag, &args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert_eq!(err, format!("{prefix}{refusal}\n"), "{args:?}");
    }
}

/// Issue #32: a one-shot session whose host closes stdin at once stops its upstreams
/// before they are ready; that stop is mcpx's own and logs nothing at the default
/// level (it printed `upstream X is unavailable: stopped` for each).
#[test]
fn a_normal_shutdown_says_nothing_of_the_upstreams() {
    let dir = crate::scratch_dir("quiet-shutdown-cfg");
    let cfg = dir.join("mcpx.json");
    let config = serde_json::json!({"mcpServers": {
        // Never ready: it is still starting when the host goes.
        "slow": {"command": "sh", "args": ["-c", "sleep 60"]},
        "ex": {"command": env!("CARGO_BIN_EXE_mcpx"), "args": ["example-server"]}}});
    std::fs::write(&cfg, config.to_string()).unwrap();
    let (code, err) = mcpx_in(
        "quiet-shutdown",
        &["serve", "--config", cfg.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err, "", "a normal exit logs nothing");
}
