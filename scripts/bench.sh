#!/usr/bin/env bash
# scripts/bench.sh — mcpx against the direct path and a peer proxy, side by side, in one
# run on one machine, everything on 127.0.0.1.
#
# Cells: the upstream is always `mcpx example-server` and the call is `tools/call` of
# `test_simple_text` (no translation needed), driven by `mcpx bench`:
#
#   direct        host → example-server            (Streamable HTTP; stdio)
#   mcpx          host → mcpx serve → example-server (HTTP→stdio, HTTP→HTTP, stdio→stdio)
#   relay floor   host → null_relay → example-server (stdio→stdio): a process that only
#                 copies bytes (crates/mcpx-bench/examples/null_relay.rs), i.e. what one
#                 extra process hop costs on this machine before any MCP work
#   mcp-proxy     host → mcp-proxy (npm, pinned) → example-server (HTTP→stdio)
#
# each in the legacy and the modern era, at 1 and 32 concurrent sessions. The gateway's
# upstream is pinned to the host's era (`mcpx.protocol`), so every call is a passthrough.
# Ratios compare each row with the direct path of the same host transport and era.
#
# Environment:
#   MCPX_BENCH_SECS      seconds measured per cell (default 3)
#   MCPX_BENCH_WARMUP    seconds of warm-up per cell (default 1)
#   MCPX_BENCH_SESSIONS  session counts (default "1 32")
#   MCPX_BENCH_ERAS      eras (default "legacy modern")
#   MCPX_BENCH_PEER      0 to skip mcp-proxy
#   MCPX_BENCH_COMPARE   other mcpx binaries (space-separated paths): each one's gateway
#                        rows are added as "mcpx@<file name>" (e.g. builds from before an
#                        optimisation), measured in the same run, against the same upstream
#   MCPX_BENCH_NO_BUILD  1 to use target/release/mcpx as it is
#   MCP_PROXY_VERSION    the pinned mcp-proxy (default 6.7.19)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

SECS="${MCPX_BENCH_SECS:-3}"
WARMUP="${MCPX_BENCH_WARMUP:-1}"
SESSIONS="${MCPX_BENCH_SESSIONS:-1 32}"
ERAS="${MCPX_BENCH_ERAS:-legacy modern}"
PEER="${MCPX_BENCH_PEER:-1}"
: "${MCP_PROXY_VERSION:=6.7.19}"

if [[ "${MCPX_BENCH_NO_BUILD:-0}" != 1 ]]; then
  echo "bench: building release binaries" >&2
  cargo build --release -p mcpx >&2
  cargo build --release -p mcpx-bench --example null_relay >&2
fi
BIN="$repo/target/release/mcpx"
RELAY="$repo/target/release/examples/null_relay"
[[ -x "$BIN" ]] || { echo "bench: $BIN missing" >&2; exit 1; }

OUT="$repo/target/bench/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"
: >"$RESULTS"
NOTES="$OUT/notes.txt"
: >"$NOTES"

PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
trap cleanup EXIT

# A free TCP port on 127.0.0.1 (asks the kernel through bash alone: tries a range).
next_port=$((20000 + RANDOM % 20000))
free_port() {
  while (exec 3<>"/dev/tcp/127.0.0.1/$next_port") 2>/dev/null; do next_port=$((next_port + 1)); done
  echo "$next_port"
  next_port=$((next_port + 1))
}

