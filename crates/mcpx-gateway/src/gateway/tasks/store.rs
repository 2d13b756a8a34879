//! The task store: mcpx's own tasks, by id, each with its owner, status, outcome and
//! the cancellation of its work. Bounded by `mcpx.limits.maxTasks`; a task is
//! forgotten `taskTtlMs` after its creation, and its work cancelled.
//!
//! The store's one lock is held for a few instructions, never across an `.await`;
//! nothing outside this file sees an entry, only what a method returns.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use mcpx_client::Connection;
use mcpx_protocol::task::{Status, iso8601};
use mcpx_server::{Call, Fault, Reply};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
// tokio's clock (the system's but when a test pauses it), as the supervisor's.
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::shape::{clean, is_tool_error};
use crate::error::GatewayError;
use crate::gateway::{Upstream, random_token};

/// Who may see a task: a 2025-11-25 host's session, or any extension request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Owner {
    Core(String),
    Extension,
}

#[derive(Debug)]
struct Entry {
    owner: Owner,
    status: Status,
    message: Option<String>,
    created: u64,
    updated: u64,
    ttl: Duration,
    born: Instant,
    /// `None` until the work ends (or when it was cancelled).
    outcome: Option<Result<Reply, Fault>>,
    /// Fired by `tasks/cancel` (and on expiry): the work's cancellation.
    cancel: CancellationToken,
    changed: watch::Sender<Status>,
    /// Asks of the work waiting on the host (while any does, the task is
    /// `input_required`).
    asks: usize,
    /// ext-tasks: the upstream task's outstanding input requests, as the host sees
    /// them, by key (on `tasks/get` while `input_required`).
    inputs: Map<String, Value>,
    /// Keys whose answers went upstream: never surfaced again (ext-tasks §Input
    /// Requests: keys are unique over a task's life), though a poll may still list
    /// them before the upstream has taken the answer in (its ack is eventually
    /// consistent).
    answered: HashSet<String>,
    /// ext-tasks: the upstream task behind this one, where `tasks/update` goes.
    upstream: Option<UpstreamTask>,
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
                e.set(Status::Working);
            }
        }
    }
}

/// The gateway's tasks, bounded by `mcpx.limits.maxTasks` and `taskTtlMs`.
#[derive(Debug, Default)]
pub(in crate::gateway) struct Store {
    map: Mutex<HashMap<String, Entry>>,
}

/// A task `create` made: its id, its `Task` object, and its work's cancellation.
pub(super) struct Created {
    pub(super) id: String,
    pub(super) task: Value,
    pub(super) cancel: CancellationToken,
}

/// What an extension task's `tasks/get` inlines besides the `Task` (ext-tasks §Task
/// Polling).
pub(super) enum Inline {
    /// Completed: the work's result.
    Result(Reply),
    /// Failed: the work's error.
    Error(Fault),
    /// `input_required`: every outstanding request, by key.
    Inputs(Map<String, Value>),
}

/// What `tasks/cancel` did.
pub(super) enum Cancelled {
    /// An extension task: the work is asked to stop and the task ends as it does.
    Acknowledged,
    /// A 2025-11-25 task, now `cancelled`: its `Task`.
    Task(Value),
}

/// A host's answers to outstanding requests, and the upstream task they go to.
pub(super) struct Outstanding {
    pub(super) task: UpstreamTask,
    pub(super) responses: Map<String, Value>,
}

/// One page of an owner's tasks: their `Task` objects and where the next starts.
pub(super) struct Page {
    pub(super) tasks: Vec<Value>,
    pub(super) next: Option<usize>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `d` in whole milliseconds, as the wire gives durations.
pub(super) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Entry {
    /// The `Task` object in the owner's flavour.
    fn task_json(&self, id: &str, poll: Duration) -> Value {
        let mut t = json!({
            "taskId": id,
            "status": self.status.as_str(),
            "createdAt": iso8601(self.created),
            "lastUpdatedAt": iso8601(self.updated),
        });
        if let Some(m) = &self.message {
            t["statusMessage"] = json!(m);
        }
        match self.owner {
            Owner::Core(_) => {
                t["ttl"] = json!(ms(self.ttl));
                t["pollInterval"] = json!(ms(poll));
            }
            Owner::Extension => {
                t["ttlMs"] = json!(ms(self.ttl));
                t["pollIntervalMs"] = json!(ms(poll));
            }
        }
        t
    }

    /// Moves the task to `status` (a no-op when it is there already).
    fn set(&mut self, status: Status) {
        if self.status != status {
            self.status = status;
            self.updated = now_ms();
            self.changed.send_replace(status);
        }
    }
}

/// The task `id` of `owner`, once expired tasks are forgotten.
fn owned<'m>(
    map: &'m mut HashMap<String, Entry>,
    id: &str,
    owner: &Owner,
) -> Result<&'m mut Entry, GatewayError> {
    purge(map);
    map.get_mut(id)
        .filter(|e| &e.owner == owner)
        .ok_or_else(|| GatewayError::TaskNotFound(id.to_owned()))
}

