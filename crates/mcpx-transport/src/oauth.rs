//! OAuth 2.0 client credentials for a Streamable HTTP upstream (the MCP extension
//! `io.modelcontextprotocol/oauth-client-credentials`, client secret form; RFC 6749
//! §4.4): mcpx, as a machine client with no user present, gets an access token from
//! the configured token endpoint and sends it as `Authorization: Bearer` on every
//! request to the upstream.
//!
//! * The token request is a `POST` of `grant_type=client_credentials`, the configured
//!   `scope` if any, and `resource` (the upstream's URL, RFC 8707, as
//!   2025-06-18 basic/authorization §Resource Parameter Implementation requires), the
//!   client authenticating with HTTP Basic (`client_secret_basic`, RFC 6749 §2.3.1).
//! * The token is kept until 30 s before the `expires_in` the server gave (for an hour
//!   when it gave none), then fetched again; one fetch at a time, however many requests
//!   wait for it.
//! * A 401 from the upstream to a request that carried a token drops that token: the
//!   request is sent once more with a new one (the token may have been revoked or
//!   expired early). A second 401 is the answer.
//!
//! The token endpoint is the configured one (`tokenUrl`), else discovered as the
//! authorization pages prescribe (2025-11-25 basic/authorization §Authorization Server
//! Discovery): the upstream's Protected Resource Metadata (RFC 9728) at the
//! `resource_metadata` of its 401 challenge, else at its well-known URIs (path-inserted,
//! then root), names the authorization server; that server's metadata (RFC 8414, then
//! OpenID Connect Discovery, with path insertion, then appending) names its
//! `token_endpoint`. The scope asked for is the configured one, else the challenge's.

pub mod code;
pub mod store;

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request};
use url::Url;

use crate::error::TransportError;
use crate::http_client::{Endpoint, HttpClient, read_bounded};

/// What a client-credentials grant needs.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCredentials {
    /// The authorization server's token endpoint; discovered when `None`.
    pub token_url: Option<String>,
    /// The client's id.
    pub client_id: String,
    /// The client's secret (empty when it authenticates with `private_key`).
    pub client_secret: String,
    /// A PKCS#8 PEM EC P-256 private key: the client authenticates with a JWT it signs
    /// (`private_key_jwt`, RFC 7523 §2.2, ES256) instead of the secret.
    pub private_key: Option<String>,
    /// The scope to ask for (space-separated), if any.
    pub scope: Option<String>,
}

impl std::fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret stays out of logs.
        f.debug_struct("ClientCredentials")
            .field("token_url", &self.token_url)
            .field("client_id", &self.client_id)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// Where an upstream's tokens come from.
#[derive(Debug, Clone)]
pub(crate) enum Tokens {
    /// The client credentials grant.
    Client(Arc<TokenSource>),
    /// A user's authorization, from the store.
    User(Arc<code::UserTokens>),
}

impl Tokens {
    /// The tokens of an upstream at `url` configured with `credentials` or `user`
    /// (the former wins; neither: none).
    pub(crate) fn new(
        credentials: Option<&ClientCredentials>,
        user: Option<&code::UserAuth>,
        url: &Url,
        sse: bool,
        client: &HttpClient,
        proxy: &crate::proxy::Proxy,
        timeout: Duration,
    ) -> Result<Option<Tokens>, TransportError> {
        Ok(match (credentials, user) {
            (Some(c), _) => Some(Tokens::Client(TokenSource::new(
                c.clone(),
                url,
                client.clone(),
                proxy,
                timeout,
            )?)),
            (None, Some(u)) => Some(Tokens::User(code::UserTokens::new(
                u.clone(),
                url,
                sse,
                code::Http::new(client.clone(), proxy, timeout),
            ))),
            (None, None) => None,
        })
    }

