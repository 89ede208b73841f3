"""The policy's decision for one tool call: deny, then ask, then allow; first match wins.

A Policy is built from the JSON-able spec the config code produces (``policy_from_spec``).
``[permissions]`` applies to every agent; ``agents[TYPE]`` extends it (or replaces it with
``replace = true``) for that subagent type. Inside a subagent, tools in
``subagents.blocked_tools`` are denied, and read-only agent types are denied file edits and Bash
commands that write. Run-time grants (``extra``) join the same evaluation. Allow rules from
Claude Code's own settings (``claude_allow``) are tried after the policy's allows.

For Bash every invocation the command runs gets its own decision, and its writes meet the Edit
and Write rules (``policy.bash.judge``): denied if any matches a deny rule, asked if any matches
an ask rule or the guard cannot read it, allowed only if every invocation and write is allowed.
"""

from __future__ import annotations

import os
import re
from collections import namedtuple

from claudeguard.decision import Decision, PartDecision
from claudeguard.policy.protect import ENVIRON, Protected, check_tool, is_bash_like
from claudeguard.policy.protect import from_spec as protected_from_spec
from claudeguard.policy.rules import EDIT_TOOLS, Rule, canonical_tool, parse_rule, rule_matches

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Mapping, NamedTuple, Sequence

    from claudeguard.decision import RuleKind

__all__ = [
    "SourcedRule",
    "PartDecision",
    "Decision",
    "Policy",
    "policy_from_spec",
    "decide",
    "grant_rules_for_call",
    "call_from_rule_like",
    "summarize_call",
    "DEFAULT_BLOCKED_TOOLS",
    "DEFAULT_READ_ONLY_TYPES",
]

DEFAULT_BLOCKED_TOOLS = ("Agent", "AskUserQuestion", "EnterPlanMode", "ExitPlanMode", "KillShell")
DEFAULT_READ_ONLY_TYPES = ("Explore", "Plan")
BLOCKED_SOURCE = "subagents.blocked_tools"
READ_ONLY_SOURCE = "subagents.read_only_types"


if TYPE_CHECKING:
    class SourcedRule(NamedTuple):
        rule: Rule
        kind: RuleKind
        source: str
        root: str
else:
    class SourcedRule(namedtuple("SourcedRule", "rule kind source root")):
        """A rule with where it came from: ``kind`` allow | deny | ask; ``source``
        "path/to/file.toml:12", "default", "grant (session)", "--allowedTools" ...; ``root`` the
        directory that anchors "/p" path rules (the config file's directory)."""

        __slots__ = ()


class _AgentRules:
    """One ``[agents.TYPE]`` overlay."""

    __slots__ = ("replace", "allow", "deny", "ask")

    def __init__(self, replace: bool, allow: list[SourcedRule], deny: list[SourcedRule],
                 ask: list[SourcedRule]) -> None:
        self.replace = replace
        self.allow = allow
        self.deny = deny
        self.ask = ask


class Policy:
    """The parsed rules of one spec (a plain class: the hook builds one per call, so it stays cheap)."""

    __slots__ = ("allow", "deny", "ask", "agents", "blocked_tools", "read_only_types", "claude_allow", "protected")

    def __init__(self, allow: list[SourcedRule] | None = None, deny: list[SourcedRule] | None = None,
                 ask: list[SourcedRule] | None = None, agents: dict[str, _AgentRules] | None = None,
                 blocked_tools: list[Rule] | None = None, read_only_types: list[str] | None = None,
                 claude_allow: list[SourcedRule] | None = None, protected: Protected | None = None) -> None:
        self.allow = allow or []
        self.deny = deny or []
        self.ask = ask or []
        self.agents = agents or {}
        self.blocked_tools = [parse_rule(t) for t in DEFAULT_BLOCKED_TOOLS] if blocked_tools is None else blocked_tools
        self.read_only_types = list(DEFAULT_READ_ONLY_TYPES) if read_only_types is None else read_only_types
        self.claude_allow = claude_allow or []
        # The built-in protected-paths rule (policy.protect): the spec's lists, and another
        # process's environment, always.
        base = protected or Protected()
        self.protected = Protected([*base.reads, (ENVIRON, "another process's environment")], base.writes,
                                   base.asks)

    def __repr__(self) -> str:
        return (f"Policy(allow={len(self.allow)}, deny={len(self.deny)}, ask={len(self.ask)}, "
                f"agents={sorted(self.agents)}, blocked_tools={[r.text for r in self.blocked_tools]}, "
                f"read_only_types={self.read_only_types}, claude_allow={len(self.claude_allow)})")

    def asks_reading(self) -> bool:
        """Whether any agent's rules ask about reading some path (``ask = ["Read(...)"]``)."""
        groups = [self.ask, *(overlay.ask for overlay in self.agents.values())]
        return any(sr.rule.tool == "Read" for group in groups for sr in group)

    def rules_for(self, agent_type: str | None) -> tuple[list[SourcedRule], list[SourcedRule], list[SourcedRule]]:
        """(deny, ask, allow) for the main agent (None) or a subagent type."""
        deny, ask, allow = list(self.deny), list(self.ask), list(self.allow)
        overlay = self.agents.get(agent_type) if agent_type is not None else None
        if overlay is not None:
            if overlay.replace:
                deny, ask, allow = list(overlay.deny), list(overlay.ask), list(overlay.allow)
            else:
                deny += overlay.deny
                ask += overlay.ask
                allow += overlay.allow
        return deny, ask, allow


