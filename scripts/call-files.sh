#!/usr/bin/env bash
# scripts/call-files.sh — which of the workspace's source files one passthrough call
# runs through, and how often it crosses from one to another: a measure of the call
# path's shape, for before/after comparisons of a refactoring.
#
# One session, `tools/call` of test_simple_text through `mcpx serve` (HTTP host by
# default, or stdio) in front of `mcpx example-server` on stdio, as scripts/call-cost.sh
# runs it, under callgrind twice (N1 and N2 calls). From callgrind's call graph:
#
#   files           the workspace files (crates/…) with code that runs on every call:
#                   a file counts when its functions' calls grow with the calls made
#   crates          the crates those files are in
#   file switches   per call, the calls from a function in one workspace file to a
#                   function in another (each is a switch there and one back)
#
# Needs an unoptimised build (the default: target/debug/mcpx, built), so that the
# call graph is the source's and not what inlining left of it.
#
# Usage: scripts/call-files.sh [http|stdio] [legacy|modern] [N1] [N2]
#        (default: http legacy 300 100)
#   MCPX_FILES_BIN   the mcpx binary to measure (default: target/debug/mcpx, built);
#                    for another tree's, its root is read from the binary's debug info
#   MCPX_FILES_LIST  1: also print the files, with their calls in and out per call
#
# Needs valgrind and python3.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
HOST="${1:-http}"
ERA="${2:-legacy}"
N1="${3:-300}"
N2="${4:-100}"
case "$HOST" in http | stdio) ;; *) echo "call-files: host transport is http or stdio" >&2; exit 2 ;; esac
case "$ERA" in legacy | modern) ;; *) echo "call-files: era is legacy or modern" >&2; exit 2 ;; esac
((N1 > N2 && N2 > 0)) || { echo "call-files: N1 > N2 > 0" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "call-files: valgrind is not installed" >&2; exit 2; }

if [[ -z "${MCPX_FILES_BIN:-}" ]]; then
  cargo build -p mcpx >&2
fi
BIN="$(realpath "${MCPX_FILES_BIN:-$repo/target/debug/mcpx}")"
# The load generator and the upstream: this tree's build, outside valgrind.
LOAD="$repo/target/debug/mcpx"
[[ -x "$LOAD" ]] || cargo build -p mcpx >&2

OUT="$(mktemp -d "${TMPDIR:-/tmp}/mcpx-call-files.XXXXXX")"
# PIDS, start_bg, stop_started, free_port, wait_port, gateway_config.
# shellcheck source=lib/procs.sh
source "$repo/scripts/lib/procs.sh"
trap 'stop_started; rm -rf "$OUT"' EXIT

cfg="$OUT/mcpx.json"
gateway_config "$cfg" "$LOAD" "$ERA" stdio

# run CALLS OUTPUT: one gateway under callgrind, CALLS calls through it.
run() {
  local calls="$1" out="$2"
  if [[ "$HOST" == stdio ]]; then
    "$LOAD" bench --stdio "valgrind --tool=callgrind --callgrind-out-file=$out $BIN serve --config $cfg" \
      --era "$ERA" --calls "$calls" --warmup 0 >/dev/null 2>&1
    return
  fi
  local port pid
  port="$(free_port)"
  start_bg "$OUT/callgrind.log" env XDG_CACHE_HOME="$OUT/cache" valgrind --tool=callgrind \
    "--callgrind-out-file=$out" "$BIN" serve --config "$cfg" --http "127.0.0.1:$port"
  pid=$BG_PID
  wait_port "$port" "$pid" 300 || { echo "call-files: the gateway did not listen" >&2; exit 1; }
  "$LOAD" bench --http "http://127.0.0.1:$port/mcp" --era "$ERA" --calls "$calls" \
    --warmup 0 >/dev/null 2>&1
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

run "$N1" "$OUT/cg1.out"
run "$N2" "$OUT/cg2.out"

python3 - "$OUT" "$N1" "$N2" "$HOST" "$ERA" "$BIN" "${MCPX_FILES_LIST:-0}" <<'PYEOF'
import collections, re, sys
out, n1, n2, host, era, binary, listing = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:]

def workspace(path):
    # A file of the workspace's crates, as crates/<crate>/…; None for any other.
    m = re.search(r"(?:^|/)(crates/[^/]+/.*\.rs)$", path)
    if m and "/.cargo/" not in path and "/rustc/" not in path:
        return m.group(1)
    return None

def edges(path):
    # callgrind's format: fl= the current function's file, fi=/fe= the file of the
    # lines that follow (inlined code), fn= the function; cfi=/cfl= and cfn= name a
    # call's target, and the calls= line after them its count. Names are compressed:
    # "(n) name" defines n, "(n)" alone refers to it.
    names = {}
    def name(kind, text):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?$", text)
        if not m:
            return text
        key = (kind, m.group(1))
        if m.group(2) is not None:
            names[key] = m.group(2)
        return names.get(key, "")
    counts = collections.Counter()
    fl = here = target_file = None
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("fl="):
            fl = here = name("fl", line[3:])
        elif line.startswith(("fi=", "fe=")):
            here = name("fl", line[3:])
        elif line.startswith("fn="):
            name("fn", line[3:])
            here = fl
        elif line.startswith(("cfi=", "cfl=")):
            target_file = name("fl", line[4:])
        elif line.startswith("cfn="):
            name("fn", line[4:])
        elif line.startswith("calls="):
            n = int(line[6:].split()[0])
            counts[(here, target_file)] += n
            target_file = None
    return counts

a, b = edges(f"{out}/cg1.out"), edges(f"{out}/cg2.out")
calls = n1 - n2
per_call = collections.Counter()
files = collections.Counter()
for (src, dst), n in a.items():
    grown = (n - b.get((src, dst), 0)) / calls
    if grown < 0.5:
        continue
    s, d = workspace(src or ""), workspace(dst or "")
    for f in (s, d):
        if f:
            files[f] += 0
    if s and d and s != d:
        per_call[(s, d)] += grown
        files[s] += grown
        files[d] += grown
crates = sorted({f.split("/")[1] for f in files})
switches = sum(per_call.values())
print(f"{host} host → stdio upstream, {era}, {binary}: {len(files)} files in "
      f"{len(crates)} crates ({', '.join(crates)}), {switches:.0f} file switches per call")
if listing == "1":
    for f in sorted(files):
        out_n = sum(v for (s, _), v in per_call.items() if s == f)
        in_n = sum(v for (_, d), v in per_call.items() if d == f)
        print(f"  {f}: {in_n:.0f} in, {out_n:.0f} out")
PYEOF
