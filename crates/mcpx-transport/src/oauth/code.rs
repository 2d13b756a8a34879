//! OAuth 2.1 authorization code with PKCE for an upstream that needs a user's
//! authorization (2025-03-26 … 2026-07-28 basic/authorization), and the tokens it
//! gives, kept in the user's [`Store`].
//!
//! * Discovery: the Protected Resource Metadata (RFC 9728) at the 401's
//!   `resource_metadata`, else at the well-known URIs (path-inserted, then root); its
//!   `resource` must be the upstream's URL or a prefix of it on the same origin. Its
//!   first authorization server's metadata (RFC 8414, then OpenID Connect, with their
//!   path variants) must carry that server's identifier as `issuer`. Without any
//!   Protected Resource Metadata the upstream is a 2025-03-26 one: its origin is the
//!   authorization server, whose metadata is at the root, else whose endpoints are
//!   `/authorize`, `/token` and `/register`.
//! * Registration, in the spec's order: the configured client id, a Client ID Metadata
//!   Document URL when the server says `client_id_metadata_document_supported`, a
//!   registration stored for that issuer, Dynamic Client Registration (RFC 7591).
//! * The authorization request carries PKCE S256, `state`, `resource` and the scope
//!   (configured, else the challenge's, else the metadata's `scopes_supported`, plus
//!   `offline_access` when the authorization server lists it); the response's `state`
//!   must match and its `iss` (RFC 9207) be the issuer, exactly, when present or
//!   advertised. The callback listener takes only a `GET /callback` with that `state`
//!   for the response: any other request gets an error page, and the wait goes on.
//! * Tokens are refreshed shortly before they expire, one refresh at a time per token
//!   set across processes (the store's lock, the store re-read after taking it).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request};
use serde_json::{Value, json};
use url::Url;

use super::store::{Asked, Binding, ClientRecord, Store, StoreError, TokenRecord};
use super::{
    authorization_server_metadata_urls, basic_credentials, form_encode, resource_metadata_urls,
};
use crate::error::TransportError;
use crate::http_client::{Endpoint, HttpClient, read_bounded};

/// What the authorization-code grant for one upstream is configured with
/// (`mcpx.oauth` with `grant: authorization_code`, or nothing: the defaults).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct UserAuth {
    /// The upstream's name, for messages (`mcpx auth login NAME`).
    pub upstream: String,
    /// A pre-registered client id (`mcpx.oauth.clientId`).
    pub client_id: Option<String>,
    /// Its secret, if it is a confidential client.
    pub client_secret: Option<String>,
    /// The URL of a Client ID Metadata Document mcpx is known by
    /// (`mcpx.oauth.clientMetadataUrl`).
    pub client_metadata_url: Option<String>,
    /// The scope to ask for (`mcpx.oauth.scope`), instead of the discovered one.
    pub scope: Option<String>,
    /// The callback listener's port (`mcpx.oauth.callbackPort`); else one derived
    /// from the upstream's name and URL.
    pub callback_port: Option<u16>,
    /// The token store's directory; else the default (XDG state directory).
    pub store: Option<PathBuf>,
}

impl std::fmt::Debug for UserAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserAuth")
            .field("upstream", &self.upstream)
            .field("client_id", &self.client_id)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scope", &self.scope)
            .field("callback_port", &self.callback_port)
            .finish_non_exhaustive()
    }
}

/// Whether this process may run the authorization flow by itself when an upstream
/// needs it (a person is at the keyboard: `mcpx tools|call|read|prompt`). `mcpx serve`
/// leaves it off: a call that needs authorization gets an error naming `mcpx auth
/// login`.
static INTERACTIVE: AtomicBool = AtomicBool::new(false);

/// Lets this process run the authorization flow when an upstream needs it.
pub fn allow_interactive_login(on: bool) {
    INTERACTIVE.store(on, Ordering::SeqCst);
}

fn interactive() -> bool {
    INTERACTIVE.load(Ordering::SeqCst)
}

/// How long before its expiry an access token is refreshed.
const REFRESH_MARGIN: u64 = 60;

/// How long a login waits for the browser's redirect, or for another process's login.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The most re-authorizations one request causes (step-up on 403 `insufficient_scope`).
pub(crate) const MAX_STEP_UP: u32 = 2;

/// The most of a metadata document or token answer that is read.
const MAX_BODY: usize = 256 * 1024;

/// An error of the flow, naming the upstream and the step.
fn failed(_cfg: &UserAuth, step: &str, why: impl std::fmt::Display) -> TransportError {
    TransportError::NeedsAuthorization(format!("OAuth {step}: {why}"))
}

/// The error of a call that needs a login this process may not run.
fn needs_login(cfg: &UserAuth, why: &str) -> TransportError {
    TransportError::NeedsAuthorization(format!(
        "needs authorization ({why}): run `mcpx auth login {}`",
        cfg.upstream
    ))
}

fn store_err(cfg: &UserAuth, e: StoreError) -> TransportError {
    failed(cfg, "token store", e)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The system gave no random bytes.
#[derive(Debug, thiserror::Error)]
#[error("no randomness: {0}")]
struct NoRandomness(#[source] getrandom::Error);

fn random_b64(n: usize) -> Result<String, NoRandomness> {
    let mut b = vec![0u8; n];
    getrandom::fill(&mut b).map_err(NoRandomness)?;
    Ok(B64URL.encode(b))
}

/// The S256 code challenge of a PKCE verifier (RFC 7636 §4.2).
pub fn code_challenge(verifier: &str) -> String {
    B64URL.encode(ring::digest::digest(
        &ring::digest::SHA256,
        verifier.as_bytes(),
    ))
}

/// The callback port of an upstream: the configured one, else one of 61000–65499
/// derived from its name and URL (stable, so a registration's `redirect_uri` stays
/// valid; outside Linux's default ephemeral range).
pub fn callback_port(cfg: &UserAuth, url: &str) -> u16 {
    if let Some(p) = cfg.callback_port {
        return p;
    }
    let d = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{}\0{url}", cfg.upstream).as_bytes(),
    );
    let n = u16::from_be_bytes([d.as_ref()[0], d.as_ref()[1]]);
    61000 + n % 4500
}

/// The redirect URI the callback listener answers.
pub fn redirect_uri(port: u16) -> String {
    format!("http://127.0.0.1:{port}/callback")
}

/// The store `cfg` names, else the default one.
pub fn store_of(cfg: &UserAuth) -> Result<Store, StoreError> {
    match &cfg.store {
        Some(d) => Ok(Store::at(d)),
        None => Store::default_location(),
    }
}

/// The scopes of a space-separated list, each once, in order.
fn scopes(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in s.split_ascii_whitespace() {
        if !out.iter().any(|o| o == w) {
            out.push(w.to_owned());
        }
    }
    out
}

fn union(a: &str, b: &str) -> String {
    scopes(&format!("{a} {b}")).join(" ")
}

/// Whether every scope of `want` is among `have`.
fn covers(have: &str, want: &str) -> bool {
    let have = scopes(have);
    scopes(want).iter().all(|w| have.contains(w))
}

/// HTTP for the flow: GETs of metadata, POSTs of forms and JSON.
#[derive(Debug, Clone)]
pub struct Http {
    client: HttpClient,
    proxy: crate::proxy::Proxy,
    timeout: Duration,
}

/// An answer: status and body.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

impl Http {
    pub(crate) fn new(client: HttpClient, proxy: &crate::proxy::Proxy, timeout: Duration) -> Http {
        Http {
            client,
            proxy: proxy.clone(),
            timeout,
        }
    }

    /// A client of its own (for `mcpx auth`).
    pub fn standalone(timeout: Duration) -> Http {
        Http::with_proxy(&crate::proxy::Proxy::default(), timeout)
    }

    /// A client of its own whose connections go as `proxy` says (an upstream's).
    pub fn with_proxy(proxy: &crate::proxy::Proxy, timeout: Duration) -> Http {
        Http::new(
            HttpClient::new(Duration::from_secs(10), Duration::from_secs(5), 4),
            proxy,
            timeout,
        )
    }

    // Result<_, String>: the words are all a caller uses, in its TransportError.
    async fn send(
        &self,
        url: &Url,
        method: Method,
        content_type: Option<&'static str>,
        authorization: Option<String>,
        body: Vec<u8>,
        what: &str,
    ) -> Result<Answer, String> {
        let endpoint = Endpoint::new(url, &[], &self.proxy).map_err(|e| e.to_string())?;
        let mut request = Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = method;
        *request.uri_mut() = endpoint.target().clone();
        let headers = request.headers_mut();
        if let Some(host) = endpoint.host_header() {
            headers.insert(hyper::header::HOST, host.clone());
        }
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(ct) = content_type {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(ct));
        }
        if let Some(a) = authorization {
            let mut v = HeaderValue::try_from(a).map_err(|e| e.to_string())?;
            v.set_sensitive(true);
            headers.insert(AUTHORIZATION, v);
        }
        let resp = self
            .client
            .send(&endpoint, request, self.timeout, what)
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        if (300..400).contains(&status) {
            let to = resp
                .headers()
                .get(hyper::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .unwrap_or("?")
                .to_owned();
            return Err(format!(
                "{url} redirected (HTTP {status}) to {to}; mcpx follows no redirection here"
            ));
        }
        let (body, _) = read_bounded(resp, MAX_BODY).await?;
        Ok(Answer { status, body })
    }

    /// A JSON object by GET; why not, briefly.
    // Result<_, String>: the words are all a caller uses, in its TransportError.
    async fn get_json(&self, url: &Url) -> Result<Value, String> {
        let a = self
            .send(url, Method::GET, None, None, Vec::new(), "oauth metadata")
            .await?;
        if !(200..300).contains(&a.status) {
            return Err(format!("HTTP {}", a.status));
        }
        let v: Value = serde_json::from_slice(&a.body).map_err(|e| format!("not JSON: {e}"))?;
        if !v.is_object() {
            return Err("not a JSON object".to_owned());
        }
        Ok(v)
    }
}

/// What discovery found for an upstream.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The resource identifier to ask tokens for (RFC 8707): the Protected Resource
    /// Metadata's `resource` exactly, else the upstream's URL.
    pub resource: String,
    /// The authorization server's `issuer`.
    pub issuer: String,
    authorization_endpoint: Url,
    token_endpoint: Url,
    registration_endpoint: Option<Url>,
    /// The authorization server's `scopes_supported`.
    as_scopes: Option<String>,
    /// The Protected Resource Metadata's `scopes_supported`.
    prm_scopes: Option<String>,
    auth_methods: Vec<String>,
    grant_types: Option<Vec<String>>,
    iss_supported: bool,
    cimd: bool,
}

