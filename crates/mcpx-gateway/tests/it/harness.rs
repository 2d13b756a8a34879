//! In-memory upstreams and in-process hosts.
//!
//! * [`InMemory`], the app's connector: each upstream name is an example server in
//!   this process ([`Upstream`]: its mode, start delay, failures, behaviour), over
//!   `tokio::io::duplex`, every frame each way through the schema tap for the
//!   revision it is sent in ([`UpstreamTap`]).
//! * [`Host`], a 2026-07-28 host calling the serve seam directly.
//! * [`LegacyHost`], a legacy host of any revision on the stdio listener, over
//!   `tokio::io::duplex`, answering the gateway's requests by a [`Responder`].

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcpx_client::{ByteStream, EraCache, StreamOpener, Target, TargetTransport};
use mcpx_example_server::{ExampleServer, Mode};
use mcpx_gateway::app::App;
use mcpx_gateway::upstream::{Connecting, Connector};
use mcpx_protocol::codec::{Decoded, Limits, decode};
use mcpx_protocol::{Frame, Revision, Verdict, meta};
use mcpx_testkit::tap::tap;
use mcpx_transport::stdio::{StdioConfig, serve};
use mcpx_transport::{Incoming, Peer, RequestCtx, Service};
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream, ReadHalf,
    WriteHalf,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The 2026-07-28 tasks extension's name.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// 2026-07-28 client capabilities declaring the tasks extension.
pub fn ext_caps() -> Value {
    json!({"extensions": {TASKS_EXTENSION: {}}})
}

/// The longest a host waits for one frame: far beyond any test's timers, so on the
/// paused clock a gateway that never answers fails the test instead of hanging it.
const NO_ANSWER: Duration = Duration::from_secs(24 * 3600);

/// How an in-memory upstream behaves once connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// The example server, answering everything.
    Serves,
    /// The example server, but `tools/call` is never answered (a hung tool).
    MutesCalls,
    /// Nothing is ever answered, the handshake included (a hung process).
    Silent,
}

/// What serves one upstream name.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The example server's mode.
    pub mode: Mode,
    /// How long each connection attempt takes before the stream opens (a slow start,
    /// as an `npx` server's).
    pub start_delay: Duration,
    /// How late the example server answers each `server/discover`.
    pub discover_delay: Duration,
    /// How many connection attempts fail (the stream does not open) before one opens.
    pub fail_first: u32,
    /// After this many connection attempts, each stream opens and ends at once, as a
    /// process that starts and exits at once.
    pub crash_after: Option<u32>,
    /// What it does once connected.
    pub behaviour: Behaviour,
}

impl Upstream {
    /// A dual-era example server, up at once.
    pub fn example() -> Upstream {
        Upstream {
            mode: Mode::Dual,
            start_delay: Duration::ZERO,
            discover_delay: Duration::ZERO,
            fail_first: 0,
            crash_after: None,
            behaviour: Behaviour::Serves,
        }
    }

    /// An example server speaking exactly `rev`.
    pub fn strict(rev: Revision) -> Upstream {
        Upstream {
            mode: Mode::Strict(rev),
            ..Upstream::example()
        }
    }

    /// The same, `delay` slow to start.
    pub fn starting_after(mut self, delay: Duration) -> Upstream {
        self.start_delay = delay;
        self
    }

    /// The same, answering `server/discover` `delay` late.
    pub fn discovering_after(mut self, delay: Duration) -> Upstream {
        self.discover_delay = delay;
        self
    }

    /// The same, its first `n` connection attempts failing.
    pub fn failing_first(mut self, n: u32) -> Upstream {
        self.fail_first = n;
        self
    }

    /// The same, each stream after the first `n` connection attempts ending at once.
    pub fn crashing_after(mut self, n: u32) -> Upstream {
        self.crash_after = Some(n);
        self
    }

    /// The same, behaving as `behaviour` once connected.
    pub fn behaving(mut self, behaviour: Behaviour) -> Upstream {
        self.behaviour = behaviour;
        self
    }
}

/// The example server, or a muted or silent one in front of it.
struct Served {
    inner: ExampleServer,
    behaviour: Behaviour,
}

impl Service for Served {
    async fn request(&self, req: Incoming, ctx: RequestCtx) -> Frame {
        let method = req.frame.method().unwrap_or_default();
        match self.behaviour {
            Behaviour::Silent => std::future::pending().await,
            Behaviour::MutesCalls if method == "tools/call" => std::future::pending().await,
            _ => self.inner.request(req, ctx).await,
        }
    }

