"""Interactive sessions through a pseudo-terminal: the CLI draws on our pty, we copy its bytes to
the real terminal and the keys back, watch its screen, and route blocking dialogs nobody answers
to the approval channel.

Two modes, chosen by whether our stdin is a terminal:
- attached: our terminal goes raw and every byte passes unchanged both ways (colours, alternate
  screen, bracketed paste, mouse); the window size follows SIGWINCH; the terminal's modes are
  restored on any exit, and on a stop (Ctrl-Z / ``fg``).
- detached (cron, CI, a detached shell): claudeguard's own pty (LINES x COLUMNS, default 50 x
  160), stdin (if any) is typed into it, every dialog goes to the channel at once, and when the
  CLI sits idle at an empty prompt with nothing more to read, the session is ended with Ctrl-C
  twice. The raw stream goes to stdout only if stdout is a terminal; otherwise the last screen
  is printed as text at the end. ``screen.json`` has the screen's last lines all along.

Process layout: a tiny *leader* (``python -I -S leader.py``, the ``leader`` module) owns the pty's session and
runs the CLI in its own process group as the pty's foreground group, like a shell would. Without
it the CLI would be a session leader in an orphaned process group, where the kernel discards
SIGTSTP: its Ctrl-Z would print "suspended" and never stop. With it, a stopped CLI stops the
leader (SIGSTOP), we see that, give the terminal back and stop ourselves; on SIGCONT the chain
resumes. The leader and the CLI both have a parent-death signal, so killing claudeguard never
leaves the CLI running. Our signals are taken by one thread with ``sigwaitinfo`` (as in
``supervise``) and handled in the main loop; the CLI is in another session, so nothing reaches it
unless we forward it.
"""

from __future__ import annotations

import os
import re
import select
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

from claudeguard.shim.dialogs.parse import BUSY, at_idle_prompt, find_dialog
from claudeguard.shim.dialogs.router import DialogRouter, RouteSettings
from claudeguard.shim.dialogs.tables import banner_version, patterns_for
from claudeguard.shim.screen import DIALOG_FILE, Screen, write_screen_state
from claudeguard.shim.child import ChildProcess, write_all
DETACHED_SIZE = (50, 160)
QUIET_S = 0.03  # read the screen once output pauses this long ...
RECHECK_MAX_S = 0.25  # ... or at least this often while it flows
TAIL_EVERY_S = 1.0
TAIL_LINES = 20
IDLE_EXIT_S = 2.0  # detached: idle at the prompt this long with nothing to type -> end the session
IDLE_UNSEEN_EXIT_S = 30.0  # ... when the task given was never seen running
EXIT_STEP_S = 0.4
EXIT_GIVE_UP_S = 8.0
START_TIMEOUT_S = 15.0

LEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "leader.py")  # the pty's session leader

# Input that is not a key press: mouse and focus reports, and the terminal's answers to queries
# (device attributes, cursor position, mode reports, colour scheme, XTVERSION, OSC replies).
_NOT_KEYS = re.compile(
    rb"\x1b\[<\d+;\d+;\d+[Mm]|\x1b\[M[\s\S]{3}|\x1b\[[IO]|\x1b\[\?[\d;]*[cu]|\x1b\[>[\d;]*c|\x1b\[\d+;\d+R"
    rb"|\x1b\[\?[\d;]*\$y|\x1b\[\?997;\d+n|\x1bP[^\x1b]*\x1b\\|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
)


def is_keypress(data: bytes) -> bool:
    """Did a person type this (as opposed to the terminal reporting focus, mouse or replies)?"""
    return bool(_NOT_KEYS.sub(b"", data))


@dataclass
class RelaySettings:
    session_id: str
    session_dir: str | None
    cwd: str
    idle_before_channel: float
    timeout: float = 600.0
    on_timeout: str = "deny"
    notify: list[str] | None = None
    version: str | None = None  # of the real CLI; else read off its banner
    prompt_given: bool = False  # the session was started with a task of its own (detached exit)
    detached_size: tuple[int, int] = field(default_factory=lambda: DETACHED_SIZE)


