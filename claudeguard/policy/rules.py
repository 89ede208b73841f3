"""Permission rules as Claude Code writes them (``Tool`` / ``Tool(specifier)``) and whether one matches a call.

Tools and their specifiers:
- ``Bash(cmd)``: the command pattern (see ``policy.bash``); every split part must match.
- ``Read(path)`` covers Read, Glob, Grep, LS and NotebookRead by their path; ``Edit(path)`` covers
  Edit, MultiEdit, Write and NotebookEdit (see ``policy.pathrules``). ``Write(path)``,
  ``Glob(path)``, ... name just that tool.
- ``WebFetch(domain:host)`` / ``WebFetch(domain:*.host)``; ``WebSearch(query glob)``.
- ``Agent(type)`` matches the subagent type; ``Task`` is an alias of ``Agent``.
- ``mcp__server`` and ``mcp__server__*`` match every tool of that server, ``mcp__server__tool`` one.

``rule_matches`` is strict by default (the reading an allow rule needs); ``broad=True`` is the
fail-closed reading deny and ask rules use: any part of a Bash command, any plausible host of a URL.

Tool names are matched exactly, as Claude Code matches them: its rule ``bash(git log)`` matches
no call (tested on 2.1.197 and 2.1.330: such an allow rule lets nothing run). A config file that
names a tool no Claude Code knows is refused with the nearest name (``tool_problem``).
"""

from __future__ import annotations

import re
from collections import namedtuple

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Rule", "parse_rule", "rule_matches", "canonical_tool", "tool_problem", "READ_TOOLS", "EDIT_TOOLS",
           "call_path"]

READ_TOOLS = frozenset({"Read", "Glob", "Grep", "LS", "NotebookRead"})
EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
_KNOWN_TOOLS = (
    "Bash", "Read", "Edit", "MultiEdit", "Write", "NotebookEdit", "NotebookRead", "Glob", "Grep", "LS",
    "WebFetch", "WebSearch", "Agent", "TodoWrite", "TodoRead", "AskUserQuestion", "EnterPlanMode",
    "ExitPlanMode", "KillShell", "KillBash", "BashOutput", "Skill", "SlashCommand", "ListMcpResourcesTool",
    "ReadMcpResourceTool",
)
# Tools of older CLIs (LS, MultiEdit, NotebookRead, TodoRead, ...) stay valid rule names beside
# the checked-in tables' (cli_tables.load.tool_names): a rule for them is harmless.
_KNOWN = frozenset(_KNOWN_TOOLS)
_PATH_TOOLS = READ_TOOLS | EDIT_TOOLS
_FIELD_TOOLS = {"WebSearch": "query", "Skill": "skill", "SlashCommand": "command"}
_TOOL_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\*?")


class Rule(namedtuple("Rule", "text tool specifier")):
    """One parsed rule: ``text`` as written by the user, ``tool`` its canonical tool name ("Agent"
    for "Task"), ``specifier`` None for a bare tool rule (and for "Tool(*)"). A named tuple rather
    than a dataclass: importing dataclasses costs ~10 ms on the hook's path."""

    __slots__ = ()


def canonical_tool(name: str) -> str:
    """``Task`` -> ``Agent``; anything else unchanged (case included, as Claude Code reads it)."""
    return "Agent" if name == "Task" else name


def tool_problem(name: str) -> str | None:
    """Why a rule's tool name names no tool (None when it is a Claude Code tool, a legacy name the
    CLI maps, or an MCP tool name), with the nearest tool name. The names come from the CLIs
    themselves: every checked-in argv table's ``tools`` (``cli_tables.derive``), then, for a name
    none knows, the installed CLI's binary (``cli_tables.tools``: a tool a CLI newer than every
    table adds); the guard's own list covers older CLIs' tools."""
    if name.startswith("mcp__") or name in _KNOWN or name == "Task":
        return None
    from claudeguard.cli_tables.load import tool_names

    names = _KNOWN | tool_names()
    if name in names:
        return None
    from claudeguard.cli_tables.tools import installed_names

    names |= installed_names()  # a CLI newer than every table: the tools it adds (read from its binary)
    if name in names:
        return None
    by_lower = {n.lower(): n for n in sorted(names)}
    same = by_lower.get(name.lower())
    if same is not None:
        return (f"{name!r} is not a Claude Code tool: did you mean {same}? (tool names are matched exactly, as "
                f"Claude Code matches them: {name} matches no call)")
    import difflib

    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    if close:
        return f"{name!r} is not a Claude Code tool: did you mean {by_lower[close[0]]}?"
    nearest = max(by_lower, key=lambda n: difflib.SequenceMatcher(None, name.lower(), n).ratio())
    return (f"{name!r} is not a Claude Code tool (the nearest is {by_lower[nearest]}); an MCP tool is named "
            f"mcp__server or mcp__server__tool")


