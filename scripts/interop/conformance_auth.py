#!/usr/bin/env python3
"""A client for the official conformance suite's *client authorization* scenarios
(auth/*) whose client under test is mcpx's upstream side.

The suite starts a scenario (a protected MCP server and its authorization server) and
runs this script with the MCP server's URL as the last argument, the scenario's name
in MCP_CONFORMANCE_SCENARIO and its settings in MCP_CONFORMANCE_CONTEXT. The script
writes a configuration whose one upstream is that URL (pre-registered or client
credentials settings from the context), then, with a fresh token store
(XDG_STATE_HOME) and $BROWSER set to a script that fetches the authorization URL and
follows its redirect to mcpx's callback, it runs `mcpx auth login`, `mcpx tools` and
`mcpx call` on the first tool. So every request the scenario servers see is mcpx's.

Needs MCPX_BIN (the mcpx binary). Exits 0 when every step succeeded; what the scenario
servers saw is the suite's to judge.
"""
import json
import os
import subprocess
import sys
import tempfile

# The suite's scenarios expect this Client ID Metadata Document URL when the
# authorization server supports them (auth/basic-cimd).
CIMD_URL = "https://conformance-test.local/client-metadata.json"

BROWSER = r'''#!/usr/bin/env python3
# $BROWSER for the conformance suite: GET the authorization URL, and GET where its
# redirect leads (mcpx's callback on 127.0.0.1), as a browser would.
import sys, urllib.request, urllib.error

class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None

opener = urllib.request.build_opener(NoRedirect)
url = sys.argv[1]
for _ in range(5):
    try:
        resp = opener.open(url, timeout=10)
        print(f"browser: {resp.status} {url}", file=sys.stderr)
        break
    except urllib.error.HTTPError as e:
        location = e.headers.get("Location")
        if e.code in (301, 302, 303, 307, 308) and location:
            url = urllib.parse.urljoin(url, location)
            continue
        print(f"browser: HTTP {e.code} at {url}: {e.read()[:300]!r}", file=sys.stderr)
        break
'''


def run(step, argv, env):
    print(f"$ {' '.join(argv)}", file=sys.stderr, flush=True)
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    sys.stderr.write(p.stdout)
    sys.stderr.write(p.stderr)
    print(f"{step}: exit {p.returncode}", file=sys.stderr, flush=True)
    return p


def main():
    url = sys.argv[-1]
    mcpx = os.environ["MCPX_BIN"]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    work = tempfile.mkdtemp(prefix="mcpx-conformance-auth-")
    oauth = {}
    login = True
    if scenario.startswith("auth/client-credentials"):
        login = False
        oauth = {"grant": "client_credentials", "clientId": context["client_id"]}
        if "private_key_pem" in context:
            key = os.path.join(work, "client-key.pem")
            with open(key, "w") as f:
                f.write(context["private_key_pem"])
            oauth["privateKeyFile"] = key
        else:
            oauth["clientSecret"] = context["client_secret"]
    elif "client_id" in context:
        oauth = {"grant": "authorization_code", "clientId": context["client_id"]}
        if "client_secret" in context:
            oauth["clientSecret"] = context["client_secret"]
    else:
        oauth = {"clientMetadataUrl": CIMD_URL}
    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump({"mcpServers": {"conformance": {"type": "http", "url": url,
                                                  "mcpx": {"oauth": oauth}}}}, f)
    browser = os.path.join(work, "browser.py")
    with open(browser, "w") as f:
        f.write(BROWSER)
    os.chmod(browser, 0o755)
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(work, "state"), BROWSER=browser,
               MCPX_CONFIG=config)
    if login:
        p = run("login", [mcpx, "auth", "login", "conformance", "--config", config], env)
        if p.returncode != 0:
            return p.returncode
        run("status", [mcpx, "auth", "status", "--config", config], env)
    p = run("tools", [mcpx, "tools", "--json", "--config", config], env)
    if p.returncode != 0:
        return p.returncode
    tools = json.loads(p.stdout or "[]")
    if not tools:
        print("no tools", file=sys.stderr)
        return 1
    p = run("call", [mcpx, "call", tools[0]["name"], "--config", config], env)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
