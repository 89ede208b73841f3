"""How the real CLI applies ``CLAUDE_CODE_SHELL_PREFIX`` (issue 24: can it confine every Bash call?).

    python bench/shell_prefix_probe.py [--versions 2.1.197,2.1.330,2.1.332] [--cases a,b,...]

Offline against the scripted model server, in a throwaway lab per case. The prefix is a logging
wrapper script (``wrap-A``: it appends its argv, its parent's pid and a few variables to a log,
then runs ``bash -c "$1"`` for one argument or execs its arguments) and, where a case says so, a
settings ``env`` block names a second one (``wrap-B``). The model makes, in order: a foreground
Bash call that ``cd``s into a sub-directory, a Bash call that prints ``pwd`` (does a ``cd`` carry
over?), a background Bash call (``run_in_background``), and a last Bash call. A PreToolUse
command hook and an MCP stdio server are configured in ``--settings``: does the prefix wrap them
too? Prints one JSON object per case: which wrapper saw which command (argv shape), what each
call printed, and the hook's and MCP server's logs.

Cases:

- ``env``: the prefix in the CLI's environment only;
- ``project-env``, ``local-env``, ``user-env``: + that settings file's ``env`` names ``wrap-B``;
- ``project-empty``: + the project's ``env`` sets the prefix to ``""``;
- ``settings-env``: the prefix in ``--settings``' ``env`` block only (not in the environment);
- ``settings-vs-project``: ``--settings`` env names ``wrap-A``, the project's ``wrap-B``;
- ``settings-vs-user``, ``settings-vs-local``: the same against the user's and the local file;
- ``managed-vs-settings``: ``--settings`` env names ``wrap-A``, ``--managed-settings`` JSON ``wrap-B``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from claudeguard.testing.cli_install import cli_path
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.offline_home import offline_env, prepare_home

KEY = "sk-ant-probe-0123456789abcdefghijklmnopqrstuv"
CASES = ("env", "project-env", "local-env", "user-env", "project-empty", "settings-env", "settings-vs-project",
         "settings-vs-user", "settings-vs-local", "managed-vs-settings")

WRAPPER = r"""#!/bin/bash
# A stand-in for the sandbox's prefix: log how the CLI called it, then run what it was given.
python3 -c 'import json, os, sys
print(json.dumps({"wrapper": sys.argv[1], "ppid": os.getppid(), "args": sys.argv[3:],
                  "project_dir": os.environ.get("CLAUDE_PROJECT_DIR")}),
      file=open(sys.argv[2], "a"))' "@NAME@" "@LOG@" "$@"
if [ "$#" -eq 1 ]; then exec /bin/bash -c "$1"; fi
exec "$@"
"""

MCP_SERVER = r"""import json, os, sys
log = open(sys.argv[1], "a")
log.write(json.dumps({"mcp_argv": sys.argv, "prefix_env": os.environ.get("CLAUDE_CODE_SHELL_PREFIX")}) + "\n")
log.flush()
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg.get("method") == "initialize":
        res = {"protocolVersion": msg["params"].get("protocolVersion", "2024-11-05"), "capabilities": {"tools": {}},
               "serverInfo": {"name": "probe", "version": "0"}}
    elif msg.get("method") == "tools/list":
        res = {"tools": []}
    else:
        res = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": res}) + "\n")
    sys.stdout.flush()
