"""The guard reads argv as the real CLI does (issue 25, classes 1, 2 and 9), on both pinned CLIs and
on the newest (2.1.332, when installed): the real CLI is started through the guard with argv
built to disagree with the guard's old reading, and each case passes only if the guard refused
the launch (exit 2, one line), or the CLI ran a command that starts no session (no request
reached the model), or the guard's hooks were live in the session (the touch the policy denies
was denied by the guard's own hook, which names its rule). The touch never runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from claudeguard.testing.cli_install import PINNED_VERSIONS, cli_path
from tests.conftest import _real_cli
from tests.shim_helpers import GUARD, guarded_env, mark_verified, write_user_config

NEWEST = "2.1.332"
LOCKDOWN = "[security]\ndisable_bypass_permissions = true\n"
HEADLESS = ["--output-format", "stream-json", "--verbose"]
PROMPTS = ("config", "migrate-installer", "sandbox", "attach", "gateway", "project", "logs", "edit-", "mcp", "go",
           "{}")


@pytest.fixture(params=[*PINNED_VERSIONS, NEWEST])
def any_cli(request: pytest.FixtureRequest) -> tuple[str, Path]:
    version = request.param
    if version in PINNED_VERSIONS:
        return version, _real_cli(version)
    path = cli_path(version)
    if path is None:
        pytest.skip(f"Claude Code {version} is not installed (python -m claudeguard.testing.cli_install {version})")
    return version, path


def _start(any_cli, model_server, offline_env, argv: list[str], config: str, *, stdin: str | None = None):
    version, claude = any_cli
    target = offline_env.cwd.parent / "t"  # outside the working directory: the CLI would ask
    # every prompt these tests can make: its first turn is the touch the policy denies
    turns = [{"tool_use": {"name": "Bash", "input": {"command": f"touch {target}", "description": "touch"}}},
             {"text": "fin"}]
    server = model_server([{"match": word, "turns": turns} for word in PROMPTS])
    env = guarded_env(offline_env.use(server), claude)
    if "[security]" in config:
        mark_verified(env, claude)  # lockdown refuses an unverified CLI (plan/verified.py)
    cfg = write_user_config(env, '[permissions]\ndeny = ["Bash(touch *)"]\n' + config)
    proc = subprocess.run(GUARD + argv, env=env, cwd=offline_env.cwd, capture_output=True, text=True, timeout=120,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)
    assert not target.exists(), f"{argv}: the touch ran ({version}); stderr: {proc.stderr}"
    return proc, server, cfg


def _guarded_or_no_session(proc, server, cfg, argv) -> str:
    """Which of the allowed outcomes this run had."""
    if proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("claudeguard: "):
        assert len(server.requests()) == 0
        return "refused"
    sessions = [r for r in server.requests() if r.get("has_tools")]
    if not sessions:
        return "no session"
    results = server.tool_results()
    assert results, f"{argv}: a session without the touch's result: {proc.stderr}"
    assert all(r["is_error"] and f"denied by Bash(touch *) ({cfg}:2)" in r["content"] for r in results), (
        f"{argv}: the guard's hook did not answer: {results}")
    return "guarded"


ALLOW = "--allowedTools=Bash(touch *)"  # a caller's allow rule that tries to let the denied touch through
# (argv, what each version does with it)
WORDS = [
    (["config", ALLOW, *HEADLESS], {"2.1.197": "guarded", "2.1.330": "guarded", "2.1.332": "guarded"}),
    (["migrate-installer", ALLOW, *HEADLESS], {"2.1.197": "guarded", "2.1.330": "guarded", "2.1.332": "guarded"}),
    (["sandbox", "status", ALLOW, *HEADLESS], {"2.1.197": "guarded", "2.1.330": "refused", "2.1.332": "refused"}),
    (["sandbox", "status"], {"2.1.197": "guarded", "2.1.330": "no session", "2.1.332": "no session"}),
    (["gateway"], {"2.1.197": "no session", "2.1.330": "no session", "2.1.332": "no session"}),
    (["project"], {"2.1.197": "no session", "2.1.330": "no session", "2.1.332": "no session"}),
    (["attach", "deadbeef"], {"2.1.197": "no session", "2.1.330": "no session", "2.1.332": "no session"}),
    ([ALLOW, *HEADLESS, "attach", "deadbeef"], {"2.1.197": "guarded", "2.1.330": "no session",
                                               "2.1.332": "no session"}),
    ([ALLOW, *HEADLESS, "attach", "abc"], {"2.1.197": "guarded", "2.1.330": "guarded", "2.1.332": "guarded"}),
    (["logs", "deadbeef"], {"2.1.197": "no session", "2.1.330": "no session", "2.1.332": "no session"}),
    (["edit-permission-rules", "--json"], {"2.1.197": "refused", "2.1.330": "refused", "2.1.332": "refused"}),
    (["mcp", "list"], {"2.1.197": "refused", "2.1.330": "refused", "2.1.332": "refused"}),
]


@pytest.mark.parametrize("argv, outcome", WORDS, ids=[" ".join(w) for w, _ in WORDS])
def test_a_word_of_another_version_is_read_as_this_cli_reads_it(any_cli, model_server, offline_env, argv, outcome):
    # Class 1, lockdown on (as the issue tried it).
    proc, server, cfg = _start(any_cli, model_server, offline_env, argv, LOCKDOWN)
    assert _guarded_or_no_session(proc, server, cfg, argv) == outcome[any_cli[0]], proc.stderr


VALUES = [
    ["--workload", "--managed-settings={\"allowManagedHooksOnly\":true}", "-p", "W go"],
    ["--workload", "--settings={}", "-p", "W go"],
    ["--workload", "--settings", "{}", "-p", "W go"],
    ["--agent-color", "--settings={\"hooks\":{}}", "-p", "W go"],
    ["-p", "W go", "--max-turns", "--settings={}"],
    ["--add-dir", "a", "--settings={}", "-p", "W go"],
]


@pytest.mark.parametrize("argv", VALUES, ids=[" ".join(v) for v in VALUES])
def test_a_value_taking_option_before_settings_does_not_hide_the_guards_hooks(any_cli, model_server, offline_env,
                                                                             argv):
    # Class 2: the CLI reads the word after a value-taking option as its value, whatever it is;
    # the guard's hooks are where the CLI reads its --settings.
    (offline_env.cwd / "a").mkdir()
    proc, server, cfg = _start(any_cli, model_server, offline_env, [*argv, *HEADLESS], LOCKDOWN)
    outcome = _guarded_or_no_session(proc, server, cfg, argv)
    # (`--max-turns --settings={}`: 2.1.330 refuses the value, "must be a number"; 2.1.197's early
    # settings loader reads a --settings word that commander reads as --workload's value: refused)
    assert outcome == "guarded" or (outcome == "no session" and "is invalid" in proc.stderr) or (
        outcome == "refused" and any_cli[0] == "2.1.197" and "main() takes it as an option" in proc.stderr), (
        proc.stderr)


def test_bare_as_another_options_value_is_refused_under_lockdown(any_cli, model_server, offline_env):
    # main() sets CLAUDE_CODE_SIMPLE for the word --bare anywhere before --, even as a value
    proc, server, cfg = _start(any_cli, model_server, offline_env,
                               ["--append-system-prompt", "--bare", "-p", "go", *HEADLESS], LOCKDOWN)
    assert _guarded_or_no_session(proc, server, cfg, ["--bare"]) == "refused"
    assert "--bare: skips the guard's hooks (CLAUDE_CODE_SIMPLE), even as another option's value: refused by " \
           "lockdown" in proc.stderr, proc.stderr


@pytest.mark.parametrize("config", ["", LOCKDOWN, LOCKDOWN + "allow_unguarded = true\n"],
                         ids=["default", "lockdown", "lockdown-with-allow"])
def test_mcp_serve_is_refused(any_cli, model_server, offline_env, config):
    # Class 9: `mcp serve` runs the CLI's tools for any MCP client with no hook and no rule.
    proc, server, _ = _start(any_cli, model_server, offline_env, ["mcp", "serve"], config)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("claudeguard: claude mcp serve is refused: it serves the CLI's tools to any MCP "
                                  "client with no hook and no rule")
    assert proc.stdout == "" and len(server.requests()) == 0


MCP_INIT = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def test_mcp_serve_runs_unguarded_only_when_the_user_allows_it_and_says_so(any_cli, model_server, offline_env):
    stdin = "".join(json.dumps(m) + "\n" for m in MCP_INIT)
    proc, _, _ = _start(any_cli, model_server, offline_env, ["mcp", "serve"],
                        "[security]\nallow_unguarded = true\n", stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("claudeguard: claude mcp serve runs unguarded: it serves the CLI's tools")
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    tools = next(a["result"]["tools"] for a in answers if a.get("id") == 2)
    assert "Bash" in {t["name"] for t in tools}


def test_a_print_run_of_a_sub_command_word_is_a_guarded_session(any_cli, model_server, offline_env):
    # -p anywhere: every word is the prompt (`claude mcp serve -p` asks the model "mcp serve")
    proc, server, cfg = _start(any_cli, model_server, offline_env, ["mcp", "serve", "-p", *HEADLESS], LOCKDOWN)
    assert _guarded_or_no_session(proc, server, cfg, ["mcp", "serve", "-p"]) == "guarded", proc.stderr
