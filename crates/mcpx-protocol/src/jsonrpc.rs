//! The JSON-RPC 2.0 message model, keeping the raw JSON.
//!
//! A [`Frame`] is one JSON-RPC message as text, plus an index of where its members sit
//! in that text. Nothing is re-encoded unless it changes: forwarding a frame writes its
//! text as received, so unknown members, `_meta` keys, extension payloads, member order
//! and even whitespace survive (DESIGN.md principle 4). Edits such as id remapping
//! splice the text at one member and leave every other byte alone.
//!
//! Parsing lives in [`crate::codec`]; this module is the model and its constructors.

use std::fmt;
use std::ops::Range;

use crate::params::Params;
use serde::Serialize;
use serde_json::value::RawValue;

/// A JSON-RPC request id. MCP restricts ids to strings and integers, never null
/// (2024-11-05 and later basic/index §Requests).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Id {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Number(n) => s.serialize_i64(*n),
            Id::String(v) => s.serialize_str(v),
        }
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Number(n)
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::String(s.to_owned())
    }
}

impl Id {
    /// The id as JSON text.
    pub fn to_json(&self) -> String {
        let mut buf = itoa::Buffer::new();
        match self.json_text(&mut buf) {
            JsonText::Raw(t) => t.to_owned(),
            JsonText::Quoted(t) => format!("\"{t}\""),
            JsonText::Owned(t) => t,
        }
    }

    /// The id as JSON text to write into a frame, borrowed where it can be.
    fn json_text<'a>(&'a self, buf: &'a mut itoa::Buffer) -> JsonText<'a> {
        match self {
            Id::Number(n) => JsonText::Raw(buf.format(*n)),
            Id::String(s) => JsonText::string(s),
        }
    }
}

/// A JSON value's text on its way into a frame being written, borrowed where nothing
/// needs escaping (numeric ids, method names: the usual case), so that writing a frame
/// allocates its own text and index only.
enum JsonText<'a> {
    /// Written as it is.
    Raw(&'a str),
    /// A string with nothing to escape, written between quotes.
    Quoted(&'a str),
    /// A string escaped by serde_json.
    Owned(String),
}

impl JsonText<'_> {
    /// `s` as a JSON string, exactly as serde_json writes it: serde_json escapes `"`,
    /// `\` and control characters (below U+0020), and nothing else.
    fn string(s: &str) -> JsonText<'_> {
        if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            JsonText::Quoted(s)
        } else {
            // Serialising a `str` cannot fail; the fallback keeps that non-panicking.
            JsonText::Owned(serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\"")))
        }
    }

    fn len(&self) -> usize {
        match self {
            JsonText::Raw(t) => t.len(),
            JsonText::Quoted(t) => t.len() + 2,
            JsonText::Owned(t) => t.len(),
        }
    }

    /// Appends the text; returns where it went.
    fn push_span(&self, text: &mut String) -> Span {
        let start = text.len();
        match self {
            JsonText::Raw(t) => text.push_str(t),
            JsonText::Quoted(t) => {
                text.push('"');
                text.push_str(t);
                text.push('"');
            }
            JsonText::Owned(t) => text.push_str(t),
        }
        start..text.len()
    }
}

/// What kind of JSON-RPC message a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Has `id` and `method`.
    Request,
    /// Has `method`, no `id`.
    Notification,
    /// Has `id` and `result`.
    Result,
    /// Has `error` (and `id`, unless it could not be read: register A-C4).
    Error,
}

/// The `error` member of an error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorObject {
    /// The error code.
    pub code: i64,
    /// The message.
    pub message: String,
    /// `data` as raw JSON text, if present.
    pub data: Option<String>,
}

/// A byte range of a frame's text.
pub(crate) type Span = Range<usize>;

/// JSON text known to be valid: checked when made from a string ([`Json::parse`]),
/// written by serde_json ([`Json::of_value`]), or taken from a [`Frame`], whose text was
/// checked when it was decoded or built ([`Frame::result_json`]). A result carried as
/// `Json` is not parsed again on its way out ([`Frame::result_response_json`]).
#[derive(Clone)]
pub struct Json {
    /// The text the value is in: its own, or a whole frame's
    /// ([`Frame::into_result_json`]), which saves copying a result out of its frame.
    text: Box<str>,
    /// Where the value is in `text`.
    span: Span,
    /// Where its `_meta` and `resultType` are in `text`, for a result taken from a
    /// decoded frame ([`Hints`]); `Unknown` otherwise.
    result_meta: Hint,
    result_type: Hint,
    /// The members of that `_meta` (names and spans in `text`), when the decoder
    /// listed them.
    result_meta_members: Option<Vec<(Spelled, Span)>>,
}

impl Json {
    /// Checks `text`: the check of [`RawValue::from_string`], and its member names (and
    /// its `_meta`'s) read as serde_json reads them, as the decoder reads a result (a
    /// lone surrogate escape in a name is refused).
    pub fn parse(text: String) -> Result<Json, serde_json::Error> {
        let raw = RawValue::from_string(text)?;
        crate::codec::readable_names(raw.get()).map_err(|(e, _)| e)?;
        Ok(Json::whole(raw.into()))
    }

    /// `v` written as JSON text.
    pub fn of_value(v: &serde_json::Value) -> Json {
        Json::whole(v.to_string().into_boxed_str())
    }

    /// Text already known to be valid JSON (written by this crate from valid JSON).
    pub(crate) fn trusted(text: String) -> Json {
        debug_assert!(
            serde_json::from_str::<&RawValue>(&text).is_ok(),
            "not JSON: {text}"
        );
        Json::whole(text.into_boxed_str())
    }

    fn whole(text: Box<str>) -> Json {
        let span = 0..text.len();
        Json {
            text,
            span,
            result_meta: Hint::Unknown,
            result_type: Hint::Unknown,
            result_meta_members: None,
        }
    }

