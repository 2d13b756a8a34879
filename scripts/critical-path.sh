#!/usr/bin/env bash
# scripts/critical-path.sh — how long a call spends inside the gateway on its way up
# and on its way back, against a relay floor, from the system calls' timestamps.
#
# One session, `tools/call` of test_simple_text to a stdio upstream (`mcpx example-server`),
# as in scripts/bench.sh; the host speaks HTTP (default) or stdio. For each process in
# the middle (mcpx serve, then the relay: crates/mcpx-bench/examples/null_http_relay.rs
# for an HTTP host, null_relay.rs for a stdio host) it records every system call entry
# and exit (`perf record -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit`) over N
# calls and reports the medians of:
#
#   request path    the host's request read (HTTP: recvfrom returns; stdio: read
#                   returns) → the upstream request written (write/writev entered):
#                   work done before the upstream can start
#   upstream wait   that write → the upstream's response read (read returns)
#   response path   that read → the host's response written (write/writev entered)
#
# Usage: scripts/critical-path.sh [ERA (legacy|modern)] [CALLS] [HOST (http|stdio)]
#        (default: legacy 4000 http)
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
HOST="${3:-http}"
case "$HOST" in http | stdio) ;; *) echo "critical-path: host transport is http or stdio" >&2; exit 2 ;; esac

[[ "$(uname -m)" == x86_64 ]] || { echo "critical-path: x86-64 only (system call numbers)" >&2; exit 2; }
command -v perf >/dev/null || { echo "critical-path: perf is not installed" >&2; exit 2; }

if [[ -z "${MCPX_CRIT_BIN:-}" ]]; then
  cargo build --release -p mcpx >&2
fi
cargo build --release -p mcpx-bench --example null_http_relay --example null_relay >&2
BIN="${MCPX_CRIT_BIN:-$repo/target/release/mcpx}"
LOAD="$repo/target/release/mcpx"
RELAY="$repo/target/release/examples/null_http_relay"
STDIO_RELAY="$repo/target/release/examples/null_relay"

OUT="$(mktemp -d "${TMPDIR:-/tmp}/mcpx-critical-path.XXXXXX")"
# PIDS, start_bg, stop_started, free_port, wait_port, gateway_config.
# shellcheck source=lib/procs.sh
source "$repo/scripts/lib/procs.sh"
trap 'stop_started; rm -rf "$OUT"' EXIT

# analyse LABEL PID HOST-READ BENCH-LINE : one row from $OUT/LABEL.data, the system calls
# of process PID; HOST-READ is the system call that reads the host's request (recvfrom
# on a socket, read on a pipe).
analyse() {
  local label="$1" pid="$2" host_read="$3" bench="$4"
  # With the process's id on every line: perf follows the processes it starts too (the
  # HTTP relay starts its child per connection, after perf attached), and their system
  # calls are not the middle process's.
  perf script --ns -F pid,tid,time,event,trace -i "$OUT/$label.data" 2>/dev/null >"$OUT/$label.txt" || true
  python3 - "$label" "$OUT/$label.txt" "$bench" "$pid" "$host_read" <<'PYEOF'
import re, statistics, sys
label, path, bench, pid, host_read = sys.argv[1:6]
HOST_READ, WRITES, READ = int(host_read), (1, 20), 0  # write, writev, read
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
# One call: the host's request read, the upstream request written, the upstream's
# response read, the host's response written; threads merged on one timeline (the
# stdio relay reads and writes each way on its own thread).
req, wait, resp = [], [], []
state, t0 = 0, 0.0
for t, kind, nr, rest in ev:
    if state == 0 and kind == "exit" and nr == HOST_READ and ret(rest) > 0:
        state, t0 = 1, t
    elif state == 1 and kind == "enter" and nr in WRITES:
        req.append(t - t0)
        state, t0 = 2, t
    elif state == 2 and kind == "exit" and nr == READ and ret(rest) > 0:
        wait.append(t - t0)
        state, t0 = 3, t
    elif state == 3 and kind == "enter" and nr in WRITES:
        resp.append(t - t0)
        state = 0
def p50(v):
    return f"{statistics.median(v):.1f}" if v else "–"
print(f"| {label} | {p50(req)} | {p50(wait)} | {p50(resp)} | {len(resp)} | {bench} |")
PYEOF
}

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
  analyse "$label" "$pid" 45 "$(cat "$OUT/$label.bench")"
}

# measure_stdio LABEL CMD : the load generator starts CMD as its stdio server (as a host
# does) and calls through it for 4 s; perf records CMD's process from 1.5 s in, for
# 1.5 s (the calls seen are those of that window). One row.
measure_stdio() {
  local label="$1" cmd="$2"
  "$LOAD" bench --stdio "$cmd" --era "$ERA" --duration 4 --warmup 0 >"$OUT/$label.out" 2>&1 &
  local load=$! pid="" i
  for i in $(seq 100); do
    pid="$(pgrep -P "$load" | head -1)" && [[ -n "$pid" ]] && break
    sleep 0.05
  done
  [[ -n "$pid" ]] || { echo "critical-path: $label did not start" >&2; wait "$load" || true; return 1; }
  sleep 1.5
  perf record -q -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit -p "$pid" -o "$OUT/$label.data" \
    2>"$OUT/$label.perf.log" &
  local rec=$!
  sleep 1.5
  kill -INT "$rec"; wait "$rec" 2>/dev/null || true
  wait "$load" 2>/dev/null || true
  analyse "$label" "$pid" 0 "$(tail -1 "$OUT/$label.out" | sed 's/, max.*//')"
}

cfg="$OUT/mcpx.json"
gateway_config "$cfg" "$LOAD" "$ERA" stdio
if [[ "$HOST" == stdio ]]; then
  echo "stdio host → stdio upstream, $ERA, 1 session, a 1.5 s window; medians in µs"
  echo
  echo "| process in the middle | request path | upstream wait | response path | calls seen | mcpx bench (whole run) |"
  echo "|---|---:|---:|---:|---:|---|"
  measure_stdio mcpx "$BIN serve --config $cfg"
  measure_stdio relay "$STDIO_RELAY $LOAD example-server"
  exit 0
fi

echo "HTTP host → stdio upstream, $ERA, 1 session, $CALLS calls; medians in µs"
echo
echo "| process in the middle | request path | upstream wait | response path | calls seen | mcpx bench |"
echo "|---|---:|---:|---:|---:|---|"
port="$(free_port)"
measure mcpx "$port" env XDG_CACHE_HOME="$OUT/cache" "$BIN" serve --config "$cfg" --http "127.0.0.1:$port"
port="$(free_port)"
measure relay "$port" "$RELAY" "127.0.0.1:$port" --stdio "$LOAD" example-server