"""


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def run_case(version: str, case: str, timeout: float = 120) -> dict[str, Any]:
    claude = cli_path(version)
    if claude is None:
        raise SystemExit(f"CLI {version} not installed: python -m claudeguard.testing.cli_install {version}")
    root = Path(tempfile.mkdtemp(prefix="prefix-probe-"))
    try:
        home, work = root / "home", root / "work"
        (work / "sub").mkdir(parents=True)
        prepare_home(home, cwd=work, api_key=KEY)
        log = root / "wrap.log"
        wrappers = {}
        for name in ("A", "B"):
            path = root / f"wrap-{name}"
            path.write_text(WRAPPER.replace("@NAME@", name).replace("@LOG@", str(log)))
            path.chmod(0o755)
            wrappers[name] = str(path)
        (root / "mcp.py").write_text(MCP_SERVER)
        hook_log = root / "hook.log"
        settings: dict[str, Any] = {
            "permissions": {"allow": ["Bash"]},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": f"echo HOOK-RAN >> {hook_log}"}]}]},
        }
        server = {"command": sys.executable, "args": [str(root / "mcp.py"), str(root / "mcp.log")]}
        mcp = {"mcpServers": {"probe": server}}
        _write(root / "mcp.json", mcp)
        env_prefix: str | None = wrappers["A"]
        other = {"env": {"CLAUDE_CODE_SHELL_PREFIX": wrappers["B"]}}
        if case == "project-env":
            _write(work / ".claude" / "settings.json", other)
        elif case == "local-env":
            _write(work / ".claude" / "settings.local.json", other)
        elif case == "user-env":
            _write(home / ".claude" / "settings.json", other)
        elif case == "project-empty":
            _write(work / ".claude" / "settings.json", {"env": {"CLAUDE_CODE_SHELL_PREFIX": ""}})
        elif case.startswith("settings-"):
            env_prefix = None
            settings["env"] = {"CLAUDE_CODE_SHELL_PREFIX": wrappers["A"]}
            target = {"settings-vs-project": work / ".claude" / "settings.json",
                      "settings-vs-user": home / ".claude" / "settings.json",
                      "settings-vs-local": work / ".claude" / "settings.local.json"}.get(case)
            if target is not None:
                _write(target, other)
        extra: list[str] = []
        if case == "managed-vs-settings":
            extra = ["--managed-settings", json.dumps(other)]
        _write(root / "settings.json", settings)
        calls = [
            {"tool_use": {"name": "Bash", "input": {"command": "cd sub && echo FG-RAN", "description": "fg"}}},
            {"tool_use": {"name": "Bash", "input": {"command": "pwd", "description": "where"}}},
            {"tool_use": {"name": "Bash", "input": {"command": "echo BG-RAN > bg.out", "description": "bg",
                                                    "run_in_background": True}}},
            {"tool_use": {"name": "Bash", "input": {"command": "sleep 1; cat bg.out ../bg.out 2>/dev/null; echo LAST",
                                                    "description": "last"}}},
            {"text": "probe done"},
        ]
        scenario = [{"match": "probe the prefix", "turns": calls}]
        with ModelServer(scenario) as server:
            env = offline_env(home, server.url, KEY)
            if env_prefix is not None:
                env["CLAUDE_CODE_SHELL_PREFIX"] = env_prefix
            argv = [str(claude), "--settings", str(root / "settings.json"), "--mcp-config", str(root / "mcp.json"),
                    *extra, "-p", "probe the prefix", "--output-format", "stream-json", "--verbose"]
            start = time.monotonic()
            proc = subprocess.run(argv, env=env, cwd=work, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout, start_new_session=True)
            elapsed = time.monotonic() - start
            results = [r["content"] for r in server.tool_results()]
        rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        seen = []
        for row in rows:
            seen.append({"wrapper": row["wrapper"], "args": [a[:400] if "source " not in a else a for a in row["args"]],
                         "project_dir": row["project_dir"]})
        return {"version": version, "case": case, "exit": proc.returncode, "elapsed_s": round(elapsed, 1),
                "wrapper_calls": seen, "tool_results": [r[:200] for r in results],
                "hook_ran": hook_log.read_text().count("HOOK-RAN") if hook_log.exists() else 0,
                "mcp": (root / "mcp.log").read_text().strip().splitlines() if (root / "mcp.log").exists() else [],
                "stderr": proc.stderr[-300:]}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--versions", default="2.1.197,2.1.330,2.1.332")
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    for version in args.versions.split(","):
        for case in args.cases.split(","):
            print(json.dumps(run_case(version, case)), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.pop("CLAUDE_CODE_SHELL_PREFIX", None)
    sys.exit(main())
