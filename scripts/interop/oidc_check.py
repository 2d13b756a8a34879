#!/usr/bin/env python3
"""mcpx against a real authorization server: npm's oidc-provider in front of
`mcpx example-server --http` (scripts/interop/oidc_upstream.mjs), all on 127.0.0.1.

  oidc_check.py NODE OIDC_DIR MCPX WORK_DIR

1. `mcpx auth login` through the provider's own login and consent pages, which the
   $BROWSER script (this file, run as `oidc_check.py --browser URL`) fills in and
   submits, following the redirects to mcpx's callback with the provider's cookies.
2. `mcpx call` gets the example server's answer through the resource server's check of
   the token (signature by the provider's keys, issuer, audience = the resource).
3. After the access token's lifetime, a call refreshes it without a login: one token
   request at the provider.
4. At the next expiry, 20 concurrent calls through one `mcpx serve --http`: one token
   request.
5. At the next expiry, two `mcpx call` processes at once: one token request.

Prints PASS/FAIL lines; exits 0 only when all passed.
"""
import concurrent.futures
import http.cookiejar
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

TTL = 70  # seconds; mcpx refreshes 60 s before expiry, so 10 s after issue


def browser(url):
    """A browser for the provider's devInteractions pages: sign in, consent, follow."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    resp = opener.open(url, timeout=20)
    for _ in range(6):
        final = resp.geturl()
        if final.startswith("http://127.0.0.1") and "/callback" in final:
            return
        page = resp.read().decode("utf-8", "replace")
        form = re.search(r'<form[^>]*action="([^"]+)"[^>]*>(.*?)</form>', page, re.S)
        if not form:
            print(f"browser: no form at {final}: {page[:300]!r}", file=sys.stderr)
            sys.exit(1)
        fields = {}
        for name, value in re.findall(
                r'<input[^>]*name="([^"]+)"(?:[^>]*value="([^"]*)")?', form.group(2)):
            fields[name] = value
        if "login" in fields:
            fields["login"] = "alice"
        if "password" in fields:
            fields["password"] = "wonderland"
        action = urllib.parse.urljoin(final, form.group(1))
        resp = opener.open(action, data=urllib.parse.urlencode(fields).encode(), timeout=20)
    print("browser: too many pages", file=sys.stderr)
    sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, what):
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{what} did not listen on {port}")


def main():
    if sys.argv[1] == "--browser":
        return browser(sys.argv[2])
    node, oidc_dir, mcpx, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    procs = []
    results = []

    def check(name, ok, detail=""):
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} oidc-{name}{'' if ok else ': ' + detail}", flush=True)

    try:
        ex_port, as_port, rs_port, gw_port = free_port(), free_port(), free_port(), free_port()
        log = open(os.path.join(work, "servers.log"), "w")
        procs.append(subprocess.Popen([mcpx, "example-server", "--http", f"127.0.0.1:{ex_port}"],
                                      stdout=log, stderr=log))
        wait_port(ex_port, "the example server")
        procs.append(subprocess.Popen(
            [node, os.path.join(here, "oidc_upstream.mjs"), str(as_port), str(rs_port),
             f"http://127.0.0.1:{ex_port}/mcp", str(TTL)],
            env=dict(os.environ, OIDC_DIR=oidc_dir), stdout=log, stderr=log))
        wait_port(as_port, "oidc-provider")
        wait_port(rs_port, "the resource server")
        config = os.path.join(work, "config.json")
        with open(config, "w") as f:
            json.dump({"mcpServers": {"guarded": {"type": "http",
                                                  "url": f"http://127.0.0.1:{rs_port}/mcp"}}}, f)
        browser_cmd = os.path.join(work, "browser.sh")
        with open(browser_cmd, "w") as f:
            f.write(f"#!/bin/sh\nexec {sys.executable} {os.path.abspath(__file__)} --browser \"$1\"\n")
        os.chmod(browser_cmd, 0o755)
        env = dict(os.environ, XDG_STATE_HOME=os.path.join(work, "state"),
                   XDG_CACHE_HOME=os.path.join(work, "cache"), BROWSER=browser_cmd)

        def counts():
            with urllib.request.urlopen(f"http://127.0.0.1:{rs_port}/_counts", timeout=5) as r:
                return json.load(r)

        def mcpx_run(*args):
            return subprocess.run([mcpx, *args, "--config", config], env=env,
                                  capture_output=True, text=True, timeout=120)

        p = mcpx_run("auth", "login", "guarded")
        check("login", p.returncode == 0 and "authorized by" in p.stdout, p.stdout + p.stderr)
        if p.returncode != 0:
            return 1
        c0 = counts()
        check("login-one-token-request", c0["token"] == 1, json.dumps(c0))
        p = mcpx_run("auth", "status")
        check("status", "authorized" in p.stdout and "refresh token" in p.stdout, p.stdout)
        p = mcpx_run("call", "test_simple_text")
        check("call", p.returncode == 0 and p.stdout.strip() != "", p.stdout + p.stderr)
        check("call-no-refresh-yet", counts()["token"] == 1, json.dumps(counts()))

        # 3. Expired (within mcpx's margin): refreshed, no login.
        time.sleep(TTL - 60 + 1)
        p = mcpx_run("call", "test_simple_text")
        c1 = counts()
        check("refresh-without-login", p.returncode == 0 and c1["token"] == 2 and c1["refresh"] == 1,
              json.dumps(c1) + p.stderr)

        # 4. One gateway, 20 concurrent calls at expiry: one token request.
        gw_log = open(os.path.join(work, "gateway.log"), "w")
        gw = subprocess.Popen([mcpx, "serve", "--config", config, "--http", f"127.0.0.1:{gw_port}"],
                              env=env, stdout=gw_log, stderr=gw_log)
        procs.append(gw)
        wait_port(gw_port, "mcpx serve")
        time.sleep(2)
        before = counts()["token"]
        time.sleep(TTL - 60 + 1)

        def one(i):
            body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                "name": "test_simple_text", "arguments": {},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {},
                          "io.modelcontextprotocol/clientInfo": {"name": "oidc-check", "version": "1"}}}})
            req = urllib.request.Request(
                f"http://127.0.0.1:{gw_port}/mcp", data=body.encode(), method="POST",
                headers={"content-type": "application/json",
                         "accept": "application/json, text/event-stream",
                         "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                         "mcp-name": "test_simple_text"})
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.read().decode()

        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(one, range(1, 21)))
        good = sum(1 for a in answers if '"result"' in a and '"isError":true' not in a)
        c2 = counts()
        check("20-concurrent-calls-one-refresh", good == 20 and c2["token"] == before + 1,
              f"{good} good; {json.dumps(c2)} (before {before}); {answers[0][:300]}")
        gw.terminate()
        gw.wait(10)

        # 5. Two processes at the next expiry: one token request between them.
        before = counts()["token"]
        time.sleep(TTL - 60 + 1)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            two = list(pool.map(lambda _: mcpx_run("call", "test_simple_text"), range(2)))
        c3 = counts()
        check("two-processes-one-refresh",
              all(p.returncode == 0 for p in two) and c3["token"] == before + 1,
              json.dumps(c3) + f" (before {before}); " + " | ".join(p.stderr[-300:] for p in two))
        return 0 if all(results) else 1
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    sys.exit(main() or 0)
