"""The sandbox's parts without the real CLI (plan/sandbox.py, gate/box.py): the seccomp filter
read by a small BPF interpreter for both machines, the box script run by hand the way the CLI
runs its shell prefix (what a boxed command can and cannot do, the renames that would reopen a
hidden path), the config's sandbox keys and their file:line errors, the launcher's refusal
where lockdown needs a box that cannot run, the probe's cache, and the gate's side (a call
that asks to leave the box, the input an allowed call runs). The real CLIs are in
tests/test_sandbox_real.py."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from claudeguard.config.load import load_config
from claudeguard.decision import Decision
from claudeguard.errors import ConfigError, UsageError
from claudeguard.gate.box import LEAVE_RULE, allowed_input, leaving
from claudeguard.gate.session import Session
from claudeguard.paths import guard_paths
from claudeguard.plan import box_enter, sandbox
from claudeguard.plan.sandbox import cli_shell as _cli_shell
from claudeguard.procs import process_start
from tests.conftest import BOX_ENTER, in_ci

GUARD = [sys.executable, "-m", "claudeguard"]
HAVE_BWRAP = shutil.which("bwrap") is not None
needs_bwrap = pytest.mark.skipif(not HAVE_BWRAP and not in_ci(),
                                 reason="bubblewrap is not installed (under CI=true this fails instead)")


# --- the seccomp filter, read by a small classic-BPF interpreter ------------------------------------


def run_bpf(program: bytes, arch: int, nr: int, arg0: int = 0) -> int:
    """What the filter returns for one system call (seccomp_data: nr, arch, ip, args)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    insns = [struct.unpack("<HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == 0x15:  # jeq
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x35:  # jge
            pc += 1 + (jt if acc >= k else jf)
        elif code == 0x06:  # ret
            return k
        else:
            raise AssertionError(f"unexpected BPF code {code:#x}")


ALLOW, EPERM, KILL = 0x7FFF0000, 0x00050001, 0x80000000


@pytest.mark.parametrize("machine, arch, socket_nr, other_nr", [
    ("x86_64", 0xC000003E, 41, 0),  # read
    ("aarch64", 0xC00000B7, 198, 63),  # read
])
def test_the_filter_refuses_unix_sockets_and_io_uring_on_each_machine(machine, arch, socket_nr, other_nr):
    program = sandbox.seccomp_filter(machine)
    assert program is not None
    assert run_bpf(program, arch, socket_nr, 1) == EPERM  # AF_UNIX
    assert run_bpf(program, arch, socket_nr, 2) == ALLOW  # AF_INET
    assert run_bpf(program, arch, socket_nr, 10) == ALLOW  # AF_INET6
    assert run_bpf(program, arch, 425) == EPERM  # io_uring_setup
    assert run_bpf(program, arch, other_nr) == ALLOW
    assert run_bpf(program, 0x40000003, socket_nr, 1) == KILL  # i386 code
    widened = sandbox.seccomp_filter(machine, unix=True)
    assert widened is not None
    assert run_bpf(widened, arch, socket_nr, 1) == ALLOW
    assert run_bpf(widened, arch, 425) == EPERM


def test_x32_code_is_killed_and_other_machines_have_no_filter():
    program = sandbox.seccomp_filter("x86_64")
    assert program is not None
    assert run_bpf(program, 0xC000003E, 0x40000000 | 41, 1) == KILL
    assert sandbox.seccomp_filter("riscv64") is None and sandbox.seccomp_filter("i686") is None


# --- the box script, run as the CLI runs its shell prefix ----------------------------------------------


_SESSION_BOXES: list[box_enter.SessionBox] = []


@pytest.fixture(params=["call-box", "session-box", "cli-shell"])
def lab(tmp_path, monkeypatch, request):
    """A user (HOME, XDG dirs, runtime dir under tmp_path) with a git project ``work``. Every box
    test runs three times: "call-box", the box script with the session box's entry there but no
    session box live (each call falls back to a bwrap box of its own); "session-box", the session's
    box started as the launcher starts it (plan/box_enter.py) and each call run in it through the
    box script; "cli-shell", the same box, each call handed (prefix and call quoted, as the CLI
    does) to the CLI's shell that enters the box itself (box_enter.c's shell way in), which hands
    whatever it does not take on to the box script."""
    if request.param in ("session-box", "cli-shell"):
        assert BOX_ENTER or not in_ci(), "the session box's entry did not build (no C compiler?)"
        if not BOX_ENTER:
            pytest.skip("no C compiler to build the session box's entry (under CI=true this fails instead)")
        monkeypatch.setattr(sys.modules[__name__], "_START_SESSION_BOX", True)
    if request.param == "cli-shell":
        Path(BOX_ENTER + box_enter.RAN_SUFFIX).touch()  # as after a trial call (box_enter.start writes it)
        monkeypatch.setattr(sys.modules[__name__], "_CLI_SHELL", True)
    request.addfinalizer(_stop_session_boxes)
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_STATE_HOME": str(home / ".local/state"),
           "CLAUDEGUARD_RUNTIME_DIR": str(tmp_path / "rt"), "CLAUDEGUARD_LOG_DIR": str(home / ".local/state/cg/log"),
           "PATH": os.environ["PATH"], "SHELL": "/bin/bash",
           # where the CLI would keep background output (the session box shows it): in the lab
           "CLAUDE_CODE_TMPDIR": str(tmp_path / "clitmp")}
    for key in ("CLAUDEGUARD_CONFIG", "CLAUDE_CODE_SHELL_PREFIX", "CLAUDE_CODE_TMPDIR", "TMPDIR", "CLAUDE_CODE_SHELL"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    (tmp_path / "rt").mkdir(mode=0o700)
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    return tmp_path


def _config(lab: Path, text: str) -> Path:
    path = lab / "home" / ".config" / "claudeguard" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


_START_SESSION_BOX = False
_CLI_SHELL = False
_SHELLS: dict[str, str] = {}  # a box's prefix -> the CLI's shell that enters it


def _stop_session_boxes() -> None:
    while _SESSION_BOXES:
        _SESSION_BOXES.pop().stop()


def _box(lab: Path, cwd: Path | None = None, version: str | None = "2.1.330") -> sandbox.BoxSpec:
    cfg = load_config(cwd or lab / "work")
    session_dir = lab / "rt" / "sessions" / "s1"
    session_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    prepared = sandbox.prepare(cfg, dict(os.environ), str(cwd or lab / "work"), str(session_dir), session_id="s1",
                               cli_version=version, own=["/own/hook"])
    assert prepared.box is not None
    if _CLI_SHELL and version == "2.1.330" and os.environ.get(box_enter.PROGRAM_VAR) == BOX_ENTER:
        assert prepared.shell is not None and os.readlink(prepared.shell) == BOX_ENTER
        _SHELLS[prepared.box["prefix"]] = prepared.shell
    if _START_SESSION_BOX:
        started = box_enter.start(str(session_dir), dict(os.environ))
        _SESSION_BOXES.append(started)
        assert started.reason is None and (session_dir / box_enter.LIVE_FILE).exists(), started.reason
    return prepared.box


def _prepared_only(lab: Path) -> tuple[sandbox.BoxSpec, Path]:
    """The box prepared as the plan prepares it, no session box started (the launcher starts it)."""
    global _START_SESSION_BOX
    saved, _START_SESSION_BOX = _START_SESSION_BOX, False
    try:
        box = _box(lab)
    finally:
        _START_SESSION_BOX = saved
    return box, Path(box["prefix"]).parent


def _run(box: sandbox.BoxSpec, command: str, cwd: Path, cwd_file: Path | None = None) -> subprocess.CompletedProcess:
    """``command`` through the box, framed as the CLI frames a Bash call."""
    quoted = "'" + command.replace("'", "'\\''") + "'"
    framed = f"eval {quoted} < /dev/null{sandbox.FRAME}{cwd_file or cwd / 'x-cwd'}"
    shell = _SHELLS.get(box["prefix"]) if _CLI_SHELL else None
    if shell:  # as the CLI hands a call to its shell: the prefix, then the call quoted its way
        argv = [shell, "-c", f"{box['prefix']} '" + framed.replace("'", "'\"'\"'") + "'"]
    else:
        argv = [box["prefix"], framed]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)


def _pid1(out: str) -> str:
    """The name of the call's pid 1 (the first line of its output): bwrap in a box of the call's
    own, box-enter in the session's box."""
    return out.split("\n", 1)[0]


@needs_bwrap
def test_a_boxed_command_sees_no_guard_path_and_keeps_its_work(lab):
    config = _config(lab, "[approval]\ntimeout = 30\n")
    (lab / "rt" / "secret").write_text("s3cret")
    box = _box(lab)
    work = lab / "work"
    proc = _run(box, f"cat {lab}/rt/secret; cat {config}; ls {lab}/home/.local/state/claudeguard; "
                     f"echo x >> {config}; echo made > made.txt; echo t > /tmp/t && cat /tmp/t; "
                     "touch .claude/settings.local.json .git/hooks/pre-commit .git/config; "
                     "python3 -c 'import socket; socket.socket(socket.AF_UNIX)'; cd .git && pwd; true", work)
    assert proc.returncode == 0, proc.stderr
    assert "s3cret" not in proc.stdout and "timeout" not in proc.stdout
    assert proc.stdout.split() == ["t", f"{work}/.git"], proc.stdout
    err = proc.stderr
    assert f"{lab}/rt/secret: Permission denied" in err and f"{config}: Permission denied" in err
    assert "state/claudeguard': Permission denied" in err
    assert "Operation not permitted" in err  # AF_UNIX
    for name in (".claude/settings.local.json", ".git/hooks/pre-commit", ".git/config"):
        assert f"'{name}': Read-only file system" in err, err
    assert (work / "made.txt").read_text() == "made\n"
    assert config.read_text() == "[approval]\ntimeout = 30\n"
    assert not (work / ".claude" / "settings.local.json").exists()
    assert (work / "x-cwd").read_text().strip() == f"{work}/.git"  # where the CLI reads the next cwd from


def _leftovers(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(int(pid))
        except (OSError, ValueError):
            continue
    return found


@needs_bwrap
@pytest.mark.parametrize("lab", ["session-box", "cli-shell"], indirect=True)
def test_a_call_runs_in_the_session_box_and_what_it_left_ends_with_it(lab):
    """The call's pid 1 is the session box's entry (no bwrap of its own); its command has what
    bwrap gave it (no capabilities, no new privileges, the seccomp filter, its own pid namespace
    and /proc); its status comes back, a death by signal as 128+N; and a process it left running
    ends with it."""
    box = _box(lab)
    work = lab / "work"
    marker = f"cg-left-{os.getpid()}-{os.urandom(4).hex()}"
    proc = _run(box, f"cat /proc/1/comm; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; "
                     f"ls /proc | grep -c '^[0-9]'; (exec -a {marker} sleep 60) & exit 7", work)
    assert proc.returncode == 7, proc.stderr
    lines = proc.stdout.split("\n")
    assert _pid1(proc.stdout).startswith("box-enter"), proc.stdout
    status = dict(line.split(":\t") for line in lines[1:5])
    assert status == {"CapEff": "0000000000000000", "CapBnd": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}
    assert int(lines[5]) <= 6  # pid 1, the shell, ls, grep, the sleeper: none of another call's
    assert _leftovers(marker) == []  # ended with the call's pid namespace, before the call returned
    proc = _run(box, "kill -TERM $$", work)
    assert proc.returncode == 128 + 15


@needs_bwrap
@pytest.mark.parametrize("lab", ["session-box"], indirect=True)
def test_the_session_box_ends_with_the_process_that_started_it_however_it_ends(lab):
    """A launcher killed outright (SIGKILL: no clean-up of its own) takes its session's box along:
    the box's command waits on a pipe only the launcher holds."""
    from claudeguard.testing.wait import wait_until

    _, session_dir = _prepared_only(lab)  # the box is started by the stand-in launcher below
    code = ("import os, sys, time\nfrom claudeguard.plan import box_enter\n"
            "box = box_enter.start(sys.argv[1], dict(os.environ))\nprint(box.reason or 'live', flush=True)\n"
            "time.sleep(120)\n")
    launcher = subprocess.Popen([sys.executable, "-c", code, str(session_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert launcher.stdout is not None and launcher.stdout.readline().strip() == "live"
        pid = int((session_dir / box_enter.LIVE_FILE).read_text().split()[0])
        assert process_start(pid) is not None
        launcher.kill()
        launcher.wait()
        wait_until(lambda: process_start(pid) is None, 30, "the box's pid 1 to end (gone, or a zombie)")
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()


@needs_bwrap
@pytest.mark.parametrize("lab", ["session-box"], indirect=True)
def test_a_session_box_held_still_by_the_hold_still_ends_at_the_sessions_end(lab):
    """The hold (gate/freeze.py) may have stopped every process of the box when the session ends:
    its ``sh`` cannot see the pipe close, so ``stop`` ends the box's pid 1 itself, and returns once
    it has (no call enters the box after)."""
    import signal

    box = _box(lab)
    session_dir = Path(box["prefix"]).parent
    pid = int((session_dir / box_enter.LIVE_FILE).read_text().split()[0])
    held = [pid, *(int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]
    assert len(held) == 2  # pid 1 and the sh that waits on the pipe
    for each in held:
        os.kill(each, signal.SIGSTOP)
    _stop_session_boxes()
    assert process_start(pid) is None  # gone (or a zombie) when stop() returned
    assert all(process_start(each) is None for each in held)


@needs_bwrap
@pytest.mark.parametrize("lab", ["session-box"], indirect=True)
def test_the_session_box_starts_at_the_first_bash_call_and_not_before(lab):
    """Issue 34: the launcher's box (box_enter.OnDemand) waits on its FIFO: nothing started
    until the guard says a Bash call is coming (``want``); then it goes live and the next call
    runs in it; its end ends it."""
    from claudeguard.testing.wait import wait_until

    box, session_dir = _prepared_only(lab)
    on_demand = box_enter.OnDemand(str(session_dir), dict(os.environ)).start()
    try:
        wait_until(lambda: (session_dir / box_enter.WANT_FILE).is_fifo(), 30, "the launcher's FIFO")
        proc = _run(box, "cat /proc/1/comm", lab / "work")  # through the box script, not live yet
        assert proc.returncode == 0 and _pid1(proc.stdout) == "bwrap", (proc.stdout, proc.stderr)
        # ... whose own byte into the FIFO started the box: hook-less sessions get it too
        # live (its file written inside start()) and handed to the launcher's thread (start()
        # returned): two moments, apart under load, as the box's thread runs at nice 19
        wait_until(lambda: (session_dir / box_enter.LIVE_FILE).exists() and on_demand.box is not None, 30,
                   "the session box live")
        assert on_demand.box is not None and on_demand.box.reason is None
        first = on_demand.box.first
        assert first is not None
        box_enter.want(str(session_dir))  # live: asks nothing, starts nothing more
        proc = _run(box, "cat /proc/1/comm", lab / "work")
        assert proc.returncode == 0 and _pid1(proc.stdout).startswith("box-enter"), (proc.stdout, proc.stderr)
    finally:
        on_demand.stop()
    assert on_demand.box.proc is None and process_start(first[0]) is None  # ended with the session


@needs_bwrap
@pytest.mark.parametrize("lab", ["session-box"], indirect=True)
def test_a_session_without_a_bash_call_starts_no_box(lab):
    """A text turn: the launcher's wait ends with the session; no bwrap, no live file. The
    guard's hook asks for the box at a Bash call (one byte in the FIFO), at no other tool's."""
    import select

    from claudeguard.gate.hook import run_event

    box, session_dir = _prepared_only(lab)
    fifo = session_dir / box_enter.WANT_FILE
    on_demand = box_enter.OnDemand(str(session_dir), dict(os.environ)).start()
    stopped = False
    try:
        from claudeguard.testing.wait import wait_until

        wait_until(fifo.is_fifo, 30, "the launcher's FIFO")
        on_demand.stop()
        stopped = True
        assert on_demand.box is None and not (session_dir / box_enter.LIVE_FILE).exists()
        assert not on_demand._thread.is_alive()
    finally:
        if not stopped:
            on_demand.stop()
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # now the launcher's part: what the hook says
    try:
        session = Session("s1", str(session_dir), {"policy": {"allow": ["Bash(true)", "Read"]}})
        for tool, command in (("Read", {"file_path": str(lab / "work" / "x")}), ("Bash", {"command": "true"})):
            event = {"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": tool, "tool_input": command,
                     "tool_use_id": f"toolu_{tool}", "cwd": str(lab / "work")}
            run_event(json.dumps(event).encode(), "PreToolUse", session)
            if tool == "Read":
                assert select.select([reader], [], [], 0)[0] == []  # nothing asked
        assert os.read(reader, 16) == b"x"  # one byte: one Bash call
    finally:
        os.close(reader)


def test_the_end_of_a_box_kills_its_pid_1_even_stopped_and_never_a_later_process_of_its_pid():
    """``stop``'s last step (where bwrap's parent-death signal does not reach the box's pid 1):
    SIGKILL through a pidfd to the process of that start time, stopped or not."""
    import signal

    proc = subprocess.Popen(["sleep", "60"])
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        started = process_start(proc.pid)
        assert started is not None
        box_enter._end_first(proc.pid, str(int(started) + 1))  # another process's start time: left alone
        assert proc.poll() is None
        box_enter._end_first(proc.pid, started)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@needs_bwrap
def test_an_entry_that_cannot_run_here_is_never_tried(lab, monkeypatch):
    """An entry the kernel will not run (a noexec state dir; here one whose interpreter is
    missing): the launcher's trial call fails, no ``live`` file is written, and every call gets
    a bwrap box of its own (the box script tries the entry only once the box is live)."""
    broken = lab / "broken-entry"
    broken.write_text("#!/nonexistent/interpreter\n")
    broken.chmod(0o755)
    monkeypatch.setenv(box_enter.PROGRAM_VAR, str(broken))
    box, session_dir = _prepared_only(lab)
    started = box_enter.start(str(session_dir), dict(os.environ))
    _SESSION_BOXES.append(started)
    assert started.reason and "could not be entered" in started.reason, started.reason
    assert not (session_dir / box_enter.LIVE_FILE).exists()
    # never the CLI's shell either: it would fail every call, before any box is live
    assert not (session_dir / "bash").exists() and not Path(str(broken) + box_enter.RAN_SUFFIX).exists()
    proc = _run(box, "cat /proc/1/comm; echo done", lab / "work")
    assert proc.returncode == 0, proc.stderr
    assert _pid1(proc.stdout) == "bwrap" and "done" in proc.stdout


@needs_bwrap
@pytest.mark.parametrize("lab", ["session-box", "cli-shell"], indirect=True)
def test_a_session_box_not_as_the_launcher_left_it_is_never_entered(lab):
    """The entry takes the call's own bwrap box (never no box) when the live file names a box
    that ended, a process that is not a box (this test's own: the host's namespaces), a start
    time that is not the process's, or is a link."""
    (lab / "rt" / "secret").write_text("s3cret")
    box = _box(lab)
    work = lab / "work"
    session_dir = Path(box["prefix"]).parent
    live = session_dir / box_enter.LIVE_FILE
    good = live.read_text()
    fields = good.split()

    def pid1_and_secret() -> tuple[str, str]:
        proc = _run(box, f"cat /proc/1/comm; cat {lab}/rt/secret; true", work)
        assert proc.returncode == 0, proc.stderr
        return _pid1(proc.stdout), proc.stdout

    assert pid1_and_secret()[0].startswith("box-enter")
    me = os.getpid()
    my_start = process_start(me)
    mine = [str(os.stat(f"/proc/self/ns/{n}").st_ino) for n in box_enter.NAMESPACES]
    forged = {
        "this process": f"{me} {my_start} {' '.join(mine)} -\n",
        "another start": " ".join([fields[0], str(int(fields[1]) + 1), *fields[2:]]) + "\n",
        "other inodes": " ".join([*fields[:2], *mine, fields[-1]]) + "\n",
    }
    for what, text in forged.items():
        live.write_text(text)
        pid1, out = pid1_and_secret()
        assert pid1 == "bwrap" and "s3cret" not in out, (what, out)
    live.unlink()
    (session_dir / "elsewhere").write_text(good)
    live.symlink_to(session_dir / "elsewhere")
    pid1, out = pid1_and_secret()
    assert pid1 == "bwrap" and "s3cret" not in out
    live.unlink()
    live.write_text(good)
    assert pid1_and_secret()[0].startswith("box-enter")
    _stop_session_boxes()  # the box ended: its pid is gone (or another process's)
    pid1, out = pid1_and_secret()
    assert pid1 == "bwrap" and "s3cret" not in out


def _say(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``argv`` with the entry saying why it did not enter the session's box itself."""
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, CLAUDEGUARD_BOX_ENTER_SAY="1"))


@needs_bwrap
@pytest.mark.parametrize("lab", ["cli-shell"], indirect=True)
def test_the_clis_shell_runs_a_call_in_the_box_itself_and_hands_on_the_rest(lab):
    """The CLI's shell (box_enter.c's shell way in) runs a plain call in the session's box
    without the box script; anything else it hands, unchanged, to the real shell (and so to the
    box script when it is the prefix's call): another use of the shell, a call quoted another
    way, a cwd file in a hidden dir, a box that is not live. Without its config it runs nothing."""
    (lab / "rt" / "secret").write_text("s3cret")
    box = _box(lab)
    work = lab / "work"
    shell = _SHELLS[box["prefix"]]
    session_dir = Path(box["prefix"]).parent
    framed = f"eval 'cat /proc/1/comm; cat {lab}/rt/secret; echo $$ > pid; true' < /dev/null{sandbox.FRAME}{work}/x-cwd"
    prefixed = f"{box['prefix']} '" + framed.replace("'", "'\"'\"'") + "'"
    taken = _say([shell, "-c", prefixed], work)
    assert taken.returncode == 0 and "claudeguard:" not in taken.stderr, taken.stderr
    assert _pid1(taken.stdout) == "box-enter" and "s3cret" not in taken.stdout
    assert (work / "x-cwd").read_text().strip() == str(work)
    plain = _say([shell, "-c", f"cat {lab}/rt/secret"], work)  # a hook's or the status line's: as without it
    assert (plain.stdout, plain.stderr) == ("s3cret", "claudeguard: the box script: not the box script's call\n")
    assert _say([shell, "-c", "-l", "echo $0"], work).stdout == f"{_cli_shell(dict(os.environ))}\n"
    # The CLI's children inherit it: a session started from one of them takes the real shell.
    assert _cli_shell({"CLAUDE_CODE_SHELL": shell, "SHELL": "/bin/bash", "PATH": os.environ["PATH"]}) == "/bin/bash"
    other_way = f"{box['prefix']} '" + framed.replace("'", "'\\''") + "'"  # a quote inside as '\'' (POSIX's)
    quoted = _say([shell, "-c", other_way], work)
    assert quoted.stderr.startswith("claudeguard: the box script: a call quoted in another way\n"), quoted.stderr
    assert _pid1(quoted.stdout).startswith("box-enter") and "s3cret" not in quoted.stdout  # the box script's way
    hidden = framed.replace(f"{work}/x-cwd", str(session_dir / "tmp" / "claude-1-cwd"))
    inside = _say([shell, "-c", f"{box['prefix']} '" + hidden.replace("'", "'\"'\"'") + "'"], work)
    assert inside.stderr.startswith("claudeguard: the box script: a cwd file the script would look at\n")
    assert "s3cret" not in inside.stdout
    _stop_session_boxes()
    ended = _say([shell, "-c", prefixed], work)
    assert ended.stderr.startswith("claudeguard: the box script: "), ended.stderr  # gone, or going
    assert _pid1(ended.stdout) == "bwrap" and "s3cret" not in ended.stdout
    (session_dir / sandbox.SHELL_CONF).unlink()
    (work / "pid").unlink()
    broken = _say([shell, "-c", prefixed], work)
    assert broken.returncode == 126 and broken.stdout == "" and not (work / "pid").exists()
    assert broken.stderr == f"claudeguard: the box's shell cannot read {session_dir / sandbox.SHELL_CONF}\n"


@needs_bwrap
def test_a_repository_a_command_registers_in_the_index_is_moved_aside_after_it(lab):
    """The box script's check after a command (plan/git_index.py), on every way in: a nested
    repository the command registered (``git add nest``) is moved aside once the call ended."""
    work = lab / "work"
    box = _box(lab)
    proc = _run(box, "git init -q nest && git -C nest -c user.name=t -c user.email=t@x commit -q --allow-empty -m x"
                     " && git add nest && echo added", work)
    assert proc.returncode == 0 and proc.stdout == "added\n", proc.stderr
    assert proc.stderr.count(f"claudeguard: moved {work / 'nest'}/.git aside to ") == 1, proc.stderr
    assert not (work / "nest" / ".git").exists()
    again = _run(box, "echo quiet", work)  # the index as it was: nothing looked at, nothing said
    assert (again.returncode, again.stdout, again.stderr) == (0, "quiet\n", ""), again.stderr


@needs_bwrap
def test_renaming_a_parent_of_a_hidden_or_read_only_path_is_refused(lab):
    """A project that holds the guard's config (work run in the home dir): renaming the dir
    above the hidden one, or .git, or the project's sub-directory the CLI runs in, would let a
    command put its own file where the guard or git looks next time."""
    home = lab / "home"
    subprocess.run(["git", "init", "-q", str(home)], check=True)
    config = _config(lab, "[approval]\ntimeout = 30\n")
    (home / "sub").mkdir()
    box = _box(lab, cwd=home / "sub")
    proc = _run(box, f"mv ../.config ../config-old; mv ../.git ../git-old; cd .. && mv sub sub-old; "
                     f"echo ok > {home}/new.txt; true", home / "sub")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("Device or resource busy") + proc.stderr.count("Read-only file system") >= 3, proc.stderr
    assert config.exists() and (home / ".git").is_dir() and (home / "sub").is_dir()
    assert (home / "new.txt").read_text() == "ok\n"  # the project itself stays writable


@needs_bwrap
def test_hooks_and_mcp_servers_run_outside_the_box_on_a_measured_cli_and_inside_on_another(lab):
    (lab / "rt" / "secret").write_text("s3cret")
    measured = _box(lab, version="2.1.330")
    hook = subprocess.run([measured["prefix"], f"cat {lab}/rt/secret"], capture_output=True, text=True, timeout=30)
    assert hook.stdout == "s3cret"
    other = _box(lab, version="2.1.400")
    hook = subprocess.run([other["prefix"], f"cat {lab}/rt/secret"], capture_output=True, text=True, timeout=30)
    assert "Permission denied" in hook.stderr and hook.stdout == ""
    script = Path(other["prefix"]).read_text()
    assert "case $c in /own/hook) exec" in script  # the guard's own entries stay outside
    argv = subprocess.run([other["prefix"], "cat", f"{lab}/rt/secret"], capture_output=True, text=True, timeout=30)
    assert argv.stdout == "" and "Permission denied" in argv.stderr  # never from the CLI: boxed there too


@needs_bwrap
def test_a_one_time_mark_lets_one_command_out(lab):
    (lab / "rt" / "secret").write_text("s3cret")
    box = _box(lab)
    work = lab / "work"
    marked = sandbox.wrap_bash_input({"command": f"cat {lab}/rt/secret", "description": "d",
                                      "dangerouslyDisableSandbox": True}, box, leave=True)
    assert set(marked) == {"command", "description"}
    out = _run(box, str(marked["command"]), work)
    assert out.stdout == "s3cret"
    again = _run(box, str(marked["command"]), work)  # the mark is spent
    assert "s3cret" not in again.stdout and "Permission denied" in again.stderr
    forged = _run(box, f": {sandbox.UNBOX_MARK}{'0' * 32}\ncat {lab}/rt/secret", work)
    assert "s3cret" not in forged.stdout
    # An rm that says yes to anything, first on PATH (a settings env block can set PATH): the box
    # script names its rm by path.
    evil = lab / "evil"
    evil.mkdir()
    (evil / "rm").write_text("#!/bin/sh\nexit 0\n")
    (evil / "rm").chmod(0o755)
    framed = f"eval ': {sandbox.UNBOX_MARK}{'1' * 32}\ncat {lab}/rt/secret' < /dev/null{sandbox.FRAME}{work}/x-cwd"
    tricked = subprocess.run([box["prefix"], framed], cwd=work, capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, PATH=f"{evil}:{os.environ['PATH']}", IFS="3"))
    assert "s3cret" not in tricked.stdout and "Permission denied" in tricked.stderr


def test_wrap_keeps_every_field_and_drops_the_sandbox_flag():
    tool_input = {"command": "ls", "description": "d", "run_in_background": True, "timeout": 5,
                  "dangerouslyDisableSandbox": True}
    assert sandbox.wrap_bash_input(tool_input, None) == {"command": "ls", "description": "d",
                                                         "run_in_background": True, "timeout": 5}


# --- the gate's side -------------------------------------------------------------------------------------


def _session(tmp_path: Path, box: bool, lockdown: bool = False) -> Session:
    directory = tmp_path / "session"
    (directory / sandbox.UNBOX_DIR).mkdir(parents=True)
    if box:
        (directory / sandbox.BOX_FILE).write_text("#!/bin/sh\n")
    return Session("s", str(directory), {"policy": {"lockdown": True} if lockdown else {}})


LEAVE = {"command": "docker ps", "dangerouslyDisableSandbox": True}


def test_leaving_the_box_is_asked_at_least_and_denied_under_lockdown(tmp_path):
    allow = Decision("allow", "rule", rule="Bash(docker *)", source="f:1")
    asked = leaving(_session(tmp_path, box=True), "Bash", LEAVE, allow)
    assert (asked.decision, asked.rule) == ("ask", LEAVE_RULE)
    assert leaving(_session(tmp_path / "n", box=True), "Bash", LEAVE, Decision("none", "")).decision == "ask"
    deny = Decision("deny", "no", rule="Bash(docker *)")
    assert leaving(_session(tmp_path / "d", box=True), "Bash", LEAVE, deny) is deny
    locked = leaving(_session(tmp_path / "l", box=True, lockdown=True), "Bash", LEAVE, allow)
    assert locked.decision == "deny" and "lockdown" in locked.reason
    # No box in the session (the sandbox off): nothing to leave; a call without the flag is untouched.
    assert leaving(_session(tmp_path / "o", box=False), "Bash", LEAVE, allow) is allow
    assert leaving(_session(tmp_path / "p", box=True), "Bash", {"command": "ls"}, allow) is allow


def test_only_a_humans_allow_lets_a_call_out(tmp_path):
    session = _session(tmp_path, box=True)
    by_rule = allowed_input(session, "Bash", LEAVE, Decision("allow", "", decided_by="rule"))
    assert by_rule == {"command": "docker ps"}  # the flag dropped: it runs in the box
    by_timeout = allowed_input(session, "Bash", LEAVE, Decision("allow", "", decided_by="timeout"))
    assert by_timeout == {"command": "docker ps"}
    by_human = allowed_input(session, "Bash", LEAVE, Decision("allow", "", decided_by="human"))
    assert by_human is not None and by_human["command"].startswith(f": {sandbox.UNBOX_MARK}")
    (mark,) = os.listdir(tmp_path / "session" / sandbox.UNBOX_DIR)
    assert by_human["command"] == f": {sandbox.UNBOX_MARK}{mark}\ndocker ps"
    assert allowed_input(session, "Bash", {"command": "ls"}, Decision("allow", "")) is None  # unchanged: no input
    assert allowed_input(session, "Bash", LEAVE, Decision("deny", "")) is None
    assert allowed_input(session, "Read", {"file_path": "/x"}, Decision("allow", "")) is None


# --- the config -----------------------------------------------------------------------------------------------


def test_sandbox_keys_only_in_the_users_own_files(lab):
    work = lab / "work"
    (work / ".claudeguard.toml").write_text('[sandbox]\nallow_write = ["/"]\n')
    with pytest.raises(ConfigError, match=r"\.claudeguard\.toml:1: \[sandbox\] may only be set in the user config"):
        load_config(work)


def test_a_widening_naming_a_guard_path_is_a_config_error_with_its_line(lab):
    config = _config(lab, '[sandbox]\nnetwork = "none"\nallow_write = ["~/.local/state/claudeguard/x"]\n')
    cfg = load_config(lab / "work")
    with pytest.raises(ConfigError, match=rf"^{config}:3: sandbox.allow_write '~/.local/state/claudeguard/x' would "
                                          r"open the guard's own state dir"):
        sandbox.check_config(cfg, guard_paths())
    _config(lab, '[sandbox]\nallow_write = ["~"]\n')  # holds the guard's paths: they stay hidden, their parents ro
    sandbox.check_config(load_config(lab / "work"), guard_paths())
    _config(lab, '[sandbox]\nallow_write = ["relative/dir"]\n')
    with pytest.raises(ConfigError, match="give an absolute path"):
        sandbox.check_config(load_config(lab / "work"), guard_paths())
    _config(lab, '[sandbox]\nnetwork = "proxy"\n')
    with pytest.raises(ConfigError, match=r"config.toml:2: 'sandbox.network' is 'proxy'; expected one of: host, none"):
        load_config(lab / "work")


def test_lockdown_needs_the_sandbox(lab):
    config = _config(lab, '[security]\ndisable_bypass_permissions = true\nsandbox = "off"\n')
    with pytest.raises(ConfigError, match=rf"^{config}:3: lockdown \({config}:2\) needs the sandbox"):
        load_config(lab / "work")
    _config(lab, "[security]\ndisable_bypass_permissions = true\n")
    assert load_config(lab / "work").security()["sandbox"] == "require"


# --- without a working bubblewrap --------------------------------------------------------------------------


def _stand_in(lab: Path) -> Path:
    cli = lab / "claude"
    cli.write_text("#!/bin/sh\necho STAND-IN-RAN\n")
    cli.chmod(0o755)
    return cli


def _launch(lab: Path, config: str, *argv: str) -> subprocess.CompletedProcess:
    _config(lab, config)
    env = dict(os.environ, CLAUDEGUARD_CLAUDE=str(_stand_in(lab)), CLAUDEGUARD_SERVICE="0")
    return subprocess.run(GUARD + list(argv), env=env, cwd=lab / "work", capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_lockdown_without_bubblewrap_refuses_to_start_naming_the_package(lab):
    missing = lab / "no-bwrap"
    proc = _launch(lab, f'[security]\ndisable_bypass_permissions = true\n\n[sandbox]\nbwrap = "{missing}"\n',
                   "-p", "hi")
    assert proc.returncode == 2
    assert proc.stdout == ""  # the CLI never started
    line = proc.stderr.strip()
    assert "\n" not in line
    assert "lockdown" in line and "needs the sandbox" in line and "install the package 'bubblewrap'" in line
    assert not list((lab / "rt").glob("sessions/*"))


def test_require_without_bubblewrap_refuses_and_auto_says_one_line(lab):
    missing = lab / "no-bwrap"
    proc = _launch(lab, f'[security]\nsandbox = "require"\n\n[sandbox]\nbwrap = "{missing}"\n', "-p", "hi")
    assert proc.returncode == 2 and 'security.sandbox = "require"' in proc.stderr
    proc = _launch(lab, f'[sandbox]\nbwrap = "{missing}"\n', "-p", "hi")
    assert proc.returncode == 0 and proc.stdout.strip() == "STAND-IN-RAN"
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("claudeguard: no sandbox for Bash here: bubblewrap is not installed")


def test_a_kernel_that_refuses_user_namespaces_is_named(lab, monkeypatch):
    fake = lab / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    real_read = sandbox._read
    monkeypatch.setattr(sandbox, "_read", lambda path: "1" if path.endswith("apparmor_restrict_unprivileged_userns")
                        else real_read(path))
    reason = sandbox.probe(str(fake), "x86_64", str(lab))
    assert reason is not None and "kernel.apparmor_restrict_unprivileged_userns=1" in reason
    assert "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in reason


def test_the_probe_is_cached_per_bwrap_binary(lab):
    counter = lab / "count"
    fake = lab / "bwrap"
    fake.write_text(f"#!/bin/sh\necho x >> {counter}\nexit 0\n")
    fake.chmod(0o755)
    _config(lab, f'[sandbox]\nbwrap = "{fake}"\n')
    cfg = load_config(lab / "work")
    paths = guard_paths()
    for _ in range(3):
        assert sandbox.availability(cfg, dict(os.environ), paths).bwrap == str(fake)
    assert counter.read_text().count("x") == 1
    fake.write_text(f"#!/bin/sh\necho x >> {counter}\nexit 1\n")  # a new binary: probed again
    assert sandbox.availability(cfg, dict(os.environ), paths).reason is not None
    assert counter.read_text().count("x") == 2
    assert json.loads((Path(paths.state_dir) / sandbox.PROBE_FILE).read_text())["reason"]


def test_the_guards_settings_pin_the_clis_own_sandbox_off(lab):
    (lab / "work" / ".claude").mkdir()
    (lab / "work" / ".claude" / "settings.json").write_text(json.dumps({"sandbox": {"enabled": True}}))
    caller = {"sandbox": {"enabled": True, "x": 1}, "env": {"CLAUDE_CODE_SHELL_PREFIX": "", "KEEP": "1"}}
    proc = _launch(lab, "", "--guard-dry-run", "-p", "hi", "--settings", json.dumps(caller))
    assert proc.returncode == 0, proc.stderr
    argv = json.loads(proc.stdout)["argv"]
    settings = json.loads(next(a for a in argv if a.startswith("{") or a.startswith("--settings=")).split("=", 1)[-1])
    assert settings["sandbox"] == {"enabled": False, "x": 1}
    assert settings["env"] == {"CLAUDE_CODE_SHELL_PREFIX": "<session dir>/box", "KEEP": "1"}  # the caller's loses
    lines = proc.stderr.strip().splitlines()
    off = [line for line in lines if "Claude Code's own sandbox" in line]
    assert len(off) == 2 and all("stays off" in line for line in off)
    assert "project" in off[0] and "--settings" in off[1]
    # besides: the project file is repository code until trusted, and the caller's env names the prefix
    others = [line for line in lines if line not in off]
    assert len(others) == 2, lines
    assert "repository code not run until you trust it" in others[0]
    assert "env.CLAUDE_CODE_SHELL_PREFIX: sets a variable the guard depends on" in others[1]


def test_the_refusal_is_a_usage_error(lab):
    _config(lab, f'[security]\nsandbox = "require"\n\n[sandbox]\nbwrap = "{lab / "none"}"\n')
    with pytest.raises(UsageError, match="require"):
        sandbox.check(load_config(lab / "work"), dict(os.environ))


@needs_bwrap
def test_the_cwd_file_is_never_a_link_nor_in_a_hidden_dir(lab):
    """The file the CLI records the next cwd in is bound into the box writable: a link there, or
    a path in the session's own dir (where the box's /tmp lives), is not bound."""
    (lab / "rt" / "secret").write_text("s3cret")
    box = _box(lab)
    work = lab / "work"
    link = work / "planted-cwd"
    link.symlink_to(lab / "rt" / "secret")
    proc = _run(box, "echo hi", work, cwd_file=link)
    assert proc.returncode != 0 and (lab / "rt" / "secret").read_text() == "s3cret"
    inside = Path(box["prefix"]).parent / "tmp" / "claude-1234-cwd"
    inside.write_text("")
    proc = _run(box, "echo hi", work, cwd_file=inside)
    assert proc.returncode != 0 and inside.read_text() == ""


@needs_bwrap
def test_the_box_comes_back_with_a_session_dir_made_again(lab):
    """The keeper makes a removed session dir again (plan/keeper.py): the box with it."""
    (lab / "rt" / "secret").write_text("s3cret")
    box = _box(lab)
    session_dir = Path(box["prefix"]).parent
    kept = sandbox.kept_files(str(session_dir))
    # the CLI's shell is there once the entry ran a trial call in this test process
    ran = BOX_ENTER is not None and Path(BOX_ENTER + box_enter.RAN_SUFFIX).exists()
    shell_way = {sandbox.SHELL_CONF, sandbox.AFTER_FILE, "bash"} if ran else set()
    assert set(kept) == {"box", "seccomp.bpf", "hidden"} | shell_way
    shutil.rmtree(session_dir)
    session_dir.mkdir(mode=0o700)
    sandbox.restore_box(str(session_dir), kept)
    # (no live file in the new dir: the session's box is not entered, each call has its own)
    proc = _run(box, f"cat /proc/1/comm; cat {lab}/rt/secret; echo done", lab / "work")
    assert _pid1(proc.stdout) == "bwrap" and "s3cret" not in proc.stdout and "done" in proc.stdout, proc.stderr
    assert os.stat(session_dir / "hidden").st_mode & 0o777 == 0
    if ran:
        assert os.readlink(session_dir / "bash") == BOX_ENTER


def test_managed_settings_that_turn_the_clis_own_sandbox_on_are_refused(lab):
    """They win over the guard's sandbox.enabled: false, and the CLI's proxy then refuses the
    guard's hooks (2.1.197 ran an ask-rule call unasked): refused like any silencing setting."""
    managed = json.dumps({"sandbox": {"enabled": True}})
    proc = _launch(lab, "", "--managed-settings", managed, "-p", "hi")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("claudeguard: --managed-settings (inline JSON): sandbox.enabled: Claude Code's own "
                                  "sandbox, from managed settings, wins over the guard's")
    proc = _launch(lab, "[security]\nallow_settings_override = true\n", "--managed-settings", managed, "-p", "hi")
    assert proc.returncode == 0 and proc.stdout.strip() == "STAND-IN-RAN"
    assert "claudeguard: warning: --managed-settings (inline JSON): sandbox.enabled" in proc.stderr


# --- the user's own deny rules are the box's (issue 32) -------------------------------------------


READINGS = [  # ways to read .env that say other words than ".env"
    "cat .e*", "cat ./.en?", "grep -r TOKEN .", "grep -R TOKEN", "cp .env copy.txt; cat copy.txt",
    "git diff --no-index /dev/null .env", "python3 -c 'print(open(\".env\").read())'",
    "tar cf - . 2>/dev/null | strings", "head -c 100 .[e]nv", "cat sub/../.env",
    "find . -name '*.env' -exec cat {} +", "cat secrets/*/*/*", "cat secrets/deep/*/key.pem",
]


@needs_bwrap
@pytest.mark.parametrize("hold", [False, True], ids=["control", "rules"])
def test_a_read_deny_rule_hides_its_files_from_every_reading(lab, hold):
    work = lab / "work"
    (work / ".env").write_text("TOKEN=s3cret-env\n")
    (work / "secrets" / "deep" / "x").mkdir(parents=True)
    (work / "secrets" / "deep" / "x" / "key.pem").write_text("TOKEN=s3cret-pem\n")
    (work / "sub").mkdir()
    (work / "src.py").write_text("print('TOKEN=public')\n")
    rules = '[permissions]\ndeny = ["Read(./.env)", "Read(./secrets/**)", "Edit(./src.py)"]\n' if hold else ""
    _config(lab, rules + "[approval]\ntimeout = 30\n")
    box = _box(lab)
    for command in READINGS:
        proc = _run(box, command + "; true", work)
        leaked = "s3cret" in proc.stdout
        assert leaked is not hold, (command, proc.stdout, proc.stderr)
    # ordinary work goes on: the project is writable, the public file readable
    proc = _run(box, "cat src.py; echo made > made.txt; echo more >> src.py; true", work)
    assert "TOKEN=public" in proc.stdout and (work / "made.txt").exists()
    assert ((work / "src.py").read_text() == "print('TOKEN=public')\n") is hold  # Edit deny: read-only
    assert (work / ".env").read_text() == "TOKEN=s3cret-env\n"  # never changed on the host


@needs_bwrap
def test_a_rule_that_cannot_be_resolved_in_bound_is_said_in_one_line(lab):
    _config(lab, '[permissions]\ndeny = ["Read(//**/*.pem)", "Read"]\n')
    cfg = load_config(lab / "work")
    session_dir = lab / "rt" / "sessions" / "s2"
    session_dir.mkdir(parents=True, mode=0o700)
    prepared = sandbox.prepare(cfg, dict(os.environ), str(lab / "work"), str(session_dir), session_id="s2",
                               cli_version="2.1.330", own=[])
    assert prepared.box is not None
    [pem, every] = prepared.notes
    assert pem.startswith("claudeguard: the deny rule Read(//**/*.pem) (") and "could not be resolved on disk" in pem
    assert every.startswith("claudeguard: the deny rule Read (") and "names every file" in every


# --- git's and the editor's code paths (issue 32) -------------------------------------------------

PLANTS = {  # what a command plants so that the user's next git (or editor) runs it
    ".git/commondir": "mkdir -p evil && cp -r .git/. evil/ && git config -f evil/config core.fsmonitor 'touch PWNED' "
                      "&& printf '%s\\n' \"$PWD/evil\" > .git/commondir",
    ".git/config.worktree": "printf '[core]\\n\\tfsmonitor = touch PWNED\\n' > .git/config.worktree",
    ".git/modules/lib/config": "printf '[core]\\n\\tfsmonitor = touch PWNED\\n' >> .git/modules/lib/config",
    ".git/modules/lib/hooks/post-checkout":
        "printf '#!/bin/sh\\ntouch PWNED\\n' > .git/modules/lib/hooks/post-checkout",
    ".gitmodules": "printf '[submodule \"lib\"]\\n\\tupdate = !touch PWNED\\n' >> .gitmodules",
    ".vscode/tasks.json": "printf '{\"tasks\": [{\"command\": \"touch PWNED\"}]}' > .vscode/tasks.json",
}


def _plantable(work: Path) -> None:
    """A checkout with a submodule's git dir, a .gitmodules and an editor dir of its own."""
    (work / ".git" / "modules" / "lib" / "hooks").mkdir(parents=True)
    (work / ".git" / "modules" / "lib" / "config").write_text("[core]\n\tbare = false\n")
    (work / ".gitmodules").write_text('[submodule "lib"]\n\tpath = lib\n')
    (work / ".vscode").mkdir()


@needs_bwrap
@pytest.mark.parametrize("boxed", [False, True], ids=["control", "box"])
def test_nothing_git_or_the_editor_runs_later_can_be_planted(lab, boxed):
    work = lab / "work"
    _plantable(work)
    _config(lab, "[approval]\ntimeout = 30\n")
    box = _box(lab)
    for target, command in PLANTS.items():
        before = (work / target).read_bytes() if (work / target).exists() else None
        if boxed:
            proc = _run(box, command + "; true", work)
        else:
            proc = subprocess.run(["/bin/sh", "-c", command], cwd=work, capture_output=True, text=True, timeout=30)
        after = (work / target).read_bytes() if (work / target).exists() else None
        assert (after != before) is not boxed, (target, proc.stderr)
        if boxed and target == ".git/commondir":
            assert proc.stderr.count("claudeguard: removed ") == 1, proc.stderr
    # the user's next git in the checkout runs nothing of the agent's
    subprocess.run(["git", "status"], cwd=work, capture_output=True, timeout=30)
    assert (work / "PWNED").exists() is not boxed
    # and ordinary git work goes on in the box
    if boxed:
        proc = _run(box, "git add -A && git -c user.name=t -c user.email=t@x commit -qm work && git log --oneline",
                    work)
        assert proc.returncode == 0 and "work" in proc.stdout, proc.stderr


@needs_bwrap
def test_a_checkout_whose_git_metadata_cannot_be_read_gets_no_box_with_gaps(lab):
    work = lab / "work"
    shutil.rmtree(work / ".git")
    (work / ".git").write_text("gitdir: ../nowhere/.git/worktrees/x\n")  # a pointer to nothing
    cfg = load_config(work)
    session_dir = lab / "rt" / "sessions" / "s3"
    session_dir.mkdir(parents=True, mode=0o700)
    with pytest.raises(UsageError) as info:
        sandbox.prepare(cfg, dict(os.environ), str(work), str(session_dir), session_id="s3", cli_version="2.1.330",
                        own=[])
    assert str(info.value) == (f"the sandbox cannot be built: git's metadata at {lab}/nowhere/.git/worktrees/x "
                               f"cannot be read (No such file or directory); it does not start with gaps (fix the "
                               f"permissions, or run outside this checkout)")
