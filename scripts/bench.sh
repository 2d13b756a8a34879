#!/usr/bin/env bash
# scripts/bench.sh — mcpx against the direct path, nginx and two peer MCP proxies, side by
# side, in one run on one machine, everything on 127.0.0.1.
#
# Cells: the upstream is always `mcpx example-server` and the call is `tools/call` of
# `test_simple_text` (no translation needed), driven by `mcpx bench`:
#
#   direct        host → example-server            (Streamable HTTP; stdio)
#   mcpx          host → mcpx serve → example-server (HTTP→stdio, HTTP→HTTP, stdio→stdio)
#   relay floor   host → null_relay → example-server (stdio→stdio): a process that only
#                 copies bytes (crates/mcpx-bench/examples/null_relay.rs), i.e. what one
#                 extra process hop costs on this machine before any MCP work; and
#                 host → null_http_relay → example-server (HTTP→HTTP: requests forwarded
#                 as they are; HTTP→stdio, one session only: a child per connection,
#                 which at N sessions would be N upstream processes, no floor for a
#                 gateway sharing one) (crates/mcpx-bench/examples/null_http_relay.rs)
#   nginx         host → nginx → example-server (HTTP→HTTP): Debian's nginx (installed
#                 by scripts/peers.sh), one worker, a keepalive upstream, no buffering:
#                 what a mature HTTP reverse proxy costs, MCP unparsed
#   mcp-proxy     host → mcp-proxy (npm, pinned) → example-server (HTTP→stdio)
#   mcp-proxy-rs  host → mcp-proxy (the Rust crate, pinned, built by `cargo install`
#                 into target/bench/peers) → example-server (HTTP→stdio, HTTP→HTTP);
#                 it namespaces tools, so its rows call `ex/test_simple_text`, and it
#                 speaks 2025-11-25 to its upstream whatever the host's era
#
# each in the legacy and the modern era, at 1 and 32 concurrent sessions. The gateway's
# upstream is pinned to the host's era (`mcpx.protocol`), so every call is a passthrough.
# Ratios compare each row with the direct path of the same host transport and era, and
# every HTTP-host row with the nginx row of the same era and sessions.
#
# Interleaved: for one era and session count, every path is measured once per round,
# round after round (the order reversed every other round), and a row reports the
# median of its rounds. Load that comes and goes on the machine then lands on every
# path alike instead of on whichever cells happened to run at the time.
#
# Environment:
#   MCPX_BENCH_ROUNDS    rounds per era and session count (default 5)
#   MCPX_BENCH_SECS      seconds measured per path per round (default 1)
#   MCPX_BENCH_WARMUP    seconds of warm-up per path per round (default 0.5)
#   MCPX_BENCH_SESSIONS  session counts (default "1 32")
#   MCPX_BENCH_ERAS      eras (default "legacy modern")
#   MCPX_BENCH_PEER      0 to skip both mcp-proxy peers
#   MCPX_BENCH_RUST_PEER 0 to skip the Rust mcp-proxy only (its build takes 5 to 10
#                        minutes on two cores; CI's smoke run leaves it out)
#   MCPX_BENCH_NGINX     0 to skip nginx
#   MCPX_BENCH_HISTORY_OFF  0 to skip the "mcpx history off" rows: mcpx with its call
#                        history off (`mcpx.history.enabled: false`), beside the "mcpx"
#                        rows, which record every call (the default)
#   MCPX_BENCH_COMPARE   other mcpx binaries (space-separated paths): each one's gateway
#                        rows are added as "mcpx@<file name>" (e.g. builds from before an
#                        optimisation), measured in the same rounds, against the same
#                        upstream
#   MCPX_BENCH_SERVER_THREADS  runtime threads of the HTTP example server (the direct
#                        HTTP path and the gateways' HTTP upstream); default: 1 at one
#                        session, 0 (one per core) at more, whichever serves that load
#                        faster (docs/performance.md), so the direct path is at its best
#   MCPX_BENCH_NO_BUILD  1 to use the built mcpx (and the relays) as they are
#   MCPX_BENCH_PROFILE   the cargo profile built and run (default release). A smoke run
#                        checks that each path runs, not its figures: CI runs it on the
#                        dev build its tests made (dev, with MCPX_BENCH_NO_BUILD=1)
#   MCPX_BENCH_CPUS      run every process of the measurement (load generator, servers,
#                        gateways, relays, mcp-proxy) on these CPUs only (taskset's list
#                        syntax, e.g. "1"). On one CPU a call costs the sum of the CPU
#                        work of the processes on its path, without the cross-CPU
#                        wake-ups that dominate an idle virtual machine's figures
#                        (docs/performance.md, "On one CPU"). Default: unpinned
#   MCP_PROXY_VERSION    the pinned mcp-proxy (default 6.7.19)
#   MCP_PROXY_RS_VERSION the pinned Rust mcp-proxy crate (default 0.6.0; its first build
#                        takes minutes, and a failed one is a note in the table)
#
# `scripts/bench.sh smoke` runs every path once (both eras, 1 and 32 sessions, 0.3 s
# each), then the table: CI's check that the benchmark still runs. Exit status 1 only
# when a direct or mcpx row failed or had errors, never on a figure; a peer that cannot
# be installed or started is a note.
#
# `scripts/bench.sh soak [SECONDS]` runs the soak instead (crates/mcpx-bench/examples/
# soak.rs): SECONDS (default 600) of mixed load through `mcpx serve --http` (calls,
# progress, sampling answered and unanswered, cancellations, sessions abandoned, one
# upstream killed every MCPX_SOAK_CRASH_EVERY seconds, default 30), every call
# accounted for, RSS and descriptors sampled. Exit status 1 when a call was lost or
# hung. The report goes to target/bench/soak-<time>.txt.
#
# `scripts/bench.sh soak daemon [SECONDS|smoke]` soaks `mcpx daemon --http` instead
# (scripts/bench/daemon_soak.py): an idle-connection flood, a slowloris and 1,000
# `/v1/events` listeners beside legitimate `/v1` and `/mcp` requests, each of which
# must be answered. Exit status 1 when one was not. Report in
# target/bench/daemon-soak-<time>.txt. `smoke` (CI): 10 s, a tenth of the flood.
#
# `scripts/bench.sh history [N|smoke]` records N calls in a call history (default
# 1,000,000; smoke 20,000) and reports the database's size and how long the queries of
# `mcpx stats --since 1d` and `mcpx log` take (crates/mcpx-history/examples/million.rs).
#
# `scripts/bench.sh scale [--smoke]` measures how mcpx's cost grows with the work
# instead (crates/mcpx-bench/examples/scale.rs): start with 1, 10 and 50 upstreams,
# memory per upstream, session and stream, a 10,000-tool catalog and one upstream's
# list_changed, 10 and 60 MiB results, 1,000 concurrent calls; markdown tables, each
# figure beside its target, also in target/bench/scale-<time>.md. --smoke: small sizes,
# a few seconds, exit status 1 only when something broke (a lost call, an error).
#
# `scripts/bench.sh cli [RUNS]` compares the command line cold and warm instead:
# `mcpx call` of npm server-everything's `echo` and `mcpx tools`, RUNS times each
# (default 30), without a daemon (each command starts its gateway, which starts the
# upstream) and with `mcpx daemon` running on an identical configuration, interleaved
# (scripts/bench/cold_warm.py). It prints a table and exits 1 when the warm median is
# over 5 ms or less than 20 times faster than the cold one. The table also goes to
# target/bench/cli-<time>.md. About RUNS × 0.6 s on two cores.
#
# Needs: bash, cargo, python3 (the medians and the table); Node for mcp-proxy and
# server-everything, and nginx (apt-get, as root), come from scripts/peers.sh.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

