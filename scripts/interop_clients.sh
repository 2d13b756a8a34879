#!/usr/bin/env bash
# scripts/interop_clients.sh — mcpx's client transports against the Python MCP SDK
# server (PyPI mcp, pinned in scripts/peers.sh): stdio, Streamable HTTP (legacy and
# modern requests) and HTTP+SSE. Prints `PASS name` / `FAIL name` per check and a last
# line `N passed, M failed`. Exit status is non-zero when a check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/peers.sh
source scripts/peers.sh
PY=$(peers_python_mcp) || { echo "FAIL install-python-mcp"; echo "0 passed, 1 failed"; exit 1; }
cargo build -q -p mcpx-transport --example client_probe || { echo "FAIL build"; echo "0 passed, 1 failed"; exit 1; }
PROBE=target/debug/examples/client_probe
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT

cat >"$WORK/server.py" <<'PYEOF'
import sys
from mcp.server.mcpserver import MCPServer
app = MCPServer("x")

@app.tool()
def echo(text: str) -> str:
    """Echo the text."""
    return text

if len(sys.argv) > 1:
    app.run(sys.argv[1], host="127.0.0.1", port=int(sys.argv[2]))
else:
    app.run()
PYEOF

pass=0; fail=0
check() { # name, command...
  local name=$1; shift
  if "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"; then
    pass=$((pass+1)); echo "PASS $name"
  else
    fail=$((fail+1)); echo "FAIL $name"; sed 's/^/    /' "$WORK/$name.out" "$WORK/$name.err" | tail -n 8
  fi
}
port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
echoed() { grep -qE '^tools/call .*h(é|\\u00e9)llo' "$WORK/$1.out"; }

check stdio-legacy "$PROBE" stdio "$PY" "$WORK/server.py"
check stdio-echo echoed stdio-legacy

P=$(port); "$PY" "$WORK/server.py" streamable-http "$P" >"$WORK/http.log" 2>&1 &
wait_port "$P"
check http-legacy "$PROBE" http "http://127.0.0.1:$P/mcp"
check http-echo echoed http-legacy
# Modern (2026-07-28): server/discover, tools/list and tools/call with `_meta`.
check http-modern "$PROBE" modern "http://127.0.0.1:$P/mcp"
check http-modern-echo echoed http-modern

P=$(port); "$PY" "$WORK/server.py" sse "$P" >"$WORK/sse.log" 2>&1 &
wait_port "$P"
check sse-legacy "$PROBE" sse "http://127.0.0.1:$P/sse"
check sse-echo echoed sse-legacy

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
