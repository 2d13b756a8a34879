//! A request's params on their way through the gateway: valid JSON text, and where
//! the two members mcpx reads and rewrites on every call (`_meta`, `name`) are.
//!
//! A host's request is checked once, when its frame is decoded. Its params then travel
//! to the upstream's request, where mcpx writes the upstream's `_meta` envelope over the
//! host's (register A-C12) and, for a tool or prompt exposed under another name, the
//! upstream's `name`. [`Params`] carries two facts along with the text:
//!
//! * **It is valid JSON.** Made from a decoded [`Frame`], written by serde_json, or
//!   checked when made from a string; and every edit below writes values that are
//!   valid by construction (serde_json's, or slices of valid text). So the upstream's
//!   request is written from it without being checked again.
//! * **Where `_meta` and `name` are**, when the decoder saw them (its hints, which
//!   edits keep up to date). So neither the gateway's routing nor the upstream request's
//!   builder walks the params from the first byte to find them; without a hint (params
//!   built by mcpx, a name spelled with escapes, a member given twice) they walk, and
//!   decide as they would have without it.

use std::fmt;
use std::ops::Range;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::jsonrpc::{
    Frame, Hint, Span, Spelled, append_member, sole_member, splice, valid_members,
};

/// A request's params: the text of a JSON value known to be valid (an object, for
/// any MCP request), and where its `_meta` and `name` members are when known. See the
/// module documentation.
#[derive(Clone)]
pub struct Params {
    text: Box<str>,
    /// `_meta`'s value, in `text`.
    pub(crate) meta: Hint,
    /// `name`'s value, in `text`.
    pub(crate) name: Hint,
    /// `_meta`'s members (name, value's span in `text`), when the frame had read them
    /// already (a request's `_meta` is read for its classification): `with_meta` then
    /// need not walk `_meta` again.
    meta_members: Option<Vec<(Spelled, Span)>>,
    /// Whether every member name in `text` is written without escapes (the decoder saw
    /// them all): see [`Params::member`].
    pub(crate) plain_keys: bool,
}

/// The members `_meta` gets from mcpx, as the text of an object's members (`"k":v,…`,
/// no braces), each written by serde_json: valid by construction, so that a `_meta`
/// rewritten with them stays valid ([`Params::with_meta`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetaMembers(String);

impl MetaMembers {
    /// Appends member `key: value`.
    pub fn push(&mut self, key: &str, value: &Value) {
        if !self.0.is_empty() {
            self.0.push(',');
        }
        // A string and a `Value` always encode.
        self.0
            .push_str(&serde_json::to_string(key).unwrap_or_default());
        self.0.push(':');
        self.0.push_str(&value.to_string());
    }

    /// Appends `other`'s members.
    pub fn extend(&mut self, other: &MetaMembers) {
        if other.0.is_empty() {
            return;
        }
        if !self.0.is_empty() {
            self.0.push(',');
        }
        self.0.push_str(&other.0);
    }

    /// The members' text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Params {
    /// The params of a decoded (or built) frame, with what the decoder saw of them;
    /// `None` when the frame has none.
    pub fn of(frame: &Frame) -> Option<Params> {
        let at = frame.ix.params.clone()?;
        let text = frame.text.get(at.clone())?;
        // The hints are the frame's: moved to the params' own text.
        let rebase = |h: &Hint| match h.span() {
            Some(s) if at.start <= s.start && s.end <= at.end => {
                Hint::at(s.start - at.start..s.end - at.start)
            }
            Some(_) => Hint::Unknown,
            None => *h,
        };
        let meta = rebase(&frame.ix.hints.params_meta());
        // The members the frame found in `_meta` (only where the decoder saw `_meta`
        // itself: then they are its one `_meta`'s), moved to the params' text.
        let meta_members = match (&meta, frame.ix.meta.0.get()) {
            (Hint::At(..), Some(Some(found))) => found
                .iter()
                .map(|(k, v)| {
                    let k = match k {
                        Spelled::At(s) => {
                            Spelled::At(s.start.checked_sub(at.start)?..s.end - at.start)
                        }
                        Spelled::Decoded(d) => Spelled::Decoded(d.clone()),
                    };
                    Some((k, v.start.checked_sub(at.start)?..v.end - at.start))
                })
                .collect::<Option<Vec<_>>>(),
            _ => None,
        };
        Some(Params {
            text: text.into(),
            meta,
            name: rebase(&frame.ix.hints.params_name()),
            meta_members,
            plain_keys: frame.ix.hints.of == crate::jsonrpc::HintsOf::Params
                && frame.ix.hints.plain_keys,
        })
    }

