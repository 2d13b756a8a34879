//! Property tests of [`Params`]: what the decoder saw of `_meta` and `name` answers as
//! a walk of the params would, and every edit keeps the text valid JSON with the
//! meaning intended, so that the upstream's request can be written from it without
//! being checked again (`Frame::request_with_params`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcpx_protocol::codec::{self, Decoded, Limits};
use mcpx_protocol::jsonrpc::{first_member, members, sole_member};
use mcpx_protocol::params::MetaMembers;
use mcpx_protocol::{Frame, Id, Params};
use proptest::prelude::*;
use serde::Deserializer;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::common;

/// Separators as a host may write them.
fn space() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", " ", "\n  "])
}

/// An object's text from its members' texts (key and value already JSON), with
/// `sp` around every token: duplicate keys and escaped names stay as written.
fn object(members: &[(String, String)], sp: &str) -> String {
    let inner: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("{k}{sp}:{sp}{v}"))
        .collect();
    format!("{{{sp}{}{sp}}}", inner.join(&format!("{sp},{sp}")))
}

/// A `_meta` value: usually an object (keys mcpx strips or keeps, some spelled with
/// escapes, some repeated), sometimes any other JSON.
fn meta_value() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        r#""progressToken""#,
        r#""io.modelcontextprotocol/protocolVersion""#,
        r#""k""#,
        r#""x""#,
        r#""\u006b""#,
    ]);
    prop_oneof![
        4 => (
            prop::collection::vec((key, common::json_value("[a-z]{0,3}", "[a-z]{0,2}")), 0..5),
            space()
        )
            .prop_map(|(m, sp)| {
                let m: Vec<(String, String)> =
                    m.into_iter().map(|(k, v)| (k.to_owned(), v.to_string())).collect();
                object(&m, sp)
            }),
        1 => common::json_value("[a-z]{0,3}", "[a-z]{0,2}").prop_map(|v| v.to_string()),
    ]
}

/// A request's params: an object of members named `name`, `_meta` (either possibly
/// spelled with escapes, or given twice) and others; now and then not an object.
fn params_text() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        r#""name""#,
        r#""_meta""#,
        r#""\u005fmeta""#,
        r#""n\u0061me""#,
        r#""a""#,
        r#""arguments""#,
        // A surrogate pair (U+1F600), and a lone one, which serde_json refuses in a
        // name it reads (issue #24 defect 6): the request is refused.
        r#""\ud83d\ude00""#,
        r#""\udd04""#,
    ]);
    let value = prop_oneof![
        2 => meta_value(),
        1 => "[a-z_]{0,6}".prop_map(|s| Value::String(s).to_string()),
    ];
    prop_oneof![
        8 => (prop::collection::vec((key, value), 0..6), space()).prop_map(|(m, sp)| {
            let m: Vec<(String, String)> = m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            object(&m, sp)
        }),
        1 => common::json_value("[a-z]{0,3}", "[a-z]{0,2}").prop_map(|v| v.to_string()),
    ]
}

/// The params of a request decoded from `params`; with `read`, after its `_meta` was
/// read (as classifying a request does), so that the params take the members found.
fn decoded(params: &str, read: bool) -> Option<Params> {
    let text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#);
    match codec::decode(text, &Limits::default()) {
        Ok(Decoded::Single(f)) => {
            if read {
                let _ = f.params_meta("k");
            }
            Params::of(&f)
        }
        _ => None,
    }
}

