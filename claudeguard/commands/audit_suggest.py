"""``claudeguardctl audit --suggest``: rules learned from the calls a human answered or that timed out.

Every such call's audit line carries ``rules``: the narrowest rules that would have decided it
(the ones a "don't ask again" grant adds, worked out where the call ran). This module groups
them, counts the calls behind each, and prints them as TOML for ``[permissions]``; ``--apply``
writes them into the user config (or ``--file``) with tomlkit, comments and layout kept.

What is never suggested:
- a call that cannot be split safely (its ``rules`` is empty): no rule at all;
- a deny rule for one part of a compound command that was denied as a whole (which part was
  refused is not known);
- a rule that was answered both ways, by humans or by timeouts (listed as a conflict);
- a rule already in the target file (no duplicates).

Broader rules are only Bash prefix rules (``Bash(npm run *)``), offered as such in their own
block, derived from two or more approved commands that share the prefix, never from a command
that runs arbitrary code (``bash``, ``python``, ``sudo``, ...), never covering a denied call,
and never ``Bash(*)``. ``--broader`` applies them instead of the rules they cover.
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from claudeguard.channel.audit import read_events
from claudeguard.config.durations import seconds
from claudeguard.config.write import add_rules, existing_rules
from claudeguard.decision import PERMISSIONS
from claudeguard.errors import UsageError
from claudeguard.paths import user_config_file
from claudeguard.policy.bash import part_allowed_by, split_command

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import argparse
    from typing import Any, Iterable

    from claudeguard.policy.bash.model import Invocation

# Commands whose arguments are programs: a prefix rule on them allows anything.
RUNS_ANYTHING = frozenset(
    "sh bash zsh dash ksh fish csh tcsh busybox python python2 python3 pypy node nodejs deno bun perl ruby php lua "
    "Rscript osascript pwsh powershell env sudo doas su runuser pkexec xargs eval exec command builtin nohup timeout "
    "nice ionice stdbuf time watch strace ltrace gdb chroot unshare nsenter setsid flock ssh docker podman kubectl "
    "npx uvx pipx make just find awk gawk sed".split()
)
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:=@%+,-]+")  # written the same quoted or not
_SUBCOMMAND = re.compile(r"[a-z][a-z0-9-]*")
def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``7d``, ``2w``, ``1h30m`` or plain seconds, as seconds (the
    config's reading of a duration: ``config.durations``)."""
    try:
        total = seconds(text)
    except ValueError:
        total = 0.0
    if not total > 0 or total == float("inf"):
        raise UsageError(f"--since {text!r}: expected a duration such as 90s, 30m, 12h, 7d, 2w or 1h30m")
    return total


def event_epoch(event: dict[str, Any]) -> float | None:
    """The ``time`` of an audit line (ISO 8601 UTC) as epoch seconds; None when unreadable."""
    text = event.get("time")
    if not isinstance(text, str):
        return None
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp()


# -- grouping --------------------------------------------------------------------------------


@dataclass
class RuleStats:
    rule: str
    approved: int = 0  # by a human
    denied: int = 0  # by a human
    timed_out: dict[str, Any] = field(default_factory=dict)  # decision -> count
    requests: set[Any] = field(default_factory=set)
    agents: set[Any] = field(default_factory=set)
    sessions: set[str | None] = field(default_factory=set)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def kind(self) -> str | None:
        """allow, deny, or None when the answers disagree."""
        if self.approved or self.denied:
            if self.approved and self.denied:
                return None
            return "allow" if self.approved else "deny"
        kinds = [k for k, n in self.timed_out.items() if n]
        return kinds[0] if len(kinds) == 1 else None

    def note(self) -> str:
        bits = []
        if self.approved:
            bits.append(f"approved {self.approved}")
        if self.denied:
            bits.append(f"denied {self.denied}")
        for decision, n in sorted(self.timed_out.items()):
            word = "allowed" if decision == "allow" else "denied"
            bits.append(f"timed out {n} ({word} by approval.on_timeout)")
        who = ", ".join(sorted(self.agents))
        return f"{self.calls} call{'s' if self.calls != 1 else ''}: {', '.join(bits)}; asked by {who}"


@dataclass
class Broader:
    rule: str
    covers: list[str]
    calls: int


@dataclass
class Suggestions:
    allow: list[RuleStats] = field(default_factory=list)
    deny: list[RuleStats] = field(default_factory=list)
    conflicts: list[RuleStats] = field(default_factory=list)
    broader: list[Broader] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)  # why -> summaries
    present: list[str] = field(default_factory=list)  # already in the target file
    calls: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)  # approved/denied/timed_out -> count
    sessions: set[str | None] = field(default_factory=set)


