//! The dispositions registry: mcpx's decided behaviour for every item of the
//! revision-conflict register, where it is implemented and which tests prove it.
//!
//! The registry is one file, `dispositions.toml` at the repository root, embedded
//! here at build time so `mcpx conformance` always reports what the binary was built
//! with. This crate has its types and checks; the TOML is decoded where it is read
//! (`mcpx conformance`, and `mcpx_testkit::dispositions` for the tests). Its
//! completeness against `../shared/requirements/items.tsv`, each item's title and
//! area there (items.tsv is not shipped, so the registry carries them), and the
//! existence of every named test are checked by `crates/mcpx/tests/it/dispositions.rs`.

use serde::{Deserialize, Serialize};

/// The registry file's text, as built into this binary.
pub const REGISTRY_TOML: &str = include_str!("../../../dispositions.toml");

/// How the register classifies an item's resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DispositionKind {
    /// The peer's stated revision decides it, in code.
    PeerSettled,
    /// Decided by `spec.precedence` / `spec.lenient`.
    PrecedenceGoverned,
    /// mcpx follows one named reading of contradictory texts.
    RecordedReading,
    /// The register left it open; mcpx decided.
    Decided,
}

impl DispositionKind {
    /// The kebab-case name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            DispositionKind::PeerSettled => "peer-settled",
            DispositionKind::PrecedenceGoverned => "precedence-governed",
            DispositionKind::RecordedReading => "recorded-reading",
            DispositionKind::Decided => "decided",
        }
    }
}

/// Whether the behaviour is implemented and proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Implemented, and proven by the named tests.
    Done,
    /// Decided, not yet implemented.
    Planned,
}

impl Status {
    /// The lowercase name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Done => "done",
            Status::Planned => "planned",
        }
    }
}

/// One register item's disposition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Disposition {
    /// The register id (`H1`, `A-C4`, `E-32`, ...).
    pub id: String,
    /// The register item's title, as `../shared/requirements/items.tsv` gives it.
    pub title: String,
    /// The register item's area: `headline`, `A`, `B`, `C`, `D` or `E`.
    pub area: String,
    /// How it is resolved.
    pub kind: DispositionKind,
    /// Done or planned.
    pub status: Status,
    /// The behaviour mcpx chooses.
    pub behaviour: String,
    /// The code site: a path from the repository root, optionally `path::item`.
    pub site: String,
    /// Tests proving it: `path/to/file.rs::test_name`.
    #[serde(default)]
    pub tests: Vec<String>,
    /// Where the spec text overrides the register, or why an open item was decided so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
}

/// The registry file: its items, in file order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    /// Every item (`[[item]]`).
    pub item: Vec<Disposition>,
}

/// A registry whose items break its rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Two items have one id.
    #[error("dispositions registry: id {0} appears more than once")]
    Duplicate(String),
    /// An item is done but names no test.
    #[error("dispositions registry: {0} is done but names no test proving it")]
    Untested(String),
}

/// The registry's items, once checked: ids unique, and every `done` item names a test.
pub fn check(registry: Registry) -> Result<Vec<Disposition>, RegistryError> {
    let mut seen = std::collections::HashSet::new();
    for d in &registry.item {
        if !seen.insert(d.id.as_str()) {
            return Err(RegistryError::Duplicate(d.id.clone()));
        }
        if d.status == Status::Done && d.tests.is_empty() {
            return Err(RegistryError::Untested(d.id.clone()));
        }
    }
    Ok(registry.item)
}

/// The item with register id `id` (`E-12`, `H1`; case does not matter).
pub fn find<'a>(items: &'a [Disposition], id: &str) -> Option<&'a Disposition> {
    items.iter().find(|d| d.id.eq_ignore_ascii_case(id.trim()))
}

/// Counts by status, in [`Status`] order.
pub fn counts(items: &[Disposition]) -> Vec<(Status, usize)> {
    [Status::Done, Status::Planned]
        .into_iter()
        .map(|s| (s, items.iter().filter(|d| d.status == s).count()))
        .collect()
}
