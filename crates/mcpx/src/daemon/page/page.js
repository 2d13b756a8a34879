// The daemon's status page. The server renders it whole (the upstreams, the last
// reload, the last calls, the recent calls of the history); this script keeps it
// current: /v1/status and /v1/health again on upstream, catalog, restart and reload
// events, and the call events (from the kept ones on) fill the last calls, the
// newest first, at most MAX_CALLS. The call history's part (the recent calls, calls
// per minute by outcome, p50 and p95 by upstream) is asked again on history events
// and each minute, and the charts are drawn here, as SVG, with the numbers in data-*
// attributes.
"use strict";
const MAX_CALLS = 50;
const calls = [];

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (cls) td.className = cls;
  row.appendChild(td);
}

async function json(path) {
  const r = await fetch(path, { headers: { accept: "application/json" } });
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}

const TRIGGERS = { file: "the file changed", sighup: "SIGHUP", asked: "asked" };

function showReload(r) {
  const p = document.getElementById("reload");
  if (!r) { p.textContent = ""; p.className = ""; return; }
  const why = TRIGGERS[r.trigger] || r.trigger;
  p.textContent = r.ok
    ? "last reload: ok (" + why + "): " + r.plan
    : "last reload: failed (" + why + "), the configuration in force goes on: " + r.error;
  p.className = r.ok ? "ok" : "failed";
}

async function refresh() {
  try {
    const [health, status] = await Promise.all([json("/v1/health"), json("/v1/status")]);
    document.getElementById("daemon").textContent =
      "pid " + health.pid + ", mcpx " + health.version + ", " + health.config;
    showReload(health.lastReload);
    const body = document.querySelector("#upstreams tbody");
    body.replaceChildren();
    for (const u of status.upstreams) {
      const row = document.createElement("tr");
      row.dataset.name = u.name;
      row.dataset.state = u.state;
      cell(row, u.name);
      cell(row, u.phrase, "state " + u.state);
      cell(row, u.era);
      cell(row, u.revision);
      cell(row, u.pid);
      cell(row, u.restarts);
      // Not yet listed: tools unknown, not 0.
      cell(row, u.tools === null ? (u.state === "ready" ? "listing" : "unknown") : u.tools);
      // A ready upstream's last error is past: marked so, with its time.
      const past = u.state === "ready";
      const error = u.lastError
        ? (past ? "earlier: " : "") + (u.lastErrorAt ? u.lastErrorAt + ": " : "") + u.lastError
        : "";
      cell(row, error, past ? "past reason" : "reason");
      body.appendChild(row);
    }
  } catch (e) {
    document.getElementById("daemon").textContent = "unreachable: " + e.message;
  }
}

function showCalls() {
  const body = document.querySelector("#calls tbody");
  body.replaceChildren();
  for (const c of calls) {
    const row = document.createElement("tr");
    cell(row, c.id);
    cell(row, c.tool);
    cell(row, c.via);
    cell(row, c.outcome || "running", c.outcome || "starting");
    cell(row, c.durationMs === undefined ? "" : c.durationMs.toFixed(1) + " ms");
    cell(row, c.detail, "reason");
    body.appendChild(row);
  }
}

function onCall(data) {
  const known = calls.find((c) => c.id === data.id);
  if (known) {
    Object.assign(known, data);
  } else {
    calls.unshift(data);
    calls.length = Math.min(calls.length, MAX_CALLS);
  }
  showCalls();
}

function listen() {
  const live = document.getElementById("live");
  const events = new EventSource("/v1/events?since=0");
  events.onopen = () => { live.textContent = "live"; live.className = "on"; };
  events.onerror = () => { live.textContent = "not live"; live.className = "off"; };
  let pending = null;
  const soon = () => { if (!pending) pending = setTimeout(() => { pending = null; refresh(); }, 100); };
  for (const kind of ["upstream", "catalog", "restart", "reload"]) {
    events.addEventListener(kind, soon);
  }
  events.addEventListener("call", (e) => onCall(JSON.parse(e.data)));
  events.addEventListener("history", historySoon);
}

// The call history.
const HISTORY_ROWS = 20;
const OUTCOMES = ["result", "tool_error", "error", "timeout", "cancelled", "transport"];
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, parent) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (parent) parent.appendChild(el);
  return el;
}

function label(parent, x, y, text, anchor) {
  svg("text", { x, y, "text-anchor": anchor || "start" }, parent).textContent = text;
}

function tip(el, text) {
  svg("title", {}, el).textContent = text;
}

// A history answer; a 404 is the history off, said in its problem's detail.
async function historyJson(path) {
  const r = await fetch(path, { headers: { accept: "application/json" } });
  if (r.status === 404) {
    const p = await r.json().catch(() => ({}));
    const e = new Error(p.detail || "the call history is off");
    e.off = true;
    throw e;
  }
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}

// The recent calls, the newest first; each row's data-* has its numbers.
function showHistory(rows) {
  const body = document.querySelector("#history tbody");
  body.replaceChildren();
  for (const c of rows.slice().reverse()) {
    const row = document.createElement("tr");
    const ms = c.durationUs / 1000;
    const tool = c.target || c.method;
    Object.assign(row.dataset, {
      id: c.id, outcome: c.outcome, upstream: c.upstream || "", tool,
      host: c.clientName || "", ms: ms.toFixed(3),
    });
    row.title = c.time + (c.errorMessage ? "\n" + c.errorMessage : "");
    cell(row, c.time.slice(11, 19));
    cell(row, c.clientName);
    cell(row, c.upstream);
    cell(row, tool);
    cell(row, c.outcome, c.outcome);
    cell(row, ms.toFixed(1));
    body.appendChild(row);
  }
}