def asked_calls(events: Iterable[dict[str, Any]], *, since: float | None = None,
                session: str | None = None) -> list[dict[str, Any]]:
    """The audit lines of calls a human answered or that timed out, one per request."""
    seen: set[Any] = set()
    out = []
    for event in events:
        if event.get("event") or event.get("decided_by") not in ("human", "timeout"):
            continue
        if event.get("decision") not in PERMISSIONS or str(event.get("tool", "")).startswith("dialog:"):
            continue
        if session and not str(event.get("session_id") or "").startswith(session):
            continue
        if since is not None:
            when = event_epoch(event)
            if when is None or when < since:
                continue
        key = (event.get("session_id"), event.get("request_id") or id(event))
        if key in seen:
            continue  # the same request audited twice: counted once
        seen.add(key)
        out.append(event)
    return out


def suggest(events: list[dict[str, Any]], present: set[str] | None = None) -> Suggestions:
    present = present or set()
    out = Suggestions(calls=len(events))
    stats: dict[str, RuleStats] = {}
    for event in events:
        human = event.get("decided_by") == "human"
        outcome = ("approved" if event["decision"] == "allow" else "denied") if human else "timed_out"
        out.outcomes[outcome] = out.outcomes.get(outcome, 0) + 1
        out.sessions.add(event.get("session_id"))
        summary = str(event.get("summary") or event.get("tool") or "?")
        rules = event.get("rules")
        if not isinstance(rules, list):
            out.skipped.setdefault("logged without its rules (by an older claudeguard)", []).append(summary)
            continue
        if not rules:
            out.skipped.setdefault("cannot be split safely into rules", []).append(summary)
            continue
        if event["decision"] == "allow" and event.get("ask_rule"):
            # deny > ask > allow: an allow rule would not have decided it; the ask rule did.
            why = (f"asked because of the ask rule {event['ask_rule']} ({event.get('ask_source') or '?'}), "
                   "which an allow rule does not override")
            out.skipped.setdefault(why, []).append(summary)
            continue
        if event["decision"] == "deny" and len(rules) > 1:
            out.skipped.setdefault("a compound command denied as a whole (which part was refused is unknown)",
                                   []).append(summary)
            continue
        for rule in rules:
            st = stats.setdefault(rule, RuleStats(rule))
            if human:
                if event["decision"] == "allow":
                    st.approved += 1
                else:
                    st.denied += 1
            else:
                st.timed_out[event["decision"]] = st.timed_out.get(event["decision"], 0) + 1
            st.requests.add((event.get("session_id"), event.get("request_id") or id(event)))
            st.agents.add(event.get("agent_type") or "main")
            st.sessions.add(event.get("session_id"))
    for st in sorted(stats.values(), key=lambda s: (-s.calls, s.rule)):
        kind = st.kind()
        if kind is None:
            out.conflicts.append(st)
        elif st.rule in present:
            out.present.append(st.rule)
        else:
            (out.allow if kind == "allow" else out.deny).append(st)
    blocked = [s.rule for s in (*out.deny, *out.conflicts)]
    out.broader = broader_rules(out.allow, blocked)
    return out


# -- broader prefix rules --------------------------------------------------------------------


def _unescape(spec: str) -> str:
    return re.sub(r"\\([\\*])", r"\1", spec)


def _bash_part(rule: str) -> Invocation | None:
    """The one simple command a narrow ``Bash(...)`` rule stands for, or None."""
    if not (rule.startswith("Bash(") and rule.endswith(")")):
        return None
    split = split_command(_unescape(rule[5:-1]))
    return split.parts[0] if split.ok and len(split.parts) == 1 else None


def broader_rules(allowed: list[RuleStats], blocked: list[str]) -> list[Broader]:
    """Prefix rules shared by two or more approved commands (see the module docstring)."""
    groups: dict[tuple[Any, ...], list[tuple[RuleStats, list[str], Invocation]]] = {}
    for st in allowed:
        part = _bash_part(st.rule)
        if part is None or not part.argv:
            continue
        argv = list(part.argv)
        if argv[0] in RUNS_ANYTHING or argv[0].rsplit("/", 1)[-1] in RUNS_ANYTHING:
            continue
        key = tuple(argv[:2]) if len(argv) > 1 and _SUBCOMMAND.fullmatch(argv[1]) else (argv[0],)
        groups.setdefault(key, []).append((st, argv, part))
    blocked_parts = [p for p in (_bash_part(r) for r in blocked) if p is not None]
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        prefix = list(members[0][1])
        for _, argv, _ in members[1:]:
            n = 0
            while n < min(len(prefix), len(argv)) and prefix[n] == argv[n]:
                n += 1
            prefix = prefix[:n]
        # Every word of the prefix must read the same quoted or not (the rule matches the text).
        if not prefix or not all(_PLAIN_WORD.fullmatch(w) for w in prefix):
            continue
        spec = " ".join(prefix) + " *"
        if not all(part_allowed_by(spec, part) for _, _, part in members):
            continue  # the prefix does not read like the commands (wrappers, quoting): no offer
        if any(part_allowed_by(spec, part) for part in blocked_parts):
            continue  # it would also allow a call that was denied
        out.append(Broader(f"Bash({spec})", [st.rule for st, _, _ in members], sum(st.calls for st, _, _ in members)))
    return sorted(out, key=lambda b: (-b.calls, b.rule))


