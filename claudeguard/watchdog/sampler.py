"""Samples of the child's process tree: CPU, state, io, time waiting for a CPU and blocked reads
of every process.

On Linux the tree is read straight from /proc (the ``children`` files of each thread, then
``stat``, ``io``, ``schedstat`` and ``syscall`` per process): a few dozen small reads per sample, no scan of
every process on the machine; the root's files stay open (``ProcFiles``), read again with
``pread``. The service samples every session's tree once a second, so this is its idle cost. Elsewhere
psutil does the same more slowly. Also here: collecting a tree and stopping it (SIGTERM, a
grace period, SIGKILL for survivors).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Callable, Iterable

from claudeguard.watchdog.signals import ProcInfo, Sample

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import psutil

LINUX = sys.platform.startswith("linux")
# read(2)-like syscall numbers: what a process blocked on a terminal or on stdin is doing.
_READ_SYSCALLS = {"x86_64": {0, 17, 19, 295}, "aarch64": {63, 65, 67, 69}, "riscv64": {63, 65, 67, 69}}.get(
    os.uname().machine if hasattr(os, "uname") else "", set()
)
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_CPUS = os.cpu_count() or 0
_PSUTIL_STATUS = {"running": "R", "sleeping": "S", "disk-sleep": "D", "stopped": "T", "tracing-stop": "t",
                  "zombie": "Z", "dead": "X", "idle": "I", "waking": "R", "parked": "S"}


def _read_bytes(path: str) -> bytes:
    """The whole file (raw fd calls: a third of what ``open()`` costs on small /proc files)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(fd, 8192)]
        while chunks[-1]:  # a short read is not the end of every /proc file
            chunks.append(os.read(fd, 65536))
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read(path: str) -> str | None:
    try:
        return _read_bytes(path).decode("utf-8", "replace")
    except OSError:
        return None


