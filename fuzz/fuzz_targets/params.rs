//! Any text as a request's params: the params the decoder hands on answer as walks of
//! their text do, and every edit the gateway makes of them (its `_meta` envelope, a
//! tool's upstream name) is valid JSON, so the upstream's request can be written from
//! it unchecked (`Frame::request_with_params`), and decodes to the frame written.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpx_protocol::codec::{Decoded, Limits, decode};
use mcpx_protocol::jsonrpc::sole_member;
use mcpx_protocol::params::MetaMembers;
use mcpx_protocol::{Frame, Id, Params};
use serde_json::Value;
use serde_json::value::RawValue;

fuzz_target!(|data: &[u8]| {
    let Some((&read, rest)) = data.split_first() else {
        return;
    };
    let Ok(params) = std::str::from_utf8(rest) else {
        return;
    };
    let text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#);
    let Ok(Decoded::Single(frame)) = decode(text, &Limits::default()) else {
        return;
    };
    if read & 1 == 1 {
        // As classifying a request does: the params then take the members found.
        let _ = frame.params_meta("k");
    }
    let Some(p) = Params::of(&frame) else {
        return;
    };
    check(&p);
    let mut envelope = MetaMembers::default();
    envelope.push(
        "io.modelcontextprotocol/protocolVersion",
        &Value::from("2026-07-28"),
    );
    envelope.push("progressToken", &Value::from(7));
    let keep = |k: &str| k != "progressToken" && k != "io.modelcontextprotocol/protocolVersion";
    if let Some(out) = p.with_meta(keep, &envelope) {
        check(&out);
    }
    if let Some(out) = p.with_meta(keep, &MetaMembers::default()) {
        check(&out);
    }
    if let Some(out) = p.with_name("ns__t\"é") {
        check(&out);
    }
});

/// Valid JSON; its hints agree with walks; a request written from it decodes as written.
fn check(p: &Params) {
    assert!(
        RawValue::from_string(p.as_str().to_owned()).is_ok(),
        "{p:?}"
    );
    for name in ["_meta", "name"] {
        assert_eq!(p.sole_member(name), sole_member(p.as_str(), name), "{p:?}");
    }
    let frame = Frame::request_with_params(&Id::Number(2), "tools/call", Some(p));
    match decode(frame.as_str().to_owned(), &Limits::unlimited()) {
        Ok(Decoded::Single(again)) => assert_eq!(again, frame),
        other => panic!("{other:?}: {frame}"),
    }
}
