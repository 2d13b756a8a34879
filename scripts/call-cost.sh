#!/usr/bin/env bash
# scripts/call-cost.sh — what one passthrough call costs the gateway in instructions
# and allocations: numbers that do not move with the machine's load, for before/after
# comparisons of a change too small for scripts/bench.sh to resolve.
#
# One session, `tools/call` of test_simple_text through `mcpx serve` in front of
# `mcpx example-server` (a stdio upstream, or with MCPX_COST_UPSTREAM=http one over
# Streamable HTTP), the upstream's era pinned to the host's. Only the gateway runs
# under valgrind.
#
#   instructions per call   callgrind over N1 and over N2 calls; the difference divided
#                           by N1 - N2, so that start-up and shutdown cancel out
#   allocations per call    dhat, the same way
#
# Usage: scripts/call-cost.sh [http|stdio] [legacy|modern] [N1] [N2]
#        (default: http legacy 3000 1000)
#   MCPX_COST_BIN       the mcpx binary to measure (default: target/release/mcpx, built)
#   MCPX_COST_UPSTREAM  stdio (default) or http: how the gateway reaches the example
#                       server
#   MCPX_COST_ARGS      more arguments for the measured `mcpx serve`, split on spaces
#                       (e.g. "--metrics 127.0.0.1:0": the cost of metrics on)
#   MCPX_COST_PROXY     nginx: measure nginx instead of mcpx, in front of the same HTTP
#                       upstream (HTTP host, MCPX_COST_UPSTREAM=http): one worker process
#                       under valgrind (`master_process off`), configured as
#                       scripts/bench.sh runs it. Needs nginx (scripts/peers.sh installs it).
#                       relay: the HTTP relay floor instead (null_http_relay, hyper on both
#                       sides and nothing parsed but HTTP), likewise HTTP → HTTP
#   MCPX_COST_HISTORY   off: the call history off (`mcpx.history.enabled: false`);
#                       default on, each call recorded in a database under the run's
#                       directory (the recorder's thread is counted too). "none": no
#                       `mcpx` block, for a build from before `mcpx.history`
#   MCPX_COST_FILES     1: also print the workspace files a call runs through and the
#                       calls between them, per call, from the callgrind runs
#                       (scripts/lib/callgraph.py); "list" lists the files too. For the
#                       call path's shape, measure an unoptimised build
#                       (MCPX_COST_BIN=target/debug/mcpx), whose call graph is the source's
#   MCPX_COST_LAYERS    1: also print where a call's instructions go, by layer (the
#                       allocator and libc, the HTTP stack, the runtime, mcpx's JSON
#                       work, the rest of mcpx): each function's own instructions, under
#                       the crate it is in (inlined code counts under its caller's)
#
# Needs valgrind and python3. Takes about two minutes per shape.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
HOST="${1:-http}"
ERA="${2:-legacy}"
N1="${3:-3000}"
N2="${4:-1000}"
case "$HOST" in http | stdio) ;; *) echo "call-cost: host transport is http or stdio" >&2; exit 2 ;; esac
case "$ERA" in legacy | modern) ;; *) echo "call-cost: era is legacy or modern" >&2; exit 2 ;; esac
UPSTREAM="${MCPX_COST_UPSTREAM:-stdio}"
case "$UPSTREAM" in stdio | http) ;; *) echo "call-cost: MCPX_COST_UPSTREAM is stdio or http" >&2; exit 2 ;; esac
PROXY="${MCPX_COST_PROXY:-mcpx}"
case "$PROXY" in
  mcpx) ;;
  nginx | relay)
    [[ "$HOST" == http && "$UPSTREAM" == http ]] \
      || { echo "call-cost: $PROXY is measured HTTP → HTTP (http, MCPX_COST_UPSTREAM=http)" >&2; exit 2; }
    if [[ "$PROXY" == nginx ]]; then
      command -v nginx >/dev/null \
        || { echo "call-cost: nginx is not installed (scripts/peers.sh: peers_nginx)" >&2; exit 2; }
    else
      cargo build --release -p mcpx-bench --example null_http_relay >&2
    fi ;;
  *) echo "call-cost: MCPX_COST_PROXY is mcpx, nginx or relay" >&2; exit 2 ;;