    /// `v` written as JSON text.
    pub fn of_value(v: &Value) -> Params {
        Params::unknown(v.to_string().into_boxed_str())
    }

    /// Checks `text`: the check of [`RawValue::from_string`], and its member names (and
    /// its `_meta`'s) read as serde_json reads them, as the decoder reads a request's
    /// params (a lone surrogate escape in a name is refused).
    pub fn parse(text: String) -> Result<Params, serde_json::Error> {
        let raw = RawValue::from_string(text)?;
        crate::codec::readable_names(raw.get()).map_err(|(e, _)| e)?;
        Ok(Params::unknown(Box::<str>::from(raw)))
    }

    /// `{}`.
    pub fn empty() -> Params {
        Params {
            text: "{}".into(),
            meta: Hint::Absent,
            name: Hint::Absent,
            meta_members: None,
            plain_keys: true,
        }
    }

    fn unknown(text: Box<str>) -> Params {
        Params {
            text,
            meta: Hint::Unknown,
            name: Hint::Unknown,
            meta_members: None,
            plain_keys: false,
        }
    }

    /// The raw JSON text of member `name` (the first of that name, as
    /// [`first_member`](crate::jsonrpc::first_member) reads it); `None` when there is
    /// none. Where every member name is known to be written without escapes, a name not
    /// found in the text between quotes is not there, without a walk: the lookups a
    /// call makes for members it seldom has (`task`, `requestState`, `inputResponses`)
    /// cost a search, not a walk of params that may be mostly escaped strings.
    pub fn member(&self, name: &str) -> Option<&str> {
        if self.plain_keys && !quoted_in(&self.text, name) {
            return None;
        }
        crate::jsonrpc::first_member(&self.text, name)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the text is an object (every MCP request's params are).
    pub fn is_object(&self) -> bool {
        self.text.starts_with('{')
    }

    /// Where member `name`'s value is, and whether it is the only member of that name
    /// (see [`sole_member`]); `None` when there is no such member. Read from the hints
    /// for `_meta` and `name` when the decoder saw them; a walk otherwise.
    pub fn sole_member(&self, name: &str) -> Option<(Range<usize>, bool)> {
        let hint = match name {
            "_meta" => &self.meta,
            "name" => &self.name,
            _ => &Hint::Unknown,
        };
        match hint {
            Hint::Absent => None,
            Hint::At(..) => hint.span().map(|s| (s, true)),
            // Valid text: the trusting walk.
            Hint::Unknown => sole_member(&self.text, name),
        }
    }

    /// The params with the value of their one member `name` replaced by the string
    /// `value` (the gateway's renaming of a tool or prompt); `None` when there is no
    /// `name` or more than one.
    pub fn with_name(&self, value: &str) -> Option<Params> {
        let (span, true) = self.sole_member("name")? else {
            return None;
        };
        let value = serde_json::to_string(value).ok()?;
        self.replaced(span, &value, Noted::Name)
    }

    /// The params with mcpx's `_meta`: the existing `_meta` object's members that
    /// `keep` accepts (by name), in their order and bytes, then `added`; or, without a
    /// `_meta`, `"_meta":{added}` appended (nothing when `added` is empty). Every other
    /// byte is kept. `None` when the general path must decide: the params are not an
    /// object, `_meta` is given twice or is not an object, or it repeats a key.
    pub fn with_meta(&self, keep: impl Fn(&str) -> bool, added: &MetaMembers) -> Option<Params> {
        if !self.is_object() {
            return None;
        }
        let Some((span, sole)) = self.sole_member("_meta") else {
            if added.is_empty() {
                return Some(self.clone());
            }
            return self.appended_meta(added);
        };
        if !sole {
            return None;
        }
        let meta = self.text.get(span.clone())?;
        if !meta.starts_with('{') {
            return None;
        }
        // The members as the frame found them, else a walk (the params' own text:
        // valid, so walked trustingly); values as spans of `text`.
        let walked;
        let members: Vec<(&str, Span)> = match &self.meta_members {
            Some(found) => found
                .iter()
                .map(|(k, v)| Some((k.in_text(&self.text)?, v.clone())))
                .collect::<Option<_>>()?,
            None => {
                walked = valid_members(meta)?;
                walked
                    .iter()
                    .map(|(k, v)| (k.as_ref(), v.start + span.start..v.end + span.start))
                    .collect()
            }
        };
        let mut out = String::with_capacity(meta.len() + added.0.len() + 2);
        out.push('{');
        for (i, (key, range)) in members.iter().enumerate() {
            if members[..i].iter().any(|(k, _)| k == key) {
                return None;
            }
            if !keep(key) {
                continue;
            }
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(key).ok()?);
            out.push(':');
            out.push_str(self.text.get(range.clone())?);
        }
        if !added.is_empty() {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&added.0);
        }
        out.push('}');
        self.replaced(span, &out, Noted::Meta)
    }

