//! The merged catalog: every upstream's last known lists made into the lists a host
//! sees, and the way back from a host's name or URI to an upstream.
//!
//! [`build`] is a pure function of the naming rules and each configured upstream's
//! [`Lists`]. The gateway keeps each upstream's lists as last fetched, builds a new
//! [`Catalog`] when one of them changes, and swaps it in whole. Upstreams are named by
//! their [`UpstreamId`].
//!
//! A build costs in proportion to the upstreams whose lists changed, not to the whole
//! catalog: each upstream's host-facing items are kept ([`Made`]), shared, and an
//! upstream whose lists are the ones of the last build (its [`Source::previous`]) gives
//! the new catalog the same items, with their `x-mcp-header` annotations as parsed
//! then. What is left of a build for the others is a pointer and a name each.
//!
//! # Tools and prompts
//!
//! An upstream's tool filter applies to its tools. A tool whose `x-mcp-header`
//! annotations are invalid is left out (2026-07-28 streamable-http §Custom Headers:
//! such a tool MUST be excluded), with a warning. Names go through
//! [`NameMap::build`](crate::naming::NameMap::build), in configuration order; a listed
//! item's `name` is the exposed name. A name listed twice by one upstream is listed
//! once.
//!
//! # Resource URIs
//!
//! Register D-C13's rule for names, applied to URIs: nothing an upstream offers is
//! hidden by another's.
//!
//! * A resource URI listed by one upstream is exposed as it is.
//! * When several upstreams list the same URI, the first in configuration order keeps
//!   it. Each later one's copy is exposed as `mcpx://<namespace>/<uri>`, where
//!   `<namespace>` is that upstream's, with every byte outside `[A-Za-z0-9-._~]`
//!   percent-encoded.
//! * A resource template whose static prefix (up to its first `{`) equals an earlier
//!   upstream's template's prefix is exposed the same way:
//!   `mcpx://<namespace>/<uriTemplate>`.
//! * The warning for each pair of clashing upstreams says how many URIs clashed.
//!
//! A URI a host names is routed, in this order:
//!
//! 1. a listed URI, to the upstream that listed it, with its own URI;
//! 2. `mcpx://<namespace>/<rest>`, where `<namespace>` is a configured upstream's, to
//!    that upstream with `<rest>`, whether or not `<rest>` clashed;
//! 3. the longest non-empty template prefix it starts with, to that template's
//!    upstream, unchanged;
//! 4. with one configured upstream, to that upstream, unchanged.
//!
//! Otherwise it is unknown. Listed URIs come first so that an upstream that itself
//! lists `mcpx://` URIs (another mcpx) is reached at what it lists.
//!
//! The other way, [`Catalog::exposed_uri`] gives the URI a host sees for an upstream's
//! URI (in `notifications/resources/updated` and read results): the URI itself when
//! it routes back to that upstream, else its `mcpx://` form.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use mcpx_protocol::header::{ParamHeader, param_headers};
use mcpx_protocol::task::TaskSupport;
use serde_json::{Value, json};

use crate::config::ToolFilter;
use crate::id::UpstreamId;
use crate::naming::{NameMap, NameRules};

/// The start of a URI that names its upstream (see the module doc).
pub const URI_SCHEME: &str = "mcpx://";

/// The lists the catalog merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    /// `tools/list`
    Tools,
    /// `prompts/list`
    Prompts,
    /// `resources/list`
    Resources,
    /// `resources/templates/list`
    Templates,
}

impl ListKind {
    /// Every kind, in the order above.
    pub const ALL: [ListKind; 4] = [
        ListKind::Tools,
        ListKind::Prompts,
        ListKind::Resources,
        ListKind::Templates,
    ];

    /// The list request's method.
    pub fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Prompts => "prompts/list",
            ListKind::Resources => "resources/list",
            ListKind::Templates => "resources/templates/list",
        }
    }

    /// The member of the list result that holds the items.
    pub fn key(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::Templates => "resourceTemplates",
        }
    }

    /// The server capability that offers the list.
    pub fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources | ListKind::Templates => "resources",
        }
    }

    /// The notification that says the list changed.
    pub fn changed_notification(self) -> &'static str {
        match self {
            ListKind::Tools => "notifications/tools/list_changed",
            ListKind::Prompts => "notifications/prompts/list_changed",
            ListKind::Resources | ListKind::Templates => "notifications/resources/list_changed",
        }
    }

    /// The member of an item that a host sees renamed: its name, URI or template.
    fn exposed_field(self) -> &'static str {
        match self {
            ListKind::Tools | ListKind::Prompts => "name",
            ListKind::Resources => "uri",
            ListKind::Templates => "uriTemplate",
        }
    }

    fn index(self) -> usize {
        match self {
            ListKind::Tools => 0,
            ListKind::Prompts => 1,
            ListKind::Resources => 2,
            ListKind::Templates => 3,
        }
    }
}

/// A listed tool's facts a call acts on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolFacts {
    /// Annotated read-only or idempotent: a re-issue is safe (B-C10).
    pub idempotent: bool,
    /// Its `execution.taskSupport`.
    pub support: TaskSupport,
}

impl ToolFacts {
    /// The facts of a `Tool` object.
    pub fn of_tool(tool: &Value) -> ToolFacts {
        let annotations = tool.get("annotations");
        let hint =
            |k: &str| annotations.and_then(|a| a.get(k)).and_then(Value::as_bool) == Some(true);
        ToolFacts {
            idempotent: hint("readOnlyHint") || hint("idempotentHint"),
            support: TaskSupport::of_tool(tool),
        }
    }
}

/// One upstream's lists as last fetched. `None`: not offered or never fetched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lists {
    /// `tools/list`'s items.
    pub tools: Option<Vec<Value>>,
    /// `prompts/list`'s items.
    pub prompts: Option<Vec<Value>>,
    /// `resources/list`'s items.
    pub resources: Option<Vec<Value>>,
    /// `resources/templates/list`'s items.
    pub templates: Option<Vec<Value>>,
}

