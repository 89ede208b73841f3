"""The keys a claudeguard config file may hold, their types, and their defaults.

A key is addressed by its dotted path inside a section (``approval.timeout``). Sections whose
names are free (``agents.TYPE``, ``profiles.NAME``) are described by a template.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

PERMISSION_MODES = ("default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions", "manual")
RULE_KINDS = ("allow", "deny", "ask")


class Key:
    __slots__ = ("type", "default", "choices", "minimum")

    def __init__(self, type: str, default: Any = None, choices: tuple[str, ...] = (),
                 minimum: float | None = None) -> None:
        self.type = type  # "str" | "bool" | "number" | "rules" | "strlist"
        self.default = default
        self.choices = choices
        self.minimum = minimum

    def __repr__(self) -> str:
        return f"Key(type={self.type!r}, default={self.default!r}, choices={self.choices!r}, minimum={self.minimum!r})"


DEFAULT_BLOCKED_TOOLS = ["Agent", "AskUserQuestion", "EnterPlanMode", "ExitPlanMode", "KillShell"]

# section -> key -> Key. "rules" lists extend across layers unless the section sets replace = true;
# every other value (lists of plain strings included) is replaced by a later layer.
SECTIONS: dict[str, dict[str, Key]] = {
    "claude": {"path": Key("str")},
    "permissions": {
        "mode": Key("str", choices=PERMISSION_MODES),
        "allow": Key("rules", []),
        "deny": Key("rules", []),
        "ask": Key("rules", []),
        "replace": Key("bool", False),
    },
    "subagents": {
        "blocked_tools": Key("strlist", DEFAULT_BLOCKED_TOOLS),
        "read_only_types": Key("strlist", ["Explore", "Plan"]),
        "background": Key("str", "like-foreground", choices=("like-foreground", "deny")),
    },
    "approval": {
        "timeout": Key("number", 600.0, minimum=0.001),
        "on_timeout": Key("str", "deny", choices=("deny", "allow")),
        "notify": Key("strlist", []),
        "idle_before_channel": Key("number", 30.0, minimum=0),
    },
    "watchdog": {
        "stall_after": Key("number", 300.0, minimum=0.001),
        "tool_stall_after": Key("number", 1800.0, minimum=0.001),
        "on_stall": Key("str", "warn", choices=("warn", "interrupt", "kill")),
        "sample_interval": Key("number", 1.0, minimum=0.05),
        "kill_grace": Key("number", 5.0, minimum=0),
    },
    "security": {"disable_bypass_permissions": Key("bool", False), "allow_settings_override": Key("bool", False)},
}

AGENT_SECTION: dict[str, Key] = {
    "allow": Key("rules", []),
    "deny": Key("rules", []),
    "ask": Key("rules", []),
    "replace": Key("bool", False),
}

# What a [profiles.NAME] table may hold: every section but profiles and security.
PROFILE_SECTIONS = tuple(s for s in SECTIONS if s != "security") + ("agents",)


def default_values() -> dict[str, Any]:
    """Flat ``section.key -> default`` for every key that has one."""
    out: dict[str, Any] = {}
    for section, keys in SECTIONS.items():
        for name, key in keys.items():
            if key.default is not None and key.type != "rules" and name != "replace":
                out[f"{section}.{name}"] = key.default
    return out
