# scripts/lib/procs.sh — sourced by the measuring scripts (bench.sh, critical-path.sh,
# call-cost.sh): the processes they start, the ports those listen on, and the gateway
# configuration they measure. Not a script of its own.

# Every process started with start_bg, killed and reaped by stop_started.
PIDS=()

# stop_started: kills and reaps every process in PIDS (each script's EXIT trap).
stop_started() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}

# start_bg LOG CMD... : starts CMD in the background (stdin closed, stdout and stderr to
# LOG), sets BG_PID.
start_bg() {
  local log="$1"; shift
  "$@" </dev/null >"$log" 2>&1 &
  BG_PID=$!
  PIDS+=("$BG_PID")
}

# A free TCP port on 127.0.0.1 (asks the kernel through bash alone: tries a range).
# Below Linux's ephemeral range (32768 up): a port that no listener holds may still be
# the local end of an outbound connection (a gateway's to its upstream), and then a
# listener cannot bind it.
next_port=$((20000 + RANDOM % 10000))
free_port() {
  while (exec 3<>"/dev/tcp/127.0.0.1/$next_port") 2>/dev/null; do next_port=$((next_port + 1)); done
  echo "$next_port"
  next_port=$((next_port + 1))
}

# wait_port PORT PID [TENTHS] : until PORT accepts connections (1), PID exits (fails) or
# TENTHS tenths of a second pass (default 100; valgrind starts slowly).
wait_port() {
  local i
  for i in $(seq 1 "${3:-100}"); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# gateway_config FILE MCPX-BIN ERA stdio|http [URL] : an `mcpx serve` configuration with
# one upstream, the example server: a child (`MCPX-BIN example-server`) or an HTTP
# server at URL. The upstream's era is pinned to ERA, so every call is a passthrough.
# The call history is on, in a database beside FILE, unless GATEWAY_HISTORY says
# otherwise (a `mcpx.history` block, or "none").
gateway_config() {
  local file="$1" bin="$2" era="$3" kind="$4" url="${5:-}"
  # The call history: GATEWAY_HISTORY's block ("none": no `mcpx` block, for builds
  # from before `mcpx.history`), else a database beside the file.
  local history="${GATEWAY_HISTORY:-}" global
  [[ -n "$history" ]] || history="{\"path\":\"${file%.json}-history.sqlite3\"}"
  global="\"mcpx\":{\"history\":$history},"
  [[ "$history" != none ]] || global=""
  if [[ "$kind" == stdio ]]; then
    printf '{%s"mcpServers":{"ex":{"command":"%s","args":["example-server"],"mcpx":{"protocol":"%s"}}}}\n' "$global" "$bin" "$era" >"$file"
  else
    printf '{%s"mcpServers":{"ex":{"type":"http","url":"%s","mcpx":{"protocol":"%s"}}}}\n' "$global" "$url" "$era" >"$file"
  fi
}

# nginx_config DIR PORT UPSTREAM-PORT [MASTER] : writes DIR/nginx.conf, nginx as the
# benchmarks measure it: in the foreground, one worker, everything it writes under DIR,
# a keepalive upstream, HTTP/1.1, the Host header passed, no buffering. MASTER "off"
# runs the worker alone (`master_process off`, for valgrind).
nginx_config() {
  local dir="$1" port="$2" up_port="$3" master="${4:-on}"
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process $master;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $dir/client_body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  upstream example { server 127.0.0.1:$up_port; keepalive 64; }
  server {
    listen 127.0.0.1:$port;
    location / {
      proxy_pass http://example;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
EOF
}
