//! Any request to the daemon's `/v1` API, as it is read before its handler runs
//! (mcpx_transport::json_api, behind the guard the `guard` target checks):
//!
//! * nothing panics;
//! * `query_param` gives, for each key the query names, the value of its first pair
//!   as a form decodes both, and nothing for a key it does not name;
//! * `post_media` lets a body be read exactly when its one `Content-Type` is
//!   `application/json` (any parameters, any case), or there is no body and none;
//! * `json_object` takes the body exactly when serde_json reads a JSON object.
//!
//! Input: a request head as it comes off the wire (parsed by httparse, as hyper
//! does), then its body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpx_transport::json_api::{json_object, post_media, query_param};

fuzz_target!(|data: &[u8]| {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut head = httparse::Request::new(&mut fields);
    let Ok(httparse::Status::Complete(len)) = head.parse(data) else {
        return;
    };
    let body = &data[len..];
    let mut headers = http::HeaderMap::new();
    for h in head.headers.iter() {
        let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(h.name.as_bytes()),
            http::HeaderValue::from_bytes(h.value),
        ) else {
            return;
        };
        headers.append(name, value);
    }
    let Ok(uri) = head.path.unwrap_or("/").parse::<http::Uri>() else {
        return;
    };

    // The query: every pair's key, as a form decodes it, and one key it lacks.
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    for (k, _) in &pairs {
        let first = pairs.iter().find(|(k2, _)| k2 == k).map(|(_, v)| v.clone());
        assert_eq!(query_param(uri.query(), k), first, "key {k:?} of {:?}", uri.query());
    }
    let absent = "\u{0}absent";
    if !pairs.iter().any(|(k, _)| k == absent) {
        assert_eq!(query_param(uri.query(), absent), None);
    }

    // The media type.
    let types: Vec<&http::HeaderValue> = headers.get_all(http::header::CONTENT_TYPE).iter().collect();
    let has_body = headers.contains_key(http::header::TRANSFER_ENCODING)
        || headers
            .get(http::header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    let json = types.len() == 1
        && types[0].to_str().is_ok_and(|t| {
            let main = t.split(';').next().unwrap_or_default().trim();
            main.eq_ignore_ascii_case("application/json")
        });
    let readable = json || (types.is_empty() && !has_body);
    assert_eq!(post_media(&headers).is_ok(), readable, "{headers:?}");

    // The body.
    let object = matches!(serde_json::from_slice::<serde_json::Value>(body), Ok(serde_json::Value::Object(_)));
    assert_eq!(json_object(body).is_ok(), object);
});
