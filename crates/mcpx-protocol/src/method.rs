//! Which JSON-RPC methods exist in which revision, and in which direction.
//!
//! [`METHODS`] transcribes the `ClientRequest`, `ServerRequest`, `ClientNotification`
//! and `ServerNotification` unions of each revision's `schema.json`; a test
//! (`tests/it/method_table.rs`) re-derives it from the five schemas and fails on any
//! difference, so this table cannot drift from the spec silently.

use crate::revision::Revision;

/// A request (has an id, expects a response) or a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A request.
    Request,
    /// A notification.
    Notification,
}

/// Who may send a method in one revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Not part of the revision.
    Absent,
    /// Client to server only.
    ClientToServer,
    /// Server to client only.
    ServerToClient,
    /// Either side.
    Both,
    /// Never a wire message: only embedded in `InputRequiredResult.inputRequests`
    /// (2026-07-28 basic/patterns/mrtr).
    Embedded,
}

impl Direction {
    /// A client may send it as a wire message.
    pub const fn from_client(self) -> bool {
        matches!(self, Direction::ClientToServer | Direction::Both)
    }
    /// A server may send it as a wire message.
    pub const fn from_server(self) -> bool {
        matches!(self, Direction::ServerToClient | Direction::Both)
    }
    /// The method is part of the revision in any form.
    pub const fn exists(self) -> bool {
        !matches!(self, Direction::Absent)
    }
}

/// One method and its direction in each revision (indexed by `Revision as usize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodEntry {
    /// The method name.
    pub name: &'static str,
    /// Request or notification.
    pub kind: Kind,
    /// Direction per revision, oldest first.
    pub directions: [Direction; 5],
}

impl MethodEntry {
    /// Direction of this method in `rev`.
    pub const fn direction(&self, rev: Revision) -> Direction {
        self.directions[rev as usize]
    }
}

use Direction::{
    Absent as NO, Both as BOTH, ClientToServer as CS, Embedded as EMB, ServerToClient as SC,
};
use Kind::{Notification as N, Request as R};

const fn m(name: &'static str, kind: Kind, directions: [Direction; 5]) -> MethodEntry {
    MethodEntry {
        name,
        kind,
        directions,
    }
}

/// The core method table. Columns: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28.
pub const METHODS: &[MethodEntry] = &[
    m("completion/complete", R, [CS, CS, CS, CS, CS]),
    m("elicitation/create", R, [NO, NO, SC, SC, EMB]),
    m("initialize", R, [CS, CS, CS, CS, NO]),
    m("logging/setLevel", R, [CS, CS, CS, CS, NO]),
    m("ping", R, [BOTH, BOTH, BOTH, BOTH, NO]),
    m("prompts/get", R, [CS, CS, CS, CS, CS]),
    m("prompts/list", R, [CS, CS, CS, CS, CS]),
    m("resources/list", R, [CS, CS, CS, CS, CS]),
    m("resources/read", R, [CS, CS, CS, CS, CS]),
    m("resources/subscribe", R, [CS, CS, CS, CS, NO]),
    m("resources/templates/list", R, [CS, CS, CS, CS, CS]),
    m("resources/unsubscribe", R, [CS, CS, CS, CS, NO]),
    m("roots/list", R, [SC, SC, SC, SC, EMB]),
    m("sampling/createMessage", R, [SC, SC, SC, SC, EMB]),
    m("server/discover", R, [NO, NO, NO, NO, CS]),
    m("subscriptions/listen", R, [NO, NO, NO, NO, CS]),
    m("tasks/cancel", R, [NO, NO, NO, BOTH, NO]),
    m("tasks/get", R, [NO, NO, NO, BOTH, NO]),
    m("tasks/list", R, [NO, NO, NO, BOTH, NO]),
    m("tasks/result", R, [NO, NO, NO, BOTH, NO]),
    m("tools/call", R, [CS, CS, CS, CS, CS]),
    m("tools/list", R, [CS, CS, CS, CS, CS]),
    m("notifications/cancelled", N, [BOTH, BOTH, BOTH, BOTH, BOTH]),
    m(
        "notifications/elicitation/complete",
        N,
        [NO, NO, NO, SC, NO],
    ),
    m("notifications/initialized", N, [CS, CS, CS, CS, NO]),
    m("notifications/message", N, [SC, SC, SC, SC, SC]),
    m("notifications/progress", N, [BOTH, BOTH, BOTH, BOTH, SC]),
    m(
        "notifications/prompts/list_changed",
        N,
        [SC, SC, SC, SC, SC],
    ),
    m(
        "notifications/resources/list_changed",
        N,
        [SC, SC, SC, SC, SC],
    ),
    m("notifications/resources/updated", N, [SC, SC, SC, SC, SC]),
    m("notifications/roots/list_changed", N, [CS, CS, CS, CS, NO]),
    m(
        "notifications/subscriptions/acknowledged",
        N,
        [NO, NO, NO, NO, SC],
    ),
    m("notifications/tasks/status", N, [NO, NO, NO, BOTH, NO]),
    m("notifications/tools/list_changed", N, [SC, SC, SC, SC, SC]),
];

