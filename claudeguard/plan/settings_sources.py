"""Claude Code's own settings sources, read before the CLI starts: which of them this run will
load, and which of their keys would silence the guard's hooks or loosen the permission mode.

The CLI merges, later winning: user (``$CLAUDE_CONFIG_DIR`` or ``~/.claude``: ``settings.json``),
project (``<cwd>/.claude/settings.json``), local (``<cwd>/.claude/settings.local.json``),
``--settings``, then managed (``managed-settings.json`` and ``managed-settings.d/*.json`` in the
system directory; ``--managed-settings`` JSON from an SDK parent). ``--setting-sources`` limits the
first three. Only the cwd is looked at for project and local files (checked on both pinned CLIs:
a ``.claude/`` one directory up is not read). The table in docs/design.md lists each key and what
claudeguard does about it; the facts were checked on 2.1.197 and 2.1.330.
"""

from __future__ import annotations

import json
import os
import sys

from claudeguard.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Mapping
    from claudeguard.config.load import Config
    from claudeguard.config.schema import ProtectedSpec
    from claudeguard.plan.claude_args import ClaudeArgs

FILE_SOURCES = ("user", "project", "local")
# URLs the resident service's HTTP hooks will post to (any port, any path under /hook/): a
# pattern in allowedHttpHookUrls lets the guard through only if it matches all of these.
GUARD_HOOK_URLS = ("http://127.0.0.1:1/hook/PreToolUse", "http://127.0.0.1:65535/hook/x/y")
# The variable the guard's HTTP hook headers take the session's secret from (plan.hooks.TOKEN_VAR).
GUARD_TOKEN_VAR = "CLAUDEGUARD_HOOK_TOKEN"
# Hook events whose answer decides a call: someone else's hook there can allow what the guard
# leaves to the CLI (a main-agent call no rule decides) or answer a dialog before ours.
DECISION_EVENTS = ("PreToolUse", "PermissionRequest")
# Environment and flags that switch off every non-managed hook (docs/notes/cli-surfaces.md
# section 3, all three versions: --safe-mode also drops the guard's MCP prompt server). An "env"
# block sets the variables too: from the user settings and --settings on every version, from the
# project and local files on 2.1.197 (section 4); counted wherever they stand (fail closed).
# `--bare` sets CLAUDE_CODE_SIMPLE wherever the word stands before `--`, another option's value
# included (section 3).
HOOKS_OFF_ENV = ("CLAUDE_CODE_SAFE_MODE", "CLAUDE_CODE_SIMPLE")
HOOKS_OFF_FLAGS = ("--safe-mode",)
BARE = "--bare"
# Variables the guard, or its reading of what a tool runs, depends on: an "env" block of any
# settings source replaces the CLI's (and its hooks' and tools') value (section 4). The guard's
# own; the switches above; the CLI's prefix and shell for every Bash command (a shell of the
# source's own need not run the prefix) and wrapper of the sessions it hosts; its config dir; and
# what makes a shell run other code than the guard read (BASH_ENV, ENV, PATH, the loader's
# preloads).
GUARD_ENV = HOOKS_OFF_ENV + (
    "CLAUDE_CODE_SHELL_PREFIX", "CLAUDE_CODE_SHELL", "CLAUDE_CODE_PROCESS_WRAPPER", "CLAUDE_CODE_SUBPROCESS_ENV_SCRUB",
    "CLAUDE_CODE_PERSONAL_HOOKS_OFF", "CLAUDE_CONFIG_DIR", "BASH_ENV", "ENV", "PATH", "LD_PRELOAD",
    "LD_LIBRARY_PATH",
)

REFUSE = "refuse"  # claudeguard will not start (unless the user opted out, never under lockdown)
STRICT = "lockdown"  # refused under lockdown only
WARN = "warn"  # refused under lockdown; a warning line without
UNGUARDED = "unguarded"  # the guard's hooks cannot run: refused unless [security] allow_unguarded, never under lockdown
OVERRIDDEN = "overridden"  # present, but this run already cancels it
REPORT = "report"  # reported by doctor; no effect on the guard


