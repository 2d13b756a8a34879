//! `GET /v1/history`, `/v1/stats` and `/v1/history/minutes`: the call history, read.
//!
//! Each request opens its own read connection ([`Store::open`] on the recorder's
//! database) on a blocking thread. SQLite in WAL mode lets readers run beside each
//! other and beside the writer, so the status page's three requests and a follower's
//! do not queue behind one shared connection, and no connection outlives an error.
//! Opening costs well under a millisecond against the query's time. At most
//! [`READERS`] run at once: a flood of requests waits for a turn (a 503 after
//! [`TURN_WITHIN`]), and holds no more threads or connections than that.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use mcpx_history::{By, Filter, Group, Minute, Row, Store};
use serde::Serialize;
use utoipa::ToSchema;

use crate::daemon::Daemon;
use crate::daemon::problem::{Problem, json_response};

/// Queries of the history at once.
pub const READERS: usize = 4;

/// How long a request waits for its turn at the history before a 503.
pub const TURN_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Calls `GET /v1/history` answers when no `limit` is given.
pub const DEFAULT_LIMIT: usize = 50;

/// The most calls `GET /v1/history` answers.
pub const MAX_LIMIT: usize = 1000;

/// The most groups `GET /v1/stats` answers (the most called first).
pub const MAX_GROUPS: usize = 1000;

/// How far back `GET /v1/history/minutes` looks when no `since` is given.
pub const DEFAULT_MINUTES: i64 = 60;

/// The longest span `GET /v1/history/minutes` answers, in minutes (7 days).
pub const MAX_MINUTES: i64 = 7 * 24 * 60;

/// The longest text a filter takes (`upstream`, `tool`, `host`), in bytes.
pub const MAX_TEXT: usize = 1024;

/// A query parameter that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// Not a time.
    #[error(
        "`{name}`: {text:?} is not a duration back from now (`15m`, `2h`, `1d`), an RFC 3339 time (`2026-01-02T03:04:05Z`) or milliseconds since the epoch"
    )]
    Time {
        /// The parameter.
        name: &'static str,
        /// What it said.
        text: String,
    },
    /// Not a number in range.
    #[error("`{name}`: {text:?} is not a whole number from {min} to {max}")]
    Number {
        /// The parameter.
        name: &'static str,
        /// What it said.
        text: String,
        /// The least it may be.
        min: i64,
        /// The most it may be.
        max: i64,
    },
    /// Neither true nor false.
    #[error("`{name}`: {text:?} is not true or false")]
    Bool {
        /// The parameter.
        name: &'static str,
        /// What it said.
        text: String,
    },
    /// A grouping not known.
    #[error("`by`: {0:?} is not one of tool, upstream, host, error")]
    By(String),
    /// A text past [`MAX_TEXT`].
    #[error("`{name}` is over {MAX_TEXT} bytes")]
    TooLong {
        /// The parameter.
        name: &'static str,
    },
    /// A span of minutes past [`MAX_MINUTES`].
    #[error("`since` to `until` spans {minutes} minutes; at most {MAX_MINUTES} are answered")]
    Span {
        /// The span asked for.
        minutes: i64,
    },
}

impl From<ParamError> for Problem {
    fn from(e: ParamError) -> Problem {
        Problem::bad_request(e.to_string())
    }
}

/// `text` as a time, in ms since the Unix epoch: a duration back from `now_ms`
/// (`15m`, `2h`, `1d`, as humantime reads them), an RFC 3339 time (UTC), or a number
/// of milliseconds since the epoch.
pub fn parse_time(name: &'static str, text: &str, now_ms: i64) -> Result<i64, ParamError> {
    let t = text.trim();
    let bad = || ParamError::Time {
        name,
        text: text.to_owned(),
    };
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse::<i64>().map_err(|_| bad());
    }
    if let Ok(d) = humantime::parse_duration(t) {
        let back = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        return Ok(now_ms.saturating_sub(back));
    }
    let at = humantime::parse_rfc3339_weak(t).map_err(|_| bad())?;
    let ms = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| bad())?
        .as_millis();
    i64::try_from(ms).map_err(|_| bad())
}

/// `text` as a whole number from `min` to `max`.
fn parse_number(name: &'static str, text: &str, min: i64, max: i64) -> Result<i64, ParamError> {
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| ParamError::Number {
            name,
            text: text.to_owned(),
            min,
            max,
        })
}

/// The query parameters the three operations share, read from a query string.
#[derive(Debug)]
struct Query<'a> {
    query: Option<&'a str>,
    now_ms: i64,
}

