"""A real MCP client (the Python `mcp` package from PyPI) driving `agent-exec mcp` over stdio.

Used by host-shim's integration test `mcp.rs`. argv[1] is a JSON plan:
    {"command": "<agent-exec>", "args": [...], "calls": [["tool", {arguments}], ...]}
Prints one JSON object: the server's name, the listed tools with their input schemas, and each
call's result as it arrived on the wire (camelCase names, `by_alias`).
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def wire(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main():
    plan = json.loads(sys.argv[1])
    params = StdioServerParameters(command=plan["command"], args=plan["args"], env=plan.get("env"))
    out = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = wire(await session.initialize())
            out["serverInfo"] = init.get("serverInfo")
            listed = wire(await session.list_tools())
            out["tools"] = {t["name"]: t for t in listed["tools"]}
            out["calls"] = []
            for name, arguments in plan["calls"]:
                result = wire(await session.call_tool(name, arguments))
                out["calls"].append(result)
    print(json.dumps(out))


asyncio.run(main())
