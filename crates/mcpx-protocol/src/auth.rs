//! What mcpx makes of an upstream's authorization challenge when it is not the one
//! authorizing.
//!
//! An upstream without a configured credential gets a user's authorization
//! (mcpx-transport's `oauth::code`: discovery, registration, step-up; registers B-C14,
//! B-C15, B-C18), which reads the challenges parsed here. An upstream whose credential
//! is configured (static headers, or OAuth client credentials, whose refused token is
//! replaced once) is not authorized by mcpx. So a `401` or an `insufficient_scope`
//! `403` from it that reaches this point is reported, never acted on: [`explain`]
//! turns the status and the
//! `WWW-Authenticate` header (RFC 9110 §11.6.1, RFC 6750 §3) into words an operator
//! can act on, quoting the `resource_metadata` URL (RFC 9728 §5.1) and the scope the
//! upstream asked for.

/// One challenge of a `WWW-Authenticate` header: `Bearer error="…", scope="…"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The auth scheme (`Bearer`), as written.
    pub scheme: String,
    /// The auth-params, names lowercased, values unquoted, in order.
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// The value of auth-param `name` (case-insensitive), the first if repeated.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// Parses a `WWW-Authenticate` value into its challenges (RFC 9110 §11.6.1). Tolerant:
/// what cannot be read is skipped, never fatal.
pub fn parse(header: &str) -> Vec<Challenge> {
    let s: Vec<char> = header.chars().collect();
    let mut i = 0;
    let mut out: Vec<Challenge> = Vec::new();
    let skip_ws = |i: &mut usize| {
        while *i < s.len() && (s[*i] == ' ' || s[*i] == '\t' || s[*i] == ',') {
            *i += 1;
        }
    };
    let token = |i: &mut usize| -> String {
        let start = *i;
        while *i < s.len() && is_tchar(s[*i]) {
            *i += 1;
        }
        s[start..*i].iter().collect()
    };
    loop {
        skip_ws(&mut i);
        if i >= s.len() {
            return out;
        }
        let start = i;
        let word = token(&mut i);
        if word.is_empty() {
            // Not a token: skip one character and go on.
            i += 1;
            continue;
        }
        // Optional whitespace, then `=` makes it an auth-param of the current challenge.
        let mut j = i;
        while j < s.len() && (s[j] == ' ' || s[j] == '\t') {
            j += 1;
        }
        let is_param = j < s.len() && s[j] == '=' && s.get(j + 1).is_none_or(|c| *c != '=');
        if !is_param || out.is_empty() {
            if is_param {
                // A param before any scheme: nothing to attach it to.
                i = j + 1;
                continue;
            }
            out.push(Challenge {
                scheme: s[start..i].iter().collect(),
                params: Vec::new(),
            });
            continue;
        }
        i = j + 1;
        while i < s.len() && (s[i] == ' ' || s[i] == '\t') {
            i += 1;
        }
        let value = if s.get(i) == Some(&'"') {
            i += 1;
            let mut v = String::new();
            while i < s.len() && s[i] != '"' {
                if s[i] == '\\' && i + 1 < s.len() {
                    i += 1;
                }
                v.push(s[i]);
                i += 1;
            }
            i += 1; // the closing quote (or the end)
            v
        } else {
            token(&mut i)
        };
        if let Some(c) = out.last_mut() {
            c.params.push((word.to_ascii_lowercase(), value));
        }
    }
}

/// The challenge to read: the `Bearer` one if there is one, else the first.
pub fn main_challenge(header: &str) -> Option<Challenge> {
    let all = parse(header);
    all.iter()
        .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))
        .or_else(|| all.first())
        .cloned()
}

/// Whether a 403's challenge says the token lacks scope (RFC 6750 §3.1
/// `insufficient_scope`; 2026-07-28 basic/authorization §Runtime Insufficient Scope
/// Errors).
pub fn is_insufficient_scope(header: Option<&str>) -> bool {
    header
        .and_then(main_challenge)
        .is_some_and(|c| c.param("error") == Some("insufficient_scope"))
}

