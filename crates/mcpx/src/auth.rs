//! `mcpx auth login|logout|status`: a user's OAuth authorization of the upstreams that
//! need one (mcpx_transport::oauth::code), and what the token store holds for them.
//! Nothing here prints a token.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mcpx_gateway::config::{self, Config, ServerConfig, Transport};
use mcpx_transport::oauth::code::{self, UserAuth};
use url::Url;

/// `mcpx auth`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Authorize mcpx for an upstream that needs a user's authorization: discover its
    /// authorization server, register if need be, open the authorization URL in a
    /// browser ($BROWSER, else the platform's opener; the URL is printed too), and
    /// store the tokens it gives.
    Login {
        /// The upstream's name (its key in `mcpServers`).
        name: String,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Forget the tokens stored for an upstream.
    Logout {
        /// The upstream's name.
        name: String,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Per upstream: how it is authorized, whether tokens are stored and until when,
    /// their issuer and scope (never a token).
    Status {
        #[command(flatten)]
        config: ConfigArg,
    },
}

#[derive(Debug, clap::Args)]
struct ConfigArg {
    /// The configuration file (as for `mcpx serve`). Default: `$MCPX_CONFIG`, then
    /// `./.mcpx.json`, `./.mcp.json`, `~/.config/mcpx/config.json`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Runs `mcpx auth …`.
pub fn run(args: &Args) -> ExitCode {
    crate::runtime::init_logging();
    let result = match &args.command {
        Command::Login { name, config } => login(name, config),
        Command::Logout { name, config } => logout(name, config),
        Command::Status { config } => status(config),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpx auth: {e}");
            ExitCode::FAILURE
        }
    }
}

fn load(c: &ConfigArg) -> Result<Config, String> {
    config::load(c.config.as_deref())
        .map(|(_, c)| c)
        .map_err(|e| e.to_string())
}

/// The upstream `name`'s URL, whether it is HTTP+SSE, and its authorization-code
/// settings; or why it takes no login.
fn user_upstream<'a>(
    config: &'a Config,
    name: &str,
) -> Result<(&'a ServerConfig, Url, bool, &'a UserAuth), String> {
    let Some(s) = config.servers.get(name) else {
        let names: Vec<&str> = config.servers.keys().map(String::as_str).collect();
        return Err(format!(
            "no upstream named {name:?} in the configuration (it has: {})",
            names.join(", ")
        ));
    };
    let (url, sse) = match &s.transport {
        Transport::Http { url, .. } => (url, false),
        Transport::Sse { url, .. } => (url, true),
        Transport::Stdio { .. } => {
            return Err(format!(
                "upstream {name} is a stdio server; it takes no OAuth login"
            ));
        }
    };
    let Some(user) = &s.mcpx.user_auth else {
        return Err(format!(
            "upstream {name} takes no user login: {}",
            if s.mcpx.oauth.is_some() {
                "it uses the client_credentials grant (mcpx.oauth), which needs none"
            } else {
                "its headers give an Authorization of their own"
            }
        ));
    };
    let url = Url::parse(url).map_err(|e| format!("upstream {name}: its URL: {e}"))?;
    Ok((s, url, sse, user))
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))
}

fn login(name: &str, c: &ConfigArg) -> Result<(), String> {
    let config = load(c)?;
    let (_, url, sse, user) = user_upstream(&config, name)?;
    // A step-up a refusal asked for, beside what was granted.
    let extra = code::wanted_scope(user, url.as_str()).unwrap_or_default();
    let http = code::Http::standalone(Duration::from_secs(30));
    let record = runtime()?
        .block_on(code::login(&http, user, &url, sse, None, &extra))
        .map_err(|e| format!("upstream {name}: {e}"))?;
    println!(
        "upstream {name}: authorized by {} (scope: {}; {})",
        record.issuer,
        if record.scope.is_empty() {
            "none asked"
        } else {
            &record.scope
        },
        expiry(record.expires_at, record.refresh_token.is_some())
    );
    Ok(())
}

fn logout(name: &str, c: &ConfigArg) -> Result<(), String> {
    let config = load(c)?;
    let (_, url, _, user) = user_upstream(&config, name)?;
    match code::logout(user, url.as_str()) {
        Ok(true) => println!("upstream {name}: logged out; its tokens are deleted"),
        Ok(false) => println!("upstream {name}: no tokens were stored"),
        Err(e) => return Err(format!("upstream {name}: {e}")),
    }
    Ok(())
}

fn status(c: &ConfigArg) -> Result<(), String> {
    let config = load(c)?;
    let width = config.servers.keys().map(String::len).max().unwrap_or(0);
    for (name, s) in &config.servers {
        let line = match &s.transport {
            Transport::Stdio { .. } => "stdio: no authorization".to_owned(),
            Transport::Http { url, .. } | Transport::Sse { url, .. } => {
                match (&s.mcpx.user_auth, &s.mcpx.oauth) {
                    (_, Some(cc)) => format!(
                        "client credentials as {} (tokens kept in memory, no login)",
                        cc.client_id
                    ),
                    (None, None) => "its headers give the Authorization (no login)".to_owned(),
                    (Some(user), None) => match code::stored(user, url) {
                        Err(e) => format!("token store unreadable: {e}"),
                        Ok(None) => format!("needs login (`mcpx auth login {name}`)"),
                        Ok(Some(t)) => {
                            let state = match t.expires_at {
                                Some(e) if e <= now() && t.refresh_token.is_none() => {
                                    format!("expired; needs login (`mcpx auth login {name}`)")
                                }
                                _ => "authorized".to_owned(),
                            };
                            format!(
                                "{state}, {}; issuer {}; scope {}",
                                expiry(t.expires_at, t.refresh_token.is_some()),
                                t.issuer,
                                if t.scope.is_empty() { "none" } else { &t.scope }
                            )
                        }
                    },
                }
            }
        };
        println!("{name:width$}  {line}");
    }
    Ok(())
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// "expires at 2026-12-01T23:20:00Z" (and whether it is refreshed), or "no expiry".
fn expiry(at: Option<u64>, refreshable: bool) -> String {
    let refresh = if refreshable {
        ", refreshed with its refresh token"
    } else {
        ", no refresh token"
    };
    match at {
        None => format!("no expiry given{refresh}"),
        Some(t) if t <= now() => format!("expired at {}{refresh}", utc(t)),
        Some(t) => format!("expires at {}{refresh}", utc(t)),
    }
}

/// Seconds since the Unix epoch as an RFC 3339 UTC time, to the second (the task
/// timestamps' formatter, `mcpx_protocol::task::iso8601`, without its milliseconds).
fn utc(secs: u64) -> String {
    let full = mcpx_protocol::task::iso8601(secs.saturating_mul(1000));
    match full.strip_suffix(".000Z") {
        Some(seconds) => format!("{seconds}Z"),
        None => full,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_times() {
        assert_eq!(super::utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::utc(1_796_167_200), "2026-12-01T23:20:00Z");
        assert_eq!(super::utc(951_782_400), "2000-02-29T00:00:00Z");
    }
}
