//! `mcpx tools`, `mcpx call`, `mcpx read`, `mcpx prompt`, `mcpx probe`: the gateway and
//! its upstreams from the command line.
//!
//! The first four are an MCP client of the gateway as a host sees it. When a daemon
//! serves the configuration they ask it (`/v1`, where the daemon asks its gateway as
//! a 2026-07-28 host); otherwise they start `mcpx serve` on the same configuration as
//! a child process and speak 2026-07-28 to it over stdio (one request each,
//! stateless). Either way names, lists and results are exactly what a host gets. On a
//! terminal, `call` answers the server's elicitations. The gateway's errors (an upstream it cannot reach) come through on
//! stderr. `probe` connects to each configured upstream itself, as the
//! gateway would, and reports what it found.
//!
//! Output is for people by default and JSON with `--json` (the result as the protocol
//! has it, or for `probe` one object per upstream). The exit code is 1 when the
//! request failed, a tool reported an error, or an upstream could not be reached.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mcpx_client::{CallOptions, ClientError, EraCache, ProtocolPreference, Target, connect};
use mcpx_gateway::config;
use mcpx_protocol::Params;
use serde_json::{Map, Value, json};

/// A line on stdout; a closed stdout (`mcpx tools | head`) ends the output quietly
/// instead of panicking as `println!` does.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout().lock(), $($t)*).is_err() {
            std::process::exit(0);
        }
    }};
}

/// [`say!`] without the newline.
macro_rules! say_part {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if write!(std::io::stdout().lock(), $($t)*).is_err() {
            std::process::exit(0);
        }
    }};
}

/// Which configuration to use.
#[derive(Debug, clap::Args)]
pub struct Source {
    /// The configuration file (as for `mcpx serve`). Default: `$MCPX_CONFIG`, then
    /// `./.mcpx.json`, `./.mcp.json`, `~/.config/mcpx/config.json`.
    #[arg(long, value_name = "FILE", conflicts_with = "demo")]
    config: Option<PathBuf>,
    /// The built-in example servers instead of a configuration.
    #[arg(long)]
    demo: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// How long to wait for the gateway and the request, in seconds. Upstreams still
    /// starting are waited for within it; one that is not up in time is named.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    timeout: u64,
    /// When no daemon serves the configuration, start one (`mcpx daemon`, detached;
    /// it stops after 15 minutes unused) and ask it. Default: `$MCPX_AUTOSTART=1`,
    /// else a gateway of this command's own.
    #[arg(long)]
    autostart: bool,
}

impl Source {
    /// Whether to start a daemon when none runs.
    fn autostart(&self) -> bool {
        self.autostart || std::env::var("MCPX_AUTOSTART").is_ok_and(|v| v == "1")
    }
}

/// Arguments of `mcpx call` and `mcpx prompt`: a name and its arguments.
#[derive(Debug, clap::Args)]
pub struct Named {
    /// The tool's (or prompt's) name, as `mcpx tools` (or the host) shows it.
    name: String,
    /// Its arguments, a JSON object (e.g. `'{"a": 1}'`).
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,
    #[command(flatten)]
    source: Source,
}

/// Arguments of `mcpx read`.
#[derive(Debug, clap::Args)]
pub struct Read {
    /// The resource's URI.
    uri: String,
    #[command(flatten)]
    source: Source,
}

/// What a command failed with: printed on stderr as `mcpx <command>: <message>`.
type Failure = String;

/// `mcpx tools`: the tools a host sees, every page.
pub fn tools(source: &Source) -> ExitCode {
    run("tools", source, async |gw| {
        let (tools, starting) = gw.list("tools/list", "tools").await?;
        if source.json {
            print_json(&Value::Array(tools));
        } else {
            print_named(&tools, "description");
        }
        if starting.is_empty() {
            return Ok(true);
        }
        Err(still_starting(&starting, source.timeout))
    })
}

/// `mcpx call NAME`: calls a tool and prints its result.
pub fn call(named: &Named) -> ExitCode {
    run("call", &named.source, async |gw| {
        let args = arguments(&named.args)?;
        let progress = !named.source.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
        let result = if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            // A person at a terminal answers the server's questions.
            call_answering(gw, &named.name, &args, progress).await?
        } else {
            match gw {
                Gateway::Daemon { client, limit } if progress => {
                    let body = json!({"tool": named.name, "arguments": args});
                    call_with_progress(client, *limit, body).await?
                }
                _ => {
                    gw.request("tools/call", json!({"name": named.name, "arguments": args}))
                        .await?
                }
            }
        };
        let is_error = result.get("isError") == Some(&Value::Bool(true));
        if named.source.json {
            print_json(&result);
        } else {
            print_content(&result);
        }
        if is_error {
            eprintln!("mcpx call: the tool reported an error");
        }
        Ok(!is_error)
    })
}

