"""gate.decide.cli_asks: where the gate may stay silent because the CLI decides alone, and where it
must answer (issue 27: every call that needs a human is answered explicitly)."""

from __future__ import annotations

import pytest

from claudeguard.gate.decide import cli_asks

CWD = "/work/project"


@pytest.mark.parametrize("command", [
    "ls", "pwd", "echo moved", "cd sub && echo moved", "cat README.md | head -5", "grep -rn TODO src",
    "wc -l src/a.py src/b.py", "ls -la ./docs",
])
def test_a_plain_reading_command_inside_the_folder_is_left_to_the_cli(command):
    assert cli_asks("Bash", {"command": command}, "default", CWD) is False


@pytest.mark.parametrize("command", [
    "cat /etc/passwd",             # a read outside the folder: the CLI asks
    "cat ../other/secret",         # the same, relative
    "echo hi > out.txt",           # a write
    "ls; rm -rf build",            # a program not on the list
    "cd /tmp && ls",               # cd outside the folder
    "grep -r x ~",                 # the home dir
    "python3 -c 'print(1)'",       # code the guard cannot read
    "echo $(touch x)",             # a command substitution that writes
    "/bin/ls",                     # a path, not the bare name
    "",                            # nothing to read
])
def test_anything_else_is_asked(command):
    assert cli_asks("Bash", {"command": command}, "default", CWD) is True


def test_other_tools_keep_their_rules():
    assert cli_asks("Read", {"file_path": "src/a.py"}, "default", CWD) is False
    assert cli_asks("Read", {"file_path": "/etc/passwd"}, "default", CWD) is True
    assert cli_asks("Edit", {"file_path": "src/a.py"}, "acceptEdits", CWD) is False
    assert cli_asks("Edit", {"file_path": "src/a.py"}, "default", CWD) is True
    assert cli_asks("Bash", {"command": "rm -rf /"}, "bypassPermissions", CWD) is False
    assert cli_asks("Bash", {"command": 42}, "default", CWD) is True
