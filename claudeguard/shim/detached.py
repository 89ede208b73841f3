"""Ending a detached pty session (no terminal: nobody can type): once the CLI has done its task (or
had none) and sits at an empty prompt with no dialog, leave it like a user does (Ctrl-C twice);
SIGTERM if it lingers, SIGKILL if that is not enough.
"""

from __future__ import annotations

import signal
from typing import Callable

IDLE_EXIT_S = 2.0  # idle at the prompt this long with nothing to type -> end the session
IDLE_UNSEEN_EXIT_S = 30.0  # ... when the task given was never seen running
EXIT_STEP_S = 0.4
EXIT_GIVE_UP_S = 8.0


class DetachedExit:
    """``step`` on every wake-up of the relay with whether the session is idle; it types Ctrl-C
    through ``type_keys`` and signals the CLI through ``send`` when the time comes."""

    def __init__(self, prompt_given: bool, type_keys: Callable[[bytes], None], send: Callable[[int], None]) -> None:
        self.prompt_given = prompt_given  # the session was started with a task of its own
        self._type = type_keys
        self._send = send
        self.idle_since: float | None = None
        self.started: float | None = None  # when the exit began
        self._keys_sent = 0

    def _wait(self, busy_seen: bool) -> float:
        # With a task, wait until it was seen running; a turn too quick to be seen between two
        # screen reads still ends after IDLE_UNSEEN_EXIT_S at the empty prompt.
        return IDLE_EXIT_S if busy_seen or not self.prompt_given else IDLE_UNSEEN_EXIT_S

    def wakeups(self, busy_seen: bool) -> list[float]:
        times: list[float] = []
        if self.idle_since is not None:
            times.append(self.idle_since + self._wait(busy_seen))
        if self.started is not None and self._keys_sent < 4:
            times.append(self.started + (0.0, EXIT_STEP_S, EXIT_GIVE_UP_S, 2 * EXIT_GIVE_UP_S)[self._keys_sent])
        return times

    def step(self, now: float, *, idle: bool, busy_seen: bool) -> None:
        if self.started is not None:
            self._steps(now)
            return
        if not idle:
            self.idle_since = None
            return
        if self.idle_since is None:
            self.idle_since = now
        elif now - self.idle_since >= self._wait(busy_seen):
            self.started, self.idle_since = now, None
            self._steps(now)

    def _steps(self, now: float) -> None:
        assert self.started is not None
        elapsed = now - self.started
        if self._keys_sent < 2 and elapsed >= self._keys_sent * EXIT_STEP_S:
            self._keys_sent += 1
            self._type(b"\x03")
        elif self._keys_sent == 2 and elapsed >= EXIT_GIVE_UP_S:
            self._send(signal.SIGTERM)
            self._keys_sent = 3
        elif self._keys_sent == 3 and elapsed >= 2 * EXIT_GIVE_UP_S:
            self._send(signal.SIGKILL)
            self._keys_sent = 4
