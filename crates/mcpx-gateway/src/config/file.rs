//! The configuration file's shape, as serde reads it, and the text it is read from:
//! JSONC blanked to JSON in place, so error positions still point into the file.

use super::*;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileDoc {
    #[serde(default)]
    pub(super) mcp_servers: BTreeMap<String, FileServer>,
    #[serde(default)]
    pub(super) mcpx: FileGlobal,
}

/// A host's server entry: unknown keys tolerated (no `deny_unknown_fields`).
#[derive(Deserialize)]
pub(super) struct FileServer {
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    pub(super) cwd: Option<PathBuf>,
    pub(super) url: Option<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) disabled: bool,
    #[serde(default)]
    pub(super) mcpx: FileServerMcpx,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FileServerMcpx {
    pub(super) namespace: Option<String>,
    #[serde(default)]
    pub(super) tools: FileToolFilter,
    #[serde(default)]
    pub(super) protocol: ProtocolPreference,
    pub(super) call_timeout_ms: Option<u64>,
    pub(super) connect_timeout_ms: Option<u64>,
    pub(super) probe_timeout_ms: Option<u64>,
    pub(super) proxy: Option<String>,
    pub(super) oauth: Option<FileOauth>,
    #[serde(default)]
    pub(super) restart: FileRestart,
    pub(super) start: Option<String>,
    pub(super) idle_timeout_ms: Option<u64>,
    pub(super) health_check: Option<FileHealthCheck>,
    pub(super) environment: Option<String>,
    pub(super) max_in_flight: Option<usize>,
    pub(super) max_queued: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FileRestart {
    pub(super) on_exit: Option<String>,
    pub(super) max_restarts: Option<u32>,
    pub(super) backoff_ms: Option<u64>,
    pub(super) max_backoff_ms: Option<u64>,
    pub(super) reset_after_ms: Option<u64>,
    pub(super) crash_loop_retry_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FileHealthCheck {
    pub(super) interval_ms: u64,
    pub(super) timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FileOauth {
    pub(super) grant: Option<String>,
    pub(super) token_url: Option<String>,
    pub(super) client_id: Option<String>,
    pub(super) client_secret: Option<String>,
    pub(super) client_secret_env: Option<String>,
    pub(super) private_key_file: Option<PathBuf>,
    pub(super) client_metadata_url: Option<String>,
    pub(super) callback_port: Option<u16>,
    pub(super) scope: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileToolFilter {
    #[serde(default)]
    pub(super) include: Vec<String>,
    #[serde(default)]
    pub(super) exclude: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FileGlobal {
    #[serde(default)]
    pub(super) spec: FileSpec,
    #[serde(default)]
    pub(super) names: FileNames,
    #[serde(default)]
    pub(super) limits: FileLimits,
    #[serde(default)]
    pub(super) history: FileHistory,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FileHistory {
    pub(super) enabled: Option<bool>,
    pub(super) path: Option<PathBuf>,
    pub(super) capture: Option<String>,
    pub(super) redact: Option<Vec<String>>,
    pub(super) max_value_bytes: Option<usize>,
    pub(super) max_age_days: Option<u64>,
    pub(super) max_megabytes: Option<u64>,
    pub(super) queue: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSpec {
    #[serde(default)]
    pub(super) precedence: Vec<String>,
    #[serde(default)]
    pub(super) lenient: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FileNames {
    pub(super) separator: Option<String>,
    pub(super) max_length: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FileLimits {
    pub(super) max_frame_bytes: Option<usize>,
    pub(super) max_call_time_ms: Option<u64>,
    pub(super) page_size: Option<usize>,
    pub(super) ask_timeout_ms: Option<u64>,
    pub(super) ask_gather_ms: Option<u64>,
    pub(super) ask_max_pending: Option<usize>,
    pub(super) max_parked_calls: Option<usize>,
    pub(super) max_tasks: Option<usize>,
    pub(super) task_ttl_ms: Option<u64>,
    pub(super) task_poll_interval_ms: Option<u64>,
    pub(super) startup_wait_ms: Option<u64>,
    pub(super) capability_wait_ms: Option<u64>,
    pub(super) drain_ms: Option<u64>,
    pub(super) list_changed_window_ms: Option<u64>,
    pub(super) reload_debounce_ms: Option<u64>,
    pub(super) max_sessions: Option<usize>,
    pub(super) session_idle_ms: Option<u64>,
    pub(super) max_header_count: Option<usize>,
    pub(super) max_header_bytes: Option<usize>,
}

/// Blanks out `//` and `/* */` comments and trailing commas, keeping every other byte
/// (and every newline) in place, so JSON error positions still point into the file.
pub fn strip_jsonc(text: &str) -> String {
    let mut out = text.as_bytes().to_vec();
    blank_comments(&mut out);
    blank_trailing_commas(&mut out);
    // Whole comments (every byte of their characters) and ASCII commas were replaced
    // by ASCII spaces, so this is still UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// Walks the bytes outside JSON strings; `f(i)` handles byte `i` and returns the index
/// to continue from.
fn outside_strings(b: &[u8], mut f: impl FnMut(usize) -> usize) {
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        if in_str {
            match b[i] {
                b'\\' => i += 1,
                b'"' => in_str = false,
                _ => {}
            }
            i += 1;
        } else if b[i] == b'"' {
            in_str = true;
            i += 1;
        } else {
            i = f(i).max(i + 1);
        }
    }
}

fn blank_comments(out: &mut [u8]) {
    let b = out.to_vec();
    outside_strings(&b, |i| {
        let end = match (b[i], b.get(i + 1)) {
            (b'/', Some(b'/')) => b[i..]
                .iter()
                .position(|c| *c == b'\n')
                .map_or(b.len(), |n| i + n),
            (b'/', Some(b'*')) => b[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(b.len(), |n| i + 2 + n + 2),
            _ => return i + 1,
        };
        for o in &mut out[i..end] {
            if *o != b'\n' {
                *o = b' ';
            }
        }
        end
    });
}

fn blank_trailing_commas(out: &mut [u8]) {
    let b = out.to_vec();
    outside_strings(&b, |i| {
        if b[i] == b',' {
            let next = b[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
            if matches!(next, Some(b'}') | Some(b']')) {
                out[i] = b' ';
            }
        }
        i + 1
    });
}

/// The 1-based line of each server's key in the top-level `mcpServers` object.
///
/// `clean` is the text with comments blanked ([`strip_jsonc`]), so a quoted name in a
/// comment is not taken for a key. Keys are compared decoded, so an escaped name is
/// found too. A name given twice gets the line of its last entry, the one serde keeps.
pub(super) fn server_lines(clean: &str) -> BTreeMap<String, usize> {
    let b = clean.as_bytes();
    let mut lines = BTreeMap::new();
    let mut line = 1;
    let mut depth = 0usize;
    // The last string seen and the line it is on: a key when a `:` follows.
    let mut last: Option<(usize, usize, usize)> = None;
    // Whether the value being entered is the root's `mcpServers`.
    let mut servers_next = false;
    let mut in_servers = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => line += 1,
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                last = Some((start, (i + 1).min(b.len()), line));
            }
            b':' => {
                let key = last.take().and_then(|(s, e, l)| {
                    Some((serde_json::from_str::<String>(clean.get(s..e)?).ok()?, l))
                });
                match key {
                    Some((k, _)) if depth == 1 => servers_next = k == "mcpServers",
                    Some((k, l)) if depth == 2 && in_servers => {
                        lines.insert(k, l);
                    }
                    _ => {}
                }
            }
            b'{' | b'[' => {
                depth += 1;
                in_servers |= servers_next && depth == 2 && b[i] == b'{';
                servers_next = false;
            }
            b'}' | b']' => {
                if depth == 2 {
                    in_servers = false;
                }
                depth = depth.saturating_sub(1);
            }
            b',' => {
                last = None;
                servers_next = false;
            }
            _ => {}
        }
        i += 1;
    }
    lines
}

/// serde_json appends " at line L column C"; the error carries those separately.
pub(super) fn without_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}
