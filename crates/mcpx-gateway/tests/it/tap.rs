//! The upstream side's schema tap can fail: an invalid frame either way is reported,
//! checked in the revision the connection speaks, and a run's frames all pass it.

use mcpx_protocol::Revision;
use serde_json::json;

use crate::harness::{Dir, Host, InMemory, Upstream, UpstreamTap, config};

/// A legacy session: `initialize` offered and answered in 2025-06-18.
fn legacy_tap() -> UpstreamTap {
    let mut t = UpstreamTap::default();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "mcpx", "version": "0"}}});
    t.check(Dir::ToUpstream, &init.to_string()).unwrap();
    let answer = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "serverInfo": {"name": "up", "version": "0"}}});
    t.check(Dir::FromUpstream, &answer.to_string()).unwrap();
    t
}

#[test]
fn an_invalid_frame_either_way_is_reported() {
    let mut t = legacy_tap();
    // A call without the tool's name, to the upstream.
    let bad = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}});
    let e = t.check(Dir::ToUpstream, &bad.to_string()).unwrap_err();
    assert!(e.contains("2025-06-18"), "{e}");
    // A list whose tools are not an array, from the upstream, to a valid request.
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}});
    t.check(Dir::ToUpstream, &list.to_string()).unwrap();
    let bad = json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": "none"}});
    assert!(t.check(Dir::FromUpstream, &bad.to_string()).is_err());
    // A response of the gateway's to the upstream's elicitation, of the wrong shape.
    let ask = json!({"jsonrpc": "2.0", "id": "a", "method": "elicitation/create", "params": {
        "message": "name?", "requestedSchema": {"type": "object", "properties": {}}}});
    t.check(Dir::FromUpstream, &ask.to_string()).unwrap();
    let bad = json!({"jsonrpc": "2.0", "id": "a", "result": {"action": "maybe"}});
    assert!(t.check(Dir::ToUpstream, &bad.to_string()).is_err());
    assert!(t.check(Dir::ToUpstream, "not json").is_err());
}

#[test]
fn a_modern_request_is_checked_in_its_own_revision() {
    // No session yet: a request naming 2026-07-28 is checked in it, and one without
    // the `_meta` keys 2026-07-28 requires fails.
    let mut t = UpstreamTap::default();
    let bad = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    assert!(t.check(Dir::ToUpstream, &bad.to_string()).is_err());
}

/// The frames of a run reach the tap both ways, with the handshake, and pass.
#[tokio::test(start_paused = true)]
async fn every_frame_of_a_run_passes_the_tap() {
    for (name, up) in [
        ("dual", Upstream::example()),
        ("legacy", Upstream::strict(Revision::V2024_11_05)),
    ] {
        let links = InMemory::default().with(name, up);
        let host = Host::start(config(json!({}), &[(name, json!({}))]), links);
        let (_, names) = host.tool_names().await;
        assert!(names.contains(&"test_simple_text".to_owned()), "{names:?}");
        let wire = host.links.wire(name);
        let to: Vec<_> = wire.iter().filter(|p| p.dir == Dir::ToUpstream).collect();
        let from: Vec<_> = wire.iter().filter(|p| p.dir == Dir::FromUpstream).collect();
        assert!(
            to.iter().any(|p| p.frame["method"] == "tools/list"),
            "{name}: {to:?}"
        );
        assert!(
            from.iter().any(|p| p.frame["result"]["tools"].is_array()),
            "{name}"
        );
        host.finish().await;
    }
}
