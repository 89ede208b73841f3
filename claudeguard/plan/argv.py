"""Build the child's argv and environment: the injection of the guard into the real CLI.

The caller's arguments stay in order; the guard's own options go in front of them as
``--flag=value`` (one word each), because commander's variadic options (``--allowedTools``,
``--mcp-config``) would otherwise swallow the caller's prompt that follows, and because a value
that starts with ``-`` must never be read as an option. The one exception is ``--settings``: the
CLI keeps only the last, and reads it with more than one reader (commander, and an early loader
that knows fewer value-taking options), so the caller's ``--settings`` words are taken out, the
last one (as commander reads it) is merged with the guard's hooks (``hooks.guard_settings``; the
caller's own hooks and keys kept), and that one word goes last among the options (before a
``--``).

Fail closed by construction (``cli_flags``): what the CLI is told by flags alone allows nothing
any agent's policy denies or asks about. The CLI gets a permission mode that allows no more than
``default`` (``CLI_MODES``) whatever mode the caller, the config or a settings file asked for;
the guard's hook allows, per agent, what the asked-for mode would (``gate/modes.py``). The
caller's ``--allowedTools`` keep only the rules ``cli_allow_rules`` would give (the hook allows
the rest as the caller's rules, after the policy), ``--dangerously-skip-permissions`` is taken
out (the hook allows what bypass would), and an agent's ``permissionMode`` in ``--agents`` that
allows more than ``default`` is removed (refused under lockdown).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from claudeguard.errors import UsageError
from claudeguard.plan.hooks import (
    MCP_SERVER_NAME, PROMPT_TOOL, ctl_args, ctl_command, guard_settings, keeps_transcript, print_asker,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, TypedDict

    from claudeguard.config.load import Config
    from claudeguard.plan.claude_args import ClaudeArgs
    from collections.abc import Mapping

    from claudeguard.plan.hooks import GuardSettings, HttpHooks
    from claudeguard.plan.repo_code import Treatment

    class RunFacts(TypedDict, total=False):
        """What is known of the run when its plan is built."""

        cli_version: str | None  # the real CLI's (plan.cli_version); in -p it decides who asks (print_asker)
        status_line: bool  # a person is at the session's terminal: the guard's status line says what waits

DROPPED = "\0dropped\0"  # an argv word the guard leaves out (no real argv word holds a NUL)
BYPASS_FLAGS = ("--dangerously-skip-permissions", "--allow-dangerously-skip-permissions")
SETTINGS_FILE = "settings.json"  # in the session dir: the guard's settings, merged with the caller's (0600)


def secret_env(cfg: Config | None) -> list[str]:
    """The environment variables that may hold a credential of the guard's (the fleet's
    password and its desk's approver password: their default names, ``fleet.password_env`` and
    ``fleet.approver_password_env``): the CLI's environment never has them."""
    names = ["CLAUDEGUARD_FLEET_PASSWORD", "CLAUDEGUARD_FLEET_APPROVER_PASSWORD"]
    for named in (cfg.fleet_password_env(), cfg.fleet_approver_password_env()) if cfg is not None else ():
        if named and named not in names:
            names.append(named)
    return names


def child_environ(environ: Mapping[str, str], additions: Mapping[str, str],
                  cfg: Config | None = None) -> dict[str, str]:
    """The CLI's environment: ``environ`` with ``additions`` (a ``DROPPED`` value removes its
    variable), and never a variable of ``secret_env``."""
    env = dict(environ)
    env.update(additions)
    for name in secret_env(cfg):
        env.pop(name, None)
    return {k: v for k, v in env.items() if v != DROPPED}


class Plan:
    """The child's argv and environment additions, and the files written into the session dir
    for it (name -> text: the session's keeper writes them again if the runtime dir is removed).
    Plain classes in this module: dataclasses cost every session's start ~10 ms of imports,
    bench/RESULTS.md."""

    def __init__(self, argv: list[str], env_additions: dict[str, str], session_id: str,
                 files: dict[str, str] | None = None, untrusted: list[dict[str, object]] | None = None,
                 dropped: list[str] | None = None) -> None:
        self.argv = argv
        self.env_additions = env_additions
        self.session_id = session_id
        self.files = files or {}
        # What the plan left out as untrusted repository code or config (the end-of-run report's
        # rows), and the settings sources the CLI is not given (the settings watch's): the
        # launcher takes both from here rather than reading the repository again.
        self.untrusted = untrusted or []
        self.dropped = dropped or []