impl Query<'_> {
    fn get(&self, name: &str) -> Option<String> {
        mcpx_transport::json_api::query_param(self.query, name)
    }

    /// A text filter: absent when empty.
    fn text(&self, name: &'static str) -> Result<Option<String>, ParamError> {
        match self.get(name).filter(|v| !v.is_empty()) {
            Some(v) if v.len() > MAX_TEXT => Err(ParamError::TooLong { name }),
            v => Ok(v),
        }
    }

    fn time(&self, name: &'static str) -> Result<Option<i64>, ParamError> {
        self.get(name)
            .filter(|v| !v.trim().is_empty())
            .map(|v| parse_time(name, &v, self.now_ms))
            .transpose()
    }

    fn number(&self, name: &'static str, min: i64, max: i64) -> Result<Option<i64>, ParamError> {
        self.get(name)
            .map(|v| parse_number(name, &v, min, max))
            .transpose()
    }

    /// `errors`: `true`, `false`, `1`, `0`, or bare (`?errors`) for true.
    fn errors(&self) -> Result<bool, ParamError> {
        match self.get("errors").as_deref().map(str::trim) {
            None | Some("false" | "0") => Ok(false),
            Some("" | "true" | "1") => Ok(true),
            Some(other) => Err(ParamError::Bool {
                name: "errors",
                text: other.to_owned(),
            }),
        }
    }

    /// The filter: `since`, `until`, `upstream`, `tool`, `errors`, `host`.
    fn filter(&self) -> Result<Filter, ParamError> {
        Ok(Filter {
            since_ms: self.time("since")?,
            until_ms: self.time("until")?,
            upstream: self.text("upstream")?,
            tool: self.text("tool")?,
            errors: self.errors()?,
            host: self.text("host")?,
            after_id: None,
            limit: None,
        })
    }
}

/// What `GET /v1/history` answers.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Calls {
    /// The calls, oldest first: the latest `limit` of those the filters pick.
    pub calls: Vec<Row>,
    /// The number of the last call written when the query ran (0 when there is
    /// none): `after=lastId` asks for the calls written since.
    pub last_id: i64,
}

/// What `GET /v1/stats` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Stats {
    /// The grouping: `tool`, `upstream`, `host` or `error`.
    pub by: String,
    /// The groups, the most called first (at most 1000).
    pub groups: Vec<Group>,
}

/// What `GET /v1/history/minutes` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Minutes {
    /// The minutes that had calls, oldest first.
    pub minutes: Vec<Minute>,
}

/// Runs `query` on a read connection to the history, on a blocking thread, one of
/// [`READERS`] at most; the 404 problem when the history is off.
async fn read<T: Send + 'static>(
    d: &Daemon,
    query: impl FnOnce(&Store) -> Result<T, mcpx_history::HistoryError> + Send + 'static,
) -> Result<T, Problem> {
    let Some(history) = d.app.history() else {
        let detail = if d.app.gateway().config().history.enabled {
            "the call history is off: its database could not be opened (the daemon's log says why)"
        } else {
            "the call history is off (mcpx.history.enabled is false)"
        };
        return Err(Problem::new(StatusCode::NOT_FOUND, "history-off", detail));
    };
    let path = history.settings().path.clone();
    let busy = || {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "history-busy",
            format!(
                "the call history is busy: {READERS} queries ran for over {} s",
                TURN_WITHIN.as_secs()
            ),
        )
    };
    let _turn = tokio::time::timeout(TURN_WITHIN, d.history_readers.acquire())
        .await
        .map_err(|_| busy())?
        .map_err(|_| busy())?;
    let answer = tokio::task::spawn_blocking(move || Store::open(&path).and_then(|s| query(&s)))
        .await
        .map_err(|e| {
            Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "history-error",
                format!("the history's query did not finish: {e}"),
            )
        })?;
    answer.map_err(|e| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "history-error",
            e.to_string(),
        )
    })
}

/// The last `n` calls of the history, oldest first (the status page's first draw).
pub async fn recent(d: &Daemon, n: usize) -> Result<Vec<Row>, Problem> {
    read(d, move |store| {
        store.calls(&Filter {
            limit: Some(n.min(MAX_LIMIT)),
            ..Filter::default()
        })
    })
    .await
}

/// The query string's parameters, read at `now`.
fn query_of(req: &Request) -> Query<'_> {
    Query {
        query: req.uri().query(),
        now_ms: mcpx_history::now_ms(),
    }
}

