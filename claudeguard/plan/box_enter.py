"""The session's box kept for the whole session, and the small program that runs each Bash call
in it (docs/design.md, "The session's box").

A ``bwrap`` per Bash call costs ~5 ms of its own start over bash (bench/RESULTS.md, issue 34),
most of it the mounts it makes again for every call. So the launcher starts one box per session
(``start``: bwrap with the call box's own argv, around a process that waits for the session's end)
once the CLI runs, and the box script runs each call through ``box-enter`` (``box_enter.c``, built
once per machine into the user's state dir, which the box hides): it joins that box's namespaces
and makes a pid and mount namespace of the call's own inside them, with its own /proc, then gives
the command what bwrap gave it (a new session, no capabilities, no new privileges, the seccomp
filter). Anything not as the launcher left it (no ``live`` file yet, the box ended, its pid
reused, a namespace that is the caller's own) and it runs the call exactly as before, in a bwrap
box of its own: never outside a box.

Where no C compiler is found the program is not built, and every call has its own bwrap box as
before (one line in ``claudeguardctl doctor``). ``CLAUDEGUARD_BOX_ENTER`` names a program built
elsewhere (a packager's, the test suite's), used instead of the state dir's.

This module sits in the paths layer beside plan/sandbox.py and imports nothing above it.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import subprocess
    from typing import Mapping

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "box_enter.c")
PROGRAM_VAR = "CLAUDEGUARD_BOX_ENTER"
LIVE_FILE = "live"  # in the session dir: "pid start user mnt pid ipc net bgdir" of the session's box
# (box-enter LIVE_FILE CWD_FILE BG_DIR COMMAND -- FALLBACK...: box_enter.c)
ARGS_FILE = "box-args"  # in the session dir: the call box's bwrap argv, NUL-separated (plan/sandbox.py)
# In the session dir: a FIFO the launcher waits on before it starts the box (``OnDemand``); a byte
# in it (``want``: the guard saw a Bash call coming) starts it.
WANT_FILE = "box-want"
NAMESPACES = ("user", "mnt", "pid", "ipc", "net")
# Beside the entry once a trial call ran through it on this machine: only then is it the CLI's
# shell (plan/sandbox._shell_way), which the CLI runs for every call, before any box is live.
RAN_SUFFIX = ".ran"
MAX_LIST = 256  # box_enter.c's MAX_LIST: the longest list of box-shell.conf it takes
START_WAIT_S = 10.0
STOP_WAIT_S = 2.0
BUILD_WAIT_S = 60.0


def program_path(state_dir: str, env: Mapping[str, str]) -> str:
    """Where the session's box script looks for ``box-enter``: ``CLAUDEGUARD_BOX_ENTER``, else
    a build of this very source in the state dir (its size and change time in the name: a new
    version of the source is built again)."""
    given = env.get(PROGRAM_VAR)
    if given:
        return os.path.abspath(given)
    try:
        st = os.stat(SOURCE)
    except OSError:
        return os.path.join(state_dir, "box-enter-missing")
    return os.path.join(state_dir, f"box-enter-{st.st_size}-{st.st_mtime_ns}")


def find_compiler(env: Mapping[str, str]) -> str | None:
    """A C compiler: ``cc``, ``gcc`` or ``clang``, first in the system's dirs, then on PATH."""
    import shutil

    for name in ("cc", "gcc", "clang"):
        for path in (f"/usr/bin/{name}", f"/bin/{name}"):
            if os.access(path, os.X_OK):
                return path
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name, path=env.get("PATH") or os.defpath)
        if found:
            return os.path.abspath(found)
    return None