class Source:
    """One Claude Code settings source (plain classes here: dataclasses cost every session's
    start ~10 ms of imports, bench/RESULTS.md)."""

    __slots__ = ("name", "where", "data", "loaded", "note")

    def __init__(self, name: str, where: str, data: dict[str, object] | None, loaded: bool, note: str = "") -> None:
        self.name = name  # managed, --managed-settings, user, project, local, --settings
        self.where = where  # the file, or the flag for inline JSON
        self.data = data  # None: missing or not loaded
        self.loaded = loaded
        self.note = note  # why not loaded, or a read error

    @property
    def settings(self) -> dict[str, object]:
        """``data``, or empty when the source was not loaded."""
        return self.data or {}

    def __repr__(self) -> str:
        return f"Source(name={self.name!r}, where={self.where!r}, loaded={self.loaded!r}, note={self.note!r})"


class Finding:
    __slots__ = ("source", "where", "key", "effect", "action")

    def __init__(self, source: str, where: str, key: str, effect: str, action: str) -> None:
        self.source = source
        self.where = where
        self.key = key
        self.effect = effect
        self.action = action

    def __eq__(self, other: object) -> bool:
        return type(other) is Finding and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return "Finding(" + ", ".join(f"{n}={v!r}" for n, v in zip(self.__slots__, self._fields(), strict=False)) + ")"

    def _fields(self) -> tuple[str, ...]:
        return (self.source, self.where, self.key, self.effect, self.action)

    def line(self) -> str:
        if self.where == self.key:  # a flag of the command line: named once
            return f"{self.where}: {self.effect}"
        return f"{self.where}: {self.key}: {self.effect}"


