"""What loading one CLI argv table costs on the launcher's start path (claudeguard/cli_tables/load.py).

    python bench/cli_tables_load.py [--runs 21] [--version 2.1.332]

Each run is a fresh interpreter started like the launcher (``python -c``, with ``site``), measured
two ways: ``-X importtime`` (the modules ``load`` adds over a bare interpreter, and their import
time: ``json`` pulls ``re`` when nothing loaded it yet), and the wall time of
``load(version)`` itself (read + parse) inside the process. Prints one JSON line: medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from importtime import parse_importtime  # noqa: E402 - bench/importtime.py, beside this script

PROBE = ("import time; t0 = time.perf_counter_ns(); from claudeguard.cli_tables.load import load; "
         "t1 = time.perf_counter_ns(); t = load({v!r}); t2 = time.perf_counter_ns(); "
         "assert t is not None; print((t1 - t0) / 1e6, (t2 - t1) / 1e6)")


def _added_ms(stderr: str, baseline: set[str]) -> tuple[float, list[str]]:
    rows = parse_importtime(stderr)
    added = [r for r in rows if r.name not in baseline]
    return sum(r.self_us for r in added) / 1000.0, [r.name for r in added]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--version", default="2.1.332")
    args = parser.parse_args()
    base = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True, cwd=ROOT)
    baseline = {r.name for r in parse_importtime(base.stderr)}
    imports, loads, walls, modules = [], [], [], []
    for _ in range(args.runs):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", PROBE.format(v=args.version)],
                              capture_output=True, text=True, cwd=ROOT, check=True)
        ms, names = _added_ms(proc.stderr, baseline)
        imports.append(ms)
        modules = names
        imp, ld = (float(x) for x in proc.stdout.split())
        walls.append(imp)
        loads.append(ld)
    size = (ROOT / "claudeguard" / "cli_tables" / "data" / f"{args.version}.json").stat().st_size
    print(json.dumps({"version": args.version, "table_bytes": size, "runs": args.runs,
                      "import_ms_importtime": round(statistics.median(imports), 2),
                      "import_ms_wall": round(statistics.median(walls), 2),
                      "load_ms": round(statistics.median(loads), 2), "modules_added": modules}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
