"""The service's planner (claudeguard/service/planner.py, shim/planned.py): a launcher with a
live service has its session prepared by the planner, with the plan, the session file and the
errors its own path would give; whenever the planner cannot answer the launcher prepares the
session itself. The launcher runs in front of the stand-in CLI of test_service.py, which
records its argv and the session file it was given."""

from __future__ import annotations

import json
import marshal
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from claudeguard.service.files import process_start
from tests.shim_helpers import ctl
from tests.test_service import GUARD, env, guard, pre_tool_use, service_dir, wait_until, write_config

__all__ = ["env"]  # the fixture, shared with test_service.py

CONFIG = '[permissions]\nallow = ["Bash(echo *)"]\ndeny = ["Bash(rm *)"]\nask = ["Bash(git push *)"]\n'


def plan_socket(env: dict) -> Path:
    return service_dir(env) / "plan.sock"


def planner_pids(env: dict) -> list[int]:
    """Live planner processes of this runtime dir (by their command line)."""
    want = str(service_dir(env)).encode()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"claudeguard.service.planner" in args and want in args:
                pids.append(int(entry))
    return pids


def up(env: dict) -> int:
    """Start the service (a first launch) and wait for its planner; the planner's pid."""
    guard(env, [])
    Path(env["OUT"]).unlink()
    wait_until(lambda: plan_socket(env).exists() and planner_pids(env), what="the planner listening")
    [pid] = planner_pids(env)
    return pid


def normalized(out: dict) -> tuple[list[str], dict]:
    """The CLI's argv and session file with what differs between any two sessions taken out."""
    sid = out["session"]["session_id"]
    argv = [a.replace(sid, "SID") for a in out["argv"]]
    session = {k: v for k, v in out["session"].items() if k not in ("session_id", "pid", "prepared_by")}
    return argv, session


def ask(env: dict, request: object) -> object:
    """One raw exchange with the planner."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(20)
        sock.connect(str(plan_socket(env)))
        sock.sendall(request if isinstance(request, bytes) else marshal.dumps(request))
        sock.shutdown(socket.SHUT_WR)
        data = b"".join(iter(lambda: sock.recv(65536), b""))
    return marshal.loads(data) if data else None


def test_a_session_is_prepared_by_the_planner_exactly_as_the_launcher_would(env):
    write_config(env, CONFIG)
    up(env)
    planned = guard(env, [])
    own = guard(env, [], CLAUDEGUARD_PLANNER="0")
    assert planned["session"]["prepared_by"] == "planner" and own["session"]["prepared_by"] == "launcher"
    assert normalized(planned) == normalized(own)
    # the session file names the launcher (the CLI's parent), not the planner
    assert planned["session"]["pid"] == planned["ppid"]
    # and its hooks are answered: the session was registered with the planner's port
    answered = guard(env, [{"event": "PreToolUse", "body": {
        "hook_event_name": "PreToolUse", "session_id": "cli-1", "tool_name": "Bash", "tool_input": {"command": "rm x"},
        "tool_use_id": "toolu_1", "cwd": "/"}}])
    assert answered["session"]["prepared_by"] == "planner"
    assert answered["results"][0]["answer"]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert list((Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "sessions").iterdir()) == []


def test_a_config_error_is_the_launchers_own_line_and_leaves_no_session(env):
    up(env)
    write_config(env, '[permissions]\nallow = ["Bash(echo *)"\n')  # unclosed list
    runs = [subprocess.run(GUARD + ["-p", "x"], env=dict(env, POSTS="[]", **extra), capture_output=True, text=True,
                           timeout=60) for extra in ({}, {"CLAUDEGUARD_PLANNER": "0"})]
    assert [r.returncode for r in runs] == [2, 2]
    assert runs[0].stderr == runs[1].stderr and runs[0].stderr.startswith("claudeguard: ")
    assert "config.toml:" in runs[0].stderr and runs[0].stderr.count("\n") == 1
    assert not Path(env["OUT"]).exists()  # no CLI started
    assert list((Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "sessions").iterdir()) == []


def test_a_lockdown_refusal_comes_back_with_its_exit_code(env):
    up(env)
    write_config(env, "lockdown = true\n")
    runs = [subprocess.run(GUARD + ["-p", "x", "--dangerously-skip-permissions"], env=dict(env, POSTS="[]", **extra),
                           capture_output=True, text=True, timeout=60) for extra in ({}, {"CLAUDEGUARD_PLANNER": "0"})]
    assert runs[0].returncode == runs[1].returncode == 2
    assert runs[0].stderr == runs[1].stderr and "lockdown" in runs[0].stderr


def test_another_version_or_a_broken_request_is_refused_and_the_planner_goes_on(env, tmp_path):
    up(env)
    other = tmp_path / "other" / "claudeguard"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    request = {"root": str(other), "argv": ["-p", "x"], "argv0": "claudeguard", "executable": sys.executable,
               "cwd": str(tmp_path), "env": dict(env), "pid": os.getpid(), "stdin_tty": False,
               "session_id": "ab" * 8, "token": "t" * 48}
    answer = ask(env, request)
    assert isinstance(answer, dict) and answer["refused"] == "another version of claudeguard"
    assert ask(env, b"not marshal") is None
    assert ask(env, ["a", "list"]) == {"refused": "not a request"}
    assert not (Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "sessions" / ("ab" * 8)).exists()
    assert guard(env, [])["session"]["prepared_by"] == "planner"


def test_a_planner_of_other_code_than_its_service_refuses_even_a_launcher_of_its_own(tmp_path):
    """Started again from newer code beside an old service (an upgrade in place), a planner
    would hand a new launcher the old service's port; it refuses instead."""
    from claudeguard.service import files, planner

    root = str(Path(planner.__file__).parent.parent)  # this code: the planner's own
    request = {"root": root, "argv": ["-p", "x"], "argv0": "claudeguard", "executable": sys.executable,
               "cwd": str(tmp_path), "env": {}, "pid": os.getpid(), "stdin_tty": False,
               "session_id": "cd" * 8, "token": "t" * 48}
    assert files.fingerprint(root) == files.fingerprint()
    assert planner.prepare(request, 1, None) == {"refused": "another version of claudeguard"}