def managed_dir() -> str:
    if sys.platform == "darwin":
        return "/Library/Application Support/ClaudeCode"
    if sys.platform == "win32":
        return "C:\\Program Files\\ClaudeCode"
    return "/etc/claude-code"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _read(path: str) -> tuple[dict[str, Any] | None, str]:
    """A settings file as the CLI would see it; an unreadable or non-object file counts as
    empty for the CLI too (it reports a settings error and goes on)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}"
    if not text.strip():
        return {}, ""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"not valid JSON: {exc}"
    return (data, "") if isinstance(data, dict) else (None, "not a JSON object")


def _inline_or_file(value: str, flag: str) -> tuple[str, dict[str, Any] | None, str]:
    if value.lstrip().startswith("{"):
        try:
            data = json.loads(value)
        except ValueError as exc:
            return f"{flag} (inline JSON)", None, f"not valid JSON: {exc}"
        return f"{flag} (inline JSON)", data if isinstance(data, dict) else None, ""
    path = os.path.abspath(value)
    data, note = _read(path)
    return f"{flag} {path}", data, note


def allowed_file_sources(args: ClaudeArgs) -> tuple[set[str], str]:
    """Which of user/project/local this run loads (``--setting-sources``); an invalid value makes
    the CLI exit, so all three are assumed (fail closed)."""
    value = args.last("--setting-sources")
    if value is None:
        return set(FILE_SOURCES), ""
    names = [n.strip() for n in value.split(",")] if value != "" else []
    if any(n not in FILE_SOURCES for n in names):
        return set(FILE_SOURCES), ""
    return set(names), f"--setting-sources {value}"


def user_settings_file(env: Mapping[str, str]) -> str:
    base = env.get("CLAUDE_CONFIG_DIR") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".claude")
    name = "cowork_settings.json" if _truthy(env.get("CLAUDE_CODE_USE_COWORK_PLUGINS")) else "settings.json"
    return os.path.join(os.path.abspath(base), name)


def repo_root(cwd: str) -> str:
    """The git checkout ``cwd`` is in (the nearest directory with ``.git``), else ``cwd``."""
    path = os.path.abspath(cwd)
    while True:
        if os.path.exists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return os.path.abspath(cwd)
        path = parent


WORKTREES = os.path.join(".claude", "worktrees")  # where `-w NAME` (and EnterWorktree) puts a checkout


def option_value(args: ClaudeArgs, name: str) -> str | None:
    """The last value of a value-taking option as the CLI reads it: the argv reading's, else the
    word after it (or after ``=``) in the raw argv before ``--`` (an option the reading does not
    know yet, e.g. 2.1.330's ``--project-config-root``)."""
    value = args.last(name)
    if value is not None:
        return value
    words = args.argv[:args.argv.index("--")] if "--" in args.argv else args.argv
    for index in range(len(words) - 1, -1, -1):
        word = words[index]
        if word.startswith(name + "="):
            return word.partition("=")[2]
        if word == name and index + 1 < len(words):
            return words[index + 1]
    return None


def project_files(args: ClaudeArgs, cwd: str) -> list[tuple[str, str]]:
    """The project's settings files this run reads, as (role, path), role ``project`` or
    ``local`` (``--setting-sources``' names), every version's placements at once (fail closed;
    docs/notes/cli-surfaces.md section 7): the cwd's ``.claude/settings.json`` and
    ``settings.local.json``, or ``--project-config-root DIR``'s instead (2.1.330+); from a
    sub-directory the repository root's ``settings.local.json`` too (2.1.330+); with ``-w NAME``
    the worktree's own files and the main checkout's ``settings.local.json``."""
    root = repo_root(cwd)
    pcr = option_value(args, "--project-config-root")
    base = os.path.abspath(os.path.join(cwd, pcr)) if pcr else os.path.abspath(cwd)
    out = [("project", os.path.join(base, ".claude", "settings.json")),
           ("local", os.path.join(base, ".claude", "settings.local.json"))]
    if root != base:
        out.append(("local", os.path.join(root, ".claude", "settings.local.json")))
    if args.has("--worktree"):
        name = args.last("--worktree")
        if name:
            tree = os.path.join(root, WORKTREES, name)
            out += [("project", os.path.join(tree, ".claude", "settings.json")),
                    ("local", os.path.join(tree, ".claude", "settings.local.json"))]
        out.append(("local", os.path.join(root, ".claude", "settings.local.json")))
    return list(dict.fromkeys(out))


def _read_project(path: str) -> tuple[dict[str, Any] | None, str]:
    """A project settings file; that of a worktree not made yet is read from HEAD, which is what
    `-w` will check out."""
    data, note = _read(path)
    root, sep, rest = path.partition(os.sep + WORKTREES + os.sep)
    name, _, rel = rest.partition(os.sep)
    if data is not None or note != "missing" or not sep or not rel or os.path.exists(
            os.path.join(root, WORKTREES, name)):
        return data, note
    import subprocess

    from claudeguard.procs import capture

    try:
        proc = capture(["git", "-C", root, "show", f"HEAD:{rel}"], env=dict(os.environ), timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None, "missing"  # no git: as the CLI, which then makes no worktree
    if proc.returncode != 0:
        return None, "missing"
    try:
        loaded = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except ValueError as exc:
        return None, f"not valid JSON: {exc}"
    return (loaded, "") if isinstance(loaded, dict) else (None, "not a JSON object")


def sources(args: ClaudeArgs, cwd: str, env: Mapping[str, str], managed: str | None = None) -> list[Source]:
    """Every settings source of this run, in the CLI's merge order (later wins); read once a plan
    (``plan.once``: every part of one plan sees the same files)."""
    from claudeguard.plan.once import remembered

    user = user_settings_file(env)
    return list(remembered(("sources", *args.identity(), cwd, user, managed), (args,),
                           lambda: _sources(args, cwd, user, managed)))


def _sources(args: ClaudeArgs, cwd: str, user: str, managed: str | None) -> list[Source]:
    allowed, why = allowed_file_sources(args)
    out: list[Source] = []
    data, note = _read(user)
    out.append(Source("user", user, data if "user" in allowed else None, data is not None and "user" in allowed,
                      note if "user" in allowed else f"not loaded ({why})"))
    for role, path in project_files(args, cwd):
        data, note = _read_project(path)
        if role not in allowed:
            out.append(Source(role, path, None, False, f"not loaded ({why})"))
        else:
            out.append(Source(role, path, data, data is not None, note))
    for value in args.values("--settings"):
        where, data, note = _inline_or_file(value, "--settings")
        out.append(Source("--settings", where, data, data is not None, note))
    base = managed or managed_dir()
    files = [os.path.join(base, "managed-settings.json")]
    try:
        drop = os.path.join(base, "managed-settings.d")
        files += [os.path.join(drop, n)
                  for n in sorted(os.listdir(drop)) if n.endswith(".json") and not n.startswith(".")]
    except OSError:
        pass
    for path in files:
        data, note = _read(path)
        out.append(Source("managed", path, data, data is not None, note))
    for value in args.values("--managed-settings"):
        where, data, note = _inline_or_file(value, "--managed-settings")
        out.append(Source("--managed-settings", where, data, data is not None, note))
    return out


def _glob_match(pattern: str, url: str) -> bool:
    import re  # only when a source sets allowedHttpHookUrls

    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), url) is not None