/// An extension's methods. Extensions are negotiated per request on 2026-07-28
/// (`capabilities.extensions`), so their methods exist only for peers that declared them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtensionMethod {
    /// The method name.
    pub name: &'static str,
    /// Request or notification.
    pub kind: Kind,
    /// Who sends it (the extension schema has no direction unions; this is its prose).
    pub direction: Direction,
}

/// The extension identifier of the tasks extension (ext-tasks 2026-07-28).
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Methods of the `io.modelcontextprotocol/tasks` extension (ext-tasks-2026-07-28).
pub const TASKS_EXTENSION_METHODS: &[ExtensionMethod] = &[
    ExtensionMethod {
        name: "tasks/get",
        kind: R,
        direction: CS,
    },
    ExtensionMethod {
        name: "tasks/update",
        kind: R,
        direction: CS,
    },
    ExtensionMethod {
        name: "tasks/cancel",
        kind: R,
        direction: CS,
    },
    ExtensionMethod {
        name: "notifications/tasks",
        kind: N,
        direction: SC,
    },
];

/// A client that declared the tasks extension may send `name` to a server whose
/// revision carries tasks through it (ext-tasks 2026-07-28 §Supported Methods).
pub fn tasks_extension_client_method(name: &str, rev: Revision) -> bool {
    rev.facts().tasks == crate::revision::TasksFlavor::Extension
        && TASKS_EXTENSION_METHODS
            .iter()
            .any(|m| m.name == name && m.kind == Kind::Request && m.direction.from_client())
}

/// Looks a method up in the core table.
pub fn lookup(name: &str) -> Option<&'static MethodEntry> {
    METHODS.iter().find(|e| e.name == name)
}

/// The direction of `name` in `rev`; [`Direction::Absent`] for unknown methods.
pub fn direction(name: &str, rev: Revision) -> Direction {
    lookup(name).map_or(Direction::Absent, |e| e.direction(rev))
}

/// A client may send `name` as a wire request or notification in `rev`.
pub fn client_may_send(name: &str, rev: Revision) -> bool {
    direction(name, rev).from_client()
}

/// A server may send `name` as a wire request or notification in `rev`.
pub fn server_may_send(name: &str, rev: Revision) -> bool {
    direction(name, rev).from_server()
}

/// The client capability a server-to-client ask needs (`roots`, `sampling`,
/// `elicitation`; every revision's client capabilities); `None` for any other method.
pub fn ask_capability(method: &str) -> Option<&'static str> {
    match method {
        "roots/list" => Some("roots"),
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        _ => None,
    }
}

/// Methods whose results may be `input_required` (2026-07-28 basic/patterns/mrtr
/// §Supported Requests; register E-26).
pub const MRTR_METHODS: &[&str] = &["tools/call", "prompts/get", "resources/read"];

/// Methods whose complete results carry `ttlMs`/`cacheScope` on 2026-07-28
/// (schema `CacheableResult`; the schema governs over the changelog's list: H12, C-C14).
pub const CACHEABLE_METHODS: &[&str] = &[
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// Methods that must carry the `Mcp-Name` header on 2026-07-28 Streamable HTTP, and the
/// `params` field it mirrors (basic/transports/streamable-http §Request Metadata Headers;
/// the tasks extension's methods by ext-tasks §Streamable HTTP: Routing Headers).
pub const NAMED_METHODS: &[(&str, &str)] = &[
    ("tools/call", "name"),
    ("prompts/get", "name"),
    ("resources/read", "uri"),
    ("tasks/get", "taskId"),
    ("tasks/update", "taskId"),
    ("tasks/cancel", "taskId"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_the_spec_readme() {
        // ../shared/spec/README.md: "Counts: 2024-11-05: 24, 2025-03-26: 24,
        // 2025-06-18: 25, 2025-11-25: 31, 2026-07-28: 21".
        let count = |r: Revision| METHODS.iter().filter(|e| e.direction(r).exists()).count();
        assert_eq!(
            Revision::ALL.map(count),
            [24, 24, 25, 31, 21],
            "methods per revision"
        );
    }

    #[test]
    fn modern_servers_send_no_requests() {
        for e in METHODS.iter().filter(|e| e.kind == Kind::Request) {
            assert!(
                !e.direction(Revision::V2026_07_28).from_server(),
                "{}",
                e.name
            );
        }
    }

    #[test]
    fn unknown_methods_are_absent() {
        assert_eq!(
            direction("tools/frobnicate", Revision::NEWEST),
            Direction::Absent
        );
        assert!(client_may_send("ping", Revision::V2025_11_25));
        assert!(!client_may_send("ping", Revision::V2026_07_28));
    }
}