def _sourced(entries: list[Any] | None, kind: RuleKind, where: str, *, strict: bool) -> list[SourcedRule]:
    out: list[SourcedRule] = []
    for index, entry in enumerate(entries or []):
        if isinstance(entry, str):
            entry = {"rule": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("rule"), str):
            if strict:
                raise ValueError(f"{where}[{index}]: not a rule entry: {entry!r}")
            continue
        source = str(entry.get("source") or where)
        try:
            rule = parse_rule(entry["rule"])
        except ValueError as exc:
            if strict:
                raise ValueError(f"{source}: bad rule {entry['rule']!r}: {exc}") from None
            continue
        out.append(SourcedRule(rule, kind, source, str(entry.get("root") or "")))
    return out


def policy_from_spec(spec: Mapping[str, Any]) -> Policy:
    """Build a Policy from the spec dict; ValueError for a malformed policy rule."""
    spec = spec or {}
    perms = spec.get("permissions") or {}
    policy = Policy(
        allow=_sourced(perms.get("allow"), "allow", "permissions.allow", strict=True),
        deny=_sourced(perms.get("deny"), "deny", "permissions.deny", strict=True),
        ask=_sourced(perms.get("ask"), "ask", "permissions.ask", strict=True),
        # Claude Code validated its own rules; ones we cannot read simply never allow anything.
        claude_allow=_sourced(spec.get("claude_allow"), "allow", "claude settings", strict=False),
        protected=protected_from_spec(spec.get("protected")),
    )
    for agent_type, table in (spec.get("agents") or {}).items():
        table = table or {}
        where = f"agents.{agent_type}"
        policy.agents[agent_type] = _AgentRules(
            replace=bool(table.get("replace", False)),
            allow=_sourced(table.get("allow"), "allow", where + ".allow", strict=True),
            deny=_sourced(table.get("deny"), "deny", where + ".deny", strict=True),
            ask=_sourced(table.get("ask"), "ask", where + ".ask", strict=True),
        )
    sub = spec.get("subagents") or {}
    blocked = sub.get("blocked_tools")
    policy.blocked_tools = [parse_rule(t) for t in (DEFAULT_BLOCKED_TOOLS if blocked is None else blocked)]
    read_only = sub.get("read_only_types")
    policy.read_only_types = list(DEFAULT_READ_ONLY_TYPES if read_only is None else read_only)
    return policy


def _matches(sr: SourcedRule, tool: str, tool_input: dict[str, Any], cwd: str, home: str, broad: bool) -> bool:
    return rule_matches(sr.rule, tool, tool_input, cwd=cwd, home=home, root=sr.root or cwd, broad=broad)


def _where(rule: str | None, source: str | None) -> str:
    return f"{rule} ({source})" if source else str(rule)