fn str_list(v: Option<&Value>) -> Option<Vec<String>> {
    v.and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    })
}

/// Whether a Protected Resource Metadata `resource` names the upstream at `url`: the
/// same origin, and a path that is the upstream's or a prefix of it (segment-wise).
pub fn resource_matches(resource: &str, url: &Url) -> bool {
    let Ok(r) = Url::parse(resource) else {
        return false;
    };
    if r.origin() != url.origin() || r.fragment().is_some() {
        return false;
    }
    let rp = r.path().trim_end_matches('/');
    let up = url.path().trim_end_matches('/');
    up == rp || up.starts_with(&format!("{rp}/"))
}

/// The upstream's URL as a resource identifier: no fragment.
fn canonical(url: &Url) -> String {
    let mut u = url.clone();
    u.set_fragment(None);
    u.to_string()
}

/// The origin of `url` as an issuer identifier (`scheme://host[:port]`).
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// Discovery for the upstream at `url`, given the `WWW-Authenticate` of its refusal.
pub(crate) async fn discover(
    http: &Http,
    cfg: &UserAuth,
    url: &Url,
    challenge: Option<&str>,
) -> Result<Discovered, TransportError> {
    let challenge = challenge.and_then(mcpx_protocol::auth::main_challenge);
    let candidates = match challenge
        .as_ref()
        .and_then(|c| c.param("resource_metadata"))
        .map(Url::parse)
    {
        Some(Ok(u)) => vec![u],
        _ => resource_metadata_urls(url),
    };
    let mut prm = None;
    let mut tried = Vec::new();
    for u in candidates {
        match http.get_json(&u).await {
            Ok(doc) => {
                prm = Some((u, doc));
                break;
            }
            Err(why) => tried.push(format!("{u} ({why})")),
        }
    }
    let Some((prm_url, prm)) = prm else {
        tracing::info!(upstream = %cfg.upstream, tried = %tried.join(", "), "oauth: no protected resource metadata; taking the upstream for a 2025-03-26 one");
        return legacy(http, cfg, url).await;
    };
    let resource = match prm.get("resource") {
        None => canonical(url),
        Some(Value::String(r)) if resource_matches(r, url) => r.clone(),
        Some(other) => {
            return Err(failed(
                cfg,
                "discovery",
                format!(
                    "the protected resource metadata at {prm_url} is for the resource {other}, not {url}; refusing to authorize for it"
                ),
            ));
        }
    };
    let Some(issuer) = prm
        .get("authorization_servers")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return Err(failed(
            cfg,
            "discovery",
            format!("the protected resource metadata at {prm_url} names no authorization_servers"),
        ));
    };
    let issuer_url = Url::parse(&issuer).map_err(|e| {
        failed(
            cfg,
            "discovery",
            format!("the authorization server {issuer:?} is no URL: {e}"),
        )
    })?;
    let mut found = None;
    for u in authorization_server_metadata_urls(&issuer_url) {
        match http.get_json(&u).await {
            Ok(doc) => {
                found = Some((u, doc));
                break;
            }
            Err(why) => tried.push(format!("{u} ({why})")),
        }
    }
    let Some((meta_url, meta)) = found else {
        return Err(failed(
            cfg,
            "discovery",
            format!(
                "no metadata for the authorization server {issuer} (tried {})",
                tried.join(", ")
            ),
        ));
    };
    let mut d = from_metadata(cfg, &issuer, &meta_url, &meta, resource)?;
    d.prm_scopes = str_list(prm.get("scopes_supported")).map(|v| v.join(" "));
    Ok(d)
}

