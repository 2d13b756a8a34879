#!/usr/bin/env bash
# The project's test command (the README's second command; .ci/run calls it).
# Installs what it needs: cargo fetches the crates, scripts/peers.sh the pinned external
# peers (npm, PyPI) under target/peers. The tests read the spec from the read-only
# shared/ folder beside the repository (or $MCPX_SHARED_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."

shared="${MCPX_SHARED_DIR:-../shared}"
if [[ ! -f "$shared/requirements/items.tsv" ]]; then
  echo "test.sh: the read-only shared/ folder was not found at $shared;" >&2
  echo "         put it beside the repository or set MCPX_SHARED_DIR" >&2
  exit 2
fi

# Most tests wait on child processes and sockets, not on the CPU: eight at a time on
# two cores run the process suite in about a third of the time two take, with the same
# results (RUST_TEST_THREADS set by the caller wins).
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-8}"
cargo test --workspace --locked "$@"

# External peers (Inspector CLI, Python mcp SDK), installed by scripts/peers.sh. The
# whole workspace's tests built mcpx and every example interop.sh runs; arguments may
# have narrowed that, and then it builds its own.
if [[ $# -eq 0 ]]; then
  MCPX_INTEROP_NO_BUILD=1 scripts/interop.sh
else
  scripts/interop.sh
fi
