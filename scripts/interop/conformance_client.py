#!/usr/bin/env python3
"""A client for the official conformance suite's *client* scenarios whose client under
test is mcpx's upstream side.

The suite starts a scenario server and runs this script with the server's URL as the
last argument (and the scenario's name in MCP_CONFORMANCE_SCENARIO, its data in
MCP_CONFORMANCE_CONTEXT). The script runs `mcpx serve` on stdio with that URL as its one
Streamable HTTP upstream and drives it as a 2025-11-25 host would: it lists the tools,
resources and prompts, calls every tool (with the scenario's arguments when the context
names them, else with arguments made from the tool's input schema; the schema-echo
scenario's echo tool gets the focal tool's schema as mcpx showed it), reads the first
resource, gets the first prompt, and answers what mcpx asks it (an elicitation with the
schema's defaults, a sampling request, roots). So every request the scenario server
sees is mcpx's.

Needs MCPX_BIN (the mcpx binary). Exits 0 when the session ran to its end; what the
scenario server saw is the suite's to judge.
"""
import json
import os
import subprocess
import sys
import tempfile

HOST_REVISION = "2025-11-25"


def sample_value(schema):
    """A value that satisfies the simple schemas scenario tools use."""
    if not isinstance(schema, dict):
        return "x"
    if "default" in schema:
        return schema["default"]
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind in ("number", "integer"):
        return 1
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return arguments_for(schema)
    return "x"


def arguments_for(schema):
    props = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or [])
    return {k: sample_value(v) for k, v in props.items() if k in required or "default" in v}


class Host:
    def __init__(self, proc):
        self.proc = proc
        self.next_id = 1

    def send(self, frame):
        self.proc.stdin.write(json.dumps(frame) + "\n")
        self.proc.stdin.flush()

    def answer(self, req):
        method, params = req.get("method"), req.get("params") or {}
        if method == "elicitation/create":
            schema = params.get("requestedSchema") or {}
            content = {
                k: v["default"]
                for k, v in (schema.get("properties") or {}).items()
                if isinstance(v, dict) and "default" in v
            }
            content.update({k: sample_value(v) for k, v in (schema.get("properties") or {}).items()
                            if k in (schema.get("required") or []) and k not in content})
            result = {"action": "accept", "content": content}
        elif method == "sampling/createMessage":
            result = {"role": "assistant", "content": {"type": "text", "text": "ok"},
                      "model": "conformance-host"}
        elif method == "roots/list":
            result = {"roots": []}
        elif method == "ping":
            result = {}
        else:
            self.send({"jsonrpc": "2.0", "id": req["id"],
                       "error": {"code": -32601, "message": f"no {method} here"}})
            return
        self.send({"jsonrpc": "2.0", "id": req["id"], "result": result})

    def request(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        frame = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            frame["params"] = params
        self.send(frame)
        for line in self.proc.stdout:
            msg = json.loads(line)
            if msg.get("id") == rid and "method" not in msg:
                print(f"{method}: {json.dumps(msg)[:300]}", file=sys.stderr)
                return msg
            if "method" in msg and "id" in msg:
                self.answer(msg)
        raise SystemExit(f"mcpx ended before answering {method}")


def main():
    # The suite names its servers `localhost`; mcpx talks to 127.0.0.1 only.
    url = sys.argv[-1].replace("//localhost:", "//127.0.0.1:", 1)
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory() as d:
        config = os.path.join(d, "mcpx.json")
        with open(config, "w") as f:
            json.dump({"mcpServers": {"scenario": {"type": "http", "url": url}}}, f)
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(d, "cache"))
        proc = subprocess.Popen([os.environ["MCPX_BIN"], "serve", "--config", config],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                env=env)
        host = Host(proc)
        init = host.request("initialize", {
            "protocolVersion": HOST_REVISION,
            "capabilities": {"elicitation": {"form": {}}, "sampling": {}, "roots": {}},
            "clientInfo": {"name": "mcpx-conformance-host", "version": "1"}})
        if "result" not in init:
            raise SystemExit(f"initialize failed: {init}")
        host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        caps = init["result"].get("capabilities") or {}
        calls = context.get("toolCalls")
        if "tools" in caps:
            tools = (host.request("tools/list", {}).get("result") or {}).get("tools") or []
            if calls is None:
                calls = [{"name": t["name"], "arguments": arguments_for(t.get("inputSchema"))}
                         for t in tools]
            if os.environ.get("MCP_CONFORMANCE_SCENARIO") == "json-schema-2020-12-preservation":
                # The scenario's echo tool takes back the schema the client was shown
                # for its focal tool: here, the one mcpx passed on.
                focal = next((t for t in tools if t["name"] == "json_schema_2020_12_tool"), {})
                for call in calls:
                    if "schema" in call["arguments"]:
                        call["arguments"]["schema"] = focal.get("inputSchema")
            for call in calls:
                host.request("tools/call", {"name": call["name"],
                                            "arguments": call.get("arguments") or {}})
        if "resources" in caps:
            res = (host.request("resources/list", {}).get("result") or {}).get("resources") or []
            if res:
                host.request("resources/read", {"uri": res[0]["uri"]})
        if "prompts" in caps:
            ps = (host.request("prompts/list", {}).get("result") or {}).get("prompts") or []
            if ps:
                args = {a["name"]: "x" for a in ps[0].get("arguments") or [] if a.get("required")}
                host.request("prompts/get", {"name": ps[0]["name"], "arguments": args})
        proc.stdin.close()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
