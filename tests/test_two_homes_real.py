"""Two homes of one user side by side (issue 36): a script run with a temporary HOME beside the
user's own session no longer shares its runtime dir (``/tmp/claudeguard-<uid>`` is the user's
own home's; another home gets ``/tmp/claudeguard-<uid>-<key>``, claudeguard/home.py). The other
home's service neither takes over nor ends the first home's waiting session, the first home's
desk keeps working, `doctor` names the other home, and two homes that share one runtime dir on
purpose each get their own service slot. On the real CLIs, with the default roots under /tmp
(made by the test for homes of its own, and removed by it)."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from claudeguard import home
from claudeguard.testing.offline_home import offline_env as make_env
from claudeguard.testing.offline_home import prepare_home
from claudeguard.testing.services import stop_services
from tests.shim_helpers import GUARD, ctl, guarded_env, pending, wait_pending, write_user_config

ASK = '[permissions]\nask = ["Bash(echo first *)"]\nallow = ["Bash(echo second one > second.txt)"]\n'


def _bash(command: str) -> dict:
    return {"tool_use": {"name": "Bash", "input": {"command": command, "description": "run it"}}}


def _default_env(env: dict) -> dict:
    """``env`` without a runtime dir of its own: the default root of its HOME, under /tmp."""
    env = dict(env)
    env.pop("CLAUDEGUARD_RUNTIME_DIR", None)
    return env


def _get(url: str) -> int:
    """The status of a GET of ``url`` (a desk URL: ``http://127.0.0.1:PORT/...``)."""
    host, _, path = url.removeprefix("http://").partition("/")
    conn = http.client.HTTPConnection(host, timeout=30)
    try:
        conn.request("GET", "/" + path, headers={"Host": host})
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.one_cli
def test_a_second_home_neither_takes_over_nor_ends_the_first_home_s_session(real_claude, offline_env, model_server,
                                                                             tmp_path):
    server = model_server([
        {"match": "FIRST-HOME", "turns": [_bash("echo first one > first.txt"), {"text": "first done"}]},
        {"match": "SECOND-HOME", "turns": [_bash("echo second one > second.txt"), {"text": "second done"}]}])
    first = _default_env(guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="120"))
    write_user_config(first, ASK)
    second_home, second_work = tmp_path / "second-home", tmp_path / "second-work"
    second_work.mkdir()
    prepare_home(second_home, cwd=second_work, api_key=offline_env.api_key)
    second = _default_env(guarded_env(make_env(second_home, server.url, offline_env.api_key), real_claude))
    write_user_config(second, ASK)
    roots = [Path(home.default_root("/tmp", first)), Path(home.default_root("/tmp", second))]
    assert roots[0] != roots[1] and all(str(r).startswith("/tmp/claudeguard-") for r in roots)
    assert not any(r.exists() for r in roots)  # the homes are the test's own: so are their dirs
    proc = None
    try:
        desk = ctl(first, "desk")
        assert desk.returncode == 0, desk.stderr
        printed = desk.stdout.strip()  # the first home's desk URL, printed before the second home runs
        first_service = json.loads(ctl(first, "service", "status", "--json").stdout)["pid"]
        proc = subprocess.Popen(GUARD + ["-p", "FIRST-HOME go"], env=first, cwd=offline_env.cwd,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        req = wait_pending(first, lambda r: r["input"].get("command") == "echo first one > first.txt", timeout=90)

        # The second home: a whole guarded run, its own service, then a script's cleanup.
        run = subprocess.run(GUARD + ["-p", "SECOND-HOME go"], env=second, cwd=second_work, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stderr
        assert (second_work / "second.txt").read_text() == "second one\n"
        second_service = json.loads(ctl(second, "service", "status", "--json").stdout)["pid"]
        assert second_service != first_service
        assert pending(second) == []  # the first home's request is not the second's to see or answer
        doctor = ctl(first, "doctor")
        named = [line for line in doctor.stdout.splitlines() if str(roots[1]) in line]
        assert named == [f"note  another home's guard beside this one: {roots[1]} (HOME {second_home}): service pid "
                         f"{second_service}, 0 sessions; its requests, sessions and desk are its own "
                         f"(CLAUDEGUARD_RUNTIME_DIR={roots[1]} claudeguardctl pending)"], doctor.stdout
        assert ctl(second, "service", "stop").returncode == 0

        # The first home is as it was: its service, its waiting request, its desk.
        assert json.loads(ctl(first, "service", "status", "--json").stdout)["pid"] == first_service
        assert [r["id"] for r in pending(first)] == [req["id"]]
        assert _get(printed) == 303  # the printed URL still logs in (then on to the page)
        assert ctl(first, "approve", req["id"]).returncode == 0
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "compromised" not in err
        assert (offline_env.cwd / "first.txt").read_text() == "first one\n"
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for root in roots:
            stop_services(root)
            shutil.rmtree(root, ignore_errors=True)
    assert not any(r.exists() for r in roots)


@pytest.mark.one_cli
def test_two_homes_sharing_one_runtime_dir_each_run_their_own_service(real_claude, offline_env, model_server,
                                                                      tmp_path):
    """CLAUDEGUARD_RUNTIME_DIR set to one dir from two homes (as the demo does): one channel, two
    services, each with its own home's config."""
    server = model_server([{"match": "SECOND-HOME", "turns": [_bash("echo second one > second.txt"),
                                                                {"text": "second done"}]}])
    shared = tmp_path / "shared-run"
    first = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_RUNTIME_DIR=str(shared))
    second_home, second_work = tmp_path / "second-home", tmp_path / "second-work"
    second_work.mkdir()
    prepare_home(second_home, cwd=second_work, api_key=offline_env.api_key)
    second = guarded_env(make_env(second_home, server.url, offline_env.api_key), real_claude,
                         CLAUDEGUARD_RUNTIME_DIR=str(shared))
    write_user_config(second, ASK)
    try:
        assert ctl(first, "service", "start").returncode == 0
        first_service = json.loads(ctl(first, "service", "status", "--json").stdout)["pid"]
        run = subprocess.run(GUARD + ["-p", "SECOND-HOME go"], env=second, cwd=second_work, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stderr
        status = json.loads(ctl(second, "service", "status", "--json").stdout)
        assert status["pid"] != first_service
        assert json.loads(ctl(first, "service", "status", "--json").stdout)["pid"] == first_service
        slots = sorted(p.name for p in shared.iterdir() if p.name.startswith("service"))
        assert slots == ["service", f"service-{home.key(home.identity(str(second_home)))}"]
        record = json.loads((shared / "service" / "service.json").read_text())
        assert record["home"] == str(offline_env.home.resolve())
    finally:
        stop_services(tmp_path)
