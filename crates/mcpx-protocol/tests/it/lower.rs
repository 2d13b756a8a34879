//! Results lowered from any revision to any other are valid for the receiver's schema.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcpx_protocol::Revision;
use mcpx_protocol::lower::lower_result;
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};

/// A tools/call result using everything `rev` has.
fn call_result(rev: Revision) -> Value {
    let mut content = vec![
        json!({"type":"text","text":"hello"}),
        json!({"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}),
        json!({"type":"resource","resource":{"uri":"test://a","mimeType":"text/plain","text":"a"}}),
    ];
    if rev >= Revision::V2025_03_26 {
        content.push(json!({"type":"audio","data":"UklGRg==","mimeType":"audio/wav"}));
    }
    if rev >= Revision::V2025_06_18 {
        content.push(json!({"type":"resource_link","uri":"test://b","name":"b"}));
    }
    let mut v = json!({"content": content, "isError": false, "x-vendor": {"kept": true}});
    match rev {
        Revision::V2025_06_18 | Revision::V2025_11_25 => v["structuredContent"] = json!({"n": 1}),
        Revision::V2026_07_28 => {
            v["structuredContent"] = json!([1, 2, 3]);
            v["resultType"] = json!("complete");
        }
        _ => {}
    }
    v
}

fn list_result(rev: Revision) -> Value {
    let mut tool = json!({"name":"t","description":"d","inputSchema":{"type":"object"}});
    if rev >= Revision::V2025_06_18 {
        tool["title"] = json!("T");
        tool["outputSchema"] = if rev == Revision::V2026_07_28 {
            json!({"type":"array","items":{"type":"integer"}})
        } else {
            json!({"type":"object"})
        };
    }
    let mut v = json!({"tools": [tool], "nextCursor": "c"});
    if rev == Revision::V2026_07_28 {
        v["resultType"] = json!("complete");
        v["ttlMs"] = json!(1000);
        v["cacheScope"] = json!("public");
    }
    v
}

#[test]
fn every_pair_of_revisions_lowers_to_a_valid_result() {
    for from in Revision::ALL {
        let call = call_result(from).to_string();
        let list = list_result(from).to_string();
        tap()
            .validate_definition(
                from,
                "CallToolResult",
                &serde_json::from_str(&call).unwrap(),
            )
            .unwrap();
        tap()
            .validate_definition(
                from,
                "ListToolsResult",
                &serde_json::from_str(&list).unwrap(),
            )
            .unwrap();
        for to in Revision::ALL {
            let lowered: Value =
                serde_json::from_str(&lower_result("tools/call", &call, from, to).unwrap())
                    .unwrap();
            tap()
                .validate_definition(to, "CallToolResult", &lowered)
                .unwrap_or_else(|e| panic!("tools/call {from} -> {to}: {e}"));
            assert_eq!(
                lowered["x-vendor"],
                json!({"kept": true}),
                "unknown members survive"
            );
            let lowered: Value =
                serde_json::from_str(&lower_result("tools/list", &list, from, to).unwrap())
                    .unwrap();
            tap()
                .validate_definition(to, "ListToolsResult", &lowered)
                .unwrap_or_else(|e| panic!("tools/list {from} -> {to}: {e}"));
            assert_eq!(lowered["nextCursor"], "c");
        }
    }
}
