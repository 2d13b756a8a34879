//! Lowering an `elicitation/create` ask to the revision of the client it is put to
//! (registers E-11, E-18, E-29), and the shapes each revision gives it.
//!
//! | revision | elicitation | `mode`, url mode | `elicitationId` | `default` | titled / multi-select enums |
//! |---|---|---|---|---|---|
//! | 2024-11-05, 2025-03-26 | none | | | | |
//! | 2025-06-18 | `{message, requestedSchema}` | no | no | booleans only | no (`enum` + `enumNames`) |
//! | 2025-11-25 | form and url | yes | required in url mode | yes | yes |
//! | 2026-07-28 | form and url | yes | no (changelog item 11) | yes | yes |
//!
//! What mcpx reads, and what it leaves alone:
//!
//! * only `message` is required unconditionally (E-18: 2025-11-25 and 2026-07-28
//!   client/elicitation §Elicitation Requests, "Clients MUST treat requests without a
//!   `mode` field as form mode"); a missing `mode` is form mode and is never added;
//! * `requestedSchema` passes unchanged except where the receiver's schema cannot hold
//!   it; in particular `pattern`, which no revision's `StringSchema` defines (E-29: the
//!   2025-11-25 example uses it, the type governs), is neither added, removed nor
//!   enforced.

use serde_json::{Map, Value, json};

use crate::revision::Revision;

/// An elicitation's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// In-band form (also when `mode` is absent: E-18).
    Form,
    /// Out-of-band URL (2025-11-25 and later).
    Url,
}

/// What a revision's `elicitation/create` can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// The method exists (2025-06-18 and later).
    pub exists: bool,
    /// `mode` and url mode exist (2025-11-25 and later).
    pub modes: bool,
    /// A url-mode ask carries `elicitationId` (2025-11-25 only).
    pub elicitation_id: bool,
    /// Every primitive field may carry `default`, and the 2025-11-25 enum shapes
    /// (titled single-select `oneOf`, multi-select arrays) exist.
    pub rich_schemas: bool,
}

/// One row per revision (schema `ElicitRequest*Params`, `PrimitiveSchemaDefinition`).
pub const fn shape(rev: Revision) -> Shape {
    match rev {
        Revision::V2024_11_05 | Revision::V2025_03_26 => Shape {
            exists: false,
            modes: false,
            elicitation_id: false,
            rich_schemas: false,
        },
        Revision::V2025_06_18 => Shape {
            exists: true,
            modes: false,
            elicitation_id: false,
            rich_schemas: false,
        },
        Revision::V2025_11_25 => Shape {
            exists: true,
            modes: true,
            elicitation_id: true,
            rich_schemas: true,
        },
        Revision::V2026_07_28 => Shape {
            exists: true,
            modes: true,
            elicitation_id: false,
            rich_schemas: true,
        },
    }
}

/// Why an elicitation cannot be put to a client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElicitationError {
    /// The ask itself is malformed (no `message`, an unknown `mode`): the asker gets
    /// -32602.
    #[error("invalid elicitation/create: {0}")]
    Invalid(String),
    /// The client's revision cannot represent it (a multi-select field for 2025-06-18,
    /// url mode before 2025-11-25): the asker gets -32602 (E-11).
    #[error("elicitation/create cannot be shown to a {rev} client: {why}")]
    Unrepresentable {
        /// The client's revision.
        rev: Revision,
        /// What it lacks.
        why: String,
    },
}

/// The mode of an elicitation's params (E-18: absent is form). An unknown mode, or a
/// `mode` that is not a string, is -32602 (2025-11-25 client/elicitation §Error
/// Handling: a mode the client did not declare).
pub fn mode(params: &Value) -> Result<Mode, ElicitationError> {
    match params.get("mode") {
        None => Ok(Mode::Form),
        Some(Value::String(m)) if m == "form" => Ok(Mode::Form),
        Some(Value::String(m)) if m == "url" => Ok(Mode::Url),
        Some(other) => Err(ElicitationError::Invalid(format!(
            "mode {other} is not one this client declared (form, url)"
        ))),
    }
}