def _hook_entries(data: dict[str, Any], event: str) -> int:
    hooks = data.get("hooks")
    groups = hooks.get(event) if isinstance(hooks, dict) else None
    if not isinstance(groups, list):
        return 0
    return sum(len(g.get("hooks") or []) if isinstance(g, dict) and isinstance(g.get("hooks"), list) else 1
               for g in groups)


def _values(source: Source, key: str) -> list[object]:
    """What iterating ``key`` of a loaded source gives (its list's items; nothing when unset;
    the caller checks each item)."""
    value = source.settings.get(key) or []
    if isinstance(value, (list, str, dict)):
        return list(value)
    raise TypeError(f"{source.where}: {key} is not a list")  # as iterating it would


def findings(args: ClaudeArgs, srcs: list[Source], *, mode_chosen: str | None) -> list[Finding]:
    """What each loaded source does to the guard. ``mode_chosen`` names what sets the permission
    mode on the command line this run (the caller's flag or the policy's), if anything."""
    out: list[Finding] = []
    loaded = [s for s in srcs if s.loaded and s.data]
    managed = [s for s in loaded if s.name in ("managed", "--managed-settings")]
    layered = [s for s in loaded if s not in managed]

    # disableAllHooks: a scalar, the last source that sets it wins (a --settings false beats a
    # project true: checked on both CLIs); from managed settings nothing overrides it.
    for s in managed:
        if s.settings.get("disableAllHooks") is True:
            out.append(Finding(s.name, s.where, "disableAllHooks", "silences every hook the guard registers", REFUSE))
    setters = [s for s in layered if "disableAllHooks" in s.settings]
    for s in setters:
        if s.settings.get("disableAllHooks") is True:
            last = setters[-1]
            if last.settings.get("disableAllHooks") is True:
                out.append(Finding(s.name, s.where, "disableAllHooks",
                                   "silences every hook the guard registers", REFUSE))
            else:
                out.append(Finding(s.name, s.where, "disableAllHooks",
                                   f"overridden by {last.where} (false)", OVERRIDDEN))

    for s in loaded:
        data = s.data or {}
        is_managed = s in managed
        if data.get("allowManagedHooksOnly") is True:
            if is_managed:
                out.append(Finding(s.name, s.where, "allowManagedHooksOnly",
                                   "only managed hooks run: the guard's are dropped", REFUSE))
            else:
                out.append(Finding(s.name, s.where, "allowManagedHooksOnly",
                                   "no effect outside managed settings", REPORT))
        strict = data.get("strictPluginOnlyCustomization")
        if is_managed and (strict is True or (isinstance(strict, list) and "hooks" in strict)):
            out.append(Finding(s.name, s.where, "strictPluginOnlyCustomization",
                               "only managed hooks run: the guard's are dropped", REFUSE))
        if is_managed and data.get("allowManagedPermissionRulesOnly") is True:
            out.append(Finding(s.name, s.where, "allowManagedPermissionRulesOnly",
                               "the guard's --allowedTools/--disallowedTools are ignored (its hooks still decide)",
                               REPORT))
        perms = data.get("permissions")
        if isinstance(perms, dict) and perms.get("defaultMode") == "bypassPermissions":
            if mode_chosen:
                out.append(Finding(s.name, s.where, "permissions.defaultMode",
                                   f"bypassPermissions, overridden by {mode_chosen}", OVERRIDDEN))
            else:
                out.append(Finding(s.name, s.where, "permissions.defaultMode",
                                   "bypassPermissions: every call the guard leaves to the CLI runs unasked", REFUSE))
        urls = data.get("allowedHttpHookUrls")
        if isinstance(urls, list):
            # The lists of all sources merge: the guard is blocked only if none lets it through.
            union = [u for t in loaded for u in _values(t, "allowedHttpHookUrls") if isinstance(u, str)]
            if not all(any(_glob_match(p, url) for p in union) for url in GUARD_HOOK_URLS):
                out.append(Finding(s.name, s.where, "allowedHttpHookUrls",
                                   "blocks the guard's HTTP hooks (http://127.0.0.1:PORT/hook/...)", REFUSE))
        if isinstance(data.get("httpHookAllowedEnvVars"), list):
            # Merged like the URLs; without the guard's variable its header goes out without the
            # session's secret, the service answers 401, and the CLI goes on as if no hook ran.
            names = {n for t in loaded for n in _values(t, "httpHookAllowedEnvVars") if isinstance(n, str)}
            if GUARD_TOKEN_VAR not in names:
                out.append(Finding(s.name, s.where, "httpHookAllowedEnvVars",
                                   f"leaves out {GUARD_TOKEN_VAR}: the guard's HTTP hooks lose their secret", REFUSE))
        block = data.get("env")
        values: dict[str, object] = block if isinstance(block, dict) else {}
        for name in sorted(values):
            if name in HOOKS_OFF_ENV and _truthy(str(values[name])):
                out.append(Finding(s.name, s.where, f"env.{name}", "switches off every hook but managed ones",
                                   UNGUARDED))
            elif name.startswith("CLAUDEGUARD_") or name in GUARD_ENV:
                out.append(Finding(s.name, s.where, f"env.{name}", "sets a variable the guard depends on", WARN))
        for event in DECISION_EVENTS:
            count = _hook_entries(data, event)
            if count:
                action = REPORT if is_managed else STRICT
                out.append(Finding(s.name, s.where, f"hooks.{event}",
                                   f"{count} hook(s) of its own that can answer before the guard's", action))
    return out


