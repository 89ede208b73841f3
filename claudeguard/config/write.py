"""Write to config files without losing what the user wrote: tomlkit keeps comments, order and
layout. Used by ``approve/deny --scope forever`` (add one rule) and ``config init``."""

from __future__ import annotations

import re

import tomlkit

from claudeguard.errors import ConfigError
from claudeguard.files import make_dirs, write_atomic

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from pathlib import Path

    from tomlkit import TOMLDocument

STARTER = '''\
# claudeguard configuration. Layers, later ones winning: this user file, the nearest project
# .claudeguard.toml, [profiles.NAME] (--guard-profile), CLAUDEGUARD_CONFIG, --guard-config.
# Rules use Claude Code's own syntax: Tool or Tool(specifier).

[permissions]                      # every agent, main and subagents
# mode = "acceptEdits"             # injected unless you pass --permission-mode yourself
allow = ["Bash(git status)", "Bash(git diff *)"]
deny = ["Bash(rm -rf *)", "Read(./.env)"]
ask = ["Bash(git push *)"]         # always goes to a human through the approval channel

# [agents.Explore]                 # overlay by subagent type; replace = true drops [permissions]
# allow = ["Read", "Grep", "Glob"]

[subagents]
# blocked_tools = ["Agent", "AskUserQuestion", "EnterPlanMode", "ExitPlanMode", "KillShell"]
background = "like-foreground"     # background subagents get the same answers as foreground ones

[approval]
timeout = "10m"                    # how long a request waits (90s, 10m, 1h, or seconds); then on_timeout decides
on_timeout = "deny"
# notify = ["notify-send", "claudeguard", "{summary}"]
idle_before_channel = 30           # seconds a dialog may sit unanswered at the keyboard

[watchdog]
stall_after = "5m"                 # no progress while waiting on the model
tool_stall_after = "30m"           # no progress while a tool runs
on_stall = "warn"                  # warn | interrupt | kill (exit 124)

# [security]
# disable_bypass_permissions = true   # lockdown: nothing may loosen the guard (user file only)
# allow_settings_override = true      # run even where Claude Code settings silence the guard (not under lockdown)
# allow_unguarded = true              # run what no hook reaches: `mcp serve`, --bare, SIMPLE (not under lockdown)
# require_verified_cli = true         # refuse a CLI `claudeguardctl doctor --verify` has not passed (lockdown: always)

# [profiles.ci]
# permissions.mode = "dontAsk"
'''


def _atomic_write(path: Path, text: str) -> None:
    make_dirs(path.parent)  # the user's config dir (and its missing parents) 0700: it holds fleet.pw too
    write_atomic(path, text, keep_mode=True, durable=True)  # the user's file: synced, mode kept


def write_starter(path: Path) -> None:
    if path.exists():
        raise ConfigError(f"{path}: already exists; not overwriting it")
    _atomic_write(path, STARTER)


def add_rule(path: Path, kind: str, rule: str) -> bool:
    """Add ``rule`` to ``[permissions].<kind>`` of ``path`` (created if missing). Returns False
    when the rule was already there. The file is validated before and after."""
    doc = _parse_for_edit(path)
    perms = doc.get("permissions")
    if perms is None:
        perms = tomlkit.table()
        doc["permissions"] = perms
    rules = perms.get(kind)
    if rules is None:
        rules = tomlkit.array()
        perms[kind] = rules
    if rule in list(rules):
        return False
    rules.append(rule)
    if len(rules) > 1:
        rules.multiline(True)
    _atomic_write(path, tomlkit.dumps(doc))
    return True


KINDS = ("allow", "deny", "ask")


def _parse_for_edit(path: Path) -> TOMLDocument:
    try:
        text = path.read_text() if path.exists() else ""
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        doc = tomlkit.parse(text)
    except Exception as exc:  # noqa: BLE001 - tomlkit raises its own ParseError hierarchy
        raise ConfigError(f"{path}: invalid TOML, not changing it: {exc}") from None
    perms = doc.get("permissions")
    if perms is not None and not isinstance(perms, dict):
        raise ConfigError(f"{path}: permissions is not a table; not changing it")
    for kind in KINDS:
        value = (perms or {}).get(kind)
        if value is not None and not isinstance(value, list):
            raise ConfigError(f"{path}: permissions.{kind} is not a list; not changing it")
    return doc


def existing_rules(path: Path) -> set[str]:
    """Every rule text in ``[permissions]`` allow/deny/ask of ``path`` (empty when it does not
    exist); ConfigError when it cannot be read or parsed."""
    doc = _parse_for_edit(path)
    perms = doc.get("permissions") or {}
    return {str(rule) for kind in KINDS for rule in (perms.get(kind) or [])}


def add_rules(path: Path, rules: dict[str, list[tuple[str, str]]]) -> dict[str, list[str]]:
    """Add ``(rule, comment)`` pairs to ``[permissions].<kind>`` of ``path`` in one write (all or
    nothing), each on its own line with its comment. A rule already in allow, deny or ask is
    left out; the file is created when missing. Returns what was added, by kind."""
    doc = _parse_for_edit(path)
    perms = doc.get("permissions")
    present = existing_rules(path)
    added: dict[str, list[str]] = {}
    for kind, pairs in rules.items():
        new = [(r, c) for r, c in dict(pairs).items() if r not in present]
        added[kind] = [r for r, _ in new]
        if not new:
            continue
        if perms is None:
            perms = tomlkit.table()
            doc["permissions"] = perms
        old = perms.get(kind)
        text = old.as_string() if old is not None else "[]"
        if old is None or (len(old) and "\n" not in text):
            # None yet, or all on one line: a new array, one rule a line (comments need lines).
            arr = tomlkit.array()
            for rule in old or []:
                arr.add_line(str(rule))
            if old is not None and old.trivia.comment:
                arr.comment(old.trivia.comment.lstrip("# "))
            perms[kind] = arr
            closing = True
        else:
            arr = old
            closing = not text.rstrip("]").rstrip(" \t").endswith("\n")
        indent = _indent_of(text) or "    "
        for rule, comment in new:
            arr.add_line(rule, indent=indent, comment=comment or None)
            present.add(rule)
        if closing:
            arr.add_line(indent="")
    if any(added.values()):
        _atomic_write(path, tomlkit.dumps(doc))
    return added


def _indent_of(array_text: str) -> str | None:
    """The indentation of the first element line of a multi-line array, if there is one."""
    m = re.search(r"\n([ \t]+)\S", array_text)
    return m.group(1) if m else None
