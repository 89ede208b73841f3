"""``claudeguardctl pending [--json]``: open approval requests of every guarded session of this user."""

from __future__ import annotations

import json
import sys

from claudeguard.channel import list_pending
from claudeguard.commands.at_keyboard import at_keyboard
from claudeguard.commands.cli import parser as command_parser
from claudeguard.paths import legacy_note

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.channel.model import Request


def request_json(req: Request) -> dict[str, Any]:
    return {
        "id": req.id,
        "session_id": req.session_id,
        "agent_type": req.agent_type,
        "agent_id": req.agent_id,
        "tool": req.tool,
        "input": req.input,
        "summary": req.summary,
        "age_s": round(req.age_s, 1),
        "deadline_s": round(req.deadline_s, 1),
        "cwd": req.cwd,
        "kind": req.kind,
        "choices": req.choices,
        "cli_short_id": (req.extra or {}).get("cli_short_id"),  # a --bg session's id in `claude agents`
    }


def main(argv: list[str]) -> int:
    parser = command_parser("pending",
                            epilog="An id may be shortened to a unique prefix of 6 or more characters when answering.")
    parser.add_argument("--json", action="store_true",
                        help="a JSON list: id, session_id, agent_type, agent_id, tool, input (full), summary, "
                             "age_s, deadline_s")
    parser.add_argument("--fleet", action="store_true",
                        help="every machine of the configured fleet: each item also has machine and call_sha256")
    args = parser.parse_args(argv[1:])
    if args.fleet:
        return _fleet(args.json)

    requests = list_pending()

    note = legacy_note()
    if note:
        print(f"claudeguardctl: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps([request_json(r) for r in requests], indent=2))
        return 0
    keyboard = at_keyboard()  # dialogs a pty session shows its user first: not answerable here yet
    if not requests:
        print("no pending requests" + (" in the channel" if keyboard else ""))
    else:
        print(f"{'ID':18} {'AGE':>6} {'LEFT':>6} {'SESSION':16} {'AGENT':20} SUMMARY")
    for r in requests:
        agent = r.agent_type or "main"
        short = (r.extra or {}).get("cli_short_id")
        session = f"bg {short}" if short else r.session_id[:16]
        print(f"{r.id:18} {r.age_s:5.0f}s {r.deadline_s:5.0f}s {session:16} {agent[:20]:20} {r.summary}")
    if keyboard:
        print(f"\n{len(keyboard)} at a keyboard (answered there, or here once it reaches the channel):")
        print(f"{'SESSION':16} {'AGENT':20} {'IN':>6}  SUMMARY")
        for d in keyboard:
            print(d.line())
    return 0


def _fleet(as_json: bool) -> int:
    """``pending --fleet``: the requests waiting on every live machine of the fleet, as each
    owner published them (``pending --json``'s fields, plus ``machine``, ``call_sha256``,
    ``user``, ``uid``, ``created``, ``deadline``)."""
    from claudeguard.commands import fleet_cli  # noqa: PLC0415 - the fleet's imports only for --fleet

    fleet = fleet_cli.settings()
    views = fleet_cli.listed_by_service(fleet)
    if views is None:
        with fleet_cli.client(fleet) as client:
            views = client.requests()
    if as_json:
        print(json.dumps(views, indent=2))
        return 0
    if not views:
        print("no pending requests in the fleet")
        return 0
    print(f"{'ID':18} {'MACHINE':16} {'AGE':>6} {'LEFT':>6} {'AGENT':20} SUMMARY")
    for v in views:
        agent = v.get("agent_type") or "main"
        short = v.get("cli_short_id")
        if short:
            agent = f"bg {short} {agent}"
        print(f"{v['id']:18} {v['machine'][:16]:16} {v.get('age_s', 0):5.0f}s {v.get('deadline_s', 0):5.0f}s "
              f"{agent[:20]:20} {v.get('summary', '')}")
    return 0