/// Forgets expired tasks, cancelling their work.
fn purge(map: &mut HashMap<String, Entry>) {
    map.retain(|_, e| {
        let keep = e.born.elapsed() < e.ttl;
        if !keep {
            e.cancel.cancel();
        }
        keep
    });
}

/// The extension-owned gateway task `call` is the work of, if any.
fn extension_task<'m>(map: &'m mut HashMap<String, Entry>, call: &Call) -> Option<&'m mut Entry> {
    let id = call.related_task.as_ref()?;
    map.get_mut(id)
        .filter(|e| e.owner == Owner::Extension && !e.status.is_terminal())
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
            e.set(Status::InputRequired);
        }
        Some(Waiting {
            store: self,
            id: id.clone(),
        })
    }

    /// A new `working` task of `owner`, kept `ttl`, unless the store holds `max`
    /// already (2025-11-25 §Resource Management: a documented bound,
    /// `mcpx.limits.maxTasks`). `poll` is the interval its `Task` suggests.
    pub(super) fn create(
        &self,
        owner: Owner,
        ttl: Duration,
        max: usize,
        poll: Duration,
    ) -> Result<Created, GatewayError> {
        let id = random_token()
            .ok_or_else(|| GatewayError::Internal("no randomness for a task id".into()))?;
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
        let task = e.task_json(&id, poll);
        let mut map = self.map.lock();
        purge(&mut map);
        if map.len() >= max {
            return Err(GatewayError::TooManyTasks(max));
        }
        // Durable before the handle is returned (ext-tasks §Task Creation).
        map.insert(id.clone(), e);
        Ok(Created { id, task, cancel })
    }

    /// Records the upstream task behind `call`'s extension task (where its
    /// `tasks/update` goes); false when there is no such task.
    pub(super) fn attach(&self, call: &Call, upstream: UpstreamTask) -> bool {
        let mut map = self.map.lock();
        extension_task(&mut map, call).is_some_and(|e| {
            e.upstream = Some(upstream);
            true
        })
    }

    /// The upstream task is `input_required` with `requests` outstanding: `call`'s
    /// extension task shows the ones not yet answered (ext-tasks §Task Polling: all of
    /// them, as a snapshot) and is `input_required` while any is left.
    pub(super) fn surface(&self, call: &Call, requests: Map<String, Value>) {
        let mut map = self.map.lock();
        let Some(e) = extension_task(&mut map, call) else {
            return;
        };
        e.inputs = requests
            .into_iter()
            .filter(|(k, _)| !e.answered.contains(k))
            .collect();
        e.set(if e.inputs.is_empty() {
            Status::Working
        } else {
            Status::InputRequired
        });
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

    /// `owner`'s tasks from the `start`th, oldest first, at most `page` of them;
    /// `None` when `start` is past the end.
    pub(super) fn list(
        &self,
        owner: &Owner,
        start: usize,
        page: usize,
        poll: Duration,
    ) -> Option<Page> {
        let mut map = self.map.lock();
        purge(&mut map);
        let mut mine: Vec<(&String, &Entry)> =
            map.iter().filter(|(_, e)| &e.owner == owner).collect();
        mine.sort_by(|a, b| a.1.born.cmp(&b.1.born).then(a.0.cmp(b.0)));
        if start > mine.len() {
            return None;
        }
        let end = (start + page).min(mine.len());
        let tasks = mine[start..end]
            .iter()
            .map(|(id, e)| e.task_json(id, poll))
            .collect();
        Some(Page {
            tasks,
            next: (end < mine.len()).then_some(end),
        })
    }

    /// Task `id` of `owner`: its `Task`, and for an extension task what `tasks/get`
    /// inlines.
    pub(super) fn get(
        &self,
        id: &str,
        owner: &Owner,
        poll: Duration,
    ) -> Result<(Value, Option<Inline>), GatewayError> {
        let mut map = self.map.lock();
        let e = owned(&mut map, id, owner)?;
        let inline = match (&e.owner, &e.outcome) {
            (Owner::Core(_), _) => None,
            (_, Some(Ok(r))) if e.status == Status::Completed => Some(Inline::Result(r.clone())),
            (_, Some(Err(f))) if e.status == Status::Failed => Some(Inline::Error(f.clone())),
            _ if e.status == Status::InputRequired && !e.inputs.is_empty() => {
                Some(Inline::Inputs(e.inputs.clone()))
            }
            _ => None,
        };
        Ok((e.task_json(id, poll), inline))
    }

    /// Cancels task `id` of `owner`: an extension task's work is asked to stop (the
    /// task ends as the work does: ext-tasks §Task Cancellation, C-C11); a 2025-11-25
    /// task is `cancelled` before this returns, and a terminal one refused (§Task
    /// Cancellation: MUST).
    pub(super) fn cancel(
        &self,
        id: &str,
        owner: &Owner,
        poll: Duration,
    ) -> Result<Cancelled, GatewayError> {
        let mut map = self.map.lock();
        let e = owned(&mut map, id, owner)?;
        if e.owner == Owner::Extension {
            e.cancel.cancel();
            return Ok(Cancelled::Acknowledged);
        }
        if e.status.is_terminal() {
            return Err(GatewayError::TaskTerminal(e.status.as_str()));
        }
        e.status = Status::Cancelled;
        e.message = Some("The task was cancelled by request.".to_owned());
        e.updated = now_ms();
        e.cancel.cancel();
        e.changed.send_replace(Status::Cancelled);
        Ok(Cancelled::Task(e.task_json(id, poll)))
    }

    /// How task `id` of `owner` ended, once it has (§Retrieving Task Results: blocks
    /// until terminal); `None` when it was cancelled. `stop` ends the wait.
    pub(super) async fn outcome(
        &self,
        id: &str,
        owner: &Owner,
        stop: &CancellationToken,
    ) -> Result<Option<Result<Reply, Fault>>, GatewayError> {
        let mut changed = owned(&mut self.map.lock(), id, owner)?.changed.subscribe();
        let gone = || GatewayError::TaskNotFound(id.to_owned());
        while !changed.borrow_and_update().is_terminal() {
            tokio::select! {
                () = stop.cancelled() => return Err(GatewayError::Internal("cancelled".into())),
                r = changed.changed() => r.map_err(|_| gone())?,
            }
        }
        let map = self.map.lock();
        Ok(map.get(id).ok_or_else(gone)?.outcome.clone())
    }

    /// Of `responses` (to task `id` of `owner`), those to requests outstanding, and
    /// the upstream task they go to; `None` when none is (ext-tasks §Task Update
    /// Requests: the rest are ignored).
    pub(super) fn outstanding(
        &self,
        id: &str,
        owner: &Owner,
        responses: &Map<String, Value>,
    ) -> Result<Option<Outstanding>, GatewayError> {
        let mut map = self.map.lock();
        let e = owned(&mut map, id, owner)?;
        let open: Map<String, Value> = responses
            .iter()
            .filter(|(k, _)| e.inputs.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(match &e.upstream {
            Some(up) if !open.is_empty() => Some(Outstanding {
                task: up.clone(),
                responses: open,
            }),
            _ => None,
        })
    }

    /// The upstream took the answers to `keys` of task `id`: they are never shown
    /// again, and the task is `working` once none is left.
    pub(super) fn answered(&self, id: &str, keys: Vec<String>) {
        let mut map = self.map.lock();
        if let Some(e) = map.get_mut(id) {
            for k in keys {
                e.inputs.remove(&k);
                e.answered.insert(k);
            }
            if e.inputs.is_empty() && e.status == Status::InputRequired {
                e.set(Status::Working);
            }
        }
    }
}
