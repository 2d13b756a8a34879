//! Reading JSON-RPC frames: size and depth limits, batches, and the errors bad input
//! gets.
//!
//! [`decode`] turns received text into one [`Frame`] or a batch of them, or a
//! [`DecodeError`] that says what was wrong and converts to the error response the
//! sender is owed ([`DecodeError::to_response`]). It never panics, whatever the input:
//! a property test (`tests/it/codec_props.rs`) and a fuzz target (`fuzz/`) hold it to that.
//!
//! Whether a batch may be *admitted* depends on the revision (only 2025-03-26 has them,
//! register H11/A-C1/B-C2): [`admit`] applies that rule once the revision is known.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::error::{INVALID_REQUEST, PARSE_ERROR};
use crate::jsonrpc::{ErrorObject, Frame, Hint, HintsOf, Id, Index, Kind, Span, Spelled};
use crate::revision::Revision;

/// Bounds on what [`decode`] accepts. Every bound is configurable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest frame, in bytes (default 64 MiB).
    pub max_frame_bytes: usize,
    /// Deepest nesting of arrays and objects (default 128, serde_json's own bound
    /// for trees, so a frame that passes here can also be parsed into a tree).
    pub max_depth: usize,
    /// Most messages in one batch (default 1024).
    pub max_batch_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: 64 * 1024 * 1024,
            max_depth: 128,
            max_batch_len: 1024,
        }
    }
}

impl Limits {
    /// No practical bounds: for text mcpx produced itself.
    pub const fn unlimited() -> Self {
        Limits {
            max_frame_bytes: usize::MAX,
            max_depth: 128,
            max_batch_len: usize::MAX,
        }
    }
}

/// What was wrong with received text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    /// Larger than [`Limits::max_frame_bytes`].
    #[error("message of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Nested deeper than [`Limits::max_depth`].
    #[error("message nests deeper than the limit of {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// Not JSON (or not UTF-8).
    #[error("parse error: {0}")]
    Parse(String),
    /// JSON, but not a valid JSON-RPC 2.0 message.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A batch where the revision has none, or a malformed batch.
    #[error("invalid request: {0}")]
    Batch(String),
}

/// A received message that cannot be processed, with the id of the request it came
/// from when that id could be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}")]
pub struct DecodeError {
    /// What was wrong.
    pub kind: DecodeErrorKind,
    /// The request's id, if it could be read (register A-C4).
    pub id: Option<Id>,
}

impl DecodeError {
    fn new(kind: DecodeErrorKind) -> Self {
        DecodeError { kind, id: None }
    }

    fn invalid(id: Option<Id>, why: impl Into<String>) -> Self {
        DecodeError {
            kind: DecodeErrorKind::InvalidRequest(why.into()),
            id,
        }
    }

    /// The JSON-RPC error code: -32700 for text that is not JSON, -32600 otherwise.
    pub fn code(&self) -> i64 {
        match self.kind {
            DecodeErrorKind::Parse(_) => PARSE_ERROR,
            _ => INVALID_REQUEST,
        }
    }

    /// The error response owed to the sender. When the id could not be read the `id`
    /// member is omitted, in every revision (register A-C4: mcpx follows the 2025-11-25+
    /// schema, which makes the id optional for exactly this case).
    pub fn to_response(&self) -> Frame {
        Frame::error_response(self.id.as_ref(), self.code(), &self.kind.to_string(), None)
    }
}

/// One decoded message or a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// A single message.
    Single(Frame),
    /// A JSON array of messages; each element decoded on its own.
    Batch(Vec<Result<Frame, DecodeError>>),
}

/// Decodes received bytes (one stdio line, one HTTP body).
pub fn decode_bytes(bytes: Vec<u8>, limits: &Limits) -> Result<Decoded, DecodeError> {
    if bytes.len() > limits.max_frame_bytes {
        return Err(DecodeError::new(DecodeErrorKind::TooLarge {
            size: bytes.len(),
            limit: limits.max_frame_bytes,
        }));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        DecodeError::new(DecodeErrorKind::Parse(format!(
            "message is not valid UTF-8 ({e})"
        )))
    })?;
    decode(text, limits)
}

