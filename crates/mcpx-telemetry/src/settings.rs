//! What the environment asks for: `MCPX_LOG`, `MCPX_LOG_FORMAT` and the standard
//! OpenTelemetry variables, read by a pure function.
//!
//! Traces are on when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set, unless `OTEL_SDK_DISABLED=true` or
//! `OTEL_TRACES_EXPORTER=none`. The exporter itself reads the endpoint (appending
//! `/v1/traces` to the generic one), `OTEL_EXPORTER_OTLP_HEADERS` and
//! `OTEL_EXPORTER_OTLP_TIMEOUT`; the SDK reads `OTEL_TRACES_SAMPLER`,
//! `OTEL_TRACES_SAMPLER_ARG`, `OTEL_BSP_*`, `OTEL_SERVICE_NAME` and
//! `OTEL_RESOURCE_ATTRIBUTES`.

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One line of text an event (the default).
    #[default]
    Text,
    /// One JSON object a line, with the fields of the spans it was logged in.
    Json,
}

/// The OTLP encoding over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `http/protobuf` (the default).
    #[default]
    HttpProtobuf,
    /// `http/json`.
    HttpJson,
}

/// Traces, when on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSettings {
    /// The endpoint named, for messages (the exporter reads it itself).
    pub endpoint: String,
    /// The encoding.
    pub protocol: Protocol,
    /// Neither `OTEL_SERVICE_NAME` nor `service.name` in `OTEL_RESOURCE_ATTRIBUTES`:
    /// the service is `mcpx`.
    pub default_service_name: bool,
}

/// Everything [`crate::install`] needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    /// `MCPX_LOG`: an `EnvFilter` directive (`warn` when unset).
    pub log_filter: Option<String>,
    /// `MCPX_LOG_FORMAT`.
    pub log_format: LogFormat,
    /// `None`: traces off.
    pub traces: Option<TraceSettings>,
}

/// A setting that could not be used (it is left at its default).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// `MCPX_LOG_FORMAT` is neither `text` nor `json`.
    #[error("MCPX_LOG_FORMAT={0:?}: expected `text` or `json`; writing text")]
    LogFormat(String),
    /// A protocol this build does not export with.
    #[error(
        "{var}={value:?}: mcpx exports OTLP over HTTP only (`http/protobuf` or `http/json`); traces are off"
    )]
    Protocol {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// An exporter other than OTLP.
    #[error("OTEL_TRACES_EXPORTER={0:?}: mcpx exports `otlp` (or `none`); traces are off")]
    Exporter(String),
}

impl Settings {
    /// The settings `var` gives (`std::env::var` in use), and what could not be used.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> (Settings, Vec<SettingsError>) {
        let set = |k: &str| {
            var(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut problems = Vec::new();
        let log_format = match set("MCPX_LOG_FORMAT").map(|v| v.to_ascii_lowercase()) {
            None => LogFormat::Text,
            Some(v) if v == "text" => LogFormat::Text,
            Some(v) if v == "json" => LogFormat::Json,
            Some(v) => {
                problems.push(SettingsError::LogFormat(v));
                LogFormat::Text
            }
        };
        let settings = Settings {
            log_filter: set("MCPX_LOG"),
            log_format,
            traces: traces(&set, &mut problems),
        };
        (settings, problems)
    }
}

fn traces(
    set: &impl Fn(&str) -> Option<String>,
    problems: &mut Vec<SettingsError>,
) -> Option<TraceSettings> {
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return None;
    }
    if let Some(e) = set("OTEL_TRACES_EXPORTER") {
        let e = e.to_ascii_lowercase();
        if e == "none" {
            return None;
        }
        if e != "otlp" {
            problems.push(SettingsError::Exporter(e));
            return None;
        }
    }
    let endpoint = [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .into_iter()
    .find_map(set)?;
    let protocol = match [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]
    .into_iter()
    .find_map(|k| set(k).map(|v| (k, v)))
    {
        None => Protocol::HttpProtobuf,
        Some((_, v)) if v == "http/protobuf" => Protocol::HttpProtobuf,
        Some((_, v)) if v == "http/json" => Protocol::HttpJson,
        Some((var, value)) => {
            problems.push(SettingsError::Protocol { var, value });
            return None;
        }
    };
    let named = set("OTEL_SERVICE_NAME").is_some()
        || set("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| {
            a.split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        });
    Some(TraceSettings {
        endpoint,
        protocol,
        default_service_name: !named,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(pairs: &[(&str, &str)]) -> (Settings, Vec<SettingsError>) {
        Settings::from_env(|k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn nothing_set_is_text_logs_and_no_traces() {
        assert_eq!(from(&[]), (Settings::default(), vec![]));
    }

    #[test]
    fn an_endpoint_turns_traces_on() {
        let (s, p) = from(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")]);
        assert!(p.is_empty());
        let t = s.traces.unwrap();
        assert_eq!(t.protocol, Protocol::HttpProtobuf);
        assert!(t.default_service_name);
        let (s, _) = from(&[
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://c:4318/v1/traces",
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_RESOURCE_ATTRIBUTES", "a=b, service.name=gw"),
        ]);
        let t = s.traces.unwrap();
        assert_eq!(t.endpoint, "http://c:4318/v1/traces");
        assert_eq!(t.protocol, Protocol::HttpJson);
        assert!(!t.default_service_name);
    }

    #[test]
    fn disabled_or_unusable_means_no_traces_and_says_why() {
        let on = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        for off in [
            ("OTEL_SDK_DISABLED", "TRUE"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert_eq!(from(&[on, off]), (Settings::default(), vec![]));
        }
        let (s, p) = from(&[on, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert_eq!(s.traces, None);
        assert!(p[0].to_string().contains("OTLP over HTTP only"), "{}", p[0]);
        let (s, p) = from(&[on, ("OTEL_TRACES_EXPORTER", "zipkin")]);
        assert_eq!(s.traces, None);
        assert_eq!(p, vec![SettingsError::Exporter("zipkin".into())]);
    }

    #[test]
    fn log_format_is_text_or_json() {
        assert_eq!(
            from(&[("MCPX_LOG_FORMAT", "JSON")]).0.log_format,
            LogFormat::Json
        );
        let (s, p) = from(&[("MCPX_LOG_FORMAT", "yaml"), ("MCPX_LOG", "info")]);
        assert_eq!(s.log_format, LogFormat::Text);
        assert_eq!(s.log_filter.as_deref(), Some("info"));
        assert_eq!(p, vec![SettingsError::LogFormat("yaml".into())]);
    }
}