    /// Where a result's `_meta` and `resultType` are in [`Json::as_str`], as far as
    /// the decoder saw them.
    pub(crate) fn result_hints(&self) -> (Hint, Hint) {
        let base = self.span.start;
        let back = |h: Hint| match h.span() {
            Some(s) if s.start >= base => Hint::at(s.start - base..s.end - base),
            Some(_) => Hint::Unknown,
            None => h,
        };
        (back(self.result_meta), back(self.result_type))
    }

    /// How many members named `key` the result's `_meta` has, and where the one is
    /// (its value's span, from the start of the `_meta` value), from the members the
    /// decoder listed; `None` when it did not list them (the reader walks `_meta`).
    pub(crate) fn result_meta_member(&self, key: &str) -> Option<Members> {
        let members = self.result_meta_members.as_ref()?;
        let meta = self.result_meta.span()?;
        let mut named = members
            .iter()
            .filter(|(k, _)| k.in_text(&self.text) == Some(key));
        Some(match (named.next(), named.next()) {
            (None, _) => Members::None,
            (Some((_, v)), None) => Members::One(
                v.start.checked_sub(meta.start)?,
                v.end.checked_sub(meta.start)?,
            ),
            (Some(_), Some(_)) => Members::Several,
        })
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // The span is the whole text or a frame's member: always in bounds.
        self.text.get(self.span.clone()).unwrap_or_default()
    }
}

/// How many members of a name an object has: none, one (its value's start and end), or
/// more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Members {
    None,
    One(usize, usize),
    Several,
}

impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Json {}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Json").field(&self.as_str()).finish()
    }
}

/// One JSON-RPC message: its text and an index into it. Two pointers wide, so frames
/// move cheaply through channels.
#[derive(Clone, PartialEq, Eq)]
pub struct Frame {
    pub(crate) text: Box<str>,
    pub(crate) ix: Box<Index>,
}

/// Where a frame's members sit in its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Index {
    pub(crate) kind: Kind,
    pub(crate) id: Option<(Id, Span)>,
    pub(crate) method: Option<Spelled>,
    pub(crate) params: Option<Span>,
    pub(crate) result: Option<Span>,
    pub(crate) error: Option<(ErrorObject, Span)>,
    /// Members the model does not know, in the order received.
    pub(crate) extra: Vec<(String, Span)>,
    /// The members of `params._meta`, found on first use.
    pub(crate) meta: MetaCache,
    /// Where the decoder saw `params._meta`, `params.name` and `result.resultType`.
    pub(crate) hints: Hints,
}

/// Where the decoder's walk saw `_meta` and one other member of `params` or `result`
/// (their values' spans in the frame's text), so that their readers need not walk
/// `params` or `result` from the start again: a 2026-07-28 request's `_meta`, a tool
/// call's `name` (the gateway routes by it), a result's `resultType` (usually its last
/// member) and its `_meta` (stamped with mcpx's `serverInfo` for a modern host) are
/// read on every call. Known for decoded frames and their [`Frame::with_id`] copies,
/// and handed on with the params ([`crate::params::Params`]) and the result
/// ([`Json`]); a built frame's readers walk, as before. Like [`MetaCache`], a cache: it
/// never makes two frames unequal.
///
/// Two slots serve both members, as a message has `params` or `result`, not both: the
/// index every frame allocates stays as small as it was with one member noted.
#[derive(Clone, Default)]
pub(crate) struct Hints {
    /// Whose members they are.
    pub(crate) of: HintsOf,
    /// `_meta`.
    pub(crate) meta: Hint,
    /// `params.name`, or `result.resultType`.
    pub(crate) key: Hint,
    /// Whether the object is one whose every member name the decoder saw, none of them
    /// written with escapes: then a member is there only if its name is in the text
    /// between quotes as it is, and a lookup that does not find it there needs no walk
    /// (a call's arguments, with their escaped newlines and quotes, can be most of the
    /// params).
    pub(crate) plain_keys: bool,
}

/// Which member [`Hints`] describe.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum HintsOf {
    /// Neither: readers walk.
    #[default]
    Neither,
    /// `params`.
    Params,
    /// `result`.
    Result,
}

impl Hints {
    fn of(&self, of: HintsOf, hint: Hint) -> Hint {
        if self.of == of { hint } else { Hint::Unknown }
    }

    /// Where `params._meta` is.
    pub(crate) fn params_meta(&self) -> Hint {
        self.of(HintsOf::Params, self.meta)
    }

    /// Where `params.name` is.
    pub(crate) fn params_name(&self) -> Hint {
        self.of(HintsOf::Params, self.key)
    }

    /// Where `result._meta` is.
    pub(crate) fn result_meta(&self) -> Hint {
        self.of(HintsOf::Result, self.meta)
    }

    /// Where `result.resultType` is.
    pub(crate) fn result_type(&self) -> Hint {
        self.of(HintsOf::Result, self.key)
    }

    fn shifted(&self, shift: impl Fn(&Span) -> Span) -> Hints {
        Hints {
            of: self.of,
            meta: self.meta.shifted(&shift),
            key: self.key.shifted(&shift),
            plain_keys: self.plain_keys,
        }
    }
}

impl PartialEq for Hints {
    fn eq(&self, _: &Hints) -> bool {
        true
    }
}

impl Eq for Hints {}

impl fmt::Debug for Hints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hints")
    }
}

/// What the decoder knows of one member (see [`Hints`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Hint {
    /// Not looked for (a built frame), given more than once, or spelled with escapes
    /// somewhere in its object: readers walk.
    #[default]
    Unknown,
    /// Not there (the value holding it is no object, or has no such member).
    Absent,
    /// The one such member's value: its start and end in the text, as `u32`s to keep
    /// the index small (every frame allocates one).
    At(u32, u32),
}