def test_without_its_planner_a_launch_prepares_itself_and_the_service_starts_another(env):
    pid = up(env)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: process_start(pid) is None, what="the planner gone")
    out = guard(env, [])
    assert out["session"]["prepared_by"] in ("launcher", "planner")  # the service may have restarted it already
    wait_until(lambda: [p for p in planner_pids(env) if p != pid], what="a new planner")
    wait_until(lambda: guard(env, [])["session"]["prepared_by"] == "planner", what="planned again")


def test_a_stale_socket_is_no_obstacle(env):
    pid = up(env)
    ctl(env, "service", "stop")
    wait_until(lambda: process_start(pid) is None, what="the planner stopped with its service")
    assert not plan_socket(env).exists()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(plan_socket(env)))  # bound, never listening: connect is refused
    stale.close()
    out = guard(env, [])
    assert out["session"]["prepared_by"] == "launcher" and out["results"] == []
    wait_until(lambda: planner_pids(env), what="the new service's planner")


def test_the_planner_stops_with_its_service(env):
    pid = up(env)
    record = json.loads((service_dir(env) / "service.json").read_text())
    os.kill(record["pid"], signal.SIGKILL)  # no clean exit: the lifeline pipe breaks
    wait_until(lambda: process_start(pid) is None, what="the planner gone with its service")


def test_warm_holds_everything_preparing_imports(env, tmp_path):
    write_config(env, CONFIG)
    code = """
import importlib, json, os, sys
from claudeguard.service import planner, files
for name in planner.WARM:
    importlib.import_module(name)
before = set(sys.modules)
request = {"root": os.path.dirname(os.path.dirname(planner.__file__)), "argv": ["-p", "x"], "argv0": "claudeguard",
           "executable": sys.executable, "cwd": sys.argv[1], "env": dict(os.environ), "pid": os.getpid(),
           "stdin_tty": False, "session_id": "cd" * 8, "token": "t" * 48}
answer = planner.prepare(request, 1234, files.fingerprint())
print(json.dumps({"new": sorted(set(sys.modules) - before), "keys": sorted(answer)}))
"""
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["keys"] == ["argv", "config", "dropped", "env", "files", "port", "real", "session_dir", "snapshot",
                           "stderr", "untrusted", "version"]
    assert out["new"] == []