def bare_word(args: ClaudeArgs) -> bool:
    """``--bare`` anywhere before ``--``, as a flag or as another option's value: the CLI's
    ``main()`` sets CLAUDE_CODE_SIMPLE for either."""
    words = args.argv[:args.argv.index("--")] if "--" in args.argv else args.argv
    return BARE in words


def env_findings(args: ClaudeArgs, env: Mapping[str, str]) -> list[Finding]:
    """The caller's switches that leave the guard's hooks out of the run."""
    out = [Finding("env", f"environment {name}", name, "switches off every hook but managed ones", UNGUARDED)
           for name in HOOKS_OFF_ENV if _truthy(env.get(name))]
    out += [Finding("argv", flag, flag, "switches off every hook but managed ones", UNGUARDED)
            for flag in HOOKS_OFF_FLAGS if args.has(flag)]
    if bare_word(args):
        out.append(Finding("argv", BARE, BARE, "skips the guard's hooks (CLAUDE_CODE_SIMPLE), even as another "
                           "option's value", UNGUARDED))
    return out


def mode_chosen(args: ClaudeArgs, cfg: Config) -> str | None:
    if args.last("--permission-mode"):
        return "--permission-mode"
    if cfg.permission_mode():
        return f"permissions.mode ({cfg.source('permissions.mode')})"
    return None


