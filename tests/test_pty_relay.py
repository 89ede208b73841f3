"""The pty relay with a small fake TUI (fast, no real CLI): bytes both ways, exit codes, window
size, Ctrl-Z / fg, parent death, terminal restore, dialogs routed through the real channel, the
keyboard winning, and a session with no terminal at all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from claudeguard import channel
from claudeguard.shim.terminal import is_keypress
from tests.shim_helpers import wait_until

REPO = Path(__file__).resolve().parent.parent

# A stand-in for the CLI: raw mode, reports its size on SIGWINCH, suspends itself on Ctrl-Z like
# the CLI does (restore the terminal, SIGTSTP to itself), draws a trust dialog on "d" (and after
# "busy" in auto mode), an idle prompt after an answer, and leaves on the second Ctrl-C.
FAKE = r'''
import fcntl, os, signal, struct, sys, termios, time, tty
saved = termios.tcgetattr(0)
tty.setraw(0)
def out(s):
    os.write(1, s.encode() if isinstance(s, str) else s)
def size():
    r, c, _, _ = struct.unpack("HHHH", fcntl.ioctl(1, termios.TIOCGWINSZ, b"\0" * 8))
    return "%dx%d" % (r, c)
def on_cont(*_):
    tty.setraw(0)
    out("RESUMED\r\n")
signal.signal(signal.SIGWINCH, lambda *_: out("SIZE " + size() + "\r\n"))
signal.signal(signal.SIGCONT, on_cont)
RULE = "\u2500" * 40
DIALOG = ("\x1b[2J\x1b[H" + RULE + "\r\n Accessing workspace:\r\n\r\n /srv/some-folder\r\n\r\n"
          " \u276f 1. Yes, I trust this folder\r\n   2. No, exit\r\n\r\n Enter to confirm \u00b7 Esc to cancel\r\n")
PROMPT = "\x1b[2J\x1b[H\u25cf done\r\n" + RULE + "\r\n\u276f\r\n" + RULE + "\r\n  ? for shortcuts\r\n"
mode = sys.argv[1]
out("READY pid=%d size=%s\r\n" % (os.getpid(), size()))
if mode == "bytes":
    want, got = int(sys.argv[2]), b""
    while len(got) < want:
        got += os.read(0, 4096)
    out("GOT " + got.hex() + "\r\n")
    out(bytes(range(256)))
    out("\r\nEND\r\n")
    sys.exit(0)
in_dialog = False
if mode == "auto":
    out("\u2733 Working\u2026 esc to interrupt\r\n")
    time.sleep(0.3)
    out(DIALOG)
    in_dialog = True
interrupts = 0
while True:
    data = os.read(0, 1024)
    if not data:
        sys.exit(5)
    for ch in data.decode(errors="replace"):
        if in_dialog and ch in "12":
            in_dialog = False
            out("\x1b[2J\x1b[HANSWER " + ("yes" if ch == "1" else "no") + "\r\n")
            if mode == "auto":
                out(PROMPT)
        elif ch == "d":
            in_dialog = True
            out(DIALOG)
        elif ch == "q":
            sys.exit(3)
        elif ch == "k":
            out("\x1b[?1049h\x1b[?1000h\x1b[?2004h\x1b[?25l")
            os.kill(os.getpid(), signal.SIGKILL)
        elif ch == "\x1a":
            termios.tcsetattr(0, termios.TCSADRAIN, saved)
            out("SUSPENDING\r\n")
            os.kill(os.getpid(), signal.SIGTSTP)
        elif ch == "\x03":
            interrupts += 1
            if interrupts == 2:
                sys.exit(0)
            out("Press Ctrl-C again to exit\r\n")
'''


@pytest.fixture
def rig(tmp_path, monkeypatch):
    fake = tmp_path / "fake_tui.py"
    fake.write_text(FAKE)
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    session_dir = tmp_path / "session"
    session_dir.mkdir(mode=0o700)
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    env = dict(os.environ, PYTHONPATH=str(REPO), CLAUDEGUARD_RUNTIME_DIR=str(runtime),
               CLAUDEGUARD_LOG_DIR=str(tmp_path / "log"))
    children: list = []

    def relay_argv(mode: str, *extra: str, idle: float = 0.3) -> list[str]:
        return ["-m", "claudeguard.shim.pty_relay", "--idle", str(idle), "--session-dir", str(session_dir),
                "--session-id", "fakesession", *extra, "--", sys.executable, str(fake), mode]

    def spawn(mode: str, *extra: str, idle: float = 0.3, dimensions=(24, 80)):  # type: ignore[no-untyped-def]
        child = pexpect.spawn(sys.executable, relay_argv(mode, *extra, idle=idle), env=env, cwd=str(tmp_path),
                              dimensions=dimensions, timeout=10)
        children.append(child)
        child.expect(rb"READY pid=(\d+) size=(\d+x\d+)")
        child.fake_pid = int(child.match.group(1))
        child.fake_size = child.match.group(2).decode()
        return child

    class Rig:
        pass

    r = Rig()
    r.spawn, r.relay_argv, r.env, r.session_dir, r.tmp = spawn, relay_argv, env, session_dir, tmp_path
    yield r
    for child in children:
        if child.isalive():
            child.kill(signal.SIGKILL)
        child.close(force=True)
        _wait_gone(child.fake_pid, 5)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1][0]
    except (FileNotFoundError, ProcessLookupError):
        return "gone"


def _wait_state(pid: int, states: str, timeout: float = 5) -> str:
    """The process's state once it is one of ``states``; its state then, if never."""
    try:
        return wait_until(lambda: (st := _state(pid)) in states and st, timeout, interval=0.02)
    except AssertionError:
        return _state(pid)


