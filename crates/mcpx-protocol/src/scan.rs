//! The members of a JSON object's text, found without building any value.
//!
//! The gateway forwards raw JSON and only ever reads a few members of it (a call's
//! `name`, `_meta`, a result's `resultType`): [`object`] walks the text once, checks it
//! is one valid JSON object exactly as `serde_json` would accept it, and hands back
//! each member's name and the byte range of its value. Values are skipped, not
//! decoded; a name is borrowed from the text unless it has escapes.
//!
//! It replaced a serde visitor over `RawValue`s that spent ~20 instructions a byte
//! (callgrind, docs/performance.md); this walks a string eight bytes at a time. The
//! property tests in `tests/it/scan_props.rs` hold it to `serde_json`'s verdict and spans
//! on generated and mutated text.
//!
//! Nesting is walked with an explicit stack, not recursion: no input can exhaust the
//! call stack, however deep. The decoder's walk ([`walk_bounded`]) also bounds the
//! depth it accepts, so that checking a received message, finding its members and
//! bounding its nesting are one pass over it.

use std::borrow::Cow;
use std::ops::{ControlFlow, Range};

/// A member: its name (escapes decoded) and the span of its value in the object text.
pub(crate) type Member<'a> = (Cow<'a, str>, Range<usize>);

/// The members of the JSON object `text`, in order, duplicates included; `None` unless
/// `text` is exactly one valid JSON object (whitespace around it allowed), as
/// `serde_json` reads it.
pub(crate) fn object(text: &str) -> Option<Vec<Member<'_>>> {
    let mut members = Vec::new();
    walk(text, |key, span| members.push((key, span)))?;
    Some(members)
}

/// Walks the JSON object `text` as [`object`] does, handing each member to `each` in
/// order instead of collecting them: for a check, no allocation. `None` unless `text`
/// is exactly one valid JSON object (after members were handed over).
pub(crate) fn walk<'a>(
    text: &'a str,
    mut each: impl FnMut(Cow<'a, str>, Range<usize>),
) -> Option<()> {
    visit(text, |k, span| {
        each(k, span);
        ControlFlow::Continue(())
    })
    .map(|_| ())
}

/// [`walk`], where `each` may stop the walk: `Some(Break)` then, and the rest of the
/// text is not looked at (so not checked either).
pub(crate) fn visit<'a>(
    text: &'a str,
    each: impl FnMut(Cow<'a, str>, Range<usize>) -> ControlFlow<()>,
) -> Option<ControlFlow<()>> {
    members::<true>(text, usize::MAX, &mut false, each)
}

/// [`visit`] for text known to be one valid JSON object (a decoded frame's, or a
/// `Json`'s: both are checked once when made). Nothing is checked again: a value is
/// skipped by finding where it ends (its closing quote, or its closing bracket at the
/// same depth, strings stepped over whole), a few instructions a byte where [`visit`]
/// checks every token. On text that is not valid JSON the members handed over are
/// unspecified, and the walk still ends without panicking.
pub(crate) fn visit_valid<'a>(
    text: &'a str,
    each: impl FnMut(Cow<'a, str>, Range<usize>) -> ControlFlow<()>,
) -> Option<ControlFlow<()>> {
    members::<false>(text, usize::MAX, &mut false, each)
}

/// Why [`walk_bounded`] found no object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unwalkable {
    /// Not exactly one valid JSON object.
    Invalid,
    /// Nested deeper than the bound (the object itself is level 1), found before any
    /// invalid text.
    TooDeep,
}

