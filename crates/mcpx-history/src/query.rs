//! What a reader asks of the history: which calls ([`Filter`]), grouped how ([`By`]),
//! and the answers' shapes ([`Group`], [`Minute`]).

use serde::{Deserialize, Serialize};

/// Which calls: every field narrows; the default is every call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Filter {
    /// Calls that started at or after this (ms since the Unix epoch).
    pub since_ms: Option<i64>,
    /// Calls that started before this.
    pub until_ms: Option<i64>,
    /// Calls to this upstream.
    pub upstream: Option<String>,
    /// Calls whose tool, prompt or URI matches this glob (`*`, `?`, `[…]`, as
    /// SQLite's `GLOB`: case-sensitive).
    pub tool: Option<String>,
    /// Only calls that did not end with a result.
    pub errors: bool,
    /// Calls of the host whose `clientInfo.name` is this.
    pub host: Option<String>,
    /// Calls numbered after this (a reader following the history).
    pub after_id: Option<i64>,
    /// At most this many: the latest ones.
    pub limit: Option<usize>,
}

impl Filter {
    /// The SQL condition (`WHERE …`, or nothing) and its parameters.
    pub(crate) fn clause(&self) -> (String, Vec<rusqlite::types::Value>) {
        use rusqlite::types::Value as V;
        let mut conds: Vec<&str> = Vec::new();
        let mut args: Vec<V> = Vec::new();
        if let Some(s) = self.since_ms {
            conds.push("ts_ms >= ?");
            args.push(V::Integer(s));
        }
        if let Some(u) = self.until_ms {
            conds.push("ts_ms < ?");
            args.push(V::Integer(u));
        }
        if let Some(u) = &self.upstream {
            conds.push("upstream = ?");
            args.push(V::Text(u.clone()));
        }
        if let Some(t) = &self.tool {
            conds.push("target GLOB ?");
            args.push(V::Text(t.clone()));
        }
        if self.errors {
            conds.push("outcome <> 'result'");
        }
        if let Some(h) = &self.host {
            conds.push("client_name = ?");
            args.push(V::Text(h.clone()));
        }
        if let Some(a) = self.after_id {
            conds.push("id > ?");
            args.push(V::Integer(a));
        }
        if conds.is_empty() {
            (String::new(), args)
        } else {
            (format!("WHERE {}", conds.join(" AND ")), args)
        }
    }
}

/// How `stats` groups calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    /// By tool, prompt or URI (with its upstream).
    Tool,
    /// By upstream.
    Upstream,
    /// By host (`clientInfo.name`).
    Host,
    /// By outcome and error code: what went wrong, how often.
    Error,
}

impl By {
    /// Every grouping.
    pub const ALL: [By; 4] = [By::Tool, By::Upstream, By::Host, By::Error];

    /// Its name on the command line and in the API.
    pub const fn as_str(self) -> &'static str {
        match self {
            By::Tool => "tool",
            By::Upstream => "upstream",
            By::Host => "host",
            By::Error => "error",
        }
    }

    /// The grouping named `s`.
    pub fn parse(s: &str) -> Option<By> {
        By::ALL.into_iter().find(|b| b.as_str() == s)
    }

    /// The SQL expression of the group's key.
    pub(crate) const fn key(self) -> &'static str {
        match self {
            By::Tool => "coalesce(upstream, '') || char(31) || coalesce(target, method)",
            By::Upstream => "coalesce(upstream, '')",
            By::Host => "coalesce(client_name, '')",
            By::Error => "outcome || char(31) || coalesce(error_code, '')",
        }
    }
}

/// One group of calls and how they went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Group {
    /// What the group is: the tool (`upstream` beside it), the upstream, the host, or
    /// the outcome (`errorCode` beside it). Empty where the calls had none (an
    /// unrouted call's upstream, a host that gave no name).
    pub key: String,
    /// With `By::Tool`, the tool's upstream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// With `By::Error`, the JSON-RPC code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<i64>,
    /// Calls.
    pub calls: u64,
    /// Calls that did not end with a result.
    pub errors: u64,
    /// `errors / calls`.
    pub error_rate: f64,
    /// Median duration, ms.
    pub p50_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// All the calls' time together, ms.
    pub total_ms: f64,
}

/// The calls that started in one minute, by outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Minute {
    /// The minute's start (ms since the Unix epoch).
    pub start_ms: i64,
    /// Calls, by outcome name; outcomes with none are left out.
    pub outcomes: std::collections::BTreeMap<String, u64>,
}

/// The `q`-quantile (0 to 1) of `sorted` (nearest rank), in ms.
pub(crate) fn quantile_ms(sorted_us: &[i64], q: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let n = sorted_us.len();
    // Nearest rank: the smallest value with at least q of the values at or below it.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    #[allow(clippy::cast_precision_loss)]
    let ms = sorted_us[rank - 1] as f64 / 1000.0;
    ms
}