def _wait_gone(pid: int, timeout: float) -> bool:
    return _wait_state(pid, "Zgone", timeout) in ("Z", "gone")


def _wait_pending(predicate=lambda reqs: bool(reqs), timeout: float = 8):  # type: ignore[no-untyped-def]
    # boxed: "no request left" is an empty list, a match all the same
    return wait_until(lambda: [reqs] if predicate(reqs := channel.list_pending("fakesession")) else None, timeout,
                      "the pending requests to match")[0]


def _wait_screen(session_dir: Path, predicate, timeout: float = 5) -> dict:  # type: ignore[no-untyped-def]
    """screen.json once it satisfies ``predicate`` (the relay writes it right after posting)."""

    def matching() -> dict | None:
        try:
            state = json.loads((session_dir / "screen.json").read_text())
        except (OSError, ValueError):
            return None
        return state if state and predicate(state) else None

    return wait_until(matching, timeout, "screen.json to match", interval=0.02)


def _exit_status(child) -> int:  # type: ignore[no-untyped-def]
    child.expect(pexpect.EOF, timeout=10)
    child.close()
    return child.exitstatus if child.exitstatus is not None else 128 + child.signalstatus


def test_is_keypress_ignores_terminal_reports():
    assert all(is_keypress(k) for k in (b"1", b"\x1b[A", b"\x1b", b"\x1b[200~hi\x1b[201~"))
    for report in (b"\x1b[<35;10;5M", b"\x1b[I", b"\x1b[O", b"\x1b[?62;22c", b"\x1b[>0;276;0c", b"\x1b[12;40R",
                   b"\x1bP>|xterm(390)\x1b\\", b"\x1b]11;rgb:0000/0000/0000\x07", b"\x1b[?1u", b"\x1b[M #!"):
        assert not is_keypress(report), report
    assert is_keypress(b"\x1b[I" + b"y")


def test_every_byte_passes_both_ways_unchanged(rig):
    sent = bytes(b for b in range(256))
    argv = rig.relay_argv("bytes", idle=30)
    argv[-1:] = ["bytes", str(len(sent))]
    child = pexpect.spawn(sys.executable, argv, env=rig.env, cwd=str(rig.tmp), dimensions=(24, 80), timeout=10)
    try:
        child.expect(rb"READY pid=\d+ size=\d+x\d+\r\n")
        child.send(sent)
        child.expect(rb"GOT ([0-9a-f]+)\r\n")
        assert bytes.fromhex(child.match.group(1).decode()) == sent
        child.expect(rb"END\r\n")
        assert child.before == bytes(range(256)) + b"\r\n"
        assert _exit_status(child) == 0
    finally:
        child.close(force=True)


def test_exit_code_and_window_size(rig):
    import psutil

    child = rig.spawn("keys", dimensions=(24, 80))
    assert child.fake_size == "24x80"
    relay = psutil.Process(child.pid)
    before = sum(relay.cpu_times()[:2])
    child.expect(pexpect.TIMEOUT, timeout=1.0)  # a second of nothing happening
    assert sum(relay.cpu_times()[:2]) - before < 0.3, "the relay spins while idle"
    child.setwinsize(31, 101)  # the terminal resized: SIGWINCH to the relay, then to the fake
    child.expect(rb"SIZE 31x101")
    child.send("q")
    assert _exit_status(child) == 3


def test_child_killed_gives_128_plus_n_and_the_terminal_is_restored(rig):
    child = rig.spawn("keys")
    child.send("k")  # leaves alternate screen, mouse, paste and a hidden cursor on, then dies
    child.expect(pexpect.EOF, timeout=10)
    tail = child.before
    child.close()
    assert child.exitstatus == 128 + signal.SIGKILL
    for seq in (b"\x1b[?1000l", b"\x1b[?2004l", b"\x1b[?1049l", b"\x1b[?25h"):
        assert seq in tail