impl Hint {
    /// The hint for a value at `span`: `Unknown` where an offset would not fit.
    pub(crate) fn at(span: Span) -> Hint {
        match (u32::try_from(span.start), u32::try_from(span.end)) {
            (Ok(start), Ok(end)) => Hint::At(start, end),
            _ => Hint::Unknown,
        }
    }

    pub(crate) fn span(&self) -> Option<Span> {
        match self {
            Hint::At(start, end) => Some(*start as usize..*end as usize),
            _ => None,
        }
    }

    pub(crate) fn shifted(&self, shift: impl Fn(&Span) -> Span) -> Hint {
        match self.span() {
            Some(s) => Hint::at(shift(&s)),
            None => *self,
        }
    }
}

/// The members of `params._meta` (name, span in the frame's text), read once per frame
/// on the first [`Frame::params_meta`], or handed over by the decoder as it walked
/// them: a request's `_meta` is read several times on its way through (classification,
/// header checks, capabilities, log level, progress), and each read used to scan
/// `params` and `_meta` again. On a decoded result, the members of `result._meta`
/// instead (for the `serverInfo` stamp, through [`Frame::into_result_json`]). `None`
/// inside: no params, no `_meta`, or not an object. A cache, not part of the frame's
/// value: it never makes two frames unequal.
#[derive(Clone, Default)]
pub(crate) struct MetaCache(pub(crate) std::sync::OnceLock<Option<Vec<(Spelled, Span)>>>);

/// A name in a frame (its method, a `_meta` key in [`MetaCache`]): where the frame's
/// text spells it (between its quotes) when it has no escapes, as nearly every name
/// is; decoded otherwise. Names are read on every request: this keeps them out of the
/// allocator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Spelled {
    At(Span),
    Decoded(String),
}

impl Spelled {
    /// The name, from `text` (the frame's) when it is spelled there.
    pub(crate) fn in_text<'a>(&'a self, text: &'a str) -> Option<&'a str> {
        match self {
            Spelled::At(at) => text.get(at.clone()),
            Spelled::Decoded(name) => Some(name),
        }
    }

    /// The name at `quoted` in `text` (a JSON string's span, quotes included): by
    /// position when it has no escapes, else decoded. `None` when it is not a string.
    pub(crate) fn of_string(text: &str, quoted: Span) -> Option<Spelled> {
        let inner = text.get(quoted.start + 1..quoted.end.checked_sub(1)?)?;
        Spelled::of_name(text, quoted, inner.contains('\\'))
    }

    /// [`Spelled::of_string`] for a name whose scan already told whether it has
    /// escapes (`escaped`): the decoder's, which need not look through it again.
    pub(crate) fn of_name(text: &str, quoted: Span, escaped: bool) -> Option<Spelled> {
        let raw = text.get(quoted.clone())?;
        raw.strip_prefix('"')?.strip_suffix('"')?;
        if escaped {
            serde_json::from_str::<String>(raw)
                .ok()
                .map(Spelled::Decoded)
        } else {
            Some(Spelled::At(quoted.start + 1..quoted.end - 1))
        }
    }
}

impl PartialEq for MetaCache {
    fn eq(&self, _: &MetaCache) -> bool {
        true
    }
}

impl Eq for MetaCache {}

