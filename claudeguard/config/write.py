"""Write to config files without losing what the user wrote: tomlkit keeps comments, order and
layout. Used by ``approve/deny --scope forever`` (add one rule) and ``config init``."""

from __future__ import annotations

import os
from pathlib import Path

from claudeguard.errors import ConfigError

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
timeout = 600                      # seconds a request waits; then on_timeout decides
on_timeout = "deny"
# notify = ["notify-send", "claudeguard", "{summary}"]
idle_before_channel = 30           # seconds a dialog may sit unanswered at the keyboard

[watchdog]
stall_after = 300                  # no progress while waiting on the model
tool_stall_after = 1800            # no progress while a tool runs
on_stall = "warn"                  # warn | interrupt | kill (exit 124)

# [security]
# disable_bypass_permissions = true   # lockdown: nothing may loosen the guard (user file only)
# allow_settings_override = true      # run even where Claude Code settings silence the guard (not under lockdown)

# [profiles.ci]
# permissions.mode = "dontAsk"
'''


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_starter(path: Path) -> None:
    if path.exists():
        raise ConfigError(f"{path}: already exists; not overwriting it")
    _atomic_write(path, STARTER)


def add_rule(path: Path, kind: str, rule: str) -> bool:
    """Add ``rule`` to ``[permissions].<kind>`` of ``path`` (created if missing). Returns False
    when the rule was already there. The file is validated before and after."""
    import tomlkit

    try:
        text = path.read_text() if path.exists() else ""
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        doc = tomlkit.parse(text)
    except Exception as exc:  # noqa: BLE001 - tomlkit raises its own ParseError hierarchy
        raise ConfigError(f"{path}: invalid TOML, not changing it: {exc}") from None
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
