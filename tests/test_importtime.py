"""The start-up budget's module limits (bench/importtime.py): the launcher's pass-through, a
session's start, the hook entry (through a gate server and on its own), the MCP prompt server and
``claudeguardctl pending`` load none of the modules their lazy imports keep out. The time budgets
are the benchmark's job (machine-dependent); which modules load is not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import importtime  # noqa: E402  (bench/importtime.py)

sys.path.remove(str(BENCH))


def test_no_path_loads_a_module_it_must_not():
    proc = subprocess.run([sys.executable, str(BENCH / "importtime.py"), "--modules-only", "--runs", "1", "--json"],
                          capture_output=True, text=True, timeout=120)
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["path"] for r in results] == ["launcher", "session", "hook-gate", "hook", "mcp-serve", "pending"], \
        proc.stderr
    assert {r["path"]: r["forbidden"] for r in results} == {r["path"]: [] for r in results}
    assert proc.returncode == 0
    by_path = {r["path"]: r for r in results}
    # the hook's gate-server client imports no claudeguard module at all
    assert {name for name, _ in by_path["hook-gate"]["direct"]} == {"os", "_socket"}


STDERR = """\
import time: self [us] | cumulative | imported package
import time:       100 |        100 |     _stat
import time:       200 |        300 |   stat
import time:        50 |         50 |   posixpath
import time:       400 |        750 | os
import time:       900 |        900 |     re._parser
import time:      1000 |       1900 |   re
import time:        10 |       1910 | claudeguard.config.load
"""


def test_parse_names_each_module_s_importer():
    rows = importtime.parse_importtime(STDERR)
    assert [(r.name, r.parent) for r in rows] == [
        ("_stat", "stat"), ("stat", "os"), ("posixpath", "os"), ("os", "<entry>"),
        ("re._parser", "re"), ("re", "claudeguard.config.load"), ("claudeguard.config.load", "<entry>")]


def test_a_forbidden_module_is_reported_with_its_importer_and_the_total_excludes_the_baseline():
    p = importtime.Path_("x", 1.0, forbidden=("re",))
    rows = importtime.parse_importtime(STDERR)
    importtime._judge(p, [rows, rows], baseline={"_stat", "stat", "posixpath", "os"})
    assert p.result["forbidden"] == ["re (imported by claudeguard.config.load)"]
    assert p.result["modules"] == 3 and p.result["total_ms"] == 1.9
    assert p.result["direct"] == [["claudeguard.config.load", 1.9]]