def load_settings_value(value: str) -> dict[str, object]:
    """A ``--settings`` value (inline JSON or a file) as the JSON object it holds; a usage error
    when it cannot be read or is not an object."""
    text = value
    if not value.lstrip().startswith("{"):
        try:
            text = Path(value).read_text()
        except OSError as exc:
            raise UsageError(f"--settings {value}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--settings {value[:60]}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--settings {value[:60]}: must be a JSON object")
    return data


def check_lockdown(args: ClaudeArgs, cfg: Config) -> None:
    """Refuse every way of loosening the guard when lockdown is on (before anything starts)."""
    if not cfg.lockdown.value:
        return
    why = f"lockdown ({cfg.lockdown.source})"
    for flag in BYPASS_FLAGS:
        if args.has(flag):
            raise UsageError(f"{flag} is refused: {why}")
    if args.last("--permission-mode") == "bypassPermissions":
        raise UsageError(f"--permission-mode bypassPermissions is refused: {why}")
    for value in args.values("--settings"):
        data = load_settings_value(value)
        perms = data.get("permissions") or {}
        if isinstance(perms, dict) and perms.get("defaultMode") == "bypassPermissions":
            raise UsageError(f"--settings sets permissions.defaultMode bypassPermissions: refused by {why}")
        if data.get("disableAllHooks"):
            raise UsageError(f"--settings sets disableAllHooks: refused by {why}")
    if args.has("--bare") or "--bare" in (args.argv[:args.argv.index("--")] if "--" in args.argv else args.argv):
        raise UsageError(f"--bare skips the guard's hooks: refused by {why}")


def absolute_rule(rule: str, root: str, cwd: str) -> str:
    """Path rules anchored at a config file (``Read(/p)``) become absolute (``Read(//root/p)``)
    so the CLI reads them the same way the guard does."""
    name, paren, rest = rule.partition("(")
    if not paren or name not in ("Read", "Edit", "Write", "NotebookEdit", "MultiEdit") or not rest.endswith(")"):
        return rule
    spec = rest[:-1]
    if spec.startswith("/") and not spec.startswith("//"):
        return f"{name}(/{os.path.join(root, spec.lstrip('/'))})"
    if spec.startswith("./"):
        return f"{name}(/{os.path.join(cwd, spec[2:])})"
    return rule



EDIT_FAMILY = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})


def _rule_tool(rule: str) -> str:
    return rule.partition("(")[0].strip()


def _tools_overlap(a: str, b: str) -> bool:
    """Could a rule naming tool ``a`` and one naming ``b`` match the same call? (``*``: any.)"""
    if a == b or "*" in (a, b):
        return True
    if "Edit" in (a, b) and a in EDIT_FAMILY and b in EDIT_FAMILY:
        return True  # Edit(...) rules cover every file-editing tool
    if a.startswith("mcp__") and b.startswith("mcp__"):
        short, long = sorted((a.rstrip("*").rstrip("_"), b.rstrip("*").rstrip("_")), key=len)
        return long == short or long.startswith(short + "__")
    return False


def cli_allow_rules(cfg: Config, cwd: str) -> list[str]:
    """The policy's allow rules for ``--allowedTools``, less every rule of a tool that some agent
    may not simply run (an ask rule, an agent's deny or ask, ...): the guard's hook allows those
    calls itself, and when it cannot answer (no hook output: crashed, service gone) the CLI falls
    back to its own prompt for that tool (our prompt tool, a dialog, or a denial) instead of
    allowing an ask call that nobody answered."""
    # (Read-only agent types are not counted in guarded_tools: that would take every Bash rule
    # off the list by default, and their writes are judged by the hook.) The CLI's --allowedTools
    # apply to every agent alike, so such a tool is left to the hook (and, when the hook cannot
    # answer, to the prompt tool, which then asks a human).
    guarded = guarded_tools(cfg)
    return [absolute_rule(r.rule, r.root, cwd) for r in cfg.rules.get("permissions.allow", [])
            if not any(_tools_overlap(_rule_tool(r.rule), tool) for tool in guarded)]


