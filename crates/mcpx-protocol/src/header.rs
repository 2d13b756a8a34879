//! The 2026-07-28 Streamable HTTP request headers: building them from a body (client)
//! and checking them against the body (server).
//!
//! 2026-07-28 basic/transports/streamable-http §Request Metadata Headers: every POST
//! carries `MCP-Protocol-Version` and `Mcp-Method`; `tools/call`, `prompts/get` and
//! `resources/read` also carry `Mcp-Name`; each tool argument annotated
//! `"x-mcp-header": "<Name>"` in the tool's `inputSchema` is mirrored into
//! `Mcp-Param-<Name>`. Values that are not plain visible ASCII, have leading or
//! trailing whitespace, or look like the sentinel travel as `=?base64?<b64>?=`
//! (§Value Encoding). A missing, malformed or mismatching header is a `HeaderMismatch`
//! (-32020, HTTP 400, §Server Validation).

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value;

use crate::classify::Rejection;
use crate::error::HEADER_MISMATCH;
use crate::jsonrpc::{Frame, Kind, member};
use crate::method::NAMED_METHODS;

/// `MCP-Protocol-Version`.
pub const PROTOCOL_VERSION: &str = "MCP-Protocol-Version";
/// `Mcp-Method`.
pub const METHOD: &str = "Mcp-Method";
/// `Mcp-Name`.
pub const NAME: &str = "Mcp-Name";
/// The prefix of tool-parameter headers.
pub const PARAM_PREFIX: &str = "Mcp-Param-";
/// `Mcp-Session-Id` (legacy; compared case-insensitively, register B-C21).
pub const SESSION_ID: &str = "Mcp-Session-Id";

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// Encodes a header value, using the Base64 sentinel form when the plain form is not
/// safe (§Value Encoding).
pub fn encode_value(v: &str) -> String {
    let plain_safe = !v.is_empty()
        && v.bytes().all(|b| (0x20..=0x7e).contains(&b) || b == b'\t')
        && !v.starts_with([' ', '\t'])
        && !v.ends_with([' ', '\t'])
        && (!v.starts_with(SENTINEL_START) || !v.ends_with(SENTINEL_END));
    if plain_safe {
        v.to_owned()
    } else {
        format!("{SENTINEL_START}{}{SENTINEL_END}", B64.encode(v.as_bytes()))
    }
}

/// A header value that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// The sentinel form's Base64 is not Base64.
    #[error("invalid Base64 in header value: {0}")]
    Base64(#[from] base64::DecodeError),
    /// The sentinel form's bytes are not UTF-8.
    #[error("Base64 header value is not UTF-8")]
    NotUtf8,
    /// A plain value with characters outside visible ASCII, space and tab.
    #[error("header value contains invalid characters")]
    Characters,
}

/// Decodes a header value, undoing the Base64 sentinel form; a plain value (nearly
/// every one) is borrowed.
pub fn decode_value(v: &str) -> Result<Cow<'_, str>, ValueError> {
    match v
        .strip_prefix(SENTINEL_START)
        .and_then(|r| r.strip_suffix(SENTINEL_END))
    {
        Some(b64) => {
            let bytes = B64.decode(b64)?;
            String::from_utf8(bytes)
                .map(Cow::Owned)
                .map_err(|_| ValueError::NotUtf8)
        }
        None => {
            if v.bytes().all(|b| (0x20..=0x7e).contains(&b) || b == b'\t') {
                Ok(Cow::Borrowed(v))
            } else {
                Err(ValueError::Characters)
            }
        }
    }
}

/// One `x-mcp-header` annotation of a tool's `inputSchema`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// The `<Name>` of `Mcp-Param-<Name>`.
    pub name: String,
    /// The chain of `properties` keys from the schema root to the annotated property.
    pub path: Vec<String>,
}

/// An `x-mcp-header` annotation that makes its tool invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnotationError {
    /// Its value is not a string.
    #[error("x-mcp-header must be a string")]
    NotString,
    /// It is not reached through `properties` alone.
    #[error("x-mcp-header {0:?} is not on a property statically reachable through `properties`")]
    Unreachable(String),
    /// Its name is not an HTTP token.
    #[error("x-mcp-header {0:?} is not an HTTP token")]
    NotToken(String),
    /// Its property is of another type.
    #[error(
        "x-mcp-header {name:?} is on a property of type {ty:?}; only string, integer and boolean are allowed"
    )]
    Type {
        /// The header's name.
        name: String,
        /// The property's `type`, if it has one.
        ty: Option<String>,
    },
    /// Two annotations name one header.
    #[error("x-mcp-header {0:?} is not unique")]
    Duplicate(String),
}

