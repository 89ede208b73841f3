"""Run a CLI (the real Claude CLI, or claudeguard in front of it) to completion, for tests.

The child gets its own process group, so on a timeout the whole group (the CLI and the tools it
started) is killed by that group id, never by name; after a normal exit any stragglers left in
the group are killed too.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Sequence

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from pathlib import Path


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_claude(argv: Sequence[str | Path], env: dict[str, str], cwd: str | Path, timeout: float = 60,
               input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` and return its CompletedProcess (text stdout/stderr).

    On timeout the process group is killed and ``subprocess.TimeoutExpired`` is raised with the
    output collected so far (``.output`` / ``.stderr``). stdin is ``input`` or /dev/null, so a
    CLI never waits on the test's terminal.
    """
    args = [str(a) for a in argv]
    # Not procs.capture: the run's input, and its process group killed whole on a timeout.
    proc = subprocess.Popen(args, env=env, cwd=str(cwd), text=True, start_new_session=True,
                            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(args, timeout, output=out, stderr=err) from None
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise
    _kill_group(proc.pid)  # background children the CLI left in its group
    return subprocess.CompletedProcess(args, proc.returncode, out, err)