def merge_settings(caller: Mapping[str, object], ours: GuardSettings) -> dict[str, object]:
    """The caller's settings with the guard's hooks (and rules) added: the caller's own hooks and
    keys kept; the guard's ``sandbox.enabled`` and ``env`` values win over the caller's."""
    merged: dict[str, Any] = dict(caller)  # whatever JSON the caller gave: its lists are extended
    hooks = dict(merged.get("hooks") or {})
    for event, entries in ours["hooks"].items():
        hooks[event] = list(hooks.get(event) or []) + entries
    merged["hooks"] = hooks
    for key in ("sandbox", "env"):
        if key in ours:
            theirs = merged.get(key)
            merged[key] = {**(theirs if isinstance(theirs, dict) else {}), **ours[key]}
    if "permissions" in ours:
        perms = dict(merged.get("permissions") or {})
        for key, rules in ours["permissions"].items():
            perms[key] = list(perms.get(key) or []) + [r for r in rules if r not in (perms.get(key) or [])]
        merged["permissions"] = perms
    if "disabledMcpjsonServers" in ours:  # repository servers not trusted: theirs and ours
        theirs = merged.get("disabledMcpjsonServers")
        names = list(theirs) if isinstance(theirs, list) else []
        merged["disabledMcpjsonServers"] = names + [n for n in ours["disabledMcpjsonServers"] if n not in names]
    if "statusLine" in ours:
        merged["statusLine"] = ours["statusLine"]  # it runs the caller's (plan/status_line.py)
    return merged


def repo_code_argv(rest: list[str], args: ClaudeArgs, ours: GuardSettings, cwd: str,
                   found: Treatment | None = None) -> list[str]:
    """Keep the repository's untrusted code from running (``plan.repo_code``): its dropped
    settings sources' rules and its disabled servers go into ``ours``; untrusted ``--plugin-dir``
    words become ``DROPPED`` in ``rest`` (indexes stay; ``build_plan`` leaves them out at the
    end); returns what goes in front (``--setting-sources``), or rewrites the caller's own
    ``--setting-sources`` where it stands (the CLI keeps the last). ``found``: the repository's
    treatment when the caller has it (else read here)."""
    from claudeguard.plan.repo_code import setting_sources_value, treat

    if found is None:
        found = treat(args, cwd)
    if not found:
        return []
    if found.rules:
        perms = ours.setdefault("permissions", {})
        for kind, rules in found.rules.items():
            perms.setdefault(kind, [])
            perms[kind] += [r for r in (absolute_rule(rule, root, cwd) for rule, root in rules) if r not in perms[kind]]
    if found.disabled_mcp:
        ours["disabledMcpjsonServers"] = list(found.disabled_mcp)
    drop = {os.path.abspath(os.path.join(cwd, v)) for v in found.plugin_dirs}
    for index, values in args.options.get("--plugin-dir", []):
        if values and os.path.abspath(os.path.join(cwd, values[-1])) in drop:
            rest[index:index + (1 if "=" in rest[index] else 2)] = [DROPPED] * (1 if "=" in rest[index] else 2)
    if not found.drop:
        return []
    value = setting_sources_value(args, found.drop)
    given = args.options.get("--setting-sources", [])
    if given:
        index = given[-1][0]
        if "=" in rest[index]:
            rest[index] = "--setting-sources=" + value
        elif index + 1 < len(rest):
            rest[index + 1] = value
        return []
    return ["--setting-sources=" + value]