SMOKE=0
if [[ "${1:-}" == smoke ]]; then
  SMOKE=1 ROUNDS=1 SECS=0.3 WARMUP=0.2 SESSIONS="1 32" ERAS="legacy modern"
else
  ROUNDS="${MCPX_BENCH_ROUNDS:-5}"
  SECS="${MCPX_BENCH_SECS:-1}"
  WARMUP="${MCPX_BENCH_WARMUP:-0.5}"
  SESSIONS="${MCPX_BENCH_SESSIONS:-1 32}"
  ERAS="${MCPX_BENCH_ERAS:-legacy modern}"
fi
PEER="${MCPX_BENCH_PEER:-1}"
RUST_PEER="${MCPX_BENCH_RUST_PEER:-1}"
[[ "$PEER" == 0 ]] && RUST_PEER=0
NGINX="${MCPX_BENCH_NGINX:-1}"
: "${MCP_PROXY_VERSION:=6.7.19}"
: "${MCP_PROXY_RS_VERSION:=0.6.0}"

PROFILE="${MCPX_BENCH_PROFILE:-release}"
# The profile's output directory: cargo names dev's "debug".
case "$PROFILE" in
  dev) BUILD_DIR="$repo/target/debug" ;;
  *) BUILD_DIR="$repo/target/$PROFILE" ;;