/// Authorization server metadata as [`Discovered`], its `issuer` checked to be the one
/// it was fetched for (RFC 8414 §3.3).
fn from_metadata(
    cfg: &UserAuth,
    issuer: &str,
    meta_url: &Url,
    meta: &Value,
    resource: String,
) -> Result<Discovered, TransportError> {
    let bad = |why: String| {
        failed(
            cfg,
            "discovery",
            format!("the metadata at {meta_url} {why}"),
        )
    };
    match meta.get("issuer").and_then(Value::as_str) {
        Some(i) if i == issuer => {}
        Some(i) => {
            return Err(bad(format!(
                "names the issuer {i:?}, not {issuer:?}, the one it was fetched for; refusing it"
            )));
        }
        None => return Err(bad("has no issuer".to_owned())),
    }
    let endpoint = |key: &str| -> Result<Option<Url>, TransportError> {
        match meta.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => match Url::parse(s) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(Some(u)),
                _ => Err(bad(format!("has a {key} that is no http(s) URL: {s:?}"))),
            },
            Some(_) => Err(bad(format!("has a {key} that is no string"))),
        }
    };
    let Some(authorization_endpoint) = endpoint("authorization_endpoint")? else {
        return Err(bad("has no authorization_endpoint".to_owned()));
    };
    let Some(token_endpoint) = endpoint("token_endpoint")? else {
        return Err(bad("has no token_endpoint".to_owned()));
    };
    if let Some(methods) = str_list(meta.get("code_challenge_methods_supported"))
        && !methods.iter().any(|m| m == "S256")
    {
        return Err(bad(
            "does not offer PKCE S256 (code_challenge_methods_supported), which mcpx requires"
                .to_owned(),
        ));
    }
    Ok(Discovered {
        resource,
        issuer: issuer.to_owned(),
        authorization_endpoint,
        token_endpoint,
        registration_endpoint: endpoint("registration_endpoint")?,
        as_scopes: str_list(meta.get("scopes_supported")).map(|v| v.join(" ")),
        prm_scopes: None,
        // RFC 8414 §2: absent means client_secret_basic.
        auth_methods: str_list(meta.get("token_endpoint_auth_methods_supported"))
            .unwrap_or_else(|| vec!["client_secret_basic".to_owned()]),
        grant_types: str_list(meta.get("grant_types_supported")),
        iss_supported: meta
            .get("authorization_response_iss_parameter_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        cimd: meta
            .get("client_id_metadata_document_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

/// 2025-03-26 basic/authorization §2.3.2, §2.3.3: the upstream's origin is the
/// authorization server; its metadata at the root, else the default endpoints.
async fn legacy(http: &Http, cfg: &UserAuth, url: &Url) -> Result<Discovered, TransportError> {
    let issuer = origin(url);
    let mut meta_url = url.clone();
    meta_url.set_path("/.well-known/oauth-authorization-server");
    meta_url.set_query(None);
    meta_url.set_fragment(None);
    if let Ok(meta) = http.get_json(&meta_url).await {
        return from_metadata(cfg, &issuer, &meta_url, &meta, canonical(url));
    }
    let at = |p: &str| {
        let mut u = url.clone();
        u.set_path(p);
        u.set_query(None);
        u.set_fragment(None);
        u
    };
    Ok(Discovered {
        resource: canonical(url),
        issuer,
        authorization_endpoint: at("/authorize"),
        token_endpoint: at("/token"),
        registration_endpoint: Some(at("/register")),
        as_scopes: None,
        prm_scopes: None,
        auth_methods: vec!["client_secret_basic".to_owned(), "none".to_owned()],
        grant_types: None,
        iss_supported: false,
        cimd: false,
    })
}

/// A client as registered: its id, secret and how it authenticates at the token
/// endpoint.
#[derive(Clone)]
struct Client {
    id: String,
    secret: Option<String>,
    method: String,
}

/// How a client with (or without) a secret authenticates, among the methods the server
/// offers.
fn auth_method(offered: &[String], has_secret: bool) -> String {
    if !has_secret {
        return "none".to_owned();
    }
    for m in ["client_secret_basic", "client_secret_post"] {
        if offered.iter().any(|o| o == m) {
            return m.to_owned();
        }
    }
    "client_secret_basic".to_owned()
}

/// The client to use with `d`'s authorization server, registering one if need be.
async fn client_for(
    http: &Http,
    cfg: &UserAuth,
    store: &Store,
    d: &Discovered,
    redirect: &str,
) -> Result<Client, TransportError> {
    if let Some(id) = &cfg.client_id {
        return Ok(Client {
            id: id.clone(),
            secret: cfg.client_secret.clone(),
            method: auth_method(&d.auth_methods, cfg.client_secret.is_some()),
        });
    }
    if d.cimd
        && let Some(u) = &cfg.client_metadata_url
    {
        return Ok(Client {
            id: u.clone(),
            secret: None,
            method: "none".to_owned(),
        });
    }
    if let Some(c) = store
        .client(&d.issuer, redirect)
        .map_err(|e| store_err(cfg, e))?
    {
        return Ok(Client {
            id: c.client_id,
            secret: c.client_secret,
            method: c.auth_method,
        });
    }
    let Some(reg) = &d.registration_endpoint else {
        return Err(failed(
            cfg,
            "client registration",
            format!(
                "the authorization server {} offers no registration (no registration_endpoint{}); set mcpx.oauth.clientId{}",
                d.issuer,
                if d.cimd {
                    ""
                } else {
                    ", no client_id_metadata_document_supported"
                },
                if d.cimd {
                    " or mcpx.oauth.clientMetadataUrl"
                } else {
                    ""
                }
            ),
        ));
    };
    let wanted = if d.auth_methods.iter().any(|m| m == "none") {
        "none".to_owned()
    } else {
        auth_method(&d.auth_methods, true)
    };
    let body = json!({
        "client_name": "mcpx",
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": wanted,
        "application_type": "native",
    });
    let a = http
        .send(
            reg,
            Method::POST,
            Some("application/json"),
            None,
            body.to_string().into_bytes(),
            "oauth client registration",
        )
        .await
        .map_err(|e| failed(cfg, "client registration", e))?;
    let answer: Value = serde_json::from_slice(&a.body).unwrap_or_default();
    if !(200..300).contains(&a.status) {
        return Err(failed(
            cfg,
            "client registration",
            format!(
                "{reg} refused it (HTTP {}{})",
                a.status,
                oauth_error(&answer)
            ),
        ));
    }
    let Some(id) = answer.get("client_id").and_then(Value::as_str) else {
        return Err(failed(
            cfg,
            "client registration",
            format!("{reg} answered without a client_id"),
        ));
    };
    let secret = answer
        .get("client_secret")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let method = answer
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .map_or_else(
            || auth_method(&d.auth_methods, secret.is_some()),
            str::to_owned,
        );
    let record = ClientRecord {
        issuer: d.issuer.clone(),
        redirect_uri: redirect.to_owned(),
        client_id: id.to_owned(),
        client_secret: secret.clone(),
        auth_method: method.clone(),
    };
    store.put_client(&record).map_err(|e| store_err(cfg, e))?;
    Ok(Client {
        id: id.to_owned(),
        secret,
        method,
    })
}

/// `: error: description` of an OAuth error answer (RFC 6749 §5.2), or nothing.
fn oauth_error(answer: &Value) -> String {
    let why = [answer.get("error"), answer.get("error_description")]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(": ");
    if why.is_empty() {
        why
    } else {
        format!(": {why}")
    }
}

/// The scope to ask for: configured; else the challenge's; else the Protected Resource
/// Metadata's `scopes_supported`; else none. With `extra` (a step-up's) and, when the
/// authorization server lists it and grants refresh tokens, `offline_access`
/// (2026-07-28 basic/authorization §Refresh Tokens).
fn choose_scope(
    cfg: &UserAuth,
    d: &Discovered,
    challenge_scope: Option<&str>,
    extra: &str,
) -> String {
    let base = cfg
        .scope
        .clone()
        .or_else(|| challenge_scope.map(str::to_owned))
        .or_else(|| d.prm_scopes.clone())
        .unwrap_or_default();
    let mut scope = union(&base, extra);
    let refreshable = d
        .grant_types
        .as_ref()
        .is_none_or(|g| g.iter().any(|t| t == "refresh_token"));
    if refreshable
        && d.as_scopes
            .as_deref()
            .is_some_and(|s| covers(s, "offline_access"))
    {
        scope = union(&scope, "offline_access");
    }
    scope
}

/// Client authentication of a token request: the `Authorization` header, if any, and
/// what the form gets.
fn client_auth(client: &Client, form: &mut String) -> Option<String> {
    match (client.method.as_str(), &client.secret) {
        ("client_secret_basic", Some(secret)) => Some(basic_credentials(&client.id, secret)),
        ("client_secret_post", Some(secret)) => {
            form.push_str(&format!(
                "&client_id={}&client_secret={}",
                form_encode(&client.id),
                form_encode(secret)
            ));
            None
        }
        _ => {
            form.push_str(&format!("&client_id={}", form_encode(&client.id)));
            None
        }
    }
}

/// A token endpoint's answer, read: the record it makes (of `base`, whose
/// `access_token`, `refresh_token`, `expires_at` and `scope` are replaced).
fn token_record(
    status: u16,
    body: &[u8],
    mut base: TokenRecord,
    asked_scope: &str,
) -> Result<TokenRecord, (String, Option<String>)> {
    let answer: Value = serde_json::from_slice(body).unwrap_or_default();
    if !(200..300).contains(&status) {
        let code = answer
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_owned);
        return Err((
            format!("refused (HTTP {status}{})", oauth_error(&answer)),
            code,
        ));
    }
    let Some(access) = answer.get("access_token").and_then(Value::as_str) else {
        return Err(("answered without an access_token".to_owned(), None));
    };
    if access.is_empty() || HeaderValue::try_from(format!("Bearer {access}")).is_err() {
        return Err((
            "issued an access token that is no header value".to_owned(),
            None,
        ));
    }
    match answer.get("token_type") {
        None => {}
        Some(Value::String(k)) if k.eq_ignore_ascii_case("bearer") => {}
        Some(other) => {
            return Err((format!("issued a {other} token, not a Bearer one"), None));
        }
    }
    base.access_token = access.to_owned();
    if let Some(r) = answer.get("refresh_token").and_then(Value::as_str) {
        base.refresh_token = Some(r.to_owned());
    }
    base.expires_at = answer
        .get("expires_in")
        .and_then(Value::as_u64)
        .map(|s| now().saturating_add(s.min(super::MAX_LIFETIME.as_secs())));
    base.scope = answer
        .get("scope")
        .and_then(Value::as_str)
        .map_or_else(|| asked_scope.to_owned(), str::to_owned);
    Ok(base)
}

/// What the callback listener got.
struct Callback {
    code: String,
}

/// Why the browser's redirect gave no code, or why none came.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallbackError {
    /// The request's `state` is missing, repeated or not the one sent: it is not the
    /// authorization server's redirect (the listener answers it 400 and keeps waiting).
    #[error(
        "the redirect's state is not the one sent (a forged or stale redirect); nothing was exchanged"
    )]
    State,
    /// The redirect's `iss` is not the authorization server's issuer (RFC 9207).
    #[error(
        "the redirect's iss {got:?} is not the authorization server's issuer {issuer:?}; nothing was exchanged"
    )]
    Issuer {
        /// The `iss` the redirect carries.
        got: String,
        /// The authorization server's issuer.
        issuer: String,
    },
    /// The authorization server promised an `iss` and the redirect carries none.
    #[error(
        "the authorization server promised an iss in its redirect (authorization_response_iss_parameter_supported) and sent none; nothing was exchanged"
    )]
    NoIssuer,
    /// The redirect carries a parameter of the response more than once (RFC 6749
    /// §3.1 forbids it).
    #[error("the redirect carries {0} more than once; nothing was exchanged")]
    Repeated(&'static str),
    /// The authorization server refused (the redirect's `error`).
    #[error("the authorization server answered {error}{}", .description.as_ref().map(|d| format!(": {d}")).unwrap_or_default())]
    Refused {
        /// Its `error`.
        error: String,
        /// Its `error_description`, if any.
        description: Option<String>,
    },
    /// The redirect carries no code, or an empty one.
    #[error("the redirect carries no code")]
    NoCode,
    /// No redirect came within the login's time.
    #[error("no redirect came back within {} s", .0.as_secs())]
    Timeout(Duration),
}