/// A call through the daemon with its progress drawn on the terminal (stderr) and its
/// log messages printed above the bar.
async fn call_with_progress(
    client: &crate::daemon::client::Client,
    limit: Duration,
    body: Value,
) -> Result<Value, Failure> {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {wide_bar} {pos}/{len} {msg}") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(120));
    let last = client
        .call_streamed(&body, limit, |kind, data| match kind {
            "progress" => {
                // Progress is a number that grows; the bar counts whole steps.
                let at = |k: &str| data[k].as_f64().map(|v| v.max(0.0).round() as u64);
                if let Some(total) = at("total") {
                    bar.set_length(total);
                }
                if let Some(p) = at("progress") {
                    bar.set_position(p);
                }
                if let Some(m) = data["message"].as_str() {
                    bar.set_message(m.to_owned());
                }
            }
            "log" => bar.println(format!(
                "{}: {}",
                data["level"].as_str().unwrap_or("log"),
                data["data"]
                    .as_str()
                    .map_or_else(|| data["data"].to_string(), str::to_owned)
            )),
            _ => {}
        })
        .await;
    bar.finish_and_clear();
    match last.map_err(|e| format!("tools/call: {e}"))? {
        (kind, v) if kind == "result" => Ok(v),
        (_, problem) => Err(format!(
            "tools/call: {}",
            crate::daemon::client::problem_text(&problem, axum::http::StatusCode::BAD_GATEWAY)
        )),
    }
}

/// Most rounds of questions one call may ask.
const MAX_ROUNDS: usize = 16;

/// A call whose server may ask the person at the terminal (elicitation, as a
/// 2026-07-28 host declaring it): each `input_required` result is answered on the
/// terminal and the call retried with the answers, up to [`MAX_ROUNDS`] rounds.
async fn call_answering(
    gw: &Gateway,
    tool: &str,
    args: &Value,
    progress: bool,
) -> Result<Value, Failure> {
    let caps = json!({"elicitation": {"form": {}, "url": {}}});
    let mut retry = Map::new();
    for _ in 0..MAX_ROUNDS {
        let mut params = json!({"name": tool, "arguments": args});
        if let Value::Object(p) = &mut params {
            p.extend(retry.clone());
        }
        let result = match gw {
            Gateway::Daemon { client, limit } => {
                let mut body = json!({"tool": tool, "arguments": args, "capabilities": caps});
                if let Value::Object(b) = &mut body {
                    b.extend(retry.clone());
                }
                if progress {
                    call_with_progress(client, *limit, body).await?
                } else {
                    let answer = client
                        .ask(axum::http::Method::POST, "/v1/call", Some(&body), *limit)
                        .await
                        .map_err(|e| format!("tools/call: {e}"))?;
                    if let Some(p) = answer.problem() {
                        return Err(format!("tools/call: {p}"));
                    }
                    answer.body
                }
            }
            Gateway::Child { conn, limit } => {
                let opts = CallOptions {
                    timeout: *limit,
                    max_time: *limit,
                    client_capabilities: std::sync::Arc::new(caps.clone()),
                    ..CallOptions::default()
                };
                let frame = conn
                    .call("tools/call", Some(&Params::of_value(&params)), opts)
                    .await
                    .map_err(|e| format!("tools/call: {e}"))?;
                if let Some(e) = frame.error() {
                    return Err(format!("tools/call: error {}: {}", e.code, e.message));
                }
                frame
                    .result()
                    .and_then(|r| serde_json::from_str(r).ok())
                    .ok_or("tools/call: an answer without a result")?
            }
        };
        if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
            return Ok(result);
        }
        let answers = answer_on_terminal(&result["inputRequests"])?;
        retry = Map::new();
        retry.insert("inputResponses".into(), answers);
        if let Some(state) = result.get("requestState").filter(|s| s.is_string()) {
            retry.insert("requestState".into(), state.clone());
        }
    }
    Err(format!(
        "tools/call: the server asked more than {MAX_ROUNDS} rounds of questions"
    ))
}