impl fmt::Debug for MetaCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MetaCache")
    }
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Frame")
            .field("kind", &self.ix.kind)
            .field("text", &self.text)
            .finish()
    }
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Frame {
    /// The frame's JSON text, exactly as received (or as built).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Consumes the frame, returning its text.
    pub fn into_string(self) -> String {
        self.text.into_string()
    }

    /// Request, notification, result or error.
    pub fn kind(&self) -> Kind {
        self.ix.kind
    }

    /// The id, for requests and responses (absent on notifications and on error
    /// responses to unreadable requests).
    pub fn id(&self) -> Option<&Id> {
        self.ix.id.as_ref().map(|(id, _)| id)
    }

    /// The method, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        self.ix.method.as_ref()?.in_text(&self.text)
    }

    /// `params` as raw JSON text.
    pub fn params(&self) -> Option<&str> {
        self.ix.params.clone().map(|s| &self.text[s])
    }

    /// `result` as raw JSON text.
    pub fn result(&self) -> Option<&str> {
        self.ix.result.clone().map(|s| &self.text[s])
    }

    /// The `error` member.
    pub fn error(&self) -> Option<&ErrorObject> {
        self.ix.error.as_ref().map(|(e, _)| e)
    }

    /// Unknown top-level members: name and raw JSON text, in received order.
    pub fn extra(&self) -> impl Iterator<Item = (&str, &str)> {
        self.ix
            .extra
            .iter()
            .map(|(k, s)| (k.as_str(), &self.text[s.clone()]))
    }

    /// Deserialises `params` into `T`; `None` when there are no params.
    pub fn params_as<'a, T: serde::Deserialize<'a>>(
        &'a self,
    ) -> Option<Result<T, serde_json::Error>> {
        self.params().map(serde_json::from_str)
    }

    /// The raw JSON text of `params.name` (the tool a `tools/call` names, the prompt a
    /// `prompts/get` does), as [`first_member`] reads it; for a decoded frame, from where
    /// the decoder saw it, without a walk.
    pub fn params_name(&self) -> Option<&str> {
        self.hinted(self.ix.hints.params_name(), self.params(), "name")
    }

    /// The raw JSON text of `result.resultType` (2026-07-28), as [`first_member`] reads
    /// it; for a decoded frame, from where the decoder saw it, without a walk.
    pub fn result_type(&self) -> Option<&str> {
        self.hinted(self.ix.hints.result_type(), self.result(), "resultType")
    }

    /// Member `name` of `outer` (the frame's params or result), from where `hint` says
    /// the decoder saw it, or, where it could not be sure, as [`first_member`] reads it.
    fn hinted<'a>(&'a self, hint: Hint, outer: Option<&'a str>, name: &str) -> Option<&'a str> {
        match hint {
            Hint::Absent => None,
            at @ Hint::At(..) => self.text.get(at.span()?),
            Hint::Unknown => first_member(outer?, name),
        }
    }

    /// Reads `params._meta[key]` as raw JSON text, without parsing the rest of `params`
    /// into a tree.
    pub fn params_meta(&self, key: &str) -> Option<&str> {
        // Without params the cache is a result's `_meta`, if anything.
        self.ix.params.as_ref()?;
        let members = self.ix.meta.0.get_or_init(|| {
            let meta = self.hinted(self.ix.hints.params_meta(), self.params(), "_meta")?;
            let base = meta.as_ptr() as usize - self.text.as_ptr() as usize;
            // The frame's own text: valid, so not checked again.
            let found = valid_members(meta)?;
            let text_at = self.text.as_ptr() as usize;
            Some(
                found
                    .into_iter()
                    .map(|(k, s)| {
                        let k = match k {
                            std::borrow::Cow::Borrowed(k) => {
                                let at = k.as_ptr() as usize - text_at;
                                Spelled::At(at..at + k.len())
                            }
                            std::borrow::Cow::Owned(k) => Spelled::Decoded(k),
                        };
                        (k, s.start + base..s.end + base)
                    })
                    .collect(),
            )
        });
        self.cached_meta(members.as_ref()?, key)
    }

    /// [`Frame::params_meta`] for a frame whose `_meta` is read once, if at all (the
    /// request mcpx writes upstream, whose headers need its `protocolVersion`): the
    /// members found so far are used, but none are collected, so that a single read
    /// walks `_meta` only up to the member it finds and allocates nothing.
    pub fn params_meta_once(&self, key: &str) -> Option<&str> {
        self.ix.params.as_ref()?;
        if let Some(members) = self.ix.meta.0.get() {
            return self.cached_meta(members.as_ref()?, key);
        }
        let meta = self.hinted(self.ix.hints.params_meta(), self.params(), "_meta")?;
        // The frame's own text: valid, so walked trustingly. A `_meta` that is there
        // is mcpx's envelope, whose key is there too.
        walk_to_member(meta, key)
    }

    /// The first member of `_meta` named `key`, as [`member`] reads it, from the
    /// members the cache holds.
    fn cached_meta(&self, members: &[(Spelled, Span)], key: &str) -> Option<&str> {
        let (_, span) = members
            .iter()
            .find(|(k, _)| k.in_text(&self.text) == Some(key))?;
        self.text.get(span.clone())
    }

    /// The same message with another id (the gateway's id remapping). Every other byte
    /// of the text is kept. On a frame without an id this is a no-op clone.
    pub fn with_id(&self, id: &Id) -> Frame {
        let Some((_, span)) = &self.ix.id else {
            return self.clone();
        };
        let mut buf = itoa::Buffer::new();
        let id_json = id.json_text(&mut buf);
        // Only the id changes: the index is shifted, not rebuilt (no second parse of
        // what may be a large result).
        let (start, end) = (span.start, span.end);
        let mut text = String::with_capacity(self.text.len() - (end - start) + id_json.len());
        text.push_str(&self.text[..start]);
        let new = id_json.push_span(&mut text);
        text.push_str(&self.text[end..]);
        let shift = |s: &Span| {
            if s.start >= end {
                s.start + new.len() - (end - start)..s.end + new.len() - (end - start)
            } else {
                s.clone()
            }
        };
        let ix = Index {
            kind: self.ix.kind,
            id: Some((id.clone(), start..start + new.len())),
            method: self.ix.method.as_ref().map(|m| match m {
                Spelled::At(at) => Spelled::At(shift(at)),
                decoded => decoded.clone(),
            }),
            params: self.ix.params.as_ref().map(shift),
            result: self.ix.result.as_ref().map(shift),
            error: self.ix.error.as_ref().map(|(e, s)| (e.clone(), shift(s))),
            extra: self
                .ix
                .extra
                .iter()
                .map(|(k, s)| (k.clone(), shift(s)))
                .collect(),
            meta: MetaCache::default(),
            hints: self.ix.hints.shifted(shift),
        };
        Frame {
            text: text.into_boxed_str(),
            ix: Box::new(ix),
        }
    }

    /// The same message with `params` replaced by `raw` (which must be valid JSON).
    /// A frame without params gets them appended.
    pub fn with_params(&self, raw: &RawValue) -> Frame {
        self.replace_member("params", self.ix.params.clone(), raw.get())
    }

    /// The same message with `result` replaced by `raw` (which must be valid JSON).
    pub fn with_result(&self, raw: &RawValue) -> Frame {
        self.replace_member("result", self.ix.result.clone(), raw.get())
    }

    fn replace_member(&self, name: &str, span: Option<Span>, new: &str) -> Frame {
        let text = match span {
            Some(span) => splice(&self.text, span, new),
            // Appended before the closing brace: `{...}` -> `{...,"name":new}`.
            None => append_member(&self.text, &format!("\"{name}\""), new),
        };
        match text {
            Some(text) => self.reindexed(text),
            None => self.clone(),
        }
    }

    /// Rebuilds the index of an edited text. The edit kept the frame valid, so a
    /// failure here is a bug; it degrades to the original frame rather than panicking.
    fn reindexed(&self, text: String) -> Frame {
        crate::codec::parse_frame(text, &crate::codec::Limits::unlimited())
            .unwrap_or_else(|_| self.clone())
    }

    /// A request frame whose params are `params`, valid JSON as [`Params`] are: not
    /// checked again. What the params know of `_meta` and `name` the frame knows too.
    pub fn request_with_params(id: &Id, method: &str, params: Option<&Params>) -> Frame {
        let mut frame = Frame::request_text(id, method, params.map(Params::as_str));
        if let (Some(p), Some(at)) = (params, frame.ix.params.clone()) {
            let shift = |s: &Span| s.start + at.start..s.end + at.start;
            frame.ix.hints = Hints {
                of: HintsOf::Params,
                meta: p.meta.shifted(shift),
                key: p.name.shifted(shift),
                plain_keys: p.plain_keys,
            };
        }
        frame
    }

    /// A request frame. `params` must be valid JSON text.
    pub fn request(id: &Id, method: &str, params: Option<&RawValue>) -> Frame {
        Frame::request_text(id, method, params.map(RawValue::get))
    }

    fn request_text(id: &Id, method: &str, params: Option<&str>) -> Frame {
        // Written and indexed at once (the same text `build` would serialise), into a
        // buffer of the exact size, so that boxing it does not reallocate.
        const HEAD: &str = r#"{"jsonrpc":"2.0","id":"#;
        const METHOD: &str = r#","method":"#;
        const PARAMS: &str = r#","params":"#;
        let mut buf = itoa::Buffer::new();
        let id_json = id.json_text(&mut buf);
        let method_json = JsonText::string(method);
        let mut text = String::with_capacity(
            HEAD.len()
                + id_json.len()
                + METHOD.len()
                + method_json.len()
                + params.map_or(0, |p| PARAMS.len() + p.len())
                + 1,
        );
        text.push_str(HEAD);
        let id_span = id_json.push_span(&mut text);
        text.push_str(METHOD);
        let method_span = method_json.push_span(&mut text);
        let params = params.map(|p| {
            text.push_str(PARAMS);
            push_span(&mut text, p)
        });
        text.push('}');
        let method = Spelled::of_string(&text, method_span);
        Frame {
            text: text.into_boxed_str(),
            ix: Box::new(Index {
                kind: Kind::Request,
                id: Some((id.clone(), id_span)),
                method,
                params,
                result: None,
                error: None,
                extra: Vec::new(),
                meta: MetaCache::default(),
                hints: Hints::default(),
            }),
        }
    }

    /// A notification frame.
    pub fn notification(method: &str, params: Option<&RawValue>) -> Frame {
        build(&Envelope {
            jsonrpc: "2.0",
            id: None,
            method: Some(method),
            params,
            result: None,
            error: None,
        })
    }

    /// A result response.
    pub fn result_response(id: &Id, result: &RawValue) -> Frame {
        Frame::result_response_text(id, result.get())
    }

    /// A result response around `result`, not parsed again (see [`Json`]).
    pub fn result_response_json(id: &Id, result: &Json) -> Frame {
        Frame::result_response_text(id, result.as_str())
    }

    /// The `result` member as [`Json`] (a copy of its text; not parsed again).
    pub fn result_json(&self) -> Option<Json> {
        self.result().map(|r| Json::whole(r.into()))
    }

    /// The `result` member as [`Json`], keeping the frame's text instead of copying
    /// the result out of it (a result can be megabytes).
    pub fn into_result_json(self) -> Option<Json> {
        let span = self.ix.result.clone()?;
        let result_meta = self.ix.hints.result_meta();
        let result_meta_members = match result_meta {
            // The decoder's list is the result's `_meta`'s only where the hints are a
            // result's (see `MetaCache`).
            Hint::At(..) => self.ix.meta.0.into_inner().flatten(),
            _ => None,
        };
        Some(Json {
            result_meta,
            result_type: self.ix.hints.result_type(),
            result_meta_members,
            text: self.text,
            span,
        })
    }

    /// A result response around `result`, which must be valid JSON text (e.g. taken
    /// from another frame, or lowered): written and indexed without parsing it again.
    pub(crate) fn result_response_text(id: &Id, result: &str) -> Frame {
        // The exact size, as in `request_text`.
        const HEAD: &str = r#"{"jsonrpc":"2.0","id":"#;
        const RESULT: &str = r#","result":"#;
        let mut buf = itoa::Buffer::new();
        let id_json = id.json_text(&mut buf);
        let mut text =
            String::with_capacity(HEAD.len() + id_json.len() + RESULT.len() + result.len() + 1);
        text.push_str(HEAD);
        let id_span = id_json.push_span(&mut text);
        text.push_str(RESULT);
        let result = push_span(&mut text, result);
        text.push('}');
        Frame {
            text: text.into_boxed_str(),
            ix: Box::new(Index {
                kind: Kind::Result,
                id: Some((id.clone(), id_span)),
                method: None,
                params: None,
                result: Some(result),
                error: None,
                extra: Vec::new(),
                meta: MetaCache::default(),
                hints: Hints::default(),
            }),
        }
    }

    /// An error response. `id: None` omits the member (register A-C4: the request's id
    /// could not be read).
    pub fn error_response(
        id: Option<&Id>,
        code: i64,
        message: &str,
        data: Option<&serde_json::Value>,
    ) -> Frame {
        build(&Envelope {
            jsonrpc: "2.0",
            id,
            method: None,
            params: None,
            result: None,
            error: Some(&ErrorOut {
                code,
                message,
                data,
            }),
        })
    }
}

