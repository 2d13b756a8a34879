//! The five MCP revisions, their eras, and the facts that differ between them.
//!
//! Every protocol rule that depends on the revision is a field of [`Facts`], and
//! [`FACTS`] is the one table that holds them. Code asks `rev.facts().batches`,
//! never `if rev == Revision::V2025_03_26`: a rule that moves between revisions
//! then moves in one row, not in a dozen handlers.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A released revision of the Model Context Protocol.
///
/// Ordered oldest to newest, so `a < b` means "a is older than b".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Revision {
    /// 2024-11-05: the first revision; HTTP+SSE transport.
    V2024_11_05,
    /// 2025-03-26: Streamable HTTP, sessions, JSON-RPC batches, audio content.
    V2025_03_26,
    /// 2025-06-18: batches removed, structured tool output, elicitation, `MCP-Protocol-Version`.
    V2025_06_18,
    /// 2025-11-25: tasks, URL elicitation, sampling with tools, SSE priming.
    V2025_11_25,
    /// 2026-07-28: the modern era: stateless, `server/discover`, MRTR, `subscriptions/listen`.
    V2026_07_28,
}

/// The two protocol eras (2026-07-28 basic/versioning: "legacy" and "modern").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Era {
    /// `initialize`-handshake revisions, 2024-11-05 to 2025-11-25.
    Legacy,
    /// Stateless revisions, 2026-07-28 onwards.
    Modern,
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        })
    }
}

/// How a client first learns about a server in a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// The `initialize` request and `notifications/initialized` (legacy).
    Initialize,
    /// Optional `server/discover`; every request carries its own `_meta` (modern).
    Discover,
}

/// When the `MCP-Protocol-Version` HTTP header is required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionHeader {
    /// The revision defines no such header (2024-11-05, 2025-03-26).
    Undefined,
    /// On every request after `initialize` (2025-06-18, 2025-11-25 basic/transports
    /// §Protocol Version Header); a missing header SHOULD be read as 2025-03-26.
    AfterInitialize,
    /// On every POST (2026-07-28 basic/transports/streamable-http §Protocol Version Header).
    EveryPost,
}

/// Which `_meta` key prefixes a revision reserves for the protocol (register A-C9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservedMetaRule {
    /// No rule (2024-11-05, 2025-03-26).
    None,
    /// 2025-06-18 basic/index §_meta: zero or more labels, then `modelcontextprotocol`
    /// or `mcp`, then at least one more label (`modelcontextprotocol.io/`, `tools.mcp.com/`).
    AnyLabelFollowed,
    /// 2025-11-25 and later basic/index §_meta: the second label is
    /// `modelcontextprotocol` or `mcp` (`io.modelcontextprotocol/`, not `com.example.mcp/`).
    SecondLabel,
}

/// The transports a revision defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transports {
    /// The 2024-11-05 HTTP+SSE pair (`GET /sse`, `POST` to the announced endpoint).
    pub http_sse: bool,
    /// Streamable HTTP (one endpoint).
    pub streamable_http: bool,
}

/// Everything mcpx needs to know about one revision, in one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// The revision this row describes.
    pub revision: Revision,
    /// Its era.
    pub era: Era,
    /// Its date string as it appears on the wire.
    pub name: &'static str,
    /// Receiving JSON-RPC batches is part of the revision (2025-03-26 basic/index §Batching).
    pub batches: bool,
    /// `initialize` or `server/discover`.
    pub handshake: Handshake,
    /// Protocol-level sessions (`Mcp-Session-Id`) exist.
    pub sessions: bool,
    /// Transports defined.
    pub transports: Transports,
    /// The `MCP-Protocol-Version` header rule.
    pub version_header: VersionHeader,
    /// The session header's spelling in this revision's text (register B-C21);
    /// comparisons are case-insensitive regardless.
    pub session_header: Option<&'static str>,
    /// SSE event ids and `Last-Event-ID` resumption are defined.
    pub resumable_sse: bool,
    /// The server SHOULD send a priming event (event id, empty data) on SSE streams.
    pub sse_priming: bool,
    /// Servers may send JSON-RPC requests to clients (sampling, roots, elicitation, ping).
    pub server_requests: bool,
    /// Either side may send `notifications/progress` (2026: only the server).
    pub client_progress: bool,
    /// Closing a request's HTTP response stream cancels the request (2026) rather than
    /// being "not cancellation" (2025-03-26..2025-11-25, SHOULD NOT).
    pub disconnect_cancels: bool,
    /// HTTP 404 means "session expired" (legacy) rather than "method not found" (modern).
    pub http_404_is_session_expiry: bool,
    /// An empty-string `nextCursor` is a valid cursor and not the end of results (H8).
    pub empty_cursor_is_cursor: bool,
    /// Every result carries `resultType` (2026-07-28 basic/index §resultType).
    pub result_type: bool,
    /// `structuredContent` exists on tool results.
    pub structured_content: StructuredContent,
    /// Tool input validation failures are tool execution errors (`isError`) rather than
    /// protocol errors (2025-11-25 server/tools §Error Handling; H5).
    pub input_validation_is_tool_error: bool,
    /// The error id of a response to an unreadable request may be omitted (A-C4).
    pub error_id_optional: bool,
    /// `_meta` prefix reservation rule (A-C9).
    pub reserved_meta: ReservedMetaRule,
    /// Servers must declare the `completions` capability to answer `completion/complete`
    /// (2025-03-26 onwards; C-C9).
    pub completions_capability: bool,
    /// Sampling with tools: `tools`/`toolChoice` in `CreateMessageRequestParams`,
    /// `tool_use`/`tool_result` blocks and content arrays in `SamplingMessage`
    /// (2025-11-25 schema onwards; register E-7).
    pub sampling_tools: bool,
    /// `AudioContent` exists (2025-03-26 schema onwards).
    pub audio_content: bool,
    /// How tasks exist in the revision (H13): the 2025-11-25 core utility (`tasks`
    /// capability, `params.task`, `execution.taskSupport`, `tasks/get|result|list|cancel`),
    /// or only through the `io.modelcontextprotocol/tasks` extension (2026-07-28), or not.
    pub tasks: TasksFlavor,
}

