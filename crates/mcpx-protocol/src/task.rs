//! Task vocabulary shared by both task flavours (register H13): the 2025-11-25 core
//! utility (basic/utilities/tasks) and the `io.modelcontextprotocol/tasks` extension
//! (ext-tasks 2026-07-28). Which one a revision has is [`crate::revision::Facts::tasks`];
//! this module only names the statuses and the pure helpers (no I/O, no clock: times are
//! passed in as Unix milliseconds).

use serde_json::Value;

use crate::method::TASKS_EXTENSION;

/// A task's status (2025-11-25 schema `TaskStatus`; ext-tasks `TaskStatus`: the same five).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// The request is being processed.
    Working,
    /// The receiver needs input from the requestor.
    InputRequired,
    /// Done, with a result.
    Completed,
    /// Done, with an error.
    Failed,
    /// Cancelled before completion.
    Cancelled,
}

impl Status {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "working" => Status::Working,
            "input_required" => Status::InputRequired,
            "completed" => Status::Completed,
            "failed" => Status::Failed,
            "cancelled" => Status::Cancelled,
            _ => return None,
        })
    }

    /// `completed`, `failed` and `cancelled` are terminal (2025-11-25 basic/utilities/tasks
    /// §Task Status; ext-tasks §Task Status).
    pub const fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }
}

/// A tool's `execution.taskSupport` (2025-11-25 schema `ToolExecution`); absent is
/// [`TaskSupport::Forbidden`] (§Tool-Level Negotiation: "This is the default behavior").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TaskSupport {
    /// Never as a task.
    #[default]
    Forbidden,
    /// Either way.
    Optional,
    /// Only as a task.
    Required,
}

impl TaskSupport {
    /// The value of a `Tool` object's `execution.taskSupport`.
    pub fn of_tool(tool: &Value) -> TaskSupport {
        match tool
            .get("execution")
            .and_then(|e| e.get("taskSupport"))
            .and_then(Value::as_str)
        {
            Some("optional") => TaskSupport::Optional,
            Some("required") => TaskSupport::Required,
            _ => TaskSupport::Forbidden,
        }
    }

    /// The tool may run as a task.
    pub const fn allows_task(self) -> bool {
        !matches!(self, TaskSupport::Forbidden)
    }
}

/// Removes `execution.taskSupport` from a `Tool` object (and `execution` when nothing
/// else is left): for receivers whose revision has no tool-level task negotiation.
/// Returns whether anything changed.
pub fn strip_task_support(tool: &mut Value) -> bool {
    let Some(o) = tool.as_object_mut() else {
        return false;
    };
    let Some(Value::Object(e)) = o.get_mut("execution") else {
        return false;
    };
    let changed = e.remove("taskSupport").is_some();
    if e.is_empty() {
        o.remove("execution");
        return true;
    }
    changed
}

/// Whether a 2026-07-28 request's `clientCapabilities` declared the tasks extension
/// (ext-tasks §Capability Negotiation: per request, `extensions[...]`).
pub fn declares_extension(client_capabilities: &Value) -> bool {
    client_capabilities
        .get("extensions")
        .and_then(|e| e.get(TASKS_EXTENSION))
        .is_some_and(|v| !v.is_null())
}

/// The `-32021` error data naming the tasks extension (ext-tasks §Capability
/// Negotiation).
pub fn required_extension_data() -> Value {
    serde_json::json!({ "requiredCapabilities": { "extensions": { TASKS_EXTENSION: {} } } })
}

/// ISO 8601 (RFC 3339, UTC, millisecond precision) for Unix milliseconds:
/// `createdAt`/`lastUpdatedAt` of both flavours.
pub fn iso8601(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let ms = unix_ms % 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn iso8601_known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_764_066_600_123), "2025-11-25T10:30:00.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn task_support_and_stripping() {
        let mut t = json!({"name": "x", "execution": {"taskSupport": "required"}});
        assert_eq!(TaskSupport::of_tool(&t), TaskSupport::Required);
        assert!(strip_task_support(&mut t));
        assert_eq!(t, json!({"name": "x"}));
        assert_eq!(TaskSupport::of_tool(&t), TaskSupport::Forbidden);
        assert!(!strip_task_support(&mut t));
    }

    #[test]
    fn statuses() {
        for s in [
            "working",
            "input_required",
            "completed",
            "failed",
            "cancelled",
        ] {
            assert_eq!(Status::parse(s).map(Status::as_str), Some(s));
        }
        assert!(Status::Cancelled.is_terminal() && !Status::Working.is_terminal());
        assert!(declares_extension(
            &json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
        ));
        assert!(!declares_extension(&json!({"extensions": {}})));
    }
}