def check(args: ClaudeArgs, cfg: Config, cwd: str, env: Mapping[str, str] | None = None,
          managed: str | None = None) -> list[Finding]:
    """Refuse (UsageError, exit 2, one line naming the file and the key) when a settings source
    would silence the guard or loosen the mode: always under lockdown; otherwise unless
    ``[security] allow_settings_override`` is on. Returns the findings let through (to warn)."""
    env = os.environ if env is None else env
    found = findings(args, sources(args, cwd, env, managed), mode_chosen=mode_chosen(args, cfg))
    found += env_findings(args, env)
    lockdown = bool(cfg.lockdown.value)
    security = cfg.security()
    for f in found:
        if f.action in (REFUSE, UNGUARDED) or (f.action in (STRICT, WARN) and lockdown):
            if lockdown:
                raise UsageError(f"{f.line()}: refused by lockdown ({cfg.lockdown.source})")
            if f.action == UNGUARDED and not security.get("allow_unguarded"):
                raise UsageError(f"{f.line()}: refused: the guard's hooks could not run (set [security] "
                                 f"allow_unguarded = true to run with only its deny rules)")
            if f.action == REFUSE and not security["allow_settings_override"]:
                raise UsageError(f"{f.line()}: refused (set [security] allow_settings_override = true to run anyway)")
    return [f for f in found if f.action in (REFUSE, UNGUARDED, WARN)]


def enforce(args: ClaudeArgs, cfg: Config, cwd: str) -> None:
    """The launcher's hook-in: refuse, or say on stderr what the user let through."""
    for f in check(args, cfg, cwd):
        why = {REFUSE: "allowed by security.allow_settings_override", WARN: "refused under lockdown",
               UNGUARDED: "allowed by security.allow_unguarded: only the guard's deny rules hold"}[f.action]
        print(f"claudeguard: warning: {f.line()} ({why})", file=sys.stderr)


# --- during the session ----------------------------------------------------------------------
# The model can write these files too (checked on both pinned CLIs: a main-agent Write of
# .claude/settings.local.json with disableAllHooks, then the overlay-denied Write of a subagent
# ran). The CLI applies a changed settings file once it has been still for 1 s (its watcher's
# stabilityThreshold, 1000 ms in both versions), so a guard that notices within 0.2 s stops the
# session while the guard's hooks still answer.

WATCH_INTERVAL = 0.2