esac
if [[ "${MCPX_BENCH_NO_BUILD:-0}" != 1 ]]; then
  echo "bench: building $PROFILE binaries" >&2
  cargo build --profile "$PROFILE" -p mcpx >&2
  cargo build --profile "$PROFILE" -p mcpx-bench --example null_relay --example null_http_relay --example soak >&2
fi
if [[ "${1:-}" == scale ]]; then
  # How cost grows with the work (issue #26): crates/mcpx-bench/examples/scale.rs.
  [[ "${MCPX_BENCH_NO_BUILD:-0}" == 1 ]] || cargo build --profile "$PROFILE" -p mcpx-bench --example scale >&2
  mkdir -p "$repo/target/bench"
  report="$repo/target/bench/scale-$(date +%Y%m%d-%H%M%S).md"
  echo "bench: scale${2:+ $2}; tables in $report" >&2
  exec "$BUILD_DIR/examples/scale" --mcpx "$BUILD_DIR/mcpx" --out "$report" ${2:+"$2"}
fi
if [[ "${1:-}" == cli ]]; then
  # shellcheck source=peers.sh
  source "$repo/scripts/peers.sh"
  everything="$(peers_server_everything)" || { echo "bench: server-everything missing" >&2; exit 1; }
  eval "everything_cmd=($everything)"
  work="$repo/target/bench/cli-$(date +%Y%m%d-%H%M%S)"
  mkdir -p "$work/run"
  chmod 700 "$work/run"
  for which in cold warm; do
    python3 - "$work/$which.json" "${everything_cmd[@]}" <<'PYEOF'
import json, sys
path, command, *args = sys.argv[1:]
json.dump({"mcpServers": {"everything": {"command": command, "args": args}}}, open(path, "w"))
PYEOF
  done
  mcpx="$BUILD_DIR/mcpx"
  XDG_RUNTIME_DIR="$work/run" "$mcpx" daemon --config "$work/warm.json" 2>"$work/daemon.log" &
  daemon=$!
  trap 'kill "$daemon" 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    XDG_RUNTIME_DIR="$work/run" "$mcpx" call echo --args '{"message":"up"}' --config "$work/warm.json" >/dev/null 2>&1 && break
    sleep 0.1
  done
  status=0
  python3 "$repo/scripts/bench/cold_warm.py" "$mcpx" "${2:-30}" "$work/run" \
    "$work/cold.json" "$work/warm.json" echo '{"message":"bench"}' "Echo: bench" \
    | tee "$work.md" || status=$?
  XDG_RUNTIME_DIR="$work/run" "$mcpx" stop --config "$work/warm.json" >/dev/null 2>&1 || true
  exit "$status"
fi
if [[ "${1:-}" == history ]]; then
  # The call history at scale (issue #36): crates/mcpx-history/examples/million.rs
  # records N calls (default 1,000,000; smoke: 20,000) and times the queries of
  # `mcpx stats` and `mcpx log`.
  n="${2:-1000000}"
  [[ "$n" == smoke ]] && n=20000
  [[ "${MCPX_BENCH_NO_BUILD:-0}" == 1 ]] || cargo build --profile "$PROFILE" -p mcpx-history --example million >&2
  mkdir -p "$repo/target/bench"
  report="$repo/target/bench/history-$(date +%Y%m%d-%H%M%S).txt"
  echo "bench: call history, $n calls; report in $report" >&2
  status=0
  "$BUILD_DIR/examples/million" "$n" "$repo/target/bench/history" | tee "$report" || status=$?
  exit "$status"
fi
if [[ "${1:-}" == soak && "${2:-}" == daemon ]]; then
  # The daemon's listeners under an idle flood, a slowloris and 1,000 event listeners,
  # beside legitimate /v1 and /mcp requests (issue #39): scripts/bench/daemon_soak.py.
  mkdir -p "$repo/target/bench"
  report="$repo/target/bench/daemon-soak-$(date +%Y%m%d-%H%M%S).txt"
  echo "bench: daemon soak for ${3:-600} s; report in $report" >&2
  status=0
  python3 "$repo/scripts/bench/daemon_soak.py" "$BUILD_DIR/mcpx" "${3:-600}" \
    "$repo/target/bench/daemon-soak" | tee "$report" || status=$?
  exit "$status"
