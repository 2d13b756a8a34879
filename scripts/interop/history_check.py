"""The call history with real clients: the Python SDK (in this process) and the
TypeScript SDK (scripts/interop/ts_client.mjs) call tools of three upstreams through
one `mcpx daemon`; Debian's sqlite3 reads the database while the daemon runs; then
`mcpx log --json` and `mcpx stats --json` must give exactly the calls made.

    history_check.py MCPX NODE TS_SDK_DIR SQLITE3 WORK

The upstreams are mcpx's example server three times: `ex` (both eras), `old` (strict
2025-03-26) and `third` (strict 2025-06-18). Prints one JSON line, then "history ok"
when every check held; exit status 1 otherwise.
"""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time

from mcp import Client

MCPX, NODE, TS_SDK, SQLITE3, WORK = sys.argv[1:6]
DB = os.path.join(WORK, "history.sqlite3")
CFG = os.path.join(WORK, "history.json")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the daemon exited: {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the daemon did not listen")


# What each client calls, and how each call must end.
PY_CALLS = [
    ("ex__test_simple_text", {}, "result"),
    ("ex__test_simple_text", {}, "result"),
    ("old__test_simple_text", {}, "result"),
    ("ex__test_error_handling", {}, "tool_error"),
    ("third__test_simple_text", {}, "result"),
    ("nowhere__tool", {}, "error"),
]
# Then the Python SDK again, as a 2026-07-28 client (no session; clientInfo per
# request).
PY_MODERN_CALLS = [
    ("ex__test_simple_text", {}, "result"),
    ("old__test_error_handling", {}, "tool_error"),
]
TS_CALLS = [
    ("old__test_simple_text", {}, "result"),
    ("third__test_error_handling", {}, "tool_error"),
    ("ex__test_simple_text", {}, "result"),
    ("nowhere__else", {}, "error"),
]


async def python_calls(url, mode, calls):
    async with Client(url, mode=mode, read_timeout_seconds=10) as client:
        for tool, args, _ in calls:
            try:
                await client.call_tool(tool, args)
            except Exception:  # noqa: BLE001 - an error answer is one of the outcomes
                pass
        return client.protocol_version


def main():
    os.makedirs(WORK, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(DB + suffix):
            os.remove(DB + suffix)
    servers = {
        "ex": {"command": MCPX, "args": ["example-server"]},
        "old": {"command": MCPX, "args": ["example-server", "--revision", "2025-03-26"]},
        "third": {"command": MCPX, "args": ["example-server", "--revision", "2025-06-18"]},
    }
    with open(CFG, "w") as f:
        json.dump({"mcpx": {"history": {"path": DB}}, "mcpServers": servers}, f)
    port = free_port()
    env = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(WORK, "run"))
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
    daemon = subprocess.Popen(
        [MCPX, "daemon", "--config", CFG, "--http", f"127.0.0.1:{port}", "--allow-any-local-user"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(WORK, "daemon.log"), "w"), env=env,
    )
    checks = {}
    try:
        wait_port(port, daemon)
        url = f"http://127.0.0.1:{port}/mcp"
        checks["python_revision"] = asyncio.run(
            asyncio.wait_for(python_calls(url, "legacy", PY_CALLS), 60))
        checks["python_modern_revision"] = asyncio.run(
            asyncio.wait_for(python_calls(url, "2026-07-28", PY_MODERN_CALLS), 60))
        ts = subprocess.run(
            [NODE, os.path.join(os.path.dirname(__file__), "ts_client.mjs"),
             json.dumps([[t, a] for t, a, _ in TS_CALLS]), "http", url],
            capture_output=True, text=True, timeout=60,
            env=dict(os.environ, NODE_PATH=os.path.join(TS_SDK, "node_modules")),
        )
        checks["ts_client"] = json.loads(ts.stdout.strip().splitlines()[-1]) if ts.stdout.strip() else ts.stderr
        want = len(PY_CALLS) + len(PY_MODERN_CALLS) + len(TS_CALLS)
        # Debian's sqlite3 reads the database while the daemon has it open; the
        # writer may still hold the last batch for a moment.
        rows = 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            out = subprocess.run([SQLITE3, DB, "SELECT count(*) FROM calls"],
                                 capture_output=True, text=True, timeout=10)
            rows = int(out.stdout.strip() or 0) if out.returncode == 0 else -1
            if rows >= want:
                break
            time.sleep(0.1)
        checks["sqlite3_rows_while_running"] = rows
        log = subprocess.run([MCPX, "log", "--json", "--config", CFG, "--limit", "100"],
                             capture_output=True, text=True, timeout=30, env=env)
        calls = [json.loads(line) for line in log.stdout.splitlines() if line.strip()]
        stats_host = json.loads(subprocess.run(
            [MCPX, "stats", "--json", "--by", "host", "--config", CFG],
            capture_output=True, text=True, timeout=30, env=env).stdout)
        stats_up = json.loads(subprocess.run(
            [MCPX, "stats", "--json", "--by", "upstream", "--config", CFG],
            capture_output=True, text=True, timeout=30, env=env).stdout)
    finally:
        subprocess.run([MCPX, "stop", "--config", CFG], capture_output=True, timeout=30, env=env)
        try:
            daemon.wait(timeout=15)
        except subprocess.TimeoutExpired:
            daemon.kill()

    ok = True
    problems = []
    ts_host = "mcpx-interop-ts"
    got = [(c.get("clientName"), c["target"], c["outcome"]) for c in calls]
    py_host = next((c.get("clientName") for c in calls if c.get("clientName") != ts_host), None)
    py_all = PY_CALLS + PY_MODERN_CALLS
    expected = [(py_host, t, o) for t, _, o in py_all] + [(ts_host, t, o) for t, _, o in TS_CALLS]
    if got != expected:
        ok = False
        problems.append({"log": got, "expected": expected})
    if checks["sqlite3_rows_while_running"] != len(expected):
        ok = False
        problems.append("sqlite3 did not read every call while mcpx ran")
    by_host = {g["key"]: (g["calls"], g["errors"]) for g in stats_host["groups"]}
    want_host = {py_host: (len(py_all), sum(o != "result" for *_, o in py_all)),
                 ts_host: (len(TS_CALLS), sum(o != "result" for *_, o in TS_CALLS))}
    if by_host != want_host:
        ok = False
        problems.append({"stats_by_host": by_host, "expected": want_host})
    want_up = {}
    for t, _, o in py_all + TS_CALLS:
        up = t.split("__")[0] if not t.startswith("nowhere") else ""
        n, e = want_up.get(up, (0, 0))
        want_up[up] = (n + 1, e + (o != "result"))
    by_up = {g["key"]: (g["calls"], g["errors"]) for g in stats_up["groups"]}
    if by_up != want_up:
        ok = False
        problems.append({"stats_by_upstream": by_up, "expected": want_up})
    # Each host as it came: era and revision, and a session only for legacy HTTP.
    eras = [(c["era"], c["revision"], c["transport"], bool(c.get("session"))) for c in calls]
    want_eras = ([("legacy", "2025-11-25", "streamable_http", True)] * len(PY_CALLS)
                 + [("modern", "2026-07-28", "streamable_http", False)] * len(PY_MODERN_CALLS)
                 + [("legacy", "2025-11-25", "streamable_http", True)] * len(TS_CALLS))
    if eras != want_eras:
        ok = False
        problems.append({"eras": eras, "expected": want_eras})
    upstreams_reached = {c.get("upstream") for c in calls if c.get("upstream")}
    if upstreams_reached != {"ex", "old", "third"}:
        ok = False
        problems.append({"upstreams": sorted(upstreams_reached)})
    print(json.dumps({"ok": ok, "checks": checks, "problems": problems, "calls": len(calls)}))
    if ok:
        print("history ok")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