/// `GET /v1/history`.
pub fn history(d: Arc<Daemon>, req: Request) -> BoxFuture<'static, Response> {
    let asked = (|| {
        let q = query_of(&req);
        let mut filter = q.filter()?;
        let max = i64::try_from(MAX_LIMIT).unwrap_or(i64::MAX);
        filter.limit = Some(
            q.number("limit", 1, max)?
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(DEFAULT_LIMIT),
        );
        filter.after_id = q.number("after", 0, i64::MAX)?;
        Ok::<_, ParamError>(filter)
    })();
    Box::pin(async move {
        let filter = match asked {
            Ok(f) => f,
            Err(e) => return Problem::from(e).into_response(),
        };
        let answer = read(&d, move |store| {
            // The last number first: every call returned is at or before it, so a
            // follower asking `after=lastId` next misses none and sees none twice.
            let last_id = store.last_id()?;
            let mut calls = store.calls(&filter)?;
            calls.retain(|r| r.id <= last_id);
            Ok(Calls { calls, last_id })
        })
        .await;
        match answer {
            Ok(calls) => json_response(StatusCode::OK, &calls),
            Err(p) => p.into_response(),
        }
    })
}

/// `GET /v1/stats`.
pub fn stats(d: Arc<Daemon>, req: Request) -> BoxFuture<'static, Response> {
    let asked = (|| {
        let q = query_of(&req);
        let filter = q.filter()?;
        let by = match q.get("by").filter(|b| !b.is_empty()) {
            None => By::Tool,
            Some(b) => By::parse(&b).ok_or(ParamError::By(b))?,
        };
        Ok::<_, ParamError>((filter, by))
    })();
    Box::pin(async move {
        let (filter, by) = match asked {
            Ok(f) => f,
            Err(e) => return Problem::from(e).into_response(),
        };
        let answer = read(&d, move |store| {
            let mut groups = store.stats(&filter, by)?;
            groups.truncate(MAX_GROUPS);
            Ok(Stats {
                by: by.as_str().to_owned(),
                groups,
            })
        })
        .await;
        match answer {
            Ok(stats) => json_response(StatusCode::OK, &stats),
            Err(p) => p.into_response(),
        }
    })
}

/// `GET /v1/history/minutes`.
pub fn minutes(d: Arc<Daemon>, req: Request) -> BoxFuture<'static, Response> {
    let asked = (|| {
        let q = query_of(&req);
        let mut filter = q.filter()?;
        let until = filter.until_ms.unwrap_or(q.now_ms);
        let since = *filter
            .since_ms
            .get_or_insert(until.saturating_sub(DEFAULT_MINUTES * 60_000));
        let minutes = until.saturating_sub(since) / 60_000;
        if minutes > MAX_MINUTES {
            return Err(ParamError::Span { minutes });
        }
        Ok(filter)
    })();
    Box::pin(async move {
        let filter = match asked {
            Ok(f) => f,
            Err(e) => return Problem::from(e).into_response(),
        };
        match read(&d, move |store| store.minutes(&filter)).await {
            Ok(minutes) => json_response(StatusCode::OK, &Minutes { minutes }),
            Err(p) => p.into_response(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn times_read_as_durations_rfc_3339_or_epoch_milliseconds() {
        assert_eq!(parse_time("since", "15m", NOW), Ok(NOW - 900_000));
        assert_eq!(parse_time("since", "2h", NOW), Ok(NOW - 7_200_000));
        assert_eq!(parse_time("since", "1d", NOW), Ok(NOW - 86_400_000));
        assert_eq!(
            parse_time("since", "1700000000000", NOW),
            Ok(1_700_000_000_000)
        );
        assert_eq!(
            parse_time("until", "2026-01-02T03:04:05Z", NOW),
            Ok(1_767_323_045_000)
        );
        assert_eq!(
            parse_time("until", "2026-01-02T03:04:05.250Z", NOW),
            Ok(1_767_323_045_250)
        );
        let e = parse_time("since", "soon", NOW).unwrap_err();
        assert!(e.to_string().starts_with("`since`: \"soon\""), "{e}");
        assert!(parse_time("since", "", NOW).is_err());
        assert!(parse_time("since", "99999999999999999999999", NOW).is_err());
    }

    #[test]
    fn numbers_flags_and_texts_are_bounded() {
        let q = |s: &'static str| Query {
            query: Some(s),
            now_ms: NOW,
        };
        assert_eq!(q("limit=1000").number("limit", 1, 1000), Ok(Some(1000)));
        let e = q("limit=1001").number("limit", 1, 1000).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`limit`: \"1001\" is not a whole number from 1 to 1000"
        );
        assert!(q("limit=0").number("limit", 1, 1000).is_err());
        assert_eq!(q("errors").errors(), Ok(true));
        assert_eq!(q("errors=false").errors(), Ok(false));
        assert!(q("errors=maybe").errors().is_err());
        assert_eq!(q("upstream=").text("upstream"), Ok(None));
        let long = format!("tool={}", "x".repeat(MAX_TEXT + 1));
        let long: &'static str = Box::leak(long.into_boxed_str());
        assert_eq!(
            q(long).text("tool"),
            Err(ParamError::TooLong { name: "tool" })
        );
    }
}