def relay_settings(cfg, *, session_id: str, session_dir: str | None, cwd: str, real_cli: str, prompt_given: bool) -> RelaySettings:  # type: ignore[no-untyped-def]
    """Settings from the loaded config: ``idle_before_channel`` is 0 without a terminal."""
    from claudeguard.shim.dialogs.tables import cli_version

    attached = os.isatty(0)
    return RelaySettings(
        session_id=session_id, session_dir=session_dir, cwd=cwd,
        idle_before_channel=float(cfg.get("approval.idle_before_channel") or 0) if attached else 0.0,
        timeout=float(cfg.get("approval.timeout") or 600), on_timeout=cfg.get("approval.on_timeout") or "deny",
        notify=cfg.get("approval.notify") or None, version=cli_version(real_cli), prompt_given=prompt_given,
        detached_size=_env_size(),
    )


def _env_size() -> tuple[int, int]:
    try:
        rows, cols = int(os.environ.get("LINES", "")), int(os.environ.get("COLUMNS", ""))
        if rows > 4 and cols > 20:
            return rows, cols
    except ValueError:
        pass
    return DETACHED_SIZE


def _get_size(fd: int) -> tuple[int, int] | None:
    import fcntl
    import struct
    import termios

    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    except OSError:
        return None
    return (rows, cols) if rows and cols else None


def _set_size(fd: int, rows: int, cols: int) -> None:
    import fcntl
    import struct
    import termios

    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    except OSError:
        pass


def _take_tty() -> None:
    """In the leader, after the shared child set-up and setsid (start_new_session): the pty
    becomes its controlling terminal."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _plug_std_fds() -> None:
    """Started with stdin/stdout/stderr closed (``<&-``): put /dev/null there, or the pty we
    open next would get fd 0 and be read as the keyboard."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)




