"""Build the child's argv and environment: the injection of the guard into the real CLI.

The caller's arguments stay in order; the guard's own options go in front of them as
``--flag=value`` (one word each), because commander's variadic options (``--allowedTools``,
``--mcp-config``) would otherwise swallow the caller's prompt that follows, and because a value
that starts with ``-`` must never be read as an option. The one argument the guard rewrites in
place is the caller's ``--settings`` value: the CLI keeps only the last ``--settings``, so the
guard's hooks are merged into the caller's settings (their own hooks and keys kept).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from claudeguard.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.config.load import Config
    from claudeguard.shim.claude_args import ClaudeArgs

MCP_SERVER_NAME = "claudeguard"
PROMPT_TOOL = f"mcp__{MCP_SERVER_NAME}__approve"
# Hook events the guard registers (all exist in both pinned versions; an unknown event name would
# make the CLI drop the whole settings value). Tool events take a matcher, the others none.
TOOL_HOOK_EVENTS = ("PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure")
OTHER_HOOK_EVENTS = ("Notification", "SubagentStart", "SubagentStop", "UserPromptSubmit", "Stop")
# What a -p session leaves out, as nothing of the guard consumes it there: PermissionRequest
# (unless it is the session's asker, ``print_asker``) and Notification (a dialog or an idle
# prompt on screen: the watchdog's notes for a TUI). Each event that fires costs the CLI an HTTP
# round trip.
PRINT_MODE_SKIPPED = ("PermissionRequest", "Notification")
# The first release whose -p runs fire the PermissionRequest hook, and honour its answer, when no
# permission-prompt tool is given (2.1.197 does not fire it and denies the call). Asking there
# spares the CLI the connection to our MCP server before its first turn (docs/design.md,
# "Who asks in -p").
PERMISSION_REQUEST_IN_PRINT = (2, 1, 330)


def print_asker(args: ClaudeArgs, cli_version: str | None) -> str | None:
    """Who answers, in a -p run, a call the CLI itself would ask about: the caller's prompt tool
    ("caller"), nobody (``--permission-prompts none``: the CLI denies), our PermissionRequest hook
    (a real CLI known to be >= PERMISSION_REQUEST_IN_PRINT) or our prompt tool (older or unknown
    versions). None outside -p (a dialog asks)."""
    if not args.print_mode:
        return None
    if args.has("--permission-prompt-tool"):
        return "caller"
    if args.last("--permission-prompts") == "none":
        return "none"
    from claudeguard.shim.discovery import version_at_least

    return "permission-request" if version_at_least(cli_version, PERMISSION_REQUEST_IN_PRINT) else "prompt-tool"


# What a -p session whose transcript the CLI keeps leaves out too: the events that only say a
# call ended. Each cost the CLI ~8-10 ms a call (blocking or async, HTTP or command; a forty-call
# session, bench/RESULTS.md), and the CLI writes each result to its transcript as the tool
# returns, where the watchdog reads it (watchdog/transcript.py).
CALL_END_EVENTS = ("PostToolUse", "PostToolUseFailure")


def hook_events(print_mode: bool, asker: str | None = None, one_prompt: bool = False,
                transcript_kept: bool = False) -> tuple[str, ...]:
    """The events registered for a session: every one, less PRINT_MODE_SKIPPED under -p (but
    PermissionRequest when it is the -p session's asker). ``one_prompt``: a -p run of one prompt
    (not ``--input-format stream-json``) leaves out UserPromptSubmit too: it fires once, before
    the first request to the model (a round trip on the way to it), and the watchdog takes from
    it only that a new turn began, which at the start it knows. ``transcript_kept``: the -p run
    keeps its transcript (``keeps_transcript``), so CALL_END_EVENTS are left out; and with
    ``one_prompt`` Stop too: the CLI waits for its answer before it exits (the first HTTP hook of
    a run also pays the CLI's connection, 15-35 ms), and the watchdog takes from it only that the
    main agent's calls are over, which the transcript shows (in -p no user waits after a turn)."""
    events = TOOL_HOOK_EVENTS + OTHER_HOOK_EVENTS
    if not print_mode:
        return events
    return tuple(e for e in events
                 if (e not in PRINT_MODE_SKIPPED or (e == "PermissionRequest" and asker == "permission-request"))
                 and not (one_prompt and e == "UserPromptSubmit")
                 and not (transcript_kept and e in CALL_END_EVENTS)
                 and not (one_prompt and transcript_kept and e == "Stop"))


def keeps_transcript(args: ClaudeArgs, cwd: str, env: dict[str, str] | None = None) -> bool:
    """Whether the CLI will write this run's transcript: not with ``--no-session-persistence``,
    nor when a settings source sets ``cleanupPeriodDays`` to 0 (the CLI then writes none; a
    settings file that changes it during the run is not followed: the watchdog then sees its
    calls in flight until the run ends, and judges them by ``tool_stall_after``)."""
    if args.has("--no-session-persistence"):
        return False
    from claudeguard.shim.settings_sources import sources

    return not any(src.loaded and src.settings.get("cleanupPeriodDays") == 0
                   for src in sources(args, cwd, dict(os.environ) if env is None else env))


BYPASS_FLAGS = ("--dangerously-skip-permissions", "--allow-dangerously-skip-permissions")


class Plan:
    """The child's argv and environment additions (plain classes in this module: dataclasses
    cost every session's start ~10 ms of imports, bench/RESULTS.md)."""

    def __init__(self, argv: list[str], env_additions: dict[str, str], session_id: str,
                 policy_spec: dict[str, Any] | None = None) -> None:
        self.argv = argv
        self.env_additions = env_additions
        self.session_id = session_id
        self.policy_spec = policy_spec if policy_spec is not None else {}


def ctl_command() -> list[str]:
    """How the CLI should call us back (the hook on every tool call, the MCP server on every
    start): this interpreter without site processing on our own entry file (see fast_entry)."""
    from claudeguard.gate import fast_entry_path

    return [sys.executable, "-E", "-S", fast_entry_path()]


def _load_settings_value(value: str) -> dict[str, Any]:
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
        data = _load_settings_value(value)
        perms = data.get("permissions") or {}
        if isinstance(perms, dict) and perms.get("defaultMode") == "bypassPermissions":
            raise UsageError(f"--settings sets permissions.defaultMode bypassPermissions: refused by {why}")
        if data.get("disableAllHooks"):
            raise UsageError(f"--settings sets disableAllHooks: refused by {why}")
    if args.has("--bare"):
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


class HttpHooks:
    """Hooks answered by the resident service (``claudeguard.service``): its port, and the
    session's secret, which reaches the CLI in ``TOKEN_VAR`` of its environment only."""

    def __init__(self, port: int | str, token: str, literal: bool = False) -> None:
        self.port = port  # "PORT" in a dry run: the service is started (and its port known) at launch
        self.token = token
        # A --bg session runs under Claude Code's daemon with the daemon's environment, not the
        # launcher's (docs/notes/bg-agents-2.1.330.md), so $CLAUDEGUARD_HOOK_TOKEN would not reach
        # it: its secret is written into the header itself, in a 0600 settings file, never in argv.
        self.literal = literal

    def __repr__(self) -> str:  # never the secret
        return f"HttpHooks(port={self.port!r}, literal={self.literal!r})"


TOKEN_VAR = "CLAUDEGUARD_HOOK_TOKEN"


# The HTTP hooks the CLI does not wait for, where they are registered at all (a -p run whose
# transcript is kept has neither: CALL_END_EVENTS): they only record that a call ended, with no
# answer to give. A twelve-round ten-call run put blocking at +27 ms a call and async at +9; the
# forty-call stand-ins of bench/per_call.py put each at ~8-10 ms a call (bench/RESULTS.md).
# The end of a call may reach the service after the next call's start: the watchdog matches them
# by tool_use_id. Command hooks stay blocking: a slow async hook delayed the end of a 2.1.330 run
# (three 0.2 s async hooks: +1.3 s against +0.6 s blocking), and a command hook is a process.
ASYNC_HTTP_EVENTS = ("PostToolUse", "PostToolUseFailure")


def _hook_entry(event: str, ctl: list[str], timeout: int, http: HttpHooks | None, session_id: str) -> dict[str, Any]:
    if http is None:
        return {"type": "command", "command": " ".join(shlex.quote(p) for p in ctl + ["hook"]), "timeout": timeout}
    if http.literal:
        return {"type": "http", "url": f"http://127.0.0.1:{http.port}/hook/{session_id}/{event}",
                "headers": {"Authorization": f"Bearer {http.token}"}, "timeout": timeout}
    # The header names the variable, not the secret: the CLI fills it from its environment, and
    # only because allowedEnvVars lists it, so the secret is in no argv and no settings file.
    entry = {"type": "http", "url": f"http://127.0.0.1:{http.port}/hook/{session_id}/{event}",
             "headers": {"Authorization": f"Bearer ${TOKEN_VAR}"}, "allowedEnvVars": [TOKEN_VAR], "timeout": timeout}
    if event in ASYNC_HTTP_EVENTS:
        entry["async"] = True
    return entry


def guard_settings(cfg: Config, ctl: list[str], cwd: str, http: HttpHooks | None = None, session_id: str = "",
                   print_mode: bool = False, asker: str | None = None, one_prompt: bool = False,
                   transcript_kept: bool = False) -> dict[str, Any]:
    timeout = int(cfg.get("approval.timeout")) + 30  # the guard, not the CLI, must decide
    # Every hook blocks but the HTTP form's PostToolUse and PostToolUseFailure (ASYNC_HTTP_EVENTS).
    hooks: dict[str, Any] = {}
    for event in hook_events(print_mode, asker, one_prompt, transcript_kept):
        group: dict[str, Any] = {"matcher": "*"} if event in TOOL_HOOK_EVENTS else {}
        group["hooks"] = [_hook_entry(event, ctl, timeout, http, session_id)]
        hooks[event] = [group]
    # The policy's ask rules are NOT given to the CLI: the hook asks the human itself, and the
    # CLI's own copy of an ask rule would ask a second time after the human's allow (the prompt
    # tool, or a dialog), and on 2.1.197 deny a background subagent's call outright. What keeps
    # an ask call from running unanswered when the hook cannot answer is `cli_allow_rules`.
    return {"hooks": hooks}


EDIT_FAMILY = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})


