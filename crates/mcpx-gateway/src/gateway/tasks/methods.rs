//! The `tasks/*` methods a host sends, served from the task store: `tasks/get`,
//! `tasks/result`, `tasks/list`, `tasks/cancel` (2025-11-25) and `tasks/get`,
//! `tasks/update`, `tasks/cancel` (ext-tasks; the seam has checked the request
//! declared it).

use std::sync::Arc;

use mcpx_protocol::error::translate_code;
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::lower::lower_result;
use mcpx_protocol::revision::{Revision, TasksFlavor};
use mcpx_server::{Call, Fault, Reply};
use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer};
use serde_json::{Map, Value, json};

use super::poll::update_upstream;
use super::session_key;
use super::shape::name_task;
use super::store::{Cancelled, Inline, Outstanding, Owner, Store};
use crate::error::GatewayError;
use crate::gateway::{Gateway, handlers};

/// A `tasks/*` method: `tasks/list`, or one of a task named by `params.taskId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TaskMethod {
    List,
    Task(Op),
}

/// A method of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Get,
    Result,
    Cancel,
    Update,
}

impl TaskMethod {
    fn parse(method: &str) -> Option<Self> {
        Some(match method {
            "tasks/list" => TaskMethod::List,
            "tasks/get" => TaskMethod::Task(Op::Get),
            "tasks/result" => TaskMethod::Task(Op::Result),
            "tasks/cancel" => TaskMethod::Task(Op::Cancel),
            "tasks/update" => TaskMethod::Task(Op::Update),
            _ => return None,
        })
    }
}

/// The params of `tasks/get|result|cancel|update`. A member of another type reads as
/// absent: the method's own check says which member it needs.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskParams {
    /// C-C12: `params.taskId` names the task; a related-task in `_meta` is ignored.
    #[serde(default, deserialize_with = "string")]
    task_id: Option<String>,
    /// `tasks/update`: the host's answers, by input key.
    #[serde(default, deserialize_with = "object")]
    input_responses: Option<Map<String, Value>>,
}

/// The params of `tasks/list`.
#[derive(Debug, Default, Deserialize)]
struct ListParams {
    /// As given, `null` included: any cursor but one mcpx handed out is refused.
    #[serde(default, deserialize_with = "present")]
    cursor: Option<Value>,
}

fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        _ => None,
    })
}

fn object<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Map<String, Value>>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Object(m) => Some(m),
        _ => None,
    })
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `call`'s params as `P`: all absent unless they are an object.
fn read<P: DeserializeOwned + Default>(call: &Call) -> P {
    match handlers::params_json(call) {
        v @ Value::Object(_) => P::deserialize(v).unwrap_or_default(),
        _ => P::default(),
    }
}

/// Serves a `tasks/*` request.
pub(in crate::gateway) async fn method(gw: &Arc<Gateway>, call: &Call) -> Result<Reply, Fault> {
    let host = call.host;
    let no_method = || GatewayError::MethodNotFound(call.method.clone()).to_fault(host);
    let owner = match host.facts().tasks {
        TasksFlavor::Core => Owner::Core(session_key(call)),
        TasksFlavor::Extension => Owner::Extension,
        TasksFlavor::None => return Err(no_method()),
    };
    let method = TaskMethod::parse(&call.method).ok_or_else(no_method)?;
    let config = gw.config();
    let (store, poll) = (&gw.tasks, config.global.task_poll_interval);
    let fail = |e: GatewayError| e.to_fault(host);
    let result = match method {
        TaskMethod::List => {
            let page = config.global.page_size.max(1);
            list(store, &owner, read(call), page, poll).map_err(fail)?
        }
        TaskMethod::Task(op) => {
            let p: TaskParams = read(call);
            let required = || GatewayError::InvalidParams("params.taskId is required".into());
            let id = p.task_id.as_deref().ok_or_else(|| fail(required()))?;
            match op {
                Op::Get => get(store, id, &owner, poll, host).map_err(fail)?,
                Op::Cancel => match store.cancel(id, &owner, poll).map_err(fail)? {
                    // ext-tasks §Task Cancellation: an acknowledgement (C-C11).
                    Cancelled::Acknowledged => json!({}),
                    Cancelled::Task(t) => t,
                },
                Op::Result => result(store, id, &owner, call).await?,
                Op::Update => update(gw, call, id, &owner, p.input_responses).await?,
            }
        }
    };
    Ok(Reply {
        result: Json::of_value(&result),
        revision: host,
    })
}

