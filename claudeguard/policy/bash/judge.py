"""The policy's decision for one Bash call, with Claude Code's semantics: deny, then ask, then
allow; deny or ask if any invocation matches; allow only if every invocation and every side
effect is allowed.

- **Invocations.** Each is tried on the deny rules (every reading: wrappers kept and removed,
  quotes removed, paths reduced to names), then the ask rules, then the allow rules (its own
  readings). A program run by a path that is, links followed, a binary a deny or ask rule names
  is matched as that program; copying or linking such a binary matches that rule itself.
- **Writes.** A redirection or an output option (``>``, ``tee``, ``--output=``, ``find
  -fprint``, ``sort -o``) is matched against the Edit and Write rules as the file tools are: a
  deny or ask rule decides; it is allowed by an allow rule, by acceptEdits inside the project (as
  the CLI does), or by a bare ``Bash`` allow. What a program writes as its job (``rm x``, ``cp a
  b``) meets the Edit deny and ask rules only. Protected paths (the caller's) are denied, read or
  written. The guard's own (``policy.protect``, always there) are denied too: ``guard_reads``
  read or written, ``guard_writes`` written, or moved or removed with a directory above them
  (``rm -rf .claude``, ``mv .claude x``, ``cp -r x/.claude .``); they change nothing else (what
  a rule lets run, the sandbox holds).
- **What cannot be read** is asked, with the reason, whenever any Bash rule exists (or protected
  paths do): also under a bare ``Bash`` allow when a deny or ask rule concerns Bash. An allow rule
  with a specifier that matches the invocation itself (``Bash(python3 *)`` for ``python3 -c``)
  still allows it: the user chose that.
- **Nothing decides**: "none" (Claude Code asks), except where Claude Code's own copy of an allow
  rule would let the command run: the outermost command as written matches one (``Bash(xargs *)``
  for ``xargs touch``, ``Bash(echo *)`` for ``echo x > f``). Then the guard asks.
"""

from __future__ import annotations

import os

from claudeguard.decision import Decision, PartDecision
from claudeguard.policy.bash.patterns import fallback_chunks, part_allowed_by, part_denied_by, pattern_matches
from claudeguard.policy.bash.programs import COPIERS
from claudeguard.policy.bash.resolve import LOOKED_INTO, binaries, binary_at, looked_into, program_names
from claudeguard.policy.bash.model import Invocation, Target, basename, normalize_space
from claudeguard.policy.bash.walk import split_command
from claudeguard.policy.pathrules import path_rule_matches

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Protocol, Sequence

    from claudeguard.decision import PolicyOutcome

    class _Rule(Protocol):
        @property
        def text(self) -> str: ...
        @property
        def tool(self) -> str: ...
        @property
        def specifier(self) -> str | None: ...

    class Sourced(Protocol):
        """A rule with where it came from (``policy.decide.SourcedRule``)."""

        @property
        def rule(self) -> _Rule: ...
        @property
        def source(self) -> str: ...
        @property
        def root(self) -> str: ...

READ_ONLY_SOURCE = "subagents.read_only_types"
PROTECTED_SOURCE = "claudeguard (built-in protected paths: no config can loosen it)"  # = policy.protect.SOURCE
WRITE_TOOLS = ("Edit", "Write")


def _where(rule: str | None, source: str | None) -> str:
    return f"{rule} ({source})" if source else str(rule)


class _Rules:
    """The rules a Bash call meets, sorted once."""

    __slots__ = ("deny", "ask", "allow", "write_deny", "write_ask", "write_allow", "bare_allow", "blanket", "any",
                 "binaries")

    def __init__(self, deny: Sequence[Sourced], ask: Sequence[Sourced], allow: Sequence[Sourced],
                 protected: Sequence[str]) -> None:
        self.deny = [sr for sr in deny if sr.rule.tool == "Bash"]
        self.ask = [sr for sr in ask if sr.rule.tool == "Bash"]
        self.allow = [sr for sr in allow if sr.rule.tool == "Bash"]
        self.write_deny = [sr for sr in deny if sr.rule.tool in WRITE_TOOLS]
        self.write_ask = [sr for sr in ask if sr.rule.tool in WRITE_TOOLS]
        self.write_allow = [sr for sr in allow if sr.rule.tool in WRITE_TOOLS]
        self.bare_allow = next((sr for sr in self.allow if sr.rule.specifier is None), None)
        # a bare Bash allow covers what cannot be read only when nothing about Bash is denied or asked
        self.blanket = self.bare_allow is not None and not self.deny and not self.ask and not protected
        self.any = bool(self.deny or self.ask or self.allow or protected)
        names = program_names([sr.rule.specifier for sr in self.deny + self.ask if sr.rule.specifier])
        self.binaries = names


