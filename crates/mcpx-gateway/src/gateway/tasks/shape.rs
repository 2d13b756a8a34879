//! What hosts and upstreams see of tasks: tools' `execution.taskSupport`, the
//! related-task of asks and answers, and final results.

use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::revision::TasksFlavor;
use mcpx_protocol::task::strip_task_support;
use mcpx_protocol::{Revision, meta};
use mcpx_server::{Call, Reply};
use serde_json::{Value, json};

/// One page of `tools/list` for `host`: `execution.taskSupport` exists only in
/// 2025-11-25 (schema `ToolExecution`); other hosts get it removed (H13).
pub(in crate::gateway) fn shape_tools(items: &[Value], host: Revision) -> Option<Vec<Value>> {
    if host.facts().tasks == TasksFlavor::Core {
        return None;
    }
    let mut out = items.to_vec();
    let changed = out.iter_mut().fold(false, |c, t| strip_task_support(t) | c);
    changed.then_some(out)
}

/// An upstream's server-to-client ask, before it is relayed to `call`'s host: its
/// `task` is removed (mcpx declared no client tasks capability, so the ask is processed
/// normally: 2025-11-25 basic/utilities/tasks, E-17), and when the ask is raised by a
/// gateway task's work for a 2025-11-25 host it names that task (C-C12).
pub(in crate::gateway) fn ask_params(params: &mut Value, call: &Call) {
    strip_ask_task(params);
    if let (Some(id), TasksFlavor::Core) = (&call.related_task, call.host.facts().tasks) {
        name_task(params, json!({ "taskId": id }));
    }
}

/// Puts `task` as the related-task in `v`'s `_meta` (when `v` is an object).
pub(super) fn name_task(v: &mut Value, task: Value) {
    if let Some(o) = v.as_object_mut()
        && let Some(m) = o
            .entry("_meta")
            .or_insert_with(|| json!({}))
            .as_object_mut()
    {
        m.insert(meta::RELATED_TASK.to_owned(), task);
    }
}

/// Removes `task` from an ask's params (E-17), and the upstream's own related-task,
/// which names a task the host does not know.
pub(in crate::gateway) fn strip_ask_task(params: &mut Value) {
    if let Some(o) = params.as_object_mut() {
        o.remove("task");
        if let Some(Value::Object(m)) = o.get_mut("_meta") {
            m.remove(meta::RELATED_TASK);
            if m.is_empty() {
                o.remove("_meta");
            }
        }
    }
}

/// The host's answer to an ask, before it goes back to the upstream that asked: the
/// host's related-task names mcpx's task, which the upstream does not know, so it is
/// removed; when the ask came from the upstream's own task (a 2025-11-25 upstream's
/// related-task on it), the answer names that task instead (2025-11-25
/// basic/utilities/tasks §Associating Task-Related Messages: responses related to a
/// task MUST carry it; C-C12).
pub(in crate::gateway) fn answer_upstream(
    answer: &mut Value,
    theirs: Option<Value>,
    upstream: Revision,
) {
    strip_ask_task(answer);
    if let (Some(t), TasksFlavor::Core) = (theirs, upstream.facts().tasks) {
        name_task(answer, t);
    }
}

/// Whether `result` (a result's valid text) is an ext-tasks handle (`"resultType":
/// "task"`), read without parsing the rest of the result.
pub(super) fn is_task_handle(result: &str) -> bool {
    // "task" written without escapes appears in the text as it is; with no backslash
    // there are no escapes. So a result without either cannot be a handle, and the walk
    // to its `resultType` (which every modern result has, usually last) is skipped.
    static TASK: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new("\"task\""));
    let bytes = result.as_bytes();
    if TASK.find(bytes).is_none() && memchr::memchr(b'\\', bytes).is_none() {
        return false;
    }
    mcpx_protocol::jsonrpc::first_member(result, "resultType")
        .and_then(|raw| serde_json::from_str::<std::borrow::Cow<'_, str>>(raw).ok())
        .is_some_and(|t| t == "task")
}

/// The tool result's `isError`.
pub(super) fn is_tool_error(reply: &Reply) -> bool {
    serde_json::from_str::<Value>(reply.result.as_str())
        .ok()
        .and_then(|v| v.get("isError").and_then(Value::as_bool))
        == Some(true)
}

/// Removes an upstream's related-task from a final result: it names the upstream's task.
pub(super) fn clean(mut reply: Reply) -> Reply {
    // Every final result passes here: one searcher built once, not one per call
    // (`str::contains` sets up a two-way searcher each time).
    static RELATED_TASK: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(meta::RELATED_TASK));
    if RELATED_TASK
        .find(reply.result.as_str().as_bytes())
        .is_some()
        && let Ok(mut v) = serde_json::from_str::<Value>(reply.result.as_str())
    {
        strip_ask_task(&mut v);
        reply.result = Json::of_value(&v);
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::is_task_handle;

    #[test]
    fn a_task_handle_is_told_by_its_top_level_result_type_alone() {
        assert!(is_task_handle(r#"{"resultType":"task","taskId":"t1"}"#));
        assert!(is_task_handle(
            r#"{ "taskId":"t1", "resultType" : "t\u0061sk" }"#
        ));
        assert!(!is_task_handle(r#"{"resultType":"complete","content":[]}"#));
        assert!(!is_task_handle(
            r#"{"content":[{"type":"text","text":"x"}]}"#
        ));
        // A nested resultType is the tool's content, not the result's envelope.
        assert!(!is_task_handle(
            r#"{"structuredContent":{"resultType":"task"},"content":[]}"#
        ));
        assert!(!is_task_handle(r#"{"resultType":7}"#));
        // "task" elsewhere in the text: the walk decides.
        assert!(!is_task_handle(
            r#"{"content":[{"type":"text","text":"task"}],"resultType":"complete"}"#
        ));
        assert!(is_task_handle(
            r#"{"content":[{"type":"text","text":"task"}],"resultType":"task"}"#
        ));
    }
}