def decide(policy: Policy, tool: str, tool_input: dict[str, Any], *, agent_type: str | None, cwd: str,
           home: str | None = None, extra: list[SourcedRule] | tuple[SourcedRule, ...] = (),
           mode: str | None = None, protected: Sequence[str] = ()) -> Decision:
    """The decision for one call. ``agent_type`` None is the main agent; ``extra`` are grants;
    ``mode`` the CLI's permission mode (acceptEdits lets a Bash command write inside the project);
    ``protected`` paths no Bash command may read or write (denied like a deny rule)."""
    tool = canonical_tool(tool)
    if not isinstance(tool_input, dict):
        tool_input = {}
    home = home or os.environ.get("HOME") or os.path.expanduser("~")
    deny, ask, allow = policy.rules_for(agent_type)
    by_kind = {"deny": deny, "ask": ask, "allow": allow}
    for sr in extra:
        if sr.kind in by_kind:
            by_kind[sr.kind].append(sr)
    allow += policy.claude_allow
    in_subagent = agent_type is not None
    read_only = in_subagent and agent_type in policy.read_only_types
    if in_subagent:
        for rule in policy.blocked_tools:
            deny.append(SourcedRule(rule, "deny", BLOCKED_SOURCE, cwd))
    prot = policy.protected
    reads = [p for p, _ in prot.reads]
    writes = [p for p, _ in prot.writes]
    if tool == "Bash":
        # deferred: the policy/bash package (and the parser it loads) is needed for Bash calls only
        from claudeguard.policy.bash.judge import BashScope, decide_bash

        scope = BashScope(read_only_type=agent_type if read_only else None, cwd=cwd, home=home, mode=mode,
                          protected=protected, guard_reads=reads, guard_writes=writes)
        return _with_why(decide_bash(tool_input, deny, ask, allow, scope), prot)
    if is_bash_like(tool, tool_input):
        # Another tool that runs a command (Monitor): the built-in rule reads it as Bash would.
        from claudeguard.policy.bash.judge import BashScope, decide_bash

        verdict = decide_bash(tool_input, [], [], [], BashScope(cwd=cwd, home=home, mode=mode, protected=protected,
                                                                guard_reads=reads, guard_writes=writes))
        if verdict.decision == "deny":
            return _with_why(verdict, prot)
    built_in = None
    if not is_bash_like(tool, tool_input):
        built_in = check_tool(prot, tool, tool_input, cwd=cwd, home=home)
        if built_in is not None and built_in.decision == "deny":
            return built_in

    for sr in deny:
        if _matches(sr, tool, tool_input, cwd, home, broad=True):
            if sr.source == BLOCKED_SOURCE:
                reason = f"claudeguard: subagents may not use {tool} ({BLOCKED_SOURCE})."
            else:
                reason = f"claudeguard: {tool} denied by {_where(sr.rule.text, sr.source)}."
            return Decision("deny", reason, rule=sr.rule.text, source=sr.source)
    if read_only and tool in EDIT_TOOLS:
        return Decision("deny", f"claudeguard: {agent_type} agents are read-only and may not use {tool} "
                        f"({READ_ONLY_SOURCE}).", rule=tool, source=READ_ONLY_SOURCE)
    if built_in is not None:
        return built_in  # the built-in ask (a code path): after every deny, before any allow
    for sr in ask:
        if _matches(sr, tool, tool_input, cwd, home, broad=True):
            return Decision("ask", f"claudeguard: {tool} needs a human decision by {_where(sr.rule.text, sr.source)}.",
                            rule=sr.rule.text, source=sr.source)
    for sr in allow:
        if _matches(sr, tool, tool_input, cwd, home, broad=False):
            return Decision("allow", f"claudeguard: {tool} allowed by {_where(sr.rule.text, sr.source)}.",
                            rule=sr.rule.text, source=sr.source)
    return Decision("none", f"claudeguard: no rule matches this {tool} call.")


def _with_why(verdict: Decision, prot: Protected) -> Decision:
    """A deny of the built-in rule says why the path is protected."""
    from claudeguard.policy.protect import SOURCE

    if verdict.decision == "deny" and verdict.source == SOURCE and verdict.rule:
        entry = verdict.rule.removeprefix("protected path ")
        verdict.reason = verdict.reason.rstrip(".") + f": {prot.why(entry)}."
    return verdict


# --------------------------------------------------------------------------------------------
# Grants, explain, summaries


def grant_rules_for_call(tool: str, tool_input: dict[str, Any], *, cwd: str) -> list[str]:
    """The rules a "don't ask again" for this call adds (exactly this call, nothing wider)."""
    from claudeguard.policy.pathrules import escape_path, normalize_path
    from claudeguard.policy.rules import call_path, url_hosts

    tool = canonical_tool(tool)
    if not isinstance(tool_input, dict):
        tool_input = {}
    home = os.environ.get("HOME") or os.path.expanduser("~")
    if tool == "Bash":
        from claudeguard.policy.bash import escape_pattern, split_command

        split = split_command(tool_input.get("command"))
        # Code an interpreter runs inline (python3 -c) is granted by the exact rule, which names
        # the invocation itself; what cannot be read at all (a syntax error, a computed command
        # name) is never granted beyond once.
        if not split.parts or any(index is None for _, index in split.unknowns):
            return []
        return list(dict.fromkeys(f"Bash({escape_pattern(p.text)})" for p in split.parts))
    if tool in ("Read", "NotebookRead") or tool in EDIT_TOOLS:
        path = call_path(tool, tool_input, cwd=cwd)
        if path is None:
            return []
        full = normalize_path(path, cwd=cwd, home=home)
        if full == "/":
            return []  # "//" would be the whole file system, not this one path
        family = "Read" if tool in ("Read", "NotebookRead") else "Edit"
        return [f"{family}(/{escape_path(full)})"]
    if tool in ("Glob", "Grep", "LS"):
        path = call_path(tool, tool_input, cwd=cwd) or cwd
        full = normalize_path(path, cwd=cwd, home=home)
        return [f"{tool}(/{escape_path(full).rstrip('/')}/**)"]
    if tool == "WebFetch":
        hosts, clean = url_hosts(tool_input.get("url"))
        if not clean:
            return []
        return [f"WebFetch(domain:{next(iter(hosts))})"]
    return [tool]


