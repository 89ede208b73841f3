"""Samples of the child's process tree: CPU, state, io and blocked reads of every process.

On Linux the tree is read straight from /proc (the ``children`` files of each thread, then
``stat``, ``io`` and ``syscall`` per process): a few dozen small reads per sample, no scan of
every process on the machine, which keeps the supervisor's own CPU far under 1 %. Elsewhere
psutil does the same more slowly. Also here: collecting a tree and stopping it (SIGTERM, a
grace period, SIGKILL for survivors).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Callable, Iterable

from claudeguard.watchdog.state import ProcInfo, Sample

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import psutil

LINUX = sys.platform.startswith("linux")
# read(2)-like syscall numbers: what a process blocked on a terminal or on stdin is doing.
_READ_SYSCALLS = {"x86_64": {0, 17, 19, 295}, "aarch64": {63, 65, 67, 69}, "riscv64": {63, 65, 67, 69}}.get(
    os.uname().machine if hasattr(os, "uname") else "", set()
)
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PSUTIL_STATUS = {"running": "R", "sleeping": "S", "disk-sleep": "D", "stopped": "T", "tracing-stop": "t",
                  "zombie": "Z", "dead": "X", "idle": "I", "waking": "R", "parked": "S"}


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return None


def read_stat(pid: int) -> ProcInfo | None:
    """/proc/PID/stat as a ProcInfo (no io, no blocked read); None when the process is gone."""
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


def _children_linux(pid: int) -> list[int] | None:
    """Children of every thread of ``pid``; None when the kernel has no ``children`` files."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out.extend(int(x) for x in fh.read().split())
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


def tree_pids(root_pid: int) -> list[int]:
    """The root and all its descendants, parents before children."""
    if not LINUX:
        try:
            import psutil

            root = psutil.Process(root_pid)
            return [root_pid] + [p.pid for p in root.children(recursive=True)]
        except Exception:  # noqa: BLE001 - gone or not ours: an empty tree
            return []
    if not os.path.exists(f"/proc/{root_pid}"):
        return []
    out, todo, seen = [], [root_pid], set()
    kids_map: dict[int, list[int]] | None = None
    while todo:
        pid = todo.pop(0)
        if pid in seen:
            continue
        seen.add(pid)
        out.append(pid)
        kids = _children_linux(pid) if kids_map is None else None
        if kids is None:
            if kids_map is None:
                kids_map = _ppid_map()
            kids = kids_map.get(pid, [])
        todo.extend(kids)
    return out


def _reading(pid: int) -> str | None:
    """What a sleeping process is blocked reading, when it is a terminal or its stdin."""
    text = _read(f"/proc/{pid}/syscall")
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


def _io(pid: int, fields: tuple[str, ...] = ("rchar:", "wchar:")) -> int | None:
    text = _read(f"/proc/{pid}/io")
    if not text:
        return None
    total = 0
    for line in text.splitlines():
        if line.startswith(fields):
            total += int(line.split()[1])
    return total


class TreeSampler:
    """Samples of one child's tree; ``sample()`` is cheap enough for every second."""

    def __init__(self, root_pid: int, *, clock: Callable[[], float] = time.monotonic, check_reads: bool = True,
                 reads_only: bool = False) -> None:
        self.root_pid = root_pid
        # A session on a pty nobody reads (Claude Code's --bg sessions) writes its spinner about
        # 1 KB a second: only what the tree reads (the model stream, files, pipes) is progress.
        self.io_fields = ("rchar:",) if reads_only else ("rchar:", "wchar:")
        self.clock = clock
        self.check_reads = check_reads and LINUX and bool(_READ_SYSCALLS)
        self._ps: dict[int, psutil.Process] = {}  # cache for the portable path

    def sample(self) -> Sample:
        procs = self._linux() if LINUX else self._portable()
        return Sample(time=self.clock(), root_pid=self.root_pid, procs=procs)

    def _linux(self) -> dict[int, ProcInfo]:
        procs: dict[int, ProcInfo] = {}
        for pid in tree_pids(self.root_pid):
            info = read_stat(pid)
            if info is None:
                continue
            io = _io(pid, self.io_fields)
            reading = _reading(pid) if self.check_reads and info.status == "S" else None
            if io is not None or reading is not None:
                info = ProcInfo(info.pid, info.ppid, info.name, info.status, info.cpu, info.cpu_children,
                                info.start, io, reading)
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