    async fn notification(&self, n: Incoming, peer: Option<Peer>) {
        self.inner.notification(n, peer).await;
    }

    fn session_opened(&self, peer: &Peer) {
        self.inner.session_opened(peer);
    }

    fn session_closed(&self, peer: &Peer) {
        self.inner.session_closed(peer);
    }
}

/// Which way a frame went between the gateway and an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// The gateway sent it to the upstream.
    ToUpstream,
    /// The upstream sent it to the gateway.
    FromUpstream,
}

/// The schema tap on one upstream connection. Each frame is checked against the
/// revision it is sent in: its own `_meta` protocol version (a 2026-07-28 request,
/// `server/discover`), `initialize`'s offer, or the revision the `initialize`
/// answer settled; a response against the result type of the request it answers.
#[derive(Debug, Default)]
pub struct UpstreamTap {
    /// The legacy revision `initialize` settled, once answered.
    legacy: Option<Revision>,
    /// The gateway's requests awaiting the upstream's answer: id → (method, revision).
    to_upstream: HashMap<String, (String, Revision)>,
    /// The upstream's requests awaiting the gateway's answer.
    from_upstream: HashMap<String, (String, Revision)>,
}

impl UpstreamTap {
    /// The revision a request or notification without its own is sent in.
    fn session(&self) -> Revision {
        self.legacy.unwrap_or(Revision::V2026_07_28)
    }

    /// Checks `line`, sent `dir`; an error says why it is invalid.
    pub fn check(&mut self, dir: Dir, line: &str) -> Result<(), String> {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        let id = v.get("id").map(Value::to_string);
        let method = v.get("method").and_then(Value::as_str);
        let (awaiting, answering) = match dir {
            Dir::ToUpstream => (&mut self.to_upstream, &mut self.from_upstream),
            Dir::FromUpstream => (&mut self.from_upstream, &mut self.to_upstream),
        };
        let valid = match (method, id) {
            // A request or a notification.
            (Some(m), id) => {
                let own = v
                    .pointer("/params/_meta")
                    .and_then(|meta| meta.get(meta::PROTOCOL_VERSION))
                    .and_then(Value::as_str)
                    .and_then(Revision::from_wire);
                let offered = (m == "initialize")
                    .then(|| v.pointer("/params/protocolVersion").and_then(Value::as_str))
                    .flatten()
                    .and_then(Revision::from_wire);
                let rev = own
                    .or(offered)
                    .unwrap_or(self.legacy.unwrap_or(Revision::V2026_07_28));
                if let Some(id) = id {
                    awaiting.insert(id, (m.to_owned(), rev));
                }
                tap().validate_frame(rev, line)
            }
            // A response to a request sent the other way.
            (None, Some(id)) => match answering.remove(&id) {
                Some((m, rev)) => {
                    let rev = if m == "initialize" {
                        let settled = v
                            .pointer("/result/protocolVersion")
                            .and_then(Value::as_str)
                            .and_then(Revision::from_wire);
                        if settled.is_some() {
                            self.legacy = settled;
                        }
                        settled.unwrap_or(rev)
                    } else {
                        rev
                    };
                    match extension_result(rev, &m, &v) {
                        Some(def) => tap().validate_tasks_extension_response(def, line),
                        None => tap().validate_response(rev, &m, line),
                    }
                }
                None => tap().validate_frame(self.session(), line),
            },
            (None, None) => tap().validate_frame(self.session(), line),
        };
        valid.map_err(|e| e.to_string())
    }
}

/// The tasks extension's definition a 2026-07-28 result of `method` is checked
/// against, if it is one of the extension's: a task handle, or the answer to one of
/// its methods.
fn extension_result(rev: Revision, method: &str, response: &Value) -> Option<&'static str> {
    if rev != Revision::V2026_07_28 || response.get("result").is_none() {
        return None;
    }
    match method {
        "tasks/get" => Some("GetTaskResult"),
        "tasks/cancel" => Some("CancelTaskResult"),
        "tasks/update" => Some("UpdateTaskResult"),
        _ if response["result"]["resultType"] == "task" => Some("CreateTaskResult"),
        _ => None,
    }
}

/// One live connection to an in-memory upstream: dropping (aborting) its pump ends
/// the stream at once, as an upstream process exiting does.
#[derive(Debug)]
struct Live {
    pump: tokio::task::AbortHandle,
}

