//! A JSON-with-comments file read as a value and as byte spans, so that an edit
//! replaces exactly one object of the text and keeps every other byte: the comments,
//! the layout and the settings around it.

use std::ops::Range;

use serde_json::Value;

/// A parsed JSONC text: the original, the same text with comments and trailing commas
/// blanked (every byte in place, so positions agree), and its value.
pub(crate) struct Doc {
    pub text: String,
    clean: String,
    pub value: Value,
}

/// Why a text is not JSON(C): the 1-based line and column, and what is wrong.
#[derive(Debug)]
pub(crate) struct SyntaxError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// One member of an object: where its key starts and where its value is.
pub(crate) struct Member {
    pub key: String,
    pub start: usize,
    pub value: Range<usize>,
}

/// An object of the text: its braces and its members.
pub(crate) struct Object {
    pub open: usize,
    pub close: usize,
    pub members: Vec<Member>,
}

impl Doc {
    pub(crate) fn parse(text: &str) -> Result<Doc, SyntaxError> {
        // A byte-order mark becomes three spaces, so positions still agree.
        let clean = match text.strip_prefix('\u{feff}') {
            Some(rest) => format!("   {}", mcpx_gateway::config::strip_jsonc(rest)),
            None => mcpx_gateway::config::strip_jsonc(text),
        };
        let value = serde_json::from_str(&clean).map_err(|e| {
            let message = e.to_string();
            let message = match message.rfind(" at line ") {
                Some(i) => message[..i].to_owned(),
                None => message,
            };
            SyntaxError {
                line: e.line(),
                column: e.column(),
                message,
            }
        })?;
        Ok(Doc {
            text: text.to_owned(),
            clean,
            value,
        })
    }

    /// The object at `path` (keys from the root), when there is one.
    pub(crate) fn object(&self, path: &[&str]) -> Option<Object> {
        let b = self.clean.as_bytes();
        let mut at = ws(b, 0);
        for key in path {
            let obj = object_at(b, at)?;
            let m = obj.members.into_iter().rev().find(|m| m.key == *key)?;
            at = m.value.start;
        }
        object_at(b, at)
    }

    /// The text with `obj` replaced by an object of `parts` (each a whole
    /// `"key": value` member, its later lines indented from the member's start).
    #[cfg(test)]
    pub(crate) fn replace_object(&self, obj: &Object, kept: &[&str], parts: &[String]) -> String {
        let mut out = self.text.clone();
        out.replace_range(obj.open..=obj.close, &self.object_text(obj, kept, parts));
        out
    }

    /// The text of an object to stand where `obj` is (`obj.open..=obj.close`): the
    /// members `kept` as the file has them (see [`Doc::member_text`]), then `parts`,
    /// indented as `obj`'s members are.
    pub(crate) fn object_text(&self, obj: &Object, kept: &[&str], parts: &[String]) -> String {
        let base = line_indent(&self.text, obj.open);
        let inner = self.member_indent(obj, &base);
        let members: Vec<String> = kept
            .iter()
            .map(|k| (*k).to_owned())
            .chain(parts.iter().map(|p| indent_rest(p, &inner)))
            .collect();
        if members.is_empty() {
            return "{}".to_owned();
        }
        format!(
            "{{\n{inner}{}\n{base}}}",
            members.join(&format!(",\n{inner}"))
        )
    }

    /// The text with `parts` added at the end of `obj`.
    pub(crate) fn add_members(&self, obj: &Object, parts: &[String]) -> String {
        if parts.is_empty() {
            return self.text.clone();
        }
        let b = self.clean.as_bytes();
        let t = self.text.as_bytes();
        let base = line_indent(&self.text, obj.open);
        let inner = self.member_indent(obj, &base);
        let members: Vec<String> = parts.iter().map(|p| indent_rest(p, &inner)).collect();
        let body = members.join(&format!(",\n{inner}"));
        let line_start = self.text[..obj.close].rfind('\n').map_or(0, |n| n + 1);
        let close_alone = t[line_start..obj.close].iter().all(u8::is_ascii_whitespace);
        let mut out = self.text.clone();
        if close_alone && line_start > obj.open {
            out.insert_str(line_start, &format!("{inner}{body}\n"));
        } else {
            out.insert_str(obj.close, &format!("\n{inner}{body}\n{base}"));
        }
        // The last member before the new ones needs a comma, unless it has one (a
        // trailing comma, blanked in the clean text).
        let last = (obj.open + 1..obj.close)
            .rev()
            .find(|&k| !b[k].is_ascii_whitespace());
        if let Some(k) = last
            && !has_comma(t, k + 1, obj.close)
        {
            out.insert(k + 1, ',');
        }
        out
    }