esac
((N1 > N2 && N2 > 0)) || { echo "call-cost: N1 > N2 > 0" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "call-cost: valgrind is not installed" >&2; exit 2; }

if [[ -z "${MCPX_COST_BIN:-}" ]]; then
  cargo build --release -p mcpx >&2
fi
BIN="$(realpath "${MCPX_COST_BIN:-$repo/target/release/mcpx}")"
LOAD="$repo/target/release/mcpx"
[[ -x "$LOAD" ]] || cargo build --release -p mcpx >&2

read -r -a SERVE_ARGS <<<"${MCPX_COST_ARGS:-}"

OUT="$(mktemp -d "${TMPDIR:-/tmp}/mcpx-call-cost.XXXXXX")"
# PIDS, start_bg, stop_started, free_port, wait_port, gateway_config, nginx_config.
# shellcheck source=lib/procs.sh
source "$repo/scripts/lib/procs.sh"
trap 'stop_started; rm -rf "$OUT"' EXIT

cfg="$OUT/mcpx.json"
case "${MCPX_COST_HISTORY:-on}" in
  on) ;;
  off) export GATEWAY_HISTORY='{"enabled":false}' ;;
  none) export GATEWAY_HISTORY=none ;;
  *) echo "call-cost: MCPX_COST_HISTORY is on, off or none" >&2; exit 2 ;;
esac
if [[ "$UPSTREAM" == http ]]; then
  # One example server for every run, outside valgrind.
  up_port="$(free_port)"
  start_bg "$OUT/upstream.log" "$LOAD" example-server --http "127.0.0.1:$up_port"
  wait_port "$up_port" "$BG_PID" || { echo "call-cost: the example server did not listen" >&2; exit 1; }
  gateway_config "$cfg" "$LOAD" "$ERA" http "http://127.0.0.1:$up_port/mcp"
else
  gateway_config "$cfg" "$LOAD" "$ERA" stdio
fi

# run TOOL CALLS OUTPUT-OPTION: one gateway under valgrind's TOOL, CALLS calls through it.
run() {
  local tool="$1" calls="$2" output="$3"
  if [[ "$HOST" == stdio ]]; then
    # The load generator starts the gateway itself, as a stdio host does.
    "$LOAD" bench --stdio "valgrind --tool=$tool $output $BIN serve --config $cfg ${SERVE_ARGS[*]}" \
      --era "$ERA" --calls "$calls" --warmup 0 >/dev/null 2>&1
    return
  fi
  local port pid
  port="$(free_port)"
  if [[ "$PROXY" == nginx ]]; then
    nginx_config "$OUT/nginx-$tool-$calls" "$port" "$up_port" off
    start_bg "$OUT/$tool.log" valgrind "--tool=$tool" "$output" \
      nginx -c "$OUT/nginx-$tool-$calls/nginx.conf" -p "$OUT/nginx-$tool-$calls"
  elif [[ "$PROXY" == relay ]]; then
    start_bg "$OUT/$tool.log" valgrind "--tool=$tool" "$output" \
      "$repo/target/release/examples/null_http_relay" "127.0.0.1:$port" --http "http://127.0.0.1:$up_port/mcp"
  else
    start_bg "$OUT/$tool.log" env XDG_CACHE_HOME="$OUT/cache" valgrind "--tool=$tool" "$output" \
      "$BIN" serve --config "$cfg" --http "127.0.0.1:$port" "${SERVE_ARGS[@]}"
  fi
  pid=$BG_PID
  wait_port "$port" "$pid" 300 || { echo "call-cost: the gateway did not listen" >&2; exit 1; }
  "$LOAD" bench --http "http://127.0.0.1:$port/mcp" --era "$ERA" --calls "$calls" \
    --warmup 0 >/dev/null 2>&1
  # mcpx stops on SIGINT; nginx gracefully on SIGQUIT (SIGINT is its fast stop); the
  # relay, which handles no signal (and a background job ignores SIGINT), on SIGTERM.
  local signal=INT
  case "$PROXY" in nginx) signal=QUIT ;; relay) signal=TERM ;; esac
  kill "-$signal" "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