/// Checks an elicitation's params (an object with a string `message`, a known mode;
/// E-18) and lowers them in place for a client speaking `to` (E-11). `mint` gives an
/// `elicitationId` when a url-mode ask without one goes to a revision that requires it
/// (a 2026-07-28 asker's, for a 2025-11-25 client). Whether the client declared url
/// mode is the caller's to check (E-9); a revision without url mode is refused here.
pub fn lower(
    params: &mut Value,
    to: Revision,
    mint: impl FnOnce() -> String,
) -> Result<Mode, ElicitationError> {
    let mode = mode(params)?;
    let Some(o) = params.as_object_mut() else {
        return Err(ElicitationError::Invalid(
            "params must be an object".to_owned(),
        ));
    };
    if !o.get("message").is_some_and(Value::is_string) {
        return Err(ElicitationError::Invalid(
            "message (a string) is required".to_owned(),
        ));
    }
    let shape = shape(to);
    let unrepresentable = |why: String| ElicitationError::Unrepresentable { rev: to, why };
    if !shape.exists {
        return Err(unrepresentable(
            "its revision has no elicitation".to_owned(),
        ));
    }
    if mode == Mode::Url {
        if !shape.modes {
            return Err(unrepresentable("url mode does not exist there".to_owned()));
        }
        if shape.elicitation_id {
            if !o.get("elicitationId").is_some_and(Value::is_string) {
                o.insert("elicitationId".to_owned(), json!(mint()));
            }
        } else {
            o.remove("elicitationId");
        }
        return Ok(mode);
    }
    // Form mode. elicitationId belongs to url mode (and to 2025-11-25 only).
    if !shape.elicitation_id {
        o.remove("elicitationId");
    }
    if !shape.modes {
        // 2025-06-18 ElicitRequest params: {message, requestedSchema}.
        o.remove("mode");
    }
    if !shape.rich_schemas
        && let Some(Value::Object(schema)) = o.get_mut("requestedSchema")
    {
        // 2025-06-18 requestedSchema: {type, properties, required}.
        schema.remove("$schema");
        if let Some(Value::Object(props)) = schema.get_mut("properties") {
            for (name, field) in props.iter_mut() {
                if let Value::Object(f) = field {
                    lower_field(name, f).map_err(|e| unrepresentable(e.to_string()))?;
                }
            }
        }
    }
    Ok(mode)
}

/// A `requestedSchema` field with no 2025-06-18 form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum FieldError {
    /// A multi-select.
    #[error("field {0:?} is a multi-select")]
    MultiSelect(String),
    /// A single-select option without `const` and `title`.
    #[error("field {0:?} has an option without const and title")]
    Option(String),
}