def parse_rule(text: str) -> Rule:
    """Parse ``Tool`` or ``Tool(specifier)``; ValueError with a one-line reason when malformed."""
    if not isinstance(text, str):
        raise ValueError("a rule must be a string")
    stripped = text.strip()
    if not stripped:
        raise ValueError("empty rule")
    paren = stripped.find("(")
    if paren < 0:
        name, spec = stripped, None
    else:
        if not stripped.endswith(")"):
            raise ValueError("missing ')' at the end")
        name, spec = stripped[:paren].strip(), stripped[paren + 1:-1]
    if not _TOOL_RE.fullmatch(name):
        raise ValueError(f"{name!r} is not a tool name")
    tool = canonical_tool(name)
    if tool.startswith("mcp__"):
        if spec is not None:
            raise ValueError("MCP tool rules take no (specifier)")
        rest = tool[5:]
        if not rest or rest.startswith("_") or rest == "*":
            raise ValueError("an MCP rule needs a server name: mcp__server or mcp__server__tool")
        return Rule(text, tool, None)
    if "*" in tool:
        raise ValueError(f"wildcards are allowed in MCP tool names only, not in {name!r}")
    if spec is None:
        return Rule(text, tool, None)
    if not spec.strip():
        raise ValueError(f"empty specifier in {name}()")
    if "\n" in spec and tool != "Bash":
        raise ValueError("a specifier must be one line")
    if spec.strip() == "*":
        return Rule(text, tool, None)
    if tool == "Bash":
        body = spec.strip()
        if body == ":*":
            raise ValueError("'Bash(:*)' has no command prefix")
    elif tool == "WebFetch" and spec.startswith("domain:"):
        host = spec[len("domain:"):].strip().lower().rstrip(".")
        if not host:
            raise ValueError("WebFetch(domain:...) needs a host name")
        if not re.fullmatch(r"(\*\.)?[a-z0-9_.\-]+|\*|\[[0-9a-f:.]+\]", host):
            raise ValueError(f"{host!r} is not a host name (use domain:example.com or domain:*.example.com)")
    return Rule(text, tool, spec if tool == "Bash" else spec.strip())


def _mcp_matches(rule_tool: str, tool: str) -> bool:
    if not tool.startswith("mcp__"):
        return False
    if rule_tool == tool:
        return True
    if rule_tool.endswith("__*"):
        return tool.startswith(rule_tool[:-1])
    if rule_tool.endswith("*"):
        return False  # "mcp__ser*" is not a documented form
    if "__" not in rule_tool[5:]:  # mcp__server: every tool of that server
        return tool.startswith(rule_tool + "__")
    return False


def _applies(rule_tool: str, tool: str) -> bool:
    if rule_tool == tool:
        return True
    if rule_tool == "Read":
        return tool in READ_TOOLS
    if rule_tool == "Edit":
        return tool in EDIT_TOOLS
    return False


def call_path(tool: str, tool_input: dict[str, Any], *, cwd: str) -> str | None:
    """The path a file tool acts on (Glob: its search root plus the pattern's fixed directories)."""
    from claudeguard.policy.pathrules import glob_static_prefix

    if tool in ("NotebookEdit", "NotebookRead"):
        value = tool_input.get("notebook_path") or tool_input.get("file_path")
    elif tool in ("Glob", "Grep", "LS"):
        value = tool_input.get("path") or cwd
        if tool == "Glob":
            pattern = tool_input.get("pattern")
            if isinstance(pattern, str) and pattern:
                prefix = glob_static_prefix(pattern)
                if prefix.startswith("/"):
                    value = prefix
                elif prefix:
                    value = str(value).rstrip("/") + "/" + prefix
    else:
        value = tool_input.get("file_path")
    if not isinstance(value, str) or not value:
        return None
    return value