/// Decodes received text.
pub fn decode(text: String, limits: &Limits) -> Result<Decoded, DecodeError> {
    if text.len() > limits.max_frame_bytes {
        return Err(DecodeError::new(DecodeErrorKind::TooLarge {
            size: text.len(),
            limit: limits.max_frame_bytes,
        }));
    }
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        // serde_json reads the array: its depth is bounded first. (A single message's
        // depth is bounded by the walk that reads it.)
        check_depth(text.as_bytes(), limits.max_depth)?;
        let elements: Vec<&RawValue> = serde_json::from_str(&text)
            .map_err(|e| DecodeError::new(DecodeErrorKind::Parse(e.to_string())))?;
        if elements.is_empty() {
            // JSON-RPC 2.0 §6: an empty array is one Invalid Request.
            return Err(DecodeError::new(DecodeErrorKind::Batch(
                "empty batch".to_owned(),
            )));
        }
        if elements.len() > limits.max_batch_len {
            return Err(DecodeError::new(DecodeErrorKind::Batch(format!(
                "batch of {} messages exceeds the limit of {}",
                elements.len(),
                limits.max_batch_len
            ))));
        }
        // Each element is within the size and depth already checked for the whole.
        let frames = elements
            .into_iter()
            .map(|e| parse_checked(e.get().to_owned(), limits.max_depth))
            .collect();
        return Ok(Decoded::Batch(frames));
    }
    parse_checked(text, limits.max_depth).map(Decoded::Single)
}

/// Applies the revision's batch rule (2025-03-26 basic/index §Batching: MUST receive;
/// removed from 2025-06-18; never in 2024-11-05's schema). A batch for any other
/// revision is refused as one Invalid Request; in an admitted batch, `initialize` is
/// refused on its own (2025-03-26 basic/lifecycle: it "MUST NOT be part of a JSON-RPC
/// batch").
pub fn admit(
    decoded: Decoded,
    rev: Revision,
) -> Result<Vec<Result<Frame, DecodeError>>, DecodeError> {
    match decoded {
        Decoded::Single(f) => Ok(vec![Ok(f)]),
        Decoded::Batch(_) if !rev.facts().batches => {
            Err(DecodeError::new(DecodeErrorKind::Batch(format!(
                "JSON-RPC batches are not supported in protocol revision {rev}; only 2025-03-26 has them"
            ))))
        }
        Decoded::Batch(items) => Ok(items
            .into_iter()
            .map(|item| match item {
                Ok(f) if f.method() == Some("initialize") => Err(DecodeError::invalid(
                    f.id().cloned(),
                    "initialize must not be part of a JSON-RPC batch",
                )),
                other => other,
            })
            .collect()),
    }
}

/// Rejects nesting deeper than `max` before any recursive parser sees the text, so
/// no input can exhaust the stack. Counts brackets outside strings; O(n), no allocation.
fn check_depth(bytes: &[u8], max: usize) -> Result<(), DecodeError> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => match crate::scan::skip_string(bytes, i) {
                // Past the string: its brackets are not nesting.
                Some(end) => {
                    i = end;
                    continue;
                }
                // Unterminated: the parser reports it.
                None => return Ok(()),
            },
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Err(DecodeError::new(DecodeErrorKind::TooDeep { limit: max }));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// The members of a JSON object, borrowed from the text, in order.
pub(crate) struct RawObject<'a>(pub(crate) Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for RawObject<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawObject<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(k) = map.next_key::<Cow<'de, str>>()? {
                    let v: &'de RawValue = map.next_value()?;
                    members.push((k, v));
                }
                Ok(RawObject(members))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
                Err(de::Error::invalid_type(de::Unexpected::Seq, &self))
            }
        }
        d.deserialize_map(V)
    }
}

/// Where a borrowed sub-slice sits in its parent text.
fn span_of(parent: &str, child: &str) -> Span {
    let start = child.as_ptr() as usize - parent.as_ptr() as usize;
    start..start + child.len()
}