    /// The text of a member, key to the end of its value, as the file has it.
    pub(crate) fn member_text(&self, m: &Member) -> &str {
        &self.text[m.start..m.value.end]
    }

    /// The indentation of `obj`'s members: its first member's, when that starts a
    /// line, else `base` and two spaces.
    fn member_indent(&self, obj: &Object, base: &str) -> String {
        if let Some(m) = obj.members.first() {
            let line_start = self.text[..m.start].rfind('\n').map_or(0, |n| n + 1);
            let lead = &self.text[line_start..m.start];
            if line_start > obj.open && lead.bytes().all(|c| c == b' ' || c == b'\t') {
                return lead.to_owned();
            }
        }
        format!("{base}  ")
    }
}

/// Whether a `,` comes between `from` and `to` (outside comments; no strings there).
fn has_comma(t: &[u8], from: usize, to: usize) -> bool {
    let mut i = from;
    while i < to {
        match (t[i], t.get(i + 1)) {
            (b'/', Some(b'/')) => {
                i = t[i..]
                    .iter()
                    .position(|c| *c == b'\n')
                    .map_or(to, |n| i + n);
            }
            (b'/', Some(b'*')) => {
                i = t[i + 2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map_or(to, |n| i + 2 + n + 2);
            }
            (b',', _) => return true,
            _ => i += 1,
        }
    }
    false
}

/// The spaces and tabs that start the line `pos` is on.
fn line_indent(text: &str, pos: usize) -> String {
    let start = text[..pos].rfind('\n').map_or(0, |n| n + 1);
    text[start..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// `text` with `indent` before each line but the first.
fn indent_rest(text: &str, indent: &str) -> String {
    text.replace('\n', &format!("\n{indent}"))
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The index after the string that starts at `i`.
fn string_end(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < b.len() && b[i] != b'"' {
        if b[i] == b'\\' {
            i += 1;
        }
        i += 1;
    }
    (i + 1).min(b.len())
}

/// The index after the value that starts at `i`.
fn value_end(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(b'"') => string_end(b, i),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut k = i;
            while k < b.len() {
                match b[k] {
                    b'"' => {
                        k = string_end(b, k);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return k + 1;
                        }
                    }
                    _ => {}
                }
                k += 1;
            }
            b.len()
        }
        _ => {
            let mut k = i;
            while k < b.len() && !b",}] \t\r\n".contains(&b[k]) {
                k += 1;
            }
            k
        }
    }
}

/// The object whose `{` is at `open`, with its members.
fn object_at(b: &[u8], open: usize) -> Option<Object> {
    if b.get(open) != Some(&b'{') {
        return None;
    }
    let mut members = Vec::new();
    let mut i = open + 1;
    loop {
        i = ws(b, i);
        match b.get(i)? {
            b'}' => {
                return Some(Object {
                    open,
                    close: i,
                    members,
                });
            }
            b',' => i += 1,
            b'"' => {
                let end = string_end(b, i);
                let key: String = serde_json::from_slice(&b[i..end]).ok()?;
                let colon = ws(b, end);
                if b.get(colon) != Some(&b':') {
                    return None;
                }
                let start = ws(b, colon + 1);
                let vend = value_end(b, start);
                members.push(Member {
                    key,
                    start: i,
                    value: start..vend,
                });
                i = vend;
            }
            _ => return None,
        }
    }
}

/// A member's text, `"key": value`, pretty-printed with two-space indentation (later
/// lines indented from the member's start). Arrays of scalars stay on one line.
pub(crate) fn member(key: &str, value: &Value) -> String {
    let mut out = String::new();
    out.push_str(&quote(key));
    out.push_str(": ");
    pretty(value, "", &mut out);
    out
}

/// A member whose value is an object of `members`, in their order.
pub(crate) fn ordered_member(key: &str, members: &[(&str, Value)]) -> String {
    if members.is_empty() {
        return format!("{}: {{}}", quote(key));
    }
    let inner: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("  {}", member(k, v).replace('\n', "\n  ")))
        .collect();
    format!("{}: {{\n{}\n}}", quote(key), inner.join(",\n"))
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn pretty(v: &Value, indent: &str, out: &mut String) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            out.push_str("{\n");
            let inner = format!("{indent}  ");
            let n = map.len();
            for (i, (k, v)) in map.iter().enumerate() {
                out.push_str(&inner);
                out.push_str(&quote(k));
                out.push_str(": ");
                pretty(v, &inner, out);
                if i + 1 < n {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(indent);
            out.push('}');
        }
        Value::Array(items) if items.iter().any(|i| i.is_object() || i.is_array()) => {
            out.push_str("[\n");
            let inner = format!("{indent}  ");
            let n = items.len();
            for (i, v) in items.iter().enumerate() {
                out.push_str(&inner);
                pretty(v, &inner, out);
                if i + 1 < n {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(indent);
            out.push(']');
        }
        Value::Array(items) => {
            let items: Vec<String> = items
                .iter()
                .map(|i| serde_json::to_string(i).unwrap_or_default())
                .collect();
            out.push('[');
            out.push_str(&items.join(", "));
            out.push(']');
        }
        other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    const TEXT: &str = r#"{
  // the editor's settings
  "editor.fontSize": 14,
  "mcp": {
    "servers": {
      "a": { "command": "x" }, // kept
      "b": { "command": "y" },
    },
  },
  "z": [1, 2] /* after */
}
"#;

    #[test]
    fn finds_an_object_at_a_path_and_its_members() {
        let doc = Doc::parse(TEXT).unwrap();
        let obj = doc.object(&["mcp", "servers"]).unwrap();
        let keys: Vec<&str> = obj.members.iter().map(|m| m.key.as_str()).collect();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(
            doc.member_text(&obj.members[0]),
            r#""a": { "command": "x" }"#
        );
        assert!(doc.object(&["mcp", "nothing"]).is_none());
        assert!(doc.object(&["z"]).is_none(), "an array is not an object");
    }

    #[test]
    fn replacing_an_object_keeps_every_other_byte() {
        let doc = Doc::parse(TEXT).unwrap();
        let obj = doc.object(&["mcp", "servers"]).unwrap();
        let kept = doc.member_text(&obj.members[0]);
        let new = doc.replace_object(&obj, &[kept], &[member("m", &json!({"command": "mcpx"}))]);
        assert!(new.starts_with("{\n  // the editor's settings\n  \"editor.fontSize\": 14,"));
        assert!(
            new.ends_with("  },\n  \"z\": [1, 2] /* after */\n}\n"),
            "{new}"
        );
        let v = Doc::parse(&new).unwrap().value;
        assert_eq!(
            v["mcp"]["servers"],
            json!({"a": {"command": "x"}, "m": {"command": "mcpx"}})
        );
        assert_eq!(v["editor.fontSize"], 14);
    }

    #[test]
    fn a_kept_member_keeps_its_own_lines() {
        let text =
            "{\n  \"s\": {\n    \"a\": {\n      \"command\": \"x\"\n    },\n    \"b\": 1\n  }\n}\n";
        let doc = Doc::parse(text).unwrap();
        let obj = doc.object(&["s"]).unwrap();
        let kept = doc.member_text(&obj.members[0]);
        let new = doc.replace_object(&obj, &[kept], &[member("m", &json!({"k": 1}))]);
        assert_eq!(
            new,
            "{\n  \"s\": {\n    \"a\": {\n      \"command\": \"x\"\n    },\n    \"m\": {\n      \"k\": 1\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn members_are_added_with_or_without_a_trailing_comma() {
        for (text, want) in [
            ("{\"s\": {\"a\": 1}}", json!({"a": 1, "n": 2})),
            ("{\"s\": {\"a\": 1,}}", json!({"a": 1, "n": 2})),
            ("{\"s\": {\n  \"a\": 1, // c\n}\n}", json!({"a": 1, "n": 2})),
            (
                "{\"s\": {\n  \"a\": 1 /* , */\n}\n}",
                json!({"a": 1, "n": 2}),
            ),
            ("{\"s\": {}}", json!({"n": 2})),
            ("{\"s\": {\n}}", json!({"n": 2})),
        ] {
            let doc = Doc::parse(text).unwrap();
            let obj = doc.object(&["s"]).unwrap();
            let new = doc.add_members(&obj, &[member("n", &json!(2))]);
            let v = Doc::parse(&new)
                .unwrap_or_else(|e| panic!("{text:?} -> {new:?}: {e:?}"))
                .value;
            assert_eq!(v["s"], want, "{text:?} -> {new:?}");
        }
    }

    #[test]
    fn a_syntax_error_has_its_line_and_column() {
        let e = Doc::parse("{\n  \"a\": 1\n  \"b\": 2\n}").err().unwrap();
        assert_eq!((e.line, e.column), (3, 3), "{}", e.message);
        assert!(!e.message.contains("line"), "{}", e.message);
    }

    #[test]
    fn a_byte_order_mark_is_allowed() {
        let doc = Doc::parse("\u{feff}{\"s\": {}}").unwrap();
        assert!(doc.object(&["s"]).is_some());
    }

    #[test]
    fn members_print_in_the_order_given() {
        let m = ordered_member("x", &[("command", json!("c")), ("args", json!(["a", "b"]))]);
        assert_eq!(
            m,
            "\"x\": {\n  \"command\": \"c\",\n  \"args\": [\"a\", \"b\"]\n}"
        );
    }
}
