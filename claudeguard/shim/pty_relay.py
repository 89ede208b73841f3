"""Interactive sessions through a pseudo-terminal: the CLI draws on our pty, we copy its bytes to
the real terminal and the keys back, watch its screen, and route blocking dialogs nobody answers
to the approval channel. ``PtySession`` puts the rooms together: the child-process base
(``child``), the leader program (``leader``), the terminal relay (``terminal``), the screen
watcher (``screen_watch``), the dialog router (``dialogs.router``) and, detached, the session's
end (``detached``).

Two modes, chosen by whether our stdin is a terminal:
- attached: our terminal goes raw and every byte passes unchanged both ways (colours, alternate
  screen, bracketed paste, mouse); the window size follows SIGWINCH; the terminal's modes are
  restored on any exit, and on a stop (Ctrl-Z / ``fg``).
- detached (cron, CI, a detached shell): claudeguard's own pty (LINES x COLUMNS, default 50 x
  160), stdin (if any) is typed into it, every dialog goes to the channel at once, and when the
  CLI sits idle at an empty prompt with nothing more to read, the session is ended with Ctrl-C
  twice. The raw stream goes to stdout only if stdout is a terminal; otherwise the last screen
  is printed as text at the end. ``screen.json`` has the screen's last lines all along.

Process layout: a tiny *leader* (``python -I -S leader.py``) owns the pty's session and runs the
CLI in its own process group as the pty's foreground group, like a shell would. Without it the
CLI would be a session leader in an orphaned process group, where the kernel discards SIGTSTP:
its Ctrl-Z would print "suspended" and never stop. With it, a stopped CLI stops the leader
(SIGSTOP), we see that, give the terminal back and stop ourselves; on SIGCONT the chain resumes.
The leader and the CLI both have a parent-death signal, so killing claudeguard never leaves the
CLI running. Our signals are taken by the base's signal thread and handled in the main loop; the
CLI is in another session, so nothing reaches it unless we forward it.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from claudeguard.config.schema import APPROVAL_TIMEOUT_S, IDLE_BEFORE_CHANNEL_S
from claudeguard.shim.child import ChildProcess
from claudeguard.shim.detached import DetachedExit
from claudeguard.shim.dialogs.router import DialogRouter, RouteSettings
from claudeguard.shim.screen import Screen
from claudeguard.shim.screen_watch import ScreenWatcher
from claudeguard.shim.terminal import DETACHED_SIZE, TerminalRelay, env_size, get_size, plug_std_fds

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.config.load import Config

LEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "leader.py")  # the pty's session leader
START_TIMEOUT_S = 15.0


@dataclass
class RelaySettings:
    session_id: str
    session_dir: str | None
    cwd: str
    idle_before_channel: float
    timeout: float = APPROVAL_TIMEOUT_S
    on_timeout: str = "deny"
    notify: list[str] | None = None
    version: str | None = None  # of the real CLI; else read off its banner
    prompt_given: bool = False  # the session was started with a task of its own (detached exit)
    detached_size: tuple[int, int] = field(default_factory=lambda: DETACHED_SIZE)
    proof_of_life: bool = False  # end the session at a permission dialog if no hook ever fired (gate/proof.py)


def relay_settings(cfg: Config, *, session_id: str, session_dir: str | None, cwd: str, real_cli: str,
                   prompt_given: bool, proof_of_life: bool = False) -> RelaySettings:
    """Settings from the loaded config: ``idle_before_channel`` is 0 without a terminal."""
    from claudeguard.plan.cli_version import cli_version  # its package.json, or the cache of its own answer

    approval = cfg.approval(interactive=os.isatty(0))
    return RelaySettings(
        session_id=session_id, session_dir=session_dir, cwd=cwd,
        idle_before_channel=approval["idle_before_channel"], timeout=approval["timeout"],
        on_timeout=approval["on_timeout"], notify=approval["notify"] or None, version=cli_version(real_cli),
        prompt_given=prompt_given, detached_size=env_size(), proof_of_life=proof_of_life,
    )


def _ttyname(fd: int) -> str | None:
    try:
        return os.ttyname(fd)
    except OSError:
        return None


def _take_tty() -> None:
    """In the leader, after the shared child set-up and setsid (start_new_session): the pty
    becomes its controlling terminal."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtySession(ChildProcess):
    """One interactive CLI run through a pty (see ``child.ChildProcess`` for the shape)."""

    def __init__(self, argv: list[str], env: dict[str, str], settings: RelaySettings, *,
                 channel: Any = None) -> None:  # the channel package, or a test's stand-in
        plug_std_fds()  # first: before any fd of ours can land on 0, 1 or 2
        super().__init__(argv, env)  # on_output stays unused: no stream-json in a pty
        self.settings = settings
        self.attached = os.isatty(0)
        self.router = DialogRouter(RouteSettings(
            session_id=settings.session_id, cwd=settings.cwd, idle_before_channel=settings.idle_before_channel,
            timeout=settings.timeout, on_timeout=settings.on_timeout, notify=settings.notify,
            session_dir=settings.session_dir, attached=self.attached, tty=_ttyname(0) if self.attached else None),
            channel=channel)
        self.screen = Screen(*settings.detached_size)
        self.watcher = ScreenWatcher(self.screen, self.router, session_dir=settings.session_dir,
                                     version=settings.version, attached=self.attached)
        self.term = TerminalRelay(self.attached, self.attached or os.isatty(1), self.watcher.output, self._keypress)
        self.detached = None if self.attached else DetachedExit(settings.prompt_given, self._type, self.send)
        self.leader: int | None = None
        self._queue: list[int] = []  # signals taken by the signal thread, for the main loop
        self._alive = not settings.proof_of_life  # a hook of the guard's fired in this session
        self._lock = threading.Lock()
        self._suspended = False

    @property
    def monitor(self) -> Any:
        """The watchdog's Monitor (or None): activity, "a dialog is on screen", the tail."""
        return self.watcher.monitor

    @monitor.setter
    def monitor(self, monitor: Any) -> None:
        self.watcher.monitor = monitor

    # -- start -------------------------------------------------------------------------------

    def start(self) -> int:
        rows_cols = (get_size(0) or get_size(1)) if self.attached else None
        rows, cols = rows_cols or self.settings.detached_size
        self.screen.resize(rows, cols)
        slave = self.term.open(rows, cols)
        status_r, status_w = os.pipe()
        try:
            self.leader = self._spawn(
                [sys.executable, "-I", "-S", LEADER, str(status_w), *self.argv], "the pty session", then=_take_tty,
                fds={0: slave, 1: slave, 2: slave}, keep=(status_w,), new_session=True,
            )
        except BaseException:
            self.term.leave_raw()
            for fd in (slave, status_r, status_w):
                os.close(fd)
            self.term.close_master()
            raise
        os.close(slave)
        os.close(status_w)
        try:
            report = self._read_status(status_r)
        finally:
            os.close(status_r)
        if not report.startswith("pid "):
            if report == "error timeout":
                os.kill(self.leader, signal.SIGKILL)
            self._reap_blocking()
            from claudeguard.errors import GuardError

            code = report.partition(" ")[2]
            reason = os.strerror(int(code)) if code.isdigit() else "the session leader failed"
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            self.term.leave_raw()
            self.term.close_master()
            raise GuardError(f"cannot run {self.argv[0]}: {reason}")
        self.cli_pid = self.watcher.cli_pid = int(report.split()[1])
        os.set_blocking(self.term.master, False)
        self._watch_signals("pty-signals")
        return self.cli_pid

    def _read_status(self, fd: int) -> str:
        data = b""
        end = time.monotonic() + START_TIMEOUT_S
        while not data.endswith(b"\n"):
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return "error timeout"
            chunk = os.read(fd, 64)
            if not chunk:
                break
            data += chunk
        return data.decode(errors="replace").strip() or "error"

    def _reap_blocking(self) -> None:
        if self.leader is None:
            return
        try:
            os.waitpid(self.leader, 0)
        except ChildProcessError:
            pass

    # -- signals -----------------------------------------------------------------------------

    def _on_signal(self, info: Any) -> bool:
        with self._lock:
            self._queue.append(info.si_signo)
        return not self._wake()  # handled in the main loop (_handle_signals)

    def _handle_signals(self) -> None:
        try:
            os.read(self._wake_r, 4096)
        except BlockingIOError:
            pass
        with self._lock:
            signals, self._queue = self._queue, []
        for sig in signals:
            self._note_ending(sig)
            if sig == signal.SIGCHLD:
                self._reap()
            elif sig == signal.SIGWINCH:
                self._resize()
            elif sig == signal.SIGCONT:
                self._resume()
            elif sig in (signal.SIGTSTP, signal.SIGHUP):
                self._kill_group(sig)  # what the terminal would send to its foreground group
            else:
                self.send(sig)

    def _kill_group(self, sig: int) -> None:
        if self.cli_pid is not None and self._status is None:
            try:
                os.killpg(self.cli_pid, sig)
            except (ProcessLookupError, PermissionError):
                self.send(sig)

    def _reap(self) -> None:
        assert self.leader is not None
        while self._status is None:
            try:
                pid, status = os.waitpid(self.leader, os.WNOHANG | os.WUNTRACED | os.WCONTINUED)
            except ChildProcessError:
                self._status = 0
                return
            if pid == 0:
                return
            if os.WIFSTOPPED(status):
                self._suspend()
            elif not os.WIFCONTINUED(status):
                self._status = status

    def _suspend(self) -> None:
        """The CLI stopped (Ctrl-Z): show what it printed, give the terminal back, stop like a
        job; SIGCONT (fg) brings us back in ``_resume``."""
        self.term.drain()
        self.term.leave_raw()
        self._suspended = True
        os.kill(os.getpid(), signal.SIGSTOP)

    def _resume(self) -> None:
        if self._suspended:
            self._suspended = False
            if self.attached:
                self.term.enter_raw()
                self._resize()
            if self.leader is not None:
                try:
                    os.kill(self.leader, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        self._kill_group(signal.SIGCONT)

    def _resize(self) -> None:
        size = self.term.resize()
        if size is not None:
            self.screen.resize(*size)

    # -- run ---------------------------------------------------------------------------------

    def relay(self) -> int:
        """Copy bytes both ways until the CLI exits; return its exit code."""
        term = self.term
        try:
            while self._status is None:
                rlist = [self._wake_r, *term.read_fds(), *self.router.fds()]
                ready, writable, _ = select.select(rlist, term.write_fds(), [], self._timeout())
                if self._wake_r in ready:
                    self._handle_signals()
                if term.master >= 0 and term.master in ready:
                    term.from_child()
                if term.stdin_open and 0 in ready:
                    term.from_stdin()
                if writable:
                    term.flush()
                self._tick()
            term.drain()
            self._tick(final=True)
        finally:
            term.restore(self.screen.reset_sequence())
        if not term.show_raw:
            term.print_text(self.watcher.final_text())
        return self.exit_code()

    def _keypress(self, data: bytes) -> None:
        """A person typed at the terminal: they win over the channel and the detached exit."""
        self.router.keyboard(data)
        if self.detached is not None:
            self.detached.idle_since = None
        self.watcher.keypress()

    def _type(self, keys: bytes) -> None:
        if self.detached is not None:
            self.detached.idle_since = None
        self.term.type(keys)

    def _timeout(self) -> float | None:
        times = self.watcher.wakeups()
        wake = self.router.next_wakeup()
        if wake is not None:
            times.append(wake)
        if self.detached is not None:
            times += self.detached.wakeups(self.watcher.busy_seen)
        if not times:
            return None
        return max(0.0, min(times) - time.monotonic())

    def _tick(self, final: bool = False) -> None:
        now = time.monotonic()
        exiting = self.detached is not None and self.detached.started is not None
        self.watcher.read_if_due(now, final=final, exiting=exiting)
        if not final and not self._alive:
            self._proof_of_life()
        if not final:
            keys = self.router.step()
            if keys:
                self._type(keys.encode())
        self.watcher.publish(now, final)
        if not final and self.detached is not None:
            idle = (self.watcher.at_prompt and self.router.dialog is None and self.router.request_id is None
                    and not self.term.stdin_open and not self.term.to_child)
            self.detached.step(now, idle=idle, busy_seen=self.watcher.busy_seen)

    def _proof_of_life(self) -> None:
        """At the first permission dialog: a hook of the guard's fired by then (UserPromptSubmit
        comes before the model's first answer), or the hooks are not in this session and it
        ends before the dialog can be answered (gate/proof.py)."""
        dialog = self.router.dialog
        directory = self.settings.session_dir
        if dialog is None or dialog.kind != "permission" or directory is None:
            return
        from claudeguard.gate.proof import NO_SIGN, end_session, hooks_seen

        self._alive = True
        if not hooks_seen(directory):
            end_session(directory, NO_SIGN.format(what=f"a call ({dialog.title})"))
            self.send(signal.SIGTERM)

    # -- end ---------------------------------------------------------------------------------

    def close(self) -> None:
        self.router.close()
        self.term.restore(self.screen.reset_sequence())
        if self._status is None and self.leader is not None:
            self.send(signal.SIGTERM)
        self.term.close_master()
        super().close()


def main(argv: list[str] | None = None) -> int:
    """``python -m claudeguard.shim.pty_relay [--idle S] [--session-dir D] -- PROGRAM ARGS``: run any
    program through the relay with the dialog router on (a debugging aid and the tests' driver)."""
    import argparse
    import secrets

    parser = argparse.ArgumentParser(prog="python -m claudeguard.shim.pty_relay")
    parser.add_argument("--idle", type=float, default=None,
                        help="idle_before_channel (default: 30 with a terminal, else 0)")
    parser.add_argument("--timeout", type=float, default=APPROVAL_TIMEOUT_S)
    parser.add_argument("--on-timeout", default="deny", choices=("deny", "allow"))
    parser.add_argument("--session-id", default=None)
    parser.add_argument("--session-dir", default=None)
    parser.add_argument("--version", default=None, help="the CLI version whose dialog table to use")
    parser.add_argument("--prompt-given", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    idle = args.idle if args.idle is not None else (IDLE_BEFORE_CHANNEL_S if os.isatty(0) else 0.0)
    settings = RelaySettings(
        session_id=args.session_id or secrets.token_hex(8), session_dir=args.session_dir, cwd=os.getcwd(),
        idle_before_channel=idle, timeout=args.timeout, on_timeout=args.on_timeout, version=args.version,
        prompt_given=args.prompt_given, detached_size=env_size(),
    )
    from claudeguard.errors import GuardError

    session = PtySession(command, dict(os.environ), settings)
    try:
        session.start()
    except GuardError as exc:
        print(f"claudeguard: {exc}", file=sys.stderr)
        return 127
    try:
        return session.relay()
    finally:
        session.close()


if __name__ == "__main__":
    sys.exit(main())
