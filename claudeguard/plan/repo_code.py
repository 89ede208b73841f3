"""Repository code is code: what a project brings that the CLI would run outside any sandbox, and
how a session keeps it from running until the user trusted that content (``config.trust``).

What counts (docs/notes/cli-surfaces.md sections 5 and 7, every version's placements at once):

- a project or local Claude Code settings file (``settings_sources.project_files``) holding any
  key outside ``SAFE_SETTINGS``: hooks of every event, ``statusLine``, ``apiKeyHelper``, ``env``,
  ``enabledPlugins``/``extraKnownMarketplaces``, ``enableAllProjectMcpServers``, helpers, ...
  (an unknown key counts: fail closed);
- a ``.mcp.json`` with servers (the cwd's, the repository root's, ``--project-config-root``'s, a
  worktree's);
- an agent, skill or command file (``.claude/agents/*.md``, ``.claude/skills/*/SKILL.md``,
  ``.claude/commands/**/*.md``) whose front matter has ``hooks``, a ``permissionMode`` looser than
  ``default`` or ``allowed-tools`` beyond reading ones, or whose body runs shell commands as it is
  invoked (``!`cmd```, a ```` ```! ```` block): the CLI runs those itself when the model calls
  the Skill tool, with no PreToolUse hook (in the box; the CLI's own deny rules apply, the guard's
  ask rules and reading of the command do not: measured on 2.1.197 and 2.1.332);
- a caller's ``--plugin-dir`` (a directory, trusted by its whole tree).

How the session keeps it from running (checked on 2.1.197, 2.1.330 and 2.1.332, ``tests/
test_repo_code_real.py``): ``--setting-sources`` without ``project`` (or ``local``) drops that
source whole: its hooks, helpers, status line, env, plugins, the servers it approves and the
project's agent files; the guard puts the dropped files' permission rules (allow, deny, ask) back
through its own ``--settings``, so the project's rules still hold. An untrusted ``.mcp.json``'s
servers are named in ``disabledMcpjsonServers`` of the guard's ``--settings`` (the user's own
servers stay). An untrusted ``--plugin-dir`` is left out of the CLI's argv. Each with one line on
stderr naming the file and the command that trusts it. Under lockdown any untrusted piece
refuses the launch (``check``). Nothing is dropped for a file the user trusted: once trusted,
the project's hooks run as before.

Why start without them rather than refuse (without lockdown): a cloned repository with a
formatter hook or a status line is the common case, and refusing it would make the guard the
thing people turn off; started without them, the session is what the repository would give an
untrusted checkout, its permission rules kept, and the line says how to get the rest.
"""

from __future__ import annotations

import json
import os

from claudeguard.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.config.load import Config
    from claudeguard.config.trust import Records
    from claudeguard.plan.claude_args import ClaudeArgs

# Settings keys that run nothing and loosen nothing the guard does not hold itself: a project file
# holding only these is loaded as it is. ``permissions`` is checked by the guard (its allow rules
# are the CLI's; the mode by settings_sources), ``disableAllHooks`` and the hook URL/env lists are
# refused by settings_sources before this is asked.
SAFE_SETTINGS = frozenset({
    "$schema", "permissions", "model", "cleanupPeriodDays", "includeCoAuthoredBy", "includeGitInstructions",
    "attribution", "outputStyle", "spinnerTipsEnabled", "alwaysThinkingEnabled", "respectGitignore", "language",
    "companyAnnouncements", "disabledMcpjsonServers", "theme", "verbose", "disableAllHooks", "allowedHttpHookUrls",
    "httpHookAllowedEnvVars", "effortLevel", "autoUpdates", "preferredNotifChannel",
    # Approvals of .mcp.json servers (the CLI writes them into settings.local.json when the user
    # answers its dialog): the servers' code is the .mcp.json's, and an untrusted one's servers are
    # named in the guard's disabledMcpjsonServers, which wins over both (checked on all three).
    "enabledMcpjsonServers", "enableAllProjectMcpServers",
})
LOOSE_AGENT_MODES = frozenset({"acceptEdits", "auto", "bypassPermissions"})
# A skill's or command's allowed-tools that grant nothing but reading (no write, no command, no fetch).
READING_TOOLS = frozenset({"Read", "Grep", "Glob", "LS", "NotebookRead", "TodoWrite"})


