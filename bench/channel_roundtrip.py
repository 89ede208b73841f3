"""Benchmark: approval-channel round trip with 20 sessions waiting at once.

Run ``python bench/channel_roundtrip.py [--sessions 20] [--rounds 30] [--dir DIR]``. Each session
is its own process: it posts a request, waits for the answer, and posts the next one at once, so
``--sessions`` requests are waiting at any moment. One approver process (this one) learns of
requests through the doorbell (``wait_for_new``) and answers them one at a time in random order,
pausing ``--think`` ms after each answer: that pause is the human, and it is not counted.

Measured by the waiting session on the system-wide monotonic clock, per request:
- post:       the ``post()`` call (the request's socket, request file, doorbells);
- delivery:   from the approver calling ``answer()`` to the waiting call holding the answer (the
              waiter checks who answers: SO_PEERCRED, the answering process's ancestry);
- round trip: post + delivery, i.e. posted -> answer in hand, minus the time the human took.
And by the approver: ``answer()``, the whole call until the waiter said it took the answer.
The first round of each session is a warm-up. The channel lives in a fresh temporary directory:
by default on tmpfs (/dev/shm) when there is one, like the platform runtime dir on Linux; pass
``--dir`` to measure another file system.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def now_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)  # one clock for every process


def session(index: int, rounds: int) -> None:
    from claudeguard import channel

    for n in range(rounds + 1):
        t0 = now_ns()
        pending = channel.post(session_id=f"bench-{index}", agent_type=None, agent_id=None, tool="Bash",
                               input={"command": f"echo {index} {n}"}, summary=f"Bash(echo {index} {n})",
                               cwd="/", timeout=120)
        t1 = now_ns()
        answer = pending.wait()
        t2 = now_ns()
        assert answer.decided_by == "human" and answer.message, answer
        if n:
            post, delivery = (t1 - t0) / 1e6, (t2 - int(answer.message)) / 1e6
            print(json.dumps({"post": post, "delivery": delivery, "round trip": post + delivery}), flush=True)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def approve(procs: list[subprocess.Popen], expected: int, think_s: float) -> tuple[int, int]:
    """Answer every request as it comes; returns (answered, most requests seen waiting at once)."""
    from claudeguard import channel

    answered: set[str] = set()
    calls: list[float] = []
    peak = 0
    deadline = time.monotonic() + 300
    # Start line: every session has started (interpreter start-up is not the channel's cost).
    seen: set[str] = set()
    while len(seen) < len(procs) and time.monotonic() < deadline:
        seen |= {r.id for r in channel.wait_for_new(seen, 0.5)}
    waiting: list = []
    while len(answered) < expected and time.monotonic() < deadline:
        if not waiting:
            # One listing serves several answers, as a person reading `pending` would.
            waiting = [r for r in channel.list_pending() if r.id not in answered]
            if not waiting:
                if all(p.poll() is not None for p in procs):
                    break
                waiting = channel.wait_for_new(answered, 1.0)
                continue
            peak = max(peak, len(waiting))
            random.shuffle(waiting)
        req = waiting.pop()
        try:
            started = now_ns()
            channel.answer(req.id, "allow", message=str(started), by="bench")
            calls.append((now_ns() - started) / 1e6)
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"answer {req.id}: {exc}", file=sys.stderr)
        answered.add(req.id)
        time.sleep(think_s)
    ANSWER_CALLS[:] = calls
    return len(answered), peak


ANSWER_CALLS: list[float] = []  # ms of each answer() call, as the approver saw it


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--think", type=float, default=5.0, help="ms the 'human' takes between answers (not counted)")
    parser.add_argument("--dir", help="parent of the temporary channel dir (default: /dev/shm if present)")
    parser.add_argument("--session", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.session is not None:
        session(args.session, args.rounds)
        return 0

    parent = args.dir or ("/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None)
    tmp = tempfile.TemporaryDirectory(prefix="cg-bench-", dir=parent)
    os.environ["CLAUDEGUARD_RUNTIME_DIR"] = str(Path(tmp.name) / "run")
    os.environ["CLAUDEGUARD_LOG_DIR"] = str(Path(tmp.name) / "log")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    sys.path.insert(0, str(REPO))

    procs = [
        subprocess.Popen([sys.executable, __file__, "--session", str(i), "--rounds", str(args.rounds)],
                         stdout=subprocess.PIPE, text=True, env=env)
        for i in range(args.sessions)
    ]
    try:
        count, peak = approve(procs, args.sessions * (args.rounds + 1), args.think / 1000)
        results = [json.loads(line) for p in procs for line in p.communicate(timeout=60)[0].splitlines()]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        tmp.cleanup()
    if not results:
        print("no results", file=sys.stderr)
        return 1
    print(f"{len(results)} requests measured ({count} answered), up to {peak} waiting at once, "
          f"{os.cpu_count()} CPUs, channel under {parent or tempfile.gettempdir()}")
    for key, values in (*((k, [r[k] for r in results]) for k in ("post", "delivery", "round trip")),
                        ("answer()", ANSWER_CALLS)):
        print(f"{key:10}  median {statistics.median(values):6.2f} ms   p99 {percentile(values, 99):6.2f} ms   max "
              f"{max(values):6.2f} ms")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
