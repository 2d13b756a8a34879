//! The catalog: every tool, resource, template and prompt the example server offers,
//! shaped per revision.
//!
//! Fixture names follow the official conformance suite (`@modelcontextprotocol/conformance`),
//! so the suite can be pointed at this server. The scenarios and the fixtures they use:
//!
//! **0.1.16, `server --suite active`** (legacy, 2025-06-18 / 2025-11-25):
//!
//! | scenario | fixture |
//! |---|---|
//! | server-initialize, ping | `initialize`, `ping` |
//! | logging-set-level | `logging/setLevel` (returns `{}`) |
//! | completion-complete | `completion/complete` on prompt `test_prompt_with_arguments`, argument `arg1` |
//! | tools-list | `tools/list` (every tool has a description and an input schema) |
//! | tools-call-simple-text | tool `test_simple_text` |
//! | tools-call-image | tool `test_image_content` |
//! | tools-call-audio | tool `test_audio_content` (`audio/wav`; 2025-03-26+) |
//! | tools-call-embedded-resource | tool `test_embedded_resource` |
//! | tools-call-mixed-content | tool `test_multiple_content_types` (text, image, resource) |
//! | tools-call-with-logging | tool `test_tool_with_logging` after `logging/setLevel debug` (8 levels) |
//! | tools-call-error | tool `test_error_handling` (`isError: true`) |
//! | tools-call-with-progress | tool `test_tool_with_progress` (progress 1..=3, increasing) |
//! | tools-call-sampling | tool `test_sampling` (`prompt`) → `sampling/createMessage` |
//! | tools-call-elicitation | tool `test_elicitation` (`message`) → `elicitation/create` (2025-06-18+) |
//! | elicitation-sep1034-defaults | tool `test_elicitation_sep1034_defaults` (2025-11-25+) |
//! | elicitation-sep1330-enums | tool `test_elicitation_sep1330_enums` (2025-11-25+) |
//! | json-schema-2020-12 | tool `json_schema_2020_12_tool` (`$schema`, `$defs.address` with `$anchor`, `allOf`/`anyOf`, `if`/`then`/`else`, `additionalProperties: false`; 2025-11-25+) |
//! | resources-list | `resources/list` (paged, 2 per page) |
//! | resources-read-text | resource `test://static-text` |
//! | resources-read-binary | resource `test://static-binary` |
//! | resources-templates-read | template `test://template/{id}/data` (`test://template/123/data`) |
//! | resources-subscribe, resources-unsubscribe | `resources/subscribe`/`unsubscribe` on `test://watched-resource` |
//! | prompts-list | `prompts/list` |
//! | prompts-get-simple | prompt `test_simple_prompt` |
//! | prompts-get-with-args | prompt `test_prompt_with_arguments` (`arg1`, `arg2`) |
//! | prompts-get-embedded-resource | prompt `test_prompt_with_embedded_resource` (`resourceUri`) |
//! | prompts-get-with-image | prompt `test_prompt_with_image` |
//! | server-sse-polling, server-sse-multiple-streams, dns-rebinding-protection | transport only (Streamable HTTP; no fixture) |
//!
//! **0.2.0-alpha.12, `--requirements 2026-07-28`** (all of the above on 2026-07-28, plus):
//!
//! | scenario | fixture |
//! |---|---|
//! | server-stateless | `server/discover`; tools `test_missing_capability` (-32021 without `sampling`), `test_streaming_elicitation`, `test_logging_tool`, `test_trigger_tool_change`, `test_trigger_prompt_change`; `subscriptions/listen` |
//! | caching | `ttlMs`/`cacheScope` on the six cacheable results |
//! | sep-2164-resource-not-found | `resources/read` of an unknown URI → -32602 with `data.uri` |
//! | input-required-result-basic-elicitation, -result-type, -missing-input-response, -ignore-extra-params, -validate-input | tool `test_input_required_result_elicitation` (key `user_name`) |
//! | input-required-result-basic-sampling | tool `test_input_required_result_sampling` (key `capital_question`) |
//! | input-required-result-basic-list-roots | tool `test_input_required_result_list_roots` (key `client_roots`) |
//! | input-required-result-request-state | tool `test_input_required_result_request_state` (key `confirm`, answer says `state-ok`) |
//! | input-required-result-multiple-input-requests | tool `test_input_required_result_multiple_inputs` (`user_name`, `greeting`, `client_roots`) |
//! | input-required-result-multi-round | tool `test_input_required_result_multi_round` (`step1`, then `step2`) |
//! | input-required-result-tampered-state | tool `test_input_required_result_tampered_state` (-32602 on an altered state) |
//! | input-required-result-capability-check | tool `test_input_required_result_capabilities` (asks only for declared capabilities) |
//! | input-required-result-non-tool-request | prompt `test_input_required_result_prompt` (key `user_context`) |
//! | input-required-result-unsupported-methods | `tools/list`, `prompts/list` are never `input_required` |
//! | http-header-validation | transport (needs any tool for `Mcp-Name`) |
//! | http-custom-header-server-validation | tool `test_custom_headers` (`region` → `x-mcp-header: Region`; 2026-07-28 only) |
//! | tasks-lifecycle, -capability-negotiation, -wire-fields, -request-state-removal, -dispatch-and-envelope, -required-task-error, -status-notifications | tools `greet`, `slow_compute`, `failing_job` (`required`), `protocol_error_job` (see `tasks`) |
//! | tasks-mrtr-input, tasks-mrtr-composition | tools `confirm_delete`, `multi_input` (a task's `inputRequests`, answered by `tasks/update`), `test_tool_with_task` (`required`; an `input_required` round, then the task) (see `tasks`) |
//!
//! Beyond the suite, for mcpx's own tests: `test_add` (input validation), `test_resource_link`,
//! `test_structured_content`, `test_structured_value` (non-object, 2026-07-28),
//! `test_elicitation_url`, `test_list_roots`, `approval_task` (a `required` task that asks
//! while it runs, 2026-07-28), `test_trigger_resource_change`,
//! `test_trigger_resource_update`, the resource `test://confirm-resource` (`input_required`
//! on `resources/read`, 2026-07-28) and the toggled `test_dynamic_*` items.

