"""Two or more checkouts of claudeguard against each other, interleaved, on the real CLIs.

    python bench/compare.py --trees before=../main-copy,after=. [--runs 12] [--versions 2.1.330,2.1.197]
                            [--only claude,text,tool,ten,own,until] [--user-settings]

Each tree runs as `python <tree>/bin/claudeguard` with `PYTHONPATH=<tree>` (byte-compile each tree
first: `python -m compileall -q <tree>/claudeguard`), with its own runtime dir, so each has its own
resident service (a service of another fingerprint would be retired at every switch). A tree can
be any copy of the repository, e.g. `git archive main | tar -x -C /some/dir`. One round runs every
case once, in order; the first round warms up (the services start) and is not counted. Cases:

- `claude text|tool`: the real CLI alone (the scripted text turn, the turn with one Bash call);
- `<tree> text|tool|ten`: `claudeguard -p` of that tree, the service warm (`ten`: issue 11's
  session of ten Bash calls; `claude ten` is its bare run, with `claude`);
- `<tree> own`: `claudeguard -p` in front of a stand-in CLI (`true`, in an npm-like layout so the
  version lookup finds a package.json as it would for the real CLI): our own start and end alone;
- `<tree> until`: from starting `claudeguard -p` to its child's first instruction.

Prints one line per case: median, 25th percentile and minimum wall time in ms, and the median CPU
time (user + system) of the process tree that ran (the resident service not included). With other
work on the machine the medians move by tens of ms between runs; the lower quantiles and the CPU
time move less.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from session import SCENARIO, scripted_home  # bench/session.py: the same scripted session

from claudeguard.testing.cli_install import cli_path, install_cli
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.services import stop_services

KINDS = ("claude", "text", "tool", "ten", "own", "until")


def _once(argv: list[str], env: dict[str, str], cwd: Path, expect: str | None, until: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the children); for ``until`` the wall time to the child's start."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    wall = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if expect is not None and expect not in proc.stdout:
        raise SystemExit(f"{argv[:2]}: expected {expect!r}, got {proc.stdout[-200:]!r} {proc.stderr[-300:]!r}")
    if until:
        wall = float(proc.stdout.strip()) - start
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trees", required=True, help="name=path,name=path,...")
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--versions", default="2.1.330,2.1.197")
    parser.add_argument("--only", default=",".join(KINDS))
    # A home with a Claude user settings file, as most users have (session.scripted_home).
    parser.add_argument("--user-settings", action="store_true")
    args = parser.parse_args()
    trees = {name: str(Path(path).resolve()) for name, _, path in (t.partition("=") for t in args.trees.split(","))}
    only = set(args.only.split(","))
    versions = args.versions.split(",")
    with tempfile.TemporaryDirectory() as tmp, ModelServer(SCENARIO) as server:
        cwd, base = scripted_home(tmp, server.url, args.user_settings)
        stamp = Path(tmp, "stamp")
        stamp.write_text("#!/bin/sh\nexec date +%s.%N\n")
        stamp.chmod(0o755)
        package = Path(tmp, "npm", "node_modules", "@anthropic-ai", "claude-code")
        (package / "bin").mkdir(parents=True)
        (package / "package.json").write_text('{"name": "@anthropic-ai/claude-code", "version": "0.0.0"}')
        true = package / "bin" / "claude.exe"
        shutil.copy(shutil.which("true") or "/bin/true", true)
        cases: dict[str, tuple[list[str], dict[str, str], str | None, bool]] = {}
        for version in versions:
            real = str(cli_path(version) or install_cli(version))
            allow = "--allowedTools=Bash(echo *)"
            if "claude" in only:
                cases[f"{version} claude text"] = ([real, allow, "-p", "say hello"], base, "hello", False)
                cases[f"{version} claude tool"] = ([real, allow, "-p", "run a tool"], base, "done", False)
                if "ten" in only:
                    cases[f"{version} claude ten"] = ([real, allow, "-p", "run ten tools"], base, "all ten done", False)
            for name, root in trees.items():
                env = dict(base, PYTHONPATH=root, CLAUDEGUARD_RUNTIME_DIR=str(Path(tmp, f"runtime-{name}")),
                           CLAUDEGUARD_CLAUDE=real)
                guard = [sys.executable, str(Path(root, "bin", "claudeguard"))]
                if "text" in only:
                    cases[f"{version} {name} text"] = (guard + ["-p", "say hello"], env, "hello", False)
                if "tool" in only:
                    cases[f"{version} {name} tool"] = (guard + ["-p", "run a tool"], env, "done", False)
                if "ten" in only:
                    cases[f"{version} {name} ten"] = (guard + ["-p", "run ten tools"], env, "all ten done", False)
                if version == versions[0] and "own" in only:
                    cases[f"{name} own"] = (guard + ["-p", "x"], dict(env, CLAUDEGUARD_CLAUDE=str(true)), None, False)
                if version == versions[0] and "until" in only:
                    cases[f"{name} until"] = (guard + ["-p", "x"], dict(env, CLAUDEGUARD_CLAUDE=str(stamp)), None, True)
        walls: dict[str, list[float]] = {name: [] for name in cases}
        cpus: dict[str, list[float]] = {name: [] for name in cases}
        load = os.getloadavg()[0]
        for round_ in range(args.runs + 1):
            for name, (argv, env, expect, until) in cases.items():
                wall, cpu = _once(argv, env, cwd, expect, until)
                if round_:
                    walls[name].append(wall)
                    cpus[name].append(cpu)
        stop_services(Path(tmp))
    print(f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; {args.runs} rounds")
    print(f"{'case':28} {'median':>8} {'p25':>8} {'min':>8} {'cpu':>8}")
    for name, values in walls.items():
        p25 = statistics.quantiles(values, n=4, method="inclusive")[0] if len(values) > 1 else values[0]
        cpu = "" if cases[name][3] else f"{statistics.median(cpus[name]) * 1000:8.1f}"
        print(f"{name:28} {statistics.median(values) * 1000:8.1f} {p25 * 1000:8.1f} {min(values) * 1000:8.1f} {cpu}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