_CALL_RE = r"\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*(?:\((.*)\))?\s*"  # compiled on use: import time matters


def call_from_rule_like(text: str) -> tuple[str, dict[str, Any]]:
    """A tool call written like a rule (``'Bash(git push --force)'``) as (tool, tool_input)."""
    m = re.fullmatch(_CALL_RE, text or "", re.S)
    if not m:
        raise ValueError("expected Tool or Tool(argument), e.g. 'Bash(git status)' or 'Read(/etc/passwd)'")
    name, arg = m.group(1), m.group(2)
    tool = canonical_tool(name)
    if tool.startswith("mcp__"):
        if arg is not None:
            raise ValueError("an MCP tool takes no (argument) here")
        return tool, {}
    if arg is None or not arg.strip():
        if tool in ("Bash", "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "WebFetch"):
            raise ValueError(f"{tool} needs an argument, e.g. {tool}(...)")
        return tool, {}
    arg = arg.strip()
    if tool == "Bash":
        return tool, {"command": arg}
    if tool in ("Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "NotebookRead", "Glob", "Grep", "LS"):
        path = "/" + arg.lstrip("/") if arg.startswith("//") else arg
        if tool == "Read":
            return tool, {"file_path": path}
        if tool == "Write":
            return tool, {"file_path": path, "content": ""}
        if tool == "Edit":
            return tool, {"file_path": path, "old_string": "", "new_string": ""}
        if tool == "MultiEdit":
            return tool, {"file_path": path, "edits": []}
        if tool in ("NotebookEdit", "NotebookRead"):
            if tool == "NotebookEdit":
                return tool, {"notebook_path": path, "new_source": ""}
            return tool, {"notebook_path": path}
        if tool == "Glob":
            return tool, {"pattern": path}
        return tool, {"pattern": "", "path": path} if tool == "Grep" else {"path": path}
    if tool == "WebFetch":
        url = "https://" + arg[len("domain:"):].strip() + "/" if arg.startswith("domain:") else arg
        return tool, {"url": url, "prompt": ""}
    if tool == "WebSearch":
        return tool, {"query": arg}
    if tool == "Agent":
        return tool, {"description": "", "prompt": "", "subagent_type": arg}
    if tool == "Skill":
        return tool, {"skill": arg}
    if tool == "SlashCommand":
        return tool, {"command": arg}
    raise ValueError(f"do not know what {tool}({arg}) would mean as a call")


_CONTROL_RE = r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"


def _one_line(text: str, limit: int) -> str:
    """One line without control characters (a summary is shown on terminals), cut to ``limit``."""
    text = text.replace("\r\n", "\n").replace("\n", " \u23ce ").replace("\t", " ")
    text = re.sub(_CONTROL_RE, "?", text)
    text = re.sub(r" {2,}", " ", text)
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "\u2026"


def summarize_call(tool: str, tool_input: dict[str, Any], limit: int = 120) -> str:
    """One line for people, e.g. ``Bash: git push --force`` / ``Write: src/a.py (120 bytes)``."""
    if not isinstance(tool_input, dict):
        tool_input = {}
    name = canonical_tool(tool) if tool != "Task" else "Task"

    def s(key: str) -> str:
        value = tool_input.get(key)
        return value if isinstance(value, str) else ("" if value is None else str(value))

    if name == "Bash":
        body = s("command")
    elif name == "Write":
        content = tool_input.get("content")
        size = len(content.encode("utf-8", "replace")) if isinstance(content, str) else 0
        body = f"{s('file_path')} ({size} bytes)"
    elif name == "MultiEdit":
        edits = tool_input.get("edits")
        body = f"{s('file_path')} ({len(edits) if isinstance(edits, list) else 0} edits)"
    elif name in ("Edit", "Read"):
        body = s("file_path")
    elif name in ("NotebookEdit", "NotebookRead"):
        body = s("notebook_path")
    elif name in ("Glob", "Grep"):
        body = s("pattern") + (f" in {s('path')}" if tool_input.get("path") else "")
    elif name == "LS":
        body = s("path")
    elif name == "WebFetch":
        body = s("url")
    elif name == "WebSearch":
        body = s("query")
    elif name in ("Agent", "Task"):
        kind = s("subagent_type") or "general-purpose"
        body = f"{kind}: {s('description') or s('prompt')}"
        if tool_input.get("run_in_background"):
            body += " (background)"
    else:
        import json

        try:
            body = json.dumps(tool_input, ensure_ascii=False, sort_keys=True, default=str)
        except (TypeError, ValueError):
            body = str(tool_input)
        if body == "{}":
            body = ""
    line = f"{tool}: {body}" if body else str(tool)
    return _one_line(line, limit)