/// One line from the terminal, trimmed; `None` at its end (Ctrl-D).
fn read_answer(prompt: &str) -> Option<String> {
    use std::io::Write as _;
    eprint!("{prompt}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_owned()),
    }
}

/// The answers to an `input_required` result's `inputRequests`, asked on the terminal:
/// an elicitation's form field by field (its URL printed, in URL mode). Ctrl-D declines.
fn answer_on_terminal(requests: &Value) -> Result<Value, Failure> {
    let requests = requests
        .as_object()
        .ok_or("tools/call: an input_required result without inputRequests")?;
    let mut answers = Map::new();
    for (key, req) in requests {
        let method = req["method"].as_str().unwrap_or("?");
        if method != "elicitation/create" {
            return Err(format!(
                "tools/call: the server asked for {method}, which this command cannot answer"
            ));
        }
        let p = &req["params"];
        eprintln!("{}", p["message"].as_str().unwrap_or("The server asks:"));
        let declined = json!({"action": "decline"});
        if p["mode"].as_str() == Some("url") {
            eprintln!("Open {}", p["url"].as_str().unwrap_or("?"));
            let done = read_answer("Press Enter when done (Ctrl-D declines): ");
            answers.insert(
                key.clone(),
                done.map_or(declined, |_| json!({"action": "accept"})),
            );
            continue;
        }
        let empty = Map::new();
        let schema = &p["requestedSchema"];
        let fields = schema["properties"].as_object().unwrap_or(&empty);
        let mut content = Map::new();
        let mut accepted = true;
        for (name, field) in fields {
            let kind = field["type"].as_str().unwrap_or("string");
            let choices: Vec<String> = field["enum"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect();
            let hint = if choices.is_empty() {
                kind.to_owned()
            } else {
                choices.join("|")
            };
            let title = field["title"].as_str().unwrap_or(name);
            let Some(text) = read_answer(&format!("{title} ({hint}): ")) else {
                accepted = false;
                break;
            };
            if text.is_empty() {
                if let Some(d) = field.get("default") {
                    content.insert(name.clone(), d.clone());
                }
                continue;
            }
            let value = match kind {
                "integer" => text
                    .parse::<i64>()
                    .map(Value::from)
                    .map_err(|e| e.to_string()),
                "number" => text
                    .parse::<f64>()
                    .map_err(|e| e.to_string())
                    .and_then(|n| {
                        serde_json::Number::from_f64(n)
                            .map(Value::Number)
                            .ok_or_else(|| "not a finite number".to_owned())
                    }),
                "boolean" => Ok(Value::Bool(matches!(
                    text.to_lowercase().as_str(),
                    "y" | "yes" | "true" | "1"
                ))),
                _ => Ok(Value::String(text)),
            }
            .map_err(|e| format!("{title}: {e}"))?;
            content.insert(name.clone(), value);
        }
        answers.insert(
            key.clone(),
            if accepted {
                json!({"action": "accept", "content": content})
            } else {
                declined
            },
        );
    }
    Ok(Value::Object(answers))
}

/// `mcpx read URI`: reads a resource and prints its contents.
pub fn read(read: &Read) -> ExitCode {
    run("read", &read.source, async |gw| {
        let result = gw
            .request("resources/read", json!({"uri": read.uri}))
            .await?;
        if read.source.json {
            print_json(&result);
        } else {
            for c in result["contents"].as_array().into_iter().flatten() {
                print_block(c);
            }
        }
        Ok(true)
    })
}

/// `mcpx prompt NAME`: gets a prompt and prints its messages.
pub fn prompt(named: &Named) -> ExitCode {
    run("prompt", &named.source, async |gw| {
        let args = arguments(&named.args)?;
        let result = gw
            .request(
                "prompts/get",
                json!({"name": named.name, "arguments": args}),
            )
            .await?;
        if named.source.json {
            print_json(&result);
        } else {
            for m in result["messages"].as_array().into_iter().flatten() {
                let role = m["role"].as_str().unwrap_or("?");
                say_part!("{role}: ");
                print_block(&m["content"]);
            }
        }
        Ok(true)
    })
}

/// `mcpx probe`: connects to every configured upstream and reports its era, revision,
/// identity and capabilities, or why it could not be reached.
pub fn probe(source: &Source) -> ExitCode {
    let config = match load(source) {
        Ok(c) => c,
        Err(e) => return fail("probe", &e),
    };
    crate::runtime::init_logging();
    let limit = Duration::from_secs(source.timeout);
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return fail("probe", "cannot start a runtime");
    };
    // `--timeout` bounds the whole probe: finding a daemon, every upstream's start,
    // handshake and listing, and stopping them.
    let deadline = tokio::time::Instant::now() + limit;
    // A running daemon already holds every upstream: its view is reported.
    let from_daemon = rt.block_on(async {
        let ask = async {
            let daemon = crate::daemon::client::daemon_for(
                source.config.as_deref(),
                source.demo,
                source.autostart(),
                limit,
            )
            .await?;
            match daemon {
                Some(client) => probe_daemon(&client, limit).await.map(Some),
                None => Ok(None),
            }
        };
        tokio::time::timeout_at(deadline, ask)
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "the daemon gave no answer within {} s (--timeout)",
                    limit.as_secs()
                ))
            })
    });
    let reports = match from_daemon {
        Err(e) => return fail("probe", &e),
        Ok(Some(reports)) => reports,
        Ok(None) => probe_here(&rt, &config, deadline, limit),
    };
    let reached = reports.iter().all(|r| r.get("error").is_none());
    if source.json {
        print_json(&Value::Array(reports));
    } else {
        for r in &reports {
            print_probe(r);
        }
    }
    if reached {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `mcpx probe` from the daemon's `/v1/servers` and `/v1/status`: the same report, of
/// the upstreams as the daemon holds them.
async fn probe_daemon(
    client: &crate::daemon::client::Client,
    limit: Duration,
) -> Result<Vec<Value>, Failure> {
    use axum::http::Method;
    let ask = async |path: &str| {
        let a = client
            .ask(Method::GET, path, None, limit)
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        match a.problem() {
            Some(p) => Err(format!("{path}: {p}")),
            None => Ok(a.body),
        }
    };
    let servers = ask("/v1/servers").await?;
    let status = ask("/v1/status").await?;
    let ups = status["upstreams"].as_array().cloned().unwrap_or_default();
    let mut reports = Vec::new();
    for s in servers["servers"].as_array().into_iter().flatten() {
        let name = s["name"].as_str().unwrap_or("?");
        if s["disabled"] == Value::Bool(true) {
            reports.push(json!({"name": name, "disabled": true}));
            continue;
        }
        let Some(u) = ups.iter().find(|u| u["name"] == s["name"]) else {
            continue;
        };
        let mut r = json!({"name": name, "transport": s["transport"], "state": u["state"],
            "restarts": u["restarts"]});
        if u["state"] == "ready" {
            r["era"] = u["era"].clone();
            r["revision"] = u["revision"].clone();
            r["serverInfo"] = u["serverInfo"].clone();
            r["capabilities"] = u["capabilities"].clone();
            // Null until the daemon has the upstream's first list: no count then.
            if u["tools"].is_u64() {
                r["tools"] = u["tools"].clone();
            }
        } else {
            let mut why = u["phrase"].as_str().unwrap_or("?").to_owned();
            if let Some(e) = u["lastError"].as_str() {
                why.push_str(&format!(": {e}"));
            }
            r["error"] = json!(why);
        }
        reports.push(r);
    }
    Ok(reports)
}

/// `mcpx probe` without a daemon: each upstream's supervisor run here, all of it
/// (stopping the upstreams too) by `deadline`.
fn probe_here(
    rt: &tokio::runtime::Runtime,
    config: &config::Config,
    deadline: tokio::time::Instant,
    limit: Duration,
) -> Vec<Value> {
    rt.block_on(async {
        let probes = config.servers.iter().map(|(name, s)| {
            let target = mcpx_gateway::gateway::upstream_target(config, name, s);
            async move {
                if s.disabled {
                    return json!({"name": name, "disabled": true});
                }
                probe_one(name, s, target, deadline, limit).await
            }
        });
        let reports = futures_util::future::join_all(probes).await;
        // Children of starts that timed out stop in the background: they get what is
        // left of the bound, then their process groups are killed.
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        mcpx_transport::child::stop_detached(left).await;
        reports
    })
}

/// One upstream's report: its supervisor (the gateway's own, with the entry's restart
/// settings) runs until the upstream is ready, or settles in a state that will not
/// change soon (a crash loop, a refused credential, a policy that gives up, a command
/// that cannot be started), or `deadline` (`limit` after the probe began) has come;
/// what it reached is reported. Its listing and its stop end by `deadline` too.
async fn probe_one(
    name: &str,
    s: &mcpx_gateway::config::ServerConfig,
    target: Target,
    deadline: tokio::time::Instant,
    limit: Duration,
) -> Value {
    use mcpx_gateway::upstream::{Command, State, Upstream};
    let transport = target.transport.identity();
    let (up, commands) = Upstream::new(
        name.into(),
        s.clone(),
        target,
        std::sync::Arc::new(mcpx_gateway::upstream::Connect),
        EraCache::disabled(),
        1,
        limit,
    );
    let mut supervisor = tokio::spawn(up.supervisor().clone().run(commands, None, |_| {}));
    let mut status = up.supervisor().watch();
    // A lazy upstream starts on its first use: this is one.
    up.supervisor().command(Command::Wake);
    let reached = loop {
        let now = status.borrow_and_update().clone();
        match now.state {
            State::Ready => break Ok(()),
            State::CrashLoop { .. } | State::NeedsAuthorization { .. } | State::Failed => {
                break Err(now);
            }
            // A command that cannot be started (not found, not executable) will not
            // start on the next attempt either.
            State::Backoff { .. }
                if now.last_error.as_ref().is_some_and(|c| c.kind() == "spawn") =>
            {
                break Err(now);
            }
            _ => {}
        }
        if tokio::time::timeout_at(deadline, status.changed())
            .await
            .is_err()
        {
            break Err(up.status());
        }
    };
    let report = match (reached, up.ready()) {
        (Ok(()), Some(conn)) => Ok(conn),
        (Ok(()), None) => Err(up.status()),
        (Err(st), _) => Err(st),
    };
    let report = match report {
        Ok(conn) => probe_report(name, &transport, &conn, deadline).await,
        Err(st) => {
            let mut why = match &st.state {
                State::Starting { .. } => format!("no answer within {} s", limit.as_secs()),
                // A command that cannot be started: the next tries are the
                // supervisor's business, the probe stops here.
                State::Backoff { .. }
                    if st.last_error.as_ref().is_some_and(|c| c.kind() == "spawn") =>
                {
                    "cannot be started".to_owned()
                }
                other => other.phrase(tokio::time::Instant::now()),
            };
            if let Some(cause) = &st.last_error {
                why.push_str(&format!(": {cause}"));
            }
            json!({"name": name, "transport": transport, "state": st.state.key(),
                "restarts": st.restarts, "error": why})
        }
    };
    up.supervisor().command(Command::Stop);
    // A stop still running at the deadline is cut short: its child, dropped, is
    // killed by `probe_here`'s `stop_detached`.
    if tokio::time::timeout_at(deadline, &mut supervisor)
        .await
        .is_err()
    {
        supervisor.abort();
        let _ = supervisor.await;
    }
    report
}

/// What a ready upstream offers.
async fn probe_report(
    name: &str,
    transport: &str,
    conn: &mcpx_client::Connection,
    deadline: tokio::time::Instant,
) -> Value {
    let facts = conn.facts();
    let mut report = json!({
        "name": name,
        "transport": transport,
        "era": format!("{:?}", facts.era).to_lowercase(),
        "revision": facts.revision.as_str(),
        "serverInfo": facts.info,
        "capabilities": facts.capabilities,
    });
    if facts.has("tools") {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let opts = CallOptions {
            timeout: left,
            max_time: left,
            ..CallOptions::default()
        };
        match conn
            .call("tools/list", Some(&Params::of_value(&json!({}))), opts)
            .await
        {
            Ok(f) => {
                let tools: Value = f
                    .result()
                    .and_then(|r| serde_json::from_str(r).ok())
                    .unwrap_or(Value::Null);
                report["tools"] = json!(tools["tools"].as_array().map_or(0, Vec::len));
                if tools.get("nextCursor").is_some_and(|c| !c.is_null()) {
                    report["moreTools"] = json!(true);
                }
            }
            Err(e) => report["toolsError"] = json!(e.to_string()),
        }
    }
    report
}

fn print_probe(r: &Value) {
    let name = r["name"].as_str().unwrap_or("?");
    if r.get("disabled").is_some() {
        say!("{name}: disabled");
        return;
    }
    let transport = r["transport"].as_str().unwrap_or("?");
    if let Some(e) = r.get("error") {
        say_lines(&format!(
            "{name} ({transport}): unreachable: {}",
            e.as_str().unwrap_or("?")
        ));
        return;
    }
    let info = &r["serverInfo"];
    let caps: Vec<&str> = r["capabilities"]
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    say_lines(&format!(
        "{name} ({transport}): {} {}, {} {}, capabilities: {}{}",
        r["era"].as_str().unwrap_or("?"),
        r["revision"].as_str().unwrap_or("?"),
        info["name"].as_str().unwrap_or("?"),
        info["version"].as_str().unwrap_or("?"),
        if caps.is_empty() {
            "none".to_owned()
        } else {
            caps.join(", ")
        },
        match r.get("tools") {
            Some(n) => {
                let more = if r.get("moreTools").is_some() {
                    "+"
                } else {
                    ""
                };
                format!(", {}", counted(&format!("{n}{more}"), "tool"))
            }
            None => String::new(),
        }
    ));
}

/// The configuration `source` names.
fn load(source: &Source) -> Result<config::Config, Failure> {
    if source.demo {
        return crate::serve::demo_config().map_err(|e| e.to_string());
    }
    config::load(source.config.as_deref())
        .map(|(_, c)| c)
        .map_err(|e| crate::serve::config_failure(&e, crate::serve::DEMO_HINT))
}

/// `--args` as a JSON object.
fn arguments(text: &str) -> Result<Value, Failure> {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("--args must be a JSON object".to_owned()),
        Err(e) => Err(format!("--args is not JSON: {e}")),
    }
}