/// Whether two secrets are equal, in a time that depends on their lengths only.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Parses the callback's query: the code, once `state` and `iss` are checked.
fn read_callback(
    query: &str,
    state: &str,
    issuer: &str,
    iss_required: bool,
) -> Result<Callback, CallbackError> {
    let mut code = None;
    let mut got_state = None;
    let mut iss = None;
    let mut error = None;
    let mut description = None;
    let mut states = 0usize;
    let mut repeated = None;
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        let (slot, name) = match &*k {
            "state" => {
                states += 1;
                (&mut got_state, "state")
            }
            "code" => (&mut code, "code"),
            "iss" => (&mut iss, "iss"),
            "error" => (&mut error, "error"),
            "error_description" => (&mut description, "error_description"),
            _ => continue,
        };
        if slot.is_some() {
            repeated.get_or_insert(name);
        }
        *slot = Some(v.into_owned());
    }
    // The state first: a request without the one sent, exactly once, is none of the
    // authorization server's, whatever else it carries.
    match got_state {
        Some(s) if states == 1 && same_secret(s.as_bytes(), state.as_bytes()) => {}
        _ => return Err(CallbackError::State),
    }
    if let Some(name) = repeated {
        return Err(CallbackError::Repeated(name));
    }
    // RFC 9207 §2.4: compared by simple string comparison, when present or promised.
    match iss {
        Some(i) if i != issuer => {
            return Err(CallbackError::Issuer {
                got: i,
                issuer: issuer.to_owned(),
            });
        }
        None if iss_required => {
            return Err(CallbackError::NoIssuer);
        }
        _ => {}
    }
    if let Some(error) = error {
        return Err(CallbackError::Refused { error, description });
    }
    match code {
        Some(c) if !c.is_empty() => Ok(Callback { code: c }),
        _ => Err(CallbackError::NoCode),
    }
}

/// Reads the query of a request to the callback (`/callback?…`) as the listener of a
/// login that sent `state` to the authorization server `issuer` does: the code, if it
/// is the redirect that ends the login with one. [`CallbackError::State`] means the
/// request is not that redirect (its `state` is missing, repeated or another, compared
/// in constant time), and the listener keeps waiting; any other error ends the login.
/// `iss_required`: the authorization server advertised
/// `authorization_response_iss_parameter_supported` (RFC 9207).
pub fn callback_code(
    query: &str,
    state: &str,
    issuer: &str,
    iss_required: bool,
) -> Result<String, CallbackError> {
    read_callback(query, state, issuer, iss_required).map(|c| c.code)
}

/// Opens `url` in the user's browser: `$BROWSER` (run with the URL as its one
/// argument) when set, else the platform's opener. Failure is not fatal: the URL is
/// printed too.
fn open_browser(url: &str) {
    let browser = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty());
    let (program, args): (String, Vec<String>) = match browser {
        Some(b) => (b, vec![url.to_owned()]),
        None if cfg!(target_os = "macos") => ("open".to_owned(), vec![url.to_owned()]),
        None => ("xdg-open".to_owned(), vec![url.to_owned()]),
    };
    match std::process::Command::new(&program)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
    {
        Ok(mut child) => {
            // Reaped off the caller's way.
            std::thread::spawn(move || {
                let _ = child.wait();
            });
        }
        Err(e) => eprintln!("mcpx: could not run {program}: {e}; open the URL yourself"),
    }
}

/// The most connections the callback listener serves at once.
const CALLBACK_CONNECTIONS: usize = 16;

/// How long the callback listener waits for a request's head on a connection.
const CALLBACK_HEAD_TIMEOUT: Duration = Duration::from_secs(3);

/// The most a connection to the callback listener lasts: its one request read, its
/// page written.
const CALLBACK_CONNECTION_TIME: Duration = Duration::from_secs(10);

/// A connection the callback listener serves.
struct CallbackConnection {
    id: u64,
    /// Whether its request came (then its page is being written and it closes).
    busy: Arc<AtomicBool>,
    task: tokio::task::AbortHandle,
}

/// What the callback listener answers a request with: the status, the page, an
/// `Allow` header's value, and what it hands the waiting login, if anything (only a
/// redirect that carries the `state` sent).
fn callback_answer(
    method: &Method,
    uri: &hyper::Uri,
    state: &str,
    issuer: &str,
    iss_required: bool,
) -> (
    hyper::StatusCode,
    String,
    Option<&'static str>,
    Option<Result<Callback, CallbackError>>,
) {
    use hyper::StatusCode;
    if uri.path() != "/callback" {
        return (
            StatusCode::NOT_FOUND,
            "Not found: mcpx's login listener answers the redirect to /callback only.".to_owned(),
            None,
            None,
        );
    }
    if method != Method::GET {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            "Method not allowed: the redirect to /callback is a GET.".to_owned(),
            Some("GET"),
            None,
        );
    }
    match read_callback(uri.query().unwrap_or(""), state, issuer, iss_required) {
        Err(CallbackError::State) => (
            StatusCode::BAD_REQUEST,
            "This is not the redirect mcpx is waiting for: its state is missing or not the one \
             mcpx sent (a forged or stale link). Nothing was exchanged; mcpx still waits for \
             the authorization server's redirect."
                .to_owned(),
            None,
            None,
        ),
        Ok(c) => (
            StatusCode::OK,
            "mcpx got the authorization; you can close this window.".to_owned(),
            None,
            Some(Ok(c)),
        ),
        Err(e) => (
            StatusCode::BAD_REQUEST,
            format!("mcpx could not use this authorization: {e}"),
            None,
            Some(Err(e)),
        ),
    }
}

/// Waits on `listener` for the browser's redirect to `GET /callback` with the `state`
/// sent; answers every request with a page saying how it went. A request with another
/// `state`, or none, is answered 400 and the wait goes on; one to another path 404,
/// another method 405. Each connection carries one request (`Connection: close`), its
/// head within [`CALLBACK_HEAD_TIMEOUT`]; at most [`CALLBACK_CONNECTIONS`] are served
/// at once, and a new one beyond them closes the oldest whose request has not come.
/// When the wait ends, every connection but the redirect's is closed.
async fn await_callback(
    listener: tokio::net::TcpListener,
    state: String,
    issuer: String,
    iss_required: bool,
    within: Duration,
) -> Result<Callback, CallbackError> {
    use hyper::service::service_fn;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(u64, Result<Callback, CallbackError>)>(1);
    let expected = Arc::new((state, issuer));
    let mut served: std::collections::VecDeque<CallbackConnection> =
        std::collections::VecDeque::new();
    let mut next_id = 0u64;
    let deadline = tokio::time::sleep(within);
    tokio::pin!(deadline);
    let (winner, result) = loop {
        tokio::select! {
            () = &mut deadline => break (None, Err(CallbackError::Timeout(within))),
            Some((id, result)) = rx.recv() => break (Some(id), result),
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::debug!("callback listener: accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                served.retain(|c| !c.task.is_finished());
                if served.len() >= CALLBACK_CONNECTIONS {
                    // Idle ones go first: a browser's redirect comes on a new connection.
                    match served.iter().position(|c| !c.busy.load(Ordering::SeqCst)) {
                        Some(i) => {
                            if let Some(oldest) = served.remove(i) {
                                oldest.task.abort();
                            }
                        }
                        None => continue,
                    }
                }
                let id = next_id;
                next_id += 1;
                let busy = Arc::new(AtomicBool::new(false));
                let (tx, expected, flag) = (tx.clone(), expected.clone(), busy.clone());
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    flag.store(true, Ordering::SeqCst);
                    let (status, page, allow, outcome) = callback_answer(
                        req.method(),
                        req.uri(),
                        &expected.0,
                        &expected.1,
                        iss_required,
                    );
                    let tx = tx.clone();
                    async move {
                        if let Some(outcome) = outcome {
                            // Closed: the wait ended by another request or the deadline.
                            let _ = tx.send((id, outcome)).await;
                        }
                        let mut resp = hyper::Response::new(Full::new(Bytes::from(page)));
                        *resp.status_mut() = status;
                        let headers = resp.headers_mut();
                        headers.insert(
                            CONTENT_TYPE,
                            HeaderValue::from_static("text/plain; charset=utf-8"),
                        );
                        headers.insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
                        if let Some(allow) = allow {
                            headers.insert(hyper::header::ALLOW, HeaderValue::from_static(allow));
                        }
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let settings = crate::serve::Settings {
                    header_read_timeout: Some(CALLBACK_HEAD_TIMEOUT),
                    ..crate::serve::Settings::default()
                };
                let task = tokio::spawn(async move {
                    let _ = tokio::time::timeout(
                        CALLBACK_CONNECTION_TIME,
                        crate::serve::connection(
                            stream,
                            svc,
                            tokio_util::sync::CancellationToken::new(),
                            settings,
                        ),
                    )
                    .await;
                });
                served.push_back(CallbackConnection { id, busy, task: task.abort_handle() });
            }
        }
    };
    // The redirect's connection writes its page and closes; the rest are closed now.
    for c in served {
        if Some(c.id) != winner {
            c.task.abort();
        }
    }
    result
}

/// What an unauthenticated request to an upstream showed (see [`probe_authorization`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asks {
    /// It refused the request for want of authorization: a 401, or a 403 with a
    /// challenge. Its `WWW-Authenticate`, if any.
    Yes(Option<String>),
    /// It answered without asking for authorization, with this HTTP status.
    No(u16),
    /// It could not be reached (why).
    Unreachable(String),
}