/// Parses one message (not a batch) into a [`Frame`], validating the JSON-RPC 2.0
/// envelope as MCP restricts it.
pub fn parse_frame(text: String, limits: &Limits) -> Result<Frame, DecodeError> {
    if text.len() > limits.max_frame_bytes {
        return Err(DecodeError::new(DecodeErrorKind::TooLarge {
            size: text.len(),
            limit: limits.max_frame_bytes,
        }));
    }
    parse_checked(text, limits.max_depth)
}

/// [`parse_frame`] of a text already checked against the size limit.
fn parse_checked(text: String, max_depth: usize) -> Result<Frame, DecodeError> {
    let index = index_frame(&text, max_depth)?;
    Ok(Frame {
        text: text.into_boxed_str(),
        ix: Box::new(index),
    })
}

fn index_frame(text: &str, max_depth: usize) -> Result<Index, DecodeError> {
    // The members a message is made of, by name; the rest kept in order as extras.
    #[derive(Default)]
    struct Members<'a> {
        jsonrpc: Option<&'a str>,
        id: Option<&'a str>,
        method: Option<&'a str>,
        params: Option<&'a str>,
        result: Option<&'a str>,
        error: Option<&'a str>,
        extra: Vec<(String, Span)>,
        dup: Option<Cow<'a, str>>,
    }
    impl<'a> Members<'a> {
        fn take(&mut self, text: &str, k: Cow<'a, str>, v: &'a str) {
            let slot = match k.as_ref() {
                "jsonrpc" => &mut self.jsonrpc,
                "id" => &mut self.id,
                "method" => &mut self.method,
                "params" => &mut self.params,
                "result" => &mut self.result,
                "error" => &mut self.error,
                _ => {
                    self.extra.push((k.into_owned(), span_of(text, v)));
                    return;
                }
            };
            if slot.replace(v).is_some() {
                self.dup.get_or_insert(k);
            }
        }
    }

    // One walk over the text checks it, bounds its depth, and sorts each member into
    // its slot as it is met (no list of members collected first). It also notes where
    // `_meta`, `params.name` and `result.resultType` are (see `Hints`).
    // The members looked into, and the members noted in each (as their names are written).
    const LOOKED_INTO: [&str; 2] = ["params", "result"];
    const WATCHED: [(usize, &str); 4] = [
        (0, "\"_meta\""),
        (0, "\"name\""),
        (1, "\"_meta\""),
        (1, "\"resultType\""),
    ];
    let mut m = Members::default();
    let mut seen: [Seen; 4] = Default::default();
    // The members of `params._meta` (or `result._meta`), for the frame's `MetaCache`: a
    // 2026-07-28 request's envelope is read on every call (classification, the
    // gateway's envelope checks), and so is a result's `_meta` (the `serverInfo`
    // stamp); finding them here saves walking `_meta` again. Names as `valid_members`
    // gives them: by position unless escaped, else decoded (`None` when one cannot be:
    // then the cache is left to fill itself, as before).
    let mut meta_members: Option<Vec<(Spelled, Span)>> = Some(Vec::new());
    let mut meta_objects = 0usize;
    // Whether a name with escapes was met among `params`' (`result`'s) members.
    let mut escaped_names = [false; 2];
    let walked = crate::scan::walk_bounded(
        text,
        max_depth,
        |outer| LOOKED_INTO.iter().position(|o| *o == outer),
        |k, span| {
            if let Some(v) = text.get(span) {
                m.take(text, k, v);
            }
        },
        |which, name, escaped, value| {
            if let Some(e) = escaped_names.get_mut(which) {
                *e |= escaped;
            }
            let name = text.get(name).unwrap_or_default();
            if name == "\"_meta\"" && text.as_bytes().get(value.start) == Some(&b'{') {
                meta_objects += 1;
            }
            for (seen, (outer, wanted)) in seen.iter_mut().zip(WATCHED) {
                if outer == which {
                    seen.note(name, escaped, wanted, value.clone());
                }
            }
        },
        crate::scan::Deeper {
            quoted: "\"_meta\"",
            each: &mut |name, escaped, value| {
                let Some(found) = meta_members.as_mut() else {
                    return;
                };
                match Spelled::of_name(text, name, escaped) {
                    Some(k) => found.push((k, value)),
                    None => meta_members = None,
                }
            },
        },
    );
    if walked == Err(crate::scan::Unwalkable::TooDeep) {
        return Err(DecodeError::new(DecodeErrorKind::TooDeep {
            limit: max_depth,
        }));
    }
    if walked.is_err() {
        // Not one valid JSON object: serde_json's reading words the error (and tells a
        // syntax error from a message that is valid JSON but not an object). The walk
        // and serde_json agree on what is valid (tests/it/scan_props.rs), so this is the
        // path of bad input only.
        let obj: RawObject<'_> = serde_json::from_str(text).map_err(|e| {
            if e.is_syntax() || e.is_eof() || e.is_io() {
                DecodeError::new(DecodeErrorKind::Parse(e.to_string()))
            } else {
                DecodeError::invalid(None, "a JSON-RPC message must be a JSON object or an array")
            }
        })?;
        m = Members::default();
        for (k, v) in obj.0 {
            m.take(text, k, v.get());
        }
        // The walk also reads the names of `params` and `result`, and of their
        // `_meta`s, where a `RawValue` only skips them: a name serde_json cannot decode
        // (a lone surrogate escape) fails the walk, as it fails every serde_json reader
        // of those names. serde_json words it, at its place in the frame; the envelope
        // was read, so the error goes to the request's id.
        for part in [m.params, m.result].into_iter().flatten() {
            if let Err((e, within)) = readable_names(part) {
                let id = m.id.and_then(|raw| parse_id(raw).ok().flatten());
                return Err(DecodeError {
                    kind: DecodeErrorKind::Parse(located(text, within, &e)),
                    id,
                });
            }
        }
    }
    let Members {
        jsonrpc,
        id: id_raw,
        method: method_raw,
        params,
        result,
        error: error_raw,
        extra,
        dup,
    } = m;

    // Read the id first, so that every later complaint can be answered to it.
    let id = match id_raw {
        None => None,
        Some(raw) => match parse_id(raw) {
            Ok(id) => id.map(|id| (id, span_of(text, raw))),
            Err(why) => return Err(DecodeError::invalid(None, why.to_string())),
        },
    };
    let reply_id = id.as_ref().map(|(id, _)| id.clone());
    if let Some(k) = dup {
        return Err(DecodeError::invalid(
            reply_id,
            format!("duplicate member {k:?}"),
        ));
    }
    match jsonrpc {
        Some("\"2.0\"") => {}
        Some(other) => {
            return Err(DecodeError::invalid(
                reply_id,
                format!("\"jsonrpc\" must be \"2.0\", got {other}"),
            ));
        }
        None => {
            return Err(DecodeError::invalid(
                reply_id,
                "missing \"jsonrpc\": \"2.0\"",
            ));
        }
    }
    let method = match method_raw {
        None => None,
        Some(raw) => Some(Spelled::of_string(text, span_of(text, raw)).ok_or_else(|| {
            DecodeError::invalid(reply_id.clone(), "\"method\" must be a string")
        })?),
    };
    if let Some(p) = params {
        let first = p.as_bytes().first();
        if !matches!(first, Some(b'{') | Some(b'[')) {
            return Err(DecodeError::invalid(
                reply_id,
                "\"params\" must be an object or an array",
            ));
        }
    }

    let kind = match (
        &method,
        id_raw.is_some(),
        result.is_some(),
        error_raw.is_some(),
    ) {
        (Some(_), _, false, false) if id_raw.is_some() && id.is_none() => {
            // MCP basic/index §Requests: "the ID MUST NOT be null".
            return Err(DecodeError::invalid(None, "a request id must not be null"));
        }
        (Some(_), true, false, false) => Kind::Request,
        (Some(_), false, false, false) => Kind::Notification,
        (None, _, true, false) if id.is_some() => Kind::Result,
        (None, _, false, true) => Kind::Error,
        (None, _, true, false) => {
            return Err(DecodeError::invalid(
                None,
                "a result response must have an id",
            ));
        }
        (None, _, true, true) => {
            return Err(DecodeError::invalid(
                reply_id,
                "a response must not have both \"result\" and \"error\"",
            ));
        }
        (Some(_), _, _, _) => {
            return Err(DecodeError::invalid(
                reply_id,
                "a message must not have both \"method\" and \"result\"/\"error\"",
            ));
        }
        (None, _, false, false) => {
            return Err(DecodeError::invalid(
                reply_id,
                "a message needs \"method\", \"result\" or \"error\"",
            ));
        }
    };

    let error = match error_raw {
        None => None,
        Some(raw) => Some((parse_error_object(raw, &reply_id)?, span_of(text, raw))),
    };

    let params = params.map(|p| span_of(text, p));
    let result = result.map(|r| span_of(text, r));
    let [params_meta, params_name, result_meta, result_type] = seen;
    let hint = |seen: Seen, outer: &Span| {
        if walked.is_ok() {
            seen.hint(Some(outer))
        } else {
            Hint::Unknown
        }
    };
    // A message has `params` or `result`; one with both (a request is refused for it,
    // a response with stray params is not) gets no hints: its readers walk.
    // Every member name of an object the walk looked into was seen (a message with two
    // `params` is refused above).
    let plain = |which: usize, outer: &Span| {
        walked.is_ok()
            && text.as_bytes().get(outer.start) == Some(&b'{')
            && !escaped_names.get(which).copied().unwrap_or(true)
    };
    let hints = match (&params, &result) {
        (Some(p), None) => crate::jsonrpc::Hints {
            of: HintsOf::Params,
            meta: hint(params_meta, p),
            key: hint(params_name, p),
            plain_keys: plain(0, p),
        },
        (None, Some(r)) => crate::jsonrpc::Hints {
            of: HintsOf::Result,
            meta: hint(result_meta, r),
            key: hint(result_type, r),
            plain_keys: plain(1, r),
        },
        // No params: no `params._meta` either.
        (None, None) => crate::jsonrpc::Hints {
            of: HintsOf::Params,
            meta: Hint::Absent,
            key: Hint::Absent,
            plain_keys: false,
        },
        (Some(_), Some(_)) => crate::jsonrpc::Hints::default(),
    };
    // The members found are the one `_meta` the hint names (one object walked into, in
    // `params` or in `result`, whichever the hints are of); otherwise the cache fills
    // itself on first use (a request's) or is not used (a result's).
    let meta = match (hints.meta, meta_members) {
        (Hint::At(..), Some(found)) if meta_objects == 1 && hints.of != HintsOf::Neither => {
            crate::jsonrpc::MetaCache(std::sync::OnceLock::from(Some(found)))
        }
        _ => crate::jsonrpc::MetaCache::default(),
    };
    Ok(Index {
        kind,
        id,
        method,
        params,
        result,
        error,
        extra,
        meta,
        hints,
    })
}

