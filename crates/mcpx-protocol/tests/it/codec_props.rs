//! Property tests: the codec gives every input a clear answer and never panics.
//!
//! Malformed JSON, a wrong `jsonrpc`, a null request id, frames over the size limit and
//! deep nesting all come back as a [`DecodeError`] whose error response is itself a
//! well-formed JSON-RPC error; anything accepted round-trips byte for byte.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcpx_protocol::Revision::V2026_07_28;
use mcpx_protocol::codec::{self, DecodeErrorKind, Decoded, Limits};
use mcpx_protocol::jsonrpc::Kind;
use mcpx_protocol::lower::{ServerInfo, Stamp, lower_result_json, lower_result_stamped};
use proptest::prelude::*;

use crate::common;
use serde_json::{Value, json};

/// Every error answers with a parseable JSON-RPC error frame of the right code.
fn check_error(err: &codec::DecodeError) {
    let code = err.code();
    assert!(code == -32700 || code == -32600, "code {code}");
    let response = err.to_response();
    let again = codec::decode(response.as_str().to_owned(), &Limits::default()).unwrap();
    let Decoded::Single(f) = again else {
        panic!("error response is a batch")
    };
    assert_eq!(f.kind(), Kind::Error);
    assert_eq!(f.error().unwrap().code, code);
    assert_eq!(f.id(), err.id.as_ref());
}

fn check(text: String, limits: &Limits) {
    match codec::decode(text.clone(), limits) {
        Ok(Decoded::Single(f)) => assert_eq!(f.as_str(), text),
        Ok(Decoded::Batch(items)) => {
            for item in items {
                match item {
                    Ok(f) => assert!(text.contains(f.as_str())),
                    Err(e) => check_error(&e),
                }
            }
        }
        Err(e) => check_error(&e),
    }
}

/// Any JSON value (strings of any characters, keys as in MCP's `_meta`).
fn json_value() -> impl Strategy<Value = Value> {
    common::json_value(".{0,12}", "[a-z_/.]{0,8}")
}

/// Objects that look like JSON-RPC messages, each member present, absent or wrong.
fn envelope() -> impl Strategy<Value = Value> {
    let jsonrpc = prop_oneof![
        Just(Some(json!("2.0"))),
        Just(Some(json!("1.0"))),
        Just(Some(json!(2))),
        Just(None)
    ];
    let id = prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        any::<i64>().prop_map(|n| Some(json!(n))),
        "[a-z0-9-]{0,8}".prop_map(|s| Some(json!(s))),
        Just(Some(json!(1.5))),
        Just(Some(json!([1]))),
    ];
    let method = prop_oneof![
        Just(None),
        "[a-z/_]{1,20}".prop_map(|s| Some(json!(s))),
        Just(Some(json!(7)))
    ];
    let params = prop_oneof![Just(None), json_value().prop_map(Some)];
    let result = prop_oneof![Just(None), json_value().prop_map(Some)];
    let error = prop_oneof![
        Just(None),
        (any::<i64>(), ".{0,10}").prop_map(|(c, m)| Some(json!({"code": c, "message": m}))),
        json_value().prop_map(Some),
    ];
    let extra = prop::collection::btree_map("x-[a-z]{1,6}", json_value(), 0..3);
    (jsonrpc, id, method, params, result, error, extra).prop_map(|(j, i, m, p, r, e, x)| {
        let mut o = serde_json::Map::new();
        for (k, v) in [
            ("jsonrpc", j),
            ("id", i),
            ("method", m),
            ("params", p),
            ("result", r),
            ("error", e),
        ] {
            if let Some(v) = v {
                o.insert(k.to_owned(), v);
            }
        }
        o.extend(x);
        Value::Object(o)
    })
}

