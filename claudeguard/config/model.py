"""The config's records: a value with its source (``Sourced``), a rule with its source
(``RuleEntry``), one file's layer (``Layer``), the command line's and the environment's
overrides (``Overrides``) and the merged, effective config (``Config``, with its typed views:
``policy_spec``, ``sandbox``, ``watchdog``, ...). ``config.load`` reads, validates and merges
the layers into them.
"""

from __future__ import annotations

import os
from pathlib import Path

from claudeguard.config import schema
from claudeguard.errors import ConfigError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TypedDict

    from claudeguard.config.lines import KeyPath
    from claudeguard.config.schema import (
        AgentSpec, ApprovalSettings, PolicySpec, RuleSpec, SandboxSettings, SecuritySettings, SubagentsSettings, Value,
        WatchdogSettings,
    )

    class ConfigWire(TypedDict):
        """``Config.to_wire``: the config as plain values (each ``Sourced`` a (value, source)
        pair, each ``RuleEntry`` a (rule, source, root) triple, each path a string)."""

        values: dict[str, tuple[Value, str]]
        rules: dict[str, list[tuple[str, str, str]]]
        agent_replace: dict[str, tuple[Value, str]]
        searched: list[tuple[str, str, bool]]
        profile: str | None
        lockdown: tuple[Value, str]
        project_root: str
        untrusted: list[tuple[str, list[str]]]
        layer_trust: list[tuple[str, str, str, bool]]
        binding: list[str]


class Sourced:
    """A value and where it came from: "path:line", "default", "--guard-x", "env NAME"."""

    __slots__ = ("value", "source")

    def __init__(self, value: Value, source: str) -> None:
        self.value = value
        self.source = source

    def __eq__(self, other: object) -> bool:
        return type(other) is Sourced and (self.value, self.source) == (other.value, other.source)

    def __repr__(self) -> str:
        return f"Sourced(value={self.value!r}, source={self.source!r})"


class RuleEntry:
    __slots__ = ("rule", "source", "root")

    def __init__(self, rule: str, source: str, root: str) -> None:
        self.rule = rule
        self.source = source
        self.root = root  # anchors "/p" path rules

    def __eq__(self, other: object) -> bool:
        return (type(other) is RuleEntry
                and (self.rule, self.source, self.root) == (other.rule, other.source, other.root))

    def __repr__(self) -> str:
        return f"RuleEntry(rule={self.rule!r}, source={self.source!r}, root={self.root!r})"

    def as_spec(self) -> RuleSpec:
        return {"rule": self.rule, "source": self.source, "root": self.root}


class Layer:
    def __init__(self, name: str, path: Path, data: dict[str, object], lines: dict[KeyPath, int],
                 prefix: KeyPath = (), trusted: bool = False, owner: str = "user", root: str | None = None) -> None:
        self.root = root  # anchors its "/p" path rules when not its own directory (a trusted copy)
        self.binding = False  # a trusted copy of a file that changed or went: it only tightens
        self.name = name  # "user", "project", "profile NAME", "CLAUDEGUARD_CONFIG", "--guard-config"
        self.path = path
        self.data = data
        self.lines = lines
        self.prefix = prefix  # where `data` sits in the file: ("profiles", NAME) for a profile layer
        self.trusted = trusted  # may set [security]
        # Who wrote it (module docstring): "user", "caller" or "project"; and, for the project's,
        # whether the user trusted this content (config.trust).
        self.owner = owner
        self.content_trusted = False

    def where(self, keypath: KeyPath, value: str | None = None, index: int | None = None) -> str:
        from claudeguard.config.lines import line_of

        line = line_of(self.lines, self.prefix + keypath, value, index)
        return f"{self.path}:{line}" if line else str(self.path)


class Overrides:
    """What the command line (or its environment variables) asked for."""

    def __init__(self, profile: Sourced | None = None, extra_files: list[Sourced] | None = None,
                 values: dict[str, Sourced] | None = None) -> None:
        self.profile = profile
        self.extra_files: list[Sourced] = extra_files if extra_files is not None else []
        self.values: dict[str, Sourced] = values if values is not None else {}  # "watchdog.stall_after" -> ...