// Calls per minute over the last hour, stacked by outcome: one bar per minute and
// outcome, with data-minute (its start, ms), data-outcome and data-count.
function showMinutes(minutes, nowMs) {
  const chart = document.getElementById("minutes");
  chart.replaceChildren();
  const W = 720, H = 170, top = 14, bottom = 18, left = 30, slots = 60;
  const first = Math.floor(nowMs / 60000) * 60000 - (slots - 1) * 60000;
  const slot = (W - left) / slots;
  const total = (m) => Object.values(m.outcomes).reduce((a, b) => a + b, 0);
  const max = Math.max(1, ...minutes.map(total));
  const scale = (H - top - bottom) / max;
  svg("line", { class: "axis", x1: left, y1: H - bottom, x2: W, y2: H - bottom }, chart);
  label(chart, left - 4, top + 4, max, "end");
  label(chart, left - 4, H - bottom, 0, "end");
  label(chart, left, H - 4, "-60 min");
  label(chart, W - 2, H - 4, "now", "end");
  for (const m of minutes) {
    const i = Math.round((m.startMs - first) / 60000);
    if (i < 0 || i >= slots) continue;
    const known = OUTCOMES.filter((o) => m.outcomes[o]);
    const others = Object.keys(m.outcomes).filter((o) => !OUTCOMES.includes(o));
    let y = H - bottom;
    for (const o of known.concat(others)) {
      const n = m.outcomes[o];
      const h = n * scale;
      y -= h;
      const bar = svg("rect", {
        class: o, x: left + i * slot + 1, y, width: slot - 2, height: h,
        "data-minute": m.startMs, "data-outcome": o, "data-count": n,
      }, chart);
      tip(bar, new Date(m.startMs).toISOString().slice(11, 16) + " UTC: " + n + " " + o);
    }
  }
  if (!minutes.length) label(chart, W / 2, H / 2, "no calls in the last hour", "middle");
}

// p50 and p95 by upstream over the last hour: two bars each, both with
// data-upstream, data-p50 and data-p95 (ms), and data-quantile.
function showLatency(groups) {
  const chart = document.getElementById("latency");
  chart.replaceChildren();
  const W = 720, left = 120, row = 30, bar = 11;
  const H = Math.max(1, groups.length) * row + 8;
  chart.setAttribute("viewBox", "0 0 " + W + " " + H);
  const max = Math.max(0, ...groups.map((g) => g.p95Ms));
  const scale = max > 0 ? (W - left - 110) / max : 0;
  groups.forEach((g, i) => {
    const y = i * row + 4;
    const name = g.key || "(no upstream)";
    label(chart, left - 6, y + bar + 3, name, "end");
    for (const [q, ms, dy] of [["p50", g.p50Ms, 0], ["p95", g.p95Ms, bar + 1]]) {
      const w = Math.max(1, ms * scale);
      const r = svg("rect", {
        class: q, x: left, y: y + dy, width: w, height: bar,
        "data-upstream": g.key, "data-quantile": q, "data-ms": ms,
        "data-p50": g.p50Ms, "data-p95": g.p95Ms, "data-calls": g.calls,
      }, chart);
      tip(r, name + ": " + q + " " + ms.toFixed(1) + " ms of " + g.calls + " calls");
      label(chart, left + w + 4, y + dy + bar - 2, q + " " + ms.toFixed(1) + " ms");
    }
  });
  if (!groups.length) label(chart, W / 2, 24, "no calls in the last hour", "middle");
}

let historyAsked = 0;
async function refreshHistory() {
  const asked = ++historyAsked;
  const section = document.getElementById("history-section");
  const note = document.getElementById("history-note");
  try {
    const [h, m, s] = await Promise.all([
      historyJson("/v1/history?limit=" + HISTORY_ROWS),
      historyJson("/v1/history/minutes?since=1h"),
      historyJson("/v1/stats?by=upstream&since=1h"),
    ]);
    if (asked !== historyAsked) return; // a later refresh draws
    section.dataset.history = "on";
    section.dataset.lastId = h.lastId;
    note.textContent = "";
    showHistory(h.calls);
    showMinutes(m.minutes, Date.now());
    showLatency(s.groups);
  } catch (e) {
    if (asked !== historyAsked) return;
    section.dataset.history = e.off ? "off" : "error";
    note.textContent = e.message;
  }
}

function legend() {
  const box = document.getElementById("minutes-legend");
  for (const o of OUTCOMES) {
    const key = document.createElement("span");
    key.className = "key " + o;
    box.append(key, o);
  }
}

let historyPending = null;
function historySoon() {
  if (!historyPending) historyPending = setTimeout(() => { historyPending = null; refreshHistory(); }, 250);
}

legend();
refresh().then(() => {
  listen();
  refreshHistory();
  // The hour moves on: drawn again each minute, events or not.
  setInterval(refreshHistory, 60000);
});
