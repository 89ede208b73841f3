"""Leftovers: what a CLI leaves running when a signal ends it is stopped; nothing else is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from claudeguard.shim import leftovers
from claudeguard.shim.leftovers import Leftovers

# A stand-in CLI: starts a "tool" (which may ignore SIGTERM), prints its pid, then the tool's own
# lines, then waits. The tool's lines are relayed, not written to the same pipe: under load the
# tool's "ready" came before the CLI's pid.
CLI = """
import subprocess, sys
tool = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, text=True)
print(tool.pid, flush=True)
for line in tool.stdout:
    print(line, end="", flush=True)
sys.stdin.read()
"""
TOOL = "import time\nwhile True: time.sleep(1)"
STUBBORN = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
            "while True: time.sleep(1)")


@pytest.fixture
def cli():
    started: list[subprocess.Popen] = []
    tools: list[int] = []

    def start(tool: str = TOOL) -> tuple[subprocess.Popen, int]:
        proc = subprocess.Popen([sys.executable, "-c", CLI, tool], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        started.append(proc)
        tools.append(int(proc.stdout.readline()))
        return proc, tools[-1]

    yield start
    for proc in started:
        proc.kill()
        proc.wait()
    for pid in tools:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _end(proc: subprocess.Popen) -> None:
    proc.kill()  # the CLI dies; its tool is orphaned, as 2.1.197's Bash tool is after SIGTERM
    proc.wait()


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_noted_tools_are_stopped_after_the_cli_exits(cli, capsys):
    proc, tool = cli()
    left = Leftovers()
    left.note(proc.pid)
    _end(proc)
    assert _running(tool)
    assert left.stop() == [tool]
    assert not _running(tool)
    assert capsys.readouterr().err == f"claudeguard: stopped 1 process(es) the CLI left running: {tool}\n"
    assert left.stop() == []  # once


def test_a_tool_that_ignores_sigterm_gets_sigkill(cli, monkeypatch):
    monkeypatch.setattr(leftovers, "GRACE_S", 0.5)
    proc, tool = cli(STUBBORN)
    assert proc.stdout.readline() == "ready\n"  # SIGTERM is ignored from here on
    left = Leftovers()
    left.note(proc.pid)
    _end(proc)
    assert left.stop() == [tool]
    assert not _running(tool)


def test_without_a_signal_nothing_is_stopped(cli):
    proc, tool = cli()
    left = Leftovers()
    _end(proc)
    assert left.stop() == []
    assert _running(tool)  # a session that ends on its own leaves what it started


def test_a_signal_long_before_the_exit_does_not_count(cli, monkeypatch):
    monkeypatch.setattr(leftovers, "ENDING_WINDOW_S", 0.0)
    proc, tool = cli()
    left = Leftovers()
    left.note(proc.pid)  # e.g. SIGINT that only interrupted a turn of an interactive session
    _end(proc)
    assert left.stop() == []
    assert _running(tool)


def test_noting_a_cli_that_is_gone_is_harmless(cli):
    proc, _ = cli()
    _end(proc)
    left = Leftovers()
    left.note(proc.pid)
    assert left.stop() == []
