"""Issue 27, in a real pty on both pinned CLIs: in a session with a terminal, a call the policy
asks about (or that no rule decides) shows the CLI's own permission dialog at the keyboard first.
The PreToolUse hook answers "ask"; the PermissionRequest hook posts the call's request held; the
pty's router releases it to the channel after ``approval.idle_before_channel`` without a key, and
drops it when the keyboard answered. One request per call, one audit row saying who answered."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from claudeguard import channel
from claudeguard.files import read_json
from claudeguard.plan.discovery import version_at_least
from claudeguard.testing.cli_install import newest_under_test, versions_under_test
from claudeguard.testing.tui import exit_tui, expect_text, screen_now
from tests.shim_helpers import GUARD, wait_until

DIALOG = "Do you want to proceed?"


def bash(command: str) -> dict:
    return {"tool_use": {"name": "Bash", "input": {"command": command, "description": "a call"}}}


class Session:
    """claudeguard in front of the real CLI under a test pty (the person's terminal), sharing
    its approval channel and audit log with the test."""

    def __init__(self, spawn_tui, real_claude: Path, model_server, offline_env, monkeypatch, turns: list, *,
                 config: str = "", idle: float = 30, args: tuple[str, ...] = ("--permission-mode", "default"),
                 extra_scripts: tuple = ()) -> None:
        monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", offline_env["CLAUDEGUARD_RUNTIME_DIR"])
        monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", offline_env["CLAUDEGUARD_LOG_DIR"])
        self.server = model_server([{"match": "run it", "turns": turns}, *extra_scripts])
        self.env = dict(offline_env.use(self.server), CLAUDEGUARD_CLAUDE=str(real_claude))
        self.cwd = offline_env.cwd
        cfg = Path(self.env["XDG_CONFIG_HOME"]) / "claudeguard" / "config.toml"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(f"[approval]\nidle_before_channel = {idle}\ntimeout = 60\n{config}")
        self.child = spawn_tui(GUARD + list(args) + ["run it"], self.env, self.cwd)

    def session_dir(self) -> Path:
        [d] = (Path(self.env["CLAUDEGUARD_RUNTIME_DIR"]) / "sessions").iterdir()
        return d

    def events(self, name: str) -> list[dict]:
        path = self.session_dir() / "events.jsonl"
        return [e for e in (json.loads(line) for line in path.read_text().splitlines()) if e["event"] == name]

    def audit(self) -> list[dict]:
        from claudeguard.channel.audit import read_events

        return [dict(e) for e in read_events()]


def _held() -> list:
    return channel.list_pending(held=True)


def _dialog_soon_after_the_call(s: Session, text: str) -> None:
    """The dialog appears at the call (the PreToolUse hook's tool-start event), not held for
    anything first: within about 2 s on a quiet machine; 10 s here leaves a loaded one its margin."""
    expect_text(s.child, DIALOG, 30)
    seen = time.time()
    starts = [e for e in s.events("tool-start") if e["tool"] == "Bash"]
    assert starts, screen_now(s.child)
    assert seen - starts[-1]["time"] < 10, (seen - starts[-1]["time"], screen_now(s.child))
    assert text in screen_now(s.child, 0.2)


# Every version under test (the pinned ones, or CLAUDEGUARD_TEST_CLI_VERSIONS) in default and
# acceptEdits; auto mode exists from 2.1.300 on: the newest version under test that has it.
MODES = [(v, mode) for v in versions_under_test() for mode in ("default", "acceptEdits")] + [
    (newest_under_test("2.1.330"), "auto")]


@pytest.mark.parametrize("cli_version, mode", MODES)
def test_an_ask_rule_shows_the_dialog_and_enter_at_the_keyboard_runs_it(spawn_tui, cli_version, real_claude,
                                                                         model_server, offline_env, monkeypatch, mode):
    # auto: 2.1.330 may start interactive sessions in it; the hook's "ask" brings the plain dialog
    # there too (not the auto-mode one), measured.
    s = Session(spawn_tui, real_claude, model_server, offline_env, monkeypatch,
                [bash("echo kb > kb.txt"), {"text": "made it"}], config='[permissions]\nask = ["Bash(echo *)"]\n',
                args=("--permission-mode", mode))
    _dialog_soon_after_the_call(s, "Bash(echo *)")
    [held] = wait_until(_held, 60, "the PermissionRequest hook's held request")
    assert held.tool == "Bash" and held.input["command"] == "echo kb > kb.txt"
    assert channel.list_pending() == []  # the keyboard's head start: approvers see nothing yet
    s.child.send("\r")  # Enter on the highlighted "Yes"
    expect_text(s.child, "made it", 20)
    assert (s.cwd / "kb.txt").read_text() == "kb\n"
    wait_until(lambda: _held() == [] and channel.list_pending() == [], 60, "the held request withdrawn")
    rows = wait_until(lambda: [e for e in s.audit() if e.get("tool") == "Bash"] or None, 60, "the keyboard's audit row")
    [row] = rows
    assert (row["decision"], row["decided_by"], row["via"], row["request_id"], row["choice"]) == (
        "allow", "keyboard", "dialog", held.id, "Yes")
    assert (row["ask_rule"], row["answered_by"]["command"]) == ("Bash(echo *)", "keyboard")
    assert [e for e in s.audit() if e.get("event")] == []
    assert exit_tui(s.child) == 0


def test_left_alone_the_request_reaches_the_channel_after_idle_and_an_approve_there_runs_it(
        spawn_tui, cli_version, real_claude, model_server, offline_env, monkeypatch):
    s = Session(spawn_tui, real_claude, model_server, offline_env, monkeypatch,
                [bash("echo ch > ch.txt"), {"text": "made it"}], config='[permissions]\nask = ["Bash(echo *)"]\n',
                idle=2)
    _dialog_soon_after_the_call(s, "in the approval channel after 2 s")
    shown = time.time()
    [req] = wait_until(lambda: channel.list_pending(), 60, "the request in the channel")
    assert time.time() - shown >= 1.5  # not before the keyboard's head start (2 s) was over
    assert req.tool == "Bash" and req.input["command"] == "echo ch > ch.txt" and req.extra["via"] == "dialog"
    channel.answer(req.id, "allow")
    expect_text(s.child, "made it", 20)
    assert (s.cwd / "ch.txt").read_text() == "ch\n"
    [row] = [e for e in s.audit() if e.get("tool") == "Bash"]
    assert (row["decision"], row["decided_by"], row["request_id"], row["via"]) == ("allow", "human", req.id, "dialog")
    assert channel.list_pending() == [] and _held() == []
    assert exit_tui(s.child) == 0


def test_a_key_after_the_request_went_to_the_channel_still_wins_and_withdraws_it(
        spawn_tui, cli_version, real_claude, model_server, offline_env, monkeypatch):
    s = Session(spawn_tui, real_claude, model_server, offline_env, monkeypatch,
                [bash("echo late > late.txt"), {"text": "made it"}], config='[permissions]\nask = ["Bash(echo *)"]\n',
                idle=1)
    expect_text(s.child, DIALOG, 30)
    [req] = wait_until(lambda: channel.list_pending(), 60, "the request in the channel")
    s.child.send("1")  # "1. Yes" at the keyboard
    expect_text(s.child, "made it", 20)
    wait_until(lambda: channel.list_pending() == [], 60, "the request withdrawn")
    with pytest.raises(Exception, match="no such pending request|no longer pending|withdrawn"):
        channel.answer(req.id, "deny")
    rows = wait_until(lambda: [e for e in s.audit() if e.get("tool") == "Bash"] or None, 60, "the audit row")
    assert [(r["decision"], r["decided_by"], r["request_id"], r["choice"]) for r in rows] == [
        ("allow", "keyboard", req.id, "Yes")]
    assert exit_tui(s.child) == 0


def test_no_at_the_keyboard_denies_and_says_so_once(spawn_tui, cli_version, real_claude, model_server, offline_env,
                                                      monkeypatch):
    s = Session(spawn_tui, real_claude, model_server, offline_env, monkeypatch,
                [bash("echo no > no.txt"), {"text": "made it"}], config='[permissions]\nask = ["Bash(echo *)"]\n')
    expect_text(s.child, DIALOG, 30)
    [held] = wait_until(_held, 60, "the held request")
    s.child.send("\x1b[B")  # Down to "No"
    expect_text(s.child, "❯ 2. No", 5)  # the highlight moved
    s.child.send("\r")
    wait_until(lambda: DIALOG not in screen_now(s.child, 0.2), 60, "the dialog to close")
    rows = wait_until(lambda: [e for e in s.audit() if e.get("tool") == "Bash"] or None, 60, "the audit row")
    assert [(r["decision"], r["decided_by"], r["request_id"], r["choice"]) for r in rows] == [
        ("deny", "keyboard", held.id, "No")]
    assert not (s.cwd / "no.txt").exists() and channel.list_pending() == [] and _held() == []


def test_a_session_grant_from_the_channel_spares_the_next_matching_call_any_dialog(
        spawn_tui, cli_version, real_claude, model_server, offline_env, monkeypatch):
    # A call no rule decides (an ask rule always asks a human: a grant is an allow rule, and ask
    # beats allow). The grant is the exact call's rule, Bash(touch g.txt).
    s = Session(spawn_tui, real_claude, model_server, offline_env, monkeypatch,
                [bash("touch g.txt"), bash("rm g.txt"), bash("touch g.txt"), {"text": "made it"}],
                config='[permissions]\nallow = ["Bash(rm g.txt)"]\n', idle=1)
    expect_text(s.child, DIALOG, 30)
    [req] = wait_until(lambda: channel.list_pending(), 60, "the request in the channel")
    channel.answer(req.id, "allow", scope="session")
    expect_text(s.child, "made it", 30)
    assert (s.cwd / "g.txt").exists()
    rows = [e for e in s.audit() if e.get("tool") == "Bash"]
    assert [(r["decided_by"], r["scope"]) for r in rows] == [("human", "session"), ("rule", None), ("rule", None)]
    assert rows[2]["source"].startswith("grant (session") and rows[2]["rule"] == "Bash(touch g.txt)"
    assert channel.list_pending() == [] and _held() == []
    assert exit_tui(s.child) == 0


def test_a_call_no_rule_decides_is_asked_at_the_keyboard_and_a_subagents_where_its_dialog_can_show(
        spawn_tui, cli_version, real_claude, model_server, offline_env, monkeypatch):
    # No rule for `touch`: the hook answers "ask" (not silence) and the CLI's dialog asks. A
    # subagent's call under an ask rule: 2.1.197 draws a foreground agent's dialog ("from the
    # general-purpose agent") while its PermissionRequest hook runs, so the keyboard answers it;
    # 2.1.330 runs every agent in the background and draws its dialog only once the hook has
    # returned: no dialog can show it, and the request goes to the channel within 2 s + a check.
    agent = {"tool_use": {"name": "Agent", "input": {"description": "helper", "prompt": "SUB go",
                                                     "subagent_type": "general-purpose"}}}
    s = Session(spawn_tui, real_claude, model_server, offline_env, monkeypatch,
                [bash("touch norule"), agent, {"text": "made it"}], config='[permissions]\nask = ["Bash(echo *)"]\n',
                extra_scripts=({"match": "SUB go", "turns": [bash("echo sub > sub.txt"), {"text": "sub done"}]},))
    expect_text(s.child, DIALOG, 30)
    assert "no rule decides this Bash call" in screen_now(s.child, 0.2)
    s.child.send("\r")
    if not version_at_least(cli_version, (2, 1, 300)):
        expect_text(s.child, "from the general-purpose agent", 30)
        # the main agent's request is withdrawn within a fraction of a second of the first Enter
        [held] = wait_until(lambda: len(r := _held()) == 1 and r[0].agent_type == "general-purpose" and r, 60,
                            "the subagent's held request alone")
        assert channel.list_pending() == []
        s.child.send("\r")
        sub = ("allow", "keyboard", "general-purpose")
    else:
        [req] = wait_until(lambda: channel.list_pending(), 60, "the subagent's request in the channel")
        assert req.agent_type == "general-purpose" and req.input["command"] == "echo sub > sub.txt"
        assert DIALOG not in screen_now(s.child, 0.2)
        channel.answer(req.id, "allow")
        sub = ("allow", "human", "general-purpose")
    wait_until(lambda: (s.cwd / "sub.txt").exists(), 60, "the subagent's call to run")
    rows = wait_until(lambda: (r := [e for e in s.audit() if e.get("tool") == "Bash"]) and len(r) == 2 and r, 60,
                      "two audit rows")
    assert [(r["decision"], r["decided_by"], r["agent_type"]) for r in rows] == [("allow", "keyboard", None), sub]
    assert channel.list_pending() == [] and _held() == []


INJECT = Path(__file__).parent / "data" / "tty_inject.py"


def _lines(log: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in log.read_text().splitlines() if line.endswith("}")]
    except FileNotFoundError:
        return []


def _attempts(log: Path) -> list[dict]:
    return [a for a in _lines(log) if "route" in a]


def _stopped(log: Path) -> bool:
    return any(a.get("stopped") for a in _lines(log))


def test_a_tool_typing_into_the_terminal_is_not_the_keyboard(spawn_tui, cli_version, real_claude, model_server,
                                                             offline_env, monkeypatch, tmp_path):
    # A Bash tool the policy allows keeps typing "1" Enter by every route it has while the next
    # call's dialog is on screen: TIOCSTI on /dev/tty (the CLI starts Bash in a session of its
    # own: no controlling terminal), on the CLI's pty and on the person's terminal (neither is its
    # controlling terminal: EPERM without CAP_SYS_ADMIN, which it gave up), and write() to each
    # (output: it lands on the screen, never in the input). The dialog stays until a real key.
    log, stop = tmp_path / "inject.jsonl", tmp_path / "stop"
    injector = {"tool_use": {"name": "Bash", "input": {"command": f"python3 {INJECT} {log} {stop}",
                                                       "description": "type into the terminal",
                                                       "run_in_background": True}}}
    s = Session(spawn_tui, real_claude, model_server, offline_env, monkeypatch,
                [injector, bash("echo x > x.txt"), {"text": "made it"}],
                # without the box (plan/sandbox.py), which would also keep the tool from every
                # terminal: the keyboard's own defence, alone
                config='[security]\nsandbox = "off"\n\n[permissions]\nallow = ["Bash(python3 *)"]\n'
                       'ask = ["Bash(echo *)"]\n')
    try:
        expect_text(s.child, DIALOG, 30)
        [held] = wait_until(_held, 60, "the held request")
        shown = time.time()
        wait_until(lambda: len({round(a["time"], 1) for a in _attempts(log) if a["time"] > shown}) >= 5, 60,
                   "five rounds of typing while the dialog is on screen")
        assert DIALOG in screen_now(s.child, 0.5) and not (s.cwd / "x.txt").exists()
        assert [r.id for r in _held()] == [held.id] and channel.list_pending() == [], s.audit()
        attempts = _attempts(log)
        by = {(a["route"].split(" (")[0], a["how"]): a["result"] for a in attempts}
        assert by[("/dev/tty", "tiocsti")] == "ENXIO"  # no controlling terminal at all
        pushed = [a for a in attempts if a["how"] == "tiocsti" and a["result"] == "ok"]
        assert pushed == [] and {a["result"] for a in attempts if a["how"] == "tiocsti"} <= {"EPERM", "ENXIO"}
        assert any(a["route"].startswith("fd0 of claude") for a in attempts)  # the CLI's own pty was tried
        assert [e for e in s.audit() if e.get("tool") == "Bash" and e.get("decided_by") != "rule"] == []
    finally:
        stop.write_text("")
    # The person answers once the injector is done scribbling on the screen and the screen was drawn
    # again (its writes land in the dialog's lines, which the CLI does not repaint by itself; the
    # person's window changing size makes it): the router has then read the dialog as the held
    # request's (under load it may not have while the lines were scribbled over).
    wait_until(lambda: _stopped(log), 30, "the injector's last round")
    rows, cols = s.child.getwinsize()
    s.child.setwinsize(rows, cols - 2)
    wait_until(lambda: (read_json(str(s.session_dir() / "screen.json")) or {}).get("held") == held.id, 30,
               "the router's reading of the dialog as the held request")
    s.child.send("\r")  # the person
    expect_text(s.child, "made it", 20)
    assert (s.cwd / "x.txt").exists()
    rows = wait_until(lambda: [e for e in s.audit() if "echo x" in str(e.get("summary"))] or None, 60, "the row")
    assert [(r.get("decision"), r.get("decided_by"), r.get("event")) for r in rows] == [("allow", "keyboard", None)]


def _legacy_tiocsti() -> bool:
    try:
        return Path("/proc/sys/dev/tty/legacy_tiocsti").read_text().strip() != "0"
    except OSError:
        return True  # a kernel before 6.2: TIOCSTI on one's own controlling terminal always works


def test_input_pushed_by_a_program_in_the_clis_own_session_is_never_the_keyboard(
        spawn_tui, cli_version, real_claude, model_server, offline_env, monkeypatch, tmp_path):
    # An MCP server of the CLI runs in the CLI's session: the pty is its controlling terminal, and
    # where the kernel allows TIOCSTI there (dev.tty.legacy_tiocsti = 1, kernels before 6.2) its
    # "1" Enter reaches the CLI as if typed, bypassing the relay. The guard cannot stop those bytes;
    # it sees the call run with no key typed at the terminal and no answer from the channel: its
    # request is withdrawn and the audit log says so, never "keyboard". With legacy_tiocsti = 0 the
    # ioctl fails and the dialog waits for the person.
    log, stop = tmp_path / "inject.jsonl", tmp_path / "stop"
    import sys

    mcp = {"mcpServers": {"inject": {"command": sys.executable,
                                     "args": [str(INJECT), str(log), str(stop), "--session"]}}}
    s = Session(spawn_tui, real_claude, model_server, offline_env, monkeypatch,
                [bash("echo x > x.txt"), {"text": "made it"}], config='[permissions]\nask = ["Bash(echo *)"]\n',
                args=("--permission-mode", "default", f"--mcp-config={json.dumps(mcp)}"))
    try:
        expect_text(s.child, DIALOG, 30)
        [held] = wait_until(_held, 60, "the held request")
        Path(f"{stop}.go").write_text("")
        if _legacy_tiocsti():
            wait_until(lambda: (s.cwd / "x.txt").exists(), 60, "the call, answered by the MCP server's input")
            stop.write_text("")  # it would go on typing "1" Enter into the prompt box
            rows = wait_until(lambda: [e for e in s.audit() if "echo x" in str(e.get("summary"))] or None, 60,
                              "the guard's word on it")
            assert [(r.get("event"), r.get("decided_by"), r.get("request_id")) for r in rows] == [
                ("dialog-answered-without-key", None, held.id)]
            pushed = [a for a in _attempts(log) if a["how"] == "tiocsti" and a["result"] == "ok"]
            assert pushed and all(a["route"] in ("/dev/tty",) or a["route"].startswith(("fd0 of claude", "/proc/"))
                                  for a in pushed)
        else:
            wait_until(lambda: len(_attempts(log)) >= 10, 60, "attempts")
            assert DIALOG in screen_now(s.child, 0.5) and not (s.cwd / "x.txt").exists()
            assert not [a for a in _attempts(log) if a["how"] == "tiocsti" and a["result"] == "ok"]
        assert channel.list_pending() == [] or not _legacy_tiocsti()
        assert not [e for e in s.audit() if e.get("decided_by") == "keyboard"]
    finally:
        stop.write_text("")


def test_the_status_line_says_what_waits_in_the_channel_under_the_users_own(
        spawn_tui, cli_version, real_claude, model_server, offline_env, monkeypatch):
    # A background agent's call: neither CLI shows its dialog while its hook runs (each draws it
    # once the hook has returned), so it goes to the channel; the status line says so, and how to
    # answer, under the line of the user's own statusLine.
    settings = offline_env.home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"statusLine": {"type": "command", "command": "echo USERLINE"}}))
    agent = {"tool_use": {"name": "Agent", "input": {"description": "helper", "prompt": "BG go",
                                                     "run_in_background": True, "subagent_type": "general-purpose"}}}
    s = Session(spawn_tui, real_claude, model_server, offline_env, monkeypatch, [agent, {"text": "made it"}],
                config='[permissions]\nask = ["Bash(echo *)"]\n', idle=1,
                extra_scripts=({"match": "BG go", "turns": [bash("echo bg > bg.txt"), {"text": "bg done"}]},))
    expect_text(s.child, "USERLINE", 30)
    [req] = wait_until(lambda: channel.list_pending(), 60, "the background agent's request in the channel")
    expect_text(s.child, f"claudeguard: 1 call waits · claudeguardctl approve|deny {req.id} · general-purpose", 15)
    assert "USERLINE" in screen_now(s.child, 0.2)
    channel.answer(req.id, "allow")
    wait_until(lambda: (s.cwd / "bg.txt").exists(), 60, "the call to run")
    wait_until(lambda: "calls wait" not in (t := screen_now(s.child, 0.5)) and "call waits" not in t, 60,
               "the guard's line to go")
    assert "USERLINE" in screen_now(s.child, 0.2)
