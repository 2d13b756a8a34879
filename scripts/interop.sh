#!/usr/bin/env bash
# Interop with external MCP peers, installed at pinned versions by scripts/peers.sh:
# the MCP Inspector CLI (npm, run on Node 22) and the Python `mcp` SDK 2.3.0 (PyPI,
# in a venv under target/peers). Each check prints one line, PASS or FAIL; the last
# line is "N passed, M failed". Exit status 0 only when nothing failed.
#
#   scripts/interop.sh            build mcpx's binaries and run every check
#
# Everything listens on 127.0.0.1 only.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
source scripts/peers.sh

passed=0
failed=0
log_dir="$repo/target/interop"
mkdir -p "$log_dir"

# check NAME EXPECTED_SUBSTRING CMD...: runs CMD (30 s limit); passes when it exits 0
# and its stdout contains EXPECTED_SUBSTRING.
check() {
  local name="$1" want="$2"; shift 2
  local out="$log_dir/${name//[^A-Za-z0-9_.-]/_}.log"
  if timeout --kill-after=5 60 "$@" >"$out" 2>&1 && grep -qF -- "$want" "$out"; then
    echo "PASS $name"; passed=$((passed + 1))
  else
    echo "FAIL $name (log: $out)"; tail -n 5 "$out" | sed 's/^/    /'; failed=$((failed + 1))
  fi
}

echo "== building"
cargo build --locked -q -p mcpx-transport --example echo_server || { echo "0 passed, 1 failed"; exit 1; }
echo_server="$repo/target/debug/examples/echo_server"

echo "== installing pinned peers"
node22=$(peers_node22) || { echo "0 passed, 1 failed"; exit 1; }
inspector=$(peers_inspector_cli) || { echo "0 passed, 1 failed"; exit 1; }
py=$(peers_python_mcp) || { echo "0 passed, 1 failed"; exit 1; }
echo "node: $("$node22" --version); python mcp: $("$py" -c 'import importlib.metadata as m; print(m.version("mcp"))')"

# Commands as arrays, so `timeout` can run them (peers.sh quotes words with %q).
eval "run_inspector=($inspector)"
py_client=("$py" "$repo/scripts/interop/py_client.py")

echo "== real clients -> echo server built on mcpx-transport"
check inspector-stdio-tools-list '"name": "echo"' "${run_inspector[@]}" "$echo_server" --method tools/list
check inspector-stdio-tools-call '"text": "hello"' "${run_inspector[@]}" "$echo_server" --method tools/call --tool-name echo --tool-arg text=hello
for mode in legacy auto 2026-07-28; do
  check "python-$mode-stdio" '"ok": true' "${py_client[@]}" "$mode" stdio "$echo_server"
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