/// One frame that passed a tap.
#[derive(Debug, Clone)]
pub struct Passed {
    /// The upstream's name.
    pub upstream: String,
    /// Which way.
    pub dir: Dir,
    /// When, on tokio's clock.
    pub at: Instant,
    /// The frame.
    pub frame: Value,
}

/// What the taps saw: every frame, each way, and each invalid one.
#[derive(Debug, Default)]
struct Seen {
    /// Every frame in the order they passed.
    wire: Vec<Passed>,
    /// What was invalid, and why.
    invalid: Vec<String>,
}

/// The app's connector for in-process tests: an upstream name connects to a fresh
/// example server in this process (one per connection, as a restarted process is),
/// over `tokio::io::duplex`, by the stdio client's framing and the ordinary probe.
/// Every frame each way passes the schema tap ([`UpstreamTap`]); [`InMemory::finish`]
/// fails the test on any invalid one. A name not registered fails to connect.
#[derive(Debug, Default)]
pub struct InMemory {
    servers: Mutex<HashMap<String, Upstream>>,
    /// Connection attempts so far, by name, and when each was made.
    attempts: Mutex<HashMap<String, Vec<Instant>>>,
    shared: Arc<Shared>,
}

/// What the connections' openers share with the connector.
#[derive(Debug, Default)]
struct Shared {
    /// Live connections, by name, oldest first.
    live: Mutex<HashMap<String, Vec<Live>>>,
    /// When each stream was opened (a process started), by name.
    opens: Mutex<HashMap<String, Vec<Instant>>>,
    seen: Arc<Mutex<Seen>>,
}

impl InMemory {
    /// Serves upstream `name` by `upstream`.
    pub fn with(self, name: &str, upstream: Upstream) -> InMemory {
        self.servers.lock().insert(name.to_owned(), upstream);
        self
    }

    /// How many times upstream `name` was connected to (attempts, failed ones too).
    pub fn connects(&self, name: &str) -> u32 {
        u32::try_from(self.attempts(name).len()).unwrap()
    }

    /// When each connection attempt to `name` was made.
    pub fn attempts(&self, name: &str) -> Vec<Instant> {
        self.attempts.lock().get(name).cloned().unwrap_or_default()
    }

    /// When each stream to `name` was opened: each start of its process, however many
    /// a connection attempt makes.
    pub fn opens(&self, name: &str) -> Vec<Instant> {
        self.shared
            .opens
            .lock()
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    /// How many connections to `name` are open now.
    pub fn open(&self, name: &str) -> usize {
        let mut live = self.shared.live.lock();
        let conns = live.entry(name.to_owned()).or_default();
        conns.retain(|l| !l.pump.is_finished());
        conns.len()
    }

    /// Ends every open connection to `name`, as the upstream's process exiting does.
    pub fn kill(&self, name: &str) {
        for l in self.shared.live.lock().remove(name).unwrap_or_default() {
            l.pump.abort();
        }
    }

    /// Every frame between the gateway and upstream `name`, either way, in order.
    pub fn wire(&self, name: &str) -> Vec<Passed> {
        self.shared
            .seen
            .lock()
            .wire
            .iter()
            .filter(|p| p.upstream == name)
            .cloned()
            .collect()
    }

    /// The frames the gateway sent upstream `name`, in order.
    pub fn sent_to(&self, name: &str) -> Vec<Value> {
        self.wire(name)
            .into_iter()
            .filter(|p| p.dir == Dir::ToUpstream)
            .map(|p| p.frame)
            .collect()
    }

    /// The gateway's `method` requests (or notifications) to upstream `name`, and
    /// when each was sent.
    pub fn requests_to(&self, name: &str, method: &str) -> Vec<(Instant, Value)> {
        self.wire(name)
            .into_iter()
            .filter(|p| p.dir == Dir::ToUpstream && p.frame["method"] == method)
            .map(|p| (p.at, p.frame))
            .collect()
    }

    /// Panics if any frame either way was invalid for its revision.
    pub fn assert_valid(&self) {
        let seen = self.shared.seen.lock();
        assert!(
            seen.invalid.is_empty(),
            "invalid frames between the gateway and its upstreams:\n{}",
            seen.invalid.join("\n")
        );
    }
}

impl Shared {
    /// Notes a stream to `name` opened now.
    fn opened(&self, name: &str) {
        self.opens
            .lock()
            .entry(name.to_owned())
            .or_default()
            .push(Instant::now());
    }

