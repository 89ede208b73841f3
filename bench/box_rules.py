"""What resolving the user's deny rules for the box costs at a session's start (issue 32).

    python bench/box_rules.py [--files 20000] [--rounds 9]

Makes a project of ``--files`` files in nested dirs (a ``node_modules``-like tree among them) with a
few ``.env`` files and a ``secrets/`` dir, then times ``plan.box_rules.resolve`` (the walk and the
match, no bwrap) for the README's rules and for the rules that make it walk: an exact path,
``secrets/**``, ``**/.env`` (a walk of the whole project) and one over ``//**`` (cut at the bound).
Prints one JSON line per rule set: median and max ms, entries walked, what it found and the notes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RULE_SETS = {
    "readme": ["Read(./.env)", "Bash(rm -rf *)"],
    "dir": ["Read(./secrets/**)", "Edit(./vendor/**)"],
    "anywhere": ["Read(**/.env)"],
    "everywhere": ["Read(//**/*.pem)"],
}


def make_project(root: Path, files: int) -> None:
    per_dir = 50
    made = 0
    d = 0
    while made < files:
        sub = root / ("node_modules" if d % 3 == 0 else "src") / f"pkg{d // 10}" / f"d{d}"
        sub.mkdir(parents=True, exist_ok=True)
        for i in range(min(per_dir, files - made)):
            (sub / f"f{i}.js").write_text("x")
        made += per_dir
        d += 1
    (root / ".env").write_text("TOKEN=1\n")
    (root / "src" / "pkg0" / ".env").write_text("TOKEN=2\n")
    (root / "secrets").mkdir()
    (root / "secrets" / "key.pem").write_text("k")
    (root / "vendor").mkdir()


class _Cfg:
    """The one thing resolve() reads of a config: its deny rules."""

    def __init__(self, rules: list[str], source: str, root: str) -> None:
        from claudeguard.config.load import RuleEntry

        self.rules = {"permissions.deny": [RuleEntry(r, f"{source}:1", root) for r in rules]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    from claudeguard.plan.box_rules import resolve

    tmp = Path(tempfile.mkdtemp(prefix="cg-box-rules-"))
    try:
        project = tmp / "proj"
        project.mkdir()
        make_project(project, args.files)
        for name, rules in RULE_SETS.items():
            cfg = _Cfg(rules, str(project / ".claudeguard.toml"), str(project))
            times = []
            out = None
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                out = resolve(cfg, str(project), str(tmp / "home"))  # type: ignore[arg-type]  # a stand-in config
                times.append((time.perf_counter() - t0) * 1000)
            assert out is not None
            print(json.dumps({"rules": name, "files": args.files, "median_ms": round(statistics.median(times), 2),
                              "max_ms": round(max(times), 2), "entries": out.entries,
                              "hidden": len(out.hidden_files) + len(out.hidden_dirs), "read_only": len(out.read_only),
                              "notes": len(out.notes), "cpus": os.cpu_count()}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