/// The gateway this command asks: the daemon serving the configuration, or a child
/// process this command is the host of.
enum Gateway {
    /// A daemon, through its `/v1` API.
    Daemon {
        client: crate::daemon::client::Client,
        limit: Duration,
    },
    /// `mcpx serve`, started for this command.
    Child {
        conn: mcpx_client::Connection,
        limit: Duration,
    },
}

impl Gateway {
    /// The daemon serving `source`'s configuration (started when asked to), else
    /// `mcpx serve` on it as a child, connected (2026-07-28).
    async fn start(source: &Source) -> Result<Gateway, Failure> {
        let limit = Duration::from_secs(source.timeout);
        if let Some(client) = crate::daemon::client::daemon_for(
            source.config.as_deref(),
            source.demo,
            source.autostart(),
            limit,
        )
        .await?
        {
            return Ok(Gateway::Daemon { client, limit });
        }
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the mcpx binary: {e}"))?
            .to_string_lossy()
            .into_owned();
        // A person is at the keyboard: an upstream that needs authorization gets the
        // flow (its URL on this command's stderr, through the gateway's).
        let mut args = vec!["serve".to_owned(), "--interactive-auth".to_owned()];
        // The gateway's first list, or a call, waits for upstreams still starting, a
        // little less than this command's own limit: an upstream that is still
        // starting then is named, instead of the request timing out.
        args.push(format!(
            "--startup-wait-ms={}",
            startup_wait(limit).as_millis()
        ));
        if source.demo {
            args.push("--demo".to_owned());
        } else {
            // Found and checked here, so that its errors are this command's, and the
            // gateway reads the same file.
            let (file, _) = config::load(source.config.as_deref())
                .map_err(|e| crate::serve::config_failure(&e, crate::serve::DEMO_HINT))?;
            args.push("--config".to_owned());
            args.push(file.to_string_lossy().into_owned());
        }
        let mut target = Target::new(
            "mcpx serve",
            mcpx_client::TargetTransport::Stdio {
                command: exe,
                args,
                // Its own errors only (an upstream it cannot reach, say), which reach
                // this command's stderr: a short list then says why.
                env: vec![("MCPX_LOG".to_owned(), "error".to_owned())],
                cwd: None,
            },
        );
        target.preference = ProtocolPreference::Modern;
        target.echo_stderr = true;
        target.handshake_timeout = limit;
        let conn = tokio::time::timeout(limit, connect(&target, &EraCache::disabled()))
            .await
            .map_err(|_| format!("the gateway did not start within {} s", limit.as_secs()))?
            .map_err(|e| e.to_string())?;
        Ok(Gateway::Child { conn, limit })
    }

