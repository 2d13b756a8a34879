//! Lowering results to the receiver's revision: the one place where a result written in
//! one revision is reshaped for a peer speaking another (DESIGN.md principle 2).
//!
//! [`lower_result`] takes a result's raw JSON, the method it answers, and the two
//! revisions, and returns the result as the receiver's revision must see it. When
//! nothing needs to change the input is returned borrowed, byte for byte.
//!
//! What changes, and why:
//!
//! * **Envelope** (2026-07-28 basic/index §resultType, server/utilities/caching): a
//!   modern receiver gets `resultType` (absent means `"complete"`, register A-C22) and,
//!   on cacheable complete results, `ttlMs` (absent means 0) and `cacheScope` (absent
//!   means `"private"`, the conservative choice); a legacy receiver gets none of them.
//! * **Structured content** (H7, D-C5): removed before 2025-06-18, with its JSON text
//!   kept in `content`; a non-object value for 2025-06-18..2025-11-25 is wrapped as
//!   `{"result": value}`, and `outputSchema` is wrapped to match in `tools/list`.
//! * **Content blocks** a revision lacks: `audio` before 2025-03-26 and `resource_link`
//!   before 2025-06-18 become text blocks describing them.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::jsonrpc::Json;
use crate::method::CACHEABLE_METHODS;
use crate::revision::{Revision, StructuredContent};

/// A result that cannot be lowered (not a JSON object).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot lower the {method} result: {why}")]
pub struct LowerError {
    /// The method the result answers.
    pub method: String,
    /// Why.
    pub why: String,
}

/// What the sender adds to every result it lowers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stamp<'a> {
    /// The sender's `Implementation`, set as `_meta["io.modelcontextprotocol/serverInfo"]`
    /// on results for modern receivers (2026-07-28: SHOULD, on every result). A proxy
    /// names itself here, not the upstream it forwards.
    pub server_info: Option<&'a Value>,
}

/// Lowers a `method` result written in `from` for a receiver speaking `to`.
pub fn lower_result<'a>(
    method: &str,
    raw: &'a str,
    from: Revision,
    to: Revision,
) -> Result<Cow<'a, str>, LowerError> {
    lower_result_stamped(method, raw, from, to, Stamp::default())
}

/// [`lower_result_stamped`] over [`Json`]: `Ok(None)` when `raw` goes as it is, else the
/// lowered result (written from `raw`, which is valid, so not checked again).
pub fn lower_result_json(
    method: &str,
    raw: &Json,
    from: Revision,
    to: Revision,
    stamp: Stamp<'_>,
) -> Result<Option<Json>, LowerError> {
    let text = raw.as_str();
    Ok(match lower_result_stamped(method, text, from, to, stamp)? {
        Cow::Borrowed(b) if std::ptr::eq(b, text) => None,
        Cow::Borrowed(b) => Some(Json::trusted(b.to_owned())),
        Cow::Owned(o) => Some(Json::trusted(o)),
    })
}

/// [`lower_result`], also applying `stamp`.
pub fn lower_result_stamped<'a>(
    method: &str,
    raw: &'a str,
    from: Revision,
    to: Revision,
    stamp: Stamp<'_>,
) -> Result<Cow<'a, str>, LowerError> {
    // A result already in the receiver's revision needs nothing.
    let stamping = stamp.server_info.is_some() && to.facts().result_type;
    if from == to && !stamping {
        return Ok(Cow::Borrowed(raw));
    }
    if from == to
        && let Some(stamped) = stamp_in_place(method, raw, stamp)
    {
        return Ok(Cow::Owned(stamped));
    }
    let err = |why: String| LowerError {
        method: method.to_owned(),
        why,
    };
    let mut v: Value = serde_json::from_str(raw).map_err(|e| err(e.to_string()))?;
    let obj = v
        .as_object_mut()
        .ok_or_else(|| err("a result must be a JSON object".to_owned()))?;
    let mut changed = envelope(obj, method, to);
    if let (Some(info), true) = (stamp.server_info, to.facts().result_type) {
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(crate::meta::SERVER_INFO.to_owned(), info.clone());
            changed = true;
        }
    }
    changed |= match method {
        "tools/call" => call_tool_result(obj, to),
        "tools/list" => list_tools_result(obj, to),
        "prompts/get" => prompt_result(obj, to),
        _ => false,
    };
    if !changed {
        return Ok(Cow::Borrowed(raw));
    }
    serde_json::to_string(&v)
        .map(Cow::Owned)
        .map_err(|e| err(e.to_string()))
}