def protected_files(args: ClaudeArgs, cwd: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The settings files of this run that a tool of the session could write (and the CLI would
    read again mid-session): the user's, the project's (``project_files``), a ``--settings``
    file. A worktree made during the session (EnterWorktree, ``-w`` without a name) has its files
    under ``WORKTREES``: ``worktree_patterns``."""
    env = os.environ if env is None else env
    files = [user_settings_file(env)] + [path for _, path in project_files(args, cwd)]
    files += [os.path.abspath(v) for v in args.values("--settings") if not v.lstrip().startswith("{")]
    return list(dict.fromkeys(files))  # HOME may be the cwd


def worktree_patterns(cwd: str) -> list[str]:
    """The settings files of any worktree of this checkout (``*`` for its name)."""
    tree = os.path.join(repo_root(cwd), WORKTREES, "*", ".claude")
    return [os.path.join(tree, "settings.json"), os.path.join(tree, "settings.local.json")]


SETTINGS_WHY = "a Claude Code settings file the session reads again when it changes"


def protected_spec(args: ClaudeArgs, cwd: str, env: Mapping[str, str] | None = None,
                   cfg: Config | None = None) -> ProtectedSpec:
    """The built-in protected paths of a run (``policy.protect``): the guard's own files
    (``paths.guard_paths``), the Claude Code settings files the session re-reads, the files git
    runs code from (``plan.code_paths``) and the project files the user trusted (``config.trust``:
    what the user trusted is not the agent's to rewrite); asked: the files the user's editor
    and tools run code from later. Made once a plan (``plan.once``: the same ``args`` and ``cfg``
    objects), asked for the CLI's deny rules (plan/argv.py) and for the session's snapshot."""
    if env is not None:
        return _protected_spec(args, cwd, env, cfg)
    from claudeguard.plan.once import remembered

    spec = remembered(("protected_spec", *args.identity(), cwd, id(cfg)), (args, cfg),
                      lambda: _protected_spec(args, cwd, None, cfg))  # each caller gets lists of its own
    return {"reads": list(spec["reads"]), "writes": list(spec["writes"]), "asks": list(spec["asks"])}


def _protected_spec(args: ClaudeArgs, cwd: str, env: Mapping[str, str] | None, cfg: Config | None
                    ) -> ProtectedSpec:
    from claudeguard.paths import guard_paths
    from claudeguard.config.trust import in_project
    from claudeguard.plan.code_paths import code_paths

    env = os.environ if env is None else env
    found = guard_paths(env, cfg)
    from claudeguard.plan.code_paths import CodePaths, UnreadableGit

    root = repo_root(cwd)
    try:
        code = code_paths(root)
    except UnreadableGit:
        code = CodePaths()  # the sandbox refuses the session (plan.sandbox.prepare)
    writes = found.writes() + [(path, SETTINGS_WHY) for path in protected_files(args, cwd, env)]
    writes += [(path, SETTINGS_WHY + " (a worktree's)") for path in worktree_patterns(cwd)]
    writes += code.deny_writes
    writes += [(path, TRUSTED_WHY) for path in in_project(root, env)]
    return {"reads": [[p, why] for p, why in found.reads()], "writes": [[p, why] for p, why in writes],
            "asks": [[p, why] for p, why in code.ask_writes]}


TRUSTED_WHY = "a file you trusted (claudeguardctl config trust): its content binds until you trust a change"


def protected_rules(args: ClaudeArgs, cfg: Config, cwd: str) -> list[str]:
    """Deny rules for the CLI (``--disallowedTools``) that keep its file tools off the built-in
    protected paths (``policy.protect``: the guard's own files and the settings files): enforced
    by the CLI itself, so they hold even where a hook would not run. No config loosens them.

    One rule a path: the CLI's rule on a dir (``Edit(//dir)``) covers everything below it, there
    or not made yet, with a glob in its last part too (2.1.197, 2.1.330 and the newest:
    tests/test_protected_rules_real.py), so no ``//dir/**`` twin, and no rule for a path below
    another's of the same kind. Each rule costs the CLI's start (37 of them ~8 ms; bench/RESULTS.md)."""
    spec = protected_spec(args, cwd, cfg=cfg)
    wanted = [(kind, path.rstrip("/") or "/") for kinds, pairs in ((("Read", "Edit"), spec["reads"]),
                                                                     (("Edit",), spec["writes"]))
              for path, _ in pairs for kind in kinds]

    tops = set(wanted)

    def below_another(kind: str, path: str) -> bool:  # a rule of this kind on a dir above it
        return any((kind, path[:i] or "/") in tops for i, c in enumerate(path) if c == "/" and path != "/")

    # //abs: an absolute path
    out = [f"{kind}(/{path})" for kind, path in wanted if not below_another(kind, path)]
    return list(dict.fromkeys(out))
