"""The pipe side of the channel: the one-line answer, bounded locking, and doorbells.

FIFO facts this relies on: a write of at most PIPE_BUF bytes is atomic (all or nothing, never
interleaved); opening for writing with O_NONBLOCK fails with ENXIO when no one holds the read
end; writing after the last reader closed fails with EPIPE; a FIFO opened O_RDWR never blocks
on open and never reads EOF. FIONREAD tells how many bytes wait in the pipe, from either end.
"""

from __future__ import annotations

import array
import errno
import fcntl
import json
import os
import secrets
import select
import termios
import time

from claudeguard.channel.model import DECISIONS, SCOPES, Answer

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.decision import Scope

PIPE_BUF = getattr(select, "PIPE_BUF", 512)  # POSIX guarantees at least 512
LINE_MAX = PIPE_BUF - 1  # bytes of one answer line, newline included, so one write is atomic
BY_MAX = 200
ELLIPSIS = "…"


def encode_answer(rid: str, answer: Answer) -> bytes:
    """One JSON line shorter than PIPE_BUF; an over-long message is cut to fit (and says so)."""
    data = {
        "id": rid,
        "decision": answer.decision,
        "scope": answer.scope,
        "message": answer.message,
        "choice": answer.choice,
        "by": (answer.by or "")[:BY_MAX] or None,
    }
    line = _line(data)
    if len(line) <= LINE_MAX:
        return line
    message = data["message"] or ""
    # The longest prefix of the message that fits, found by bisection on its length in characters
    # (escaping makes bytes per character vary, so measure the encoded line itself).
    low, high = 0, len(message)
    while low < high:
        mid = (low + high + 1) // 2
        data["message"] = message[:mid] + ELLIPSIS
        if len(_line(data)) <= LINE_MAX:
            low = mid
        else:
            high = mid - 1
    data["message"] = message[:low] + ELLIPSIS
    line = _line(data)
    if len(line) > LINE_MAX:
        raise ValueError("answer too long for one atomic pipe write (choice too long?)")
    return line


def _line(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def decode_answer(rid: str, line: bytes) -> Answer:
    """Parse an answer line; a line that is not for this request or not understood is an error
    (denied), never silently taken for an approval."""
    try:
        data = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError("not an object")
    except ValueError:
        return Answer("deny", message="claudeguard: unreadable answer on the approval channel; denied",
                      decided_by="error")
    if data.get("id") != rid or data.get("decision") not in DECISIONS:
        return Answer("deny", message="claudeguard: a malformed or misrouted answer reached this request; denied",
                      decided_by="error")
    scope: Scope = data["scope"] if data.get("scope") in SCOPES else "once"
    return Answer(
        decision=data["decision"],
        scope=scope,
        message=_str_or_none(data.get("message")),
        decided_by="human",
        choice=_str_or_none(data.get("choice")),
        by=_str_or_none(data.get("by")),
    )


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def pending_bytes(fd: int) -> int:
    """Bytes waiting in the pipe behind ``fd`` (either end)."""
    buf = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf, True)
    return buf[0]


def lock_bounded(fd: int, timeout: float) -> bool:
    """flock(LOCK_EX) with a time limit; False if still held by someone else after ``timeout``.

    The holder is an answerer between its checks and its one write (microseconds), so this
    almost never loops; the limit only matters when that process was stopped (SIGSTOP)."""
    end = time.monotonic() + timeout
    pause = 0.0005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= end:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.02)


def unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:
        pass


def wait_readable(fd: int, timeout: float) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    # Round up so a remaining 0.3 ms does not become a 0 ms busy loop.
    return bool(poller.poll(max(0, int(timeout * 1000 + 0.999))))


# -- doorbells: how a `console` learns of new requests without polling the directory --------


def make_bell(bells_fd: int) -> tuple[int, str]:
    """Create this caller's doorbell and return (read fd, name). It is created under a temporary
    name and opened before it is renamed into view, so a ringer never finds it without a reader
    (and never takes a bell being set up for an abandoned one)."""
    name = secrets.token_hex(8)
    tmp = f".{name}.tmp"
    os.mkfifo(tmp, 0o600, dir_fd=bells_fd)
    try:
        fd = os.open(tmp, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=bells_fd)
        os.rename(tmp, f"{name}.bell", src_dir_fd=bells_fd, dst_dir_fd=bells_fd)
    except BaseException:
        _unlink(bells_fd, tmp)
        raise
    return fd, f"{name}.bell"


def ring_all(bells_fd: int) -> None:
    """Ring every doorbell once; a bell nobody listens to any more (ENXIO) is removed."""
    for name in os.listdir(bells_fd):
        if not name.endswith(".bell"):
            continue
        try:
            fd = os.open(name, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=bells_fd)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                _unlink(bells_fd, name)  # its console died without cleaning up
            continue
        try:
            os.write(fd, b"!")
        except OSError:
            pass  # full (the console is busy and already has rings to read) or gone
        finally:
            os.close(fd)


def drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def clean_stale_bells(bells_fd: int, older_than: float = 60.0) -> None:
    now = time.time()
    for name in os.listdir(bells_fd):
        if name.startswith(".") and name.endswith(".tmp"):
            try:
                if now - os.stat(name, dir_fd=bells_fd, follow_symlinks=False).st_mtime > older_than:
                    _unlink(bells_fd, name)
            except FileNotFoundError:
                pass


def _unlink(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