/// [`walk`], with nesting bounded to `max_depth` levels (the object itself is level 1,
/// a member's array or object level 2, and so on): the decoder's one pass over a
/// received message, which checks it, finds its members and bounds its depth at once.
///
/// It also hands over the members of some members: for each top-level member whose
/// name `nested` maps to `Some(which)` and whose value is an object,
/// `each_nested(which, key, escaped, value)` for every member of that value, with `key`
/// the span of its name as written (quotes included, escapes not decoded) and
/// `escaped` whether that name has escapes. One level further, `deeper` names a member
/// of those (by its name as written) whose object's members go to `deeper.each` the
/// same way (the decoder's `params._meta` and `result._meta`). That changes nothing in
/// what is accepted: such values are checked as any other, with the same bound.
pub(crate) fn walk_bounded<'a>(
    text: &'a str,
    max_depth: usize,
    nested: impl Fn(&str) -> Option<usize>,
    mut each: impl FnMut(Cow<'a, str>, Range<usize>),
    mut each_nested: impl FnMut(usize, Range<usize>, bool, Range<usize>),
    deeper: Deeper<'_>,
) -> Result<(), Unwalkable> {
    if max_depth == 0 {
        return Err(Unwalkable::TooDeep);
    }
    let room = max_depth - 1;
    let b = text.as_bytes();
    let mut deep = false;
    let Deeper {
        quoted,
        each: each_deeper,
    } = deeper;
    let walked = members_with::<true>(
        text,
        &mut deep,
        |key, start, deep| match nested(key) {
            Some(which) if b.get(start) == Some(&b'{') => {
                // Opening the value is one level, as `value` counts it.
                if room == 0 {
                    *deep = true;
                    return None;
                }
                let inner = Some((quoted.as_bytes(), &mut *each_deeper));
                nested_object(b, start, room - 1, deep, inner, |k, escaped, v| {
                    each_nested(which, k, escaped, v)
                })
            }
            _ => value(b, start, room, deep),
        },
        |k, span| {
            each(k, span);
            ControlFlow::Continue(())
        },
    );
    match walked {
        Some(_) => Ok(()),
        None if deep => Err(Unwalkable::TooDeep),
        None => Err(Unwalkable::Invalid),
    }
}

/// Where a walk hands the members of an object it looks into: the span of a member's
/// name as written, whether that name has escapes, and the span of its value.
pub(crate) type EachMember<'d> = dyn FnMut(Range<usize>, bool, Range<usize>) + 'd;

/// The member of the looked-into members whose own members [`walk_bounded`] hands
/// over: its name as written (quotes included), and where its members go (name span,
/// whether the name has escapes, value span).
pub(crate) struct Deeper<'f> {
    pub(crate) quoted: &'static str,
    pub(crate) each: &'f mut EachMember<'f>,
}