use std::sync::{Arc, OnceLock};

use mcpx_protocol::Revision;
use mcpx_protocol::method::{Direction, direction};
use mcpx_protocol::revision::StructuredContent;
use serde_json::{Value, json};

use crate::features::features;

/// A 1x1 PNG.
pub(crate) const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
/// A valid, empty 8 kHz mono 16-bit WAV file.
pub(crate) const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";

/// Items that come and go with the `test_trigger_*_change` tools.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Dynamic {
    pub(crate) tool: bool,
    pub(crate) prompt: bool,
    pub(crate) resource: bool,
}

/// Whether `rev` carries server-to-client asks inside `input_required` results (MRTR)
/// rather than as JSON-RPC requests: read from the method table.
pub(crate) fn mrtr(rev: Revision) -> bool {
    direction("sampling/createMessage", rev) == Direction::Embedded
}

/// Whether `rev` offers the asking fixtures of the 0.2.0 suite (`test_input_required_*`,
/// `test_streaming_elicitation`, `test_missing_capability`): on 2026-07-28 they ask with
/// `input_required` results; from 2025-06-18 (the first revision with elicitation)
/// they ask the same questions with wire requests, each naming its `inputRequests` key
/// in `_meta` (`mcpx/inputKey`) so a gateway can put them to a modern client.
pub(crate) fn asking_fixtures(rev: Revision) -> bool {
    mrtr(rev) || elicitation(rev)
}

fn elicitation(rev: Revision) -> bool {
    direction("elicitation/create", rev).exists()
}