    /// Ends the connection (a child gateway stops).
    async fn close(self) {
        if let Gateway::Child { conn, .. } = self {
            conn.close().await;
        }
    }

    /// One request of the daemon: its `/v1` operation for `method`.
    async fn ask_daemon(
        client: &crate::daemon::client::Client,
        limit: Duration,
        method: &str,
        params: &Value,
    ) -> Result<Value, Failure> {
        use axum::http::Method;
        let (verb, path, body) = match method {
            "tools/call" => (
                Method::POST,
                "/v1/call",
                Some(json!({"tool": params["name"], "arguments": params["arguments"]})),
            ),
            "resources/read" => (
                Method::POST,
                "/v1/read",
                Some(json!({"uri": params["uri"]})),
            ),
            "prompts/get" => (
                Method::POST,
                "/v1/prompt",
                Some(json!({"name": params["name"], "arguments": params["arguments"]})),
            ),
            "tools/list" => (Method::GET, "/v1/tools", None),
            other => return Err(format!("{other}: not asked of a daemon")),
        };
        let answer = client
            .ask(verb, path, body.as_ref(), limit)
            .await
            .map_err(|e| format!("{method}: {e}"))?;
        match answer.problem() {
            Some(p) => Err(format!("{method}: {p}")),
            None => Ok(answer.body),
        }
    }

