#!/usr/bin/env python3
"""A hostile soak of `mcpx daemon --http` (issue #39), run by `scripts/bench.sh soak
daemon [SECONDS]`:

    daemon_soak.py MCPX SECONDS|smoke WORKDIR

It starts the daemon on two example servers with a token, and for SECONDS keeps up,
at once:

* an idle flood: 1,200 TCP connections that send nothing, each reopened as soon as
  the daemon closes it;
* a slowloris: 100 connections that send a request head one byte a second, reopened;
* 1,000 `/v1/events` listeners with the token, each listening again when cut;

beside the legitimate traffic it must serve: four workers, each a process of its own
(as hosts are) and a new connection per request, in turn `GET /v1/health`, `POST /v1/call` and a Streamable HTTP
`initialize` then `tools/list` on `/mcp`. A legitimate request that gets no answer
within 10 s, or a wrong one, is a failure. Every 5 s it samples the daemon's RSS and
open descriptors. It prints the tallies and one JSON line (`DAEMON-SOAK {...}`), and
exits 1 when a legitimate request failed. Only 127.0.0.1 is used.

`smoke` (CI's) runs 10 s with a third of the idle flood, a tenth of the rest, two
workers, and the daemon's bounds lowered (256 pending connections, 16 listeners) so
that the flood passes them: that the daemon still serves beside a flood that is being
cut, not the figures. (With 32 pending places, one legitimate connection in about
350 was cut before the daemon read its request: a flood that fast outruns how soon
a new connection is read.)
"""

import asyncio
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time

IDLE, SLOW, LISTENERS, WORKERS = 1200, 100, 1000, 4
# Extra daemon options: the smoke's bounds, small enough for its flood to pass them.
DAEMON_ARGS = []
WITHIN = 10.0