/// `tasks/list`: the owner's tasks, a page at a time (cursors `mcpxt:<n>`).
fn list(
    store: &Store,
    owner: &Owner,
    p: ListParams,
    page: usize,
    poll: std::time::Duration,
) -> Result<Value, GatewayError> {
    let start = match p.cursor {
        None => 0,
        Some(c) => c
            .as_str()
            .and_then(|c| c.strip_prefix("mcpxt:"))
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| GatewayError::InvalidParams(format!("invalid cursor {c}")))?,
    };
    let page = store
        .list(owner, start, page, poll)
        .ok_or_else(|| GatewayError::InvalidParams("cursor past the end".into()))?;
    let mut out = json!({ "tasks": page.tasks });
    if let Some(end) = page.next {
        out["nextCursor"] = json!(format!("mcpxt:{end}"));
    }
    Ok(out)
}

/// `tasks/get`: the `Task`; an extension task's also inlines its result, its error,
/// or its outstanding input requests (ext-tasks §Task Polling: all of them, MUST).
fn get(
    store: &Store,
    id: &str,
    owner: &Owner,
    poll: std::time::Duration,
    host: Revision,
) -> Result<Value, GatewayError> {
    let (mut t, inline) = store.get(id, owner, poll)?;
    match inline {
        Some(Inline::Result(r)) => {
            let lowered = lower_result("tools/call", r.result.as_str(), r.revision, host)?;
            t["result"] = serde_json::from_str(&lowered).unwrap_or_default();
        }
        Some(Inline::Error(f)) => {
            let mut err = json!({
                "code": translate_code(f.code, "tools/call", f.from, host),
                "message": f.message,
            });
            if let Some(d) = f.data {
                err["data"] = d;
            }
            t["error"] = err;
        }
        Some(Inline::Inputs(requests)) => t["inputRequests"] = Value::Object(requests),
        None => {}
    }
    Ok(t)
}

/// `tasks/result`: blocks until the task is terminal (§Retrieving Task Results), then
/// its result, naming the task (§Related Task Metadata: MUST, C-C12), or the same
/// JSON-RPC error the work ended with (MUST).
async fn result(store: &Store, id: &str, owner: &Owner, call: &Call) -> Result<Value, Fault> {
    let host = call.host;
    let fail = |e: GatewayError| e.to_fault(host);
    match store.outcome(id, owner, &call.cancel).await.map_err(fail)? {
        Some(Ok(r)) => {
            let lowered = lower_result("tools/call", r.result.as_str(), r.revision, host)
                .map_err(|x| fail(x.into()))?;
            let mut v: Value = serde_json::from_str(&lowered).unwrap_or_else(|_| json!({}));
            name_task(&mut v, json!({ "taskId": id }));
            Ok(v)
        }
        Some(Err(f)) => Err(f),
        None => Err(fail(GatewayError::TaskNoResult(id.to_owned()))),
    }
}

/// ext-tasks §Task Update Requests: the host's answers to the outstanding requests of
/// its task go to the upstream task they came from; responses to keys not outstanding
/// (never issued, answered before, or of a task that never asked) are ignored (SHOULD).
/// The upstream's refusal is the host's error; once it acknowledges, the keys are
/// answered and the task is `working` again when none is left (the ack is empty).
async fn update(
    gw: &Arc<Gateway>,
    call: &Call,
    id: &str,
    owner: &Owner,
    responses: Option<Map<String, Value>>,
) -> Result<Value, Fault> {
    let fail = |e: GatewayError| e.to_fault(call.host);
    let Some(responses) = responses else {
        return Err(fail(GatewayError::InvalidParams(
            "params.inputResponses must be an object mapping input keys to responses".into(),
        )));
    };
    let Some(Outstanding { task, responses }) =
        gw.tasks.outstanding(id, owner, &responses).map_err(fail)?
    else {
        return Ok(json!({}));
    };
    let keys: Vec<String> = responses.keys().cloned().collect();
    let up = &task.upstream;
    update_upstream(gw, call, up, &task.conn, &task.id, responses).await?;
    gw.tasks.answered(id, keys);
    Ok(json!({}))
}
