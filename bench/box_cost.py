"""What the sandbox costs a guarded session per Bash call, against the unsandboxed raw CLI.

    python bench/box_cost.py [--versions 2.1.332] [--rounds 12] [--calls 10] [--json FILE]
    python bench/box_cost.py --box-only [--rounds 60]

Offline against the scripted model server, in one throwaway lab per version. Every round runs
each case twice, interleaved: a session whose model makes ``--calls`` ``Bash(true)`` calls (one a
turn) and a text-only session. Per case: **per call** = (median of the N-call session − median
of the text session) / N, for wall time and for the CPU time (user + system) of the process tree
that ran (the resident guard service not included: it answers the hooks in its own process);
**over bare** = that minus the same for ``bare``; the same from the 25th percentiles and the
minima (which other work on the machine moves less). Cases:

- ``bare``: the real CLI alone, ``permissions.allow: ["Bash"]`` in ``--settings``, no hooks, no
  sandbox (the issue's "unsandboxed raw CLI");
- ``bare-prefix``: the same with ``CLAUDE_CODE_SHELL_PREFIX`` naming a script that only runs its
  argument with bash (what the prefix itself costs the CLI, without bwrap);
- ``bare-box``: the same with a session's box (``plan.sandbox.prepare`` for the lab's project) as
  the prefix, a bwrap box of each call's own: what that box costs the raw CLI, the guard's hooks
  aside (the design before issue 34's session box, and its fallback);
- ``bare-session-box``: the same with the session's box started as the launcher starts it
  (``plan.box_enter``): each call enters one box kept for the session, through the box script;
- ``bare-session-shell``: the same box, with the CLI's shell (``CLAUDE_CODE_SHELL``) the entry's
  shell way in (``box_enter.c``): each call enters the box without the box script or a shell
  before it (the guard's way since the entry first ran on the machine);
- ``guarded``: ``claudeguard -p`` with the resident service warm, ``allow = ["Bash(true)"]``,
  ``[security] sandbox = "off"``;
- ``guarded-box``: the same with the default ``sandbox = "auto"``: every call runs in the
  session's bubblewrap box through ``CLAUDE_CODE_SHELL_PREFIX`` (plan/sandbox.py), the one the
  launcher keeps for the session (plan/box_enter.py) once it is live.
- ``bare-in-box`` (with ``--cli-in-box``): the real CLI itself started in one bubblewrap box per
  session (the session box's layout, its seccomp filter, and the CLI's own ``~/.claude``,
  ``~/.claude.json`` and npm dir writable as it needs them), no prefix: issue 32's alternative
  design, every tool of the CLI confined and no box started per call.

Prints one JSON object (and writes it to ``--json``) with the machine's load at the start and end.
``--box-only``: the box alone, outside the CLI, as the CLI runs a call (its shell, given the prefix
and the call quoted as the CLI quotes it), against bash running the same framed command: what the
box itself costs a call, through the box script (a box per call, or the session's box) and through
the CLI's shell entering the session's box itself (plan/box_enter.c, its shell way in).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from session import call_gap  # bench/session.py: a call's cost read from the model's side

from claudeguard.testing.cli_install import cli_path
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.offline_home import offline_env, prepare_home
from claudeguard.testing.services import stop_services

KEY = "sk-ant-bench-0123456789abcdefghijklmnopqrstuv"
CASES = ("bare", "bare-prefix", "bare-box", "bare-session-box", "bare-session-shell", "guarded", "guarded-box")
GUARD = [sys.executable, str(Path(__file__).resolve().parent.parent / "bin" / "claudeguard")]


def _stats(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4) if len(values) >= 2 else [values[0]] * 3
    return {"median": round(statistics.median(values)), "p25": round(q[0]), "p75": round(q[2]),
            "min": round(min(values)), "max": round(max(values))}


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    """This process's environment is ``env`` meanwhile (the guard's paths are read from it)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


SHELLS: dict[str, str | None] = {}  # a lab box's prefix -> the CLI's shell that enters it (or None)


