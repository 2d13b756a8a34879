//! Era and revision classification of crafted messages, stdio and HTTP forms, every
//! revision (../shared/spec/README.md §"Telling legacy from modern").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use Revision::*;
use mcpx_protocol::classify::{HttpMethod, HttpRequest, classify_http, classify_stdio};
use mcpx_protocol::codec::{self, Decoded, Limits};
use mcpx_protocol::{Frame, Revision, Verdict};

fn frame(s: &str) -> Frame {
    match codec::decode(s.to_owned(), &Limits::default()).unwrap() {
        Decoded::Single(f) => f,
        Decoded::Batch(_) => panic!("batch"),
    }
}

fn init(version: &str) -> Frame {
    frame(&format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    ))
}

fn modern(method: &str, version: &str) -> Frame {
    frame(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"{version}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    ))
}

/// A 2026-07-28 request that lacks the required `clientCapabilities` (A-C12).
fn modern_without_caps(method: &str) -> Frame {
    frame(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}}}}"#
    ))
}

fn plain(method: &str) -> Frame {
    frame(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"{method}","params":{{}}}}"#
    ))
}

const fn legacy(revision: Revision) -> Verdict {
    Verdict::Legacy {
        revision,
        initialize: false,
    }
}
const fn handshake(revision: Revision) -> Verdict {
    Verdict::Legacy {
        revision,
        initialize: true,
    }
}
const MODERN: Verdict = Verdict::Modern {
    revision: V2026_07_28,
};