class BashScope:
    """Where a Bash call runs and what guards it besides the rules: the read-only agent type
    making it (None: not read-only), the cwd and home its paths are read from, the CLI's mode
    (acceptEdits lets it write inside the project), the caller's protected paths, and the
    guard's own (``guard_reads`` read or written, ``guard_writes`` written)."""

    __slots__ = ("read_only_type", "cwd", "home", "mode", "protected", "guard_reads", "guard_writes")

    def __init__(self, *, cwd: str, home: str, read_only_type: str | None = None, mode: str | None = None,
                 protected: Sequence[str] = (), guard_reads: Sequence[str] = (),
                 guard_writes: Sequence[str] = ()) -> None:
        self.read_only_type = read_only_type
        self.cwd = cwd
        self.home = home
        self.mode = mode
        self.protected = protected
        self.guard_reads = guard_reads
        self.guard_writes = guard_writes


class _Judged:
    """What the rules said of each part: its ``PartDecision``, whether it is allowed, and the
    first deny and ask hit (the text it matched, the rule)."""

    __slots__ = ("parts", "allowed", "deny_hit", "ask_hit")

    def __init__(self) -> None:
        self.parts: list[PartDecision] = []
        self.allowed: list[bool] = []
        self.deny_hit: tuple[str, Sourced] | None = None
        self.ask_hit: tuple[str, Sourced] | None = None


def decide_bash(tool_input: dict[str, Any], deny: Sequence[Sourced], ask: Sequence[Sourced],
                allow: Sequence[Sourced], scope: BashScope) -> Decision:
    """The decision for one Bash call (see the module docstring): the parts, then the raw text,
    then what it writes and reads; a deny, else an ask, else what cannot be read, else an allow,
    else what no rule decides."""
    command = tool_input.get("command")
    command = command if isinstance(command, str) else ""
    split = split_command(command)
    rules = _Rules(deny, ask, allow, scope.protected)
    judged = _judge_invocations(split, rules, scope)
    _judge_text(command, split, rules, judged)
    writes = _judge_files(split, rules, scope.cwd, scope.home, scope.mode, scope.protected, scope.guard_reads,
                          scope.guard_writes)
    shown = _one_line(command, 80)
    return (_refused(split, judged, writes, scope, shown) or _unread(split, rules, judged, writes, scope, shown)
            or _allowed(split, rules, judged, writes, shown) or _undecided(split, rules, judged, writes, scope, shown))


def _judge_invocations(split: Any, rules: _Rules, scope: BashScope) -> _Judged:
    """Each invocation on the deny rules (every reading, and a copied binary a rule names), then
    the ask rules, then the allow rules."""
    judged = _Judged()
    table = binaries(rules.binaries) if rules.binaries and _needs_table(split) else {}

    def spec_hits(sr: Sourced, inv: Invocation, extra: list[str]) -> bool:
        spec = sr.rule.specifier
        return spec is None or part_denied_by(spec, inv) or any(pattern_matches(spec, t) for t in extra)

    for inv in split.invocations:
        extra, copied = _binary_readings(inv, scope.cwd, scope.home, table)
        hit = next((sr for sr in rules.deny if spec_hits(sr, inv, extra) or _names(sr, copied)), None)
        if hit is not None:
            judged.parts.append(PartDecision(inv.text, "deny", hit.rule.text, hit.source))
            judged.deny_hit = judged.deny_hit or (inv.text, hit)
            judged.allowed.append(False)
            continue
        hit = next((sr for sr in rules.ask if spec_hits(sr, inv, extra) or _names(sr, copied)), None)
        if hit is not None:
            judged.parts.append(PartDecision(inv.text, "ask", hit.rule.text, hit.source))
            judged.ask_hit = judged.ask_hit or (inv.text, hit)
            judged.allowed.append(False)
            continue
        hit = next((sr for sr in rules.allow if sr.rule.specifier is None
                    or part_allowed_by(sr.rule.specifier, inv)), None)
        if hit is None and inv.implicit:
            judged.parts.append(PartDecision(inv.text, "allow", None, None))
            judged.allowed.append(True)
        elif hit is not None:
            judged.parts.append(PartDecision(inv.text, "allow", hit.rule.text, hit.source))
            judged.allowed.append(True)
        else:
            judged.parts.append(PartDecision(inv.text, "none", None, None))
            judged.allowed.append(False)
    return judged