/// The object at `i` (its `{`), checked as [`value`] checks an object, its members'
/// values with `room` levels: the index after it. Each member is handed over as the
/// span of its quoted name, whether that name has escapes, and the span of its value;
/// with `inner`, the member of that name (as written) whose value is an object has its
/// own members handed to `inner`'s function the same way, before it is.
///
/// Its member names are read (a reader of `params` decodes them to find `name` and
/// `_meta`), so, unlike a value's strings, a name with escapes must decode as
/// `serde_json` decodes a string it reads: no lone surrogate (`"\udd04"`), which it
/// refuses in any string it reads. With `inner`, a member spelled `inner`'s name with
/// escapes is looked into too, its names checked the same way (but not handed over:
/// a name with escapes makes the decoder's hints unsure anyway).
fn nested_object<'d>(
    b: &[u8],
    i: usize,
    room: usize,
    deep: &mut bool,
    mut inner: Option<(&[u8], &mut EachMember<'d>)>,
    mut each: impl FnMut(Range<usize>, bool, Range<usize>),
) -> Option<usize> {
    let mut i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    loop {
        let (end, escaped) = string_at::<true>(b, i)?;
        let name = i..end;
        let decoded = if escaped {
            Some(decoded_name(b, name.clone())?)
        } else {
            None
        };
        i = ws(b, name.end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let start = ws(b, i + 1);
        let object = b.get(start) == Some(&b'{');
        i = match &mut inner {
            Some((quoted, each_inner)) if object && b.get(name.clone()) == Some(*quoted) => {
                // Opening the value is one level, as `value` counts it.
                if room == 0 {
                    *deep = true;
                    return None;
                }
                nested_object(b, start, room - 1, deep, None, &mut **each_inner)?
            }
            Some((quoted, _))
                if object
                    && decoded.as_deref().map(str::as_bytes)
                        == quoted.get(1..quoted.len().saturating_sub(1)) =>
            {
                if room == 0 {
                    *deep = true;
                    return None;
                }
                // The same function type as above: no new instance of this generic
                // function per level.
                let skip: &mut EachMember<'_> = &mut |_, _, _| {};
                nested_object(b, start, room - 1, deep, None, skip)?
            }
            _ => value(b, start, room, deep)?,
        };
        each(name, escaped, start..i);
        i = ws(b, i);
        match b.get(i)? {
            b',' => i = ws(b, i + 1),
            b'}' => return Some(i + 1),
            _ => return None,
        }
    }
}

/// The member walk of [`visit`] (`CHECK`: every token checked, and nothing after the
/// object) and of [`visit_valid`] (values skipped by their ends only).
///
/// `room` bounds the nesting of members' values (levels below the object's own), when
/// checking; beyond it the walk fails and sets `deep`.
fn members<'a, const CHECK: bool>(
    text: &'a str,
    room: usize,
    deep: &mut bool,
    each: impl FnMut(Cow<'a, str>, Range<usize>) -> ControlFlow<()>,
) -> Option<ControlFlow<()>> {
    let b = text.as_bytes();
    members_with::<CHECK>(
        text,
        deep,
        |_, start, deep| {
            if CHECK {
                value(b, start, room, deep)
            } else {
                skip_value(b, start)
            }
        },
        each,
    )
}

/// [`members`], each member's value walked by `value_at(name, start, deep)`, which
/// returns the index after it.
fn members_with<'a, const CHECK: bool>(
    text: &'a str,
    deep: &mut bool,
    mut value_at: impl FnMut(&str, usize, &mut bool) -> Option<usize>,
    mut each: impl FnMut(Cow<'a, str>, Range<usize>) -> ControlFlow<()>,
) -> Option<ControlFlow<()>> {
    let b = text.as_bytes();
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            let key_start = i;
            let escaped;
            (i, escaped) = string_at::<CHECK>(b, i)?;
            let key = name(text, key_start..i, escaped)?;
            i = ws(b, i);
            if b.get(i) != Some(&b':') {
                return None;
            }
            let start = ws(b, i + 1);
            i = value_at(&key, start, deep)?;
            if each(key, start..i).is_break() {
                return Some(ControlFlow::Break(()));
            }
            i = ws(b, i);
            match b.get(i) {
                Some(b',') => i = ws(b, i + 1),
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    (!CHECK || ws(b, i) == b.len()).then_some(ControlFlow::Continue(()))
}

/// The end of the string whose opening quote is at `i`: its closing quote found by
/// stepping over escapes, nothing checked (the trusting walk, and the decoder's depth
/// check, which only needs where strings end). `None` when it is not closed.
pub(crate) fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    string_at::<false>(b, i).map(|(end, _)| end)
}

/// The end of the (valid) value starting at `i`: brackets counted, strings stepped
/// over, a scalar read up to the byte that ends it.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = i;
            loop {
                match *b.get(i)? {
                    b'"' => {
                        i = skip_string(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let mut i = i;
            while let Some(&c) = b.get(i) {
                if matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\t' | b'\r') {
                    break;
                }
                i += 1;
            }
            Some(i)
        }
    }
}

/// A member name from its quoted text: borrowed when it has no escapes (`escaped`, as
/// the scan that found its end saw), else decoded by `serde_json` (which also refuses
/// what it refuses, such as a lone surrogate).
fn name(text: &str, quoted: Range<usize>, escaped: bool) -> Option<Cow<'_, str>> {
    let quoted = text.get(quoted)?;
    if escaped {
        serde_json::from_str::<String>(quoted).ok().map(Cow::Owned)
    } else {
        let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
        Some(Cow::Borrowed(inner))
    }
}

