"""A notify command started by the session's supervisor (whose threads block the forwarded
signals) still gets an empty signal mask, so it can be stopped like any other process."""

from __future__ import annotations

import signal
import time

from claudeguard.channel.model import Request
from claudeguard.channel.notify import run_notify
from tests.shim_helpers import wait_until


def test_notify_command_starts_with_an_empty_signal_mask(tmp_path):
    out = tmp_path / "mask"
    request = Request(id="abcdefabcdefabcd", session_id="s", agent_type=None, agent_id=None, tool="Bash", input={},
                      summary="Bash: x", cwd="/tmp", created=time.time(), deadline=time.time() + 60, pid=1)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        pid = run_notify(["sh", "-c", f"grep SigBlk /proc/self/status > {out}"], request)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    assert pid is not None
    wait_until(lambda: out.exists() and out.read_text().strip(), 60, "the notify command's output")
    assert int(out.read_text().split()[1], 16) == 0
