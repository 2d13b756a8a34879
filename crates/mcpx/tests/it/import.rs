//! `mcpx import`, run as the real binary with `HOME` (and `XDG_CONFIG_HOME`) in a
//! scratch directory: each host's file from a fixture in its real shape
//! (tests/fixtures/import), merged into mcpx's file, `--write` and `--undo`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// A scratch home and a project directory inside it (the current directory).
struct Home {
    home: PathBuf,
    project: PathBuf,
    xdg: Option<PathBuf>,
}

struct Run {
    ok: bool,
    out: String,
    err: String,
}

impl Home {
    fn new(tag: &str) -> Home {
        let home = crate::scratch_dir(&format!("import-{tag}"));
        let project = home.join("project");
        std::fs::create_dir_all(&project).unwrap();
        Home {
            home,
            project,
            xdg: None,
        }
    }

    /// Puts fixture `name` at `rel` (under the home; `@PROJECT@` becomes the project).
    fn put(&self, name: &str, rel: &str) -> PathBuf {
        let text = fixture(name).replace("@PROJECT@", &self.project.display().to_string());
        let path = self.home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn run(&self, args: &[&str]) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
        cmd.arg("import")
            .args(args)
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env_remove("MCPX_CONFIG")
            .env_remove("CODEX_HOME");
        match &self.xdg {
            Some(x) => cmd.env("XDG_CONFIG_HOME", x),
            None => cmd.env_remove("XDG_CONFIG_HOME"),
        };
        let out = cmd.output().expect("run mcpx");
        Run {
            ok: out.status.success(),
            out: String::from_utf8_lossy(&out.stdout).into_owned(),
            err: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn mcpx_file(&self) -> PathBuf {
        self.home.join(".config/mcpx/config.json")
    }

    /// mcpx's file, checked with mcpx's own parser, as JSON.
    fn mcpx_servers(&self) -> Value {
        let path = self.mcpx_file();
        let text = std::fs::read_to_string(&path).expect("mcpx's file written");
        mcpx_gateway::config::parse(&text, &path).expect("mcpx accepts its file");
        let clean = mcpx_gateway::config::strip_jsonc(&text);
        serde_json::from_str::<Value>(&clean).unwrap()["mcpServers"].clone()
    }
}

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json_of(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&mcpx_gateway::config::strip_jsonc(&text)).unwrap()
}

fn backup(path: &Path) -> PathBuf {
    PathBuf::from(format!(
        "{}.mcpx-backup",
        path.canonicalize().unwrap().display()
    ))
}

fn assert_has(out: &str, want: &str) {
    assert!(out.contains(want), "no {want:?} in:\n{out}");
}

/// The entry `--write` puts in a host's file, and what mcpx's file must be named in it.
fn assert_launches_mcpx(entry: &Value, home: &Home) {
    let exe = Path::new(env!("CARGO_BIN_EXE_mcpx"))
        .canonicalize()
        .unwrap();
    let command = entry["command"]
        .as_str()
        .or(entry["command"]["path"].as_str());
    assert_eq!(command, Some(exe.to_str().unwrap()), "{entry}");
    let args = if entry["args"].is_array() {
        &entry["args"]
    } else {
        &entry["command"]["args"]
    };
    assert_eq!(
        args,
        &json!(["serve", "--config", home.mcpx_file().display().to_string()]),
        "{entry}"
    );
}

#[test]
fn claude_desktop_servers_move_into_a_new_mcpx_file() {
    let h = Home::new("desktop");
    let host = h.put(
        "claude_desktop_config.json",
        ".config/Claude/claude_desktop_config.json",
    );
    let before = std::fs::read(&host).unwrap();
    let r = h.run(&["claude-desktop"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    assert_has(&r.out, "filesystem: added");
    assert_has(
        &r.out,
        "weather: added\n    not carried: `alwaysAllow` (mcpx has no such setting)",
    );
    assert_has(&r.out, "Added 3 servers to");
    assert_has(&r.out, "The host's files are unchanged");
    let servers = h.mcpx_servers();
    assert_eq!(
        servers["github"],
        json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
               "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example"}})
    );
    assert_eq!(servers.as_object().unwrap().len(), 3);
    assert_eq!(
        std::fs::read(&host).unwrap(),
        before,
        "the host's file is untouched"
    );
    // A new mcpx file may hold secrets: only its owner reads it.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(h.mcpx_file())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // Again: every server is already there.
    let r = h.run(&["claude-desktop"]);
    assert!(r.ok, "{}", r.err);
    assert_has(&r.out, "filesystem: already in mcpx's file\n");
    assert_has(&r.out, "nothing to add");
}

