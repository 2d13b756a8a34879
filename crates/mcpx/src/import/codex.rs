//! Codex's `config.toml`: read as a JSON value (toml), and its `mcp_servers` edited
//! in place, every other table, comment and blank line kept (toml_edit).

use serde_json::Value;

use super::jsonc::SyntaxError;

/// The file as a JSON value.
pub(crate) fn parse(text: &str) -> Result<Value, SyntaxError> {
    match toml::from_str::<toml::Table>(text) {
        Ok(table) => Ok(to_json(toml::Value::Table(table))),
        Err(e) => {
            let at = e.span().map_or(0, |s| s.start).min(text.len());
            let before = &text[..at];
            let line = before.matches('\n').count() + 1;
            let column = before.rfind('\n').map_or(at, |n| at - n - 1) + 1;
            Err(SyntaxError {
                line,
                column,
                message: e.message().trim().to_owned(),
            })
        }
    }
}

fn to_json(v: toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.into_iter().map(to_json).collect()),
        toml::Value::Table(t) => {
            Value::Object(t.into_iter().map(|(k, v)| (k, to_json(v))).collect())
        }
    }
}

/// Why Codex's file could not be edited.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RewriteError {
    /// The file does not parse.
    #[error("{}", .0.message())]
    Parse(#[from] toml_edit::TomlError),
    /// A value of the entry has no TOML form.
    #[error("a value TOML cannot hold")]
    Unrepresentable,
    /// `mcp_servers` is there but not a table.
    #[error("`mcp_servers` is not a table")]
    NotATable,
}

/// The text with the servers `remove` taken out of `mcp_servers` and `launch` added
/// as `[mcp_servers.<name>]`.
pub(crate) fn rewrite(
    text: &str,
    remove: &[&str],
    name: &str,
    launch: &[(&'static str, Value)],
) -> Result<String, RewriteError> {
    let mut doc: toml_edit::DocumentMut = text.parse()?;
    let mut values = Vec::new();
    for (k, v) in launch {
        values.push((*k, to_toml(v).ok_or(RewriteError::Unrepresentable)?));
    }
    match doc.get_mut("mcp_servers") {
        Some(toml_edit::Item::Table(t)) => {
            for n in remove {
                t.remove(n);
            }
            let mut new = toml_edit::Table::new();
            for (k, v) in values {
                new.insert(k, toml_edit::Item::Value(v));
            }
            t.insert(name, toml_edit::Item::Table(new));
        }
        Some(toml_edit::Item::Value(toml_edit::Value::InlineTable(t))) => {
            for n in remove {
                t.remove(n);
            }
            let mut new = toml_edit::InlineTable::new();
            for (k, v) in values {
                new.insert(k, v);
            }
            t.insert(name, toml_edit::Value::InlineTable(new));
        }
        _ => return Err(RewriteError::NotATable),
    }
    Ok(doc.to_string())
}

fn to_toml(v: &Value) -> Option<toml_edit::Value> {
    match v {
        Value::String(s) => Some(toml_edit::Value::from(s.as_str())),
        Value::Array(items) => {
            let mut a = toml_edit::Array::new();
            for i in items {
                a.push(to_toml(i)?);
            }
            Some(toml_edit::Value::Array(a))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    const TEXT: &str = r#"# Codex
model = "o4"

[mcp_servers.docs]
command = "docs-server"
args = ["--port", "0"]

[mcp_servers.docs.env]
TOKEN = "t"

# a remote one
[mcp_servers.remote]
url = "https://r.example/mcp"

[profiles.fast]
model = "o4-mini"
"#;

    #[test]
    fn reads_servers_as_json() {
        let v = parse(TEXT).unwrap();
        assert_eq!(
            v["mcp_servers"]["docs"],
            json!({"command": "docs-server", "args": ["--port", "0"], "env": {"TOKEN": "t"}})
        );
        assert_eq!(v["model"], "o4");
    }

    #[test]
    fn a_syntax_error_has_its_line_and_column() {
        let e = parse("a = 1\nb = = 2\n").err().unwrap();
        assert_eq!(e.line, 2, "{}", e.message);
        assert!(e.column > 1);
    }

    #[test]
    fn rewriting_keeps_the_other_tables_and_comments() {
        let launch = [
            ("command", json!("/bin/mcpx")),
            ("args", json!(["serve", "--config", "/c.json"])),
        ];
        let new = rewrite(TEXT, &["docs"], "mcpx", &launch).unwrap();
        assert!(new.starts_with("# Codex\nmodel = \"o4\"\n"), "{new}");
        assert!(
            new.contains("# a remote one\n[mcp_servers.remote]"),
            "{new}"
        );
        assert!(
            new.contains("[profiles.fast]\nmodel = \"o4-mini\""),
            "{new}"
        );
        let v = parse(&new).unwrap();
        assert_eq!(
            v["mcp_servers"],
            json!({"remote": {"url": "https://r.example/mcp"},
                   "mcpx": {"command": "/bin/mcpx", "args": ["serve", "--config", "/c.json"]}})
        );
        let inline = rewrite(
            "mcp_servers = { a = { command = \"x\" } }\n",
            &["a"],
            "mcpx",
            &launch,
        )
        .unwrap();
        assert_eq!(
            parse(&inline).unwrap()["mcp_servers"]["mcpx"]["command"],
            "/bin/mcpx"
        );
    }
}
