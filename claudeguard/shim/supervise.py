"""Run the real CLI as our child through pipes and stay out of its way.

stdin is inherited (EOF reaches the child as it would), stderr too; stdout is relayed byte for
byte through a pipe when it is not a terminal, so the watchdog can read the stream-json flow as
it passes (write first, then look). When stdout is a terminal the child gets the terminal itself.
A session whose host answers the CLI's prompts over stdio (``host_input``) gets its stdin through
a socket pair instead, and its output goes to the host in whole lines through
``shim/host_prompt.py``, which stands between the two.

Signals (``child.ChildProcess``): the signal thread tells a signal sent to us alone (``kill PID``:
forwarded to the child) from one the terminal sent to the whole foreground group (the child
already has it). Tools the CLI leaves running when a signal ends it are stopped after it exits
(``leftovers``).
"""

from __future__ import annotations

import os
import select

from claudeguard.shim.child import SI_USER, ChildProcess, write_all

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import signal
    import socket
    import threading
    from typing import Any

    from claudeguard.shim.host_prompt import HostPrompts
else:  # the same functions and constants without the enum wrappers (`signal` imports enum: ~4 ms before the CLI starts)
    import _signal as signal


class Supervisor(ChildProcess):
    def __init__(self, argv: list[str], env: dict[str, str], *, tap_stdout: bool, host_input: bool = False) -> None:
        super().__init__(argv, env)
        self.host_input = host_input
        self.tap_stdout = (tap_stdout and not os.isatty(1)) or host_input
        self.cli_in: socket.socket | None = None  # our end of the CLI's stdin (host_input)
        self.host: HostPrompts | None = None  # the host's relay (set before relay()): the CLI's output goes through it
        self.child_pid: int | None = None
        self.out_fd: int | None = None  # the read end of the child's stdout pipe (tap_stdout)
        self._exited: threading.Event | None = None  # made at start, after the CLI's: threading costs ~4 ms

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> int:
        fds = {}
        if self.tap_stdout:
            self.out_fd, write_end = os.pipe()
            fds[1] = write_end
        if self.host_input:
            import socket  # a host session only: the pass-through and -p paths never load it

            # A socket, not a pipe: no process can reopen it through /proc/<cli>/fd/0 and write
            # an answer to the CLI's prompt (shim/host_prompt.py)
            self.cli_in, theirs = socket.socketpair()
            fds[0] = os.dup(theirs.fileno())
            theirs.close()
        try:
            self.child_pid = self._spawn(self.argv, self.argv[0], fds=fds, subreaper=True)
        except BaseException:
            for fd in (self.out_fd, *fds.values()):
                if fd is not None:
                    os.close(fd)
            self.out_fd = None
            if self.cli_in is not None:
                self.cli_in.close()
                self.cli_in = None
            raise
        for fd in fds.values():
            os.close(fd)
        import threading

        self._exited = threading.Event()
        self.cli_pid = self.child_pid
        self._watch_signals("signals")
        return self.child_pid

    def _on_signal(self, info: Any) -> bool:
        assert self.child_pid is not None
        sig = info.si_signo
        if sig == signal.SIGCHLD:
            if self._reap():
                self._wake()
                return True
            return False
        from_user = info.si_code == SI_USER and info.si_pid != self.child_pid
        self._note_ending(sig)
        if sig == signal.SIGTSTP:
            if from_user:
                self.send(signal.SIGTSTP)
            os.kill(os.getpid(), signal.SIGSTOP)  # stop like an ordinary job; SIGCONT resumes us
            return False
        if from_user:
            self.send(sig)
        return False

    def _reap(self) -> bool:
        assert self.child_pid is not None and self._exited is not None
        try:
            pid, status = os.waitpid(self.child_pid, os.WNOHANG)
        except ChildProcessError:
            self._exited.set()  # reaped elsewhere: nothing left to wait for
            return True
        if pid == 0:
            return False
        self._status = status
        self._exited.set()
        return True

    # -- run -----------------------------------------------------------------------------------
    def relay(self) -> int:
        """Copy the child's stdout to ours until it exits; return its exit code (128+N for a signal)."""
        assert self.child_pid is not None and self._exited is not None
        out = self.out_fd
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
                    stdout_ok = self._write_out(data)
                    if not stdout_ok:
                        # Our reader went away: close the pipe so the child sees EPIPE as it
                        # would have without us, and go on waiting for it to exit.
                        self._close_out()
                        out = None
                        continue
                if self.on_output is not None:
                    self.on_output(data)
            if self._wake_r in ready:
                break
        self._exited.wait()
        if out is not None:
            self._drain(out, stdout_ok)
        if self.host is not None:
            self.host.flush()
            self.host.end()
        return self.exit_code()

    def _write_out(self, data: bytes) -> bool:
        return self.host.out(data) if self.host is not None else write_all(1, data)

    def _close_out(self) -> None:
        fd, self.out_fd = self.out_fd, None
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        super().close()
        self._close_out()
        if self.host is not None:
            self.host.end()
        if self.cli_in is not None:
            self.cli_in.close()

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
                stdout_ok = self._write_out(data)
            if self.on_output is not None:
                self.on_output(data)