class ProcFiles:
    """Files of one process's /proc dir kept open and read again with ``pread`` (one syscall
    instead of three each second). Safe against pid reuse: a kept fd belongs to the process it
    was opened on, and once that one is gone every read fails (ESRCH), whoever has the pid now."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fds: dict[str, int] = {}

    def read(self, name: str) -> bytes:
        """The whole file ``/proc/<pid>/<name>``; OSError when it cannot be read."""
        fd = self.fds.get(name)
        if fd is None:
            fd = os.open(f"/proc/{self.pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
            self.fds[name] = fd
        data = os.pread(fd, 8192, 0)  # from offset 0 the kernel renders the file afresh
        if len(data) < 8192:
            return data
        chunks = [data]
        while chunks[-1]:
            chunks.append(os.pread(fd, 65536, sum(map(len, chunks))))
        return b"".join(chunks)

    def text(self, name: str) -> str | None:
        try:
            return self.read(name).decode("utf-8", "replace")
        except OSError:
            return None

    def close(self) -> None:
        fds, self.fds = self.fds, {}
        for fd in fds.values():
            try:
                os.close(fd)
            except OSError:
                pass


def read_stat(pid: int, text: str | None = None) -> ProcInfo | None:
    """/proc/PID/stat (or ``text``, read from it) as a ProcInfo (no io, no blocked read); None
    when the process is gone."""
    if text is None:
        text = _read(f"/proc/{pid}/stat")
    if not text:
        return None
    lp, rp = text.find("("), text.rfind(")")
    if lp < 0 or rp < 0:
        return None
    rest = text[rp + 2:].split()
    try:
        return ProcInfo(
            pid=pid,
            ppid=int(rest[1]),
            name=text[lp + 1:rp],
            status=rest[0],
            cpu=(int(rest[11]) + int(rest[12])) / _TICK,
            cpu_children=(int(rest[13]) + int(rest[14])) / _TICK,
            start=float(rest[19]),
        )
    except (IndexError, ValueError):
        return None


def _threads(stat: str) -> int:
    """The thread count in a /proc/PID/stat text (field 20); 0 when unreadable."""
    try:
        return int(stat[stat.rfind(")") + 2:].split()[17])
    except (IndexError, ValueError):
        return 0


def _children_linux(pid: int, kept: ProcFiles | None = None, threads: int = 0) -> list[int] | None:
    """Children of every thread of ``pid``; None when the kernel has no ``children`` files.
    ``kept``: the process's open files, for its main thread's list (where fork() from the main
    thread, the usual case, puts children); ``threads``: its thread count, when known (one: the
    main thread alone, no need to list them)."""
    try:
        tids = [str(pid)] if threads == 1 else os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    main = str(pid)
    for tid in tids:
        try:
            name = f"task/{tid}/children"
            data = kept.read(name) if kept is not None and tid == main else _read_bytes(f"/proc/{pid}/{name}")
            out.extend(int(x) for x in data.split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread just exited
            return None
        except OSError:
            continue
    return out


def _ppid_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = read_stat(int(name))
            if info is not None:
                kids.setdefault(info.ppid, []).append(info.pid)
    return kids


def tree_pids(root_pid: int, kept: ProcFiles | None = None, root_threads: int = 0) -> list[int]:
    """The root and all its descendants, parents before children (``kept``: the root's open
    /proc files, whose presence the caller checked; ``root_threads``: its thread count, if known)."""
    if not LINUX:
        try:
            import psutil

            root = psutil.Process(root_pid)
            return [root_pid] + [p.pid for p in root.children(recursive=True)]
        except Exception:  # noqa: BLE001 - gone or not ours: an empty tree
            return []
    if kept is None and not os.path.exists(f"/proc/{root_pid}"):
        return []
    out, todo, seen = [], [root_pid], set()
    kids_map: dict[int, list[int]] | None = None
    while todo:
        pid = todo.pop(0)
        if pid in seen:
            continue
        seen.add(pid)
        out.append(pid)
        if kids_map is not None:
            kids = None
        elif pid == root_pid:
            kids = _children_linux(pid, kept, root_threads)
        else:
            kids = _children_linux(pid)
        if kids is None:
            if kids_map is None:
                kids_map = _ppid_map()
            kids = kids_map.get(pid, [])
        todo.extend(kids)
    return out


def _reading(pid: int, kept: ProcFiles | None = None) -> str | None:
    """What a sleeping process is blocked reading, when it is a terminal or its stdin."""
    text = kept.text("syscall") if kept is not None else _read(f"/proc/{pid}/syscall")
    if not text:
        return None
    parts = text.split()
    if len(parts) < 2 or not parts[0].isdigit() or int(parts[0]) not in _READ_SYSCALLS:
        return None
    try:
        fd = int(parts[1], 16)
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except (OSError, ValueError):
        return None
    if target.startswith(("/dev/pts/", "/dev/tty", "/dev/console")):
        return target
    if fd == 0:
        kind = target.split(":", 1)[0] if ":" in target else "file"
        return f"stdin ({kind})"
    return None


def _schedstat(pid: int, kept: ProcFiles | None = None) -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable on a run queue) of the process's main thread, from
    /proc/PID/schedstat (nanoseconds); None when it cannot be read (a kernel without
    CONFIG_SCHED_INFO, or the process is gone)."""
    try:
        words = (kept.read("schedstat") if kept is not None else _read_bytes(f"/proc/{pid}/schedstat")).split()
        return int(words[0]) / 1e9, int(words[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _loadavg() -> float | None:
    try:
        return float(_read_bytes("/proc/loadavg").split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _io(pid: int, fields: tuple[bytes, ...] = (b"rchar:", b"wchar:"), kept: ProcFiles | None = None) -> int | None:
    """The sum of ``fields`` of /proc/PID/io; None when it cannot be read."""
    try:
        words = (kept.read("io") if kept is not None else _read_bytes(f"/proc/{pid}/io")).split()
        return sum(int(words[i + 1]) for i in range(0, len(words) - 1, 2) if words[i] in fields) if words else None
    except (OSError, ValueError):
        return None


class TreeSampler:
    """Samples of one child's tree; ``sample()`` is cheap enough for every second."""

    def __init__(self, root_pid: int, *, clock: Callable[[], float] = time.monotonic, check_reads: bool = True,
                 reads_only: bool = False) -> None:
        self.root_pid = root_pid
        # A session on a pty nobody reads (Claude Code's --bg sessions) writes its spinner about
        # 1 KB a second: only what the tree reads (the model stream, files, pipes) is progress.
        self.io_fields = (b"rchar:",) if reads_only else (b"rchar:", b"wchar:")
        self.clock = clock
        self.check_reads = check_reads and LINUX and bool(_READ_SYSCALLS)
        self._ps: dict[int, psutil.Process] = {}  # psutil.Process cache for the portable path
        self._root = ProcFiles(root_pid) if LINUX else None

    def close(self) -> None:
        """Close the root's kept /proc files (sampling again opens them again)."""
        if self._root is not None:
            self._root.close()

    def __del__(self) -> None:
        self.close()

    def sample(self) -> Sample:
        if LINUX:
            procs = self._linux()
            load = _loadavg()
        else:
            procs = self._portable()
            try:
                load = os.getloadavg()[0]
            except (AttributeError, OSError):
                load = None
        return Sample(time=self.clock(), root_pid=self.root_pid, procs=procs, load=load, cpus=_CPUS)

    def _linux(self) -> dict[int, ProcInfo]:
        procs: dict[int, ProcInfo] = {}
        root = self._root
        assert root is not None
        root_stat = root.text("stat")
        if not root_stat:
            return procs  # the root is gone: its pid is never looked up again (it may be reused)
        root_info = read_stat(self.root_pid, root_stat)
        for pid in tree_pids(self.root_pid, root, _threads(root_stat)):
            kept = root if pid == self.root_pid else None
            info = root_info if kept is not None else read_stat(pid)
            if info is None:
                continue
            io = _io(pid, self.io_fields, kept)
            reading = _reading(pid, kept) if self.check_reads and info.status == "S" else None
            sched = _schedstat(pid, kept)
            if io is not None or reading is not None or sched is not None:
                info = ProcInfo(info.pid, info.ppid, info.name, info.status, info.cpu, info.cpu_children,
                                info.start, io, reading, None, *(sched or (None, None)))
            procs[pid] = info
        return procs

    def _portable(self) -> dict[int, ProcInfo]:
        import psutil

        procs: dict[int, ProcInfo] = {}
        try:
            root = self._ps.get(self.root_pid) or psutil.Process(self.root_pid)
            self._ps[self.root_pid] = root
            members = [root] + root.children(recursive=True)
        except psutil.Error:
            return procs
        cache: dict[int, psutil.Process] = {}
        for p in members:
            p = self._ps.get(p.pid, p)
            cache[p.pid] = p
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    try:
                        c = p.io_counters()
                        io = getattr(c, "read_chars", c.read_bytes) + getattr(c, "write_chars", c.write_bytes)
                    except (psutil.Error, AttributeError, NotImplementedError):
                        io = None
                    procs[p.pid] = ProcInfo(
                        pid=p.pid, ppid=p.ppid(), name=p.name(),
                        status=_PSUTIL_STATUS.get(p.status(), "S"),
                        cpu=t.user + t.system,
                        cpu_children=getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0),
                        start=p.create_time(), io=io,
                    )
            except psutil.Error:
                continue
        self._ps = cache
        return procs


# -- stopping a tree -------------------------------------------------------------------------
def _identity(pid: int) -> tuple[int, float] | None:
    if LINUX:
        info = read_stat(pid)
        return None if info is None else (pid, info.start)
    try:
        import psutil

        return (pid, psutil.Process(pid).create_time())
    except Exception:  # noqa: BLE001 - gone, or not ours to read: nothing to stop
        return None


def _alive(ident: tuple[int, float]) -> bool:
    """The same process still runs (a zombie has finished: only its parent's wait is missing)."""
    pid, start = ident
    if LINUX:
        info = read_stat(pid)
        return info is not None and info.start == start and info.status not in ("Z", "X")
    try:
        import psutil

        p = psutil.Process(pid)
        return p.create_time() == start and p.status() != psutil.STATUS_ZOMBIE
    except Exception:  # noqa: BLE001 - gone, or not ours to read: not alive
        return False


def _send(idents: Iterable[tuple[int, float]], sig: int) -> None:
    for ident in idents:
        if _alive(ident):
            try:
                os.kill(ident[0], sig)
            except (ProcessLookupError, PermissionError):
                pass


def collect_tree(root_pid: int) -> list[tuple[int, float]]:
    """(pid, start) of the root and every descendant, taken before any signal is sent."""
    return [ident for ident in (_identity(pid) for pid in tree_pids(root_pid)) if ident is not None]


def interrupt(root_pid: int) -> None:
    """SIGINT to the CLI alone, as a user pressing Ctrl-C."""
    try:
        os.kill(root_pid, signal.SIGINT)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(root_pid: int, grace: float, *, poll: float = 0.05,
              on_signalled: Callable[[], None] | None = None) -> list[int]:
    """SIGTERM every process of the tree, SIGKILL what is left after ``grace`` seconds.

    Returns the pids that needed SIGKILL. The tree is collected first, so processes that the
    CLI's death re-parents are still reached; it is walked again before SIGKILL for anything a
    dying process spawned. ``on_signalled`` runs right after the SIGTERMs went out.
    """
    tree = collect_tree(root_pid)
    _send(tree, signal.SIGTERM)
    _send(tree, signal.SIGCONT)  # a stopped process must run to act on its SIGTERM
    if on_signalled is not None:
        on_signalled()
    deadline = time.monotonic() + grace
    while any(_alive(i) for i in tree) and time.monotonic() < deadline:
        time.sleep(poll)
    survivors = [i for i in tree if _alive(i)]
    for ident in list(survivors):
        for extra in collect_tree(ident[0])[1:]:
            if extra not in survivors:
                survivors.append(extra)
    _send(survivors, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while any(_alive(i) for i in survivors) and time.monotonic() < deadline:
        time.sleep(poll)
    return [pid for pid, _ in survivors]
