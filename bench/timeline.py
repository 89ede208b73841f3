"""Where a guarded run's extra time lands inside the CLI: when each stream-json message arrives.

    python bench/timeline.py [--runs 8] [--version 2.1.330] [--user-settings]

The scripted text turn of `bench/session.py`, with `--output-format stream-json --verbose`,
interleaved: the real CLI alone, then `claudeguard -p` with the CLI launched through a wrapper
that drops some of the guard's flags before it execs the real CLI (the wrapper's own start is in
every guarded column, so compare those with each other): all of them, no prompt tool
(`--mcp-config`, `--permission-prompt-tool`: nothing to drop on 2.1.330, whose `-p` asks through
the PermissionRequest hook), no hooks (`--settings`), neither. Prints the median
ms after the start at which `system/init`, the assistant message and the result arrived, and the
exit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from session import SCENARIO, scripted_home  # bench/ is on the path now

from claudeguard.testing.cli_install import cli_path, install_cli
from claudeguard.testing.model_server import ModelServer

# Exec'd by claudeguard as the "CLI": drops the flags named in STRIP, then execs REAL_CLAUDE.
WRAPPER = """#!{python}
import os, sys
drop = [d for d in os.environ.get("STRIP", "").split(",") if d]
args = [a for a in sys.argv[1:] if not any(a.startswith(d) for d in drop)]
os.execv(os.environ["REAL_CLAUDE"], [os.environ["REAL_CLAUDE"], *args])
"""
STRIPS = {"guard": "", "guard-no-prompt-tool": "--mcp-config,--permission-prompt-tool",
          "guard-no-hooks": "--settings", "guard-neither": "--mcp-config,--permission-prompt-tool,--settings"}


def timeline(argv: list[str], env: dict[str, str], cwd: Path) -> dict[str, float]:
    """Seconds after the start at which each message type first arrived, and the exit."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    marks: dict[str, float] = {}
    for line in proc.stdout:
        at = time.perf_counter() - t0
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        marks.setdefault(msg.get("type", "?") + ("/" + msg["subtype"] if msg.get("subtype") else ""), at)
    proc.wait(timeout=120)
    marks["exit"] = time.perf_counter() - t0
    if "result/success" not in marks:
        raise SystemExit(f"{argv[0]}: no successful result (exit {proc.returncode})")
    return marks


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--version", default="2.1.330")
    # A home with a Claude user settings file, as most users have (session.scripted_home).
    parser.add_argument("--user-settings", action="store_true")
    args = parser.parse_args()
    real = str(cli_path(args.version) or install_cli(args.version))
    guard = str(Path(sys.executable).with_name("claudeguard"))
    fmt = ["--output-format", "stream-json", "--verbose", "-p", "say hello"]
    with tempfile.TemporaryDirectory() as tmp, ModelServer(SCENARIO) as server:
        cwd, env = scripted_home(tmp, server.url, args.user_settings)
        # The wrapper stands for the real CLI, so it carries its npm package.json: the guard reads
        # the version there (plan/cli_version.py) and injects what it would for it.
        Path(tmp, "cli").mkdir()
        Path(tmp, "cli", "package.json").write_text(json.dumps({"name": "@anthropic-ai/claude-code",
                                                                "version": args.version}))
        wrapper = Path(tmp, "cli", "strip")
        wrapper.write_text(WRAPPER.format(python=sys.executable))
        wrapper.chmod(0o755)
        cases = {"claude": ([real, "--allowedTools=Bash(echo *)", *fmt], env)}
        for name, strip in STRIPS.items():
            cases[name] = ([guard, *fmt], dict(env, CLAUDEGUARD_CLAUDE=str(wrapper), REAL_CLAUDE=real, STRIP=strip))
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
        for argv, case_env in cases.values():  # warm-up (and the service's start)
            timeline(argv, case_env, cwd)
        for _ in range(args.runs):
            for name, (argv, case_env) in cases.items():
                rows[name].append(timeline(argv, case_env, cwd))
        out: dict[str, object] = {"version": args.version, "runs": args.runs, "load": os.getloadavg()[0]}
        for name, marks in rows.items():
            out[name] = {k: round(statistics.median(m.get(k, float("nan")) for m in marks) * 1000) for k in marks[0]}
        from claudeguard.testing.services import stop_services

        stop_services(Path(tmp))  # the resident service the guarded runs started, by pid
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
