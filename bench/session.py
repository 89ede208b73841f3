"""What a guarded `claude -p` run costs end to end, and where it goes, against the real CLI.

    python bench/session.py [--runs 10] [--version 2.1.330]

One interleaved run per round, offline against the scripted model server (a text-only turn, and a
turn with one allowed Bash call), in a throwaway HOME:

- `claude`: the real CLI alone;
- `+hooks`: the real CLI with only the guard's `--settings` in the command-hook form;
- `+mcp`: the real CLI with only the guard's `--mcp-config` and `--permission-prompt-tool` (none
  on 2.1.330, whose `-p` asks through the PermissionRequest hook: then the same as `claude`);
- `guard`: `claudeguard -p` (all of it: our own start, session dir, registration with the
  resident service, whose HTTP hooks answer, the watchdog); the service is warm (started by the
  warm-up round), as it is for every launch but a user's first;
- `guard-command-hooks`: the same with `CLAUDEGUARD_SERVICE=0` (command hooks, the launcher's
  own gate server): the design before the service;
- `guard-own`: `claudeguard -p` in front of `/bin/true`: our own start and teardown alone;
- `guard_until_the_cli_starts`: from starting `claudeguard -p` to its child's first instruction.

Prints one JSON object of medians in ms.
"""

from __future__ import annotations

import argparse
import itertools
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from claudeguard.testing.cli_install import cli_path, install_cli
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.offline_home import offline_env, prepare_home

KEY = "sk-ant-bench-0123456789abcdefghijklmnopqrstuv"
SCENARIO = [
    {"match": "say hello", "turns": [{"text": "hello"}]},
    {"match": "run a tool",
     "turns": [{"tool_use": {"name": "Bash", "input": {"command": "echo tool-ran"}}}, {"text": "done"}]},
    # issue 11's session: ten allowed Bash calls, one a turn
    {"match": "run ten tools",
     "turns": [*({"tool_use": {"name": "Bash", "input": {"command": f"echo call-{i}"}}} for i in range(10)),
               {"text": "all ten done"}]},
]


