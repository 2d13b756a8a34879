//! Schema features that differ between revisions and that only a server producing
//! content needs: one row per revision, in the manner of `mcpx_protocol::revision::FACTS`
//! (code asks `features(rev).audio`, never compares revisions). Rules the rest of mcpx
//! needs too (structured content, input-validation errors, completions capability,
//! `resultType`) are read from `FACTS` instead.

use mcpx_protocol::Revision;

/// What one revision's schema has, for shaping results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// `AudioContent` (2025-03-26 schema onwards).
    pub audio: bool,
    /// `ToolAnnotations` on `Tool` (2025-03-26 onwards).
    pub tool_annotations: bool,
    /// `ProgressNotification.params.message` (2025-03-26 onwards).
    pub progress_message: bool,
    /// `title` on tools, prompts, resources and `Implementation` (2025-06-18 `BaseMetadata`).
    pub titles: bool,
    /// `ResourceLink` content blocks (2025-06-18 onwards).
    pub resource_link: bool,
    /// `CompleteRequest.params.context` (2025-06-18 onwards).
    pub completion_context: bool,
    /// URL-mode elicitation (2025-11-25 client/elicitation §URL Mode; 2026-07-28 without
    /// `elicitationId`).
    pub url_elicitation: bool,
    /// `elicitationId` and `notifications/elicitation/complete` (2025-11-25 only).
    pub elicitation_id: bool,
    /// Elicitation schemas with `default` (SEP-1034) and titled/multi-select enums
    /// (SEP-1330): 2025-11-25 onwards.
    pub rich_elicitation_schemas: bool,
    /// JSON Schema 2020-12 is the default dialect of tool schemas (2025-11-25 SEP-1613).
    pub json_schema_2020_12: bool,
    /// `x-mcp-header` tool-input annotations mirrored into `Mcp-Param-*` headers
    /// (2026-07-28 basic/transports/streamable-http §Request Metadata Headers).
    pub param_headers: bool,
}

const fn row(level: u8) -> Features {
    Features {
        audio: level >= 1,
        tool_annotations: level >= 1,
        progress_message: level >= 1,
        titles: level >= 2,
        resource_link: level >= 2,
        completion_context: level >= 2,
        url_elicitation: level >= 3,
        elicitation_id: level == 3,
        rich_elicitation_schemas: level >= 3,
        json_schema_2020_12: level >= 3,
        param_headers: level >= 4,
    }
}

/// One row per revision, oldest first: `FEATURES[rev as usize]`.
pub const FEATURES: [Features; 5] = [row(0), row(1), row(2), row(3), row(4)];

/// `rev`'s row.
pub const fn features(rev: Revision) -> &'static Features {
    &FEATURES[rev as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_follow_the_schemas() {
        // Spot checks against the five schema.ts files.
        assert!(!features(Revision::V2024_11_05).audio);
        assert!(features(Revision::V2025_03_26).audio);
        assert!(!features(Revision::V2025_03_26).resource_link);
        assert!(features(Revision::V2025_06_18).resource_link);
        assert!(features(Revision::V2025_11_25).elicitation_id);
        assert!(!features(Revision::V2026_07_28).elicitation_id);
        assert!(features(Revision::V2026_07_28).url_elicitation);
        assert!(features(Revision::V2026_07_28).param_headers);
    }
}
