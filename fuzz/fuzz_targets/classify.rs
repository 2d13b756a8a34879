//! Any frame and any headers: classification answers without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpx_protocol::Revision;
use mcpx_protocol::classify::{HttpMethod, HttpRequest, classify_http, classify_stdio};
use mcpx_protocol::codec::{self, Decoded, Limits};

fuzz_target!(|input: (u8, String, String)| {
    let (selector, header, body) = input;
    let Ok(Decoded::Single(frame)) = codec::decode(body, &Limits::default()) else {
        return;
    };
    let process = Revision::ALL.get(usize::from(selector % 6)).copied();
    let _ = classify_stdio(process, &frame);
    let method = [HttpMethod::Post, HttpMethod::Get, HttpMethod::Delete][usize::from(selector % 3)];
    let req = HttpRequest {
        method,
        protocol_version: (selector & 8 != 0).then_some(header.as_str()),
        session_id: (selector & 16 != 0).then_some("s"),
        body: Some(&frame),
    };
    let _ = classify_http(&req);
});
