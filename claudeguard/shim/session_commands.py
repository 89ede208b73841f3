"""Lockdown for the real CLI's sub-commands that start sessions (2.1.330: background agents).

The guard passes sub-commands through untouched, and the argv parser stops reading at the
sub-command's name, so the flags after it were never seen: ``claude agents
--dangerously-skip-permissions`` dispatched bypass sessions under lockdown. Here:

- ``agents``: its own options are read (``--dangerously-skip-permissions``,
  ``--allow-dangerously-skip-permissions``, ``--permission-mode bypassPermissions`` in both
  spellings, ``--settings`` that set bypass or drop hooks) and refused like the same flags of a
  session. The scan is deliberately blunt: every word after ``agents`` that names a bypass flag
  counts, whatever option might have taken it as a value (fail closed).
- ``respawn`` and ``attach`` take no permission flags (2.1.330 rejects them: "unknown option"),
  but they restart a session with the flags recorded at its launch (``respawnFlags`` in
  ``<config dir>/jobs/<short id>/state.json``): one recorded with a bypass flag is refused.

``--bg`` (and ``--resume ID --bg``) is a session command line: ``plan.argv.check_lockdown`` covers it.

Every other sub-command is judged by what it does (``plan.claude_args``: ``ClaudeArgs.kind``,
``check_command``; docs/design.md "How argv is read").
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from claudeguard.errors import UsageError
from claudeguard.plan.argv import check_lockdown
from claudeguard.plan.claude_args import ClaudeArgs, command_args

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.config.load import Config

# Sub-commands that start (or restart) sessions; the others (stop, rm, logs, ...) never do.
STARTS_SESSIONS = frozenset({"agents", "respawn", "attach"})
_BYPASS_FLAGS = ("--dangerously-skip-permissions", "--allow-dangerously-skip-permissions")
# Options of `claude agents` whose value the lockdown check must see.
_VALUED = frozenset({"--permission-mode", "--settings"})


def tail_args(argv: list[str]) -> ClaudeArgs:
    """The options of a sub-command's own words as a ``ClaudeArgs`` (for ``check_lockdown``)."""
    out = ClaudeArgs(list(argv))
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            break
        if word.startswith("-"):
            name, eq, inline = word.partition("=")
            if eq:
                vals = [inline]
            elif name in _VALUED and i + 1 < len(argv):
                vals = [argv[i + 1]]
            else:
                vals = []
            out.options.setdefault(name, []).append((i, vals))
        i += 1
    return out


def check_subcommand_lockdown(args: ClaudeArgs, cfg: Config, env: dict[str, str] | None = None) -> None:
    """Refuse (UsageError, exit 2) a session-starting sub-command that would loosen the guard."""
    if not cfg.lockdown.value or args.subcommand not in STARTS_SESSIONS:
        return
    index = args.subcommand_index if args.subcommand_index is not None else len(args.argv)
    tail = args.argv[index + 1 :]
    why = f"lockdown ({cfg.lockdown.source})"
    if args.subcommand == "agents":
        try:
            check_lockdown(tail_args(tail), cfg)
        except UsageError as exc:
            raise UsageError(f"agents: {exc}") from None
        # its hidden option: the mode its sessions take from agent view's own
        if command_args(args).last("--inherit-permission-mode") == "bypassPermissions":
            raise UsageError(f"agents: --inherit-permission-mode bypassPermissions is refused: {why}")
        return
    _check_recorded_flags(args.subcommand, tail, env if env is not None else dict(os.environ), why)


def check_agent_view(args: ClaudeArgs, cfg: Config, why: str) -> None:
    """Agent view that cannot be guarded (``why``: no guard service): its dispatched sessions
    would run without the guard. Never pretend: one line before anything runs; under lockdown,
    refused (``shim/agent_view.py`` guards it whenever the service can be had)."""
    if args.subcommand != "agents":
        return
    line = f"sessions dispatched from agent view (claude agents) are not guarded: {why}"
    if cfg.lockdown.value:
        raise UsageError(f"{line}; refused under lockdown ({cfg.lockdown.source})")

    print(f"claudeguard: {line}", file=sys.stderr, flush=True)


def _config_dir(env: dict[str, str]) -> Path:
    explicit = env.get("CLAUDE_CONFIG_DIR")
    return Path(explicit) if explicit else Path(env.get("HOME") or os.path.expanduser("~")) / ".claude"


def _recorded_jobs(env: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """(short id, state.json) of every background session the CLI recorded."""
    jobs = _config_dir(env) / "jobs"
    out: list[tuple[str, dict[str, Any]]] = []
    try:
        names = sorted(os.listdir(jobs))
    except OSError:
        return out
    for name in names:
        try:
            data = json.loads((jobs / name / "state.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out.append((name, data))
    return out


def _matches(word: str, short: str, state: dict[str, Any]) -> bool:
    """Could ``word`` (an id, a full session id, or part of a name) pick this session? The CLI
    also takes part of a name, so anything it might resolve to counts (fail closed)."""
    low = word.lower()
    name = str(state.get("name") or "")
    return (short.startswith(low) or str(state.get("sessionId") or "").lower().startswith(low)
            or (bool(low) and low in name.lower()))


def _bypass_in(flags: list[Any]) -> str | None:
    words = [str(f) for f in flags]
    for i, word in enumerate(words):
        name, eq, inline = word.partition("=")
        if name in _BYPASS_FLAGS:
            return name
        if name == "--permission-mode":
            value = inline if eq else (words[i + 1] if i + 1 < len(words) else "")
            if value == "bypassPermissions":
                return "--permission-mode bypassPermissions"
    return None


def _check_recorded_flags(sub: str, tail: list[str], env: dict[str, str], why: str) -> None:
    words = [w for w in tail if not w.startswith("-")]
    everything = "--all" in tail
    for short, state in _recorded_jobs(env):
        if not everything and not any(_matches(w, short, state) for w in words):
            continue
        flags = state.get("respawnFlags")
        bypass = _bypass_in(flags if isinstance(flags, list) else [])
        if bypass:
            raise UsageError(f"{sub} {short} is refused: that background session was started with {bypass}: {why}")
