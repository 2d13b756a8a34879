//! The task store: mcpx's own tasks, bounded by `mcpx.limits.maxTasks` and
//! `taskTtlMs`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use mcpx_client::Connection;
use mcpx_protocol::Revision;
use mcpx_protocol::error::{INTERNAL_ERROR, INVALID_PARAMS};
use mcpx_protocol::task::{Status, iso8601};
use mcpx_server::{Call, Fault, Reply};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
// tokio's clock (the system's but when a test pauses it), as the supervisor's.
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::shape::{clean, is_tool_error};
use crate::gateway::{Upstream, fault, random_token};

/// Who may see a task: a 2025-11-25 host's session, or any extension request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Owner {
    Core(String),
    Extension,
}

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) owner: Owner,
    pub(super) status: Status,
    pub(super) message: Option<String>,
    pub(super) created: u64,
    pub(super) updated: u64,
    pub(super) ttl: Duration,
    pub(super) born: Instant,
    /// `None` until the work ends (or when it was cancelled).
    pub(super) outcome: Option<Result<Reply, Fault>>,
    /// Fired by `tasks/cancel` (and on expiry): the work's cancellation.
    pub(super) cancel: CancellationToken,
    pub(super) changed: watch::Sender<Status>,
    /// Asks of the work waiting on the host (while any does, the task is
    /// `input_required`).
    pub(super) asks: usize,
    /// ext-tasks: the upstream task's outstanding input requests, as the host sees
    /// them, by key (on `tasks/get` while `input_required`).
    pub(super) inputs: Map<String, Value>,
    /// Keys whose answers went upstream: never surfaced again (ext-tasks §Input
    /// Requests: keys are unique over a task's life), though a poll may still list
    /// them before the upstream has taken the answer in (its ack is eventually
    /// consistent).
    pub(super) answered: HashSet<String>,
    /// ext-tasks: the upstream task behind this one, where `tasks/update` goes.
    pub(super) upstream: Option<UpstreamTask>,
}

/// An upstream's 2026-07-28 task that a gateway task stands for.
#[derive(Debug, Clone)]
pub(super) struct UpstreamTask {
    pub(super) upstream: Arc<Upstream>,
    pub(super) id: String,
    pub(super) conn: Connection,
}

/// An open ask of a 2025-11-25 gateway task's work: the task is `input_required` until
/// the last one is dropped, then `working` again (2025-11-25 §Input Required Status:
/// "SHOULD move the task to the input_required status", and back "when the receiver
/// receives all required input"; §Task Status Lifecycle allows both ways).
pub(in crate::gateway) struct Waiting<'a> {
    store: &'a Store,
    id: String,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut map = self.store.map.lock();
        if let Some(e) = map.get_mut(&self.id) {
            e.asks = e.asks.saturating_sub(1);
            if e.asks == 0 && e.status == Status::InputRequired {
                e.status = Status::Working;
                e.updated = now_ms();
                e.changed.send_replace(Status::Working);
            }
        }
    }
}

/// The gateway's tasks, bounded by `mcpx.limits.maxTasks` and `taskTtlMs`.
#[derive(Debug, Default)]
pub(in crate::gateway) struct Store {
    pub(super) map: Mutex<HashMap<String, Entry>>,
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

pub(super) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn not_found(id: &str, host: Revision) -> Fault {
    // Both flavours: an unknown (or expired) taskId is -32602.
    fault(
        INVALID_PARAMS,
        format!("Failed to retrieve task: Task not found: {id}"),
        host,
    )
}

/// The `Task` object in the owner's flavour.
pub(super) fn task_json(id: &str, e: &Entry, poll: Duration) -> Value {
    let mut t = json!({
        "taskId": id,
        "status": e.status.as_str(),
        "createdAt": iso8601(e.created),
        "lastUpdatedAt": iso8601(e.updated),
    });
    if let Some(m) = &e.message {
        t["statusMessage"] = json!(m);
    }
    match e.owner {
        Owner::Core(_) => {
            t["ttl"] = json!(ms(e.ttl));
            t["pollInterval"] = json!(ms(poll));
        }
        Owner::Extension => {
            t["ttlMs"] = json!(ms(e.ttl));
            t["pollIntervalMs"] = json!(ms(poll));
        }
    }
    t
}

impl Store {
    /// How many tasks it holds (the `mcpx_tasks` gauge).
    pub(in crate::gateway) fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// Marks `call`'s task (if it is the work of a 2025-11-25 host's task) as waiting
    /// on an ask until the returned guard is dropped.
    pub(in crate::gateway) fn waiting(&self, call: &Call) -> Option<Waiting<'_>> {
        let id = call.related_task.as_ref()?;
        let mut map = self.map.lock();
        let e = map
            .get_mut(id)
            .filter(|e| matches!(e.owner, Owner::Core(_)))?;
        e.asks += 1;
        if e.status == Status::Working {
            e.status = Status::InputRequired;
            e.updated = now_ms();
            e.changed.send_replace(Status::InputRequired);
        }
        Some(Waiting {
            store: self,
            id: id.clone(),
        })
    }

