//! One host's server entry turned into mcpx's: what it carries, what it cannot, or
//! why the server stays with the host.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::hosts::{Format, Host};

/// What becomes of one of the host's servers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Carry {
    /// It moves to mcpx's file as `entry`; `lost` says what of it mcpx cannot carry.
    Entry { entry: Entry, lost: Vec<String> },
    /// It cannot move without breaking, and stays in the host's file: why.
    Stays(String),
    /// It launches mcpx itself (an earlier `--write`).
    Ours,
}

/// A server entry as mcpx's file holds it, its keys in the order they are written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry(pub Vec<(&'static str, Value)>);

impl Entry {
    pub(crate) fn value(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        )
    }
}

/// The server's settings as mcpx can hold them, gathered from the host's keys.
#[derive(Default)]
struct Spec {
    kind: Option<String>,
    command: Option<String>,
    args: Vec<String>,
    env: Map<String, Value>,
    cwd: Option<String>,
    url: Option<String>,
    headers: Map<String, Value>,
    disabled: bool,
    include: Vec<String>,
    exclude: Vec<String>,
    call_timeout_ms: Option<u64>,
    connect_timeout_ms: Option<u64>,
}

/// The host's entry and the keys read from it so far.
struct Reader<'a> {
    obj: &'a Map<String, Value>,
    used: BTreeSet<&'a str>,
    lost: Vec<String>,
}

// Each reader's error is the reason the entry stays where it is, which the import
// report prints beside it: a message is all its callers use.
impl<'a> Reader<'a> {
    fn get(&mut self, key: &'a str) -> Option<&'a Value> {
        let v = self.obj.get(key)?;
        self.used.insert(key);
        (!v.is_null()).then_some(v)
    }

    fn str(&mut self, key: &'a str) -> Result<Option<String>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{key}` is not a string")),
        }
    }

    fn strings(&mut self, key: &'a str) -> Result<Vec<String>, String> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(v) => strings(v).ok_or(format!("`{key}` is not a list of strings")),
        }
    }

    /// An object of strings (numbers and booleans are taken as their text).
    fn map(&mut self, key: &'a str) -> Result<Map<String, Value>, String> {
        match self.get(key) {
            None => Ok(Map::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), Value::String(s.clone()))),
                    Value::Number(_) | Value::Bool(_) => {
                        Ok((k.clone(), Value::String(v.to_string())))
                    }
                    _ => Err(format!("`{key}.{k}` is not a string")),
                })
                .collect(),
            Some(_) => Err(format!("`{key}` is not an object")),
        }
    }

    fn bool(&mut self, key: &'a str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(format!("`{key}` is not true or false")),
        }
    }

    /// A number of seconds or milliseconds, as milliseconds.
    fn millis(&mut self, key: &'a str, per_unit: f64) -> Result<Option<u64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(n) if n >= 0.0 => Ok(Some((n * per_unit).round() as u64)),
                _ => Err(format!("`{key}` is not a duration")),
            },
        }
    }

    /// Reports `key` as not carried, with why.
    fn lose(&mut self, key: &'a str, why: &str) {
        if self.get(key).is_some() {
            self.lost.push(format!("`{key}` ({why})"));
        }
    }
}

