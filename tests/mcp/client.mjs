// Drives `semops mcp` with the official MCP TypeScript SDK (@modelcontextprotocol/sdk from npm),
// for tests/e2e_mcp.rs: the same plan and answers as client.py. The SDK's Client validates each
// tool's structured content against its declared output schema (Ajv) and throws when it does not
// match; a result that passed is marked `validated`.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const plan = JSON.parse(Buffer.concat(chunks).toString());
const client = new Client({ name: "semops-e2e", version: "1" });
if (plan.url) {
  const headers = plan.token ? { Authorization: `Bearer ${plan.token}` } : {};
  await client.connect(new StreamableHTTPClientTransport(new URL(plan.url), { requestInit: { headers } }));
} else {
  const [command, ...args] = plan.command;
  await client.connect(new StdioClientTransport({ command, args, stderr: "inherit" }));
}
await client.listTools(); // the SDK caches the output schemas it validates against
const out = [];
for (const op of plan.ops) {
  try {
    switch (op.op) {
      case "tools": out.push(await client.listTools()); break;
      case "call": {
        const r = await client.callTool({ name: op.tool, arguments: op.args ?? {} });
        if (r.structuredContent !== undefined) r.validated = true;
        out.push(r);
        break;
      }
      case "resources": out.push(await client.listResources()); break;
      case "templates": out.push(await client.listResourceTemplates()); break;
      case "read": out.push(await client.readResource({ uri: op.uri })); break;
      case "prompts": out.push(await client.listPrompts()); break;
      case "prompt": out.push(await client.getPrompt({ name: op.name, arguments: op.args ?? {} })); break;
      default: throw new Error(`unknown op ${op.op}`);
    }
  } catch (e) {
    out.push({ protocolError: String(e.message ?? e) });
  }
}
await client.close();
process.stdout.write(JSON.stringify(out));
