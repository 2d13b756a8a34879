//! The spec policy: which revision's rules win where revisions disagree, and which
//! revisions are held strictly.
//!
//! Most conflicts in the register are settled by the peer's own revision. The few that
//! are not consult this policy (register, "How mcpx chooses"):
//!
//! * `spec.precedence`: revisions in the order their rules win, first wins. A partial
//!   list is completed with the missing revisions newest first; an unknown or repeated
//!   revision is refused with the list of valid ones. Default: newest first.
//! * `--mcp-spec REV`: moves one revision to the front.
//! * `spec.lenient`: revisions not held strictly (default none). A revision that is
//!   not lenient [`governs`](SpecPolicy::governs): its MUSTs bind mcpx even where a peer
//!   would tolerate a breach.

use crate::revision::Revision;

/// A refused precedence list or lenient set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A revision name that is not one of the five.
    #[error("unknown revision {given:?} in {setting}; valid revisions are {valid}")]
    Unknown {
        /// The setting (`spec.precedence`, `spec.lenient`, `--mcp-spec`).
        setting: &'static str,
        /// What was given.
        given: String,
        /// The valid names, newest first.
        valid: String,
    },
    /// A revision named twice.
    #[error("revision {given} appears more than once in {setting}")]
    Repeated {
        /// The setting.
        setting: &'static str,
        /// The repeated revision.
        given: String,
    },
}

/// The spec policy. Build it with [`SpecPolicy::default`] and the `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecPolicy {
    precedence: [Revision; 5],
    lenient: [bool; 5],
}

impl Default for SpecPolicy {
    /// Newest first, every revision strict.
    fn default() -> Self {
        let mut precedence = Revision::ALL;
        precedence.reverse();
        SpecPolicy {
            precedence,
            lenient: [false; 5],
        }
    }
}

fn parse_rev(setting: &'static str, s: &str) -> Result<Revision, SpecError> {
    Revision::from_wire(s.trim()).ok_or_else(|| SpecError::Unknown {
        setting,
        given: s.to_owned(),
        valid: Revision::wire_names_newest_first().join(", "),
    })
}

impl SpecPolicy {
    /// Sets `spec.precedence` from a list of revision names (see the module docs).
    pub fn with_precedence<S: AsRef<str>>(mut self, list: &[S]) -> Result<Self, SpecError> {
        const SETTING: &str = "spec.precedence";
        let mut order: Vec<Revision> = Vec::with_capacity(5);
        for s in list {
            let r = parse_rev(SETTING, s.as_ref())?;
            if order.contains(&r) {
                return Err(SpecError::Repeated {
                    setting: SETTING,
                    given: r.as_str().to_owned(),
                });
            }
            order.push(r);
        }
        for r in Revision::ALL.into_iter().rev() {
            if !order.contains(&r) {
                order.push(r);
            }
        }
        for (slot, r) in self.precedence.iter_mut().zip(order) {
            *slot = r;
        }
        Ok(self)
    }

    /// Applies `--mcp-spec REV`: `rev` moves to the front, the rest keep their order.
    pub fn with_front(mut self, rev: &str) -> Result<Self, SpecError> {
        let r = parse_rev("--mcp-spec", rev)?;
        let pos = self.precedence.iter().position(|x| *x == r).unwrap_or(0);
        self.precedence[..=pos].rotate_right(1);
        Ok(self)
    }

    /// Sets `spec.lenient` from a list of revision names.
    pub fn with_lenient<S: AsRef<str>>(mut self, list: &[S]) -> Result<Self, SpecError> {
        const SETTING: &str = "spec.lenient";
        let mut lenient = [false; 5];
        for s in list {
            let r = parse_rev(SETTING, s.as_ref())?;
            if std::mem::replace(&mut lenient[r as usize], true) {
                return Err(SpecError::Repeated {
                    setting: SETTING,
                    given: r.as_str().to_owned(),
                });
            }
        }
        self.lenient = lenient;
        Ok(self)
    }

    /// The precedence order, first wins.
    pub fn precedence(&self) -> &[Revision; 5] {
        &self.precedence
    }

    /// The revision whose rules win over all others.
    pub fn first(&self) -> Revision {
        self.precedence[0]
    }

    /// Whether `rev` is in `spec.lenient`.
    pub fn is_lenient(&self, rev: Revision) -> bool {
        self.lenient[rev as usize]
    }

    /// Whether `rev`'s rules bind mcpx: it is held strictly (not in `spec.lenient`).
    /// Example (register H2): a 2026-07-28 upstream that sends a server-initiated
    /// request has it dropped while `governs(2026-07-28)`, answered otherwise.
    pub fn governs(&self, rev: Revision) -> bool {
        !self.is_lenient(rev)
    }

    /// Of several revisions whose rules conflict, the one that wins.
    pub fn winner(&self, candidates: &[Revision]) -> Option<Revision> {
        self.precedence
            .iter()
            .copied()
            .find(|r| candidates.contains(r))
    }

    /// Whether `rev` is first in precedence and held strictly. Example (register,
    /// "Decided by those settings"): the 2024-11-05 schema has no progress `message`, so
    /// it is stripped toward 2024-11-05 hosts only when this holds for 2024-11-05.
    pub fn dominates(&self, rev: Revision) -> bool {
        self.first() == rev && self.governs(rev)
    }
}