    /// The extension-owned gateway task `call` is the work of, if any.
    pub(super) fn extension_task<'m>(
        map: &'m mut HashMap<String, Entry>,
        call: &Call,
    ) -> Option<&'m mut Entry> {
        let id = call.related_task.as_ref()?;
        map.get_mut(id)
            .filter(|e| e.owner == Owner::Extension && !e.status.is_terminal())
    }

    /// Records the upstream task behind `call`'s extension task (where its
    /// `tasks/update` goes); false when there is no such task.
    pub(super) fn attach(&self, call: &Call, upstream: UpstreamTask) -> bool {
        let mut map = self.map.lock();
        Self::extension_task(&mut map, call).is_some_and(|e| {
            e.upstream = Some(upstream);
            true
        })
    }

    /// The upstream task is `input_required` with `requests` outstanding: `call`'s
    /// extension task shows the ones not yet answered (ext-tasks §Task Polling: all of
    /// them, as a snapshot) and is `input_required` while any is left.
    pub(super) fn surface(&self, call: &Call, requests: Map<String, Value>) {
        let mut map = self.map.lock();
        let Some(e) = Self::extension_task(&mut map, call) else {
            return;
        };
        e.inputs = requests
            .into_iter()
            .filter(|(k, _)| !e.answered.contains(k))
            .collect();
        let status = if e.inputs.is_empty() {
            Status::Working
        } else {
            Status::InputRequired
        };
        if e.status != status {
            e.status = status;
            e.updated = now_ms();
            e.changed.send_replace(status);
        }
    }

    /// Forgets expired tasks, cancelling their work.
    pub(super) fn purge(map: &mut HashMap<String, Entry>) {
        map.retain(|_, e| {
            let keep = e.born.elapsed() < e.ttl;
            if !keep {
                e.cancel.cancel();
            }
            keep
        });
    }

    pub(super) fn create(
        &self,
        owner: Owner,
        ttl: Duration,
        max: usize,
        poll: Duration,
        host: Revision,
    ) -> Result<(String, Value, CancellationToken), Fault> {
        let id = random_token()
            .ok_or_else(|| fault(INTERNAL_ERROR, "no randomness for a task id".into(), host))?;
        let now = now_ms();
        let cancel = CancellationToken::new();
        let e = Entry {
            owner,
            status: Status::Working,
            message: None,
            created: now,
            updated: now,
            ttl,
            born: Instant::now(),
            outcome: None,
            cancel: cancel.clone(),
            changed: watch::channel(Status::Working).0,
            asks: 0,
            inputs: Map::new(),
            answered: HashSet::new(),
            upstream: None,
        };
        let task = task_json(&id, &e, poll);
        let mut map = self.map.lock();
        Self::purge(&mut map);
        if map.len() >= max {
            // 2025-11-25 §Resource Management: a bound on tasks, documented
            // (mcpx.limits.maxTasks).
            return Err(fault(
                INTERNAL_ERROR,
                format!("too many tasks (mcpx.limits.maxTasks = {max})"),
                host,
            ));
        }
        // Durable before the handle is returned (ext-tasks §Task Creation).
        map.insert(id.clone(), e);
        Ok((id, task, cancel))
    }

    /// Records how the work ended: `None` is cancelled.
    pub(super) fn finish(&self, id: &str, outcome: Option<Result<Reply, Fault>>) {
        let mut map = self.map.lock();
        let Some(e) = map.get_mut(id) else {
            return;
        };
        // C-C11: a 2025-11-25 task cancelled by request stays cancelled whatever the
        // work ends with (§Task Cancellation: MUST remain in cancelled status).
        if e.status.is_terminal() {
            return;
        }
        let core = matches!(e.owner, Owner::Core(_));
        let (status, message) = match &outcome {
            None => (
                Status::Cancelled,
                Some("The task was cancelled.".to_owned()),
            ),
            Some(Err(f)) => (Status::Failed, Some(f.message.clone())),
            // 2025-11-25 §Task Execution Errors: isError ends the task failed; ext-tasks
            // §Task Status: a tool error is completed, failed is for JSON-RPC errors.
            Some(Ok(r)) if core && is_tool_error(r) => (
                Status::Failed,
                Some("The tool reported an error.".to_owned()),
            ),
            Some(Ok(_)) => (Status::Completed, None),
        };
        e.status = status;
        e.message = message;
        e.outcome = outcome.map(|o| o.map(clean));
        e.updated = now_ms();
        e.changed.send_replace(status);
    }
}
