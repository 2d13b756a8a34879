//! Subscriptions: list changes told to hosts, resource subscriptions of legacy hosts
//! (`resources/subscribe`) and of modern hosts (`subscriptions/listen`), shared at the
//! upstream (register D-C4), and taken up again when an upstream reconnects.

use super::*;

/// Whether an upstream declared `resources.subscribe` (A-C7: only such upstreams are
/// asked to subscribe).
pub(super) fn subscribable(facts: &ServerFacts) -> bool {
    facts
        .capabilities
        .pointer("/resources/subscribe")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Legacy host sessions by id (see [`Subscriptions::legacy_peers`]).
pub(super) type PeerMap = HashMap<Arc<str>, Peer, foldhash::fast::RandomState>;

/// What hosts are told and subscribed to, held across requests.
#[derive(Debug)]
pub(super) struct Subscriptions {
    /// List changes, for hosts (legacy sessions and modern listen streams).
    changes: broadcast::Sender<ListKind>,
    /// Upstreams' `notifications/resources/updated`, for modern hosts' listen streams.
    updates: broadcast::Sender<Frame>,
    /// Legacy host sessions seen, to tell them about list changes, by session id (""
    /// for a stdio host's connection). Sessions that have ended are dropped whenever a
    /// new one is added, so the map holds about as many as are open.
    legacy_peers: Mutex<PeerMap>,
    /// Legacy hosts subscribed to each resource URI (as the host names it), with the
    /// token that ends mcpx's own listen stream for it (modern upstreams).
    subscribers: Mutex<HashMap<String, Vec<(Peer, tokio_util::sync::CancellationToken)>>>,
    /// Modern hosts' listens holding mcpx's `resources/subscribe` at a legacy upstream,
    /// counted by (upstream, upstream's URI). That one upstream subscription is shared
    /// with the legacy hosts in `subscribers`; mcpx unsubscribes only when no host of
    /// either kind holds it (D-C4). An async lock, held across the upstream call it
    /// decides, so an unsubscribe cannot overtake a newer subscribe to the same URI.
    listen_holds: tokio::sync::Mutex<HashMap<(UpstreamId, String), usize>>,
}

impl Subscriptions {
    pub(super) fn new() -> Subscriptions {
        let (changes, _) = broadcast::channel(64);
        let (updates, _) = broadcast::channel(64);
        Subscriptions {
            changes,
            updates,
            legacy_peers: Mutex::new(PeerMap::default()),
            subscribers: Mutex::new(HashMap::new()),
            listen_holds: tokio::sync::Mutex::new(HashMap::new()),
        }
    }
}

impl Subscriptions {
    /// Tells every host that a list changed: legacy sessions by notification, modern
    /// hosts on their `subscriptions/listen` streams.
    pub(super) async fn announce(&self, kind: ListKind) {
        let _ = self.changes.send(kind);
        let peers: Vec<Peer> = {
            let mut p = self.legacy_peers.lock();
            p.retain(|_, peer| !peer.is_closed());
            p.values().cloned().collect()
        };
        for peer in peers {
            let _ = peer
                .notify(Frame::notification(kind.changed_notification(), None))
                .await;
        }
    }

    /// `notifications/resources/updated` of upstream `id` goes to the legacy hosts that
    /// subscribed to that URI (as the host names it: see [`Catalog::exposed_uri`]), and
    /// to modern hosts' listen streams.
    pub(super) async fn relay_resource_updated(
        &self,
        catalog: &Catalog,
        id: &UpstreamId,
        frame: &Frame,
    ) {
        let uri = frame
            .params()
            .and_then(|p| mcpx_protocol::jsonrpc::member(p, "uri"))
            .and_then(|u| serde_json::from_str::<String>(u).ok())
            .unwrap_or_default();
        let exposed = catalog.exposed_uri(id, &uri).into_owned();
        let frame = if exposed == uri {
            frame.clone()
        } else {
            let mut params: Value = frame
                .params()
                .and_then(|p| serde_json::from_str(p).ok())
                .unwrap_or_else(|| json!({}));
            params["uri"] = json!(exposed);
            match raw(&params) {
                Ok(p) => Frame::notification("notifications/resources/updated", Some(&p)),
                Err(_) => return,
            }
        };
        let peers: Vec<Peer> = self
            .subscribers
            .lock()
            .get(&exposed)
            .map(|v| v.iter().map(|(p, _)| p.clone()).collect())
            .unwrap_or_default();
        for peer in peers {
            let _ = peer.notify(frame.clone()).await;
        }
        let _ = self.updates.send(frame);
    }

    /// A new connection of `up` has no subscriptions: mcpx subscribes again to every
    /// URI hosts hold at it (a legacy upstream's `resources/subscribe`, a modern one's
    /// listen per legacy host's subscription).
    pub(super) async fn resubscribe(&self, catalog: &Catalog, up: &Upstream, conn: &Connection) {
        let facts = conn.facts();
        if !subscribable(&facts) {
            return;
        }
        let mut uris: Vec<(String, Vec<tokio_util::sync::CancellationToken>)> = self
            .subscribers
            .lock()
            .iter()
            .filter_map(|(exposed, subs)| {
                let (owner, theirs) = catalog.resource(exposed)?;
                (*owner == up.id).then(|| {
                    (
                        theirs.to_owned(),
                        subs.iter().map(|(_, t)| t.clone()).collect(),
                    )
                })
            })
            .collect();
        if facts.era == Era::Legacy {
            let holds = self.listen_holds.lock().await;
            for (id, uri) in holds.keys() {
                if *id == up.id && !uris.iter().any(|(u, _)| u == uri) {
                    uris.push((uri.clone(), Vec::new()));
                }
            }
            drop(holds);
            for (uri, _) in uris {
                let params = Params::of_value(&json!({ "uri": uri }));
                if let Err(e) = conn
                    .call("resources/subscribe", Some(&params), CallOptions::default())
                    .await
                {
                    tracing::warn!(upstream = %up.id, "subscribing again to {uri}: {e}");
                }
            }
        } else {
            for (uri, tokens) in uris {
                for t in tokens {
                    listen_for_updates(conn, &uri, t);
                }
            }
        }
    }

    /// Subscribes mcpx at `up`, the upstream owning a URI it knows as `theirs`, for a
    /// modern host's listen stream (register D-C4): `resources/subscribe` on a legacy
    /// upstream, a listen of its own with `resourceSubscriptions` on a modern one
    /// (ended by `stop`). `None` when it did not declare `resources.subscribe` or
    /// refused; else the upstream and its own URI.
    async fn subscribe_upstream(
        &self,
        up: Arc<Upstream>,
        theirs: String,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Option<(Arc<Upstream>, String)> {
        let (_, conn) = up.connection().await.ok()?;
        let facts = conn.facts();
        if !subscribable(&facts) {
            return None;
        }
        if facts.era == Era::Legacy {
            let mut holds = self.listen_holds.lock().await;
            let params = Params::of_value(&json!({ "uri": theirs }));
            let f = conn
                .call("resources/subscribe", Some(&params), CallOptions::default())
                .await
                .ok()?;
            f.result()?;
            *holds.entry((up.id.clone(), theirs.clone())).or_default() += 1;
            return Some((up, theirs));
        }
        listen_for_updates(&conn, &theirs, stop.clone());
        Some((up, theirs))
    }

    /// Ends what [`Subscriptions::subscribe_upstream`] began for a listen stream that ended: a
    /// legacy upstream is unsubscribed unless another listen or a legacy host still
    /// holds the URI (modern upstreams' listens end with the stream's token). `exposed`
    /// is the URI as the host named it, `theirs` the upstream's.
    async fn unsubscribe_upstream(&self, up: &Upstream, exposed: &str, theirs: &str) {
        let mut holds = self.listen_holds.lock().await;
        let key = (up.id.clone(), theirs.to_owned());
        let Some(n) = holds.get_mut(&key) else {
            return;
        };
        *n = n.saturating_sub(1);
        if *n > 0 {
            return;
        }
        holds.remove(&key);
        let held = self
            .subscribers
            .lock()
            .get(exposed)
            .is_some_and(|v| !v.is_empty());
        if let Some(conn) = up.ready().filter(|c| !held && c.facts().era == Era::Legacy) {
            let params = Params::of_value(&json!({ "uri": theirs }));
            let _ = conn
                .call(
                    "resources/unsubscribe",
                    Some(&params),
                    CallOptions::default(),
                )
                .await;
        }
    }

    /// `resources/subscribe` and `resources/unsubscribe` from a legacy host. A legacy
    /// upstream gets them as they are; a modern one has no such methods, so mcpx holds
    /// a `subscriptions/listen` stream with `resourceSubscriptions` for the URI instead
    /// (register D-C4). `uri` is as the host named it; `params` are for the upstream
    /// (its own URI).
    ///
    /// `forward` sends the host's request on to the upstream, as the call path does.
    pub(super) async fn subscription<F: Future<Output = Result<Reply, Fault>>>(
        &self,
        call: &Call,
        up: &Arc<Upstream>,
        uri: &str,
        params: &Value,
        forward: impl Fn() -> F,
    ) -> Result<Reply, Fault> {
        let subscribe = call.method == "resources/subscribe";
        let theirs = params
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or(uri)
            .to_owned();
        let peer = call.peer.clone();
        let key = peer
            .as_ref()
            .and_then(Peer::session_id)
            .unwrap_or_default()
            .to_owned();
        let (_, conn) = up.connection().await.map_err(|e| e.to_fault(call.host))?;
        let facts = conn.facts();
        let modern = facts.era == Era::Modern;
        if !subscribable(&facts) {
            // A-C7: only upstreams that declared resources.subscribe are asked.
            return Err(GatewayError::Unsupported(format!(
                "upstream {} does not support resource subscriptions",
                up.id
            ))
            .to_fault(call.host));
        }
        // One upstream subscription serves every legacy host subscribed to the URI and
        // every modern host's listen that asked for it: a subscribe always reaches the
        // upstream (idempotent, 2025-11-25 server/resources §Subscriptions), an
        // unsubscribe only when the last host of either kind lets go.
        let holds = if modern {
            None
        } else {
            Some(self.listen_holds.lock().await)
        };
        if !modern && subscribe {
            forward().await?;
        }
        if subscribe {
            let listen = modern.then_some((&conn, theirs.as_str()));
            self.add_subscriber(uri, &key, peer, listen);
        } else {
            let others_remain = self.remove_subscriber(uri, &key);
            let listens_remain = holds.as_ref().is_some_and(|h| {
                h.get(&(up.id.clone(), theirs.clone()))
                    .is_some_and(|n| *n > 0)
            });
            if !modern && !others_remain && !listens_remain {
                forward().await?;
            }
        }
        Ok(Reply {
            result: Json::of_value(&json!({})),
            revision: call.host,
        })
    }

    /// Adds `peer` (host session `key`) to `uri`'s subscribers, unless it is one
    /// already; `listen` is a modern upstream's connection and its URI, for mcpx's own
    /// listen for the updates.
    fn add_subscriber(
        &self,
        uri: &str,
        key: &str,
        peer: Option<Peer>,
        listen: Option<(&Connection, &str)>,
    ) {
        let mut subs = self.subscribers.lock();
        let entry = subs.entry(uri.to_owned()).or_default();
        let already = entry
            .iter()
            .any(|(p, _)| p.session_id().unwrap_or_default() == key);
        if let (Some(peer), false) = (peer, already) {
            let token = tokio_util::sync::CancellationToken::new();
            if let Some((conn, theirs)) = listen {
                listen_for_updates(conn, theirs, token.clone());
            }
            entry.push((peer, token));
        }
        if entry.is_empty() {
            subs.remove(uri);
        }
    }

    /// Removes host session `key` from `uri`'s subscribers, ending mcpx's own listen
    /// for it; whether other hosts remain subscribed.
    fn remove_subscriber(&self, uri: &str, key: &str) -> bool {
        let mut subs = self.subscribers.lock();
        let entry = subs.entry(uri.to_owned()).or_default();
        entry.retain(|(p, token)| {
            let mine = p.session_id().unwrap_or_default() == key;
            if mine {
                token.cancel();
            }
            !mine
        });
        let remain = !entry.is_empty();
        if !remain {
            subs.remove(uri);
        }
        remain
    }

    /// Remembers a legacy host's session, to tell it of list changes.
    pub(super) fn remember_peer(&self, peer: &Option<Peer>) {
        let Some(peer) = peer else { return };
        {
            let mut peers = self.legacy_peers.lock();
            let key = peer.session_id().unwrap_or("");
            if !peers.contains_key(key) {
                // Once per session: the ended ones go, so the map never outgrows the
                // sessions open (a long-running gateway sees sessions come and go).
                peers.retain(|_, p| !p.is_closed());
                peers.insert(Arc::from(key), peer.clone());
            }
        }
    }

    /// `subscriptions/listen` from a modern host: acknowledge the kinds mcpx can deliver,
    /// then deliver them, tagged with the listen id, until the host cancels.
    ///
    /// `route` finds the upstream owning a URI the host names, and its own URI for
    /// it; `stopping` fires when mcpx shuts down.
    pub(super) async fn listen(
        &self,
        call: &Call,
        stopping: &tokio_util::sync::CancellationToken,
        route: impl Fn(&str) -> Option<(Arc<Upstream>, String)>,
    ) -> Result<Reply, Fault> {
        let params: Value = call
            .params
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(json!({}));
        let requested = params.get("notifications").cloned().unwrap_or(json!({}));
        let mut granted = granted_lists(&requested);
        let stop = tokio_util::sync::CancellationToken::new();
        let _stop_upstream_listens = stop.clone().drop_guard();
        let urx = self.updates.subscribe();
        let watched = self.watch_resources(&requested, &route, &stop).await;
        if !watched.is_empty() {
            let uris: Vec<&str> = watched.iter().map(|(u, _, _)| u.as_str()).collect();
            granted.insert("resourceSubscriptions".to_owned(), json!(uris));
        }
        let sub_id = match &call.id {
            Id::Number(n) => json!(n),
            Id::String(s) => json!(s),
        };
        let tag = json!({ meta::SUBSCRIPTION_ID: sub_id });
        let rx = self.changes.subscribe();
        let ack = json!({ "_meta": tag, "notifications": Value::Object(granted.clone()) });
        let _ = call
            .ctx
            .notify(Frame::notification(
                "notifications/subscriptions/acknowledged",
                Some(&raw(&ack)?),
            ))
            .await;
        let listening = Listening {
            call,
            sub_id,
            tag,
            granted,
            watched,
        };
        listening.deliver(stopping, rx, urx).await?;
        for (uri, up, theirs) in &listening.watched {
            self.unsubscribe_upstream(up, uri, theirs).await;
        }
        // A graceful end (2026-07-28 basic/patterns/subscriptions §Graceful Closure).
        Ok(Reply {
            result: Json::of_value(&json!({ "_meta": listening.tag })),
            revision: Revision::NEWEST,
        })
    }

    /// D-C4 (2026-07-28 server/resources §Capabilities, schema SubscriptionFilter):
    /// a modern host subscribes to resources with `resourceSubscriptions`; mcpx
    /// subscribes at the owning upstreams (until `stop`) and grants the URIs it could.
    async fn watch_resources(
        &self,
        requested: &Value,
        route: &impl Fn(&str) -> Option<(Arc<Upstream>, String)>,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Vec<Watched> {
        let mut watched: Vec<Watched> = Vec::new();
        let Some(uris) = requested
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
        else {
            return watched;
        };
        for uri in uris.iter().filter_map(Value::as_str) {
            if watched.iter().any(|(u, _, _)| u == uri) {
                continue;
            }
            let Some((up, theirs)) = route(uri) else {
                continue;
            };
            if let Some((up, theirs)) = self.subscribe_upstream(up, theirs, stop).await {
                watched.push((uri.to_owned(), up, theirs));
            }
        }
        watched
    }
}

/// A resource a listen watches: the URI as the host names it, its upstream and the
/// upstream's URI.
type Watched = (String, Arc<Upstream>, String);

/// The list changes a listen asks for that mcpx delivers.
fn granted_lists(requested: &Value) -> Map<String, Value> {
    let want = |k: &str| requested.get(k).and_then(Value::as_bool).unwrap_or(false);
    let mut granted = Map::new();
    for k in [
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
    ] {
        if want(k) {
            granted.insert(k.to_owned(), json!(true));
        }
    }
    granted
}

/// One modern host's `subscriptions/listen` stream, once acknowledged.
struct Listening<'a> {
    call: &'a Call,
    /// The listen's id.
    sub_id: Value,
    /// The `_meta` every notification on the stream carries (the listen's id).
    tag: Value,
    /// What the acknowledgement granted.
    granted: Map<String, Value>,
    watched: Vec<Watched>,
}

impl Listening<'_> {
    /// Delivers list changes and resource updates until the host cancels or mcpx
    /// stops.
    async fn deliver(
        &self,
        stopping: &tokio_util::sync::CancellationToken,
        mut rx: broadcast::Receiver<ListKind>,
        mut urx: broadcast::Receiver<Frame>,
    ) -> Result<(), Fault> {
        loop {
            tokio::select! {
                () = self.call.cancel.cancelled() => return Ok(()),
                () = stopping.cancelled() => return self.stopping().await,
                change = rx.recv() => match change {
                    Ok(kind) => self.list_changed(kind).await?,
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
                update = urx.recv(), if !self.watched.is_empty() => match update {
                    Ok(frame) => self.resource_updated(&frame).await?,
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    /// H1 reading (2026-07-28 basic/patterns/cancellation and subscriptions, schema
    /// CancelledNotification): mcpx ends the stream on its own; on stdio it first
    /// sends notifications/cancelled for the listen id (the MUST), then the result
    /// (the SHOULD); on HTTP only the result, and the stream closes.
    async fn stopping(&self) -> Result<(), Fault> {
        if self.call.ctx.is_stdio() {
            let p = json!({ "requestId": self.sub_id, "reason": "mcpx is shutting down" });
            let n = Frame::notification("notifications/cancelled", Some(&raw(&p)?));
            let _ = self.call.ctx.notify(n).await;
        }
        Ok(())
    }

    /// Tells the host of a list change, if it asked for that kind.
    async fn list_changed(&self, kind: ListKind) -> Result<(), Fault> {
        let key = match kind {
            ListKind::Tools => "toolsListChanged",
            ListKind::Prompts => "promptsListChanged",
            ListKind::Resources | ListKind::Templates => "resourcesListChanged",
        };
        if self.granted.contains_key(key) {
            let p = json!({ "_meta": self.tag });
            let n = Frame::notification(kind.changed_notification(), Some(&raw(&p)?));
            let _ = self.call.ctx.notify(n).await;
        }
        Ok(())
    }

    /// Tells the host of an upstream's resource update, if it watches the URI.
    async fn resource_updated(&self, frame: &Frame) -> Result<(), Fault> {
        let uri = frame
            .params()
            .and_then(|p| mcpx_protocol::jsonrpc::member(p, "uri"))
            .and_then(|u| serde_json::from_str::<String>(u).ok())
            .unwrap_or_default();
        if self.watched.iter().any(|(u, _, _)| *u == uri) {
            // Tagged with this listen's id, not the upstream's.
            let p = json!({ "uri": uri, "_meta": self.tag });
            let n = Frame::notification("notifications/resources/updated", Some(&raw(&p)?));
            let _ = self.call.ctx.notify(n).await;
        }
        Ok(())
    }
}

/// mcpx's own `subscriptions/listen` at a modern upstream for one resource's
/// updates, until `stop`.
fn listen_for_updates(conn: &Connection, uri: &str, stop: tokio_util::sync::CancellationToken) {
    let params = Params::of_value(&json!({ "notifications": { "resourceSubscriptions": [uri] } }));
    let conn = conn.clone();
    tokio::spawn(async move {
        let opts = CallOptions {
            timeout: LISTEN_LIFETIME,
            max_time: LISTEN_LIFETIME,
            attribute_unsolicited: false,
            cancel: stop,
            ..CallOptions::default()
        };
        if let Err(e) = conn.call("subscriptions/listen", Some(&params), opts).await {
            tracing::debug!(upstream = conn.name(), "resource listen ended: {e}");
        }
    });
}
