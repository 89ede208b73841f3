"""Read, validate and merge the config layers into one effective ``Config``.

Layers, later overriding earlier: defaults, the user file, the nearest project
``.claudeguard.toml``, ``[profiles.NAME]`` (from any of the files), ``CLAUDEGUARD_CONFIG``, then
``--guard-config``, then command-line guard options. Rule lists extend across layers unless a
section sets ``replace = true``; every other value is replaced. Every value keeps the
``file:line`` it came from, for ``config show``, ``explain`` and error messages.

Trust (``config.trust``): a layer is the user's own (the user file and its profiles), the
caller's (``CLAUDEGUARD_CONFIG`` or ``--guard-config`` outside the project) or the project's (the
project file and its profiles, and either of those inside the project). Every layer may tighten.
A loosening (``_Gate``: an allow rule, ``replace = true``, a looser mode, ``on_timeout = "allow"``,
a command to run, ...) applies from the user's own file always, from the caller's unless lockdown
is on, and from the project's only once the user trusted that file's exact content, never under
lockdown. Untrusted loosening is left out and listed in ``Config.untrusted``; under lockdown a
loosening from any other layer is refused (ConfigError, one line).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from claudeguard.config import schema
from claudeguard.errors import ConfigError

from claudeguard.config.find import PROJECT_FILE
from claudeguard.config.model import Config, Layer, Overrides, RuleEntry, Sourced

# The records live in config.model; they are named here too, where every caller has found them.
__all__ = ["Config", "Layer", "Overrides", "RuleEntry", "Sourced", "load_config", "env_overrides", "parse_value",
           "parse_seconds", "read_layer", "validate", "mode_rank", "MODE_ORDER", "ENV_VALUES"]

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.config.lines import KeyPath
    from claudeguard.config.schema import (
        Value,
    )


def _loads(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    return tomllib.loads(text)


def read_layer(name: str, path: Path, *, required: bool, trusted: bool = False) -> Layer | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if required:
            raise ConfigError(f"{path}: no such config file ({name})") from None
        return None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not valid UTF-8") from None
    try:
        data = _loads(text)
    except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise ConfigError(_toml_error(path, str(exc))) from None
    from claudeguard.config.lines import locate

    return Layer(name, path, data, locate(text), trusted=trusted)


def _toml_error(path: Path, msg: str) -> str:
    import re

    m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", msg)
    if m:
        return f"{path}:{m.group(1)}: invalid TOML: {msg[: m.start()]} (column {m.group(2)})"
    m = re.search(r"\s*\(at end of document\)$", msg)
    if m:
        return f"{path}: invalid TOML: {msg[: m.start()]} at end of file"
    return f"{path}: invalid TOML: {msg}"


# ---------------------------------------------------------------------------------------------
# Validation


def _type_ok(key: schema.Key, value: Any) -> bool:
    if key.type == "str":
        return isinstance(value, str)
    if key.type == "bool":
        return isinstance(value, bool)
    if key.type == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


_TYPE_WORDS = {"str": "a string", "bool": "true or false", "number": "a number", "rules": "a list of rule strings",
               "strlist": "a list of strings"}
# Lists of tool names (each a rule, as the deny rules of a subagent apply them): their names are
# checked like a rule's.
_TOOL_LISTS = ("subagents.blocked_tools",)


def _check_keys(layer: Layer, table: Any, keys: dict[str, schema.Key], path: tuple[Any, ...],
                errors: list[str]) -> None:
    """Every mistake in one table, each as ``file:line: what`` in ``errors``. A duration given for
    a number of seconds (``"10m"``) becomes that number in ``table``."""
    if not isinstance(table, dict):
        errors.append(f"{layer.where(path)}: [{'.'.join(path)}] must be a table")
        return
    for name, value in table.items():
        where = path + (name,)
        dotted = ".".join(where)
        key = keys.get(name)
        if key is None:
            known = ", ".join(sorted(keys))
            errors.append(f"{layer.where(where)}: unknown key '{dotted}' (known here: {known})")
            continue
        if key.type == "number" and isinstance(value, str):
            from claudeguard.config.durations import seconds

            try:
                value = table[name] = seconds(value)
            except ValueError:
                errors.append(f"{layer.where(where)}: '{dotted}' must be a number of seconds or a duration such as "
                              f"90s, 10m, 1h or 1h30m, not {value!r}")
                continue
        if not _type_ok(key, value):
            errors.append(f"{layer.where(where)}: '{dotted}' must be {_TYPE_WORDS[key.type]}, not "
                          f"{type(value).__name__}")
            continue
        if key.choices and value not in key.choices:
            errors.append(f"{layer.where(where)}: '{dotted}' is {value!r}; expected one of: {', '.join(key.choices)}")
            continue
        if key.minimum is not None and (value != value or value < key.minimum):  # NaN is no number of seconds
            errors.append(f"{layer.where(where)}: '{dotted}' must be at least {key.minimum:g}")
            continue
        if key.type == "rules" or dotted in _TOOL_LISTS:
            _check_rules(layer, where, value, errors)


def _check_rules(layer: Layer, where: tuple[Any, ...], rules: list[str], errors: list[str]) -> None:
    """Each rule well formed and naming a tool some Claude Code has (policy.rules.tool_problem)."""
    from claudeguard.policy.rules import parse_rule, tool_problem

    for index, text in enumerate(rules):
        try:
            problem = tool_problem(parse_rule(text).tool)
        except ValueError as exc:
            problem = str(exc)
        if problem is not None:
            errors.append(f"{layer.where(where, text, index)}: bad rule {text!r} in '{'.'.join(where)}': {problem}")


def validate(layer: Layer, *, allow_profiles: bool, errors: list[str] | None = None) -> None:
    """Check ``layer`` against the schema: every mistake goes to ``errors`` (``file:line: what``
    each); without ``errors``, a ConfigError with them all, one per line."""
    found: list[str] = [] if errors is None else errors
    before = len(found)
    _validate(layer, allow_profiles, found)
    if errors is None and len(found) > before:
        raise ConfigError("\n".join(found))


def _validate(layer: Layer, allow_profiles: bool, errors: list[str]) -> None:
    for section, table in layer.data.items():
        if section in schema.SECTIONS:
            if section == "fleet" and layer.owner == "project":
                errors.append(f"{layer.where((section,))}: [fleet] may only be set in your own config file or "
                              f"CLAUDEGUARD_CONFIG outside the project (a repository must not choose where "
                              f"requests go and answers come from)")
                continue
            if section in schema.TRUSTED_SECTIONS and not layer.trusted:
                errors.append(f"{layer.where((section,))}: [{section}] may only be set in the user config file or "
                              f"CLAUDEGUARD_CONFIG")
                continue
            _check_keys(layer, table, schema.SECTIONS[section], (section,), errors)
        elif section == "agents":
            if not isinstance(table, dict):
                errors.append(f"{layer.where(('agents',))}: [agents] must hold tables like [agents.Explore]")
                continue
            for agent, sub in table.items():
                _check_keys(layer, sub, schema.AGENT_SECTION, ("agents", agent), errors)
        elif section == "profiles" and allow_profiles:
            if not isinstance(table, dict):
                errors.append(f"{layer.where(('profiles',))}: [profiles] must hold tables like [profiles.ci]")
                continue
            for name, sub in table.items():
                if not isinstance(sub, dict):
                    errors.append(f"{layer.where(('profiles', name))}: [profiles.{name}] must be a table")
                    continue
                # its tables are the file's own (a duration checked here is a number there too)
                held = {k: v for k, v in sub.items() if k in schema.PROFILE_SECTIONS}
                profile = Layer(f"profile {name}", layer.path, held, layer.lines, ("profiles", name))
                for inner in sub:
                    if inner not in held:
                        errors.append(f"{profile.where((inner,))}: unknown key 'profiles.{name}.{inner}' "
                                      f"(a profile may hold: {', '.join(schema.PROFILE_SECTIONS)})")
                _validate(profile, False, errors)
        else:
            sections = list(schema.SECTIONS) + ["agents"] + (["profiles"] if allow_profiles else [])
            errors.append(f"{layer.where((section,))}: unknown key '{section}' (known sections: "
                          f"{', '.join(sections)})")


# ---------------------------------------------------------------------------------------------
# Merging


def _table(data: dict[str, object], key: str) -> dict[str, Any]:
    """``data[key]`` of a validated layer: a table (empty when not there)."""
    table = data.get(key)
    return table if isinstance(table, dict) else {}


# The permission modes from the tightest to the loosest (what runs without a human): plan runs
# nothing that changes anything; dontAsk runs only what rules allow and denies the rest; default
# (and 2.1.330's "manual") asks a human for the rest; acceptEdits also edits files in the project;
# auto lets a classifier decide; bypassPermissions runs everything. One order, used everywhere a
# mode is compared (a project file may choose a tighter mode, not a looser one).
MODE_ORDER = {"plan": 0, "dontAsk": 1, "default": 2, "manual": 2, "acceptEdits": 3, "auto": 4,
              "bypassPermissions": 5}


def mode_rank(mode: str | None) -> int:
    """``MODE_ORDER``'s rank of a mode (None: the CLI's default); an unknown mode counts as the
    loosest (fail closed)."""
    return MODE_ORDER.get(mode or "default", len(MODE_ORDER))


class _Gate:
    """Whether a loosening from ``layer`` applies (see the module docstring)."""

    __slots__ = ("layer", "lockdown", "ignored", "refused")

    def __init__(self, layer: Layer, lockdown: Sourced, refused: list[str]) -> None:
        self.layer = layer
        self.lockdown = lockdown
        self.ignored: list[str] = []
        self.refused = refused  # lockdown's refusals, every one of every layer (load_config raises them)

    def permit(self, keypath: KeyPath, what: str, value: str | None = None, index: int | None = None) -> bool:
        layer = self.layer
        if layer.owner == "user":
            return True
        if layer.binding:  # what the user trusted binds; its loosening went with the change
            self.ignored.append(what)
            return False
        if self.lockdown.value:
            self.refused.append(f"{layer.where(keypath, value, index)}: {what} loosens the guard: refused by lockdown "
                                f"({self.lockdown.source}; only the user's own config file may loosen)")
            return False
        if layer.owner == "caller" or layer.content_trusted:
            return True
        self.ignored.append(what)
        return False


def _loosening(cfg: Config, dotted: str, value: Any, table: dict[str, Any]) -> str | None:
    """What setting ``dotted`` to ``value`` loosens, given the values merged so far; None when it
    does not (an unknown key counts as a loosening: fail closed)."""
    current = cfg.values.get(dotted)
    before = current.value if current else None
    section = dotted.split(".", 1)[0]
    if dotted == "permissions.mode":
        return (f"permissions.mode = {value!r} (looser than {before or 'default'!r})"
                if mode_rank(value) > mode_rank(before if isinstance(before, str) else None) else None)
    if dotted == "approval.on_timeout":
        return 'approval.on_timeout = "allow"' if value == "allow" and before != "allow" else None
    if dotted == "approval.timeout":
        allow = table.get("on_timeout", cfg.get("approval.on_timeout")) == "allow"
        lower = isinstance(before, (int, float)) and value < before
        return f"approval.timeout = {value:g} (sooner, with on_timeout allow)" if allow and lower else None
    if dotted in ("subagents.blocked_tools", "subagents.read_only_types"):
        dropped = [v for v in (before if isinstance(before, list) else []) if v not in value]
        return f"{dotted} drops {', '.join(map(str, dropped))}" if dropped else None
    if dotted == "subagents.background":
        return 'subagents.background = "like-foreground"' if value != "deny" and before == "deny" else None
    if dotted == "approval.notify":
        return "approval.notify (a command the guard runs)" if value and value != before else None
    if dotted == "claude.path":
        return "claude.path (a program run as the real CLI)"
    if section == "watchdog" or dotted == "approval.idle_before_channel":
        return None
    return f"{dotted} (a setting only a trusted file may change)"


def _merge(cfg: Config, layer: Layer, root: str, lockdown: Sourced, refused: list[str]) -> list[str]:
    """Merge one layer; returns the loosening it left out (an untrusted project layer). What
    lockdown refuses goes to ``refused``."""
    data: dict[str, Any] = layer.data  # validated: tables of the schema's types
    gate = _Gate(layer, lockdown, refused)
    for section, table in data.items():
        if section == "agents":
            for agent, sub in table.items():
                _merge_rules(cfg, layer, ("agents", agent), sub, root, gate)
            continue
        if section == "profiles" or section not in schema.SECTIONS:
            continue
        keys = schema.SECTIONS[section]
        if any(keys[k].type == "rules" for k in table if k in keys):
            _merge_rules(cfg, layer, (section,), table, root, gate)
        for name, value in table.items():
            key = keys[name]
            if key.type == "rules" or name == "replace":
                continue
            dotted = f"{section}.{name}"
            if lockdown.value and dotted == "permissions.mode" and value == "bypassPermissions" and not layer.binding:
                refused.append(f"{layer.where((section, name))}: lockdown: permissions.mode = \"bypassPermissions\" "
                               f"is refused")
                continue
            if dotted == "security.disable_bypass_permissions":
                continue  # decided before merging; see load_config
            if section != "security":
                what = _loosening(cfg, dotted, value, table)
                if what is not None and not gate.permit((section, name), what):
                    continue
            elif name.startswith("allow_") and value is True and not gate.permit(
                    (section, name), f"{dotted} = true"):  # an opt-out from a file inside the project
                continue
            cfg.values[dotted] = Sourced(value, layer.where((section, name)))
    return gate.ignored


def _merge_rules(cfg: Config, layer: Layer, path: tuple[Any, ...], table: dict[str, Any], root: str,
                 gate: _Gate) -> None:
    prefix = ".".join(path)
    replace = table.get("replace", False)
    # replace = true drops what earlier layers deny and ask (in any section, [agents.X] too):
    # a loosening, whatever it drops.
    if replace and not gate.permit(path + ("replace",), f"replace = true in [{prefix}]"):
        replace = False
    if replace:
        for kind in schema.RULE_KINDS:
            cfg.rules[f"{prefix}.{kind}"] = []
    if path[0] == "agents" and "replace" in table and (replace or not table["replace"]):
        cfg.agent_replace[path[1]] = Sourced(replace, layer.where(path + ("replace",)))
    for kind in schema.RULE_KINDS:
        for index, text in enumerate(table.get(kind, [])):
            if kind == "allow" and not gate.permit(path + (kind,), f"allow rule {text!r} in [{prefix}]", text, index):
                continue
            entry = RuleEntry(text, layer.where(path + (kind,), text, index), root)
            cfg.rules.setdefault(f"{prefix}.{kind}", []).append(entry)


def load_config(cwd: Path | None = None, overrides: Overrides | None = None) -> Config:
    """Read every layer, validate it, and merge. Raises ConfigError with ``path:line: what``."""
    cwd = cwd or Path.cwd()
    overrides = overrides or Overrides()
    read = _read_layers(cwd, overrides)
    lockdown = _lockdown(read.layers)
    profile = overrides.profile
    profile_name = str(profile.value) if profile else None
    profile_layers = _profile_layers(read.layers, profile_name, profile.source if profile else "")
    cfg = Config(
        values={k: Sourced(v, "default") for k, v in schema.default_values().items()},
        rules={},
        agent_replace={},
        searched=read.searched,
        profile=profile_name,
        lockdown=lockdown,
        project_root=read.root,
    )
    cfg.binding = read.binding_notes
    ordered = [lay for lay in (read.user, read.project) if lay is not None] + read.binding + profile_layers \
        + read.extras
    _merge_layers(cfg, ordered, read, lockdown)
    for key, value in overrides.values.items():
        cfg.values[key] = value
    cfg.values["security.disable_bypass_permissions"] = lockdown
    if lockdown.value and cfg.get("security.sandbox") == "off":
        raise ConfigError(f"{cfg.source('security.sandbox')}: lockdown ({lockdown.source}) needs the sandbox: "
                          f"security.sandbox = \"off\" is refused")
    return cfg


class _Read:
    """Every layer read and validated: the user's, the project's, the extra files, the trusted
    copies that bind; what was searched."""

    __slots__ = ("user", "project", "extras", "binding", "binding_notes", "layers", "searched", "root")

    def __init__(self, root: Path) -> None:
        self.user: Layer | None = None
        self.project: Layer | None = None
        self.extras: list[Layer] = []
        self.binding: list[Layer] = []
        self.binding_notes: list[str] = []
        self.layers: list[Layer] = []  # in order, each validated
        self.searched: list[tuple[str, Path, bool]] = []
        self.root = root


def _read_layers(cwd: Path, overrides: Overrides) -> _Read:
    """Read the user file, the project file, the extra files and the trusted copies that bind,
    and validate each. Every mistake of every file at once (file:line each), before anything is
    merged: a file with six mistakes takes one run to fix, not six."""
    from claudeguard.config.find import project_config_file, project_root, user_config_file

    out = _Read(Path(project_root(str(cwd))))
    errors: list[str] = []

    def read(name: str, path: Path, *, required: bool, trusted: bool = False) -> Layer | None:
        try:
            return read_layer(name, path, required=required, trusted=trusted)
        except ConfigError as exc:
            errors.append(str(exc))
            return None

    user_path = Path(user_config_file())
    out.user = read("user", user_path, required=False, trusted=True)
    out.searched.append(("user", user_path, out.user is not None))
    found = project_config_file(str(cwd))
    proj_path = Path(found) if found else None
    out.project = read("project", proj_path, required=False) if proj_path else None
    out.searched.append(("project", proj_path or cwd / PROJECT_FILE, out.project is not None))
    if out.project is not None:
        out.project.owner = "project"
    for item in overrides.extra_files:
        trusted = item.source == "env CLAUDEGUARD_CONFIG"
        name = "CLAUDEGUARD_CONFIG" if trusted else "--guard-config"
        layer = read(name, Path(str(item.value)), required=True, trusted=trusted)
        if layer is None:
            continue
        # A file inside the project is the repository's, whoever names it; outside it, the caller's.
        layer.owner = "project" if _inside_project(layer.path, out.root, cwd) else "caller"
        out.extras.append(layer)
        out.searched.append((name, Path(str(item.value)), True))
    present = [lay for lay in [out.project, *out.extras] if lay is not None]
    if any(lay.owner == "project" for lay in present):
        from claudeguard.config.trust import load as load_trust

        records = load_trust()
        for lay in present:
            if lay.owner == "project":
                lay.content_trusted = records.trusted(str(lay.path))
    out.binding, out.binding_notes = _binding_layers(cwd, out.root, present)
    for layer in [out.user, out.project, *out.binding, *out.extras]:
        if layer is not None:
            found_here: list[str] = []
            validate(layer, allow_profiles=True, errors=found_here)
            errors += sorted(found_here, key=_line_number)
            out.layers.append(layer)
    if errors:
        raise ConfigError("\n".join(errors))
    return out


def _lockdown(layers: list[Layer]) -> Sourced:
    """Lockdown, as the trusted layers decide it: nothing after them may turn it off."""
    lockdown = Sourced(False, "default")
    for layer in layers:
        sec = _table(layer.data, "security")
        if "disable_bypass_permissions" in sec:
            value = sec["disable_bypass_permissions"]
            if lockdown.value and not value:
                raise ConfigError(f"{layer.where(('security', 'disable_bypass_permissions'))}: lockdown: may not be "
                                  f"turned off once on")
            if value:
                lockdown = Sourced(True, layer.where(("security", "disable_bypass_permissions")))
    return lockdown


def _profile_layers(layers: list[Layer], name: str | None, chosen_by: str) -> list[Layer]:
    """The ``[profiles.NAME]`` tables of every file, as layers; a name no file defines is an error."""
    if not name:
        return []
    out: list[Layer] = []
    for layer in layers:
        sub = _table(layer.data, "profiles").get(name)
        if sub is not None:
            # A profile is as trusted as the file it is in, but chosen by whoever runs the
            # session (--guard-profile, CLAUDEGUARD_PROFILE): the user file's is the caller's
            # (lockdown refuses its loosening).
            prof = Layer(f"profile {name}", layer.path, sub, layer.lines, ("profiles", name),
                         owner="caller" if layer.owner == "user" else layer.owner)
            prof.content_trusted = layer.content_trusted
            out.append(prof)
    if not out:
        files = ", ".join(str(lay.path) for lay in layers) or "no config file found"
        raise ConfigError(f"profile '{name}' ({chosen_by}) is not defined in any config file ({files})")
    return out


def _merge_layers(cfg: Config, ordered: list[Layer], read: _Read, lockdown: Sourced) -> None:
    """Each layer into ``cfg`` in order; what an untrusted layer's loosening left out, and the
    refusals under lockdown (one error naming each line)."""
    ignored: dict[str, list[str]] = {}
    refused: list[str] = []
    for layer in ordered:
        layer_root = layer.root or (str(layer.path.parent) if layer.name != "user" else str(read.root))
        left_out = _merge(cfg, layer, layer_root, lockdown, refused)
        if left_out and layer not in read.binding:  # a trusted copy's loosening: cfg.binding says why
            ignored.setdefault(str(layer.path), []).extend(left_out)
        cfg.layer_trust.append((layer.name, str(layer.path), layer.owner, layer.owner != "project"
                                or layer.content_trusted))
    cfg.untrusted = list(ignored.items())
    if refused:
        raise ConfigError("\n".join(refused))
    if read.binding and lockdown.value:  # after the layers' own refusals, which name a line
        raise ConfigError(f"{read.binding_notes[0].removeprefix('claudeguard: ')}; lockdown ({lockdown.source}) "
                          f"refuses to start until you trust the new content or revoke the trust")


def _line_number(error: str) -> int:
    """The line an error of one file names (``path:12: ...``), 0 when it names none."""
    head = error.split(": ", 1)[0]
    number = head.rsplit(":", 1)[-1]
    return int(number) if number.isdigit() else 0


def _binding_layers(cwd: Path, root: Path, present: list[Layer]) -> tuple[list[Layer], list[str]]:
    """The trusted content of the project's config files that changed or were removed since the
    user trusted them, as layers that only tighten (their deny and ask rules, a tighter mode:
    merged as untrusted); and one line per file. Who changed the file does not matter (an agent's
    Write, a git checkout, the user): until the user trusts the new content or revokes the trust
    (``config untrust``), what they trusted binds. Looked up for every ``.claudeguard.toml`` from
    the cwd up to the project root, and for the project's own --guard-config files."""
    from claudeguard.config.trust import key, load as load_trust, trust_path, trusted_copy

    if not os.path.exists(trust_path()):
        return [], []
    records = load_trust()
    if not records.files:
        return [], []
    candidates: dict[str, Layer | None] = {}
    here = os.path.abspath(cwd)
    top = os.path.abspath(root)
    while True:
        candidates.setdefault(key(os.path.join(here, PROJECT_FILE)), None)
        if here == top or not here.startswith(top.rstrip("/") + "/"):
            break
        here = os.path.dirname(here)
    for present_layer in present:
        if present_layer.owner == "project":
            candidates[key(str(present_layer.path))] = present_layer
    layers: list[Layer] = []
    notes: list[str] = []
    for real, lay in candidates.items():
        sha = records.files.get(real)
        if sha is None or (lay is not None and lay.content_trusted):
            continue
        exists = os.path.exists(real)
        if exists and lay is None:
            continue  # not the file that applies here (a nearer one does)
        how = "changed" if exists else "was removed"
        text = trusted_copy(sha)
        if text is None:
            notes.append(f"claudeguard: {real} {how} since you trusted it, and no copy of the trusted content was "
                         f"kept: only what it says now applies; review it, then: claudeguardctl config trust {real}")
            continue
        copy = Path(os.path.join(os.path.dirname(trust_path()), "trusted", sha))
        try:
            data = _loads(text)
        except ValueError as exc:
            raise ConfigError(_toml_error(copy, str(exc))) from None
        from claudeguard.config.lines import locate

        bound = Layer(f"trusted {real}", copy, data, locate(text), owner="project", root=os.path.dirname(real))
        bound.binding = True
        layers.append(bound)
        notes.append(f"claudeguard: {real} {how} since you trusted it: the deny and ask rules you trusted still "
                     f"apply ({copy}); after reviewing it: claudeguardctl config trust {real} (or config untrust)")
    return layers, notes