#[derive(Serialize)]
struct Envelope<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Id>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorOut<'a>>,
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a serde_json::Value>,
}

/// Appends `s` to `text`, returning where it sits.
fn push_span(text: &mut String, s: &str) -> Span {
    let start = text.len();
    text.push_str(s);
    start..text.len()
}

fn build(env: &Envelope<'_>) -> Frame {
    // Serialising these types cannot fail (string keys, valid raw JSON), and the
    // result always parses; the fallbacks keep that a non-panicking invariant.
    let text = serde_json::to_string(env).unwrap_or_else(|_| String::from("{}"));
    crate::codec::parse_frame(text, &crate::codec::Limits::unlimited()).unwrap_or_else(|_| Frame {
        text: Box::from("{}"),
        ix: Box::new(Index {
            kind: Kind::Notification,
            id: None,
            method: None,
            params: None,
            result: None,
            error: None,
            extra: Vec::new(),
            meta: MetaCache::default(),
            hints: Hints::default(),
        }),
    })
}

/// `text` with the bytes of `span` replaced by `with`: an edit of raw JSON that keeps
/// every other byte. `None` when `span` is not a range of `text`.
pub fn splice(text: &str, span: Range<usize>, with: &str) -> Option<String> {
    let (head, tail) = (text.get(..span.start)?, text.get(span.end..)?);
    let mut out = String::with_capacity(head.len() + with.len() + tail.len());
    out.push_str(head);
    out.push_str(with);
    out.push_str(tail);
    Some(out)
}