def build_plan(real_cli: str, args: ClaudeArgs, cfg: Config, *, session_id: str, session_dir: str | None, cwd: str,
               http: HttpHooks | None = None, settings_file: str | None = None, exec_pid: int | None = None,
               run: RunFacts | None = None) -> Plan:
    """The final argv (real CLI first) and the environment additions for a guarded session.
    ``exec_pid``: the launcher's pid when another process (the service's planner) builds it.
    ``run``: what is known of the run (``RunFacts``)."""
    check_lockdown(args, cfg)
    if args.errors:
        # an option at the end that wants a value: the CLI refuses it, and would take the word the
        # guard puts last (its --settings) as that value
        raise UsageError(f"{args.errors[0]}: the CLI refuses this command line")
    facts: RunFacts = run or {}
    ctl = ctl_command()
    front, rest = cli_flags(args, cfg, cwd)
    front += _rule_flags(args, cfg, cwd)
    asker = print_asker(args, facts.get("cli_version"))
    ours = guard_settings(cfg, ctl, cwd, http, session_id, print_mode=args.print_mode, asker=asker,
                          one_prompt=args.print_mode and args.last("--input-format") != "stream-json",
                          transcript_kept=args.print_mode and keeps_transcript(args, cwd), session_dir=session_dir)
    from claudeguard.plan.repo_code import treat, untrusted

    found = treat(args, cwd)  # once a plan: the argv, the report's rows and the watch's sources
    dropped = found.drop
    front += repo_code_argv(rest, args, ours, cwd, found)  # untrusted repository code: DROPPED words, our settings
    box_env = sandbox_env(real_cli, args, cfg, cwd=cwd, session_dir=session_dir, session_id=session_id, ctl=ctl)
    if box_env:
        ours["env"] = box_env  # wins over every project, local and user env block (plan/sandbox.py)
    if facts.get("status_line") and session_dir:
        from claudeguard.plan.status_line import status_line_setting

        # the statusLine of a settings source left out as untrusted repository code never runs
        ours["statusLine"] = status_line_setting(args, cwd, session_dir, ctl,
                                                 applies=lambda src: src.name not in dropped)
    files: dict[str, str] = {}
    if settings_file is None and http is not None and session_dir:
        # The HTTP hooks hold the secret: into a 0600 file, never argv (every user reads argv).
        settings_file = os.path.join(session_dir, SETTINGS_FILE)
    last = _settings_word(args, rest, ours, settings_file, session_dir, files)
    end = args.end_of_options if args.end_of_options is not None else len(rest)
    rest[end:end] = [last]

    # Nothing a hook relies on: an env block of any settings source could replace it (the hooks
    # find their session through their own URL or command line). The launcher's pid only keeps a
    # claudeguard that PATH leads back to from starting itself (plan.discovery.check_recursion).
    env_add = {"CLAUDEGUARD_EXEC_PID": str(exec_pid or os.getpid())}
    env_add.update(box_env)
    # The fleet's credential never reaches the CLI (nor, so, any tool or hook it starts).
    env_add.update({name: DROPPED for name in secret_env(cfg) if name in os.environ})
    if asker == "prompt-tool":
        front += _prompt_tool_flags(http, session_id, session_dir, ctl, files)
    return Plan([real_cli, *front, *(w for w in rest if w != DROPPED)], env_add, session_id, files,
                untrusted=untrusted(cfg, found), dropped=sorted(dropped))


def _rule_flags(args: ClaudeArgs, cfg: Config, cwd: str) -> list[str]:
    """The policy's allow and deny rules as the CLI's own flags, the built-in protected paths'
    denies among them (no tool may switch the guard off through a settings file)."""
    from claudeguard.plan.settings_sources import protected_rules

    allow = cli_allow_rules(cfg, cwd)
    deny = [absolute_rule(r.rule, r.root, cwd) for r in cfg.rules.get("permissions.deny", [])]
    deny += protected_rules(args, cfg, cwd)
    # Comma-joined in one word: a rule may contain spaces (`Bash(git diff *)`).
    out = []
    if allow:
        out.append("--allowedTools=" + ",".join(allow))
    if deny:
        out.append("--disallowedTools=" + ",".join(deny))
    return out


