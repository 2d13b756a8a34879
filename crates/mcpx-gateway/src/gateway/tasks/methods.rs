//! The `tasks/*` methods a host sends, answered from the task store.

use std::sync::Arc;

use mcpx_protocol::error::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, translate_code};
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::lower::lower_result;
use mcpx_protocol::meta;
use mcpx_protocol::revision::TasksFlavor;
use mcpx_protocol::task::Status;
use mcpx_server::{Call, Fault, Reply};
use serde_json::{Map, Value, json};

use super::session_key;
use super::store::{Entry, Owner, Store, not_found, now_ms, task_json};
use crate::gateway::{Gateway, fault};

/// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel` (2025-11-25) and
/// `tasks/get`, `tasks/update`, `tasks/cancel` (extension; the seam has checked the
/// request declared it).
pub(in crate::gateway) async fn method(gw: &Arc<Gateway>, call: &Call) -> Result<Reply, Fault> {
    let host = call.host;
    let owner = match host.facts().tasks {
        TasksFlavor::Core => Owner::Core(session_key(call)),
        TasksFlavor::Extension => Owner::Extension,
        TasksFlavor::None => {
            return Err(fault(
                METHOD_NOT_FOUND,
                format!("method not found: {}", call.method),
                host,
            ));
        }
    };
    let poll = gw.config().global.task_poll_interval;
    let params: Value = call
        .params
        .as_deref()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_else(|| json!({}));
    let reply = |v: Value| {
        Ok(Reply {
            result: Json::of_value(&v),
            revision: host,
        })
    };
    if call.method == "tasks/list" {
        let page = gw.config().global.page_size.max(1);
        let start = match params.get("cursor") {
            None => 0,
            Some(c) => c
                .as_str()
                .and_then(|c| c.strip_prefix("mcpxt:"))
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| fault(INVALID_PARAMS, format!("invalid cursor {c}"), host))?,
        };
        let mut map = gw.tasks.map.lock();
        Store::purge(&mut map);
        let mut mine: Vec<(&String, &Entry)> =
            map.iter().filter(|(_, e)| e.owner == owner).collect();
        mine.sort_by(|a, b| a.1.born.cmp(&b.1.born).then(a.0.cmp(b.0)));
        if start > mine.len() {
            return Err(fault(INVALID_PARAMS, "cursor past the end".into(), host));
        }
        let end = (start + page).min(mine.len());
        let tasks: Vec<Value> = mine[start..end]
            .iter()
            .map(|(id, e)| task_json(id, e, poll))
            .collect();
        let mut out = json!({ "tasks": tasks });
        if end < mine.len() {
            out["nextCursor"] = json!(format!("mcpxt:{end}"));
        }
        return reply(out);
    }
    // C-C12: params.taskId names the task; a related-task in _meta is ignored.
    let id = params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| fault(INVALID_PARAMS, "params.taskId is required".into(), host))?
        .to_owned();
    if call.method == "tasks/update" {
        return update(gw, call, &id, &params, &owner).await;
    }
    let mut changed = {
        let mut map = gw.tasks.map.lock();
        Store::purge(&mut map);
        let e = map
            .get_mut(&id)
            .filter(|e| e.owner == owner)
            .ok_or_else(|| not_found(&id, host))?;
        match call.method.as_str() {
            "tasks/get" => {
                let mut t = task_json(&id, e, poll);
                if owner == Owner::Extension {
                    // ext-tasks §Task Polling: completed inlines result, failed error.
                    match &e.outcome {
                        Some(Ok(r)) if e.status == Status::Completed => {
                            let lowered =
                                lower_result("tools/call", r.result.as_str(), r.revision, host)
                                    .map_err(|x| fault(INTERNAL_ERROR, x.to_string(), host))?;
                            t["result"] = serde_json::from_str(&lowered).unwrap_or_default();
                        }
                        Some(Err(f)) if e.status == Status::Failed => {
                            let mut err = json!({
                                "code": translate_code(f.code, "tools/call", f.from, host),
                                "message": f.message,
                            });
                            if let Some(d) = &f.data {
                                err["data"] = d.clone();
                            }
                            t["error"] = err;
                        }
                        // §Task Polling: all outstanding requests (MUST).
                        _ if e.status == Status::InputRequired && !e.inputs.is_empty() => {
                            t["inputRequests"] = Value::Object(e.inputs.clone());
                        }
                        _ => {}
                    }
                }
                return reply(t);
            }
            "tasks/cancel" => {
                if owner == Owner::Extension {
                    // ext-tasks §Task Cancellation: an acknowledgement; the task ends as
                    // the work really ends (C-C11).
                    e.cancel.cancel();
                    return reply(json!({}));
                }
                if e.status.is_terminal() {
                    // 2025-11-25 §Task Cancellation: MUST reject with -32602.
                    return Err(fault(
                        INVALID_PARAMS,
                        format!(
                            "Cannot cancel task: already in terminal status '{}'",
                            e.status.as_str()
                        ),
                        host,
                    ));
                }
                // MUST transition to cancelled before sending the response.
                e.status = Status::Cancelled;
                e.message = Some("The task was cancelled by request.".to_owned());
                e.updated = now_ms();
                e.cancel.cancel();
                e.changed.send_replace(Status::Cancelled);
                return reply(task_json(&id, e, poll));
            }

            "tasks/result" => e.changed.subscribe(),
            other => {
                return Err(fault(
                    METHOD_NOT_FOUND,
                    format!("method not found: {other}"),
                    host,
                ));
            }
        }
    };
    // tasks/result blocks until the task is terminal (§Retrieving Task Results).
    while !changed.borrow_and_update().is_terminal() {
        tokio::select! {
            () = call.cancel.cancelled() => {
                return Err(fault(INTERNAL_ERROR, "cancelled".into(), host));
            }
            r = changed.changed() => if r.is_err() { return Err(not_found(&id, host)) },
        }
    }
    let outcome = {
        let map = gw.tasks.map.lock();
        map.get(&id)
            .ok_or_else(|| not_found(&id, host))?
            .outcome
            .clone()
    };
    match outcome {
        Some(Ok(r)) => {
            let lowered = lower_result("tools/call", r.result.as_str(), r.revision, host)
                .map_err(|x| fault(INTERNAL_ERROR, x.to_string(), host))?;
            let mut v: Value = serde_json::from_str(&lowered).unwrap_or_else(|_| json!({}));
            // §Related Task Metadata: tasks/result MUST carry it (C-C12).
            if let Some(o) = v.as_object_mut()
                && let Some(m) = o
                    .entry("_meta")
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
            {
                m.insert(meta::RELATED_TASK.to_owned(), json!({ "taskId": id }));
            }
            reply(v)
        }
        // "If the underlying request resulted in a JSON-RPC error, tasks/result MUST
        // return that same JSON-RPC error."
        Some(Err(f)) => Err(f),
        None => Err(fault(
            INVALID_PARAMS,
            format!("task {id} was cancelled and has no result"),
            host,
        )),
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
    params: &Value,
    owner: &Owner,
) -> Result<Reply, Fault> {
    let host = call.host;
    let ack = || {
        Ok(Reply {
            result: Json::of_value(&json!({})),
            revision: host,
        })
    };
    let Some(responses) = params.get("inputResponses").and_then(Value::as_object) else {
        return Err(fault(
            INVALID_PARAMS,
            "params.inputResponses must be an object mapping input keys to responses".into(),
            host,
        ));
    };
    let (up, open) = {
        let mut map = gw.tasks.map.lock();
        Store::purge(&mut map);
        let e = map
            .get(id)
            .filter(|e| &e.owner == owner)
            .ok_or_else(|| not_found(id, host))?;
        let open: Map<String, Value> = responses
            .iter()
            .filter(|(k, _)| e.inputs.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        match &e.upstream {
            Some(up) if !open.is_empty() => (up.clone(), open),
            _ => return ack(),
        }
    };
    let keys: Vec<String> = open.keys().cloned().collect();
    gw.update_upstream(call, &up.upstream, &up.conn, &up.id, open)
        .await?;
    let mut map = gw.tasks.map.lock();
    if let Some(e) = map.get_mut(id) {
        for k in keys {
            e.inputs.remove(&k);
            e.answered.insert(k);
        }
        if e.inputs.is_empty() && e.status == Status::InputRequired {
            e.status = Status::Working;
            e.updated = now_ms();
            e.changed.send_replace(Status::Working);
        }
    }
    drop(map);
    ack()
}