/// One `requestedSchema` field for a 2025-06-18 client: a titled single-select
/// (`oneOf` of `{const, title}`) becomes `enum` + `enumNames` (2025-06-18 `EnumSchema`),
/// `default` is kept only on booleans (the one 2025-06-18 primitive that has it), and a
/// multi-select (`type: "array"`) has no 2025-06-18 form at all.
fn lower_field(name: &str, f: &mut Map<String, Value>) -> Result<(), FieldError> {
    if f.get("type").and_then(Value::as_str) == Some("array") {
        return Err(FieldError::MultiSelect(name.to_owned()));
    }
    if let Some(Value::Array(options)) = f.get("oneOf") {
        let mut values = Vec::new();
        let mut names = Vec::new();
        for opt in options {
            match (
                opt.get("const").and_then(Value::as_str),
                opt.get("title").and_then(Value::as_str),
            ) {
                (Some(v), Some(t)) => {
                    values.push(json!(v));
                    names.push(json!(t));
                }
                _ => {
                    return Err(FieldError::Option(name.to_owned()));
                }
            }
        }
        f.remove("oneOf");
        f.insert("enum".to_owned(), Value::Array(values));
        f.insert("enumNames".to_owned(), Value::Array(names));
    }
    if f.get("type").and_then(Value::as_str) != Some("boolean") {
        f.remove("default");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use Revision::*;

    const ALL: [Revision; 5] = [
        V2024_11_05,
        V2025_03_26,
        V2025_06_18,
        V2025_11_25,
        V2026_07_28,
    ];

    fn form(props: Value) -> Value {
        json!({"message": "m", "requestedSchema": {"type": "object", "properties": props}})
    }

    fn lowered(mut p: Value, to: Revision) -> Result<Value, ElicitationError> {
        lower(&mut p, to, || "minted".to_owned()).map(|_| p)
    }

    /// E-18: only message is required; no mode is form mode, and mode is never added.
    #[test]
    fn only_message_is_required_and_mode_is_never_added() {
        for to in [V2025_06_18, V2025_11_25, V2026_07_28] {
            let p = form(json!({"a": {"type": "string"}}));
            assert_eq!(lowered(p.clone(), to).unwrap(), p, "{to}");
            let mut q = p.clone();
            assert_eq!(lower(&mut q, to, String::new).unwrap(), Mode::Form);
            for bad in [
                json!({"requestedSchema": {"type": "object", "properties": {}}}),
                json!({"message": 7}),
                json!("text"),
                json!({"message": "m", "mode": "telepathy"}),
                json!({"message": "m", "mode": 1}),
            ] {
                assert!(
                    matches!(lowered(bad.clone(), to), Err(ElicitationError::Invalid(_))),
                    "{to}: {bad}"
                );
            }
        }
        assert_eq!(mode(&json!({"message": "m"})).unwrap(), Mode::Form);
        assert_eq!(mode(&json!({"mode": "url"})).unwrap(), Mode::Url);
    }

    /// E-11: the 2025-06-18 shape; mode, $schema, non-boolean defaults and
    /// elicitationId go, titled single-selects become enum + enumNames, multi-selects
    /// are refused.
    #[test]
    fn form_asks_lowered_for_2025_06_18() {
        let mut p = form(json!({
            "name": {"type": "string", "default": "John"},
            "age": {"type": "integer", "default": 30},
            "ok": {"type": "boolean", "default": true},
            "plain": {"type": "string", "enum": ["a", "b"], "default": "a"},
            "titled": {"type": "string", "title": "T", "oneOf": [
                {"const": "v1", "title": "One"}, {"const": "v2", "title": "Two"}]},
            "legacy": {"type": "string", "enum": ["x"], "enumNames": ["X"]},
        }));
        p["mode"] = json!("form");
        p["requestedSchema"]["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
        let v = lowered(p.clone(), V2025_06_18).unwrap();
        assert_eq!(
            v,
            form(json!({
                "name": {"type": "string"},
                "age": {"type": "integer"},
                "ok": {"type": "boolean", "default": true},
                "plain": {"type": "string", "enum": ["a", "b"]},
                "titled": {"type": "string", "title": "T", "enum": ["v1", "v2"],
                           "enumNames": ["One", "Two"]},
                "legacy": {"type": "string", "enum": ["x"], "enumNames": ["X"]},
            }))
        );
        // Later revisions have every shape: nothing changes.
        for to in [V2025_11_25, V2026_07_28] {
            assert_eq!(lowered(p.clone(), to).unwrap(), p, "{to}");
        }
        for multi in [
            json!({"type": "array", "items": {"type": "string", "enum": ["a"]}}),
            json!({"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}}),
        ] {
            let e = lowered(form(json!({ "pick": multi })), V2025_06_18).unwrap_err();
            assert!(
                matches!(&e, ElicitationError::Unrepresentable { rev: V2025_06_18, why } if why.contains("pick")),
                "{e}"
            );
            assert!(lowered(form(json!({ "pick": multi })), V2025_11_25).is_ok());
        }
        for to in [V2024_11_05, V2025_03_26] {
            assert!(lowered(form(json!({})), to).is_err(), "{to}");
        }
    }

    /// E-11, E-12: elicitationId exists on 2025-11-25 only: minted for a url ask that
    /// lacks one, kept when present, removed for 2026-07-28; url mode cannot go to
    /// 2025-06-18.
    #[test]
    fn url_asks_and_elicitation_ids() {
        let url = json!({"mode": "url", "message": "m", "url": "https://x.example/a"});
        let v = lowered(url.clone(), V2025_11_25).unwrap();
        assert_eq!(v["elicitationId"], "minted");
        let mut with_id = url.clone();
        with_id["elicitationId"] = json!("up-1");
        let v = lowered(with_id.clone(), V2025_11_25).unwrap();
        assert_eq!(v["elicitationId"], "up-1");
        assert_eq!(lowered(with_id.clone(), V2026_07_28).unwrap(), url);
        let mut p = url.clone();
        assert_eq!(lower(&mut p, V2026_07_28, String::new).unwrap(), Mode::Url);
        for to in [V2024_11_05, V2025_03_26, V2025_06_18] {
            assert!(
                matches!(
                    lowered(with_id.clone(), to),
                    Err(ElicitationError::Unrepresentable { .. })
                ),
                "{to}"
            );
        }
        let mut form_with_id = form(json!({}));
        form_with_id["elicitationId"] = json!("x");
        assert!(
            lowered(form_with_id, V2026_07_28)
                .unwrap()
                .get("elicitationId")
                .is_none()
        );
    }

    /// E-29: pattern is no StringSchema keyword in any revision; mcpx neither adds,
    /// removes nor enforces it, whatever the receiver.
    #[test]
    fn pattern_is_passed_as_written() {
        let field = json!({"type": "string", "pattern": "^[A-Za-z]+$"});
        for to in ALL.into_iter().filter(|r| shape(*r).exists) {
            let v = lowered(form(json!({ "name": field })), to).unwrap();
            assert_eq!(v["requestedSchema"]["properties"]["name"], field, "{to}");
        }
    }

    #[test]
    fn shapes_follow_the_method_table() {
        for rev in ALL {
            assert_eq!(
                shape(rev).exists,
                crate::method::direction("elicitation/create", rev).exists(),
                "{rev}"
            );
            assert_eq!(
                shape(rev).elicitation_id,
                crate::method::direction("notifications/elicitation/complete", rev).exists(),
                "{rev}"
            );
        }
    }
}