/// Sends an unauthenticated request to the upstream, to learn whether it asks for
/// authorization and read its challenge: a `tools/list` POST (Streamable HTTP), or a
/// GET of the stream (HTTP+SSE). Bounded by `http`'s timeout; the answer's body is
/// not read.
pub async fn probe_authorization(http: &Http, url: &Url, sse: bool) -> Asks {
    let endpoint = match Endpoint::new(url, &[], &http.proxy) {
        Ok(e) => e,
        Err(e) => return Asks::Unreachable(e.to_string()),
    };
    let request = if sse {
        endpoint.request(Method::GET, Some("text/event-stream"), Vec::new(), None)
    } else {
        endpoint.request(
            Method::POST,
            Some("application/json, text/event-stream"),
            vec![(
                std::borrow::Cow::Borrowed("mcp-protocol-version"),
                "2025-11-25".to_owned(),
            )],
            Some(bytes::Bytes::from_static(
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            )),
        )
    };
    let request = match request {
        Ok(r) => r,
        Err(e) => return Asks::Unreachable(e.to_string()),
    };
    let resp = match http
        .client
        .send(&endpoint, request, http.timeout, "probe of the upstream")
        .await
    {
        Ok(r) => r,
        Err(e) => return Asks::Unreachable(e.to_string()),
    };
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get(hyper::header::WWW_AUTHENTICATE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    match (status, challenge) {
        (401, c) => Asks::Yes(c),
        (403, Some(c)) => Asks::Yes(Some(c)),
        (s, _) => Asks::No(s),
    }
}

/// The upstream's challenge to an unauthenticated request, if it gives one.
pub(crate) async fn probe_challenge(http: &Http, url: &Url, sse: bool) -> Option<String> {
    match probe_authorization(http, url, sse).await {
        Asks::Yes(c) => c,
        Asks::No(_) | Asks::Unreachable(_) => None,
    }
}

/// Whether the upstream at `url` was seen to ask for authorization (a 401 refusal
/// of mcpx's), and when first.
pub fn asked(cfg: &UserAuth, url: &str) -> Result<Option<Asked>, StoreError> {
    store_of(cfg)?.asked(url)
}

/// Records that the upstream at `url` asked for authorization. Best effort: a store
/// that cannot be written only costs `mcpx auth status` what it would have said.
pub fn record_asked(cfg: &UserAuth, url: &str, challenge: bool) {
    let recorded = store_of(cfg).and_then(|s| {
        s.put_asked(&Asked {
            url: url.to_owned(),
            at: now(),
            challenge,
        })
    });
    if let Err(e) = recorded {
        tracing::debug!(upstream = %cfg.upstream, "not recorded that it asked for authorization: {e}");
    }
}

/// The whole authorization-code flow for the upstream at `url`: discovery,
/// registration, the browser, the callback, the token exchange; the token set stored
/// and bound to the upstream. `challenge`: the refusal that asked for it (else the
/// upstream is probed for one); `extra_scope`: a step-up's scope.
pub async fn login(
    http: &Http,
    cfg: &UserAuth,
    url: &Url,
    sse: bool,
    challenge: Option<String>,
    extra_scope: &str,
) -> Result<TokenRecord, TransportError> {
    let started = now();
    let pending = match begin_login(http, cfg, url, sse, challenge, extra_scope).await? {
        Begun::Pending(p) => p,
        Begun::Elsewhere { port } => {
            eprintln!(
                "mcpx: the callback port {port} of {} is taken: another mcpx is logging in to it; waiting for its result",
                cfg.upstream
            );
            let store = store_of(cfg).map_err(|e| store_err(cfg, e))?;
            return wait_for_other(cfg, &store, url, started).await;
        }
    };
    let auth_url = pending.authorization_url().clone();
    eprintln!(
        "mcpx: to authorize mcpx for {}, open this URL in a browser:\n\n    {auth_url}\n",
        cfg.upstream
    );
    open_browser(auth_url.as_str());
    pending.finish(http, LOGIN_TIMEOUT).await
}

/// How [`begin_login`] went.
#[derive(Debug)]
pub enum Begun {
    /// The callback listener is up and the authorization URL made: someone must
    /// visit it.
    Pending(Box<PendingLogin>),
    /// The callback port is taken: another mcpx is logging in to this upstream.
    Elsewhere {
        /// The port.
        port: u16,
    },
}

/// An authorization-code flow waiting for its redirect: the callback listener, and
/// what the token request needs (the PKCE verifier never leaves it).
pub struct PendingLogin {
    cfg: UserAuth,
    url: Url,
    listener: tokio::net::TcpListener,
    auth_url: Url,
    state: String,
    verifier: String,
    redirect: String,
    scope: String,
    client: Client,
    d: Discovered,
    store: Store,
}

impl std::fmt::Debug for PendingLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingLogin")
            .field("upstream", &self.cfg.upstream)
            .field("authorization_url", &self.auth_url.as_str())
            .finish_non_exhaustive()
    }
}

/// The first half of the flow: the callback listener bound (the same port as `mcpx
/// auth login`'s), discovery, registration, and the authorization URL, which
/// [`PendingLogin::authorization_url`] gives. No browser is opened.
pub async fn begin_login(
    http: &Http,
    cfg: &UserAuth,
    url: &Url,
    sse: bool,
    challenge: Option<String>,
    extra_scope: &str,
) -> Result<Begun, TransportError> {
    let store = store_of(cfg).map_err(|e| store_err(cfg, e))?;
    let port = callback_port(cfg, url.as_str());
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            return Ok(Begun::Elsewhere { port });
        }
        Err(e) => {
            return Err(failed(
                cfg,
                "callback listener",
                format!("cannot listen on 127.0.0.1:{port}: {e} (set mcpx.oauth.callbackPort)"),
            ));
        }
    };
    let challenge = match challenge {
        Some(c) => Some(c),
        None => probe_challenge(http, url, sse).await,
    };
    let d = discover(http, cfg, url, challenge.as_deref()).await?;
    let redirect = redirect_uri(port);
    let client = client_for(http, cfg, &store, &d, &redirect).await?;
    let challenge_scope = challenge
        .as_deref()
        .and_then(mcpx_protocol::auth::main_challenge)
        .and_then(|c| c.param("scope").map(str::to_owned));
    let scope = choose_scope(cfg, &d, challenge_scope.as_deref(), extra_scope);
    let verifier = random_b64(32).map_err(|e| failed(cfg, "authorization request", e))?;
    let state = random_b64(16).map_err(|e| failed(cfg, "authorization request", e))?;
    let mut auth_url = d.authorization_endpoint.clone();
    {
        let mut q = auth_url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client.id)
            .append_pair("redirect_uri", &redirect)
            .append_pair("state", &state)
            .append_pair("code_challenge", &code_challenge(&verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", &d.resource);
        if !scope.is_empty() {
            q.append_pair("scope", &scope);
        }
    }
    Ok(Begun::Pending(Box::new(PendingLogin {
        cfg: cfg.clone(),
        url: url.clone(),
        listener,
        auth_url,
        state,
        verifier,
        redirect,
        scope,
        client,
        d,
        store,
    })))
}