fn obj(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

fn empty() -> Value {
    json!({"type": "object", "properties": {}})
}

/// One tool definition, shaped for `rev`.
fn tool(rev: Revision, name: &str, title: &str, description: &str, input: Value) -> Value {
    let mut t = json!({"name": name, "description": description, "inputSchema": input});
    if features(rev).titles {
        t["title"] = json!(title);
    }
    t
}

/// The tools offered in `rev`, in a stable order.
///
/// Built once per revision and `test_dynamic_tool` state, then shared: `tools/call`
/// looks its tool up here, and on Streamable HTTP 2026-07-28 so does the
/// `Mcp-Param-*` header check, so building the ~40 definitions per call was most of
/// the server's own work (and of the direct path's cost in `scripts/bench.sh`).
pub(crate) fn tools(rev: Revision, dynamic: Dynamic) -> Arc<Vec<Value>> {
    const N: usize = Revision::ALL.len();
    static BUILT: [[OnceLock<Arc<Vec<Value>>>; 2]; N] =
        [const { [const { OnceLock::new() }; 2] }; N];
    BUILT[rev as usize][usize::from(dynamic.tool)]
        .get_or_init(|| Arc::new(build_tools(rev, dynamic.tool)))
        .clone()
}

fn build_tools(rev: Revision, dynamic_tool: bool) -> Vec<Value> {
    let f = features(rev);
    let structured = rev.facts().structured_content;
    let mut v = vec![
        tool(
            rev,
            "test_simple_text",
            "Simple text",
            "Returns one text content block.",
            empty(),
        ),
        tool(
            rev,
            "test_image_content",
            "Image",
            "Returns one PNG image content block.",
            empty(),
        ),
        tool(
            rev,
            "test_embedded_resource",
            "Embedded resource",
            "Returns an embedded text resource.",
            empty(),
        ),
        tool(
            rev,
            "test_multiple_content_types",
            "Mixed content",
            "Returns text, an image and an embedded resource.",
            empty(),
        ),
        tool(
            rev,
            "test_error_handling",
            "Tool error",
            "Always fails as a tool execution error (isError).",
            empty(),
        ),
        tool(
            rev,
            "test_tool_with_progress",
            "Progress",
            "Reports progress `steps` times, `delayMs` apart (defaults 3 and 50); honours cancellation.",
            obj(
                json!({"steps": {"type": "integer", "minimum": 0}, "delayMs": {"type": "integer", "minimum": 0}}),
                &[],
            ),
        ),
        tool(
            rev,
            "test_tool_with_logging",
            "Logging",
            "Logs one message at each of the eight levels, filtered to the client's level.",
            empty(),
        ),
        tool(
            rev,
            "test_logging_tool",
            "Logging (alias)",
            "Same as test_tool_with_logging.",
            empty(),
        ),
        tool(
            rev,
            "test_add",
            "Add",
            "Adds two numbers; shows how invalid input is reported in this revision.",
            obj(
                json!({"a": {"type": "number"}, "b": {"type": "number"}}),
                &["a", "b"],
            ),
        ),
        tool(
            rev,
            "test_sampling",
            "Sampling",
            "Asks the client's model to answer `prompt`.",
            obj(json!({"prompt": {"type": "string"}}), &["prompt"]),
        ),
        tool(
            rev,
            "test_list_roots",
            "Roots",
            "Asks the client for its roots.",
            empty(),
        ),
        tool(
            rev,
            "test_trigger_tool_change",
            "Change tools",
            "Adds or removes test_dynamic_tool and announces tools/list_changed.",
            empty(),
        ),
        tool(
            rev,
            "test_trigger_prompt_change",
            "Change prompts",
            "Adds or removes test_dynamic_prompt and announces prompts/list_changed.",
            empty(),
        ),
        tool(
            rev,
            "test_trigger_resource_change",
            "Change resources",
            "Adds or removes test://dynamic-resource and announces resources/list_changed.",
            empty(),
        ),
        tool(
            rev,
            "test_trigger_resource_update",
            "Update a resource",
            "Announces notifications/resources/updated for `uri` (default test://watched-resource).",
            obj(json!({"uri": {"type": "string"}}), &[]),
        ),
    ];
    if f.audio {
        v.push(tool(
            rev,
            "test_audio_content",
            "Audio",
            "Returns one audio/wav content block.",
            empty(),
        ));
    }
    if f.resource_link {
        v.push(tool(
            rev,
            "test_resource_link",
            "Resource link",
            "Returns a resource_link to test://static-text.",
            empty(),
        ));
    }
    if f.tool_annotations
        && let Some(t) = v.first_mut()
    {
        t["annotations"] = json!({"readOnlyHint": true, "openWorldHint": false});
    }
    if structured != StructuredContent::Absent {
        let mut t = tool(
            rev,
            "test_structured_content",
            "Structured content",
            "Returns structuredContent matching its outputSchema.",
            empty(),
        );
        t["outputSchema"] = obj(
            json!({"temperature": {"type": "number"}, "conditions": {"type": "string"}}),
            &["temperature", "conditions"],
        );
        v.push(t);
    }
    if structured == StructuredContent::AnyValue {
        let mut t = tool(
            rev,
            "test_structured_value",
            "Structured array",
            "Returns a non-object structuredContent (an array of numbers).",
            empty(),
        );
        t["outputSchema"] = json!({"type": "array", "items": {"type": "number"}});
        v.push(t);
    }
    if elicitation(rev) {
        v.push(tool(
            rev,
            "test_elicitation",
            "Elicitation",
            "Asks the user for a username and an email (form mode).",
            obj(json!({"message": {"type": "string"}}), &[]),
        ));
    }
    if f.url_elicitation {
        v.push(tool(
            rev,
            "test_elicitation_url",
            "URL elicitation",
            "Asks the user to visit a URL (URL mode).",
            empty(),
        ));
    }
    if f.rich_elicitation_schemas {
        v.push(tool(
            rev,
            "test_elicitation_sep1034_defaults",
            "Elicitation defaults",
            "Elicits a form whose fields have defaults (SEP-1034).",
            empty(),
        ));
        v.push(tool(
            rev,
            "test_elicitation_sep1330_enums",
            "Elicitation enums",
            "Elicits a form with every enum flavour (SEP-1330).",
            empty(),
        ));
    }
    if f.json_schema_2020_12 {
        v.push(tool(
            rev,
            "json_schema_2020_12_tool",
            "JSON Schema 2020-12",
            "Has an input schema using JSON Schema 2020-12 keywords.",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"$anchor": "address", "type": "object", "properties": {
                    "street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
                // SEP-2106: composition, conditional and reference keywords survive.
                "allOf": [{"anyOf": [{"required": ["name"]}, {"required": ["address"]}]}],
                "if": {"properties": {"name": {"const": "with-address"}}},
                "then": {"required": ["address"]},
                "else": {},
                "additionalProperties": false
            }),
        ));
    }
    if f.param_headers {
        v.push(tool(
            rev,
            "test_custom_headers",
            "Custom headers",
            "Echoes arguments mirrored into Mcp-Param-* headers.",
            json!({
                "type": "object",
                "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"},
                    "priority": {"type": "integer", "x-mcp-header": "Priority"},
                    "query": {"type": "string"}
                }
            }),
        ));
    }
    if asking_fixtures(rev) {
        for (name, what) in [
            (
                "test_input_required_result_elicitation",
                "Asks for the user's name (elicitation).",
            ),
            (
                "test_input_required_result_sampling",
                "Asks the client's model a question (sampling).",
            ),
            (
                "test_input_required_result_list_roots",
                "Asks for the client's roots.",
            ),
            (
                "test_input_required_result_request_state",
                "Asks for a confirmation and round-trips requestState.",
            ),
            (
                "test_input_required_result_multiple_inputs",
                "Asks for elicitation, sampling and roots at once.",
            ),
            (
                "test_input_required_result_multi_round",
                "Asks in two rounds, with evolving requestState.",
            ),
            (
                "test_input_required_result_tampered_state",
                "Rejects a requestState that fails its integrity check.",
            ),
            (
                "test_input_required_result_capabilities",
                "Asks only for what the client declared.",
            ),
            (
                "test_streaming_elicitation",
                if mrtr(rev) {
                    "Answers with input_required, never a server-to-client request."
                } else {
                    "Asks for the user's name with elicitation/create."
                },
            ),
            (
                "test_missing_capability",
                "Needs the sampling capability (-32021 without it).",
            ),
        ] {
            v.push(tool(rev, name, name, what, empty()));
        }
    }
    // The tasks fixtures (2025-11-25 and the 2026-07-28 extension; see `tasks`).
    v.extend(crate::tasks::tools(rev));
    if dynamic_tool {
        v.push(tool(
            rev,
            "test_dynamic_tool",
            "Dynamic",
            "Exists between two test_trigger_tool_change calls.",
            empty(),
        ));
    }
    v
}

