//! The schema tap: validates frames against a revision's JSON Schema.
//!
//! Every frame mcpx sends is valid for its receiver's revision (DESIGN.md principle 3);
//! tests hold it to that by passing each frame they see through [`SchemaTap`]. A frame
//! is checked against `JSONRPCMessage` and, where the method is known, against the
//! definition of that exact message type (`CallToolRequest`, `ListToolsResult`, ...).
//!
//! The `jsonschema` crate is built without default features, so no remote `$ref` is
//! ever fetched; each (revision, definition) pair is compiled once and cached.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use jsonschema::Validator;
use mcpx_protocol::Revision;
use parking_lot::Mutex;
use serde_json::{Value, json};

/// A frame that its revision's schema rejects, or a tap that could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TapError {
    /// The frame is invalid: which definition rejected it, and why.
    #[error("{revision}: frame is not a valid {definition}: {reasons}\nframe: {frame}")]
    Invalid {
        /// The revision whose schema was used.
        revision: Revision,
        /// The definition that rejected it.
        definition: String,
        /// The validator's messages, `; `-joined.
        reasons: String,
        /// The frame (truncated).
        frame: String,
    },
    /// The frame is not JSON.
    #[error("frame is not JSON: {0}")]
    NotJson(String),
    /// The schema could not be read or compiled.
    #[error("schema tap setup: {0}")]
    Setup(String),
}

struct RevSchema {
    doc: Value,
    defs_key: &'static str,
    /// method name -> definition name, from `properties.method.const`.
    by_method: HashMap<String, String>,
}

/// Validators for all five revisions, built lazily.
pub struct SchemaTap {
    schemas: Vec<Result<RevSchema, TapError>>,
    cache: Mutex<HashMap<(Revision, String), Arc<Validator>>>,
}

/// The process-wide tap.
pub fn tap() -> &'static SchemaTap {
    static TAP: OnceLock<SchemaTap> = OnceLock::new();
    TAP.get_or_init(SchemaTap::load)
}

fn method_const(node: &Value) -> Option<&str> {
    let m = node.get("properties")?.get("method")?;
    if let Some(c) = m.get("const").and_then(Value::as_str) {
        return Some(c);
    }
    if let Some([only]) = m.get("enum").and_then(Value::as_array).map(Vec::as_slice) {
        return only.as_str();
    }
    node.get("allOf")?.as_array()?.iter().find_map(method_const)
}