    /// Whether a request goes without a token, known without waiting: a user's
    /// authorization of which the store holds no token (most upstreams: any HTTP
    /// upstream without an `oauth` block has one, for the 401 that may come).
    pub(crate) fn none_yet(&self) -> bool {
        match self {
            Tokens::Client(_) => false,
            Tokens::User(t) => t.none_stored(),
        }
    }

    /// The `Authorization` value for a request about to be sent, if there is one yet.
    pub(crate) async fn upfront(&self) -> Result<Option<HeaderValue>, TransportError> {
        match self {
            Tokens::Client(t) => t.upfront().await,
            Tokens::User(t) => t.upfront().await,
        }
    }

    /// Whether a refusal with `status`, after `attempt` replacements, gets another
    /// token: client credentials replace a refused token once (401); a user's
    /// authorization also steps up on a 403, a bounded number of times.
    pub(crate) fn retries(&self, status: u16, attempt: u32) -> bool {
        match self {
            Tokens::Client(_) => status == 401 && attempt == 0,
            Tokens::User(_) => match status {
                401 => attempt == 0,
                403 => attempt <= code::MAX_STEP_UP,
                _ => false,
            },
        }
    }

    /// A new `Authorization` value after the upstream refused `stale`.
    pub(crate) async fn refused(
        &self,
        status: u16,
        stale: Option<&HeaderValue>,
        challenge: Option<&str>,
        attempt: u32,
    ) -> Result<HeaderValue, TransportError> {
        match self {
            Tokens::Client(t) => t.authorization(stale, challenge).await,
            Tokens::User(t) => t.refused(status, stale, challenge, attempt).await,
        }
    }
}

/// The most of a token endpoint's answer that is read.
const MAX_TOKEN_ANSWER: usize = 64 * 1024;

/// How long before its expiry a token is replaced.
const MARGIN: Duration = Duration::from_secs(30);

/// A token's lifetime when the server does not say.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);

/// The longest lifetime a token is kept for, whatever the server says: a year. An
/// `expires_in` near `u64::MAX` seconds would not fit in an `Instant`.
pub const MAX_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// Tokens for one upstream.
#[derive(Debug)]
pub(crate) struct TokenSource {
    credentials: ClientCredentials,
    /// The upstream's URL: `resource`, and where its metadata is looked for.
    resource: Url,
    client: HttpClient,
    proxy: crate::proxy::Proxy,
    timeout: Duration,
    /// The lock is held across a fetch (and a discovery), so that waiting requests
    /// share one.
    state: tokio::sync::Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The token endpoint: configured, or once discovered.
    endpoint: Option<(Endpoint, String)>,
    /// The authorization server's issuer, once discovered (a client assertion's
    /// audience).
    issuer: Option<String>,
    /// The current token (`Authorization` value) and when to stop using it.
    token: Option<(HeaderValue, Instant)>,
}

/// The most of a metadata document that is read.
const MAX_METADATA: usize = 256 * 1024;

impl TokenSource {
    /// A source for the upstream at `resource`, fetching through `client`.
    pub(crate) fn new(
        credentials: ClientCredentials,
        resource: &Url,
        client: HttpClient,
        proxy: &crate::proxy::Proxy,
        timeout: Duration,
    ) -> Result<Arc<TokenSource>, TransportError> {
        let mut state = State::default();
        if let Some(configured) = &credentials.token_url {
            let url = crate::http_client::parse_http_url(configured)
                .map_err(|e| TransportError::Io(format!("oauth tokenUrl: {e}")))?;
            state.endpoint = Some((Endpoint::new(&url, &[], proxy)?, configured.clone()));
        }
        let mut resource = resource.clone();
        resource.set_fragment(None);
        Ok(Arc::new(TokenSource {
            credentials,
            resource,
            client,
            proxy: proxy.clone(),
            timeout,
            state: tokio::sync::Mutex::new(state),
        }))
    }