/// Reads and checks a tool's `x-mcp-header` annotations (§Schema Extension). An
/// invalid annotation makes the tool invalid: the error names why.
// A message stays the error: the gateway keeps it with its catalog and warns with it,
// and a message is all it uses ([`AnnotationError`] has the cases).
pub fn param_headers(input_schema: &Value) -> Result<Vec<ParamHeader>, String> {
    annotations(input_schema).map_err(|e| e.to_string())
}

/// [`param_headers`], its error typed.
pub fn annotations(input_schema: &Value) -> Result<Vec<ParamHeader>, AnnotationError> {
    let mut out = Vec::new();
    collect(input_schema, &mut Vec::new(), true, &mut out)?;
    let mut seen = std::collections::HashSet::new();
    for h in &out {
        if !seen.insert(h.name.to_ascii_lowercase()) {
            return Err(AnnotationError::Duplicate(h.name.clone()));
        }
    }
    Ok(out)
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn collect(
    node: &Value,
    path: &mut Vec<String>,
    reachable: bool,
    out: &mut Vec<ParamHeader>,
) -> Result<(), AnnotationError> {
    let Some(obj) = node.as_object() else {
        return Ok(());
    };
    if let Some(h) = obj.get("x-mcp-header") {
        let name = h.as_str().ok_or(AnnotationError::NotString)?;
        if !reachable || path.is_empty() {
            return Err(AnnotationError::Unreachable(name.to_owned()));
        }
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(AnnotationError::NotToken(name.to_owned()));
        }
        let ty = obj.get("type").and_then(Value::as_str);
        if !matches!(ty, Some("string" | "integer" | "boolean")) {
            return Err(AnnotationError::Type {
                name: name.to_owned(),
                ty: ty.map(str::to_owned),
            });
        }
        out.push(ParamHeader {
            name: name.to_owned(),
            path: path.clone(),
        });
    }
    for (key, child) in obj {
        match key.as_str() {
            "properties" => {
                if let Some(props) = child.as_object() {
                    for (prop, schema) in props {
                        path.push(prop.clone());
                        collect(schema, path, reachable, out)?;
                        path.pop();
                    }
                }
            }
            // Anything else may hide an annotation that is not statically reachable.
            _ => match child {
                Value::Object(_) => collect(child, path, false, out)?,
                Value::Array(items) => {
                    for item in items {
                        collect(item, path, false, out)?;
                    }
                }
                _ => {}
            },
        }
    }
    Ok(())
}

/// The header form of an argument value, or `None` when the header is omitted (absent
/// or null) or the value's type cannot be carried.
fn arg_header_value(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

fn lookup<'a>(args: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(args, |v, k| v.get(k))
}

/// The value `Mcp-Name` mirrors, for methods that have one. A `name` is read where
/// the decoder saw it (or the request's builder put it), not found by a walk of the
/// params: a host's request and mcpx's own request upstream each read it here.
fn name_value(frame: &Frame) -> Option<std::borrow::Cow<'_, str>> {
    let method = frame.method()?;
    let (_, field) = NAMED_METHODS.iter().find(|(m, _)| *m == method)?;
    let raw = if *field == "name" {
        frame.params_name()?
    } else {
        crate::jsonrpc::first_member(frame.params()?, field)?
    };
    crate::jsonrpc::string_value(raw)
}

/// The headers a modern client sends with `frame` (a request written in `revision`).
/// `tool_params` gives the `x-mcp-header` annotations of a called tool by its name: it
/// is asked once, for a `tools/call`, with the name `Mcp-Name` carries (so the params
/// are searched for it once). The standard names are static; only `Mcp-Param-*` names
/// are made.
pub fn build(
    frame: &Frame,
    revision: &str,
    tool_params: impl FnOnce(&str) -> Vec<ParamHeader>,
) -> Vec<(Cow<'static, str>, String)> {
    let mut out = Vec::with_capacity(3);
    out.push((Cow::Borrowed(PROTOCOL_VERSION), revision.to_owned()));
    let Some(method) = frame.method() else {
        return out;
    };
    out.push((Cow::Borrowed(METHOD), method.to_owned()));
    let Some(name) = name_value(frame) else {
        return out;
    };
    let params = if method == "tools/call" {
        tool_params(&name)
    } else {
        Vec::new()
    };
    out.push((Cow::Borrowed(NAME), encode_value(&name)));
    if !params.is_empty() {
        let args = frame
            .params()
            .and_then(|p| member(p, "arguments"))
            .and_then(|a| serde_json::from_str::<Value>(a).ok())
            .unwrap_or(Value::Null);
        for h in &params {
            if let Some(v) = lookup(&args, &h.path).and_then(arg_header_value) {
                out.push((
                    Cow::Owned(format!("{PARAM_PREFIX}{}", h.name)),
                    encode_value(&v),
                ));
            }
        }
    }
    out
}