def _run(argv: list[str], env: dict[str, str], cwd: Path, expect: str | None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    if expect is not None and expect not in proc.stdout:
        raise SystemExit(f"{argv[0]}: expected {expect!r} in the output, got {proc.stdout!r} {proc.stderr[-300:]!r}")
    return elapsed


def _until_child(guard: str, env: dict[str, str], cwd: Path, tmp: Path, runs: int) -> float:
    """Median ms from starting `claudeguard -p` to the moment its child starts: the part of our
    own start-up that delays the CLI (what comes after overlaps with the CLI's own start)."""
    stamp = tmp / "stamp"
    stamp.write_text("#!/bin/sh\nexec date +%s.%N\n")
    stamp.chmod(0o755)
    delays = []
    for _ in range(runs):
        start = time.time()
        proc = subprocess.run([guard, "-p", "x"], env=dict(env, CLAUDEGUARD_CLAUDE=str(stamp)), cwd=cwd,
                              capture_output=True, text=True, timeout=60, check=True)
        delays.append(float(proc.stdout.strip()) - start)
    return round(statistics.median(delays) * 1000, 1)


class StandInHook(BaseHTTPRequestHandler):
    """A hook server's stand-in that answers ``{}`` at once (TCP_NODELAY, one send): the floor of
    any guard that decides in PreToolUse (bench/per_call.py, bench/stages.py). ``arrivals``: when
    each post came (time.time()), for a caller that clears it between runs."""

    protocol_version = "HTTP/1.1"
    arrivals: list[float] = []

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:  # `format`: the base class's name
        pass

    def do_POST(self) -> None:  # http.server's naming
        StandInHook.arrivals.append(time.time())
        self.rfile.read(int(self.headers["Content-Length"]))
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")


def call_gap(requests: list[dict[str, object]], prompt: str) -> float:
    """The median time, ms, between the model's answer asking for a call and the CLI's next request
    in the session of ``prompt`` (``ModelServer.requests()``): one call as the CLI handles it, hook,
    checks and command, without the session's start and end (which move a whole run's time by
    ±100 ms on a 2-core machine). bench/per_call.py and bench/box_cost.py report it as ``gap_ms``."""
    times = [float(str(r["time"])) for r in requests if r.get("script") == prompt]
    return statistics.median(b - a for a, b in itertools.pairwise(times)) * 1000


def scripted_home(tmp: str, server_url: str, user_settings: bool = False) -> tuple[Path, dict[str, str]]:
    """The work dir (a fresh repository) and the environment of an isolated HOME against the
    scripted model server, with a user config that allows the scenario's Bash call.
    ``user_settings``: the HOME has a Claude user settings file (`{}`), as most users' has. 2.1.197
    spends ~220-260 ms more of its start (to its first request) when any settings source exists,
    whoever gives it (a user file or the guard's --settings; bench/cli_settings_cost.py): without
    one, that cost counts as the guard's."""
    home, cwd = Path(tmp, "home"), Path(tmp, "work")
    cwd.mkdir()
    (cwd / ".git").mkdir()
    prepare_home(home, cwd=cwd, api_key=KEY)
    env = offline_env(home, server_url, KEY)
    config = Path(env["XDG_CONFIG_HOME"], "claudeguard", "config.toml")
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[permissions]\nallow = ["Bash(echo *)"]\n')
    if user_settings:
        (home / ".claude").mkdir(exist_ok=True)
        (home / ".claude" / "settings.json").write_text("{}")
    return cwd, env


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--version", default="2.1.330")
    args = parser.parse_args()
    real = str(cli_path(args.version) or install_cli(args.version))
    guard = str(Path(sys.executable).with_name("claudeguard"))
    out: dict[str, object] = {"version": args.version, "runs": args.runs}
    with tempfile.TemporaryDirectory() as tmp, ModelServer(SCENARIO) as server:
        cwd, env = scripted_home(tmp, server.url)
        env["CLAUDEGUARD_CLAUDE"] = real
        # The command-hook form: the HTTP form's URL needs a live service and a registered session.
        plan = json.loads(subprocess.run([guard, "--guard-dry-run", "-p", "x"],
                                         env=dict(env, CLAUDEGUARD_SERVICE="0"), cwd=cwd,
                                         capture_output=True, text=True, check=True).stdout)["argv"]
        settings = [a for a in plan if a.startswith("--settings=")]
        mcp = [a for a in plan if a.startswith(("--mcp-config=", "--permission-prompt-tool="))]
        allow = ["--allowedTools=Bash(echo *)"]
        for prompt, expect in (("say hello", "hello"), ("run a tool", "done"), ("run ten tools", "all ten done")):
            cases = {
                "claude": ([real, *allow, "-p", prompt], env),
                "+hooks": ([real, *allow, *settings, "-p", prompt], env),
                "guard": ([guard, "-p", prompt], env),
                "guard-command-hooks": ([guard, "-p", prompt], dict(env, CLAUDEGUARD_SERVICE="0")),
                "guard-own": ([guard, "-p", prompt], dict(env, CLAUDEGUARD_CLAUDE="/bin/true")),
            }
            if mcp:  # 2.1.330 -p asks through a hook: no prompt tool is injected (docs/design.md, "Who asks in -p")
                cases["+mcp"] = ([real, *allow, *mcp, "-p", prompt], env)
            times: dict[str, list[float]] = {name: [] for name in cases}
            for name, (argv, case_env) in cases.items():  # warm-up
                _run(argv, case_env, cwd, None if name == "guard-own" else expect)
            for _ in range(args.runs):
                for name, (argv, case_env) in cases.items():
                    times[name].append(_run(argv, case_env, cwd, None if name == "guard-own" else expect))
            out[prompt] = {name: round(statistics.median(v) * 1000) for name, v in times.items()}
        out["guard_until_the_cli_starts"] = _until_child(guard, env, cwd, Path(tmp), args.runs * 2)
        from claudeguard.testing.services import stop_services

        stop_services(Path(tmp))  # the resident service the guarded runs started, by pid
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