fi
if [[ "${1:-}" == soak ]]; then
  mkdir -p "$repo/target/bench"
  report="$repo/target/bench/soak-$(date +%Y%m%d-%H%M%S).txt"
  echo "bench: soak for ${2:-600} s; report in $report" >&2
  status=0
  "$BUILD_DIR/examples/soak" --mcpx "$BUILD_DIR/mcpx" \
    --secs "${2:-600}" --crash-every "${MCPX_SOAK_CRASH_EVERY:-30}" | tee "$report" || status=$?
  exit "$status"
fi
# The Rust mcp-proxy, built once into its own root (whether or not mcpx is rebuilt); a
# failed build is logged and becomes a note. Features: none of the defaults (otel,
# metrics, oauth, openapi, websocket, discovery, yaml, skills) is on the measured path;
# protocol-2026-07-28 is the modern era.
PROXY_RS_BIN="$repo/target/bench/peers/mcp-proxy-rs-$MCP_PROXY_RS_VERSION/bin/mcp-proxy"
PROXY_RS_LOG="$repo/target/bench/peers/mcp-proxy-rs-$MCP_PROXY_RS_VERSION-build.log"
if [[ "$RUST_PEER" != 0 && ! -x "$PROXY_RS_BIN" ]]; then
  echo "bench: building the Rust mcp-proxy $MCP_PROXY_RS_VERSION (minutes); log in $PROXY_RS_LOG" >&2
  mkdir -p "$repo/target/bench/peers"
  start_s=$SECONDS
  if cargo install --root "$repo/target/bench/peers/mcp-proxy-rs-$MCP_PROXY_RS_VERSION" mcp-proxy \
     --version "$MCP_PROXY_RS_VERSION" --locked --no-default-features --features protocol-2026-07-28 \
     >"$PROXY_RS_LOG" 2>&1; then
    export MCPX_BENCH_RS_BUILT=$((SECONDS - start_s))
  else
    echo "bench: the Rust mcp-proxy did not build; its rows are skipped" >&2
  fi
fi
# Pinned after the build, so that only the measurement runs on the chosen CPUs; every
# process started from here on inherits the affinity.
if [[ -n "${MCPX_BENCH_CPUS:-}" && "${MCPX_BENCH_PINNED:-}" != "$MCPX_BENCH_CPUS" ]]; then
  command -v taskset >/dev/null || { echo "bench: MCPX_BENCH_CPUS needs taskset (util-linux)" >&2; exit 2; }
  MCPX_BENCH_PINNED="$MCPX_BENCH_CPUS" MCPX_BENCH_NO_BUILD=1 exec taskset -c "$MCPX_BENCH_CPUS" "$0" "$@"
fi
BIN="$BUILD_DIR/mcpx"
RELAY="$BUILD_DIR/examples/null_relay"
HTTP_RELAY="$BUILD_DIR/examples/null_http_relay"
[[ -x "$BIN" ]] || { echo "bench: $BIN missing" >&2; exit 1; }

OUT="$repo/target/bench/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
ROUNDS_TSV="$OUT/rounds.tsv"
: >"$ROUNDS_TSV"
NOTES="$OUT/notes.txt"
: >"$NOTES"

# PIDS, start_bg, stop_started, free_port, wait_port, gateway_config, nginx_config.
# shellcheck source=lib/procs.sh
source "$repo/scripts/lib/procs.sh"
trap stop_started EXIT

# The compared builds, as one alternation for `settle`'s pgrep.
COMPARE=()
read -r -a COMPARE <<<"${MCPX_BENCH_COMPARE:-}"
COMPARE_RE="$(IFS='|'; echo "${COMPARE[*]:-}")"

# settle: waits (up to 30 s) until no mcpx process is left over from an earlier
# measurement (stdio servers draining after their host went away), so that
# measurements do not share the CPU with stragglers. The servers this script keeps
# running, and their own upstreams, are not stragglers.
settle() {
  local i strays ours
  for i in $(seq 1 100); do
    # Recomputed each time: a gateway starts its upstream after it listens.
    ours="$(for p in "${PIDS[@]}" "$$"; do echo "$p"; pgrep -P "$p" || true; done)"
    strays="$(pgrep -f -- "^($BIN|$RELAY|${COMPARE_RE:-$BIN}) (example-server|serve)" \
      | grep -vxF -f <(echo "$ours") | wc -l || true)"
    ((strays == 0)) && return 0
    sleep 0.3
  done
  echo "bench: $strays stray processes still running; measuring anyway:" >&2
  pgrep -af -- "^($BIN|$RELAY|${COMPARE_RE:-$BIN}) (example-server|serve)" \
    | grep -vE -f <(echo "$ours" | sed '/^$/d; s/^/^/; s/$/ /') >&2 || true
  echo "$strays stray mcpx processes were running during a measurement (see bench.stderr)" >>"$NOTES"
}