/// The member name at `quoted` (a string with escapes, its quotes included), decoded
/// as `serde_json` decodes it; `None` where it refuses it (a lone surrogate escape).
fn decoded_name(b: &[u8], quoted: Range<usize>) -> Option<String> {
    let quoted = std::str::from_utf8(b.get(quoted)?).ok()?;
    serde_json::from_str::<String>(quoted).ok()
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\t' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// Skips the value starting at `i` (no leading whitespace); the index after it. More
/// than `room` arrays and objects open at once fails the walk, and sets `deep`.
fn value(b: &[u8], mut i: usize, room: usize, deep: &mut bool) -> Option<usize> {
    let mut stack = Stack::default();
    loop {
        // A value starts at `i`.
        match *b.get(i)? {
            // Opening a container `room` levels in, empty or not, is one level too many.
            b'{' | b'[' if stack.len >= room => {
                *deep = true;
                return None;
            }
            b'{' => {
                i = ws(b, i + 1);
                if b.get(i) == Some(&b'}') {
                    i += 1;
                } else {
                    stack.push(OBJECT);
                    i = key(b, i)?;
                    continue;
                }
            }
            b'[' => {
                i = ws(b, i + 1);
                if b.get(i) == Some(&b']') {
                    i += 1;
                } else {
                    stack.push(ARRAY);
                    continue;
                }
            }
            b'"' => i = string(b, i)?,
            b't' => i = literal(b, i, b"true")?,
            b'f' => i = literal(b, i, b"false")?,
            b'n' => i = literal(b, i, b"null")?,
            b'-' | b'0'..=b'9' => i = number(b, i)?,
            _ => return None,
        }
        // A value ended at `i`: close what it ends, or move to the next value.
        loop {
            let Some(in_object) = stack.last() else {
                return Some(i);
            };
            i = ws(b, i);
            match (*b.get(i)?, in_object) {
                (b',', true) => {
                    i = key(b, ws(b, i + 1))?;
                    break;
                }
                (b',', false) => {
                    i = ws(b, i + 1);
                    break;
                }
                (b'}', true) | (b']', false) => {
                    i += 1;
                    stack.pop();
                }
                _ => return None,
            }
        }
    }
}

const OBJECT: bool = true;
const ARRAY: bool = false;

/// The containers a value is inside (`OBJECT` or `ARRAY`), innermost last: a bit each
/// for the first 64 levels, which is every real message, so skipping a value allocates
/// nothing; deeper levels spill to a vector.
#[derive(Default)]
struct Stack {
    bits: u64,
    len: usize,
    deeper: Vec<bool>,
}

impl Stack {
    fn push(&mut self, object: bool) {
        if self.len < 64 {
            self.bits = (self.bits & !(1 << self.len)) | (u64::from(object) << self.len);
        } else {
            self.deeper.push(object);
        }
        self.len += 1;
    }

    fn last(&self) -> Option<bool> {
        match self.len {
            0 => None,
            n @ 1..=64 => Some(self.bits & (1 << (n - 1)) != 0),
            _ => self.deeper.last().copied(),
        }
    }

    fn pop(&mut self) {
        if self.len > 64 {
            self.deeper.pop();
        }
        self.len = self.len.saturating_sub(1);
    }
}

/// Skips `"name" :` and the whitespace after it; the index of the member's value.
fn key(b: &[u8], i: usize) -> Option<usize> {
    let i = ws(b, string(b, i)?);
    (b.get(i) == Some(&b':')).then(|| ws(b, i + 1))
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    (b.get(i..i + word.len()) == Some(word)).then_some(i + word.len())
}

/// JSON number grammar (RFC 8259 §6), as `serde_json` checks it: no leading zeros, a
/// digit after `.`, and after `e` (and its sign).
fn number(b: &[u8], mut i: usize) -> Option<usize> {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(b, i + 1),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        let after = digits(b, i + 1);
        if after == i + 1 {
            return None;
        }
        i = after;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let after = digits(b, i);
        if after == i {
            return None;
        }
        i = after;
    }
    // `01` and `1x` are caught by what must follow a value.
    Some(i)
}

fn digits(b: &[u8], mut i: usize) -> usize {
    while let Some(b'0'..=b'9') = b.get(i) {
        i += 1;
    }
    i
}

/// Skips the string starting with the quote at `i`; the index after its closing quote.
/// Escapes must be valid (`\u` with four hex digits; which code points they name is
/// not checked, as `serde_json` does not when it skips a value); raw control
/// characters are refused.
fn string(b: &[u8], i: usize) -> Option<usize> {
    string_at::<true>(b, i).map(|(end, _)| end)
}

/// The string starting with the quote at `i`: the index after its closing quote, and
/// whether it has escapes (so that a name without any is borrowed without looking at
/// it again). With `CHECK` as [`string`] (escapes and control characters checked),
/// without as [`skip_string`] (an escape only stepped over).
fn string_at<const CHECK: bool>(b: &[u8], i: usize) -> Option<(usize, bool)> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut i = i + 1;
    let mut escaped = false;
    loop {
        i = next_special::<CHECK>(b, i);
        match *b.get(i)? {
            b'"' => return Some((i + 1, escaped)),
            b'\\' if !CHECK => {
                // Its next byte is never the string's end.
                escaped = true;
                i += 2;
            }
            b'\\' => {
                escaped = true;
                match *b.get(i + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                    b'u' => {
                        let hex = b.get(i + 2..i + 6)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        i += 6;
                    }
                    _ => return None,
                }
            }
            // A raw control character (U+0000..U+001F).
            _ => return None,
        }
    }
}