class Config:
    def __init__(self, values: dict[str, Sourced], rules: dict[str, list[RuleEntry]], agent_replace: dict[str, Sourced],
                 searched: list[tuple[str, Path, bool]], profile: str | None, lockdown: Sourced,
                 project_root: Path) -> None:
        self.values = values
        self.rules = rules  # "permissions.allow", "agents.Explore.deny", ...
        self.agent_replace = agent_replace
        self.searched = searched  # (layer, path, exists)
        self.profile = profile
        self.lockdown = lockdown
        self.project_root = project_root
        # Files whose loosening was left out because the user has not trusted their content:
        # (file, what was left out); `untrusted_notes` gives the one line per file.
        self.untrusted: list[tuple[str, list[str]]] = []
        # (layer, file, owner, content trusted) of every layer read, for `config show` and doctor.
        self.layer_trust: list[tuple[str, str, str, bool]] = []
        # Project files changed or removed since the user trusted them, whose trusted deny and
        # ask rules still bind (``_binding_layers``): one line each.
        self.binding: list[str] = []

    def untrusted_notes(self) -> list[str]:
        """One line per file whose loosening was ignored: what, and the command that trusts it;
        and one per trusted file that changed or went, whose trusted rules still bind."""
        from claudeguard.config.trust import command_for

        return [f"claudeguard: {path}: not trusted, so its loosening is ignored ({'; '.join(what)}); "
                f"after reviewing it: {command_for(path)}" for path, what in self.untrusted] + self.binding

    def get(self, key: str) -> Value:
        """The value of ``section.key`` (its default if no layer set it); the sections' typed
        accessors below are what the package reads."""
        hit = self.values.get(key)
        return hit.value if hit else None

    def _number(self, key: str) -> float:
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} ({self.source(key)}): not a number")  # the schema's check held this off
        return value  # as the file wrote it (an int stays an int in session.json)

    def _text(self, key: str) -> str | None:
        value = self.get(key)
        return value if isinstance(value, str) else None

    def _texts(self, key: str) -> list[str]:
        value = self.get(key)
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    def claude_path(self) -> str | None:
        """``claude.path``: the real CLI, if the config names it."""
        return self._text("claude.path")

    def permission_mode(self) -> str | None:
        """``permissions.mode``: injected unless the caller chose a mode."""
        return self._text("permissions.mode")

    def approval(self, *, interactive: bool = True) -> ApprovalSettings:
        """``[approval]`` as the hooks read it (``session.json``): built here alone. A run
        nobody watches (not ``interactive``) gives its dialogs no head start."""
        return {
            "timeout": self._number("approval.timeout"),
            "on_timeout": self._text("approval.on_timeout") or "deny",
            "notify": self._texts("approval.notify"),
            "idle_before_channel": self._number("approval.idle_before_channel") if interactive else 0,
        }

    def watchdog(self) -> WatchdogSettings:
        """``[watchdog]``."""
        return {
            "stall_after": self._number("watchdog.stall_after"),
            "tool_stall_after": self._number("watchdog.tool_stall_after"),
            "on_stall": self._text("watchdog.on_stall") or "warn",
            "sample_interval": self._number("watchdog.sample_interval"),
            "kill_grace": self._number("watchdog.kill_grace"),
        }

    def subagents(self) -> SubagentsSettings:
        """``[subagents]``."""
        return {
            "blocked_tools": self._texts("subagents.blocked_tools"),
            "read_only_types": self._texts("subagents.read_only_types"),
            "background": self._text("subagents.background") or "like-foreground",
        }

    def security(self) -> SecuritySettings:
        """``[security]`` (lockdown is ``lockdown``, with where it was set)."""
        return {
            "disable_bypass_permissions": bool(self.lockdown.value),
            "allow_settings_override": self.get("security.allow_settings_override") is True,
            "allow_unguarded": self.get("security.allow_unguarded") is True and not self.lockdown.value,
            "require_verified_cli": self.get("security.require_verified_cli") is True,
            # lockdown needs the box (load_config refuses "off" beside it)
            "sandbox": "require" if self.lockdown.value else (self._text("security.sandbox") or "auto"),
        }

    def sandbox(self) -> SandboxSettings:
        """``[sandbox]``: the box's widenings (``plan.sandbox``), as written (``~`` not expanded)."""
        return {
            "allow_write": self._texts("sandbox.allow_write"),
            "network": self._text("sandbox.network") or "host",
            "allow_unix_sockets": self.get("sandbox.allow_unix_sockets") is True,
            "bwrap": self._text("sandbox.bwrap"),
        }

    def fleet_password_file(self) -> str | None:
        """``fleet.password_file``, ``~`` expanded (a path no tool may read), without the fleet's
        package (nothing imports redis for it)."""
        value = self._text("fleet.password_file")
        return os.path.abspath(os.path.expanduser(value)) if value else None

    def fleet_approver_password_file(self) -> str | None:
        """``fleet.approver_password_file`` (the service's desk answers with it), as ``fleet_password_file``."""
        value = self._text("fleet.approver_password_file")
        return os.path.abspath(os.path.expanduser(value)) if value else None

    def fleet_password_env(self) -> str | None:
        """``fleet.password_env`` as written (stripped from the CLI's environment, with the default name)."""
        return self._text("fleet.password_env")

    def fleet_approver_password_env(self) -> str | None:
        """``fleet.approver_password_env`` as written (stripped like ``fleet_password_env``)."""
        return self._text("fleet.approver_password_env")

    def fleet_table(self) -> dict[str, str] | None:
        """``[fleet]`` as merged (only the user's own files may set it), None when no file does.
        ``claudeguard.fleet.config.from_config`` checks it with ``CLAUDEGUARD_FLEET_URL``."""
        names = [k for k in schema.SECTIONS["fleet"] if f"fleet.{k}" in self.values]
        return {k: str(self.values[f"fleet.{k}"].value) for k in names} if names else None

    def fleet_configured(self, environ: Mapping[str, str] | None = None) -> bool:
        """Whether this machine is in a fleet (``[fleet]`` or ``CLAUDEGUARD_FLEET_URL``), without
        importing the fleet's package (nor redis)."""
        env = os.environ if environ is None else environ
        return self.fleet_table() is not None or bool(env.get("CLAUDEGUARD_FLEET_URL"))

    def source(self, key: str) -> str:
        hit = self.values.get(key)
        return hit.source if hit else "default"

    def agent_types(self) -> list[str]:
        names = {k.split(".")[1] for k in self.rules if k.startswith("agents.")}
        names |= set(self.agent_replace)
        return sorted(names)

    def policy_spec(self) -> PolicySpec:
        """The JSON-able policy description that ``claudeguard.policy`` builds a Policy from."""
        agents: dict[str, AgentSpec] = {}
        for agent in self.agent_types():
            rep = self.agent_replace.get(agent)
            rules = {k: [r.as_spec() for r in self.rules.get(f"agents.{agent}.{k}", [])] for k in schema.RULE_KINDS}
            agents[agent] = {"replace": bool(rep.value) if rep else False,
                             "allow": rules["allow"], "deny": rules["deny"], "ask": rules["ask"]}
        return {
            "permissions": {k: [r.as_spec() for r in self.rules.get(f"permissions.{k}", [])]
                            for k in schema.RULE_KINDS},
            "agents": agents,
            "subagents": self.subagents(),
        }

    def to_wire(self) -> ConfigWire:
        """The whole config as plain values (``marshal`` can carry them): the service's planner
        hands the config it checked to the launcher, which takes it back with ``from_wire``
        rather than reading and checking the layers again while the CLI starts."""
        def pair(s: Sourced) -> tuple[Value, str]:
            return (s.value, s.source)

        return {
            "values": {k: pair(v) for k, v in self.values.items()},
            "rules": {k: [(r.rule, r.source, r.root) for r in v] for k, v in self.rules.items()},
            "agent_replace": {k: pair(v) for k, v in self.agent_replace.items()},
            "searched": [(name, str(path), exists) for name, path, exists in self.searched],
            "profile": self.profile,
            "lockdown": pair(self.lockdown),
            "project_root": str(self.project_root),
            "untrusted": [(path, list(what)) for path, what in self.untrusted],
            "layer_trust": list(self.layer_trust),
            "binding": list(self.binding),
        }

    @classmethod
    def from_wire(cls, wire: ConfigWire) -> Config:
        """``to_wire``'s config back. ValueError when ``wire`` is not one (the caller reads the
        layers itself then)."""
        try:
            cfg = cls(values={str(k): Sourced(v, str(src)) for k, (v, src) in wire["values"].items()},
                      rules={str(k): [RuleEntry(str(r), str(src), str(root)) for r, src, root in v]
                             for k, v in wire["rules"].items()},
                      agent_replace={str(k): Sourced(v, str(src)) for k, (v, src) in wire["agent_replace"].items()},
                      searched=[(str(name), Path(path), bool(exists)) for name, path, exists in wire["searched"]],
                      profile=wire["profile"] if isinstance(wire["profile"], str) else None,
                      lockdown=Sourced(wire["lockdown"][0], str(wire["lockdown"][1])),
                      project_root=Path(wire["project_root"]))
            cfg.untrusted = [(str(path), [str(w) for w in what]) for path, what in wire["untrusted"]]
            cfg.layer_trust = [(str(a), str(b), str(c), bool(d)) for a, b, c, d in wire["layer_trust"]]
            cfg.binding = [str(line) for line in wire["binding"]]
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise ValueError(f"not a config: {exc}") from None
        return cfg


# ---------------------------------------------------------------------------------------------
# Finding and reading files
