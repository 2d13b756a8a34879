//! docs/config.md documents exactly the keys the configuration parser accepts.
//!
//! mcpx's own blocks refuse unknown keys, and serde's error for one lists the keys the
//! block accepts ("unknown field `x`, expected one of `a`, `b`, …"). So the accepted
//! keys are read from the parser itself: a probe key is put in each block, and a key
//! whose value can hold a probe key of its own is a nested block, read the same way.
//! The host-format keys of a server entry tolerate unknown keys, so they are a fixed
//! list here, and each is shown to be read by the parser (a value of the wrong type is
//! refused).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

use mcpx_gateway::config::{self, ConfigError};
use mcpx_testkit::shared::repo_root;
use serde_json::{Value, json};

/// A key no block accepts.
const PROBE: &str = "mcpxDocProbe";

/// The keys of a server entry in the hosts' format that mcpx reads, and its `mcpx`
/// block.
const HOST_KEYS: [&str; 9] = [
    "type", "command", "args", "env", "cwd", "url", "headers", "disabled", "mcpx",
];

/// The doc's section for a server entry's host-format keys.
const HOST_SECTION: &str = "A server entry";
/// The doc's section for a server's `mcpx` block.
const SERVER_SECTION: &str = "A server's `mcpx` block";
/// The doc's section for the top-level `mcpx` block.
const GLOBAL_SECTION: &str = "The top-level `mcpx` block";

/// Which of mcpx's blocks.
#[derive(Clone, Copy, Debug)]
enum Block {
    /// A server entry's `mcpx` block.
    Server,
    /// The top-level `mcpx` block.
    Global,
}

/// A configuration with `value` at `path` inside `block`.
fn config_with(block: Block, path: &[String], value: Value) -> String {
    let inner = path.iter().rev().fold(value, |v, k| {
        Value::Object([(k.clone(), v)].into_iter().collect())
    });
    let doc = match block {
        Block::Server => json!({ "mcpServers": { "s": { "command": "x", "mcpx": inner } } }),
        Block::Global => json!({ "mcpx": inner }),
    };
    doc.to_string()
}

/// The keys the object at `path` inside `block` accepts, when it refuses unknown ones;
/// `None` when `path` is not such an object (a plain value).
fn accepted_keys(block: Block, path: &[String]) -> Option<Vec<String>> {
    let text = config_with(block, path, json!({ PROBE: 0 }));
    let message = match config::parse(&text, Path::new("probe.json")) {
        Err(ConfigError::Invalid { message, .. }) => message,
        _ => return None,
    };
    let rest = message.strip_prefix(&format!("unknown field `{PROBE}`"))?;
    // "there are no fields", "expected `a`", "expected `a` or `b`",
    // "expected one of `a`, `b`, `c`".
    let keys = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    Some(keys)
}

/// Every key a block accepts, nested blocks' keys as `outer.inner`, as the doc names
/// them.
fn accepted_paths(block: Block) -> BTreeSet<String> {
    fn walk(block: Block, path: &mut Vec<String>, out: &mut BTreeSet<String>) {
        let keys = accepted_keys(block, path).unwrap_or_else(|| {
            panic!("{block:?} block at {path:?} does not refuse an unknown key")
        });
        for key in keys {
            path.push(key);
            if accepted_keys(block, path).is_some() {
                walk(block, path, out);
            } else {
                out.insert(path.join("."));
            }
            path.pop();
        }
    }
    let mut out = BTreeSet::new();
    walk(block, &mut Vec::new(), &mut out);
    out
}

/// The keys in the first column of the tables of the doc's section `heading` (the
/// text after `## `), in order.
fn documented_keys(doc: &str, heading: &str) -> Vec<String> {
    let mut in_section = false;
    let mut keys = Vec::new();
    for line in doc.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            in_section = h.trim() == heading;
            continue;
        }
        if !in_section || !line.starts_with('|') {
            continue;
        }
        let cell = line.split('|').nth(1).unwrap_or_default().trim();
        if let Some(key) = cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
            keys.push(key.to_owned());
        }
    }
    keys
}

/// How `doc` differs from the keys accepted: one line per key.
fn problems(
    doc: &str,
    host: &BTreeSet<String>,
    server: &BTreeSet<String>,
    global: &BTreeSet<String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (heading, accepted) in [
        (HOST_SECTION, host),
        (SERVER_SECTION, server),
        (GLOBAL_SECTION, global),
    ] {
        let listed = documented_keys(doc, heading);
        if listed.is_empty() {
            out.push(format!("section \"## {heading}\" has no table of keys"));
            continue;
        }
        let mut documented = BTreeSet::new();
        for key in listed {
            if !documented.insert(key.clone()) {
                out.push(format!("{heading}: `{key}` has more than one row"));
            }
        }
        for key in accepted.difference(&documented) {
            out.push(format!(
                "{heading}: `{key}` is accepted by the parser but has no row"
            ));
        }
        for key in documented.difference(accepted) {
            out.push(format!(
                "{heading}: `{key}` has a row but the parser does not accept it"
            ));
        }
    }
    out
}

fn host_keys() -> BTreeSet<String> {
    HOST_KEYS.iter().map(|k| (*k).to_owned()).collect()
}

fn config_doc() -> String {
    let path = repo_root().join("docs/config.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn config_md_documents_exactly_the_keys_the_parser_accepts() {
    let server = accepted_paths(Block::Server);
    let global = accepted_paths(Block::Global);
    // The probe works: it finds nested blocks and their keys.
    assert!(server.contains("restart.backoffMs"), "{server:?}");
    assert!(server.contains("namespace"), "{server:?}");
    assert!(global.contains("limits.maxFrameBytes"), "{global:?}");
    let found = problems(&config_doc(), &host_keys(), &server, &global);
    assert!(
        found.is_empty(),
        "docs/config.md and the parser (crates/mcpx-gateway/src/config.rs) differ; \
         add or remove the rows:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_parser_reads_every_host_format_key_and_tolerates_others() {
    let entry = |extra: Value| {
        let mut server = json!({ "command": "x" });
        if let (Some(s), Some(e)) = (server.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        config::parse(
            &json!({ "mcpServers": { "s": server } }).to_string(),
            Path::new("probe.json"),
        )
    };
    // A key the parser reads refuses a value of the wrong type.
    for key in HOST_KEYS {
        match entry(json!({ key: 12345 })) {
            Err(ConfigError::Invalid { message, .. }) if message.contains("invalid type") => {}
            other => panic!("{key}: 12345 was not refused as a wrong type: {other:?}"),
        }
    }
    // Another host's key is ignored, whatever its value.
    assert!(entry(json!({ "alwaysAllow": 12345 })).is_ok());
}

#[test]
fn the_check_catches_a_missing_row_and_an_unknown_row() {
    let doc = config_doc();
    let without: String = doc
        .lines()
        .filter(|l| !l.starts_with("| `restart.backoffMs` |"))
        .map(|l| {
            if l.starts_with("| `limits.drainMs` |") {
                format!("{l}\n| `limits.noSuchKeyMs` | integer | `1` | Not a key. |\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let found = problems(
        &without,
        &host_keys(),
        &accepted_paths(Block::Server),
        &accepted_paths(Block::Global),
    );
    assert_eq!(
        found,
        [
            "A server's `mcpx` block: `restart.backoffMs` is accepted by the parser but has no row",
            "The top-level `mcpx` block: `limits.noSuchKeyMs` has a row but the parser does not accept it",
        ]
    );
}
