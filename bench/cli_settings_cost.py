"""What a settings source costs the real CLI's start, from its own `--debug-file` clock.

    python bench/cli_settings_cost.py [--runs 5] [--version 2.1.197]

The scripted text turn of `bench/session.py`, the real CLI alone, interleaved: with no settings
source at all (the scripted home has none), with `--settings={}`, with one PreToolUse hook
(command, HTTP, HTTP with an env-filled header), with seven HTTP hooks as the guard registers,
and with a user settings file `{}` with and without `--settings={}`. Prints, per case, the median
ms after the CLI's first debug line at which it read the managed settings file (early in its
start), finished `setup()`, and sent its first request to the model.

Why: on 2.1.197 the first settings source costs the start ~45-70 ms before the managed settings
are read and ~100-200 ms by the first request, whoever gives it, so a guarded run measured
against a bare CLI in a home without settings pays for what most users' bare CLI pays too
(`bench/RESULTS.md`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from session import SCENARIO, scripted_home  # bench/session.py: the same scripted session

from claudeguard.testing.cli_install import cli_path, install_cli
from claudeguard.testing.model_server import ModelServer

MARKS = (("managed-settings", "managed"), ("setup() completed", "setup"), ("API REQUEST", "request"))
LINE = re.compile(r"(\S+Z) \[\w+\] (.*)")


def marks(log: Path, needles: tuple[tuple[str, str], ...] = MARKS) -> dict[str, float]:
    """ms after the log's first line at which each of ``needles`` (text, name) first appears
    (bench/cli_read_rules.py asks for its own)."""
    first: float | None = None
    out: dict[str, float] = {}
    for line in log.read_text().splitlines():
        m = LINE.match(line)
        if not m:
            continue
        t = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
        first = t if first is None else first
        for needle, name in needles:
            if needle in m.group(2) and name not in out:
                out[name] = (t - first) * 1000
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--version", default="2.1.197")
    args = parser.parse_args()
    real = str(cli_path(args.version) or install_cli(args.version))
    http = {"type": "http", "url": "http://127.0.0.1:9/hook", "timeout": 30}
    with_env = dict(http, headers={"Authorization": "Bearer $TOKV"}, allowedEnvVars=["TOKV"])
    seven = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "SubagentStart", "SubagentStop", "Stop",
             "PermissionRequest")

    def settings(hook: dict[str, object], events: tuple[str, ...] = ("PreToolUse",)) -> str:
        return "--settings=" + json.dumps({"hooks": {e: [{"matcher": "*", "hooks": [hook]}] for e in events}})

    cases = {"none": [], "--settings={}": ["--settings={}"],
             "command hook": [settings({"type": "command", "command": "true"})], "http hook": [settings(http)],
             "http hook, env header": [settings(with_env)], "7 http hooks": [settings(with_env, seven)],
             "user file": [], "user file + --settings={}": ["--settings={}"]}
    found: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp, ModelServer(SCENARIO) as server:
        cwd, env = scripted_home(tmp, server.url)
        user = Path(env["HOME"], ".claude", "settings.json")
        for _ in range(args.runs):
            for name, extra in cases.items():
                if name.startswith("user file"):
                    user.parent.mkdir(parents=True, exist_ok=True)
                    user.write_text("{}")
                else:
                    user.unlink(missing_ok=True)
                log = Path(tmp, "debug.log")
                log.unlink(missing_ok=True)
                subprocess.run([real, "--allowedTools=Bash(echo *)", *extra, "-p", "say hello", f"--debug-file={log}"],
                               env=env, cwd=cwd, capture_output=True, timeout=120)
                for mark, ms in marks(log).items():
                    found.setdefault((name, mark), []).append(ms)
    out = {"version": args.version, "runs": args.runs}
    for name in cases:
        out[name] = {mark: round(statistics.median(found[(name, mark)])) for _, mark in MARKS if (name, mark) in found}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
