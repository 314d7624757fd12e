"""A real MCP client (the Python `mcp` package from PyPI) driving `agent-exec mcp` over stdio.

Used by host-shim's integration test `mcp.rs`. argv[1] is a JSON plan:
    {"command": "<agent-exec>", "args": [...], "calls": [["tool", {arguments}], ...],
     "elicitation": null | ["accept" | "accept-no" | "decline" | "cancel", ...]}
Prints one JSON object: the server's name, the listed tools with their input schemas, each
call's result as it arrived on the wire (camelCase names, `by_alias`), and the elicitation
requests the server sent (`elicitations`: their params), answered in order from the plan's list.
Without "elicitation" the client declares no elicitation capability.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client


def wire(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main():
    plan = json.loads(sys.argv[1])
    params = StdioServerParameters(command=plan["command"], args=plan["args"], env=plan.get("env"))
    out = {"elicitations": []}
    answers = list(plan.get("elicitation") or [])

    async def elicit(context, p):
        out["elicitations"].append(wire(p))
        action = answers.pop(0) if answers else "cancel"
        if action == "accept":
            return types.ElicitResult(action="accept", content={"run": True})
        if action == "accept-no":
            return types.ElicitResult(action="accept", content={"run": False})
        return types.ElicitResult(action=action)

    callback = elicit if plan.get("elicitation") is not None else None
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=callback) as session:
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