/// Name, process state, message, and the verdict or error code expected.
type StdioCase = (&'static str, Option<Revision>, Frame, Result<Verdict, i64>);
/// Name, request, and the verdict or (error code, HTTP status) expected.
type HttpCase = (&'static str, H, Result<Verdict, (i64, u16)>);

#[test]
fn stdio_messages_classify() {
    let cases: Vec<StdioCase> = vec![
        (
            "initialize 2024-11-05",
            None,
            init("2024-11-05"),
            Ok(handshake(V2024_11_05)),
        ),
        (
            "initialize 2025-03-26",
            None,
            init("2025-03-26"),
            Ok(handshake(V2025_03_26)),
        ),
        (
            "initialize 2025-06-18",
            None,
            init("2025-06-18"),
            Ok(handshake(V2025_06_18)),
        ),
        (
            "initialize 2025-11-25",
            None,
            init("2025-11-25"),
            Ok(handshake(V2025_11_25)),
        ),
        // H4/A-C5: an unsupported version is counter-offered the newest legacy one,
        // and so is a modern version asked for through the legacy handshake.
        (
            "initialize unknown",
            None,
            init("1999-01-01"),
            Ok(handshake(V2025_11_25)),
        ),
        (
            "initialize 2026 version",
            None,
            init("2026-07-28"),
            Ok(handshake(V2025_11_25)),
        ),
        (
            "modern tools/list on fresh process",
            None,
            modern("tools/list", "2026-07-28"),
            Ok(MODERN),
        ),
        (
            "modern server/discover",
            None,
            modern("server/discover", "2026-07-28"),
            Ok(MODERN),
        ),
        // Modern is per request, even on a process a legacy client initialised.
        (
            "modern request on legacy process",
            Some(V2025_06_18),
            modern("tools/call", "2026-07-28"),
            Ok(MODERN),
        ),
        (
            "legacy request after initialize 2024",
            Some(V2024_11_05),
            plain("tools/list"),
            Ok(legacy(V2024_11_05)),
        ),
        (
            "legacy request after initialize 2025-03",
            Some(V2025_03_26),
            plain("resources/read"),
            Ok(legacy(V2025_03_26)),
        ),
        (
            "legacy request after initialize 2025-11",
            Some(V2025_11_25),
            plain("tools/call"),
            Ok(legacy(V2025_11_25)),
        ),
        // A-C9: a legacy peer's own data under io.modelcontextprotocol/ is not a version.
        (
            "legacy peer's own meta key",
            Some(V2025_06_18),
            modern("tools/list", "my-data"),
            Ok(legacy(V2025_06_18)),
        ),
        (
            "ping before initialize",
            None,
            plain("ping"),
            Ok(legacy(V2025_11_25)),
        ),
        (
            "initialized notification",
            Some(V2025_03_26),
            frame(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(legacy(V2025_03_26)),
        ),
        (
            "modern cancel notification",
            None,
            frame(
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
            ),
            Ok(MODERN),
        ),
        (
            "response to a server request",
            Some(V2025_11_25),
            frame(r#"{"jsonrpc":"2.0","id":"s1","result":{"roots":[]}}"#),
            Ok(legacy(V2025_11_25)),
        ),
        // Refusals, with the code each is owed.
        (
            "unknown modern version",
            None,
            modern("tools/list", "2027-01-01"),
            Err(-32022),
        ),
        (
            "no version, no initialize",
            None,
            plain("tools/list"),
            Err(-32602),
        ),
        (
            "modern without clientCapabilities",
            None,
            modern_without_caps("tools/list"),
            Err(-32602),
        ),
        (
            "response with no legacy session",
            None,
            frame(r#"{"jsonrpc":"2.0","id":"s1","result":{}}"#),
            Err(-32600),
        ),
    ];
    assert!(cases.len() >= 20);
    for (name, process, f, want) in cases {
        let got = classify_stdio(process, &f).map_err(|r| r.code);
        assert_eq!(got, want, "{name}");
    }
}

struct H {
    method: HttpMethod,
    version: Option<&'static str>,
    session: Option<&'static str>,
    body: Option<Frame>,
}

fn post(version: Option<&'static str>, session: Option<&'static str>, body: Frame) -> H {
    H {
        method: HttpMethod::Post,
        version,
        session,
        body: Some(body),
    }
}

#[test]
fn http_requests_classify() {
    let cases: Vec<HttpCase> = vec![
        (
            "POST initialize 2024-11-05",
            post(None, None, init("2024-11-05")),
            Ok(handshake(V2024_11_05)),
        ),
        (
            "POST initialize 2025-03-26",
            post(None, None, init("2025-03-26")),
            Ok(handshake(V2025_03_26)),
        ),
        (
            "POST initialize 2025-06-18",
            post(None, None, init("2025-06-18")),
            Ok(handshake(V2025_06_18)),
        ),
        (
            "POST initialize 2025-11-25",
            post(None, None, init("2025-11-25")),
            Ok(handshake(V2025_11_25)),
        ),
        (
            "POST initialize, modern header",
            post(Some("2026-07-28"), None, init("2025-11-25")),
            Ok(MODERN),
        ),
        // B-C8: no header on a legacy request means 2025-03-26.
        (
            "session request, no header",
            post(None, Some("abc"), plain("tools/list")),
            Ok(legacy(V2025_03_26)),
        ),
        (
            "session request, 2025-06-18 header",
            post(Some("2025-06-18"), Some("abc"), plain("tools/list")),
            Ok(legacy(V2025_06_18)),
        ),
        (
            "session request, 2025-11-25 header",
            post(Some("2025-11-25"), Some("abc"), plain("tools/call")),
            Ok(legacy(V2025_11_25)),
        ),
        (
            "header 2024-11-05",
            post(Some("2024-11-05"), Some("abc"), plain("tools/list")),
            Ok(legacy(V2024_11_05)),
        ),
        (
            "modern request",
            post(Some("2026-07-28"), None, modern("tools/list", "2026-07-28")),
            Ok(MODERN),
        ),
        // 2026: Mcp-Session-Id is ignored on the modern path.
        (
            "modern request with a stale session id",
            post(
                Some("2026-07-28"),
                Some("old"),
                modern("tools/call", "2026-07-28"),
            ),
            Ok(MODERN),
        ),
        (
            "GET with session",
            H {
                method: HttpMethod::Get,
                version: Some("2025-11-25"),
                session: Some("abc"),
                body: None,
            },
            Ok(legacy(V2025_11_25)),
        ),
        (
            "GET without header",
            H {
                method: HttpMethod::Get,
                version: None,
                session: Some("abc"),
                body: None,
            },
            Ok(legacy(V2025_03_26)),
        ),
        (
            "DELETE",
            H {
                method: HttpMethod::Delete,
                version: Some("2025-06-18"),
                session: Some("abc"),
                body: None,
            },
            Ok(legacy(V2025_06_18)),
        ),
        (
            "GET from a modern client",
            H {
                method: HttpMethod::Get,
                version: Some("2026-07-28"),
                session: None,
                body: None,
            },
            Ok(MODERN),
        ),
        // Refusals: code and status.
        (
            "modern body, no header",
            post(None, None, modern("tools/list", "2026-07-28")),
            Err((-32020, 400)),
        ),
        (
            "modern header, body version differs",
            post(Some("2026-07-28"), None, modern("tools/list", "2027-01-01")),
            Err((-32020, 400)),
        ),
        (
            "legacy header, modern body",
            post(Some("2025-11-25"), None, modern("tools/list", "2026-07-28")),
            Err((-32020, 400)),
        ),
        (
            "modern header, no _meta",
            post(Some("2026-07-28"), None, plain("tools/list")),
            Err((-32602, 400)),
        ),
        (
            "modern without clientCapabilities",
            post(Some("2026-07-28"), None, modern_without_caps("tools/list")),
            Err((-32602, 400)),
        ),
        (
            "unsupported modern header",
            post(Some("2027-01-01"), None, modern("tools/list", "2027-01-01")),
            Err((-32022, 400)),
        ),
        (
            "unsupported header in a legacy session",
            post(Some("2099-99-99"), Some("abc"), plain("tools/list")),
            Err((-32600, 400)),
        ),
    ];
    assert!(cases.len() >= 20);
    for (name, h, want) in cases {
        let req = HttpRequest {
            method: h.method,
            protocol_version: h.version,
            session_id: h.session,
            body: h.body.as_ref(),
        };
        let got = classify_http(&req).map_err(|r| (r.code, r.http_status));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn unsupported_version_error_is_the_2026_shape_and_schema_valid() {
    let r = classify_stdio(None, &modern("tools/list", "2027-01-01")).unwrap_err();
    let response = r.to_response(Some(&mcpx_protocol::Id::Number(1)));
    let v: serde_json::Value = serde_json::from_str(response.as_str()).unwrap();
    assert_eq!(v["error"]["data"]["requested"], "2027-01-01");
    assert_eq!(
        v["error"]["data"]["supported"],
        serde_json::json!(["2026-07-28"])
    );
    mcpx_testkit::tap::tap()
        .validate_definition(V2026_07_28, "UnsupportedProtocolVersionError", &v)
        .unwrap();
}
