//! Any query of a request to the callback listener of an authorization-code login,
//! as the listener reads it (mcpx_transport::oauth::code::callback_code):
//!
//! * no query panics it;
//! * a query is taken for the authorization server's redirect (any answer but
//!   `CallbackError::State`) exactly when it carries `state` once, equal to the one
//!   sent byte for byte, as `url::form_urlencoded` decodes it;
//! * it gives a code exactly when, besides, it carries `code` once and not empty, no
//!   `error`, at most one `error_description`, and no `iss` but the issuer (once),
//!   or, when the issuer promised one, exactly that `iss`; and the code is the query's.
//!
//! Input: a flags byte (bit 0: the issuer promised an `iss`), then the `state` sent,
//! a 0xFF byte, and the query.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpx_transport::oauth::code::{CallbackError, callback_code};

/// The authorization server's issuer.
const ISSUER: &str = "https://as.example";

fuzz_target!(|data: &[u8]| {
    let [flags, rest @ ..] = data else {
        return;
    };
    let iss_required = flags & 1 == 1;
    let mut parts = rest.splitn(2, |&b| b == 0xFF);
    let state = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let query = String::from_utf8_lossy(parts.next().unwrap_or_default());

    let values = |name: &str| -> Vec<String> {
        url::form_urlencoded::parse(query.as_bytes())
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .collect()
    };
    let states = values("state");
    let codes = values("code");
    let isses = values("iss");
    let errors = values("error");
    let descriptions = values("error_description");

    let is_redirect = states.len() == 1 && states[0] == *state;
    let iss_ok = if iss_required {
        isses.len() == 1 && isses[0] == ISSUER
    } else {
        isses.is_empty() || (isses.len() == 1 && isses[0] == ISSUER)
    };
    let gives_code = is_redirect
        && codes.len() == 1
        && !codes[0].is_empty()
        && errors.is_empty()
        && descriptions.len() <= 1
        && iss_ok;

    let result = callback_code(&query, &state, ISSUER, iss_required);
    assert_eq!(
        !matches!(result, Err(CallbackError::State)),
        is_redirect,
        "state {state:?}, query {query:?}: {result:?}"
    );
    match result {
        Ok(code) => {
            assert!(
                gives_code,
                "state {state:?}, query {query:?}: gave {code:?}"
            );
            assert_eq!(code, codes[0]);
        }
        Err(e) => assert!(
            !gives_code,
            "state {state:?}, query {query:?}: refused ({e})"
        ),
    }
});
