//! W3C trace context (`traceparent`, `tracestate`): read from a host, written for an
//! upstream.
//!
//! The carriers are the HTTP headers of those names and, on every revision, the
//! `_meta` keys of those names (2026-07-28 basic/index §OpenTelemetry trace context;
//! the OpenTelemetry MCP conventions use the same keys on earlier revisions, which
//! reserve neither). Which carrier each peer gets is decided in one place, recorded
//! under register A-C9.
//!
//! Only the format is checked here ([W3C Trace Context] §traceparent Header): a value
//! that does not parse is ignored, as a receiver of an invalid `traceparent` must.
//!
//! [W3C Trace Context]: https://www.w3.org/TR/trace-context/

/// The `_meta` key and HTTP header of the parent.
pub const TRACEPARENT: &str = "traceparent";
/// The `_meta` key and HTTP header of vendor state.
pub const TRACESTATE: &str = "tracestate";

/// `tracestate` longer than this is dropped (W3C: a receiver may drop it past 512).
pub const MAX_TRACESTATE: usize = 512;

/// A valid trace context: a `traceparent` and its `tracestate`, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// The 128-bit trace id.
    pub trace_id: [u8; 16],
    /// The sender's span id.
    pub parent_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
    /// The vendor state, as sent (bounded by [`MAX_TRACESTATE`]).
    pub tracestate: Option<Box<str>>,
}

impl TraceContext {
    /// Parses a `traceparent` value (and the `tracestate` that came with it). `None`
    /// when the value is not a valid one: W3C §Versioning of traceparent — version
    /// `00` is exactly 55 characters; a later version is read by its first four
    /// fields, and version `ff` is invalid; the trace id and parent id are lower-case
    /// hex, not all zeros.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let t = traceparent.trim_matches([' ', '\t']).as_bytes();
        if t.len() < 55 {
            return None;
        }
        let version = hex_byte(&t[0..2])?;
        if version == 0xff || (version == 0 && t.len() != 55) || (t.len() > 55 && t[55] != b'-') {
            return None;
        }
        if t[2] != b'-' || t[35] != b'-' || t[52] != b'-' {
            return None;
        }
        let mut trace_id = [0u8; 16];
        for (i, b) in trace_id.iter_mut().enumerate() {
            *b = hex_byte(&t[3 + 2 * i..5 + 2 * i])?;
        }
        let mut parent_id = [0u8; 8];
        for (i, b) in parent_id.iter_mut().enumerate() {
            *b = hex_byte(&t[36 + 2 * i..38 + 2 * i])?;
        }
        let flags = hex_byte(&t[53..55])?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        let tracestate = tracestate
            .map(|s| s.trim_matches([' ', '\t']))
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE)
            // W3C §tracestate Header: printable ASCII (so also a valid header value).
            .filter(|s| s.bytes().all(|b| (0x20..=0x7e).contains(&b)))
            .map(Box::from);
        Some(TraceContext {
            trace_id,
            parent_id,
            flags,
            tracestate,
        })
    }

    /// Whether the sender sampled this trace.
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The trace id, as 32 lower-case hex digits.
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    /// The `traceparent` value (version `00`).
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            hex(&self.trace_id),
            hex(&self.parent_id),
            self.flags
        )
    }

    /// The same trace, continued by the span `parent_id` with `flags`.
    pub fn child(&self, parent_id: [u8; 8], flags: u8) -> TraceContext {
        TraceContext {
            trace_id: self.trace_id,
            parent_id,
            flags,
            tracestate: self.tracestate.clone(),
        }
    }
}

/// Two lower-case hex digits as a byte (W3C: `HEXDIGLC`).
fn hex_byte(two: &[u8]) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    Some(digit(two[0])? << 4 | digit(two[1])?)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC_EXAMPLE: &str = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";

    #[test]
    fn the_spec_example_round_trips() {
        let t = TraceContext::parse(SPEC_EXAMPLE, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(t.trace_id_hex(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(
            t.parent_id,
            [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        assert!(t.sampled());
        assert_eq!(t.traceparent(), SPEC_EXAMPLE);
        assert_eq!(t.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
        let c = t.child([1, 2, 3, 4, 5, 6, 7, 8], 0);
        assert_eq!(
            c.traceparent(),
            "00-0af7651916cd43dd8448eb211c80319c-0102030405060708-00"
        );
        assert_eq!(c.tracestate, t.tracestate);
    }

    #[test]
    fn invalid_values_are_ignored() {
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7",
            // Upper-case hex, all-zero ids, version ff, a version 00 with more.
            "00-0AF7651916CD43DD8448EB211C80319C-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01-x",
            "00_0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
            "0g-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad, None), None, "{bad:?}");
        }
    }

    #[test]
    fn later_versions_are_read_by_their_first_fields() {
        let later = "01-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00-what-comes";
        let t = TraceContext::parse(later, None).unwrap();
        assert!(!t.sampled());
        assert_eq!(
            t.traceparent(),
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00"
        );
    }

    #[test]
    fn oversized_or_empty_tracestate_is_dropped() {
        let long = "k=".to_owned() + &"v".repeat(MAX_TRACESTATE);
        assert_eq!(
            TraceContext::parse(SPEC_EXAMPLE, Some(&long))
                .unwrap()
                .tracestate,
            None
        );
        for dropped in [" ", "a=b\nc=d", "a=\u{e9}"] {
            assert_eq!(
                TraceContext::parse(SPEC_EXAMPLE, Some(dropped))
                    .unwrap()
                    .tracestate,
                None,
                "{dropped:?}"
            );
        }
    }
}
