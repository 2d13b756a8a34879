#!/usr/bin/env bash
# scripts/critical-path.sh — how long a call spends inside the gateway on its way up
# and on its way back, against the HTTP relay floor, from the system calls' timestamps.
#
# HTTP host → stdio upstream (`mcpx example-server`), one session, `tools/call` of
# test_simple_text, as in scripts/bench.sh. For each process in the middle (mcpx serve,
# then crates/mcpx-bench/examples/null_http_relay.rs) it records every system call
# entry and exit (`perf record -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit`)
# over N calls and reports the medians of:
#
#   request path    the host's request read (recvfrom returns) → the upstream request
#                   written (write/writev entered): work done before the upstream can start
#   upstream wait   that write → the upstream's response read (read returns)
#   response path   that read → the host's response written (writev entered)
#
# Usage: scripts/critical-path.sh [ERA (legacy|modern)] [CALLS]   (default: legacy 4000)
#   MCPX_CRIT_BIN   the mcpx binary to measure (default: target/release/mcpx, built)
#
# Needs perf with access to the raw_syscalls tracepoints (root, or
# kernel.perf_event_paranoid ≤ 1) and an x86-64 kernel (the system call
# numbers below).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
ERA="${1:-legacy}"
CALLS="${2:-4000}"

[[ "$(uname -m)" == x86_64 ]] || { echo "critical-path: x86-64 only (system call numbers)" >&2; exit 2; }
command -v perf >/dev/null || { echo "critical-path: perf is not installed" >&2; exit 2; }

if [[ -z "${MCPX_CRIT_BIN:-}" ]]; then
  cargo build --release -p mcpx >&2
fi
cargo build --release -p mcpx-bench --example null_http_relay >&2
BIN="${MCPX_CRIT_BIN:-$repo/target/release/mcpx}"
LOAD="$repo/target/release/mcpx"
RELAY="$repo/target/release/examples/null_http_relay"

OUT="$(mktemp -d "${TMPDIR:-/tmp}/mcpx-critical-path.XXXXXX")"
# PIDS, start_bg, stop_started, free_port, wait_port, gateway_config.
# shellcheck source=lib/procs.sh
source "$repo/scripts/lib/procs.sh"
trap 'stop_started; rm -rf "$OUT"' EXIT

# measure LABEL PORT CMD... : the process started by CMD listens on 127.0.0.1:PORT; one row.
measure() {
  local label="$1" port="$2"; shift 2
  start_bg "$OUT/$label.log" "$@"
  local pid=$BG_PID
  wait_port "$port" "$pid" || { echo "critical-path: $label did not listen" >&2; return 1; }
  "$LOAD" bench --http "http://127.0.0.1:$port/mcp" --era "$ERA" --calls 2000 --warmup 0 >/dev/null 2>&1
  perf record -q -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit -p "$pid" -o "$OUT/$label.data" \
    2>"$OUT/$label.perf.log" &
  local rec=$!
  sleep 0.3
  "$LOAD" bench --http "http://127.0.0.1:$port/mcp" --era "$ERA" --calls "$CALLS" --warmup 0 \
    2>&1 | tail -1 | sed 's/, max.*//' >"$OUT/$label.bench"
  kill -INT "$rec"; wait "$rec" 2>/dev/null || true
  kill "$pid" 2>/dev/null || true
  # With the process's id on every line: perf follows the processes it starts too (the
  # relay starts its child per connection, after perf attached), and their system
  # calls are not the middle process's.
  perf script -F pid,tid,time,event,trace -i "$OUT/$label.data" 2>/dev/null >"$OUT/$label.txt" || true
  python3 - "$label" "$OUT/$label.txt" "$(cat "$OUT/$label.bench")" "$pid" <<'PYEOF'
import re, statistics, sys
label, path, bench, pid = sys.argv[1:5]
RECVFROM, WRITEV, WRITE, READ = 45, 20, 1, 0
ev = []
for line in open(path):
    m = re.search(r"(\d+\.\d+):\s+raw_syscalls:sys_(enter|exit): NR (\d+)(.*)", line)
    if m and line.split("/", 1)[0].strip() == pid:
        ev.append((float(m.group(1)) * 1e6, m.group(2), int(m.group(3)), m.group(4)))
def ret(rest):
    try:
        return int(rest.rsplit("=", 1)[1])
    except (IndexError, ValueError):
        return -1
req, wait, resp = [], [], []
t_in = t_w = t_r = None
for t, kind, nr, rest in ev:
    if kind == "exit" and nr == RECVFROM and ret(rest) > 0:
        t_in, t_w, t_r = t, None, None
    elif kind == "enter" and nr in (WRITE, WRITEV) and t_in is not None and t_w is None:
        t_w = t
        req.append(t - t_in)
    elif kind == "exit" and nr == READ and t_w is not None and t_r is None and ret(rest) > 0:
        t_r = t
        wait.append(t - t_w)
    elif kind == "enter" and nr == WRITEV and t_r is not None:
        resp.append(t - t_r)
        t_in = t_w = t_r = None
def p50(v):
    return f"{statistics.median(v):.0f}" if v else "–"
print(f"| {label} | {p50(req)} | {p50(wait)} | {p50(resp)} | {len(resp)} | {bench} |")
PYEOF
}

echo "HTTP host → stdio upstream, $ERA, 1 session, $CALLS calls; medians in µs"
echo
echo "| process in the middle | request path | upstream wait | response path | calls seen | mcpx bench |"
echo "|---|---:|---:|---:|---:|---|"
cfg="$OUT/mcpx.json"
gateway_config "$cfg" "$LOAD" "$ERA" stdio
port="$(free_port)"
measure mcpx "$port" env XDG_CACHE_HOME="$OUT/cache" "$BIN" serve --config "$cfg" --http "127.0.0.1:$port"
port="$(free_port)"
measure relay "$port" "$RELAY" "127.0.0.1:$port" --stdio "$LOAD" example-server
