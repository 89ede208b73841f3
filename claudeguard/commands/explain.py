"""``claudeguardctl explain [--agent TYPE] [--profile NAME] [--json] CALL``: the decision the
policy gives for a call written like a rule (``'Bash(git push --force)'``), and the rule, file and
line that decided it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from claudeguard.commands.cli import parser as command_parser
from claudeguard.config.load import Sourced, env_overrides, load_config
from claudeguard.errors import UsageError
from claudeguard.plan.claude_args import parse_claude_args
from claudeguard.plan.settings_sources import protected_spec
from claudeguard.policy.decide import call_from_rule_like, decide, policy_from_spec
from claudeguard.policy.protect import SOURCE as PROTECTED
from claudeguard.policy.rules import tool_problem


def main(argv: list[str]) -> int:
    parser = command_parser("explain")
    parser.add_argument("--agent", metavar="TYPE",
                        help="decide as this subagent type, e.g. Explore (default: the main agent)")
    parser.add_argument("--profile", metavar="NAME",
                        help="apply [profiles.NAME] as `claudeguard --guard-profile NAME` would")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object: decision, rule, source, agent_type, parts")
    parser.add_argument("call", help="e.g. 'Bash(git push --force)', 'Read(/etc/passwd)', 'mcp__github__create_issue'")
    args = parser.parse_args(argv[1:])

    overrides = env_overrides()
    if args.profile:
        overrides.profile = Sourced(args.profile, "--profile")
    cwd = Path.cwd()
    cfg = load_config(cwd, overrides)
    name = args.call.split("(", 1)[0].strip()
    problem = tool_problem(name) if name else None  # a call no CLI makes (`bash(ls)`): nothing to explain
    if problem is not None:
        raise UsageError(f"cannot read the call {args.call!r}: {problem}")
    try:
        tool, tool_input = call_from_rule_like(args.call)
    except ValueError as exc:
        raise UsageError(f"cannot read the call {args.call!r}: {exc}") from None
    spec = cfg.policy_spec()
    # The built-in protected paths as a session here would have them (no config loosens them).
    spec["protected"] = protected_spec(parse_claude_args([]), str(cwd), cfg=cfg)
    result = decide(policy_from_spec(spec), tool, tool_input, agent_type=args.agent, cwd=str(cwd),
                    home=os.path.expanduser("~"))
    if args.json:
        print(json.dumps({
            "call": args.call,
            "tool": tool,
            "decision": result.decision,
            "rule": result.rule,
            "source": result.source,
            "agent_type": args.agent,
            "reason": result.reason,
            "parts": [{"part": p.part, "decision": p.decision, "rule": p.rule, "source": p.source}
                      for p in result.parts],
        }, indent=2))
        return 0
    who = f"agent {args.agent}" if args.agent else "main agent"
    print(f"{result.decision}: {args.call} ({who})")
    if result.rule:
        print(f"  rule:   {result.rule}")
        print(f"  source: {result.source}")
        if result.source == PROTECTED:  # the built-in rule: say why the path is protected
            print(f"  why:    {result.reason.removeprefix('claudeguard: ')}")
    elif result.decision == "ask":  # the guard cannot read it, or Claude Code's own rules could let it run
        print(f"  asked:  {result.reason.removeprefix('claudeguard: ')}")
    else:
        print("  no rule matches: Claude Code decides (its prompt goes to the approval channel)")
    for part in result.parts:
        print(f"  part {part.part!r}: {part.decision}" + (f" by {part.rule} ({part.source})" if part.rule else ""))
    return 0