#[test]
fn a_clash_is_renamed_a_copy_is_skipped_and_the_user_s_file_is_kept() {
    let h = Home::new("merge");
    h.put(
        "claude_desktop_config.json",
        ".config/Claude/claude_desktop_config.json",
    );
    let mine = r#"{
  // my own servers
  "mcpServers": {
    "fs": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
      "mcpx": { "namespace": "files" }
    },
    "github": { "type": "http", "url": "https://api.githubcopilot.com/mcp/" },
  },
  "mcpx": { "names": { "separator": "__" } }
}
"#;
    std::fs::create_dir_all(h.mcpx_file().parent().unwrap()).unwrap();
    std::fs::write(h.mcpx_file(), mine).unwrap();
    let r = h.run(&["claude-desktop"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    assert_has(&r.out, "filesystem: already in mcpx's file, as fs");
    assert_has(
        &r.out,
        "github: added as github-claude-desktop (mcpx's file has a different github)",
    );
    assert_has(&r.out, "Added 2 servers");
    let text = std::fs::read_to_string(h.mcpx_file()).unwrap();
    assert!(
        text.starts_with("{\n  // my own servers\n  \"mcpServers\": {\n    \"fs\": {"),
        "{text}"
    );
    assert!(
        text.contains("\"mcpx\": { \"names\": { \"separator\": \"__\" } }"),
        "{text}"
    );
    let servers = h.mcpx_servers();
    assert_eq!(
        servers["github"]["url"],
        "https://api.githubcopilot.com/mcp/"
    );
    assert_eq!(servers["github-claude-desktop"]["command"], "npx");
    assert_eq!(servers["weather"]["command"], "uv");
    assert!(servers.get("filesystem").is_none());
}

#[test]
fn write_points_the_host_at_mcpx_and_undo_restores_it_byte_for_byte() {
    let h = Home::new("write");
    let host = h.put(
        "claude_desktop_config.json",
        ".config/Claude/claude_desktop_config.json",
    );
    let before = std::fs::read(&host).unwrap();
    let r = h.run(&["claude-desktop", "--write"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    assert_has(&r.out, "Rewrote");
    assert_has(&r.out, "mcpx import --undo claude-desktop");
    let v = json_of(&host);
    assert_eq!(v["globalShortcut"], "Ctrl+Space", "the other settings stay");
    let servers = v["mcpServers"].as_object().unwrap();
    assert_eq!(servers.len(), 1, "{v}");
    assert_launches_mcpx(&servers["mcpx"], &h);
    assert_eq!(std::fs::read(backup(&host)).unwrap(), before);
    assert_eq!(h.mcpx_servers().as_object().unwrap().len(), 3);

    // Again: the entry is mcpx's own, and nothing more moves.
    let r = h.run(&["claude-desktop", "--write"]);
    assert!(r.ok, "{}", r.err);
    assert_has(&r.out, "mcpx: not imported: it starts mcpx itself");
    assert_has(&r.out, "No host's file rewritten");

    let r = h.run(&["--undo", "claude-desktop"]);
    assert!(r.ok, "{}", r.err);
    assert_has(&r.out, "Restored");
    assert_eq!(std::fs::read(&host).unwrap(), before);
    assert!(!backup(&host).exists());

    let r = h.run(&["--undo", "claude-desktop"]);
    assert!(!r.ok);
    assert_has(&r.err, "no backup to restore; looked for");
}

#[test]
fn write_refuses_while_an_earlier_backup_is_there() {
    let h = Home::new("backup");
    let host = h.put(
        "claude_desktop_config.json",
        ".config/Claude/claude_desktop_config.json",
    );
    std::fs::write(backup(&host), "older").unwrap();
    let r = h.run(&["claude-desktop", "--write"]);
    assert!(!r.ok, "{}", r.out);
    assert_has(&r.err, "already has a backup");
    assert!(!h.mcpx_file().exists(), "nothing is written");
}

#[test]
fn write_with_attach_runs_serve_attach() {
    let h = Home::new("attach");
    let host = h.put("cursor_mcp.json", ".cursor/mcp.json");
    let r = h.run(&["cursor", "--write", "--attach"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    let v = json_of(&host);
    let args = &v["mcpServers"]["mcpx"]["args"];
    assert_eq!(args[0], "serve");
    assert_eq!(args[1], "--attach");
    assert_eq!(args[2], "--config");
    // The server with an envFile stays, and so keeps working from Cursor.
    assert_eq!(v["mcpServers"]["dotenv"]["envFile"], ".env");
    assert!(v["mcpServers"].get("browsermcp").is_none());
}

#[test]
fn cursor_remote_servers_and_env_files() {
    let h = Home::new("cursor");
    h.put("cursor_mcp.json", ".cursor/mcp.json");
    let r = h.run(&["cursor"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    assert_has(
        &r.out,
        "dotenv: stays in cursor's file: it reads variables from the envFile .env",
    );
    let s = h.mcpx_servers();
    assert_eq!(
        s["remote-server"],
        json!({"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"API_KEY": "value"}})
    );
    assert!(s.get("dotenv").is_none());
}

#[test]
fn claude_code_reads_the_project_and_the_user_file() {
    let h = Home::new("claude-code");
    let project = h.put("claude_code_project.mcp.json", "project/.mcp.json");
    let user = h.put("claude_code_user.claude.json", ".claude.json");
    let r = h.run(&["claude-code"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    assert_has(&r.out, "sentry: added");
    assert_has(
        &r.out,
        "dbhub: stays in claude-code's file: `args` uses ${DB_URL:-postgres://localhost/dev}",
    );
    assert_has(&r.out, "memory: added");
    assert_has(&r.out, "(projects > ");
    assert_has(&r.out, "playwright: added");
    assert!(
        !r.out.contains("elsewhere"),
        "another project's servers: {}",
        r.out
    );
    let s = h.mcpx_servers();
    assert_eq!(
        s["linear"],
        json!({"type": "sse", "url": "https://mcp.linear.app/sse"})
    );
    assert_eq!(
        s["memory"]["args"],
        json!(["-y", "@modelcontextprotocol/server-memory"])
    );

    let r = h.run(&["claude-code", "--write"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    let p = json_of(&project);
    assert_eq!(p["mcpServers"]["mcpx"]["type"], "stdio");
    assert_launches_mcpx(&p["mcpServers"]["mcpx"], &h);
    assert!(
        p["mcpServers"].get("dbhub").is_some(),
        "what could not move stays"
    );
    let u = json_of(&user);
    assert_eq!(u["numStartups"], 42);
    let local = &u["projects"][h.project.display().to_string()];
    assert_eq!(local["mcpServers"], json!({}), "{u}");
    assert_eq!(local["hasTrustDialogAccepted"], true);
    assert!(u["mcpServers"].get("mcpx").is_some());
    assert!(
        u["projects"]["/somewhere/else"]["mcpServers"]
            .get("elsewhere")
            .is_some()
    );
}

#[test]
fn vscode_inputs_stay_with_vscode_and_settings_keep_their_comments() {
    let mut h = Home::new("vscode");
    let xdg = h.home.join("xdg");
    h.xdg = Some(xdg.clone());
    let workspace = h.put("vscode_mcp.json", "project/.vscode/mcp.json");
    let settings = h.put("vscode_settings.json", "xdg/Code/User/settings.json");
    let r = h.run(&["vscode"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    assert_has(
        &r.out,
        "Perplexity: stays in vscode's file: `env.PERPLEXITY_API_KEY` uses the input ${input:perplexity-key} \
         (\"Perplexity API Key\", a password), which VS Code asks the user for and mcpx cannot",
    );
    assert_has(
        &r.out,
        "time: added\n    not carried: `dev` (VS Code's watch and debug settings)",
    );
    let s = h.mcpx_servers();
    assert_eq!(
        s["fetch"],
        json!({"command": "uvx", "args": ["mcp-server-fetch"]})
    );
    assert_eq!(s["github"]["url"], "https://api.githubcopilot.com/mcp/");
    assert!(s.get("Perplexity").is_none());

    let settings_before = std::fs::read_to_string(&settings).unwrap();
    let r = h.run(&["vscode", "--write"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    let text = std::fs::read_to_string(&settings).unwrap();
    assert!(
        text.starts_with("{\n    \"editor.fontSize\": 14,\n    // MCP servers"),
        "{text}"
    );
    assert!(
        text.ends_with("    \"workbench.colorTheme\": \"Default Dark Modern\",\n}\n"),
        "{text}"
    );
    let v = json_of(&settings);
    assert_eq!(v["mcp"]["servers"]["mcpx"]["type"], "stdio");
    assert!(v["mcp"]["servers"].get("time").is_none());
    let text = std::fs::read_to_string(&workspace).unwrap();
    let perplexity =
        "    \"Perplexity\": {\n      \"type\": \"stdio\",\n      \"command\": \"npx\",";
    assert!(
        text.contains(perplexity),
        "the server that stays is as it was:\n{text}"
    );
    let w = json_of(&workspace);
    assert_eq!(w["inputs"][0]["id"], "perplexity-key");
    assert!(w["servers"].get("Perplexity").is_some());
    assert_launches_mcpx(&w["servers"]["mcpx"], &h);

    let r = h.run(&["--undo", "vscode"]);
    assert!(r.ok, "{}", r.err);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), settings_before);
    assert_eq!(
        std::fs::read_to_string(&workspace).unwrap(),
        fixture("vscode_mcp.json")
    );
}

#[test]
fn windsurf_server_urls_and_disabled_servers() {
    let h = Home::new("windsurf");
    h.put(
        "windsurf_mcp_config.json",
        ".codeium/windsurf/mcp_config.json",
    );
    let r = h.run(&["windsurf"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    let s = h.mcpx_servers();
    assert_eq!(
        s["figma"],
        json!({"type": "http", "url": "https://mcp.figma.com/mcp",
               "mcpx": {"tools": {"exclude": ["delete_file"]}}})
    );
    assert_eq!(
        s["paused"],
        json!({"command": "paused-server", "disabled": true})
    );
}

#[test]
fn zed_both_command_forms_remote_and_extensions() {
    let h = Home::new("zed");
    let host = h.put("zed_settings.json", ".config/zed/settings.json");
    let r = h.run(&["zed", "--write"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    assert_has(
        &r.out,
        "mcp-server-github: stays in zed's file: it is a Zed extension's server",
    );
    let s = h.mcpx_servers();
    assert_eq!(
        s["legacy-form"],
        json!({"command": "/usr/local/bin/mcp-legacy", "args": ["--stdio"], "env": {"LOG": "debug"}})
    );
    assert_eq!(
        s["postgres"]["args"][1],
        "@modelcontextprotocol/server-postgres"
    );
    assert_eq!(
        s["remote"],
        json!({"type": "http", "url": "https://zed.example/mcp",
               "headers": {"Authorization": "Bearer z"}})
    );
    let text = std::fs::read_to_string(&host).unwrap();
    assert!(text.starts_with("// Zed settings\n//\n"), "{text}");
    let v = json_of(&host);
    assert_eq!(v["theme"], "One Dark");
    assert_eq!(v["vim_mode"], false);
    let servers = v["context_servers"].as_object().unwrap();
    assert_eq!(servers.len(), 2, "{v}");
    assert!(servers.contains_key("mcp-server-github"));
    // The file uses Zed's object form, so the entry does too.
    assert_launches_mcpx(&servers["mcpx"], &h);
    assert!(servers["mcpx"]["command"].is_object());
}

#[test]
fn gemini_urls_timeouts_and_its_own_variables() {
    let h = Home::new("gemini");
    h.put("gemini_settings.json", ".gemini/settings.json");
    let r = h.run(&["gemini"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    assert_has(
        &r.out,
        "pythonTools: stays in gemini's file: `env.API_KEY` uses ${EXTERNAL_API_KEY}",
    );
    assert_has(&r.out, "nodeServer: added\n    not carried: `trust`");
    let s = h.mcpx_servers();
    assert_eq!(
        s["sseServer"],
        json!({"type": "sse", "url": "http://localhost:8080/sse"})
    );
    assert_eq!(
        s["httpServer"],
        json!({"type": "http", "url": "http://localhost:3000/mcp",
               "headers": {"Authorization": "Bearer g"},
               "mcpx": {"tools": {"exclude": ["dangerous_tool"]}}})
    );
    assert_eq!(
        s["nodeServer"],
        json!({"command": "node", "args": ["dist/server.js", "--verbose"],
               "cwd": "/opt/node-server", "mcpx": {"callTimeoutMs": 30000}})
    );
}

#[test]
fn codex_toml_is_imported_rewritten_in_place_and_restored() {
    let h = Home::new("codex");
    let host = h.put("codex_config.toml", ".codex/config.toml");
    let r = h.run(&["codex", "--write"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    assert_has(
        &r.out,
        "figma: stays in codex's file: it sends a bearer token read from $FIGMA_OAUTH_TOKEN",
    );
    let s = h.mcpx_servers();
    assert_eq!(
        s["docs"],
        json!({"command": "npx", "args": ["-y", "mcp-server-docs"], "env": {"DOCS_TOKEN": "t0ken"},
               "mcpx": {"connectTimeoutMs": 20000, "callTimeoutMs": 60000}})
    );
    assert_eq!(
        s["context7"],
        json!({"type": "http", "url": "https://mcp.context7.com/mcp", "headers": {"X-Client": "codex"}})
    );
    let text = std::fs::read_to_string(&host).unwrap();
    assert!(
        text.starts_with("model = \"gpt-5\"\napproval_policy = \"on-request\"\n"),
        "{text}"
    );
    assert!(
        text.contains("[mcp_servers.figma]\nurl = \"https://mcp.figma.com/mcp\""),
        "{text}"
    );
    assert!(
        text.contains("[profiles.fast]\nmodel = \"gpt-5-mini\""),
        "{text}"
    );
    assert!(text.contains("[mcp_servers.mcpx]"), "{text}");
    assert!(!text.contains("mcp_servers.docs"), "{text}");
    let r = h.run(&["--undo", "codex"]);
    assert!(r.ok, "{}", r.err);
    assert_eq!(
        std::fs::read_to_string(&host).unwrap(),
        fixture("codex_config.toml")
    );
}

#[test]
fn a_file_is_recognised_by_its_content() {
    let h = Home::new("file");
    let file = h.put("windsurf_mcp_config.json", "elsewhere/servers.json");
    let r = h.run(&[file.to_str().unwrap(), "--dry-run"]);
    assert!(r.ok, "{}{}", r.out, r.err);
    assert_has(&r.out, "Dry run: nothing is written.");
    assert_has(&r.out, "windsurf: ");
    assert_has(&r.out, "Would add 3 servers to");
    assert!(!h.mcpx_file().exists(), "a dry run writes nothing");
}

#[test]
fn without_a_host_it_lists_the_hosts_found() {
    let h = Home::new("survey");
    h.put("zed_settings.json", ".config/zed/settings.json");
    h.put("codex_config.toml", ".codex/config.toml");
    let r = h.run(&[]);
    assert!(r.ok, "{}", r.err);
    assert_has(&r.out, "zed: ");
    assert_has(
        &r.out,
        "4 servers (legacy-form, mcp-server-github, postgres, remote)",
    );
    assert_has(&r.out, "codex: ");
    assert!(!h.mcpx_file().exists());
}

#[test]
fn errors_say_what_is_wrong_and_exit_non_zero() {
    let h = Home::new("errors");
    let r = h.run(&["sublime"]);
    assert!(!r.ok);
    assert_has(
        &r.err,
        "\"sublime\" is neither a host nor a file; the hosts are claude-desktop, claude-code, cursor",
    );

    let r = h.run(&["cursor"]);
    assert!(!r.ok);
    assert_has(&r.err, "no configuration of cursor found; looked for ");
    assert_has(&r.err, ".cursor/mcp.json");

    let bad = h.home.join(".codeium/windsurf/mcp_config.json");
    std::fs::create_dir_all(bad.parent().unwrap()).unwrap();
    std::fs::write(
        &bad,
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}\n",
    )
    .unwrap();
    let r = h.run(&["windsurf"]);
    assert!(!r.ok);
    assert_has(
        &r.err,
        &format!("{}:4:5: expected `,` or `}}`", bad.display()),
    );

    let r = h.run(&["missing/file.json"]);
    assert!(!r.ok);
    assert_has(&r.err, "missing/file.json: No such file");

    let r = h.run(&["--undo", "zed"]);
    assert!(!r.ok);
    assert_has(&r.err, "no backup to restore");

    // mcpx's file must not be the host's own.
    let host = h.put("cursor_mcp.json", ".cursor/mcp.json");
    let r = h.run(&["cursor", "--config", host.to_str().unwrap()]);
    assert!(!r.ok);
    assert_has(&r.err, "is mcpx's own file");
}
