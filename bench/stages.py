"""Issue 34's timeline, stage by stage, each against its budget: where a guarded start and a
guarded call spend their time, beside the bare CLI's.

    python bench/stages.py [--runs 15] [--version 2.1.332] [--calls 10]

Rounds of five runs, interleaved, in one isolated HOME (bench/session.py; the first round warms
up: the service starts):

- ``bare text`` and ``guard text``: a text turn (`-p "say hello"`), the guarded one through the
  installed launcher with its stage marks (claudeguard/stages.py: ``CLAUDEGUARD_STAGES_FD`` names
  a pipe this process reads);
- ``bare calls``, ``pre calls``, ``guard calls``: ``--calls`` Bash calls of ``date +%s.%N``, one a
  turn: the bare CLI allowing them; the same with a stand-in PreToolUse HTTP hook that answers
  ``{}`` at once (the floor: what any guard deciding in PreToolUse costs the CLI); claudeguard.

**The start** (ms, the guarded text turn's stages; the bare CLI's counterpart where it has one):
the interpreter (to `bin/claudeguard`'s first line), the plan's request sent (its first step),
the launcher's imports, the argv read, the wait for the planner's answer, the CLI's fork and
exec (the bare CLI's own exec is in its "to the first request"), the CLI to its first model
request, the CLI's end after its last request, the launcher's end after the CLI's exit.

**A call** (ms, the median over calls 2..N; call 1 is printed alone: it pays the CLI's first hook
connection and, guarded, the session box's start): from the model's answer to the hook's decision
(the stand-in's arrival, the guard's audit row: ms resolution), from there to the command's own
start (its `date` output), from the command to the CLI's next model request. The bare CLI has no
hook: its first two stages are one.

Each stage has a budget (``START_BUDGET``, ``CALL_BUDGET``): the start's sum to +40 ms over the
bare CLI, a call's to the floor + 5 ms; the table says which hold.
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

from session import StandInHook, scripted_home  # bench/session.py: the isolated HOME, the floor's hook

from claudeguard.testing.cli_install import cli_path, install_cli
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.services import stop_services

# The start's stages and their budgets, ms over the bare CLI (sum: issue 34's +40). The
# interpreter is Python's own start (`python -c pass`), ours only by the choice of language.
START_BUDGET = {
    "interpreter": 10.0,  # the benchmark's fork and `python -c pass` take ~9.9 here
    "request sent": 1.5,  # bin/claudeguard's first step (planned.ask_first)
    "imports": 1.0,
    "argv read": 2.5,
    "planner's answer waited": 1.5,
    "fork and exec": 2.0,
    # over the bare CLI's: the guard's flags, most of it the CLI's check of its memory files against
    # any Read deny rule (~3.6 ms a directory from the cwd to /: ~10 here; bench/cli_read_rules.py)
    "CLI to its first request": 14.0,
    "CLI's end after its last request": 2.5,  # over the bare CLI's
    "launcher's end after the CLI's exit": 5.0,
}
# A call's stages and their budgets, ms over the floor (a PreToolUse HTTP hook answering {}):
# sum 5, issue 34's per-call goal. The audit log's times are whole milliseconds (cut, not
# rounded): the decision reads ~0.5 ms early, the next stage ~0.5 late.
CALL_BUDGET = {
    "model's answer to the hook's decision": 1.5,  # the service's decision
    "decision to the command's start": 2.5,  # the answer's way back, the session box's entry
    "command to the next model request": 1.0,  # the box's exit
}
MARKS = ("python", "sent", "imported", "argv", "answered", "exec")


def _run(argv: list[str], env: dict[str, str], cwd: Path, expect: str, *, marks: bool = False
         ) -> tuple[float, float, dict[str, float]]:
    """(start, exit, the launcher's stage marks) in wall-clock seconds."""
    fds: tuple[int, ...] = ()
    read_end = -1
    if marks:
        read_end, write_end = os.pipe()
        env = dict(env, CLAUDEGUARD_STAGES_FD=str(write_end))
        fds = (write_end,)
    start = time.time()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300, pass_fds=fds)
    end = time.time()
    stages: dict[str, float] = {}
    if marks:
        os.close(fds[0])
        data = b""
        while chunk := os.read(read_end, 65536):
            data += chunk
        os.close(read_end)
        stages = json.loads(data) if data else {}
    if expect not in proc.stdout:
        raise SystemExit(f"{argv[0]}: expected {expect!r}, got {proc.stdout[-200:]!r} {proc.stderr[-300:]!r}")
    return start, end, stages


