//! The call history's layer: each host call that names a tool, prompt or resource
//! (`tools/call`, `prompts/get`, `resources/read`, `completion/complete`) is handed to
//! the recorder as it ends, with who made it, what it reached and how it ended.
//!
//! The layer never waits: [`History::record`] puts the record on a bounded queue, and
//! the recorder's thread redacts and writes it. What the call path does is read a few
//! members the decoder already indexed, look the name up in one catalog snapshot, and
//! hand over one boxed record.

use mcpx_history::{Capture, History, Outcome, Record};
use mcpx_metrics::{End, ErrorType, classify};
use mcpx_protocol::jsonrpc::{member, string_value};

use super::*;

/// The gateway's backend with each call recorded in the call history, when there is
/// one (`mcpx.history`); without one, a call passes straight through.
#[derive(Debug, Clone)]
pub struct Recorded {
    backend: GatewayBackend,
    history: Option<History>,
    clients: Arc<Mutex<Clients>>,
}

impl Recorded {
    /// `backend`, its calls recorded in `history`.
    pub fn new(backend: GatewayBackend, history: Option<History>) -> Recorded {
        Recorded {
            backend,
            history,
            clients: Arc::default(),
        }
    }
}

/// Hosts' `clientInfo` names and versions, read once per legacy session (by its
/// `initialize` params, which every call of the session shares) or per distinct
/// 2026-07-28 `clientInfo` text, not on every call. A few hosts at a time: past
/// [`Clients::MAX`] of either kind, that kind is forgotten and read again.
#[derive(Debug, Default)]
struct Clients {
    sessions: Vec<(Arc<str>, Client)>,
    modern: Vec<(String, Client)>,
}

/// A host's name and version.
type Client = (Option<Arc<str>>, Option<Arc<str>>);

impl Clients {
    const MAX: usize = 64;

    /// The name and version in `clientInfo` (JSON text).
    fn read(info: Option<&str>) -> Client {
        let text = |raw: Option<&str>| raw.and_then(string_value).map(|s| Arc::from(s.as_ref()));
        match info {
            Some(info) => (text(member(info, "name")), text(member(info, "version"))),
            None => (None, None),
        }
    }

    /// The host of a legacy session opened with `initialize_params`.
    fn of_session(&mut self, initialize_params: &Arc<str>) -> Client {
        if let Some((_, c)) = self
            .sessions
            .iter()
            .find(|(p, _)| Arc::ptr_eq(p, initialize_params))
        {
            return c.clone();
        }
        let c = Clients::read(member(initialize_params, "clientInfo"));
        if self.sessions.len() >= Clients::MAX {
            self.sessions.clear();
        }
        self.sessions.push((initialize_params.clone(), c.clone()));
        c
    }

    /// The host whose request's `_meta` has `info` as its `clientInfo`.
    fn of_modern(&mut self, info: &str) -> Client {
        if let Some((_, c)) = self.modern.iter().find(|(t, _)| t == info) {
            return c.clone();
        }
        let c = Clients::read(Some(info));
        if self.modern.len() >= Clients::MAX {
            self.modern.clear();
        }
        self.modern.push((info.to_owned(), c.clone()));
        c
    }
}

impl Backend for Recorded {
    fn summary(&self) -> Summary {
        self.backend.summary()
    }

    fn offered(&self) -> Offered {
        self.backend.offered()
    }

    fn described(&self) -> impl Future<Output = ()> + Send {
        self.backend.described()
    }

    fn is_described(&self) -> bool {
        self.backend.is_described()
    }

    fn session_opened(&self, peer: &Peer) {
        self.backend.session_opened(peer);
    }

    fn log_level_requested(&self, level: Level) -> impl Future<Output = ()> + Send {
        self.backend.log_level_requested(level)
    }

    fn param_headers(&self) -> mcpx_transport::ParamHeaders {
        self.backend.param_headers()
    }

    fn notification(
        &self,
        method: &str,
        params: Option<&str>,
        host: Revision,
    ) -> impl Future<Output = ()> + Send {
        self.backend.notification(method, params, host)
    }

    fn call(&self, call: Call) -> impl Future<Output = Result<Reply, Fault>> + Send {
        let note = self
            .history
            .as_ref()
            .and_then(|h| Note::of(h, &self.backend.0, &self.clients, &call));
        // A map, as in `observe.rs`: the future holds the note, not a copy of the call.
        futures_util::FutureExt::map(self.backend.call(call), move |outcome| {
            if let Some(note) = note {
                note.finish(&outcome);
            }
            outcome
        })
    }
}

/// What is known of a call when it starts: a few pointers in the call's future, the
/// record itself boxed (the box is what the recorder's queue takes).
struct Note {
    gateway: Arc<Gateway>,
    history: History,
    started: tokio::time::Instant,
    cancel: tokio_util::sync::CancellationToken,
    record: Box<Record>,
}