def _judge_text(command: str, split: Any, rules: _Rules, judged: _Judged) -> None:
    """The raw command and, when it could not be parsed, its crude pieces: deny and ask rules are
    never escaped by text the walk could not read."""
    texts = [normalize_space(command)] + (fallback_chunks(command) if not split.ok else [])
    checks: list[tuple[PolicyOutcome, list[Sourced]]] = [("deny", rules.deny), ("ask", rules.ask)]
    for kind, found in checks:
        if judged.deny_hit is not None or (kind == "ask" and judged.ask_hit is not None):
            continue
        for text in texts:
            sr = next((r for r in found if r.rule.specifier is None or pattern_matches(r.rule.specifier, text)), None)
            if sr is not None:
                judged.parts.append(PartDecision(text, kind, sr.rule.text, sr.source))
                if kind == "deny":
                    judged.deny_hit = (text, sr)
                else:
                    judged.ask_hit = (text, sr)
                break


def _refused(split: Any, judged: _Judged, writes: _Files, scope: BashScope, shown: str) -> Decision | None:
    """A deny (a part, the text, a file), a read-only agent's write, or an ask; None otherwise."""
    parts = judged.parts
    if judged.deny_hit is not None:
        text, sr = judged.deny_hit
        return Decision("deny", f"claudeguard: `{_one_line(text, 60)}` is denied by {_where(sr.rule.text, sr.source)}.",
                        rule=sr.rule.text, source=sr.source, parts=parts)
    if writes.deny is not None:
        what, rule, source = writes.deny
        return Decision("deny", f"claudeguard: `{shown}` {what}, denied by {_where(rule, source)}.",
                        rule=rule, source=source, parts=parts)
    read_only_type = scope.read_only_type
    if read_only_type is not None:
        writer = next((inv for inv in split.invocations if inv.changes), None)
        if writer is not None or split.writes:
            what = writer.text if writer is not None else shown
            return Decision("deny", f"claudeguard: {read_only_type} agents are read-only and `{_one_line(what, 60)}` "
                            f"writes ({READ_ONLY_SOURCE}).", rule="Bash (writes)", source=READ_ONLY_SOURCE,
                            parts=parts)
        if not split.ok:
            return Decision("deny", f"claudeguard: {read_only_type} agents are read-only and this command cannot be "
                            f"checked for writes (it {split.reason}).", rule="Bash (writes)",
                            source=READ_ONLY_SOURCE, parts=parts)
    if judged.ask_hit is not None:
        text, sr = judged.ask_hit
        return Decision("ask", f"claudeguard: `{_one_line(text, 60)}` needs a human decision by "
                        f"{_where(sr.rule.text, sr.source)}.", rule=sr.rule.text, source=sr.source, parts=parts)
    if writes.ask is not None:
        what, rule, source = writes.ask
        return Decision("ask", f"claudeguard: `{shown}` {what}, which needs a human decision by "
                        f"{_where(rule, source)}.", rule=rule, source=source, parts=parts)
    return None


def _unread(split: Any, rules: _Rules, judged: _Judged, writes: _Files, scope: BashScope,
            shown: str) -> Decision | None:
    """What cannot be read (a part, a disguised program, a write the guard cannot name): asked
    wherever a Bash rule or a protected path exists, unless a bare allow covers it all."""
    unread = [reason for reason, index in split.unknowns
              if not (index is not None and _allowed_explicitly(split.invocations[index], rules))]
    unread += _disguised(split, scope.cwd, scope.home)
    if unread and not rules.blanket:
        reason = f"claudeguard: `{shown}` {unread[0]}; a human decides."
        if rules.any or writes.unknown_protected:
            return Decision("ask", reason, parts=judged.parts)
        return Decision("none", reason, parts=judged.parts)
    if writes.unknown_protected:
        return Decision("ask", f"claudeguard: `{shown}` writes a file the guard cannot name; a human decides.",
                        parts=judged.parts)
    return None


