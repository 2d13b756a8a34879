//! `mcpx tools`, `call`, `read`, `prompt` and `probe` against the built-in example
//! servers (`--demo`) and a configuration with an unreachable upstream: what they print,
//! in text and JSON, and their exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Output;

use serde_json::Value;

/// Runs `mcpx args…` in a directory of its own, with no configuration to find there
/// or in the home directory.
fn mcpx(args: &[&str]) -> Output {
    // A directory per run: tests run in parallel, and a directory is made afresh.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = crate::scratch_dir(&format!("cli-inspect-{n}"));
    std::process::Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(args)
        .current_dir(&dir)
        .env("HOME", &dir)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        // No daemon to find: these commands run in-process (daemon_*.rs test the rest).
        .env("XDG_RUNTIME_DIR", dir.join("run"))
        .env_remove("MCPX_CONFIG")
        .env_remove("MCPX_AUTOSTART")
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[test]
fn tools_lists_the_tools_a_host_sees() {
    let o = mcpx(&["tools", "--demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let names: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert!(names.contains(&"everything__test_simple_text"), "{text}");
    assert!(names.contains(&"legacy__test_simple_text"), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("everything__test_simple_text "))
        .unwrap();
    assert!(line.ends_with("Returns one text content block."), "{line}");

    let o = mcpx(&["tools", "--demo", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tools: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let json_names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(json_names, names, "every page, in the same order");
    assert!(tools[0]["inputSchema"].is_object(), "{}", tools[0]);
}

#[test]
fn call_prints_the_result_and_says_when_it_failed() {
    let o = mcpx(&["call", "everything__test_simple_text", "--demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "This is a simple text response for testing.\n");

    let o = mcpx(&[
        "call",
        "legacy__test_add",
        "--args",
        r#"{"a": 2, "b": 3}"#,
        "--demo",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "The sum of 2 and 3 is 5\n");

    let o = mcpx(&["call", "everything__test_image_content", "--demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("[image image/png, about "),
        "{}",
        stdout(&o)
    );

    let o = mcpx(&["call", "everything__test_simple_text", "--demo", "--json"]);
    let result: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        result["content"][0]["text"],
        "This is a simple text response for testing."
    );

    // A tool error: its content, and exit code 1.
    let o = mcpx(&["call", "everything__test_error_handling", "--demo"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!stdout(&o).is_empty());
    assert_eq!(stderr(&o), "mcpx call: the tool reported an error\n");

    // A protocol error, and bad arguments.
    let o = mcpx(&["call", "nope", "--demo"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("mcpx call: tools/call: error -32602: "),
        "{}",
        stderr(&o)
    );
    let o = mcpx(&["call", "everything__test_add", "--args", "[1]", "--demo"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "mcpx call: --args must be a JSON object\n");
}

#[test]
fn read_and_prompt_print_contents_and_messages() {
    let o = mcpx(&["read", "test://static-text", "--demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "This is the content of test://static-text.\n");

    let o = mcpx(&["prompt", "everything__test_simple_prompt", "--demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "user: This is a simple prompt for testing.\n");
}

#[test]
fn probe_reports_each_upstream_and_fails_when_one_is_unreachable() {
    let o = mcpx(&["probe", "--demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let everything = text
        .lines()
        .find(|l| l.starts_with("everything ("))
        .unwrap();
    assert!(
        everything.contains("): modern 2026-07-28, mcpx-example-server "),
        "{everything}"
    );
    let legacy = text.lines().find(|l| l.starts_with("legacy (")).unwrap();
    assert!(legacy.contains("): legacy 2025-03-26, "), "{legacy}");
    assert!(legacy.contains("tools"), "{legacy}");

    let dir = crate::scratch_dir("cli-probe");
    let cfg = dir.join("mcpx.json");
    std::fs::write(
        &cfg,
        r#"{"mcpServers": {"gone": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}}"#,
    )
    .unwrap();
    let o = mcpx(&["probe", "--config", cfg.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let reports: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(reports[0]["name"], "gone");
    assert!(
        reports[0]["error"]
            .as_str()
            .unwrap()
            .contains("127.0.0.1:1"),
        "{reports}"
    );
}

#[test]
fn without_a_configuration_the_commands_say_where_they_looked() {
    for command in ["tools", "probe"] {
        let o = mcpx(&[command]);
        assert_eq!(o.status.code(), Some(1), "{command}");
        let e = stderr(&o);
        assert!(
            e.starts_with(&format!(
                "mcpx {command}: no configuration found; looked for "
            )),
            "{e}"
        );
        assert!(
            e.contains("(try --demo for the built-in example servers)"),
            "{e}"
        );
    }
}

/// An upstream the gateway cannot reach: the others' tools are listed, and the
/// gateway's error saying why comes through on stderr (and nothing else of its logs).
#[test]
fn an_unreachable_upstream_is_named_beside_the_list() {
    let dir = crate::scratch_dir("cli-unreachable");
    let cfg = dir.join("mcpx.json");
    let config = serde_json::json!({"mcpServers": {
        "ex": {"command": env!("CARGO_BIN_EXE_mcpx"), "args": ["example-server"]},
        "gone": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}});
    std::fs::write(&cfg, config.to_string()).unwrap();
    let o = mcpx(&["tools", "--config", cfg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o)
            .lines()
            .any(|l| l.starts_with("ex__test_simple_text ")),
        "{}",
        stdout(&o)
    );
    let e = stderr(&o);
    assert!(
        e.lines()
            .all(|l| l.starts_with("mcpx serve: upstream gone is unavailable: ")),
        "{e}"
    );
    assert!(e.contains("127.0.0.1:1"), "{e}");
}

/// Writes `config` to a file of its own; its path.
fn config_file(tag: &str, config: &Value) -> String {
    let dir = crate::scratch_dir(tag);
    let cfg = dir.join("mcpx.json");
    std::fs::write(&cfg, config.to_string()).unwrap();
    cfg.to_str().unwrap().to_owned()
}

/// Whether the process `pid` runs (a zombie does not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Issue #32: a command that does not exist is reported at once as not found, not
/// after the supervisor's backoff gives up (31 s), and no line has a trailing space
/// (an upstream without arguments was shown as `(stdio:X )`).
#[test]
fn probe_says_at_once_that_a_command_is_not_found() {
    let cfg = config_file(
        "cli-probe-missing",
        &serde_json::json!({"mcpServers": {"nope": {"command": "mcpx-no-such-command"}}}),
    );
    // A bound the old backoff passed by far: the message says whether it stopped early.
    let started = std::time::Instant::now();
    let o = mcpx(&["probe", "--config", &cfg, "--timeout", "20"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "nope (stdio:mcpx-no-such-command): unreachable: cannot be started: command not found: mcpx-no-such-command (not in PATH)\n"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));

    let o = mcpx(&["probe", "--config", &cfg, "--json"]);
    let reports: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(reports[0]["transport"], "stdio:mcpx-no-such-command");
}

/// Issue #32: `--timeout N` bounds the whole probe, the stop of an upstream that never
/// answers included: it is killed at the bound, not taken through the graceful stop
/// (stdin closed, SIGTERM, each with its grace) after it.
#[tokio::test]
async fn probe_timeout_bounds_a_server_that_never_answers() {
    let dir = crate::scratch_dir("cli-probe-hang");
    let pidfile = dir.join("pid");
    // It ignores SIGTERM and never reads stdin: only SIGKILL ends it.
    let script = format!("echo $$ > {}; trap '' TERM; sleep 60", pidfile.display());
    let cfg = config_file(
        "cli-probe-hang-cfg",
        &serde_json::json!({"mcpServers": {"hang": {"command": "sh", "args": ["-c", script]}}}),
    );
    let started = std::time::Instant::now();
    let o = mcpx(&["probe", "--config", &cfg, "--timeout", "2"]);
    // Generous: this checks a hang, not a speed.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.starts_with("hang (stdio:sh -c echo $$ > ")
            && out.ends_with("): unreachable: no answer within 2 s\n"),
        "{out}"
    );
    let e = stderr(&o);
    assert!(!e.contains("did not exit"), "{e}");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Killed before mcpx returned; the kernel may take a moment to show it.
    let gone = crate::wait::until(std::time::Duration::from_secs(5), async || !alive(pid)).await;
    assert!(gone, "the upstream {pid} outlived the probe");
}

/// No line of `mcpx probe` or `mcpx tools` ends with whitespace.
#[test]
fn no_output_line_ends_with_whitespace() {
    let cfg = config_file(
        "cli-probe-trailing",
        &serde_json::json!({"mcpServers": {
            "ex": {"command": env!("CARGO_BIN_EXE_mcpx"), "args": ["example-server"]},
            // Exits at once, its usage on stderr: its report quotes that.
            "bare": {"command": env!("CARGO_BIN_EXE_mcpx")},
            // Its stderr, quoted in its report, has a line that ends with spaces.
            "spaced": {"command": "sh", "args": ["-c", "printf 'bad thing   \\nsecond line\\n' >&2; exit 3"]}}}),
    );
    for args in [
        vec!["probe", "--demo"],
        vec!["tools", "--demo"],
        vec!["probe", "--config", &cfg, "--timeout", "10"],
        vec!["tools", "--config", &cfg],
    ] {
        let o = mcpx(&args);
        let out = stdout(&o);
        assert!(!out.is_empty(), "{args:?}: {}", stderr(&o));
        for line in out.lines() {
            assert_eq!(line, line.trim_end(), "{args:?}: {out}");
        }
    }
}

/// Issue #32: the `--demo` hint follows only "no configuration found", not an error
/// in the file the user has.
#[test]
fn a_configuration_error_comes_without_the_demo_hint() {
    let dir = crate::scratch_dir("cli-bad-config");
    let cfg = dir.join("mcpx.json");
    std::fs::write(&cfg, "{\"mcpServers\": {\n").unwrap();
    let path = cfg.to_str().unwrap();
    for command in ["tools", "probe", "serve"] {
        let o = mcpx(&[command, "--config", path]);
        assert_eq!(o.status.code(), Some(1), "{command}");
        let e = stderr(&o);
        assert!(e.starts_with(&format!("mcpx {command}: {path}:")), "{e}");
        assert!(!e.contains("--demo"), "{command}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}
