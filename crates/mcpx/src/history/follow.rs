//! `mcpx log --follow`: the calls written after those printed, as they are written,
//! until Ctrl-C.
//!
//! Rows always come from the database: the ones numbered after the last one printed
//! (`Filter::after_id`). What changes is when it is read:
//!
//! * When the daemon serving the configuration answers, its `GET /v1/events` says
//!   when it wrote calls (an event of kind `history`, `{"lastId": N}`), and the
//!   database is read then. It is read every 5 s as well, for the calls other
//!   processes write (a host's own `mcpx serve`). When the daemon's stream ends, the
//!   database is read every 500 ms from then on.
//! * Otherwise, the database is read every 500 ms. One that is not there yet is
//!   opened when it appears.

use std::time::Duration;

use http_body_util::BodyExt as _;
use mcpx_history::{Filter, Row, Store};

use super::{Database, Error};
use crate::daemon::client;

/// How often the database is read without a daemon.
const POLL: Duration = Duration::from_millis(500);

/// How often the database is read while the daemon's events say when it changed.
const BACKSTOP: Duration = Duration::from_secs(5);

/// How long connecting to the daemon's events may take.
const CONNECT: Duration = Duration::from_secs(10);

/// How many times in a row a database that appeared may fail to open before that is
/// an error: its writer may be making its schema just then.
const OPEN_TRIES: u32 = 10;

/// Most bytes of one event of the daemon's stream.
const MAX_EVENT: usize = 1024 * 1024;

/// Prints (with `print`) the calls `filter` picks numbered after `cursor`, as they
/// are written, until Ctrl-C. `store` is the database opened, or `None` when it is
/// not there yet.
pub fn follow(
    db: &Database,
    store: Option<Store>,
    filter: &Filter,
    cursor: i64,
    print: &mut dyn FnMut(&[Row]),
) -> Result<(), Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let mut reader = Reader {
        db: db.clone(),
        store,
        filter: Filter {
            limit: None,
            ..filter.clone()
        },
        cursor,
        failed_opens: 0,
    };
    rt.block_on(async {
        tokio::select! {
            r = watch(&mut reader, print) => r,
            Ok(()) = tokio::signal::ctrl_c() => Ok(()),
        }
    })
}

/// The database, read from the last row printed on.
struct Reader {
    db: Database,
    store: Option<Store>,
    filter: Filter,
    cursor: i64,
    failed_opens: u32,
}

impl Reader {
    /// The rows written since the last read.
    fn read(&mut self) -> Result<Vec<Row>, Error> {
        if self.store.is_none() {
            match self.db.open() {
                Ok(store) => self.store = store,
                Err(e) if self.failed_opens < OPEN_TRIES => {
                    self.failed_opens += 1;
                    tracing::debug!(error = %e, "the call history's database is not ready");
                }
                Err(e) => return Err(e),
            }
        }
        let Some(store) = &self.store else {
            return Ok(Vec::new());
        };
        let last = store.last_id()?;
        if last < self.cursor {
            // Calls were purged, the newest among them, so numbers are given again
            // from `last`: the ones at or below it are not printed twice.
            self.cursor = last;
            return Ok(Vec::new());
        }
        if last == self.cursor {
            return Ok(Vec::new());
        }
        let rows = store.calls(&Filter {
            after_id: Some(self.cursor),
            ..self.filter.clone()
        })?;
        // Calls the filter leaves out are passed over too.
        self.cursor = last.max(rows.last().map_or(0, |r| r.id));
        Ok(rows)
    }

    /// Reads and prints what is new.
    fn emit(&mut self, print: &mut dyn FnMut(&[Row])) -> Result<(), Error> {
        let rows = self.read()?;
        if !rows.is_empty() {
            print(&rows);
        }
        Ok(())
    }
}

async fn watch(reader: &mut Reader, print: &mut dyn FnMut(&[Row])) -> Result<(), Error> {
    if let Some(client) = reader.db.daemon_key.as_deref().and_then(client::find) {
        match client.events(CONNECT).await {
            Ok(body) => on_events(body, reader, print).await?,
            Err(e) => tracing::debug!(error = %e, "the daemon's events are not available"),
        }
    }
    let mut every = tokio::time::interval(POLL);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        reader.emit(print)?;
    }
}

/// Reads the database when the daemon's stream says it wrote calls (and every
/// [`BACKSTOP`]), until the stream ends.
async fn on_events(
    mut body: hyper::body::Incoming,
    reader: &mut Reader,
    print: &mut dyn FnMut(&[Row]),
) -> Result<(), Error> {
    // Subscribed: what was written before is read now.
    reader.emit(print)?;
    let mut sse = Sse::default();
    let mut every = tokio::time::interval(BACKSTOP);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            frame = body.frame() => {
                let Some(Ok(frame)) = frame else {
                    tracing::debug!("the daemon's event stream ended");
                    return Ok(());
                };
                let Some(data) = frame.data_ref() else { continue };
                let Some(kinds) = sse.push(data) else {
                    tracing::debug!("the daemon sent an event over the size limit");
                    return Ok(());
                };
                // `lost`: events were missed, a `history` one among them perhaps.
                if kinds.iter().any(|k| k == "history" || k == "lost") {
                    reader.emit(print)?;
                }
            }
            _ = every.tick() => reader.emit(print)?,
        }
    }
}

/// A reader of server-sent events: only each event's kind (`event:`) is kept.
#[derive(Debug, Default)]
struct Sse {
    buf: Vec<u8>,
}

impl Sse {
    /// Takes in `data`; returns the kinds of the events it completed, or `None` when
    /// one event would be over [`MAX_EVENT`].
    fn push(&mut self, data: &[u8]) -> Option<Vec<String>> {
        self.buf.extend_from_slice(data);
        let mut kinds = Vec::new();
        while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = self.buf.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&block);
            // Comments (`: keep-alive`) have no fields; an event without `event:`
            // is a `message`.
            let mut kind = None;
            let mut fields = false;
            for line in text.lines() {
                if line.starts_with(':') || line.is_empty() {
                    continue;
                }
                fields = true;
                if let Some(k) = line.strip_prefix("event:") {
                    kind = Some(k.trim().to_owned());
                }
            }
            if fields {
                kinds.push(kind.unwrap_or_else(|| "message".to_owned()));
            }
        }
        (self.buf.len() <= MAX_EVENT).then_some(kinds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_told_apart_across_chunks() {
        let mut sse = Sse::default();
        assert_eq!(
            sse.push(b": mcpx events\n\nid: 1\nevent: his"),
            Some(vec![])
        );
        assert_eq!(
            sse.push(b"tory\ndata: {\"lastId\": 3}\n\nid: 2\nevent: call\ndata: {}\n\n"),
            Some(vec!["history".to_owned(), "call".to_owned()])
        );
        assert_eq!(sse.push(b"data: x\n\n"), Some(vec!["message".to_owned()]));
        assert_eq!(sse.push(&vec![b'x'; MAX_EVENT + 1]), None);
    }
}
