//! How upstream names (tools, prompts) become the names a host sees, and back.
//!
//! Register D-C13: tool names SHOULD be unique, use `[A-Za-z0-9_.-]` and be at most 128
//! characters (2025-11-25 server/tools §Tool Names), and aggregators SHOULD
//! disambiguate, for example by prefixing a server identifier (2026-07-28). mcpx:
//!
//! * with a single upstream, names pass through unchanged;
//! * with several, a name becomes `<namespace><separator><name>`;
//! * characters outside `[A-Za-z0-9_.-]` become `_`;
//! * a name longer than the limit (default 64, where many hosts cap) is shortened and
//!   given a stable 8-hex-digit hash of the full original (namespace, NUL, name), so it
//!   stays unique and stays the same from run to run;
//! * two upstream names that would show as the same name are a *collision*: the later
//!   one (in upstream order, then list order) gets the hash as well, and the collision
//!   is reported, never silently dropped.
//!
//! # Shortening
//!
//! The hash stands where the cut is. The namespace is cut first, since the tool's own
//! name is what a model reads:
//!
//! 1. `<namespace head>_<hash><separator><name>`, the namespace cut to fit but kept to
//!    at least 4 characters. The name is whole.
//! 2. Failing that, the namespace is cut to 4 characters and the name loses its middle:
//!    `<namespace head><separator><name head>_<hash>_<name tail>`. The name's start and
//!    end stay readable.
//!
//! A single upstream's name (no namespace) goes straight to the second form. A limit
//! too small for either keeps the start of the whole name and appends `_<hash>`.

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
    /// Each entry's exposed name, in the order of the entries given to
    /// [`NameMap::build`] (a name listed twice, the first's): the catalog reads them in
    /// that order instead of looking each up.
    pub in_order: Vec<String>,
}

