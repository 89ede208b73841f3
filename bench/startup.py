"""Median wall time of `claudeguard --version` against the real `claude --version`, interleaved.

    python bench/startup.py [--runs 40] [--claude PATH]

The guard is run the way users run it: the installed `claudeguard` next to this interpreter (the
hand-written script of bin/), with no config file, the real CLI found on PATH (behind bin/claude)
or named by CLAUDEGUARD_CLAUDE. For comparison the same run times the console script pip would
generate from a `[project.scripts]` entry (pip's own template, written to a temporary file): it
imports `re` before our code runs. Prints one JSON object.
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

# What pip (distlib) writes for `claudeguard = "claudeguard.shim.main:main"` (pip 23 to 26).
CONSOLE_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from claudeguard.shim.main import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def _time(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--claude", help="the real CLI (default: the pinned 2.1.330 in the cache)")
    args = parser.parse_args()
    if args.claude:
        claude = args.claude
    else:
        from claudeguard.testing.cli_install import cli_path, install_cli

        claude = str(cli_path("2.1.330") or install_cli("2.1.330"))
    guard = Path(sys.executable).with_name("claudeguard")
    with tempfile.TemporaryDirectory() as tmp:
        # No config file anywhere (HOME and XDG_CONFIG_HOME are empty, the cwd is a fresh
        # repository), as on most machines. The real CLI is found two ways: as users of the alias
        # have it (PATH, with bin/claude ahead of it, which discovery must skip), and through
        # CLAUDEGUARD_CLAUDE.
        os.mkdir(os.path.join(tmp, ".git"))
        base = dict(os.environ, XDG_CONFIG_HOME=tmp, HOME=tmp)
        base.pop("CLAUDEGUARD_CONFIG", None)
        base.pop("CLAUDEGUARD_CLAUDE", None)
        repo_bin = str(Path(__file__).resolve().parents[1] / "bin")
        on_path = dict(base, PATH=os.pathsep.join([repo_bin, os.path.dirname(claude), base.get("PATH", "")]))
        from_env = dict(base, CLAUDEGUARD_CLAUDE=claude)
        console = os.path.join(tmp, "claudeguard-console-script")
        with open(console, "w") as fh:
            fh.write(CONSOLE_SCRIPT.format(python=sys.executable))
        os.chmod(console, 0o755)
        cases = {
            "claude": ([claude, "--version"], from_env),
            "guard_path": ([str(guard), "--version"], on_path),
            "guard_env": ([str(guard), "--version"], from_env),
            "console_script_env": ([console, "--version"], from_env),
        }
        for _ in range(3):  # warm the page cache
            for argv, env in cases.values():
                _time(argv, env, tmp)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, (argv, env) in cases.items():
                times[name].append(_time(argv, env, tmp))
    med = {name: statistics.median(values) * 1000 for name, values in times.items()}
    out = {"runs": args.runs, "claude_median_ms": round(med["claude"], 1)}
    for name in cases:
        if name != "claude":
            out[f"{name}_median_ms"] = round(med[name], 1)
            out[f"{name}_added_ms"] = round(med[name] - med["claude"], 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
