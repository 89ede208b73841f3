"""Where the service's planner spends a plan, stage by stage, in process (no socket).

    python bench/planner_stages.py [--plans 60] [--version 2.1.332]

A `-p` launch asks the planner before it reads its own argv, so the planner's `prepare` is the
part of the launcher's path to the CLI's exec that nothing overlaps (bench/RESULTS.md, "The
planner hands over the config"). This runs the stages `service/planner.prepare` runs, in order,
in a throwaway HOME and runtime dir, for the scripted session of `bench/session.py`, and prints
the median ms of each: the package fingerprint (asked again, as for every launcher after the
first), argv, `load_checked`, the session dir and the CLI's version, `write_session`,
`build_plan`, `Config.to_wire`, and `prepare` whole (the launcher's environment taken and put
back, its answer). The first 10 plans warm up and are not counted.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time

from session import scripted_home  # bench/session.py: the same scripted session

from claudeguard.testing.cli_install import cli_path, install_cli

STAGES = ("fingerprint", "argv", "load_checked", "session dir + CLI version", "write_session", "build_plan",
          "to_wire", "prepare, whole")
WARM_UP = 10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plans", type=int, default=60)
    parser.add_argument("--version", default="2.1.332")
    ns = parser.parse_args()
    install_cli(ns.version)
    with tempfile.TemporaryDirectory() as tmp:
        cwd, env = scripted_home(tmp, "http://127.0.0.1:9")  # no request is made: only the plan
        env["CLAUDEGUARD_CLAUDE"] = str(cli_path(ns.version))
        env["CLAUDEGUARD_RUNTIME_DIR"] = os.path.join(tmp, "rt")
        os.mkdir(env["CLAUDEGUARD_RUNTIME_DIR"], 0o700)
        saved = dict(os.environ)
        os.environ.update(env)
        os.chdir(cwd)
        try:
            times = _run(ns.plans, str(cwd), env)
        finally:
            os.chdir("/")
            os.environ.clear()
            os.environ.update(saved)
    for stage in STAGES:
        print(f"{stage:28} {statistics.median(times[stage]):6.3f} ms")
    parts = sum(statistics.median(times[s]) for s in STAGES[:-1])
    print(f"{'the stages together':28} {parts:6.3f} ms ({ns.plans - WARM_UP} plans, {ns.version})")
    return 0


def _run(plans: int, cwd: str, env: dict[str, str]) -> dict[str, list[float]]:
    from claudeguard.plan.argv import build_plan
    from claudeguard.plan.claude_args import parse_claude_args
    from claudeguard.plan.discovery import print_cli_version, take_cli
    from claudeguard.plan.hooks import HttpHooks
    from claudeguard.plan.options import split_argv
    from claudeguard.plan.session import load_checked, session_dir_of, write_session
    from claudeguard.service import files, planner

    root = os.path.dirname(os.path.dirname(os.path.abspath(files.__file__)))
    version = files.fingerprint(root)
    times: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for n in range(plans):
        sid = os.urandom(8).hex()
        marks = [time.perf_counter()]
        files.fingerprint(root)
        marks.append(time.perf_counter())
        opts, rest = split_argv(["-p", "say hello"])
        opts.cli, rest = take_cli(rest)
        args = parse_claude_args(rest)
        marks.append(time.perf_counter())
        cfg, real = load_checked(opts, args, cwd)
        marks.append(time.perf_counter())
        session_dir = session_dir_of(sid)
        cli_version = print_cli_version(real, args)
        marks.append(time.perf_counter())
        write_session(cfg, args, session_dir, session_id=sid, cwd=cwd, stdin_tty=False, exec_pid=os.getpid(),
                      cli_version=cli_version, prepared_by="planner")
        marks.append(time.perf_counter())
        build_plan(real, args, cfg, session_id=sid, session_dir=session_dir, cwd=cwd, http=HttpHooks(1, "t" * 48),
                   exec_pid=os.getpid(), run={"cli_version": cli_version, "status_line": False})
        marks.append(time.perf_counter())
        cfg.to_wire()
        marks.append(time.perf_counter())
        shutil.rmtree(session_dir)
        request = {"root": root, "argv": ["-p", "say hello"], "argv0": "claudeguard", "executable": sys.executable,
                   "cwd": cwd, "env": dict(env), "pid": os.getpid(), "stdin_tty": False,
                   "session_id": os.urandom(8).hex(), "token": "t" * 48}
        start = time.perf_counter()
        answer = planner.prepare(request, 1, version)
        whole = time.perf_counter() - start
        if "session_dir" not in answer:
            raise SystemExit(f"the planner gave no plan: {answer}")
        shutil.rmtree(str(answer["session_dir"]))
        if n >= WARM_UP:
            for stage, (a, b) in zip(STAGES[:-1], itertools.pairwise(marks), strict=True):
                times[stage].append((b - a) * 1000)
            times["prepare, whole"].append(whole * 1000)
    return times


if __name__ == "__main__":
    sys.exit(main())
