"""Two installs of claudeguard (two code versions) in one home, side by side (issue 36): a copy of
the package run from its own dir stands for the older install. Its session waits on an ask rule
while a run of this install starts, retires the older service and runs its own session. The
older session is not ended, its request stays answerable (from either install's
``claudeguardctl``), the desk URL the older install printed still works, ``doctor`` names the
retired service, and it exits once its session ends. On the real CLIs."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from claudeguard.service.files import process_start
from claudeguard.testing.wait import wait_until
from tests.shim_helpers import GUARD, ctl, guarded_env, pending, wait_pending, write_user_config

REPO = Path(__file__).resolve().parent.parent
ASK = '[permissions]\nask = ["Bash(echo older *)"]\nallow = ["Bash(echo newer one > newer.txt)"]\n'


def _bash(command: str) -> dict:
    return {"tool_use": {"name": "Bash", "input": {"command": command, "description": "run it"}}}


def _status(env: dict) -> dict:
    out = ctl(env, "service", "status", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _login_status(url: str) -> int:
    host, _, path = url.removeprefix("http://").partition("/")
    conn = http.client.HTTPConnection(host, timeout=30)
    try:
        conn.request("GET", "/" + path)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.one_cli
def test_two_installs_in_one_home_keep_each_others_session_and_desk(real_claude, offline_env, model_server, tmp_path):
    older = tmp_path / "older-install"
    shutil.copytree(REPO / "claudeguard", older / "claudeguard", ignore=shutil.ignore_patterns("__pycache__"))
    init = older / "claudeguard" / "__init__.py"
    text = init.read_text()
    assert text.count('__version__ = "') == 1
    init.write_text(text.replace('__version__ = "', '__version__ = "0.0.9+older-', 1))  # another code version
    server = model_server([
        {"match": "OLDER-INSTALL", "turns": [_bash("echo older one > older.txt"), {"text": "older done"}]},
        {"match": "NEWER-INSTALL", "turns": [_bash("echo newer one > newer.txt"), {"text": "newer done"}]}])
    newer_env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="120")
    write_user_config(newer_env, ASK)
    # its package ahead of this checkout's, whatever the cwd (PYTHONSAFEPATH: no cwd on sys.path)
    older_env = dict(newer_env, PYTHONPATH=str(older), PYTHONSAFEPATH="1")
    check = subprocess.run([sys.executable, "-c", "import claudeguard; print(claudeguard.__file__)"], env=older_env,
                           capture_output=True, text=True, timeout=60)
    assert check.stdout.strip() == str(older / "claudeguard" / "__init__.py"), check
    proc = None
    try:
        desk = ctl(older_env, "desk")
        assert desk.returncode == 0, desk.stderr
        printed = desk.stdout.strip()  # the older install's desk URL, printed before the newer one runs
        older_service = _status(older_env)
        proc = subprocess.Popen(GUARD + ["-p", "OLDER-INSTALL go"], env=older_env, cwd=offline_env.cwd,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        req = wait_pending(older_env, lambda r: r["input"].get("command") == "echo older one > older.txt", timeout=90)

        # The newer install: a whole guarded run; its launcher retires the older service.
        run = subprocess.run(GUARD + ["-p", "NEWER-INSTALL go"], env=newer_env, cwd=offline_env.cwd,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stderr
        assert (offline_env.cwd / "newer.txt").read_text() == "newer one\n"
        newer_service = _status(newer_env)
        assert newer_service["pid"] != older_service["pid"] and newer_service["version"] != older_service["version"]
        assert process_start(older_service["pid"]) is not None  # retired, serving its session
        doctor = ctl(newer_env, "doctor")
        named = [line for line in doctor.stdout.splitlines() if "another install" in line]
        assert named == [f"note  a guard service of another install (version {older_service['version']}) still "
                         f"serves the sessions it had here until they end: pid {older_service['pid']}; new sessions "
                         f"and `claudeguardctl desk` are this install's service's"], doctor.stdout

        # The older session as it was: its one request, listed by either install, its desk URL.
        assert [r["id"] for r in pending(newer_env)] == [req["id"]]
        assert [r["id"] for r in pending(older_env)] == [req["id"]]
        assert _login_status(printed) == 303  # the printed URL still logs in (then on to the page)
        assert ctl(newer_env, "approve", req["id"]).returncode == 0
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "compromised" not in err
        assert (offline_env.cwd / "older.txt").read_text() == "older one\n"
        # its session over and no page open: the retired service exits; the newer one stays
        wait_until(lambda: process_start(older_service["pid"]) is None, 60, "the retired service to exit")
        assert _status(newer_env)["pid"] == newer_service["pid"]
        assert "another install" not in ctl(newer_env, "doctor").stdout
        assert not list((Path(newer_env["CLAUDEGUARD_RUNTIME_DIR"]) / "service").glob("retired-*"))
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(30)