    /// Opens a stream to a new server for `name`, `upstream`, with its tap.
    /// Each way is a pipe of its own, as a child's stdin and stdout are, so that
    /// either end closing its writer is seen as EOF at the other.
    fn open_stream(&self, name: &str, upstream: &Upstream) -> ByteStream {
        const PIPE: usize = 64 * 1024;
        // One duplex per way, each end used one way only and held whole: dropping an
        // end closes it (a split half would not).
        let (gw_read, gw_write_tap) = tokio::io::duplex(PIPE);
        let (tap_read_gw, gw_write) = tokio::io::duplex(PIPE);
        let (server_read, up_write) = tokio::io::duplex(PIPE);
        let (up_read, server_write) = tokio::io::duplex(PIPE);
        let service = Arc::new(Served {
            inner: ExampleServer::new(upstream.mode).with_discover_delay(upstream.discover_delay),
            behaviour: upstream.behaviour,
        });
        let stop = CancellationToken::new();
        let server_stop = stop.clone();
        tokio::spawn(async move {
            let _ = serve(
                service,
                server_read,
                server_write,
                StdioConfig::default(),
                server_stop,
            )
            .await;
        });
        let tap = Arc::new(Mutex::new(UpstreamTap::default()));
        let seen = self.seen.clone();
        let pumped = name.to_owned();
        let pump = tokio::spawn(async move {
            let name = pumped;
            // Whichever way ends first ends the connection: the server is stopped
            // when this task ends or is aborted.
            let _stop = stop.drop_guard();
            tokio::select! {
                () = pump(&name, Dir::ToUpstream, tap_read_gw, up_write, &tap, &seen) => {}
                () = pump(&name, Dir::FromUpstream, up_read, gw_write_tap, &tap, &seen) => {}
            }
        });
        self.live
            .lock()
            .entry(name.to_owned())
            .or_default()
            .push(Live {
                pump: pump.abort_handle(),
            });
        (Box::new(gw_read), Box::new(gw_write))
    }
}

/// Passes lines from `from` to `to`, each through `tap`, until either end closes.
async fn pump(
    name: &str,
    dir: Dir,
    from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    tap: &Mutex<UpstreamTap>,
    seen: &Mutex<Seen>,
) {
    let mut from = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        match from.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        if !text.is_empty() {
            let checked = tap.lock().check(dir, text);
            let mut s = seen.lock();
            if let Err(e) = checked {
                s.invalid.push(format!("{name} {dir:?}: {e}"));
            }
            s.wire.push(Passed {
                upstream: name.to_owned(),
                dir,
                at: Instant::now(),
                frame: serde_json::from_str(text).unwrap_or(Value::Null),
            });
        }
        if to.write_all(&line).await.is_err() || to.flush().await.is_err() {
            return;
        }
    }
}

/// A stream that never opens: the connection attempt fails at once.
fn refused(name: &str, why: &'static str) -> StreamOpener {
    StreamOpener::new(name, move || {
        Box::pin(async move { Err(std::io::Error::new(std::io::ErrorKind::NotFound, why)) })
    })
}

impl Connector for InMemory {
    fn connect<'a>(&'a self, target: &'a Target, era_cache: &'a EraCache) -> Connecting<'a> {
        let attempt = {
            let mut attempts = self.attempts.lock();
            let at = attempts.entry(target.name.clone()).or_default();
            at.push(Instant::now());
            at.len()
        };
        let upstream = self.servers.lock().get(&target.name).cloned();
        Box::pin(async move {
            let mut target = target.clone();
            target.transport = match upstream {
                Some(u) if attempt <= u.fail_first as usize => {
                    tokio::time::sleep(u.start_delay).await;
                    TargetTransport::Stream(refused(&target.name, "the in-memory server failed"))
                }
                Some(u) if u.crash_after.is_some_and(|n| attempt > n as usize) => {
                    tokio::time::sleep(u.start_delay).await;
                    let shared = self.shared.clone();
                    let name = target.name.clone();
                    TargetTransport::Stream(StreamOpener::new(&target.name, move || {
                        shared.opened(&name);
                        let ended: ByteStream =
                            (Box::new(tokio::io::empty()), Box::new(tokio::io::sink()));
                        Box::pin(async move { Ok(ended) })
                    }))
                }
                Some(u) => {
                    tokio::time::sleep(u.start_delay).await;
                    let shared = self.shared.clone();
                    let name = target.name.clone();
                    TargetTransport::Stream(StreamOpener::new(&target.name, move || {
                        shared.opened(&name);
                        let stream = shared.open_stream(&name, &u);
                        Box::pin(async move { Ok(stream) })
                    }))
                }
                None => TargetTransport::Stream(refused(
                    &target.name,
                    "no in-memory server of that name",
                )),
            };
            mcpx_client::connect(&target, era_cache).await
        })
    }
}