/// What the params' own accessors answer agrees with walks of their text.
fn agrees_with_walks(p: &Params) -> Result<(), TestCaseError> {
    for name in ["_meta", "name", "a"] {
        prop_assert_eq!(
            p.sole_member(name),
            sole_member(p.as_str(), name),
            "{}",
            name
        );
    }
    // A lookup that trusts the decoder's "no name has escapes" finds what a walk does.
    for name in ["_meta", "name", "a", "arguments", "task", "me"] {
        prop_assert_eq!(p.member(name), first_member(p.as_str(), name), "{}", name);
    }
    // A request written from them decodes to the same frame, whose `_meta` reads
    // answer as walks do.
    let frame = Frame::request_with_params(&Id::Number(7), "tools/call", Some(p));
    let again = match codec::decode(frame.as_str().to_owned(), &Limits::default()) {
        Ok(Decoded::Single(f)) => f,
        other => return Err(TestCaseError::fail(format!("{other:?}: {frame}"))),
    };
    prop_assert_eq!(&again, &frame);
    // The keys of every generated `_meta` and envelope, escaped names included.
    for key in [
        "k",
        "x",
        "progressToken",
        "io.modelcontextprotocol/protocolVersion",
        "y",
        "y\"z",
    ] {
        let walked = frame
            .params()
            .and_then(|t| first_member(t, "_meta"))
            .and_then(|m| first_member(m, key));
        prop_assert_eq!(frame.params_meta_once(key), walked);
        prop_assert_eq!(frame.params_meta(key), walked);
    }
    Ok(())
}