class Code:
    """One file (or plugin dir) of repository code: where, what it holds, whether trusted."""

    __slots__ = ("path", "role", "what", "trusted", "names")

    def __init__(self, path: str, role: str, what: list[str], trusted: bool, names: list[str] | None = None) -> None:
        self.path = path
        self.role = role  # "project" | "local" (a settings source), "mcp", "agent", "plugin"
        self.what = what  # what in it runs, e.g. ["hooks (SessionStart, PreToolUse)", "apiKeyHelper"]
        self.trusted = trusted
        self.names = names or []  # an .mcp.json's server names

    def __repr__(self) -> str:
        return f"Code(path={self.path!r}, role={self.role!r}, what={self.what!r}, trusted={self.trusted!r})"

    def line(self) -> str:
        from claudeguard.config.trust import command_for

        return (f"{self.path}: {', '.join(self.what)}: repository code not run until you trust it "
                f"({command_for(self.path)})")


def settings_code(data: dict[str, object]) -> list[str]:
    """What a settings file holds that runs, or could (every key outside ``SAFE_SETTINGS``)."""
    out = []
    for key, value in data.items():
        if key in SAFE_SETTINGS:
            continue
        if key == "hooks" and isinstance(value, dict):
            events = [e for e, groups in value.items() if groups]
            if events:
                out.append(f"hooks ({', '.join(events)})")
            continue
        if value in (None, False, {}, []):
            continue
        out.append(key)
    return out


def _read_json(path: str) -> dict[str, object] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _bases(args: ClaudeArgs, cwd: str) -> list[str]:
    """The directories a run takes project files from (cwd, repository root, the config root,
    a named worktree)."""
    from claudeguard.plan.settings_sources import WORKTREES, option_value, repo_root

    root = repo_root(cwd)
    out = [os.path.abspath(cwd), root]
    pcr = option_value(args, "--project-config-root")
    if pcr:
        out.append(os.path.abspath(os.path.join(cwd, pcr)))
    name = args.last("--worktree") if args.has("--worktree") else None
    if name:
        out.append(os.path.join(root, WORKTREES, name))
    return list(dict.fromkeys(out))


def mcp_files(args: ClaudeArgs, cwd: str) -> list[str]:
    return [os.path.join(base, ".mcp.json") for base in _bases(args, cwd)]


def agent_files(args: ClaudeArgs, cwd: str) -> list[str]:
    """The project's agent, skill and command files (what ``markdown_code`` reads)."""
    out = []
    for base in _bases(args, cwd):
        agents = os.path.join(base, ".claude", "agents")
        skills = os.path.join(base, ".claude", "skills")
        commands = os.path.join(base, ".claude", "commands")
        # Every one (links not followed): a file left unread would be a command left unjudged.
        for root, _dirs, names in os.walk(commands):
            out += [os.path.join(root, n) for n in sorted(names) if n.endswith(".md")]
        try:
            out += [os.path.join(agents, n) for n in sorted(os.listdir(agents)) if n.endswith(".md")]
        except OSError:
            pass
        try:
            out += [os.path.join(skills, n, "SKILL.md") for n in sorted(os.listdir(skills))
                    if os.path.isfile(os.path.join(skills, n, "SKILL.md"))]
        except OSError:
            pass
    return out