# The paths of one era and session count: parallel arrays, the arguments of
# `mcpx bench` joined with the unit separator (a --stdio command has spaces).
T_LABEL=() T_HOST=() T_UP=() T_ARGS=()
add_path() { # LABEL HOST UPSTREAM BENCH-ARGS...
  T_LABEL+=("$1") T_HOST+=("$2") T_UP+=("$3")
  shift 3
  local IFS=$'\x1f'
  T_ARGS+=("$*")
}

# measure I ERA N ROUND : path I once; one row in rounds.tsv.
measure() {
  local i="$1" era="$2" n="$3" round="$4" json args
  IFS=$'\x1f' read -r -a args <<<"${T_ARGS[$i]}"
  settle
  echo "bench: [$round/$ROUNDS] ${T_LABEL[$i]} ${T_HOST[$i]}→${T_UP[$i]} $era x$n" >&2
  if json="$("$BIN" bench "${args[@]}" --era "$era" --sessions "$n" --duration "$SECS" --warmup "$WARMUP" --json 2>"$OUT/last.stderr")"; then
    cat "$OUT/last.stderr" >>"$OUT/bench.stderr"
    field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" <<<"$json"; }
    local rss; rss="$(field watched_peak_rss_kib)"; [[ -n "$rss" ]] || rss="$(field child_peak_rss_kib)"
    local cpu; cpu="$(field watched_cpu_us_per_call)"; [[ -n "$cpu" ]] || cpu="$(field child_cpu_us_per_call)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${T_LABEL[$i]}" "${T_HOST[$i]}" "${T_UP[$i]}" "$era" "$n" \
      "$(field calls_per_s)" "$(field p50_us)" "$(field p99_us)" "${rss:-}" "$(field errors)" "${cpu:-}" >>"$ROUNDS_TSV"
    echo "$json" >>"$OUT/results.jsonl"
  else
    cat "$OUT/last.stderr" >>"$OUT/bench.stderr"
    # The load generator's last line says why (e.g. "no call succeeded: ...").
    echo "${T_LABEL[$i]} ${T_HOST[$i]}→${T_UP[$i]} $era x$n: round $round failed: $(tail -n1 "$OUT/last.stderr" | cut -c1-160)" >>"$NOTES"
  fi
}

# gateway_paths LABEL GATEWAY-BIN ERA N UPSTREAM-URL : starts one gateway binary's HTTP
# gateways and adds its three paths. The upstream is always this build's example server.
gateway_paths() {
  local label="$1" gw="$2" era="$3" n="$4" up_url="$5" tag port cfg
  tag="$(basename "$gw")${GATEWAY_TAG:-}-$era-$n"
  # HTTP host → stdio upstream.
  cfg="$OUT/gw-$tag-stdio.json"; gateway_config "$cfg" "$BIN" "$era" stdio
  port="$(free_port)"
  start_bg "$OUT/gw-$tag-hs.log" env XDG_CACHE_HOME="$OUT/cache" "$gw" serve --config "$cfg" --http "127.0.0.1:$port"
  if wait_port "$port" "$BG_PID"; then
    add_path "$label" http stdio --http "http://127.0.0.1:$port/mcp" --watch-pid "$BG_PID"
  else echo "$label http→stdio $era x$n: the gateway did not start" >>"$NOTES"; fi
  # HTTP host → HTTP upstream.
  cfg="$OUT/gw-$tag-http.json"; gateway_config "$cfg" "$BIN" "$era" http "$up_url"
  port="$(free_port)"
  start_bg "$OUT/gw-$tag-hh.log" env XDG_CACHE_HOME="$OUT/cache" "$gw" serve --config "$cfg" --http "127.0.0.1:$port"
  if wait_port "$port" "$BG_PID"; then
    add_path "$label" http http --http "http://127.0.0.1:$port/mcp" --watch-pid "$BG_PID"
  else echo "$label http→http $era x$n: the gateway did not start" >>"$NOTES"; fi
  # stdio host → stdio upstream (one gateway per session, as hosts launch it).
  add_path "$label" stdio stdio --stdio "$gw serve --config $OUT/gw-$tag-stdio.json"
}