def _lab_box(env: dict[str, str], work: Path, name: str, started: list[Any]) -> str:
    """A session's box for the lab's project, built as a session's plan builds it; its prefix.
    ``bench-box``: a box of each call's own (no session box entry: as before issue 34);
    ``bench-session-box``: the session's box started as the launcher starts it (``started``
    gets it, to be stopped)."""
    from claudeguard.config.load import load_config
    from claudeguard.paths import runtime_dir
    from claudeguard.plan import box_enter, sandbox
    from claudeguard.plan.cli_version import cli_version

    env = dict(env)
    version = None
    if name == "bench-box":
        env[box_enter.PROGRAM_VAR] = str(work.parent / "no-entry")
    else:  # as the guard plans it for this CLI (its calls framed: the shell way in is for those)
        version = cli_version(env["CLAUDEGUARD_CLAUDE"])
    with _environ(env):
        session_dir = str(runtime_dir("sessions", name))
        prepared = sandbox.prepare(load_config(work), env, str(work), session_dir, session_id=name,
                                   cli_version=version, own=[])
    assert prepared.box is not None, prepared.notes
    if name == "bench-session-box":
        box = box_enter.start(session_dir, env)
        started.append(box)
        if box.reason:
            raise SystemExit(box.reason)
        # Planned again, as the machine's next session is: the entry has run a trial call now.
        with _environ(env):
            again = sandbox.prepare(load_config(work), env, str(work), session_dir, session_id=name,
                                    cli_version=version, own=[])
        SHELLS[prepared.box["prefix"]] = again.shell
    return prepared.box["prefix"]


def _cli_in_box(env: dict[str, str], work: Path, home: Path, claude: Path) -> list[str]:
    """bwrap's argv that starts the CLI in one box for the whole session: the session box's
    layout and seccomp filter, plus what the CLI writes of its own (``~/.claude``,
    ``~/.claude.json``); what follows is the CLI's argv."""
    from claudeguard.config.load import load_config
    from claudeguard.paths import guard_paths, runtime_dir
    from claudeguard.plan import sandbox

    with _environ(env):
        cfg = load_config(work)
        box = sandbox.layout(cfg, guard_paths(env, cfg), str(work), str(home), env)
        session_dir = runtime_dir("sessions", "bench-cli-box")
    tmp = os.path.join(session_dir, "tmp")
    os.makedirs(tmp, exist_ok=True)
    hidden = os.path.join(session_dir, "hidden")
    Path(hidden).write_bytes(b"")
    os.chmod(hidden, 0)
    for own in (home / ".claude", home / ".claude.json"):
        if own.exists():
            box.writable.append(str(own))
    seccomp = os.path.join(session_dir, "seccomp.bpf")
    program = sandbox.seccomp_filter(os.uname().machine, unix=True)  # node's own IPC uses Unix sockets
    assert program is not None
    Path(seccomp).write_bytes(program)
    bwrap = shutil.which("bwrap") or "bwrap"
    return ["sh", "-c", f'exec {bwrap} "$@" 9< {seccomp}', "box", *sandbox.bwrap_args(box, tmp, hidden),
            "--seccomp", "9", "--", str(claude)]


