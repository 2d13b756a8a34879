//! In-memory upstreams and an in-process host.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpx_client::{EraCache, StreamOpener, Target, TargetTransport};
use mcpx_example_server::{ExampleServer, Mode};
use mcpx_gateway::app::App;
use mcpx_gateway::upstream::{Connecting, Connector};
use mcpx_protocol::codec::{Decoded, Limits, decode};
use mcpx_protocol::{Frame, Revision, Verdict, meta};
use mcpx_testkit::tap::tap;
use mcpx_transport::stdio::{StdioConfig, serve};
use mcpx_transport::{Incoming, RequestCtx, Service};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What serves one upstream name.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The example server's mode.
    pub mode: Mode,
    /// How long each connection attempt takes before the stream opens (a slow start,
    /// as an `npx` server's).
    pub start_delay: Duration,
}

impl Upstream {
    /// A dual-era example server, up at once.
    pub fn example() -> Upstream {
        Upstream {
            mode: Mode::Dual,
            start_delay: Duration::ZERO,
        }
    }

    /// The same, `delay` slow to start.
    pub fn starting_after(mut self, delay: Duration) -> Upstream {
        self.start_delay = delay;
        self
    }
}

/// The app's connector for in-process tests: an upstream name connects to a fresh
/// example server in this process (one per connection, as a restarted process is),
/// over `tokio::io::duplex`, by the stdio client's framing and the ordinary probe.
/// A name not registered fails to connect.
#[derive(Debug, Default)]
pub struct InMemory {
    servers: Mutex<HashMap<String, Upstream>>,
    /// Connection attempts so far, by name.
    connects: Mutex<HashMap<String, u32>>,
}

impl InMemory {
    /// Serves upstream `name` by `upstream`.
    pub fn with(self, name: &str, upstream: Upstream) -> InMemory {
        self.servers
            .lock()
            .unwrap()
            .insert(name.to_owned(), upstream);
        self
    }

    /// How many times upstream `name` was connected to.
    pub fn connects(&self, name: &str) -> u32 {
        self.connects
            .lock()
            .unwrap()
            .get(name)
            .copied()
            .unwrap_or(0)
    }
}

/// An opener of streams to a new example server in `mode`.
fn opener(name: &str, mode: Mode) -> StreamOpener {
    StreamOpener::new(name, move || {
        Box::pin(async move {
            let (client, server) = tokio::io::duplex(64 * 1024);
            let (server_read, server_write) = tokio::io::split(server);
            let service = Arc::new(ExampleServer::new(mode));
            tokio::spawn(async move {
                let _ = serve(
                    service,
                    server_read,
                    server_write,
                    StdioConfig::default(),
                    CancellationToken::new(),
                )
                .await;
            });
            let (read, write) = tokio::io::split(client);
            Ok((
                Box::new(read) as Box<dyn tokio::io::AsyncRead + Send + Unpin>,
                Box::new(write) as Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
            ))
        })
    })
}

impl Connector for InMemory {
    fn connect<'a>(&'a self, target: &'a Target, era_cache: &'a EraCache) -> Connecting<'a> {
        *self
            .connects
            .lock()
            .unwrap()
            .entry(target.name.clone())
            .or_default() += 1;
        let upstream = self.servers.lock().unwrap().get(&target.name).cloned();
        Box::pin(async move {
            let mut target = target.clone();
            target.transport = match upstream {
                Some(u) => {
                    tokio::time::sleep(u.start_delay).await;
                    TargetTransport::Stream(opener(&target.name, u.mode))
                }
                None => TargetTransport::Stream(StreamOpener::new(&target.name, || {
                    Box::pin(async {
                        Err(std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "no in-memory server of that name",
                        ))
                    })
                })),
            };
            mcpx_client::connect(&target, era_cache).await
        })
    }
}

/// A configuration with `servers` (name → the entry's `mcpx` block) and the
/// global `mcpx` block `global`. Each entry's command is never run.
pub fn config(global: Value, servers: &[(&str, Value)]) -> mcpx_gateway::config::Config {
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
        let links = Arc::new(links);
        let app = App::start_linked(
            config,
            None,
            None,
            EraCache::disabled(),
            None,
            links.clone(),
        );
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

    /// [`Host::request`], cancelled when `cancel` is.
    pub async fn request_cancellable(
        &self,
        method: &str,
        mut params: Value,
        cancel: CancellationToken,
    ) -> Answer {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        params["_meta"] = json!({
            meta::PROTOCOL_VERSION: self.rev.as_str(),
            meta::CLIENT_CAPABILITIES: {},
            meta::CLIENT_INFO: {"name": "in-process-host", "version": "0"},
        });
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
        let response = loop {
            tokio::select! {
                r = &mut response => break r,
                Some(f) = rx.recv() => related.push(self.checked(None, &f)),
            }
        };
        while let Ok(f) = rx.try_recv() {
            related.push(self.checked(None, &f));
        }
        Answer {
            response: self.checked(Some(method), &response),
            related,
        }
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

    /// Stops the gateway and its upstreams.
    pub async fn finish(self) {
        self.app.shutdown().await;
    }
}

/// The text of a tool result's first content item.
pub fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}
