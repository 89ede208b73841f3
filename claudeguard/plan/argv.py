"""Build the child's argv and environment: the injection of the guard into the real CLI.

The caller's arguments stay in order; the guard's own options go in front of them as
``--flag=value`` (one word each), because commander's variadic options (``--allowedTools``,
``--mcp-config``) would otherwise swallow the caller's prompt that follows, and because a value
that starts with ``-`` must never be read as an option. The one argument the guard rewrites in
place is the caller's ``--settings`` value: the CLI keeps only the last ``--settings``, so the
guard's hooks (``hooks.guard_settings``) are merged into the caller's settings (their own hooks
and keys kept).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from claudeguard.errors import UsageError
from claudeguard.plan.hooks import (
    MCP_SERVER_NAME, PROMPT_TOOL, TOKEN_VAR, ctl_command, guard_settings, keeps_transcript, print_asker,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.config.load import Config
    from claudeguard.plan.claude_args import ClaudeArgs
    from collections.abc import Mapping

    from claudeguard.plan.hooks import GuardSettings, HttpHooks

BYPASS_FLAGS = ("--dangerously-skip-permissions", "--allow-dangerously-skip-permissions")


class Plan:
    """The child's argv and environment additions (plain classes in this module: dataclasses
    cost every session's start ~10 ms of imports, bench/RESULTS.md)."""

    def __init__(self, argv: list[str], env_additions: dict[str, str], session_id: str) -> None:
        self.argv = argv
        self.env_additions = env_additions
        self.session_id = session_id



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
    guarded |= set(cfg.subagents()["blocked_tools"])
    return [absolute_rule(r.rule, r.root, cwd) for r in cfg.rules.get("permissions.allow", [])
            if not any(_tools_overlap(_rule_tool(r.rule), tool) for tool in guarded)]


def merge_settings(caller: Mapping[str, object], ours: GuardSettings) -> dict[str, object]:
    """The caller's settings with the guard's hooks (and rules) added: the caller's own hooks and
    keys kept."""
    merged: dict[str, Any] = dict(caller)  # whatever JSON the caller gave: its lists are extended
    hooks = dict(merged.get("hooks") or {})
    for event, entries in ours["hooks"].items():
        hooks[event] = list(hooks.get(event) or []) + entries
    merged["hooks"] = hooks
    if "permissions" in ours:
        perms = dict(merged.get("permissions") or {})
        for key, rules in ours["permissions"].items():
            perms[key] = list(perms.get(key) or []) + [r for r in rules if r not in (perms.get(key) or [])]
        merged["permissions"] = perms
    if "statusLine" in ours:
        merged["statusLine"] = ours["statusLine"]  # it runs the caller's (plan/status_line.py)
    return merged


def build_plan(real_cli: str, args: ClaudeArgs, cfg: Config, *, session_id: str, session_dir: str | None, cwd: str,
               http: HttpHooks | None = None, settings_file: str | None = None, exec_pid: int | None = None,
               cli_version: str | None = None, status_line: bool = False) -> Plan:
    """The final argv (real CLI first) and the environment additions for a guarded session.
    ``exec_pid``: the launcher's pid when another process (the service's planner) builds it.
    ``cli_version``: the real CLI's (``discovery.package_version``), None when unknown; in -p it
    decides who asks (``print_asker``). ``status_line``: a person is at the session's terminal
    (the session file's ``pty`` and ``interactive``): the guard's part of the status line says
    what waits in the channel (``plan/status_line.py``)."""
    check_lockdown(args, cfg)
    ctl = ctl_command()
    front: list[str] = []
    mode = cfg.permission_mode()
    if mode and not args.has("--permission-mode") and not args.has(*BYPASS_FLAGS):
        front.append(f"--permission-mode={mode}")
    allow = cli_allow_rules(cfg, cwd)
    deny = [absolute_rule(r.rule, r.root, cwd) for r in cfg.rules.get("permissions.deny", [])]
    from claudeguard.plan.settings_sources import protected_rules

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
    if status_line and session_dir:
        from claudeguard.plan.status_line import status_line_setting

        ours["statusLine"] = status_line_setting(args, cwd, session_dir, ctl)
    rest = list(args.argv)
    settings_at = [index for index, _ in args.options.get("--settings", [])]
    if settings_file is not None:
        # Merged with the caller's last --settings into one 0600 file (it holds the secret);
        # every --settings of the caller is dropped, as the CLI would keep only the last.
        caller: dict[str, Any] = {}
        if settings_at:
            word = rest[settings_at[-1]]
            caller = load_settings_value(word.partition("=")[2] if "=" in word else rest[settings_at[-1] + 1])
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
            rest[index] = "--settings=" + json.dumps(merge_settings(load_settings_value(value), ours),
                                                     separators=(",", ":"))
        elif index + 1 < len(rest):
            rest[index + 1] = json.dumps(merge_settings(load_settings_value(rest[index + 1]), ours),
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

