"""The start's memory files, for a CLI that reads their imports whatever its rules say.

Claude Code 2.1.197 reads a memory file's ``@``-imports without holding them to its ``Read`` deny
rules, and follows a link in the project to a file outside it (``policy/memory_imports.py``): a
repository's CLAUDE.md could bring the user's ``.env``, or a file of the guard's runtime dir,
into the model's context at the session's start, before any hook runs. For such a CLI (older than
``HELD_FROM``, or of no known version) the plan reads the memory files that start reads (the cwd
and each directory above it, the ``--add-dir`` dirs, the user's own) with what they import, and
refuses the session, one line naming the file and the line, when one is a path the session's
policy (its rules, the built-in protected paths) keeps from reading, for any agent. A CLI from
``HELD_FROM`` on holds its rules itself (the guard gives them as ``--disallowedTools``).
"""

from __future__ import annotations

import os

from claudeguard.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Mapping

    from claudeguard.config.load import Config
    from claudeguard.plan.claude_args import ClaudeArgs

# The first CLI measured to hold its Read deny rules on memory imports, and to take a link to a
# file outside the project as outside (2.1.330 and 2.1.332 do; 2.1.197 does neither).
HELD_FROM = (2, 1, 330)


def rules_held(cli_version: str | None) -> bool:
    """Whether the CLI holds its own Read rules on its memory files' imports."""
    from claudeguard.plan.discovery import version_at_least

    return version_at_least(cli_version, HELD_FROM)


def start_dirs(args: ClaudeArgs, cwd: str) -> list[str]:
    """The directories whose memory files the CLI reads at its start: the cwd and each above it,
    and the ``--add-dir`` dirs (read when CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD is set:
    taken always here)."""
    from claudeguard.policy.memory_imports import ancestors

    out = ancestors(cwd)
    out += [os.path.normpath(os.path.join(cwd, os.path.expanduser(d))) for d in args.values("--add-dir")]
    return out


def check(args: ClaudeArgs, cfg: Config, cwd: str, real_cli: str) -> None:
    """Refuse (UsageError, exit 2) a session whose CLI would read, at its start, an import the
    policy keeps from reading (a deny, on a CLI that does not hold its rules; an ask, on any:
    the CLI is given no ask rules) or, on a CLI that does not hold them, a denied memory file."""
    from claudeguard.plan.cli_version import cli_version

    version = cli_version(real_cli)
    held = rules_held(version)
    spec = cfg.policy_spec()
    if held and not _asks_reading(spec):
        return  # the newest CLI's common case: one version comparison, one look at the ask rules
    from claudeguard.policy.memory_imports import kept_import, memory_files, user_memory_files

    home = os.path.expanduser("~")
    mine = user_memory_files(home)
    from claudeguard.config.trust import not_trusted

    files = not_trusted([f for d in start_dirs(args, cwd) for f in memory_files(d)] + mine)
    if not files:
        return
    from claudeguard.plan.settings_sources import protected_spec
    from claudeguard.policy.decide import policy_from_spec

    policy = policy_from_spec({**spec, "protected": protected_spec(args, cwd, cfg=cfg)})
    found = kept_import(policy, files, [None, *policy.agents], cwd, home, held=held, user_files=mine)
    if found is None:
        return
    from claudeguard.config.trust import command_for

    if held:
        raise UsageError(f"{found.line_text()}: the CLI reads a memory file's imports without asking: refused; "
                         f"remove the import or the ask rule, or trust the file ({command_for(found.file)})")
    which = f"Claude Code {version}" if version else "a Claude Code of no known version"
    raise UsageError(f"{found.line_text()}: {which} reads a memory file's imports whatever its rules say "
                     f"(2.1.330 and later hold them): refused; remove the import, or run a newer Claude Code")


def _asks_reading(spec: Mapping[str, Any]) -> bool:
    """Whether a policy spec has a ``Read`` ask rule for any agent (without parsing the policy)."""
    tables = [spec.get("permissions") or {}, *(spec.get("agents") or {}).values()]
    for table in tables:
        for entry in (table or {}).get("ask") or []:
            rule = entry.get("rule") if isinstance(entry, dict) else entry
            if isinstance(rule, str) and (rule == "Read" or rule.startswith("Read(")):
                return True
    return False
