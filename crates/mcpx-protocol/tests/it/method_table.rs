//! The method table (`mcpx_protocol::method::METHODS`) equals what the five schemas say.
//!
//! Each revision's `schema.json` is read from ../shared/spec; a definition with a
//! `properties.method.const` is a message type, and the `ClientRequest`,
//! `ServerRequest`, `ClientNotification` and `ServerNotification` unions give its
//! direction (as ../shared/spec/tools/methods_table.py does). Any difference in either
//! direction fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use mcpx_protocol::Revision;
use mcpx_protocol::method::{Direction, Kind, METHODS, TASKS_EXTENSION_METHODS};
use mcpx_testkit::shared::read_shared;
use serde_json::Value;

fn defs(schema: &Value) -> &serde_json::Map<String, Value> {
    schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .and_then(Value::as_object)
        .expect("schema has definitions")
}

fn method_const(node: &Value) -> Option<String> {
    let m = node.get("properties").and_then(|p| p.get("method"));
    if let Some(c) = m.and_then(|m| m.get("const")).and_then(Value::as_str) {
        return Some(c.to_owned());
    }
    if let Some([only]) = m
        .and_then(|m| m.get("enum"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        return only.as_str().map(str::to_owned);
    }
    node.get("allOf")?.as_array()?.iter().find_map(method_const)
}

fn union_refs(node: &Value) -> Vec<String> {
    let mut alts: Vec<&Value> = Vec::new();
    for key in ["anyOf", "oneOf"] {
        if let Some(a) = node.get(key).and_then(Value::as_array) {
            alts.extend(a);
        }
    }
    if alts.is_empty() && node.get("$ref").is_some() {
        alts.push(node);
    }
    alts.iter()
        .filter_map(|a| a.get("$ref").and_then(Value::as_str))
        .map(|r| r.rsplit('/').next().unwrap_or(r).to_owned())
        .collect()
}

/// method -> (kind, direction) as the schema of `rev` says.
fn schema_methods(rev: Revision) -> BTreeMap<String, (Kind, Direction)> {
    let text = read_shared(&format!("spec/{}/schema/schema.json", rev.as_str())).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let d = defs(&schema);
    let unions = [
        "ClientRequest",
        "ServerRequest",
        "ClientNotification",
        "ServerNotification",
    ];
    let mut by_def = BTreeMap::new();
    for (name, node) in d {
        if unions.contains(&name.as_str()) {
            continue;
        }
        if let Some(m) = method_const(node) {
            by_def.insert(name.clone(), m);
        }
    }
    // method -> (from client, from server)
    let mut dirs: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for (union, client) in [
        ("ClientRequest", true),
        ("ServerRequest", false),
        ("ClientNotification", true),
        ("ServerNotification", false),
    ] {
        let Some(node) = d.get(union) else { continue };
        let mut methods: Vec<String> = union_refs(node)
            .into_iter()
            .filter_map(|r| by_def.get(&r).cloned())
            .collect();
        // A one-member union is inlined by the schema generator.
        methods.extend(method_const(node));
        for m in methods {
            let e = dirs.entry(m).or_default();
            if client {
                e.0 = true;
            } else {
                e.1 = true;
            }
        }
    }
    let mut out = BTreeMap::new();
    for (name, m) in &by_def {
        let kind = if name.ends_with("Notification") {
            Kind::Notification
        } else {
            Kind::Request
        };
        let dir = match dirs.get(m) {
            Some((true, true)) => Direction::Both,
            Some((true, false)) => Direction::ClientToServer,
            Some((false, true)) => Direction::ServerToClient,
            // In no direction union: in 2026-07-28 the requests that travel only inside
            // InputRequiredResult.inputRequests (MRTR).
            _ => Direction::Embedded,
        };
        out.insert(m.clone(), (kind, dir));
    }
    out
}

#[test]
fn method_table_equals_every_schema() {
    let mut differences = Vec::new();
    for rev in Revision::ALL {
        let schema = schema_methods(rev);
        let table: BTreeMap<String, (Kind, Direction)> = METHODS
            .iter()
            .filter(|e| e.direction(rev).exists())
            .map(|e| (e.name.to_owned(), (e.kind, e.direction(rev))))
            .collect();
        let names: BTreeSet<&String> = schema.keys().chain(table.keys()).collect();
        for name in names {
            let (s, t) = (schema.get(name), table.get(name));
            if s != t {
                differences.push(format!("{rev} {name}: schema {s:?}, table {t:?}"));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "method table differs from the schemas:\n{}",
        differences.join("\n")
    );
}

#[test]
fn embedded_requests_are_exactly_the_mrtr_input_requests_of_2026() {
    let embedded: BTreeSet<&str> = METHODS
        .iter()
        .filter(|e| e.direction(Revision::V2026_07_28) == Direction::Embedded)
        .map(|e| e.name)
        .collect();
    assert_eq!(
        embedded,
        BTreeSet::from(["elicitation/create", "roots/list", "sampling/createMessage"])
    );
}

#[test]
fn tasks_extension_table_equals_its_schema() {
    let text = read_shared("spec/extensions/tasks/ext-tasks-2026-07-28/schema.json").unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    // The extension schema restates the core MRTR input requests it embeds; its own
    // methods are the ones the core 2026-07-28 table does not have.
    let from_schema: BTreeSet<String> = defs(&schema)
        .values()
        .filter_map(method_const)
        .filter(|m| !mcpx_protocol::method::direction(m, Revision::V2026_07_28).exists())
        .collect();
    let table: BTreeSet<String> = TASKS_EXTENSION_METHODS
        .iter()
        .map(|m| m.name.to_owned())
        .collect();
    assert_eq!(table, from_schema);
}