wait_port() { # PORT PID
  local i
  for i in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# start_bg LOG CMD... : starts CMD in the background, sets BG_PID.
start_bg() {
  local log="$1"; shift
  "$@" </dev/null >"$log" 2>&1 &
  BG_PID=$!
  PIDS+=("$BG_PID")
}

stop_bg() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# settle: waits (up to 30 s) until no mcpx process of this run is left over from the
# previous cell (stdio servers draining after their host went away), so that cells do not
# share the CPU with stragglers.
settle() {
  local i strays
  for i in $(seq 1 100); do
    strays="$(pgrep -f -- "^($BIN|${COMPARE_RE:-$BIN}) (example-server|serve)" \
      | grep -vxF -f <(printf '%s\n' "${PIDS[@]}" "$$") | wc -l || true)"
    ((strays == 0)) && return 0
    sleep 0.3
  done
  echo "bench: $strays stray processes still running; measuring anyway" >&2
}

# bench PATH HOST UPSTREAM ERA SESSIONS TARGET-ARGS... : one cell, one TSV row.
bench() {
  local path="$1" host="$2" up="$3" era="$4" n="$5"; shift 5
  local json
  settle
  echo "bench: $path $host→$up $era x$n" >&2
  if json="$("$BIN" bench "$@" --era "$era" --sessions "$n" --duration "$SECS" --warmup "$WARMUP" --json 2>>"$OUT/bench.stderr")"; then
    field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" <<<"$json"; }
    local rss; rss="$(field watched_peak_rss_kib)"; [[ -n "$rss" ]] || rss="$(field child_peak_rss_kib)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$path" "$host" "$up" "$era" "$n" \
      "$(field calls_per_s)" "$(field p50_us)" "$(field p99_us)" "${rss:-}" "$(field errors)" >>"$RESULTS"
    echo "$json" >>"$OUT/results.jsonl"
  else
    echo "$path $host→$up $era x$n: failed (see $OUT/bench.stderr)" >>"$NOTES"
  fi
}

# gateway_config FILE ERA UPSTREAM-KIND [URL] : a one-upstream configuration.
gateway_config() {
  local file="$1" era="$2" kind="$3" url="${4:-}" bin="${GW_UPSTREAM_BIN:-$BIN}"
  if [[ "$kind" == stdio ]]; then
    printf '{"mcpServers":{"ex":{"command":"%s","args":["example-server"],"mcpx":{"protocol":"%s"}}}}\n' "$bin" "$era" >"$file"
  else
    printf '{"mcpServers":{"ex":{"type":"http","url":"%s","mcpx":{"protocol":"%s"}}}}\n' "$url" "$era" >"$file"
  fi
}

# gateway_rows LABEL GATEWAY-BIN ERA N UPSTREAM-URL : the three gateway cells.
gateway_rows() {
  local label="$1" gw="$2" era="$3" n="$4" up_url="$5" port pid cfg
  # HTTP host → stdio upstream.
  cfg="$OUT/gw-$label-$era-stdio.json"; gateway_config "$cfg" "$era" stdio
  port="$(free_port)"
  start_bg "$OUT/gw-$label-$era-$n-hs.log" env XDG_CACHE_HOME="$OUT/cache" "$gw" serve --config "$cfg" --http "127.0.0.1:$port"
  pid=$BG_PID
  if wait_port "$port" "$pid"; then
    bench "$label" http stdio "$era" "$n" --http "http://127.0.0.1:$port/mcp" --watch-pid "$pid"
  else echo "$label http→stdio: gateway did not start" >>"$NOTES"; fi
  stop_bg "$pid"
  # HTTP host → HTTP upstream.
  cfg="$OUT/gw-$label-$era-http.json"; gateway_config "$cfg" "$era" http "$up_url"
  port="$(free_port)"
  start_bg "$OUT/gw-$label-$era-$n-hh.log" env XDG_CACHE_HOME="$OUT/cache" "$gw" serve --config "$cfg" --http "127.0.0.1:$port"
  pid=$BG_PID
  if wait_port "$port" "$pid"; then
    bench "$label" http http "$era" "$n" --http "http://127.0.0.1:$port/mcp" --watch-pid "$pid"
  else echo "$label http→http: gateway did not start" >>"$NOTES"; fi
  stop_bg "$pid"
  # stdio host → stdio upstream (one gateway per session, as hosts launch it).
  cfg="$OUT/gw-$label-$era-stdio.json"
  XDG_CACHE_HOME="$OUT/cache" bench "$label" stdio stdio "$era" "$n" --stdio "$gw serve --config $cfg"
}

# The compared builds, as one alternation for `settle`'s pgrep.
COMPARE=()
read -r -a COMPARE <<<"${MCPX_BENCH_COMPARE:-}"
COMPARE_RE="$(IFS='|'; echo "${COMPARE[*]:-}")"

# ---- the peer proxy ---------------------------------------------------------------
PROXY=()
if [[ "$PEER" != 0 ]]; then
  # shellcheck source=peers.sh
  source "$repo/scripts/peers.sh"
  pdir="$repo/target/bench/peers"
  if node="$(peers_node22)" && _peers_npm_ensure "$pdir" mcp-proxy "$MCP_PROXY_VERSION" \
     && [[ -f "$pdir/node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs" ]]; then
    PROXY=("$node" "$pdir/node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs")
  else
    echo "mcp-proxy@$MCP_PROXY_VERSION: could not be installed; its rows are skipped" >>"$NOTES"
  fi
else
  echo "mcp-proxy: skipped (MCPX_BENCH_PEER=0)" >>"$NOTES"
fi

# ---- the run ------------------------------------------------------------------------
for era in $ERAS; do
  for n in $SESSIONS; do
    # The direct paths; the HTTP example server also serves as the HTTP upstream.
    up_port="$(free_port)"
    start_bg "$OUT/example-$era-$n.log" "$BIN" example-server --http "127.0.0.1:$up_port"
    up_pid=$BG_PID
    wait_port "$up_port" "$up_pid" || { echo "bench: example server did not start" >&2; exit 1; }
    up_url="http://127.0.0.1:$up_port/mcp"
    bench direct http - "$era" "$n" --http "$up_url" --watch-pid "$up_pid"
    bench direct stdio - "$era" "$n" --stdio "$BIN example-server"

    gateway_rows mcpx "$BIN" "$era" "$n" "$up_url"
    for old in "${COMPARE[@]}"; do
      GW_UPSTREAM_BIN="$BIN" gateway_rows "mcpx@$(basename "$old")" "$old" "$era" "$n" "$up_url"
    done
    if [[ -x "$RELAY" ]]; then
      bench "relay floor" stdio stdio "$era" "$n" --stdio "$RELAY $BIN example-server"
    else
      echo "relay floor: $RELAY missing (cargo build --release -p mcpx-bench --example null_relay)" >>"$NOTES"
    fi

    if ((${#PROXY[@]})); then
      port="$(free_port)"
      start_bg "$OUT/mcp-proxy-$era-$n.log" "${PROXY[@]}" --host 127.0.0.1 --port "$port" -- "$BIN" example-server
      pid=$BG_PID
      if wait_port "$port" "$pid"; then
        bench "mcp-proxy@$MCP_PROXY_VERSION" http stdio "$era" "$n" --http "http://127.0.0.1:$port/mcp" --watch-pid "$pid"
      else
        echo "mcp-proxy http→stdio $era x$n: the proxy did not start (see $OUT/mcp-proxy-$era-$n.log)" >>"$NOTES"
      fi
      stop_bg "$pid"
    fi
    stop_bg "$up_pid"
  done
done

# ---- the table ----------------------------------------------------------------------
{
  echo "Each cell: ${SECS} s measured after ${WARMUP} s of warm-up; tools/call of test_simple_text;"
  echo "one call in flight per session. Ratios: this row / the direct path with the same host"
  echo "transport, era and sessions (calls/s: higher is better; p50: +µs added)."
  echo
  echo "| path | host → upstream | era | sessions | calls/s | p50 µs | p99 µs | peak RSS MiB | calls/s vs direct | p50 added µs |"
  echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
  awk -F'\t' '
    { row[NR] = $0; if ($1 == "direct") { cps[$2 "|" $4 "|" $5] = $6; p50[$2 "|" $4 "|" $5] = $7 } }
    END {
      for (i = 1; i <= NR; i++) {
        split(row[i], f, "\t")
        k = f[2] "|" f[4] "|" f[5]
        up = (f[3] == "-") ? "" : " → " f[3]
        rss = (f[9] == "") ? "–" : sprintf("%.1f", f[9] / 1024)
        ratio = "–"; added = "–"
        if (f[1] != "direct" && (k in cps) && cps[k] > 0) {
          ratio = sprintf("%.0f %%", 100 * f[6] / cps[k])
          added = sprintf("%+.0f", f[7] - p50[k])
        }
        err = (f[10] + 0 > 0) ? sprintf(" (%d errors)", f[10]) : ""
        printf "| %s | %s%s | %s | %s | %.0f%s | %.0f | %.0f | %s | %s | %s |\n", f[1], f[2], up, f[4], f[5], f[6], err, f[7], f[8], rss, ratio, added
      }
    }' "$RESULTS"
  if [[ -s "$NOTES" ]]; then
    echo
    echo "Notes:"
    sed 's/^/* /' "$NOTES"
  fi
} | tee "$OUT/table.md"
echo >&2
echo "bench: results in $OUT (table.md, results.tsv, results.jsonl)" >&2
