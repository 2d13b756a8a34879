//! The schema tap accepts a valid frame and rejects an invalid one, for each revision.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcpx_protocol::Revision;
use mcpx_testkit::TapError;
use mcpx_testkit::tap::tap;

/// A `tools/call` request as each revision writes it.
fn tools_call(rev: Revision, name_field: &str) -> String {
    let meta = if rev == Revision::V2026_07_28 {
        r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#
    } else {
        ""
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"{name_field}":"echo","arguments":{{"text":"hi"}}{meta}}}}}"#
    )
}

/// A `tools/list` result as each revision writes it.
fn tools_list_result(rev: Revision) -> String {
    let modern = if rev == Revision::V2026_07_28 {
        r#","resultType":"complete","ttlMs":0,"cacheScope":"public""#
    } else {
        ""
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"tools":[{{"name":"echo","inputSchema":{{"type":"object"}}}}]{modern}}}}}"#
    )
}

#[test]
fn accepts_valid_frames_for_each_revision() {
    for rev in Revision::ALL {
        tap().validate_frame(rev, &tools_call(rev, "name")).unwrap();
        tap()
            .validate_response(rev, "tools/list", &tools_list_result(rev))
            .unwrap();
        tap()
            .validate_frame(
                rev,
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
            )
            .unwrap();
    }
}

#[test]
fn rejects_invalid_frames_for_each_revision() {
    for rev in Revision::ALL {
        // `name` is required on CallToolRequest params.
        let err = tap()
            .validate_frame(rev, &tools_call(rev, "tool"))
            .unwrap_err();
        assert!(
            matches!(&err, TapError::Invalid { definition, .. } if definition == "CallToolRequest"),
            "{rev}: {err}"
        );
        // Not JSON-RPC 2.0.
        assert!(
            tap()
                .validate_frame(rev, r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#)
                .is_err(),
            "{rev}"
        );
        // A tool without an inputSchema is no ListToolsResult.
        let bad = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo"}]}}"#;
        assert!(
            tap().validate_response(rev, "tools/list", bad).is_err(),
            "{rev}"
        );
    }
}

#[test]
fn revision_specific_shapes_are_told_apart() {
    // 2026-07-28 requires `_meta` on every request: a legacy-shaped call is invalid there.
    let legacy_call = tools_call(Revision::V2025_11_25, "name");
    assert!(
        tap()
            .validate_frame(Revision::V2026_07_28, &legacy_call)
            .is_err()
    );
    // ... and a 2026 result needs resultType/ttlMs/cacheScope.
    let legacy_result = tools_list_result(Revision::V2025_11_25);
    assert!(
        tap()
            .validate_response(Revision::V2026_07_28, "tools/list", &legacy_result)
            .is_err()
    );
    // server/discover exists only in 2026-07-28.
    assert!(
        tap()
            .definition_for_method(Revision::V2026_07_28, "server/discover")
            .is_some()
    );
    assert!(
        tap()
            .definition_for_method(Revision::V2025_11_25, "server/discover")
            .is_none()
    );
    // An input_required result is checked as InputRequiredResult.
    let mrtr =
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s"}}"#;
    tap()
        .validate_response(Revision::V2026_07_28, "tools/call", mrtr)
        .unwrap();
    assert!(
        tap()
            .validate_frame(Revision::V2026_07_28, "not json")
            .is_err()
    );
}
