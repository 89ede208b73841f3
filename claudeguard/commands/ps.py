"""``claudeguardctl ps [--json] [--all [--stall-after SECONDS] [--window SECONDS]] [--screen]``:
guarded sessions (and with --all, unguarded Claude processes, judged as in watchdog.unguarded)
with state, CPU, tokens, last activity and pending requests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from claudeguard.commands.cli import parser as command_parser
from claudeguard.config.load import env_overrides, load_config, parse_seconds
from claudeguard.paths import legacy_note
from claudeguard.watchdog.status import list_sessions

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import argparse


def _limits(args: argparse.Namespace) -> dict[str, float]:
    """How unguarded CLIs are judged: the watchdog's thresholds from the config (this directory's
    layers and CLAUDEGUARD_* variables), ``--stall-after`` over them."""
    watchdog = load_config(Path.cwd(), env_overrides()).watchdog()
    stall_after = watchdog["stall_after"]
    if args.stall_after is not None:
        stall_after = parse_seconds("watchdog.stall_after", args.stall_after, "--stall-after")
    window = parse_seconds("watchdog.stall_after", args.window, "--window")  # same rule: seconds > 0
    return {"stall_after": stall_after, "tool_stall_after": watchdog["tool_stall_after"], "window_s": window}


def main(argv: list[str]) -> int:
    parser = command_parser("ps")
    parser.add_argument("--json", action="store_true", help="a JSON list (fields in the README)")
    parser.add_argument("--all", action="store_true", help="also Claude processes not started through claudeguard, "
                        "flagged SUSPECT-HUNG when they look hung")
    parser.add_argument("--stall-after", metavar="SECONDS", help="with --all: how long an unguarded CLI may show no "
                        "progress before it is flagged (default: watchdog.stall_after of the config)")
    parser.add_argument("--window", metavar="SECONDS", default="1", help="with --all: how long to watch a quiet "
                        "unguarded CLI's CPU and io before flagging it (default 1)")
    parser.add_argument("--screen", action="store_true", help="show the last screen lines of pty sessions")
    parser.add_argument("--fleet", action="store_true", help="every machine of the configured fleet, with its "
                        "sessions; a machine whose heartbeat expired is shown gone")
    args = parser.parse_args(argv[1:])
    if args.fleet:
        return _fleet(args.json)

    sessions = list_sessions(include_unguarded=args.all, **(_limits(args) if args.all else {}))

    if note := legacy_note():
        print(f"claudeguardctl: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(sessions, indent=2))
        return 0
    if not sessions:
        print("no guarded sessions")
        return 0
    # as wide as the longest state shown: a state is never cut (`blocked-on-terminal`)
    width = max([len("STATE"), *(len(str(s.get("state", "?"))) for s in sessions)])
    print(f"{'PID':>7} {'CHILD':>7} {'STATE':{width}} {'CPU':>7} {'TOKENS':>8} {'IDLE':>6} {'PEND':>4}  CWD / PROMPT")
    for s in sessions:
        guarded = "" if s.get("guarded", True) else " (unguarded)"
        if s.get("background"):  # the CLI's own background session: guarded (--bg, agent view) or not (--all)
            guarded = f" ({'' if s.get('guarded', True) else 'unguarded, '}background {s.get('short_id') or '?'})"
        flag = " SUSPECT-HUNG" if s.get("suspect_hung") else ""
        cpu = s.get("cpu_s")
        idle = s.get("last_activity_s")
        print(
            f"{s.get('pid', 0):>7} {s.get('child_pid') or '-':>7} {str(s.get('state', '?')):{width}} "
            f"{(f'{cpu:.1f}s' if isinstance(cpu, (int, float)) else '-'):>7} {s.get('tokens') or 0:>8} "
            f"{(f'{idle:.0f}s' if isinstance(idle, (int, float)) else '-'):>6} {s.get('pending') or 0:>4}  "
            f"{s.get('cwd') or '-'}  {(s.get('prompt') or '')[:40]}{guarded}{flag}"
        )
        if s.get("diagnosis") and not s.get("guarded", True):
            print(f"{'':>9}! {s['diagnosis']}")
        if args.screen and s.get("screen_tail"):
            for line in s["screen_tail"][-5:]:
                print(f"{'':>9}| {line}")
    return 0


def _fleet(as_json: bool) -> int:
    """``ps --fleet``: each machine heard of in the last day, alive (its heartbeat, TTL 10 s:
    sessions with state and stall verdict, pending count) or gone since its last beat."""
    import time  # noqa: PLC0415 - only for --fleet

    from claudeguard.commands import fleet_cli  # noqa: PLC0415 - the fleet's imports only for --fleet

    with fleet_cli.client() as client:
        machines = client.ps()
    if as_json:
        print(json.dumps(machines, indent=2))
        return 0
    if not machines:
        print("no machines in the fleet")
        return 0
    now = time.time()
    print(f"{'MACHINE':20} {'STATE':22} {'PEND':>4} {'SESSIONS':>8}  SESSION STATES")
    for m in machines:
        if m["alive"]:
            state = "alive"
        else:
            state = f"gone ({now - float(m['last_seen']):.0f}s ago)"
        states = ", ".join(f"{str(s.get('session_id') or '?')[:8]} {s.get('state') or '?'}"
                           + (" STALLED" if s.get("stalled") else "") for s in m["sessions"])
        print(f"{m['machine'][:20]:20} {state:22} {m['pending']:4} {len(m['sessions']):8}  {states}")
    return 0