def _settings_word(args: ClaudeArgs, rest: list[str], ours: GuardSettings, settings_file: str | None,
                   session_dir: str | None, files: dict[str, str]) -> str:
    """The one ``--settings`` word: the caller's last one (as the CLI reads it) merged with ours
    and standing last among the options, for every reader of argv the CLI has (2.1.197's early
    settings loader steps over fewer options than commander: a ``--workload --settings={}`` gives
    it ``{}``, and the last word it finds is ours). The caller's own words are dropped from
    ``rest``; in ``settings_file`` (0600: it may hold the secret) when one is given."""
    caller: dict[str, Any] = {}
    found = args.options.get("--settings", [])
    if found and found[-1][1]:
        caller = load_settings_value(found[-1][1][-1])
    for index, vals in found:
        _drop(rest, index, vals)
    merged = merge_settings(caller, ours)
    if settings_file is None:
        return "--settings=" + json.dumps(merged, separators=(",", ":"))
    from claudeguard.files import write_atomic

    text = json.dumps(merged, separators=(",", ":"))
    write_atomic(Path(settings_file), text)
    if session_dir and os.path.dirname(settings_file) == session_dir:
        files[os.path.basename(settings_file)] = text
    return "--settings=" + settings_file


def _prompt_tool_flags(http: HttpHooks | None, session_id: str, session_dir: str | None, ctl: list[str],
                       files: dict[str, str]) -> list[str]:
    """The guard's prompt tool: its MCP server and ``--permission-prompt-tool``."""
    out = []
    if http is not None:
        # The service answers the prompt tool too (MCP over HTTP, both pinned CLIs): no server
        # process for the CLI to start and wait for (~90 ms of every run). The header holds the
        # secret, so the config goes in a 0600 file, not in argv.
        server: dict[str, Any] = {"type": "http", "url": f"http://127.0.0.1:{http.port}/mcp/{session_id}",
                                  "headers": {"Authorization": f"Bearer {http.token}"}}
        config = json.dumps({"mcpServers": {MCP_SERVER_NAME: server}}, separators=(",", ":"))
        if session_dir:
            from claudeguard.files import write_atomic

            write_atomic(Path(session_dir) / "mcp.json", config)
            files["mcp.json"] = config
            out.append("--mcp-config=" + str(Path(session_dir) / "mcp.json"))
        else:
            out.append("--mcp-config=" + config)  # a dry run: no secret exists yet
    else:
        server = {"command": ctl[0], "args": ctl[1:] + ctl_args("mcp-serve", session_dir)}
        out.append("--mcp-config=" + json.dumps({"mcpServers": {MCP_SERVER_NAME: server}}, separators=(",", ":")))
    out.append(f"--permission-prompt-tool={PROMPT_TOOL}")
    return out


# Modes the CLI is given as they are: they allow nothing `default` does not (plan asks before
# any change, dontAsk denies what no rule allows). Every other mode is given as `default`.
CLI_MODES = ("default", "plan", "dontAsk")
# Modes whose allowances the guard's hook gives itself, per agent (gate/modes.py). `auto` is not
# among them: its classifier is the CLI's own, so under the guard it runs as `default`.
EMULATED_MODES = ("acceptEdits", "bypassPermissions")


def session_modes(args: ClaudeArgs, cfg: Config, cwd: str, env: Mapping[str, str] | None = None
                  ) -> tuple[str, str, str]:
    """(the permission mode this run asks for, who asks for it, the mode the CLI is given): the
    caller's ``--dangerously-skip-permissions`` or ``--permission-mode``, else the config's
    ``permissions.mode``, else the last settings file that sets ``permissions.defaultMode``
    (not to bypassPermissions: plan/settings_sources.py refuses that), else ``default``."""
    if args.has("--dangerously-skip-permissions"):
        asked, who = "bypassPermissions", "--dangerously-skip-permissions"
    elif args.last("--permission-mode"):
        asked, who = str(args.last("--permission-mode")), "--permission-mode"
    elif cfg.permission_mode():
        asked, who = str(cfg.permission_mode()), f"permissions.mode ({cfg.source('permissions.mode')})"
    else:
        asked, who = "default", "default"
        from claudeguard.plan.settings_sources import sources

        for src in sources(args, cwd, os.environ if env is None else env):
            perms = src.data.get("permissions") if src.loaded and src.data else None
            mode = perms.get("defaultMode") if isinstance(perms, dict) else None
            if isinstance(mode, str) and mode != "bypassPermissions":
                asked, who = mode, f"permissions.defaultMode ({src.where})"
    return asked, who, asked if asked in CLI_MODES else "default"