def markdown_code(text: str) -> list[str]:
    """What an agent, skill or command file holds that runs or loosens: ``hooks``, a loose
    ``permissionMode`` and ``allowed-tools`` beyond ``READING_TOOLS`` in its front matter; shell
    commands its body runs when invoked."""
    lines = text.splitlines()
    out = []
    body = 0
    if lines and lines[0].strip() == "---":
        body = len(lines)
        tools: list[str] = []
        listing = False
        for number, line in enumerate(lines[1:], 1):
            if line.strip() == "---":
                body = number + 1
                break
            if listing and line[:1].isspace() and line.strip().startswith("-"):
                tools.append(line.strip()[1:].strip().strip("'\""))
                continue
            listing = False
            key, sep, value = line.partition(":")
            if not sep or line[:1].isspace():
                continue
            key, value = key.strip(), value.strip().strip("'\"")
            if key == "hooks":
                out.append("hooks")
            elif key == "permissionMode" and value in LOOSE_AGENT_MODES:
                out.append(f"permissionMode {value}")
            elif key in ("allowed-tools", "allowed_tools", "allowedTools"):
                listing = not value
                tools += _tool_names(value.strip("[]"))
        granted = [t for t in tools if t.split("(", 1)[0].strip() not in READING_TOOLS]
        if granted:
            out.append(f"allowed-tools ({', '.join(granted)})")
    text_body = "\n".join(lines[body:])
    if "!`" in text_body or "```!" in text_body:
        out.append("shell commands run as it is invoked (!`...`)")
    return out


def _tool_names(value: str) -> list[str]:
    """A comma-separated tool list, a comma inside a rule's parentheses kept."""
    out, depth, word = [], 0, ""
    for ch in value:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth <= 0:
            out.append(word.strip())
            word = ""
        else:
            word += ch
    out.append(word.strip())
    return [w.strip("'\"") for w in out if w.strip("'\"")]


def find(args: ClaudeArgs, cwd: str, records: Records | None = None, *, everything: bool = False) -> list[Code]:
    """Every piece of repository code this run would load; ``everything``: each project or local
    settings file, trusted or not, code or not (what ``config trust`` offers). With the trust
    records of the day, read once a plan (``plan.once``)."""
    if records is not None:
        return _find(args, cwd, records, everything)
    from claudeguard.plan.once import remembered

    def read() -> list[Code]:
        from claudeguard.config.trust import load

        return _find(args, cwd, load(), everything)

    return list(remembered(("repo_code", *args.identity(), cwd, everything), (args,), read))


def _find(args: ClaudeArgs, cwd: str, records: Records, everything: bool) -> list[Code]:
    from claudeguard.plan.settings_sources import allowed_file_sources, project_files

    allowed, _ = allowed_file_sources(args)
    out: list[Code] = []
    for role, path in project_files(args, cwd):
        data = _read_json(path)
        if data is None or role not in allowed:
            continue
        what = settings_code(data)
        if what or everything:
            out.append(Code(path, role, what, records.trusted(path)))
    for path in mcp_files(args, cwd):
        data = _read_json(path)
        servers = data.get("mcpServers") if data else None
        if isinstance(servers, dict) and servers:
            names = sorted(str(n) for n in servers)
            out.append(Code(path, "mcp", [f"MCP servers ({', '.join(names)})"], records.trusted(path), names))
    for path in agent_files(args, cwd):
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                what = markdown_code(fh.read(65536))
        except OSError:
            continue
        if what:
            out.append(Code(path, "agent", what, records.trusted(path)))
    for value in args.values("--plugin-dir"):
        path = os.path.abspath(os.path.join(cwd, value))
        out.append(Code(path, "plugin", ["a plugin (--plugin-dir)"], records.trusted(path)))
    seen: set[str] = set()
    unique = []
    for code in out:
        if code.path not in seen:
            seen.add(code.path)
            unique.append(code)
    return unique


def trust_candidates(cwd: str) -> list[str]:
    """What ``config trust`` without FILE trusts in ``cwd``: the project config that applies, and
    every file of repository code a session here would load."""
    from claudeguard.config.find import project_config_file
    from claudeguard.plan.claude_args import parse_claude_args

    out = []
    found = project_config_file(cwd)
    if found:
        out.append(found)
    out += [c.path for c in find(parse_claude_args([]), cwd, everything=True) if c.role != "plugin"]
    return list(dict.fromkeys(out))


class Treatment:
    """What a session does about untrusted repository code (``treat``)."""

    __slots__ = ("untrusted", "drop", "rules", "disabled_mcp", "plugin_dirs")

    def __init__(self) -> None:
        self.untrusted: list[Code] = []
        self.drop: set[str] = set()  # setting sources left out: "project", "local"
        self.rules: dict[str, list[tuple[str, str]]] = {}  # kind -> (rule, root) of the dropped files
        self.disabled_mcp: list[str] = []  # .mcp.json servers the guard's settings disable
        self.plugin_dirs: list[str] = []  # --plugin-dir values left out of the CLI's argv

    def __bool__(self) -> bool:
        return bool(self.drop or self.disabled_mcp or self.plugin_dirs)