def run_version(version: str, rounds: int, calls: int, cli_in_box: bool = False) -> dict[str, Any]:
    claude = cli_path(version)
    if claude is None:
        raise SystemExit(f"CLI {version} not installed: python -m claudeguard.testing.cli_install {version}")
    scenario = [{"match": "bench text", "turns": [{"text": "hello"}]},
                {"match": "bench calls", "turns": [*({"tool_use": {"name": "Bash", "input": {"command": "true"}}}
                                                     for _ in range(calls)), {"text": "all done"}]}]
    root = Path(tempfile.mkdtemp(prefix="box-cost-"))
    home, work = root / "home", root / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    prepare_home(home, cwd=work, api_key=KEY)
    (root / "bare.json").write_text(json.dumps({"permissions": {"allow": ["Bash"]}}))
    shutil.copy(root / "bare.json", work / ".bare.json")
    noop = root / "noop-prefix"
    noop.write_text('#!/bin/sh\nexec /bin/bash -c "$1"\n')
    noop.chmod(0o755)
    for name, extra in (("guarded", '[security]\nsandbox = "off"\n'), ("guarded-box", "")):
        (root / f"{name}.toml").write_text(f'{extra}[permissions]\nallow = ["Bash(true)"]\n')
    times: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    gaps: dict[str, list[float]] = {}
    load = [os.getloadavg()[0]]
    boxes: list[Any] = []
    try:
        with ModelServer(scenario) as server:
            env = offline_env(home, server.url, KEY)
            env["CLAUDEGUARD_CLAUDE"] = str(claude)
            box_prefix = _lab_box(env, work, "bench-box", boxes)
            session_prefix = _lab_box(env, work, "bench-session-box", boxes)
            in_box = _cli_in_box(env, work, home, claude) if cli_in_box else []
            cases = CASES + (("bare-in-box",) if cli_in_box else ())
            for rnd in range(rounds + 1):  # round 0 warms up (the service starts) and is not counted
                for case in cases:
                    for prompt in ("bench text", "bench calls"):
                        if case == "bare-in-box":
                            # the box's /tmp is its own: the settings file from the project
                            argv = [*in_box, "--settings", str(work / ".bare.json"), "-p", prompt]
                            run_env = env
                        elif case.startswith("bare"):
                            argv = [str(claude), "--settings", str(root / "bare.json"), "-p", prompt]
                            prefix = {"bare-prefix": str(noop), "bare-box": box_prefix,
                                      "bare-session-box": session_prefix,
                                      "bare-session-shell": session_prefix}.get(case)
                            run_env = dict(env, CLAUDE_CODE_SHELL_PREFIX=prefix) if prefix else env
                            if case == "bare-session-shell":
                                shell = SHELLS[session_prefix]
                                if shell is None:
                                    raise SystemExit("the session box's entry has no shell way in here")
                                run_env["CLAUDE_CODE_SHELL"] = shell
                        else:
                            argv = [*GUARD, "-p", prompt]
                            run_env = dict(env, CLAUDEGUARD_CONFIG=str(root / f"{case}.toml"))
                        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                        seen = len(server.requests())
                        start = time.perf_counter()
                        proc = subprocess.run(argv, env=run_env, cwd=work, capture_output=True, text=True,
                                              timeout=300, stdin=subprocess.DEVNULL)
                        elapsed = (time.perf_counter() - start) * 1000
                        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                        want = "hello" if prompt == "bench text" else "all done"
                        if want not in proc.stdout or proc.stderr.strip():
                            raise SystemExit(f"{version} {case}: expected {want!r} and a quiet stderr, got "
                                             f"{proc.stdout[-300:]!r} {proc.stderr[-300:]!r}")
                        if rnd:
                            times.setdefault((case, prompt), []).append(elapsed)
                            if prompt == "bench calls":
                                gaps.setdefault(case, []).append(call_gap(server.requests()[seen:], prompt))
                            cpus.setdefault((case, prompt), []).append(
                                (ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime) * 1000)
            load.append(os.getloadavg()[0])
    finally:
        for box in boxes:
            box.stop()
        stop_services(root)
        shutil.rmtree(root, ignore_errors=True)
    out: dict[str, Any] = {"version": version, "rounds": rounds, "calls": calls,
                           "load_start_end": [round(x, 1) for x in load]}
    for case in cases:
        text, many = times[(case, "bench text")], times[(case, "bench calls")]
        cpu_text, cpu_many = cpus[(case, "bench text")], cpus[(case, "bench calls")]
        low_many, low_text = statistics.quantiles(many, n=4)[0], statistics.quantiles(text, n=4)[0]
        out[case] = {"text_session": _stats(text), "calls_session": _stats(many),
                     "per_call_ms": round((statistics.median(many) - statistics.median(text)) / calls, 1),
                     "per_call_p25_ms": round((low_many - low_text) / calls, 1),
                     "per_call_min_ms": round((min(many) - min(text)) / calls, 1),
                     "cpu_per_call_ms": round((statistics.median(cpu_many) - statistics.median(cpu_text)) / calls, 1),
                     "gap_ms": round(statistics.median(gaps[case]), 2)}
    for case in cases:
        for key in ("per_call_p25_ms", "per_call_min_ms"):
            out[case][key.replace("_ms", "_over_bare_ms")] = round(out[case][key] - out["bare"][key], 1)
        out[case]["per_call_over_bare_ms"] = round(out[case]["per_call_ms"] - out["bare"]["per_call_ms"], 1)
        out[case]["gap_over_bare_ms"] = round(out[case]["gap_ms"] - out["bare"]["gap_ms"], 2)
        out[case]["cpu_per_call_over_bare_ms"] = round(out[case]["cpu_per_call_ms"] - out["bare"]["cpu_per_call_ms"], 1)
    return out


