//! Unknown members, `_meta` keys and extension payloads survive a parse/serialise round
//! trip byte for byte (DESIGN.md principle 4).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcpx_protocol::codec::{self, Decoded, Limits};
use mcpx_protocol::jsonrpc::Kind;
use mcpx_protocol::{Frame, Id};
use serde_json::value::RawValue;

fn single(s: &str) -> Frame {
    match codec::decode(s.to_owned(), &Limits::default()).unwrap() {
        Decoded::Single(f) => f,
        Decoded::Batch(_) => panic!("batch"),
    }
}

const REQUEST: &str = r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"héllo \u00e9 \"q\"","n":1.50,"big":12345678901234567890},"_meta":{"progressToken":"t1","io.modelcontextprotocol/protocolVersion":"2026-07-28","com.example.vendor/trace":{"deep":[1,{"x":null}]}},"x-unknown-param":true},"x-top-level":{"kept":["as",  "is"]}}"#;

#[test]
fn unknown_members_and_meta_round_trip_byte_identical() {
    let f = single(REQUEST);
    assert_eq!(f.kind(), Kind::Request);
    assert_eq!(f.as_str(), REQUEST);
    assert_eq!(f.to_string(), REQUEST);
    assert_eq!(f.clone().into_string(), REQUEST);
    // The unknown top-level member is indexed, untouched.
    assert_eq!(
        f.extra().collect::<Vec<_>>(),
        [("x-top-level", r#"{"kept":["as",  "is"]}"#)]
    );
    // `_meta` keys are readable without re-encoding anything.
    assert_eq!(f.params_meta("progressToken"), Some(r#""t1""#));
    assert_eq!(
        f.params_meta("com.example.vendor/trace"),
        Some(r#"{"deep":[1,{"x":null}]}"#)
    );
}

#[test]
fn whitespace_and_member_order_are_kept() {
    let text = "{ \"params\" : { \"_meta\" : { \"a/b\" : 1 } } ,\n \"method\":\"notifications/progress\", \"jsonrpc\":\"2.0\" }";
    let f = single(text);
    assert_eq!(f.kind(), Kind::Notification);
    assert_eq!(f.as_str(), text);
}

#[test]
fn rebuilt_frames_keep_raw_payloads_byte_identical() {
    let f = single(REQUEST);
    let params = RawValue::from_string(f.params().unwrap().to_owned()).unwrap();
    let rebuilt = Frame::request(f.id().unwrap(), f.method().unwrap(), Some(&params));
    assert_eq!(rebuilt.params(), f.params());
    // Id remapping (what the gateway does to every request) changes only the id.
    let remapped = f.with_id(&Id::from("up:7"));
    assert_eq!(
        remapped.as_str(),
        REQUEST.replace("\"id\":42", "\"id\":\"up:7\"")
    );
    assert_eq!(remapped.with_id(&Id::Number(42)).as_str(), REQUEST);
}

#[test]
fn responses_round_trip() {
    for text in [
        r#"{"jsonrpc":"2.0","id":"s-1","result":{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"x","version":"1"}},"x-ext":1}}"#,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32002,"message":"not found","data":{"uri":"file:///x"},"x-more":[]}}"#,
        r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}"#,
    ] {
        assert_eq!(single(text).as_str(), text);
    }
    let e = single(
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32002,"message":"not found","data":{"uri":"file:///x"}}}"#,
    );
    let err = e.error().unwrap();
    assert_eq!(
        (err.code, err.data.as_deref()),
        (-32002, Some(r#"{"uri":"file:///x"}"#))
    );
}