fn strings(v: &Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// Converts the host's entry (in `format`) for mcpx; `inputs` are VS Code's prompts.
pub(crate) fn convert(format: Format, entry: &Value, inputs: Option<&Value>) -> Carry {
    let Some(obj) = entry.as_object() else {
        return Carry::Stays("its entry is not an object".to_owned());
    };
    let mut r = Reader {
        obj,
        used: BTreeSet::new(),
        lost: Vec::new(),
    };
    let spec = match read(format, &mut r) {
        Ok(spec) => spec,
        Err(why) => return Carry::Stays(why),
    };
    if let Err(why) = expansions(format, &spec, inputs) {
        return Carry::Stays(why);
    }
    let is_mcpx = spec.command.as_deref().is_some_and(|c| {
        std::path::Path::new(c)
            .file_name()
            .is_some_and(|n| n == "mcpx")
    }) && spec.args.first().is_some_and(|a| a == "serve");
    if is_mcpx {
        return Carry::Ours;
    }
    let entry = match build(spec) {
        Ok(e) => e,
        Err(why) => return Carry::Stays(why),
    };
    let mut lost = r.lost;
    for key in obj.keys() {
        if !r.used.contains(key.as_str()) {
            lost.push(format!("`{key}` (mcpx has no such setting)"));
        }
    }
    Carry::Entry { entry, lost }
}

/// Reads the host's keys into a `Spec`, or says why the server cannot move.
// The error is the reason the entry stays where it is, which the import report
// prints beside it: a message is all its caller uses.
fn read<'a>(format: Format, r: &mut Reader<'a>) -> Result<Spec, String> {
    let mut s = Spec::default();
    match format {
        Format::McpServers(_) | Format::ClaudeUser | Format::VsCodeMcp | Format::VsCodeSettings => {
            let host = format.host();
            s.kind = r.str("type")?;
            s.command = r.str("command")?;
            s.args = r.strings("args")?;
            s.env = r.map("env")?;
            s.cwd = r.str("cwd")?;
            s.url = r.str("url")?;
            s.headers = r.map("headers")?;
            s.disabled = r.bool("disabled")?.unwrap_or(false);
            if let Some(file) = r.str("envFile")? {
                return Err(format!(
                    "it reads variables from the envFile {file}, which mcpx does not read; \
                     copy them into its `env` in mcpx's file"
                ));
            }
            match host {
                Host::Windsurf => {
                    if let Some(url) = r.str("serverUrl")? {
                        if s.url.is_some() {
                            return Err("it has both `url` and `serverUrl`".to_owned());
                        }
                        s.url = Some(url);
                    }
                    s.exclude = r.strings("disabledTools")?;
                }
                Host::Gemini => {
                    // Gemini CLI: `url` is an SSE endpoint, `httpUrl` a streamable one.
                    if s.url.is_some() && s.kind.is_none() {
                        s.kind = Some("sse".to_owned());
                    }
                    if let Some(url) = r.str("httpUrl")? {
                        if s.url.is_some() {
                            return Err("it has both `url` and `httpUrl`".to_owned());
                        }
                        s.url = Some(url);
                        s.kind = Some("http".to_owned());
                    }
                    s.include = r.strings("includeTools")?;
                    s.exclude = r.strings("excludeTools")?;
                    s.call_timeout_ms = r.millis("timeout", 1.0)?;
                    r.lose("trust", "mcpx does not skip the host's confirmations");
                }
                _ => {}
            }
            if matches!(format, Format::VsCodeMcp | Format::VsCodeSettings) {
                r.lose("dev", "VS Code's watch and debug settings");
            }
        }
        Format::Zed => {
            match r.get("command") {
                None => {}
                Some(Value::String(c)) => {
                    s.command = Some(c.clone());
                    s.args = r.strings("args")?;
                    s.env = r.map("env")?;
                }
                Some(Value::Object(c)) => {
                    let mut inner = Reader {
                        obj: c,
                        used: BTreeSet::new(),
                        lost: Vec::new(),
                    };
                    s.command = inner.str("path")?;
                    s.args = inner.strings("args")?;
                    s.env = inner.map("env")?;
                    for key in c.keys().filter(|k| !inner.used.contains(k.as_str())) {
                        r.lost
                            .push(format!("`command.{key}` (mcpx has no such setting)"));
                    }
                }
                Some(_) => return Err("`command` is neither a string nor an object".to_owned()),
            }
            s.url = r.str("url")?;
            s.headers = r.map("headers")?;
            s.disabled = r.bool("enabled")? == Some(false);
            let source = r.str("source")?;
            if source.as_deref() == Some("extension") || (s.command.is_none() && s.url.is_none()) {
                return Err(
                    "it is a Zed extension's server: the extension, not settings.json, \
                            says how to start it"
                        .to_owned(),
                );
            }
            match r.get("settings") {
                Some(Value::Object(m)) if m.is_empty() => {}
                Some(_) => r
                    .lost
                    .push("`settings` (an extension's settings)".to_owned()),
                None => {}
            }
        }
        Format::Codex => {
            s.command = r.str("command")?;
            s.args = r.strings("args")?;
            s.env = r.map("env")?;
            s.cwd = r.str("cwd")?;
            s.url = r.str("url")?;
            s.headers = r.map("http_headers")?;
            s.disabled = r.bool("enabled")? == Some(false);
            s.connect_timeout_ms = match r.millis("startup_timeout_ms", 1.0)? {
                Some(ms) => Some(ms),
                None => r.millis("startup_timeout_sec", 1000.0)?,
            };
            s.call_timeout_ms = r.millis("tool_timeout_sec", 1000.0)?;
            s.include = r.strings("enabled_tools")?;
            s.exclude = r.strings("disabled_tools")?;
            if let Some(var) = r.str("bearer_token_env_var")? {
                return Err(format!(
                    "it sends a bearer token read from ${var}, and mcpx's file can only hold \
                     the header itself"
                ));
            }
            if r.get("env_http_headers").is_some() {
                return Err("it reads headers from environment variables \
                            (`env_http_headers`), and mcpx's file can only hold the headers \
                            themselves"
                    .to_owned());
            }
            r.lose(
                "env_vars",
                "mcpx passes its own environment to a stdio server anyway",
            );
        }
    }
    Ok(s)
}

