#!/usr/bin/env python3
"""Traces through mcpx, checked at a real OTLP receiver.

Usage: otlp_check.py MCPX_BIN WORK_DIR

Starts, all on 127.0.0.1:
  * an OTLP/HTTP receiver (POST /v1/traces), decoding each export with the
    opentelemetry-proto package (protobuf);
  * a 2026-07-28 Streamable HTTP upstream ("modern", tools `echo` and `fail`) that
    records the trace headers and the `_meta` trace keys of every tools/call;
  * a 2025-06-18 stdio upstream ("legacy", this script with --stdio-upstream) that
    records the `_meta` of every tools/call;
  * `mcpx serve --http` over both, with OTEL_EXPORTER_OTLP_ENDPOINT at the receiver.

Then acts as the host: a legacy (2025-06-18) session sends tools/call with a
`traceparent` header, and a 2026-07-28 request sends one in `_meta`. It checks the
spans' names, kinds and attributes, the parent links host -> mcpx server span ->
mcpx client span, and that each upstream received the client span as its parent.
Prints one line per check and "otlp: N checks passed" last; exits 1 on a failure.
Standard library and opentelemetry-proto only.
"""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST_TRACE_A = "4bf92f3577b34da6a3ce929d0e0e4736"
HOST_SPAN_A = "00f067aa0ba902b7"
HOST_TRACE_B = "0af7651916cd43dd8448eb211c80319c"
HOST_SPAN_B = "b7ad6b7169203331"


def stdio_upstream(record_path):
    """A 2025-06-18 stdio server: initialize, tools/list, tools/call (echo)."""
    with open(record_path, "a", encoding="utf-8") as record:
        for line in sys.stdin:
            msg = json.loads(line)
            method, msg_id = msg.get("method"), msg.get("id")
            if msg_id is None:
                continue
            if method == "initialize":
                result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                          "serverInfo": {"name": "legacy", "version": "1"}}
            elif method == "tools/list":
                result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
            elif method == "tools/call":
                record.write(json.dumps(msg.get("params", {}).get("_meta", {})) + "\n")
                record.flush()
                result = {"content": [{"type": "text", "text": "echo"}]}
            else:
                result = {}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
            sys.stdout.flush()


class Spans:
    def __init__(self):
        self.lock = threading.Lock()
        self.items = []

    def add(self, body):
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        req = trace_service_pb2.ExportTraceServiceRequest()
        req.ParseFromString(body)
        found = []
        for rs in req.resource_spans:
            service = {a.key: a.value.string_value for a in rs.resource.attributes}.get("service.name")
            for ss in rs.scope_spans:
                for s in ss.spans:
                    attrs = {}
                    for a in s.attributes:
                        v = a.value
                        kind = v.WhichOneof("value")
                        attrs[a.key] = getattr(v, kind) if kind else None
                    found.append({
                        "name": s.name, "kind": s.kind, "trace": s.trace_id.hex(),
                        "span": s.span_id.hex(), "parent": s.parent_span_id.hex(),
                        "attrs": attrs, "status": s.status.code, "service": service,
                    })
        with self.lock:
            self.items.extend(found)

    def snapshot(self):
        with self.lock:
            return list(self.items)