def _rule_tool(rule: str) -> str:
    return rule.partition("(")[0].strip()


def _tools_overlap(a: str, b: str) -> bool:
    """Could a rule naming tool ``a`` and one naming ``b`` match the same call?"""
    if a == b:
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
    if any(rep.value for rep in cfg.agent_replace.values()):
        return []  # an agent whose own rules replace these: only the hook knows who is calling
    # Tools some agent must not simply run: an ask rule anywhere, an agent's deny or ask rule,
    # a tool blocked for subagents. (Read-only agent types are not counted: that would take
    # every Bash rule off the list by default, and their writes are judged by the hook.)
    # The CLI's --allowedTools apply to every agent alike, so such a tool is left to the hook
    # (and, when the hook cannot answer, to the prompt tool, which then asks a human).
    guarded = {_rule_tool(r.rule) for key, rules in cfg.rules.items()
               if key == "permissions.ask" or (key.startswith("agents.") and key.endswith((".ask", ".deny")))
               for r in rules}
    guarded |= set(cfg.get("subagents.blocked_tools") or ())
    return [absolute_rule(r.rule, r.root, cwd) for r in cfg.rules.get("permissions.allow", [])
            if not any(_tools_overlap(_rule_tool(r.rule), tool) for tool in guarded)]


def merge_settings(caller: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    merged = dict(caller)
    hooks = dict(merged.get("hooks") or {})
    for event, entries in ours["hooks"].items():
        hooks[event] = list(hooks.get(event) or []) + entries
    merged["hooks"] = hooks
    if "permissions" in ours:
        perms = dict(merged.get("permissions") or {})
        for key, rules in ours["permissions"].items():
            perms[key] = list(perms.get(key) or []) + [r for r in rules if r not in (perms.get(key) or [])]
        merged["permissions"] = perms
    return merged


def build_plan(real_cli: str, args: ClaudeArgs, cfg: Config, *, session_id: str, session_dir: str | None, cwd: str,
               http: HttpHooks | None = None, settings_file: str | None = None, exec_pid: int | None = None,
               cli_version: str | None = None) -> Plan:
    """The final argv (real CLI first) and the environment additions for a guarded session.
    ``exec_pid``: the launcher's pid when another process (the service's planner) builds it.
    ``cli_version``: the real CLI's (``discovery.package_version``), None when unknown; in -p it
    decides who asks (``print_asker``)."""
    check_lockdown(args, cfg)
    ctl = ctl_command()
    front: list[str] = []
    mode = cfg.get("permissions.mode")
    if mode and not args.has("--permission-mode") and not args.has(*BYPASS_FLAGS):
        front.append(f"--permission-mode={mode}")
    allow = cli_allow_rules(cfg, cwd)
    deny = [absolute_rule(r.rule, r.root, cwd) for r in cfg.rules.get("permissions.deny", [])]
    from claudeguard.shim.settings_sources import protected_rules

    deny += protected_rules(args, cfg, cwd)  # no tool may switch the guard off through a settings file
    # Comma-joined in one word: a rule may contain spaces (`Bash(git diff *)`).
    if allow:
        front.append("--allowedTools=" + ",".join(allow))
    if deny:
        front.append("--disallowedTools=" + ",".join(deny))

    asker = print_asker(args, cli_version)
    ours = guard_settings(cfg, ctl, cwd, http, session_id, print_mode=args.print_mode, asker=asker,
                          one_prompt=args.print_mode and args.last("--input-format") != "stream-json",
                          transcript_kept=args.print_mode and keeps_transcript(args, cwd))
    rest = list(args.argv)
    settings_at = [index for index, _ in args.options.get("--settings", [])]
    if settings_file is not None:
        # Merged with the caller's last --settings into one 0600 file (it holds the secret);
        # every --settings of the caller is dropped, as the CLI would keep only the last.
        caller: dict[str, Any] = {}
        if settings_at:
            word = rest[settings_at[-1]]
            caller = _load_settings_value(word.partition("=")[2] if "=" in word else rest[settings_at[-1] + 1])
        for index in sorted(settings_at, reverse=True):
            del rest[index:index + (1 if "=" in rest[index] else 2)]
        from claudeguard.files import write_atomic

        write_atomic(Path(settings_file), json.dumps(merge_settings(caller, ours), separators=(",", ":")))
        front.append("--settings=" + settings_file)
    elif settings_at:
        # The CLI keeps the last --settings; merge ours into it and leave the others as given.
        index = settings_at[-1]
        word = rest[index]
        if "=" in word:
            value = word.partition("=")[2]
            rest[index] = "--settings=" + json.dumps(merge_settings(_load_settings_value(value), ours),
                                                     separators=(",", ":"))
        elif index + 1 < len(rest):
            rest[index + 1] = json.dumps(merge_settings(_load_settings_value(rest[index + 1]), ours),
                                         separators=(",", ":"))
    else:
        front.append("--settings=" + json.dumps(ours, separators=(",", ":")))

    env_add = {
        "CLAUDEGUARD_SESSION": session_id,
        "CLAUDEGUARD_EXEC_PID": str(exec_pid or os.getpid()),
    }
    if session_dir:
        env_add["CLAUDEGUARD_SESSION_DIR"] = session_dir
    if http is not None and not http.literal:
        env_add[TOKEN_VAR] = http.token

    if asker == "prompt-tool":
        if http is not None:
            # The service answers the prompt tool too (MCP over HTTP, both pinned CLIs): no
            # server process for the CLI to start and wait for (~90 ms of every run). The
            # header holds the secret, so the config goes in a 0600 file, not in argv.
            server: dict[str, Any] = {"type": "http", "url": f"http://127.0.0.1:{http.port}/mcp/{session_id}",
                            "headers": {"Authorization": f"Bearer {http.token}"}}
            config = json.dumps({"mcpServers": {MCP_SERVER_NAME: server}}, separators=(",", ":"))
            if session_dir:
                from claudeguard.files import write_atomic

                write_atomic(Path(session_dir) / "mcp.json", config)
                front.append("--mcp-config=" + str(Path(session_dir) / "mcp.json"))
            else:
                front.append("--mcp-config=" + config)  # a dry run: no secret exists yet
        else:
            server = {"command": ctl[0], "args": ctl[1:] + ["mcp-serve"]}
            front.append("--mcp-config=" + json.dumps({"mcpServers": {MCP_SERVER_NAME: server}}, separators=(",", ":")))
        front.append(f"--permission-prompt-tool={PROMPT_TOOL}")
    return Plan([real_cli, *front, *rest], env_add, session_id)


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


def claude_allow_rules(args: ClaudeArgs, cwd: str, home: str) -> list[dict[str, Any]]:
    """Allow rules the CLI itself applies (caller's --allowedTools and Claude settings files):
    the hook treats them as allows, so a subagent is not sent to a human for what the CLI allows."""
    entries: list[dict[str, Any]] = []
    for rule in split_tool_list(args.values("--allowedTools", "--allowed-tools")):
        entries.append({"rule": rule, "source": "--allowedTools", "root": cwd})
    files = [Path(home) / ".claude" / "settings.json", Path(cwd) / ".claude" / "settings.json",
             Path(cwd) / ".claude" / "settings.local.json"]
    for path in files:
        try:
            data = json.loads(path.read_text())
            rules = data.get("permissions", {}).get("allow", [])
        except (OSError, ValueError, AttributeError):
            continue
        for rule in rules if isinstance(rules, list) else []:
            if isinstance(rule, str):
                entries.append({"rule": rule, "source": str(path), "root": str(path.parent.parent)})
    for value in args.values("--settings"):
        try:
            data = _load_settings_value(value)
        except UsageError:
            continue
        rules = (data.get("permissions") or {}).get("allow", [])
        for rule in rules if isinstance(rules, list) else []:
            if isinstance(rule, str):
                entries.append({"rule": rule, "source": "--settings", "root": cwd})
    from claudeguard.policy.rules import parse_rule

    valid = []
    for entry in entries:
        try:
            parse_rule(entry["rule"])
        except ValueError:
            continue
        valid.append(entry)
    return valid


def session_snapshot(cfg: Config, args: ClaudeArgs, *, session_id: str, cwd: str, interactive: bool,
                     exec_pid: int | None = None, cli_version: str | None = None) -> dict[str, Any]:
    """What the hook and the MCP server need, so they never re-read the config layers.
    ``cli_version`` as for ``build_plan`` (the two must agree on who asks in -p)."""
    spec = cfg.policy_spec()
    spec["claude_allow"] = claude_allow_rules(args, cwd, os.path.expanduser("~"))
    if cfg.lockdown.value:
        spec["lockdown"] = True
    return {
        "session_id": session_id,
        "pid": exec_pid or os.getpid(),
        "cwd": cwd,
        "policy": spec,
        "approval": {
            "timeout": cfg.get("approval.timeout"),
            "on_timeout": cfg.get("approval.on_timeout"),
            "notify": cfg.get("approval.notify"),
            "idle_before_channel": 0 if not interactive else cfg.get("approval.idle_before_channel"),
        },
        "forever_file": str(cfg.searched[0][1]),
        "print_mode": args.print_mode,
        # who answers a call the CLI asks about in -p (print_asker): the hook answers
        # PermissionRequest in print mode only when it is "permission-request"
        "asker": print_asker(args, cli_version),
        "interactive": interactive,
    }