def test_signal_to_the_relay_reaches_the_child(rig):
    child = rig.spawn("keys")
    os.kill(child.pid, signal.SIGTERM)  # `kill PID` on the relay
    assert _exit_status(child) == 128 + signal.SIGTERM
    assert _wait_gone(child.fake_pid, 5)


def test_killed_relay_leaves_no_child(rig):
    child = rig.spawn("keys")
    os.kill(child.pid, signal.SIGKILL)
    assert _wait_gone(child.fake_pid, 5), "the child outlived the relay"


def test_ctrl_z_stops_the_relay_and_fg_resumes(rig):
    child = rig.spawn("keys")
    child.send("\x1a")
    child.expect(rb"SUSPENDING")
    assert _wait_state(child.pid, "T") == "T", "the relay did not stop with its child"
    assert _state(child.fake_pid) == "T"
    os.kill(child.pid, signal.SIGCONT)  # what the shell's `fg` sends
    child.expect(rb"RESUMED")
    assert _wait_state(child.pid, "SR") in "SR" and _wait_state(child.fake_pid, "SR") in "SR"
    child.send("q")
    assert _exit_status(child) == 3


@pytest.mark.parametrize("verb, answer", [("allow", b"ANSWER yes"), ("deny", b"ANSWER no")])
def test_dialog_goes_to_the_channel_and_the_answer_is_typed(rig, verb, answer):
    child = rig.spawn("keys", idle=0.3)
    child.send("d")
    [req] = _wait_pending()
    assert req.kind == "dialog" and req.tool == "dialog:trust" and req.session_id == "fakesession"
    assert req.choices == ["Yes, I trust this folder", "No, exit"] and req.extra["via"] == "screen"
    assert "/srv/some-folder" in req.summary and "/srv/some-folder" in req.input["text"]
    state = _wait_screen(rig.session_dir, lambda st: st["request"] == req.id)
    assert state["dialog"] == "Trust this folder?" and state["kind"] == "trust"
    assert state["choices"] == req.choices and state["since"] <= time.time()
    channel.answer(req.id, verb)
    child.expect(answer)
    _wait_screen(rig.session_dir, lambda st: st["dialog"] is None and st["request"] is None)
    child.send("q")
    assert _exit_status(child) == 3


def test_keyboard_answer_wins_and_withdraws_the_request(rig):
    child = rig.spawn("keys", idle=0.2)
    child.send("d")
    [req] = _wait_pending()
    child.send("2")
    child.expect(b"ANSWER no")
    _wait_pending(lambda reqs: not reqs)
    with pytest.raises(Exception, match="no such pending request|no longer pending|withdrawn"):
        channel.answer(req.id, "allow")
    _wait_screen(rig.session_dir, lambda st: st["keyboard_at"] is not None and st["request"] is None)
    child.send("q")
    assert _exit_status(child) == 3


def test_detached_session_routes_every_dialog_and_ends_when_idle(rig):
    # No terminal at all: stdin /dev/null, stdout a pipe. The fake works, shows a dialog, then
    # sits at its prompt: the relay routes the dialog at once and ends the session after.
    argv = [sys.executable, *rig.relay_argv("auto", "--prompt-given", idle=30)]
    argv[argv.index("--idle") + 1] = "0"
    proc = subprocess.Popen(argv, env=rig.env, cwd=str(rig.tmp), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        [req] = _wait_pending()
        assert req.tool == "dialog:trust"
        state = _wait_screen(rig.session_dir, lambda st: st["request"] == req.id)
        assert state["attached"] is False and any("Accessing workspace:" in line for line in state["tail"])
        channel.answer(req.id, "allow")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err
    text = out.decode()
    assert "● done" in text and "\x1b" not in text  # the last screen as plain text
    state = json.loads((rig.session_dir / "screen.json").read_text())
    assert state["exited"] is True and "● done" in state["tail"]


def test_a_program_that_cannot_start_is_one_clean_error(rig):
    argv = rig.relay_argv("keys")
    argv[-3:] = [str(rig.tmp / "no-such-program")]
    proc = subprocess.run([sys.executable, *argv], env=rig.env, cwd=str(rig.tmp), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 127
    assert proc.stderr.strip() == f"claudeguard: cannot run {rig.tmp / 'no-such-program'}: No such file or directory"


def test_started_with_stdin_closed(rig):
    argv = rig.relay_argv("keys")
    argv[-3:] = ["sh", "-c", "echo started without stdin; exit 4"]
    proc = subprocess.run([sys.executable, *argv], env=rig.env, cwd=str(rig.tmp), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, preexec_fn=lambda: os.close(0), timeout=30)
    assert proc.returncode == 4, proc.stderr
    assert proc.stdout.decode() == "started without stdin\n"
