"""What one tool call costs a guarded `claude -p` session, on a session long enough to see it.

    python bench/per_call.py [--runs 8] [--version 2.1.330] [--calls 40] [--user-settings]

Issue 11's ten-call session adds ~10 calls to a ~1 s run whose medians move by ±60 ms between
rounds on a 2-core VM: ±6 ms a call of noise, as large as the goal. This session makes ``--calls``
allowed Bash calls, one a turn, and runs interleaved:

- ``bare``: the real CLI alone (`--allowedTools=Bash(echo *)`);
- ``pre``: the same with one PreToolUse HTTP hook to a stand-in server that answers ``{}`` at once
  (with TCP_NODELAY, one send): what any guard that decides in PreToolUse costs this CLI;
- ``pre+post``: the same plus a PostToolUse HTTP hook (``async``), as the guard registered it
  before its -p runs read the call ends from the transcript;
- ``guard``: `claudeguard -p` (the service warm).

With ``--parts``, where a guarded call's cost goes (issue 34):

- ``deny``: ``bare`` plus the guard's own ``--disallowedTools`` (its protected paths, from
  ``claudeguard --guard-dry-run`` in the same project): what the CLI's check of those rules costs;
- ``pre+deny``: the stand-in hook and those rules together;
- ``guard-nobox``: `claudeguard -p` with ``[security] sandbox = "off"``: the guard without its box.

A text turn of each of ``bare`` and ``guard`` is run too, so the guard's per-call figure does not
include its start: (guard_calls - guard_text - (bare_calls - bare_text)) / calls. The stand-ins
have no start of their own to take out: (case_calls - bare_calls) / calls. Prints the median, p25
and minimum of each. ``gap_ms``: the same cost read from the model server's side, the median time
from one model request to the next (a call as the CLI handles it) over the bare CLI's: no start or
end in it, so it moves far less between rounds than a session's wall time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

from session import StandInHook, call_gap, scripted_home  # bench/session.py: HOME, the floor's hook, a gap

from claudeguard.testing.cli_install import cli_path, install_cli
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.services import stop_services


def _quantiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[len(ordered) // 4], ordered[0]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--version", default="2.1.330")
    parser.add_argument("--calls", type=int, default=40)
    # A home with a Claude user settings file, as most users have (session.scripted_home): the
    # bare CLI then has a settings source too.
    parser.add_argument("--user-settings", action="store_true")
    parser.add_argument("--parts", action="store_true", help="also deny, pre+deny and guard-nobox")
    args = parser.parse_args()
    real = str(cli_path(args.version) or install_cli(args.version))
    guard = str(Path(sys.executable).with_name("claudeguard"))
    calls = [{"tool_use": {"name": "Bash", "input": {"command": f"echo call-{i}"}}} for i in range(args.calls)]
    scenario = [{"match": "say hello", "turns": [{"text": "hello"}]},
                {"match": "run the calls", "turns": [*calls, {"text": "all done"}]}]
    stand_in = ThreadingHTTPServer(("127.0.0.1", 0), StandInHook)
    threading.Thread(target=stand_in.serve_forever, daemon=True).start()
    hook = {"type": "http", "url": f"http://127.0.0.1:{stand_in.server_port}/hook", "timeout": 30}

    def settings(**events: dict[str, object]) -> str:
        return "--settings=" + json.dumps({"hooks": {e: [{"matcher": "*", "hooks": [h]}] for e, h in events.items()}})

    allow = "--allowedTools=Bash(echo *)"
    cases = {"bare": [real, allow], "pre": [real, allow, settings(PreToolUse=hook)],
             "pre+post": [real, allow, settings(PreToolUse=hook, PostToolUse=dict(hook, **{"async": True}))],
             "guard": [guard]}
    times: dict[tuple[str, str], list[float]] = {}
    gaps: dict[str, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp, ModelServer(scenario) as server:
            cwd, env = scripted_home(tmp, server.url, args.user_settings)
            env["CLAUDEGUARD_CLAUDE"] = real
            envs = {}
            if args.parts:
                plan = json.loads(subprocess.run([guard, "--guard-dry-run", "-p", "x"], env=env, cwd=cwd,
                                                 capture_output=True, text=True, check=True).stdout)
                deny = [a for a in plan["argv"] if a.startswith("--disallowedTools=")]
                cases.update({"deny": [real, allow, *deny], "pre+deny": [real, allow, settings(PreToolUse=hook), *deny],
                              "guard-nobox": [guard]})
                nobox = Path(tmp, "nobox.toml")
                nobox.write_text('[security]\nsandbox = "off"\n[permissions]\nallow = ["Bash(echo *)"]\n')
                envs["guard-nobox"] = dict(env, CLAUDEGUARD_CONFIG=str(nobox))
            try:
                for round_ in range(args.runs + 1):  # the first round warms up (the service starts)
                    for name, argv in cases.items():
                        guarded = name in ("guard", "guard-nobox")
                        prompts = ("say hello", "run the calls") if name == "bare" or guarded else ("run the calls",)
                        for prompt in prompts:
                            seen = len(server.requests())
                            start = time.perf_counter()
                            proc = subprocess.run([*argv, "-p", prompt], env=envs.get(name, env), cwd=cwd,
                                                  capture_output=True, text=True, timeout=300)
                            elapsed = (time.perf_counter() - start) * 1000
                            if ("hello" if prompt == "say hello" else "all done") not in proc.stdout:
                                raise SystemExit(f"{name} {prompt!r}: {proc.stdout[-200:]!r} {proc.stderr[-300:]!r}")
                            if round_:
                                times.setdefault((name, prompt), []).append(elapsed)
                                if prompt == "run the calls":
                                    gaps.setdefault(name, []).append(call_gap(server.requests()[seen:], prompt))
            finally:
                stop_services(Path(tmp))  # the resident service the guarded runs started, by pid
    finally:
        stand_in.shutdown()
    out: dict[str, object] = {"version": args.version, "runs": args.runs, "calls": args.calls,
                              "user_settings": args.user_settings}
    bare_calls, bare_text = _quantiles(times[("bare", "run the calls")]), _quantiles(times[("bare", "say hello")])
    for name in cases:
        mine = _quantiles(times[(name, "run the calls")])
        extra = [m - b for m, b in zip(mine, bare_calls, strict=True)]
        if name in ("guard", "guard-nobox"):
            text = _quantiles(times[(name, "say hello")])
            extra = [e - (t - b) for e, t, b in zip(extra, text, bare_text, strict=True)]
        out[name] = {"session_ms": [round(x) for x in mine],
                     "per_call_ms": [round(e / args.calls, 1) for e in extra],  # median, p25, min
                     "gap_ms": [round(g - b, 2) for g, b in zip(_quantiles(gaps[name]), _quantiles(gaps["bare"]),
                                                                strict=True)]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
