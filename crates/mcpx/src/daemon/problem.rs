//! Errors of the `/v1` API as RFC 9457 problem details (`application/problem+json`),
//! carrying the JSON-RPC error when the gateway gave one.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcpx_protocol::error::{
    INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY, RESOURCE_NOT_FOUND_LEGACY,
};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// The media type of a problem.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// One problem: an HTTP status, a kind (the `type` URI's last part), a title and what
/// happened.
#[derive(Debug, Clone)]
pub struct Problem {
    /// The HTTP status.
    pub status: StatusCode,
    /// The kind: `urn:mcpx:problem:<kind>`.
    pub kind: &'static str,
    /// What happened, for people.
    pub detail: String,
    /// The JSON-RPC error the gateway answered, if any.
    pub jsonrpc: Option<RpcError>,
}

impl Problem {
    /// A problem of `kind` with `status`.
    pub fn new(status: StatusCode, kind: &'static str, detail: impl Into<String>) -> Problem {
        Problem {
            status,
            kind,
            detail: detail.into(),
            jsonrpc: None,
        }
    }

    /// 400: the request is not what the operation takes.
    pub fn bad_request(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::BAD_REQUEST, "bad-request", detail)
    }

    /// 404: no such thing.
    pub fn not_found(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::NOT_FOUND, "not-found", detail)
    }

    /// The problem for a JSON-RPC error the gateway answered `method` with. `unknown`
    /// says the name or URI asked for is not in the catalog.
    pub fn of_rpc(code: i64, message: &str, data: Option<Value>, unknown: bool) -> Problem {
        let unavailable = data
            .as_ref()
            .and_then(|d| d.get("state"))
            .and_then(Value::as_str)
            .is_some();
        let (status, kind) = match code {
            _ if unavailable => (StatusCode::SERVICE_UNAVAILABLE, "upstream-unavailable"),
            _ if unknown => (StatusCode::NOT_FOUND, "unknown-name"),
            METHOD_NOT_FOUND => (StatusCode::NOT_FOUND, "method-not-found"),
            RESOURCE_NOT_FOUND_LEGACY => (StatusCode::NOT_FOUND, "resource-not-found"),
            INVALID_PARAMS => (StatusCode::UNPROCESSABLE_ENTITY, "invalid-params"),
            // The caller did not declare what the server needs (`capabilities`).
            MISSING_REQUIRED_CLIENT_CAPABILITY => (StatusCode::BAD_REQUEST, "missing-capability"),
            -32603 => (StatusCode::INTERNAL_SERVER_ERROR, "internal-error"),
            _ => (StatusCode::BAD_GATEWAY, "upstream-error"),
        };
        let rpc = RpcError {
            code,
            message: message.to_owned(),
            data,
        };
        Problem {
            status,
            kind,
            detail: message.to_owned(),
            jsonrpc: Some(rpc),
        }
    }

    /// The problem document.
    pub fn document(&self) -> ProblemDocument {
        ProblemDocument {
            kind: format!("urn:mcpx:problem:{}", self.kind),
            title: self.status.canonical_reason().unwrap_or("Error").to_owned(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            jsonrpc: self.jsonrpc.clone(),
        }
    }

    /// The problem document, as JSON.
    pub fn to_json(&self) -> Value {
        to_value(&self.document())
    }
}

/// A problem (RFC 9457), as the API answers it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Problem)]
pub struct ProblemDocument {
    /// `urn:mcpx:problem:<kind>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The HTTP status's reason phrase.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What happened, for people.
    pub detail: String,
    /// The JSON-RPC error the gateway answered with.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub jsonrpc: Option<RpcError>,
}

/// A JSON-RPC error, as the gateway answered it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RpcError {
    /// The JSON-RPC error code.
    pub code: i64,
    /// The JSON-RPC error message.
    pub message: String,
    /// The JSON-RPC error's data, if it had any.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub data: Option<Value>,
}

/// `v` as JSON. A map's keys come out sorted (serde_json's `Value`), so an answer's
/// bytes do not depend on the order of a type's fields.
pub fn to_value(v: &impl Serialize) -> Value {
    // The API's types are strings, numbers and JSON values with string keys, which
    // serialise without error; `null` stands in for one that would not.
    serde_json::to_value(v).unwrap_or(Value::Null)
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut r = (self.status, self.to_json().to_string()).into_response();
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        r
    }
}

/// A JSON response with `status`.
pub fn json_response(status: StatusCode, v: &impl Serialize) -> Response {
    let mut r = (status, to_value(v).to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rpc_errors_get_the_status_of_what_went_wrong() {
        let unknown = Problem::of_rpc(INVALID_PARAMS, "unknown tool: x", None, true);
        assert_eq!(unknown.status, StatusCode::NOT_FOUND);
        assert_eq!(unknown.to_json()["jsonrpc"]["code"], json!(-32602));
        let bad = Problem::of_rpc(INVALID_PARAMS, "bad", None, false);
        assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
        let down = Problem::of_rpc(
            -32000,
            "down",
            Some(json!({"upstream": "a", "state": "crash_loop"})),
            false,
        );
        assert_eq!(down.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            down.to_json()["jsonrpc"]["data"]["state"],
            json!("crash_loop")
        );
        assert_eq!(
            Problem::of_rpc(-32000, "x", None, false).status,
            StatusCode::BAD_GATEWAY
        );
    }
}