impl Note {
    /// The note of `call`, when its method is one the history keeps.
    fn of(
        history: &History,
        gw: &Arc<Gateway>,
        clients: &Mutex<Clients>,
        call: &Call,
    ) -> Option<Note> {
        let method: &'static str = match call.method.as_str() {
            "tools/call" => "tools/call",
            "prompts/get" => "prompts/get",
            "resources/read" => "resources/read",
            "completion/complete" => "completion/complete",
            _ => return None,
        };
        let params = call.params.as_ref().map(Params::as_str);
        let text = |raw: Option<&str>| raw.and_then(string_value).map(|s| s.into_owned());
        let mut record = Box::new(Record::new(mcpx_history::now_ms(), method));
        record.target = match method {
            "tools/call" | "prompts/get" => {
                text(call.params.as_ref().and_then(|p| p.member("name")))
            }
            "resources/read" => text(call.params.as_ref().and_then(|p| p.member("uri"))),
            _ => {
                // `completion/complete`: the prompt or resource its `ref` names.
                let reference = params.and_then(|p| member(p, "ref"));
                text(reference.and_then(|r| member(r, "name")))
                    .or_else(|| text(reference.and_then(|r| member(r, "uri"))))
            }
        };
        record.era = match call.host.era() {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
        .into();
        record.revision = call.host.as_str().into();
        record.transport = call.ctx.carrier().as_str().into();
        let (name, version) = match &call.peer {
            Some(peer) => match peer.initialize_shared() {
                Some(p) => clients.lock().of_session(p),
                None => (None, None),
            },
            None => match params
                .and_then(|p| member(p, "_meta"))
                .and_then(|m| member(m, meta::CLIENT_INFO))
            {
                Some(info) => clients.lock().of_modern(info),
                None => (None, None),
            },
        };
        record.client_name = name;
        record.client_version = version;
        record.session = call.peer.as_ref().and_then(|p| p.session_shared()).cloned();
        record.request_bytes = params.map_or(0, |p| i64::try_from(p.len()).unwrap_or(i64::MAX));
        record.trace_id = mcpx_telemetry::span::current_trace_id()
            .or_else(|| call.trace.as_ref().map(|t| t.trace_id_hex()));
        let capture = history.settings().capture;
        if capture.arguments() {
            let key = if method == "completion/complete" {
                "argument"
            } else {
                "arguments"
            };
            record.arguments = params.and_then(|p| member(p, key)).map(str::to_owned);
        }
        Some(Note {
            gateway: gw.clone(),
            history: history.clone(),
            started: tokio::time::Instant::now(),
            cancel: call.cancel.clone(),
            record,
        })
    }

    /// Hands the record, completed with `outcome`, to the recorder.
    fn finish(self, outcome: &Result<Reply, Fault>) {
        let Note {
            gateway,
            history,
            started,
            cancel,
            mut record,
        } = self;
        record.duration_us = i64::try_from(started.elapsed().as_micros()).unwrap_or(i64::MAX);
        // Routed by the catalog in force now: the call's own lookup waited for the
        // first lists, which a lookup at its start would not have seen.
        record.upstream = upstream_of(&gateway.catalog(), &record);
        let tool_call = record.method == "tools/call";
        match outcome {
            Ok(reply) => {
                let text = reply.result.as_str();
                record.response_bytes = i64::try_from(text.len()).unwrap_or(i64::MAX);
                let class = classify(End::Result {
                    tool_call,
                    result: text,
                });
                if class == ErrorType::ToolError {
                    record.outcome = Outcome::ToolError;
                    record.error_message = tool_error_text(text);
                }
                if history.settings().capture == Capture::All {
                    record.result = Some(kept_result(text, history.settings().max_value_bytes));
                }
            }
            Err(fault) => {
                let cause = fault
                    .data
                    .as_ref()
                    .and_then(|d| d.get("cause"))
                    .and_then(Value::as_str);
                record.outcome = match classify(End::Error {
                    code: fault.code,
                    cause,
                }) {
                    _ if cancel.is_cancelled() => Outcome::Cancelled,
                    ErrorType::Timeout => Outcome::Timeout,
                    ErrorType::Cancelled => Outcome::Cancelled,
                    ErrorType::Transport => Outcome::Transport,
                    _ => Outcome::Error,
                };
                record.error_code = Some(fault.code);
                record.error_message = Some(fault.message.clone());
                record.response_bytes = i64::try_from(fault.message.len()).unwrap_or(i64::MAX);
                if record.upstream.is_none() {
                    record.upstream = fault
                        .data
                        .as_ref()
                        .and_then(|d| d.get("upstream"))
                        .and_then(Value::as_str)
                        .map(Arc::from);
                }
            }
        }
        history.record(record);
    }
}

/// The upstream that serves the tool, prompt or resource `record` names.
fn upstream_of(catalog: &Catalog, record: &Record) -> Option<Arc<str>> {
    let target = record.target.as_deref()?;
    let id = match record.method.as_ref() {
        "tools/call" => catalog.tool(target).map(|f| f.upstream),
        "prompts/get" => catalog.prompt(target).map(|f| f.upstream),
        _ => catalog
            .prompt(target)
            .map(|f| f.upstream)
            .or_else(|| catalog.resource(target).map(|(id, _)| id)),
    };
    id.map(|id| id.shared().clone())
}

/// A tool error's first text, at most 512 bytes of it.
fn tool_error_text(result: &str) -> Option<String> {
    let v: Value = serde_json::from_str(result).ok()?;
    let text = v
        .get("content")?
        .as_array()?
        .iter()
        .find_map(|c| c.get("text").and_then(Value::as_str))?;
    let mut cut = text.len().min(512);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(text[..cut].to_owned())
}

/// The result text to hand the writer: a result far past the cap is not copied (it
/// could not be kept, and redacting it would mean parsing it), only its size said.
fn kept_result(text: &str, cap: usize) -> String {
    if text.len() > cap.saturating_mul(16).max(1 << 20) {
        json!({ "mcpx/truncated": text.len() }).to_string()
    } else {
        text.to_owned()
    }
}
