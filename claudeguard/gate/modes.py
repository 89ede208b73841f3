"""What a permission mode allows, given by the guard's hook instead of the CLI (fail closed by
construction, plan/argv.py): the CLI runs in a mode that allows no more than ``default``, and a
call no rule decides is allowed here when the mode the run asked for would have let the CLI run
it, for every agent alike, after that agent's own policy (a subagent whose overlay denies Write
is denied before a mode is looked at). Were the hooks lost, the CLI would ask instead.

- ``bypassPermissions`` (the caller's ``--dangerously-skip-permissions`` or mode): every call.
- ``acceptEdits``: the file-editing tools on a path inside the working directories (the cwd and
  each ``--add-dir``) but for ``.claude/`` and ``.git/`` (the CLI asks about those: probed on
  2.1.197 and 2.1.330), and a Bash command whose every part is one the CLI runs in that mode
  (``mkdir touch rm rmdir mv cp sed``, plus ``echo``/``printf``) on paths inside them: a subset of
  what the CLI would allow, so the rest is asked, never allowed.
- every other mode: nothing (``auto``'s classifier is the CLI's; under the guard it asks).

The mode is the one the session asked for (``session.json`` ``mode``), or, for the main agent,
the one its event names when that is not the mode the CLI was started in: a person changed it at
the keyboard (Shift+Tab, or approving a plan). A subagent's event is not taken at its word: an
agent file's ``permissionMode`` is the repository's, not the person's.
"""

from __future__ import annotations

import os

from claudeguard.decision import Decision

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.gate.session import Session

EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
# What 2.1.197 and 2.1.330 run in acceptEdits without asking (their `acceptEdits` Bash commands)
ACCEPT_EDITS_BASH = frozenset({"mkdir", "touch", "rm", "rmdir", "mv", "cp", "sed"})
OUTPUT_ONLY = frozenset({"echo", "printf", "true", ":"})
# Directories inside a working directory the CLI asks about even in acceptEdits
SENSITIVE = (".claude", ".git")
SOURCE = "permission mode"


def effective_mode(session: Session, event_mode: str | None, agent_type: str | None) -> str | None:
    """The mode whose allowances apply to this call (see the module docstring)."""
    spec = session.snapshot.get("mode")
    if not isinstance(spec, dict):
        return event_mode  # a session made before the guard gave the CLI its own mode
    asked = spec.get("asked")
    if agent_type is None and event_mode and event_mode != spec.get("cli"):
        return event_mode
    return asked if isinstance(asked, str) else None


def mode_allows(session: Session, tool: str, tool_input: dict[str, Any], mode: str | None,
                cwd: str) -> Decision | None:
    """An allow when ``mode`` would let the CLI run this call no rule decides; else None."""
    if mode == "bypassPermissions":
        return Decision("allow", f"claudeguard: {tool} allowed by the session's permission mode bypassPermissions.",
                        rule="bypassPermissions", source=SOURCE)
    if mode != "acceptEdits":
        return None
    spec = session.snapshot.get("mode") or {}
    dirs = [d for d in (spec.get("dirs") if isinstance(spec, dict) else None) or [cwd] if isinstance(d, str)]
    if tool in EDIT_TOOLS:
        path = tool_input.get("file_path") or tool_input.get("notebook_path")
        ok = isinstance(path, str) and bool(path) and _inside(path, cwd, dirs)
    elif tool == "Bash":
        ok = _bash_edits_inside(tool_input.get("command"), cwd, dirs)
    else:
        ok = False
    if not ok:
        return None
    return Decision("allow", f"claudeguard: {tool} allowed by the session's permission mode acceptEdits (inside the "
                    f"working directories).", rule="acceptEdits", source=SOURCE)


def _real(path: str) -> str:
    return os.path.realpath(path)


def _inside(path: str, cwd: str, dirs: list[str]) -> bool:
    full = _real(os.path.join(cwd, os.path.expanduser(path)))
    for d in dirs:
        root = _real(d)
        if full == root or full.startswith(root.rstrip("/") + "/"):
            parts = full[len(root):].strip("/").split("/")
            return not any(p in SENSITIVE for p in parts)
    return False


def _bash_edits_inside(command: object, cwd: str, dirs: list[str]) -> bool:
    if not isinstance(command, str) or not command.strip():
        return False
    from claudeguard.policy.bash import split_command

    split = split_command(command)
    if not split.ok or not split.invocations:
        return False
    home = os.environ.get("HOME") or os.path.expanduser("~")
    for inv in split.invocations:
        name = inv.words[0] if inv.words else ""
        if inv.runs_path is not None or name not in ACCEPT_EDITS_BASH | OUTPUT_ONLY:
            return False
        if name in ACCEPT_EDITS_BASH:
            operands = [w for w in inv.words[1:] if not w.startswith("-")]
            if not operands or not all(_inside(w, cwd, dirs) for w in operands):
                return False
    for target in split.writes:
        path = target.absolute(cwd, home)
        if path is None or not _inside(path, cwd, dirs):
            return False
    return True