def cli_flags(args: ClaudeArgs, cfg: Config, cwd: str) -> tuple[list[str], list[str]]:
    """The guard's own flags before the caller's (the permission mode) and the caller's words as
    the CLI gets them (``DROPPED`` where a word is taken out, so that every other word keeps its
    index in ``args``): see the module docstring, "Fail closed by construction"."""
    asked, who, mode = session_modes(args, cfg, cwd)
    if asked != mode and asked not in EMULATED_MODES:
        import sys

        print(f"claudeguard: permission mode {asked} ({who}) runs as {mode}: its allowances are the CLI's own, which "
              f"the guard cannot give per agent; the guard asks instead", file=sys.stderr, flush=True)
    rest = list(args.argv)
    for name in ("--permission-mode", "--dangerously-skip-permissions"):
        for index, vals in args.options.get(name, []):
            _drop(rest, index, vals)
    guarded = guarded_tools(cfg)
    for index, vals in args.options.get("--allowedTools", []):
        keep = [rule for rule in split_tool_list(vals)
                if not any(_tools_overlap(_rule_tool(rule), tool) for tool in guarded)]
        if keep != split_tool_list(vals):
            _drop(rest, index, vals)
            if keep:
                rest[index] = "--allowedTools=" + ",".join(keep)
    for index, vals in args.options.get("--agents", []):
        if vals:
            agents = agents_without_modes(vals[-1], cfg)
            if agents is not None:
                _drop(rest, index, vals)
                rest[index] = "--agents=" + agents
    return [f"--permission-mode={mode}"], rest


def _drop(rest: list[str], index: int, vals: list[str]) -> None:
    """Take out the option at ``index`` and its values (the words after it, unless they were in
    the word itself: ``--opt=value``, ``-dvalue``)."""
    word = rest[index]
    inline = "=" in word or (len(word) > 2 and word[0] == "-" and word[1] != "-")
    for i in range(index, index + 1 + (0 if inline else len(vals))):
        rest[i] = DROPPED


def agents_without_modes(value: str, cfg: Config) -> str | None:
    """The caller's ``--agents`` JSON without a ``permissionMode`` that allows more than
    ``default`` (2.1.197 honours bypassPermissions there: the agent's calls would skip every
    question), said in one line on stderr; refused under lockdown. None: nothing to change (or
    not JSON the guard can read: the CLI refuses that itself)."""
    try:
        agents = json.loads(value)
    except ValueError:
        return None
    if not isinstance(agents, dict):
        return None
    loose = {name: spec.get("permissionMode") for name, spec in agents.items()
             if isinstance(spec, dict) and "permissionMode" in spec and spec.get("permissionMode") not in CLI_MODES}
    if not loose:
        return None
    name, mode = next(iter(loose.items()))
    if cfg.lockdown.value:
        raise UsageError(f"--agents: agent {name} sets permissionMode {mode}: refused by lockdown "
                         f"({cfg.lockdown.source})")
    import sys

    print(f"claudeguard: --agents: permissionMode removed from agent(s) {', '.join(sorted(loose))}: an agent's own "
          f"mode would let its calls skip the guard's questions; the guard's policy decides them",
          file=sys.stderr, flush=True)
    out = {k: ({key: v for key, v in spec.items() if key != "permissionMode"} if k in loose else spec)
           for k, spec in agents.items()}
    return json.dumps(out, separators=(",", ":"))


def guarded_tools(cfg: Config) -> set[str]:
    """Tools some agent must not simply run (an ask rule anywhere, an agent's deny or ask rule,
    a tool blocked for subagents): no flag of the CLI's may allow them (``cli_allow_rules``)."""
    guarded = {_rule_tool(r.rule) for key, rules in cfg.rules.items()
               if key == "permissions.ask" or (key.startswith("agents.") and key.endswith((".ask", ".deny")))
               for r in rules}
    if any(rep.value for rep in cfg.agent_replace.values()):
        guarded.add("*")  # an agent whose own rules replace these: only the hook knows who is calling
    return guarded | set(cfg.subagents()["blocked_tools"])


MANAGED_SOURCES = ("managed", "--managed-settings")