# nginx_path ERA N UPSTREAM-PORT : starts nginx in front of the HTTP example server and
# adds its path. Its own prefix under $OUT (config, pid, logs, temp paths); one worker,
# whose pid (the master's child) is the one watched.
nginx_path() {
  local era="$1" n="$2" up_port="$3" dir port worker="" i
  dir="$OUT/nginx-$era-$n"
  port="$(free_port)"
  nginx_config "$dir" "$port" "$up_port"
  start_bg "$dir/stderr.log" "$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log"
  local master=$BG_PID
  if wait_port "$port" "$master"; then
    for i in $(seq 1 50); do worker="$(pgrep -P "$master" | head -n1 || true)"; [[ -n "$worker" ]] && break; sleep 0.1; done
    if [[ -n "$worker" ]]; then
      add_path "$NGINX_LABEL" http http --http "http://127.0.0.1:$port/mcp" --watch-pid "$worker"
      return 0
    fi
  fi
  echo "$NGINX_LABEL http→http $era x$n: did not start (see $dir/error.log)" >>"$NOTES"
}

# proxy_rs_paths ERA N UPSTREAM-URL : the Rust mcp-proxy in front of the example server,
# as a child (HTTP→stdio) and over HTTP (HTTP→HTTP). One backend, "ex"; it serves on /.
proxy_rs_paths() {
  local era="$1" n="$2" up_url="$3" kind port cfg label="mcp-proxy-rs@$MCP_PROXY_RS_VERSION"
  for kind in stdio http; do
    port="$(free_port)"
    cfg="$OUT/mcp-proxy-rs-$era-$n-$kind.toml"
    {
      printf '[proxy]\nname = "bench"\nseparator = "/"\n[proxy.listen]\nhost = "127.0.0.1"\nport = %s\n' "$port"
      printf '[observability]\nlog_level = "warn"\n[[backends]]\nname = "ex"\n'
      if [[ $kind == stdio ]]; then
        printf 'transport = "stdio"\ncommand = "%s"\nargs = ["example-server"]\n' "$BIN"
      else
        printf 'transport = "http"\nurl = "%s"\n' "$up_url"
      fi
    } >"$cfg"
    start_bg "$OUT/mcp-proxy-rs-$era-$n-$kind.log" "$PROXY_RS" --config "$cfg"
    if wait_port "$port" "$BG_PID"; then
      add_path "$label" http "$kind" --http "http://127.0.0.1:$port/" --tool ex/test_simple_text --watch-pid "$BG_PID"
    else
      echo "$label http→$kind $era x$n: did not start (see $OUT/mcp-proxy-rs-$era-$n-$kind.log)" >>"$NOTES"
    fi
  done
}

# ---- the peer proxy ---------------------------------------------------------------
PROXY=() PROXY_RS=""
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
  # The Rust crate, built before the pinning above.
  if [[ "$RUST_PEER" == 0 ]]; then
    echo "mcp-proxy-rs@$MCP_PROXY_RS_VERSION: skipped (MCPX_BENCH_RUST_PEER=0)" >>"$NOTES"
  elif [[ -x "$PROXY_RS_BIN" ]]; then
    PROXY_RS="$PROXY_RS_BIN"
    [[ -n "${MCPX_BENCH_RS_BUILT:-}" ]] && echo "mcp-proxy-rs@$MCP_PROXY_RS_VERSION: built in this run, in $MCPX_BENCH_RS_BUILT s" >>"$NOTES"
  else
    echo "mcp-proxy-rs@$MCP_PROXY_RS_VERSION: did not build (see $PROXY_RS_LOG); its rows are skipped" >>"$NOTES"
  fi
else
  echo "mcp-proxy, mcp-proxy-rs: skipped (MCPX_BENCH_PEER=0)" >>"$NOTES"
fi
NGINX_BIN="" NGINX_LABEL=""
if [[ "$NGINX" != 0 ]]; then
  # shellcheck source=peers.sh
  source "$repo/scripts/peers.sh"
  if NGINX_BIN="$(peers_nginx)"; then
    NGINX_LABEL="nginx $("$NGINX_BIN" -v 2>&1 | sed -n 's|.*nginx/\([^ ]*\).*|\1|p')"
  else
    NGINX_BIN=""
    echo "nginx: could not be installed; its rows are skipped" >>"$NOTES"
  fi
else
  echo "nginx: skipped (MCPX_BENCH_NGINX=0)" >>"$NOTES"
