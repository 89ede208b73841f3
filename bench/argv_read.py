"""What reading argv with the installed CLI's table costs the launcher (plan/claude_args.py).

    python bench/argv_read.py [--runs 21] [--claude PATH]

Each run is a fresh interpreter started like the launcher (``python -c``, with ``site``): the
import of ``plan.claude_args`` (and the table loader), then ``read_args`` of ``--version`` (the
pass-through: the CLI's ``package.json`` found beside it, its table loaded and read), then of a
session's argv (the table already loaded). Prints one JSON line: medians in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PROBE = """import time
t0 = time.perf_counter_ns()
from claudeguard.plan.claude_args import read_args
t1 = time.perf_counter_ns()
a = read_args(["--version"], {claude!r})
t2 = time.perf_counter_ns()
b = read_args(["--model", "m", "-p", "hello", "--allowedTools", "Bash(git *)", "Read", "--settings", "{{}}"],
              {claude!r})
t3 = time.perf_counter_ns()
assert a.kind == "pass" and b.kind == "session" and a.table_version == a.cli_version, (a.kind, b.kind)
print((t1 - t0) / 1e6, (t2 - t1) / 1e6, (t3 - t2) / 1e6)
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--claude",
                        default=os.path.expanduser("~/.cache/claudeguard/cli/2.1.332/node_modules/.bin/claude"))
    args = parser.parse_args()
    rows = []
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", PROBE.format(claude=args.claude)], capture_output=True, text=True,
                             check=True)
        rows.append([float(x) for x in out.stdout.split()])
    names = ("import_ms", "first_read_ms", "second_read_ms")
    result = {n: round(statistics.median(r[i] for r in rows), 2) for i, n in enumerate(names)}
    result.update(runs=args.runs, claude=args.claude, load=round(os.getloadavg()[0], 1))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