impl PendingLogin {
    /// The URL the user must open (it carries no secret: the PKCE challenge and
    /// `state` only).
    pub fn authorization_url(&self) -> &Url {
        &self.auth_url
    }

    /// The second half: waits up to `within` for the redirect to the callback, then
    /// exchanges the code; the token set is stored and bound to the upstream (the
    /// store's normal write, so other processes see it).
    pub async fn finish(
        self,
        http: &Http,
        within: Duration,
    ) -> Result<TokenRecord, TransportError> {
        let PendingLogin {
            cfg,
            url,
            listener,
            state,
            verifier,
            redirect,
            scope,
            client,
            d,
            store,
            ..
        } = self;
        let cfg = &cfg;
        let callback = await_callback(listener, state, d.issuer.clone(), d.iss_supported, within)
            .await
            .map_err(|e| failed(cfg, "authorization response", e))?;
        let mut form = format!(
            "grant_type=authorization_code&code={}&redirect_uri={}&code_verifier={}&resource={}",
            form_encode(&callback.code),
            form_encode(&redirect),
            form_encode(&verifier),
            form_encode(&d.resource)
        );
        let basic = client_auth(&client, &mut form);
        let a = http
            .send(
                &d.token_endpoint,
                Method::POST,
                Some("application/x-www-form-urlencoded"),
                basic,
                form.into_bytes(),
                "oauth token request",
            )
            .await
            .map_err(|e| failed(cfg, "token request", e))?;
        let base = TokenRecord {
            issuer: d.issuer.clone(),
            client_id: client.id.clone(),
            resource: d.resource.clone(),
            token_endpoint: d.token_endpoint.to_string(),
            auth_method: client.method.clone(),
            access_token: String::new(),
            refresh_token: None,
            expires_at: None,
            scope: String::new(),
        };
        let record = token_record(a.status, &a.body, base, &scope).map_err(|(why, _)| {
            failed(
                cfg,
                "token request",
                format!("the token endpoint {} {why}", d.token_endpoint),
            )
        })?;
        store.put_token(&record).map_err(|e| store_err(cfg, e))?;
        store
            .put_binding(&Binding {
                url: url.to_string(),
                issuer: record.issuer.clone(),
                client_id: record.client_id.clone(),
                resource: record.resource.clone(),
                wanted_scope: None,
            })
            .map_err(|e| store_err(cfg, e))?;
        Ok(record)
    }
}

