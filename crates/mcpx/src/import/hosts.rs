//! The hosts `mcpx import` knows: their short names, where each keeps its servers on
//! Linux and macOS, and which format each file has.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// A host whose configuration `mcpx import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Host {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    VsCode,
    Windsurf,
    Zed,
    Gemini,
    Codex,
}

impl Host {
    pub(crate) const ALL: [Host; 8] = [
        Host::ClaudeDesktop,
        Host::ClaudeCode,
        Host::Cursor,
        Host::VsCode,
        Host::Windsurf,
        Host::Zed,
        Host::Gemini,
        Host::Codex,
    ];

    /// The short name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Host::ClaudeDesktop => "claude-desktop",
            Host::ClaudeCode => "claude-code",
            Host::Cursor => "cursor",
            Host::VsCode => "vscode",
            Host::Windsurf => "windsurf",
            Host::Zed => "zed",
            Host::Gemini => "gemini",
            Host::Codex => "codex",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Host> {
        Host::ALL.into_iter().find(|h| h.name() == name)
    }

    /// The host's files, in the order they are read: the project's (in the current
    /// directory) before the user's.
    pub(crate) fn sources(self, env: &Env) -> Vec<Source> {
        let home = env.home.clone().unwrap_or_default();
        let config = env.config_dir();
        // The per-user application folder: ~/Library/Application Support on macOS,
        // $XDG_CONFIG_HOME (~/.config) elsewhere.
        let app = if env.macos {
            home.join("Library/Application Support")
        } else {
            config.clone()
        };
        let cwd = &env.cwd;
        let src = |file: PathBuf, format: Format| Source { file, format };
        match self {
            Host::ClaudeDesktop => vec![src(
                app.join("Claude/claude_desktop_config.json"),
                Format::McpServers(self),
            )],
            Host::ClaudeCode => vec![
                src(cwd.join(".mcp.json"), Format::McpServers(self)),
                src(home.join(".claude.json"), Format::ClaudeUser),
            ],
            Host::Cursor => vec![
                src(cwd.join(".cursor/mcp.json"), Format::McpServers(self)),
                src(home.join(".cursor/mcp.json"), Format::McpServers(self)),
            ],
            Host::VsCode => vec![
                src(cwd.join(".vscode/mcp.json"), Format::VsCodeMcp),
                src(app.join("Code/User/mcp.json"), Format::VsCodeMcp),
                src(app.join("Code/User/settings.json"), Format::VsCodeSettings),
            ],
            Host::Windsurf => vec![src(
                home.join(".codeium/windsurf/mcp_config.json"),
                Format::McpServers(self),
            )],
            Host::Zed => vec![
                src(cwd.join(".zed/settings.json"), Format::Zed),
                // Zed keeps its settings under ~/.config on macOS too.
                src(config.join("zed/settings.json"), Format::Zed),
            ],
            Host::Gemini => vec![
                src(cwd.join(".gemini/settings.json"), Format::McpServers(self)),
                src(home.join(".gemini/settings.json"), Format::McpServers(self)),
            ],
            Host::Codex => {
                let dir = env
                    .codex_home
                    .clone()
                    .unwrap_or_else(|| home.join(".codex"));
                vec![src(dir.join("config.toml"), Format::Codex)]
            }
        }
    }
}

/// What decides where the files are: `$HOME`, `$XDG_CONFIG_HOME`, `$CODEX_HOME`, the
/// current directory and the platform.
pub(crate) struct Env {
    pub home: Option<PathBuf>,
    pub xdg_config: Option<PathBuf>,
    pub codex_home: Option<PathBuf>,
    pub cwd: PathBuf,
    pub macos: bool,
}

impl Env {
    pub(crate) fn from_process() -> Env {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        Env {
            home: var("HOME"),
            xdg_config: var("XDG_CONFIG_HOME"),
            codex_home: var("CODEX_HOME"),
            cwd: std::env::current_dir().unwrap_or_default(),
            macos: cfg!(target_os = "macos"),
        }
    }

    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    fn config_dir(&self) -> PathBuf {
        self.xdg_config
            .clone()
            .unwrap_or_else(|| self.home.clone().unwrap_or_default().join(".config"))
    }
}