def _allowed(split: Any, rules: _Rules, judged: _Judged, writes: _Files, shown: str) -> Decision | None:
    """A bare allow that covers the command, or every part allowed by a rule; else the empty
    command's "none"; None otherwise."""
    parts, allowed = judged.parts, judged.allowed
    if rules.bare_allow is not None and (rules.blanket or all(allowed)):
        sr = rules.bare_allow
        return Decision("allow", f"claudeguard: Bash allowed by {_where(sr.rule.text, sr.source)}.",
                        rule=sr.rule.text, source=sr.source, parts=parts)
    by_rule = [pd for pd in parts if pd.decision == "allow" and pd.rule is not None]
    if by_rule and all(allowed) and not writes.unpermitted:
        where = list(dict.fromkeys(_where(pd.rule, pd.source) for pd in by_rule))
        first = by_rule[0]
        return Decision("allow", f"claudeguard: every part of `{shown}` is allowed ({'; '.join(where)}).",
                        rule=first.rule, source=first.source, parts=parts)
    if not split.invocations and not split.writes:
        return Decision("none", "claudeguard: the command is empty; no rule applies.", parts=parts)
    return None


def _undecided(split: Any, rules: _Rules, judged: _Judged, writes: _Files, scope: BashScope,
               shown: str) -> Decision:
    """No rule decides: "none" (the CLI asks), or "ask" where the CLI's own copy of an allow
    rule would let the command run."""
    parts = judged.parts
    missing = [inv for inv, ok in zip(split.invocations, judged.allowed, strict=True) if not ok]
    # Claude Code's own rules see the outer command only: where a rule matches it, or the part no
    # rule allows is run by another command, leaving it to the CLI could let it run: ask.
    # A write of a compound command (``{ ...; } > f``): the CLI may judge only what runs inside.
    claude_would_allow = bool(rules.allow) and (any(inv.nested for inv in missing) or any(
        not surface for _, _, surface in writes.unpermitted)) or _cli_allows(
        rules, [inv.surface for inv in missing] + [surface for _, _, surface in writes.unpermitted if surface])
    if writes.unpermitted and (claude_would_allow or not missing):
        target, owner, _ = writes.unpermitted[0]
        reason = (f"claudeguard: `{_one_line(owner, 60)}` writes {_one_line(target, 60)}, which no Edit or Write rule "
                  f"allows{' in this mode' if scope.mode else ''}")
        if claude_would_allow:
            return Decision("ask", reason + "; a human decides.", parts=parts)
        return Decision("none", reason + ".", parts=parts)
    first_missing = missing[0].text if missing else shown
    more = f" (and {len(missing) - 1} more part(s))" if len(missing) > 1 else ""
    if claude_would_allow:
        inside = next((inv.surface for inv in missing if inv.surface != inv.text), None)
        where_ = f" (run by `{_one_line(inside, 60)}`)" if inside else ""
        return Decision("ask", f"claudeguard: no rule allows `{_one_line(first_missing, 60)}`{where_}{more}; "
                        "a human decides.", parts=parts)
    return Decision("none", f"claudeguard: no rule allows `{_one_line(first_missing, 60)}`{more}.", parts=parts)


def _allowed_explicitly(inv: Invocation, rules: _Rules) -> bool:
    """An allow rule with a specifier matches the invocation itself (``Bash(python3 *)``)."""
    return any(sr.rule.specifier is not None and part_allowed_by(sr.rule.specifier, inv) for sr in rules.allow)


def _cli_allows(rules: _Rules, surfaces: list[str]) -> bool:
    """Would Claude Code's own copy of an allow rule match one of these commands as written?"""
    return any(sr.rule.specifier is not None and pattern_matches(sr.rule.specifier, s)
               for sr in rules.allow for s in surfaces)


def _names(sr: Sourced, copied: set[str]) -> bool:
    return bool(copied) and sr.rule.specifier is not None and bool(program_names([sr.rule.specifier])
                                                                   & copied)


def _needs_table(split: Any) -> bool:
    return any(inv.runs_path or inv.name in COPIERS or inv.name in ("dd", "cat") for inv in split.invocations)


