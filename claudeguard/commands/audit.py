"""``claudeguardctl audit [--follow] [--json] [--since D] [--session ID] [--suggest [--apply [--file F] [--broader]]]``:
the decision log, one line per decision; with ``--suggest``, the rules it teaches (see audit_suggest)."""

from __future__ import annotations

import json
import sys
import time

from claudeguard.channel.audit import audit_path, read_events
from claudeguard.commands.audit_suggest import event_epoch, parse_duration, run
from claudeguard.commands.cli import parser as command_parser
from claudeguard.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import argparse
    from typing import Any

EPILOG = """\
with --suggest: print, as TOML for [permissions], the narrowest rules (Claude Code syntax) that
would have decided the calls a human answered or that timed out, each with its count; rules
answered both ways, calls that cannot be split safely, and rules already in the config are
listed as comments, never suggested. Broader Bash prefix rules are offered separately.

examples:
  claudeguardctl audit --follow
  claudeguardctl audit --suggest --since 7d
  claudeguardctl audit --suggest --session 3f9c2a01 --apply --file .claudeguard.toml
"""


def format_event(event: dict[str, Any]) -> str:
    agent = event.get("agent_type") or "main"
    scope = f" ({event['scope']})" if event.get("scope") else ""
    waited = f" after {event['waited_s']:.1f}s" if event.get("waited_s") else ""
    by = event.get("decided_by") or event.get("event") or "?"
    rule = f" [{event['rule']} @ {event['source']}]" if event.get("rule") else ""
    return (
        f"{event.get('time', '?')}  {str(event.get('session_id', '-'))[:16]:16}  {agent[:16]:16}  "
        f"{str(event.get('decision', '-')):5} by {by}{scope}{waited}{answerer(event.get('answered_by'))}: "
        f"{event.get('summary', '')}{rule}"
    )


def answerer(answered_by: object) -> str:
    """`` from pid 4242 (/dev/pts/3)``: who gave a human's answer, as its waiter saw the process;
    a relayed one says through what (`` via desk``, `` via fleet (cg-a-bob@desk-bob)``, `` via desk
    through the fleet (cg-a-bob@desk-bob)``)."""
    if not isinstance(answered_by, dict):
        return ""
    via = answered_by.get("via")
    if via == "fleet":
        return f" via fleet ({answered_by.get('acl_user')}@{answered_by.get('machine')})"
    if via == "desk" and answered_by.get("acl_user") is not None:  # another machine's desk, through the fleet
        return f" via desk through the fleet ({answered_by.get('acl_user')}@{answered_by.get('machine')})"
    if isinstance(via, str):
        return f" via {via}"
    tty = answered_by.get("tty")
    return f" from pid {answered_by.get('pid')} ({tty or 'no tty'})"


def parser() -> argparse.ArgumentParser:
    p = command_parser("audit", epilog=EPILOG)
    p.add_argument("--follow", "-f", action="store_true",
                   help="keep printing new decisions as they are logged (Ctrl-C ends)")
    p.add_argument("--json", action="store_true", help="one JSON object per line (with --suggest: one JSON object)")
    p.add_argument("--since", metavar="DURATION",
                   help="only decisions of the last DURATION: 90s, 30m, 12h, 7d, 2w, 1h30m")
    p.add_argument("--session", metavar="ID", help="only decisions of this session (its id or a prefix of it)")
    p.add_argument("--suggest", action="store_true",
                   help="print the rules that would have decided the asked calls, with counts")
    p.add_argument("--apply", action="store_true",
                   help="with --suggest: write the suggested rules into the user config (comments and layout kept, "
                        "no duplicates)")
    p.add_argument("--file", metavar="FILE", help="with --apply: the config file to write instead of the user file")
    p.add_argument("--broader", action="store_true",
                   help="with --apply: write the offered Bash prefix rules instead of the narrow rules they cover")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv[1:])

    if (args.apply or args.file or args.broader) and not args.suggest:
        raise UsageError("--apply, --file and --broader go with --suggest")
    if args.suggest:
        if args.follow:
            raise UsageError("--suggest reads the log once; it does not go with --follow")

        return run(args)

    since = None
    if args.since is not None:
        since = time.time() - parse_duration(args.since)
    if not args.follow and not audit_path().exists():
        print(f"no decisions logged yet ({audit_path()})", file=sys.stderr)
        return 0
    try:
        for event in read_events(follow=args.follow):
            if args.session and not str(event.get("session_id") or "").startswith(args.session):
                continue
            if since is not None:
                when = event_epoch(event)
                if when is None or when < since:
                    continue
            print(json.dumps(event) if args.json else format_event(event), flush=args.follow)
    except KeyboardInterrupt:
        return 0
    return 0