/// Refuses a server whose values use the host's expansions (`${input:…}`,
/// `${workspaceFolder}`, `${env:X}`, `${X}`), which mcpx would pass on as they are.
// The error is the reason the entry stays where it is, which the import report
// prints beside it: a message is all its caller uses.
fn expansions(format: Format, s: &Spec, inputs: Option<&Value>) -> Result<(), String> {
    let mut values: Vec<(String, &str)> = Vec::new();
    values.extend(s.command.as_deref().map(|c| ("command".to_owned(), c)));
    values.extend(s.args.iter().map(|a| ("args".to_owned(), a.as_str())));
    for (k, v) in &s.env {
        values.extend(v.as_str().map(|v| (format!("env.{k}"), v)));
    }
    values.extend(s.cwd.as_deref().map(|c| ("cwd".to_owned(), c)));
    values.extend(s.url.as_deref().map(|u| ("url".to_owned(), u)));
    for (k, v) in &s.headers {
        values.extend(v.as_str().map(|v| (format!("headers.{k}"), v)));
    }
    for (key, value) in values {
        if let Some(start) = value.find("${") {
            let rest = &value[start..];
            let var = &rest[..rest.find('}').map_or(rest.len(), |e| e + 1)];
            if let Some(id) = var
                .strip_prefix("${input:")
                .and_then(|v| v.strip_suffix('}'))
            {
                let described = input(inputs, id)
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default();
                return Err(format!(
                    "`{key}` uses the input {var}{described}, which VS Code asks the user for \
                     and mcpx cannot; give the value in mcpx's file by hand"
                ));
            }
            return Err(format!(
                "`{key}` uses {var}, which the host expands and mcpx does not"
            ));
        }
        // Gemini CLI expands `$VAR` in a server's environment too.
        if format == Format::McpServers(Host::Gemini)
            && key.starts_with("env.")
            && let Some(i) = value.find('$')
            && value[i + 1..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        {
            return Err(format!(
                "`{key}` uses {}, which Gemini CLI expands and mcpx does not",
                &value[i..]
            ));
        }
    }
    Ok(())
}

/// How VS Code's `inputs` describe the prompt `id`.
fn input(inputs: Option<&Value>, id: &str) -> Option<String> {
    let input = inputs?
        .as_array()?
        .iter()
        .find(|i| i.get("id").and_then(Value::as_str) == Some(id))?;
    let mut what = String::new();
    if let Some(d) = input.get("description").and_then(Value::as_str) {
        what.push_str(&format!("\"{d}\""));
    }
    if input.get("password").and_then(Value::as_bool) == Some(true) {
        if !what.is_empty() {
            what.push_str(", ");
        }
        what.push_str("a password");
    }
    (!what.is_empty()).then_some(what)
}

/// mcpx's entry for `s`, or why its transport cannot be carried.
// The error is the reason the entry stays where it is, which the import report
// prints beside it: a message is all its caller uses.
fn build(s: Spec) -> Result<Entry, String> {
    let kind = match s.kind.as_deref() {
        None => None,
        Some("stdio") => Some("stdio"),
        Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => Some("http"),
        Some("sse") => Some("sse"),
        Some(other) => return Err(format!("its type {other:?} is not stdio, http or sse")),
    };
    let mut e: Vec<(&'static str, Value)> = Vec::new();
    match (kind, s.command, s.url) {
        (None | Some("stdio"), Some(command), None) => {
            e.push(("command", Value::String(command)));
            if !s.args.is_empty() {
                e.push(("args", json!(s.args)));
            }
            if !s.env.is_empty() {
                e.push(("env", Value::Object(s.env)));
            }
            if let Some(cwd) = s.cwd {
                e.push(("cwd", Value::String(cwd)));
            }
        }
        (Some("stdio"), None, Some(_)) => {
            return Err("its type is stdio but it has no command".to_owned());
        }
        (kind, None, Some(url)) => {
            e.push(("type", json!(kind.unwrap_or("http"))));
            e.push(("url", Value::String(url)));
            if !s.headers.is_empty() {
                e.push(("headers", Value::Object(s.headers)));
            }
        }
        (_, Some(_), Some(_)) => return Err("it has both a command and a URL".to_owned()),
        (None, None, None) => return Err("it has neither a command nor a URL".to_owned()),
        (Some(kind), Some(_), None) => return Err(format!("its type is {kind} but it has no URL")),
        (Some(_), None, None) => return Err("it has neither a command nor a URL".to_owned()),
    }
    if s.disabled {
        e.push(("disabled", Value::Bool(true)));
    }
    let mut mcpx = Map::new();
    let mut tools = Map::new();
    if !s.include.is_empty() {
        tools.insert("include".to_owned(), json!(s.include));
    }
    if !s.exclude.is_empty() {
        tools.insert("exclude".to_owned(), json!(s.exclude));
    }
    if !tools.is_empty() {
        mcpx.insert("tools".to_owned(), Value::Object(tools));
    }
    if let Some(ms) = s.call_timeout_ms {
        mcpx.insert("callTimeoutMs".to_owned(), json!(ms.max(1)));
    }
    if let Some(ms) = s.connect_timeout_ms {
        mcpx.insert("connectTimeoutMs".to_owned(), json!(ms.max(1)));
    }
    if !mcpx.is_empty() {
        e.push(("mcpx", Value::Object(mcpx)));
    }
    Ok(Entry(e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn entry(format: Format, v: Value) -> (Value, Vec<String>) {
        match convert(format, &v, None) {
            Carry::Entry { entry, lost } => (entry.value(), lost),
            other => panic!("{v}: {other:?}"),
        }
    }

    fn stays(format: Format, v: Value, inputs: Option<&Value>) -> String {
        match convert(format, &v, inputs) {
            Carry::Stays(why) => why,
            other => panic!("{v}: {other:?}"),
        }
    }

    const DESKTOP: Format = Format::McpServers(Host::ClaudeDesktop);

    #[test]
    fn a_stdio_entry_carries_its_command_args_env_and_cwd() {
        let (e, lost) = entry(
            DESKTOP,
            json!({"command": "npx", "args": ["-y", "fs"], "env": {"A": "1", "N": 2},
                   "cwd": "/w", "alwaysAllow": ["read"], "disabled": true}),
        );
        assert_eq!(
            e,
            json!({"command": "npx", "args": ["-y", "fs"], "env": {"A": "1", "N": "2"},
                   "cwd": "/w", "disabled": true})
        );
        assert_eq!(lost, ["`alwaysAllow` (mcpx has no such setting)"]);
    }

    #[test]
    fn a_remote_entry_says_its_type() {
        let (e, _) = entry(
            DESKTOP,
            json!({"url": "https://x/mcp", "headers": {"A": "b"}}),
        );
        assert_eq!(
            e,
            json!({"type": "http", "url": "https://x/mcp", "headers": {"A": "b"}})
        );
        let (e, _) = entry(DESKTOP, json!({"type": "sse", "url": "https://x/sse"}));
        assert_eq!(e, json!({"type": "sse", "url": "https://x/sse"}));
        let (e, _) = entry(
            Format::McpServers(Host::Windsurf),
            json!({"serverUrl": "https://w/mcp", "disabledTools": ["rm"]}),
        );
        assert_eq!(
            e,
            json!({"type": "http", "url": "https://w/mcp", "mcpx": {"tools": {"exclude": ["rm"]}}})
        );
    }

    #[test]
    fn gemini_urls_are_sse_and_http_urls_streamable() {
        let g = Format::McpServers(Host::Gemini);
        let (e, _) = entry(g, json!({"url": "https://g/sse"}));
        assert_eq!(e, json!({"type": "sse", "url": "https://g/sse"}));
        let (e, lost) = entry(
            g,
            json!({"httpUrl": "https://g/mcp", "timeout": 30000, "trust": true,
                   "includeTools": ["a"]}),
        );
        assert_eq!(
            e,
            json!({"type": "http", "url": "https://g/mcp",
                   "mcpx": {"tools": {"include": ["a"]}, "callTimeoutMs": 30000}})
        );
        assert_eq!(
            lost,
            ["`trust` (mcpx does not skip the host's confirmations)"]
        );
        let why = stays(g, json!({"command": "x", "env": {"K": "$API_KEY"}}), None);
        assert!(why.contains("$API_KEY"), "{why}");
    }

    #[test]
    fn vscode_inputs_and_host_variables_keep_a_server_with_its_host() {
        let inputs = json!([{"type": "promptString", "id": "tok", "description": "GitHub token",
                             "password": true}]);
        let why = stays(
            Format::VsCodeMcp,
            json!({"type": "stdio", "command": "gh", "env": {"T": "${input:tok}"}}),
            Some(&inputs),
        );
        assert!(
            why.contains("`env.T` uses the input ${input:tok} (\"GitHub token\", a password)"),
            "{why}"
        );
        let why = stays(
            Format::VsCodeMcp,
            json!({"command": "x", "args": ["${workspaceFolder}"]}),
            None,
        );
        assert!(why.contains("`args` uses ${workspaceFolder}"), "{why}");
        let why = stays(
            Format::VsCodeMcp,
            json!({"command": "x", "envFile": ".env"}),
            None,
        );
        assert!(why.contains("envFile"), "{why}");
    }

    #[test]
    fn zed_commands_in_both_forms_and_extensions() {
        let (a, _) = entry(
            Format::Zed,
            json!({"source": "custom", "command": "z", "args": ["1"], "env": {}}),
        );
        let (b, lost) = entry(
            Format::Zed,
            json!({"command": {"path": "z", "args": ["1"]}, "settings": {"k": 1}, "enabled": false}),
        );
        assert_eq!(a, json!({"command": "z", "args": ["1"]}));
        assert_eq!(b, json!({"command": "z", "args": ["1"], "disabled": true}));
        assert_eq!(lost, ["`settings` (an extension's settings)"]);
        let why = stays(
            Format::Zed,
            json!({"source": "extension", "settings": {}}),
            None,
        );
        assert!(why.contains("extension"), "{why}");
        let (r, _) = entry(Format::Zed, json!({"url": "https://z/mcp"}));
        assert_eq!(r, json!({"type": "http", "url": "https://z/mcp"}));
    }

    #[test]
    fn codex_keys_map_to_mcpx_settings() {
        let (e, lost) = entry(
            Format::Codex,
            json!({"command": "c", "args": [], "env": {"A": "b"}, "enabled": false,
                   "startup_timeout_sec": 20, "tool_timeout_sec": 1.5,
                   "disabled_tools": ["x"], "env_vars": ["PATH"]}),
        );
        assert_eq!(
            e,
            json!({"command": "c", "env": {"A": "b"}, "disabled": true,
                   "mcpx": {"tools": {"exclude": ["x"]}, "connectTimeoutMs": 20000,
                            "callTimeoutMs": 1500}})
        );
        assert_eq!(lost.len(), 1, "{lost:?}");
        let why = stays(
            Format::Codex,
            json!({"url": "https://c", "bearer_token_env_var": "TOK"}),
            None,
        );
        assert!(why.contains("$TOK"), "{why}");
    }

    #[test]
    fn what_cannot_be_a_transport_stays() {
        for (v, want) in [
            (json!({"command": "x", "url": "https://x"}), "both"),
            (json!({"args": []}), "neither"),
            (json!({"type": "ws", "url": "wss://x"}), "\"ws\""),
            (json!({"type": "stdio", "url": "https://x"}), "no command"),
            (json!({"command": 1}), "`command` is not a string"),
            (json!("x"), "not an object"),
        ] {
            let why = stays(DESKTOP, v.clone(), None);
            assert!(why.contains(want), "{v}: {why}");
        }
    }

    #[test]
    fn mcpx_s_own_entry_is_recognised() {
        let v = json!({"command": "/usr/bin/mcpx", "args": ["serve", "--config", "/c.json"]});
        assert_eq!(convert(DESKTOP, &v, None), Carry::Ours);
    }
}