# -- output ----------------------------------------------------------------------------------


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def render_toml(s: Suggestions, *, scope: str, target: Path) -> str:
    o = s.outcomes
    lines = [
        f"# claudeguardctl audit --suggest: {s.calls} call{'s' if s.calls != 1 else ''} asked a human {scope}"
        f" in {len(s.sessions)} session{'s' if len(s.sessions) != 1 else ''}: {o.get('approved', 0)} approved,"
        f" {o.get('denied', 0)} denied, {o.get('timed_out', 0)} timed out.",
    ]
    if s.allow or s.deny:
        lines.append("[permissions]")
        for kind, items in (("allow", s.allow), ("deny", s.deny)):
            if items:
                lines.append(f"{kind} = [")
                lines += [f"    {_toml_string(st.rule)},  # {st.note()}" for st in items]
                lines.append("]")
    else:
        lines.append("# no new rules to suggest")
    if s.broader:
        lines.append("")
        lines.append("# Broader prefix rules, offered as such (`--apply --broader` writes each instead of the "
                     "rules it covers):")
        for b in s.broader:
            lines.append(f"# allow = [{_toml_string(b.rule)}]  # covers {', '.join(b.covers)}: {b.calls} calls")
    if s.present:
        lines.append(f"# already in {target}: {', '.join(s.present)}")
    for st in s.conflicts:
        lines.append(f"# not suggested, answered both ways: {st.rule} ({st.note()})")
    for why, summaries in s.skipped.items():
        shown = "; ".join(dict.fromkeys(summaries))
        lines.append(f"# not suggested, {why}: {len(summaries)} call{'s' if len(summaries) != 1 else ''}: {shown}")
    return "\n".join(lines) + "\n"


def as_json(s: Suggestions) -> dict[str, Any]:
    def row(st: RuleStats) -> dict[str, Any]:
        return {"rule": st.rule, "calls": st.calls, "approved": st.approved, "denied": st.denied,
                "timed_out": sum(st.timed_out.values()), "agent_types": sorted(st.agents), "sessions": len(st.sessions)}

    return {
        "calls": s.calls, "outcomes": s.outcomes,
        "allow": [row(st) for st in s.allow], "deny": [row(st) for st in s.deny],
        "conflicts": [row(st) for st in s.conflicts],
        "broader": [{"rule": b.rule, "covers": b.covers, "calls": b.calls} for b in s.broader],
        "present": s.present,
        "skipped": [{"why": why, "calls": len(v), "summaries": v} for why, v in s.skipped.items()],
    }


# -- the command -----------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """``args``: the parsed ``audit`` options (``since``, ``session``, ``apply``, ``file``, ``broader``, ``json``)."""
    since = time.time() - parse_duration(args.since) if args.since is not None else None
    if args.file and not args.apply:
        raise UsageError("--file goes with --apply (the config file to write)")
    if args.broader and not args.apply:
        raise UsageError("--broader goes with --apply (the prefix rules are always listed)")
    if args.apply:
        target = Path(args.file) if args.file else user_config_file()
        present = existing_rules(target)  # an unreadable or invalid file stops here, before anything
    else:
        target = user_config_file()
        try:
            present = existing_rules(target)
        except Exception:  # noqa: BLE001 - listing only: a broken file just means nothing is known
            present = set()
    scope = f"in the last {args.since}" if args.since is not None else "in the whole audit log"
    if args.session:
        scope += f", session {args.session}"
    s = suggest(asked_calls(read_events(), since=since, session=args.session), present)
    if args.json:
        print(json.dumps(as_json(s), indent=2))
    else:
        sys.stdout.write(render_toml(s, scope=scope, target=target))
    if not args.apply:
        return 0

    allow = [(st.rule, st.note()) for st in s.allow]
    if args.broader:
        covered = {r for b in s.broader for r in b.covers}
        allow = [(r, n) for r, n in allow if r not in covered]
        allow += [(b.rule, f"covers {len(b.covers)} asked commands, {b.calls} calls") for b in s.broader]
    added = add_rules(target, {"allow": allow, "deny": [(st.rule, st.note()) for st in s.deny]})
    total = sum(len(v) for v in added.values())
    detail = ", ".join(f"{kind} {len(v)}" for kind, v in added.items() if v)
    what = f"added {total} rule{'s' if total != 1 else ''} ({detail})" if total else "nothing to add"
    print(f"{what} to [permissions] in {target}", file=sys.stderr)
    return 0
