"""One channel (issue 10): every process of a user finds the same private runtime dir whatever
its environment (cron, SSH, systemd, sudo -u), CLAUDEGUARD_RUNTIME_DIR still overrides, an unsafe
dir is refused with one line, and a waiting session survives the dir being removed: its requests
are listed and answerable again within seconds (channel level here, on the real CLIs below)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from claudeguard import channel, home, paths
from claudeguard.errors import InsecurePathError
from claudeguard.testing.services import live_services
from tests.shim_helpers import GUARD, ctl, guarded_env, pending, remove_at_once, wait_pending, wait_until

# -- where the root is ---------------------------------------------------------------------


@pytest.fixture
def shared_tmp(tmp_path, monkeypatch) -> Path:
    """Stand-in for /tmp (tests leave nothing outside their tmp dir); HOME is the test's own."""
    base = tmp_path / "tmp"
    base.mkdir(mode=0o1777)
    os.chmod(base, 0o1777)
    monkeypatch.setattr(paths, "SHARED_TMP", str(base))
    monkeypatch.delenv("CLAUDEGUARD_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return base


def root_for(shared_tmp: Path, home_dir: Path | str) -> Path:
    """The default runtime dir of a process whose HOME is ``home_dir``."""
    return Path(home.default_root(str(shared_tmp), {"HOME": str(home_dir)}))


ENVIRONMENTS = {
    "cron": {},  # no XDG_RUNTIME_DIR, no TMPDIR
    "ssh": {"XDG_RUNTIME_DIR": f"/run/user/{os.getuid()}", "TMPDIR": "/tmp/user/1"},
    "systemd-user": {"XDG_RUNTIME_DIR": f"/run/user/{os.getuid()}"},
    "sudo-u": {"XDG_RUNTIME_DIR": "/run/user/4242", "TMPDIR": "/var/tmp/other"},  # another user's, kept by sudo -E
}


@pytest.mark.parametrize("name", list(ENVIRONMENTS))
def test_same_root_in_every_environment(shared_tmp, monkeypatch, name):
    monkeypatch.setenv("HOME", home.passwd_home())  # the user's own home: the unkeyed name
    for var in ("XDG_RUNTIME_DIR", "TMPDIR"):
        monkeypatch.delenv(var, raising=False)
    for var, value in ENVIRONMENTS[name].items():
        monkeypatch.setenv(var, value)
    assert paths.runtime_root() == shared_tmp / f"claudeguard-{os.getuid()}"
    made = paths.runtime_dir("channel")
    assert made == shared_tmp / f"claudeguard-{os.getuid()}" / "channel"
    assert os.stat(made.parent).st_mode & 0o777 == 0o700 and os.stat(made.parent).st_uid == os.getuid()


def test_the_override_still_wins(shared_tmp, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", home.passwd_home())
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "mine"))
    assert paths.runtime_root() == tmp_path / "mine"
    assert paths.default_runtime_root() == str(shared_tmp / f"claudeguard-{os.getuid()}")


def test_default_is_under_slash_tmp(monkeypatch):
    monkeypatch.setenv("HOME", home.passwd_home())
    monkeypatch.delenv("CLAUDEGUARD_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1")
    monkeypatch.setenv("TMPDIR", "/elsewhere")
    assert str(paths.runtime_root()) == f"/tmp/claudeguard-{os.getuid()}"  # computed only: nothing made


# -- two homes of one user (issue 36) -------------------------------------------------------