/// What the decoder's walk saw of one member inside `params` or `result` (see
/// `jsonrpc::Hints`).
#[derive(Default)]
struct Seen {
    /// The first member of the wanted name: its value's span.
    at: Option<Span>,
    /// A name with escapes was met (it may spell the wanted one), or the wanted name
    /// was met twice: its readers walk, and decide as they would without the hint.
    unsure: bool,
}

impl Seen {
    /// `quoted_name` as written, and whether it has escapes.
    fn note(&mut self, quoted_name: &str, escaped: bool, wanted: &str, value: Span) {
        if escaped {
            self.unsure = true;
        } else if quoted_name == wanted {
            if self.at.is_some() {
                self.unsure = true;
            }
            self.at = self.at.take().or(Some(value));
        }
    }

    /// The hint for the member inside `outer` (the span of `params` or `result` that
    /// the frame keeps). Only a member inside that span counts: if the name appeared
    /// twice at the top (a frame the decoder refuses anyway), another one's members
    /// may have been seen.
    fn hint(self, outer: Option<&Span>) -> Hint {
        match (self.at, outer) {
            _ if self.unsure => Hint::Unknown,
            (Some(at), Some(o)) if o.start <= at.start && at.end <= o.end => Hint::at(at),
            (Some(_), _) => Hint::Unknown,
            (None, _) => Hint::Absent,
        }
    }
}

