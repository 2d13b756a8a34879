//! The dispositions registry: mcpx's decided behaviour for every item of the
//! revision-conflict register, where it is implemented and which tests prove it.
//!
//! The registry is one file, `dispositions.toml` at the repository root, embedded
//! here at build time so `mcpx conformance` always reports what the binary was built
//! with. Its completeness against `../shared/requirements/items.tsv`, each item's title
//! and area there (items.tsv is not shipped, so the registry carries them), and the
//! existence of every named test are checked by `tests/it/dispositions.rs`.

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    item: Vec<Disposition>,
}

/// A registry file that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("dispositions registry: {0}")]
pub struct RegistryError(String);

/// Parses registry text.
pub fn parse(text: &str) -> Result<Vec<Disposition>, RegistryError> {
    let file: File = toml::from_str(text).map_err(|e| RegistryError(e.to_string()))?;
    let mut seen = std::collections::HashSet::new();
    for d in &file.item {
        if !seen.insert(d.id.as_str()) {
            return Err(RegistryError(format!("id {} appears more than once", d.id)));
        }
        if d.status == Status::Done && d.tests.is_empty() {
            return Err(RegistryError(format!(
                "{} is done but names no test proving it",
                d.id
            )));
        }
    }
    Ok(file.item)
}

/// The registry built into this binary.
pub fn registry() -> Result<Vec<Disposition>, RegistryError> {
    parse(REGISTRY_TOML)
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
