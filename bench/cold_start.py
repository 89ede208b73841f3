"""Issue 34's last rows: a guarded run whose resident service has gone (its idle exit, a reboot)
against one whose service is warm, and `claudeguardctl pending` / `ps` on an idle machine.

    python bench/cold_start.py [--runs 11] [--version 2.1.332]

Offline against the scripted model server (bench/session.py's scenario), in one throwaway HOME.
One round, interleaved: the bare CLI's text turn, `claudeguard -p` with the service warm, the
service stopped (by its pid) and `claudeguard -p` again (it starts the service: the cold run),
then `claudeguardctl pending` and `claudeguardctl ps` with the service warm and no request. The
first round warms up and is not counted. Prints median, 25th percentile and minimum in ms, and
the machine's load at the start and end.
"""

from __future__ import annotations

import argparse
import os
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

ROOT = Path(__file__).resolve().parent.parent
GUARD = [sys.executable, str(ROOT / "bin" / "claudeguard")]
CTL = [sys.executable, str(ROOT / "bin" / "claudeguardctl")]


def _timed(argv: list[str], env: dict[str, str], cwd: Path, expect: str | None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    elapsed = (time.perf_counter() - start) * 1000
    if proc.returncode != 0 or (expect is not None and expect not in proc.stdout):
        raise SystemExit(f"{argv[1:3]}: exit {proc.returncode}, expected {expect!r}: {proc.stdout[-200:]!r} "
                         f"{proc.stderr[-300:]!r}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--version", default="2.1.332")
    args = parser.parse_args()
    claude = cli_path(args.version) or install_cli(args.version)
    times: dict[str, list[float]] = {}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="cold-start-") as tmp, ModelServer(SCENARIO) as server:
        cwd, env = scripted_home(tmp, server.url)
        env["CLAUDEGUARD_CLAUDE"] = str(claude)
        try:
            for rnd in range(args.runs + 1):
                row = {"bare CLI, text turn": _timed([str(claude), "-p", "say hello"], env, cwd, "hello"),
                       "guarded, service warm": _timed([*GUARD, "-p", "say hello"], env, cwd, "hello")}
                stop_services(Path(tmp))
                row["guarded, service cold"] = _timed([*GUARD, "-p", "say hello"], env, cwd, "hello")
                row["claudeguardctl pending"] = _timed([*CTL, "pending"], env, cwd, None)
                row["claudeguardctl ps"] = _timed([*CTL, "ps"], env, cwd, None)
                if rnd:
                    for name, ms in row.items():
                        times.setdefault(name, []).append(ms)
        finally:
            stop_services(Path(tmp))
    load.append(os.getloadavg()[0])
    print(f"{args.version}, {args.runs} rounds, load {load[0]:.1f} at the start, {load[1]:.1f} at the end")
    print(f"{'case':28} {'median':>8} {'p25':>8} {'min':>8}")
    for name, values in times.items():
        q = statistics.quantiles(values, n=4)
        print(f"{name:28} {statistics.median(values):8.1f} {q[0]:8.1f} {min(values):8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