/// Reads the member names of `value` (valid JSON text), if it is an object, and of its
/// `_meta`, if that is one, as serde_json reads names: the names mcpx decodes in a
/// request's `params` or a response's `result` (to find `name`, `_meta`,
/// `resultType`, and `_meta`'s keys). A `RawValue` skips strings without decoding
/// them, so a lone surrogate escape (`"\udd04"`), which serde_json refuses in every
/// string it decodes, passes its check but not this one: the decoder refuses such a
/// name (its walk reads names as this does), and so do [`Params::parse`] and
/// [`Json::parse`], so that what the readers of those names find never depends on
/// whether a walk could decode them.
///
/// [`Params::parse`]: crate::params::Params::parse
/// [`Json::parse`]: crate::jsonrpc::Json::parse
///
/// The error is serde_json's, with the text its line and column count in (`value`, or
/// its `_meta`'s).
pub(crate) fn readable_names(value: &str) -> Result<(), (serde_json::Error, &str)> {
    fn names(obj: &str, meta_too: bool) -> Result<(), (serde_json::Error, &str)> {
        if !obj.starts_with('{') {
            return Ok(());
        }
        let members: RawObject<'_> = serde_json::from_str(obj).map_err(|e| (e, obj))?;
        if meta_too {
            for (k, v) in members.0 {
                if k == "_meta" {
                    names(v.get(), false)?;
                }
            }
        }
        Ok(())
    }
    names(value.trim_start(), true)
}