impl Lists {
    /// The list of `kind`.
    pub fn get(&self, kind: ListKind) -> Option<&Vec<Value>> {
        match kind {
            ListKind::Tools => self.tools.as_ref(),
            ListKind::Prompts => self.prompts.as_ref(),
            ListKind::Resources => self.resources.as_ref(),
            ListKind::Templates => self.templates.as_ref(),
        }
    }

    /// Replaces the list of `kind`.
    pub fn set(&mut self, kind: ListKind, items: Option<Vec<Value>>) {
        match kind {
            ListKind::Tools => self.tools = items,
            ListKind::Prompts => self.prompts = items,
            ListKind::Resources => self.resources = items,
            ListKind::Templates => self.templates = items,
        }
    }

    fn items(&self, kind: ListKind) -> &[Value] {
        self.get(kind).map(Vec::as_slice).unwrap_or_default()
    }
}

/// One configured upstream as the catalog sees it.
///
/// Every configured, enabled upstream is passed to [`build`], connected or not, in
/// configuration order.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// The upstream.
    pub id: &'a UpstreamId,
    /// The prefix of its names and the authority of its `mcpx://` URIs.
    pub namespace: &'a str,
    /// Which of its tools are exposed.
    pub tools: &'a ToolFilter,
    /// Its lists as last fetched.
    pub lists: &'a Lists,
    /// What the last build made of these same lists, to be reused: `None` when the
    /// lists changed since (or for a first build).
    pub previous: Option<&'a Made>,
}

/// An item as a build exposed it (its exposed name or URI is in it, at its kind's
/// [`ListKind::exposed_field`]).
type MadeItem = Option<Arc<Value>>;

/// What a build made of one upstream's lists: each item as exposed (by kind, by its
/// place in its list) and each tool's `x-mcp-header` annotations as parsed. A later
/// build of the same lists reuses an item whose exposed name has not changed.
#[derive(Debug, Default)]
pub struct Made {
    items: [Vec<MadeItem>; 4],
    /// Each tool's headers, or why they are refused (mcpx_protocol::header's words).
    headers: Vec<Option<Result<Vec<ParamHeader>, String>>>,
}

impl Made {
    fn for_lists(lists: &Lists) -> Made {
        Made {
            items: ListKind::ALL.map(|k| vec![None; lists.items(k).len()]),
            headers: vec![None; lists.items(ListKind::Tools).len()],
        }
    }

    /// The item at `at` of `kind` exposed as `exposed`: the previous build's when it
    /// exposed it the same, else made by `make`; kept in `self` for the next build.
    fn item(
        &mut self,
        previous: Option<&Made>,
        kind: ListKind,
        at: usize,
        exposed: &str,
        make: impl FnOnce() -> Value,
    ) -> Arc<Value> {
        let field = kind.exposed_field();
        let reused = previous
            .and_then(|p| p.items[kind.index()].get(at))
            .and_then(Option::as_ref)
            .filter(|item| item.get(field).and_then(Value::as_str) == Some(exposed))
            .cloned();
        let item = reused.unwrap_or_else(|| Arc::new(make()));
        if let Some(slot) = self.items[kind.index()].get_mut(at) {
            *slot = Some(item.clone());
        }
        item
    }
}

/// What [`build`] makes.
#[derive(Debug, Default)]
pub struct Built {
    /// The merged catalog.
    pub catalog: Catalog,
    /// What it made of each source's lists, in the sources' order: the next build's
    /// [`Source::previous`] for those whose lists stay the same.
    pub made: Vec<Made>,
    /// What the operator should know about it.
    pub warnings: Vec<Warning>,
    /// Each exposed tool's `x-mcp-header` annotations (possibly none), by its upstream
    /// and the upstream's own tool name, for the upstreams without a
    /// [`Source::previous`] (the others' were handed over with it). The gateway hands
    /// them to the connection.
    pub tool_headers: Vec<(UpstreamId, String, Vec<ParamHeader>)>,
}

/// Something the operator should know about the merged catalog.
///
/// `key` is the same across builds for the same situation, so the gateway can log
/// each once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Names the situation.
    pub key: String,
    /// Says it, for a log.
    pub message: String,
}

/// A tool or prompt a host named, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved<'a> {
    /// The upstream that serves it.
    pub upstream: &'a UpstreamId,
    /// The upstream's own name for it.
    pub original: &'a str,
    /// A tool's facts (the defaults for a prompt).
    pub facts: ToolFacts,
    /// The upstream's position among the sources the catalog was built from (a hint
    /// for finding it without a lookup by id; check the id).
    pub source: usize,
}

/// An upstream as the catalog knows it.
#[derive(Debug)]
struct Upstream {
    id: UpstreamId,
    /// What its names start with when names are prefixed
    /// ([`NameRules::prefix_of`]).
    name_prefix: String,
    /// The authority of its `mcpx://` URIs.
    authority: String,
}

/// What an exposed tool or prompt name leads to.
#[derive(Debug)]
struct Entry {
    upstream: usize,
    original: String,
    facts: ToolFacts,
}

