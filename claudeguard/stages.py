"""The launcher's stage marks, for ``bench/stages.py``: when each step of a launch was reached
(the interpreter's first line, the plan asked for and answered, the CLI's exec, its exit, the
end), written at the launcher's exit as one JSON line to the descriptor that
``CLAUDEGUARD_STAGES_FD`` names. Without that variable nothing is kept: a mark costs one
comparison (this module imports ``os`` and ``time`` alone: it sits on every launch's path).

The descriptor is the caller's own, inherited; no file is opened by name, and the CLI never gets
it (the launcher's children keep only the descriptors it hands them, and the variable is taken
out of the environment when this module is first imported: the launcher's first line).
"""

from __future__ import annotations

import os
import time

# Taken out of the environment at once: no process the launcher starts (the CLI, its tools, a
# launcher inside them) is handed a descriptor number that means something else there.
_FD = os.environ.pop("CLAUDEGUARD_STAGES_FD", "")
_MARKS: list[tuple[str, float]] | None = [] if _FD.isdigit() else None


def mark(stage: str) -> None:
    """``stage`` reached now (wall-clock seconds: a benchmark compares them with its own)."""
    if _MARKS is not None:
        _MARKS.append((stage, time.time()))


def write() -> None:
    """The marks so far, as one JSON object line ``{"stage": time, ...}`` (the first of each
    name) to ``CLAUDEGUARD_STAGES_FD``; nothing when unset. A descriptor that cannot be written
    is left alone (a benchmark's reader gone)."""
    if not _MARKS:
        return
    seen: dict[str, float] = {}
    for stage, when in _MARKS:
        seen.setdefault(stage, when)
    line = "{" + ", ".join(f'"{stage}": {when:.6f}' for stage, when in seen.items()) + "}\n"
    try:
        os.write(int(_FD), line.encode())
    except OSError:
        pass
