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
//! Every name of one upstream starts with the same prefix, whatever the length of the
//! name after it ([`NameRules::prefix_of`]): a host, and a person reading its list,
//! sees one prefix per upstream. The prefix depends on the namespace, the separator
//! and the limit only, never on the upstream's list, so a tool added or removed does
//! not rename the others.
//!
//! 1. The prefix is `<namespace><separator>` when that takes at most half the limit.
//!    A longer namespace is shortened once, for all its names:
//!    `<namespace head>_<hash of the namespace><separator>`, exactly half the limit
//!    long (the hash keeps two long namespaces with the same head apart).
//! 2. A name too long for the room left after the prefix loses its middle:
//!    `<prefix><name head>_<hash>_<name tail>`. The name's start and end stay
//!    readable.
//!
//! A single upstream's names have no prefix and go straight to the second form. A
//! limit too small for it keeps the start of the whole name and appends `_<hash>`.

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

/// The 8-hex-digit hash of `s`.
fn hash_of(s: &str) -> String {
    format!("{:08x}", stable_hash(s) as u32)
}

/// The 8-hex-digit hash of an upstream's (namespace, name).
fn hash8(namespace: &str, name: &str) -> String {
    hash_of(&format!("{namespace}\u{0}{name}"))
}

/// `name` (sanitised, so ASCII: any byte index is a char boundary) after `prefix`,
/// made to fit `max_len` with `hash` in it (see the module doc, Shortening).
fn shortened(prefix: &str, name: &str, hash: &str, max_len: usize) -> String {
    // The name's middle cut.
    let room = max_len.saturating_sub(prefix.len() + 2 + hash.len());
    if room >= 2 && name.len() > room {
        let start = room / 2;
        let end = room - start;
        let (a, b) = (&name[..start], &name[name.len() - end..]);
        return format!("{prefix}{a}_{hash}_{b}");
    }
    // A limit too small for it: the start of the whole, then the hash.
    let whole = format!("{prefix}{name}");
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

    /// What every exposed name of upstream `namespace` starts with: empty when names
    /// are not prefixed, else `<namespace><separator>` sanitised, or, when that is
    /// longer than half the limit, the namespace shortened once (see the module doc,
    /// Shortening).
    pub fn prefix_of(&self, namespace: &str) -> String {
        if !self.prefix {
            return String::new();
        }
        let (ns, sep) = (sanitize(namespace), sanitize(&self.separator));
        let budget = self.max_len / 2;
        if ns.len() + sep.len() <= budget {
            return format!("{ns}{sep}");
        }
        let hash = hash_of(namespace);
        let keep = budget.saturating_sub(sep.len() + 1 + hash.len());
        match &ns[..ns.len().min(keep)] {
            "" => format!("{hash}{sep}"),
            head => format!("{head}_{hash}{sep}"),
        }
    }

    /// The exposed name, with the hash even when it fits (`hashed`: a collision's
    /// later name).
    fn shape(&self, namespace: &str, name: &str, hashed: bool) -> String {
        let prefix = self.prefix_of(namespace);
        let clean = sanitize(name);
        // When sanitising changed a name, two originals may now look alike; the hash is
        // added only if they actually collide (see `NameMap::build`).
        let len = prefix.len() + clean.len();
        let hash = hash8(namespace, name);
        if hashed && len + 1 + hash.len() <= self.max_len {
            format!("{prefix}{clean}_{hash}")
        } else if hashed || len > self.max_len {
            shortened(&prefix, &clean, &hash, self.max_len)
        } else {
            format!("{prefix}{clean}")
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

    /// Issue #32: one upstream's shortened names carried as many prefixes as it had
    /// long tools (each tool's namespace cut to a different length).
    #[test]
    fn one_upstream_has_one_prefix_whatever_its_names_lengths() {
        let ns = "averyveryverylongnamespace_for_a_servers";
        let tools: Vec<String> = (0..14)
            .map(|i| format!("tool{i}_{}", "t".repeat(i * 3)))
            .collect();
        let entries = |tools: &[String]| -> Vec<(String, String)> {
            tools.iter().map(|t| (ns.to_owned(), t.clone())).collect()
        };
        let owned = entries(&tools);
        let m = NameMap::build(
            &rules(true),
            owned.iter().map(|(a, b)| (a.as_str(), b.as_str())),
        );
        let names: Vec<&str> = tools.iter().filter_map(|t| m.exposed(ns, t)).collect();
        assert_eq!(names.len(), tools.len());
        let prefixes: std::collections::BTreeSet<&str> = names
            .iter()
            .filter_map(|n| n.split_once("__").map(|(p, _)| p))
            .collect();
        assert_eq!(prefixes.len(), 1, "one prefix: {names:#?}");
        let prefix = prefixes.iter().next().copied().unwrap_or_default();
        assert!(prefix.starts_with("averyvery"), "{prefix}");
        for (t, n) in tools.iter().zip(&names) {
            assert!(n.len() <= 64 && valid(n), "{n}");
            assert_eq!(m.resolve(n), Some((ns, t.as_str())));
        }
        let unique: std::collections::HashSet<&&str> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "unique");
        assert!(m.collisions.is_empty());
        // Stable: a tool more, or a tool fewer, renames none of the others.
        let mut more = tools.clone();
        more.push(format!("late_{}", "l".repeat(60)));
        more.remove(0);
        let owned = entries(&more);
        let again = NameMap::build(
            &rules(true),
            owned.iter().map(|(a, b)| (a.as_str(), b.as_str())),
        );
        for t in &tools[1..] {
            assert_eq!(again.exposed(ns, t), m.exposed(ns, t), "{t}");
        }
        // A namespace within half the limit is kept whole, whatever the name.
        let long = "x".repeat(100);
        assert!(rules(true).exposed("fs", &long).starts_with("fs__xx"));
        assert_eq!(rules(true).exposed("fs", "read"), "fs__read");
    }

    #[test]
    fn a_long_namespace_is_shortened_once() {
        let ns = "averyveryverylongnamespace_for_a_servers";
        assert_eq!(ns.len(), 40);
        // 40 + 2 is more than half of 64: the namespace is cut to fill half, with a
        // hash of it; the name stays whole.
        let tool = "search_the_issue_tracker";
        let name = rules(true).exposed(ns, tool);
        let prefix = format!("averyveryverylongname_{}__", hash_of(ns));
        assert_eq!(rules(true).prefix_of(ns), prefix);
        assert_eq!(name, format!("{prefix}{tool}"));
        assert!(valid(&name), "{name}");
        assert_eq!(name, rules(true).exposed(ns, tool), "stable");
        // A short name has the same prefix.
        let name = rules(true).exposed(ns, "tool_name");
        assert_eq!(name, format!("{prefix}tool_name"));
        // Two long namespaces with the same head keep apart.
        assert_ne!(rules(true).prefix_of(&format!("{ns}_too")), prefix);
        // Without prefixes there is none.
        assert_eq!(rules(false).prefix_of(ns), "");
    }

    #[test]
    fn a_very_long_name_loses_only_its_middle() {
        let ns = "averyveryverylongnamespace_for_a_servers";
        let tool = format!("begin_{}_finish", "m".repeat(80));
        let name = rules(true).exposed(ns, &tool);
        assert_eq!(name.len(), 64, "{name}");
        let prefix = rules(true).prefix_of(ns);
        assert!(name.starts_with(&format!("{prefix}begin_m")), "{name}");
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
    fn a_collision_at_the_limit_keeps_the_prefix() {
        // Sanitised alike, and exactly at the limit: the later one's name loses its
        // middle for the hash, and keeps its upstream's prefix.
        let tool_a = format!("{} y", "x".repeat(40));
        let tool_b = format!("{}_y", "x".repeat(40));
        let ns = "namespace_of_twenty_"; // 20 + 2 + 42 = 64
        let m = NameMap::build(&rules(true), [(ns, tool_a.as_str()), (ns, tool_b.as_str())]);
        let first = m.exposed(ns, &tool_a).unwrap();
        let second = m.exposed(ns, &tool_b).unwrap();
        assert_eq!(first.len(), 64);
        assert_ne!(first, second);
        assert!(second.len() <= 64, "{second}");
        assert!(second.starts_with(&format!("{ns}__xxx")), "{second}");
        assert!(second.ends_with("x_y"), "{second}");
        assert!(second.contains(&hash8(ns, &tool_b)), "{second}");
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
