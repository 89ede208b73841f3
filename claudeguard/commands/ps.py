"""``claudeguardctl ps [--json] [--all]``: guarded sessions (and with --all, unguarded Claude
processes) with state, CPU, tokens, last activity and pending requests."""

from __future__ import annotations

import argparse


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="claudeguardctl ps")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--all", action="store_true", help="also Claude processes not started through claudeguard")
    parser.add_argument("--screen", action="store_true", help="show the last screen lines of pty sessions")
    args = parser.parse_args(argv[1:])
    from claudeguard.watchdog.status import list_sessions

    sessions = list_sessions(include_unguarded=args.all)
    if args.json:
        import json

        print(json.dumps(sessions, indent=2))
        return 0
    if not sessions:
        print("no guarded sessions")
        return 0
    print(f"{'PID':>7} {'CHILD':>7} {'STATE':18} {'CPU':>7} {'TOKENS':>8} {'IDLE':>6} {'PEND':>4}  CWD / PROMPT")
    for s in sessions:
        guarded = "" if s.get("guarded", True) else " (unguarded)"
        if s.get("background"):
            guarded = f" (unguarded, background {s.get('short_id') or '?'})"
        flag = " SUSPECT-HUNG" if s.get("suspect_hung") else ""
        cpu = s.get("cpu_s")
        idle = s.get("last_activity_s")
        print(
            f"{s.get('pid', 0):>7} {s.get('child_pid') or '-':>7} {str(s.get('state', '?'))[:18]:18} "
            f"{(f'{cpu:.1f}s' if isinstance(cpu, (int, float)) else '-'):>7} {s.get('tokens') or 0:>8} "
            f"{(f'{idle:.0f}s' if isinstance(idle, (int, float)) else '-'):>6} {s.get('pending') or 0:>4}  "
            f"{s.get('cwd') or '-'}  {(s.get('prompt') or '')[:40]}{guarded}{flag}"
        )
        if args.screen and s.get("screen_tail"):
            for line in s["screen_tail"][-5:]:
                print(f"{'':>9}| {line}")
    return 0