/// The merged lists and the routes back to upstreams.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Each kind's host-facing items, by [`ListKind::index`], shared with the builds
    /// that reuse them.
    lists: [Vec<Arc<Value>>; 4],
    /// The configured upstreams, in configuration order.
    upstreams: Vec<Upstream>,
    /// An upstream's place in `upstreams`.
    index: HashMap<UpstreamId, usize>,
    /// Upstreams by the authority of their `mcpx://` URIs.
    authorities: HashMap<String, usize>,
    /// Names are prefixed with namespaces.
    prefixed: bool,
    tools: HashMap<String, Entry>,
    prompts: HashMap<String, Entry>,
    /// The `x-mcp-header` annotations of the tools that have any, by exposed name: the
    /// Streamable HTTP server checks a 2026-07-28 call's `Mcp-Param-*` headers against
    /// them on every call.
    param_headers: HashMap<String, Vec<ParamHeader>>,
    /// Listed resource URIs: the upstream, and where its own URI starts in the
    /// exposed one (0, or past `mcpx://<namespace>/`).
    by_uri: HashMap<String, (usize, usize)>,
    /// The prefixes (up to the first `{`) of templates exposed as they are, with their
    /// upstream, longest first.
    template_prefixes: Vec<(String, usize)>,
}

impl Catalog {
    /// The host-facing items of `kind`: tools and prompts renamed, URIs as exposed.
    pub fn list(&self, kind: ListKind) -> &[Arc<Value>] {
        &self.lists[kind.index()]
    }

    /// The tool a host calls `exposed`.
    pub fn tool(&self, exposed: &str) -> Option<Resolved<'_>> {
        self.resolve(self.tools.get(exposed)?)
    }

    /// Every tool a host can call: its exposed name and its upstream.
    pub fn tools(&self) -> impl Iterator<Item = (&str, &UpstreamId)> {
        self.tools
            .iter()
            .filter_map(|(name, e)| Some((name.as_str(), &self.upstreams.get(e.upstream)?.id)))
    }

    /// The prompt a host calls `exposed` (its facts are the defaults).
    pub fn prompt(&self, exposed: &str) -> Option<Resolved<'_>> {
        self.resolve(self.prompts.get(exposed)?)
    }

    fn resolve<'a>(&'a self, e: &'a Entry) -> Option<Resolved<'a>> {
        Some(Resolved {
            upstream: &self.upstreams.get(e.upstream)?.id,
            original: &e.original,
            facts: e.facts,
            source: e.upstream,
        })
    }

    /// The upstream a name of a tool or prompt the catalog does not list would belong
    /// to. With namespaces in use: the upstream whose prefix
    /// ([`NameRules::prefix_of`]: its sanitised namespace and separator, or the
    /// namespace shortened once) starts `exposed`, the longest such. With one
    /// configured upstream: that one.
    ///
    /// So a call to a tool of an upstream that is down can be answered with the
    /// upstream's state, not "unknown tool".
    pub fn owner_of_name(&self, exposed: &str) -> Option<&UpstreamId> {
        if self.prefixed {
            self.upstreams
                .iter()
                .filter(|u| exposed.starts_with(u.name_prefix.as_str()))
                .max_by_key(|u| u.name_prefix.len())
                .map(|u| &u.id)
        } else if let [only] = self.upstreams.as_slice() {
            Some(&only.id)
        } else {
            None
        }
    }

    /// The upstream serving a resource URI a host names, and the URI to send it (a
    /// part of `uri`). See the module doc for the order of the rules.
    pub fn resource<'s, 'u>(&'s self, uri: &'u str) -> Option<(&'s UpstreamId, &'u str)> {
        let id = |i: usize| self.upstreams.get(i).map(|u| &u.id);
        if let Some(&(i, at)) = self.by_uri.get(uri) {
            return Some((id(i)?, uri.get(at..)?));
        }
        if let Some((i, rest)) = self.explicit(uri) {
            return Some((id(i)?, rest));
        }
        if let Some((_, i)) = self
            .template_prefixes
            .iter()
            .find(|(p, _)| !p.is_empty() && uri.starts_with(p.as_str()))
        {
            return Some((id(*i)?, uri));
        }
        match self.upstreams.as_slice() {
            [only] => Some((&only.id, uri)),
            _ => None,
        }
    }

    /// `mcpx://<namespace>/<rest>` of a configured upstream: its place and `<rest>`.
    fn explicit<'u>(&self, uri: &'u str) -> Option<(usize, &'u str)> {
        let (authority, rest) = uri.strip_prefix(URI_SCHEME)?.split_once('/')?;
        Some((*self.authorities.get(authority)?, rest))
    }

    /// The URI a host sees for upstream `id`'s `uri`: `uri` when a host naming it
    /// reaches that upstream with it, else `mcpx://<namespace>/<uri>`. An unknown
    /// upstream's is `uri`.
    pub fn exposed_uri<'u>(&self, id: &UpstreamId, uri: &'u str) -> Cow<'u, str> {
        let Some(up) = self.index.get(id).and_then(|i| self.upstreams.get(*i)) else {
            return Cow::Borrowed(uri);
        };
        match self.resource(uri) {
            Some((owner, sent)) if owner == id && sent == uri => Cow::Borrowed(uri),
            _ => Cow::Owned(format!("{URI_SCHEME}{}/{uri}", up.authority)),
        }
    }

    /// The `x-mcp-header` annotations of the tool a host calls `exposed_tool` (none
    /// for a tool without any, or unknown).
    pub fn param_headers(&self, exposed_tool: &str) -> &[ParamHeader] {
        self.param_headers
            .get(exposed_tool)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The kinds whose host-facing lists differ between `before` and `self`: what
    /// hosts must be told.
    pub fn changed_since(&self, before: &Catalog) -> Vec<ListKind> {
        ListKind::ALL
            .into_iter()
            .filter(|k| {
                let (now, then) = (self.list(*k), before.list(*k));
                now.len() != then.len()
                    || now
                        .iter()
                        .zip(then)
                        .any(|(a, b)| !Arc::ptr_eq(a, b) && a != b)
            })
            .collect()
    }
}

