"""Fail closed by construction (plan/argv.py ``cli_flags``, gate/modes.py): the flags the CLI is
given allow nothing any agent's policy denies or asks about, and the guard's hook allows, per
agent, what the asked-for mode would. The real CLIs with the hooks removed by hand are in
tests/test_fail_closed_real.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from claudeguard.config.load import load_config
from claudeguard.errors import UsageError
from claudeguard.gate.modes import effective_mode, mode_allows
from claudeguard.gate.session import Session
from claudeguard.plan.argv import DROPPED, build_plan, cli_flags, session_modes
from claudeguard.plan.claude_args import parse_claude_args
from tests.shim_helpers import plain_env, write_user_config

CONFIG = ('[permissions]\nallow = ["Write", "Bash(git status)", "Read"]\nask = ["Bash(touch *)"]\n\n'
          '[agents.scribe]\ndeny = ["Write"]\n')


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    env = plain_env(tmp_path, CONFIG)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path / "work")
    return load_config(tmp_path / "work")


def _flags(cfg, cwd, *argv):
    front, rest = cli_flags(parse_claude_args(list(argv), cli_version="2.1.330"), cfg, str(cwd))
    return front, [w for w in rest if w != DROPPED]


def test_the_cli_gets_a_mode_that_allows_no_more_than_default(cfg, tmp_path):
    work = tmp_path / "work"
    for asked, given in (("acceptEdits", "default"), ("bypassPermissions", "default"), ("auto", "default"),
                         ("plan", "plan"), ("dontAsk", "dontAsk"), ("default", "default")):
        front, rest = _flags(cfg, work, "--permission-mode", asked, "-p", "x")
        assert (front, rest) == ([f"--permission-mode={given}"], ["-p", "x"])
        front, rest = _flags(cfg, work, f"--permission-mode={asked}", "-p", "x")
        assert (front, rest) == ([f"--permission-mode={given}"], ["-p", "x"])
    front, rest = _flags(cfg, work, "--dangerously-skip-permissions", "-p", "x")
    assert (front, rest) == (["--permission-mode=default"], ["-p", "x"])
    # a settings file's defaultMode is asked for too, and given as default
    (work / ".claude").mkdir()
    (work / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"defaultMode": "acceptEdits"}}))
    args = parse_claude_args(["-p", "x"], cli_version="2.1.330")
    assert session_modes(args, cfg, str(work)) == (
        "acceptEdits", f"permissions.defaultMode ({work / '.claude' / 'settings.json'})", "default")


def test_the_callers_allowed_tools_keep_only_what_no_agent_must_be_asked(cfg, tmp_path):
    front, rest = _flags(cfg, tmp_path / "work", "--allowedTools", "Write", "Bash(touch x)", "Read", "-p", "x")
    assert rest == ["--allowedTools=Read", "-p", "x"]
    front, rest = _flags(cfg, tmp_path / "work", "--allowed-tools=Write,Bash(git log)", "-p", "x")
    assert rest == ["-p", "x"]
    front, rest = _flags(cfg, tmp_path / "work", "--allowedTools", "Read", "-p", "x")
    assert rest == ["--allowedTools", "Read", "-p", "x"]


def test_an_agents_own_mode_is_removed_with_a_line_and_refused_under_lockdown(cfg, tmp_path, capsys):
    agents = {"byp": {"description": "d", "prompt": "p", "permissionMode": "bypassPermissions"},
              "calm": {"description": "d", "prompt": "p", "permissionMode": "plan"}}
    front, rest = _flags(cfg, tmp_path / "work", "--agents", json.dumps(agents), "-p", "x")
    assert rest[0].startswith("--agents=") and rest[1:] == ["-p", "x"]
    assert json.loads(rest[0].partition("=")[2]) == {"byp": {"description": "d", "prompt": "p"},
                                                     "calm": agents["calm"]}
    assert capsys.readouterr().err == (
        "claudeguard: --agents: permissionMode removed from agent(s) byp: an agent's own mode would let its calls "
        "skip the guard's questions; the guard's policy decides them\n")
    write_user_config(dict(os.environ), CONFIG + "\n[security]\ndisable_bypass_permissions = true\n")
    locked = load_config(tmp_path / "work")
    with pytest.raises(UsageError, match=r"^--agents: agent byp sets permissionMode bypassPermissions: refused by "
                                         r"lockdown \(.*config.toml:\d+\)$"):
        _flags(locked, tmp_path / "work", "--agents", json.dumps(agents), "-p", "x")


def test_the_rewrite_finds_the_settings_the_cli_reads(cfg, tmp_path):
    work = tmp_path / "work"
    # the caller's words stay as they were, and the guard's settings are the last --settings of
    # every reader (2.1.197's early loader would take `--settings={}` as its settings)
    args = parse_claude_args(["--workload", "--settings={}", "-p", "x"], cli_version="2.1.197")
    plan = build_plan("/bin/claude", args, cfg, session_id="s", session_dir=None, cwd=str(work))
    assert plan.argv[-5:-1] == ["--workload", "--settings={}", "-p", "x"]
    assert plan.argv[-1].startswith("--settings=") and "hooks" in json.loads(plan.argv[-1].partition("=")[2])
    # the caller's own settings: taken out where they stood, merged into the guard's, last but for `--`
    args = parse_claude_args(["--settings", '{"env": {"A": "1"}}', "--permission-mode", "acceptEdits", "-p", "x",
                              "--", "--settings=no"], cli_version="2.1.330")
    plan = build_plan("/bin/claude", args, cfg, session_id="s", session_dir=None, cwd=str(work))
    assert "--settings" not in plan.argv and plan.argv[-2:] == ["--", "--settings=no"]
    merged = json.loads(plan.argv[-3].partition("=")[2])
    assert merged["env"].pop("A") == "1" and "PreToolUse" in merged["hooks"]
    assert set(merged["env"]) <= {"CLAUDE_CODE_SHELL_PREFIX"}  # the box's, where bubblewrap runs (plan/sandbox.py)
    assert plan.argv[-5:-3] == ["-p", "x"]
    assert "acceptEdits" not in " ".join(plan.argv) and "--permission-mode=default" in plan.argv
    # an option at the end that wants a value would take the guard's word: refused, as the CLI would
    args = parse_claude_args(["-p", "x", "--model"], cli_version="2.1.330")
    with pytest.raises(UsageError, match="^option --model needs a value: the CLI refuses this command line$"):
        build_plan("/bin/claude", args, cfg, session_id="s", session_dir=None, cwd=str(work))


def _session(tmp_path: Path, asked: str, cli: str = "default", dirs: list[str] | None = None) -> Session:
    work = str(tmp_path / "work")
    return Session("s", None, {"cwd": work, "mode": {"asked": asked, "by": "--permission-mode", "cli": cli,
                                                     "dirs": dirs or [work]}})


def test_the_mode_of_a_call(tmp_path):
    session = _session(tmp_path, "acceptEdits")
    assert effective_mode(session, "default", None) == "acceptEdits"
    assert effective_mode(session, "default", "scribe") == "acceptEdits"
    # the person at the keyboard changed the main agent's mode; a subagent's is not taken at its word
    assert effective_mode(session, "plan", None) == "plan"
    assert effective_mode(session, "bypassPermissions", "byp") == "acceptEdits"
    assert effective_mode(Session("s", None, {}), "acceptEdits", None) == "acceptEdits"


@pytest.mark.parametrize(("tool", "tool_input", "allowed"), [
    ("Write", {"file_path": "{work}/a.txt"}, True),
    ("Write", {"file_path": "a/b.txt"}, True),
    ("Edit", {"file_path": "{work}/../outside.txt"}, False),
    ("Write", {"file_path": "/etc/x"}, False),
    ("Write", {"file_path": "{work}/.claude/settings.json"}, False),
    ("Write", {"file_path": "{work}/.git/hooks/pre-commit"}, False),
    ("NotebookEdit", {"notebook_path": "{extra}/n.ipynb"}, True),
    ("Bash", {"command": "touch a b && mkdir -p d/e"}, True),
    ("Bash", {"command": "echo hi > e.txt; rm -f e.txt"}, True),
    ("Bash", {"command": "mv a /tmp/b"}, False),
    ("Bash", {"command": "touch $(pwd)/x"}, False),
    ("Bash", {"command": "touch .git/x"}, False),
    ("Bash", {"command": "python3 -c 'open(\"x\",\"w\")'"}, False),
    ("Bash", {"command": "./touch x"}, False),
    ("WebFetch", {"url": "https://x"}, False),
])
def test_accept_edits_allows_what_the_cli_would_inside_the_working_dirs(tmp_path, tool, tool_input, allowed):
    work, extra = tmp_path / "work", tmp_path / "extra"
    work.mkdir(exist_ok=True)
    extra.mkdir(exist_ok=True)
    session = _session(tmp_path, "acceptEdits", dirs=[str(work), str(extra)])
    filled = {k: v.format(work=work, extra=extra) for k, v in tool_input.items()}
    got = mode_allows(session, tool, filled, "acceptEdits", str(work))
    assert (got is not None) is allowed
    if got is not None:
        assert (got.decision, got.rule, got.source) == ("allow", "acceptEdits", "permission mode")
    assert mode_allows(session, tool, filled, "default", str(work)) is None
    bypass = mode_allows(session, tool, filled, "bypassPermissions", str(work))
    assert bypass is not None and bypass.rule == "bypassPermissions"


def test_the_hook_allows_what_the_mode_allows_after_the_agents_own_policy(tmp_path, monkeypatch):
    from claudeguard.gate.call import Asking, Call
    from claudeguard.gate.decide import decide_call

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    snapshot = {"cwd": str(work), "mode": {"asked": "acceptEdits", "by": "--permission-mode", "cli": "default",
                                           "dirs": [str(work)]},
                "policy": {"permissions": {"ask": [{"rule": "Bash(touch *)", "source": "cfg:3", "root": str(work)}]},
                           "agents": {"scribe": {"replace": False, "allow": [], "ask": [],
                                                 "deny": [{"rule": "Write", "source": "cfg:6", "root": str(work)}]}}}}
    session = Session("s", None, snapshot)  # type: ignore[arg-type]  # a hand-made snapshot

    def call(tool, tool_input, agent_type):
        return decide_call(session, Call(tool, tool_input, agent_type, None, str(work), None, "default"),
                           Asking("hook", "leave"))

    assert call("Write", {"file_path": str(work / "a.txt")}, None).decision == "allow"
    assert call("Write", {"file_path": str(work / "a.txt")}, "general-purpose").decision == "allow"
    denied = call("Write", {"file_path": str(work / "a.txt")}, "scribe")
    assert denied.decision == "deny" and "cfg:6" in denied.reason
    assert call("Write", {"file_path": "/etc/x"}, None).decision == "leave"