    /// The `Authorization` value for a request about to be sent: the kept token while it
    /// is good, else a new one when the token endpoint is known; `None` while it is not
    /// (then the request goes without one, and its 401 says where to look).
    pub(crate) async fn upfront(&self) -> Result<Option<HeaderValue>, TransportError> {
        {
            let state = self.state.lock().await;
            if state.endpoint.is_none() && state.token.is_none() {
                return Ok(None);
            }
        }
        self.authorization(None, None).await.map(Some)
    }

    /// The `Authorization` value to send: the kept token while it is good, else a new
    /// one. `stale`: the token a request was just refused with (it is not used again),
    /// and `challenge` that refusal's `WWW-Authenticate`.
    pub(crate) async fn authorization(
        &self,
        stale: Option<&HeaderValue>,
        challenge: Option<&str>,
    ) -> Result<HeaderValue, TransportError> {
        let mut state = self.state.lock().await;
        if let Some((value, until)) = state.token.as_ref()
            && Instant::now() < *until
            && stale != Some(value)
        {
            return Ok(value.clone());
        }
        let challenge = challenge.and_then(mcpx_protocol::auth::main_challenge);
        if state.endpoint.is_none() {
            let found = self
                .discover(
                    challenge
                        .as_ref()
                        .and_then(|c| c.param("resource_metadata")),
                )
                .await?;
            let (found, issuer) = found;
            let endpoint = Endpoint::new(&found, &[], &self.proxy)?;
            tracing::info!(token_endpoint = %found, "oauth: discovered the token endpoint");
            state.endpoint = Some((endpoint, found.to_string()));
            state.issuer = Some(issuer);
        }
        let Some((endpoint, url)) = &state.endpoint else {
            return Err(TransportError::Io("oauth: no token endpoint".to_owned()));
        };
        let scope = (self.credentials.scope.as_deref())
            .or_else(|| challenge.as_ref().and_then(|c| c.param("scope")));
        let audience = state.issuer.clone().unwrap_or_else(|| url.clone());
        let (value, lifetime) = self.fetch(endpoint, url, scope, &audience).await?;
        let until = Instant::now() + lifetime.saturating_sub(MARGIN).max(Duration::from_secs(1));
        state.token = Some((value.clone(), until));
        Ok(value)
    }

    /// The token endpoint, from the upstream's Protected Resource Metadata (at
    /// `metadata`, the challenge's, else at the well-known URIs) and its authorization
    /// server's metadata.
    async fn discover(&self, metadata: Option<&str>) -> Result<(Url, String), TransportError> {
        let mut tried = Vec::new();
        let candidates = match metadata.map(Url::parse) {
            Some(Ok(u)) => vec![u],
            _ => resource_metadata_urls(&self.resource),
        };
        let mut issuer = None;
        for url in candidates {
            match self.get_json(&url).await {
                Ok(doc) => {
                    issuer = authorization_server(&doc);
                    if issuer.is_some() {
                        break;
                    }
                    tried.push(format!("{url} (no authorization_servers)"));
                }
                Err(why) => tried.push(format!("{url} ({why})")),
            }
        }
        let not_found = |tried: &[String]| {
            TransportError::Io(format!(
                "oauth: no token endpoint found (tried {}); set mcpx.oauth.tokenUrl",
                tried.join(", ")
            ))
        };
        let Some(issuer) = issuer else {
            return Err(not_found(&tried));
        };
        for url in authorization_server_metadata_urls(&issuer) {
            match self.get_json(&url).await {
                Ok(doc) => {
                    // RFC 8414 §3.3: metadata for another issuer is not this one's.
                    let named = doc.get("issuer").and_then(serde_json::Value::as_str);
                    if let Some(named) = named
                        && Url::parse(named).ok().as_ref() != Some(&issuer)
                    {
                        return Err(TransportError::Io(format!(
                            "oauth: the metadata at {url} names the issuer {named:?}, not {issuer}; refusing it"
                        )));
                    }
                    if let Some(t) = token_endpoint(&doc) {
                        return Ok((t, named.map_or_else(|| issuer.to_string(), str::to_owned)));
                    }
                    tried.push(format!("{url} (no token_endpoint)"));
                }
                Err(why) => tried.push(format!("{url} ({why})")),
            }
        }
        Err(not_found(&tried))
    }

