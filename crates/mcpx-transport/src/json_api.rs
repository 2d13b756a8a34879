//! What a JSON API over HTTP reads of a request before its handler runs: a query
//! parameter, whether a `POST`'s body is JSON, and the body as one JSON object. The
//! daemon's `/v1` API reads its requests with these (behind [`crate::origin::Guard`]);
//! the `v1` fuzz target checks them.

use axum::http::{HeaderMap, header};
use serde_json::{Map, Value};

/// The first value of the query parameter `key` in `query` (`a=1&b=2`), both decoded
/// as a form is (`+` is a space, `%XX` a byte, bad UTF-8 replaced). A parameter with
/// no `=` has the empty value.
pub fn query_param(query: Option<&str>, key: &str) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// Why a `POST`'s body is refused before it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MediaRefused {
    /// Its `Content-Type` names another type (or is not text).
    #[error("a POST's body must be Content-Type: application/json")]
    NotJson,
    /// It has a body and no `Content-Type`.
    #[error("a POST's body must say Content-Type: application/json")]
    Unnamed,
}

/// Whether a `POST` with these headers may be read: its body named
/// `application/json` (any parameters, any case), or no body at all. A page may send
/// a form's `text/plain`, or a body named nothing, to any origin without asking first;
/// it cannot send JSON so.
pub fn post_media(headers: &HeaderMap) -> Result<(), MediaRefused> {
    let mut named = headers.get_all(header::CONTENT_TYPE).iter();
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    match (named.next(), named.next()) {
        (None, _) if has_body => Err(MediaRefused::Unnamed),
        (None, _) => Ok(()),
        (Some(v), None) => {
            let main = v
                .to_str()
                .unwrap_or_default()
                .split(';')
                .next()
                .unwrap_or_default();
            if main.trim().eq_ignore_ascii_case("application/json") {
                Ok(())
            } else {
                Err(MediaRefused::NotJson)
            }
        }
        (Some(_), Some(_)) => Err(MediaRefused::NotJson),
    }
}

/// Why a body is not a JSON object.
#[derive(Debug, thiserror::Error)]
pub enum ObjectRefused {
    /// It is not JSON.
    #[error("the body is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// It is JSON, but not an object.
    #[error("the body must be a JSON object")]
    NotObject,
}

/// `body` as a JSON object.
pub fn json_object(body: &[u8]) -> Result<Map<String, Value>, ObjectRefused> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(ObjectRefused::NotObject),
        Err(e) => Err(ObjectRefused::NotJson(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_are_decoded_as_forms_are() {
        assert_eq!(
            query_param(Some("q=a+b%21&q=2"), "q").as_deref(),
            Some("a b!")
        );
        assert_eq!(query_param(Some("flag&x=1"), "flag").as_deref(), Some(""));
        assert_eq!(
            query_param(Some("s%69nce=3"), "since").as_deref(),
            Some("3")
        );
        assert_eq!(query_param(None, "q"), None);
    }

    #[test]
    fn only_json_or_no_body_is_read() {
        let with = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(*k, header::HeaderValue::from_static(v));
            }
            post_media(&h)
        };
        assert_eq!(
            with(&[("content-type", "Application/JSON; charset=utf-8")]),
            Ok(())
        );
        assert_eq!(with(&[]), Ok(()));
        assert_eq!(with(&[("content-length", "0")]), Ok(()));
        assert_eq!(with(&[("content-length", "2")]), Err(MediaRefused::Unnamed));
        assert_eq!(
            with(&[("content-type", "text/plain")]),
            Err(MediaRefused::NotJson)
        );
        assert_eq!(
            with(&[
                ("content-type", "application/json"),
                ("content-type", "text/plain")
            ]),
            Err(MediaRefused::NotJson)
        );
    }
}
