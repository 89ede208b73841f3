"""Whether an answer beyond ``once`` can take effect: the rules it would grant (or write) for a
waiting call, and why an allow of them would never decide the next such call (a matching ask or
deny rule wins, deny > ask > allow).

One check for every answering path: ``claudeguardctl approve`` (and the console, the desk's
buttons through it) and an answer from another machine of the fleet, which the owner's service
judges with this before the channel takes it (``service.fleet.checked_apply``).
"""

from __future__ import annotations

from pathlib import Path

from claudeguard.config.load import env_overrides, load_config
from claudeguard.gate.session import load_session
from claudeguard.paths import runtime_root
from claudeguard.policy.decide import SourcedRule, decide, grant_rules_for_call, policy_from_spec
from claudeguard.policy.rules import parse_rule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.channel.model import Request
    from claudeguard.config.schema import PolicySpec


def grant_rules(req: Request) -> list[str]:
    """The rules an answer beyond once grants for ``req``'s call; [] when its call cannot be read
    with confidence (then only ``once`` can answer it)."""
    return grant_rules_for_call(req.tool, req.input, cwd=req.cwd)


def refusal(req: Request, decision: str, scope: str, rules: list[str], target: Path | None) -> str | None:
    """Why an answer of ``scope`` beyond once must not be given to ``req`` (one line, naming the
    request), or None when it may: no rule to grant, or an allow whose rule could never decide
    the next such call (``forever`` would write a rule the next run ignores, ``agent``/``session``
    a grant the next call ignores). ``target`` is the file ``forever`` writes."""
    if scope == "once":
        return None
    if not rules:
        return (f"{req.id}: this call cannot be granted beyond once (the command could not be parsed with "
                f"confidence); use --scope once")
    if decision != "allow":
        return None
    label = str(target) if scope == "forever" else f"grant ({scope})"
    blocker = forever_blocker(session_id=req.session_id, tool=req.tool, tool_input=req.input, cwd=req.cwd,
                              agent_type=req.agent_type, rules=rules, target=label)
    if blocker is None:
        return None
    if scope == "forever":
        return (f"{req.id}: not answered: --scope forever would write {', '.join(rules)} to "
                f"[permissions].allow, but {blocker}; answer --scope once, or narrow that rule")
    whom = "this agent type" if scope == "agent" else "the session"
    return (f"{req.id}: not answered: --scope {scope} would allow {', '.join(rules)} for {whom}, "
            f"but {blocker}, so the next such call is {next_call_fate(blocker)}; answer --scope once, "
            f"or narrow that rule")


def next_call_fate(blocker: str) -> str:
    """What becomes of the next such call under the rule ``forever_blocker`` named."""
    return "asked again" if blocker.startswith("an ask") else "denied by it"


def forever_blocker(*, session_id: str, tool: str, tool_input: dict[str, object], cwd: str, agent_type: str | None,
                    rules: list[str], target: str) -> str | None:
    """Why allow ``rules`` written forever would never decide this call: an ask (or deny) rule
    that matches it wins over every allow rule (deny > ask > allow), so the next run would ask
    again; None when they would decide it. Judged with the asking session's own policy (its
    rules with their file:line), or, when its session file is gone, the config as a run in
    ``cwd`` reads it."""
    spec: PolicySpec | None = None
    if is_session_id(session_id):
        try:
            spec = load_session(str(runtime_root() / "sessions" / session_id)).policy_spec
        except (OSError, ValueError):
            spec = None
    if spec is None:
        spec = load_config(Path(cwd), env_overrides()).policy_spec()
    written = [SourcedRule(parse_rule(rule), "allow", f"{target} (forever)", cwd) for rule in rules]
    verdict = decide(policy_from_spec(spec), tool, dict(tool_input), agent_type=agent_type, cwd=cwd, extra=written)
    if verdict.decision in ("ask", "deny") and verdict.rule:
        kind = "an ask" if verdict.decision == "ask" else "a deny"
        return f"{kind} rule matches this call and wins over every allow rule: {verdict.rule} ({verdict.source})"
    return None


def is_session_id(text: str) -> bool:
    """A session id that can name a dir of the runtime root (the launcher's are hex)."""
    return bool(text) and text not in (".", "..") and "/" not in text and "\0" not in text