    /// One request; its result, or the error it got.
    async fn request(&self, method: &str, params: Value) -> Result<Value, Failure> {
        let (conn, limit) = match self {
            Gateway::Daemon { client, limit } => {
                return Gateway::ask_daemon(client, *limit, method, &params).await;
            }
            Gateway::Child { conn, limit } => (conn, *limit),
        };
        let opts = CallOptions {
            timeout: limit,
            max_time: limit,
            ..CallOptions::default()
        };
        let frame = conn
            .call(method, Some(&Params::of_value(&params)), opts)
            .await
            .map_err(|e| match e {
                ClientError::Timeout { .. } => {
                    format!("{method}: no answer within {} s", limit.as_secs())
                }
                e => e.to_string(),
            })?;
        if let Some(e) = frame.error() {
            return Err(format!("{method}: error {}: {}", e.code, e.message));
        }
        let result: Value = frame
            .result()
            .and_then(|r| serde_json::from_str(r).ok())
            .ok_or_else(|| format!("{method}: an answer without a result"))?;
        if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
            return Err(format!(
                "{method}: the server asked for input (an elicitation, sampling or roots request), which this command cannot answer"
            ));
        }
        Ok(result)
    }

    /// Every item of a paginated list (`key` in each page), and the upstreams still
    /// starting whose items it lacks (the first page's `_meta`, from a gateway of this
    /// command's own).
    async fn list(&self, method: &str, key: &str) -> Result<(Vec<Value>, Vec<String>), Failure> {
        if let Gateway::Daemon { client, limit } = self {
            // The daemon follows every page itself.
            let mut all = Gateway::ask_daemon(client, *limit, method, &json!({})).await?;
            return match all.get_mut(key).map(Value::take) {
                Some(Value::Array(items)) => Ok((items, Vec::new())),
                _ => Err(format!("{method}: the daemon's answer has no {key}")),
            };
        }
        let mut items = Vec::new();
        let mut starting = None;
        let mut params = json!({});
        // Bounded: a server that hands out cursors forever is not followed forever.
        for _ in 0..10_000 {
            let mut page = self.request(method, params).await?;
            if let Some(Value::Array(more)) = page.get_mut(key).map(Value::take) {
                items.extend(more);
            }
            starting.get_or_insert_with(|| {
                page.pointer(&format!(
                    "/_meta/{}",
                    mcpx_protocol::meta::STARTING.replace('/', "~1")
                ))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
            });
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(c) => params = json!({"cursor": c}),
                None => return Ok((items, starting.unwrap_or_default())),
            }
        }
        Err(format!("{method}: more than 10000 pages"))
    }
}