def test_another_home_has_a_root_of_its_own_that_every_environment_finds(shared_tmp, tmp_path, monkeypatch):
    other = tmp_path / "other-home"
    other.mkdir()
    own = paths.default_runtime_root()  # HOME is the test's tmp dir: keyed too
    monkeypatch.setenv("HOME", str(other))
    theirs = paths.default_runtime_root()
    prefix = str(shared_tmp / f"claudeguard-{os.getuid()}-")
    assert theirs.startswith(prefix) and own.startswith(prefix) and theirs != own
    assert len(theirs) - len(prefix) == 12
    for name, extra in ENVIRONMENTS.items():  # cron, ssh, systemd, sudo -u: the same home, the same root
        for var in ("XDG_RUNTIME_DIR", "TMPDIR"):
            monkeypatch.delenv(var, raising=False)
        for var, value in extra.items():
            monkeypatch.setenv(var, value)
        assert paths.default_runtime_root() == theirs, name
    monkeypatch.setenv("HOME", str(other) + "/")  # the same directory, however it is written
    assert paths.default_runtime_root() == theirs
    made = paths.runtime_dir("channel")
    assert str(made.parent) == theirs
    assert json.loads((made.parent / "home.json").read_text()) == {
        "home": str(other), "dev": other.stat().st_dev, "ino": other.stat().st_ino}
    assert paths.guard_paths({"HOME": str(other)}).runtime == theirs


def test_no_home_is_your_own_home(shared_tmp, monkeypatch):
    monkeypatch.delenv("HOME")
    assert paths.default_runtime_root() == str(shared_tmp / f"claudeguard-{os.getuid()}")
    monkeypatch.setenv("HOME", home.passwd_home())
    assert paths.default_runtime_root() == str(shared_tmp / f"claudeguard-{os.getuid()}")


def test_a_container_s_home_of_the_same_name_is_another_home(shared_tmp, tmp_path, monkeypatch):
    """A container that shares /tmp, running as this uid with its own /home/you: the unkeyed
    root says whose it is, and the other side's own home is keyed like any other."""
    monkeypatch.setenv("HOME", home.passwd_home())
    base = shared_tmp / f"claudeguard-{os.getuid()}"
    base.mkdir(mode=0o700)
    elsewhere = tmp_path / "container-fs-home"
    elsewhere.mkdir()
    st = elsewhere.stat()
    (base / "home.json").write_text(json.dumps({"home": home.passwd_home(), "dev": st.st_dev, "ino": st.st_ino}))
    root = paths.default_runtime_root()
    assert root.startswith(f"{base}-") and root == paths.default_runtime_root()
    monkeypatch.delenv("HOME")  # cron of this side: the same
    assert paths.default_runtime_root() == root
    (base / "home.json").unlink()  # a root that does not say is the own home's (made by an older claudeguard)
    assert paths.default_runtime_root() == str(base)


def test_two_homes_sharing_a_runtime_dir_each_have_their_own_service_slot(tmp_path, monkeypatch):
    shared = tmp_path / "shared-run"
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(shared))
    monkeypatch.setenv("HOME", str(first))
    assert paths.service_slot() == shared / "service"  # the first to make it owns it
    monkeypatch.setenv("HOME", str(second))
    slot = paths.service_slot()
    assert slot.parent == shared and slot.name == f"service-{home.key(home.identity(str(second)))}"
    from claudeguard.service import files
    from claudeguard.shim.planned import plan_socket_path

    assert files.service_dir() == str(slot) and plan_socket_path() == str(slot / "plan.sock")
    monkeypatch.setenv("HOME", str(first))
    assert files.service_dir() == str(shared / "service")


def test_a_home_that_borrows_another_s_default_root_never_claims_it(shared_tmp, tmp_path, monkeypatch):
    """The demo runs with a throwaway HOME in the user's own runtime dir (its request is the
    user's to answer from any shell): made first by it, the dir is still the user's."""
    own = shared_tmp / f"claudeguard-{os.getuid()}"
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(own))
    slot = paths.service_slot()  # HOME is the test's tmp dir: not the user's own
    assert not (own / "home.json").exists() and slot.name.startswith("service-")
    monkeypatch.setenv("HOME", home.passwd_home())
    assert paths.service_slot() == own / "service"
    assert json.loads((own / "home.json").read_text())["home"] == home.passwd_home()


def remove_whole(directory: Path) -> None:
    """The directory gone at once, as a tmp cleaner or a logout takes it (renamed away, then
    removed: the sessions write into it meanwhile, and a plain rmtree races their writes)."""
    gone = directory.with_name(directory.name + "-removed")
    os.rename(directory, gone)
    wait_until(lambda: shutil.rmtree(gone, ignore_errors=True) or not gone.exists(), 60, f"{gone} removed")