/// A configuration with `servers` (name → the entry's `mcpx` block) and the
/// global `mcpx` block `global`. Each entry's command is never run. The call history
/// is off unless `global` has a `history` block (a test's database is its own).
pub fn config(mut global: Value, servers: &[(&str, Value)]) -> mcpx_gateway::config::Config {
    if let Some(g) = global.as_object_mut() {
        g.entry("history").or_insert(json!({"enabled": false}));
    }
    let mut entries = serde_json::Map::new();
    for (name, block) in servers {
        entries.insert(
            (*name).to_owned(),
            json!({"command": "in-memory", "mcpx": block}),
        );
    }
    let text = json!({"mcpx": global, "mcpServers": entries}).to_string();
    mcpx_gateway::config::parse(&text, std::path::Path::new("in-process.json")).unwrap()
}

/// What a host got for one request: the response and the related frames (progress,
/// log messages) that came before it.
#[derive(Debug)]
pub struct Answer {
    /// The response, as JSON.
    pub response: Value,
    /// The related notifications, as JSON.
    pub related: Vec<Value>,
}

impl Answer {
    /// The result; panics on an error response.
    pub fn result(&self) -> &Value {
        assert!(
            self.response.get("result").is_some(),
            "not a result: {}",
            self.response
        );
        &self.response["result"]
    }

    /// The error; panics on a result.
    pub fn error(&self) -> &Value {
        assert!(
            self.response.get("error").is_some(),
            "not an error: {}",
            self.response
        );
        &self.response["error"]
    }
}

/// A 2026-07-28 host calling the gateway's serve seam in-process, as the daemon's
/// `/v1` API does (stateless: no session, no `Peer`). Every frame it sends and gets is
/// validated against 2026-07-28's schema.
pub struct Host {
    pub app: Arc<App>,
    pub links: Arc<InMemory>,
    rev: Revision,
    next_id: AtomicU64,
}

impl Host {
    /// Starts the gateway on `config`, its upstreams connecting to `links`.
    pub fn start(config: mcpx_gateway::config::Config, links: InMemory) -> Host {
        Host::start_with(config, None, links, EraCache::disabled())
    }

    /// [`Host::start`], `config` read from file `path` (which a reload reads again),
    /// the upstreams' eras remembered in `era_cache`.
    pub fn start_with(
        config: mcpx_gateway::config::Config,
        path: Option<std::path::PathBuf>,
        links: InMemory,
        era_cache: EraCache,
    ) -> Host {
        let links = Arc::new(links);
        let app = App::start_linked(config, path, None, era_cache, None, links.clone());
        Host {
            app,
            links,
            rev: Revision::V2026_07_28,
            next_id: AtomicU64::new(1),
        }
    }

    /// Sends `method` with `params` (an object, without `_meta`) and waits for its
    /// answer.
    pub async fn request(&self, method: &str, params: Value) -> Answer {
        self.request_cancellable(method, params, CancellationToken::new())
            .await
    }

    /// [`Host::request`], declaring the client capabilities `caps`.
    pub async fn request_as(&self, method: &str, params: Value, caps: Value) -> Answer {
        self.request_full(method, params, caps, None, CancellationToken::new())
            .await
    }

    /// [`Host::request`], declaring the tasks extension; the response's result is
    /// validated against the extension's definition `def` (`CreateTaskResult`,
    /// `GetTaskResult`, `CancelTaskResult`).
    pub async fn request_ext(&self, method: &str, params: Value, def: &str) -> Answer {
        self.request_full(
            method,
            params,
            ext_caps(),
            Some(def),
            CancellationToken::new(),
        )
        .await
    }

    /// `tools/call` of `tool` with the further params `extra` (`arguments`,
    /// `requestState`, `inputResponses`, `task`), declaring `caps`.
    pub async fn call_as(&self, tool: &str, caps: Value, extra: Value) -> Answer {
        let mut params = json!({"name": tool, "arguments": {}});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        self.request_as("tools/call", params, caps).await
    }

