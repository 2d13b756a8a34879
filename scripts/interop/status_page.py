"""Drives the daemon's status page in a real browser (Debian's headless Chromium, over
the DevTools protocol on a pipe) and checks that it shows each upstream's state and
follows a change live.

    status_page.py CHROME URL SCREENSHOT

Loads URL (the daemon's `GET /`), waits until every upstream's row says ready, kills
the first upstream's process (its pid as the page shows it), and waits, without
reloading, until the page shows it started again (another pid, one more restart).
Then calls a tool through `/v1/call` and waits for the call among the last calls, with
its outcome. Saves a screenshot to SCREENSHOT. Prints one JSON
line; exit status 0 when every check held.
"""

import base64
import json
import os
import signal
import subprocess
import sys
import time
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
        report["live"] = text("#live")
        if report["live"] != "live":
            raise RuntimeError(f"the event feed is not live: {report['live']!r}")
        png = b.send("Page.captureScreenshot", {"format": "png"}, session=s)["data"]
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
