//! What a reload changes: the new configuration diffed against the one in force, by
//! server name. A pure function, so the diff's rules are tested without processes.
//!
//! * An entry is **unchanged** when it is enabled in both and equal after parsing
//!   (so reformatting, comments and key order change nothing), and the global
//!   settings every upstream's connection is made with (`maxFrameBytes`, the spec
//!   policy, `askMaxPending`) are the same. Its process, sessions and calls in flight
//!   carry on.
//! * A **changed** entry is started again with the new settings.
//! * An entry that is gone, or now `disabled`, is **removed**; one that is new, or no
//!   longer disabled, is **added**.
//! * Global settings take effect at once (names, limits, timeouts), except
//!   `maxFrameBytes` for hosts' frames, which the listeners were started with.

use crate::config::Config;

/// The diff of two configurations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Servers started for the first time.
    pub added: Vec<String>,
    /// Servers started again with a new entry.
    pub changed: Vec<String>,
    /// Servers stopped.
    pub removed: Vec<String>,
    /// Servers left running.
    pub unchanged: Vec<String>,
    /// Settings that changed but apply only after a restart of mcpx.
    pub restart_needed: Vec<&'static str>,
}

impl Plan {
    /// Whether the reload changes any upstream.
    pub fn changes_upstreams(&self) -> bool {
        !(self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty())
    }
}

impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        for (what, names) in [
            ("added", &self.added),
            ("changed", &self.changed),
            ("removed", &self.removed),
            ("unchanged", &self.unchanged),
        ] {
            if !names.is_empty() {
                parts.push(format!("{what} {}", names.join(", ")));
            }
        }
        if parts.is_empty() {
            parts.push("no upstreams".to_owned());
        }
        f.write_str(&parts.join("; "))
    }
}

/// The diff from `old` to `new`.
pub fn plan(old: &Config, new: &Config) -> Plan {
    let mut p = Plan::default();
    let connection_settings_same = old.global.max_frame_bytes == new.global.max_frame_bytes
        && old.spec == new.spec
        && old.global.ask_max_pending == new.global.ask_max_pending;
    let enabled = |c: &Config, name: &str| c.servers.get(name).filter(|s| !s.disabled).cloned();
    for name in new.servers.keys() {
        let Some(now) = enabled(new, name) else {
            continue;
        };
        match enabled(old, name) {
            None => p.added.push(name.clone()),
            Some(before) if before == now && connection_settings_same => {
                p.unchanged.push(name.clone());
            }
            Some(_) => p.changed.push(name.clone()),
        }
    }
    for name in old.servers.keys() {
        if enabled(old, name).is_some() && enabled(new, name).is_none() {
            p.removed.push(name.clone());
        }
    }
    if old.global.max_frame_bytes != new.global.max_frame_bytes {
        p.restart_needed
            .push("mcpx.limits.maxFrameBytes (for hosts' frames)");
    }
    if old.global.max_sessions != new.global.max_sessions {
        p.restart_needed.push("mcpx.limits.maxSessions");
    }
    if old.global.session_idle != new.global.session_idle {
        p.restart_needed.push("mcpx.limits.sessionIdleMs");
    }
    if old.global.max_header_count != new.global.max_header_count {
        p.restart_needed.push("mcpx.limits.maxHeaderCount");
    }
    if old.global.max_header_bytes != new.global.max_header_bytes {
        p.restart_needed.push("mcpx.limits.maxHeaderBytes");
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::path::Path;

    fn config(text: &str) -> Config {
        parse(text, Path::new("t.json")).unwrap()
    }

    #[test]
    fn entries_are_diffed_by_name_and_parsed_value() {
        let old = config(
            r#"{"mcpServers": {
                "a": {"command": "a"},
                "b": {"command": "b"},
                "c": {"command": "c"},
                "e": {"command": "e", "disabled": true}
            }}"#,
        );
        let new = config(
            r#"{
                // a is reformatted, with a comment: unchanged.
                "mcpServers": {
                "a": { "command" : "a" },
                "b": {"command": "b", "args": ["--x"]},
                "d": {"command": "d"},
                "e": {"command": "e"}
            }}"#,
        );
        let p = plan(&old, &new);
        assert_eq!(p.unchanged, vec!["a"]);
        assert_eq!(p.changed, vec!["b"]);
        assert_eq!(p.added, vec!["d", "e"]);
        assert_eq!(p.removed, vec!["c"]);
        assert!(p.restart_needed.is_empty());
        assert_eq!(
            p.to_string(),
            "added d, e; changed b; removed c; unchanged a"
        );
    }

    #[test]
    fn a_connection_setting_changes_every_upstream() {
        let old = config(r#"{"mcpServers": {"a": {"command": "a"}}}"#);
        let new = config(
            r#"{"mcpServers": {"a": {"command": "a"}}, "mcpx": {"limits": {"maxFrameBytes": 1000000}}}"#,
        );
        let p = plan(&old, &new);
        assert_eq!(p.changed, vec!["a"]);
        assert_eq!(p.restart_needed.len(), 1);
        // Disabling removes; the mcpx block of an entry is part of it.
        let off = config(r#"{"mcpServers": {"a": {"command": "a", "disabled": true}}}"#);
        assert_eq!(plan(&old, &off).removed, vec!["a"]);
        let renamed =
            config(r#"{"mcpServers": {"a": {"command": "a", "mcpx": {"namespace": "x"}}}}"#);
        assert_eq!(plan(&old, &renamed).changed, vec!["a"]);
    }

    #[test]
    fn the_http_listeners_limits_need_a_restart() {
        let old = config(r#"{"mcpServers": {"a": {"command": "a"}}}"#);
        let new = config(
            r#"{"mcpServers": {"a": {"command": "a"}},
                "mcpx": {"limits": {"maxHeaderCount": 50, "maxHeaderBytes": 4096}}}"#,
        );
        let p = plan(&old, &new);
        assert_eq!(p.unchanged, vec!["a"]);
        assert_eq!(
            p.restart_needed,
            vec!["mcpx.limits.maxHeaderCount", "mcpx.limits.maxHeaderBytes"]
        );
    }
}
