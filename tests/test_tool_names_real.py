"""What the guard's reading of tool names rests on, checked on the real CLI: Claude Code matches a
rule's tool name exactly, so its `bash(touch *)` and `bash` rules let nothing run (and the guard
refuses such a rule in its config, with the name meant: tests/test_config_errors.py); and the
tool names the guard takes from the CLI's binary (cli_tables.tools) are those of the installed
CLI's table."""

from __future__ import annotations

import json

import pytest

from claudeguard.cli_tables import load
from claudeguard.cli_tables.tools import names_in_binary


@pytest.mark.parametrize("rule, runs", [("Bash(touch *)", True), ("Bash", True), ("bash(touch *)", False),
                                        ("bash", False), ("BASH(touch *)", False)])
def test_the_cli_matches_a_rules_tool_name_exactly(real_claude, offline_env, model_server, run_claude, rule, runs):
    server = model_server([{"match": "CASETEST", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": "touch made.txt", "description": "touch"}}},
        {"text": "fin"}]}])
    env = offline_env.use(server)
    settings = json.dumps({"permissions": {"allow": [rule]}})
    proc = run_claude([real_claude, "-p", "CASETEST go", "--settings", settings, "--permission-mode", "dontAsk"],
                      env, offline_env.cwd, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (offline_env.cwd / "made.txt").exists() is runs
    [result] = server.tool_results()
    assert result["is_error"] is not runs


def test_the_tool_names_read_from_the_binary_are_its_tables(real_claude, cli_version):
    table = load.load(cli_version)
    assert table is not None
    tools = table["tools"]
    assert names_in_binary(str(real_claude)) == (set(tools["names"]) | set(tools["aliases"])
                                                 | set(tools["aliases"].values()))
