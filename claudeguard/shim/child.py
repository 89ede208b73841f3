"""What the pipe supervisor (``supervise``) and the pty session (``pty_relay``) share about the
CLI they run: the start (our signals blocked, a parent-death signal in the child), one thread that
takes our signals with ``sigwaitinfo`` and hands them over through a wake pipe, forwarding to the
CLI, its exit code, and writing every byte out in full."""

from __future__ import annotations

import errno
import os
import select
import sys

from claudeguard import stages
from claudeguard.shim.leftovers import ENDING_SIGNALS, Leftovers

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import signal
    import threading
    from typing import Any, Callable
else:  # the same functions and constants without the enum wrappers (`signal` imports enum: ~4 ms before the CLI starts)
    import _signal as signal

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGWINCH, signal.SIGTSTP,
             signal.SIGCONT, signal.SIGUSR1, signal.SIGUSR2)
SI_USER = 0  # si_code of kill(2); the tty driver sends with SI_KERNEL (0x80)
PR_SET_PDEATHSIG = 1
# The CLI is made a child subreaper (kept across its exec): a tool's process that double-forks,
# setsid()s or nohup's itself is re-parented to the CLI, not to init, so it stays inside the
# session's tree for as long as the session lives, and an answer it gives the channel is refused
# (claudeguard/ancestry.py). Checked on 2.1.197, 2.1.330 and 2.1.332: the CLI runs as before.
PR_SET_CHILD_SUBREAPER = 36


_PRCTL: list[Callable[..., int] | None] = []  # _libc_prctl's answer, once made


def libc_prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (``_libc_prctl``), made once a process: the launcher makes it while the
    planner still prepares (shim/main.py), and every child it starts later takes the same."""
    if not _PRCTL:
        _PRCTL.append(_libc_prctl())
    return _PRCTL[0]


def _libc_prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` through ``_ctypes``, as ``ctypes.CDLL(None).prctl`` gives it but without
    the ``ctypes`` package (~3 ms of class definitions before every CLI's start): an int result,
    int arguments, errno kept. None when it cannot be had (then no parent-death signal)."""
    try:
        import _ctypes

        # ctypes.c_int and CDLL's function type, made the way ctypes makes them. The stubs know
        # these only as ctypes uses them: dlopen(None) is the program itself (CDLL(None)), and
        # CFuncPtr((name, library)) reads nothing of the library but its _handle.
        c_int = type("c_int", (_ctypes._SimpleCData,), {"_type_": "i"})
        make: Any = type("Function", (_ctypes.CFuncPtr,), {
            "_flags_": _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO, "_restype_": c_int})
        dlopen: Any = _ctypes.dlopen

        class Libc:
            _handle = dlopen(None, 0)

        prctl: Callable[..., int] = make(("prctl", Libc()))
        return prctl
    except (ImportError, OSError, AttributeError, TypeError):
        return None


def child_setup(parent_pid: int, then: Callable[[], None] | None = None, *,
                subreaper: bool = False) -> Callable[[], None]:
    """The ``preexec_fn`` of every child the shim starts (here and in the pty relay); ``then``
    runs last, in the child; ``subreaper``: the child (the CLI) becomes a child subreaper.
    Loads libc before the fork: nothing may be imported between fork and exec."""
    prctl = libc_prctl() if sys.platform.startswith("linux") else None

    def setup() -> None:
        # Runs in the child between fork and exec: unblock what the parent blocked, ask the kernel
        # to SIGTERM us if claudeguard dies, and catch a parent that died before we asked.
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if subreaper:
                prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(129)
        if then is not None:
            then()

    return setup


