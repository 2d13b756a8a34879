//! Criterion micro-benchmarks of the protocol core's hot path: what every forwarded
//! frame costs before any I/O.
//!
//! * `tools_call`: decode + classify a typical `tools/call` request, and lower its
//!   result (same revision: borrowed; 2026-07-28 → 2025-06-18: reshaped).
//! * `tools_list_100`: a `tools/list` result of 100 tools, decoded and lowered.
//! * `passthrough_1mib`: a 1 MiB result decoded, re-identified (`with_id`) and written,
//!   never re-encoded.
#![allow(missing_docs, clippy::expect_used)] // fixed inputs, not peer input

use std::hint::black_box;
use std::io::Write;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mcpx_protocol::classify::classify_stdio;
use mcpx_protocol::codec::{Decoded, decode};
use mcpx_protocol::lower::lower_result;
use mcpx_protocol::{Frame, Id, Limits, Revision};
use serde_json::json;

fn single(d: Decoded) -> Frame {
    match d {
        Decoded::Single(f) => f,
        Decoded::Batch(_) => panic!("a batch"),
    }
}

fn tools_call(c: &mut Criterion) {
    let limits = Limits::default();
    let request = json!({
        "jsonrpc": "2.0", "id": 42, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hello, world"},
                   "_meta": {"progressToken": "p-42"}}
    })
    .to_string();
    let result = json!({
        "content": [{"type": "text", "text": "hello, world"}],
        "structuredContent": {"text": "hello, world"},
        "isError": false
    })
    .to_string();
    let modern_result = json!({
        "content": [{"type": "text", "text": "hello, world"}],
        "structuredContent": {"text": "hello, world"},
        "isError": false, "resultType": "complete"
    })
    .to_string();
    let mut g = c.benchmark_group("tools_call");
    g.bench_function("parse_classify_lower_same_rev", |b| {
        b.iter(|| {
            let f = single(decode(black_box(request.clone()), &limits).expect("decodes"));
            let v = classify_stdio(Some(Revision::V2025_11_25), &f).expect("classifies");
            let out = lower_result(
                "tools/call",
                black_box(&result),
                v.revision(),
                Revision::V2025_11_25,
            )
            .expect("lowers");
            black_box((f, out.len()))
        })
    });
    g.bench_function("parse_classify_lower_2026_to_2025_06", |b| {
        b.iter(|| {
            let f = single(decode(black_box(request.clone()), &limits).expect("decodes"));
            let v = classify_stdio(Some(Revision::V2025_06_18), &f).expect("classifies");
            let out = lower_result(
                "tools/call",
                black_box(&modern_result),
                Revision::V2026_07_28,
                v.revision(),
            )
            .expect("lowers");
            black_box((f, out.len()))
        })
    });
    g.finish();
}

fn tools_list_100(c: &mut Criterion) {
    let limits = Limits::default();
    let tools: Vec<_> = (0..100)
        .map(|i| {
            json!({
                "name": format!("tool_{i}"),
                "title": format!("Tool number {i}"),
                "description": "Does one thing, described in a sentence of ordinary length.",
                "inputSchema": {"type": "object", "properties": {
                    "text": {"type": "string", "description": "the text"},
                    "count": {"type": "integer", "minimum": 0}},
                    "required": ["text"]},
                "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}
            })
        })
        .collect();
    let result = json!({"tools": tools}).to_string();
    let response = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{result}}}"#);
    let mut g = c.benchmark_group("tools_list_100");
    g.throughput(Throughput::Bytes(response.len() as u64));
    g.bench_function("decode_lower_same_rev", |b| {
        b.iter(|| {
            let f = single(decode(black_box(response.clone()), &limits).expect("decodes"));
            let raw = f.result().unwrap_or("{}");
            let out = lower_result(
                "tools/list",
                raw,
                Revision::V2025_11_25,
                Revision::V2025_11_25,
            )
            .expect("lowers");
            black_box(out.len())
        })
    });
    g.bench_function("decode_lower_2025_11_to_2025_03", |b| {
        b.iter(|| {
            let f = single(decode(black_box(response.clone()), &limits).expect("decodes"));
            let raw = f.result().unwrap_or("{}");
            let out = lower_result(
                "tools/list",
                raw,
                Revision::V2025_11_25,
                Revision::V2025_03_26,
            )
            .expect("lowers");
            black_box(out.len())
        })
    });
    g.finish();
}

fn passthrough_1mib(c: &mut Criterion) {
    let limits = Limits::default();
    let text = "x".repeat(1024 * 1024);
    let response = json!({
        "jsonrpc": "2.0", "id": 1234,
        "result": {"content": [{"type": "text", "text": text}], "isError": false}
    })
    .to_string();
    let mut sink: Vec<u8> = Vec::with_capacity(response.len() + 64);
    let mut g = c.benchmark_group("passthrough_1mib");
    g.throughput(Throughput::Bytes(response.len() as u64));
    g.bench_function("decode_with_id_write", |b| {
        b.iter(|| {
            let f = single(decode(black_box(response.clone()), &limits).expect("decodes"));
            let out = f.with_id(&Id::Number(7));
            sink.clear();
            sink.write_all(out.as_str().as_bytes()).expect("writes");
            sink.push(b'\n');
            black_box(sink.len())
        })
    });
    g.finish();
}

criterion_group!(benches, tools_call, tools_list_100, passthrough_1mib);
criterion_main!(benches);