/// Stamps a result already in the receiver's (modern) revision without re-encoding it:
/// only `_meta` is rewritten (or appended), every other byte is kept. `None` when the
/// general path is needed: the text is not an object, or its envelope is incomplete
/// (`resultType`, and on cacheable results `ttlMs` and `cacheScope`, must be present).
fn stamp_in_place(method: &str, raw: &str, stamp: Stamp<'_>) -> Option<String> {
    let info = stamp.server_info?;
    let members: crate::codec::RawObject<'_> = serde_json::from_str(raw).ok()?;
    let has = |k: &str| members.0.iter().any(|(name, _)| name == k);
    if !has("resultType")
        || (CACHEABLE_METHODS.contains(&method) && !(has("ttlMs") && has("cacheScope")))
    {
        return None;
    }
    match members.0.iter().find(|(k, _)| k == "_meta") {
        None => {
            let body = raw.trim_end();
            let head = body.strip_suffix('}')?.trim_end();
            let sep = if head.ends_with('{') { "" } else { "," };
            let meta = serde_json::to_string(&json!({ crate::meta::SERVER_INFO: info })).ok()?;
            Some(format!("{head}{sep}\"_meta\":{meta}}}"))
        }
        Some((_, old)) => {
            let mut meta: Map<String, Value> = serde_json::from_str(old.get()).ok()?;
            meta.insert(crate::meta::SERVER_INFO.to_owned(), info.clone());
            let meta = serde_json::to_string(&meta).ok()?;
            let old = old.get();
            let start = old.as_ptr() as usize - raw.as_ptr() as usize;
            let mut out = String::with_capacity(raw.len() + meta.len());
            out.push_str(&raw[..start]);
            out.push_str(&meta);
            out.push_str(&raw[start + old.len()..]);
            Some(out)
        }
    }
}

/// Adds or removes the 2026 result envelope. Returns whether anything changed.
fn envelope(obj: &mut Map<String, Value>, method: &str, to: Revision) -> bool {
    let mut changed = false;
    if to.facts().result_type {
        let complete = match obj.get("resultType") {
            None => {
                obj.insert("resultType".to_owned(), json!("complete"));
                changed = true;
                true
            }
            Some(t) => t == "complete",
        };
        if complete && CACHEABLE_METHODS.contains(&method) {
            if !obj.contains_key("ttlMs") {
                obj.insert("ttlMs".to_owned(), json!(0));
                changed = true;
            }
            if !obj.contains_key("cacheScope") {
                obj.insert("cacheScope".to_owned(), json!("private"));
                changed = true;
            }
        }
    } else {
        for k in ["resultType", "ttlMs", "cacheScope"] {
            changed |= obj.remove(k).is_some();
        }
        // The 2026 result `_meta` keys describe the sender in 2026 terms; a legacy
        // receiver has its server's identity from `initialize` (A-C17, D-C12).
        if let Some(Value::Object(m)) = obj.get_mut("_meta") {
            changed |= m.remove(crate::meta::SERVER_INFO).is_some();
            if m.is_empty() {
                obj.remove("_meta");
            }
        }
    }
    changed
}

fn call_tool_result(obj: &mut Map<String, Value>, to: Revision) -> bool {
    let mut changed = false;
    if let Some(Value::Array(content)) = obj.get_mut("content") {
        changed |= lower_blocks(content, to);
    }
    match to.facts().structured_content {
        StructuredContent::AnyValue => {}
        StructuredContent::ObjectOnly => {
            if let Some(sc) = obj
                .get_mut("structuredContent")
                .filter(|sc| !sc.is_object())
            {
                let value = sc.take();
                let text = value.to_string();
                *sc = json!({ "result": value });
                ensure_text(obj, text);
                changed = true;
            }
        }
        StructuredContent::Absent => {
            if let Some(sc) = obj.remove("structuredContent") {
                ensure_text(obj, sc.to_string());
                changed = true;
            }
        }
    }
    changed
}