def build(program: str, env: Mapping[str, str]) -> str | None:
    """Build ``box-enter`` at ``program`` (in the state dir) when it is not there yet: None when it
    is there after, else why not, in one line. Never raises: a session without it boxes each
    call with bwrap."""
    if os.access(program, os.X_OK):
        return None
    compiler = find_compiler(env)
    if compiler is None:
        return "no C compiler (cc, gcc or clang) to build the session box's entry: each Bash call starts its own box"
    import subprocess

    from claudeguard.paths import private_dir

    directory = os.path.dirname(program)
    private_dir(directory)
    temporary = f"{program}.{os.getpid()}.tmp"
    try:
        # Static where the C library allows (Debian's libc6-dev ships libc.a): no dynamic
        # loader at each call's start, -0.2-0.3 ms a call here (bench/RESULTS.md).
        for static in (["-static"], []):
            proc = subprocess.run([compiler, "-O2", *static, "-o", temporary, SOURCE], stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=BUILD_WAIT_S,
                                  env={"PATH": "/usr/bin:/bin", "LANG": "C"})
            if proc.returncode == 0:
                break
        if proc.returncode != 0:
            said = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[0]
            return f"the session box's entry did not build ({compiler}): {said}"
        os.chmod(temporary, 0o700)
        os.replace(temporary, program)
        return None
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the session box's entry did not build ({compiler}): {exc}"
    finally:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def background_dir(env: Mapping[str, str]) -> str | None:
    """The dir where the CLI keeps background commands' output (readable in the box), as the box
    script finds it: a dir of ours under /tmp. Made here (0700) when missing inside a temp dir
    the user chose (``CLAUDE_CODE_TMPDIR``, ``TMPDIR``), as the CLI makes it moments later; in
    the shared /tmp only taken when there (the CLI makes it there by its own rules). One the CLI
    makes later in the session is not in the session's box: a call that finds it then gets a
    box of its own (``box-enter`` compares the two)."""
    import stat

    chosen = env.get("CLAUDE_CODE_TMPDIR") or env.get("TMPDIR")
    path = f"{chosen or '/tmp'}/claude-{os.getuid()}"
    if not path.startswith("/tmp/") or "/../" in path:
        return None
    if chosen:
        try:
            os.mkdir(path, 0o700)
        except OSError:
            pass  # there already (checked below), or not to be made
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return path if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() else None


class SessionBox:
    """The session's box once started: its bwrap (``proc``) and the pipe end that keeps it alive
    (``life``), or ``reason`` when it did not start (one line; the calls then have a box each)."""

    __slots__ = ("proc", "life", "reason", "first")

    def __init__(self, proc: subprocess.Popen[bytes] | None, life: int | None, reason: str | None) -> None:
        self.proc = proc
        self.life = life
        self.reason = reason
        self.first: tuple[int, str] | None = None  # the box's pid 1 and its start time, once known

    def stop(self) -> None:
        """End the box: its command exits once the pipe closes (and with it the box's pid 1 and
        everything in it); its bwrap is killed by pid and reaped, its pid 1 too; returns once that
        has ended (at most ``STOP_WAIT_S``), so that no call enters it after."""
        import signal

        life, self.life = self.life, None
        if life is not None:
            os.close(life)
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        first, self.first = self.first, None
        if first is not None:
            _end_first(*first)


def _end_first(pid: int, started: str) -> None:
    """End the box's pid 1 (``pid``, of start time ``started``: the box's, not a later process
    of that pid) and wait until it has, at most ``STOP_WAIT_S``. Its ``sh`` ends once the pipe
    closes, unless the hold has stopped it (gate/freeze.py): killed, its pid namespace ends
    with it. (The calls each have a pid namespace of their own: none is in it.)"""
    import select
    import signal

    from claudeguard.procs import process_start

    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return  # gone already
    try:
        if process_start(pid) == started:
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                return  # ended meanwhile
            select.select([fd], [], [], STOP_WAIT_S)  # readable once it has exited
    finally:
        os.close(fd)


