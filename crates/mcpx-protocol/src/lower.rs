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
//!
//! Requests go the other way only for sampling: [`check_sampling_request`] and
//! [`lower_sampling_request`] are what a broker applies to an upstream's
//! `sampling/createMessage` before it puts the request to a host (registers E-7, E-16,
//! E-23, E-27, E-31). Results of sampling pass upward unchanged.

pub mod elicitation;

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::jsonrpc::{Hint, Json, Members, append_member, splice};
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
    pub server_info: Option<&'a ServerInfo>,
}

/// A sender's `Implementation` (name, version, ...), with its JSON text encoded once:
/// it is stamped on every result a modern receiver gets.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    value: Value,
    json: String,
}

impl ServerInfo {
    /// `value`, an `Implementation` object.
    pub fn new(value: Value) -> ServerInfo {
        let json = value.to_string();
        ServerInfo { value, json }
    }

    /// The `Implementation` object.
    pub fn value(&self) -> &Value {
        &self.value
    }
}

/// `"io.modelcontextprotocol/serverInfo"`, quoted as a JSON key (it has nothing to
/// escape).
const SERVER_INFO_KEY: &str = "\"io.modelcontextprotocol/serverInfo\"";

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
    let (meta, result_type) = raw.result_hints();
    let known = Text::Valid(ResultHints {
        meta,
        result_type,
        server_info: raw.result_meta_member(crate::meta::SERVER_INFO),
    });
    Ok(match lower(method, text, from, to, stamp, known)? {
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
    lower(method, raw, from, to, stamp, Text::Unchecked)
}

/// Whether a result's text is known to be valid JSON (a `Json`'s), so that reading its
/// members need not check it again.
#[derive(Clone, Copy, PartialEq)]
enum Text {
    /// Valid, with where the decoder saw `_meta` and `resultType` (see `Hints`).
    Valid(ResultHints),
    Unchecked,
}

/// Where a result's `_meta` and `resultType` are in its text, as far as known, and its
/// `_meta`'s `serverInfo` members when the decoder listed `_meta`'s members.
#[derive(Clone, Copy, PartialEq)]
struct ResultHints {
    meta: Hint,
    result_type: Hint,
    server_info: Option<Members>,
}

fn lower<'a>(
    method: &str,
    raw: &'a str,
    from: Revision,
    to: Revision,
    stamp: Stamp<'_>,
    text: Text,
) -> Result<Cow<'a, str>, LowerError> {
    // A result already in the receiver's revision needs nothing.
    let stamping = stamp.server_info.is_some() && to.facts().result_type;
    if from == to && !stamping {
        return Ok(Cow::Borrowed(raw));
    }
    if from == to
        && let Some(stamped) = stamp_in_place(method, raw, stamp, text)
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
    let mut changed = envelope(obj, method, from, to);
    if let (Some(info), true) = (stamp.server_info, to.facts().result_type) {
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(crate::meta::SERVER_INFO.to_owned(), info.value.clone());
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
fn stamp_in_place(method: &str, raw: &str, stamp: Stamp<'_>, text: Text) -> Option<String> {
    let info = stamp.server_info?.json.as_str();
    let members_of = |t| match text {
        Text::Valid(_) => crate::jsonrpc::valid_members(t),
        Text::Unchecked => crate::jsonrpc::members(t),
    };
    let cacheable = CACHEABLE_METHODS.contains(&method);
    // Whether `resultType` is there and where the one `_meta` is: from the decoder's
    // hints when it saw both (a non-cacheable result, such as a tool call's, needs
    // nothing else), else from a walk.
    let meta_at = match text {
        Text::Valid(ResultHints {
            meta: meta @ (Hint::At(..) | Hint::Absent),
            result_type: result_type @ (Hint::At(..) | Hint::Absent),
            ..
        }) if !cacheable => {
            if result_type == Hint::Absent || !raw.starts_with('{') {
                return None;
            }
            meta.span()
        }
        _ => {
            let members = members_of(raw)?;
            let has = |k: &str| members.iter().any(|(name, _)| name == k);
            if !has("resultType") || (cacheable && !(has("ttlMs") && has("cacheScope"))) {
                return None;
            }
            let mut metas = members.iter().filter(|(k, _)| k == "_meta");
            match (metas.next(), metas.next()) {
                (None, _) => None,
                (Some((_, span)), None) => Some(span.clone()),
                (Some(_), Some(_)) => return None,
            }
        }
    };
    let key = SERVER_INFO_KEY;
    match meta_at {
        None => append_member(raw, "\"_meta\"", &format!("{{{key}:{info}}}")),
        // The upstream's `_meta` keeps its keys, order and bytes; only the serverInfo
        // member's value is replaced (or the member appended). Anything unusual (a
        // `_meta` that is not an object, a key given twice) takes the general path.
        Some(span) => {
            let old = raw.get(span.clone())?;
            // From the members the decoder listed, where it did (then the hint names the
            // result's one `_meta`, this one), else from a walk.
            let named = match text {
                Text::Valid(ResultHints {
                    meta: Hint::At(..),
                    server_info: Some(named),
                    ..
                }) => named,
                _ => {
                    let inner = members_of(old)?;
                    let mut named = inner.iter().filter(|(k, _)| k == crate::meta::SERVER_INFO);
                    match (named.next(), named.next()) {
                        (None, _) => Members::None,
                        (Some((_, s)), None) => Members::One(s.start, s.end),
                        (Some(_), Some(_)) => Members::Several,
                    }
                }
            };
            match named {
                Members::None => splice(raw, span.clone(), &append_member(old, key, info)?),
                // The upstream's serverInfo value, replaced where it lies in the result.
                Members::One(start, end) => splice(raw, span.start + start..span.start + end, info),
                Members::Several => None,
            }
        }
    }
}

/// Adds or removes the 2026 result envelope. Returns whether anything changed.
fn envelope(obj: &mut Map<String, Value>, method: &str, from: Revision, to: Revision) -> bool {
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
        // receiver has its server's identity from `initialize` (A-C17, D-C12). Only a
        // result written in a revision that defines the key carries it as protocol data:
        // from a 2025-06-18 or earlier sender it is that sender's own, opaque `_meta`
        // and passes unchanged (register A-C9; 2025-06-18 basic/index §_meta does not
        // reserve `io.modelcontextprotocol/`).
        if let (true, Some(Value::Object(m))) = (
            crate::meta::protocol_keys(from).contains(&crate::meta::SERVER_INFO),
            obj.get_mut("_meta"),
        ) {
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
        "audio" if !to.facts().audio_content => format!(
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

/// Why a `sampling/createMessage` request cannot be put to a host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SamplingRefusal {
    /// The request is malformed (E-16): the broker does not forward it.
    #[error("invalid sampling/createMessage request: {0}")]
    Invalid(String),
    /// It uses tools but the host did not declare `sampling.tools` (E-23).
    #[error(
        "sampling/createMessage uses {0}, but the client did not declare the sampling.tools capability"
    )]
    ToolsNotDeclared(&'static str),
    /// The host's revision cannot represent it (E-7); nothing is dropped silently.
    #[error("sampling/createMessage cannot be shown to a {rev} client: {why}")]
    Unrepresentable {
        /// The host's revision.
        rev: Revision,
        /// What it lacks.
        why: String,
    },
}

/// The blocks of a `SamplingMessage`'s (or result's) `content`: one block or an array.
fn sampling_blocks(content: &Value) -> Vec<&Value> {
    match content {
        Value::Array(blocks) => blocks.iter().collect(),
        block => vec![block],
    }
}

/// Checks what a broker must check in every sampling request it relays (register E-16;
/// 2026-07-28 client/sampling §Messages: messages "MUST contain a `role` field ... and a
/// `content` field"; `messages` and `maxTokens` are required by the schema of every
/// revision; §Message Content Constraints: a user message with tool results "MUST
/// contain ONLY tool results", E-31). `maxTokens` is only checked to be an integer:
/// its value is the host's to respect (E-28). Results are not checked (E-31).
pub fn check_sampling_request(params: &Value) -> Result<(), SamplingRefusal> {
    let bad = |why: String| Err(SamplingRefusal::Invalid(why));
    let Some(messages) = params.get("messages").and_then(Value::as_array) else {
        return bad("params.messages must be an array".into());
    };
    if !params.get("maxTokens").is_some_and(Value::is_i64) {
        return bad("params.maxTokens must be an integer".into());
    }
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str);
        if !matches!(role, Some("user" | "assistant")) {
            return bad(format!(
                "messages[{i}] must have a role of \"user\" or \"assistant\""
            ));
        }
        let Some(content) = m.get("content").filter(|c| c.is_object() || c.is_array()) else {
            return bad(format!("messages[{i}] must have a content"));
        };
        let blocks = sampling_blocks(content);
        let is_result = |b: &&Value| b.get("type").and_then(Value::as_str) == Some("tool_result");
        if role == Some("user") && blocks.iter().any(is_result) && !blocks.iter().all(is_result) {
            return bad(format!(
                "messages[{i}] mixes tool results with other content"
            ));
        }
    }
    Ok(())
}

