"""The built-in protected-paths rule: the guard's own files are never the tools' to read or change.

Two lists, each a path and why it is protected (``paths.GuardPaths`` and the Claude Code settings
files a session re-reads, ``plan.session``): ``reads`` (the runtime dir, files holding a secret,
``/proc/*/environ``) no tool may read or write; ``writes`` (the user's config files, the audit
log, the state dir with the trust records, Claude Code's settings files) no tool may write. No
config can loosen it: ``policy.decide`` tries it before every rule, for every agent, in every
mode; ``explain`` shows it with its reason.

- **Reading tools.** Any tool but Bash-like ones and the file writers that names a path
  (``file_path``, ``notebook_path``, ``path``, ``filePath``, Glob's pattern) reads it: denied
  inside a ``reads`` entry; a recursive reader (Grep, and any tool but Read, NotebookRead, Glob and
  LS, which read one file or list names) also when the entry is inside the path it searches.
- **Writing tools** (Write, Edit, MultiEdit, NotebookEdit): denied inside either list; asked
  inside an ``asks`` entry (a file the user's editor, git or Claude Code runs code from later,
  ``plan.code_paths``: a human says whether the agent may write it).
- **Bash-like tools** (any tool whose input has a ``command`` string: Bash, Monitor): what the
  parser sees the command read or write (``policy.bash.judge``: ``reads`` entries read or
  written, ``writes`` entries written, moved or removed, links followed).

A path is compared with its links followed, both ways round for a directory entry.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Mapping, Sequence

    from claudeguard.decision import Decision

SOURCE = "claudeguard (built-in protected paths: no config can loosen it)"
WRITING_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
# Tools that read one file, or list names only (not contents): denied inside a protected entry,
# not for a search root above it.
SINGLE_READERS = frozenset({"Read", "NotebookRead", "Glob", "LS"})
PATH_FIELDS = ("file_path", "notebook_path", "path", "filePath", "file", "directory", "dir")
ENVIRON = "/proc/*/environ"  # another process's environment: never the tools' to read


class Protected:
    """The three lists (a plain class: the hook builds one per call)."""

    __slots__ = ("reads", "writes", "asks")

    def __init__(self, reads: Sequence[tuple[str, str]] = (), writes: Sequence[tuple[str, str]] = (),
                 asks: Sequence[tuple[str, str]] = ()) -> None:
        self.reads = [(p, why) for p, why in reads if p]
        self.writes = [(p, why) for p, why in writes if p]
        self.asks = [(p, why) for p, why in asks if p]

    def __bool__(self) -> bool:
        return bool(self.reads or self.writes or self.asks)

    def __repr__(self) -> str:
        return f"Protected(reads={self.reads!r}, writes={self.writes!r}, asks={self.asks!r})"

    def why(self, path: str) -> str:
        for p, why in self.reads + self.writes + self.asks:
            if p == path:
                return why
        return "a file the guard protects"


def from_spec(spec: object) -> Protected:
    """``policy_spec["protected"]``: ``{"reads": [[path, why], ...], "writes": [...]}`` (what cannot
    be read is left out: the rule is built in, not a rule a file could break)."""
    if not isinstance(spec, dict):
        return Protected()

    def pairs(value: object) -> list[tuple[str, str]]:
        out = []
        for item in value if isinstance(value, list) else []:
            if isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(x, str) for x in item):
                out.append((item[0], item[1]))
        return out

    return Protected(pairs(spec.get("reads")), pairs(spec.get("writes")), pairs(spec.get("asks")))


def merged(*lists: Protected) -> Protected:
    reads: dict[str, str] = {}
    writes: dict[str, str] = {}
    asks: dict[str, str] = {}
    for prot in lists:
        for p, why in prot.reads:
            reads.setdefault(p, why)
        for p, why in prot.writes:
            writes.setdefault(p, why)
        for p, why in prot.asks:
            asks.setdefault(p, why)
    return Protected(list(reads.items()), list(writes.items()), list(asks.items()))


def real(path: str) -> str:
    """``path`` with its links followed (what a call really reaches)."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def _inside(path: str, entry: str) -> bool:
    if "*" in entry:
        import fnmatch  # only for the /proc/*/environ entry and nested git dirs (plan/code_paths.py)

        return fnmatch.fnmatchcase(path, entry)
    return path == entry or path.startswith(entry.rstrip("/") + "/")


