"""How a waiting call will run, for the page: a Bash command with its parts, an Edit / Write /
MultiEdit as a unified diff against the file on disk, anything else as its input.

The Bash parts come from the policy's package-level API (``claudeguard.policy.bash.split_command``:
the same reading the rules get). The file is read as the answerer's user, without blocking (a FIFO
or a device named by the agent is not read), at most ``MAX_FILE`` bytes; the diff is cut at
``MAX_DIFF_LINES`` lines. Nothing here writes anything.
"""

from __future__ import annotations

import difflib
import json
import os
import stat

from claudeguard.policy.bash import split_command
from claudeguard.policy.decide import grant_rules_for_call

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

MAX_FILE = 2 * 1024 * 1024
MAX_DIFF_LINES = 400
MAX_TEXT = 20000  # a command or an input shown whole up to this many characters
EDIT_TOOLS = ("Edit", "Write", "MultiEdit")


def call_view(tool: str, tool_input: dict[str, Any], cwd: str, *, local: bool = True) -> dict[str, Any]:
    """``{"kind": "bash" | "diff" | "input", ...}`` for the page (see the module docstring).
    ``local``: the file is on this machine (a fleet request of another one shows no diff)."""
    if not isinstance(tool_input, dict):
        tool_input = {}
    if tool == "Bash":
        return bash_view(tool_input.get("command"))
    if tool in EDIT_TOOLS and local:
        return edit_view(tool, tool_input, cwd)

    text = json.dumps(tool_input, indent=2, ensure_ascii=False, default=str)
    return {"kind": "input", "text": _cut(text)}


def bash_view(command: object) -> dict[str, Any]:
    split = split_command(command)
    return {
        "kind": "bash",
        "command": _cut(command if isinstance(command, str) else repr(command)),
        "ok": bool(split.ok),
        "reason": split.reason,
        "parts": [{"text": _cut(p.text), "writes": bool(p.writes)} for p in split.parts],
    }


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"\n... ({len(text) - MAX_TEXT} more characters)"


def read_text_file(path: str) -> tuple[str | None, str | None]:
    """(content, None), (None, None) when there is no such file, or (None, why not shown)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror or exc}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, f"{path} is not a regular file; not read"
        if st.st_size > MAX_FILE:
            return None, f"{path} is {st.st_size} bytes; not read (over {MAX_FILE})"
        data = b""
        while len(data) <= MAX_FILE:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror or exc}"
    finally:
        os.close(fd)
    if len(data) > MAX_FILE:
        return None, f"{path} is over {MAX_FILE} bytes; not read"
    if b"\0" in data[:8192]:
        return None, f"{path} is a binary file; no diff"
    return data.decode("utf-8", "replace"), None


def _apply_edit(text: str, old: object, new: object, replace_all: object) -> tuple[str, str | None]:
    """The text after one Edit, and a note when the CLI would refuse it as it stands."""
    if not isinstance(old, str) or not isinstance(new, str):
        return text, "the edit has no old_string/new_string text"
    if old == "":
        return (new + text if text == "" else text), (None if text == "" else "old_string is empty")
    count = text.count(old)
    if count == 0:
        return text, "old_string is not in the file on disk: the edit would fail as it stands"
    if count > 1 and not replace_all:
        return text.replace(old, new, 1), (f"old_string occurs {count} times: the CLI refuses an edit that is not "
                                           "unique (first occurrence shown)")
    return text.replace(old, new) if replace_all else text.replace(old, new, 1), None


def edit_view(tool: str, tool_input: dict[str, Any], cwd: str) -> dict[str, Any]:
    path = tool_input.get("file_path")
    if not isinstance(path, str) or not path:
        return {"kind": "input", "text": repr(tool_input)[:MAX_TEXT]}
    full = path if os.path.isabs(path) else os.path.join(cwd or "/", path)
    current, why = read_text_file(full)
    notes: list[str] = [why] if why else []
    exists = current is not None
    if why is not None:
        before = ""
    else:
        before = current or ""
    after = before
    if tool == "Write":
        content = tool_input.get("content")
        after = content if isinstance(content, str) else ""
    elif tool == "Edit":
        after, note = _apply_edit(before, tool_input.get("old_string"), tool_input.get("new_string"),
                                  tool_input.get("replace_all"))
        if note:
            notes.append(note)
    else:  # MultiEdit: in order, each on the text the previous one left
        edits = tool_input.get("edits")
        for n, edit in enumerate(edits if isinstance(edits, list) else [], 1):
            if not isinstance(edit, dict):
                notes.append(f"edit {n} is not an object")
                continue
            after, note = _apply_edit(after, edit.get("old_string"), edit.get("new_string"), edit.get("replace_all"))
            if note:
                notes.append(f"edit {n}: {note}")
    if why is not None and tool != "Write":
        # The file could not be read: show what the edit replaces, as the agent wrote it.
        before_parts, after_parts = [], []
        for edit in ([tool_input] if tool == "Edit" else tool_input.get("edits") or []):
            if isinstance(edit, dict):
                before_parts.append(str(edit.get("old_string", "")))
                after_parts.append(str(edit.get("new_string", "")))
        before, after = "\n".join(before_parts), "\n".join(after_parts)
    lines = list(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                      fromfile=f"a/{path.lstrip('/')}" if exists else "/dev/null",
                                      tofile=f"b/{path.lstrip('/')}", n=3))
    shown = [line.rstrip("\n").rstrip("\r") for line in lines[:MAX_DIFF_LINES]]
    if len(lines) > MAX_DIFF_LINES:
        notes.append(f"diff cut at {MAX_DIFF_LINES} of {len(lines)} lines")
    if not lines:
        notes.append("no change to the file's text")
    return {"kind": "diff", "path": full, "new_file": not exists and why is None, "diff": shown, "notes": notes}


def forever_rules(tool: str, tool_input: dict[str, Any], cwd: str) -> list[str]:
    """The rules ``forever`` writes (the same as a session grant: exactly this call)."""
    try:
        return grant_rules_for_call(tool, tool_input, cwd=cwd)
    except Exception:  # noqa: BLE001 - a call the grant code cannot read offers no grant (fail closed)
        return []