def rule_matches(rule: Rule, tool: str, tool_input: dict[str, Any], *, cwd: str, home: str, root: str,
                 broad: bool = False) -> bool:
    """Whether ``rule`` matches this call. ``broad``: the fail-closed reading for deny/ask rules."""
    tool = canonical_tool(tool)
    if not isinstance(tool_input, dict):
        tool_input = {}
    if rule.tool.startswith("mcp__"):
        return _mcp_matches(rule.tool, tool)
    if not _applies(rule.tool, tool):
        return False
    spec = rule.specifier
    if spec is None:
        return True
    if rule.tool == "Bash":
        from claudeguard.policy import bash

        command = tool_input.get("command")
        split = bash.split_command(command if isinstance(command, str) else "")
        if broad:
            if any(bash.part_denied_by(spec, p) for p in split.parts):
                return True
            if isinstance(command, str) and bash.pattern_matches(spec, command):
                return True
            return not split.ok and isinstance(command, str) and any(
                bash.pattern_matches(spec, chunk) for chunk in bash.fallback_chunks(command))
        # code an invocation runs inline (python3 -c) is allowed by a rule that allows that invocation
        readable = not any(index is None for _, index in split.unknowns)
        return readable and bool(split.parts) and all(bash.part_allowed_by(spec, p) for p in split.parts)
    if rule.tool in _PATH_TOOLS:
        from claudeguard.policy.pathrules import path_rule_matches

        path = call_path(tool, tool_input, cwd=cwd)
        if path is None:
            return False
        return path_rule_matches(spec, path, cwd=cwd, home=home, root=root)
    if rule.tool == "WebFetch":
        return _webfetch_matches(spec, tool_input.get("url"), broad)
    if rule.tool == "Agent":
        kind = tool_input.get("subagent_type") or "general-purpose"
        return isinstance(kind, str) and _glob(spec, kind)
    field = _FIELD_TOOLS.get(rule.tool)
    if field:
        value = tool_input.get(field)
        return isinstance(value, str) and _glob(spec, value)
    return False  # a specifier on a tool whose input we do not know matches nothing


def _glob(pattern: str, value: str) -> bool:
    rx = "".join(".*" if c == "*" else re.escape(c) for c in pattern)
    return re.fullmatch(rx, value, re.S) is not None


def url_hosts(url: object) -> tuple[set[str], bool]:
    """Every host a URL could be read as (Python's and a browser's reading), and whether it is clean."""
    if not isinstance(url, str) or not url.strip():
        return set(), False
    from urllib.parse import unquote, urlsplit

    text = url.strip()
    if "://" not in text:
        text = "https://" + text
    scheme, rest = text.split("://", 1)
    hosts: set[str] = set()
    clean = scheme.lower() in ("http", "https")
    try:
        py_host = urlsplit(text).hostname
    except ValueError:
        py_host = None
        clean = False
    if py_host:
        hosts.add(py_host.lower().rstrip("."))
    # A WHATWG parser (the CLI's fetch) ends the authority at '\\' too and decodes %xx in hosts.
    authority = re.split(r"[/?#\\]", rest, maxsplit=1)[0]
    hostport = authority.rsplit("@", 1)[-1]
    if hostport.startswith("["):
        host = hostport.split("]", 1)[0] + "]"
    else:
        host = hostport.split(":", 1)[0]
    for candidate in (host, unquote(host)):
        if candidate:
            hosts.add(candidate.lower().rstrip("."))
    if len(hosts) != 1 or not re.fullmatch(r"[a-z0-9_.\-]+|\[[0-9a-f:.]+\]", next(iter(hosts))):
        clean = False
    if any(c.isspace() or ord(c) < 32 for c in url):
        clean = False
    return hosts, clean


def _host_matches(pattern: str, host: str) -> bool:
    if pattern == "*":
        return True
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    return host == pattern


def _webfetch_matches(spec: str, url: object, broad: bool) -> bool:
    hosts, clean = url_hosts(url)
    if spec.startswith("domain:"):
        pattern = spec[len("domain:"):].strip().lower().rstrip(".")
        if broad:
            return any(_host_matches(pattern, h) for h in hosts)
        return clean and all(_host_matches(pattern, h) for h in hosts)
    if not isinstance(url, str):
        return False
    return (broad or clean) and _glob(spec, url.strip())
