//! `mcpx auth login|logout|status`: a user's OAuth authorization of the upstreams that
//! need one (mcpx_transport::oauth::code), and what the token store holds for them.
//! Nothing here prints a token.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mcpx_gateway::config::{self, Config, ServerConfig, Transport};
use mcpx_transport::oauth::code::{self, Asks, UserAuth};
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
    ///
    /// An upstream that has not been seen to ask for authorization (no 401, no tokens
    /// stored) is first sent a request without a token: when it answers without a
    /// 401, it needs no login and none is tried (unless `--force`).
    Login {
        /// The upstream's name (its key in `mcpServers`).
        name: String,
        /// Log in even when the upstream does not ask for authorization (or cannot be
        /// reached to tell).
        #[arg(long)]
        force: bool,
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
    ///
    /// An HTTP upstream without stored tokens "needs login" when it has refused a
    /// request with a 401 (mcpx records that in the token store) and is "not needed so
    /// far" otherwise. One not yet seen to refuse is sent a request without a token
    /// (all at once, each within `--timeout`) to tell, unless `--no-probe`.
    Status {
        /// Tell from the token store only: send no request to the upstreams.
        #[arg(long)]
        no_probe: bool,
        /// How long each upstream's request may take, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 5)]
        timeout: u64,
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
        Command::Login {
            name,
            force,
            config,
        } => login(name, *force, config),
        Command::Logout { name, config } => logout(name, config),
        Command::Status {
            no_probe,
            timeout,
            config,
        } => status(config, !*no_probe, Duration::from_secs(*timeout)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpx auth: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why an `mcpx auth` command failed.
#[derive(Debug, thiserror::Error)]
enum AuthError {
    /// The configuration could not be read.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// No upstream has the name.
    #[error("no upstream named {name:?} in the configuration (it has: {})", names.join(", "))]
    NoSuchUpstream { name: String, names: Vec<String> },
    /// The upstream is a stdio server.
    #[error("upstream {0} is a stdio server; it takes no OAuth login")]
    Stdio(String),
    /// The upstream is authorized otherwise.
    #[error("upstream {name} takes no user login: {why}")]
    NoUserLogin { name: String, why: &'static str },
    /// The upstream's URL does not parse.
    #[error("upstream {name}: its URL: {source}")]
    Url {
        name: String,
        source: url::ParseError,
    },
    /// No runtime could be started.
    #[error("cannot start a runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// A request without a token was not refused.
    #[error(
        "upstream {name} does not ask for authorization (a request without a token got HTTP {status}, not 401); no login needed (`mcpx auth login {name} --force` logs in anyway)"
    )]
    NotAsked { name: String, status: u16 },
    /// The upstream could not be reached to ask.
    #[error(
        "upstream {name} cannot be reached to tell whether it asks for authorization: {why} (`mcpx auth login {name} --force` tries the login anyway)"
    )]
    Unreachable { name: String, why: String },
    /// The login failed.
    #[error("upstream {name}: {source}")]
    Login {
        name: String,
        source: mcpx_transport::TransportError,
    },
    /// The tokens could not be deleted.
    #[error("upstream {name}: {source}")]
    Logout {
        name: String,
        source: mcpx_transport::oauth::store::StoreError,
    },
}

fn load(c: &ConfigArg) -> Result<Config, AuthError> {
    Ok(config::load(c.config.as_deref()).map(|(_, c)| c)?)
}

/// The upstream `name`'s URL, whether it is HTTP+SSE, and its authorization-code
/// settings; or why it takes no login.
fn user_upstream<'a>(
    config: &'a Config,
    name: &str,
) -> Result<(&'a ServerConfig, Url, bool, &'a UserAuth), AuthError> {
    let Some(s) = config.servers.get(name) else {
        return Err(AuthError::NoSuchUpstream {
            name: name.to_owned(),
            names: config.servers.keys().cloned().collect(),
        });
    };
    let (url, sse) = match &s.transport {
        Transport::Http { url, .. } => (url, false),
        Transport::Sse { url, .. } => (url, true),
        Transport::Stdio { .. } => {
            return Err(AuthError::Stdio(name.to_owned()));
        }
    };
    let Some(user) = &s.mcpx.user_auth else {
        return Err(AuthError::NoUserLogin {
            name: name.to_owned(),
            why: if s.mcpx.oauth.is_some() {
                "it uses the client_credentials grant (mcpx.oauth), which needs none"
            } else {
                "its headers give an Authorization of their own"
            },
        });
    };
    let url = Url::parse(url).map_err(|source| AuthError::Url {
        name: name.to_owned(),
        source,
    })?;
    Ok((s, url, sse, user))
}

fn runtime() -> Result<tokio::runtime::Runtime, AuthError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AuthError::Runtime)
}

/// How long `mcpx auth login`'s requests may take.
const LOGIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

