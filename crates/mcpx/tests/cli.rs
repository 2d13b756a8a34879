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
    // Commands that are not built yet do not appear.
    assert!(!out.contains("daemon"), "--help lists daemon");
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