/// How long a gateway of this command's own waits for first starts, within the
/// command's `limit`: a tenth less (at least a quarter second, for the answer to come
/// back), so that the answer names what is still starting.
fn startup_wait(limit: Duration) -> Duration {
    limit.saturating_sub((limit / 10).max(Duration::from_millis(250)))
}

/// What `mcpx tools` fails with when upstreams were still starting at its limit.
fn still_starting(starting: &[String], secs: u64) -> Failure {
    let (who, verb) = match starting {
        [one] => (format!("upstream {one}"), "is"),
        more => (format!("upstreams {}", more.join(", ")), "are"),
    };
    format!(
        "{who} {verb} still starting after {secs} s, and not listed above (a longer --timeout waits)"
    )
}

/// Runs `work` against a started gateway: `Ok(true)` is success, `Ok(false)` a result
/// that reports failure (already printed), `Err` a failure to print.
fn run(
    command: &str,
    source: &Source,
    work: impl AsyncFnOnce(&Gateway) -> Result<bool, Failure>,
) -> ExitCode {
    crate::runtime::init_logging();
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return fail(command, "cannot start a runtime");
    };
    let outcome = rt.block_on(async {
        let gw = Gateway::start(source).await?;
        let outcome = work(&gw).await;
        gw.close().await;
        outcome
    });
    // The command's spans, if traces are on, before the process exits.
    mcpx_telemetry::shutdown();
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => fail(command, &e),
    }
}

