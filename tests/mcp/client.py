"""Drives `semops mcp` with the official MCP Python SDK (`mcp` from PyPI), for tests/e2e_mcp.rs.

stdin: {"command": [argv of the server], "ops": [op, ...]} (stdio), or {"url": U, "token": T,
"ops": [...]} (streamable HTTP with a bearer token); stdout: one JSON result per op.
ops: {"op": "tools"} | {"op": "call", "tool": T, "args": {...}} | {"op": "resources"} |
     {"op": "templates"} | {"op": "read", "uri": U} | {"op": "prompts"} |
     {"op": "prompt", "name": N, "args": {...}}
A tool result is checked twice against the tool's declared output schema: by the SDK itself
(ClientSession.call_tool validates structured content) and here with jsonschema (Draft 2020-12).
"""
import asyncio
import json
import sys

import jsonschema
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def transport(plan):
    if "url" in plan:
        import httpx2  # the SDK's HTTP client

        headers = {"Authorization": f"Bearer {plan['token']}"} if plan.get("token") else {}
        return streamable_http_client(plan["url"], http_client=httpx2.AsyncClient(headers=headers))
    return stdio_client(StdioServerParameters(command=plan["command"][0], args=plan["command"][1:]))


async def run(plan):
    out = []
    async with transport(plan) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            schemas = {t.name: t.output_schema for t in (await session.list_tools()).tools}
            for op in plan["ops"]:
                kind = op["op"]
                try:
                    if kind == "tools":
                        out.append(dump(await session.list_tools()))
                    elif kind == "call":
                        result = await session.call_tool(op["tool"], op.get("args", {}))
                        entry = dump(result)
                        schema = schemas.get(op["tool"])
                        if result.structured_content is not None and schema:
                            jsonschema.Draft202012Validator(schema).validate(result.structured_content)
                            entry["validated"] = True
                        out.append(entry)
                    elif kind == "resources":
                        out.append(dump(await session.list_resources()))
                    elif kind == "templates":
                        out.append(dump(await session.list_resource_templates()))
                    elif kind == "read":
                        out.append(dump(await session.read_resource(op["uri"])))
                    elif kind == "prompts":
                        out.append(dump(await session.list_prompts()))
                    elif kind == "prompt":
                        out.append(dump(await session.get_prompt(op["name"], op.get("args", {}))))
                    else:
                        raise ValueError(f"unknown op {kind}")
                except MCPError as e:
                    out.append({"protocolError": str(e)})
    return out


print(json.dumps(asyncio.run(run(json.load(sys.stdin)))))
