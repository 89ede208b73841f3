"""Median wall time of `claudeguard --version` against the real `claude --version`, interleaved.

    python bench/startup.py [--runs 40] [--claude PATH]

The guard is run the way users run it: the installed `claudeguard` launcher next to this
interpreter (found via CLAUDEGUARD_CLAUDE, no config file), so the figure includes Python's
start-up. Prints one JSON object.
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


def _time(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
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
        env = dict(os.environ, CLAUDEGUARD_CLAUDE=claude, XDG_CONFIG_HOME=tmp, HOME=tmp)
        env.pop("CLAUDEGUARD_CONFIG", None)
        for _ in range(3):  # warm the page cache
            _time([claude, "--version"], env)
            _time([str(guard), "--version"], env)
        real, guarded = [], []
        for _ in range(args.runs):
            real.append(_time([claude, "--version"], env))
            guarded.append(_time([str(guard), "--version"], env))
    r, g = statistics.median(real), statistics.median(guarded)
    print(json.dumps({
        "runs": args.runs,
        "claude_median_ms": round(r * 1000, 1),
        "claudeguard_median_ms": round(g * 1000, 1),
        "added_ms": round((g - r) * 1000, 1),
        "ratio": round(g / r, 2),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
