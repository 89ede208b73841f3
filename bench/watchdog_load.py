"""The watchdog on a loaded machine (issue 37): false stalls and detection delay at load 0, 4, 8.

    python bench/watchdog_load.py [--loads 0,4,8] [--seconds 30] [--stall-after 3]

For each load N, N busy processes run beside the measurement (``testing/load.py``), and each
child below gets a Monitor as shipped (1 s samples) with ``stall_after`` seconds:

- working children, which must never be reported: a busy loop, the same at nice 10 (it gets a
  few hundredths of a CPU at load 8), and a process that works in bursts (50 ms of CPU, then
  200 ms asleep: a fifth of a CPU on a quiet machine, a lint or a test runner between files);
- hung children, which must be reported once, within a few seconds of the threshold: a
  sleeping process, and a node process with a 20 ms timer (a hung CLI's event loop still wakes
  up; at load 8 its wake-ups wait on the run queue).

Prints one JSON line per load: the false stalls per working child, the detection delay of each
hung child beyond the threshold, the load average seen, and the runnable share (schedstat) of
each child over the run. Every process it starts is stopped by pid; its files live in a temp
dir removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from claudeguard.testing.load import BUSY, cpu_hog  # noqa: E402 - after the sys.path set-up above
from claudeguard.watchdog.monitor import Monitor  # noqa: E402 - after the sys.path set-up above
from claudeguard.watchdog.signals import WatchConfig  # noqa: E402 - after the sys.path set-up above

BURSTS = [sys.executable, "-c", "import time\nwhile True:\n    t = time.process_time()\n"
          "    while time.process_time() - t < 0.05: pass\n    time.sleep(0.2)\n"]
SLEEPER = ["sleep", "3600"]
NODE_TIMER = ["node", "-e", "setInterval(() => {}, 20)"]
WORKING = {"busy": BUSY, "busy-nice10": ["nice", "-n", "10", *BUSY], "bursts": BURSTS}
HUNG = {"sleeping": SLEEPER, "node-20ms-timer": NODE_TIMER}


def schedstat(pid: int) -> tuple[float, float]:
    with open(f"/proc/{pid}/schedstat") as fh:
        run, wait = fh.read().split()[:2]
    return int(run) / 1e9, int(wait) / 1e9


def one_load(tmp: Path, load: int, seconds: float, stall_after: float) -> dict[str, object]:
    kids: dict[str, subprocess.Popen[bytes]] = {}
    monitors: dict[str, Monitor] = {}
    hits: dict[str, list[float]] = {}
    with cpu_hog(load):
        try:
            for name, argv in {**WORKING, **HUNG}.items():
                if shutil.which(argv[0]) is None and not os.path.isabs(argv[0]):
                    continue
                kids[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            time.sleep(0.5)  # start-up behind them
            t0 = time.monotonic()
            before = {name: schedstat(p.pid) for name, p in kids.items()}
            for name, p in kids.items():
                d = tmp / "rt" / "sessions" / f"{name}-{load}"
                d.mkdir(parents=True, mode=0o700)
                hits[name] = []
                monitors[name] = Monitor(
                    child_pid=p.pid, session_id=d.name, session_dir=d,
                    config=WatchConfig(stall_after=stall_after, sample_interval=1.0), output_format=None,
                    prompt="bench", cwd=str(tmp), argv=["claude"],
                    on_stall=lambda _diagnosis, name=name: hits[name].append(time.monotonic() - t0))
                monitors[name].start()
            loads = []
            while time.monotonic() - t0 < seconds:
                time.sleep(1.0)
                loads.append(os.getloadavg()[0])
            after = {name: schedstat(p.pid) for name, p in kids.items()}
        finally:
            for m in monitors.values():
                m.stop(None)
            for p in kids.values():
                p.kill()
                p.wait()
    span = seconds
    runnable = {name: round((after[name][0] - before[name][0] + after[name][1] - before[name][1]) / span, 3)
                for name in after}
    cpu = {name: round((after[name][0] - before[name][0]) / span, 3) for name in after}
    return {
        "hog": load, "cpus": os.cpu_count(), "load_avg": round(sum(loads) / max(1, len(loads)), 1),
        "seconds": seconds, "stall_after": stall_after,
        "false_stalls": {name: len(hits[name]) for name in WORKING if name in hits},
        "detect_beyond_threshold_s": {name: (round(hits[name][0] - stall_after, 2) if hits[name] else None)
                                      for name in HUNG if name in hits},
        "reports_per_hung_child": {name: len(hits[name]) for name in HUNG if name in hits},
        "runnable_share": runnable, "cpu_share": cpu,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--loads", default="0,4,8")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--stall-after", type=float, default=3.0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cg-wd-load-"))
    os.environ["CLAUDEGUARD_RUNTIME_DIR"] = str(tmp / "rt")
    os.environ["CLAUDEGUARD_LOG_DIR"] = str(tmp / "log")
    try:
        for load in (int(x) for x in args.loads.split(",")):
            print(json.dumps(one_load(tmp, load, args.seconds, args.stall_after)), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