/// How a revision carries tasks (register H13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TasksFlavor {
    /// No tasks (2025-06-18 and earlier).
    None,
    /// 2025-11-25 basic/utilities/tasks: requestor-driven, `params.task`, `CreateTaskResult
    /// {task}`, `tasks/get|result|list|cancel`, tool-level `execution.taskSupport`.
    Core,
    /// ext-tasks 2026-07-28: server-directed, opted into per request in
    /// `clientCapabilities.extensions`; flat `resultType: "task"` handles,
    /// `tasks/get|update|cancel`.
    Extension,
}

/// What a revision allows in `CallToolResult.structuredContent` (H7, D-C5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StructuredContent {
    /// The field does not exist.
    Absent,
    /// A JSON object only; `outputSchema` has `type: "object"` at its root.
    ObjectOnly,
    /// Any JSON value; `outputSchema` any JSON Schema 2020-12.
    AnyValue,
}

const fn legacy_transports(http_sse: bool, streamable_http: bool) -> Transports {
    Transports {
        http_sse,
        streamable_http,
    }
}

/// The facts table: one row per revision, oldest first. `FACTS[r as usize]` is `r`'s row.
pub const FACTS: [Facts; 5] = [
    Facts {
        revision: Revision::V2024_11_05,
        era: Era::Legacy,
        name: "2024-11-05",
        batches: false,
        handshake: Handshake::Initialize,
        sessions: true,
        transports: legacy_transports(true, false),
        version_header: VersionHeader::Undefined,
        session_header: None,
        resumable_sse: false,
        sse_priming: false,
        server_requests: true,
        client_progress: true,
        disconnect_cancels: false,
        http_404_is_session_expiry: false,
        empty_cursor_is_cursor: false,
        result_type: false,
        structured_content: StructuredContent::Absent,
        input_validation_is_tool_error: false,
        error_id_optional: false,
        reserved_meta: ReservedMetaRule::None,
        completions_capability: false,
        sampling_tools: false,
        audio_content: false,
        tasks: TasksFlavor::None,
    },
    Facts {
        revision: Revision::V2025_03_26,
        era: Era::Legacy,
        name: "2025-03-26",
        batches: true,
        handshake: Handshake::Initialize,
        sessions: true,
        transports: legacy_transports(false, true),
        version_header: VersionHeader::Undefined,
        session_header: Some("Mcp-Session-Id"),
        resumable_sse: true,
        sse_priming: false,
        server_requests: true,
        client_progress: true,
        disconnect_cancels: false,
        http_404_is_session_expiry: true,
        empty_cursor_is_cursor: false,
        result_type: false,
        structured_content: StructuredContent::Absent,
        input_validation_is_tool_error: false,
        error_id_optional: false,
        reserved_meta: ReservedMetaRule::None,
        completions_capability: true,
        sampling_tools: false,
        audio_content: true,
        tasks: TasksFlavor::None,
    },
    Facts {
        revision: Revision::V2025_06_18,
        era: Era::Legacy,
        name: "2025-06-18",
        batches: false,
        handshake: Handshake::Initialize,
        sessions: true,
        transports: legacy_transports(false, true),
        version_header: VersionHeader::AfterInitialize,
        session_header: Some("Mcp-Session-Id"),
        resumable_sse: true,
        sse_priming: false,
        server_requests: true,
        client_progress: true,
        disconnect_cancels: false,
        http_404_is_session_expiry: true,
        empty_cursor_is_cursor: false,
        result_type: false,
        structured_content: StructuredContent::ObjectOnly,
        input_validation_is_tool_error: false,
        error_id_optional: false,
        reserved_meta: ReservedMetaRule::AnyLabelFollowed,
        completions_capability: true,
        sampling_tools: false,
        audio_content: true,
        tasks: TasksFlavor::None,
    },
    Facts {
        revision: Revision::V2025_11_25,
        era: Era::Legacy,
        name: "2025-11-25",
        batches: false,
        handshake: Handshake::Initialize,
        sessions: true,
        transports: legacy_transports(false, true),
        version_header: VersionHeader::AfterInitialize,
        session_header: Some("MCP-Session-Id"),
        resumable_sse: true,
        sse_priming: true,
        server_requests: true,
        client_progress: true,
        disconnect_cancels: false,
        http_404_is_session_expiry: true,
        empty_cursor_is_cursor: false,
        result_type: false,
        structured_content: StructuredContent::ObjectOnly,
        input_validation_is_tool_error: true,
        error_id_optional: true,
        reserved_meta: ReservedMetaRule::SecondLabel,
        completions_capability: true,
        sampling_tools: true,
        audio_content: true,
        tasks: TasksFlavor::Core,
    },
    Facts {
        revision: Revision::V2026_07_28,
        era: Era::Modern,
        name: "2026-07-28",
        batches: false,
        handshake: Handshake::Discover,
        sessions: false,
        transports: legacy_transports(false, true),
        version_header: VersionHeader::EveryPost,
        session_header: None,
        resumable_sse: false,
        sse_priming: false,
        server_requests: false,
        client_progress: false,
        disconnect_cancels: true,
        http_404_is_session_expiry: false,
        empty_cursor_is_cursor: true,
        result_type: true,
        structured_content: StructuredContent::AnyValue,
        input_validation_is_tool_error: true,
        error_id_optional: true,
        reserved_meta: ReservedMetaRule::SecondLabel,
        completions_capability: true,
        sampling_tools: true,
        audio_content: true,
        tasks: TasksFlavor::Extension,
    },
];