    /// [`Host::request`], cancelled when `cancel` is.
    pub async fn request_cancellable(
        &self,
        method: &str,
        params: Value,
        cancel: CancellationToken,
    ) -> Answer {
        self.request_full(method, params, json!({}), None, cancel)
            .await
    }

    async fn request_full(
        &self,
        method: &str,
        mut params: Value,
        caps: Value,
        ext: Option<&str>,
        cancel: CancellationToken,
    ) -> Answer {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // The request's own `_meta` (a progress token) is kept.
        let mut m = params
            .get("_meta")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        m.insert(meta::PROTOCOL_VERSION.into(), json!(self.rev.as_str()));
        m.insert(meta::CLIENT_CAPABILITIES.into(), caps);
        m.insert(
            meta::CLIENT_INFO.into(),
            json!({"name": "in-process-host", "version": "0"}),
        );
        params["_meta"] = Value::Object(m);
        let text =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        if let Err(e) = tap().validate_frame(self.rev, &text) {
            panic!("the host's request is not valid 2026-07-28: {e}\n{text}");
        }
        let Ok(Decoded::Single(frame)) = decode(text, &Limits::default()) else {
            panic!("not one request");
        };
        let incoming = Incoming {
            frame,
            verdict: Verdict::Modern { revision: self.rev },
        };
        let (tx, mut rx) = mpsc::channel::<Frame>(64);
        let ctx = RequestCtx::in_process(cancel, tx);
        let seam = self.app.seam();
        let response = seam.request(incoming, ctx);
        tokio::pin!(response);
        let mut related = Vec::new();
        let deadline = tokio::time::sleep(NO_ANSWER);
        tokio::pin!(deadline);
        let response = loop {
            tokio::select! {
                r = &mut response => break r,
                Some(f) = rx.recv() => related.push(self.checked(None, &f)),
                () = &mut deadline => panic!("no answer to {method} within {NO_ANSWER:?}"),
            }
        };
        while let Ok(f) = rx.try_recv() {
            related.push(self.checked(None, &f));
        }
        let response = match ext {
            Some(def) => {
                if let Err(e) = tap().validate_tasks_extension_response(def, response.as_str()) {
                    panic!("the gateway sent the host an invalid {def}: {e}");
                }
                serde_json::from_str(response.as_str()).unwrap()
            }
            None => self.checked(Some(method), &response),
        };
        Answer { response, related }
    }

    /// `frame` as JSON, validated: as the response to `method`, or (`None`) as a
    /// notification.
    fn checked(&self, method: Option<&str>, frame: &Frame) -> Value {
        let text = frame.as_str();
        let valid = match method {
            Some(m) => tap().validate_response(self.rev, m, text),
            None => tap().validate_frame(self.rev, text),
        };
        if let Err(e) = valid {
            panic!("the gateway sent the host invalid 2026-07-28: {e}\n{text}");
        }
        serde_json::from_str(text).unwrap()
    }

    /// `tools/list`'s tool names.
    pub async fn tool_names(&self) -> (Answer, Vec<String>) {
        let a = self.request("tools/list", json!({})).await;
        let names = a.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        (a, names)
    }

    /// Stops the gateway and its upstreams; fails the test if any frame between the
    /// gateway and an upstream was invalid.
    pub async fn finish(self) {
        self.app.shutdown().await;
        self.links.assert_valid();
    }
}

/// The text of a tool result's first content item.
pub fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// How a [`LegacyHost`] answers a request the gateway sends it (sampling,
/// elicitation, roots): given the request, `Ok(result)` or `Err(error)`; `Err(null)`
/// leaves it unanswered (the test may answer it later with [`LegacyHost::send`]).
pub type Responder = Box<dyn FnMut(&Value) -> Result<Value, Value> + Send>;

/// A responder that answers nothing.
pub fn answer_none() -> Responder {
    Box::new(|_| Err(Value::Null))
}

/// A responder refusing every request with -32601, as a host without the capability.
pub fn refuse_all() -> Responder {
    Box::new(|_| Err(json!({"code": -32601, "message": "Method not found"})))
}

/// A request id as sent: a number when `id` parses as one, else a string.
fn wire_id(id: &str) -> Value {
    id.parse::<u64>().map_or_else(|_| json!(id), |n| json!(n))
}