proptest! {
    #![proptest_config(common::config(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        match codec::decode_bytes(bytes, &Limits::default()) {
            Ok(_) => {}
            Err(e) => check_error(&e),
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        check(text, &Limits::default());
    }

    #[test]
    fn envelopes_are_accepted_exactly_when_valid(v in envelope(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
        let outcome = codec::decode(text.clone(), &Limits::default());
        let o = v.as_object().unwrap();
        let id_ok = match o.get("id") {
            None => true,
            Some(Value::Number(n)) => n.is_i64(),
            Some(Value::String(_)) => true,
            Some(Value::Null) => o.contains_key("error") && !o.contains_key("method"),
            Some(_) => false,
        };
        let params_ok = match o.get("params") {
            None | Some(Value::Object(_) | Value::Array(_)) => true,
            Some(_) => false,
        };
        if o.get("jsonrpc") != Some(&json!("2.0")) || !id_ok || !params_ok {
            prop_assert!(outcome.is_err(), "accepted {text}");
        }
        if o.get("method").is_some_and(|m| m.is_string()) && o.get("id").is_some_and(Value::is_null) {
            // A request with a null id is never accepted.
            prop_assert!(outcome.is_err());
        }
        match outcome {
            Ok(Decoded::Single(f)) => prop_assert_eq!(f.as_str(), text),
            Ok(Decoded::Batch(_)) => prop_assert!(false, "object decoded as batch"),
            Err(e) => check_error(&e),
        }
    }

    #[test]
    fn batches_of_envelopes_never_panic(items in prop::collection::vec(envelope(), 0..5)) {
        check(Value::Array(items).to_string(), &Limits::default());
    }

    #[test]
    fn truncated_and_corrupted_frames_never_panic(cut in 0usize..120, byte in any::<u8>(), at in 0usize..120) {
        let valid = r#"{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"name":"x","_meta":{"k":[1,2,{"z":"\u00e9"}]}}}"#;
        let mut bytes = valid.as_bytes()[..cut.min(valid.len())].to_vec();
        let pos = at.min(bytes.len());
        bytes.insert(pos, byte);
        match codec::decode_bytes(bytes, &Limits::default()) {
            Ok(_) => {}
            Err(e) => check_error(&e),
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed(depth in 0usize..20_000, object in any::<bool>()) {
        let (open, close) = if object { (r#"{"a":"#, "}") } else { ("[", "]") };
        let inner = format!("{}1{}", open.repeat(depth), close.repeat(depth));
        let text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"v":{inner}}}}}"#);
        let limits = Limits::default();
        match codec::decode(text, &limits) {
            Ok(_) => prop_assert!(depth + 2 <= limits.max_depth),
            Err(e) => {
                prop_assert!(matches!(e.kind, DecodeErrorKind::TooDeep { .. }), "{e}");
                check_error(&e);
            }
        }
    }

    #[test]
    fn size_limit_is_exact(limit in 0usize..80) {
        let text = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let limits = Limits { max_frame_bytes: limit, ..Limits::default() };
        match codec::decode(text.to_owned(), &limits) {
            Ok(_) => prop_assert!(text.len() <= limit),
            Err(e) => {
                prop_assert!(text.len() > limit);
                let want = format!("limit of {limit} bytes");
                prop_assert!(e.to_string().contains(&want));
                check_error(&e);
            }
        }
    }
}

/// The verdict on a frame whose `member` is `value`, as the error's kind (or `Ok`).
/// `text` with one byte removed at `at` (`how` 0), `byte` inserted there (1) or put in
/// its place (2); as it is otherwise.
fn damage(text: &mut Vec<u8>, at: prop::sample::Index, how: u8, byte: u8) {
    let i = at.index(text.len());
    match how {
        0 => {
            text.remove(i);
        }
        1 => text.insert(i, byte),
        2 => text[i] = byte,
        _ => {}
    }
}

/// `text` decoded, when it is UTF-8 and one frame.
fn one_frame(text: Vec<u8>) -> Option<mcpx_protocol::Frame> {
    let text = String::from_utf8(text).ok()?;
    match codec::decode(text, &Limits::default()) {
        Ok(Decoded::Single(f)) => Some(f),
        _ => None,
    }
}

fn verdict(member: &str, value: &str, limits: &Limits) -> Result<(), String> {
    let text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","{member}":{value}}}"#);
    codec::decode(text, limits)
        .map(|_| ())
        .map_err(|e| format!("{:?}", std::mem::discriminant(&e.kind)))
}

