//! `spec.precedence`, `--mcp-spec` and `spec.lenient`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use Revision::*;
use mcpx_protocol::spec::SpecError;
use mcpx_protocol::{Revision, SpecPolicy};

#[test]
fn default_is_newest_first_and_strict() {
    let p = SpecPolicy::default();
    assert_eq!(
        p.precedence(),
        &[
            V2026_07_28,
            V2025_11_25,
            V2025_06_18,
            V2025_03_26,
            V2024_11_05
        ]
    );
    assert!(Revision::ALL.iter().all(|r| p.governs(*r)));
    assert!(p.dominates(V2026_07_28));
}

#[test]
fn full_list_is_taken_as_given() {
    let list = [
        "2024-11-05",
        "2025-03-26",
        "2025-06-18",
        "2025-11-25",
        "2026-07-28",
    ];
    let p = SpecPolicy::default().with_precedence(&list).unwrap();
    assert_eq!(p.precedence(), &Revision::ALL);
    assert_eq!(p.first(), V2024_11_05);
    assert_eq!(p.winner(&[V2025_06_18, V2026_07_28]), Some(V2025_06_18));
}

#[test]
fn partial_list_is_completed_newest_first() {
    let p = SpecPolicy::default()
        .with_precedence(&["2025-03-26", "2024-11-05"])
        .unwrap();
    assert_eq!(
        p.precedence(),
        &[
            V2025_03_26,
            V2024_11_05,
            V2026_07_28,
            V2025_11_25,
            V2025_06_18
        ]
    );
    let empty: [&str; 0] = [];
    assert_eq!(
        SpecPolicy::default().with_precedence(&empty).unwrap(),
        SpecPolicy::default()
    );
}

#[test]
fn unknown_revision_is_refused_with_the_valid_list() {
    let err = SpecPolicy::default()
        .with_precedence(&["2025-11-25", "2025-13-01"])
        .unwrap_err();
    assert!(matches!(err, SpecError::Unknown { .. }));
    assert_eq!(
        err.to_string(),
        "unknown revision \"2025-13-01\" in spec.precedence; valid revisions are \
         2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"
    );
}

#[test]
fn repeated_revision_is_refused() {
    let err = SpecPolicy::default()
        .with_precedence(&["2025-06-18", "2025-03-26", "2025-06-18"])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "revision 2025-06-18 appears more than once in spec.precedence"
    );
    assert!(
        SpecPolicy::default()
            .with_lenient(&["2026-07-28", "2026-07-28"])
            .is_err()
    );
}

#[test]
fn mcp_spec_moves_one_revision_to_the_front() {
    let p = SpecPolicy::default().with_front("2024-11-05").unwrap();
    assert_eq!(
        p.precedence(),
        &[
            V2024_11_05,
            V2026_07_28,
            V2025_11_25,
            V2025_06_18,
            V2025_03_26
        ]
    );
    assert!(p.dominates(V2024_11_05));
    let q = p.with_front("2025-06-18").unwrap();
    assert_eq!(
        q.precedence(),
        &[
            V2025_06_18,
            V2024_11_05,
            V2026_07_28,
            V2025_11_25,
            V2025_03_26
        ]
    );
    assert!(SpecPolicy::default().with_front("latest").is_err());
}

#[test]
fn lenient_revisions_do_not_govern() {
    let p = SpecPolicy::default().with_lenient(&["2026-07-28"]).unwrap();
    assert!(!p.governs(V2026_07_28));
    assert!(p.is_lenient(V2026_07_28));
    assert!(p.governs(V2025_11_25));
    // First but lenient: it does not dominate (the 2024-11-05 progress `message` rule).
    let q = SpecPolicy::default()
        .with_front("2024-11-05")
        .unwrap()
        .with_lenient(&["2024-11-05"])
        .unwrap();
    assert!(!q.dominates(V2024_11_05));
}