/// The tool-use fields a sampling request carries (`tools`, `toolChoice`), if any: a
/// host must have declared `sampling.tools` to be sent them (register E-23; schema
/// 2025-11-25 and 2026-07-28 CreateMessageRequestParams.tools/toolChoice: "The client
/// MUST return an error if this field is provided but ClientCapabilities.sampling.tools
/// is not declared").
pub fn sampling_tool_fields(params: &Value) -> Option<&'static str> {
    ["tools", "toolChoice"]
        .into_iter()
        .find(|k| params.get(*k).is_some())
}

/// Lowers a (checked) sampling request written for a newer revision to `to` (register
/// E-7). Before 2025-11-25 a `SamplingMessage` holds exactly one block (2024-11-05: text
/// or image; 2025-03-26 and 2025-06-18 add audio): a one-element content array is
/// unwrapped; tools, `toolChoice`, tool_use/tool_result blocks, several blocks and, for
/// 2024-11-05, audio cannot be represented, so the request is refused rather than cut.
/// Everything else, `_meta` of blocks and messages included, is kept (E-27), and so is
/// `includeContext` (E-8) and `maxTokens` (E-28).
pub fn lower_sampling_request(params: &mut Value, to: Revision) -> Result<(), SamplingRefusal> {
    let facts = to.facts();
    if facts.sampling_tools {
        return Ok(());
    }
    let refuse = |why: String| Err(SamplingRefusal::Unrepresentable { rev: to, why });
    if let Some(field) = sampling_tool_fields(params) {
        return refuse(format!("it has no {field}"));
    }
    let Some(messages) = params.get_mut("messages").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    for (i, m) in messages.iter_mut().enumerate() {
        let Some(content) = m.get_mut("content") else {
            continue;
        };
        if let Value::Array(blocks) = content {
            if blocks.len() != 1 {
                return refuse(format!(
                    "messages[{i}] has {} content blocks, and it allows exactly one",
                    blocks.len()
                ));
            }
            let block = blocks.remove(0);
            *content = block;
        }
        let ty = content.get("type").and_then(Value::as_str).unwrap_or("");
        let known = match ty {
            "text" | "image" => true,
            "audio" => facts.audio_content,
            _ => false,
        };
        if !known {
            return refuse(format!("messages[{i}] has {ty:?} content"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use Revision::*;

    /// Valid text, nothing known of where its members are.
    const VALID: Text = Text::Valid(ResultHints {
        meta: Hint::Unknown,
        result_type: Hint::Unknown,
        server_info: None,
    });

    /// Valid text, with what the decoder saw of it as a response's result.
    fn hinted(result: &str) -> Text {
        let frame = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#);
        let json = crate::codec::parse_frame(frame, &crate::Limits::default())
            .unwrap()
            .into_result_json()
            .unwrap();
        assert_eq!(json.as_str(), result);
        let (meta, result_type) = json.result_hints();
        Text::Valid(ResultHints {
            meta,
            result_type,
            server_info: json.result_meta_member(crate::meta::SERVER_INFO),
        })
    }

    fn lower(method: &str, raw: &str, from: Revision, to: Revision) -> Value {
        serde_json::from_str(&lower_result(method, raw, from, to).unwrap()).unwrap()
    }

    #[test]
    fn the_server_info_key_is_its_name_quoted() {
        assert_eq!(
            serde_json::to_string(crate::meta::SERVER_INFO).unwrap(),
            SERVER_INFO_KEY
        );
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
        let server_info = ServerInfo::new(info.clone());
        let stamp = Stamp {
            server_info: Some(&server_info),
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
            // An empty `_meta`, and one whose keys come before and after serverInfo.
            ("tools/call", r#"{"resultType":"complete","_meta":{ }}"#),
            (
                "tools/call",
                r#"{"resultType":"complete","_meta":{"b":1,"io.modelcontextprotocol/serverInfo":"x","a":[{}]}}"#,
            ),
        ];
        for (method, raw) in cases {
            let fast = lower_result_stamped(method, raw, V2026_07_28, V2026_07_28, stamp).unwrap();
            // Every way of reading the members: checking, trusting valid text, and from
            // where the decoder saw them.
            let checked = stamp_in_place(method, raw, stamp, Text::Unchecked);
            assert!(checked.is_some(), "{raw}");
            assert_eq!(stamp_in_place(method, raw, stamp, VALID), checked, "{raw}");
            assert_eq!(
                stamp_in_place(method, raw, stamp, hinted(raw)),
                checked,
                "{raw}"
            );
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
                stamp,
                VALID
            )
            .is_none()
        );
        let raw = r#"{"tools":[],"resultType":"complete"}"#;
        assert!(stamp_in_place("tools/list", raw, stamp, hinted(raw)).is_none());
        for text in [VALID, hinted(r#"{"content":[]}"#)] {
            assert!(stamp_in_place("tools/call", r#"{"content":[]}"#, stamp, text).is_none());
        }
        // The upstream's `_meta` keeps its order and bytes around the replaced value.
        let raw = r#"{"resultType":"complete","_meta":{"b":1, "io.modelcontextprotocol/serverInfo":{"name":"up"},"a":2}}"#;
        assert_eq!(
            stamp_in_place("tools/call", raw, stamp, hinted(raw)).unwrap(),
            r#"{"resultType":"complete","_meta":{"b":1, "io.modelcontextprotocol/serverInfo":{"name":"mcpx","version":"0.1.0"},"a":2}}"#
        );
        // Unusual shapes take the general path: `_meta` not an object, a key twice.
        for raw in [
            r#"{"resultType":"complete","_meta":[1]}"#,
            r#"{"resultType":"complete","_meta":{},"_meta":{}}"#,
            r#"{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":1,"io.modelcontextprotocol/serverInfo":2}}"#,
        ] {
            for text in [VALID, hinted(raw)] {
                assert!(
                    stamp_in_place("tools/call", raw, stamp, text).is_none(),
                    "{raw}"
                );
            }
        }
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
    fn server_info_meta_is_protocol_data_only_from_modern_senders() {
        // A-C9: from a 2025-06-18 sender the key is its own data and passes unchanged.
        let raw = r#"{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"own"}}}"#;
        let v = lower("tools/call", raw, V2025_06_18, V2025_03_26);
        assert_eq!(
            v["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "own"
        );
        // From a 2026-07-28 sender it is the sender's identity: removed for legacy.
        let v = lower("tools/call", raw, V2026_07_28, V2025_03_26);
        assert!(v.get("_meta").is_none(), "{v}");
    }

    #[test]
    fn embedded_resources_without_mime_type_pass_and_prompt_links_lower() {
        // D-C8: no mimeType is added or required; D-C9: resource_link in prompts.
        let raw = r#"{"messages":[{"role":"user","content":{"type":"resource_link","uri":"test://l","name":"l"}},{"role":"user","content":{"type":"resource","resource":{"uri":"test://r","text":"t"}}}]}"#;
        for to in [
            V2024_11_05,
            V2025_03_26,
            V2025_06_18,
            V2025_11_25,
            V2026_07_28,
        ] {
            let v = lower("prompts/get", raw, V2025_06_18, to);
            assert_eq!(
                v["messages"][1]["content"],
                json!({"type":"resource","resource":{"uri":"test://r","text":"t"}}),
                "{to}"
            );
            let link = &v["messages"][0]["content"];
            if to >= V2025_06_18 {
                assert_eq!(link["type"], "resource_link", "{to}");
            } else {
                assert_eq!(link["text"], "[resource link: l <test://l>]", "{to}");
            }
        }
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

    fn sampling(messages: Value) -> Value {
        json!({"messages": messages, "maxTokens": 50, "includeContext": "thisServer"})
    }

    /// E-16, E-31: role, content, messages and maxTokens are checked; a user message
    /// mixing tool results with other content is refused, an assistant one is not.
    #[test]
    fn sampling_requests_are_checked() {
        let text = json!({"type": "text", "text": "hi"});
        assert!(
            check_sampling_request(&sampling(json!([{"role": "user", "content": text}]))).is_ok()
        );
        for bad in [
            json!({"maxTokens": 5}),
            json!({"messages": [{"role": "user", "content": text}]}),
            sampling(json!([{"content": text}])),
            sampling(json!([{"role": "user"}])),
            sampling(json!([{"role": "system", "content": text}])),
            sampling(json!([{"role": "user", "content": [
                {"type": "tool_result", "toolUseId": "a", "content": []}, text]}])),
        ] {
            assert!(
                matches!(
                    check_sampling_request(&bad),
                    Err(SamplingRefusal::Invalid(_))
                ),
                "{bad}"
            );
        }
        let mixed = json!([{"role": "assistant", "content": [
            text, {"type": "tool_use", "id": "a", "name": "t", "input": {}},
            {"type": "tool_use", "id": "b", "name": "t", "input": {}}]}]);
        assert!(check_sampling_request(&sampling(mixed)).is_ok());
        let results = json!([{"role": "user", "content": [
            {"type": "tool_result", "toolUseId": "a", "content": []},
            {"type": "tool_result", "toolUseId": "b", "content": []}]}]);
        assert!(check_sampling_request(&sampling(results)).is_ok());
    }

    /// E-7, E-8, E-27, E-28: lowering per host revision.
    #[test]
    fn sampling_requests_lower_per_revision() {
        let tool_use = json!({"type": "tool_use", "id": "a", "name": "t", "input": {},
                              "_meta": {"cache": "k1"}});
        let tool_result = json!({"type": "tool_result", "toolUseId": "a", "content": [],
                                 "_meta": {"cache": "k2"}});
        let with_tools = sampling(json!([
            {"role": "assistant", "content": [tool_use]},
            {"role": "user", "content": tool_result}]));
        // 2025-11-25 and later: unchanged, tool content _meta included (E-27).
        for to in [V2025_11_25, V2026_07_28] {
            let mut p = with_tools.clone();
            lower_sampling_request(&mut p, to).unwrap();
            assert_eq!(p, with_tools, "{to}");
        }
        // Before: tool content, tools and toolChoice cannot be represented.
        for to in [V2024_11_05, V2025_03_26, V2025_06_18] {
            let mut p = with_tools.clone();
            assert!(
                matches!(
                    lower_sampling_request(&mut p, to),
                    Err(SamplingRefusal::Unrepresentable { .. })
                ),
                "{to}"
            );
            for field in ["tools", "toolChoice"] {
                let mut p =
                    sampling(json!([{"role": "user", "content": {"type": "text", "text": "x"}}]));
                p[field] = if field == "tools" {
                    json!([])
                } else {
                    json!({"mode": "auto"})
                };
                let e = lower_sampling_request(&mut p, to).unwrap_err();
                assert!(e.to_string().contains(field), "{e}");
            }
            let mut p = sampling(json!([{"role": "user", "content": [
                {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]));
            assert!(lower_sampling_request(&mut p, to).is_err(), "{to}");
        }
        // A one-element array is unwrapped; its _meta, includeContext and maxTokens kept.
        let block = json!({"type": "text", "text": "x", "_meta": {"k": 1}});
        let mut p = sampling(json!([{"role": "user", "content": [block]}]));
        lower_sampling_request(&mut p, V2025_06_18).unwrap();
        assert_eq!(p, sampling(json!([{"role": "user", "content": block}])));
        // Audio exists from 2025-03-26.
        let audio = sampling(json!([{"role": "user", "content":
            {"type": "audio", "data": "AA==", "mimeType": "audio/wav"}}]));
        let mut p = audio.clone();
        lower_sampling_request(&mut p, V2025_03_26).unwrap();
        assert_eq!(p, audio);
        let mut p = audio.clone();
        assert!(lower_sampling_request(&mut p, V2024_11_05).is_err());
    }

    #[test]
    fn sampling_tool_fields_are_found() {
        assert_eq!(sampling_tool_fields(&json!({"tools": []})), Some("tools"));
        assert_eq!(
            sampling_tool_fields(&json!({"toolChoice": {}})),
            Some("toolChoice")
        );
        assert_eq!(sampling_tool_fields(&json!({"messages": []})), None);
    }
}
