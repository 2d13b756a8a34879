//! docs/cli.md is what `mcpx docs cli` prints from the clap definitions, and
//! `mcpx completion SHELL` prints a completion script.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use mcpx_testkit::shared::repo_root;

/// How to bring docs/cli.md up to date (as `mcpx docs cli` says in the file).
const REGENERATE: &str = "cargo run -p mcpx -- docs cli > docs/cli.md";

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
fn cli_md_is_generated_from_the_clap_definitions() {
    let (ok, generated, err) = mcpx(&["docs", "cli"]);
    assert!(ok, "{err}");
    assert!(
        generated.contains(REGENERATE),
        "the file says how to regenerate it"
    );
    let path = repo_root().join("docs/cli.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let first = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "docs/cli.md is not what the clap definitions in crates/mcpx/src give \
             (first difference at line {}: committed {:?}, generated {:?}).\n\
             Regenerate it: {REGENERATE}",
            first + 1,
            committed.lines().nth(first).unwrap_or("<end of file>"),
            generated.lines().nth(first).unwrap_or("<end of file>"),
        );
    }
}

#[test]
fn cli_md_documents_every_visible_command_and_not_the_hidden_one() {
    let (ok, doc, err) = mcpx(&["docs", "cli"]);
    assert!(ok, "{err}");
    for command in [
        "serve",
        "conformance",
        "example-server",
        "bench",
        "tools",
        "call",
        "read",
        "prompt",
        "probe",
        "import",
        "completion",
    ] {
        assert!(
            doc.contains(&format!("\n## `mcpx {command}`\n")),
            "no section for mcpx {command}"
        );
    }
    assert!(
        !doc.contains("## `mcpx docs"),
        "the hidden command is documented"
    );
    // Each argument's help and default.
    assert!(
        doc.contains("| `--timeout <SECS>` | `60` | How long to wait"),
        "{doc}"
    );
    assert!(
        doc.contains("Usage: mcpx conformance [OPTIONS] [ID]"),
        "{doc}"
    );
    // A `|` in a value name is escaped, or it would end the table's cell.
    assert!(
        doc.contains("| `[HOST\\|FILE]` |  | The host to import from"),
        "{doc}"
    );
    let (_, help, _) = mcpx(&["--help"]);
    assert!(
        !help.contains("docs"),
        "--help lists the hidden command:\n{help}"
    );
}

#[test]
fn completion_prints_a_script_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let (ok, script, err) = mcpx(&["completion", shell]);
        assert!(ok, "{shell}: {err}");
        assert!(!script.trim().is_empty(), "{shell}: empty script");
        assert!(script.contains("mcpx"), "{shell}: does not mention mcpx");
        assert!(script.contains("conformance"), "{shell}: no subcommands");
        // The hidden `mcpx docs` is not offered ("docs/" is in a help text).
        let offers_docs = script
            .match_indices("docs")
            .any(|(i, _)| !script[i + 4..].starts_with('/'));
        assert!(!offers_docs, "{shell}: offers the hidden docs command");
    }
    let (ok, _, err) = mcpx(&["completion", "tcsh"]);
    assert!(!ok);
    assert!(err.contains("possible values"), "{err}");
}