/// Checks the standard headers of a modern POST against its body (§Server Validation):
/// `Mcp-Method` on every request and `Mcp-Name` where the method has one.
/// `get(name)` looks a header up case-insensitively. `MCP-Protocol-Version` against
/// `_meta` is checked by `classify::classify_http`.
pub fn validate<'h>(
    frame: &Frame,
    get: impl Fn(&str) -> Option<&'h str>,
    params: &[ParamHeader],
) -> Result<(), Rejection> {
    let mismatch = |m: String| Rejection {
        code: HEADER_MISMATCH,
        http_status: 400,
        message: format!("Header mismatch: {m}"),
        data: None,
    };
    if frame.kind() != Kind::Request {
        // 2026-07-28 defines no header requirements for notification POSTs (register
        // B-C11): nothing to check beyond the version, done by classification.
        return Ok(());
    }
    let method = frame.method().unwrap_or_default();
    match get(METHOD) {
        None => return Err(mismatch(format!("missing {METHOD} header"))),
        Some(h) if h != method => {
            return Err(mismatch(format!(
                "{METHOD} header value '{h}' does not match body value '{method}'"
            )));
        }
        Some(_) => {}
    }
    if let Some(body) = name_value(frame) {
        let header = get(NAME).ok_or_else(|| mismatch(format!("missing {NAME} header")))?;
        let decoded = decode_value(header).map_err(|e| mismatch(format!("{NAME}: {e}")))?;
        if decoded != body {
            return Err(mismatch(format!(
                "{NAME} header value '{decoded}' does not match body value '{body}'"
            )));
        }
    }
    if !params.is_empty() {
        let args = frame
            .params()
            .and_then(|p| member(p, "arguments"))
            .and_then(|a| serde_json::from_str::<Value>(a).ok())
            .unwrap_or(Value::Null);
        for h in params {
            let header_name = format!("{PARAM_PREFIX}{}", h.name);
            let body = lookup(&args, &h.path).filter(|v| !v.is_null());
            match (get(&header_name), body) {
                (None, None) => {}
                (None, Some(_)) => {
                    return Err(mismatch(format!("missing {header_name} header")));
                }
                (Some(_), None) => {
                    return Err(mismatch(format!(
                        "{header_name} header present but the argument is absent"
                    )));
                }
                (Some(h_val), Some(b)) => {
                    let decoded =
                        decode_value(h_val).map_err(|e| mismatch(format!("{header_name}: {e}")))?;
                    let equal = match b {
                        // §Server Validation: compare integers numerically (42.0 == 42).
                        Value::Number(n) => decoded
                            .parse::<f64>()
                            .ok()
                            .zip(n.as_f64())
                            .is_some_and(|(x, y)| x == y),
                        other => arg_header_value(other).as_deref() == Some(&*decoded),
                    };
                    if !equal {
                        return Err(mismatch(format!(
                            "{header_name} header value '{decoded}' does not match the body"
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encoding_follows_the_spec_examples() {
        // 2026-07-28 streamable-http §Value Encoding, "Encoding examples".
        assert_eq!(encode_value("us-west1"), "us-west1");
        assert_eq!(
            encode_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(encode_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(encode_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            encode_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        for v in [
            "us-west1",
            "Hello, 世界",
            " padded ",
            "line1\nline2",
            "=?base64?literal?=",
        ] {
            assert_eq!(decode_value(&encode_value(v)).unwrap(), v);
        }
        assert!(decode_value("=?base64?!!!?=").is_err());
    }

    #[test]
    fn annotations_are_checked() {
        let ok = json!({"type":"object","properties":{
            "region":{"type":"string","x-mcp-header":"Region"},
            "opts":{"type":"object","properties":{"dry":{"type":"boolean","x-mcp-header":"Dry"}}}}});
        let hs = param_headers(&ok).unwrap();
        assert_eq!(hs.len(), 2);
        assert!(hs.contains(&ParamHeader {
            name: "Dry".into(),
            path: vec!["opts".into(), "dry".into()]
        }));
        for bad in [
            json!({"properties":{"a":{"type":"number","x-mcp-header":"A"}}}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":"A B"}}}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"type":"string","x-mcp-header":"a"}}}),
            json!({"properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}),
            json!({"anyOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}),
        ] {
            assert!(param_headers(&bad).is_err(), "{bad}");
        }
    }
}