def cli_sandbox_sources(args: ClaudeArgs, cwd: str) -> list[tuple[str, bool]]:
    """(where, managed) of each settings source of this run that turns Claude Code's own sandbox
    on (``sandbox.enabled: true``)."""
    from claudeguard.plan.settings_sources import sources

    out = []
    for src in sources(args, cwd, os.environ):
        cli_box = src.settings.get("sandbox") if src.loaded else None
        if isinstance(cli_box, dict) and cli_box.get("enabled") is True:
            where = src.where if src.name in src.where else f"{src.name} {src.where}"
            out.append((where, src.name in MANAGED_SOURCES))
    return out


def check_cli_sandbox(args: ClaudeArgs, cfg: Config, cwd: str) -> None:
    """Managed settings (the machine's, or a caller's ``--managed-settings``) that turn Claude
    Code's own sandbox on win over the guard's ``sandbox.enabled: false``, and with it the CLI
    sends the guard's HTTP hooks through its proxy, which refuses them: every call then runs
    unguarded (2.1.197 ran an ask-rule call unasked; checked on 2.1.197, 2.1.330, 2.1.332).
    Refused like every setting that silences the guard (``plan.settings_sources``): always under
    lockdown, else unless ``[security] allow_settings_override`` (then one warning line)."""
    for where, managed in cli_sandbox_sources(args, cwd):
        if not managed:
            continue
        line = (f"{where}: sandbox.enabled: Claude Code's own sandbox, from managed settings, wins over the guard's "
                f"and refuses its hooks: every call would run unguarded")
        if cfg.lockdown.value or not cfg.security()["allow_settings_override"]:
            why = f"lockdown ({cfg.lockdown.source})" if cfg.lockdown.value else \
                "set [security] allow_settings_override = true to run anyway"
            raise UsageError(f"{line}: refused ({why})")
        print(f"claudeguard: warning: {line}", file=sys.stderr)


def sandbox_env(real_cli: str, args: ClaudeArgs, cfg: Config, *, cwd: str, session_dir: str | None, session_id: str,
                ctl: list[str]) -> dict[str, str]:
    """The session's box (plan/sandbox.py), written into its dir, as the environment that makes
    the CLI enter it (``CLAUDE_CODE_SHELL_PREFIX``; empty when the sandbox is off or cannot run
    here); the one-line notes on stderr: no sandbox under "auto", a caller's prefix replaced,
    and a settings file of the user's that turns Claude Code's own sandbox on (pinned off)."""
    import shlex

    from claudeguard.plan import sandbox
    from claudeguard.plan.cli_version import cli_version

    notes = [f"claudeguard: Claude Code's own sandbox ({where}: sandbox.enabled) stays off in guarded sessions (it "
             f"would refuse the guard's hooks); claudeguard's own box confines Bash instead"
             for where, managed in cli_sandbox_sources(args, cwd) if not managed]
    env: dict[str, str] = {}
    if session_dir is None:  # a dry run: nothing is written, the variable shows where the box goes
        if sandbox.mode(cfg) != "off":
            env[sandbox.PREFIX_VAR] = os.path.join("<session dir>", sandbox.BOX_FILE)
    else:
        # The guard's own command hook and MCP server, as the CLI hands them to the prefix.
        own = [" ".join(shlex.quote(p) for p in ctl + ["hook"]), shlex.join(ctl + ["mcp-serve"]),
               " ".join(ctl + ["mcp-serve"])]
        prepared = sandbox.prepare(cfg, os.environ, cwd, session_dir, session_id=session_id,
                                   cli_version=cli_version(real_cli), own=own)
        notes += prepared.notes
        if prepared.box is not None:
            env[sandbox.PREFIX_VAR] = prepared.box["prefix"]
        if prepared.shell is not None:
            # The same box, entered without the box script's shell (plan/box_enter.c): a call
            # the CLI's shell does not take goes on to the prefix, as without it.
            env[sandbox.SHELL_VAR] = prepared.shell
    for line in notes:
        print(line, file=sys.stderr)
    return env


def split_tool_list(values: list[str]) -> list[str]:
    """Split ``--allowedTools`` values the way the CLI does: on commas and spaces outside parens."""
    out: list[str] = []
    for value in values:
        depth = 0
        current = ""
        for ch in value:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth = max(0, depth - 1)
            if ch in ", " and depth == 0:
                if current:
                    out.append(current)
                current = ""
                continue
            current += ch
        if current:
            out.append(current)
    return out