def _inside_project(path: Path, root: Path, cwd: Path) -> bool:
    """Is ``path`` inside the project (a git checkout, or the directory of a project file)? Outside
    any project nothing is."""
    if not (os.path.exists(os.path.join(root, ".git")) or os.path.isfile(os.path.join(root, PROJECT_FILE))):
        return False
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip("/") + "/")


def env_overrides(environ: dict[str, str] | None = None) -> Overrides:
    """Overrides from CLAUDEGUARD_* environment variables (the command line refines them)."""
    env = os.environ if environ is None else environ
    out = Overrides()
    if env.get("CLAUDEGUARD_PROFILE"):
        out.profile = Sourced(env["CLAUDEGUARD_PROFILE"], "env CLAUDEGUARD_PROFILE")
    if env.get("CLAUDEGUARD_CONFIG"):
        out.extra_files.append(Sourced(env["CLAUDEGUARD_CONFIG"], "env CLAUDEGUARD_CONFIG"))
    for var, key in ENV_VALUES.items():
        if env.get(var):
            out.values[key] = Sourced(parse_value(key, env[var], f"env {var}"), f"env {var}")
    return out


ENV_VALUES = {
    "CLAUDEGUARD_STALL_AFTER": "watchdog.stall_after",
    "CLAUDEGUARD_ON_STALL": "watchdog.on_stall",
    "CLAUDEGUARD_APPROVAL_TIMEOUT": "approval.timeout",
}


def parse_value(key: str, text: str, where: str) -> Value:
    """Check a value given on the command line or in the environment against the schema."""
    section, name = key.split(".")
    spec = schema.SECTIONS[section][name]
    if spec.type == "number":
        return parse_seconds(key, text, where)
    if spec.choices and text not in spec.choices:
        raise ConfigError(f"{where}: {text!r} is not one of: {', '.join(spec.choices)}")
    return text


def parse_seconds(key: str, text: str, where: str) -> float:
    """A number of seconds given for ``key`` (a number key of the schema), or a duration such as
    ``10m`` (``config.durations``), checked as the schema checks it."""
    from claudeguard.config.durations import EXAMPLES, seconds

    section, name = key.split(".")
    spec = schema.SECTIONS[section][name]
    try:
        value = seconds(text)
    except ValueError:
        raise ConfigError(f"{where}: expected a number of seconds or a duration such as {EXAMPLES}, "
                          f"got {text!r}") from None
    if value != value or value in (float("inf"),) or (spec.minimum is not None and value < spec.minimum):
        raise ConfigError(f"{where}: must be a positive number of seconds or a duration such as {EXAMPLES}, "
                          f"got {text!r}")
    return value
