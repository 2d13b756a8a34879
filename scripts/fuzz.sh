#!/usr/bin/env bash
# Runs the cargo-fuzz targets in fuzz/ for a bounded time each:
#
#   scripts/fuzz.sh [TARGET|--all] [SECONDS]
#
# TARGET is one of `cargo fuzz list` (default: all of them, as with --all); SECONDS is
# each target's time (default $MCPX_FUZZ_SECONDS, else 60). Each target starts from its
# seed corpus in fuzz/corpus/<target> (kept in the repository, a few small files),
# copied into target/fuzz/corpus/<target>, where what a run finds stays for the next
# run: no run writes into the repository's corpus. An input that fails a target is
# kept in fuzz/artifacts/<target>/ (ignored by git), and the script exits 1.
#
# cargo-fuzz needs a nightly toolchain: without one the script says so and exits 0.
# It installs cargo-fuzz (its version pinned) into ~/.cargo/bin when it is missing.
# $MCPX_FUZZ_ARGS adds libFuzzer options (e.g. "-max_len=8192"); $MCPX_FUZZ_SANITIZER
# picks cargo-fuzz's sanitizer (default address; CI uses none, which builds faster);
# $MCPX_FUZZ_PROFILE=dev builds without optimisations (half the build time, far fewer
# runs a second: CI's short runs; default release, with debug assertions).
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2

target="${1:---all}"
seconds="${2:-${MCPX_FUZZ_SECONDS:-60}}"
if [[ ! "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: SECONDS must be a whole number of seconds, not '$seconds'" >&2
  exit 2
fi

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz.sh: no nightly toolchain (cargo-fuzz needs one: rustup toolchain install" \
    "nightly); not fuzzing"
  exit 0
fi

installed=$(cargo fuzz --version 2>/dev/null || true)
if [[ "$installed" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]]; then
  echo "== installing cargo-fuzz $CARGO_FUZZ_VERSION (found: ${installed:-none})"
  cargo install --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi

# The build every run uses (`cargo fuzz run` builds with the same options, so it finds
# it done): optimised, with debug assertions and overflow checks, and a sanitizer.
case "${MCPX_FUZZ_PROFILE:-release}" in
  release) build=(--release --debug-assertions) ;;
  dev) build=(--dev) ;;
  *) echo "fuzz.sh: MCPX_FUZZ_PROFILE is release or dev" >&2; exit 2 ;;
esac
build+=(--sanitizer "${MCPX_FUZZ_SANITIZER:-address}")

mapfile -t all < <(cargo +nightly fuzz list)
if [[ "$target" == "--all" ]]; then
  targets=("${all[@]}")
elif [[ " ${all[*]} " == *" $target "* ]]; then
  targets=("$target")
else
  echo "fuzz.sh: no target '$target'; the targets: ${all[*]}" >&2
  exit 2
fi

echo "== cargo fuzz build"
cargo +nightly fuzz build "${build[@]}"

work=target/fuzz
mkdir -p "$work/logs"
failed=()
for t in "${targets[@]}"; do
  if [[ ! -d "fuzz/corpus/$t" ]]; then
    echo "fuzz.sh: target '$t' has no seed corpus (fuzz/corpus/$t)" >&2
    exit 2
  fi
  corpus="$work/corpus/$t"
  mkdir -p "$corpus" "fuzz/artifacts/$t"
  cp -n "fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null || true
  log="$work/logs/$t.log"
  echo "== fuzz $t (${seconds}s)"
  # One process on one core; libFuzzer's own output goes to the log.
  # shellcheck disable=SC2086 # MCPX_FUZZ_ARGS is a list of options
  if cargo +nightly fuzz run "${build[@]}" "$t" "$corpus" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      ${MCPX_FUZZ_ARGS:-} >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$t")
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  size=$(find "$corpus" -type f | wc -l)
  echo "fuzz $t: $status, ${runs:-?} runs in ${took:-?} s (${rate:-?}/s), corpus $size files"
  if [[ "$status" != ok ]]; then
    tail -n 40 "$log"
    ls -1 "fuzz/artifacts/$t" | sed "s|^|  fuzz/artifacts/$t/|"
  fi
done

if ((${#failed[@]} > 0)); then
  echo "fuzz.sh: ${failed[*]} failed; replay with: cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>" >&2
  exit 1
fi
