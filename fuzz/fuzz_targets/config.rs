//! Any text as mcpx's configuration file: `config::parse` answers without panicking;
//! `strip_jsonc` blanks what a state machine reading JSONC finds to be comments and
//! trailing commas, and leaves plain JSON as it is; a configuration
//! accepted has the servers serde_json reads in `mcpServers`; and every error's line
//! is in the file, the line a server's error names holding that server's key.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use mcpx_gateway::config::{ConfigError, parse, strip_jsonc};
use serde_json::Value;

fuzz_target!(|text: &str| {
    let clean = strip_jsonc(text);
    assert_eq!(clean.as_bytes(), jsonc(text), "{text:?}");
    let plain = serde_json::from_str::<Value>(text);
    if plain.is_ok() {
        assert_eq!(clean, text, "plain JSON changed");
    }
    // serde_json's reading of the file, where it reads it as a tree (it refuses what a
    // typed reading skips, such as a lone surrogate in an unknown member).
    let tree = serde_json::from_str::<Value>(&clean).ok();
    let lines = text.split('\n').count();
    match parse(text, Path::new("fuzz.json")) {
        Ok(config) => {
            if let Some(tree) = tree {
                let names: Vec<&String> = tree
                    .get("mcpServers")
                    .and_then(Value::as_object)
                    .map(|m| m.keys().collect())
                    .unwrap_or_default();
                let ours: Vec<&String> = config.servers.keys().collect();
                assert_eq!(ours, names, "{text:?}");
            }
        }
        Err(ConfigError::Invalid { line, .. }) => {
            assert!(
                (1..=lines).contains(&line),
                "line {line} of {lines}: {text:?}"
            );
        }
        Err(ConfigError::Value {
            line: Some(line),
            message,
            ..
        }) => {
            assert!(
                (1..=lines).contains(&line),
                "line {line} of {lines}: {text:?}"
            );
            // The server the message names has its key on that line.
            if let Some(tree) = tree {
                let servers = tree.get("mcpServers").and_then(Value::as_object);
                let named: Vec<&String> = servers
                    .map(|m| {
                        m.keys()
                            .filter(|k| message.starts_with(&format!("mcpServers.{k}: ")))
                            .collect()
                    })
                    .unwrap_or_default();
                assert!(!named.is_empty(), "{message}: {text:?}");
                let on_line = clean.split('\n').nth(line - 1).unwrap_or_default();
                let strings = strings(on_line);
                assert!(
                    named.iter().any(|k| strings.contains(k)),
                    "{message}: line {line} {on_line:?} has none of {named:?}"
                );
            }
        }
        Err(_) => {}
    }
});

/// JSONC as a state machine reads it: comments (`//` to the line's end, `/* */`, or
/// to the text's end) outside strings blanked with spaces but for their newlines, then
/// each comma outside strings whose next byte but whitespace is `}` or `]`.
fn jsonc(text: &str) -> Vec<u8> {
    #[derive(PartialEq)]
    enum In {
        Json,
        Str,
        Escape,
        Line,
        Block,
    }
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut state = In::Json;
    let mut i = 0;
    while i < b.len() {
        let next = b.get(i + 1).copied();
        match state {
            In::Json => match (b[i], next) {
                (b'"', _) => state = In::Str,
                (b'/', Some(b'/')) => {
                    state = In::Line;
                    continue;
                }
                (b'/', Some(b'*')) => {
                    out[i] = b' ';
                    out[i + 1] = b' ';
                    i += 2;
                    state = In::Block;
                    continue;
                }
                _ => {}
            },
            In::Str => match b[i] {
                b'\\' => state = In::Escape,
                b'"' => state = In::Json,
                _ => {}
            },
            In::Escape => state = In::Str,
            In::Line if b[i] == b'\n' => state = In::Json,
            In::Line => out[i] = b' ',
            In::Block if b[i] == b'*' && next == Some(b'/') => {
                out[i] = b' ';
                out[i + 1] = b' ';
                i += 2;
                state = In::Json;
                continue;
            }
            In::Block if b[i] != b'\n' => out[i] = b' ',
            In::Block => {}
        }
        i += 1;
    }
    let blanked = out.clone();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in blanked.iter().enumerate() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if c == b'"' {
            in_string = true;
        } else if c == b',' {
            let after = blanked[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
            if matches!(after, Some(b'}' | b']')) {
                out[i] = b' ';
            }
        }
    }
    out
}

/// The JSON strings on one line of a JSON text, decoded (a JSON string never spans
/// lines, so a line starts outside one).
fn strings(line: &str) -> Vec<String> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'"' {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < b.len() && b[i] != b'"' {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        let end = (i + 1).min(b.len());
        if let Some(s) = line
            .get(start..end)
            .and_then(|q| serde_json::from_str::<String>(q).ok())
        {
            out.push(s);
        }
        i = end;
    }
    out
}