/// What to tell an operator about an upstream's `401` or `403`, given its
/// `WWW-Authenticate` value. The caller adds the upstream's name.
pub fn explain(status: u16, header: Option<&str>) -> String {
    let c = header.and_then(main_challenge);
    let param = |k: &str| c.as_ref().and_then(|c| c.param(k)).map(str::to_owned);
    let metadata = param("resource_metadata")
        .map(|u| format!("; its resource metadata is at {u}"))
        .unwrap_or_default();
    let description = param("error_description")
        .map(|d| format!(" ({d})"))
        .unwrap_or_default();
    match status {
        // RFC 6750 §3.1: credentials were sent, and refused.
        401 if param("error").as_deref() == Some("invalid_token") => format!(
            "HTTP 401 invalid_token: the upstream refused the credential mcpx sent{description}{metadata}; check the one this upstream's `headers` or `mcpx.oauth` give (wrong, expired or revoked)"
        ),
        401 => format!(
            "HTTP 401: the upstream requires authorization{description}{metadata}; its configured credential gives none, so configure one for this upstream: a header in its `headers` (for example Authorization), or OAuth client credentials in `mcpx.oauth`"
        ),
        403 if is_insufficient_scope(header) => {
            let scope = param("scope")
                .map(|s| format!(" (scope required: {s})"))
                .unwrap_or_default();
            format!(
                "HTTP 403 insufficient_scope: the upstream's credential lacks the scope for this request{scope}{description}{metadata}; mcpx steps up only a user's authorization, so configure a credential with that scope (this upstream's `headers`, or `mcpx.oauth.scope`)"
            )
        }
        s => format!(
            "HTTP {s}: the upstream refused the request{description}{metadata}; check the credential this upstream's `headers` or `mcpx.oauth` give"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_credential_is_told_from_a_missing_one() {
        let missing = explain(401, Some(r#"Bearer realm="mcpx""#));
        assert!(
            missing.starts_with("HTTP 401: the upstream requires authorization"),
            "{missing}"
        );
        let refused = explain(
            401,
            Some(r#"Bearer realm="mcpx", error="invalid_token", error_description="expired""#),
        );
        assert!(
            refused.starts_with(
                "HTTP 401 invalid_token: the upstream refused the credential mcpx sent"
            ) && refused.contains("(expired)"),
            "{refused}"
        );
    }

    #[test]
    fn parses_bearer_params() {
        let h = r#"Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="http://127.0.0.1:9/.well-known/oauth-protected-resource""#;
        let c = parse(h);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].scheme, "Bearer");
        assert_eq!(c[0].param("error"), Some("insufficient_scope"));
        assert_eq!(c[0].param("SCOPE"), Some("files:read files:write"));
        assert_eq!(
            c[0].param("resource_metadata"),
            Some("http://127.0.0.1:9/.well-known/oauth-protected-resource")
        );
        assert!(is_insufficient_scope(Some(h)));
    }

    #[test]
    fn several_challenges_tokens_and_escapes() {
        let h =
            r#"Basic realm="a \"b\"", Bearer error=invalid_token , error_description="expired""#;
        let c = parse(h);
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c[0].param("realm"), Some("a \"b\""));
        assert_eq!(c[1].param("error"), Some("invalid_token"));
        assert_eq!(c[1].param("error_description"), Some("expired"));
        assert!(!is_insufficient_scope(Some(h)));
        // A token68 and junk are tolerated, not fatal.
        assert_eq!(parse("Negotiate abc==").len(), 2);
        assert!(parse("").is_empty());
        assert!(parse("=,\"").is_empty());
    }

    #[test]
    fn explanations_name_what_the_operator_needs() {
        let m = explain(
            401,
            Some(r#"Bearer resource_metadata="http://x/.well-known/oauth-protected-resource/mcp""#),
        );
        assert!(m.contains("401"), "{m}");
        assert!(
            m.contains("http://x/.well-known/oauth-protected-resource/mcp"),
            "{m}"
        );
        assert!(m.contains("headers"), "{m}");
        let m = explain(403, Some(r#"Bearer error="insufficient_scope", scope="w""#));
        assert!(m.contains("insufficient_scope") && m.contains("scope required: w"));
        let m = explain(401, None);
        assert!(m.contains("headers") && !m.contains("resource metadata"));
    }
}