    /// A JSON document by GET; why not, briefly.
    // Result<_, String>: the words are all a caller uses, in its TransportError.
    async fn get_json(&self, url: &Url) -> Result<serde_json::Value, String> {
        let endpoint = Endpoint::new(url, &[], &self.proxy).map_err(|e| e.to_string())?;
        let request = endpoint
            .request(Method::GET, Some("application/json"), Vec::new(), None)
            .map_err(|e| e.to_string())?;
        let resp = self
            .client
            .send(&endpoint, request, self.timeout, "oauth metadata")
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(format!("HTTP {status}"));
        }
        let (body, _) = read_bounded(resp, MAX_METADATA).await?;
        serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))
    }

    /// A token from the token endpoint `endpoint` (`url`), and how long it lasts.
    async fn fetch(
        &self,
        endpoint: &Endpoint,
        url: &str,
        scope: Option<&str>,
        audience: &str,
    ) -> Result<(HeaderValue, Duration), TransportError> {
        let failed =
            |why: String| TransportError::Io(format!("oauth: the token endpoint {url} {why}"));
        let enc = form_encode;
        let mut form = format!(
            "grant_type=client_credentials&resource={}",
            enc(self.resource.as_str())
        );
        if let Some(scope) = scope {
            form.push_str("&scope=");
            form.push_str(&enc(scope));
        }
        let basic = match &self.credentials.private_key {
            Some(pem) => {
                let jwt = client_assertion(pem, &self.credentials.client_id, audience)
                    .map_err(|e| failed(format!("could not be given a client assertion: {e}")))?;
                form.push_str(&format!(
                    "&client_id={}&client_assertion_type={}&client_assertion={}",
                    enc(&self.credentials.client_id),
                    enc("urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                    enc(&jwt)
                ));
                None
            }
            None => Some(basic_credentials(
                &self.credentials.client_id,
                &self.credentials.client_secret,
            )),
        };
        let mut request = Request::new(Full::new(Bytes::from(form)));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = endpoint.target().clone();
        let headers = request.headers_mut();
        if let Some(host) = endpoint.host_header() {
            headers.insert(hyper::header::HOST, host.clone());
        }
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(basic) = basic {
            let mut auth = HeaderValue::try_from(basic).map_err(|e| failed(e.to_string()))?;
            auth.set_sensitive(true);
            headers.insert(AUTHORIZATION, auth);
        }
        let resp = self
            .client
            .send(endpoint, request, self.timeout, "oauth token request")
            .await?;
        let status = resp.status().as_u16();
        let (body, _) = read_bounded(resp, MAX_TOKEN_ANSWER)
            .await
            .map_err(|e| failed(format!("answered unreadably: {e}")))?;
        token_answer(status, &body).map_err(failed)
    }
}

/// `s` encoded as `application/x-www-form-urlencoded` encodes a value (RFC 6749
/// Appendix B, which defers to the HTML form encoding): ASCII letters, digits and
/// `-`, `.`, `_`, `*` as they are, a space as `+`, every other byte of its UTF-8 as
/// `%XX`.
pub fn form_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The `Authorization` value of HTTP Basic client authentication (RFC 6749 §2.3.1):
/// the client id and secret each form-encoded (Appendix B), joined by `:`, in base64.
pub fn basic_credentials(client_id: &str, client_secret: &str) -> String {
    format!(
        "Basic {}",
        B64.encode(format!(
            "{}:{}",
            form_encode(client_id),
            form_encode(client_secret)
        ))
    )
}