def _disguised(split: Any, cwd: str, home: str) -> list[str]:
    """A program run by a path under another name that is, links followed, one the guard reads
    into (``ln -s /usr/bin/env e; ./e rm x``): what it runs was not read."""
    found = []
    for inv in split.invocations:
        if not inv.runs_path or looked_into(basename(inv.runs_path)):
            continue
        path = Target(inv.runs_path, "", "operand", "").absolute(cwd, home)
        name = binary_at(path, binaries(LOOKED_INTO)) if path else None
        if name is not None:
            found.append(f"runs {name} by the path {inv.runs_path}, so what it runs was not read")
    return found


def _binary_readings(inv: Invocation, cwd: str, home: str, table: dict[tuple[int, int], str]) -> tuple[list[str],
                                                                                                      set[str]]:
    """Readings of an invocation whose program is, by inode, a binary the rules name; and the
    names of such binaries it copies or links."""
    if not table:
        return [], set()
    extra = []
    if inv.runs_path:
        path = Target(inv.runs_path, "", "operand", "").absolute(cwd, home)
        name = binary_at(path, table) if path else None
        if name is not None:
            extra.append(normalize_space(" ".join([name] + inv.words[1:])))
    copied = set()
    if inv.name in COPIERS or inv.name == "dd" or (inv.name == "cat" and inv.writes):
        for target in inv.reads:
            path = target.absolute(cwd, home)
            name = binary_at(path, table) if path else None
            if name is not None:
                copied.add(name)
    return extra, copied


class _Files:
    """What the files a command reads and writes decide."""

    __slots__ = ("deny", "ask", "unpermitted", "unknown_protected")

    def __init__(self) -> None:
        self.deny: tuple[str, str, str] | None = None  # (what, rule, source)
        self.ask: tuple[str, str, str] | None = None
        # (target as written, the command that writes it, its outermost command; "" for a write
        # of a compound command or of nothing: ``{ ...; } > f``)
        self.unpermitted: list[tuple[str, str, str]] = []
        self.unknown_protected = False


# Programs that remove or move what they are given: a directory above a write-protected file
# is as good as the file (``rm -rf .claude``, ``mv .claude x``).
REMOVERS = frozenset({"rm", "rmdir", "unlink", "shred", "mv", "rsync", "trash", "trash-put", "gio"})


def _under(path: str, entry: str) -> bool:
    if "*" in entry:
        import fnmatch  # only for a pattern entry (/proc/*/environ)

        return fnmatch.fnmatchcase(path, entry)
    return path == entry or path.startswith(entry.rstrip("/") + "/")


def _write_hit(real: str, path: str, inv: Invocation | None, write: bool,
               entries: Sequence[tuple[str, str]], cwd: str, home: str) -> str | None:
    """The write-protected entry this target reaches: written inside it, or a directory above it
    removed or moved, or above it and given a copy of the entry's own name."""
    remover = inv is not None and inv.name in REMOVERS
    if not write and not (inv is not None and inv.name == "mv"):
        return None  # a read reaches a write-protected file only when it moves it away
    for entry, full in entries:
        if _under(real, full) or _under(path, entry):
            return entry
        if full.startswith(real.rstrip("/") + "/"):
            if remover:
                return entry
            first = full[len(real.rstrip("/")) + 1:].split("/", 1)[0]
            sources = [t.path for t in (inv.reads if inv is not None else []) if t.path]
            if any(os.path.basename(s.rstrip("/")) == first for s in sources):
                return entry
    return None