/// A static resource: URI, name, MIME type, description.
pub(crate) struct Res {
    pub(crate) uri: &'static str,
    pub(crate) name: &'static str,
    pub(crate) mime: &'static str,
    pub(crate) description: &'static str,
}

/// Resources listed in `rev`, in a stable order.
pub(crate) fn resources(rev: Revision, dynamic: Dynamic) -> Vec<Res> {
    let mut v = vec![
        Res {
            uri: "test://static-text",
            name: "static-text",
            mime: "text/plain",
            description: "A static text resource.",
        },
        Res {
            uri: "test://static-binary",
            name: "static-binary",
            mime: "image/png",
            description: "A static binary resource (PNG).",
        },
        Res {
            uri: "test://watched-resource",
            name: "watched-resource",
            mime: "text/plain",
            description: "Subscribe to it; test_trigger_resource_update changes it.",
        },
        Res {
            uri: "test://example-resource",
            name: "example-resource",
            mime: "text/plain",
            description: "Embedded by test_prompt_with_embedded_resource.",
        },
        Res {
            uri: "test://embedded-resource",
            name: "embedded-resource",
            mime: "text/plain",
            description: "Embedded by test_embedded_resource.",
        },
    ];
    if mrtr(rev) {
        v.push(Res {
            uri: "test://confirm-resource",
            name: "confirm-resource",
            mime: "text/plain",
            description: "Reading it asks for a confirmation (input_required).",
        });
    }
    if dynamic.resource {
        v.push(Res {
            uri: "test://dynamic-resource",
            name: "dynamic-resource",
            mime: "text/plain",
            description: "Exists between two test_trigger_resource_change calls.",
        });
    }
    v
}

