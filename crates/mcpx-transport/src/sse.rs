//! Reading an event stream (`text/event-stream`), as both SSE clients do (Streamable
//! HTTP's POST and GET streams, the 2024-11-05 HTTP+SSE stream): sse-stream's parser
//! behind mcpx's bound on an event's size.
//!
//! An event's bytes are counted as they arrive, before the parser keeps them: a server
//! that never ends an event cannot make mcpx hold more than the bound
//! (`maxSseEventBytes`). [`events`] runs the same reader over chunks held in memory,
//! for tests and the `sse` fuzz target.

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

/// One event of a stream: its `event`, `data` (lines joined with LF), `id` and `retry`
/// fields, none inherited from an earlier event.
pub use sse_stream::Sse as Event;

/// The events of a stream of body chunks, each bounded to `max_event` bytes (not
/// counting line ends): an event over the bound ends the stream with an error, as
/// does an error of the chunks' stream or of the parser (a recognised field that is
/// not UTF-8). An event the stream ends inside of is dropped.
// Result<_, String>: the words are all a caller uses (in its TransportError).
pub(crate) fn bounded<S>(
    chunks: S,
    max_event: usize,
) -> impl Stream<Item = Result<Event, String>> + Send + Unpin
where
    S: Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
{
    // Bytes since the last blank line (the end of an event). CR, LF and CRLF all end a
    // line (the SSE grammar); two line ends in a row end an event.
    let mut run = 0usize;
    let mut last_was_eol = false;
    let mut prev_cr = false;
    let bytes = chunks.map(move |chunk| {
        let chunk = chunk?;
        for &b in chunk.iter() {
            if b == b'\n' && prev_cr {
                prev_cr = false;
                continue;
            }
            if b == b'\r' || b == b'\n' {
                if last_was_eol {
                    run = 0;
                }
                last_was_eol = true;
                prev_cr = b == b'\r';
            } else {
                last_was_eol = false;
                prev_cr = false;
                run += 1;
                if run > max_event {
                    return Err(std::io::Error::other(format!(
                        "an SSE event exceeds the limit of {max_event} bytes"
                    )));
                }
            }
        }
        Ok(chunk)
    });
    Box::pin(sse_stream::SseByteStream::new(bytes)).map(|r| r.map_err(|e| e.to_string()))
}

/// The events of a body received as `chunks`, read as a response's body is: every
/// event up to the end, or up to the first error, which is then the last item.
// Result<_, String>: the words are all the fuzz target uses.
pub fn events(chunks: Vec<Bytes>, max_event: usize) -> Vec<Result<Event, String>> {
    let mut stream = bounded(
        futures_util::stream::iter(chunks.into_iter().map(Ok)),
        max_event,
    );
    // Chunks in memory: every poll is ready, so no executor is needed.
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut out = Vec::new();
    loop {
        match stream.poll_next_unpin(&mut cx) {
            std::task::Poll::Ready(Some(event)) => out.push(event),
            std::task::Poll::Ready(None) | std::task::Poll::Pending => return out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Result<_, String>: as `events`.
    fn read(chunks: &[&str], max: usize) -> Vec<Result<Event, String>> {
        events(
            chunks
                .iter()
                .map(|c| Bytes::copy_from_slice(c.as_bytes()))
                .collect(),
            max,
        )
    }

    #[test]
    fn events_are_read_across_chunks() {
        let all = read(
            &[
                "id: 1\nda",
                "ta: {\"a\"",
                ":1}\r",
                "\n\r\n: ping\n\nevent: e\ndata:\n\n",
            ],
            1024,
        );
        let all: Vec<Event> = all.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            all,
            [
                Event::default().id("1").data("{\"a\":1}"),
                Event::default().event("e").data(""),
            ]
        );
    }

    #[test]
    fn an_event_over_the_bound_ends_the_stream() {
        let all = read(
            &["data: 1\n\n", "data: 12345", "6789\n\n", "data: 2\n\n"],
            8,
        );
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(all[0].as_ref().ok(), Some(&Event::default().data("1")));
        assert!(all[1].as_ref().is_err_and(|e| e.contains("limit of 8")));
    }
}