/// Makes sure `content` carries `text` (the structured value's JSON) so nothing is lost
/// when `structuredContent` is reshaped or removed (2025-06-18 server/tools §Structured
/// Content: "a tool that returns structured content SHOULD also return the serialized
/// JSON in a TextContent block").
fn ensure_text(obj: &mut Map<String, Value>, text: String) {
    let content = obj
        .entry("content")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(blocks) = content {
        let present = blocks
            .iter()
            .any(|b| b.get("type") == Some(&json!("text")) && b.get("text") == Some(&json!(text)));
        if !present {
            blocks.push(json!({"type": "text", "text": text}));
        }
    }
}

fn list_tools_result(obj: &mut Map<String, Value>, to: Revision) -> bool {
    let Some(Value::Array(tools)) = obj.get_mut("tools") else {
        return false;
    };
    let mut changed = false;
    for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
        match to.facts().structured_content {
            StructuredContent::AnyValue => {}
            StructuredContent::Absent => changed |= tool.remove("outputSchema").is_some(),
            StructuredContent::ObjectOnly => {
                if let Some(schema) = tool.get_mut("outputSchema") {
                    let is_object = schema.get("type") == Some(&json!("object"));
                    if !is_object {
                        let inner = schema.take();
                        *schema = json!({
                            "type": "object",
                            "properties": { "result": inner },
                            "required": ["result"],
                        });
                        changed = true;
                    }
                }
            }
        }
    }
    changed
}

fn prompt_result(obj: &mut Map<String, Value>, to: Revision) -> bool {
    let Some(Value::Array(messages)) = obj.get_mut("messages") else {
        return false;
    };
    let mut changed = false;
    for m in messages.iter_mut() {
        if let Some(block) = m.get_mut("content") {
            changed |= lower_block(block, to);
        }
    }
    changed
}

fn lower_blocks(blocks: &mut [Value], to: Revision) -> bool {
    blocks
        .iter_mut()
        .fold(false, |changed, b| lower_block(b, to) | changed)
}

