"""A real MCP client (the Python `mcp` package from PyPI) driving `background_command` over
`agent-exec mcp` on stdio. Used by the integration test `mcp_background.rs`.

argv[1] is a JSON plan:
    {"command": "<program>", "args": [...], "env": {...}, "errlog": "<file for the server's stderr>",
     "watch": "<marker>", "leave": "<marker>", "patience": <seconds>}
The client, in one connection:
  1. starts a watcher (`sh -c "echo 'serving --watch'; sleep 1; echo 'ERROR: broken'; sleep <watch>"`),
     reads its logPath with `read` until the first line is there, waits for its keyword report,
     asks `background_status`, cancels it and waits for its `finished` event;
  2. starts two legs of group `g1` and waits for the group's `groupCompleted`;
  3. sets the logging level to `warning`, starts a long sleeper (`sleep <leave>`) and leaves
     with it running (the server must stop it).
It prints one JSON object: the results and every `notifications/message` as it arrived
(`notices`), plus what it saw in /proc and on disk at each step. Nothing is asserted here but
liveness (each wait is bounded by `patience`): the Rust test judges.
"""

import asyncio
import json
import os
import sys
import time
import warnings

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

# logging/setLevel is deprecated from the 2026-07-28 revision on; this server speaks earlier ones.
warnings.simplefilter("ignore")


def wire(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def alive(marker):
    """True when a process has `marker` as one of its arguments."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if marker.encode() in args:
            return True
    return False


def result(call):
    """The tool's JSON result (the one text block) and whether it is a tool error."""
    r = wire(call)
    return json.loads(r["content"][0]["text"]), r.get("isError", False)


async def main():
    plan = json.loads(sys.argv[1])
    patience = plan.get("patience", 60)
    notices = []

    async def on_log(params):
        notices.append(wire(params))

    def events(kind, **fields):
        return [
            n["data"]
            for n in notices
            if n.get("logger") == "agent-exec/background"
            and n["data"].get("event") == kind
            and all(n["data"].get(k) == v for k, v in fields.items())
        ]

    async def until(what, check):
        deadline = time.monotonic() + patience
        while True:
            got = check()
            if got:
                return got
            if time.monotonic() > deadline:
                raise SystemExit(f"waited {patience}s for {what}; notices: {json.dumps(notices)}")
            await asyncio.sleep(0.05)

    out = {}
    params = StdioServerParameters(command=plan["command"], args=plan["args"], env=plan.get("env"))
    with open(plan["errlog"], "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, logging_callback=on_log) as session:
                init = wire(await session.initialize())
                out["capabilities"] = init["capabilities"]
                out["tools"] = sorted(t["name"] for t in wire(await session.list_tools())["tools"])

                # 1. A watcher: started at once, its log readable, its report heard, cancelled.
                script = f"echo 'serving --watch'; sleep 1; echo 'ERROR: broken'; sleep {plan['watch']}"
                started, err = result(await session.call_tool("background_command", {
                    "argv": ["sh", "-c", script],
                    "objective": "watch the dev server",
                    "next": "fix what broke",
                }))
                out["watch_started"] = started
                out["watch_started_error"] = err
                task = started.get("taskId")
                # What had been heard of it when the start came back (it runs on).
                out["watch_ended_at_start"] = bool(events("finished", taskId=task))
                log_path = started.get("logPath")
                out["log_existed"] = bool(log_path) and os.path.exists(log_path)

                async def read_log():
                    r, e = result(await session.call_tool("read", {"path": log_path}))
                    return r if not e and "serving --watch" in r.get("content", "") else None

                deadline = time.monotonic() + patience
                while True:
                    r = await read_log()
                    if r:
                        out["log_read"] = r
                        break
                    if time.monotonic() > deadline:
                        r, e = result(await session.call_tool("read", {"path": log_path}))
                        raise SystemExit(f"the log never held the first line: {r}")
                    await asyncio.sleep(0.1)

                out["report"] = (await until("the keyword report", lambda: events("report", taskId=task)))[0]
                out["status"], out["status_error"] = result(
                    await session.call_tool("background_status", {"taskId": task}))
                out["watch_alive_before_cancel"] = alive(plan["watch"])
                out["log_exists_before_cancel"] = os.path.exists(log_path)
                out["cancel"], out["cancel_error"] = result(
                    await session.call_tool("background_cancel", {"taskId": task}))
                out["finished"] = (await until("the finished event", lambda: events("finished", taskId=task)))[0]
                out["watch_alive_after_finished"] = alive(plan["watch"])
                out["log_exists_after_finished"] = os.path.exists(log_path)
                out["read_after_finished"], out["read_after_finished_error"] = result(
                    await session.call_tool("read", {"path": log_path}))

                # 2. A group of two legs: one groupCompleted with both.
                legs = []
                for name, script in [("a", "sleep 1; echo a"), ("b", "sleep 2; echo FAIL b")]:
                    r, e = result(await session.call_tool("background_command", {
                        "argv": ["sh", "-c", script],
                        "group": "g1",
                        "objective": f"leg {name}",
                        "next": f"merge {name}",
                    }))
                    legs.append(r)
                out["legs"] = legs
                out["group_completed"] = (await until(
                    "the group's completion",
                    lambda: [e for e in events("groupCompleted") if e["origin"]["task"] == "group:g1"]))[0]

                # 3. Only warnings and worse from now on; a sleeper left running at the end.
                await session.set_logging_level("warning")
                out["leave_started"], out["leave_started_error"] = result(
                    await session.call_tool("background_command", {"argv": ["sleep", plan["leave"]]}))
                await until("the sleeper", lambda: alive(plan["leave"]))
                out["leave_status"], _ = result(await session.call_tool("background_status", {}))
                out["leave_log"] = out["leave_started"].get("logPath")
                await asyncio.sleep(0.5)
    out["notices"] = notices
    print(json.dumps(out))


asyncio.run(main())