    /// `"_meta":{added}` appended to an object without `_meta`.
    fn appended_meta(&self, added: &MetaMembers) -> Option<Params> {
        let text = append_member(&self.text, "\"_meta\"", &format!("{{{}}}", added.0))?;
        // The new value: between `"_meta":` and the object's closing brace.
        let meta = Hint::at(text.len() - added.0.len() - 3..text.len() - 1);
        Some(Params {
            text: text.into_boxed_str(),
            meta,
            // `name`, if known, lies before the end: where it was.
            name: self.name,
            meta_members: None,
            // The one name added, `_meta`, has no escapes.
            plain_keys: self.plain_keys,
        })
    }

    /// The text with the value of `member` at `span` replaced by `value` (valid JSON
    /// text), the hints moved with it.
    fn replaced(&self, span: Span, value: &str, member: Noted) -> Option<Params> {
        let text = splice(&self.text, span.clone(), value)?;
        let new = Hint::at(span.start..span.start + value.len());
        // A hint after the edit moves by the change in length; one before stays.
        let moved = |h: Hint| match h.span() {
            Some(s) if s.start >= span.end => {
                Hint::at(s.start + value.len() - span.len()..s.end + value.len() - span.len())
            }
            Some(s) if s.end <= span.start => h,
            Some(_) => Hint::Unknown,
            None => h,
        };
        let (meta, name) = match member {
            Noted::Meta => (new, moved(self.name)),
            Noted::Name => (moved(self.meta), new),
        };
        Some(Params {
            text: text.into_boxed_str(),
            meta,
            name,
            meta_members: None,
            // A value replaced: the names are the ones there were.
            plain_keys: self.plain_keys,
        })
    }
}

/// Whether `name` occurs in `text` between quotes, as a name without escapes is written.
/// `str::contains` first: it has a vectorised path for short needles that
/// `match_indices` has not, and most lookups are for names that are not there.
fn quoted_in(text: &str, name: &str) -> bool {
    if !text.contains(name) {
        return false;
    }
    let bytes = text.as_bytes();
    text.match_indices(name).any(|(at, _)| {
        at.checked_sub(1).and_then(|b| bytes.get(b)) == Some(&b'"')
            && bytes.get(at + name.len()) == Some(&b'"')
    })
}

/// The members whose place [`Params`] keep.
#[derive(Clone, Copy)]
enum Noted {
    Meta,
    Name,
}

impl std::ops::Deref for Params {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl PartialEq for Params {
    /// The text: the hints are a cache.
    fn eq(&self, other: &Params) -> bool {
        self.text == other.text
    }
}

impl Eq for Params {}

impl fmt::Debug for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Params").field(&&*self.text).finish()
    }
}
