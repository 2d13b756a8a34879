//! Property tests: `jsonrpc::members` and `jsonrpc::member` (a hand-written walk of the
//! text) give exactly the answers of a `serde_json` visitor over `RawValue`s (what they
//! replaced): the same verdict on every text, valid or not, and the same names and
//! value spans. `jsonrpc::first_member` and `jsonrpc::valid_members`, which trust their
//! text (no checks; the first stops at its match), give `member`'s and `members`'
//! answers on every valid text, and never panic on any other.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ops::Range;

use mcpx_protocol::jsonrpc::{first_member, member, members, valid_members};
use proptest::prelude::*;

use crate::common;
use serde::de::{DeserializeSeed, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// The reference: every member, as serde_json's own parser reads the object.
fn reference(obj: &str) -> Option<Vec<(String, Range<usize>)>> {
    struct All<'o>(&'o str);
    impl<'de> Visitor<'de> for All<'_> {
        type Value = Vec<(String, Range<usize>)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut all = Vec::new();
            while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                let v = map.next_value::<&'de RawValue>()?.get();
                let start = v.as_ptr() as usize - self.0.as_ptr() as usize;
                all.push((k.into_owned(), start..start + v.len()));
            }
            Ok(all)
        }
    }
    impl<'de> DeserializeSeed<'de> for All<'_> {
        type Value = Vec<(String, Range<usize>)>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
    }
    let mut de = serde_json::Deserializer::from_str(obj);
    let all = All(obj).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(all)
}

fn ours(obj: &str) -> Option<Vec<(String, Range<usize>)>> {
    members(obj).map(|m| m.into_iter().map(|(k, s)| (k.into_owned(), s)).collect())
}

fn same(text: &str) {
    assert_eq!(ours(text), reference(text), "{text:?}");
    // Valid or not, the walk that trusts its text never panics; on valid text it
    // answers as the checking walk does.
    let trusted = valid_members(text);
    if let Some(all) = reference(text) {
        let trusted: Option<Vec<(String, Range<usize>)>> =
            trusted.map(|m| m.into_iter().map(|(k, s)| (k.into_owned(), s)).collect());
        assert_eq!(trusted.as_ref(), Some(&all), "{text:?}");
        for (name, _) in &all {
            // The first member of that name.
            let first = all
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, s)| &text[s.clone()]);
            assert_eq!(member(text, name), first, "{text:?} {name:?}");
            // On valid text, the walk that stops at the first match agrees.
            assert_eq!(first_member(text, name), first, "{text:?} {name:?}");
        }
        assert_eq!(first_member(text, "absent"), None);
    }
    assert_eq!(member(text, "absent"), None);
}

/// Any JSON value, with strings that need escapes and keys that repeat.
fn json() -> impl Strategy<Value = Value> {
    common::json_value(
        "[a-z\"\\\\/\u{0}-\u{1f}\u{e9}\u{1f600}]{0,12}",
        "[a-c\"\\\\\u{1}]{0,3}",
    )
}

/// `v` written with whitespace between tokens and, sometimes, escapes in its strings
/// (`\u` forms of plain letters, `\/`): what another encoder may send.
fn written(v: &Value, pretty: bool, escape_letters: bool) -> String {
    let text = if pretty {
        serde_json::to_string_pretty(v).unwrap()
    } else {
        v.to_string()
    };
    if escape_letters {
        text.replace('a', "\\u0061").replace('/', "\\/")
    } else {
        text
    }
}

proptest! {
    #![proptest_config(common::config(3000))]

    #[test]
    fn objects_read_as_serde_json_reads_them(
        m in prop::collection::vec(("[a-c_\"\\\\]{0,3}", json()), 0..6),
        pretty in any::<bool>(),
        escape in any::<bool>(),
    ) {
        // A member list with possible duplicate names, written by hand.
        let body: Vec<String> = m
            .iter()
            .map(|(k, v)| format!("{}:{}", Value::from(k.as_str()), written(v, pretty, false)))
            .collect();
        let text = format!("{{{}}}", body.join(if pretty { ",\n  " } else { "," }));
        let text = if escape { text.replace('a', "\\u0061") } else { text };
        same(&text);
    }

    #[test]
    fn any_value_reads_as_serde_json_reads_it(v in json(), pretty in any::<bool>(), escape in any::<bool>()) {
        same(&written(&v, pretty, escape));
    }

    #[test]
    fn damaged_text_gets_serde_json_verdict(
        v in json(),
        at in any::<prop::sample::Index>(),
        how in 0..4u8,
        byte in prop::sample::select(b"{}[]\",:\\ 0-.eEtfnu\x01x".to_vec()),
    ) {
        let mut text = written(&serde_json::json!({"k": v, "l": [1, "x"]}), false, false).into_bytes();
        let i = at.index(text.len());
        match how {
            0 => { text.remove(i); }
            1 => text.insert(i, byte),
            2 => text[i] = byte,
            _ => text.truncate(i),
        }
        if let Ok(text) = String::from_utf8(text) {
            same(&text);
        }
    }

    #[test]
    fn arbitrary_text_gets_serde_json_verdict(text in "[{}\\[\\]\",:\\\\ 0-9.eE+tfnrula-c\u{1}]{0,40}") {
        same(&text);
    }
}

#[test]
fn edge_cases_read_as_serde_json_reads_them() {
    for text in [
        "{}",
        " {} ",
        "{\"a\":1}\n",
        "{\"a\":-0}",
        "{\"a\":-0.0e-0}",
        "{\"a\":1E+2}",
        "{\"a\":01}",
        "{\"a\":-}",
        "{\"a\":1.e1}",
        "{\"a\":[]}",
        "{\"a\":[[]],\"a\":{}}",
        "{\"\\ud800\":1}",
        "{\"a\":\"\\ud800\"}",
        "{\"\\ud83d\\ude00\":1}",
        "{\"a\":\"\\u00e9\\uD83D\\uDE00\"}",
        "{\"a\":\"\\u00g9\"}",
        "{\"a\":\"\u{7f}\"}",
        "{\"a\":\"\t\"}",
        "{\"a\" \t\r\n: 1}",
        "{\"a\":1}}",
        "{\"a\":1]",
        "{\"a\":[1}",
        "{\"a\":{\"b\":1]}",
        "{\"a\":true,\"b\":false,\"c\":null}",
        "{\"a\":truex}",
        "{\"a\":1 }",
        "\u{feff}{}",
    ] {
        same(text);
    }
}

#[test]
fn nesting_depth_is_read_as_serde_json_reads_it() {
    for depth in [1, 126, 127, 128, 129, 200, 1000] {
        let text = format!("{{\"a\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
        let r = reference(&text).is_some();
        assert_eq!(
            ours(&text).is_some(),
            r,
            "depth {depth}: serde_json says {r}"
        );
    }
}
