"""The keys a claudeguard config file may hold, their types, and their defaults.

A key is addressed by its dotted path inside a section (``approval.timeout``). Sections whose
names are free (``agents.TYPE``, ``profiles.NAME``) are described by a template.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import TypedDict, Union

    # A config value: what a key of the schema holds (a number is a float once read).
    Value = Union[str, bool, float, list[str], None]

    # The sections as the rest of the package reads them (``load.Config``'s accessors), each key
    # with its type; the defaults are below, in SECTIONS.
    class ApprovalSettings(TypedDict, total=False):
        """``[approval]``, as ``session.json`` carries it to the hooks (built by ``Config.approval``,
        with every key; a snapshot written by hand may lack some, so its readers have defaults)."""

        timeout: float  # seconds a request waits for an answer
        on_timeout: str  # "deny" | "allow"
        notify: list[str]  # a command and its arguments, with placeholders
        idle_before_channel: float  # an interactive dialog's head start for the keyboard (0: none)

    class WatchdogSettings(TypedDict):
        """``[watchdog]``."""

        stall_after: float
        tool_stall_after: float
        on_stall: str  # "warn" | "interrupt" | "kill"
        sample_interval: float
        kill_grace: float

    class SubagentsSettings(TypedDict):
        """``[subagents]``."""

        blocked_tools: list[str]
        read_only_types: list[str]
        background: str  # "like-foreground" | "deny"

    class SecuritySettings(TypedDict):
        """``[security]``."""

        disable_bypass_permissions: bool
        allow_settings_override: bool
        # run what no hook of the guard reaches (--bare, SIMPLE, --safe-mode, `mcp serve`); never under lockdown
        allow_unguarded: bool
        require_verified_cli: bool  # refuse a CLI binary `doctor --verify` has not passed (plan.verified)
        sandbox: str  # "auto" | "require" | "off" (lockdown makes it "require": Config.security)

    class SandboxSettings(TypedDict):
        """``[sandbox]``: the box's widenings (``plan.sandbox``), ``~`` expanded."""

        allow_write: list[str]  # paths a boxed command may write besides the project and its /tmp
        network: str  # "host" | "none"
        allow_unix_sockets: bool  # lifts the box's AF_UNIX block (docker.sock, D-Bus, ...)
        bwrap: str | None  # the bubblewrap program (default: bwrap on PATH)

    class RuleSpec(TypedDict):
        """One rule as the policy spec carries it: the rule, where it came from, and the root its
        ``/path`` rules are anchored at."""

        rule: str
        source: str
        root: str

    class AgentSpec(TypedDict):
        """``[agents.TYPE]`` in the policy spec: its rules by kind, and whether they replace."""

        replace: bool
        allow: list[RuleSpec]
        deny: list[RuleSpec]
        ask: list[RuleSpec]

    class ProtectedSpec(TypedDict, total=False):
        """The built-in protected paths (``policy.protect``): [path, why] pairs no tool may read
        or write (``reads``), no tool may write (``writes``), and the CLI's writing tools write
        only once a human said yes (``asks``: files the user's editor or tools run later)."""

        reads: list[list[str]]
        writes: list[list[str]]
        asks: list[list[str]]

    class PolicySpec(TypedDict, total=False):
        """The JSON-able policy a session's hooks decide by (``Config.policy_spec``, then the
        launcher's additions), as ``claudeguard.policy.decide.policy_from_spec`` reads it (every
        key with a default: a snapshot written by hand may lack some)."""

        permissions: dict[str, list[RuleSpec]]  # "allow" | "deny" | "ask" -> rules
        agents: dict[str, AgentSpec]
        subagents: SubagentsSettings
        claude_allow: list[RuleSpec]  # the allow rules the CLI itself applies (plan.session)
        lockdown: bool
        protected: ProtectedSpec  # the built-in protected paths (plan.session.protected_spec)

# Defaults that code outside this table needs too (one place for each): the watchdog's own
# defaults (watchdog.monitor.WatchConfig, watchdog.state.Limits, `ps` of unguarded CLIs) and the
# approval deadline of a snapshot or a relay that names none.
APPROVAL_TIMEOUT_S = 600.0
IDLE_BEFORE_CHANNEL_S = 30.0
STALL_AFTER_S = 300.0
TOOL_STALL_AFTER_S = 1800.0
SAMPLE_INTERVAL_S = 1.0
KILL_GRACE_S = 5.0

SANDBOX_MODES = ("auto", "require", "off")
PERMISSION_MODES = ("default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions", "manual")
RULE_KINDS = ("allow", "deny", "ask")


class Key:
    __slots__ = ("type", "default", "choices", "minimum")

    def __init__(self, type: str, default: Value = None, choices: tuple[str, ...] = (),
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
        "timeout": Key("number", APPROVAL_TIMEOUT_S, minimum=0.001),
        "on_timeout": Key("str", "deny", choices=("deny", "allow")),
        "notify": Key("strlist", []),
        "idle_before_channel": Key("number", IDLE_BEFORE_CHANNEL_S, minimum=0),
    },
    "watchdog": {
        "stall_after": Key("number", STALL_AFTER_S, minimum=0.001),
        "tool_stall_after": Key("number", TOOL_STALL_AFTER_S, minimum=0.001),
        "on_stall": Key("str", "warn", choices=("warn", "interrupt", "kill")),
        "sample_interval": Key("number", SAMPLE_INTERVAL_S, minimum=0.05),
        "kill_grace": Key("number", KILL_GRACE_S, minimum=0),
    },
    "security": {"disable_bypass_permissions": Key("bool", False), "allow_settings_override": Key("bool", False),
                 "allow_unguarded": Key("bool", False), "require_verified_cli": Key("bool", False),
                 "sandbox": Key("str", "auto", choices=SANDBOX_MODES)},
    # The box every Bash call runs in (plan/sandbox.py): widenings only the user's own files may
    # give (config.load.validate), never over the guard's own paths (plan.sandbox.check_config).
    "sandbox": {
        "allow_write": Key("strlist", []),
        "network": Key("str", "host", choices=("host", "none")),
        "allow_unix_sockets": Key("bool", False),
        "bwrap": Key("str"),
    },
    # The fleet (claudeguard/fleet/, docs/design.md "The fleet"): which Redis carries this
    # machine's requests and whose answers come back. Only the user's own files may name it (a
    # repository that named its own Redis would send the requests, and take the answers, there);
    # claudeguard.fleet.config checks the values (Config.fleet).
    "fleet": {name: Key("str") for name in ("url", "username", "password_env", "password_file", "machine", "prefix",
                                            "ca_file", "approver", "approver_password_env",
                                            "approver_password_file")},
}

AGENT_SECTION: dict[str, Key] = {
    "allow": Key("rules", []),
    "deny": Key("rules", []),
    "ask": Key("rules", []),
    "replace": Key("bool", False),
}

# The sections only a trusted layer (the user file, CLAUDEGUARD_CONFIG) may set.
TRUSTED_SECTIONS = ("security", "sandbox", "fleet")
# What a [profiles.NAME] table may hold: every section but profiles and the trusted ones.
PROFILE_SECTIONS = tuple(s for s in SECTIONS if s not in TRUSTED_SECTIONS) + ("agents",)


def default_values() -> dict[str, Value]:
    """Flat ``section.key -> default`` for every key that has one."""
    out: dict[str, Value] = {}
    for section, keys in SECTIONS.items():
        for name, key in keys.items():
            if key.default is not None and key.type != "rules" and name != "replace":
                out[f"{section}.{name}"] = key.default
    return out