class OnDemand:
    """The session's box, started by the launcher when the session's first Bash call is on its
    way, not with the session: a session that runs no command (a text turn) never pays the box's
    start (~10 ms of the CLI's own start on two cores) nor its end (bench/RESULTS.md). The
    launcher's thread waits on ``WANT_FILE`` (a FIFO of the session dir) until a byte comes
    (``want``: the guard's PreToolUse hook for a Bash call, or the box script of a call that
    finds the box not live) or the session ends; then it starts the box at the lowest priority
    and keeps it (bwrap's --die-with-parent is the kernel's parent-death signal, per thread: the
    thread lives as long as the box). The call that asked runs in a bwrap box of its own while the
    session's box starts (the box script's way whenever it is not live). Where the FIFO cannot be
    made, the box starts at once, as before."""

    __slots__ = ("session_dir", "env", "box", "_ended", "_wake", "_thread")

    def __init__(self, session_dir: str, env: Mapping[str, str]) -> None:
        import threading

        self.session_dir, self.env = session_dir, env
        self.box: SessionBox | None = None  # once started
        self._ended = threading.Event()
        self._wake = os.pipe()  # written at the end: the wait ends
        self._thread = threading.Thread(target=self._run, name="claudeguard-session-box", daemon=True)

    def start(self) -> OnDemand:
        self._thread.start()
        return self

    def _run(self) -> None:
        import select

        try:
            # At the lowest priority (a thread's own on Linux, and what it starts inherits it):
            # the box's start fills the two cores' idle time (the CLI waits on the model).
            import threading

            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except OSError:
            pass
        path = os.path.join(self.session_dir, WANT_FILE)
        try:
            os.mkfifo(path, 0o600)
            # Non-blocking: the open does not wait for a writer, and no writer's end is
            # ever "end of file" to select (Linux reports a FIFO's hang-up only after a writer).
            want = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            want = -1  # no FIFO: the box starts now
        try:
            if want >= 0 and self._wake[0] in select.select([want, self._wake[0]], [], [])[0]:
                return  # the session ended before any Bash call
        finally:
            if want >= 0:
                os.close(want)
        self.box = start(self.session_dir, self.env)
        self._ended.wait()
        self.box.stop()

    def end(self) -> None:
        """End the box (or the wait for it) without waiting: once the CLI has exited, so that the
        box's end overlaps the rest of the session's."""
        if not self._ended.is_set():
            self._ended.set()
            os.write(self._wake[1], b"x")

    def stop(self) -> None:
        """End it and wait for the thread (at most ``STOP_WAIT_S`` for the box, plus its start)."""
        self.end()
        self._thread.join(START_WAIT_S)
        for fd in self._wake:
            try:
                os.close(fd)
            except OSError:
                pass


