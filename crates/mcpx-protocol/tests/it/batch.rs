//! Register H11 / A-C1 / B-C2: a JSON-RPC batch is received only for 2025-03-26 and
//! refused for every other revision with one -32600 Invalid Request, whose frame is
//! valid for the receiver's schema.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcpx_protocol::codec::{self, DecodeErrorKind, Decoded, Limits};
use mcpx_protocol::{Id, Revision};
use mcpx_testkit::tap::tap;

const BATCH: &str = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0}},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#;

fn decode(s: &str) -> Decoded {
    codec::decode(s.to_owned(), &Limits::default()).unwrap()
}

#[test]
fn batch_is_accepted_for_2025_03_26() {
    let frames = codec::admit(decode(BATCH), Revision::V2025_03_26).unwrap();
    let methods: Vec<_> = frames
        .iter()
        .map(|f| f.as_ref().unwrap().method().unwrap().to_owned())
        .collect();
    assert_eq!(methods, ["tools/list", "notifications/cancelled", "ping"]);
    // The batch itself is valid for 2025-03-26, the one schema with JSONRPCBatchRequest.
    let v: serde_json::Value = serde_json::from_str(BATCH).unwrap();
    tap()
        .validate_definition(Revision::V2025_03_26, "JSONRPCMessage", &v)
        .unwrap();
}

#[test]
fn batch_is_refused_for_every_other_revision() {
    for rev in Revision::ALL
        .into_iter()
        .filter(|r| *r != Revision::V2025_03_26)
    {
        let err = codec::admit(decode(BATCH), rev).unwrap_err();
        assert!(matches!(err.kind, DecodeErrorKind::Batch(_)), "{rev}");
        assert_eq!(err.code(), -32600, "{rev}");
        let response = err.to_response();
        assert!(
            response.as_str().contains("only 2025-03-26"),
            "{rev}: {}",
            response.as_str()
        );
        assert_eq!(response.id(), None);
        // The id-less error response is schema-valid from 2025-11-25 on; for older
        // revisions the register records it as the A-C4 exception (see a_c4 below).
        if rev.facts().error_id_optional {
            tap().validate_frame(rev, response.as_str()).unwrap();
        }
        // And the batch is no valid message in that revision's schema either.
        let v: serde_json::Value = serde_json::from_str(BATCH).unwrap();
        assert!(
            tap()
                .validate_definition(rev, "JSONRPCMessage", &v)
                .is_err(),
            "{rev}"
        );
    }
}

#[test]
fn initialize_inside_a_batch_is_refused_alone() {
    let batch = r#"[{"jsonrpc":"2.0","id":"i","method":"initialize","params":{}},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#;
    let frames = codec::admit(decode(batch), Revision::V2025_03_26).unwrap();
    let err = frames[0].as_ref().unwrap_err();
    assert_eq!((err.code(), err.id.clone()), (-32600, Some(Id::from("i"))));
    tap()
        .validate_frame(Revision::V2025_03_26, err.to_response().as_str())
        .unwrap();
    assert_eq!(frames[1].as_ref().unwrap().method(), Some("ping"));
}

#[test]
fn empty_and_malformed_batches() {
    let err = codec::decode("[]".to_owned(), &Limits::default()).unwrap_err();
    assert_eq!(err.code(), -32600);
    let limits = Limits {
        max_batch_len: 2,
        ..Limits::default()
    };
    let err = codec::decode(BATCH.to_owned(), &limits).unwrap_err();
    assert!(err.to_string().contains("limit of 2"));
    let Decoded::Batch(items) = decode(r#"[1, {"jsonrpc":"2.0","id":3,"method":"ping"}]"#) else {
        panic!("not a batch")
    };
    assert_eq!(items[0].as_ref().unwrap_err().code(), -32600);
    assert!(items[1].is_ok());
}

/// Register A-C4: the response to a message whose id could not be read omits `id`.
/// That is what the 2025-11-25 and 2026-07-28 schemas allow; the older schemas cannot
/// represent it at all (id required, never null), which the register records.
#[test]
fn a_c4_parse_error_response_omits_the_id() {
    let err = codec::decode("{not json".to_owned(), &Limits::default()).unwrap_err();
    assert_eq!(err.code(), -32700);
    let response = err.to_response();
    assert!(!response.as_str().contains("\"id\""));
    for rev in Revision::ALL {
        let verdict = tap().validate_frame(rev, response.as_str());
        assert_eq!(
            verdict.is_ok(),
            rev.facts().error_id_optional,
            "{rev}: {verdict:?}"
        );
    }
}
