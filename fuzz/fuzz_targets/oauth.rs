//! Any token endpoint answer, metadata document, URL and `WWW-Authenticate` value, as
//! mcpx's OAuth client credentials read them (mcpx_transport::oauth, and
//! mcpx_protocol::auth for the challenge):
//!
//! * a token answer is accepted exactly when serde_json's reading of it has a 2xx
//!   status, a string `access_token`, a `Bearer` (or no) `token_type` and a token that
//!   can be a header value; it gives `Bearer <token>`, marked sensitive, for
//!   `expires_in` seconds (else an hour; at most a year, a time an `Instant` can
//!   hold); and a refusal never quotes the token;
//! * the metadata documents' URLs are those serde_json reads;
//! * every metadata URL looked for is on the origin of the URL it is derived from,
//!   under `/.well-known/`, with no query or fragment, each once;
//! * a parsed challenge, written back, parses to itself.
//!
//! Input: the status (two bytes, big-endian), then the body, a URL and a
//! `WWW-Authenticate` value, separated by 0xFF bytes.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use mcpx_protocol::auth::{self, Challenge};
use mcpx_transport::oauth::{
    MAX_LIFETIME, authorization_server, authorization_server_metadata_urls, resource_metadata_urls,
    token_answer, token_endpoint,
};
use serde_json::Value;
use url::Url;

fuzz_target!(|data: &[u8]| {
    let [hi, lo, rest @ ..] = data else {
        return;
    };
    let status = u16::from_be_bytes([*hi, *lo]);
    let mut parts = rest.splitn(3, |&b| b == 0xFF);
    let body = parts.next().unwrap_or_default();
    let url = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let header = String::from_utf8_lossy(parts.next().unwrap_or_default());
    token(status, body);
    if let Ok(body) = std::str::from_utf8(body) {
        metadata(body);
    }
    urls(&url);
    challenge(status, &header);
});

fn token(status: u16, body: &[u8]) {
    let answer: Value = serde_json::from_slice(body).unwrap_or_default();
    let access = answer.get("access_token").and_then(Value::as_str);
    let bearer = answer.get("token_type").map_or(Some(true), |t| {
        t.as_str().map(|t| t.eq_ignore_ascii_case("bearer"))
    });
    let expected = match access {
        Some(a) if (200..300).contains(&status) && bearer == Some(true) => {
            http_header_value(&format!("Bearer {a}"))
        }
        _ => false,
    };
    match token_answer(status, body) {
        Ok((value, lifetime)) => {
            assert!(expected, "accepted {status} {body:?}");
            assert!(value.is_sensitive());
            assert_eq!(
                value.as_bytes(),
                format!("Bearer {}", access.unwrap_or_default()).as_bytes()
            );
            let secs = answer.get("expires_in").and_then(Value::as_u64);
            assert_eq!(
                lifetime,
                secs.map_or(Duration::from_secs(3600), Duration::from_secs)
                    .min(MAX_LIFETIME)
            );
            // The token is kept until a time an `Instant` can hold.
            assert!(Instant::now().checked_add(lifetime).is_some());
        }
        Err(why) => {
            assert!(!expected, "refused {status} {body:?}: {why}");
            // The words do not depend on the token: the same answer with another token
            // of the same kind (visible characters for visible ones, line feeds for the
            // rest) is refused in the same words.
            if let Some(a) = access {
                let other: String = a
                    .chars()
                    .map(|c| {
                        if http_header_value(&c.to_string()) {
                            'a'
                        } else {
                            '\n'
                        }
                    })
                    .collect();
                let mut answer = answer.clone();
                answer["access_token"] = Value::from(other);
                let again = token_answer(status, &serde_json::to_vec(&answer).unwrap_or_default());
                assert_eq!(again.err().as_deref(), Some(why.as_str()), "{body:?}");
            }
        }
    }
}

/// What `http::HeaderValue` takes: visible ASCII, space, tab and bytes from 0x80.
fn http_header_value(s: &str) -> bool {
    s.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

fn metadata(body: &str) {
    let Ok(doc) = serde_json::from_str::<Value>(body) else {
        return;
    };
    let first = doc
        .get("authorization_servers")
        .and_then(|a| a.get(0))
        .and_then(Value::as_str);
    assert_eq!(
        authorization_server(&doc),
        first.and_then(|s| Url::parse(s).ok())
    );
    let token = doc.get("token_endpoint").and_then(Value::as_str);
    assert_eq!(token_endpoint(&doc), token.and_then(|s| Url::parse(s).ok()));
}

fn urls(url: &str) {
    let Ok(url) = Url::parse(url) else {
        return;
    };
    if !matches!(url.scheme(), "http" | "https") {
        return;
    }
    let path = url.path().trim_end_matches('/');
    let resource = resource_metadata_urls(&url);
    let issuer = authorization_server_metadata_urls(&url);
    assert!((1..=2).contains(&resource.len()), "{resource:?}");
    // An issuer whose path is `/.well-known/openid-configuration` (repeated) gives the
    // path-inserted and the path-appended OpenID URL alike: it is looked for once.
    let openid_alike = format!("/.well-known/openid-configuration{path}")
        == format!("{path}/.well-known/openid-configuration");
    assert_eq!(
        issuer.len(),
        if path.is_empty() || openid_alike {
            2
        } else {
            3
        },
        "{issuer:?}"
    );
    assert_eq!(
        resource[0].path(),
        format!("/.well-known/oauth-protected-resource{path}")
    );
    for (i, u) in resource.iter().chain(&issuer).enumerate() {
        assert_eq!(u.origin(), url.origin(), "{url} -> {u}");
        assert_eq!(u.query(), None, "{u}");
        assert_eq!(u.fragment(), None, "{u}");
        assert!(
            u.path().starts_with("/.well-known/")
                || u.path().ends_with("/.well-known/openid-configuration"),
            "{url} -> {u}"
        );
        let all: Vec<&Url> = resource.iter().chain(&issuer).collect();
        let before = if i < resource.len() {
            &all[..i]
        } else {
            &all[resource.len()..i]
        };
        assert!(!before.contains(&u), "{u} twice");
    }
}

fn challenge(status: u16, header: &str) {
    let all = auth::parse(header);
    for c in &all {
        assert!(!c.scheme.is_empty());
        for (k, _) in &c.params {
            assert!(!k.is_empty() && *k == k.to_ascii_lowercase(), "{c:?}");
        }
    }
    let again = auth::parse(&written(&all));
    assert_eq!(again, all, "{header:?} written as {:?}", written(&all));
    let main = auth::main_challenge(header);
    assert_eq!(main.is_some(), !all.is_empty());
    let words = auth::explain(status, Some(header));
    assert!(words.starts_with(&format!("HTTP {status}")), "{words}");
}

/// Challenges written back: `scheme k="v", …`, values quoted with `\` before `"` and `\`.
fn written(all: &[Challenge]) -> String {
    all.iter()
        .map(|c| {
            let params: Vec<String> = c
                .params
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
                .collect();
            if params.is_empty() {
                c.scheme.clone()
            } else {
                format!("{} {}", c.scheme, params.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}
