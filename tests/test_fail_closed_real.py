"""Fail closed by construction and proof of life on the real CLIs (both pinned versions): with the
guard's hooks removed from a session by hand (tests/hookless.py, a stand-in for a route nobody
has found), a call the policy denies or asks about does not run, for the main agent and a
subagent, though the caller asked for ``--permission-mode acceptEdits``; and a session that shows
no sign of the guard is ended with one line before such a call runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.shim_helpers import guarded_env, results_of, write_user_config

HOOKLESS = [sys.executable, str(Path(__file__).resolve().parent / "hookless.py")]
CONFIG = ('[permissions]\nallow = ["Write", "Read", "Agent", "Task"]\nask = ["Bash(touch *)"]\n\n'
          '[agents.scribe]\ndeny = ["Write"]\n\n[approval]\ntimeout = 2\n')
NO_SIGN = "claudeguard: no sign of the guard's hooks in this session"


def _scribe(cwd: Path) -> None:
    agents = cwd / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "scribe.md").write_text("---\nname: scribe\ndescription: writes files\ntools: Write, Read, Bash\n---\n"
                                      "You write files.\n")


def _touch(path: Path) -> dict:
    return {"name": "Bash", "input": {"command": f"touch {path}", "description": "touch"}}


def _scenario(cwd: Path, subagent_first: bool) -> list[dict]:
    sub = {"name": "Agent", "input": {"description": "helper", "prompt": "SCRIBE-TASK go", "subagent_type": "scribe"}}
    main_turns = [{"tool_use": _touch(cwd / "main-asked.txt")}, {"tool_use": sub}, {"text": "fin"}]
    if subagent_first:
        main_turns = [{"tool_use": sub}, {"tool_use": _touch(cwd / "main-asked.txt")}, {"text": "fin"}]
    return [
        {"match": "HOOKLESS", "turns": main_turns},
        {"match": "SCRIBE-TASK", "turns": [
            {"tool_use": {"name": "Write", "input": {"file_path": str(cwd / "scribe.txt"), "content": "x"}}},
            {"tool_use": _touch(cwd / "sub-asked.txt")},
            {"text": "sub done"}]},
    ]


def _run(real_claude, model_server, offline_env, *entry: str, subagent_first: bool = False):
    cwd = offline_env.cwd
    _scribe(cwd)
    server = model_server(_scenario(cwd, subagent_first))
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_PLANNER="0")
    write_user_config(env, CONFIG)
    proc = subprocess.run([*HOOKLESS, *entry, "-p", "HOOKLESS go", "--permission-mode", "acceptEdits",
                           "--output-format", "stream-json", "--verbose"],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    return proc, server


def _nothing_ran(cwd: Path) -> None:
    for name in ("main-asked.txt", "scribe.txt", "sub-asked.txt"):
        assert not (cwd / name).exists(), name


def test_the_clis_flags_alone_allow_nothing_the_policy_denies_or_asks(real_claude, model_server, offline_env):
    # No hook and no prompt tool of the guard's: only what the CLI was told by flags decides.
    proc, server = _run(real_claude, model_server, offline_env, "--no-asker")
    assert proc.returncode == 0, proc.stderr
    _nothing_ran(offline_env.cwd)
    results = server.tool_results()
    # every call was made, and each came back refused: the main agent's touch, the subagent's
    # Write (its overlay denies it) and its touch (asked)
    assert [r["is_error"] for r in results if r["script"] == "SCRIBE-TASK"] == [True, True]
    assert [r["is_error"] for r in results if r["script"] == "HOOKLESS"] == [True, False]  # the touch; the Agent ran
    assert results_of(proc)[-1]["is_error"] is False


@pytest.mark.parametrize("subagent_first", [False, True], ids=["main-first", "subagent-first"])
def test_a_session_without_the_guards_hooks_runs_no_asked_call(real_claude, cli_version, model_server, offline_env,
                                                               subagent_first):
    proc, server = _run(real_claude, model_server, offline_env, subagent_first=subagent_first)
    _nothing_ran(offline_env.cwd)
    if cli_version == "2.1.197":
        # -p asks our prompt tool: it finds no sign of the hooks, denies and ends the session
        assert proc.returncode != 0
        assert proc.stderr.count(NO_SIGN) == 1 and proc.stderr.strip().endswith("the session is ended"), proc.stderr
        assert len(server.tool_results()) <= 2  # nothing after the first asked call but the Agent's own result
    else:
        # 2.1.330 -p asks the PermissionRequest hook, which went with the others: the CLI denies
        assert proc.returncode == 0, proc.stderr
        assert [r["is_error"] for r in server.tool_results() if r["script"] == "SCRIBE-TASK"] == [True, True]


def test_with_its_hooks_the_guard_gives_what_accept_edits_allows_per_agent(real_claude, model_server, offline_env):
    # No rule covers these calls: the CLI runs in default mode, and the guard's hook allows what
    # acceptEdits would (a Write and a touch inside the working directory) for the main agent,
    # and denies the subagent whose overlay denies Write.
    cwd = offline_env.cwd
    _scribe(cwd)
    sub = {"name": "Agent", "input": {"description": "helper", "prompt": "SCRIBE-TASK go", "subagent_type": "scribe"}}
    server = model_server([
        {"match": "ACCEPT", "turns": [
            {"tool_use": {"name": "Write", "input": {"file_path": str(cwd / "main.txt"), "content": "x"}}},
            {"tool_use": _touch(cwd / "touched.txt")}, {"tool_use": sub}, {"text": "fin"}]},
        {"match": "SCRIBE-TASK", "turns": [
            {"tool_use": {"name": "Write", "input": {"file_path": str(cwd / "scribe.txt"), "content": "x"}}},
            {"text": "sub done"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[agents.scribe]\ndeny = ["Write"]\n\n[approval]\ntimeout = 2\n')
    proc = subprocess.run([sys.executable, "-m", "claudeguard", "-p", "ACCEPT go", "--permission-mode", "acceptEdits",
                           "--output-format", "stream-json", "--verbose"],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert (cwd / "main.txt").exists() and (cwd / "touched.txt").exists()
    assert not (cwd / "scribe.txt").exists()
    (sub_result,) = [r for r in server.tool_results() if r["script"] == "SCRIBE-TASK"]
    assert sub_result["is_error"] and "denied by Write" in sub_result["content"]


def test_a_terminal_session_without_the_guards_hooks_ends_at_its_first_permission_dialog(
        real_claude, model_server, offline_env):
    import pexpect

    from tests.test_pty_real import Tui

    cwd = offline_env.cwd
    server = model_server([{"match": "run it", "turns": [{"tool_use": _touch(cwd / "asked.txt")}, {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_PLANNER="0")
    write_user_config(env, '[approval]\nidle_before_channel = 60\n')
    tui = Tui([*HOOKLESS, "run it"], env, cwd)
    try:
        tui.child.expect(pexpect.EOF, timeout=60)
        tui.child.close()
        assert tui.child.exitstatus not in (0, None)
        out = (tui.child.before or b"").decode(errors="replace")
        assert NO_SIGN in " ".join(out.split()), out[-2000:]
        assert not (cwd / "asked.txt").exists()
    finally:
        tui.close()