/// An object's members as serde_json reads them (names decoded, values as written),
/// repeats included; `None` where it refuses the text, or a name in it.
fn read_by_serde_json(text: &str) -> Option<Vec<(String, Box<RawValue>)>> {
    struct All;
    impl<'de> Visitor<'de> for All {
        type Value = Vec<(String, Box<RawValue>)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut all = Vec::new();
            while let Some(k) = map.next_key::<String>()? {
                all.push((k, map.next_value()?));
            }
            Ok(all)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let all = (&mut de).deserialize_map(All).ok()?;
    de.end().ok()?;
    Some(all)
}

/// Whether serde_json reads every name mcpx reads in a request's params: theirs, and
/// those of every `_meta` member that is an object. Strings anywhere else are skipped
/// unread, as a `RawValue` skips them (so a lone surrogate there is no error).
fn serde_json_reads_the_names(params: &str) -> bool {
    read_by_serde_json(params).is_some_and(|all| {
        all.iter()
            .filter(|(k, v)| k == "_meta" && v.get().starts_with('{'))
            .all(|(_, v)| read_by_serde_json(v.get()).is_some())
    })
}

/// The keys of an object's text as written (decoded), repeats included; `None` when it
/// is no object.
fn keys(text: &str) -> Option<Vec<String>> {
    members(text).map(|m| m.into_iter().map(|(k, _)| k.into_owned()).collect())
}

proptest! {
    #![proptest_config(common::config(512))]

    /// The decoder's hints answer as walks do, on params of every shape.
    #[test]
    fn a_decoded_requests_params_know_what_a_walk_finds(text in params_text(), read: bool) {
        let Some(p) = decoded(&text, read) else { return Ok(()) };
        prop_assert_eq!(p.as_str(), text.as_str());
        agrees_with_walks(&p)?;
        agrees_with_walks(&Params::parse(text.clone()).unwrap())?;
    }

    /// `with_meta` gives the same object as editing the parsed value would, in valid
    /// text, or declines exactly where the general path must decide.
    #[test]
    fn rewriting_meta_keeps_the_params_valid_and_their_meaning(
        text in params_text(),
        added in prop::collection::vec(
            (prop::sample::select(vec!["io.modelcontextprotocol/protocolVersion", "progressToken", "y", "y\"z"]),
             common::json_value("[a-z]{0,3}", "[a-z]{0,2}")),
            0..3,
        ),
        read: bool,
    ) {
        let Some(p) = decoded(&text, read) else { return Ok(()) };
        let mut envelope = MetaMembers::default();
        let mut written: Vec<&str> = Vec::new();
        for (k, v) in &added {
            if !written.contains(k) {
                envelope.push(k, v);
                written.push(k);
            }
        }
        let keep = |k: &str| k != "progressToken" && !written.contains(&k);
        let out = p.with_meta(keep, &envelope);
        let metas = keys(&text).map(|ks| ks.iter().filter(|k| *k == "_meta").count());
        let meta_text = first_member(&text, "_meta");
        let meta_keys = meta_text.and_then(keys);
        let declines = metas.is_none()
            || metas > Some(1)
            || (metas == Some(1) && meta_keys.as_ref().is_none_or(|ks| {
                ks.iter().enumerate().any(|(i, k)| ks[..i].contains(k))
            }));
        let Some(out) = out else {
            prop_assert!(declines, "declined {}", text);
            return Ok(());
        };
        prop_assert!(!declines, "rewrote {} as {}", text, out.as_str());
        let before: Value = serde_json::from_str(&text).unwrap();
        let after: Value = serde_json::from_str(out.as_str()).unwrap();
        // Outside `_meta`, nothing changed.
        let without_meta = |v: &Value| {
            let mut v = v.clone();
            v.as_object_mut().map(|o| o.remove("_meta"));
            v
        };
        prop_assert_eq!(without_meta(&after), without_meta(&before));
        // Inside, the kept members and the added ones.
        let mut expected: Map<String, Value> = before
            .get("_meta")
            .and_then(Value::as_object)
            .map(|m| m.iter().filter(|(k, _)| keep(k)).map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        for (k, v) in &added {
            expected.entry(k.to_string()).or_insert_with(|| v.clone());
        }
        if metas == Some(0) && envelope.is_empty() {
            prop_assert!(after.get("_meta").is_none());
        } else {
            prop_assert_eq!(after.get("_meta"), Some(&Value::Object(expected)));
        }
        agrees_with_walks(&out)?;
    }

    /// Renaming `name` keeps every other byte and the text valid; it declines when
    /// `name` is not there exactly once.
    #[test]
    fn renaming_keeps_the_params_valid(text in params_text(), new in "[a-z\"\\\\é]{0,6}", read: bool) {
        let Some(p) = decoded(&text, read) else { return Ok(()) };
        let names = keys(&text).map(|ks| ks.iter().filter(|k| *k == "name").count());
        let Some(out) = p.with_name(&new) else {
            prop_assert_ne!(names, Some(1));
            return Ok(());
        };
        prop_assert_eq!(names, Some(1));
        let mut before: Value = serde_json::from_str(&text).unwrap();
        let after: Value = serde_json::from_str(out.as_str()).unwrap();
        before["name"] = Value::String(new.clone());
        prop_assert_eq!(after, before);
        agrees_with_walks(&out)?;
    }
}

/// Issue #24 defect 6, found by the `params` fuzz target: its minimised input, base64
/// `f3siXHVkZDA0IjoxfQ==`, is the byte 0x7f (read `_meta` first) and the params
/// `{"\udd04":1}`, a member name that is a lone surrogate escape. serde_json refuses
/// such a name in every string it reads (`lone leading surrogate in hex escape`,
/// a syntax error), while a `RawValue` skips it unread; the decoder accepted the
/// request, and then a walk of the params failed at that name (so `name` and `_meta`
/// after it were "not there") while the hints of the params `with_meta` wrote said
/// `_meta` was. Now the decoder reads the names of `params` (and of their `_meta`) as
/// serde_json reads them: the request is refused as a parse error, to its id, and no
/// params carry a name the walks cannot read.
#[test]
fn a_lone_surrogate_in_a_member_name_is_refused_as_serde_json_refuses_it() {
    let input = b"\x7f{\"\\udd04\":1}";
    let (&read, rest) = input.split_first().unwrap();
    assert_eq!(read, 0x7f);
    let rest = std::str::from_utf8(rest).unwrap();
    for params in [
        rest,
        r#"{"\udd04":1,"name":"test_simple_text","arguments":{}}"#,
        r#"{"name":"t","\ud800":1}"#,
        r#"{"name":"t","\ud800\u0041":1}"#,
        r#"{"name":"t","\udfff\ud800":1}"#,
        r#"{"_meta":{"\udd04":1},"name":"t"}"#,
        r#"{"_m\u0065ta":{"\udd04":1},"name":"t"}"#,
        r#"{"name":"t","_meta":{"k":1,"\ud800":{}}}"#,
    ] {
        assert!(!serde_json_reads_the_names(params), "{params}");
        let text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#);
        let err = codec::decode(text.clone(), &Limits::default()).unwrap_err();
        assert_eq!(err.code(), -32700, "{params}: {err}");
        assert_eq!(err.id, Some(Id::Number(1)), "{params}: {err}");
        // serde_json's words, at the place in the frame where it reads them.
        let whole = serde_json::from_str::<Value>(&text).unwrap_err();
        assert_eq!(err.to_string(), format!("parse error: {whole}"), "{params}");
        let response = err.to_response();
        assert_eq!(response.id(), Some(&Id::Number(1)));
        assert!(Params::parse(params.to_owned()).is_err(), "{params}");
    }
    // serde_json reads a surrogate pair, and skips the strings mcpx does not read (a
    // value, a name deeper than `params` and its `_meta`): those requests are served,
    // and their params answer as walks do, before and after mcpx's edits.
    for params in [
        r#"{"\ud83d\ude00":1,"name":"test_simple_text","arguments":{}}"#,
        r#"{"name":"\udd04","arguments":{"\udd04":"\ud800"}}"#,
        r#"{"name":"t","a":{"_meta":{"\udd04":1}},"_meta":{"k":"\udd04"}}"#,
    ] {
        assert!(serde_json_reads_the_names(params), "{params}");
        for read in [false, true] {
            let p = decoded(params, read).unwrap_or_else(|| panic!("refused {params}"));
            agrees_with_walks(&p).unwrap();
            let mut envelope = MetaMembers::default();
            envelope.push("progressToken", &Value::from(7));
            let out = p.with_meta(|k| k != "progressToken", &envelope).unwrap();
            agrees_with_walks(&out).unwrap();
            agrees_with_walks(&p.with_name("ns__t").unwrap()).unwrap();
        }
    }
}

/// A member name mcpx reads in a request's params (theirs, their `_meta`'s), written
/// plainly, with escapes, as a surrogate pair, or as a lone surrogate.
fn any_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        r#""name""#,
        r#""_meta""#,
        r#""\u005fmeta""#,
        r#""k""#,
        r#""\ud83d\ude00""#,
        r#""\udd04""#,
        r#""\ud800""#,
        r#""\ud800\u0041""#,
        r#""\ud800\\""#,
    ])
}