def box_only(rounds: int) -> dict[str, Any]:
    """The box script alone, outside the CLI, interleaved: the CLI's framed ``true`` run by
    bash as the CLI would without a prefix, through a box of the call's own (bwrap per call, as
    before issue 34's session box), and through the session's box (plan/box_enter.py: started
    once, each call entered by ``box-enter``), ``rounds`` times each; ms."""
    from claudeguard.config.load import load_config
    from claudeguard.plan import box_enter, sandbox

    root = Path(tempfile.mkdtemp(prefix="box-only-"))
    session_box = None
    try:
        home, work, runtime = root / "home", root / "work", root / "rt"
        work.mkdir()
        runtime.mkdir(mode=0o700)
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        program = str(root / "box-enter")
        reason = box_enter.build(program, os.environ)
        if reason:
            raise SystemExit(reason)
        Path(program + box_enter.RAN_SUFFIX).write_text("")  # as after a machine's first session
        env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                   XDG_STATE_HOME=str(home / ".local" / "state"), CLAUDEGUARD_RUNTIME_DIR=str(runtime),
                   CLAUDE_CODE_TMPDIR=str(root / "clitmp"))
        env.pop("CLAUDEGUARD_CONFIG", None)
        env.pop("CLAUDEGUARD_LOG_DIR", None)
        prefixes = {}
        shells = {}
        for name, entry in (("per-call", str(root / "no-entry")), ("session", program)):
            env[box_enter.PROGRAM_VAR] = entry
            with _environ(env):
                session_dir = runtime / "sessions" / name
                session_dir.mkdir(parents=True, mode=0o700)
                prepared = sandbox.prepare(load_config(work), env, str(work), str(session_dir), session_id=name,
                                           cli_version="2.1.332", own=[])
            assert prepared.box is not None, prepared.notes
            prefixes[name] = prepared.box["prefix"]
            shells[name] = prepared.shell
        session_box = box_enter.start(str(runtime / "sessions" / "session"), env)
        if session_box.reason:
            raise SystemExit(session_box.reason)
        framed = f"eval true < /dev/null{sandbox.FRAME}{work}/x-cwd"
        # As the CLI runs a call: its shell, given the prefix and the call quoted.
        quoted = "'" + framed.replace("'", "'\"'\"'") + "'"
        assert shells["session"] is not None
        variants = {"bash (no prefix)": ["/bin/bash", "-c", framed],
                    "a box per call (bwrap)": ["/bin/bash", "-c", f"{prefixes['per-call']} {quoted}"],
                    "the session's box (box-enter)": ["/bin/bash", "-c", f"{prefixes['session']} {quoted}"],
                    "the session's box, the CLI's shell entering it": [shells["session"], "-c",
                                                                      f"{prefixes['session']} {quoted}"]}
        times: dict[str, list[float]] = {k: [] for k in variants}
        load = [os.getloadavg()[0]]
        for rnd in range(rounds + 1):
            for name, argv in variants.items():
                start = time.perf_counter()
                proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
                if proc.returncode != 0:
                    raise SystemExit(f"{name}: exit {proc.returncode}: {proc.stderr[-300:]}")
                if rnd:
                    times[name].append((time.perf_counter() - start) * 1000)
        load.append(os.getloadavg()[0])
    finally:
        if session_box is not None:
            session_box.stop()
        shutil.rmtree(root, ignore_errors=True)
    out: dict[str, Any] = {"rounds": rounds, "load_start_end": [round(x, 1) for x in load]}
    for name, values in times.items():
        q = statistics.quantiles(values, n=4)
        out[name] = {"median": round(statistics.median(values), 1), "p25": round(q[0], 1), "p75": round(q[2], 1),
                     "min": round(min(values), 1)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--versions", default="2.1.332")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument("--box-only", action="store_true", help="the box script alone, outside the CLI")
    parser.add_argument("--cli-in-box", action="store_true", help="also the CLI itself in one box per session")
    args = parser.parse_args()
    if args.box_only:
        print(json.dumps(box_only(args.rounds), indent=1))
        return 0
    result = {"machine": {"cpus": os.cpu_count(), "kernel": os.uname().release},
              "runs": [run_version(v, args.rounds, args.calls, args.cli_in_box) for v in args.versions.split(",")]}
    text = json.dumps(result, indent=1)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
