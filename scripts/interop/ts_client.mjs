// Connects the TypeScript MCP SDK's client to a server and makes the calls it is given.
//
//   NODE_PATH=<peers_ts_sdk>/node_modules node ts_client.mjs CALLS http URL
//   NODE_PATH=... node ts_client.mjs CALLS stdio COMMAND [ARGS...]
//
// CALLS is a JSON array of [tool, arguments]. Prints one JSON line:
//   {"ok": true, "calls": [{"tool": ..., "isError": bool} | {"tool": ..., "error": "..."}]}
// A call that fails is reported, not fatal; exit status 1 only when the client could
// not connect or list tools.

import { createRequire } from "node:module";
import path from "node:path";

// NODE_PATH is not read for ES module imports: resolve the SDK through require's paths.
const require = createRequire(path.resolve(process.env.NODE_PATH ?? ".", "noop.js"));
const sdk = (p) => import(require.resolve(`@modelcontextprotocol/sdk/${p}`));
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const [callsJson, kind, ...target] = process.argv.slice(2);
const calls = JSON.parse(callsJson);
const transport =
  kind === "http"
    ? new StreamableHTTPClientTransport(new URL(target[0]))
    : new StdioClientTransport({ command: target[0], args: target.slice(1) });
const client = new Client({ name: "mcpx-interop-ts", version: "1.0.0" });
try {
  await client.connect(transport);
  await client.listTools();
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: String(e) }));
  process.exit(1);
}
const out = [];
for (const [tool, args] of calls) {
  try {
    const r = await client.callTool({ name: tool, arguments: args });
    out.push({ tool, isError: r.isError === true });
  } catch (e) {
    out.push({ tool, error: String(e) });
  }
}
await client.close();
console.log(JSON.stringify({ ok: true, calls: out }));