def hit(path: str, entries: Sequence[tuple[str, str]], *, above: bool = False) -> str | None:
    """The entry ``path`` (absolute) falls in, links followed both sides; with ``above`` also an
    entry inside ``path`` (a directory that holds it)."""
    full = real(path)
    for entry, _ in entries:
        for e in dict.fromkeys((entry, real(entry) if "*" not in entry else entry)):
            if _inside(path, e) or _inside(full, e):
                return entry
            if above and "*" not in e and (e.startswith(full.rstrip("/") + "/")
                                            or e.startswith(path.rstrip("/") + "/")):
                return entry
    return None


def _absolute(value: str, cwd: str, home: str) -> str:
    if value == "~" or value.startswith("~/"):
        value = home + value[1:]
    return os.path.normpath(value if value.startswith("/") else os.path.join(cwd, value))


def tool_paths(tool: str, tool_input: Mapping[str, Any], cwd: str, home: str) -> list[str]:
    """Every path a (non-Bash) call names, made absolute; Glob's pattern counts by its fixed prefix."""
    out = []
    for field in PATH_FIELDS:
        value = tool_input.get(field)
        if isinstance(value, str) and value:
            out.append(_absolute(value, cwd, home))
    pattern = tool_input.get("pattern")
    if tool == "Glob" and isinstance(pattern, str) and pattern:
        from claudeguard.policy.pathrules import glob_static_prefix

        prefix = glob_static_prefix(pattern)
        base = tool_input.get("path") if isinstance(tool_input.get("path"), str) else cwd
        out.append(_absolute(prefix if prefix.startswith("/") else os.path.join(str(base or cwd), prefix), cwd, home))
    if tool in ("Grep", "Glob", "LS") and not any(isinstance(tool_input.get(f), str) and tool_input.get(f)
                                                  for f in PATH_FIELDS):
        out.append(os.path.normpath(cwd))  # their search root defaults to the cwd
    return list(dict.fromkeys(out))


def is_bash_like(tool: str, tool_input: Mapping[str, Any]) -> bool:
    return tool == "Bash" or isinstance(tool_input.get("command"), str) and tool not in ("SlashCommand",)


def check_tool(prot: Protected, tool: str, tool_input: Mapping[str, Any], *, cwd: str, home: str) -> Decision | None:
    """The built-in rule's deny for a non-Bash call, or None."""
    if not prot:
        return None
    from claudeguard.decision import Decision

    writing = tool in WRITING_TOOLS
    for path in tool_paths(tool, tool_input, cwd, home):
        entry = hit(path, prot.reads, above=not writing and tool not in SINGLE_READERS)
        kind = "read or change"
        if entry is None and writing:
            entry = hit(path, prot.writes)
            kind = "change"
        if entry is not None:
            verb = "writes" if writing else "reads"
            where = path if path == entry or _inside(path, entry) else f"{path} (which holds {entry})"
            reason = (f"claudeguard: {tool} {verb} {where}: {prot.why(entry)}, which no tool may {kind} "
                      f"({SOURCE}).")
            return Decision("deny", reason, rule=f"protected path {entry}", source=SOURCE)
    if writing:
        for path in tool_paths(tool, tool_input, cwd, home):
            entry = hit(path, prot.asks)
            if entry is not None:
                reason = (f"claudeguard: {tool} writes {path}: {prot.why(entry)}; a human decides ({SOURCE}).")
                return Decision("ask", reason, rule=f"code path {entry}", source=SOURCE)
    return None