/// Why a client assertion cannot be made with a key.
#[derive(Debug, thiserror::Error)]
pub enum AssertionError {
    /// The text holds no PEM block.
    #[error("no PEM block")]
    NoPem,
    /// The PEM block's body is not base64.
    #[error("the PEM block is not base64: {0}")]
    NotBase64(String),
    /// The PEM text is malformed otherwise (a block without its end, …).
    #[error("the PEM text is malformed: {0}")]
    Pem(#[source] rustls_pki_types::pem::Error),
    /// The key is not one ES256 signs with.
    #[error("not a PKCS#8 EC P-256 private key: {0}")]
    NotEs256(ring::error::KeyRejected),
    /// No random `jti`.
    #[error("no randomness: {0}")]
    Randomness(#[source] getrandom::Error),
    /// The signature failed.
    #[error("signing failed: {0}")]
    Signing(#[source] jsonwebtoken::errors::Error),
}

/// The DER of `pem`'s first block (any label), checked to be a PKCS#8 EC P-256
/// private key. ring checks it: jsonwebtoken would only when signing.
fn es256_key(pem: &str) -> Result<Vec<u8>, AssertionError> {
    use rustls_pki_types::pem::{Error, PemObject as _, SectionKind};
    let (_, der) =
        <(SectionKind, Vec<u8>)>::from_pem_slice(pem.as_bytes()).map_err(|e| match e {
            Error::NoItemsFound => AssertionError::NoPem,
            Error::Base64Decode(why) => AssertionError::NotBase64(why),
            other => AssertionError::Pem(other),
        })?;
    ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &der,
        &ring::rand::SystemRandom::new(),
    )
    .map_err(AssertionError::NotEs256)?;
    Ok(der)
}

/// Checks that `pem` is a key [`client_assertion`] can sign with: PKCS#8, EC P-256.
pub fn check_private_key(pem: &str) -> Result<(), AssertionError> {
    es256_key(pem).map(|_| ())
}

/// A client assertion (RFC 7523 §2.2, `private_key_jwt`): a JWT signed with ES256 by
/// `pem`'s key, `iss` and `sub` the client id, `aud` the authorization server
/// (`audience`), valid for five minutes, with a random `jti`.
pub fn client_assertion(
    pem: &str,
    client_id: &str,
    audience: &str,
) -> Result<String, AssertionError> {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
    let der = es256_key(pem)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut jti = [0u8; 16];
    getrandom::fill(&mut jti).map_err(AssertionError::Randomness)?;
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + 300,
        "jti": B64URL.encode(jti),
    });
    // `Header::new` gives `{"typ":"JWT","alg":"ES256"}`.
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256),
        &claims,
        &jsonwebtoken::EncodingKey::from_ec_der(&der),
    )
    .map_err(AssertionError::Signing)
}

/// Where an upstream's Protected Resource Metadata is looked for when its challenge
/// names none (RFC 9728 §3.1): the well-known segment between the host and the
/// resource's path, then at the root. Same origin as `resource`, no query.
pub fn resource_metadata_urls(resource: &Url) -> Vec<Url> {
    well_known("oauth-protected-resource", resource)
}

/// `/.well-known/{name}{path}`, then `/.well-known/{name}`, on `url`'s origin
/// (RFC 9728 §3.1, RFC 8414 §3.1), each once.
fn well_known(name: &str, url: &Url) -> Vec<Url> {
    let path = url.path().trim_end_matches('/');
    let mut out = Vec::new();
    for p in [
        format!("/.well-known/{name}{path}"),
        format!("/.well-known/{name}"),
    ] {
        let mut u = url.clone();
        u.set_path(&p);
        u.set_query(None);
        u.set_fragment(None);
        if !out.contains(&u) {
            out.push(u);
        }
    }
    out
}