fi
[[ -x "$RELAY" ]] || echo "relay floor: $RELAY missing (cargo build --profile $PROFILE -p mcpx-bench --example null_relay)" >>"$NOTES"
[[ -x "$HTTP_RELAY" ]] || echo "HTTP relay floor: $HTTP_RELAY missing (cargo build --profile $PROFILE -p mcpx-bench --example null_http_relay)" >>"$NOTES"

# ---- the run ------------------------------------------------------------------------
export XDG_CACHE_HOME="$OUT/cache"
for era in $ERAS; do
  for n in $SESSIONS; do
    T_LABEL=() T_HOST=() T_UP=() T_ARGS=()
    # The direct paths; the HTTP example server also serves as the HTTP upstream.
    up_port="$(free_port)"
    threads="${MCPX_BENCH_SERVER_THREADS:-$(((n > 1) ? 0 : 1))}"
    start_bg "$OUT/example-$era-$n.log" "$BIN" example-server --threads "$threads" --http "127.0.0.1:$up_port"
    up_pid=$BG_PID
    wait_port "$up_port" "$up_pid" || { echo "bench: example server did not start" >&2; exit 1; }
    up_url="http://127.0.0.1:$up_port/mcp"
    add_path direct http - --http "$up_url" --watch-pid "$up_pid"
    add_path direct stdio - --stdio "$BIN example-server"

    gateway_paths mcpx "$BIN" "$era" "$n" "$up_url"
    if [[ "${MCPX_BENCH_HISTORY_OFF:-1}" == 1 ]]; then
      GATEWAY_HISTORY='{"enabled":false}' GATEWAY_TAG=-nohistory \
        gateway_paths "mcpx history off" "$BIN" "$era" "$n" "$up_url"
    fi
    for old in "${COMPARE[@]}"; do
      # No `mcpx` block: a build from before `mcpx.history` refuses the key.
      GATEWAY_HISTORY=none gateway_paths "mcpx@$(basename "$old")" "$old" "$era" "$n" "$up_url"
    done
    [[ -x "$RELAY" ]] && add_path "relay floor" stdio stdio --stdio "$RELAY $BIN example-server"
    if [[ -x "$HTTP_RELAY" ]]; then
      port="$(free_port)"
      start_bg "$OUT/relay-http-$era-$n.log" "$HTTP_RELAY" "127.0.0.1:$port" --http "$up_url"
      if wait_port "$port" "$BG_PID"; then
        add_path "relay floor" http http --http "http://127.0.0.1:$port/mcp" --watch-pid "$BG_PID"
      else echo "relay floor http→http $era x$n: did not start" >>"$NOTES"; fi
      if ((n == 1)); then
        port="$(free_port)"
        start_bg "$OUT/relay-stdio-$era-$n.log" "$HTTP_RELAY" "127.0.0.1:$port" --stdio "$BIN" example-server
        if wait_port "$port" "$BG_PID"; then
          add_path "relay floor" http stdio --http "http://127.0.0.1:$port/mcp" --watch-pid "$BG_PID"
        else echo "relay floor http→stdio $era x$n: did not start" >>"$NOTES"; fi
      fi
    fi

    [[ -n "$NGINX_BIN" ]] && nginx_path "$era" "$n" "$up_port"
    [[ -n "$PROXY_RS" ]] && proxy_rs_paths "$era" "$n" "$up_url"
    if ((${#PROXY[@]})); then
      port="$(free_port)"
      start_bg "$OUT/mcp-proxy-$era-$n.log" "${PROXY[@]}" --host 127.0.0.1 --port "$port" -- "$BIN" example-server
      if wait_port "$port" "$BG_PID"; then
        add_path "mcp-proxy@$MCP_PROXY_VERSION" http stdio --http "http://127.0.0.1:$port/mcp" --watch-pid "$BG_PID"
      else
        echo "mcp-proxy http→stdio $era x$n: the proxy did not start (see $OUT/mcp-proxy-$era-$n.log)" >>"$NOTES"
      fi
    fi

    for ((round = 1; round <= ROUNDS; round++)); do
      if ((round % 2)); then
        for ((i = 0; i < ${#T_LABEL[@]}; i++)); do measure "$i" "$era" "$n" "$round"; done
      else
        for ((i = ${#T_LABEL[@]} - 1; i >= 0; i--)); do measure "$i" "$era" "$n" "$round"; done
      fi
    done
    stop_started
  done
done

# ---- the table ----------------------------------------------------------------------
status=0
python3 - "$ROUNDS_TSV" "$NOTES" "$ROUNDS" "$SECS" "$WARMUP" "${MCPX_BENCH_PINNED:-}" "$SMOKE" "$ERAS" "$SESSIONS" \
  "$NGINX_LABEL" <<'PYEOF' | tee "$OUT/table.md" || status=$?
import statistics, sys

rounds_tsv, notes, n_rounds, secs, warmup, pinned, smoke, eras, sessions, nginx = sys.argv[1:11]
rows = {}  # (label, host, up, era, n) -> per-round values, in first-seen order
for line in open(rounds_tsv):
    f = line.rstrip("\n").split("\t")
    if len(f) < 10 or not f[5]:
        continue
    r = rows.setdefault(tuple(f[:5]), {"cps": [], "p50": [], "p99": [], "rss": [], "cpu": [], "err": 0})
    r["cps"].append(float(f[5]))
    r["p50"].append(float(f[6]))
    r["p99"].append(float(f[7]))
    if f[8]:
        r["rss"].append(float(f[8]))
    r["err"] += int(float(f[9] or 0))
    if len(f) > 10 and f[10]:
        r["cpu"].append(float(f[10]))

med = {k: {m: statistics.median(v[m]) for m in ("cps", "p50", "p99")} for k, v in rows.items()}
print(f"Each row: the median of {n_rounds} interleaved rounds, each {secs} s measured after "
      f"{warmup} s of warm-up;")
print("tools/call of test_simple_text; one call in flight per session. Ratios: this row / the")
print("direct path with the same host transport, era and sessions (calls/s: higher is better;")
print("p50: µs added); \"vs nginx\": this row against nginx's of the same era and sessions,")
print("for every HTTP host. CPU: what the process serving the host ran per call (all its")
print("threads; for stdio, every session's process together).")
if pinned:
    print(f"Every process pinned to CPU {pinned} (MCPX_BENCH_CPUS): latency is the CPU work of")
    print("the path, without cross-CPU wake-ups.")
print()
print("| path | host → upstream | era | sessions | calls/s | p50 µs | p99 µs | peak RSS MiB "
      "| CPU µs/call | calls/s vs direct | p50 added µs | calls/s vs nginx | p50 vs nginx µs |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for k, v in rows.items():
    label, host, up, era, n = k
    m = med[k]
    d = med.get(("direct", host, "-", era, n))
    ratio = added = "–"
    if label != "direct" and d and d["cps"] > 0:
        ratio = f"{100 * m['cps'] / d['cps']:.0f} %"
        added = f"{m['p50'] - d['p50']:+.0f}"
    g = med.get((nginx, "http", "http", era, n)) if nginx else None
    vs_nginx = p50_nginx = "–"
    if host == "http" and label != nginx and g and g["cps"] > 0:
        vs_nginx = f"{100 * m['cps'] / g['cps']:.0f} %"
        p50_nginx = f"{m['p50'] - g['p50']:+.0f}"
    rss = f"{max(v['rss']) / 1024:.1f}" if v["rss"] else "–"
    cpu = f"{statistics.median(v['cpu']):.0f}" if v["cpu"] else "–"
    err = f" ({v['err']} errors)" if v["err"] else ""
    path = host if up == "-" else f"{host} → {up}"
    print(f"| {label} | {path} | {era} | {n} | {m['cps']:.0f}{err} | {m['p50']:.0f} "
          f"| {m['p99']:.0f} | {rss} | {cpu} | {ratio} | {added} | {vs_nginx} | {p50_nginx} |")
text = open(notes).read().strip()
if text:
    print()
    print("Notes:")
    for line in text.splitlines():
        print(f"* {line}")
# Smoke: the run fails only when one of the direct or mcpx rows is missing (it did not
# start, or its round failed) or had errors; never on a figure, never on a peer.
if smoke == "1":
    ours = [("direct", "http", "-"), ("direct", "stdio", "-"), ("mcpx", "http", "stdio"),
            ("mcpx", "http", "http"), ("mcpx", "stdio", "stdio")]
    bad = []
    for era in eras.split():
        for n in sessions.split():
            for label, host, up in ours:
                r = rows.get((label, host, up, era, n))
                if r is None:
                    bad.append(f"{label} {host}→{up} {era} x{n}: no result")
                elif r["err"]:
                    bad.append(f"{label} {host}→{up} {era} x{n}: {r['err']} errors")
    for b in bad:
        print(f"bench smoke: FAILED: {b}", file=sys.stderr)
    sys.exit(1 if bad else 0)
PYEOF
echo >&2
echo "bench: results in $OUT (table.md, rounds.tsv, results.jsonl)" >&2
exit "$status"
