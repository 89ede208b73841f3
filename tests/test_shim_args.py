"""Guard options are split off; everything else reaches the CLI unchanged and in order."""

from __future__ import annotations

import pytest

from claudeguard.errors import UsageError
from claudeguard.plan.claude_args import parse_claude_args
from claudeguard.plan.argv import split_tool_list
from claudeguard.plan.options import split_argv


def test_split_keeps_order_and_bytes():
    argv = ["-p", "a \"quoted\"\nline ünïcödé", "", "--guard-profile", "ci", "--model=x", "--guard-dry-run", "-x", "--",
            "--guard-profile"]
    opts, rest = split_argv(argv)
    assert opts.profile == "ci" and opts.dry_run
    assert rest == ["-p", "a \"quoted\"\nline ünïcödé", "", "--model=x", "-x", "--", "--guard-profile"]


@pytest.mark.parametrize("argv, msg", [
    (["--guard-bogus"], "unknown option --guard-bogus"),
    (["--guard-profile"], "needs a value"),
    (["--guard-dry-run=1"], "takes no value"),
])
def test_usage_errors(argv, msg):
    with pytest.raises(UsageError, match=msg):
        split_argv(argv)


def test_values_with_equals_and_separate():
    opts, rest = split_argv(["--guard-stall-after=5", "--guard-on-stall", "kill", "hello"])
    assert opts.values == {"watchdog.stall_after": "5", "watchdog.on_stall": "kill"}
    assert rest == ["hello"]


@pytest.mark.parametrize("argv, passthrough, sub", [
    (["--version"], True, None),
    (["-v"], True, None),
    (["doctor"], True, "doctor"),
    (["mcp", "list"], True, "mcp"),
    (["--model", "opus", "mcp"], True, "mcp"),
    (["explain this"], False, None),
    (["-p", "doctor"], False, None),
    (["-p", "mcp", "list"], False, None),
    (["hello", "doctor"], False, None),
])
def test_passthrough_detection(argv, passthrough, sub):
    args = parse_claude_args(argv)
    assert args.passthrough is passthrough
    assert args.subcommand == sub


def test_options_with_values():
    args = parse_claude_args(["--allowedTools", "Read", "Bash(git *)", "-p", "--permission-mode=plan", "--settings",
                              "{}", "hi there"])
    assert args.values("--allowedTools") == ["Read", "Bash(git *)"]
    assert args.print_mode
    assert args.last("--permission-mode") == "plan"
    assert args.prompt == "hi there"


def test_bundled_short_flags():
    args = parse_claude_args(["-pc", "go"])
    assert args.print_mode and args.has("--continue")


def test_split_tool_list_respects_parentheses():
    assert split_tool_list(["Read,Bash(git diff *)", "Edit Write"]) == ["Read", "Bash(git diff *)", "Edit", "Write"]