def _judge_files(split: Any, rules: _Rules, cwd: str, home: str, mode: str | None, protected: Sequence[str],
                 guard_reads: Sequence[str] = (), guard_writes: Sequence[str] = ()) -> _Files:
    out = _Files()
    asks = bool(protected)  # the caller's protected paths: a write to a path computed at run time is asked
    guarded = [(p, _real(p) if "*" not in p else p) for p in [*protected, *guard_reads]]
    write_guarded = [(p, _real(p) if "*" not in p else p) for p in guard_writes]
    owners: list[tuple[Target, Invocation | None, bool]] = [
        (t, inv, True) for inv in split.invocations for t in inv.writes]
    owners += [(t, None, True) for t in split.writes if not any(t is o[0] for o in owners)]
    owners += [(t, inv, False) for inv in split.invocations for t in inv.reads]
    owners += [(t, None, False) for t in split.reads if not any(t is o[0] for o in owners)]
    project = _real(cwd)
    for target, inv, write in owners:
        owner = inv.text if inv is not None else ""
        path = target.absolute(cwd, home)
        shown = target.path if target.path is not None else target.via
        if path is None:
            if write and asks:
                out.unknown_protected = True
            if write and (rules.write_deny or rules.write_ask) and out.ask is None:
                out.ask = (f"writes a path computed at run time ({_one_line(target.via, 40)})",
                           (rules.write_deny + rules.write_ask)[0].rule.text,
                           (rules.write_deny + rules.write_ask)[0].source)
            if write and target.kind != "operand" and not _write_permitted(None, rules, mode, project):
                out.unpermitted.append((target.via, owner or target.via, inv.surface if inv is not None else ""))
            continue
        real = _real(path)
        for p, full in guarded:
            if _under(real, full) or _under(path, p) or ("*" not in p and full.startswith(real.rstrip("/") + "/")):
                if out.deny is None:
                    what = f"{'writes' if write else 'reads'} {shown}, a file the guard protects"
                    out.deny = (what, f"protected path {p}", PROTECTED_SOURCE)
        entry = _write_hit(real, path, inv, write, write_guarded, cwd, home) if write_guarded else None
        if entry is not None and out.deny is None:
            what = f"{'writes' if write else 'moves'} {shown}, a file the guard protects from changes"
            out.deny = (what, f"protected path {entry}", PROTECTED_SOURCE)
        if not write:
            continue
        hit = next((sr for sr in rules.write_deny if _path_rule(sr, path, cwd, home)), None)
        if hit is not None and out.deny is None:
            out.deny = (f"writes {shown}", hit.rule.text, hit.source)
        hit = next((sr for sr in rules.write_ask if _path_rule(sr, path, cwd, home)), None)
        if hit is not None and out.ask is None:
            out.ask = (f"writes {shown}", hit.rule.text, hit.source)
        if target.kind != "operand" and not _write_permitted(path, rules, mode, project, cwd, home) and not (
                inv is not None and _named_by_allow_rule(target, inv, rules)):
            out.unpermitted.append((shown, owner or target.via, inv.surface if inv is not None else ""))
    return out


def _write_permitted(path: str | None, rules: _Rules, mode: str | None, project: str, cwd: str = "/",
                     home: str = "/") -> bool:
    if rules.bare_allow is not None:
        return True
    if path is None:
        return False
    if any(_path_rule(sr, path, cwd, home) for sr in rules.write_allow):
        return True
    if mode == "acceptEdits":
        real = _real(path)
        return real == project or real.startswith(project.rstrip("/") + "/")
    return False


def _named_by_allow_rule(target: Target, inv: Invocation, rules: _Rules) -> bool:
    """An allow rule names this write itself, not through a wildcard: ``Bash(echo x > notes.txt)``
    permits ``> notes.txt`` (``Bash(echo *)`` does not)."""
    path = target.path
    if not path:
        return False
    for sr in rules.allow:
        spec = sr.rule.specifier
        if spec is None:
            continue
        for text in inv.allow_texts:
            at = text.rfind(path)
            if at >= 0 and pattern_matches(spec, text) and not pattern_matches(
                    spec, text[:at] + "\0" + text[at + len(path):]):
                return True
    return False


def _path_rule(sr: Sourced, path: str, cwd: str, home: str) -> bool:
    spec = sr.rule.specifier
    return spec is None or path_rule_matches(spec, path, cwd=cwd, home=home, root=sr.root or cwd)


def _real(path: str) -> str:
    """``path`` with its links followed (what the write really reaches)."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


_CONTROL = frozenset(chr(c) for c in [*range(0, 32), 127, *range(0x80, 0xA0)]) | frozenset(
    "\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _one_line(text: str, limit: int) -> str:
    """One line without control characters (a reason is shown on terminals), cut to ``limit``."""
    text = text.replace("\r\n", "\n").replace("\n", " \u23ce ").replace("\t", " ")
    text = "".join("?" if c in _CONTROL else c for c in text)
    while "  " in text:
        text = text.replace("  ", " ")
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "\u2026"
