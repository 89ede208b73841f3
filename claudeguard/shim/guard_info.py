"""``claudeguard --guard-help`` and ``--guard-version``: what the guard in front of ``claude``
is, which options it takes and which real CLI it runs. ``--help`` and ``--version`` stay the
real CLI's, byte for byte (scripts read them). Nothing starts; exit 0.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from claudeguard import __version__
from claudeguard.config.find import any_config, user_config_file
from claudeguard.config.load import env_overrides, load_config
from claudeguard.errors import GuardError
from claudeguard.plan.cli_version import cli_version
from claudeguard.plan.discovery import find_claude
from claudeguard.plan.options import GUARD_HELP

USAGE = """\
usage: claudeguard [--guard-OPTION ...] [CLAUDE ARGS ...]
       claudeguard <absolute path of a Claude Code CLI> [CLAUDE ARGS ...]   (an IDE's process wrapper)

claudeguard runs the real Claude Code CLI with its permission policy, approval channel, sandbox
and watchdog. Every argument that is not a --guard-* option reaches the CLI unchanged and in
order; `--help` and `--version` are the CLI's own.
"""

TAIL = """\
The real CLI: a first argument that is a Claude Code CLI, else CLAUDEGUARD_CLAUDE, else claude.path
in the config, else `claude` on PATH (claudeguard itself skipped). CLAUDEGUARD_DISABLE=1 runs it
with no guard (refused under lockdown).
Config: {config} (claudeguardctl config init), then .claudeguard.toml in the project.
Operator commands: claudeguardctl --help (pending, approve, deny, console, ps, audit, doctor, ...).
"""


def guard_help() -> int:
    lines = [USAGE, "guard options:"]
    for option, (value, env, meaning) in GUARD_HELP.items():
        left = f"  {option}{' ' + value if value else ''}"
        lines.append(f"{left:<46}{meaning}{f' (env {env})' if env else ''}")
    lines += ["", TAIL.format(config=user_config_file())]
    sys.stdout.write("\n".join(lines))
    return 0


def guard_version(given: str | None, cwd: str) -> int:
    """claudeguard's version and where it runs from, then the real CLI it would run (or why none)."""
    print(f"claudeguard {__version__} ({os.path.dirname(os.path.dirname(os.path.abspath(__file__)))})")
    configured, where = None, "config claude.path"
    try:
        if any_config(cwd):
            cfg = load_config(Path(cwd), env_overrides())
            configured, where = cfg.claude_path(), f"claude.path ({cfg.source('claude.path')})"
    except GuardError as exc:
        print(f"config: {exc}")
    try:
        real = find_claude(configured, configured_source=where, given=given)
    except GuardError as exc:
        print(f"real CLI: {exc}")
        return 0
    version = cli_version(real)
    print(f"real CLI: Claude Code {version} ({real})" if version else f"real CLI: {real} (not a Claude Code CLI "
                                                                        f"claudeguard recognises: version unknown)")
    return 0
