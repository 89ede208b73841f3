"""What the guard's `Read` deny rules cost the real CLI's start, by how deep the cwd lies.

    python bench/cli_read_rules.py [--runs 10] [--version 2.1.332] [--depths 0,3,6]

The guard hands the CLI `Read(//p)`/`Edit(//p)` deny rules for its own files
(`settings_sources.protected_rules`; docs/design.md, "Protected paths"): the CLI enforces them
where no hook runs (a CLAUDE.md's `@`-import, the memory files it reads by itself). Once the CLI
has any `Read` deny rule, its start checks every memory file it looks for (CLAUDE.md,
.claude/CLAUDE.md, CLAUDE.local.md, AGENTS.md, .claude/AGENTS.md) in every directory from the cwd
up to `/` against them; `Edit` rules cost it nothing there. This runs the scripted text turn of
`bench/session.py` with the real CLI alone, interleaved, with no rule, one `Read` rule and one
`Edit` rule, in the project's root and ``--depths`` directories below it, and prints from the
CLI's own `--debug-file` clock (ms, medians): the walk (from "Watching for changes in setting
files" to the AGENTS.md lookup's line) and the first model request (after the log's first line).
2.1.330 and later log that walk; an older CLI's log has no such line (one line says so).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cli_settings_cost import marks  # bench/cli_settings_cost.py: the CLI's debug log read
from session import SCENARIO, scripted_home  # bench/session.py: the same scripted session

from claudeguard.testing.cli_install import cli_path, install_cli
from claudeguard.testing.model_server import ModelServer

RULES = {"none": [], "Read": ["--disallowedTools=Read(//tmp/claudeguard-0)"],
         "Edit": ["--disallowedTools=Edit(//tmp/claudeguard-0)"]}
# the debug log's lines: where the walk starts and ends, the first request
NEEDLES = (("Watching for changes in setting", "settings watch"),
           ("fs.ancestors (cc-plugin-agents-md): AGENTS.md", "AGENTS.md lookup"), ("[API REQUEST]", "API REQUEST"))


def _clock(log: Path) -> tuple[float, float] | str:
    """(the memory files' walk, the first request) in ms, from the CLI's debug log; else the
    line it lacks."""
    found = marks(log, NEEDLES)
    for _, name in NEEDLES:
        if name not in found:
            return name
    return found["AGENTS.md lookup"] - found["settings watch"], found["API REQUEST"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--version", default="2.1.332")
    parser.add_argument("--depths", default="0,3,6")
    args = parser.parse_args()
    real = str(cli_path(args.version) or install_cli(args.version))
    depths = [int(d) for d in args.depths.split(",")]
    found: dict[tuple[str, int], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, ModelServer(SCENARIO) as server:
        root, env = scripted_home(tmp, server.url)
        log = Path(tmp, "debug.log")
        for round_ in range(args.runs + 1):  # the first round warms up
            for depth in depths:
                cwd = Path(root, *["d"] * depth)
                cwd.mkdir(parents=True, exist_ok=True)
                for name, extra in RULES.items():
                    log.unlink(missing_ok=True)
                    subprocess.run([real, *extra, "-p", "say hello", f"--debug-file={log}"], env=env, cwd=cwd,
                                   capture_output=True, timeout=120)
                    clock = _clock(log)
                    if isinstance(clock, str):
                        raise SystemExit(f"Claude Code {args.version}'s debug log has no {clock} line ({name} rule, "
                                         f"depth {depth}): this reads the memory files' walk as 2.1.330 and "
                                         f"later log it")
                    if round_:
                        found.setdefault((name, depth), []).append(clock)
    levels = len(Path(root).parts) - 1  # directories from the project's root up to /
    print(f"{args.version}, {args.runs} rounds; ms, medians (the walk / the first request)")
    print(f"{'directories to /':>18} " + "".join(f"{name:>16}" for name in RULES))
    for depth in depths:
        cells = []
        for name in RULES:
            rows = found[(name, depth)]
            cells.append(f"{statistics.median(r[0] for r in rows):6.1f} / {statistics.median(r[1] for r in rows):5.1f}")
        print(f"{levels + depth:>18} " + "".join(f"{c:>16}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
