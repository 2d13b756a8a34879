//! Upstream identities.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

/// An upstream's stable identity: its server name in the configuration.
///
/// Cloning is cheap: the name is shared.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UpstreamId(Arc<str>);

impl UpstreamId {
    /// The identity of the server named `name` in the configuration.
    pub fn new(name: &str) -> Self {
        UpstreamId(Arc::from(name))
    }

    /// The server name, shared (cloning it copies no text).
    pub fn shared(&self) -> &Arc<str> {
        &self.0
    }

    /// The server name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UpstreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for UpstreamId {
    fn from(name: &str) -> Self {
        UpstreamId::new(name)
    }
}

impl Borrow<str> for UpstreamId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn looks_up_by_name_and_displays_it() {
        let id = UpstreamId::new("fs");
        let mut m = HashMap::new();
        m.insert(id.clone(), 1);
        assert_eq!(m.get("fs"), Some(&1));
        assert_eq!(id.to_string(), "fs");
        assert_eq!(id.as_str(), "fs");
        assert_eq!(UpstreamId::from("fs"), id);
    }
}