run callgrind "$N1" "--callgrind-out-file=$OUT/cg1.out"
run callgrind "$N2" "--callgrind-out-file=$OUT/cg2.out"
run dhat "$N1" "--dhat-out-file=$OUT/dhat1.json"
run dhat "$N2" "--dhat-out-file=$OUT/dhat2.json"

case "$PROXY" in
  nginx) BIN="$(command -v nginx)" ;;
  relay) BIN="$repo/target/release/examples/null_http_relay" ;;
esac
python3 - "$OUT" "$N1" "$N2" "$HOST" "$ERA" "$BIN" "$UPSTREAM" "${MCPX_COST_LAYERS:-0}" <<'PYEOF'
import collections, json, re, subprocess, sys
out, n1, n2, host, era, binary, upstream, layers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:]
def total(path):
    # callgrind's "summary:" (or "totals:") line: the program's instructions.
    for line in open(path):
        m = re.match(r"(?:summary|totals):\s+(\d+)", line)
        if m:
            return int(m.group(1))
    raise SystemExit(f"call-cost: no totals in {path}")
instructions = (total(f"{out}/cg1.out") - total(f"{out}/cg2.out")) / (n1 - n2)
def blocks(path):
    return sum(pp["tbk"] for pp in json.load(open(path))["pps"])
allocations = (blocks(f"{out}/dhat1.json") - blocks(f"{out}/dhat2.json")) / (n1 - n2)
print(f"{host} host → {upstream} upstream, {era}, {binary}: "
      f"{instructions / 1000:.1f} k instructions per call, {allocations:.1f} allocations per call")
if layers != "1":
    sys.exit(0)
# Each function's own instructions (callgrind_annotate), the difference of the two runs
# per call, summed by the crate the function is in. Inlined code counts under the
# function it was inlined into: fat LTO inlines much of hyper and tokio into mcpx's.
HTTP, RUNTIME = "HTTP (hyper, http, httparse, axum)", "runtime (tokio, tokio-util)"
LAYER = {c: HTTP for c in ("hyper", "http", "httparse", "hyper_util", "http_body_util", "axum", "axum_core")}
LAYER.update({"tokio": RUNTIME, "tokio_util": RUNTIME, "mcpx_protocol": "mcpx's JSON work (mcpx-protocol)"})
def own(path):
    text = subprocess.run(["callgrind_annotate", "--tree=none", "--inclusive=no",
                           "--threshold=100", "--auto=no", path],
                          capture_output=True, text=True).stdout
    by = collections.Counter()
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(\S.*)$", line)
        if not m or "PROGRAM TOTALS" in line or "=>" in line:
            continue
        where = m.group(2)
        function = where.split(":", 1)[1] if ":" in where else where
        if "libc.so" in where or "ld-linux" in where:
            layer = "allocator and libc (malloc, free, memcpy, …)"
        elif "nginx" in binary:
            layer = "nginx"
        else:
            c = re.match(r"<?([a-z_0-9]+)::", function)
            crate = c.group(1) if c else ""
            layer = LAYER.get(crate) or ("the rest of mcpx" if crate.startswith("mcpx") else "other (std, core, bytes, …)")
        by[layer] += int(m.group(1).replace(",", ""))
    return by
a, b = own(f"{out}/cg1.out"), own(f"{out}/cg2.out")
print("| layer | k instructions per call |\n|---|---:|")
for v, k in sorted((((a[k] - b.get(k, 0)) / (n1 - n2), k) for k in a), reverse=True):
    if abs(v) >= 50:
        print(f"| {k} | {v / 1000:.1f} |")
PYEOF
if [[ -n "${MCPX_COST_FILES:-}" && "${MCPX_COST_FILES}" != 0 ]]; then
  python3 "$repo/scripts/lib/callgraph.py" "$OUT/cg1.out" "$OUT/cg2.out" "$N1" "$N2" "$MCPX_COST_FILES"
fi
