"""Connects the Python MCP SDK's client to a server and exercises it.

    py_client.py MODE TRANSPORT TARGET...
      MODE       legacy | auto | 2026-07-28   (the SDK's `mode`: legacy handshake,
                 discover-first probing, or modern only)
      TRANSPORT  stdio (TARGET = command and args) | http | sse (TARGET = URL)

Lists tools, calls `echo`, and prints one JSON line:
  {"ok": true, "protocol_version": ..., "tools": [...], "echo": "..."}
Exit status 0 on success, 1 on failure (with the error in the JSON line).
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def run(mode, transport, target):
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
        result = await client.call_tool("echo", {"text": "interop"})
        text = "".join(getattr(c, "text", "") for c in result.content)
        return {
            "ok": text == "interop" and not result.is_error,
            "protocol_version": client.protocol_version,
            "tools": names,
            "echo": text,
        }


def main():
    mode, transport, *target = sys.argv[1:]
    try:
        out = asyncio.run(asyncio.wait_for(run(mode, transport, target), 30))
    except BaseException as e:  # noqa: BLE001 - report anything as a failed check
        out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(out))
    sys.exit(0 if out.get("ok") else 1)


if __name__ == "__main__":
    main()