/// One file of a host's.
#[derive(Clone, Debug)]
pub(crate) struct Source {
    pub file: PathBuf,
    pub format: Format,
}

/// A file's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// A root `mcpServers` object (Claude Desktop, Claude Code's `.mcp.json`, Cursor,
    /// Windsurf, Gemini CLI); the host decides what a bare `url` means.
    McpServers(Host),
    /// Claude Code's `~/.claude.json`: the user's `mcpServers` and the current
    /// directory's project's (`projects.<dir>.mcpServers`).
    ClaudeUser,
    /// VS Code's `mcp.json`: `servers` and `inputs`.
    VsCodeMcp,
    /// VS Code's `settings.json`: `mcp.servers` and `mcp.inputs`.
    VsCodeSettings,
    /// Zed's `settings.json`: `context_servers`.
    Zed,
    /// Codex's `config.toml`: `[mcp_servers.NAME]`.
    Codex,
}

impl Format {
    pub(crate) fn host(self) -> Host {
        match self {
            Format::McpServers(h) => h,
            Format::ClaudeUser => Host::ClaudeCode,
            Format::VsCodeMcp | Format::VsCodeSettings => Host::VsCode,
            Format::Zed => Host::Zed,
            Format::Codex => Host::Codex,
        }
    }

    /// The key paths of the file's server tables, in the order they are read.
    pub(crate) fn tables(self, value: &Value, cwd: &Path) -> Vec<Vec<String>> {
        let path = |keys: &[&str]| keys.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>();
        match self {
            Format::McpServers(_) => vec![path(&["mcpServers"])],
            Format::ClaudeUser => {
                let mut tables = vec![path(&["mcpServers"])];
                let projects = value.get("projects").and_then(Value::as_object);
                let dirs = [Some(cwd.to_path_buf()), cwd.canonicalize().ok()];
                for dir in dirs.into_iter().flatten() {
                    let key = dir.to_string_lossy().into_owned();
                    let has = projects
                        .and_then(|p| p.get(&key))
                        .is_some_and(|p| p.get("mcpServers").is_some());
                    let table = vec!["projects".to_owned(), key, "mcpServers".to_owned()];
                    if has && !tables.contains(&table) {
                        tables.push(table);
                    }
                }
                tables
            }
            Format::VsCodeMcp => vec![path(&["servers"])],
            Format::VsCodeSettings => {
                // Settings may be nested (`"mcp": {"servers": …}`) or dotted.
                if value.get("mcp.servers").is_some() {
                    vec![path(&["mcp.servers"])]
                } else {
                    vec![path(&["mcp", "servers"])]
                }
            }
            Format::Zed => vec![path(&["context_servers"])],
            Format::Codex => vec![path(&["mcp_servers"])],
        }
    }

    /// Where VS Code's input prompts are (`${input:id}`).
    pub(crate) fn inputs(self, value: &Value) -> Option<&Value> {
        match self {
            Format::VsCodeMcp => value.get("inputs"),
            Format::VsCodeSettings => value
                .get("mcp.inputs")
                .or_else(|| value.get("mcp").and_then(|m| m.get("inputs"))),
            _ => None,
        }
    }

    /// The format of a file named on the command line: Codex's by its `.toml` name,
    /// else from the JSON's keys, the file's name deciding among the `mcpServers`
    /// hosts.
    pub(crate) fn detect(path: &Path, value: Option<&Value>) -> Option<Format> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.ends_with(".toml") {
            return Some(Format::Codex);
        }
        let root = value?.as_object()?;
        if root.contains_key("context_servers") {
            return Some(Format::Zed);
        }
        if root.contains_key("mcp.servers")
            || root.get("mcp").is_some_and(|m| m.get("servers").is_some())
        {
            return Some(Format::VsCodeSettings);
        }
        if root.get("servers").is_some_and(Value::is_object) && !root.contains_key("mcpServers") {
            return Some(Format::VsCodeMcp);
        }
        if root.contains_key("projects") || name == ".claude.json" {
            return Some(Format::ClaudeUser);
        }
        let entries: Vec<&Value> = root.get("mcpServers")?.as_object()?.values().collect();
        let any = |key: &str| entries.iter().any(|e| e.get(key).is_some());
        let host = if name == "mcp_config.json" || any("serverUrl") {
            Host::Windsurf
        } else if any("httpUrl") || path.ends_with(".gemini/settings.json") {
            Host::Gemini
        } else if name == ".mcp.json" {
            Host::ClaudeCode
        } else if path.ends_with(".cursor/mcp.json") {
            Host::Cursor
        } else {
            Host::ClaudeDesktop
        };
        Some(Format::McpServers(host))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn env(macos: bool) -> Env {
        Env {
            home: Some("/h".into()),
            xdg_config: None,
            codex_home: None,
            cwd: "/p".into(),
            macos,
        }
    }

