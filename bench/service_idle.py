"""What the resident service costs while it waits: 20 sessions registered, no hook traffic.

    python bench/service_idle.py [--sessions 20] [--seconds 20] [--watched]

Starts a service in a throwaway runtime dir, registers N sessions (each holding its control
connection, as a launcher does), and measures the service's CPU share and RSS over the window,
and its planner's (service/planner.py, a process of its own; ``planner_*`` and the sums).
With ``--watched`` each session also has an idle child (``sleep``) that the service watches, as
it does a foreground session's CLI (``watch``, 1 s samples). Prints one JSON object; stops the
service and the children by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--watched", action="store_true")
    args = parser.parse_args()
    import psutil

    with tempfile.TemporaryDirectory() as tmp:
        runtime = Path(tmp, "rt")
        runtime.mkdir(mode=0o700)
        os.environ["CLAUDEGUARD_RUNTIME_DIR"] = str(runtime)
        from claudeguard.paths import runtime_dir
        from claudeguard.service.client import Registration
        from claudeguard.service.files import read_record, service_dir
        from claudeguard.testing.services import stop_services

        links, children = [], []
        try:
            for i in range(args.sessions):
                sid = f"{i:016x}"
                directory = runtime_dir("sessions", sid)
                (directory / "session.json").write_text(json.dumps({"session_id": sid, "policy": {}, "cwd": tmp}))
                link = Registration(sid, str(directory), os.urandom(24).hex())
                link.open()
                links.append(link)
                if args.watched:
                    import subprocess

                    from claudeguard.service.files import process_start

                    child = subprocess.Popen(["sleep", "600"])
                    children.append(child)
                    link.send({"op": "watch", "session_id": sid, "pid": os.getpid(), "child_pid": child.pid,
                               "child_start": process_start(child.pid), "config": {"sample_interval": 1.0},
                               "cwd": tmp, "argv": []})
            proc = psutil.Process(read_record(service_dir())["pid"])
            time.sleep(1.0)  # let start-up work settle before the window
            planners = [c for c in proc.children() if "claudeguard.service.planner" in c.cmdline()]
            before = [p.cpu_times() for p in (proc, *planners)]
            time.sleep(args.seconds)
            after = [p.cpu_times() for p in (proc, *planners)]
            cpu = [(a.user + a.system - b.user - b.system) / args.seconds * 100
                   for a, b in zip(after, before, strict=True)]
            rss = [p.memory_info().rss / 2**20 for p in (proc, *planners)]
            out = {"sessions": args.sessions, "watched": args.watched, "seconds": args.seconds,
                   "cpu_percent": round(cpu[0], 3), "rss_mb": round(rss[0], 1), "threads": proc.num_threads(),
                   "planner_cpu_percent": round(sum(cpu[1:]), 3) + 0.0, "planner_rss_mb": round(sum(rss[1:]), 1),
                   "total_cpu_percent": round(sum(cpu), 3), "total_rss_mb": round(sum(rss), 1)}
        finally:
            for link in links:
                link.close()
            for child in children:
                child.kill()
                child.wait()
            stop_services(Path(tmp))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
