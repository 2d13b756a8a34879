//! JSON-RPC and MCP error codes, and which of them each era may emit.
//!
//! JSON-RPC 2.0 reserves -32768..-32000. MCP 2025-11-25 called -32000..-32099
//! implementation-specific; 2026-07-28 basic/index §Error Codes carves
//! -32020..-32099 out for the specification and forbids emitting -32002 and -32042.

use crate::revision::{Era, Revision};

/// Invalid JSON was received (JSON-RPC 2.0).
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object (JSON-RPC 2.0).
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available (JSON-RPC 2.0).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters (JSON-RPC 2.0); on 2026-07-28 also a missing required
/// `_meta` key and a resource that was not found.
pub const INVALID_PARAMS: i64 = -32602;
/// Internal JSON-RPC error.
pub const INTERNAL_ERROR: i64 = -32603;

/// Resource not found, 2024-11-05..2025-11-25 server/resources §Error Handling (SHOULD).
pub const RESOURCE_NOT_FOUND_LEGACY: i64 = -32002;
/// URL elicitation required, 2025-11-25 only (`URLElicitationRequiredError`).
pub const URL_ELICITATION_REQUIRED: i64 = -32042;
/// 2026-07-28 `HeaderMismatchError`: HTTP headers disagree with the body, or are missing.
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28 `MissingRequiredClientCapabilityError`.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// 2026-07-28 `UnsupportedProtocolVersionError`, with `data: {supported, requested}`.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The code a revision uses for "resource not found" (H6, D-C2).
pub const fn resource_not_found(rev: Revision) -> i64 {
    match rev.era() {
        Era::Legacy => RESOURCE_NOT_FOUND_LEGACY,
        Era::Modern => INVALID_PARAMS,
    }
}

/// Whether an implementation of `rev` may emit `code` (A-C10, A-C11).
///
/// The JSON-RPC codes are always allowed. -32002 and -32042 are forbidden on
/// 2026-07-28; -32042 exists only in 2025-11-25; the 2026 spec codes exist only in
/// 2026-07-28; the 2026 spec range -32020..-32099 is closed to implementations; and
/// mcpx decides (A-C10) not to emit codes of its own from the legacy -32000..-32019
/// sub-range on a modern request either.
pub fn may_emit(rev: Revision, code: i64) -> bool {
    match code {
        PARSE_ERROR | INVALID_REQUEST | METHOD_NOT_FOUND | INVALID_PARAMS | INTERNAL_ERROR => true,
        RESOURCE_NOT_FOUND_LEGACY => rev.era() == Era::Legacy,
        URL_ELICITATION_REQUIRED => rev == Revision::V2025_11_25,
        HEADER_MISMATCH | MISSING_REQUIRED_CLIENT_CAPABILITY | UNSUPPORTED_PROTOCOL_VERSION => {
            rev.era() == Era::Modern
        }
        -32099..=-32020 => rev.era() == Era::Legacy,
        -32019..=-32000 => rev.era() == Era::Legacy,
        // Outside the reserved range, codes are application-defined in every revision.
        c => !(-32768..=-32000).contains(&c),
    }
}

/// The code a receiver speaking `to` gets for an error that a peer speaking `from`
/// reported with `code` in answer to `method` (register H6, A-C10, A-C11):
///
/// * resource not found is -32002 for legacy receivers and -32602 for modern ones, in
///   both directions (a modern upstream's -32602 to `resources/read` is its not-found);
/// * a code the receiver's revision may not see becomes -32603 (Internal error), the
///   message keeping the original code and text (the caller formats it);
/// * anything else passes through, including an upstream's own codes in the legacy
///   -32000..-32019 range, which 2026-07-28 grandfathers.
pub fn translate_code(code: i64, method: &str, from: Revision, to: Revision) -> i64 {
    match code {
        RESOURCE_NOT_FOUND_LEGACY => resource_not_found(to),
        INVALID_PARAMS if method == "resources/read" && from.era() == Era::Modern => {
            resource_not_found(to)
        }
        -32019..=-32000 => code,
        c if may_emit(to, c) => c,
        _ => INTERNAL_ERROR,
    }
}

/// The HTTP status a modern Streamable HTTP server answers a JSON-RPC error with, when
/// the error is one the 2026-07-28 transport ties to a status (basic/transports/
/// streamable-http); `None` means the usual 200 with the error in the body.
pub const fn modern_http_status(code: i64) -> Option<u16> {
    match code {
        HEADER_MISMATCH | MISSING_REQUIRED_CLIENT_CAPABILITY | UNSUPPORTED_PROTOCOL_VERSION => {
            Some(400)
        }
        METHOD_NOT_FOUND => Some(404),
        _ => None,
    }
}

/// A recognised modern JSON-RPC error (register A-C14, B-C9): what tells a dual-era
/// client that a 4xx came from a modern server rather than a legacy one.
pub const fn is_recognised_modern_error(http_status: u16, code: i64) -> bool {
    match code {
        HEADER_MISMATCH | MISSING_REQUIRED_CLIENT_CAPABILITY | UNSUPPORTED_PROTOCOL_VERSION => true,
        METHOD_NOT_FOUND => http_status == 404,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_not_found_per_era() {
        assert_eq!(resource_not_found(Revision::V2025_11_25), -32002);
        assert_eq!(resource_not_found(Revision::V2026_07_28), -32602);
    }

    #[test]
    fn codes_translate_per_receiver() {
        use Revision::*;
        assert_eq!(
            translate_code(-32002, "resources/read", V2025_06_18, V2026_07_28),
            -32602
        );
        assert_eq!(
            translate_code(-32602, "resources/read", V2026_07_28, V2025_11_25),
            -32002
        );
        assert_eq!(
            translate_code(-32602, "tools/call", V2026_07_28, V2025_11_25),
            -32602
        );
        assert_eq!(
            translate_code(-32042, "tools/call", V2025_11_25, V2026_07_28),
            -32603
        );
        assert_eq!(
            translate_code(-32042, "tools/call", V2025_11_25, V2025_11_25),
            -32042
        );
        assert_eq!(
            translate_code(-32022, "tools/call", V2026_07_28, V2025_06_18),
            -32603
        );
        assert_eq!(
            translate_code(-32001, "tools/call", V2025_06_18, V2026_07_28),
            -32001
        );
        assert_eq!(
            translate_code(42, "tools/call", V2025_06_18, V2026_07_28),
            42
        );
    }

    #[test]
    fn emission_rules() {
        assert!(!may_emit(Revision::V2026_07_28, -32002));
        assert!(!may_emit(Revision::V2026_07_28, -32042));
        assert!(may_emit(Revision::V2025_11_25, -32042));
        assert!(!may_emit(Revision::V2025_06_18, -32042));
        assert!(may_emit(Revision::V2026_07_28, -32022));
        assert!(!may_emit(Revision::V2025_11_25, -32022));
        assert!(!may_emit(Revision::V2026_07_28, -32000));
        assert!(may_emit(Revision::V2024_11_05, -32000));
        assert!(may_emit(Revision::V2026_07_28, 1));
        assert!(!may_emit(Revision::V2026_07_28, -32050));
    }
}
