//! How upstream names (tools, prompts) become the names a host sees, and back.
//!
//! Register D-C13: tool names SHOULD be unique, use `[A-Za-z0-9_.-]` and be at most 128
//! characters (2025-11-25 server/tools §Tool Names), and aggregators SHOULD
//! disambiguate, for example by prefixing a server identifier (2026-07-28). mcpx:
//!
//! * with a single upstream, names pass through unchanged;
//! * with several, a name becomes `<namespace><separator><name>`;
//! * characters outside `[A-Za-z0-9_.-]` become `_`;
//! * a name longer than the limit (default 64, where many hosts cap) is cut and given a
//!   stable 8-hex-digit hash of the full original, so it stays unique and stays the
//!   same from run to run;
//! * two upstream names that would show as the same name are a *collision*: the later
//!   one (in upstream order, then list order) gets the hash suffix as well, and the
//!   collision is reported, never silently dropped.

use std::collections::HashMap;

/// Naming settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameRules {
    /// Between namespace and name.
    pub separator: String,
    /// Longest exposed name.
    pub max_len: usize,
    /// Prefix names with their namespace (several upstreams), or not (one).
    pub prefix: bool,
}

/// Two upstream names that would have shown as one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collision {
    /// The name both would have had.
    pub wanted: String,
    /// The one that kept it: (upstream, original name).
    pub kept: (String, String),
    /// The one renamed: (upstream, original name, exposed name).
    pub renamed: (String, String, String),
}

/// A two-way map between exposed names and (upstream, original name).
#[derive(Debug, Clone, Default)]
pub struct NameMap {
    forward: HashMap<(String, String), String>,
    back: HashMap<String, (String, String)>,
    /// Collisions found while building the map.
    pub collisions: Vec<Collision>,
}

/// FNV-1a, 64-bit: a stable hash (std's hashers are seeded per process).
fn stable_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `name` cut to fit `max_len` with `_<hash of key>` appended.
fn hashed(name: &str, key: &str, max_len: usize) -> String {
    let suffix = format!("_{:08x}", stable_hash(key) as u32);
    let keep = max_len.saturating_sub(suffix.len());
    // `name` is ASCII after sanitising, so any byte index is a char boundary.
    let head = &name[..name.len().min(keep)];
    format!("{head}{suffix}")
}

impl NameRules {
    /// The name a host sees for `name` of upstream `namespace`, before collisions.
    pub fn exposed(&self, namespace: &str, name: &str) -> String {
        let full = if self.prefix {
            format!("{namespace}{}{name}", self.separator)
        } else {
            name.to_owned()
        };
        let clean = sanitize(&full);
        // When sanitising changed a name, two originals may now look alike; the hash is
        // added only if they actually collide (see `NameMap::build`).
        if clean.len() <= self.max_len {
            clean
        } else {
            hashed(&clean, &format!("{namespace}\u{0}{name}"), self.max_len)
        }
    }
}

impl NameMap {
    /// Builds the map for `entries` of (upstream namespace, original name), in order.
    pub fn build<'a>(
        rules: &NameRules,
        entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> NameMap {
        let mut map = NameMap::default();
        for (ns, name) in entries {
            let key = (ns.to_owned(), name.to_owned());
            if map.forward.contains_key(&key) {
                continue; // the same upstream listed a name twice
            }
            let wanted = rules.exposed(ns, name);
            let exposed = match map.back.get(&wanted) {
                None => wanted,
                Some(kept) => {
                    let renamed = hashed(
                        &wanted,
                        &format!("{ns}\u{0}{name}"),
                        rules.max_len.min(wanted.len() + 9),
                    );
                    map.collisions.push(Collision {
                        wanted: wanted.clone(),
                        kept: kept.clone(),
                        renamed: (ns.to_owned(), name.to_owned(), renamed.clone()),
                    });
                    renamed
                }
            };
            map.back.insert(exposed.clone(), key.clone());
            map.forward.insert(key, exposed);
        }
        map
    }

    /// The exposed name of an upstream's name.
    pub fn exposed(&self, namespace: &str, name: &str) -> Option<&str> {
        self.forward
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(String::as_str)
    }

    /// The upstream and original name behind an exposed name.
    pub fn resolve(&self, exposed: &str) -> Option<(&str, &str)> {
        self.back
            .get(exposed)
            .map(|(ns, n)| (ns.as_str(), n.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(prefix: bool) -> NameRules {
        NameRules {
            separator: "__".to_owned(),
            max_len: 64,
            prefix,
        }
    }

    #[test]
    fn single_upstream_passes_through() {
        let m = NameMap::build(&rules(false), [("fs", "read_file")]);
        assert_eq!(m.exposed("fs", "read_file"), Some("read_file"));
        assert_eq!(m.resolve("read_file"), Some(("fs", "read_file")));
    }

    #[test]
    fn several_upstreams_are_prefixed_and_sanitised() {
        let m = NameMap::build(&rules(true), [("fs", "read_file"), ("web", "fetch url")]);
        assert_eq!(m.exposed("fs", "read_file"), Some("fs__read_file"));
        assert_eq!(m.exposed("web", "fetch url"), Some("web__fetch_url"));
        assert_eq!(m.resolve("web__fetch_url"), Some(("web", "fetch url")));
        assert!(m.collisions.is_empty());
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let long = "x".repeat(100);
        let a = NameMap::build(&rules(true), [("ns", long.as_str())]);
        let name = a.exposed("ns", &long).unwrap().to_owned();
        assert_eq!(name.len(), 64);
        assert!(name.starts_with("ns__xxx"));
        let b = NameMap::build(&rules(true), [("ns", long.as_str())]);
        assert_eq!(
            b.exposed("ns", &long),
            Some(name.as_str()),
            "stable across builds"
        );
        assert_eq!(a.resolve(&name), Some(("ns", long.as_str())));
    }

    #[test]
    fn collisions_are_reported_and_both_kept() {
        let m = NameMap::build(&rules(true), [("a", "x y"), ("a", "x_y")]);
        let first = m.exposed("a", "x y").unwrap();
        let second = m.exposed("a", "x_y").unwrap();
        assert_eq!(first, "a__x_y");
        assert_ne!(first, second);
        assert_eq!(m.resolve(second), Some(("a", "x_y")));
        assert_eq!(m.collisions.len(), 1);
        assert_eq!(m.collisions[0].wanted, "a__x_y");
        assert!(
            second
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        );
    }
}
