// The daemon's status page. The server renders it whole (the upstreams, the last
// reload, the last calls); this script keeps it current: /v1/status and /v1/health
// again on upstream, catalog, restart and reload events, and the call events (from
// the kept ones on) fill the last calls, the newest first, at most MAX_CALLS.
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
}

refresh().then(listen);