proptest! {
    #![proptest_config(common::config(2000))]

    /// The decoder looks into `params` and `result` as it checks them (to note where
    /// `_meta` and `resultType` are): that changes no verdict. Any text, damaged or not,
    /// at any depth bound, is judged the same as the value of `params` as of a member
    /// it does not look into; and what it noted answers as a walk would.
    #[test]
    fn looking_into_params_changes_no_verdict(
        v in common::json_value("[a-z_\"\\\\]{0,8}", "[_a-z\"\\\\]{0,10}"),
        meta in prop::option::of(common::json_value("[a-z]{0,4}", "[a-z]{0,3}")),
        at in any::<prop::sample::Index>(),
        how in 0..4u8,
        byte in prop::sample::select(b"{}[]\",:\\ 0-.eEtfnu\x01x".to_vec()),
        depth in 1usize..8,
    ) {
        let mut obj = json!({ "v": v, "resultType": "complete" });
        if let Some(m) = meta {
            obj["_meta"] = json!({ "k": m });
        }
        let mut text = obj.to_string().into_bytes();
        damage(&mut text, at, how, byte);
        let Ok(value) = String::from_utf8(text) else { return Ok(()) };
        let limits = Limits { max_depth: depth, ..Limits::default() };
        prop_assert_eq!(verdict("params", &value, &limits), verdict("x", &value, &limits));
        let response = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{value}}}"#);
        if let Ok(Decoded::Single(f)) = codec::decode(response, &Limits::default()) {
            let walked = f.result().and_then(|r| mcpx_protocol::jsonrpc::first_member(r, "resultType"));
            prop_assert_eq!(f.result_type(), walked);
            // mcpx's serverInfo stamp reads the result's `_meta` and `resultType` where
            // the decoder saw them: the same text as reading them by walking.
            let info = ServerInfo::new(json!({"name": "mcpx", "version": "1"}));
            let stamp = Stamp { server_info: Some(&info) };
            let walked = lower_result_stamped("tools/call", f.result().unwrap(), V2026_07_28, V2026_07_28, stamp)
                .map(|t| t.into_owned());
            let json = f.into_result_json().unwrap();
            let hinted = lower_result_json("tools/call", &json, V2026_07_28, V2026_07_28, stamp)
                .map(|t| t.map_or_else(|| json.as_str().to_owned(), |t| t.as_str().to_owned()));
            prop_assert_eq!(hinted.ok(), walked.ok());
        }
        let request = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{value}}}"#);
        if let Ok(Decoded::Single(f)) = codec::decode(request, &Limits::default()) {
            let walked = f
                .params()
                .and_then(|p| mcpx_protocol::jsonrpc::first_member(p, "_meta"))
                .and_then(|m| mcpx_protocol::jsonrpc::first_member(m, "k"));
            prop_assert_eq!(f.params_meta("k"), walked);
        }
    }
}

/// A member name as a request may write it: plain, with an escape (`\u006b` is `k`),
/// or one that cannot be decoded (a lone surrogate).
fn written_name() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "k", "a", "ka", "", "_meta", "name", "\\u006b", "k\\u0061", "\\ud800", "\\\"",
    ])
    .prop_map(str::to_owned)
}

