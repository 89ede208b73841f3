"""A stand-in for the real CLI whose hooks never fire (tests/test_verify.py): with ``-p PROMPT``
it talks to the model at $ANTHROPIC_BASE_URL like the real one, and runs every Bash call the model
asks for (an Agent call runs the subagent's conversation in place) without asking anyone and
without any hook or rule. ``--version`` says a version that has background sessions; ``--bg``
is not understood (it runs in the foreground and prints no session id)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

TOOLS = [{"name": name, "description": name, "input_schema": {"type": "object"}} for name in ("Bash", "Agent")]


def post(messages: list) -> dict:
    body = json.dumps({"model": "stand-in", "max_tokens": 1024, "messages": messages, "tools": TOOLS}).encode()
    request = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"].rstrip("/") + "/v1/messages", data=body,
                                     headers={"content-type": "application/json",
                                              "x-api-key": os.environ.get("ANTHROPIC_API_KEY", "")})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())


def converse(prompt: str) -> str:
    messages: list = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    for _ in range(20):
        reply = post(messages)
        messages.append({"role": "assistant", "content": reply["content"]})
        uses = [b for b in reply["content"] if b.get("type") == "tool_use"]
        if not uses:
            return " ".join(b.get("text", "") for b in reply["content"] if b.get("type") == "text")
        results = []
        for use in uses:
            if use["name"] == "Bash":
                ran = subprocess.run(use["input"]["command"], shell=True, capture_output=True, text=True)
                content = (ran.stdout + ran.stderr) or "(no output)"
            elif use["name"] == "Agent":
                content = converse(use["input"]["prompt"])
            else:
                content = f"no tool {use['name']}"
            results.append({"type": "tool_result", "tool_use_id": use["id"], "content": content})
        messages.append({"role": "user", "content": results})
    return "too many turns"


def main(argv: list[str]) -> int:
    if "--version" in argv:
        print("2.1.999 (Claude Code)")
        return 0
    if "-p" in argv:
        print(converse(argv[argv.index("-p") + 1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