/// A value with strings (and names, one level in) that may be lone surrogates: read
/// by no one, so never a reason to refuse.
fn unread_value() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        r#""\udd04""#,
        r#""t""#,
        r#"{"\udd04":"\ud800"}"#,
        r#"{"_meta":{"\udd04":1}}"#,
        r#"[{"\ud800":1}]"#,
        "1",
    ])
    .prop_map(str::to_owned)
}

proptest! {
    #![proptest_config(common::config(1024))]

    /// The decoder refuses a request exactly where serde_json cannot read a name mcpx
    /// reads, and otherwise its params answer as walks do, before and after mcpx's
    /// edits: a hint never decides what a walk would not.
    #[test]
    fn names_are_read_as_serde_json_reads_them(
        outer in prop::collection::vec((any_name(), unread_value()), 0..4),
        meta in prop::option::of(prop::collection::vec((any_name(), unread_value()), 0..4)),
        meta_at in any::<prop::sample::Index>(),
        read: bool,
    ) {
        let mut members: Vec<(String, String)> =
            outer.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        if let Some(m) = meta {
            let m: Vec<(String, String)> = m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            let at = meta_at.index(members.len() + 1);
            members.insert(at, ("\"_meta\"".to_owned(), object(&m, "")));
        }
        let text = object(&members, "");
        let p = decoded(&text, read);
        prop_assert_eq!(p.is_some(), serde_json_reads_the_names(&text), "{}", text);
        prop_assert_eq!(Params::parse(text.clone()).is_ok(), serde_json_reads_the_names(&text));
        let Some(p) = p else { return Ok(()) };
        agrees_with_walks(&p)?;
        let mut envelope = MetaMembers::default();
        envelope.push("io.modelcontextprotocol/protocolVersion", &Value::from("2026-07-28"));
        let keep = |k: &str| k != "io.modelcontextprotocol/protocolVersion";
        for added in [envelope, MetaMembers::default()] {
            if let Some(out) = p.with_meta(keep, &added) {
                agrees_with_walks(&out)?;
            }
        }
        if let Some(out) = p.with_name("ns__t\"é") {
            agrees_with_walks(&out)?;
        }
    }
}