def want(session_dir: str) -> None:
    """Ask the launcher for the session's box (``OnDemand``), unless it is live: one byte into
    its FIFO, never blocking (no reader, or no FIFO: nothing happens)."""
    if os.path.exists(os.path.join(session_dir, LIVE_FILE)):
        return
    try:
        fd = os.open(os.path.join(session_dir, WANT_FILE), os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.write(fd, b"x")
    except OSError:
        pass  # its buffer full: a byte is waiting already
    finally:
        os.close(fd)


def start(session_dir: str, env: Mapping[str, str]) -> SessionBox:
    """Start the session's box from ``box-args`` (the entry's path, then the call box's bwrap
    argv): build the entry when it is missing, start the box, see that a call runs in it through
    the entry, then write the ``live`` file that lets the calls in. The box dies with this
    process (bwrap's --die-with-parent) and with ``stop``."""
    import json
    import subprocess

    from claudeguard.procs import process_start

    try:
        with open(os.path.join(session_dir, ARGS_FILE), "rb") as fh:
            program, *argv = [a.decode() for a in fh.read().split(b"\0")]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return SessionBox(None, None, f"no box argv in the session dir: {exc}")
    if not argv:
        return SessionBox(None, None, "no box argv in the session dir")
    reason = build(program, env) if PROGRAM_VAR not in env else None
    if reason or not os.access(program, os.X_OK):
        return SessionBox(None, None, reason or f"no session box entry at {program}")
    bg = background_dir(env)
    extra = ["--ro-bind", bg, bg] if bg else []
    # bwrap tells the first process's pid (--info-fd) before it has made the mounts and the
    # last user namespace: the box is ready once its own command runs, and says so on a pipe.
    # That command then waits on a pipe only this process writes to: the box ends when it is
    # closed, by ``stop`` or by this process's end however it comes (bwrap's --die-with-parent
    # did not end the box's pid 1 when its bwrap was killed, as root).
    info_read, info_write = os.pipe()
    ready_read, ready_write = os.pipe()
    life_read, life_write = os.pipe()
    command = ["/bin/sh", "-c", f"echo ready > /dev/fd/{ready_write}; read x < /dev/fd/{life_read}"]
    try:
        # Its own session: a Ctrl-C at the terminal is the CLI's, not the box's.
        proc = subprocess.Popen(argv + extra + ["--info-fd", str(info_write), "--", *command],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                pass_fds=(info_write, ready_write, life_read), start_new_session=True)
    except OSError as exc:
        for fd in (info_read, info_write, ready_read, ready_write, life_read, life_write):
            os.close(fd)
        return SessionBox(None, None, f"the session's box did not start: {exc}")
    for fd in (info_write, ready_write, life_read):
        os.close(fd)
    box = SessionBox(proc, life_write, None)
    try:
        info = _read_until(info_read, b"}")
        if _read_until(ready_read, b"\n") != b"ready\n":
            raise ValueError("its first command did not run")
        pid = int(json.loads(info)["child-pid"])
        started = process_start(pid)
        if started is None:
            raise ValueError("its first process is gone")
        box.first = (pid, started)
        inodes = [str(os.stat(f"/proc/{pid}/ns/{name}").st_ino) for name in NAMESPACES]
        live = f"{pid} {started} {' '.join(inodes)} {bg or '-'}\n"
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        box.stop()
        return SessionBox(None, None, f"the session's box did not start: {exc}")
    reason = _try(session_dir, program, live)
    if reason:
        box.stop()
        return SessionBox(None, None, reason)
    from claudeguard.files import write_atomic

    write_atomic(os.path.join(session_dir, LIVE_FILE), live, mode=0o600)
    if not os.path.exists(program + RAN_SUFFIX):
        try:
            write_atomic(program + RAN_SUFFIX, "", mode=0o600)
        except OSError:
            pass  # a program in a dir not ours: the calls keep the box script's way in
    return box


def _read_until(fd: int, end: bytes) -> bytes:
    """What comes on ``fd`` up to the first ``end`` (or its writers closing it, or ``START_WAIT_S``
    passing); closes it."""
    import select
    import time

    out = b""
    deadline = time.monotonic() + START_WAIT_S
    try:
        while end not in out and select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            out += chunk
    finally:
        os.close(fd)
    return out


def _try(session_dir: str, program: str, live: str) -> str | None:
    """One call through ``program`` into the box ``live`` describes, before any real one: None
    when it ran in it; else why not (a kernel that refuses a step: the calls keep a box each)."""
    import subprocess

    from claudeguard.files import write_atomic

    trial = os.path.join(session_dir, f"{LIVE_FILE}.try")
    write_atomic(trial, live, mode=0o600)
    # The command exits 0 in the box; the fallback (which a call would get) exits 1.
    argv = ["/bin/sh", "-c", 'exec "$@" 9< "$0"', os.path.join(session_dir, "seccomp.bpf"),
            program, trial, "", "", "exit 0", "--", "/bin/sh", "-c", "exit 1"]
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=START_WAIT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the session's box could not be entered: {exc}"
    finally:
        os.unlink(trial)
    if proc.returncode != 0:
        said = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[0]
        return f"the session's box could not be entered: {said}"
    return None
