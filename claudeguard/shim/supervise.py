"""Run the real CLI as our child and stay out of its way.

stdin is inherited (EOF reaches the child as it would), stderr too; stdout is relayed byte for
byte through a pipe when it is not a terminal, so the watchdog can read the stream-json flow as
it passes (write first, then look). When stdout is a terminal the child gets the terminal itself.

Signals: the ones a user or a script sends us are blocked in every thread and taken by one
thread with ``sigwaitinfo``, which tells a signal sent to us alone (``kill PID``: forwarded to
the child) from one the terminal sent to the whole foreground group (the child already has it).
The child gets a parent-death signal, so killing claudeguard never leaves it orphaned; tools
the CLI leaves running when a signal ends it are stopped after it exits (``leftovers``).
"""

from __future__ import annotations

import errno
import os
import select
import signal
import subprocess
import sys
import threading
from typing import Callable

from claudeguard.shim.leftovers import ENDING_SIGNALS, Leftovers

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGWINCH, signal.SIGTSTP, signal.SIGCONT, signal.SIGUSR1, signal.SIGUSR2)
SI_USER = 0  # si_code of kill(2); the tty driver sends with SI_KERNEL (0x80)
PR_SET_PDEATHSIG = 1


def child_setup(parent_pid: int, then: Callable[[], None] | None = None) -> Callable[[], None]:
    """The ``preexec_fn`` of every child the shim starts (here and in the pty relay); ``then``
    runs last, in the child. Loads libc before the fork: nothing may be imported between fork
    and exec."""
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            prctl = None

    def setup() -> None:
        # Runs in the child between fork and exec: unblock what the parent blocked, ask the kernel
        # to SIGTERM us if claudeguard dies, and catch a parent that died before we asked.
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(129)
        if then is not None:
            then()

    return setup


class Supervisor:
    def __init__(self, argv: list[str], env: dict[str, str], *, tap_stdout: bool) -> None:
        self.argv = argv
        self.env = env
        self.tap_stdout = tap_stdout and not os.isatty(1)
        self.child: subprocess.Popen | None = None
        self.on_output: Callable[[bytes], None] | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._exited = threading.Event()
        self._status: int | None = None
        self.killed_by_watchdog = False
        self.leftovers = Leftovers()

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> int:
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED + (signal.SIGCHLD,))
        try:
            self.child = subprocess.Popen(
                self.argv,
                env=self.env,
                stdout=subprocess.PIPE if self.tap_stdout else None,
                preexec_fn=child_setup(os.getpid()),
                close_fds=True,
            )
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            from claudeguard.errors import GuardError

            raise GuardError(f"cannot start {self.argv[0]}: {exc.strerror}") from None
        threading.Thread(target=self._signal_loop, name="signals", daemon=True).start()
        return self.child.pid

    def _signal_loop(self) -> None:
        assert self.child is not None
        wanted = set(FORWARDED) | {signal.SIGCHLD}
        while True:
            info = signal.sigwaitinfo(wanted)
            sig = info.si_signo
            if sig == signal.SIGCHLD:
                if self._reap():
                    os.write(self._wake_w, b"x")
                    return
                continue
            from_user = info.si_code == SI_USER and info.si_pid != self.child.pid
            if sig in ENDING_SIGNALS:
                self.leftovers.note(self.child.pid)  # before the CLI can die and orphan its tools
            if sig == signal.SIGTSTP:
                if from_user:
                    self._send(signal.SIGTSTP)
                os.kill(os.getpid(), signal.SIGSTOP)  # stop like an ordinary job; SIGCONT resumes us
                continue
            if from_user:
                self._send(sig)

    def _send(self, sig: int) -> None:
        if self.child is not None and self._status is None:
            try:
                os.kill(self.child.pid, sig)
            except ProcessLookupError:
                pass

    def _reap(self) -> bool:
        assert self.child is not None
        try:
            pid, status = os.waitpid(self.child.pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False
        self._status = status
        self.child.returncode = os.waitstatus_to_exitcode(status)  # so Popen never waits again
        self._exited.set()
        return True

    # -- run -----------------------------------------------------------------------------------
    def relay(self) -> int:
        """Copy the child's stdout to ours until it exits; return its exit code (128+N for a signal)."""
        assert self.child is not None
        out = self.child.stdout.fileno() if self.child.stdout else None
        stdout_ok = True
        while True:
            fds = [self._wake_r] + ([out] if out is not None else [])
            try:
                ready, _, _ = select.select(fds, [], [])
            except InterruptedError:
                continue
            if out is not None and out in ready:
                data = os.read(out, 65536)
                if not data:
                    out = None
                    continue
                if stdout_ok:
                    stdout_ok = write_all(1, data)
                    if not stdout_ok:
                        # Our reader went away: close the pipe so the child sees EPIPE as it
                        # would have without us, and go on waiting for it to exit.
                        self.child.stdout.close()
                        out = None
                        continue
                if self.on_output is not None:
                    self.on_output(data)
            if self._wake_r in ready:
                break
        self._exited.wait()
        if out is not None:
            self._drain(out, stdout_ok)
        return self.exit_code()

    def _drain(self, fd: int, stdout_ok: bool) -> None:
        # After the child exited, take what is left in the pipe without waiting for grandchildren
        # that may still hold its write end.
        os.set_blocking(fd, False)
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            if not data:
                return
            if stdout_ok:
                stdout_ok = write_all(1, data)
            if self.on_output is not None:
                self.on_output(data)

    def exit_code(self) -> int:
        status = self._status if self._status is not None else 0
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.WEXITSTATUS(status)

    def close(self) -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass


def write_all(fd: int, data: bytes) -> bool:
    """Write all of ``data`` to ``fd`` (waiting when it is non-blocking and full); False when the
    reader went away (EPIPE, EBADF; EIO from a pty whose other end closed)."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        except OSError as exc:
            if exc.errno in (errno.EPIPE, errno.EBADF, errno.EIO):
                return False
            raise
        view = view[n:]
    return True