/// `object` (a JSON object's text) with the member `key: value` added last, every
/// other byte kept; `key` and `value` are JSON text (`key` a quoted string). `None`
/// when `object` does not end with `}`.
pub fn append_member(object: &str, key: &str, value: &str) -> Option<String> {
    let head = object.trim_end().strip_suffix('}')?.trim_end();
    let sep = if head.ends_with('{') { "" } else { "," };
    Some(format!("{head}{sep}{key}:{value}}}"))
}

/// The string a JSON string value's text (valid JSON, as [`member`] returns it) stands
/// for: borrowed when it has no escapes (the usual case), decoded when it has; `None`
/// when the text is not a string.
pub fn string_value(text: &str) -> Option<std::borrow::Cow<'_, str>> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if !inner.contains(['\\', '"']) {
        return Some(std::borrow::Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(text)
        .ok()
        .map(std::borrow::Cow::Owned)
}

/// Whether the object text `obj` can have a member `name` at all. A key written without
/// escapes appears in the text as it is, and with no backslash in the text there are no
/// escapes; so when neither the name nor a backslash occurs, the member is missing and
/// a walk can be skipped: most lookups on the hot path are for members a call does not
/// have (`task`, `requestState`, `_meta` on legacy).
///
/// The backslash is looked for with `memchr`'s vectorised search: this runs several
/// times per call over every byte of the params, and `str::contains(char)` reads a
/// word at a time.
fn may_have_member(obj: &str, name: &str) -> bool {
    memchr::memchr(b'\\', obj.as_bytes()).is_some() || obj.contains(name)
}

/// [`members`] for text known to be valid JSON (see [`first_member`]): nothing is
/// checked again. On text that is not valid JSON the answer is unspecified.
pub fn valid_members(obj: &str) -> Option<Vec<(std::borrow::Cow<'_, str>, Range<usize>)>> {
    let mut all = Vec::new();
    let _walked = crate::scan::visit_valid(obj, |k, span| {
        all.push((k, span));
        std::ops::ControlFlow::Continue(())
    })?;
    Some(all)
}

/// Where member `name` of the valid JSON object `obj` is (its value's byte range), and
/// whether it is there more than once: for a member the caller may rewrite in place,
/// which it must not do when a second one would be left as it was. Trusts the text as
/// [`first_member`] does. `None` when there is no such member.
pub fn sole_member(obj: &str, name: &str) -> Option<(Range<usize>, bool)> {
    if !may_have_member(obj, name) {
        return None;
    }
    let mut first: Option<Range<usize>> = None;
    let mut again = false;
    let _walked = crate::scan::visit_valid(obj, |k, span| {
        if k != name {
            std::ops::ControlFlow::Continue(())
        } else if first.is_none() {
            first = Some(span);
            std::ops::ControlFlow::Continue(())
        } else {
            again = true;
            std::ops::ControlFlow::Break(())
        }
    })?;
    first.map(|span| (span, !again))
}

/// [`member`] for text known to be valid JSON (taken from a decoded [`Frame`] or a
/// [`Json`], which are checked once when made): nothing is checked again, values are
/// skipped by their brackets and quotes, and the walk stops at the first member of
/// that name. On text that is not valid JSON the answer is unspecified (a member, or
/// `None`), never a panic.
pub fn first_member<'a>(obj: &'a str, name: &str) -> Option<&'a str> {
    if !may_have_member(obj, name) {
        return None;
    }
    walk_to_member(obj, name)
}

/// [`first_member`] without its search of the text for the name first: for a member
/// that is nearly always there, and early, where that search (a substring search set
/// up for the name: ~2 k instructions for a 39-byte `_meta` key) costs more than the
/// walk it would spare.
pub(crate) fn walk_to_member<'a>(obj: &'a str, name: &str) -> Option<&'a str> {
    let mut found = None;
    let walked = crate::scan::visit_valid(obj, |k, span| {
        if k == name {
            found = Some(span);
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })?;
    if walked.is_continue() {
        return None; // walked to the end: no such member
    }
    obj.get(found?)
}

/// The raw text of member `name` of the JSON object `obj`, if `obj` is an object that
/// has it. Reads one level only, borrowing from `obj`.
pub fn member<'a>(obj: &'a str, name: &str) -> Option<&'a str> {
    if !may_have_member(obj, name) {
        return None;
    }
    // The first of that name, once the whole text is known to be a valid object.
    let mut found = None;
    crate::scan::walk(obj, |k, span| {
        if found.is_none() && k == name {
            found = Some(span);
        }
    })?;
    obj.get(found?)
}