/// Where an authorization server's metadata is looked for, in the order of 2025-11-25
/// basic/authorization §Authorization Server Metadata Discovery: RFC 8414 then OpenID
/// Connect Discovery, with path insertion, then (OpenID only) appending. Same origin
/// as `issuer`, no query.
pub fn authorization_server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let at = |p: &str| {
        let mut u = issuer.clone();
        u.set_path(p);
        u.set_query(None);
        u.set_fragment(None);
        u
    };
    if path.is_empty() {
        vec![
            at("/.well-known/oauth-authorization-server"),
            at("/.well-known/openid-configuration"),
        ]
    } else {
        let mut urls = vec![
            at(&format!("/.well-known/oauth-authorization-server{path}")),
            at(&format!("/.well-known/openid-configuration{path}")),
        ];
        // An issuer whose path is itself `/.well-known/openid-configuration` gives this
        // one twice: each URL is looked for once.
        let appended = at(&format!("{path}/.well-known/openid-configuration"));
        if !urls.contains(&appended) {
            urls.push(appended);
        }
        urls
    }
}

/// The authorization server a Protected Resource Metadata document names (RFC 9728
/// §2 `authorization_servers`, the first), when it is a URL.
pub fn authorization_server(doc: &serde_json::Value) -> Option<Url> {
    doc.get("authorization_servers")
        .and_then(serde_json::Value::as_array)
        .and_then(|a| a.first())
        .and_then(serde_json::Value::as_str)
        .and_then(|s| Url::parse(s).ok())
}

/// The token endpoint an authorization server's metadata names (RFC 8414 §2
/// `token_endpoint`), when it is a URL.
pub fn token_endpoint(doc: &serde_json::Value) -> Option<Url> {
    doc.get("token_endpoint")
        .and_then(serde_json::Value::as_str)
        .and_then(|s| Url::parse(s).ok())
}

