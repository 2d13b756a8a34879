//! The dispositions registry (`dispositions.toml`) covers exactly the register's ids,
//! and every `done` entry names a code site and tests that exist. Here, not in the
//! protocol crate's tests: decoding TOML takes a dependency that crate goes without.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

use mcpx_protocol::dispositions::{self, Disposition, Status};
use mcpx_testkit::shared::{read_shared, repo_root};

/// One row of ../shared/requirements/items.tsv.
struct RegisterItem {
    id: String,
    area: String,
    title: String,
}

/// The rows of ../shared/requirements/items.tsv (id, area, seed_disposition, title), in
/// file order.
fn register_items() -> Vec<RegisterItem> {
    let tsv = read_shared("requirements/items.tsv").unwrap();
    let mut lines = tsv.lines();
    assert_eq!(
        lines.next().map(|h| h.split('\t').collect::<Vec<_>>()),
        Some(vec!["id", "area", "seed_disposition", "title"]),
        "items.tsv's columns"
    );
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 4, "items.tsv row {l:?}");
            RegisterItem {
                id: cols[0].to_owned(),
                area: cols[1].to_owned(),
                title: cols[3].to_owned(),
            }
        })
        .collect()
}

/// The ids of ../shared/requirements/items.tsv, in file order.
fn register_ids() -> Vec<String> {
    register_items().into_iter().map(|r| r.id).collect()
}

/// Problems with `items` against the register ids and the source tree at `root`.
fn problems(items: &[Disposition], ids: &[String], root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let have: BTreeSet<&str> = items.iter().map(|d| d.id.as_str()).collect();
    let want: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    for missing in want.difference(&have) {
        out.push(format!("{missing}: missing from the registry"));
    }
    for unknown in have.difference(&want) {
        out.push(format!("{unknown}: not an id of items.tsv"));
    }
    for d in items {
        if d.behaviour.trim().is_empty() || d.behaviour.to_lowercase().contains("undisposed") {
            out.push(format!("{}: no decided behaviour", d.id));
        }
        if d.status != Status::Done {
            continue;
        }
        let site = d.site.split("::").next().unwrap_or_default();
        if !root.join(site).is_file() {
            out.push(format!("{}: code site {site} does not exist", d.id));
        }
        if d.tests.is_empty() {
            out.push(format!("{}: done but names no test", d.id));
        }
        for t in &d.tests {
            let Some((file, name)) = t.rsplit_once("::") else {
                out.push(format!("{}: test {t:?} is not `path::name`", d.id));
                continue;
            };
            let src = std::fs::read_to_string(root.join(file)).unwrap_or_default();
            let defines =
                src.contains(&format!("fn {name}(")) || src.contains(&format!("fn {name} ("));
            if !defines {
                out.push(format!("{}: test {t} does not exist", d.id));
            }
        }
    }
    out
}

#[test]
fn registry_covers_exactly_the_register() {
    let items = mcpx_testkit::dispositions::registry().unwrap();
    let ids = register_ids();
    assert_eq!(ids.len(), 118, "items.tsv has 118 ids");
    let found = problems(&items, &ids, &repo_root());
    assert!(found.is_empty(), "dispositions.toml:\n{}", found.join("\n"));
    // Same order as items.tsv, so the two files read side by side.
    let order: Vec<&str> = items.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(order, ids.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn every_title_and_area_is_the_registers() {
    let items = mcpx_testkit::dispositions::registry().unwrap();
    let mut wrong = Vec::new();
    for r in register_items() {
        let Some(d) = dispositions::find(&items, &r.id) else {
            continue; // registry_covers_exactly_the_register reports it.
        };
        if d.title != r.title {
            wrong.push(format!(
                "{}: title {:?}, items.tsv says {:?}",
                d.id, d.title, r.title
            ));
        }
        if d.area != r.area {
            wrong.push(format!(
                "{}: area {:?}, items.tsv says {:?}",
                d.id, d.area, r.area
            ));
        }
    }
    assert!(wrong.is_empty(), "dispositions.toml:\n{}", wrong.join("\n"));
}

#[test]
fn find_takes_an_id_in_any_case() {
    let items = mcpx_testkit::dispositions::registry().unwrap();
    assert_eq!(dispositions::find(&items, "E-12").unwrap().id, "E-12");
    assert_eq!(dispositions::find(&items, "e-12").unwrap().id, "E-12");
    assert!(dispositions::find(&items, "E-99").is_none());
}

#[test]
fn checker_catches_missing_unknown_and_unproven_entries() {
    let ids = vec!["H1".to_owned(), "H2".to_owned()];
    let text = r#"
[[item]]
id = "H1"
title = "t"
area = "headline"
kind = "decided"
status = "done"
behaviour = "b"
site = "crates/mcpx-protocol/src/codec.rs"
tests = ["crates/mcpx-protocol/tests/it/batch.rs::no_such_test", "crates/mcpx-protocol/tests/it/batch.rs::batch_is_refused_for_every_other_revision"]

[[item]]
id = "Z9"
title = "t"
area = "E"
kind = "decided"
status = "done"
behaviour = "b"
site = "crates/nowhere.rs"
tests = ["crates/mcpx-protocol/tests/it/batch.rs::batch_is_accepted_for_2025_03_26"]
"#;
    let items = mcpx_testkit::dispositions::parse(text).unwrap();
    let found = problems(&items, &ids, &repo_root());
    assert_eq!(
        found,
        [
            "H2: missing from the registry",
            "Z9: not an id of items.tsv",
            "H1: test crates/mcpx-protocol/tests/it/batch.rs::no_such_test does not exist",
            "Z9: code site crates/nowhere.rs does not exist",
        ]
    );
}

#[test]
fn parse_refuses_duplicates_unknown_keys_and_testless_done() {
    let dup = "[[item]]\nid='H1'\ntitle='t'\narea='A'\nkind='decided'\nstatus='planned'\nbehaviour='b'\nsite='s'\n\
               [[item]]\nid='H1'\ntitle='t'\narea='A'\nkind='decided'\nstatus='planned'\nbehaviour='b'\nsite='s'\n";
    assert!(
        mcpx_testkit::dispositions::parse(dup)
            .unwrap_err()
            .to_string()
            .contains("more than once")
    );
    let unknown = "[[item]]\nid='H1'\ntitle='t'\narea='A'\nkind='decided'\nstatus='planned'\nbehaviour='b'\nsite='s'\nowner='x'\n";
    assert!(mcpx_testkit::dispositions::parse(unknown).is_err());
    let testless = "[[item]]\nid='H1'\ntitle='t'\narea='A'\nkind='decided'\nstatus='done'\nbehaviour='b'\nsite='s'\n";
    assert!(
        mcpx_testkit::dispositions::parse(testless)
            .unwrap_err()
            .to_string()
            .contains("names no test")
    );
    let bad_status = "[[item]]\nid='H1'\ntitle='t'\narea='A'\nkind='decided'\nstatus='undisposed'\nbehaviour='b'\nsite='s'\n";
    assert!(mcpx_testkit::dispositions::parse(bad_status).is_err());
}
