"""Which tool calls have ended, read from the CLI's own transcripts as they grow.

A ``-p`` session registers no PostToolUse hook (``plan/hooks.hook_events``): it cost the CLI
~8-10 ms a call (an HTTP hook, blocking or async; bench/RESULTS.md) and only said that a call had
ended. The CLI writes that anyway: every tool result is a line of its transcript (the main
agent's ``<session>.jsonl``, named by each hook event's ``transcript_path``, and each subagent's
``<session>/subagents/agent-<agent_id>.jsonl``), appended as soon as the tool returns (checked
on 2.1.197 and 2.1.330, with the model silent after the result). The watchdog reads the new bytes
of those files while a hook-tracked call is in flight, so a call that ended is not taken for a
long tool when the model then hangs.

The files are the user's own, named by the CLI; they are opened without following a link at
their last component and read from where the last read stopped (a first read looks back at most
``LOOKBACK`` bytes: a resumed session's transcript may be large, and the calls in flight are
recent).
"""

from __future__ import annotations

import json
import os
import stat
import time
from datetime import datetime

LOOKBACK = 4 << 20
READ_CAP = 8 << 20  # per file and read: a burst of output is taken over several samples
KEEP_ENDED = 4096  # ended ids remembered for a call whose tool-start is read after its result


def subagent_transcript(main: str, agent_id: str) -> str | None:
    """The transcript the CLI keeps for a subagent of the session whose transcript is ``main``."""
    if not main.endswith(".jsonl") or not agent_id or "/" in agent_id or agent_id.startswith("."):
        return None
    return os.path.join(main[:-len(".jsonl")], "subagents", f"agent-{agent_id}.jsonl")


def _when(record: dict[str, object]) -> float | None:
    """The record's wall-clock time (its ISO ``timestamp``), or None."""
    stamp = record.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class _File:
    __slots__ = ("ino", "offset", "buf")

    def __init__(self, ino: int, offset: int) -> None:
        self.ino = ino
        self.offset = offset
        self.buf = b""


class TranscriptEnds:
    """Follows transcripts and remembers which ``tool_use_id`` has a result, and when (wall time)."""

    def __init__(self) -> None:
        self._files: dict[str, _File] = {}
        self.ended: dict[str, float] = {}

    def read(self, paths: list[str]) -> None:
        """Takes in what each of ``paths`` gained since the last read (a missing file: nothing)."""
        for path in paths:
            try:
                self._read_one(path)
            except OSError:
                continue
        if len(self.ended) > KEEP_ENDED:
            for key in list(self.ended)[:len(self.ended) - KEEP_ENDED]:
                del self.ended[key]

    def _read_one(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return
            f = self._files.get(path)
            cut = False
            if f is None or f.ino != st.st_ino or st.st_size < f.offset:
                # New (or replaced, or cut short): a first look back over its recent lines.
                f = self._files[path] = _File(st.st_ino, max(0, st.st_size - LOOKBACK))
                cut = f.offset > 0
            if st.st_size == f.offset:
                return
            data = os.pread(fd, min(READ_CAP, st.st_size - f.offset), f.offset)
        finally:
            os.close(fd)
        f.offset += len(data)
        data = f.buf + data
        if cut:
            data = data[data.find(b"\n") + 1:]  # the first line of a look-back is cut
        end = data.rfind(b"\n")
        if end < 0:
            f.buf = data
            return
        f.buf = data[end + 1:]
        now = time.time()
        for line in data[:end].split(b"\n"):
            if b'"tool_result"' not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict) or record.get("type") != "user":
                continue
            content = (record.get("message") or {}).get("content") if isinstance(record.get("message"), dict) else None
            if not isinstance(content, list):
                continue
            when = _when(record) or now
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    call_id = block.get("tool_use_id")
                    if isinstance(call_id, str):
                        self.ended[call_id] = min(when, now)
