"""`claudeguardctl console` in a terminal: requests appear as they arrive (with a bell) and single
keys answer them; a second console or a script may answer side by side."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pexpect
import pytest

from claudeguard import channel
from claudeguard.shim.screen import Screen

CTL = [sys.executable, "-m", "claudeguard.commands.ctl"]


@pytest.fixture
def env(tmp_path, monkeypatch):
    values = {"CLAUDEGUARD_RUNTIME_DIR": str(tmp_path / "rt"), "CLAUDEGUARD_LOG_DIR": str(tmp_path / "log"),
              "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "TERM": "xterm"}
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return values


class Console:
    def __init__(self, env: dict) -> None:
        self.child = pexpect.spawn(CTL[0], CTL[1:] + ["console"], env=env, dimensions=(30, 160), timeout=10)
        self.screen = Screen(30, 160)
        self.raw = b""

    def wait(self, text: str, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while text not in " ".join(self.screen.text().split()):
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not shown; screen:\n{self.screen.text()}")
            try:
                data = self.child.read_nonblocking(65536, timeout=0.1)
            except pexpect.TIMEOUT:
                continue
            self.raw += data
            self.screen.feed(data)

    def close(self) -> None:
        if self.child.isalive():
            self.child.send("q")
            self.child.expect(pexpect.EOF, timeout=10)
        self.child.close(force=True)


def _post(tool_input: dict, agent_type: str | None = "general-purpose"):  # type: ignore[no-untyped-def]
    return channel.post(session_id="sess-1", agent_type=agent_type, agent_id="a1", tool="Bash", input=tool_input,
                        summary=f"Bash: {tool_input['command']}", cwd="/tmp", timeout=60)


def test_console_shows_arrivals_and_answers_with_single_keys(env):
    console = Console(env)
    try:
        console.wait("waiting for requests")
        first = _post({"command": "npm test"})
        console.wait("Bash: npm test")
        assert b"\a" in console.raw  # the bell for a new arrival
        console.child.send("s")  # session scope
        answer = first.wait()
        assert (answer.decision, answer.scope, answer.decided_by) == ("allow", "session", "human")
        second = _post({"command": "rm -rf build"}, agent_type=None)
        console.wait("Bash: rm -rf build")
        console.child.send("n")
        console.wait("message for the model")
        console.child.send("not now\r")
        answer = second.wait()
        assert (answer.decision, answer.message) == ("deny", "not now")
        bells = Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "channel" / "bells"
        assert len(list(bells.glob("*.bell"))) == 1  # the console's doorbell, while it runs
        console.child.send("q")
        console.child.expect(pexpect.EOF, timeout=10)
        assert list(bells.iterdir()) == []  # and gone when it quits
    finally:
        console.close()


def test_two_consoles_and_a_script_side_by_side(env):
    one, two = Console(env), Console(env)
    try:
        pending = _post({"command": "make deploy"})
        one.wait("Bash: make deploy")
        two.wait("Bash: make deploy")
        one.child.send("y")
        assert pending.wait().decision == "allow"
        two.child.send("y")  # too late: refused, shown in the console, nothing changes
        two.wait("waiting for requests")
        assert channel.list_pending() == []
        third = _post({"command": "make release"})
        two.wait("Bash: make release")
        waited: list = []
        waiter = threading.Thread(target=lambda: waited.append(third.wait()), daemon=True)
        waiter.start()  # the call waits while a script answers: its waiter judges the answer
        channel.answer(third.request.id, "deny", message="scripted")
        waiter.join(60)
        assert [a.message for a in waited] == ["scripted"]
        two.wait("waiting for requests")
    finally:
        one.close()
        two.close()


def test_line_mode_waits_for_the_next_request(env):
    import subprocess

    proc = subprocess.Popen(CTL + ["console"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        proc.stdin.write("x\ny\n")  # before any request: the console waits for one to arrive
        proc.stdin.flush()
        pending = _post({"command": "make lint"})
        answer = pending.wait()
        assert (answer.decision, answer.scope) == ("allow", "once")
        out, err = proc.communicate("q\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert out == f"{pending.request.id}: approved (once)\n"
    assert err.startswith("unknown key 'x'")


def test_the_console_lists_dialogs_still_at_a_keyboard_apart():
    """Issue 36: a pty session's dialog with the keyboard's head start is shown apart, with the
    seconds before it reaches the channel (it cannot be answered from the console yet)."""
    from claudeguard.commands.at_keyboard import AtKeyboard
    from claudeguard.commands.console import _render

    waiting = AtKeyboard("3f9c2a7h1b2c3d4e5f", "Bash command", "Bash: make deploy", None, 27.4, "abcdefabcdefabcd")
    drawn = _render([], 0, "", [waiting]).split("\r\n")
    assert drawn[2:] == ["  waiting for requests ...", "", "  at a keyboard (1):",
                         f"    {'main':18} Bash: make deploy  (reaches the channel in 27s)", "", ""]
    assert "at a keyboard" not in _render([], 0, "", [])


def test_a_dialog_whose_request_is_not_named_yet_is_not_listed_beside_its_sessions_request(tmp_path, monkeypatch):
    """The screen file names the dialog's held request a moment after the handshake (later on a
    busy machine); meanwhile a permission dialog of a session that has a request in the channel
    is that request, listed once there. Without one in the channel it is listed at the keyboard."""
    import json
    import os
    import time

    from claudeguard.commands.at_keyboard import at_keyboard
    from claudeguard.testing.desk_kit import post_request

    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    session = "3f9c2a7e1b2c3d4e"
    (tmp_path / "rt").mkdir(mode=0o700)
    (tmp_path / "rt" / "sessions").mkdir(mode=0o700)
    screen = tmp_path / "rt" / "sessions" / session
    screen.mkdir(mode=0o700)
    (screen / "screen.json").write_text(json.dumps({
        "dialog": "Bash command", "kind": "permission", "choices": ["Yes", "No"], "since": time.time(),
        "request": None, "held": None, "channel_at": time.time() + 30, "cli_pid": os.getpid()}))
    [listed] = at_keyboard()
    assert (listed.session_id, listed.summary, listed.request_id) == (session, "dialog: Bash command", None)
    waiter = post_request("Bash", {"command": "echo ch > ch.txt"}, session_id=session)
    try:
        assert at_keyboard() == []
        other = post_request("Bash", {"command": "make"}, session_id="another-session-id")
        try:
            assert at_keyboard() == []  # still this session's own request in the channel
        finally:
            other.withdraw()
    finally:
        waiter.withdraw()
    assert [d.session_id for d in at_keyboard()] == [session]