def spawn(cmd: list[str], env: dict[str, str], setup: Callable[[], None], *, fds: dict[int, int],
          keep: tuple[int, ...] = (), new_session: bool = False) -> int:
    """fork and execve ``cmd``: what ``subprocess.Popen(close_fds=True, preexec_fn=setup, ...)``
    does for us, without importing ``subprocess`` (its imports, ~7 ms, came before every CLI's
    start). In the child: ``fds`` (target: source) are duplicated, every other descriptor but
    ``keep`` is closed, a new session if asked, the signals Python ignores back to their defaults
    (as Popen's restore_signals), ``setup``, exec. An exec that fails comes back here as the
    OSError it raised, through a close-on-exec pipe (empty when the exec succeeded). The CLI's
    start, not through procs: between fork and exec it needs ``setup`` (the parent-death
    signal) and the descriptors, which posix_spawn cannot give."""
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only calls that need no lock another thread of ours may hold
        code = 0
        try:
            for target, source in fds.items():
                os.dup2(source, target)
            open_fds = sorted({0, 1, 2, err_w, *keep, *fds})
            for low, high in zip(open_fds, [*open_fds[1:], os.sysconf("SC_OPEN_MAX")], strict=True):
                os.closerange(low + 1, high)
            for fd in keep:
                os.set_inheritable(fd, True)
            if new_session:
                os.setsid()
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            setup()
            os.execve(cmd[0], cmd, env)
        except OSError as exc:
            code = exc.errno or 0
        finally:
            try:
                os.write(err_w, str(code).encode())
            finally:
                os._exit(127)
    os.close(err_w)
    try:
        failed = b""
        while chunk := os.read(err_r, 64):
            failed += chunk
    finally:
        os.close(err_r)
    if failed:
        os.waitpid(pid, 0)
        code = int(failed) if failed.isdigit() else 0
        raise OSError(code, os.strerror(code) if code else "the child's setup failed")
    stages.mark("exec")  # the first child's: the CLI's exec
    return pid


class ChildProcess:
    """One CLI run as our child. ``start()`` -> the CLI's pid, ``relay()`` -> its exit code (128+N
    for signal N), ``close()`` always. Subclasses start it with ``_spawn``, then ``_watch_signals``,
    and take each signal in ``_on_signal`` (in the signal thread; True ends that thread)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.argv = argv
        self.env = env
        self.on_output: Callable[[bytes], None] | None = None
        self.cli_pid: int | None = None  # what our signals are forwarded to
        self.leftovers = Leftovers()
        self._status: int | None = None  # the wait status, once reaped
        self._wake_r, self._wake_w = os.pipe()
        self._stopping = False
        self._sig_thread: threading.Thread | None = None

    def _spawn(self, cmd: list[str], what: str, *, then: Callable[[], None] | None = None,
               fds: dict[int, int] | None = None, keep: tuple[int, ...] = (), new_session: bool = False,
               subreaper: bool = False) -> int:
        """Start ``cmd`` (its pid) with the forwarded signals (and SIGCHLD) blocked in every
        thread of ours; a failure to start is one clean error naming ``what``."""
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED + (signal.SIGCHLD,))
        try:
            return spawn(cmd, self.env, child_setup(os.getpid(), then, subreaper=subreaper), fds=fds or {},
                         keep=keep, new_session=new_session)
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            from claudeguard.errors import GuardError

            raise GuardError(f"cannot start {what}: {exc.strerror}") from None

    def _watch_signals(self, name: str) -> None:
        import threading  # here, after the CLI started: with what it imports, ~4 ms

        self._sig_thread = threading.Thread(target=self._signal_loop, name=name, daemon=True)
        self._sig_thread.start()

    def _signal_loop(self) -> None:
        wanted = set(FORWARDED) | {signal.SIGCHLD}
        while not self._stopping:
            info = signal.sigwaitinfo(wanted)
            if self._stopping or self._on_signal(info):
                return

    def _on_signal(self, info: Any) -> bool:
        raise NotImplementedError

    def _wake(self) -> bool:
        """Wake the main loop (it selects on ``_wake_r``); False once the pipe is closed."""
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            return False
        return True

    def _note_ending(self, sig: int) -> None:
        if sig in ENDING_SIGNALS and self.cli_pid is not None and self._status is None:
            self.leftovers.note(self.cli_pid)  # before the CLI can die and orphan its tools

    def send(self, sig: int) -> None:
        """Forward ``sig`` to the CLI while it runs."""
        if self.cli_pid is not None and self._status is None:
            try:
                os.kill(self.cli_pid, sig)
            except ProcessLookupError:
                pass

    def exit_code(self) -> int:
        status = self._status or 0
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.WEXITSTATUS(status)

    def close(self) -> None:
        self._stopping = True
        thread = self._sig_thread
        if thread is not None and thread.is_alive() and thread.ident is not None:
            try:
                signal.pthread_kill(thread.ident, signal.SIGCHLD)  # wake its sigwaitinfo
            except (ProcessLookupError, OSError):
                pass
            thread.join(1.0)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._wake_r = self._wake_w = -1


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