def treat(args: ClaudeArgs, cwd: str, records: Records | None = None) -> Treatment:
    """How this run keeps untrusted repository code from running (see the module docstring)."""
    from claudeguard.plan.settings_sources import allowed_file_sources, project_files

    out = Treatment()
    for code in find(args, cwd, records):
        if code.trusted:
            continue
        out.untrusted.append(code)
        if code.role in ("project", "local"):
            out.drop.add(code.role)
        elif code.role == "agent":
            out.drop.add("project")  # agent files come with the project source
        elif code.role == "mcp":
            out.disabled_mcp += [n for n in code.names if n not in out.disabled_mcp]
        elif code.role == "plugin":
            out.plugin_dirs.append(code.path)
    if out.drop:
        allowed, _ = allowed_file_sources(args)
        for role, path in project_files(args, cwd):
            if role not in out.drop or role not in allowed:
                continue
            data = _read_json(path)
            perms = data.get("permissions") if data else None
            root = os.path.dirname(os.path.dirname(path))
            for kind in ("allow", "deny", "ask"):
                rules = perms.get(kind) if isinstance(perms, dict) else None
                for rule in rules if isinstance(rules, list) else []:
                    if isinstance(rule, str) and (rule, root) not in out.rules.get(kind, []):
                        out.rules.setdefault(kind, []).append((rule, root))
    return out


def session_args(args: ClaudeArgs) -> ClaudeArgs:
    """The arguments the sessions of this run get: for ``claude agents``, the words after it
    (agent view hands its ``--plugin-dir``, ``--setting-sources``, ... to what it dispatches)."""
    if args.subcommand == "agents":
        from claudeguard.plan.claude_args import command_args

        return command_args(args)
    return args


def check(args: ClaudeArgs, cfg: Config, cwd: str) -> Treatment:
    """Refuse (lockdown: one line naming the file and the command that trusts it) or say on
    stderr what will not run; returns the treatment ``argv.build_plan`` applies."""
    import sys

    args = session_args(args)
    found = treat(args, cwd)
    if found.untrusted and cfg.lockdown.value:
        first = found.untrusted[0]
        from claudeguard.config.trust import command_for

        raise UsageError(f"{first.path}: {', '.join(first.what)}: repository code the user has not trusted: refused "
                         f"by lockdown ({cfg.lockdown.source}); after reviewing it: {command_for(first.path)}")
    if cfg.lockdown.value:
        # An agent's own looser mode is a loosening: under lockdown no file but the user's may
        # loosen, trusted or not.
        for code in find(args, cwd):
            loose = [w for w in code.what if w.startswith("permissionMode ")]
            if code.role == "agent" and loose and code.path not in {c.path for c in found.untrusted}:
                raise UsageError(f"{code.path}: {loose[0]}: an agent's looser mode: refused by lockdown "
                                 f"({cfg.lockdown.source})")
    for code in found.untrusted:
        print(f"claudeguard: {code.line()}", file=sys.stderr)
    return found


def setting_sources_value(args: ClaudeArgs, drop: set[str]) -> str:
    """``--setting-sources`` for a run that leaves out ``drop``: the caller's list (or all three)
    without them."""
    from claudeguard.plan.settings_sources import FILE_SOURCES, allowed_file_sources

    allowed, _ = allowed_file_sources(args)
    return ",".join(name for name in FILE_SOURCES if name in allowed and name not in drop)


def untrusted(cfg: Config, found: Treatment) -> list[dict[str, object]]:
    """What the end-of-run report says of this run's untrusted project files: the config files
    whose loosening was ignored and the code that did not run (``found``: the plan's treatment,
    so the report names what the plan left out, read once)."""
    out: list[dict[str, object]] = [{"path": path, "kind": "config", "ignored": list(what)}
                                    for path, what in cfg.untrusted]
    out += [{"path": code.path, "kind": code.role, "not_run": list(code.what)} for code in found.untrusted]
    return out