/// serde_json's error `e` on `part` (a slice of `text`), placed in `text`: the line and
/// column it names counted from the start of `text` instead of `part`'s.
fn located(text: &str, part: &str, e: &serde_json::Error) -> String {
    let shown = e.to_string();
    let what = shown
        .rsplit_once(" at line ")
        .map_or(shown.as_str(), |(what, _)| what);
    // serde_json counts lines from 1 and bytes in a line from the line's start.
    let line_start: usize = part
        .split_inclusive('\n')
        .take(e.line().saturating_sub(1))
        .map(str::len)
        .sum();
    let at = (span_of(text, part).start + line_start + e.column()).min(text.len());
    let before = text.as_bytes().get(..at).unwrap_or_default();
    let line = 1 + before.iter().filter(|&&c| c == b'\n').count();
    let column = at
        - before
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |n| n + 1);
    format!("{what} at line {line} column {column}")
}

/// An `id` member that is not a JSON-RPC id.
#[derive(Debug, thiserror::Error)]
enum IdError {
    /// A string that does not decode.
    #[error("invalid id: {0}")]
    String(#[source] serde_json::Error),
    /// Neither a string nor an integer (its raw JSON).
    #[error("an id must be a string or an integer, got {0}")]
    Kind(String),
}

/// `Ok(None)` for a JSON null (legal only on error responses).
fn parse_id(raw: &str) -> Result<Option<Id>, IdError> {
    match raw.as_bytes().first() {
        Some(b'"') => serde_json::from_str::<String>(raw)
            .map(|s| Some(Id::String(s)))
            .map_err(IdError::String),
        Some(b'n') if raw == "null" => Ok(None),
        Some(b'-' | b'0'..=b'9') => raw
            .parse::<i64>()
            .map(|n| Some(Id::Number(n)))
            .map_err(|_| IdError::Kind(raw.to_owned())),
        _ => Err(IdError::Kind(raw.to_owned())),
    }
}

fn parse_error_object(raw: &str, id: &Option<Id>) -> Result<ErrorObject, DecodeError> {
    let obj: RawObject<'_> = serde_json::from_str(raw)
        .map_err(|_| DecodeError::invalid(id.clone(), "\"error\" must be an object"))?;
    let mut code = None;
    let mut message = None;
    let mut data = None;
    for (k, v) in obj.0 {
        match k.as_ref() {
            "code" => code = v.get().parse::<i64>().ok(),
            "message" => message = serde_json::from_str::<String>(v.get()).ok(),
            "data" => data = Some(v.get().to_owned()),
            _ => {}
        }
    }
    match (code, message) {
        (Some(code), Some(message)) => Ok(ErrorObject {
            code,
            message,
            data,
        }),
        _ => Err(DecodeError::invalid(
            id.clone(),
            "\"error\" needs an integer \"code\" and a string \"message\"",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-at-a-time depth check `check_depth` must agree with.
    fn naive_depth_ok(bytes: &[u8], max: usize) -> bool {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        for &b in bytes {
            if in_string {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_string = false;
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > max {
                        return false;
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        true
    }

    #[test]
    fn fast_depth_check_agrees_with_the_naive_one() {
        let pieces = [
            "[", "{", "]", "}", "\"", "\\", "x", "[[[", "\"[[[\"", "\\\"", "abcdefgh", "é",
        ];
        let mut seed = 0x9e37_79b9_u64;
        for _ in 0..20_000 {
            let mut text = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut s = seed;
            for _ in 0..(s % 24) {
                text.push_str(pieces[(s % pieces.len() as u64) as usize]);
                s = s.rotate_right(5).wrapping_mul(0x2545_f491_4f6c_dd1d);
            }
            for max in [0, 1, 2, 3] {
                assert_eq!(
                    check_depth(text.as_bytes(), max).is_ok(),
                    naive_depth_ok(text.as_bytes(), max),
                    "{text:?} at {max}"
                );
            }
        }
    }

    fn one(s: &str) -> Result<Frame, DecodeError> {
        match decode(s.to_owned(), &Limits::default())? {
            Decoded::Single(f) => Ok(f),
            Decoded::Batch(_) => panic!("batch"),
        }
    }

    #[test]
    fn classifies_kinds() {
        assert_eq!(
            one(r#"{"jsonrpc":"2.0","id":1,"method":"a"}"#)
                .unwrap()
                .kind(),
            Kind::Request
        );
        assert_eq!(
            one(r#"{"jsonrpc":"2.0","method":"a"}"#).unwrap().kind(),
            Kind::Notification
        );
        assert_eq!(
            one(r#"{"jsonrpc":"2.0","id":"x","result":{}}"#)
                .unwrap()
                .kind(),
            Kind::Result
        );
        let e =
            one(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}"#).unwrap();
        assert_eq!(e.kind(), Kind::Error);
        assert_eq!(e.id(), None);
        assert_eq!(e.error().unwrap().code, -32700);
    }

    #[test]
    fn bad_envelopes_are_invalid_requests_answered_to_their_id() {
        let e = one(r#"{"jsonrpc":"1.0","id":5,"method":"a"}"#).unwrap_err();
        assert_eq!((e.code(), e.id.clone()), (-32600, Some(Id::Number(5))));
        let e = one(r#"{"jsonrpc":"2.0","id":null,"method":"a"}"#).unwrap_err();
        assert_eq!((e.code(), e.id.clone()), (-32600, None));
        let e = one(r#"{"jsonrpc":"2.0","id":1.5,"method":"a"}"#).unwrap_err();
        assert_eq!(e.code(), -32600);
        let e = one(r#"{"jsonrpc":"2.0","id":1,"method":"a","params":3}"#).unwrap_err();
        assert_eq!(e.code(), -32600);
        let e = one(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"a"}"#).unwrap_err();
        assert_eq!(e.code(), -32600);
        let e = one("42").unwrap_err();
        assert_eq!(e.code(), -32600);
        let e = one("{").unwrap_err();
        assert_eq!(e.code(), -32700);
    }

    #[test]
    fn limits_are_enforced() {
        let small = Limits {
            max_frame_bytes: 10,
            ..Limits::default()
        };
        let e = decode(r#"{"jsonrpc":"2.0","method":"a"}"#.to_owned(), &small).unwrap_err();
        assert!(matches!(
            e.kind,
            DecodeErrorKind::TooLarge { limit: 10, .. }
        ));
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let e = decode(deep, &Limits::default()).unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::TooDeep { limit: 128 }));
        // Brackets inside strings do not count.
        let s = format!(r#"{{"jsonrpc":"2.0","method":"{}"}}"#, "[".repeat(1000));
        assert!(one(&s).is_ok());
        // A single message deeper than the limit, whatever kinds of containers (empty
        // ones too), is refused as the depth check refuses it; one at the limit is read.
        let nests: [(&str, &str, &str); 4] = [
            ("[", "1", "]"),
            ("[", "[]", "]"),
            ("{\"k\":", "{}", "}"),
            ("[{\"k\":", "[]", "}]"),
        ];
        // In `params` and `result` (whose members the decoder's walk notes too) and in a
        // member it does not look into.
        let frames: [fn(&str) -> String; 3] = [
            |v| format!(r#"{{"jsonrpc":"2.0","method":"m","params":{{"p":{v}}}}}"#),
            |v| format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"p":{v}}}}}"#),
            |v| format!(r#"{{"jsonrpc":"2.0","method":"m","x":{{"p":{v}}}}}"#),
        ];
        for (open, inner, close) in nests {
            for (levels, frame) in (1..12).flat_map(|l| frames.iter().map(move |f| (l, f))) {
                let params = format!("{}{inner}{}", open.repeat(levels), close.repeat(levels));
                let text = frame(&params);
                for max in 1..16 {
                    let limits = Limits {
                        max_depth: max,
                        ..Limits::default()
                    };
                    let too_deep = check_depth(text.as_bytes(), max).is_err();
                    let decoded = decode(text.clone(), &limits);
                    match decoded {
                        Err(DecodeError {
                            kind: DecodeErrorKind::TooDeep { limit },
                            ..
                        }) => assert!(too_deep && limit == max, "{text} at {max}"),
                        Ok(_) => assert!(!too_deep, "{text} at {max}"),
                        Err(e) => panic!("{text} at {max}: {e}"),
                    }
                }
            }
        }
    }

    /// Where the decoder saw `params._meta`, `params.name` and `result.resultType`
    /// answers as a walk of the frame would: none when the value holding it is no
    /// object, a walk when a name has escapes or is given twice, and after `with_id`.
    #[test]
    fn the_walks_hints_answer_as_a_walk_would() {
        use crate::jsonrpc::first_member;
        let texts = [
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"_meta":{"k":"v"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"k":1},"_meta":{"k":2}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"\u005fmeta":{"k":3}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":"\"_meta\"","y":{"_meta":{"k":4}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[{"_meta":{"k":5}}]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{"content":[],"resultType":"complete"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"result":{"resultType":"task","resultType":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"result\u0054ype":"input_required"}}"#,
            r#"{"jsonrpc":"2.0","id":4,"result":{"r":{"resultType":"nested"}}}"#,
            r#"{"jsonrpc":"2.0","id":5,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":6,"result":[1]}"#,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"m"}}"#,
        ];
        for text in texts {
            let frame = one(text).unwrap();
            let walked_type = frame.result().and_then(|r| first_member(r, "resultType"));
            let walked_meta = frame
                .params()
                .and_then(|p| first_member(p, "_meta"))
                .and_then(|m| first_member(m, "k"));
            for f in [frame.clone(), frame.with_id(&Id::Number(12345))] {
                assert_eq!(f.result_type(), walked_type, "{text}");
                assert_eq!(f.params_meta("k"), walked_meta, "{text}");
            }
        }
        // Known where the text spells them plainly; a walk where a name has escapes.
        let ix = |t: &str| one(t).unwrap().ix;
        assert_eq!(ix(texts[0]).hints.params_meta(), Hint::At(61, 70));
        assert_eq!(ix(texts[2]).hints.params_meta(), Hint::Unknown);
        assert_eq!(ix(texts[6]).hints.params_meta(), Hint::Absent);
        assert_eq!(ix(texts[9]).hints.result_type(), Hint::Unknown);
        assert_eq!(ix(texts[10]).hints.result_type(), Hint::Absent);
        // Given twice: readers walk, and find the first (or that there are two).
        assert_eq!(ix(texts[1]).hints.params_meta(), Hint::Unknown);
        assert_eq!(ix(texts[8]).hints.result_type(), Hint::Unknown);
        let named = r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"t","_meta":{}}}"#;
        assert_eq!(ix(named).hints.params_name(), Hint::At(54, 57));
        assert_eq!(ix(texts[0]).hints.params_name(), Hint::Absent);
        let twice = r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"t","name":"u"}}"#;
        assert_eq!(ix(twice).hints.params_name(), Hint::Unknown);
    }
}
