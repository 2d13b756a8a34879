//! The methods the gateway serves, parsed once per request from its name.
//!
//! The seam has already refused what the host's revision does not allow (its one
//! method gate); this only names what is left, so that dispatch and every check along
//! the call path match an enum instead of comparing strings.

use crate::catalog::ListKind;

/// A host request's method, as the gateway dispatches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    /// `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`.
    List(ListKind),
    /// `tools/call`.
    ToolsCall,
    /// `prompts/get`.
    PromptsGet,
    /// `resources/read`.
    ResourcesRead,
    /// `resources/subscribe`.
    ResourcesSubscribe,
    /// `resources/unsubscribe`.
    ResourcesUnsubscribe,
    /// `completion/complete`.
    Complete,
    /// `subscriptions/listen` (2026-07-28).
    Listen,
    /// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`, `tasks/update`.
    Tasks,
    /// Anything else: not a method mcpx serves.
    Other,
}

impl Method {
    /// The method named `name`.
    pub(crate) fn of(name: &str) -> Method {
        match name {
            "tools/call" => Method::ToolsCall,
            "tools/list" => Method::List(ListKind::Tools),
            "prompts/list" => Method::List(ListKind::Prompts),
            "resources/list" => Method::List(ListKind::Resources),
            "resources/templates/list" => Method::List(ListKind::Templates),
            "prompts/get" => Method::PromptsGet,
            "resources/read" => Method::ResourcesRead,
            "resources/subscribe" => Method::ResourcesSubscribe,
            "resources/unsubscribe" => Method::ResourcesUnsubscribe,
            "completion/complete" => Method::Complete,
            "subscriptions/listen" => Method::Listen,
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" | "tasks/update" => {
                Method::Tasks
            }
            _ => Method::Other,
        }
    }

    /// Whether a call of this method may carry mcpx's `requestState` of a parked call
    /// (the methods of multi round-trip requests, 2026-07-28 basic/patterns/mrtr).
    pub(crate) fn may_resume(self) -> bool {
        matches!(
            self,
            Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every method the protocol's table lets a host send is one the gateway
    /// dispatches, except those the seam answers itself.
    #[test]
    fn every_client_method_the_seam_passes_on_has_a_variant() {
        let answered_by_the_seam = ["initialize", "ping", "logging/setLevel", "server/discover"];
        for entry in mcpx_protocol::method::METHODS {
            let from_client = mcpx_protocol::Revision::ALL
                .iter()
                .any(|r| entry.direction(*r).from_client());
            if !from_client
                || answered_by_the_seam.contains(&entry.name)
                || entry.name.starts_with("notifications/")
            {
                continue;
            }
            assert_ne!(
                Method::of(entry.name),
                Method::Other,
                "{} has no variant",
                entry.name
            );
        }
    }
}