    fn files(host: Host, env: &Env) -> Vec<String> {
        host.sources(env)
            .into_iter()
            .map(|s| s.file.display().to_string())
            .collect()
    }

    #[test]
    fn each_host_has_its_files_on_linux_and_macos() {
        let linux = env(false);
        let mac = env(true);
        assert_eq!(
            files(Host::ClaudeDesktop, &linux),
            ["/h/.config/Claude/claude_desktop_config.json"]
        );
        assert_eq!(
            files(Host::ClaudeDesktop, &mac),
            ["/h/Library/Application Support/Claude/claude_desktop_config.json"]
        );
        assert_eq!(
            files(Host::ClaudeCode, &linux),
            ["/p/.mcp.json", "/h/.claude.json"]
        );
        assert_eq!(
            files(Host::VsCode, &mac)[1..],
            [
                "/h/Library/Application Support/Code/User/mcp.json",
                "/h/Library/Application Support/Code/User/settings.json"
            ]
        );
        assert_eq!(files(Host::Zed, &mac)[1], "/h/.config/zed/settings.json");
        assert_eq!(files(Host::Codex, &linux), ["/h/.codex/config.toml"]);
        let xdg = Env {
            xdg_config: Some("/x".into()),
            codex_home: Some("/c".into()),
            ..env(false)
        };
        assert_eq!(files(Host::Zed, &xdg)[1], "/x/zed/settings.json");
        assert_eq!(files(Host::Codex, &xdg), ["/c/config.toml"]);
        for h in Host::ALL {
            assert_eq!(Host::from_name(h.name()), Some(h));
        }
    }

    #[test]
    fn a_named_file_s_format_is_detected() {
        let d = |p: &str, v: Value| Format::detect(Path::new(p), Some(&v));
        assert_eq!(d("x/config.toml", json!(null)), Some(Format::Codex));
        assert_eq!(
            d("s.json", json!({"context_servers": {}})),
            Some(Format::Zed)
        );
        assert_eq!(
            d("s.json", json!({"mcp": {"servers": {}}})),
            Some(Format::VsCodeSettings)
        );
        assert_eq!(
            d("m.json", json!({"servers": {}, "inputs": []})),
            Some(Format::VsCodeMcp)
        );
        assert_eq!(
            d("c.json", json!({"projects": {}})),
            Some(Format::ClaudeUser)
        );
        let remote = json!({"mcpServers": {"r": {"serverUrl": "https://x"}}});
        assert_eq!(
            d("a.json", remote),
            Some(Format::McpServers(Host::Windsurf))
        );
        let http = json!({"mcpServers": {"r": {"httpUrl": "https://x"}}});
        assert_eq!(d("a.json", http), Some(Format::McpServers(Host::Gemini)));
        let plain = json!({"mcpServers": {}});
        assert_eq!(
            d("a.json", plain.clone()),
            Some(Format::McpServers(Host::ClaudeDesktop))
        );
        assert_eq!(
            d("p/.mcp.json", plain),
            Some(Format::McpServers(Host::ClaudeCode))
        );
        assert_eq!(d("a.json", json!({"other": 1})), None);
    }

    #[test]
    fn the_current_project_of_claude_json_is_read_too() {
        let v = json!({"mcpServers": {}, "projects": {"/p": {"mcpServers": {}}, "/q": {}}});
        let tables = Format::ClaudeUser.tables(&v, Path::new("/p"));
        assert_eq!(tables.len(), 2);
        assert_eq!(tables[1], ["projects", "/p", "mcpServers"]);
        assert_eq!(Format::ClaudeUser.tables(&v, Path::new("/q")).len(), 1);
    }
}