/// A token endpoint's answer (its status and body): the `Authorization` value to send
/// (`Bearer` and the access token, marked sensitive) and how long the token lasts
/// (`expires_in`, else an hour; at most [`MAX_LIFETIME`]); or why not, in words that
/// never quote the token.
// Result<_, String>: the words are all a caller uses (in its TransportError; the
// fuzz target checks they never quote the token).
pub fn token_answer(status: u16, body: &[u8]) -> Result<(HeaderValue, Duration), String> {
    let answer: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    if !(200..300).contains(&status) {
        // RFC 6749 §5.2: `error` and maybe `error_description`.
        let why = [answer.get("error"), answer.get("error_description")]
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
            .collect::<Vec<_>>()
            .join(": ");
        return Err(format!(
            "refused the client credentials (HTTP {status}{}{why})",
            if why.is_empty() { "" } else { ": " }
        ));
    }
    let Some(access) = answer
        .get("access_token")
        .and_then(serde_json::Value::as_str)
    else {
        return Err("answered without an access_token".to_owned());
    };
    // RFC 6749 §5.1 requires `token_type`; without one the token is taken for a Bearer
    // token, but one that is there and no string (`0`, `null`) says nothing of the kind.
    let kind = match answer.get("token_type") {
        None => "Bearer",
        Some(kind) => kind
            .as_str()
            .ok_or("issued a token whose token_type is not a string")?,
    };
    if !kind.eq_ignore_ascii_case("bearer") {
        return Err(format!("issued a {kind:?} token, not a Bearer one"));
    }
    let lifetime = answer
        .get("expires_in")
        .and_then(serde_json::Value::as_u64)
        .map_or(DEFAULT_LIFETIME, Duration::from_secs)
        .min(MAX_LIFETIME);
    let mut value = HeaderValue::try_from(format!("Bearer {access}"))
        .map_err(|e| format!("issued a token that is not a header value: {e}"))?;
    value.set_sensitive(true);
    Ok((value, lifetime))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;

    /// Found by the fuzz target: an issuer at `/.well-known/openid-configuration`
    /// gave `/.well-known/openid-configuration/.well-known/openid-configuration` twice.
    #[test]
    fn each_authorization_server_metadata_url_is_looked_for_once() {
        let issuer = Url::parse("http://128.0.0.1:9/.well-known/openid-configuration/").unwrap();
        let urls = super::authorization_server_metadata_urls(&issuer);
        let mut unique = urls.clone();
        unique.dedup();
        assert_eq!(urls.len(), 2, "{urls:?}");
        assert_eq!(urls, unique);
    }

    /// A PEM document of `der` under `label`.
    fn pem(label: &str, der: &[u8]) -> String {
        let body = B64.encode(der);
        let lines: Vec<&str> = (0..body.len())
            .step_by(64)
            .map(|at| &body[at..(at + 64).min(body.len())])
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            lines.join("\n")
        )
    }

    #[test]
    fn a_client_assertion_is_signed_by_the_key_with_its_claims() {
        use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let key = pem("PRIVATE KEY", pkcs8.as_ref());
        check_private_key(&key).unwrap();
        let jwt = client_assertion(&key, "the-client", "https://as.example/").unwrap();

        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        validation.set_audience(&["https://as.example/"]);
        validation.set_issuer(&["the-client"]);
        validation.set_required_spec_claims(&["exp", "iss", "sub", "aud"]);
        let public = jsonwebtoken::DecodingKey::from_ec_der(pair.public_key().as_ref());
        let token = jsonwebtoken::decode::<serde_json::Value>(&jwt, &public, &validation).unwrap();
        assert_eq!(token.header.alg, jsonwebtoken::Algorithm::ES256);
        assert_eq!(token.header.typ.as_deref(), Some("JWT"));
        let c = &token.claims;
        assert_eq!(c["sub"], "the-client");
        let (iat, exp) = (c["iat"].as_u64().unwrap(), c["exp"].as_u64().unwrap());
        assert_eq!(exp, iat + 300);
        let jti = B64URL.decode(c["jti"].as_str().unwrap()).unwrap();
        assert_eq!(jti.len(), 16);
        let mut names: Vec<&str> = c.as_object().unwrap().keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["aud", "exp", "iat", "iss", "jti", "sub"]);

        // Another key's public half does not verify it.
        let other = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let other =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, other.as_ref(), &rng)
                .unwrap();
        let wrong = jsonwebtoken::DecodingKey::from_ec_der(other.public_key().as_ref());
        assert!(jsonwebtoken::decode::<serde_json::Value>(&jwt, &wrong, &validation).is_err());
    }

    #[test]
    fn a_key_that_is_not_pkcs8_p256_is_refused() {
        let rng = ring::rand::SystemRandom::new();
        let ed25519 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let e = check_private_key(&pem("PRIVATE KEY", ed25519.as_ref())).unwrap_err();
        assert!(matches!(e, AssertionError::NotEs256(_)), "{e}");
        assert!(
            e.to_string()
                .starts_with("not a PKCS#8 EC P-256 private key: "),
            "{e}"
        );
        let e = check_private_key("no key here").unwrap_err();
        assert_eq!(e.to_string(), "no PEM block");
        let e = check_private_key("-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n")
            .unwrap_err();
        assert!(
            e.to_string().starts_with("the PEM block is not base64: "),
            "{e}"
        );
        assert!(client_assertion("no key here", "c", "a").is_err());
    }

    #[test]
    fn a_token_answer_is_read_and_its_refusal_does_not_quote_it() {
        let (value, lifetime) = token_answer(
            200,
            br#"{"access_token":"t0k3n","token_type":"bearer","expires_in":60}"#,
        )
        .unwrap();
        assert_eq!(value.to_str().unwrap(), "Bearer t0k3n");
        assert!(value.is_sensitive());
        assert_eq!(lifetime, Duration::from_secs(60));
        let (_, lifetime) = token_answer(200, br#"{"access_token":"t"}"#).unwrap();
        assert_eq!(lifetime, DEFAULT_LIFETIME);
        // An `expires_in` of u64::MAX seconds made `authorization` panic adding it to
        // `Instant::now()`.
        let (_, lifetime) = token_answer(
            200,
            br#"{"access_token":"t","expires_in":18446744073709551615}"#,
        )
        .unwrap();
        assert_eq!(lifetime, MAX_LIFETIME);
        assert!(Instant::now().checked_add(lifetime).is_some());
        for (status, body, why) in [
            (
                401,
                &br#"{"error":"invalid_client","error_description":"no"}"#[..],
                "HTTP 401: invalid_client: no",
            ),
            (
                200,
                br#"{"token_type":"Bearer"}"#,
                "without an access_token",
            ),
            (
                200,
                br#"{"access_token":"secret","token_type":"mac"}"#,
                "\"mac\" token",
            ),
            (
                200,
                b"{\"access_token\":\"sec\\nret\"}",
                "not a header value",
            ),
            // Found by the oauth fuzz target: a token_type that is no string was taken
            // for a Bearer one.
            (
                200,
                br#"{"access_token":"secret","token_type":0}"#,
                "token_type is not a string",
            ),
            (
                200,
                br#"{"access_token":"secret","token_type":null}"#,
                "token_type is not a string",
            ),
        ] {
            let e = token_answer(status, body).unwrap_err();
            assert!(e.contains(why), "{e}");
            assert!(!e.contains("secret") && !e.contains("sec\nret"), "{e}");
        }
    }

    #[test]
    fn basic_credentials_are_form_encoded_as_rfc_6749_appendix_b_says() {
        // The conformance suite's client id: `-` stays as it is (it was sent as %2D).
        let decoded = |v: String| {
            let b64 = v.strip_prefix("Basic ").unwrap().to_owned();
            String::from_utf8(B64.decode(b64).unwrap()).unwrap()
        };
        assert_eq!(
            decoded(basic_credentials(
                "conformance-test-client",
                "conformance-test-secret"
            )),
            "conformance-test-client:conformance-test-secret"
        );
        assert_eq!(decoded(basic_credentials("a.b_c*d", "s p")), "a.b_c*d:s+p");
        // A colon in the id cannot be taken for the separator; non-ASCII is UTF-8.
        assert_eq!(
            decoded(basic_credentials("id:x", "é/+&")),
            "id%3Ax:%C3%A9%2F%2B%26"
        );
        assert_eq!(
            form_encode("https://h/mcp?a=b"),
            "https%3A%2F%2Fh%2Fmcp%3Fa%3Db"
        );
    }

    #[test]
    fn metadata_is_looked_for_on_the_same_origin() {
        let url = |s: &str| Url::parse(s).unwrap();
        let paths = |v: Vec<Url>| {
            v.iter()
                .map(Url::as_str)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            paths(resource_metadata_urls(&url("https://h:8443/api/mcp/?q=1"))),
            [
                "https://h:8443/.well-known/oauth-protected-resource/api/mcp",
                "https://h:8443/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(
            paths(resource_metadata_urls(&url("http://h/"))),
            ["http://h/.well-known/oauth-protected-resource"]
        );
        assert_eq!(
            paths(authorization_server_metadata_urls(&url("https://a/t1#x"))),
            [
                "https://a/.well-known/oauth-authorization-server/t1",
                "https://a/.well-known/openid-configuration/t1",
                "https://a/t1/.well-known/openid-configuration",
            ]
        );
        let doc = serde_json::json!({
            "authorization_servers": ["https://a/t1", "https://b"],
            "token_endpoint": "https://a/token",
        });
        assert_eq!(authorization_server(&doc), Some(url("https://a/t1")));
        assert_eq!(token_endpoint(&doc), Some(url("https://a/token")));
        assert_eq!(
            token_endpoint(&serde_json::json!({"token_endpoint": "no url"})),
            None
        );
    }
}
