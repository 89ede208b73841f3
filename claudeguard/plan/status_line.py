"""The guard's part of the CLI's status line, in a session with a person at the terminal: what
waits in the approval channel for this session and the command that answers it, under the line
the user's own ``statusLine`` draws.

The CLI shows one ``statusLine`` (the last source that sets one wins; the guard's ``--settings``
is above the user's, the project's and the local file, below managed settings, where a managed
``statusLine`` then hides the guard's part). So the guard's ``statusLine`` is a command of its own,
``fast_entry.py statusline SESSION_DIR`` (``gate/status_line.py``), that runs the one the CLI
would have run without it (recorded here in ``<session dir>/status_line.json``, 0600) with the
same input, and adds its own line when something waits. ``refreshInterval`` (both pinned CLIs)
re-runs it every few seconds, so a request that arrives while nothing else changes is shown.

Which ``statusLine`` applies is repository code like a hook when it comes from the project or
local file: ``applies`` is the seam where the trust of such a file is decided (issue 24, part C);
until then the CLI's own order is kept.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Callable, TypedDict

    from claudeguard.plan.claude_args import ClaudeArgs
    from claudeguard.plan.settings_sources import Source

    class StatusLineSetting(TypedDict, total=False):
        """The ``statusLine`` value of Claude Code's settings."""

        type: str
        command: str
        padding: int
        refreshInterval: int

    class UsersStatusLine(TypedDict, total=False):
        """``status_line.json``: the statusLine the CLI would have run (none: {})."""

        command: str
        padding: int
        source: str  # the settings source it came from, for people


STATUS_LINE_FILE = "status_line.json"
REFRESH_S = 2  # seconds between the CLI's runs of the status line command, besides its own events


def users_status_line(srcs: list[Source], applies: Callable[[Source], bool] | None = None) -> UsersStatusLine:
    """The statusLine the CLI would run without the guard: the last loaded source that sets a
    command one (managed settings included: theirs wins over the guard's anyway) and ``applies``."""
    found: UsersStatusLine = {}
    for src in srcs:
        value = src.settings.get("statusLine")
        if not (src.loaded and isinstance(value, dict) and value.get("type", "command") == "command"
                and isinstance(value.get("command"), str) and value["command"].strip()):
            continue
        if applies is not None and not applies(src):
            continue
        found = {"command": value["command"], "source": src.where}
        if isinstance(value.get("padding"), int):
            found["padding"] = value["padding"]
    return found


def status_line_setting(args: ClaudeArgs, cwd: str, session_dir: str, ctl: list[str],
                        env: dict[str, str] | None = None,
                        applies: Callable[[Source], bool] | None = None) -> StatusLineSetting:
    """The guard's ``statusLine`` for the CLI's ``--settings``; records the one it composes with
    in ``session_dir``."""
    import shlex

    from claudeguard.files import write_atomic
    from claudeguard.plan.settings_sources import sources

    users = users_status_line(sources(args, cwd, os.environ if env is None else env), applies)
    write_atomic(os.path.join(session_dir, STATUS_LINE_FILE), json.dumps(users))
    setting: StatusLineSetting = {"type": "command",
                                  "command": " ".join(shlex.quote(p) for p in [*ctl, "statusline", session_dir]),
                                  "refreshInterval": REFRESH_S}
    if "padding" in users:
        setting["padding"] = users["padding"]
    return setting
