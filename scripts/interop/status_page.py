"""Drives the daemon's status page in a real browser (Debian's headless Chromium, over
the DevTools protocol on a pipe) and checks that it shows each upstream's state and
follows a change live.

    status_page.py CHROME URL SCREENSHOT

Loads URL (the daemon's `GET /`), waits until every upstream's row says ready, kills
the first upstream's process (its pid as the page shows it), and waits, without
reloading, until the page shows it started again (another pid, one more restart).
Then calls a tool through `/v1/call` and waits for the call among the last calls, with
its outcome. Then, from the call history: waits for the call (its number from
`/v1/history`) in the recent calls' table, for a bar of the calls-per-minute chart that
counts it (its minute, outcome `result`), and for a latency bar of its upstream with
its p50 and p95, each read from the elements' data-* attributes. Saves a screenshot to
SCREENSHOT. Prints one JSON line; exit status 0 when every check held.
"""

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request


class Browser:
    def __init__(self, chrome):
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()

        def fds():
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        self.proc = subprocess.Popen(
            [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-pipe", "--window-size=1200,800", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, close_fds=True,
        )
        os.close(to_r)
        os.close(from_w)
        self.w, self.r = to_w, from_r
        self.buf = b""
        self.next = 0

    def send(self, method, params=None, session=None):
        self.next += 1
        msg = {"id": self.next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            while b"\0" not in self.buf:
                chunk = os.read(self.r, 1 << 20)
                if not chunk:
                    raise RuntimeError("the browser closed its pipe")
                self.buf += chunk
            line, self.buf = self.buf.split(b"\0", 1)
            answer = json.loads(line)
            if answer.get("id") == self.next:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
        raise RuntimeError(f"{method}: no answer")

    def close(self):
        self.proc.kill()
        self.proc.wait()


# The call history's part of the page, as its data-* attributes say it.
HISTORY = """(() => ({
  history: document.getElementById('history-section')?.dataset.history,
  rows: Array.from(document.querySelectorAll('#history tbody tr')).map(r => ({
    id: Number(r.dataset.id), tool: r.dataset.tool, upstream: r.dataset.upstream,
    outcome: r.dataset.outcome, ms: Number(r.dataset.ms) })),
  bars: Array.from(document.querySelectorAll('#minutes rect')).map(r => ({
    minute: Number(r.dataset.minute), outcome: r.dataset.outcome,
    count: Number(r.dataset.count) })),
  latency: Array.from(document.querySelectorAll('#latency rect')).map(r => ({
    upstream: r.dataset.upstream, quantile: r.dataset.quantile,
    p50: Number(r.dataset.p50), p95: Number(r.dataset.p95) })),
}))()"""


def get_json(url):
    with urllib.request.urlopen(url, timeout=20) as r:
        return json.loads(r.read())


ROWS = """Array.from(document.querySelectorAll('#upstreams tbody tr')).map(r => ({
  name: r.dataset.name, state: r.dataset.state,
  pid: r.children[4].textContent, restarts: r.children[5].textContent }))"""


def main():
    chrome, url, shot = sys.argv[1:4]
    b = Browser(chrome)
    report = {"ok": False}
    try:
        target = b.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = b.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        b.send("Page.enable", session=s)
        b.send("Page.navigate", {"url": url}, session=s)

        def rows():
            r = b.send("Runtime.evaluate", {"expression": ROWS, "returnByValue": True}, session=s)
            return r.get("result", {}).get("value") or []

        def text(sel):
            r = b.send("Runtime.evaluate", {
                "expression": f"document.querySelector({json.dumps(sel)})?.textContent",
                "returnByValue": True}, session=s)
            return r.get("result", {}).get("value")

        def wait(what, check, within=30):
            deadline = time.monotonic() + within
            while time.monotonic() < deadline:
                got = rows()
                if check(got):
                    return got
                time.sleep(0.1)
            raise RuntimeError(f"{what}: not shown; rows {rows()}")

        first = wait("every upstream ready", lambda r: r and all(u["state"] == "ready" for u in r))
        report["before"] = first
        victim = first[0]
        os.kill(int(victim["pid"]), signal.SIGKILL)
        after = wait(
            f"{victim['name']} started again",
            lambda r: any(u["name"] == victim["name"] and u["state"] == "ready"
                          and u["pid"] != victim["pid"]
                          and int(u["restarts"]) == int(victim["restarts"]) + 1 for u in r),
        )
        report["after"] = after
        tool = victim["name"] + "__test_simple_text"
        call = urllib.request.Request(
            url.rstrip("/") + "/v1/call", method="POST",
            data=json.dumps({"tool": tool}).encode(),
            headers={"content-type": "application/json"})
        with urllib.request.urlopen(call, timeout=20) as r:
            assert r.status == 200, r.status
        calls = "Array.from(document.querySelectorAll('#calls tbody tr')).map(r => r.textContent)"
        deadline = time.monotonic() + 20
        while True:
            shown = b.send("Runtime.evaluate", {"expression": calls, "returnByValue": True},
                           session=s)["result"].get("value") or []
            if any(tool in c and "ok" in c for c in shown):
                report["calls"] = shown
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the call is not among the last calls: {shown}")
            time.sleep(0.1)
        # The call history: the call's number and minute, as /v1/history has them.
        base = url.rstrip("/")
        deadline = time.monotonic() + 20
        while True:
            got = get_json(base + "/v1/history?limit=1&tool=" + urllib.parse.quote(tool))
            if got["calls"]:
                row = got["calls"][-1]
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the call is not in /v1/history: {got}")
            time.sleep(0.1)
        minute = row["tsMs"] // 60000 * 60000
        want = {"id": row["id"], "minute": minute, "upstream": victim["name"]}
        report["historyCall"] = want

        def history_shown(h):
            return {
                "row": next((r for r in h["rows"] if r["id"] == row["id"]
                             and r["tool"] == tool and r["outcome"] == "result"), None),
                "bar": next((x for x in h["bars"] if x["minute"] == minute
                             and x["outcome"] == "result" and x["count"] >= 1), None),
                "latency": next((x for x in h["latency"] if x["upstream"] == victim["name"]
                                 and x["p95"] >= x["p50"] > 0), None),
            }

        deadline = time.monotonic() + 20
        while True:
            h = b.send("Runtime.evaluate", {"expression": HISTORY, "returnByValue": True},
                       session=s)["result"].get("value") or {"rows": [], "bars": [], "latency": []}
            shown = history_shown(h)
            if all(shown.values()):
                report["history"] = shown
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the call history does not show the call {want}: {h}")
            time.sleep(0.1)
        # The page's numbers are the API's.
        minutes = get_json(base + "/v1/history/minutes?since=1h")["minutes"]
        api_count = next((m["outcomes"].get("result", 0) for m in minutes
                          if m["startMs"] == minute), 0)
        if shown["bar"]["count"] != api_count:
            raise RuntimeError(f"the chart counts {shown['bar']['count']} calls in minute "
                               f"{minute}, /v1/history/minutes {api_count}")
        report["live"] = text("#live")
        if report["live"] != "live":
            raise RuntimeError(f"the event feed is not live: {report['live']!r}")
        # The whole page, the charts below the fold too.
        size = b.send("Page.getLayoutMetrics", session=s).get("cssContentSize") or {}
        shot_params = {"format": "png"}
        if size.get("width") and size.get("height"):
            shot_params.update(captureBeyondViewport=True, clip={
                "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        png = b.send("Page.captureScreenshot", shot_params, session=s)["data"]
        os.makedirs(os.path.dirname(os.path.abspath(shot)), exist_ok=True)
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png))
        report["screenshot"] = shot
        report["ok"] = True
    except Exception as e:  # noqa: BLE001 - reported in the JSON line
        report["error"] = f"{type(e).__name__}: {e}"
    finally:
        b.close()
    print(json.dumps(report))
    if report["ok"]:
        print("status page ok")
    sys.exit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