def rss_and_fds(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return rss, fds
    except (OSError, StopIteration):
        return None, None


class Tally:
    def __init__(self):
        self.ok = {}
        self.failed = {}
        self.latencies = []
        self.reopened = {"idle": 0, "slow": 0, "listeners": 0}
        self.cut_told = 0
        self.first_failures = []

    def good(self, kind, secs):
        self.ok[kind] = self.ok.get(kind, 0) + 1
        self.latencies.append(secs)

    def bad(self, kind, why):
        self.failed[kind] = self.failed.get(kind, 0) + 1
        if len(self.first_failures) < 10:
            self.first_failures.append(f"{kind}: {why}")


async def exchange(port, raw):
    """One request on a new connection; the status and the body."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        w.write(raw)
        await w.drain()
        head = await r.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ")[1])
        m = re.search(rb"(?i)content-length:\s*(\d+)", head)
        body = await r.readexactly(int(m.group(1))) if m else await r.read()
        return status, body
    finally:
        w.close()


def request(method, path, port, token, body=None, extra=()):
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}",
             f"Authorization: Bearer {token}", "Connection: close"]
    lines += list(extra)
    data = b""
    if body is not None:
        data = json.dumps(body).encode()
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def blocking_exchange(port, raw):
    """One request on a new connection, blocking: the status and the body."""
    with socket.create_connection(("127.0.0.1", port), timeout=WITHIN) as c:
        c.sendall(raw)
        data = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if not head:
        raise ConnectionError("closed without an answer")
    return int(head.split(b" ")[1]), body


def legit_worker(port, token, secs, results):
    """A legitimate client: its own process (as a host is), a request on a new
    connection every 50 ms, each checked. Puts (kind, seconds or None, why) tuples."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "soak", "version": "1"}}}
    mcp = ("Accept: application/json, text/event-stream",)
    end = time.monotonic() + secs
    out = []
    n = 0
    while time.monotonic() < end:
        n += 1
        kind = ("health", "call", "mcp")[n % 3]
        t0 = time.monotonic()
        try:
            if kind == "health":
                s, b = blocking_exchange(port, request("GET", "/v1/health", port, token))
                ok = s == 200
            elif kind == "call":
                s, b = blocking_exchange(port, request(
                    "POST", "/v1/call", port, token, {"tool": "b__test_simple_text"}))
                ok = s == 200 and b"simple text" in b
            else:
                s, b = blocking_exchange(port, request("POST", "/mcp", port, token, init, mcp))
                ok = s == 200 and b"protocolVersion" in b
            out.append((kind, time.monotonic() - t0, None) if ok
                       else (kind, None, f"status {s}: {b[:200]!r}"))
        except (OSError, ValueError, IndexError) as e:
            out.append((kind, None, f"{type(e).__name__}: {e}"))
        time.sleep(0.05)
    results.put(out)


async def idle_flood(port, tally, stop, count):
    async def one():
        while not stop.is_set():
            try:
                r, w = await asyncio.open_connection("127.0.0.1", port)
                await r.read()  # until the daemon closes it
                w.close()
            except OSError:
                await asyncio.sleep(0.1)
            tally.reopened["idle"] += 1
    await asyncio.gather(*(one() for _ in range(count)))


async def slowloris(port, tally, stop, count):
    head = f"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode() + b"a" * 4096

    async def one():
        while not stop.is_set():
            try:
                r, w = await asyncio.open_connection("127.0.0.1", port)
                for b in head:
                    if stop.is_set():
                        break
                    w.write(bytes([b]))
                    await w.drain()
                    await asyncio.sleep(1)
                w.close()
            except OSError:
                await asyncio.sleep(0.1)
            tally.reopened["slow"] += 1
    await asyncio.gather(*(one() for _ in range(count)))


async def listeners(port, token, tally, stop, count):
    raw = request("GET", "/v1/events", port, token)

    async def one():
        while not stop.is_set():
            try:
                r, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(raw)
                await w.drain()
                while not stop.is_set():
                    chunk = await r.read(65536)
                    if not chunk:
                        break
                    if b"event: closed" in chunk:
                        tally.cut_told += 1
                w.close()
            except OSError:
                await asyncio.sleep(0.1)
            tally.reopened["listeners"] += 1
            await asyncio.sleep(0.05)
    await asyncio.gather(*(one() for _ in range(count)))


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


async def main(mcpx, secs, work):
    os.makedirs(work, exist_ok=True)
    run = os.path.join(work, "run")
    os.makedirs(run, mode=0o700, exist_ok=True)
    token = secrets.token_hex(32)
    token_file = os.path.join(work, "token")
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, (token + "\n").encode())
    os.close(fd)
    cfg = os.path.join(work, "soak.json")
    with open(cfg, "w") as f:
        json.dump({"mcpServers": {
            "a": {"command": mcpx, "args": ["example-server"]},
            "b": {"command": mcpx, "args": ["example-server"]}}}, f)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = dict(os.environ, XDG_RUNTIME_DIR=run, XDG_STATE_HOME=os.path.join(work, "state"))
    env.pop("MCPX_SERVE_TOKEN", None)
    log = open(os.path.join(work, "daemon.log"), "w")
    daemon = subprocess.Popen([mcpx, "daemon", "--config", cfg, "--http", f"127.0.0.1:{port}",
                               "--token-file", token_file, *DAEMON_ARGS], env=env, stderr=log,
                              stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                st, body = await exchange(port, request("GET", "/v1/status", port, token))
                if st == 200 and all(u.get("state") == "ready" for u in json.loads(body)["upstreams"]):
                    break
            except (OSError, ValueError, KeyError, asyncio.IncompleteReadError):
                pass
            if time.monotonic() > deadline or daemon.poll() is not None:
                print("daemon-soak: the daemon did not become ready", file=sys.stderr)
                return 1
            await asyncio.sleep(0.2)
        tally = Tally()
        stop = asyncio.Event()
        samples = []

        async def sampler():
            while not stop.is_set():
                samples.append(rss_and_fds(daemon.pid))
                try:
                    await asyncio.wait_for(stop.wait(), 5)
                except asyncio.TimeoutError:
                    pass

        tasks = [asyncio.create_task(c) for c in (
            idle_flood(port, tally, stop, IDLE),
            slowloris(port, tally, stop, SLOW),
            listeners(port, token, tally, stop, LISTENERS),
            sampler(),
        )]
        import multiprocessing
        results = multiprocessing.Queue()
        workers = [multiprocessing.Process(target=legit_worker, args=(port, token, secs, results))
                   for _ in range(WORKERS)]
        for w in workers:
            w.start()
        gathered = []
        for _ in workers:
            gathered.extend(await asyncio.get_running_loop().run_in_executor(None, results.get))
        for w in workers:
            w.join()
        for kind, secs_taken, why in gathered:
            if why is None:
                tally.good(kind, secs_taken)
            else:
                tally.bad(kind, why)
        stop.set()
        await asyncio.wait(tasks, timeout=15)
        for t in tasks:
            t.cancel()
        rss = [r for r, _ in samples if r]
        fds = [f for _, f in samples if f]
        lat = tally.latencies
        summary = {
            "seconds": secs, "answered": sum(tally.ok.values()),
            "failed": sum(tally.failed.values()), "by_kind": tally.ok,
            "failed_by_kind": tally.failed,
            "p50_ms": round(pct(lat, 0.5) * 1000, 1) if lat else None,
            "p99_ms": round(pct(lat, 0.99) * 1000, 1) if lat else None,
            "max_ms": round(max(lat) * 1000, 1) if lat else None,
            "reopened": tally.reopened, "listeners_told_cut": tally.cut_told,
            "rss_kib_min_max": [min(rss), max(rss)] if rss else None,
            "fds_min_max": [min(fds), max(fds)] if fds else None,
            "daemon_alive": daemon.poll() is None,
        }
        print(f"daemon soak, {secs} s: {IDLE} idle connections, {SLOW} slowloris, "
              f"{LISTENERS} event listeners, {WORKERS} legitimate workers")
        print(f"  legitimate requests answered: {summary['answered']} {tally.ok}; "
              f"failed: {summary['failed']} {tally.failed}")
        print(f"  latency p50 {summary['p50_ms']} ms, p99 {summary['p99_ms']} ms, "
              f"max {summary['max_ms']} ms")
        print(f"  flood reopened after a cut: {tally.reopened}; listeners told they were "
              f"cut: {tally.cut_told}")
        print(f"  daemon RSS {summary['rss_kib_min_max']} KiB, descriptors "
              f"{summary['fds_min_max']}")
        for f in tally.first_failures:
            print(f"  failure: {f}")
        print("DAEMON-SOAK " + json.dumps(summary))
        return 0 if summary["failed"] == 0 and summary["daemon_alive"] else 1
    finally:
        daemon.terminate()
        try:
            daemon.wait(10)
        except subprocess.TimeoutExpired:
            daemon.kill()


if __name__ == "__main__":
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if sys.argv[2] == "smoke":
        IDLE, SLOW, LISTENERS, WORKERS = 400, 10, 100, 2
        DAEMON_ARGS = ["--max-pending-connections", "256", "--max-event-subscribers", "16"]
        seconds = 10.0
    else:
        seconds = float(sys.argv[2])
    sys.exit(asyncio.run(main(sys.argv[1], seconds, sys.argv[3])))
