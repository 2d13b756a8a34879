//! Metrics: the upstream leg of each call made for a host, the catalog's tool names
//! handed to the registry, and the gauges sampled at each scrape ([`Source`]).
//!
//! Everything here is behind `Gateway::metrics`, an `Option`: with metrics off a
//! call pays one check per leg.

use mcpx_metrics::{End, ErrorType, Metrics, Sample, Source, Timing, UpstreamSample, classify};

use super::*;

/// The outcome of an upstream call (a `tools/call` when `tool_call`), as its
/// `error_type` label says it.
pub(crate) fn upstream_error_type(
    tool_call: bool,
    outcome: &Result<Frame, ClientError>,
) -> ErrorType {
    classify(match outcome {
        Ok(frame) => End::of_response(frame, tool_call),
        Err(ClientError::Remote { error, .. }) => End::Error {
            code: error.code,
            cause: None,
        },
        Err(e) => End::Failed { cause: e.kind() },
    })
}

/// One upstream call being timed (`None` with metrics off).
pub(super) struct UpstreamLeg {
    timing: Timing,
    tool_call: bool,
}

impl UpstreamLeg {
    /// Records the call, which ended with `outcome`.
    pub(super) fn end(self, outcome: &Result<Frame, ClientError>) {
        self.timing
            .end(upstream_error_type(self.tool_call, outcome));
    }
}

impl Gateway {
    /// The registry, when metrics are on.
    pub fn metrics(&self) -> Option<&Arc<Metrics>> {
        self.metrics.as_ref()
    }

    /// Gateway tasks held for hosts (H13), as the metrics' `mcpx_tasks` gauge counts
    /// them.
    pub fn tasks_held(&self) -> usize {
        self.tasks.len()
    }

    /// Starts timing the upstream leg of `call`: `method` sent to `up`.
    pub(super) fn upstream_leg(
        &self,
        call: &Call,
        up: &Upstream,
        method: &str,
    ) -> Option<UpstreamLeg> {
        let m = self.metrics.as_deref()?;
        let tool_call = method == "tools/call";
        let timing = match (&call.tool_series, tool_call) {
            (Some(series), true) => m.upstream_tool_call(series),
            _ => m.upstream_call(method, up.id.as_str()),
        };
        Some(UpstreamLeg { timing, tool_call })
    }

    /// Hands the catalog's tool names, with their upstreams, to the registry: the
    /// only values `gen_ai_tool_name` takes (else `other`).
    pub(super) fn observe_catalog(&self, catalog: &Catalog) {
        if let Some(m) = &self.metrics {
            m.set_tools(catalog.tools().map(|(name, up)| (name, up.as_str())));
        }
    }

    /// Counts `up`'s restarts as its supervisor publishes them.
    pub(super) fn observe_restarts(&self, up: &Upstream, seen: &mut u32, now: u32) {
        if let Some(m) = &self.metrics
            && now > *seen
        {
            m.restarted(up.id.as_str(), u64::from(now - *seen));
        }
        *seen = now;
    }
}

impl Source for Gateway {
    fn sample(&self) -> Sample {
        Sample {
            states: upstream::State::KEYS,
            upstreams: self
                .upstreams()
                .iter()
                .map(|u| UpstreamSample {
                    name: u.id.to_string(),
                    state: u.status().state.key(),
                    in_flight: u.supervisor().in_flight(),
                })
                .collect(),
            parked_calls: self.bridge.parked.lock().map(|p| p.len()).unwrap_or(0),
            tasks: self.tasks.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::State;
    use mcpx_protocol::jsonrpc::ErrorObject;
    use mcpx_transport::TransportError;

    #[test]
    fn every_state_is_a_value_of_the_state_gauge() {
        let at = tokio::time::Instant::now();
        let all = [
            State::Idle,
            State::Starting { attempt: 0 },
            State::Ready,
            State::Backoff {
                attempt: 1,
                retry_at: at,
            },
            State::CrashLoop {
                failures: 4,
                retry_at: at,
            },
            State::NeedsAuthorization { retry_at: at },
            State::Failed,
            State::Stopped,
        ];
        assert_eq!(all.len(), State::KEYS.len());
        for s in all {
            assert!(State::KEYS.contains(&s.key()), "{s:?}");
        }
    }

    #[test]
    fn upstream_outcomes_by_error_type() {
        let up = || "u".to_owned();
        let remote = Err(ClientError::Remote {
            upstream: up(),
            error: ErrorObject {
                code: -32602,
                message: "bad".into(),
                data: None,
            },
        });
        assert_eq!(upstream_error_type(true, &remote), ErrorType::InvalidParams);
        let timeout = Err(ClientError::Timeout {
            upstream: up(),
            method: "tools/call".into(),
            after: Duration::from_millis(5),
        });
        assert_eq!(upstream_error_type(true, &timeout), ErrorType::Timeout);
        let cancelled = Err(ClientError::Cancelled {
            upstream: up(),
            method: "tools/call".into(),
        });
        assert_eq!(upstream_error_type(true, &cancelled), ErrorType::Cancelled);
        let exited = Err(ClientError::Transport {
            upstream: up(),
            source: TransportError::Closed {
                detail: "exit status 1".into(),
            },
        });
        assert_eq!(upstream_error_type(true, &exited), ErrorType::Transport);
    }
}