/// Another process holds the callback port: waits for the token set it stores for the
/// upstream (one stored after `since`).
async fn wait_for_other(
    cfg: &UserAuth,
    store: &Store,
    url: &Url,
    since: u64,
) -> Result<TokenRecord, TransportError> {
    let deadline = tokio::time::Instant::now() + LOGIN_TIMEOUT;
    let path_time = |store: &Store| -> Option<TokenRecord> {
        let b = store.binding(url.as_str()).ok()??;
        let t = store.token(&b.issuer, &b.client_id, &b.resource).ok()??;
        let modified = std::fs::metadata(store.dir().join("upstreams"))
            .and_then(|m| m.modified())
            .ok()?
            .duration_since(UNIX_EPOCH)
            .ok()?
            .as_secs();
        (modified >= since).then_some(t)
    };
    while tokio::time::Instant::now() < deadline {
        if let Some(t) = path_time(store) {
            return Ok(t);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(failed(
        cfg,
        "login",
        format!(
            "the callback port {} stayed taken and no login finished within {} s (set mcpx.oauth.callbackPort if another program uses it)",
            callback_port(cfg, url.as_str()),
            LOGIN_TIMEOUT.as_secs()
        ),
    ))
}

/// The secret of the client a token set was issued to, if it has one: the configured
/// one, else the stored registration's.
fn secret_for(cfg: &UserAuth, store: &Store, t: &TokenRecord, url: &Url) -> Option<String> {
    if cfg.client_id.as_deref() == Some(t.client_id.as_str()) {
        return cfg.client_secret.clone();
    }
    let redirect = redirect_uri(callback_port(cfg, url.as_str()));
    store
        .client(&t.issuer, &redirect)
        .ok()
        .flatten()
        .filter(|c| c.client_id == t.client_id)
        .and_then(|c| c.client_secret)
}

/// Why a refresh did not give a token.
enum RefreshFailed {
    /// The refresh token is no good (`invalid_grant`, or none): a login is needed.
    Refused(String),
    /// Something else went wrong.
    Error(TransportError),
}

/// Refreshes `stale` (the token set last read), one refresh at a time across
/// processes: under the store's lock, the store is read again, and a token set someone
/// else refreshed meanwhile is taken as it is.
async fn refresh(
    http: &Http,
    cfg: &UserAuth,
    store: &Store,
    url: &Url,
    stale: &TokenRecord,
) -> Result<TokenRecord, RefreshFailed> {
    let key = (
        stale.issuer.clone(),
        stale.client_id.clone(),
        stale.resource.clone(),
    );
    let locker = store.clone();
    let lock = tokio::task::spawn_blocking(move || locker.lock_token(&key.0, &key.1, &key.2))
        .await
        .map_err(|e| RefreshFailed::Error(failed(cfg, "token refresh", e)))?
        .map_err(|e| RefreshFailed::Error(store_err(cfg, e)))?;
    let current = store
        .token(&stale.issuer, &stale.client_id, &stale.resource)
        .map_err(|e| RefreshFailed::Error(store_err(cfg, e)))?;
    let Some(current) = current else {
        return Err(RefreshFailed::Refused("no token is stored".to_owned()));
    };
    if current.access_token != stale.access_token && !expiring(&current) {
        drop(lock);
        return Ok(current);
    }
    let Some(refresh_token) = current.refresh_token.clone() else {
        return Err(RefreshFailed::Refused(
            "the access token expired and no refresh token was issued".to_owned(),
        ));
    };
    let Ok(token_endpoint) = Url::parse(&current.token_endpoint) else {
        return Err(RefreshFailed::Refused(
            "the stored token endpoint is no URL".to_owned(),
        ));
    };
    let client = Client {
        id: current.client_id.clone(),
        secret: secret_for(cfg, store, &current, url),
        method: current.auth_method.clone(),
    };
    let mut form = format!(
        "grant_type=refresh_token&refresh_token={}&resource={}",
        form_encode(&refresh_token),
        form_encode(&current.resource)
    );
    let basic = client_auth(&client, &mut form);
    let a = http
        .send(
            &token_endpoint,
            Method::POST,
            Some("application/x-www-form-urlencoded"),
            basic,
            form.into_bytes(),
            "oauth token refresh",
        )
        .await
        .map_err(|e| RefreshFailed::Error(failed(cfg, "token refresh", e)))?;
    let scope = current.scope.clone();
    match token_record(a.status, &a.body, current.clone(), &scope) {
        Ok(fresh) => {
            store
                .put_token(&fresh)
                .map_err(|e| RefreshFailed::Error(store_err(cfg, e)))?;
            drop(lock);
            Ok(fresh)
        }
        Err((why, code)) => {
            if code.as_deref() == Some("invalid_grant") {
                // Deleted only while it is still the refused one (the lock is held,
                // so it is: nobody else refreshes meanwhile).
                if let Ok(Some(now)) =
                    store.token(&current.issuer, &current.client_id, &current.resource)
                    && now.refresh_token.as_deref() == Some(refresh_token.as_str())
                {
                    let _ =
                        store.remove_token(&current.issuer, &current.client_id, &current.resource);
                }
                drop(lock);
                return Err(RefreshFailed::Refused(format!(
                    "the token endpoint {token_endpoint} refused the refresh token: {why}"
                )));
            }
            drop(lock);
            Err(RefreshFailed::Error(failed(
                cfg,
                "token refresh",
                format!("the token endpoint {token_endpoint} {why}"),
            )))
        }
    }
}

fn expiring(t: &TokenRecord) -> bool {
    t.expires_at
        .is_some_and(|e| e <= now().saturating_add(REFRESH_MARGIN))
}

fn bearer(t: &TokenRecord) -> Result<HeaderValue, TransportError> {
    let mut v = HeaderValue::try_from(format!("Bearer {}", t.access_token))
        .map_err(|_| TransportError::Io("the stored access token is no header value".to_owned()))?;
    v.set_sensitive(true);
    Ok(v)
}

/// The token set stored for the upstream at `url`, if any.
pub fn stored(cfg: &UserAuth, url: &str) -> Result<Option<TokenRecord>, StoreError> {
    let store = store_of(cfg)?;
    let Some(b) = store.binding(url)? else {
        return Ok(None);
    };
    store.token(&b.issuer, &b.client_id, &b.resource)
}

/// Forgets the upstream's tokens (and which token set it used); whether there were any.
pub fn logout(cfg: &UserAuth, url: &str) -> Result<bool, StoreError> {
    let store = store_of(cfg)?;
    let Some(b) = store.binding(url)? else {
        return Ok(false);
    };
    let removed = store.remove_token(&b.issuer, &b.client_id, &b.resource)?;
    store.remove_binding(url)?;
    Ok(removed)
}

/// Tokens for one upstream's requests, from the store.
#[derive(Debug)]
pub(crate) struct UserTokens {
    cfg: UserAuth,
    url: Url,
    sse: bool,
    http: Http,
    /// The token set in use; the lock is held across a refresh or a login, so that
    /// waiting requests share one.
    state: tokio::sync::Mutex<Option<TokenRecord>>,
    /// The store was read and had no token for the upstream: requests go without one,
    /// without reading it again or taking the lock, until the upstream refuses one.
    none_stored: AtomicBool,
}

impl UserTokens {
    pub(crate) fn new(cfg: UserAuth, url: &Url, sse: bool, http: Http) -> Arc<UserTokens> {
        Arc::new(UserTokens {
            cfg,
            url: url.clone(),
            sse,
            http,
            state: tokio::sync::Mutex::new(None),
            none_stored: AtomicBool::new(false),
        })
    }

    fn store(&self) -> Result<Store, TransportError> {
        store_of(&self.cfg).map_err(|e| store_err(&self.cfg, e))
    }

    /// The stored token set, read afresh.
    fn load(&self) -> Result<Option<TokenRecord>, TransportError> {
        stored(&self.cfg, self.url.as_str()).map_err(|e| store_err(&self.cfg, e))
    }

    /// The `Authorization` value for a request about to be sent: the stored token,
    /// refreshed first when it is about to expire; `None` when there is none (the
    /// request goes without, and its 401 says what to do).
    /// The store was read and had no token for the upstream (see `none_stored`).
    pub(crate) fn none_stored(&self) -> bool {
        self.none_stored.load(Ordering::Acquire)
    }

    pub(crate) async fn upfront(&self) -> Result<Option<HeaderValue>, TransportError> {
        if self.none_stored.load(Ordering::Acquire) {
            return Ok(None);
        }
        let mut state = self.state.lock().await;
        if state.is_none() {
            // An unreadable store (no state directory, a corrupt file) must not stop an
            // upstream that needs no authorization: the request goes without a token,
            // and if the upstream refuses it, the refusal reports the store's error.
            *state = match self.load() {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(upstream = %self.cfg.upstream, "{e}");
                    None
                }
            };
        }
        let Some(t) = state.clone() else {
            self.none_stored.store(true, Ordering::Release);
            return Ok(None);
        };
        if expiring(&t) && t.refresh_token.is_some() {
            let store = self.store()?;
            match refresh(&self.http, &self.cfg, &store, &self.url, &t).await {
                Ok(fresh) => {
                    let v = bearer(&fresh)?;
                    *state = Some(fresh);
                    return Ok(Some(v));
                }
                Err(RefreshFailed::Refused(why)) => {
                    *state = None;
                    drop(state);
                    return self.relogin(&why, None, "").await.map(Some);
                }
                Err(RefreshFailed::Error(e)) => return Err(e),
            }
        }
        bearer(&t).map(Some)
    }

    /// A new `Authorization` value after the upstream refused `stale` (or a request
    /// without one) with `status` and `challenge`; `step_ups`: re-authorizations this
    /// request caused so far.
    pub(crate) async fn refused(
        &self,
        status: u16,
        stale: Option<&HeaderValue>,
        challenge: Option<&str>,
        step_ups: u32,
    ) -> Result<HeaderValue, TransportError> {
        if status == 401 {
            // For `mcpx auth status`: this upstream asks for authorization.
            record_asked(&self.cfg, self.url.as_str(), challenge.is_some());
        }
        let mut state = self.state.lock().await;
        self.none_stored.store(false, Ordering::Release);
        // Someone else replaced the refused token meanwhile: use theirs.
        let current = self.load()?;
        if let Some(t) = &current
            && stale.is_none_or(|s| bearer(t).is_ok_and(|b| b != *s))
            && !expiring(t)
        {
            *state = current.clone();
            return bearer(t);
        }
        *state = current.clone();
        if status == 403 {
            let want = challenge
                .and_then(mcpx_protocol::auth::main_challenge)
                .and_then(|c| c.param("scope").map(str::to_owned))
                .unwrap_or_default();
            let granted = current
                .as_ref()
                .map(|t| t.scope.clone())
                .unwrap_or_default();
            if want.is_empty() || covers(&granted, &want) {
                return Err(failed(
                    &self.cfg,
                    "step-up",
                    format!(
                        "the upstream refused the request for want of the scope {want:?}, which the token already has; another authorization would not help"
                    ),
                ));
            }
            if step_ups >= MAX_STEP_UP {
                return Err(failed(
                    &self.cfg,
                    "step-up",
                    format!(
                        "the upstream still wants the scope {want:?} after {step_ups} re-authorizations; giving up"
                    ),
                ));
            }
            let extra = union(&granted, &want);
            if !interactive() {
                self.remember_wanted(&extra);
            }
            drop(state);
            return self
                .relogin(
                    &format!("HTTP 403 insufficient_scope: it needs the scope {want:?}"),
                    challenge.map(str::to_owned),
                    &extra,
                )
                .await;
        }
        // A 401: the token expired early or was revoked; refreshed if it can be.
        if let Some(t) = current
            && t.refresh_token.is_some()
            && stale.is_some()
        {
            let store = self.store()?;
            match refresh(&self.http, &self.cfg, &store, &self.url, &t).await {
                Ok(fresh) if stale.is_none_or(|s| bearer(&fresh).is_ok_and(|b| b != *s)) => {
                    let v = bearer(&fresh)?;
                    *state = Some(fresh);
                    return Ok(v);
                }
                Ok(_) | Err(RefreshFailed::Refused(_)) => {}
                Err(RefreshFailed::Error(e)) => return Err(e),
            }
        }
        *state = None;
        drop(state);
        let why = if stale.is_some() {
            "HTTP 401: it refused the stored token"
        } else {
            "HTTP 401: no token is stored for it"
        };
        self.relogin(why, challenge.map(str::to_owned), "").await
    }

    /// Records the scope a refusal asked for, so that `mcpx auth login` asks for it.
    fn remember_wanted(&self, scope: &str) {
        let Ok(store) = self.store() else { return };
        if let Ok(Some(mut b)) = store.binding(self.url.as_str()) {
            b.wanted_scope = Some(scope.to_owned());
            let _ = store.put_binding(&b);
        }
    }

    /// A login when this process may run one, else the error naming `mcpx auth login`.
    async fn relogin(
        &self,
        why: &str,
        challenge: Option<String>,
        extra_scope: &str,
    ) -> Result<HeaderValue, TransportError> {
        if !interactive() {
            // What the refusal said, for the operator: where its metadata is and the
            // scope it wants (never a token).
            let said = challenge
                .as_deref()
                .and_then(mcpx_protocol::auth::main_challenge)
                .map(|c| {
                    let mut s = String::new();
                    if let Some(m) = c.param("resource_metadata") {
                        s.push_str(&format!("; its resource metadata: {m}"));
                    }
                    if let Some(w) = c.param("scope") {
                        s.push_str(&format!("; scope {w:?}"));
                    }
                    s
                })
                .unwrap_or_default();
            return Err(needs_login(&self.cfg, &format!("{why}{said}")));
        }
        let mut state = self.state.lock().await;
        let t = login(
            &self.http,
            &self.cfg,
            &self.url,
            self.sse,
            challenge,
            extra_scope,
        )
        .await?;
        let v = bearer(&t)?;
        *state = Some(t);
        Ok(v)
    }
}

/// The scope a stored binding says a refusal asked for (for `mcpx auth login`).
pub fn wanted_scope(cfg: &UserAuth, url: &str) -> Option<String> {
    store_of(cfg).ok()?.binding(url).ok()??.wanted_scope
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_s256_is_rfc_7636s_example() {
        // RFC 7636 Appendix B.
        assert_eq!(
            code_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let v = random_b64(32).unwrap();
        assert_eq!(v.len(), 43);
        assert_ne!(v, random_b64(32).unwrap());
    }

    #[test]
    fn the_callback_is_checked_for_state_and_iss() {
        let ok = read_callback(
            "code=c1&state=s&iss=https%3A%2F%2Fas",
            "s",
            "https://as",
            true,
        );
        assert_eq!(ok.map(|c| c.code).unwrap(), "c1");
        for (q, required, why) in [
            ("code=c&state=x", false, "state is not"),
            ("code=c", false, "state is not"),
            (
                "code=c&state=s&iss=https%3A%2F%2Fas%2F",
                false,
                "not the authorization server's issuer",
            ),
            (
                "code=c&state=s&iss=https%3A%2F%2Fevil",
                false,
                "not the authorization server's issuer",
            ),
            ("code=c&state=s", true, "promised an iss"),
            (
                "error=access_denied&error_description=no&state=s",
                false,
                "access_denied: no",
            ),
            ("state=s", false, "no code"),
        ] {
            let e = read_callback(q, "s", "https://as", required).err().unwrap();
            assert!(e.to_string().contains(why), "{q}: {e}");
        }
        // Not advertised and absent: accepted.
        assert!(read_callback("code=c&state=s", "s", "https://as", false).is_ok());
        // A state missing, repeated or another is no redirect of the server's (the
        // listener waits on); a response parameter twice ends the login.
        for q in [
            "code=c",
            "code=c&state=",
            "code=c&state=s&state=s",
            "code=c&state=x&state=s",
            "code=c&state=S",
            "code=c&state=ss",
            "code=c&STATE=s",
        ] {
            assert!(
                matches!(
                    callback_code(q, "s", "https://as", false),
                    Err(CallbackError::State)
                ),
                "{q}"
            );
        }
        for (q, name) in [
            ("code=c&code=d&state=s", "code"),
            (
                "code=c&state=s&iss=https%3A%2F%2Fas&iss=https%3A%2F%2Fas",
                "iss",
            ),
            ("error=a&error=b&state=s", "error"),
        ] {
            let e = callback_code(q, "s", "https://as", false).err().unwrap();
            assert!(
                matches!(e, CallbackError::Repeated(n) if n == name),
                "{q}: {e}"
            );
        }
        assert_eq!(
            callback_code("state=s%2B&code=a%20b", "s+", "https://as", false).unwrap(),
            "a b"
        );
    }

    #[test]
    fn secrets_are_equal_only_when_every_byte_is() {
        assert!(same_secret(b"", b""));
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"ab"));
        assert!(!same_secret(b"", b"a"));
    }

    #[test]
    fn the_listener_answers_get_callback_only() {
        let uri = |u: &str| u.parse::<hyper::Uri>().unwrap();
        let answer = |m: Method, u: &str| callback_answer(&m, &uri(u), "s", "https://as", false);
        let (status, _, allow, outcome) = answer(Method::GET, "/other?code=c&state=s");
        assert_eq!(
            (status.as_u16(), allow, outcome.is_none()),
            (404, None, true)
        );
        let (status, _, allow, outcome) = answer(Method::POST, "/callback?code=c&state=s");
        assert_eq!(
            (status.as_u16(), allow, outcome.is_none()),
            (405, Some("GET"), true)
        );
        let (status, page, _, outcome) = answer(Method::GET, "/callback?code=c&state=x");
        assert_eq!((status.as_u16(), outcome.is_none()), (400, true));
        assert!(page.contains("still waits"), "{page}");
        let (status, _, _, outcome) = answer(Method::GET, "/callback?error=access_denied&state=s");
        assert_eq!(status.as_u16(), 400);
        assert!(matches!(outcome, Some(Err(CallbackError::Refused { .. }))));
        let (status, _, _, outcome) = answer(Method::GET, "/callback?code=c&state=s");
        assert_eq!(status.as_u16(), 200);
        assert_eq!(outcome.unwrap().unwrap().code, "c");
    }

    #[test]
    fn a_resource_must_be_the_upstream_or_a_prefix_on_its_origin() {
        let u = Url::parse("http://localhost:9/mcp").unwrap();
        assert!(resource_matches("http://localhost:9/mcp", &u));
        assert!(resource_matches("http://localhost:9", &u));
        assert!(resource_matches("http://localhost:9/", &u));
        assert!(!resource_matches("https://evil.example.com/mcp", &u));
        assert!(!resource_matches("http://localhost:10/mcp", &u));
        assert!(!resource_matches("http://localhost:9/mc", &u));
        assert!(!resource_matches("http://localhost:9/mcp/more", &u));
        assert!(!resource_matches("not a url", &u));
    }

    fn discovered() -> Discovered {
        Discovered {
            resource: "r".into(),
            issuer: "i".into(),
            authorization_endpoint: Url::parse("http://a/authorize").unwrap(),
            token_endpoint: Url::parse("http://a/token").unwrap(),
            registration_endpoint: None,
            as_scopes: None,
            prm_scopes: None,
            auth_methods: vec![],
            grant_types: None,
            iss_supported: false,
            cimd: false,
        }
    }

    #[test]
    fn scope_is_configured_else_challenged_else_supported_else_none() {
        let cfg = UserAuth::default();
        let mut d = discovered();
        assert_eq!(choose_scope(&cfg, &d, None, ""), "");
        d.prm_scopes = Some("a b".into());
        assert_eq!(choose_scope(&cfg, &d, None, ""), "a b");
        assert_eq!(choose_scope(&cfg, &d, Some("c"), ""), "c");
        // A step-up keeps what was granted and adds the new scope.
        assert_eq!(choose_scope(&cfg, &d, Some("w"), "c w"), "w c");
        let configured = UserAuth {
            scope: Some("x".into()),
            ..UserAuth::default()
        };
        assert_eq!(choose_scope(&configured, &d, Some("c"), ""), "x");
        // offline_access only when the authorization server lists it.
        d.as_scopes = Some("a offline_access".into());
        assert_eq!(choose_scope(&cfg, &d, None, ""), "a b offline_access");
        d.grant_types = Some(vec!["authorization_code".into()]);
        assert_eq!(choose_scope(&cfg, &d, None, ""), "a b");
    }

    #[test]
    fn a_token_answer_makes_a_record_or_an_error_that_quotes_no_token() {
        let base = TokenRecord {
            issuer: "i".into(),
            client_id: "c".into(),
            resource: "r".into(),
            token_endpoint: "t".into(),
            auth_method: "none".into(),
            access_token: String::new(),
            refresh_token: Some("old".into()),
            expires_at: None,
            scope: String::new(),
        };
        let t = token_record(
            200,
            br#"{"access_token":"at","token_type":"Bearer","expires_in":100}"#,
            base.clone(),
            "a b",
        )
        .unwrap();
        assert_eq!(t.access_token, "at");
        assert_eq!(t.refresh_token.as_deref(), Some("old"));
        assert_eq!(t.scope, "a b");
        assert!(t.expires_at.unwrap() >= now() + 99);
        for (status, body, why, code) in [
            (
                400,
                &br#"{"error":"invalid_grant","error_description":"gone"}"#[..],
                "invalid_grant: gone",
                Some("invalid_grant"),
            ),
            (
                200,
                br#"{"token_type":"Bearer"}"#,
                "without an access_token",
                None,
            ),
            (
                200,
                br#"{"access_token":"secret","token_type":"DPoP"}"#,
                "not a Bearer",
                None,
            ),
            (
                200,
                b"{\"access_token\":\"sec\\nret\"}",
                "no header value",
                None,
            ),
            (200, b"not json", "without an access_token", None),
        ] {
            let (e, c) = token_record(status, body, base.clone(), "").err().unwrap();
            assert!(e.contains(why), "{e}");
            assert!(!e.contains("secret") && !e.contains("sec\nret"), "{e}");
            assert_eq!(c.as_deref(), code);
        }
    }

    #[test]
    fn the_callback_port_is_stable_per_upstream() {
        let cfg = UserAuth {
            upstream: "a".into(),
            ..UserAuth::default()
        };
        let p = callback_port(&cfg, "https://x/mcp");
        assert_eq!(p, callback_port(&cfg, "https://x/mcp"));
        assert!((61000..65500).contains(&p));
        let other = UserAuth {
            upstream: "b".into(),
            ..UserAuth::default()
        };
        // Different upstreams (almost surely) get different ports; the configured one wins.
        assert_ne!(p, callback_port(&other, "https://x/mcp"));
        let fixed = UserAuth {
            callback_port: Some(4242),
            ..cfg
        };
        assert_eq!(callback_port(&fixed, "https://x/mcp"), 4242);
    }
}
