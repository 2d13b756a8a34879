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
//! The token endpoint is configured (`tokenUrl`): no authorization server discovery.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use url::Url;

use crate::error::TransportError;
use crate::http_client::{Endpoint, HttpClient, read_bounded};

/// What a client-credentials grant needs.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCredentials {
    /// The authorization server's token endpoint.
    pub token_url: String,
    /// The client's id.
    pub client_id: String,
    /// The client's secret.
    pub client_secret: String,
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

/// The most of a token endpoint's answer that is read.
const MAX_TOKEN_ANSWER: usize = 64 * 1024;

/// How long before its expiry a token is replaced.
const MARGIN: Duration = Duration::from_secs(30);

/// A token's lifetime when the server does not say.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);

/// Tokens for one upstream.
#[derive(Debug)]
pub(crate) struct TokenSource {
    credentials: ClientCredentials,
    /// The upstream's URL, for `resource`.
    resource: String,
    endpoint: Endpoint,
    client: HttpClient,
    timeout: Duration,
    /// The current token (`Authorization` value) and when to stop using it. The lock is
    /// held across a fetch, so that waiting requests share one.
    token: tokio::sync::Mutex<Option<(HeaderValue, Instant)>>,
}

impl TokenSource {
    /// A source for the upstream at `resource`, fetching through `client`.
    pub(crate) fn new(
        credentials: ClientCredentials,
        resource: &Url,
        client: HttpClient,
        proxy: &crate::proxy::Proxy,
        timeout: Duration,
    ) -> Result<Arc<TokenSource>, TransportError> {
        let url = crate::http_client::parse_http_url(&credentials.token_url)
            .map_err(|e| TransportError::Io(format!("oauth tokenUrl: {e}")))?;
        let endpoint = Endpoint::new(&url, &[], proxy)?;
        let mut resource = resource.clone();
        resource.set_fragment(None);
        Ok(Arc::new(TokenSource {
            credentials,
            resource: resource.to_string(),
            endpoint,
            client,
            timeout,
            token: tokio::sync::Mutex::new(None),
        }))
    }

    /// The `Authorization` value to send: the kept token while it is good, else a new
    /// one. `stale`: the token a request was just refused with (it is not used again).
    pub(crate) async fn authorization(
        &self,
        stale: Option<&HeaderValue>,
    ) -> Result<HeaderValue, TransportError> {
        let mut token = self.token.lock().await;
        if let Some((value, until)) = token.as_ref()
            && Instant::now() < *until
            && stale != Some(value)
        {
            return Ok(value.clone());
        }
        let (value, lifetime) = self.fetch().await?;
        let until = Instant::now() + lifetime.saturating_sub(MARGIN).max(Duration::from_secs(1));
        *token = Some((value.clone(), until));
        Ok(value)
    }

    /// A token from the token endpoint, and how long it lasts.
    async fn fetch(&self) -> Result<(HeaderValue, Duration), TransportError> {
        let failed = |why: String| {
            TransportError::Io(format!(
                "oauth: the token endpoint {} {why}",
                self.credentials.token_url
            ))
        };
        let enc = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
        let mut form = format!(
            "grant_type=client_credentials&resource={}",
            enc(&self.resource)
        );
        if let Some(scope) = &self.credentials.scope {
            form.push_str("&scope=");
            form.push_str(&enc(scope));
        }
        // RFC 6749 §2.3.1: the id and secret form-encoded, then Basic.
        let basic = format!(
            "Basic {}",
            B64.encode(format!(
                "{}:{}",
                enc(&self.credentials.client_id),
                enc(&self.credentials.client_secret)
            ))
        );
        let mut request = Request::new(Full::new(Bytes::from(form)));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.endpoint.target().clone();
        let headers = request.headers_mut();
        if let Some(host) = self.endpoint.host_header() {
            headers.insert(hyper::header::HOST, host.clone());
        }
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let mut auth = HeaderValue::try_from(basic).map_err(|e| failed(e.to_string()))?;
        auth.set_sensitive(true);
        headers.insert(AUTHORIZATION, auth);
        let resp = self
            .client
            .send(&self.endpoint, request, self.timeout, "oauth token request")
            .await?;
        let status = resp.status().as_u16();
        let (body, _) = read_bounded(resp, MAX_TOKEN_ANSWER)
            .await
            .map_err(|e| failed(format!("answered unreadably: {e}")))?;
        let answer: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if !(200..300).contains(&status) {
            // RFC 6749 §5.2: `error` and maybe `error_description`.
            let why = [answer.get("error"), answer.get("error_description")]
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_str)
                .collect::<Vec<_>>()
                .join(": ");
            return Err(failed(format!(
                "refused the client credentials (HTTP {status}{}{why})",
                if why.is_empty() { "" } else { ": " }
            )));
        }
        let Some(access) = answer
            .get("access_token")
            .and_then(serde_json::Value::as_str)
        else {
            return Err(failed("answered without an access_token".to_owned()));
        };
        let kind = answer
            .get("token_type")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("Bearer");
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(failed(format!("issued a {kind:?} token, not a Bearer one")));
        }
        let lifetime = answer
            .get("expires_in")
            .and_then(serde_json::Value::as_u64)
            .map_or(DEFAULT_LIFETIME, Duration::from_secs);
        let mut value = HeaderValue::try_from(format!("Bearer {access}"))
            .map_err(|e| failed(format!("issued a token that is not a header value: {e}")))?;
        value.set_sensitive(true);
        Ok((value, lifetime))
    }
}
