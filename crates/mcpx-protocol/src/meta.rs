//! `_meta` keys the protocol defines, and the prefixes each revision reserves.
//!
//! mcpx reads only the exact keys below and passes every other `_meta` key through
//! untouched (register A-C9: a 2025-06-18 peer may legally use other
//! `io.modelcontextprotocol/` keys for its own data, so prefix alone never makes a key
//! protocol data).

use crate::revision::{ReservedMetaRule, Revision};

/// Request `_meta`: the revision the request is written in (2026-07-28, required).
pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// Request `_meta`: the client's capabilities for this request (2026-07-28, required).
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// Request `_meta`: the client's `Implementation` (2026-07-28, SHOULD).
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// Request `_meta`: the log level for this request (2026-07-28, deprecated, optional).
pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// Result `_meta`: the server's `Implementation` (2026-07-28, SHOULD on every result).
pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Notification `_meta`: the `subscriptions/listen` request id a notification belongs to.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// 2025-11-25 tasks: the task a message belongs to.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// Request `_meta`: the progress token (every revision).
pub const PROGRESS_TOKEN: &str = "progressToken";

/// mcpx's own extension key, on the params of a legacy upstream's server-to-client
/// request (sampling, elicitation, roots): the `inputRequests` key under which mcpx puts
/// that request to a 2026-07-28 host, and under which it looks for a host's
/// `inputResponses` answer. A legacy server that also speaks MRTR names its questions
/// with it so that both eras see the same keys; without it mcpx names them itself.
/// Like every `_meta` key, it passes through to the host untouched.
pub const INPUT_KEY: &str = "mcpx/inputKey";

/// mcpx's own extension key, on the params of a legacy server-to-client request: the
/// id of the client request it was sent while serving. Streamable HTTP relates such a
/// request to its client request by the stream it travels on; stdio and HTTP+SSE
/// cannot, so a client with several requests in flight cannot tell which one asks.
/// mcpx stamps its own asks on those transports, and, as a client, routes an ask that
/// carries it to that request.
pub const RELATED_REQUEST: &str = "mcpx/relatedRequestId";

/// mcpx's own extension key, on a list result (`tools/list`, `prompts/list`,
/// `resources/list`, `resources/templates/list`): the names of the upstreams still
/// making their first start when the list was answered, whose items it lacks. Each
/// joins the list later, announced with `list_changed`.
pub const STARTING: &str = "mcpx/starting";

/// The `_meta` keys a 2026-07-28 request must carry (basic/index §_meta).
pub const MODERN_REQUIRED_REQUEST_KEYS: &[&str] = &[PROTOCOL_VERSION, CLIENT_CAPABILITIES];

/// The protocol-defined `io.modelcontextprotocol/*` keys of a revision.
pub fn protocol_keys(rev: Revision) -> &'static [&'static str] {
    match rev {
        Revision::V2024_11_05 | Revision::V2025_03_26 | Revision::V2025_06_18 => &[],
        Revision::V2025_11_25 => &[RELATED_TASK],
        Revision::V2026_07_28 => &[
            PROTOCOL_VERSION,
            CLIENT_CAPABILITIES,
            CLIENT_INFO,
            LOG_LEVEL,
            SERVER_INFO,
            SUBSCRIPTION_ID,
        ],
    }
}

/// Whether `key`'s prefix is reserved for the protocol in `rev` (A-C9).
///
/// A key's prefix is the part before the last `/`; keys without one have no prefix and
/// are never reserved by these rules.
pub fn is_reserved(rev: Revision, key: &str) -> bool {
    let Some((prefix, _)) = key.rsplit_once('/') else {
        return false;
    };
    let labels: Vec<&str> = prefix.split('.').collect();
    if labels.iter().any(|l| !is_label(l)) {
        return false;
    }
    let special = |l: &&str| *l == "modelcontextprotocol" || *l == "mcp";
    match rev.facts().reserved_meta {
        ReservedMetaRule::None => false,
        // 2025-06-18: zero or more labels, `modelcontextprotocol`|`mcp`, then any label.
        ReservedMetaRule::AnyLabelFollowed => {
            labels.len() >= 2 && labels[..labels.len() - 1].iter().any(special)
        }
        // 2025-11-25+: the second label is `modelcontextprotocol`|`mcp`.
        ReservedMetaRule::SecondLabel => labels.get(1).is_some_and(special),
    }
}

/// A DNS-style label: starts with a letter, ends with a letter or digit, and has only
/// letters, digits and hyphens between (basic/index §_meta).
fn is_label(l: &str) -> bool {
    let b = l.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(e)) => {
            f.is_ascii_alphabetic()
                && e.is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Revision::*;

    #[test]
    fn reservation_changed_incompatibly_between_2025_06_18_and_2025_11_25() {
        // The spec's own examples, 2025-06-18 basic/index §_meta ...
        for k in [
            "modelcontextprotocol.io/x",
            "mcp.dev/x",
            "api.modelcontextprotocol.org/x",
            "tools.mcp.com/x",
        ] {
            assert!(is_reserved(V2025_06_18, k), "{k} reserved in 2025-06-18");
        }
        assert!(!is_reserved(
            V2025_06_18,
            "io.modelcontextprotocol/protocolVersion"
        ));
        // ... and 2025-11-25 basic/index §_meta.
        assert!(is_reserved(
            V2025_11_25,
            "io.modelcontextprotocol/protocolVersion"
        ));
        assert!(is_reserved(V2026_07_28, "dev.mcp/x"));
        assert!(!is_reserved(V2026_07_28, "com.example.mcp/x"));
        assert!(!is_reserved(V2026_07_28, "modelcontextprotocol.io/x"));
        assert!(!is_reserved(V2025_03_26, "io.modelcontextprotocol/x"));
        assert!(!is_reserved(V2026_07_28, "progressToken"));
    }

    #[test]
    fn modern_keys_belong_to_2026() {
        for k in MODERN_REQUIRED_REQUEST_KEYS {
            assert!(protocol_keys(V2026_07_28).contains(k));
            assert!(!protocol_keys(V2025_06_18).contains(k));
        }
    }
}
