"""An Agent SDK program as a test's host (tests/test_ide_wrapper.py): the official Python Agent
SDK (claude-agent-sdk) runs ``cli_path`` (a script that starts the user's wrapper the way VS
Code's claudeCode.claudeProcessWrapper does: ``<wrapper> <absolute path of the CLI> <args...>``)
with a ``can_use_tool`` callback, and writes what happened as JSON to the file named last.

    python sdk_host.py CLI_PATH PROMPT PLAN.json OUT.json

PLAN maps a Bash command to what the callback does when asked about it: "allow", "deny",
"wait" (never answers: the guard's channel must), or {"allow_as": {...}} (allow with that
updatedInput). Every question is recorded, with "cancelled" when the CLI took it back."""

from __future__ import annotations

import asyncio
import json
import sys

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient
from claude_agent_sdk.types import PermissionResultAllow, PermissionResultDeny, ResultMessage


async def main(cli_path: str, prompt: str, plan: dict, out_path: str) -> int:
    asked: list[dict] = []

    async def can_use_tool(tool_name, tool_input, context):
        entry = {"tool": tool_name, "input": tool_input, "tool_use_id": context.tool_use_id, "answer": None}
        asked.append(entry)
        what = plan.get(tool_input.get("command", ""), "deny")
        if what == "wait":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                entry["answer"] = "cancelled"
                raise
        if isinstance(what, dict):
            entry["answer"] = "allow_as"
            return PermissionResultAllow(updated_input=what["allow_as"])
        entry["answer"] = what
        if what == "allow":
            return PermissionResultAllow(updated_input=tool_input)
        return PermissionResultDeny(message="denied in the host")

    options = ClaudeAgentOptions(cli_path=cli_path, can_use_tool=can_use_tool, permission_mode="default",
                                 setting_sources=["user"])
    result = None
    async with ClaudeSDKClient(options=options) as client:
        await client.query(prompt)
        async for message in client.receive_response():
            if isinstance(message, ResultMessage):
                denials = [d.get("tool_input", {}).get("command") for d in message.permission_denials or []]
                result = {"subtype": message.subtype, "is_error": message.is_error, "denials": denials}
    with open(out_path, "w") as fh:
        json.dump({"asked": asked, "result": result}, fh)
    return 0


if __name__ == "__main__":
    cli, text, plan_file, out = sys.argv[1:5]
    with open(plan_file) as fh:
        steps = json.load(fh)
    sys.exit(asyncio.run(main(cli, text, steps, out)))