/// `ns` as a URI authority: every byte outside RFC 3986's unreserved characters
/// percent-encoded, so two namespaces never share one.
fn authority(ns: &str) -> String {
    let mut out = String::with_capacity(ns.len());
    for b in ns.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `item` with its `field` set to `value`.
fn with_field(item: &Value, field: &str, value: &str) -> Value {
    let mut item = item.clone();
    if let Some(o) = item.as_object_mut() {
        o.insert(field.to_owned(), json!(value));
    }
    item
}

/// Builds the catalog from every configured upstream's lists (see the module doc).
pub fn build(rules: &NameRules, sources: &[Source<'_>]) -> Built {
    let mut built = Built {
        made: sources.iter().map(|s| Made::for_lists(s.lists)).collect(),
        ..Built::default()
    };
    let namespaces = namespaces(sources, &mut built.warnings);
    let c = &mut built.catalog;
    c.prefixed = rules.prefix;
    for (i, (s, ns)) in sources.iter().zip(&namespaces).enumerate() {
        let authority = authority(ns);
        c.authorities.entry(authority.clone()).or_insert(i);
        c.index.entry(s.id.clone()).or_insert(i);
        c.upstreams.push(Upstream {
            id: s.id.clone(),
            name_prefix: rules.prefix_of(ns),
            authority,
        });
    }
    build_names(rules, sources, &namespaces, &mut built);
    build_uris(sources, &mut built);
    built
}

/// Each source's namespace, unique: a namespace already taken is replaced (by the
/// upstream's id, or the namespace with `-2`, `-3`, …), with a warning.
fn namespaces(sources: &[Source<'_>], warnings: &mut Vec<Warning>) -> Vec<String> {
    let mut taken: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(sources.len());
    for s in sources {
        let mut ns = s.namespace.to_owned();
        if taken.contains(&ns) {
            ns = std::iter::once(s.id.as_str().to_owned())
                .chain((2..).map(|n| format!("{}-{n}", s.namespace)))
                .find(|c| !taken.contains(c))
                .unwrap_or_default();
            warnings.push(Warning {
                key: format!("namespace-taken:{}", s.id),
                message: format!(
                    "upstream {}'s namespace {:?} is another upstream's; {} uses {ns:?}",
                    s.id, s.namespace, s.id
                ),
            });
        }
        taken.insert(ns.clone());
        out.push(ns);
    }
    out
}

/// One listed tool or prompt, before naming.
struct Named<'a> {
    upstream: usize,
    /// Its place in its upstream's list.
    at: usize,
    item: &'a Value,
    name: &'a str,
    headers: Vec<ParamHeader>,
}

/// Names the tools, then the prompts, of every source (see the module doc).
fn build_names(
    rules: &NameRules,
    sources: &[Source<'_>],
    namespaces: &[String],
    built: &mut Built,
) {
    for kind in [ListKind::Tools, ListKind::Prompts] {
        let named = listed(kind, sources, built);
        let ns = |i: usize| namespaces.get(i).map(String::as_str).unwrap_or_default();
        let map = NameMap::build(rules, named.iter().map(|n| (ns(n.upstream), n.name)));
        collision_warnings(kind, &map, sources, namespaces, &mut built.warnings);
        expose(kind, named, &map, sources, built);
    }
}

/// The named items of one kind that every source offers, in order: for tools, those
/// its filter allows and whose `x-mcp-header` annotations are valid.
fn listed<'a>(kind: ListKind, sources: &'a [Source<'_>], built: &mut Built) -> Vec<Named<'a>> {
    let mut named = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        for (at, item) in s.lists.items(kind).iter().enumerate() {
            let Some(name) = item.get("name").and_then(Value::as_str) else {
                continue;
            };
            let headers = if kind == ListKind::Tools {
                if !s.tools.allows(name) {
                    continue;
                }
                let Some(headers) = tool_headers(s, i, at, item, name, built) else {
                    continue;
                };
                headers
            } else {
                Vec::new()
            };
            named.push(Named {
                upstream: i,
                at,
                item,
                name,
                headers,
            });
        }
    }
    named
}

/// The `x-mcp-header` annotations of source `i`'s tool at `at` (the last build's
/// when its lists are the last build's), kept for the next build; `None`, with a
/// warning, when they are invalid.
fn tool_headers(
    s: &Source<'_>,
    i: usize,
    at: usize,
    item: &Value,
    name: &str,
    built: &mut Built,
) -> Option<Vec<ParamHeader>> {
    // 2026-07-28 streamable-http §Custom Headers: a tool whose x-mcp-header
    // annotations are invalid MUST be excluded. Left out before naming, so it takes
    // no name from another.
    let parsed = s
        .previous
        .and_then(|p| p.headers.get(at))
        .and_then(Option::as_ref)
        .cloned()
        .unwrap_or_else(|| param_headers(item.get("inputSchema").unwrap_or(&Value::Null)));
    if let Some(slot) = built.made.get_mut(i).and_then(|m| m.headers.get_mut(at)) {
        *slot = Some(parsed.clone());
    }
    match parsed {
        Ok(hs) => Some(hs),
        Err(why) => {
            built.warnings.push(Warning {
                key: format!("x-mcp-header:{}:{name}:{why}", s.id),
                message: format!("upstream {}'s tool {name} is not offered: {why}", s.id),
            });
            None
        }
    }
}

/// A warning for each name that two upstreams both wanted.
fn collision_warnings(
    kind: ListKind,
    map: &NameMap,
    sources: &[Source<'_>],
    namespaces: &[String],
    warnings: &mut Vec<Warning>,
) {
    let id_of = |ns: &str| {
        namespaces
            .iter()
            .position(|n| n == ns)
            .and_then(|i| sources.get(i))
            .map_or_else(|| ns.to_owned(), |s| s.id.to_string())
    };
    for col in &map.collisions {
        let (kept, renamed) = (id_of(&col.kept.0), id_of(&col.renamed.0));
        warnings.push(Warning {
            key: format!(
                "name-collision:{}:{kept}:{}:{renamed}:{}",
                kind.key(),
                col.kept.1,
                col.renamed.1
            ),
            message: format!(
                "name collision: {} from {kept} and {} from {renamed} both map to {}; the second is shown as {}",
                col.kept.1, col.renamed.1, col.wanted, col.renamed.2
            ),
        });
    }
}

/// Enters each named item under its exposed name (`map`, in the same order) and
/// builds the kind's list.
fn expose(
    kind: ListKind,
    named: Vec<Named<'_>>,
    map: &NameMap,
    sources: &[Source<'_>],
    built: &mut Built,
) {
    let c = &mut built.catalog;
    let mut in_order = map.in_order.iter();
    let mut items = Vec::new();
    for n in named {
        let Some(exposed) = in_order.next() else {
            continue;
        };
        let exposed = exposed.as_str();
        let entries = match kind {
            ListKind::Tools => &mut c.tools,
            _ => &mut c.prompts,
        };
        if entries.contains_key(exposed) {
            continue; // the same upstream listed a name twice
        }
        let facts = match kind {
            ListKind::Tools => ToolFacts::of_tool(n.item),
            _ => ToolFacts::default(),
        };
        entries.insert(
            exposed.to_owned(),
            Entry {
                upstream: n.upstream,
                original: n.name.to_owned(),
                facts,
            },
        );
        let previous = sources.get(n.upstream).and_then(|s| s.previous);
        if let Some(made) = built.made.get_mut(n.upstream) {
            items.push(made.item(previous, kind, n.at, exposed, || {
                with_field(n.item, "name", exposed)
            }));
        }
        if kind == ListKind::Tools {
            if !n.headers.is_empty() {
                c.param_headers
                    .insert(exposed.to_owned(), n.headers.clone());
            }
            // An upstream whose lists are the last build's has its tools'
            // annotations already.
            if let Some(s) = sources.get(n.upstream).filter(|s| s.previous.is_none()) {
                built
                    .tool_headers
                    .push((s.id.clone(), n.name.to_owned(), n.headers));
            }
        }
    }
    c.lists[kind.index()] = items;
}

/// The URIs of one upstream that clash with an earlier one's.
#[derive(Default)]
struct Clash {
    resources: usize,
    templates: usize,
    example: String,
}

/// Clashes by (first upstream, later upstream).
type Clashes = BTreeMap<(usize, usize), Clash>;

/// Exposes the resources, then the templates, and warns of the URIs that clash.
fn build_uris(sources: &[Source<'_>], built: &mut Built) {
    let mut clashes = Clashes::new();
    build_resources(sources, built, &mut clashes);
    build_templates(sources, built, &mut clashes);
    clash_warnings(clashes, built);
}

/// Resources: a plain URI's first upstream keeps it; a later one's is prefixed with
/// its authority.
fn build_resources(sources: &[Source<'_>], built: &mut Built, clashes: &mut Clashes) {
    let c = &mut built.catalog;
    let mut owners: HashMap<&str, usize> = HashMap::new();
    let mut items = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        for (j, item) in s.lists.items(ListKind::Resources).iter().enumerate() {
            let Some(uri) = item.get("uri").and_then(Value::as_str) else {
                continue;
            };
            let (exposed, at) = match owners.get(uri) {
                Some(&first) if first != i => {
                    let clash = clashes.entry((first, i)).or_default();
                    clash.resources += 1;
                    if clash.example.is_empty() {
                        clash.example = uri.to_owned();
                    }
                    let prefix = format!("{URI_SCHEME}{}/", c.upstreams[i].authority);
                    (format!("{prefix}{uri}"), prefix.len())
                }
                Some(_) => (uri.to_owned(), 0),
                None => {
                    owners.insert(uri, i);
                    (uri.to_owned(), 0)
                }
            };
            if c.by_uri.contains_key(&exposed) {
                continue; // listed already
            }
            if let Some(made) = built.made.get_mut(i) {
                items.push(made.item(s.previous, ListKind::Resources, j, &exposed, || {
                    if at == 0 {
                        item.clone()
                    } else {
                        with_field(item, "uri", &exposed)
                    }
                }));
            }
            c.by_uri.insert(exposed, (i, at));
        }
    }
    c.lists[ListKind::Resources.index()] = items;
}

/// Templates: a prefix's first upstream keeps it; a later one's is prefixed with its
/// authority.
fn build_templates(sources: &[Source<'_>], built: &mut Built, clashes: &mut Clashes) {
    let c = &mut built.catalog;
    let mut owners: HashMap<&str, usize> = HashMap::new();
    let mut listed: HashSet<String> = HashSet::new();
    let mut items = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        for (j, item) in s.lists.items(ListKind::Templates).iter().enumerate() {
            let Some(template) = item.get("uriTemplate").and_then(Value::as_str) else {
                continue;
            };
            let prefix = template.split_once('{').map_or(template, |(p, _)| p);
            let exposed = match owners.get(prefix) {
                Some(&first) if first != i => {
                    let clash = clashes.entry((first, i)).or_default();
                    clash.templates += 1;
                    if clash.example.is_empty() {
                        clash.example = template.to_owned();
                    }
                    format!("{URI_SCHEME}{}/{template}", c.upstreams[i].authority)
                }
                seen => {
                    if seen.is_none() {
                        owners.insert(prefix, i);
                    }
                    c.template_prefixes.push((prefix.to_owned(), i));
                    template.to_owned()
                }
            };
            if !listed.insert(exposed.clone()) {
                continue;
            }
            if let Some(made) = built.made.get_mut(i) {
                items.push(made.item(s.previous, ListKind::Templates, j, &exposed, || {
                    if exposed == template {
                        item.clone()
                    } else {
                        with_field(item, "uriTemplate", &exposed)
                    }
                }));
            }
        }
    }
    c.lists[ListKind::Templates.index()] = items;
    c.template_prefixes
        .sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
}

/// A warning for each pair of upstreams whose URIs clash.
fn clash_warnings(clashes: Clashes, built: &mut Built) {
    let c = &built.catalog;
    for ((first, later), clash) in clashes {
        let (Some(a), Some(b)) = (c.upstreams.get(first), c.upstreams.get(later)) else {
            continue;
        };
        let what = match (clash.resources, clash.templates) {
            (r, 0) => format!("{r} resource URI(s)"),
            (0, t) => format!("{t} resource template(s)"),
            (r, t) => format!("{r} resource URI(s) and {t} resource template(s)"),
        };
        built.warnings.push(Warning {
            key: format!("uri-clash:{}:{}", a.id, b.id),
            message: format!(
                "{what} of {} are offered by {} too (e.g. {}); {} keeps them, {}'s are shown as {URI_SCHEME}{}/<uri>",
                b.id, a.id, clash.example, a.id, b.id, b.authority
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Pattern;

    fn rules(prefix: bool) -> NameRules {
        NameRules {
            separator: "__".to_owned(),
            max_len: 64,
            prefix,
        }
    }

    /// A configured upstream for the tests: its id is its namespace.
    struct Up {
        id: UpstreamId,
        filter: ToolFilter,
        lists: Lists,
    }

    fn up(name: &str, lists: Lists) -> Up {
        Up {
            id: UpstreamId::new(name),
            filter: ToolFilter::default(),
            lists,
        }
    }

    fn tools(names: &[&str]) -> Lists {
        Lists {
            tools: Some(names.iter().map(|n| json!({ "name": n })).collect()),
            ..Lists::default()
        }
    }

    fn resources(uris: &[&str], templates: &[&str]) -> Lists {
        Lists {
            resources: Some(
                uris.iter()
                    .map(|u| json!({ "uri": u, "name": u }))
                    .collect(),
            ),
            templates: Some(
                templates
                    .iter()
                    .map(|t| json!({ "uriTemplate": t, "name": t }))
                    .collect(),
            ),
            ..Lists::default()
        }
    }

    fn run(ups: &[Up]) -> Built {
        let sources: Vec<Source<'_>> = ups
            .iter()
            .map(|u| Source {
                id: &u.id,
                namespace: u.id.as_str(),
                tools: &u.filter,
                lists: &u.lists,
                previous: None,
            })
            .collect();
        build(&rules(ups.len() > 1), &sources)
    }

    fn names(c: &Catalog, kind: ListKind, field: &str) -> Vec<String> {
        c.list(kind)
            .iter()
            .filter_map(|i| i.get(field).and_then(Value::as_str).map(str::to_owned))
            .collect()
    }

    #[test]
    fn several_upstreams_are_prefixed_one_passes_through() {
        let b = run(&[up("fs", tools(&["read"])), up("web", tools(&["fetch"]))]);
        let c = &b.catalog;
        assert_eq!(
            names(c, ListKind::Tools, "name"),
            ["fs__read", "web__fetch"]
        );
        let r = c.tool("web__fetch").unwrap();
        assert_eq!((r.upstream.as_str(), r.original), ("web", "fetch"));
        assert!(c.tool("fetch").is_none());
        assert!(b.warnings.is_empty(), "{:?}", b.warnings);

        let b = run(&[up("fs", tools(&["read"]))]);
        assert_eq!(names(&b.catalog, ListKind::Tools, "name"), ["read"]);
        let r = b.catalog.tool("read").unwrap();
        assert_eq!((r.upstream.as_str(), r.original), ("fs", "read"));
    }

    #[test]
    fn prompts_are_named_like_tools() {
        let lists = Lists {
            prompts: Some(vec![json!({ "name": "greet" })]),
            ..Lists::default()
        };
        let b = run(&[up("a", lists), up("b", Lists::default())]);
        let r = b.catalog.prompt("a__greet").unwrap();
        assert_eq!((r.upstream.as_str(), r.original), ("a", "greet"));
        assert_eq!(r.facts, ToolFacts::default());
        assert!(b.catalog.tool("a__greet").is_none());
    }

    #[test]
    fn the_filter_hides_tools() {
        let mut fs = up("fs", tools(&["read_file", "write_file"]));
        fs.filter.exclude = vec![Pattern::parse("write_*").unwrap()];
        let b = run(&[fs]);
        assert_eq!(names(&b.catalog, ListKind::Tools, "name"), ["read_file"]);
        assert!(b.catalog.tool("write_file").is_none());
        assert_eq!(b.tool_headers.len(), 1);
    }

    #[test]
    fn tool_facts_and_headers_are_read() {
        let lists = Lists {
            tools: Some(vec![
                json!({ "name": "get", "annotations": { "readOnlyHint": true },
                        "execution": { "taskSupport": "optional" },
                        "inputSchema": { "type": "object", "properties": {
                            "region": { "type": "string", "x-mcp-header": "Region" } } } }),
                json!({ "name": "put" }),
                json!({ "name": "bad", "inputSchema": { "type": "object", "properties": {
                            "o": { "type": "object", "x-mcp-header": "O" } } } }),
            ]),
            ..Lists::default()
        };
        let b = run(&[up("a", lists)]);
        let c = &b.catalog;
        assert_eq!(names(c, ListKind::Tools, "name"), ["get", "put"]);
        let get = c.tool("get").unwrap().facts;
        assert!(get.idempotent);
        assert_eq!(get.support, TaskSupport::Optional);
        assert!(!c.tool("put").unwrap().facts.idempotent);
        assert_eq!(c.param_headers("get").len(), 1);
        assert_eq!(c.param_headers("get")[0].name, "Region");
        assert!(c.param_headers("put").is_empty());
        // The invalid tool is excluded, with a warning.
        assert!(c.tool("bad").is_none());
        assert_eq!(b.warnings.len(), 1);
        assert!(b.warnings[0].key.starts_with("x-mcp-header:a:bad:"));
        let headers: Vec<_> = b
            .tool_headers
            .iter()
            .map(|(id, n, hs)| (id.as_str(), n.as_str(), hs.len()))
            .collect();
        assert_eq!(headers, [("a", "get", 1), ("a", "put", 0)]);
    }

    #[test]
    fn a_collision_warns_with_the_same_key_each_build() {
        let ups = [up("a", tools(&["x y", "x_y"])), up("b", Lists::default())];
        let first = run(&ups);
        let second = run(&ups);
        assert_eq!(first.warnings.len(), 1);
        assert!(first.warnings[0].key.starts_with("name-collision:tools:a:"));
        assert_eq!(first.warnings, second.warnings);
        let listed = names(&first.catalog, ListKind::Tools, "name");
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0], "a__x_y");
        assert_eq!(first.catalog.tool(&listed[1]).unwrap().original, "x_y");
    }

    #[test]
    fn a_clashing_uri_stays_readable_at_both_upstreams() {
        let b = run(&[
            up("a", resources(&["file:///x", "file:///a"], &[])),
            up("b", resources(&["file:///x", "file:///b"], &[])),
        ]);
        let c = &b.catalog;
        assert_eq!(
            names(c, ListKind::Resources, "uri"),
            ["file:///x", "file:///a", "mcpx://b/file:///x", "file:///b"]
        );
        let route = |u| c.resource(u).map(|(id, sent)| (id.as_str(), sent));
        assert_eq!(route("file:///x"), Some(("a", "file:///x")));
        assert_eq!(route("mcpx://b/file:///x"), Some(("b", "file:///x")));
        assert_eq!(route("file:///b"), Some(("b", "file:///b")));
        assert_eq!(route("file:///nowhere"), None);
        assert_eq!(b.warnings.len(), 1);
        assert_eq!(b.warnings[0].key, "uri-clash:a:b");
        assert!(b.warnings[0].message.contains("1 resource URI"));
        // Back to the host: b's copy of the clashing URI, everything else unchanged.
        let a = UpstreamId::new("a");
        let bid = UpstreamId::new("b");
        assert_eq!(c.exposed_uri(&bid, "file:///x"), "mcpx://b/file:///x");
        assert_eq!(c.exposed_uri(&a, "file:///x"), "file:///x");
        assert_eq!(c.exposed_uri(&bid, "file:///b"), "file:///b");
        // A URI nothing lists or matches can only be reached explicitly.
        assert_eq!(c.exposed_uri(&a, "file:///new"), "mcpx://a/file:///new");
    }

    #[test]
    fn mcpx_uris_address_an_upstream_explicitly() {
        let b = run(&[
            up("a", resources(&["file:///a"], &[])),
            up("b", resources(&["file:///b"], &[])),
        ]);
        let c = &b.catalog;
        let route = |u| c.resource(u).map(|(id, sent)| (id.as_str(), sent));
        assert_eq!(route("mcpx://a/file:///b"), Some(("a", "file:///b")));
        assert_eq!(route("mcpx://b/anything"), Some(("b", "anything")));
        assert_eq!(route("mcpx://c/anything"), None);
        // An odd namespace is percent-encoded in the authority.
        let odd = [
            up("a b/c", resources(&["x:1"], &[])),
            up("d", Lists::default()),
        ];
        let b = run(&odd);
        let c = &b.catalog;
        assert_eq!(
            c.resource("mcpx://a%20b%2Fc/y:2")
                .map(|(id, s)| (id.as_str(), s)),
            Some(("a b/c", "y:2"))
        );
    }

    #[test]
    fn a_clashing_template_is_exposed_once_per_upstream() {
        let b = run(&[
            up("a", resources(&[], &["file:///{path}", "db://{table}"])),
            up("b", resources(&[], &["file:///{name}", "file:///docs/{p}"])),
        ]);
        let c = &b.catalog;
        assert_eq!(
            names(c, ListKind::Templates, "uriTemplate"),
            [
                "file:///{path}",
                "db://{table}",
                "mcpx://b/file:///{name}",
                "file:///docs/{p}"
            ]
        );
        let route = |u| c.resource(u).map(|(id, sent)| (id.as_str(), sent));
        assert_eq!(route("file:///x"), Some(("a", "file:///x")));
        assert_eq!(
            route("file:///docs/x"),
            Some(("b", "file:///docs/x")),
            "longest"
        );
        assert_eq!(route("mcpx://b/file:///x"), Some(("b", "file:///x")));
        assert_eq!(route("db://t"), Some(("a", "db://t")));
        assert_eq!(b.warnings.len(), 1);
        assert_eq!(b.warnings[0].key, "uri-clash:a:b");
        assert!(b.warnings[0].message.contains("1 resource template"));
        let bid = UpstreamId::new("b");
        assert_eq!(c.exposed_uri(&bid, "file:///x"), "mcpx://b/file:///x");
        assert_eq!(c.exposed_uri(&bid, "file:///docs/x"), "file:///docs/x");
    }

    #[test]
    fn one_upstream_gets_unknown_uris_unchanged() {
        let b = run(&[up("only", Lists::default())]);
        let c = &b.catalog;
        assert_eq!(
            c.resource("file:///x").map(|(id, s)| (id.as_str(), s)),
            Some(("only", "file:///x"))
        );
        assert_eq!(
            c.exposed_uri(&UpstreamId::new("only"), "file:///x"),
            "file:///x"
        );
    }

    #[test]
    fn a_never_connected_upstream_owns_its_names() {
        let b = run(&[
            up("fs", tools(&["read"])),
            up("web", Lists::default()),
            up("web_x", Lists::default()),
        ]);
        let c = &b.catalog;
        assert!(c.tool("web__fetch").is_none());
        assert_eq!(
            c.owner_of_name("web__fetch").map(UpstreamId::as_str),
            Some("web")
        );
        assert_eq!(
            c.owner_of_name("web_x__f").map(UpstreamId::as_str),
            Some("web_x")
        );
        assert_eq!(
            c.owner_of_name("fs__read").map(UpstreamId::as_str),
            Some("fs")
        );
        assert_eq!(c.owner_of_name("other__fetch"), None);
        assert_eq!(c.owner_of_name("fetch"), None);

        let b = run(&[up("web", Lists::default())]);
        assert_eq!(
            b.catalog.owner_of_name("fetch").map(UpstreamId::as_str),
            Some("web")
        );
    }

    /// Issue #32: every tool of an upstream with a long namespace has the one
    /// shortened prefix, and a name with it is known to be that upstream's.
    #[test]
    fn a_long_namespace_gives_all_its_tools_one_prefix() {
        let long = "a_rather_long_upstream_namespace_for_tests";
        let tools = tools(&[
            "t",
            "search_the_issue_tracker",
            "x_very_long_tool_name_indeed",
        ]);
        let b = run(&[up(long, tools), up("web", Lists::default())]);
        let c = &b.catalog;
        let prefix = rules(true).prefix_of(long);
        assert!(prefix.len() < long.len(), "{prefix}");
        let listed = names(c, ListKind::Tools, "name");
        assert_eq!(listed.len(), 3);
        for n in &listed {
            assert!(n.starts_with(&prefix), "{n}");
            assert_eq!(c.tool(n).map(|r| r.upstream.as_str()), Some(long));
        }
        let unlisted = format!("{prefix}not_listed");
        assert_eq!(
            c.owner_of_name(&unlisted).map(UpstreamId::as_str),
            Some(long)
        );
    }

    #[test]
    fn changes_are_the_kinds_that_differ() {
        let before = run(&[up("a", tools(&["x"])), up("b", resources(&["u:1"], &[]))]);
        let same = run(&[up("a", tools(&["x"])), up("b", resources(&["u:1"], &[]))]);
        assert!(same.catalog.changed_since(&before.catalog).is_empty());
        let more = run(&[
            up("a", tools(&["x", "y"])),
            up("b", resources(&["u:1"], &[])),
        ]);
        assert_eq!(
            more.catalog.changed_since(&before.catalog),
            [ListKind::Tools]
        );
        let empty = Catalog::default();
        assert_eq!(
            before.catalog.changed_since(&empty),
            [ListKind::Tools, ListKind::Resources]
        );
    }

    /// A build given what the last one made of an upstream's unchanged lists shares
    /// that upstream's items instead of making them again, makes the changed
    /// upstream's anew, and comes out as a build from nothing would.
    #[test]
    fn a_rebuild_reuses_the_unchanged_upstreams_items() {
        let filter = ToolFilter::default();
        let (a, b) = (UpstreamId::new("a"), UpstreamId::new("b"));
        let a_lists = Lists {
            tools: tools(&["x", "y"]).tools,
            resources: resources(&["u:1"], &["t:{id}"]).resources,
            templates: resources(&["u:1"], &["t:{id}"]).templates,
            ..Lists::default()
        };
        let (b_old, b_new) = (tools(&["z"]), tools(&["z", "w"]));
        let source = |id, lists, previous| Source {
            id,
            namespace: id.as_str(),
            tools: &filter,
            lists,
            previous,
        };
        let first = build(
            &rules(true),
            &[source(&a, &a_lists, None), source(&b, &b_old, None)],
        );
        let again = build(
            &rules(true),
            &[
                source(&a, &a_lists, first.made.first()),
                source(&b, &b_new, None),
            ],
        );
        let fresh = build(
            &rules(true),
            &[source(&a, &a_lists, None), source(&b, &b_new, None)],
        );
        for kind in ListKind::ALL {
            assert_eq!(
                again.catalog.list(kind),
                fresh.catalog.list(kind),
                "{kind:?}"
            );
        }
        let (was, now) = (
            first.catalog.list(ListKind::Tools),
            again.catalog.list(ListKind::Tools),
        );
        assert!(Arc::ptr_eq(&was[0], &now[0]) && Arc::ptr_eq(&was[1], &now[1]));
        assert!(
            !Arc::ptr_eq(&was[2], &now[2]),
            "b's lists changed: made anew"
        );
        for kind in [ListKind::Resources, ListKind::Templates] {
            let (was, now) = (first.catalog.list(kind), again.catalog.list(kind));
            assert!(Arc::ptr_eq(&was[0], &now[0]), "{kind:?}");
        }
        assert_eq!(
            again.catalog.changed_since(&first.catalog),
            [ListKind::Tools]
        );
        assert_eq!(again.catalog.tool("a__x").map(|r| r.original), Some("x"));
    }

    #[test]
    fn a_taken_namespace_is_replaced_with_a_warning() {
        let (a, b) = (UpstreamId::new("a"), UpstreamId::new("b"));
        let filter = ToolFilter::default();
        let lists = tools(&["t"]);
        let sources = [
            Source {
                id: &a,
                namespace: "ns",
                tools: &filter,
                lists: &lists,
                previous: None,
            },
            Source {
                id: &b,
                namespace: "ns",
                tools: &filter,
                lists: &lists,
                previous: None,
            },
        ];
        let built = build(&rules(true), &sources);
        assert_eq!(
            names(&built.catalog, ListKind::Tools, "name"),
            ["ns__t", "b__t"]
        );
        assert_eq!(built.catalog.tool("b__t").unwrap().upstream, &b);
        assert_eq!(built.warnings.len(), 1);
        assert_eq!(built.warnings[0].key, "namespace-taken:b");
    }

    #[test]
    fn lists_get_and_set_by_kind() {
        let mut l = Lists::default();
        for kind in ListKind::ALL {
            assert!(l.get(kind).is_none());
            l.set(kind, Some(vec![json!(kind.key())]));
            assert_eq!(l.get(kind), Some(&vec![json!(kind.key())]));
        }
    }
}