impl Revision {
    /// All revisions, oldest first.
    pub const ALL: [Revision; 5] = [
        Revision::V2024_11_05,
        Revision::V2025_03_26,
        Revision::V2025_06_18,
        Revision::V2025_11_25,
        Revision::V2026_07_28,
    ];

    /// The oldest revision mcpx serves.
    pub const OLDEST: Revision = Revision::V2024_11_05;
    /// The newest legacy revision: what mcpx counter-offers to an `initialize` it
    /// cannot honour (H4, A-C5).
    pub const NEWEST_LEGACY: Revision = Revision::V2025_11_25;
    /// The newest revision.
    pub const NEWEST: Revision = Revision::V2026_07_28;

    /// This revision's row of [`FACTS`].
    pub const fn facts(self) -> &'static Facts {
        &FACTS[self as usize]
    }

    /// The wire name, e.g. `"2025-06-18"`.
    pub const fn as_str(self) -> &'static str {
        self.facts().name
    }

    /// The era this revision belongs to.
    pub const fn era(self) -> Era {
        self.facts().era
    }

    /// Parses a wire name; `None` for anything that is not one of the five.
    pub fn from_wire(s: &str) -> Option<Revision> {
        Revision::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Revisions of one era, oldest first.
    pub fn of_era(era: Era) -> impl Iterator<Item = Revision> {
        Revision::ALL.into_iter().filter(move |r| r.era() == era)
    }

    /// The wire names of all revisions, newest first, as listed in errors.
    pub fn wire_names_newest_first() -> Vec<&'static str> {
        Revision::ALL.iter().rev().map(|r| r.as_str()).collect()
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown revision string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown MCP revision {given:?}; valid revisions are {}", Revision::wire_names_newest_first().join(", "))]
pub struct UnknownRevision {
    /// What was given.
    pub given: String,
}

impl FromStr for Revision {
    type Err = UnknownRevision;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Revision::from_wire(s).ok_or_else(|| UnknownRevision {
            given: s.to_owned(),
        })
    }
}

impl Serialize for Revision {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Revision {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_rows_are_in_revision_order() {
        for (i, r) in Revision::ALL.into_iter().enumerate() {
            assert_eq!(FACTS[i].revision, r);
            assert_eq!(r.facts().revision, r);
        }
    }

    #[test]
    fn wire_names_round_trip() {
        for r in Revision::ALL {
            assert_eq!(r.as_str().parse::<Revision>(), Ok(r));
        }
        let err = "2025-01-01".parse::<Revision>().unwrap_err();
        assert!(err.to_string().contains("2026-07-28, 2025-11-25"));
    }

    #[test]
    fn only_2025_03_26_receives_batches() {
        let with: Vec<_> = Revision::ALL
            .into_iter()
            .filter(|r| r.facts().batches)
            .collect();
        assert_eq!(with, [Revision::V2025_03_26]);
    }

    #[test]
    fn eras_split_at_2026() {
        assert_eq!(
            Revision::of_era(Era::Modern).collect::<Vec<_>>(),
            [Revision::V2026_07_28]
        );
        assert_eq!(Revision::of_era(Era::Legacy).count(), 4);
        assert_eq!(Revision::NEWEST_LEGACY.era(), Era::Legacy);
    }
}