/// The index of the first `"` or `\` at or after `i` (or `b.len()`), and with
/// `CONTROL` also of the first control character (U+0000..U+001F), eight bytes at a
/// time: string bodies are most of a frame's bytes. [`skip_string`] uses it without
/// `CONTROL` (it only needs where a string ends).
fn next_special<const CONTROL: bool>(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = b.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let q = w ^ (ONES * u64::from(b'"'));
        let s = w ^ (ONES * u64::from(b'\\'));
        // A byte of q (or s) is zero where w has a quote (or backslash), and
        // `x - 0x01.. & !x` flags zero bytes (`- 0x20..`: bytes below 0x20). The lowest
        // flag is exact: false positives only sit above a true one.
        let mut found = (q.wrapping_sub(ONES) & !q) | (s.wrapping_sub(ONES) & !s);
        if CONTROL {
            found |= w.wrapping_sub(ONES * 0x20) & !w;
        }
        found &= HIGH;
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || (CONTROL && c < 0x20) {
            break;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Option<Vec<(String, &str)>> {
        object(text).map(|m| {
            m.into_iter()
                .map(|(k, s)| (k.into_owned(), &text[s]))
                .collect()
        })
    }

    #[test]
    fn members_and_their_spans() {
        assert_eq!(
            names(r#" { "a" : 1 , "b":{"c":[1,{"d":"}"}]}, "k\u0065y":"v\"", "a":null } "#),
            Some(vec![
                ("a".to_owned(), "1"),
                ("b".to_owned(), r#"{"c":[1,{"d":"}"}]}"#),
                ("key".to_owned(), r#""v\"""#),
                ("a".to_owned(), "null"),
            ])
        );
        assert_eq!(names("{}"), Some(vec![]));
        assert_eq!(names("{ }"), Some(vec![]));
        assert_eq!(
            names(r#"{"n":-0.5e+10,"m":[],"o":{},"t":true,"f":false}"#).map(|m| m.len()),
            Some(5)
        );
    }

    #[test]
    fn what_serde_json_refuses_is_refused() {
        for bad in [
            "",
            "[]",
            "1",
            "{",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{,}",
            "{\"a\":1}x",
            "{\"a\":01}",
            "{\"a\":1.}",
            "{\"a\":1e}",
            "{\"a\":-}",
            "{\"a\":+1}",
            "{\"a\":.5}",
            "{\"a\":tru}",
            "{\"a\":nul}",
            "{\"a\":[1,]}",
            "{\"a\":[,1]}",
            "{\"a\":[1 2]}",
            "{\"a\":{\"b\"}}",
            "{\"a\":\"\\x\"}",
            "{\"a\":\"\\u12\"}",
            "{\"a\":\"\u{1}\"}",
            "{\"a\":\"x}",
            "{a:1}",
            "{\"a\":1 \"b\":2}",
            "{\"\\ud800\":1}",
        ] {
            assert_eq!(object(bad).map(|_| ()), None, "{bad:?}");
            assert!(
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(bad).is_err(),
                "serde_json accepts {bad:?}"
            );
        }
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(object(&deep).map(|m| m.len()), Some(1));
        // Objects and arrays alternating across the 64-level boundary of the stack's
        // bits: each closes with its own bracket.
        for depth in [63, 64, 65, 66, 130] {
            let open: String = (0..depth)
                .map(|d| if d % 3 == 0 { "{\"k\":" } else { "[" })
                .collect();
            let close: String = (0..depth)
                .rev()
                .map(|d| if d % 3 == 0 { "}" } else { "]" })
                .collect();
            let text = format!("{{\"a\":{open}1{close}}}");
            assert_eq!(object(&text).map(|m| m.len()), Some(1), "{depth}");
            let wrong = format!("{{\"a\":{open}1{}}}", close.replace('}', "]"));
            assert_eq!(object(&wrong).map(|m| m.len()), None, "{depth}");
        }
    }

    #[test]
    fn the_eight_byte_search_finds_the_first_special_byte() {
        for (text, at) in [
            ("abcdefghij\"", 10),
            ("abcdefgh\\", 8),
            ("ab\u{1f}", 2),
            ("abcdefgh", 8),
            ("\u{e9}\u{e9}\u{e9}\u{e9}\"", 8),
            ("abc\"defghijk\"", 3),
        ] {
            assert_eq!(next_special::<true>(text.as_bytes(), 0), at, "{text:?}");
            let plain = text.bytes().position(|c| c == b'"' || c == b'\\');
            assert_eq!(
                next_special::<false>(text.as_bytes(), 0),
                plain.unwrap_or(text.len()),
                "{text:?}"
            );
        }
    }
}