/// FNV-1a, 64-bit: a stable hash (std's hashers are seeded per process).
fn stable_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `s` with every character outside `[A-Za-z0-9_.-]` replaced by `_`.
pub(crate) fn sanitize(s: &str) -> String {
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

/// The fewest characters of a namespace kept when a name is shortened.
const MIN_NAMESPACE: usize = 4;

/// The 8-hex-digit hash of an upstream's (namespace, name).
fn hash8(namespace: &str, name: &str) -> String {
    format!(
        "{:08x}",
        stable_hash(&format!("{namespace}\u{0}{name}")) as u32
    )
}

/// `ns` (empty when names are not prefixed), `sep` and `name`, all sanitised (so
/// ASCII: any byte index is a char boundary), made to fit `max_len` with `hash` in
/// them (see the module doc, Shortening).
fn shortened(ns: &str, sep: &str, name: &str, hash: &str, max_len: usize) -> String {
    let sep = if ns.is_empty() { "" } else { sep };
    // 1. The namespace cut, the name whole.
    let floor = ns.len().min(MIN_NAMESPACE);
    if !ns.is_empty() {
        let room = max_len.checked_sub(1 + hash.len() + sep.len() + name.len());
        if let Some(keep) = room.filter(|k| *k >= floor) {
            let head = &ns[..ns.len().min(keep)];
            return format!("{head}_{hash}{sep}{name}");
        }
    }
    // 2. The namespace at its shortest, the name's middle cut.
    let head = &ns[..floor];
    let room = max_len.saturating_sub(head.len() + sep.len() + 2 + hash.len());
    if room >= 2 && name.len() > room {
        let start = room / 2;
        let end = room - start;
        let (a, b) = (&name[..start], &name[name.len() - end..]);
        return format!("{head}{sep}{a}_{hash}_{b}");
    }
    // A limit too small for either: the start of the whole, then the hash.
    let whole = format!("{ns}{sep}{name}");
    let keep = max_len.saturating_sub(1 + hash.len());
    let mut out = format!("{}_{hash}", &whole[..whole.len().min(keep)]);
    out.truncate(max_len);
    out
}

impl NameRules {
    /// The name a host sees for `name` of upstream `namespace`, before collisions.
    pub fn exposed(&self, namespace: &str, name: &str) -> String {
        self.shape(namespace, name, false)
    }

    /// The exposed name, with the hash even when it fits (`hashed`: a collision's
    /// later name).
    fn shape(&self, namespace: &str, name: &str, hashed: bool) -> String {
        let ns = if self.prefix {
            sanitize(namespace)
        } else {
            String::new()
        };
        let sep = if self.prefix {
            sanitize(&self.separator)
        } else {
            String::new()
        };
        let clean = sanitize(name);
        // When sanitising changed a name, two originals may now look alike; the hash is
        // added only if they actually collide (see `NameMap::build`).
        let len = ns.len() + sep.len() + clean.len();
        let hash = hash8(namespace, name);
        if hashed && len + 1 + hash.len() <= self.max_len {
            format!("{ns}{sep}{clean}_{hash}")
        } else if hashed || len > self.max_len {
            shortened(&ns, &sep, &clean, &hash, self.max_len)
        } else {
            format!("{ns}{sep}{clean}")
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
            if let Some(first) = map.forward.get(&key) {
                map.in_order.push(first.clone());
                continue; // the same upstream listed a name twice
            }
            let wanted = rules.exposed(ns, name);
            let exposed = match map.back.get(&wanted) {
                None => wanted,
                Some(kept) => {
                    let renamed = rules.shape(ns, name, true);
                    map.collisions.push(Collision {
                        wanted: wanted.clone(),
                        kept: kept.clone(),
                        renamed: (ns.to_owned(), name.to_owned(), renamed.clone()),
                    });
                    renamed
                }
            };
            map.back.insert(exposed.clone(), key.clone());
            map.in_order.push(exposed.clone());
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

    fn valid(name: &str) -> bool {
        name.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
    }

    #[test]
    fn a_long_namespace_is_cut_before_the_name() {
        let ns = "averyveryverylongnamespace_for_a_servers";
        assert_eq!(ns.len(), 40);
        // 40 + 2 + 24 > 64. Cut from the end, the name kept 13 of its 24 characters.
        let tool = "search_the_issue_tracker";
        let name = rules(true).exposed(ns, tool);
        assert!(name.len() <= 64, "{name}");
        assert!(name.starts_with("avery"), "{name}");
        assert!(name.ends_with(&format!("__{tool}")), "{name}");
        assert!(valid(&name), "{name}");
        assert_eq!(name, rules(true).exposed(ns, tool), "stable");
        let hash = hash8(ns, tool);
        assert!(name.contains(&format!("_{hash}__")), "{name}");
        // A short tool name fits beside the whole namespace: nothing is cut.
        let name = rules(true).exposed(ns, "tool_name");
        assert_eq!(name, format!("{ns}__tool_name"), "it fits: unchanged");
    }

    #[test]
    fn a_very_long_name_loses_only_its_middle() {
        let ns = "averyveryverylongnamespace_for_a_servers";
        let tool = format!("begin_{}_finish", "m".repeat(80));
        let name = rules(true).exposed(ns, &tool);
        assert_eq!(name.len(), 64, "{name}");
        assert!(name.starts_with("aver__begin_m"), "{name}");
        assert!(name.ends_with("m_finish"), "{name}");
        assert!(name.contains(&format!("_{}_", hash8(ns, &tool))), "{name}");
        assert!(valid(&name), "{name}");
        // One upstream: no namespace, the same cut.
        let name = rules(false).exposed(ns, &tool);
        assert_eq!(name.len(), 64, "{name}");
        assert!(
            name.starts_with("begin_m") && name.ends_with("m_finish"),
            "{name}"
        );
    }

    #[test]
    fn every_limit_is_kept() {
        let ns = "n".repeat(30);
        let tool = "t".repeat(30);
        for max_len in 0..80 {
            let r = NameRules {
                max_len,
                ..rules(true)
            };
            for (a, b) in [(ns.as_str(), tool.as_str()), ("ns", "x"), ("", "tool")] {
                let name = r.exposed(a, b);
                assert!(name.len() <= max_len, "{max_len}: {name}");
                assert!(valid(&name), "{name}");
                let renamed = r.shape(a, b, true);
                assert!(renamed.len() <= max_len, "{max_len}: {renamed}");
            }
        }
    }

    #[test]
    fn a_collision_at_the_limit_keeps_the_name_tail() {
        // Sanitised alike, and exactly at the limit: the later one's hash goes into
        // its namespace, and both names stay whole.
        let tool_a = format!("{} y", "x".repeat(40));
        let tool_b = format!("{}_y", "x".repeat(40));
        let ns = "namespace_of_twenty_"; // 20 + 2 + 42 = 64
        let m = NameMap::build(&rules(true), [(ns, tool_a.as_str()), (ns, tool_b.as_str())]);
        let first = m.exposed(ns, &tool_a).unwrap();
        let second = m.exposed(ns, &tool_b).unwrap();
        assert_eq!(first.len(), 64);
        assert_ne!(first, second);
        assert!(second.len() <= 64, "{second}");
        assert!(second.ends_with(&format!("__{}", tool_b)), "{second}");
        assert_eq!(m.collisions.len(), 1);
        assert_eq!(m.resolve(second), Some((ns, tool_b.as_str())));
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