def _refused(match: str) -> None:
    with pytest.raises(InsecurePathError, match=match) as info:
        paths.runtime_dir("channel")
    text = str(info.value)
    assert "\n" not in text and "CLAUDEGUARD_RUNTIME_DIR" in text


def test_refuses_a_planted_symlink(shared_tmp, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    root_for(shared_tmp, tmp_path).symlink_to(target)
    _refused("symlink")
    assert list(target.iterdir()) == []


def test_refuses_a_dir_open_to_others(shared_tmp, tmp_path):
    root_for(shared_tmp, tmp_path).mkdir(mode=0o755)
    os.chmod(root_for(shared_tmp, tmp_path), 0o755)
    _refused("lets others in")


@pytest.mark.skipif(os.getuid() != 0, reason="making a dir owned by another uid needs root")
def test_refuses_a_dir_owned_by_someone_else(shared_tmp, tmp_path):
    root = root_for(shared_tmp, tmp_path)
    root.mkdir(mode=0o700)
    os.chown(root, 4242, 4242)
    _refused("owned by uid 4242")
    assert list(root.iterdir()) == []


def test_the_cli_says_it_in_one_line(shared_tmp, tmp_path):
    root = root_for(shared_tmp, tmp_path)
    root.mkdir(mode=0o777)
    os.chmod(root, 0o777)
    out = _ctl_at(shared_tmp, {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}, "pending")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "lets others in" in out.stderr
    assert list(root.iterdir()) == []


# Processes that find the default root as claudeguard would, with /tmp swapped for the test's.
_AT = "import sys, claudeguard.paths as p; p.SHARED_TMP = sys.argv.pop(1); "
CTL_AT = _AT + "from claudeguard.commands.ctl import main; sys.exit(main(sys.argv[1:]))"
POSTER_AT = _AT + """
from claudeguard import channel
p = channel.post(session_id='cron-job', agent_type=None, agent_id=None, tool='Bash', input={'command': 'make'},
                 summary='Bash: make', cwd='/', timeout=60)
print(p.request.id, flush=True)
a = p.wait()
print(a.decision, a.decided_by, flush=True)
"""


def _ctl_at(base: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    env = dict(env, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", CTL_AT, str(base), *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_cron_job_and_an_ssh_shell_meet_in_one_channel(shared_tmp, tmp_path):
    cron = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "SHELL": "/bin/sh", "PYTHONPATH": os.pathsep.join(sys.path)}
    ssh = dict(cron, XDG_RUNTIME_DIR=str(tmp_path / "run-user"), TMPDIR=str(tmp_path / "ssh-tmp"), SSH_CONNECTION="x")
    poster = subprocess.Popen([sys.executable, "-c", POSTER_AT, str(shared_tmp)], env=cron,
                              stdout=subprocess.PIPE, text=True)
    try:
        rid = poster.stdout.readline().strip()
        listed = _ctl_at(shared_tmp, ssh, "pending", "--json")
        assert [r["id"] for r in json.loads(listed.stdout)] == [rid], listed.stderr
        assert _ctl_at(shared_tmp, ssh, "approve", rid).returncode == 0
        assert poster.stdout.readline().split() == ["allow", "human"]
        assert poster.wait(10) == 0
    finally:
        if poster.poll() is None:
            poster.kill()
            poster.wait(10)


def test_an_older_root_still_in_use_is_named(shared_tmp, tmp_path):
    old = tmp_path / "run-user" / "claudeguard" / "channel"
    old.mkdir(parents=True, mode=0o700)
    (old / "abcdefabcdefabcd.json").write_text("{}")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": str(tmp_path / "run-user")}
    out = _ctl_at(shared_tmp, env, "pending")
    assert out.returncode == 0 and out.stdout == "no pending requests\n"
    assert out.stderr == (f"claudeguardctl: note: {tmp_path / 'run-user' / 'claudeguard'} holds sessions or "
                          f"requests of an older "
                          f"claudeguard (default then: $XDG_RUNTIME_DIR/claudeguard); see them with "
                          f"CLAUDEGUARD_RUNTIME_DIR={tmp_path / 'run-user' / 'claudeguard'}\n")
    (old / "abcdefabcdefabcd.json").unlink()
    assert _ctl_at(shared_tmp, env, "pending").stderr == ""


# -- the dir removed under a waiting request (channel level) --------------------------------


@pytest.fixture
def chan(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    return tmp_path / "run" / "channel"


def _waiting(timeout: float = 30):  # type: ignore[no-untyped-def]
    pending_ = channel.post(session_id="s", agent_type=None, agent_id=None, tool="Bash", input={"command": "make"},
                            summary="Bash: make", cwd="/", timeout=timeout)
    result: list = []
    thread = threading.Thread(target=lambda: result.append(pending_.wait()), daemon=True)
    thread.start()
    return pending_, thread, result


def _listed_again(rid: str, within: float) -> float:
    started = time.monotonic()
    wait_until(lambda: [r.id for r in channel.list_pending()] == [rid], within, f"{rid} to be listed again")
    return time.monotonic() - started


def test_removed_runtime_dir_request_is_listed_and_answerable_again(chan):
    pending_, thread, result = _waiting()
    rid, deadline = pending_.request.id, pending_.request.deadline
    for _ in range(2):  # twice in a row
        remove_at_once(chan.parent)
        _listed_again(rid, 60)  # within ~CHECK_EVERY_S on a quiet machine; the bound is for a loaded one
        assert not thread.is_alive() or result == []
    again = channel.list_pending()[0]
    assert again.deadline == deadline and again.summary == "Bash: make"
    assert os.stat(chan.parent).st_mode & 0o777 == 0o700 and os.stat(chan).st_mode & 0o777 == 0o700
    channel.answer(rid[:8], "allow", by="test")
    thread.join(60)
    assert [(a.decision, a.decided_by) for a in result] == [("allow", "human")]
    assert sorted(os.listdir(chan)) in ([], ["bells"])


def _failing_channel_dirs(monkeypatch, times: int | None) -> list[int]:
    """The waiter's ChannelDir() fails ``times`` times (None: always) as a removal or a making
    racing it would make it fail; the list counts the calls."""
    from claudeguard.channel import requests
    from claudeguard.errors import GuardError

    real, calls = requests.ChannelDir, []

    def flaky():  # type: ignore[no-untyped-def]
        calls.append(1)
        if times is None or len(calls) <= times:
            raise GuardError("approval channel runtime dir: No such file or directory")
        return real()

    monkeypatch.setattr(requests, "ChannelDir", flaky)
    return calls


def test_a_dir_that_cannot_be_made_again_at_once_is_tried_again(chan, monkeypatch):
    pending_, thread, result = _waiting()
    rid = pending_.request.id
    calls = _failing_channel_dirs(monkeypatch, 2)
    remove_at_once(chan.parent)
    _listed_again(rid, 60)
    assert len(calls) == 3 and thread.is_alive() and result == []  # two failed, the third made it
    channel.answer(rid[:8], "allow", by="test")
    thread.join(60)
    assert [(a.decision, a.decided_by) for a in result] == [("allow", "human")]


def test_a_dir_that_cannot_be_made_again_ends_the_request_denied(chan, monkeypatch):
    from claudeguard.channel.requests import REPUBLISH_TRIES

    pending_, thread, result = _waiting()
    calls = _failing_channel_dirs(monkeypatch, None)
    remove_at_once(chan.parent)
    thread.join(60)
    assert not thread.is_alive() and len(calls) == REPUBLISH_TRIES
    [answer] = result
    assert (answer.decision, answer.decided_by) == ("deny", "error")
    assert answer.message == ("claudeguard: the approval channel was lost and could not be made again (request "
                              f"{pending_.request.id}: approval channel runtime dir: No such file or directory); "
                              "denied")


def test_a_dir_removed_between_its_check_and_its_files_is_published_again(chan, monkeypatch):
    # The removal lands after the waiter saw its dir in place and before it looked for its
    # socket (seen under load): the files are gone because the dir is, not a lost channel.
    from claudeguard.channel.requests import Pending

    pending_, thread, result = _waiting()
    rid, real, removed = pending_.request.id, Pending._dir_lost, []

    def lost_after_the_check(self):  # type: ignore[no-untyped-def]
        answer = real(self)
        if not removed:
            removed.append(1)
            remove_at_once(chan.parent)
        return answer

    monkeypatch.setattr(Pending, "_dir_lost", lost_after_the_check)
    wait_until(lambda: removed, 60, "the waiter's next check")
    _listed_again(rid, 60)
    assert removed == [1] and thread.is_alive() and result == []
    channel.answer(rid[:8], "deny", by="test")
    thread.join(60)
    assert [(a.decision, a.decided_by) for a in result] == [("deny", "human")]


def test_an_answer_in_flight_when_the_dir_goes_is_not_lost(chan):
    import socket

    from claudeguard.channel import wire

    pending_, thread, result = _waiting()
    rid = pending_.request.id
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(10)
    sock.connect(str(chan / f"{rid}.sock"))
    remove_at_once(chan.parent)  # the answerer had connected already
    try:
        sock.sendall(wire.encode_answer(rid, "deny", message="late but valid"))
        assert wire.decode_reply(sock.recv(4096)) is None  # taken, and told so
    finally:
        sock.close()
    thread.join(60)
    assert [(a.decision, a.message) for a in result] == [("deny", "late but valid")]
    assert channel.list_pending() == []


# -- on the real CLIs ----------------------------------------------------------------------


def _stop(pid: int) -> None:
    from claudeguard.service.files import process_start

    start = process_start(pid)
    if start is None:
        return
    os.kill(pid, 15)
    deadline = time.monotonic() + 5
    while process_start(pid) == start and time.monotonic() < deadline:
        time.sleep(0.02)
    if process_start(pid) == start:
        os.kill(pid, 9)


def _bash(command: str) -> dict:
    return {"name": "Bash", "input": {"command": command, "description": "run it"}}


def test_real_session_survives_its_runtime_dir_removed(real_claude, offline_env, model_server, tmp_path):
    """A -p run waits for approval; the whole runtime dir is removed (as systemd does at
    logout). Within seconds the request is listed again, the session is in `ps` again, the
    approval goes through, and the next call (whose prompt tool needs session.json) asks too."""
    server = model_server([{"match": "SURVIVE", "turns": [{"tool_use": _bash("echo one > one.txt")},
                                                          {"tool_use": _bash("echo two > two.txt")}, {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    runtime = Path(env["CLAUDEGUARD_RUNTIME_DIR"])
    services: list[int] = []
    proc = subprocess.Popen(GUARD + ["-p", "SURVIVE go", "--output-format", "stream-json", "--verbose"], env=env,
                            cwd=offline_env.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = wait_pending(env, timeout=60)
        [session] = [s for s in json.loads(ctl(env, "ps", "--json").stdout)]
        services = live_services(tmp_path)  # its record goes with the dir: stopped by pid below
        remove_whole(runtime)
        again = wait_pending(env, lambda r: r["id"] == first["id"], timeout=60)  # ~1 s quiet: the bound is for load
        assert again["input"]["command"] == "echo one > one.txt"
        wait_until(lambda: [s for s in json.loads(ctl(env, "ps", "--json").stdout) if s["pid"] == session["pid"]], 60,
                   "the session to be in ps again", interval=0.2)
        assert (runtime / "sessions").stat().st_mode & 0o777 == 0o700
        assert ctl(env, "approve", first["id"]).returncode == 0
        second = wait_pending(env, lambda r: r["id"] != first["id"], timeout=60)
        assert second["input"]["command"] == "echo two > two.txt"
        assert ctl(env, "approve", second["id"]).returncode == 0
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in services:
            _stop(pid)
    assert proc.returncode == 0, err
    assert (offline_env.cwd / "one.txt").read_text() == "one\n" and (offline_env.cwd / "two.txt").read_text() == "two\n"
    humans = [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]
    assert [(e["decision"], e["decided_by"]) for e in humans if e.get("tool") == "Bash"] == [("allow", "human")] * 2
    assert pending(env) == []
    assert not (runtime / "sessions").exists() or list((runtime / "sessions").iterdir()) == []
