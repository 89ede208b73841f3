"""``claudeguardctl audit [--follow] [--json]``: the decision log, one line per decision."""

from __future__ import annotations

import argparse


def format_event(event: dict) -> str:
    agent = event.get("agent_type") or "main"
    scope = f" ({event['scope']})" if event.get("scope") else ""
    waited = f" after {event['waited_s']:.1f}s" if event.get("waited_s") else ""
    by = event.get("decided_by") or event.get("event") or "?"
    rule = f" [{event['rule']} @ {event['source']}]" if event.get("rule") else ""
    return (
        f"{event.get('time', '?')}  {str(event.get('session_id', '-'))[:16]:16}  {agent[:16]:16}  "
        f"{str(event.get('decision', '-')):5} by {by}{scope}{waited}: {event.get('summary', '')}{rule}"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="claudeguardctl audit")
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing new decisions")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args(argv[1:])
    import json
    import sys

    from claudeguard.channel.audit import audit_path, read_events

    if not args.follow and not audit_path().exists():
        print(f"no decisions logged yet ({audit_path()})", file=sys.stderr)
        return 0
    try:
        for event in read_events(follow=args.follow):
            print(json.dumps(event) if args.json else format_event(event), flush=args.follow)
    except KeyboardInterrupt:
        return 0
    return 0
