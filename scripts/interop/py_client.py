"""Connects the Python MCP SDK's client to a server and exercises it.

    py_client.py [--tool NAME --args JSON --expect TEXT] MODE TRANSPORT TARGET...
      MODE       legacy | auto | 2026-07-28   (the SDK's `mode`: legacy handshake,
                 discover-first probing, or modern only)
      TRANSPORT  stdio (TARGET = command and args) | http | sse (TARGET = URL)

Lists tools, calls the tool (default `echo` with {"text": "interop"}, expecting the
text "interop" back), and prints one JSON line:
  {"ok": true, "protocol_version": ..., "tools": [...], "echo": "..."}
Exit status 0 on success, 1 on failure (with the error in the JSON line).
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def run(mode, transport, target, tool, args, expect):
    if transport == "stdio":
        server = StdioServerParameters(command=target[0], args=target[1:])
    elif transport == "http":
        server = target[0]
    elif transport == "sse":
        from mcp.client.sse import sse_client

        server = sse_client(target[0])
    else:
        raise SystemExit(f"unknown transport {transport}")
    async with Client(server, mode=mode, read_timeout_seconds=10) as client:
        tools = await client.list_tools()
        names = [t.name for t in tools.tools]
        result = await client.call_tool(tool, args)
        text = "".join(getattr(c, "text", "") for c in result.content)
        return {
            "ok": expect in text and not result.is_error,
            "protocol_version": client.protocol_version,
            "tools": names,
            "echo": text,
        }


def main():
    argv = sys.argv[1:]
    tool, args, expect = "echo", {"text": "interop"}, "interop"
    while argv and argv[0].startswith("--"):
        flag, value, argv = argv[0], argv[1], argv[2:]
        if flag == "--tool":
            tool = value
        elif flag == "--args":
            args = json.loads(value)
        elif flag == "--expect":
            expect = value
    mode, transport, *target = argv
    try:
        out = asyncio.run(asyncio.wait_for(run(mode, transport, target, tool, args, expect), 60))
    except BaseException as e:  # noqa: BLE001 - report anything as a failed check
        out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(out))
    sys.exit(0 if out.get("ok") else 1)


if __name__ == "__main__":
    main()
