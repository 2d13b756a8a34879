//! Any bytes, cut into any chunks, as an event stream: `mcpx_transport::sse::events`
//! (sse-stream's parser behind mcpx's bound on an event's size, as both SSE clients
//! read a response) answers as a plain reading of the SSE grammar does, line by line
//! over the whole text: the same events, ended by an error exactly where a field is
//! not UTF-8 or an event outgrows the bound; and the same whatever the chunks, but
//! for which events before an oversized one get out (the bound refuses a whole chunk).
//!
//! Input: a byte choosing the bound, a byte seeding where chunks end, then the body.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use mcpx_transport::sse::{Event, events};

fuzz_target!(|data: &[u8]| {
    let [bound, seed, body @ ..] = data else {
        return;
    };
    // Small bounds, so that the bound is hit, and one that never is.
    let max_event = if bound & 0x80 != 0 {
        usize::MAX
    } else {
        usize::from(*bound) + 1
    };
    let reading = Reading::of(body);
    let over = over_bound(body, max_event);
    // The whole body in one chunk, in chunks of 0 to 32 bytes (xorshift from `seed`),
    // and a byte at a time.
    let mut chunks = Vec::new();
    let mut state = u32::from(*seed) | 0x100;
    let mut at = 0;
    while at < body.len() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let end = (at + (state % 33) as usize).min(body.len());
        chunks.push(at..end);
        at = end;
    }
    let bytes: Vec<_> = (0..body.len()).map(|i| i..i + 1).collect();
    for cut in [vec![0..body.len()], chunks, bytes] {
        // Where the chunk holding the first byte over the bound starts: the bound
        // refuses that chunk whole, so the parser sees everything before it.
        let refused = over.and_then(|v| cut.iter().find(|c| c.contains(&v)).map(|c| c.start));
        let got = events(
            cut.iter()
                .map(|c| Bytes::copy_from_slice(&body[c.clone()]))
                .collect(),
            max_event,
        );
        let until = [refused, reading.error].into_iter().flatten().min();
        let expected: Vec<&Event> = reading
            .events
            .iter()
            .filter(|(at, _)| until.is_none_or(|u| *at < u))
            .map(|(_, e)| e)
            .collect();
        let (ok, err): (Vec<_>, Vec<_>) = got.iter().partition(|r| r.is_ok());
        let ok: Vec<&Event> = ok.into_iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(ok, expected, "{body:?} in {cut:?}, bound {max_event}");
        assert_eq!(err.len(), usize::from(until.is_some()), "{got:?}");
        if until.is_some() {
            assert!(got.last().is_some_and(Result::is_err), "{got:?}");
        }
        // The parser never sees a refused chunk, nor what follows it.
        if let Some(r) = refused
            && reading.error.is_none_or(|e| r <= e)
        {
            let why = got.last().and_then(|r| r.as_ref().err());
            assert!(
                why.is_some_and(|w| w.contains("exceeds the limit")),
                "{got:?}"
            );
        }
    }
});

/// The SSE grammar (WHATWG HTML §9.2.5, "Interpreting an event stream") read over the
/// whole text, with sse-stream's documented choices: every block with a field is an
/// event (none inherited; `data: None` without a data line), a recognised field that
/// is not UTF-8 ends the stream, an `id` with NUL is ignored (unchecked), an unfinished
/// last line or event is dropped.
struct Reading {
    /// Each event, with where the blank line that ends it starts.
    events: Vec<(usize, Event)>,
    /// Where the line end of the first line with a field that is not UTF-8 is.
    error: Option<usize>,
}

impl Reading {
    fn of(body: &[u8]) -> Reading {
        let mut events = Vec::new();
        let mut event = Event::default();
        let mut fields = false;
        // A byte order mark at the start of the stream is not part of it.
        let start = if body.starts_with(b"\xEF\xBB\xBF") {
            3
        } else {
            0
        };
        for (line, end) in lines(body, start) {
            let Some(end) = end else { break };
            let text = &body[line.clone()];
            if text.is_empty() {
                if fields {
                    events.push((line.start, std::mem::take(&mut event)));
                    fields = false;
                }
                continue;
            }
            let (name, value) = match text.iter().position(|&b| b == b':') {
                Some(i) => (&text[..i], &text[i + 1..]),
                None => (text, &b""[..]),
            };
            let value = value.strip_prefix(b" ").unwrap_or(value);
            let checked = match name {
                b"data" | b"event" | b"retry" => true,
                b"id" => !value.contains(&0),
                _ => false,
            };
            let Ok(value) = std::str::from_utf8(value) else {
                if checked {
                    return Reading {
                        events,
                        error: Some(end),
                    };
                }
                continue;
            };
            match name {
                b"data" => {
                    event.data = Some(match event.data.take() {
                        None => value.to_owned(),
                        Some(d) => format!("{d}\n{value}"),
                    });
                    fields = true;
                }
                b"event" => {
                    event.event = Some(value.to_owned());
                    fields = true;
                }
                b"id" if checked => {
                    event.id = Some(value.to_owned());
                    fields = true;
                }
                b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                    if let Ok(r) = value.parse() {
                        event.retry = Some(r);
                        fields = true;
                    }
                }
                _ => {}
            }
        }
        Reading {
            events,
            error: None,
        }
    }
}

/// The lines of `body` from `start`: each line's span and where its line end (CR, LF
/// or CRLF) starts; the last one, if the body does not end with a line end, has none.
fn lines(body: &[u8], start: usize) -> Vec<(std::ops::Range<usize>, Option<usize>)> {
    let mut out = Vec::new();
    let mut from = start;
    let mut i = start;
    while i < body.len() {
        match body[i] {
            b'\n' => {
                out.push((from..i, Some(i)));
                i += 1;
                from = i;
            }
            b'\r' => {
                out.push((from..i, Some(i)));
                i += if body.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                from = i;
            }
            _ => i += 1,
        }
    }
    if from < body.len() {
        out.push((from..body.len(), None));
    }
    out
}

/// Where the first byte that takes an event over `max` bytes is (the bytes since the
/// last blank line, line ends not counted, as they arrive), if one does.
fn over_bound(body: &[u8], max: usize) -> Option<usize> {
    let mut run = 0usize;
    for (line, _) in lines(body, 0) {
        if line.is_empty() {
            run = 0;
        } else if run.saturating_add(line.len()) > max {
            return Some(line.start + (max - run));
        } else {
            run += line.len();
        }
    }
    None
}