def serve(handler_class):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    mcpx, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    spans = Spans()
    modern_calls = []

    class Receiver(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/traces" or "protobuf" not in self.headers.get("Content-Type", ""):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            spans.add(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    class Modern(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, body):
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            method, msg_id = msg.get("method"), msg.get("id")
            meta = msg.get("params", {}).get("_meta", {})
            info = {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "1"}}
            if msg_id is None:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if meta.get("io.modelcontextprotocol/protocolVersion") != "2026-07-28":
                data = json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": {
                    "code": -32600, "message": "2026-07-28 only",
                    "data": {"supported": ["2026-07-28"]}}}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if method == "server/discover":
                result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                          "serverInfo": {"name": "modern", "version": "1"}, "_meta": info}
            elif method == "tools/list":
                result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}},
                                    {"name": "fail", "inputSchema": {"type": "object"}}],
                          "ttlMs": 0, "cacheScope": "private", "_meta": info}
            elif method == "tools/call":
                modern_calls.append({
                    "header": self.headers.get("traceparent"),
                    "tracestate": self.headers.get("tracestate"),
                    "meta": meta.get("traceparent"),
                    "meta_state": meta.get("tracestate"),
                })
                name = msg["params"].get("name")
                result = {"content": [{"type": "text", "text": name}], "_meta": info}
                if name == "fail":
                    result["isError"] = True
            else:
                result = {"_meta": info}
            self.answer({"jsonrpc": "2.0", "id": msg_id, "result": result})

    receiver = serve(Receiver)
    modern = serve(Modern)
    record = os.path.join(work, "legacy-meta.jsonl")
    open(record, "w").close()
    config = os.path.join(work, "otlp.json")
    with open(config, "w", encoding="utf-8") as f:
        json.dump({"mcpServers": {
            "legacy": {"command": sys.executable,
                       "args": [os.path.abspath(__file__), "--stdio-upstream", record]},
            "modern": {"url": f"http://127.0.0.1:{modern.server_address[1]}/mcp"},
        }}, f)
    port_probe = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = port_probe.server_address[1]
    port_probe.server_close()
    env = dict(os.environ,
               OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.server_address[1]}",
               OTEL_BSP_SCHEDULE_DELAY="100", OTEL_SERVICE_NAME="mcpx-under-test")
    log = open(os.path.join(work, "otlp-mcpx.log"), "w")
    proc = subprocess.Popen([mcpx, "serve", "--config", config, "--http", f"127.0.0.1:{port}"],
                            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    failures, passed = [], 0

    def check(name, ok, detail=""):
        nonlocal passed
        if ok:
            passed += 1
            print(f"PASS otlp-{name}")
        else:
            failures.append(name)
            print(f"FAIL otlp-{name} {detail}")

    try:
        url = f"http://127.0.0.1:{port}/mcp"

        def post(body, headers=()):
            req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
            req.add_header("Content-Type", "application/json")
            req.add_header("Accept", "application/json, text/event-stream")
            for k, v in headers:
                req.add_header(k, v)
            with urllib.request.urlopen(req, timeout=10) as r:
                text = r.read().decode()
                if r.headers.get("Content-Type", "").startswith("text/event-stream"):
                    text = [l[5:] for l in text.splitlines() if l.startswith("data:")][-1]
                return json.loads(text), r.headers

        deadline = time.time() + 15
        while True:
            try:
                init, headers = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "otlp-check", "version": "1"}}})
                tools, _ = post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                [("Mcp-Session-Id", headers["Mcp-Session-Id"]),
                                 ("MCP-Protocol-Version", "2025-06-18")])
                if len(tools["result"]["tools"]) == 3:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise SystemExit("otlp: mcpx did not list both upstreams' tools in 15 s")
            time.sleep(0.2)
        session = [("Mcp-Session-Id", headers["Mcp-Session-Id"]), ("MCP-Protocol-Version", "2025-06-18")]
        names = sorted(t["name"] for t in tools["result"]["tools"])
        legacy_echo = next(n for n in names if n.startswith("legacy"))
        modern_echo = next(n for n in names if n.startswith("modern") and n.endswith("echo"))
        modern_fail = next(n for n in names if n.endswith("fail"))
        parent_a = f"00-{HOST_TRACE_A}-{HOST_SPAN_A}-01"
        trace_a = session + [("traceparent", parent_a), ("tracestate", "host=a")]
        for i, tool in enumerate([legacy_echo, modern_echo, modern_fail]):
            post({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                  "params": {"name": tool, "arguments": {}}}, trace_a)
        parent_b = f"00-{HOST_TRACE_B}-{HOST_SPAN_B}-01"
        modern_meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                       "io.modelcontextprotocol/clientCapabilities": {},
                       "io.modelcontextprotocol/clientInfo": {"name": "otlp-check", "version": "1"},
                       "traceparent": parent_b}
        post({"jsonrpc": "2.0", "id": 20, "method": "tools/call",
              "params": {"name": modern_echo, "arguments": {}, "_meta": modern_meta}},
             [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"),
              ("Mcp-Name", modern_echo)])

        wanted = lambda s: s["name"].startswith("tools/call")  # noqa: E731
        deadline = time.time() + 15
        while len([s for s in spans.snapshot() if wanted(s)]) < 8 and time.time() < deadline:
            time.sleep(0.1)
        got = [s for s in spans.snapshot() if wanted(s)]
        with open(os.path.join(work, "otlp-spans.json"), "w", encoding="utf-8") as f:
            json.dump(spans.snapshot(), f, indent=1)
        check("eight-call-spans", len(got) == 8, f"got {len(got)}: {[s['name'] for s in got]}")
        SERVER, CLIENT = 2, 3  # opentelemetry.proto.trace.v1.Span.SpanKind

        def server_span(trace, tool):
            return next((s for s in got if s["kind"] == SERVER and s["trace"] == trace
                         and s["name"] == f"tools/call {tool}"), None)

        def client_of(server):
            return next((s for s in got if s["kind"] == CLIENT and server
                         and s["parent"] == server["span"]), None)

        for label, trace, host_span, tool, upstream_tool in [
            ("legacy-echo", HOST_TRACE_A, HOST_SPAN_A, legacy_echo, "echo"),
            ("modern-echo", HOST_TRACE_A, HOST_SPAN_A, modern_echo, "echo"),
            ("modern-fail", HOST_TRACE_A, HOST_SPAN_A, modern_fail, "fail"),
            ("meta-echo", HOST_TRACE_B, HOST_SPAN_B, modern_echo, "echo"),
        ]:
            s = server_span(trace, tool)
            check(f"{label}-server-span", s is not None and s["parent"] == host_span,
                  f"no server span 'tools/call {tool}' under the host's span in trace {trace}")
            c = client_of(s)
            check(f"{label}-client-span", c is not None and c["trace"] == trace
                  and c["name"] == f"tools/call {upstream_tool}",
                  f"no client span under {s and s['span']}")
            if s is None or c is None:
                continue
            sa, ca = s["attrs"], c["attrs"]
            want_server = {"mcp.method.name": "tools/call", "gen_ai.tool.name": tool,
                           "network.transport": "tcp"}
            check(f"{label}-server-attributes",
                  all(sa.get(k) == v for k, v in want_server.items())
                  and sa.get("mcp.protocol.version") in ("2025-06-18", "2026-07-28")
                  and "jsonrpc.request.id" in sa and s["service"] == "mcpx-under-test",
                  json.dumps(sa))
            if trace == HOST_TRACE_A:
                check(f"{label}-session-id", bool(sa.get("mcp.session.id")), json.dumps(sa))
            transport = "pipe" if label.startswith("legacy") else "tcp"
            check(f"{label}-client-attributes",
                  ca.get("mcp.method.name") == "tools/call" and ca.get("gen_ai.tool.name") == upstream_tool
                  and ca.get("network.transport") == transport and "jsonrpc.request.id" in ca
                  and ca.get("mcp.protocol.version") == ("2025-06-18" if transport == "pipe" else "2026-07-28"),
                  json.dumps(ca))
            if label == "modern-fail":
                ERROR = 2  # Status.StatusCode.STATUS_CODE_ERROR
                check("tool-error-type", sa.get("error.type") == "tool_error" and ca.get("error.type") == "tool_error"
                      and s["status"] == ERROR and c["status"] == ERROR, f"{sa} {ca}")
        # What the upstreams received: the client span as the parent, in the trace.
        clients = {(s["trace"], s["attrs"].get("mcpx.upstream")): [] for s in got if s["kind"] == CLIENT}
        for s in got:
            if s["kind"] == CLIENT:
                clients[(s["trace"], s["attrs"].get("mcpx.upstream"))].append(s["span"])

        def parent_ok(value, trace, upstream):
            if not value:
                return False
            parts = value.split("-")
            return parts[1] == trace and parts[2] in clients.get((trace, upstream), [])

        with open(record, encoding="utf-8") as f:
            legacy_meta = [json.loads(l) for l in f if l.strip()]
        check("legacy-stdio-upstream-got-meta-traceparent",
              len(legacy_meta) == 1 and parent_ok(legacy_meta[0].get("traceparent"), HOST_TRACE_A, "legacy")
              and legacy_meta[0].get("tracestate") == "host=a", json.dumps(legacy_meta))
        check("modern-upstream-got-three-calls", len(modern_calls) == 3, json.dumps(modern_calls))
        for i, (trace, state) in enumerate([(HOST_TRACE_A, "host=a"), (HOST_TRACE_A, "host=a"), (HOST_TRACE_B, None)]):
            if i >= len(modern_calls):
                break
            m = modern_calls[i]
            check(f"modern-upstream-call-{i}-meta-and-header",
                  parent_ok(m["meta"], trace, "modern") and m["header"] == m["meta"]
                  and m["tracestate"] == state and m["meta_state"] == state, json.dumps(m))
        check("span-ids-unique", len({s["span"] for s in got}) == len(got))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    if failures:
        print(f"otlp: {len(failures)} of {passed + len(failures)} checks failed: {', '.join(failures)}")
        sys.exit(1)
    print(f"otlp: {passed} checks passed")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--stdio-upstream":
        stdio_upstream(sys.argv[2])
    else:
        main()