def _audit_times(path: Path, since: int) -> tuple[list[float], int]:
    """The decision times of the Bash calls the audit log got after byte ``since``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], since
    out = []
    for line in data[since:].splitlines():
        row = json.loads(line)
        if row.get("tool") == "Bash" and row.get("time"):
            stamp, _, millis = str(row["time"]).rstrip("Z").partition(".")
            out.append(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")) + int(millis or 0) / 1000)
    return out, len(data)


def _content(result: dict[str, object]) -> float:
    content = result.get("content")
    if isinstance(content, list):
        content = "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return float(str(content).strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--version", default="2.1.332")
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    real = str(cli_path(args.version) or install_cli(args.version))
    guard = [sys.executable, str(Path(__file__).resolve().parent.parent / "bin" / "claudeguard")]
    calls = [{"tool_use": {"name": "Bash", "input": {"command": "date +%s.%N"}}} for _ in range(args.calls)]
    scenario = [{"match": "say hello", "turns": [{"text": "hello"}]},
                {"match": "run the calls", "turns": [*calls, {"text": "all done"}]}]
    stand_in = ThreadingHTTPServer(("127.0.0.1", 0), StandInHook)
    threading.Thread(target=stand_in.serve_forever, daemon=True).start()
    hook = {"type": "http", "url": f"http://127.0.0.1:{stand_in.server_port}/hook", "timeout": 30}
    allow = "--allowedTools=Bash(date *)"
    pre = "--settings=" + json.dumps({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [hook]}]}})
    start_rows: dict[str, list[float]] = {}
    call_rows: dict[tuple[str, str], list[float]] = {}
    load = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory() as tmp, ModelServer(scenario) as server:
            cwd, env = scripted_home(tmp, server.url)
            env["CLAUDEGUARD_CLAUDE"] = real
            Path(env["XDG_CONFIG_HOME"], "claudeguard", "config.toml").write_text(
                '[permissions]\nallow = ["Bash(date *)"]\n')
            audit = Path(env["CLAUDEGUARD_LOG_DIR"], "audit.jsonl")
            audit_at = 0
            try:
                for round_ in range(args.runs + 1):
                    # the text turns: the start
                    seen = len(server.requests())
                    b0, b1, _ = _run([real, allow, "-p", "say hello"], env, cwd, "hello")
                    bare = [float(str(r["time"])) for r in server.requests()[seen:] if r.get("script") == "say hello"]
                    seen = len(server.requests())
                    g0, g1, marks = _run([*guard, "-p", "say hello"], env, cwd, "hello", marks=True)
                    mine = [float(str(r["time"])) for r in server.requests()[seen:] if r.get("script") == "say hello"]
                    if round_:
                        _start_row(start_rows, marks, g0, g1, mine, b0, b1, bare)
                    # the calls
                    for name, argv in (("bare", [real, allow]), ("pre", [real, allow, pre]), ("guard", guard)):
                        seen, results_seen = len(server.requests()), len(server.tool_results())
                        StandInHook.arrivals = []
                        _run([*argv, "-p", "run the calls"], env, cwd, "all done")
                        requests = [float(str(r["time"])) for r in server.requests()[seen:]
                                    if r.get("script") == "run the calls"]
                        ran = [_content(r) for r in server.tool_results()[results_seen:]
                               if r.get("script") == "run the calls"]
                        decided: list[float] = []
                        if name == "pre":
                            decided = list(StandInHook.arrivals)
                        elif name == "guard":
                            decided, audit_at = _audit_times(audit, audit_at)
                        if round_:
                            _call_rows(call_rows, name, requests, ran, decided, args.calls)
            finally:
                stop_services(Path(tmp))  # the resident service the guarded runs started, by pid
    finally:
        stand_in.shutdown()
    print(f"{args.version}, {args.runs} rounds, {args.calls} calls a session; load average {load:.1f} at the "
          f"start, {os.getloadavg()[0]:.1f} at the end")
    _print_start(start_rows)
    _print_calls(call_rows)
    return 0


def _start_row(rows: dict[str, list[float]], marks: dict[str, float], g0: float, g1: float, mine: list[float],
               b0: float, b1: float, bare: list[float]) -> None:
    points = [g0] + [marks[m] for m in MARKS]
    for name, (a, b) in zip(list(START_BUDGET)[:6], zip(points, points[1:], strict=False), strict=True):
        rows.setdefault(name, []).append((b - a) * 1000)
    rows.setdefault("CLI to its first request", []).append(((mine[0] - marks["exec"]) - (bare[0] - b0)) * 1000)
    rows.setdefault("CLI's end after its last request", []).append(
        ((marks["cli-exit"] - mine[-1]) - (b1 - bare[-1])) * 1000)
    rows.setdefault("launcher's end after the CLI's exit", []).append((g1 - marks["cli-exit"]) * 1000)
    rows.setdefault("whole text turn", []).append(((g1 - g0) - (b1 - b0)) * 1000)
    rows.setdefault("bare text turn", []).append((b1 - b0) * 1000)


def _call_rows(rows: dict[tuple[str, str], list[float]], name: str, requests: list[float], ran: list[float],
               decided: list[float], calls: int) -> None:
    if len(requests) != calls + 1 or len(ran) != calls or (name != "bare" and len(decided) != calls):
        raise SystemExit(f"{name}: {len(requests)} requests, {len(ran)} results, {len(decided)} decisions "
                         f"for {calls} calls")
    for i in range(calls):
        which = "call 1" if i == 0 else "calls 2-N"
        if name == "bare":
            rows.setdefault((name, f"{which}: model's answer to the command's start"), []).append(
                (ran[i] - requests[i]) * 1000)
        else:
            rows.setdefault((name, f"{which}: model's answer to the hook's decision"), []).append(
                (decided[i] - requests[i]) * 1000)
            rows.setdefault((name, f"{which}: decision to the command's start"), []).append(
                (ran[i] - decided[i]) * 1000)
        rows.setdefault((name, f"{which}: command to the next model request"), []).append(
            (requests[i + 1] - ran[i]) * 1000)
        rows.setdefault((name, f"{which}: the whole call"), []).append((requests[i + 1] - requests[i]) * 1000)


def _print_start(rows: dict[str, list[float]]) -> None:
    print("\nThe start (the guarded text turn), ms: median (p25), the budget, within it")
    total = 0.0
    for name, budget in START_BUDGET.items():
        value = statistics.median(rows[name])
        total += value
        p25 = statistics.quantiles(rows[name], n=4)[0] if len(rows[name]) > 1 else value
        print(f"  {name:40} {value:7.1f} ({p25:6.1f})  budget {budget:5.1f}  {'yes' if value <= budget else 'NO'}")
    print(f"  {'the stages together':40} {total:7.1f}           budget {sum(START_BUDGET.values()):5.1f}")
    print(f"  {'whole text turn over the bare CLI':40} {statistics.median(rows['whole text turn']):7.1f} "
          f"(bare {statistics.median(rows['bare text turn']):.1f})")


def _print_calls(rows: dict[tuple[str, str], list[float]]) -> None:
    print("\nA call, ms: median of each case; guard over the floor (pre), the budget, within it")
    for which in ("call 1", "calls 2-N"):
        print(f"  {which}")
        for stage in ("model's answer to the command's start", *CALL_BUDGET, "the whole call"):
            values = {name: statistics.median(rows[(name, f"{which}: {stage}")])
                      for name in ("bare", "pre", "guard") if (name, f"{which}: {stage}") in rows}
            line = "  ".join(f"{name} {v:6.2f}" for name, v in values.items())
            budget = CALL_BUDGET.get(stage)
            if budget is not None and which != "call 1" and "guard" in values:
                over = values["guard"] - values["pre"]
                line += f"  | guard - pre {over:+6.2f}  budget {budget:4.1f}  {'yes' if over <= budget else 'NO'}"
            elif stage == "the whole call" and which != "call 1":
                over, whole = values["guard"] - values["pre"], sum(CALL_BUDGET.values())
                line += (f"  | guard - pre {over:+6.2f}  budget {whole:4.1f}  {'yes' if over <= whole else 'NO'}"
                         f"  (pre - bare {values['pre'] - values['bare']:+6.2f})")
            print(f"    {stage:42} {line}")


if __name__ == "__main__":
    sys.exit(main())
