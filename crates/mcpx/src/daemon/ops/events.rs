//! `GET /v1/events`: the daemon's events as server-sent events, resumable.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use crate::daemon::Daemon;
use crate::daemon::api::{self, SSE};
use crate::daemon::events::Event;
use crate::daemon::problem::Problem;

/// How often a quiet stream carries a comment, so that proxies and clients keep it.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

fn sse(e: &Event) -> Bytes {
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {}\n\n",
        e.seq, e.kind, e.data
    ))
}

/// `GET /v1/events[?since=SEQ]` (or `Last-Event-ID: SEQ`).
pub fn events(d: Arc<Daemon>, req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let since = api::query_param(&req, "since").or_else(|| {
            req.headers()
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        });
        let since = match since.map(|s| s.trim().parse::<u64>()) {
            None => None,
            Some(Ok(n)) => Some(n),
            Some(Err(_)) => {
                return Problem::bad_request("`since` must be an event number").into_response();
            }
        };
        let sub = d.events.subscribe(since);
        let mut first: Vec<Bytes> = Vec::new();
        // An SSE comment first: the client knows at once that it is connected.
        first.push(Bytes::from_static(b": mcpx events\n\n"));
        if let Some(kept) = sub.gap {
            first.push(Bytes::from(format!(
                "event: lost\ndata: {}\n\n",
                json!({ "firstKept": kept })
            )));
        }
        first.extend(sub.backlog.iter().map(|e| sse(e)));
        let last = sub.backlog.last().map(|e| e.seq);
        let state = (
            first.into_iter(),
            sub.live,
            last,
            (d.stop.clone(), Some(sub.place)),
        );
        let stream = futures_util::stream::unfold(
            state,
            |(mut first, mut live, mut last, (stop, mut place))| async move {
                if let Some(b) = first.next() {
                    return Some((Ok::<_, Infallible>(b), (first, live, last, (stop, place))));
                }
                let cut = place.as_ref()?.cut.clone();
                loop {
                    let got = tokio::select! {
                        r = live.recv() => r,
                        () = tokio::time::sleep(KEEP_ALIVE) => {
                            return Some((Ok(Bytes::from_static(b": keep-alive\n\n")), (first, live, last, (stop, place))));
                        }
                        () = stop.cancelled() => return None,
                        () = cut.cancelled() => {
                            // Said once; the stream ends at the next poll.
                            place = None;
                            let b = Bytes::from(format!(
                                "event: closed\ndata: {}\n\n",
                                json!({ "reason": "newer listeners took this one's place (--max-event-subscribers)" })
                            ));
                            return Some((Ok(b), (first, live, last, (stop, place))));
                        }
                    };
                    match got {
                        // Already sent from the backlog.
                        Ok(e) if last.is_some_and(|l| e.seq <= l) => continue,
                        Ok(e) => {
                            last = Some(e.seq);
                            let b = sse(&e);
                            return Some((Ok(b), (first, live, last, (stop, place))));
                        }
                        Err(RecvError::Lagged(n)) => {
                            let b = Bytes::from(format!(
                                "event: lost\ndata: {}\n\n",
                                json!({ "missed": n })
                            ));
                            return Some((Ok(b), (first, live, last, (stop, place))));
                        }
                        Err(RecvError::Closed) => return None,
                    }
                }
            },
        );
        let mut r = Response::new(Body::from_stream(stream));
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(SSE));
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        r
    })
}
