"""The audit log: one JSON line per decision (by rule, by a human, by timeout) and per channel
event such as a failed notify command.

``<log dir>/audit.jsonl``, the directory 0700 and the file 0600. Each line is one O_APPEND
write, so lines of concurrent sessions never interleave. Writing never raises and never blocks a
decision: a full disk or an unwritable log is reported once per process on stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from pathlib import Path
    from typing import IO, Iterator, Mapping

FILE_NAME = "audit.jsonl"
FOLLOW_POLL_S = 0.2  # `audit --follow` is a reader of a regular file: a short poll is fine there

_reported = False


class _SessionLog:
    """The log dir of the session a thread is answering for: the resident service answers many
    sessions, each launched with its own environment (``CLAUDEGUARD_LOG_DIR``), so the launcher
    writes its log dir into the session snapshot and the service sets it here per request."""

    def __init__(self) -> None:
        import threading

        self.local = threading.local()

    def get(self) -> str | None:
        return getattr(self.local, "directory", None)

    def set(self, directory: str | None) -> None:
        self.local.directory = directory


session_log = _SessionLog()


def audit_path() -> Path:
    from pathlib import Path

    return Path(_audit_file())


def _audit_file() -> str:
    directory = session_log.get()
    if directory is None:
        from claudeguard.paths import log_dir_text

        directory = log_dir_text()
    return os.path.join(directory, FILE_NAME)


def now_iso() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def input_digest(tool_input: Mapping[str, object]) -> str:
    """sha256 of the canonical JSON of a tool input, first 16 hex chars: the same call always
    digests the same, whatever the key order."""
    canonical = json.dumps(tool_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    if TYPE_CHECKING:
        from hashlib import sha256
    else:
        try:
            from _sha256 import sha256  # the builtin module: hashlib's OpenSSL load costs ~4 ms per hook
        except ImportError:
            from hashlib import sha256
    return sha256(canonical.encode()).hexdigest()[:16]


def record(event: Mapping[str, object]) -> None:
    """Append one event; fills ``time`` if missing. Never raises."""
    global _reported
    path = "?"
    try:
        path = _audit_file()
        event = dict(event)
        if not event.get("time"):
            event["time"] = now_iso()
        line = (json.dumps(event, ensure_ascii=False, default=str, separators=(",", ":")) + "\n").encode()
        _append(path, line)
    except Exception as exc:  # noqa: BLE001 - the log must never take a decision down with it
        if not _reported:
            _reported = True
            error = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            try:
                print(f"claudeguard: audit log {path}: {error}; decision not logged", file=sys.stderr, flush=True)
            except Exception:  # noqa: BLE001 - stderr itself may be gone
                pass


def _append(path: str, line: bytes) -> None:
    from claudeguard.files import append_line
    from claudeguard.paths import private_dir

    private_dir(os.path.dirname(path))
    append_line(path, line)


def _parse(line: bytes) -> dict[str, object] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None  # a torn line (disk filled mid-write): skip it, keep the rest readable
    return event if isinstance(event, dict) else None


def read_events(follow: bool = False) -> Iterator[dict[str, object]]:
    """Every logged event in order; with ``follow``, then every new one as it is appended (also
    across the file being rotated or truncated, and before it exists)."""
    path = audit_path()
    f = None
    buf = b""
    try:
        while True:
            if f is None:
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                    f = os.fdopen(fd, "rb")
                except FileNotFoundError:
                    if not follow:
                        return
                    time.sleep(FOLLOW_POLL_S)
                    continue
                buf = b""
            chunk = f.read(65536)
            if chunk:
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    event = _parse(line) if line.strip() else None
                    if event is not None:
                        yield event
                continue
            if not follow:
                if buf.strip() and (event := _parse(buf)) is not None:
                    yield event  # a last line without its newline
                return
            time.sleep(FOLLOW_POLL_S)
            if _replaced(path, f):
                f.close()
                f = None
    finally:
        if f is not None:
            f.close()


FIND_REACH = 64 << 20  # how much of the log's end ``ends_of`` reads: weeks of decisions, in well under a second


def ends_of(id_or_prefix: str) -> list[dict[str, object]]:
    """The decisions the log holds for the channel requests whose id starts with ``id_or_prefix``
    (how each ended: a human's answer and who gave it, a timeout, the keyboard), oldest first,
    from the last ``FIND_REACH`` bytes of the log. Only lines that name such an id are parsed."""
    needle = b'"request_id":"' + id_or_prefix.encode("ascii", "replace")
    found: list[dict[str, object]] = []
    try:
        fd = os.open(_audit_file(), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return found
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(fd).st_size
        f.seek(max(0, size - FIND_REACH))
        if size > FIND_REACH:
            f.readline()  # the rest of a line cut at the start
        for line in f:
            if needle in line and (event := _parse(line)) is not None and "decided_by" in event:
                found.append(event)
    return found


def _replaced(path: Path, f: IO[bytes]) -> bool:
    """The log was rotated (another inode at the path) or truncated below our position."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False  # rotated away and not yet re-created: keep the old one until it is
    mine = os.fstat(f.fileno())
    return (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino) or st.st_size < f.tell()