fn login(name: &str, force: bool, c: &ConfigArg) -> Result<(), AuthError> {
    let config = load(c)?;
    let (server, url, sse, user) = user_upstream(&config, name)?;
    // A step-up a refusal asked for, beside what was granted.
    let extra = code::wanted_scope(user, url.as_str()).unwrap_or_default();
    let http = code::Http::with_proxy(&server.mcpx.proxy, LOGIN_REQUEST_TIMEOUT);
    let rt = runtime()?;
    // An upstream known to ask (tokens stored, a 401 recorded) goes to the login at
    // once; any other is asked first, so that one that needs no login gets none.
    let known = !force
        && (matches!(code::stored(user, url.as_str()), Ok(Some(_)))
            || matches!(code::asked(user, url.as_str()), Ok(Some(_))));
    let challenge = if force || known {
        None
    } else {
        match rt.block_on(code::probe_authorization(&http, &url, sse)) {
            Asks::Yes(challenge) => {
                code::record_asked(user, url.as_str(), challenge.is_some());
                challenge
            }
            Asks::No(status) => {
                return Err(AuthError::NotAsked {
                    name: name.to_owned(),
                    status,
                });
            }
            Asks::Unreachable(why) => {
                return Err(AuthError::Unreachable {
                    name: name.to_owned(),
                    why,
                });
            }
        }
    };
    let record = rt
        .block_on(code::login(&http, user, &url, sse, challenge, &extra))
        .map_err(|source| AuthError::Login {
            name: name.to_owned(),
            source,
        })?;
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

fn logout(name: &str, c: &ConfigArg) -> Result<(), AuthError> {
    let config = load(c)?;
    let (_, url, _, user) = user_upstream(&config, name)?;
    match code::logout(user, url.as_str()) {
        Ok(true) => println!("upstream {name}: logged out; its tokens are deleted"),
        Ok(false) => println!("upstream {name}: no tokens were stored"),
        Err(source) => {
            return Err(AuthError::Logout {
                name: name.to_owned(),
                source,
            });
        }
    }
    Ok(())
}

fn status(c: &ConfigArg, probe: bool, timeout: Duration) -> Result<(), AuthError> {
    let config = load(c)?;
    let width = config.servers.keys().map(String::len).max().unwrap_or(0);
    // The upstreams to send a request without a token: those of a user's
    // authorization with no tokens stored and no 401 recorded. All at once.
    let mut unknown = Vec::new();
    if probe {
        for (name, s) in &config.servers {
            if let (Some(user), None, Some((url, sse))) =
                (&s.mcpx.user_auth, &s.mcpx.oauth, http_url(&s.transport))
                && matches!(code::stored(user, url), Ok(None))
                && matches!(code::asked(user, url), Ok(None))
                && let Ok(parsed) = Url::parse(url)
            {
                unknown.push((name.as_str(), s, user, parsed, sse));
            }
        }
    }
    let answers: Vec<(&str, Asks)> = if unknown.is_empty() {
        Vec::new()
    } else {
        runtime()?.block_on(futures_util::future::join_all(unknown.iter().map(
            |(name, s, user, url, sse)| async move {
                let http = code::Http::with_proxy(&s.mcpx.proxy, timeout);
                let asks =
                    tokio::time::timeout(timeout, code::probe_authorization(&http, url, *sse))
                        .await
                        .unwrap_or_else(|_| {
                            Asks::Unreachable(format!("no answer within {} s", timeout.as_secs()))
                        });
                if let Asks::Yes(challenge) = &asks {
                    code::record_asked(user, url.as_str(), challenge.is_some());
                }
                (*name, asks)
            },
        )))
    };
    for (name, s) in &config.servers {
        let login = format!("`mcpx auth login {name}`");
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
                        Ok(Some(t)) => {
                            let state = match t.expires_at {
                                Some(e) if e <= now() && t.refresh_token.is_none() => {
                                    format!("expired; needs login ({login})")
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
                        Ok(None) => match answers.iter().find(|(n, _)| n == name) {
                            Some((_, Asks::Yes(_))) => format!(
                                "needs login ({login}): it refuses a request without a token (HTTP 401)"
                            ),
                            Some((_, Asks::No(status))) => format!(
                                "not needed so far: it answers a request without a token (HTTP {status}), no 401 seen"
                            ),
                            Some((_, Asks::Unreachable(why))) => format!(
                                "not needed so far: no 401 seen (it cannot be reached now: {why})"
                            ),
                            None => match code::asked(user, url) {
                                Ok(Some(a)) => format!(
                                    "needs login ({login}): it asked for authorization (HTTP 401, first at {})",
                                    utc(a.at)
                                ),
                                Ok(None) => "not needed so far: no 401 seen from it".to_owned(),
                                Err(e) => format!("token store unreadable: {e}"),
                            },
                        },
                    },
                }
            }
        };
        println!("{name:width$}  {line}");
    }
    Ok(())
}

/// An HTTP upstream's URL and whether it is HTTP+SSE; `None` for a stdio one.
fn http_url(t: &Transport) -> Option<(&str, bool)> {
    match t {
        Transport::Http { url, .. } => Some((url, false)),
        Transport::Sse { url, .. } => Some((url, true)),
        Transport::Stdio { .. } => None,
    }
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