def test_a_warning_preparing_printed_is_the_launchers_own_and_said_once(env, tmp_path):
    up(env)
    write_config(env, "[security]\nallow_settings_override = true\n")
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").write_text('{"disableAllHooks": true}')
    runs = []
    for extra in ({}, {"CLAUDEGUARD_PLANNER": "0"}):
        proc = subprocess.run(GUARD + ["-p", "x"], env=dict(env, POSTS="[]", **extra), cwd=project,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        runs.append((proc.stderr, json.loads(Path(env["OUT"]).read_text())["session"]["prepared_by"]))
    assert [by for _, by in runs] == ["planner", "launcher"]
    assert runs[0][0] == runs[1][0]
    assert runs[0][0].count("claudeguard: warning: ") == 1 and "disableAllHooks" in runs[0][0]


def test_a_peer_that_sends_nothing_is_dropped_and_the_next_launch_is_still_planned(env):
    up(env)
    with socket.socket(socket.AF_UNIX) as silent:
        silent.connect(str(plan_socket(env)))  # connected, never sends: served first, then dropped
        out = guard(env, [])  # queued behind it, within the launcher's wait
        silent.settimeout(10)
        assert silent.recv(1) == b""  # the planner closed it without an answer
    assert out["session"]["prepared_by"] == "planner"


def test_a_runtime_dir_past_the_unix_socket_limit_is_planned_too(env, tmp_path):
    # plan.sock's path is over AF_UNIX's 107 bytes: both ends reach it through the fd of its
    # directory (claudeguard/sockets.socket_address), so the planner still prepares the session.
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    deep.chmod(0o700)
    long_env = dict(env, CLAUDEGUARD_RUNTIME_DIR=str(deep / "rt"))
    (deep / "rt").mkdir(mode=0o700)
    assert len(str(plan_socket(long_env)).encode()) >= 108
    write_config(long_env, CONFIG)
    try:
        up(long_env)
        planned = guard(long_env, [])
        assert planned["session"]["prepared_by"] == "planner"
        assert normalized(planned) == normalized(guard(long_env, [], CLAUDEGUARD_PLANNER="0"))
    finally:
        ctl(long_env, "service", "stop")
    wait_until(lambda: not planner_pids(long_env), what="the planner gone with its service")


def test_a_planned_launcher_takes_the_planners_config_and_never_reads_the_layers(env):
    """The config the planner read and checked reaches the launcher with the plan: the launcher
    reads no layer again while the CLI starts (no ``config.load``, no TOML parser), and its
    watchdog and settings watch run on it; a launcher that prepared itself reads them."""
    write_config(env, CONFIG)
    up(env)
    imported = {}
    for name, extra in (("planned", {}), ("own", {"CLAUDEGUARD_PLANNER": "0"})):
        proc = subprocess.run(GUARD + ["-p", "x"], env=dict(env, POSTS=json.dumps([]), PYTHONPROFILEIMPORTTIME="1",
                                                             **extra), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out = json.loads(Path(env["OUT"]).read_text())
        assert out["session"]["prepared_by"] == ("planner" if name == "planned" else "launcher")
        imported[name] = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                          if line.startswith("import time:") and "|" in line}
    assert "claudeguard.shim.main" in imported["planned"]  # the launcher's own lines are there
    assert {"claudeguard.config.load", "tomllib", "claudeguard.config.trust"} <= imported["own"]
    # nor hashlib: the watch's trust records hash no file of a session with none to check
    assert not {"claudeguard.config.load", "tomllib", "hashlib"} & imported["planned"], \
        sorted(imported["planned"])


# `python -m claudeguard` with each reading of the repository's code (plan/repo_code.py's `_find`:
# its settings files, .mcp.json, agent files, the trust records) counted, a line each in $FINDS
COUNTED = [sys.executable, "-c", """
import os, runpy, sys
import claudeguard.plan.repo_code as repo_code
real = repo_code._find
def counted(*args, **kwargs):
    with open(os.environ["FINDS"], "a") as fh:
        fh.write("read\\n")
    return real(*args, **kwargs)
repo_code._find = counted
sys.argv = ["claudeguard", *sys.argv[1:]]
runpy.run_module("claudeguard", run_name="__main__", alter_sys=True)
"""]


def test_the_repository_is_read_once_a_session_and_the_report_names_what_the_plan_left_out(env, tmp_path):
    """The repository's code is read by a session's plan (the planner's, or the launcher's own)
    and by the settings watch for its baseline, nothing else: the end-of-run report's rows and
    the sources the watch knows the CLI leaves out come with the plan (they were two readings
    more once the CLI ran, before)."""
    write_config(env, CONFIG)
    up(env)
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"evil": {"command": "true"}}}))
    expected = [{"path": str(project / ".mcp.json"), "kind": "mcp", "not_run": ["MCP servers (evil)"]}]
    for name, extra, readings in (("planned", {}, 1), ("own", {"CLAUDEGUARD_PLANNER": "0"}, 2)):
        finds, report = tmp_path / f"finds-{name}", tmp_path / f"report-{name}.json"
        proc = subprocess.run(COUNTED + ["-p", "x", "--guard-report", str(report)], cwd=project,
                              env=dict(env, POSTS="[]", FINDS=str(finds), **extra), capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads(Path(env["OUT"]).read_text())["session"]["prepared_by"] == \
            ("planner" if name == "planned" else "launcher")
        # the planner's readings are its own process's: only this launcher's are counted
        assert (finds.read_text().splitlines() if finds.exists() else []) == ["read"] * readings, name
        assert json.loads(report.read_text())["untrusted"] == expected, name
        assert proc.stderr.count("1 untrusted project file left out") == 1, proc.stderr[-2000:]


def _sessions(env: dict) -> list[str]:
    return sorted(p.name for p in (Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "sessions").iterdir())


def test_a_request_sent_early_is_taken_or_dropped_and_a_dropped_one_leaves_nothing(env, tmp_path):
    """``send_request`` then ``answer`` or ``drop`` (the launcher sends a `-p` run's request before
    reading its argv): a taken plan's session dir is there; a dropped one's is removed once the
    planner has answered, with nothing said."""
    write_config(env, CONFIG)
    up(env)
    code = """
import json, os, sys
from claudeguard.shim.planned import send_request
asked = send_request(["-p", "x"], os.getcwd())
planned = asked.answer()
made = sorted(os.listdir(os.path.join(os.environ["CLAUDEGUARD_RUNTIME_DIR"], "sessions")))
dropped = send_request(["-p", "y"], os.getcwd())
dropped.drop()
after = sorted(os.listdir(os.path.join(os.environ["CLAUDEGUARD_RUNTIME_DIR"], "sessions")))
print(json.dumps({"planned": planned.session_id, "dir": planned.session_dir, "made": made, "after": after,
                  "dropped": dropped.session_id}))
"""
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = json.loads(proc.stdout)
    assert out["made"] == out["after"] == [out["planned"]]  # the dropped one's dir is gone, the taken one's stays
    assert out["dropped"] != out["planned"]
    from claudeguard.files import remove_tree

    remove_tree(out["dir"])
    assert _sessions(env) == []


INSTALLED = [str(Path(sys.executable).with_name("claudeguard"))]  # bin/claudeguard: asks before its imports


@pytest.mark.parametrize("launcher", [GUARD, INSTALLED], ids=["python-m", "installed"])
def test_a_p_run_that_is_no_session_after_all_leaves_no_session_dir(env, tmp_path, launcher):
    """`-p --help` names -p, so the launcher asks the planner before reading its argv (the
    installed one before it imports anything else); read, it is a pass-through (the CLI's help):
    the planner's session is dropped before the CLI is exec'd. A bad guard option found while
    reading argv drops it too, and so does a launch refused as its own child."""
    write_config(env, CONFIG)
    up(env)
    cli = tmp_path / "plain-cli"
    cli.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$OUT"\n')
    cli.chmod(0o755)
    proc = subprocess.run(launcher + ["-p", "--help"], env=dict(env, CLAUDEGUARD_CLAUDE=str(cli)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert Path(env["OUT"]).read_text().splitlines() == ["-p", "--help"]  # exec'd untouched
    assert _sessions(env) == []
    bad = subprocess.run(launcher + ["--guard-fail-on=nonsense", "-p", "x"], env=dict(env, POSTS="[]"),
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--guard-fail-on" in bad.stderr and bad.stderr.count("\n") == 1, bad.stderr
    assert _sessions(env) == []
    # CLAUDEGUARD_EXEC_PID naming the launcher's parent: PATH led a launcher back to itself
    looped = subprocess.run(["/bin/sh", "-c", 'CLAUDEGUARD_EXEC_PID=$$ exec "$@"', "sh", *launcher, "-p", "x"],
                            env=dict(env, POSTS="[]"), capture_output=True, text=True, timeout=60)
    assert looped.returncode != 0 and "its own child" in looped.stderr, looped.stderr
    assert ask(env, {"not": "a request"}) is not None  # served one at a time: the launch's request is done
    assert _sessions(env) == []


def test_a_planned_run_of_the_installed_launcher_asks_once_and_leaves_nothing(env):
    """bin/claudeguard asks the planner first thing; the launcher takes that request (run(first))
    rather than sending another (a second would leave the first's session dir behind)."""
    write_config(env, CONFIG)
    up(env)
    out = subprocess.run(INSTALLED + ["-p", "x"], env=dict(env, POSTS=json.dumps([pre_tool_use("echo hi")])),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    ran = json.loads(Path(env["OUT"]).read_text())
    assert ran["session"]["prepared_by"] == "planner"
    assert [r["answer"]["hookSpecificOutput"]["permissionDecision"] for r in ran["results"]] == ["allow"]
    assert _sessions(env) == []


def test_which_runs_the_installed_launcher_asks_for_before_its_imports(monkeypatch, tmp_path):
    from claudeguard.shim import planned

    sent = []
    monkeypatch.setattr(planned, "send_request", lambda argv, cwd: sent.append(argv) or None)
    for name in ("CLAUDEGUARD_SERVICE", "CLAUDEGUARD_PLANNER", "CLAUDEGUARD_DISABLE"):
        monkeypatch.delenv(name, raising=False)
    cases = {("-p", "x"): True, ("--print", "x"): True, ("--guard-report", "r.json", "-p", "x"): True,
             ("x",): False, ("-p", "x", "--bg"): False, ("--guard-dry-run", "-p", "x"): False,
             ("--guard-help", "-p"): False, ("--guard-version", "-p"): False}
    for argv, asks in cases.items():
        monkeypatch.setattr(sys, "argv", ["claudeguard", *argv])
        sent.clear()
        assert planned.ask_first() is None  # the stand-in's answer: no planner
        assert sent == ([list(argv)] if asks else []), argv
    monkeypatch.setattr(sys, "argv", ["claudeguard", "-p", "x"])
    for name, value in (("CLAUDEGUARD_PLANNER", "0"), ("CLAUDEGUARD_SERVICE", "0"), ("CLAUDEGUARD_DISABLE", "1")):
        with monkeypatch.context() as m:
            m.setenv(name, value)
            sent.clear()
            planned.ask_first()
            assert sent == [], name
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    sent.clear()
    assert planned.ask_first() is None  # the removed cwd is the main path's to report
    assert sent == []


def test_which_runs_ask_the_planner_before_their_argv_is_read(monkeypatch):
    from claudeguard.plan.options import split_argv
    from claudeguard.shim import main, planned

    sent = []
    monkeypatch.setattr(planned, "send_request", lambda argv, cwd: sent.append(argv) or None)
    monkeypatch.delenv("CLAUDEGUARD_SERVICE", raising=False)
    monkeypatch.delenv("CLAUDEGUARD_PLANNER", raising=False)
    cases = {("-p", "x"): True, ("--print", "x"): True, ("x",): False, ("-p", "x", "--bg"): False,
             ("--guard-dry-run", "-p", "x"): False}
    for argv, asks in cases.items():
        opts, rest = split_argv(list(argv))
        sent.clear()
        main._ask_early(list(argv), opts, rest)
        assert sent == ([list(argv)] if asks else []), argv
    monkeypatch.setenv("CLAUDEGUARD_PLANNER", "0")
    opts, rest = split_argv(["-p", "x"])
    sent.clear()
    main._ask_early(["-p", "x"], opts, rest)
    assert sent == []


def _added_behind_an_old_mtime(directory: Path, name: str) -> None:
    st = directory.stat()
    (directory / name).write_text("f = 1\n")
    os.utime(directory, ns=(st.st_atime_ns, st.st_mtime_ns))  # what `utime` can set back; not the ctime


def test_the_fingerprint_asked_again_is_the_walks_after_every_kind_of_change(tmp_path):
    """The planner asks the fingerprint of a launcher's package for every request; asked again it
    checks the stamps of what the last walk saw instead of walking: after each change below the
    answer is what a fresh walk gives, and the sources' changes change it."""
    from claudeguard.service import files

    root = tmp_path / "claudeguard"
    (root / "sub").mkdir(parents=True)
    (root / "a.py").write_text("a = 1\n")
    (root / "sub" / "b.py").write_text("b = 1\n")

    def fresh() -> str:
        files._SEEN.pop(str(root), None)
        return files.fingerprint(str(root))

    first = fresh()
    assert files.fingerprint(str(root)) == first  # from the stamps
    answers = [first]

    def bump(path: Path) -> None:  # a later mtime whatever the clock's grain
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))

    steps = [
        lambda: ((root / "a.py").write_text("a = 2\n"), bump(root / "a.py")),  # edited in place, same size
        lambda: (root / "sub" / "c.py").write_text("c = 1\n"),  # a source added below
        lambda: (root / "sub" / "b.py").unlink(),  # a source removed
        lambda: (root / "new").mkdir() or (root / "new" / "d.py").write_text("d\n"),  # a new package dir
        lambda: (root / "sub" / "c.py").rename(root / "sub" / "e.py"),  # renamed
        lambda: _added_behind_an_old_mtime(root / "sub", "f.py"),  # the dir's mtime set back after
    ]
    for step in steps:
        step()
        again = files.fingerprint(str(root))
        assert again == fresh()
        assert again not in answers
        answers.append(again)
    (root / "notes.txt").write_text("x")  # not a source: the tree's walk again, the same answer
    assert files.fingerprint(str(root)) == fresh() == answers[-1]


def test_the_launchers_stage_marks_reach_its_callers_descriptor_and_no_child(env):
    """bench/stages.py's marks (claudeguard/stages.py): one JSON line of every stage, in order,
    to the descriptor CLAUDEGUARD_STAGES_FD names; the CLI gets neither the variable nor the
    descriptor."""
    write_config(env, CONFIG)
    guard(env, [])  # the service and its planner up: the next launch is planned
    installed = Path(sys.executable).with_name("claudeguard")
    read_end, write_end = os.pipe()
    number = write_end  # the launcher has it under this number: a CLI that inherited it would too
    try:
        proc = subprocess.run([str(installed), "-p", "x"], pass_fds=(write_end,), capture_output=True, text=True,
                              env=dict(env, POSTS="[]", CLAUDEGUARD_STAGES_FD=str(write_end)), timeout=60)
        os.close(write_end)
        write_end = -1
        data = b"".join(iter(lambda: os.read(read_end, 65536), b""))
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert data.count(b"\n") == 1
    marks = json.loads(data)
    assert list(marks) == ["python", "sent", "imported", "asked", "argv", "answered", "exec", "started", "cli-exit",
                           "end"]
    assert list(marks.values()) == sorted(marks.values())
    out = json.loads(Path(env["OUT"]).read_text())
    assert "CLAUDEGUARD_STAGES_FD" not in out["env"]
    assert number not in out["fds"]


def test_without_the_variable_the_launcher_marks_nothing(env):
    write_config(env, CONFIG)
    code = "from claudeguard import stages\nstages.mark('x')\nprint(stages._MARKS)"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout.strip() == "None", proc.stderr