/// A legacy host (2024-11-05 to 2025-11-25) on the gateway's stdio listener, in
/// process: the seam served by `mcpx_transport::stdio::serve` over
/// `tokio::io::duplex`, as `mcpx serve` serves stdin and stdout. It initializes, sends
/// requests one at a time, and answers the gateway's requests by its [`Responder`].
/// Every frame each way is validated against its revision's schema.
pub struct LegacyHost {
    pub app: Arc<App>,
    pub links: Arc<InMemory>,
    pub rev: Revision,
    /// The `initialize` result.
    pub initialized: Value,
    /// The gateway's requests to the host so far.
    pub asks: Vec<Value>,
    /// The gateway's notifications so far.
    pub notes: Vec<Value>,
    responder: Responder,
    /// Requests sent and not yet answered: id → method.
    pending: HashMap<String, String>,
    write: WriteHalf<DuplexStream>,
    read: BufReader<ReadHalf<DuplexStream>>,
    next_id: u64,
    shutdown: CancellationToken,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl LegacyHost {
    /// Starts the gateway on `config`, its upstreams connecting to `links`, and
    /// initializes as a host speaking `rev` that declares `caps` and answers the
    /// gateway's requests by `responder`.
    pub async fn start(
        config: mcpx_gateway::config::Config,
        links: InMemory,
        rev: Revision,
        caps: Value,
        responder: Responder,
    ) -> LegacyHost {
        let links = Arc::new(links);
        let app = App::start_linked(
            config,
            None,
            None,
            EraCache::disabled(),
            None,
            links.clone(),
        );
        LegacyHost::attach(app, links, rev, caps, responder).await
    }

    /// A legacy host on a gateway already started (beside a [`Host`] on the same
    /// `app`, say): as [`LegacyHost::start`] from the initialization on.
    pub async fn attach(
        app: Arc<App>,
        links: Arc<InMemory>,
        rev: Revision,
        caps: Value,
        responder: Responder,
    ) -> LegacyHost {
        assert_eq!(rev.era(), mcpx_protocol::Era::Legacy, "{rev} is not legacy");
        let (host_side, gateway_side) = tokio::io::duplex(64 * 1024);
        let (gw_read, gw_write) = tokio::io::split(gateway_side);
        let shutdown = CancellationToken::new();
        let served = tokio::spawn(serve(
            app.seam(),
            gw_read,
            gw_write,
            StdioConfig::default(),
            shutdown.clone(),
        ));
        let (read, write) = tokio::io::split(host_side);
        let mut host = LegacyHost {
            app,
            links,
            rev,
            initialized: Value::Null,
            asks: Vec::new(),
            notes: Vec::new(),
            responder,
            pending: HashMap::new(),
            write,
            read: BufReader::new(read),
            next_id: 1,
            shutdown,
            served,
        };
        let init = host
            .request(
                "initialize",
                json!({"protocolVersion": rev.as_str(), "capabilities": caps,
                       "clientInfo": {"name": "in-process-legacy-host", "version": "0"}}),
            )
            .await;
        host.initialized = init.result().clone();
        assert_eq!(
            host.initialized["protocolVersion"],
            rev.as_str(),
            "{:?}",
            init.response
        );
        host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        host
    }

    /// Answers the gateway's requests by `responder` from now on.
    pub fn answer_with(&mut self, responder: Responder) {
        self.responder = responder;
    }

    /// Writes one frame, validated first.
    pub async fn send(&mut self, frame: &Value) {
        let text = frame.to_string();
        if let Err(e) = tap().validate_frame(self.rev, &text) {
            panic!("the host's frame is not valid {}: {e}\n{text}", self.rev);
        }
        self.write_line(&text).await;
    }

    async fn write_line(&mut self, text: &str) {
        self.write.write_all(text.as_bytes()).await.unwrap();
        self.write.write_all(b"\n").await.unwrap();
        self.write.flush().await.unwrap();
    }

    /// The next frame the gateway writes, as JSON (not yet validated).
    async fn next_frame(&mut self, waiting_for: &str) -> Value {
        let mut line = String::new();
        let n = tokio::time::timeout(NO_ANSWER, self.read.read_line(&mut line))
            .await
            .unwrap_or_else(|_| panic!("no frame within {NO_ANSWER:?} awaiting {waiting_for}"))
            .unwrap();
        assert!(n > 0, "the gateway closed stdout awaiting {waiting_for}");
        serde_json::from_str(line.trim_end())
            .unwrap_or_else(|e| panic!("the gateway wrote a line that is not JSON: {e}: {line}"))
    }

    /// Sends request `method` with `params` and waits for its response, answering
    /// the gateway's requests meanwhile; notifications that come before the response
    /// are its `related`.
    pub async fn request(&mut self, method: &str, params: Value) -> Answer {
        let id = self.next_id;
        self.next_id += 1;
        self.send_request(&id.to_string(), method, params).await;
        self.response(&id.to_string()).await
    }

    /// Sends request `method` with `params` under `id` (a number when it parses as
    /// one), not waiting for its answer (see [`LegacyHost::response`]).
    pub async fn send_request(&mut self, id: &str, method: &str, params: Value) {
        let id = wire_id(id);
        self.pending.insert(id.to_string(), method.to_owned());
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
    }

    /// Waits for the response to request `id`, answering the gateway's requests
    /// meanwhile; fails on a response to another request.
    pub async fn response(&mut self, id: &str) -> Answer {
        let a = self.next_response().await;
        assert_eq!(
            a.response["id"],
            wire_id(id),
            "a response to another request: {:?}",
            a.response
        );
        a
    }

    /// Waits for the next response to any request of the host's, answering the
    /// gateway's requests meanwhile.
    pub async fn next_response(&mut self) -> Answer {
        let mut related = Vec::new();
        loop {
            let v = self.next_frame("a response").await;
            let text = v.to_string();
            match v.get("method").and_then(Value::as_str) {
                Some(m) => {
                    if let Err(e) = tap().validate_frame(self.rev, &text) {
                        panic!(
                            "the gateway sent the host invalid {}: {e}\n{text}",
                            self.rev
                        );
                    }
                    if v.get("id").is_some() {
                        let m = m.to_owned();
                        self.asks.push(v.clone());
                        let reply = match (self.responder)(&v) {
                            Ok(result) => {
                                json!({"jsonrpc": "2.0", "id": v["id"], "result": result})
                            }
                            Err(Value::Null) => continue,
                            Err(error) => json!({"jsonrpc": "2.0", "id": v["id"], "error": error}),
                        };
                        let reply_text = reply.to_string();
                        if let Err(e) = tap().validate_response(self.rev, &m, &reply_text) {
                            panic!(
                                "the host's answer is not valid {}: {e}\n{reply_text}",
                                self.rev
                            );
                        }
                        self.write_line(&reply_text).await;
                    } else {
                        self.notes.push(v.clone());
                        related.push(v);
                    }
                }
                None => {
                    let Some(method) = self.pending.remove(&v["id"].to_string()) else {
                        panic!("a response to no request in flight: {v}");
                    };
                    if let Err(e) = tap().validate_response(self.rev, &method, &text) {
                        panic!(
                            "the gateway sent the host invalid {}: {e}\n{text}",
                            self.rev
                        );
                    }
                    return Answer {
                        response: v,
                        related,
                    };
                }
            }
        }
    }

    /// Reads frames until a notification `method` comes (answering the gateway's
    /// requests meanwhile, which no request of the host's is waiting for); returns it.
    pub async fn wait_note(&mut self, method: &str) -> Value {
        loop {
            let v = self.next_frame(method).await;
            let text = v.to_string();
            if let Err(e) = tap().validate_frame(self.rev, &text) {
                panic!(
                    "the gateway sent the host invalid {}: {e}\n{text}",
                    self.rev
                );
            }
            assert!(
                v.get("method").is_some(),
                "a response no request awaits: {v}"
            );
            assert!(
                v.get("id").is_none(),
                "a request while none is in flight: {v}"
            );
            self.notes.push(v.clone());
            if v["method"] == method {
                return v;
            }
        }
    }

    /// `tools/list`'s tool names.
    pub async fn tool_names(&mut self) -> Vec<String> {
        let a = self.request("tools/list", json!({})).await;
        a.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// `tools/call` of `tool` with `arguments`.
    pub async fn call(&mut self, tool: &str, arguments: Value) -> Answer {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }

    /// Ends the stdio connection and stops the gateway and its upstreams; fails the
    /// test if any frame between the gateway and an upstream was invalid.
    pub async fn finish(self) {
        self.shutdown.cancel();
        drop(self.write);
        let _ = self.served.await;
        self.app.shutdown().await;
        self.links.assert_valid();
    }
}
