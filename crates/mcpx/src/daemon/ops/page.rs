//! The status page: `GET /` and its stylesheet and script, plain files built into the
//! binary. It reads `/v1/status` and follows `/v1/events`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../page/index.html");
const CSS: &str = include_str!("../page/page.css");
const JS: &str = include_str!("../page/page.js");

fn file(body: &'static str, media: &'static str) -> Response {
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Not to be framed or scripted by other pages.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'; frame-ancestors 'none'"),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// `GET /`.
pub async fn index() -> Response {
    file(INDEX, "text/html; charset=utf-8")
}

/// `GET /page.css`.
pub async fn css() -> Response {
    file(CSS, "text/css; charset=utf-8")
}

/// `GET /page.js`.
pub async fn js() -> Response {
    file(JS, "text/javascript; charset=utf-8")
}
