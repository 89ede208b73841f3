"""``claudeguardctl ps --all`` with many Claude processes on the machine (issue 37).

    python bench/ps_all.py [--homes 10] [--rounds 7] [--hog 0]

Lays out ``--homes`` throwaway homes as the CLI's background machinery leaves them (observed on
2.1.330, docs/notes/bg-agents-2.1.330.md), ten processes each: one ``claude daemon run``, three
``bg-pty-host``, three claimed spares (sessions, with their ``sessions/<pid>.json`` and
``jobs/<id>/state.json``) and three unclaimed spares (a record with ``"spare": true``, no job
state). The processes are one small stand-in binary named ``claude`` that waits (compiled here
with cc): a hundred real CLIs would need ~10 GB of memory. Then times ``claudeguardctl ps --all
--json`` (a new process each round, as a user runs it) and checks that it lists exactly the
claimed spares as sessions. ``--hog N`` runs N busy processes beside it. Prints one JSON object;
stops every process it started by pid and removes its temp dir.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STAND_IN = "#include <unistd.h>\nint main(void) { for (;;) pause(); }\n"


def _start(exe: Path, args: list[str], home: Path) -> subprocess.Popen[bytes]:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    return subprocess.Popen([str(exe), *args], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _start_time(pid: int) -> str:
    from claudeguard.procs import process_start

    start = process_start(pid)
    assert start is not None
    return start


def lay_out(tmp: Path, exe: Path, homes: int, procs: list[subprocess.Popen[bytes]]) -> set[int]:
    """The homes and their processes; the pids of the claimed spares (the sessions ps must list)."""
    sessions: set[int] = set()
    for h in range(homes):
        home = tmp / f"home{h}"
        cfg = home / ".claude"
        (cfg / "sessions").mkdir(parents=True)
        procs.append(_start(exe, ["daemon", "run", "--origin", "transient"], home))
        for i in range(3):
            procs.append(_start(exe, ["bg-pty-host", f"job{h}x{i}"], home))
        for i in range(6):
            p = _start(exe, ["--bg-spare"], home)
            procs.append(p)
            job = f"{h:02d}{i:02d}abcd"
            record = {"pid": p.pid, "procStart": _start_time(p.pid), "sessionId": f"{job}-0000-0000-0000-000000000000",
                      "jobId": job, "kind": "bg", "name": f"task {h}/{i}", "status": "running", "cwd": str(home)}
            if i < 3:
                (cfg / "jobs" / job).mkdir(parents=True)
                (cfg / "jobs" / job / "state.json").write_text(json.dumps({"state": "working", "cwd": str(home)}))
                sessions.add(p.pid)
            else:
                record["spare"] = True
                (cfg / "jobs" / job).mkdir(parents=True)
            (cfg / "sessions" / f"{p.pid}.json").write_text(json.dumps(record))
    return sessions


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--homes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--hog", type=int, default=0)
    args = parser.parse_args()
    from claudeguard.testing.load import cpu_hog

    tmp = Path(tempfile.mkdtemp(prefix="cg-ps-all-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        (tmp / "bin").mkdir()
        exe = tmp / "bin" / "claude"
        (tmp / "stand_in.c").write_text(STAND_IN)
        subprocess.run(["cc", "-O2", "-o", str(exe), str(tmp / "stand_in.c")], check=True)
        sessions = lay_out(tmp, exe, args.homes, procs)
        env = {**os.environ, "CLAUDEGUARD_RUNTIME_DIR": str(tmp / "rt"), "CLAUDEGUARD_AUTO_VERIFY": "0"}
        ctl = [sys.executable, str(ROOT / "bin" / "claudeguardctl"), "ps", "--all", "--json"]
        times = []
        with cpu_hog(args.hog):
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                out = subprocess.run(ctl, env=env, capture_output=True, text=True, timeout=120)
                times.append(time.perf_counter() - t0)
                assert out.returncode == 0, out.stderr
                rows = json.loads(out.stdout)
                # (others' background sessions on this machine are listed too: not counted)
                listed = {r["pid"] for r in rows
                          if r.get("background") and str(r.get("config_dir")).startswith(str(tmp))}
                assert listed == sessions, (sorted(listed), sorted(sessions))
        print(json.dumps({"processes": len(procs), "homes": args.homes, "sessions_listed": len(sessions),
                          "hog": args.hog, "load": round(os.getloadavg()[0], 1), "cpus": os.cpu_count(),
                          "median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3),
                          "times_s": [round(t, 3) for t in times]}))
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