/// A resource as listed.
pub(crate) fn resource_entry(rev: Revision, r: &Res) -> Value {
    let mut v =
        json!({"uri": r.uri, "name": r.name, "mimeType": r.mime, "description": r.description});
    if features(rev).titles {
        v["title"] = json!(r.name);
    }
    v
}

/// The resource templates.
pub(crate) fn templates(rev: Revision) -> Vec<Value> {
    let mut t = vec![
        json!({"uriTemplate": "test://template/{id}/data", "name": "template-data", "mimeType": "text/plain",
               "description": "Data for an id; the id appears in the text."}),
        json!({"uriTemplate": "test://user/{name}/profile", "name": "user-profile", "mimeType": "text/plain",
               "description": "A user's profile."}),
    ];
    if features(rev).titles {
        for x in &mut t {
            x["title"] = x["name"].clone();
        }
    }
    t
}

/// Matches `uri` against the templates: `(template, variable value)`.
pub(crate) fn match_template(uri: &str) -> Option<(&'static str, String)> {
    let vars = [
        ("test://template/{id}/data", "test://template/", "/data"),
        ("test://user/{name}/profile", "test://user/", "/profile"),
    ];
    vars.into_iter().find_map(|(t, pre, post)| {
        let v = uri.strip_prefix(pre)?.strip_suffix(post)?;
        (!v.is_empty() && !v.contains('/')).then(|| (t, v.to_owned()))
    })
}

/// A prompt as listed.
fn prompt(rev: Revision, name: &str, description: &str, args: Value) -> Value {
    let mut p = json!({"name": name, "description": description, "arguments": args});
    if features(rev).titles {
        p["title"] = json!(name);
    }
    p
}

/// The prompts offered in `rev`.
pub(crate) fn prompts(rev: Revision, dynamic: Dynamic) -> Vec<Value> {
    let mut v = vec![
        prompt(
            rev,
            "test_simple_prompt",
            "A prompt without arguments.",
            json!([]),
        ),
        prompt(
            rev,
            "test_prompt_with_arguments",
            "A prompt with arguments (arg1 completes).",
            json!([
            {"name": "arg1", "description": "First argument", "required": true},
            {"name": "arg2", "description": "Second argument", "required": false}]),
        ),
        prompt(
            rev,
            "test_prompt_with_embedded_resource",
            "A prompt embedding a resource.",
            json!([
            {"name": "resourceUri", "description": "The resource to embed", "required": true}]),
        ),
        prompt(
            rev,
            "test_prompt_with_image",
            "A prompt with an image.",
            json!([]),
        ),
    ];
    if asking_fixtures(rev) {
        v.push(prompt(
            rev,
            "test_input_required_result_prompt",
            "Asks for context first.",
            json!([]),
        ));
    }
    if dynamic.prompt {
        v.push(prompt(
            rev,
            "test_dynamic_prompt",
            "Exists between two test_trigger_prompt_change calls.",
            json!([]),
        ));
    }
    v
}

/// Completion candidates for a prompt argument or template variable.
pub(crate) fn completions(reference: &str, argument: &str) -> Option<Vec<&'static str>> {
    Some(match (reference, argument) {
        ("test_prompt_with_arguments", "arg1") => {
            vec!["test-value-1", "test-value-2", "testing", "other"]
        }
        ("test_prompt_with_arguments", "arg2") => vec!["alpha", "beta", "gamma"],
        ("test_prompt_with_embedded_resource", "resourceUri") => {
            vec!["test://example-resource", "test://static-text"]
        }
        ("test_prompt_with_arguments" | "test_prompt_with_embedded_resource", _) => vec![],
        ("test://template/{id}/data", "id") => vec!["123", "456", "789"],
        ("test://user/{name}/profile", "name") => vec!["alice", "bob", "carol"],
        ("test://template/{id}/data" | "test://user/{name}/profile", _) => vec![],
        _ => return None,
    })
}