class PtySession(ChildProcess):
    """One interactive CLI run through a pty (see ``child.ChildProcess`` for the shape)."""

    def __init__(self, argv: list[str], env: dict[str, str], settings: RelaySettings, *, channel=None) -> None:  # type: ignore[no-untyped-def]
        _plug_std_fds()  # first: before any fd of ours can land on 0, 1 or 2
        super().__init__(argv, env)  # on_output stays unused: no stream-json in a pty
        self.settings = settings
        self.attached = os.isatty(0)
        self.show_raw = self.attached or os.isatty(1)
        self.monitor = None  # a watchdog Monitor: activity and "a dialog is on screen"
        self.router = DialogRouter(RouteSettings(
            session_id=settings.session_id, cwd=settings.cwd, idle_before_channel=settings.idle_before_channel,
            timeout=settings.timeout, on_timeout=settings.on_timeout, notify=settings.notify), channel=channel)
        self.screen = Screen(*settings.detached_size)
        self.version = settings.version
        self.leader: int | None = None
        self._master = -1
        self._queue: list[int] = []
        self._lock = threading.Lock()
        self._saved_tc: list | None = None
        self._raw = False
        self._stdin_open = True
        self._stdout_ok = True
        self._to_child = bytearray()
        self._checked_version = -1
        self._last_output = 0.0
        self._last_check = 0.0
        self._tail_written = 0.0
        self._tail_version = -1
        self._activity_at = 0.0
        self._dialog_title: str | None = None
        self._busy_seen = False
        self._dialog_written: dict | None = None
        self._at_prompt = False
        self._last_lines: list[str] = []
        self._idle_since: float | None = None
        self._exit_started: float | None = None
        self._exit_keys_sent = 0
        self._suspended = False

    # -- start -------------------------------------------------------------------------------

    def start(self) -> int:
        rows_cols = (_get_size(0) or _get_size(1)) if self.attached else None
        rows, cols = rows_cols or self.settings.detached_size
        self.screen.resize(rows, cols)
        master, slave = os.openpty()
        self._master = master
        _set_size(slave, rows, cols)
        if self.attached:
            import termios

            try:
                termios.tcsetattr(slave, termios.TCSANOW, termios.tcgetattr(0))  # the user's erase key etc.
            except termios.error:
                pass
            self._enter_raw()  # before the CLI starts: no key typed meanwhile is cooked or echoed
        status_r, status_w = os.pipe()
        try:
            proc = self._spawn(
                [sys.executable, "-I", "-S", LEADER, str(status_w), *self.argv], "the pty session", then=_take_tty,
                stdin=slave, stdout=slave, stderr=slave, pass_fds=(status_w,), start_new_session=True,
            )
        except BaseException:
            self._leave_raw()
            for fd in (slave, status_r, status_w):
                os.close(fd)
            self._close_master()
            raise
        proc.returncode = 0  # we reap it ourselves (waitpid); keep Popen from ever waiting
        self.leader = proc.pid
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
            self._leave_raw()
            self._close_master()
            raise GuardError(f"cannot run {self.argv[0]}: {reason}")
        self.cli_pid = int(report.split()[1])
        os.set_blocking(master, False)
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

    # -- terminal ----------------------------------------------------------------------------

    def _enter_raw(self) -> None:
        import termios as t

        try:
            if self._saved_tc is None:
                self._saved_tc = t.tcgetattr(0)
            mode = t.tcgetattr(0)
            # cfmakeraw (tty.setraw flushes typed-ahead keys; TCSADRAIN keeps them for the CLI)
            mode[0] &= ~(t.BRKINT | t.ICRNL | t.INPCK | t.ISTRIP | t.IXON | t.IGNBRK | t.PARMRK | t.INLCR | t.IGNCR)
            mode[1] &= ~t.OPOST
            mode[2] = (mode[2] & ~(t.CSIZE | t.PARENB)) | t.CS8
            mode[3] &= ~(t.ECHO | t.ECHONL | t.ICANON | t.IEXTEN | t.ISIG)
            mode[6][t.VMIN] = 1
            mode[6][t.VTIME] = 0
            t.tcsetattr(0, t.TCSADRAIN, mode)
            self._raw = True
        except t.error:
            self._raw = False

    def _leave_raw(self) -> None:
        import termios

        if self._raw and self._saved_tc is not None:
            try:
                termios.tcsetattr(0, termios.TCSADRAIN, self._saved_tc)
            except termios.error:
                pass
        self._raw = False

    def _restore_terminal(self) -> None:
        """On the way out: undo modes the CLI left on (it may have died), then cooked mode."""
        if self.show_raw and self._stdout_ok:
            reset = self.screen.reset_sequence()
            if reset:
                self._stdout_ok = write_all(1, reset.encode())
        self._leave_raw()

    # -- signals -----------------------------------------------------------------------------

    def _on_signal(self, info) -> bool:  # type: ignore[no-untyped-def]
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
        self._drain_master()
        self._leave_raw()
        self._suspended = True
        os.kill(os.getpid(), signal.SIGSTOP)

    def _resume(self) -> None:
        if self._suspended:
            self._suspended = False
            if self.attached:
                self._enter_raw()
                self._resize()
            if self.leader is not None:
                try:
                    os.kill(self.leader, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        self._kill_group(signal.SIGCONT)

    def _resize(self) -> None:
        if not self.attached:
            return
        size = _get_size(0) or _get_size(1)
        if size is None:
            return
        _set_size(self._master, *size)  # the kernel sends SIGWINCH to the CLI
        self.screen.resize(*size)

    # -- run ---------------------------------------------------------------------------------

    def relay(self) -> int:
        """Copy bytes both ways until the CLI exits; return its exit code."""
        try:
            while self._status is None:
                rlist = [self._wake_r] + ([self._master] if self._master >= 0 else [])
                if self._stdin_open:
                    rlist.append(0)
                rlist += self.router.fds()
                wlist = [self._master] if self._to_child and self._master >= 0 else []
                ready, writable, _ = select.select(rlist, wlist, [], self._timeout())
                if self._wake_r in ready:
                    self._handle_signals()
                if self._master >= 0 and self._master in ready:
                    self._from_child()
                if self._stdin_open and 0 in ready:
                    self._from_stdin()
                if writable:
                    self._flush_to_child()
                self._tick()
            self._drain_master()
            self._tick(final=True)
        finally:
            self._restore_terminal()
        if not self.show_raw:
            self._print_screen()
        return self.exit_code()

    def _from_child(self) -> None:
        try:
            data = os.read(self._master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: every holder of the slave side closed it
            data = b""
        if not data:
            self._close_master()
            return
        self._output(data)

    def _output(self, data: bytes) -> None:
        if self.show_raw and self._stdout_ok:
            self._stdout_ok = write_all(1, data)
        self.screen.feed(data)  # after the write: the terminal never waits for the screen model
        now = time.monotonic()
        self._last_output = now
        if self.monitor is not None and now - self._activity_at >= 1.0:
            # Rate-limited; note that the CLI's spinner keeps drawing while a model stream is
            # silent, so screen output alone is no proof of progress.
            self._activity_at = now
            _call(self.monitor, "note_activity", "output")

    def _drain_master(self) -> None:
        while self._master >= 0:
            try:
                data = os.read(self._master, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._close_master()
                return
            self._output(data)

    def _close_master(self) -> None:
        if self._master >= 0:
            os.close(self._master)
            self._master = -1
        self._to_child.clear()

    def _from_stdin(self) -> None:
        try:
            data = os.read(0, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._stdin_open = False
            return
        self._to_child += data
        if is_keypress(data):
            self.router.keyboard()
            self._idle_since = None
            if self.monitor is not None:
                _call(self.monitor, "note_activity", "input")
        self._flush_to_child()

    def _flush_to_child(self) -> None:
        if self._master < 0:
            self._to_child.clear()
            return
        while self._to_child:
            try:
                n = os.write(self._master, self._to_child)
            except BlockingIOError:
                return
            except OSError:
                self._to_child.clear()
                return
            del self._to_child[:n]

    def _timeout(self) -> float | None:
        now = time.monotonic()
        times: list[float] = []
        if self.screen.version != self._checked_version:
            times.append(min(self._last_output + QUIET_S, self._last_check + RECHECK_MAX_S))
        wake = self.router.next_wakeup()
        if wake is not None:
            times.append(wake)
        if self.screen.version != self._tail_version and (self.settings.session_dir or self.monitor is not None):
            times.append(self._tail_written + TAIL_EVERY_S)
        if self._idle_since is not None:
            times.append(self._idle_since + (IDLE_EXIT_S if self._busy_seen or not self.settings.prompt_given
                                             else IDLE_UNSEEN_EXIT_S))
        if self._exit_started is not None and self._exit_keys_sent < 4:
            step = (0.0, EXIT_STEP_S, EXIT_GIVE_UP_S, 2 * EXIT_GIVE_UP_S)[self._exit_keys_sent]
            times.append(self._exit_started + step)
        if not times:
            return None
        return max(0.0, min(times) - now)

    def _tick(self, final: bool = False) -> None:
        now = time.monotonic()
        if self.screen.version != self._checked_version and (
                final or now - self._last_output >= QUIET_S or now - self._last_check >= RECHECK_MAX_S):
            self._read_screen(now)
        if not final:
            keys = self.router.step()
            if keys:
                self._to_child += keys.encode()
                self._idle_since = None
                self._flush_to_child()
        self._publish(now, final)
        if not final and not self.attached:
            self._detached_exit(now)

    def _read_screen(self, now: float) -> None:
        self._checked_version = self.screen.version
        self._last_check = now
        lines = self.screen.lines()
        if self._exit_started is None and any(line.strip() for line in lines):
            self._last_lines = lines  # what the session showed last (not the emptied exit screen)
        if self.version is None:
            self.version = banner_version(lines)
        self.router.observe(find_dialog(lines, patterns_for(self.version)))
        was_at_prompt = self._at_prompt
        self._at_prompt = at_idle_prompt(lines)
        if not self._at_prompt and any(BUSY.search(line) for line in lines):
            self._busy_seen = True
        if self.monitor is not None and self._at_prompt != was_at_prompt:
            # the watchdog's "idle" (waiting for its user: never a stall) starts and ends here
            _call(self.monitor, "note_activity", "at-prompt" if self._at_prompt else "busy")

    def _publish(self, now: float, final: bool) -> None:
        title = self.router.dialog.title if self.router.dialog else None
        if title != self._dialog_title:
            self._dialog_title = title
            if self.monitor is not None:
                _call(self.monitor, "set_screen_hint", f"a dialog is on screen: {title}" if title else None)
        if self.settings.session_dir:
            # dialog.json: the dialog part alone, rewritten only when it changes, for the
            # PermissionRequest hook that watches it (re-reading screen.json at every redraw would
            # be I/O the watchdog has to take for progress).
            dialog = dict(self.router.state(), exited=final)
            if dialog != self._dialog_written:
                self._dialog_written = dialog
                write_screen_state(self.settings.session_dir, dialog, name=DIALOG_FILE)
        due = self.screen.version != self._tail_version and now - self._tail_written >= TAIL_EVERY_S
        if not (self.router.changed or due or final):
            return
        self.router.changed = False
        self._tail_written = now
        self._tail_version = self.screen.version
        tail = self.screen.tail(TAIL_LINES) or [ln for ln in self._last_lines if ln.strip()][-TAIL_LINES:]
        if self.monitor is not None:
            _call(self.monitor, "set_screen_tail", tail)
        if self.settings.session_dir:
            state = self.router.state()
            state.update(tail=tail, updated=time.time(), version=self.version,
                         attached=self.attached, cli_pid=self.cli_pid, exited=final)
            write_screen_state(self.settings.session_dir, state)

    # -- detached: end the session when its work is done ---------------------------------------

    def _detached_exit(self, now: float) -> None:
        """Nobody can type: once the CLI has done its task (or had none) and sits at an empty
        prompt with no dialog, leave it like a user does (Ctrl-C twice); SIGTERM if it lingers."""
        if self._exit_started is not None:
            self._exit_steps(now)
            return
        idle = (self._at_prompt and self.router.dialog is None and self.router.request_id is None
                and not self._stdin_open and not self._to_child)
        if not idle:
            self._idle_since = None
            return
        # With a task, wait until it was seen running; a turn too quick to be seen between two
        # screen reads still ends after IDLE_UNSEEN_EXIT_S at the empty prompt.
        wait = IDLE_EXIT_S if self._busy_seen or not self.settings.prompt_given else IDLE_UNSEEN_EXIT_S
        if self._idle_since is None:
            self._idle_since = now
        elif now - self._idle_since >= wait:
            self._exit_started, self._idle_since = now, None
            self._exit_steps(now)

    def _exit_steps(self, now: float) -> None:
        assert self._exit_started is not None
        elapsed = now - self._exit_started
        if self._exit_keys_sent < 2 and elapsed >= self._exit_keys_sent * EXIT_STEP_S:
            self._to_child += b"\x03"
            self._exit_keys_sent += 1
            self._flush_to_child()
        elif self._exit_keys_sent == 2 and elapsed >= EXIT_GIVE_UP_S:
            self.send(signal.SIGTERM)
            self._exit_keys_sent = 3
        elif self._exit_keys_sent == 3 and elapsed >= 2 * EXIT_GIVE_UP_S:
            self.send(signal.SIGKILL)
            self._exit_keys_sent = 4

    def _print_screen(self) -> None:
        """Detached with no terminal on stdout: the last screen as plain text, blank runs folded."""
        kept: list[str] = []
        for line in list(self._last_lines) or self.screen.lines():
            if line.strip() or (kept and kept[-1].strip()):
                kept.append(line)
        while kept and not kept[-1].strip():
            kept.pop()
        if kept and self._stdout_ok:
            write_all(1, ("\n".join(kept) + "\n").encode())

    # -- end ---------------------------------------------------------------------------------

    def close(self) -> None:
        self.router.close()
        self._restore_terminal()
        if self._status is None and self.leader is not None:
            self.send(signal.SIGTERM)
        self._close_master()
        super().close()


def _call(obj, name: str, *args) -> None:  # type: ignore[no-untyped-def]
    """Call an optional hook of the watchdog; it must never take the relay down."""
    fn = getattr(obj, name, None)
    if fn is None:
        return
    try:
        fn(*args)
    except Exception:  # noqa: BLE001
        pass


def main(argv: list[str] | None = None) -> int:
    """``python -m claudeguard.shim.pty_relay [--idle S] [--session-dir D] -- PROGRAM ARGS``: run any
    program through the relay with the dialog router on (a debugging aid and the tests' driver)."""
    import argparse
    import secrets

    parser = argparse.ArgumentParser(prog="python -m claudeguard.shim.pty_relay")
    parser.add_argument("--idle", type=float, default=None, help="idle_before_channel (default: 30 with a terminal, else 0)")
    parser.add_argument("--timeout", type=float, default=600.0)
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
    idle = args.idle if args.idle is not None else (30.0 if os.isatty(0) else 0.0)
    settings = RelaySettings(
        session_id=args.session_id or secrets.token_hex(8), session_dir=args.session_dir, cwd=os.getcwd(),
        idle_before_channel=idle, timeout=args.timeout, on_timeout=args.on_timeout, version=args.version,
        prompt_given=args.prompt_given, detached_size=_env_size(),
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