/// Every member of the JSON object `obj` (name, byte range of its value in `obj`), in
/// order, duplicates included; `None` when `obj` is not an object (or not valid JSON),
/// as [`member`] reads it.
/// A name is borrowed from `obj` unless it is written with escapes.
pub fn members(obj: &str) -> Option<Vec<(std::borrow::Cow<'_, str>, Range<usize>)>> {
    crate::scan::object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn json_is_checked_once() {
        assert!(Json::parse("{\"a\":".to_owned()).is_err());
        assert!(Json::parse("nul".to_owned()).is_err());
        let j = Json::parse(r#"{"content":[{"type":"text","text":"hi"}]}"#.to_owned()).unwrap();
        let f = Frame::result_response_json(&Id::Number(3), &j);
        assert_eq!(f, Frame::result_response(&Id::Number(3), &raw(j.as_str())));
        assert_eq!(f.result_json(), Some(j.clone()));
        // Kept in the frame's text, it reads and compares the same.
        let kept = f.clone().into_result_json().unwrap();
        assert_eq!(kept.as_str(), j.as_str());
        assert_eq!(kept, j);
        assert_eq!(format!("{kept:?}"), format!("{j:?}"));
        assert_eq!(Frame::result_response_json(&Id::Number(3), &kept), f);
        assert_eq!(
            Frame::request(&Id::Number(1), "m", None).result_json(),
            None
        );
        assert_eq!(
            Frame::request(&Id::Number(1), "m", None).into_result_json(),
            None
        );
    }

    #[test]
    fn params_meta_reads_like_member() {
        let limits = crate::codec::Limits::unlimited();
        for params in [
            r#"{"name":"t","_meta":{"a":1,"b":{"c":[2]},"a":3,"k\u0065y":"v"}}"#,
            r#"{"_meta":[1,2]}"#,
            r#"{"_meta":null,"x":1}"#,
            r#"{"name":"t"}"#,
            r#"{"_meta":{}}"#,
        ] {
            let built = Frame::request(&Id::Number(1), "m", Some(&raw(params)));
            let f = crate::codec::parse_frame(built.as_str().to_owned(), &limits).unwrap();
            for key in ["a", "b", "key", "c", "_meta", "name"] {
                let expected = member(params, "_meta").and_then(|m| member(m, key));
                // A single read walks: a built frame (no hints), a decoded one (its
                // hints), and one whose cache is filled (below) reads from it.
                assert_eq!(built.params_meta_once(key), expected, "{params} {key}");
                let fresh = crate::codec::parse_frame(built.as_str().to_owned(), &limits);
                assert_eq!(fresh.unwrap().params_meta_once(key), expected);
                assert_eq!(f.params_meta(key), expected, "{params} {key}");
                // Twice: the second read is from the cache.
                assert_eq!(f.params_meta(key), expected, "{params} {key}");
                assert_eq!(f.with_id(&Id::Number(77)).params_meta(key), expected);
                assert_eq!(f.params_meta_once(key), expected, "{params} {key}");
            }
        }
        assert_eq!(
            Frame::request(&Id::Number(1), "m", None).params_meta("a"),
            None
        );
    }

    #[test]
    fn frames_built_directly_index_like_parsed_ones() {
        let limits = crate::codec::Limits::unlimited();
        let reparse =
            |f: &Frame| crate::codec::parse_frame(f.as_str().to_owned(), &limits).unwrap();
        for id in [Id::Number(-7), Id::String("a\"b\u{e9}".into())] {
            for params in [None, Some(raw(r#"{"name":"x","_meta":{"k":[1,2]}}"#))] {
                let f = Frame::request(&id, "tools/\"call", params.as_deref());
                assert_eq!(f, reparse(&f));
                assert_eq!(f.method(), Some("tools/\"call"));
                let g = f.with_id(&Id::String("another, longer id".into()));
                assert_eq!((g.method(), &g), (Some("tools/\"call"), &reparse(&g)));
            }
            let f = Frame::result_response(&id, &raw(r#"{"content":[],"x":"y"}"#));
            assert_eq!(f, reparse(&f));
            let g = f.with_id(&Id::Number(123_456_789));
            assert_eq!(g, reparse(&g));
        }
        let parsed = reparse(&Frame::request(&Id::Number(1), "m", None));
        let odd = crate::codec::parse_frame(
            r#"{"z":1,"id":"long-id-here","jsonrpc":"2.0","error":{"code":-1,"message":"m"},"w":[2]}"#.to_owned(),
            &limits,
        )
        .unwrap();
        for f in [parsed, odd] {
            let g = f.with_id(&Id::Number(5));
            assert_eq!(g, reparse(&g));
            assert_eq!(g.method(), f.method());
            let h = f.with_id(&Id::String("a much longer id than before".into()));
            assert_eq!(h, reparse(&h));
        }
    }

    #[test]
    fn ids_and_names_are_written_as_serde_json_writes_them() {
        for s in [
            "",
            "tools/call",
            "a\"b",
            "back\\slash",
            "tab\t",
            "\u{1}",
            "\u{7f}",
            "/",
            "\u{e9}t\u{e9}",
            "\u{2028}",
            "\u{1f600}",
        ] {
            let mut text = String::new();
            let t = JsonText::string(s);
            let span = t.push_span(&mut text);
            assert_eq!(text, serde_json::to_string(s).unwrap(), "{s:?}");
            assert_eq!((span, t.len()), (0..text.len(), text.len()));
            assert_eq!(Id::String(s.into()).to_json(), text);
        }
        for n in [0, -1, 42, i64::MIN, i64::MAX] {
            assert_eq!(Id::Number(n).to_json(), n.to_string());
        }
    }

    #[test]
    fn string_values_borrow_unless_escaped() {
        use std::borrow::Cow;
        assert!(matches!(
            string_value(r#""echo""#),
            Some(Cow::Borrowed("echo"))
        ));
        assert!(matches!(string_value(r#""""#), Some(Cow::Borrowed(""))));
        assert_eq!(
            string_value(r#""a\"b\u00e9""#).as_deref(),
            Some("a\"b\u{e9}")
        );
        for not in [
            "1", "null", r#""open"#, r#"open""#, r#"""#, r#""a"b""#, r#""\""#,
        ] {
            assert_eq!(string_value(not), None, "{not}");
        }
    }

    #[test]
    fn first_member_agrees_with_member_on_valid_text() {
        let obj =
            r#" {"a":1,"b":{"a":2},"c\u0061":"x","a":3,"name":"t","_meta":{"k":[1,{"a":0}]}} "#;
        for name in ["a", "b", "ca", "name", "_meta", "k", "z", ""] {
            assert_eq!(first_member(obj, name), member(obj, name), "{name}");
        }
        for obj in ["{}", "[1]", r#"{"x":"a"}"#, r#"{"t\u0061sk":{}}"#] {
            assert_eq!(first_member(obj, "task"), member(obj, "task"), "{obj}");
        }
    }

    #[test]
    fn sole_member_finds_the_first_and_tells_whether_it_is_alone() {
        let obj = r#"{"name":"t","arguments":{"name":"inner"},"n\u0061me":"u"}"#;
        let (span, alone) = sole_member(obj, "name").unwrap();
        assert_eq!((&obj[span], alone), (r#""t""#, false));
        let obj = r#"{"arguments":{"name":"inner"},"name":"t"}"#;
        let (span, alone) = sole_member(obj, "name").unwrap();
        assert_eq!((&obj[span], alone), (r#""t""#, true));
        assert_eq!(sole_member(r#"{"arguments":{"name":1}}"#, "name"), None);
        assert_eq!(sole_member("[1]", "name"), None);
    }

    #[test]
    fn member_reads_one_level_and_the_first_of_duplicates() {
        let obj = r#" {"a":1,"b":{"a":2},"c\u0061":"x","a":3} "#;
        assert_eq!(member(obj, "a"), Some("1"));
        assert_eq!(member(obj, "b"), Some(r#"{"a":2}"#));
        assert_eq!(member(obj, "ca"), Some(r#""x""#));
        assert_eq!(member(obj, "z"), None);
        // The name in a value, or nowhere: found only as a key.
        assert_eq!(member(r#"{"k":"task"}"#, "task"), None);
        assert_eq!(member(r#"{"k":1}"#, "task"), None);
        // Written with escapes: found by the scan.
        assert_eq!(member(r#"{"t\u0061sk":{}}"#, "task"), Some("{}"));
        assert_eq!(member(r#"{"\"q\"":2}"#, "\"q\""), Some("2"));
        for bad in ["[1]", "1", "{\"a\":1", "{\"a\":1} x", "{\"a\":}"] {
            assert_eq!(member(bad, "a"), None, "{bad}");
        }
    }

    #[test]
    fn builds_each_kind() {
        let r = Frame::request(&Id::Number(1), "tools/list", Some(&raw("{}")));
        assert_eq!(
            r.as_str(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#
        );
        assert_eq!(r.kind(), Kind::Request);
        let n = Frame::notification("notifications/initialized", None);
        assert_eq!(
            n.as_str(),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        );
        let ok = Frame::result_response(&Id::from("a"), &raw(r#"{"x":1}"#));
        assert_eq!(
            ok.as_str(),
            r#"{"jsonrpc":"2.0","id":"a","result":{"x":1}}"#
        );
        let err = Frame::error_response(None, -32700, "Parse error", None);
        assert_eq!(
            err.as_str(),
            r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}"#
        );
        assert_eq!(err.kind(), Kind::Error);
        assert_eq!(err.id(), None);
    }

    #[test]
    fn id_remap_keeps_every_other_byte() {
        let text = r#"{ "jsonrpc": "2.0", "x-vendor": [1, 2], "id": 7, "method": "tools/call", "params": {"name": "a", "_meta": {"com.example/k": true}} }"#;
        let f =
            crate::codec::parse_frame(text.to_owned(), &crate::codec::Limits::default()).unwrap();
        let g = f.with_id(&Id::from("up-1"));
        assert_eq!(g.as_str(), text.replace("\"id\": 7", "\"id\": \"up-1\""));
        assert_eq!(g.id(), Some(&Id::from("up-1")));
        assert_eq!(g.with_id(&Id::Number(7)).as_str(), text);
        assert_eq!(g.params_meta("com.example/k"), Some("true"));
    }

    #[test]
    fn text_edits_keep_every_other_byte() {
        let t = r#"{"a" : 1, "b":[2]}"#;
        assert_eq!(
            splice(t, 7..8, "true").as_deref(),
            Some(r#"{"a" : true, "b":[2]}"#)
        );
        assert_eq!(splice(t, 7..99, "x"), None);
        assert_eq!(
            append_member("{ \"a\":1 }\n", "\"k\"", "{}").as_deref(),
            Some(r#"{ "a":1,"k":{}}"#)
        );
        assert_eq!(
            append_member("{ }", "\"k\"", "2").as_deref(),
            Some(r#"{"k":2}"#)
        );
        assert_eq!(append_member("[1]", "\"k\"", "2"), None);
    }

    #[test]
    fn replace_or_append_members() {
        let f = crate::codec::parse_frame(
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_owned(),
            &crate::codec::Limits::default(),
        )
        .unwrap();
        let g = f.with_params(&raw(r#"{"_meta":{}}"#));
        assert_eq!(
            g.as_str(),
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{}}}"#
        );
        let h = g.with_params(&raw("{}"));
        assert_eq!(h.params(), Some("{}"));
    }
}
