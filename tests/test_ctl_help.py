"""`claudeguardctl --help` and each command's `--help`: one line saying what the command does,
and every option explained (issue 10). Help never starts a command's work."""

from __future__ import annotations

import re
import subprocess

import pytest

from claudeguard.commands.cli import SUMMARIES
from claudeguard.commands.ctl import COMMANDS
from tests.shim_helpers import CTL


def ctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CTL + list(args), capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


def test_top_level_help_says_what_each_command_does():
    out = ctl("--help")
    assert out.returncode == 0 and out.stderr == ""
    for name in COMMANDS:
        assert re.search(rf"^  {re.escape(name)} +{re.escape(SUMMARIES[name])}$", out.stdout, re.M), name
    assert "CLAUDEGUARD_RUNTIME_DIR" in out.stdout
    bare = ctl()
    assert bare.returncode == 2 and bare.stdout == "" and "commands:" in bare.stderr
    assert ctl("help", "audit").stdout == ctl("audit", "--help").stdout


def _options_without_help(text: str) -> list[str]:
    """Option lines in argparse's "options:" block that carry no explanation."""
    lines = text.splitlines()
    missing = []
    for i, line in enumerate(lines):
        m = re.match(r"^  (-[^ ].*?)(?:  +(\S.*))?$", line)
        if not m or m.group(2):
            continue
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if not re.match(r"^ {6,}\S", following):
            missing.append(m.group(1))
    return missing


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_help(name):
    out = ctl(name, "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: claudeguardctl {name}")
    assert SUMMARIES[name] in " ".join(out.stdout.split()) or SUMMARIES[name] in out.stdout
    assert _options_without_help(out.stdout) == []
    if name in ("hook", "mcp-serve"):
        assert "{" not in out.stdout.splitlines()[0]  # not a hook's JSON answer: help only


@pytest.mark.parametrize("sub", ["show", "path", "init"])
def test_config_subcommand_help(sub):
    out = ctl("config", sub, "--help")
    assert out.returncode == 0 and out.stdout.startswith(f"usage: claudeguardctl config {sub}")
    assert _options_without_help(out.stdout) == []


def test_option_errors_are_one_line():
    for args in (["ps", "--bogus"], ["audit", "--since"], ["approve"], ["config", "nothing"]):
        out = ctl(*args)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, (args, out.stderr)
        assert out.stderr.startswith(f"claudeguardctl {args[0]}") and "--help" in out.stderr


@pytest.mark.parametrize("argv, line", [
    (["approvee", "x"], "claudeguardctl: unknown command 'approvee': did you mean approve? (claudeguardctl --help "
                        "lists every command)"),
    (["pendng"], "claudeguardctl: unknown command 'pendng': did you mean pending? (claudeguardctl --help lists "
                 "every command)"),
    (["config", "shwo"], "claudeguardctl config: argument {show,path,init,trust,untrust}: invalid choice: 'shwo' "
                         "(choose from 'show', 'path', 'init', 'trust', 'untrust'): did you mean show? (see "
                         "claudeguardctl config --help)"),
    (["approve", "abcdefgh", "--scope", "foreve"], "claudeguardctl approve: argument --scope: invalid choice: "
                                                   "'foreve' (choose from 'once', 'agent', 'session', 'forever'): "
                                                   "did you mean forever? (see claudeguardctl approve --help)"),
])
def test_a_mistyped_command_gets_did_you_mean_in_one_line(argv, line):
    out = ctl(*argv)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == line + "\n"


def test_a_word_near_no_command_lists_them_all():
    out = ctl("zzzz")
    assert out.returncode == 2
    assert out.stderr == f"claudeguardctl: unknown command 'zzzz'; usage: claudeguardctl {{{','.join(COMMANDS)}}} ...\n"