proptest! {
    #![proptest_config(common::config(3000))]

    /// The decoder hands a request's `params._meta` members to the frame as it walks
    /// (and notes `params.name`): what they answer is what walking the params answers,
    /// whatever the names (escaped, undecodable, repeated), wherever `_meta` is, and
    /// however the text was damaged.
    #[test]
    fn what_the_decoder_found_in_params_answers_as_a_walk(
        inner in prop::collection::vec((written_name(), common::json_value("[a-z]{0,3}", "[a-z]{0,3}")), 0..5),
        outer in prop::collection::vec((written_name(), common::json_value("[a-z]{0,3}", "[a-z]{0,3}")), 0..3),
        meta_name in prop::sample::select(vec!["_meta", "_meta", "_meta", "_m\\u0065ta", "meta"]),
        meta_first in any::<bool>(),
        at in any::<prop::sample::Index>(),
        how in 0..5u8,
        byte in prop::sample::select(b"{}[]\",:\\ 0tu".to_vec()),
    ) {
        let members = |m: &[(String, Value)]| {
            m.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect::<Vec<_>>().join(",")
        };
        let meta = format!("\"{meta_name}\":{{{}}}", members(&inner));
        let rest = members(&outer);
        let params = match (meta_first, rest.is_empty()) {
            (_, true) => format!("{{{meta}}}"),
            (true, false) => format!("{{{meta},{rest}}}"),
            (false, false) => format!("{{{rest},{meta}}}"),
        };
        let mut text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#).into_bytes();
        damage(&mut text, at, how, byte);
        let Some(f) = one_frame(text) else { return Ok(()) };
        // `_meta`'s members are read all at once. (A name that cannot be decoded, a
        // lone surrogate, in `params` or their `_meta`, has the request refused, as
        // serde_json refuses it: such frames are not here.)
        let walk_meta = |key: &str| {
            let m = f.params().and_then(|p| mcpx_protocol::jsonrpc::first_member(p, "_meta"))?;
            let all = mcpx_protocol::jsonrpc::valid_members(m)?;
            let (_, span) = all.into_iter().find(|(k, _)| k == key)?;
            m.get(span)
        };
        for key in ["k", "a", "ka", "", "_meta", "name", "\""] {
            prop_assert_eq!(f.params_meta(key), walk_meta(key), "key {:?}", key);
        }
        let walked_name = f.params().and_then(|p| mcpx_protocol::jsonrpc::first_member(p, "name"));
        prop_assert_eq!(f.params_name(), walked_name);
    }
}

proptest! {
    #![proptest_config(common::config(3000))]

    /// The decoder also hands a result's `_meta` members over, for the `serverInfo`
    /// stamp: stamping from them writes what stamping by walking the result writes,
    /// whatever the names (mcpx's key plain, escaped or repeated, undecodable ones),
    /// wherever `_meta` is, and however the text was damaged.
    #[test]
    fn stamping_from_what_the_decoder_found_writes_what_a_walk_does(
        inner in prop::collection::vec((
            prop::sample::select(vec![
                "io.modelcontextprotocol/serverInfo",
                "io.modelcontextprotocol/serverInfo",
                "io.modelcontextprotocol\\/serverInfo",
                "k",
                "\\ud800",
                "",
            ]).prop_map(str::to_owned),
            common::json_value("[a-z]{0,3}", "[a-z]{0,3}"),
        ), 0..4),
        meta_name in prop::sample::select(vec!["_meta", "_meta", "_meta", "_m\\u0065ta", "meta"]),
        with_type in any::<bool>(),
        meta_first in any::<bool>(),
        at in any::<prop::sample::Index>(),
        how in 0..5u8,
        byte in prop::sample::select(b"{}[]\",:\\ 0tu".to_vec()),
    ) {
        let members = inner.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect::<Vec<_>>().join(",");
        let meta = format!("\"{meta_name}\":{{{members}}}");
        let mut rest = vec![r#""content":[]"#.to_owned()];
        if with_type {
            rest.push(r#""resultType":"complete""#.to_owned());
        }
        if meta_first { rest.insert(0, meta) } else { rest.push(meta) }
        let result = format!("{{{}}}", rest.join(","));
        let mut text = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#).into_bytes();
        damage(&mut text, at, how, byte);
        let Some(f) = one_frame(text) else { return Ok(()) };
        let Some(walked_text) = f.result().map(str::to_owned) else { return Ok(()) };
        let info = ServerInfo::new(json!({"name": "mcpx", "version": "1"}));
        let stamp = Stamp { server_info: Some(&info) };
        let walked = lower_result_stamped("tools/call", &walked_text, V2026_07_28, V2026_07_28, stamp)
            .map(|t| t.into_owned());
        let json = f.into_result_json().unwrap();
        let hinted = lower_result_json("tools/call", &json, V2026_07_28, V2026_07_28, stamp)
            .map(|t| t.map_or_else(|| json.as_str().to_owned(), |t| t.as_str().to_owned()));
        prop_assert_eq!(hinted.ok(), walked.ok());
    }
}
