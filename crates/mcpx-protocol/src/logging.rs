//! Log levels (`LoggingLevel`, the RFC 5424 severities of every revision's
//! server/utilities/logging).

/// RFC 5424 severities, as MCP's `LoggingLevel`, least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// `debug`
    Debug,
    /// `info`
    Info,
    /// `notice`
    Notice,
    /// `warning`
    Warning,
    /// `error`
    Error,
    /// `critical`
    Critical,
    /// `alert`
    Alert,
    /// `emergency`
    Emergency,
}

impl Level {
    /// The wire names, least to most severe.
    pub const NAMES: [&'static str; 8] = [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];
    /// Every level, least to most severe.
    pub const ALL: [Level; 8] = [
        Level::Debug,
        Level::Info,
        Level::Notice,
        Level::Warning,
        Level::Error,
        Level::Critical,
        Level::Alert,
        Level::Emergency,
    ];

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Level> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| Self::ALL[i])
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}
