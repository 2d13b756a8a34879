//! An upstream's `mcpx.oauth`: the client credentials grant or a user's
//! authorization, each checked against the upstream's transport.

use super::file::FileOauth;
use super::parse::has_authorization;
use super::*;

/// What an upstream's `mcpx.oauth` configures.
pub(super) enum Grant {
    /// The client credentials grant.
    Client(ClientCredentials),
    /// A user's authorization (authorization code).
    User(UserAuth),
}

/// An upstream's `mcpx.oauth`: `grant` is `client_credentials` (the default when a
/// secret or key is given) or `authorization_code` (else the default).
pub(super) fn grant(
    o: FileOauth,
    name: &str,
    transport: &Transport,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<Grant, ConfigError> {
    // A secret, a key or a token endpoint says client credentials.
    let has_secret = o.client_secret.is_some()
        || o.client_secret_env.is_some()
        || o.private_key_file.is_some()
        || o.token_url.is_some();
    match o.grant.as_deref() {
        Some("client_credentials") => client_credentials(o, transport, err).map(Grant::Client),
        None if has_secret => client_credentials(o, transport, err).map(Grant::Client),
        Some("authorization_code") | None => user_auth(o, name, transport, err).map(Grant::User),
        Some(other) => Err(err(&format!(
            "mcpx.oauth.grant is \"authorization_code\" or \"client_credentials\", not {other:?}"
        ))),
    }
}

/// The authorization-code grant's settings, for an `http` or `sse` upstream without
/// its own `Authorization` header.
fn user_auth(
    o: FileOauth,
    name: &str,
    transport: &Transport,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<UserAuth, ConfigError> {
    match transport {
        Transport::Http { headers, .. } | Transport::Sse { headers, .. }
            if has_authorization(headers) =>
        {
            return Err(err(
                "mcpx.oauth and an Authorization header both give the upstream's credential; keep one",
            ));
        }
        Transport::Http { .. } | Transport::Sse { .. } => {}
        Transport::Stdio { .. } => {
            return Err(err("mcpx.oauth is for http and sse upstreams"));
        }
    }
    if o.token_url.is_some() || o.private_key_file.is_some() {
        return Err(err(
            "mcpx.oauth.tokenUrl and privateKeyFile are for the client_credentials grant; the authorization_code grant discovers its endpoints",
        ));
    }
    if let Some(u) = &o.client_metadata_url
        && !u.starts_with("https://")
    {
        return Err(err("mcpx.oauth.clientMetadataUrl must be an https:// URL"));
    }
    let client_secret = match (o.client_secret, o.client_secret_env) {
        (Some(s), None) => Some(s),
        (None, Some(var)) => Some(secret_from_env(&var, err)?),
        (None, None) => None,
        (Some(_), Some(_)) => {
            return Err(err(
                "mcpx.oauth takes one of clientSecret and clientSecretEnv, not both",
            ));
        }
    };
    if client_secret.is_some() && o.client_id.is_none() {
        return Err(err("mcpx.oauth.clientSecret needs a clientId"));
    }
    if o.callback_port == Some(0) {
        return Err(err("mcpx.oauth.callbackPort must be a port (1-65535)"));
    }
    Ok(UserAuth {
        upstream: name.to_owned(),
        client_id: o.client_id,
        client_secret,
        client_metadata_url: o.client_metadata_url,
        scope: o.scope,
        callback_port: o.callback_port,
        store: None,
    })
}

/// An upstream's `mcpx.oauth` client credentials: for an `http` upstream without its
/// own `Authorization` header, with the secret given once (inline, by the environment
/// variable naming it, read now, or as a private key's file, read now).
fn client_credentials(
    o: FileOauth,
    transport: &Transport,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<ClientCredentials, ConfigError> {
    match transport {
        Transport::Http { headers, .. } if has_authorization(headers) => {
            return Err(err(
                "mcpx.oauth and an Authorization header both give the upstream's credential; keep one",
            ));
        }
        Transport::Http { .. } => {}
        _ => {
            return Err(err(
                "mcpx.oauth's client_credentials grant is for http upstreams (Streamable HTTP)",
            ));
        }
    }
    if o.client_metadata_url.is_some() || o.callback_port.is_some() {
        return Err(err(
            "mcpx.oauth.clientMetadataUrl and callbackPort are for the authorization_code grant",
        ));
    }
    let Some(client_id) = o.client_id else {
        return Err(err(
            "mcpx.oauth's client_credentials grant needs a clientId",
        ));
    };
    if let Some(t) = &o.token_url
        && !(t.starts_with("https://") || t.starts_with("http://"))
    {
        return Err(err(
            "mcpx.oauth.tokenUrl must be an http:// or https:// URL",
        ));
    }
    let (client_secret, private_key) = client_secret(
        o.client_secret,
        o.client_secret_env,
        o.private_key_file,
        err,
    )?;
    Ok(ClientCredentials {
        token_url: o.token_url,
        client_id,
        client_secret,
        private_key,
        scope: o.scope,
    })
}

/// The client credentials grant's secret, given once: inline, by the environment
/// variable naming it (read now), or as a private key's file (read now, and checked).
/// A key gives an empty secret.
fn client_secret(
    secret: Option<String>,
    env: Option<String>,
    key_file: Option<PathBuf>,
    err: &dyn Fn(&str) -> ConfigError,
) -> Result<(String, Option<String>), ConfigError> {
    match (secret, env, key_file) {
        (Some(s), None, None) => Ok((s, None)),
        (None, Some(var), None) => Ok((secret_from_env(&var, err)?, None)),
        (None, None, Some(path)) => {
            let key_err = |e: &dyn std::fmt::Display| {
                err(&format!(
                    "mcpx.oauth.privateKeyFile {}: {e}",
                    path.display()
                ))
            };
            let pem = std::fs::read_to_string(&path).map_err(|e| key_err(&e))?;
            mcpx_transport::oauth::check_private_key(&pem).map_err(|e| key_err(&e))?;
            Ok((String::new(), Some(pem)))
        }
        _ => Err(err(
            "mcpx.oauth needs exactly one of clientSecret, clientSecretEnv and privateKeyFile",
        )),
    }
}

/// The value of `mcpx.oauth.clientSecretEnv`'s variable.
fn secret_from_env(var: &str, err: &dyn Fn(&str) -> ConfigError) -> Result<String, ConfigError> {
    std::env::var(var).map_err(|_| {
        err(&format!(
            "mcpx.oauth.clientSecretEnv names {var}, which is not set"
        ))
    })
}
