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
    let dir = mcpx_testkit::scratch::dir(&format!("cli-inspect-{n}"));
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

    let dir = mcpx_testkit::scratch::dir("cli-probe");
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
    let dir = mcpx_testkit::scratch::dir("cli-unreachable");
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