impl SchemaTap {
    fn load() -> SchemaTap {
        let schemas = Revision::ALL
            .into_iter()
            .map(|rev| {
                let text =
                    crate::shared::schema_text(rev).map_err(|e| TapError::Setup(e.to_string()))?;
                let doc: Value =
                    serde_json::from_str(&text).map_err(|e| TapError::Setup(e.to_string()))?;
                let defs_key = if doc.get("$defs").is_some() {
                    "$defs"
                } else {
                    "definitions"
                };
                let mut by_method = HashMap::new();
                if let Some(defs) = doc.get(defs_key).and_then(Value::as_object) {
                    for (name, node) in defs {
                        if let Some(m) = method_const(node) {
                            // Prefer the message type over unions that inline one member.
                            if name.ends_with("Request") || name.ends_with("Notification") {
                                by_method.insert(m.to_owned(), name.clone());
                            }
                        }
                    }
                }
                Ok(RevSchema {
                    doc,
                    defs_key,
                    by_method,
                })
            })
            .collect();
        SchemaTap {
            schemas,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn schema(&self, rev: Revision) -> Result<&RevSchema, TapError> {
        self.schemas[rev as usize].as_ref().map_err(Clone::clone)
    }

    /// Whether `rev`'s schema has a definition called `name`.
    pub fn has_definition(&self, rev: Revision, name: &str) -> bool {
        self.schema(rev)
            .ok()
            .and_then(|s| s.doc.get(s.defs_key))
            .and_then(|d| d.get(name))
            .is_some()
    }

    /// The message-type definition a method's request or notification uses in `rev`.
    pub fn definition_for_method(&self, rev: Revision, method: &str) -> Option<String> {
        self.schema(rev).ok()?.by_method.get(method).cloned()
    }

    fn validator(&self, rev: Revision, def: &str) -> Result<Arc<Validator>, TapError> {
        let key = (rev, def.to_owned());
        if let Some(v) = self.cache.lock().get(&key) {
            return Ok(v.clone());
        }
        let s = self.schema(rev)?;
        if !self.has_definition(rev, def) {
            return Err(TapError::Setup(format!("{rev} has no definition {def}")));
        }
        let mut doc = s.doc.clone();
        if let Some(obj) = doc.as_object_mut() {
            obj.insert(
                "allOf".to_owned(),
                json!([{ "$ref": format!("#/{}/{def}", s.defs_key) }]),
            );
        }
        let v =
            Arc::new(jsonschema::validator_for(&doc).map_err(|e| TapError::Setup(e.to_string()))?);
        self.cache.lock().insert(key, v.clone());
        Ok(v)
    }

    /// Validates `value` against definition `def` of `rev`'s schema.
    pub fn validate_definition(
        &self,
        rev: Revision,
        def: &str,
        value: &Value,
    ) -> Result<(), TapError> {
        let v = self.validator(rev, def)?;
        let reasons: Vec<String> = v
            .iter_errors(value)
            .take(5)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        if reasons.is_empty() {
            return Ok(());
        }
        let mut frame = value.to_string();
        if frame.len() > 2000 {
            let mut cut = 2000;
            while !frame.is_char_boundary(cut) {
                cut -= 1;
            }
            frame.truncate(cut);
            frame.push('…');
        }
        Err(TapError::Invalid {
            revision: rev,
            definition: def.to_owned(),
            reasons: reasons.join("; "),
            frame,
        })
    }

    /// Validates one frame (JSON text) sent to a peer speaking `rev`: against
    /// `JSONRPCMessage`, and for a request or notification whose method `rev` defines,
    /// against that message type.
    ///
    /// Responses are checked against the envelope only, since their type depends on
    /// the request; use [`SchemaTap::validate_response`] to check the result type too.
    pub fn validate_frame(&self, rev: Revision, frame: &str) -> Result<(), TapError> {
        let value: Value =
            serde_json::from_str(frame).map_err(|e| TapError::NotJson(e.to_string()))?;
        self.validate_definition(rev, "JSONRPCMessage", &value)?;
        if let Some(def) = value
            .get("method")
            .and_then(Value::as_str)
            .and_then(|m| self.definition_for_method(rev, m))
        {
            self.validate_definition(rev, &def, &value)?;
        }
        Ok(())
    }

    /// Validates a response to a `method` request, sent to a peer speaking `rev`: the
    /// envelope, and the `result` against the method's result type (`CallToolResult`,
    /// `InputRequiredResult` for an `input_required` one, `EmptyResult` for `ping`...).
    pub fn validate_response(
        &self,
        rev: Revision,
        method: &str,
        frame: &str,
    ) -> Result<(), TapError> {
        self.validate_frame(rev, frame)?;
        let value: Value =
            serde_json::from_str(frame).map_err(|e| TapError::NotJson(e.to_string()))?;
        let Some(result) = value.get("result") else {
            return Ok(());
        };
        let def = self.result_definition(rev, method, result);
        match def {
            Some(def) => self.validate_definition(rev, &def, result),
            None => Ok(()),
        }
    }

    fn result_definition(&self, rev: Revision, method: &str, result: &Value) -> Option<String> {
        let kind = result.get("resultType").and_then(Value::as_str);
        if kind == Some("input_required") {
            return Some("InputRequiredResult".to_owned());
        }
        if result.get("task").is_some() && self.has_definition(rev, "CreateTaskResult") {
            return Some("CreateTaskResult".to_owned());
        }
        let req = self.definition_for_method(rev, method)?;
        let base = req.strip_suffix("Request")?;
        [
            format!("{base}Result"),
            "EmptyResult".to_owned(),
            "Result".to_owned(),
        ]
        .into_iter()
        .find(|d| self.has_definition(rev, d))
    }
}

/// The tasks extension's schema (ext-tasks 2026-07-28), compiled once per definition.
fn tasks_extension_validator(def: &str) -> Result<Arc<Validator>, TapError> {
    type Cache = Mutex<HashMap<String, Arc<Validator>>>;
    static DOC: OnceLock<Result<Value, TapError>> = OnceLock::new();
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let doc = DOC
        .get_or_init(|| {
            let text = crate::shared::read_shared(
                "spec/extensions/tasks/ext-tasks-2026-07-28/schema.json",
            )
            .map_err(|e| TapError::Setup(e.to_string()))?;
            serde_json::from_str(&text).map_err(|e| TapError::Setup(e.to_string()))
        })
        .as_ref()
        .map_err(Clone::clone)?;
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(v) = cache.lock().get(def) {
        return Ok(v.clone());
    }
    if doc.pointer(&format!("/$defs/{def}")).is_none() {
        return Err(TapError::Setup(format!(
            "ext-tasks has no definition {def}"
        )));
    }
    let mut doc = doc.clone();
    if let Some(obj) = doc.as_object_mut() {
        obj.insert(
            "allOf".to_owned(),
            json!([{ "$ref": format!("#/$defs/{def}") }]),
        );
    }
    let v = Arc::new(jsonschema::validator_for(&doc).map_err(|e| TapError::Setup(e.to_string()))?);
    cache.lock().insert(def.to_owned(), v.clone());
    Ok(v)
}

impl SchemaTap {
    /// Validates a frame sent to a 2026-07-28 peer that declared the
    /// `io.modelcontextprotocol/tasks` extension: the core envelope (`JSONRPCMessage`),
    /// and its `result` against the extension's definition `def` (`CreateTaskResult`,
    /// `GetTaskResult`, `CancelTaskResult`, `UpdateTaskResult`).
    pub fn validate_tasks_extension_response(
        &self,
        def: &str,
        frame: &str,
    ) -> Result<(), TapError> {
        self.validate_frame(Revision::V2026_07_28, frame)?;
        let value: Value =
            serde_json::from_str(frame).map_err(|e| TapError::NotJson(e.to_string()))?;
        let Some(result) = value.get("result") else {
            return Ok(());
        };
        let v = tasks_extension_validator(def)?;
        let reasons: Vec<String> = v
            .iter_errors(result)
            .take(5)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        if reasons.is_empty() {
            return Ok(());
        }
        Err(TapError::Invalid {
            revision: Revision::V2026_07_28,
            definition: format!("ext-tasks {def}"),
            reasons: reasons.join("; "),
            frame: frame.chars().take(2000).collect(),
        })
    }
}