fn fail(command: &str, message: &str) -> ExitCode {
    eprintln!("mcpx {command}: {message}");
    ExitCode::FAILURE
}

fn print_json(v: &Value) {
    match serde_json::to_string_pretty(v) {
        Ok(s) => say!("{s}"),
        Err(e) => eprintln!("mcpx: {e}"),
    }
}

/// Names and the first line of `what`, aligned.
fn print_named(items: &[Value], what: &str) {
    let width = items
        .iter()
        .filter_map(|t| t["name"].as_str())
        .map(str::len)
        .max()
        .unwrap_or(0);
    for t in items {
        let name = t["name"].as_str().unwrap_or("?");
        let line = t[what]
            .as_str()
            .and_then(|d| d.lines().next())
            .unwrap_or("");
        say_lines(&format!("{name:width$}  {line}"));
    }
}

/// Prints `text` line by line, none ending with whitespace (a padded column before an
/// empty description, an upstream's stderr quoted in an error).
fn say_lines(text: &str) {
    for line in text.lines() {
        say!("{}", line.trim_end());
    }
}

/// A tool result's content, printed once: its content blocks, or its structured
/// content when it has no blocks. A tool that returns structured content also returns
/// it serialised in a text block (server/tools §Structured Content), so printing both
/// printed the payload twice.
fn print_content(result: &Value) {
    let blocks: &[Value] = result["content"].as_array().map_or(&[], Vec::as_slice);
    for block in blocks {
        print_block(block);
    }
    if blocks.is_empty()
        && let Some(s) = result.get("structuredContent").filter(|s| !s.is_null())
    {
        print_json(s);
    }
}

/// One content block (or resource contents): text as it is, anything else described.
fn print_block(block: &Value) {
    let empty = Map::new();
    let b = block.as_object().unwrap_or(&empty);
    let text = |k: &str| b.get(k).and_then(Value::as_str);
    let size = |k: &str| text(k).map_or(0, |d| d.len() / 4 * 3);
    match (text("type"), text("text")) {
        (_, Some(t)) => say!("{t}"),
        (Some(kind @ ("image" | "audio")), None) => say!(
            "[{kind} {}, about {} bytes]",
            text("mimeType").unwrap_or("?"),
            size("data")
        ),
        (Some("resource"), None) => print_block(&block["resource"]),
        (Some("resource_link"), None) => say!(
            "[resource link {}{}]",
            text("uri").unwrap_or("?"),
            text("name").map(|n| format!(" ({n})")).unwrap_or_default()
        ),
        (_, None) if b.contains_key("blob") => say!(
            "[{} {}, about {} bytes]",
            text("uri").unwrap_or("?"),
            text("mimeType").unwrap_or("?"),
            size("blob")
        ),
        _ => print_json(block),
    }
}

/// A count and its noun, singular only for exactly one: "1 tool", "0 tools", "3+ tools".
pub(crate) fn counted(n: &str, noun: &str) -> String {
    if n == "1" {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod counted_tests {
    use super::counted;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted("1", "tool"), "1 tool");
        assert_eq!(counted("0", "tool"), "0 tools");
        assert_eq!(counted("2", "restart"), "2 restarts");
        assert_eq!(counted("1+", "tool"), "1+ tools");
    }
}