/// Rewrites one content block the receiver's revision lacks into a text block.
fn lower_block(block: &mut Value, to: Revision) -> bool {
    let ty = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let text = match ty {
        "audio" if to < Revision::V2025_03_26 => format!(
            "[audio content ({}) omitted: this client's protocol revision has no audio]",
            block
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("unknown type")
        ),
        "resource_link" if to < Revision::V2025_06_18 => {
            let uri = block.get("uri").and_then(Value::as_str).unwrap_or_default();
            let name = block.get("name").and_then(Value::as_str).unwrap_or(uri);
            format!("[resource link: {name} <{uri}>]")
        }
        _ => return false,
    };
    *block = json!({"type": "text", "text": text});
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use Revision::*;

    fn lower(method: &str, raw: &str, from: Revision, to: Revision) -> Value {
        serde_json::from_str(&lower_result(method, raw, from, to).unwrap()).unwrap()
    }

    #[test]
    fn unchanged_results_are_borrowed() {
        let raw = r#"{"content":[{"type":"text","text":"x"}],"x-ext":1}"#;
        assert!(matches!(
            lower_result("tools/call", raw, V2025_06_18, V2025_11_25).unwrap(),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn stamping_a_modern_result_keeps_its_bytes_and_matches_the_general_path() {
        let info = json!({"name": "mcpx", "version": "0.1.0"});
        let stamp = Stamp {
            server_info: Some(&info),
        };
        let cases = [
            // No _meta: appended, the rest kept byte for byte.
            (
                "tools/call",
                r#"{"z":1, "content":[{"type":"text","text":"x"}],"resultType":"complete"}"#,
            ),
            // _meta with the upstream's serverInfo and a key of its own: replaced, kept.
            (
                "tools/call",
                r#"{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"},"k":2},"y":[1]}"#,
            ),
            (
                "tools/list",
                r#"{"tools":[],"resultType":"complete","ttlMs":5,"cacheScope":"public"}"#,
            ),
            ("tools/call", "{\"resultType\":\"complete\"}"),
        ];
        for (method, raw) in cases {
            let fast = lower_result_stamped(method, raw, V2026_07_28, V2026_07_28, stamp).unwrap();
            assert!(stamp_in_place(method, raw, stamp).is_some(), "{raw}");
            let fast: Value = serde_json::from_str(&fast).unwrap();
            let mut expected: Value = serde_json::from_str(raw).unwrap();
            let meta = expected
                .as_object_mut()
                .unwrap()
                .entry("_meta")
                .or_insert_with(|| json!({}));
            meta[crate::meta::SERVER_INFO] = info.clone();
            assert_eq!(fast, expected, "{raw}");
        }
        let raw = r#"{"z":1, "content":[],"resultType":"complete"}"#;
        let out = lower_result_stamped("tools/call", raw, V2026_07_28, V2026_07_28, stamp).unwrap();
        assert!(
            out.starts_with(r#"{"z":1, "content":[],"resultType":"complete","#),
            "{out}"
        );
        // An incomplete envelope takes the general path, which completes it.
        assert!(
            stamp_in_place(
                "tools/list",
                r#"{"tools":[],"resultType":"complete"}"#,
                stamp
            )
            .is_none()
        );
        assert!(stamp_in_place("tools/call", r#"{"content":[]}"#, stamp).is_none());
    }

    #[test]
    fn envelope_added_for_modern_removed_for_legacy() {
        let v = lower("tools/list", r#"{"tools":[]}"#, V2025_11_25, V2026_07_28);
        assert_eq!(
            v,
            json!({"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"})
        );
        let v = lower("tools/call", r#"{"content":[]}"#, V2025_11_25, V2026_07_28);
        assert_eq!(v, json!({"content":[],"resultType":"complete"}));
        let v = lower(
            "tools/list",
            r#"{"tools":[],"resultType":"complete","ttlMs":5,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"1"}}}"#,
            V2026_07_28,
            V2025_06_18,
        );
        assert_eq!(v, json!({"tools":[]}));
    }

    #[test]
    fn structured_content_per_h7() {
        let raw = r#"{"content":[],"structuredContent":[1,2],"resultType":"complete"}"#;
        let v = lower("tools/call", raw, V2026_07_28, V2025_11_25);
        assert_eq!(v["structuredContent"], json!({"result":[1,2]}));
        assert_eq!(v["content"], json!([{"type":"text","text":"[1,2]"}]));
        let v = lower("tools/call", raw, V2026_07_28, V2025_03_26);
        assert!(v.get("structuredContent").is_none());
        assert_eq!(v["content"], json!([{"type":"text","text":"[1,2]"}]));
        let list = r#"{"tools":[{"name":"t","inputSchema":{"type":"object"},"outputSchema":{"type":"array"}}]}"#;
        let v = lower("tools/list", list, V2026_07_28, V2025_06_18);
        assert_eq!(
            v["tools"][0]["outputSchema"]["properties"]["result"],
            json!({"type":"array"})
        );
        let v = lower("tools/list", list, V2026_07_28, V2024_11_05);
        assert!(v["tools"][0].get("outputSchema").is_none());
    }

    #[test]
    fn content_blocks_older_revisions_lack() {
        let raw = r#"{"content":[{"type":"audio","data":"AA==","mimeType":"audio/wav"},{"type":"resource_link","uri":"file:///a","name":"a"}]}"#;
        let v = lower("tools/call", raw, V2025_06_18, V2024_11_05);
        assert_eq!(v["content"][0]["type"], "text");
        assert_eq!(v["content"][1]["text"], "[resource link: a <file:///a>]");
        let v = lower("tools/call", raw, V2025_06_18, V2025_03_26);
        assert_eq!(v["content"][0]["type"], "audio");
        assert_eq!(v["content"][1]["type"], "text");
    }
}
