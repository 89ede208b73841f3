"""Whole-process time of `claudeguardctl hook` as the CLI runs it (a new process per call, event
JSON on stdin) for a call the policy decides, against a bare `python -c pass`: served by the
session's gate server (as in every guarded session), and deciding in its own process (the
fallback when there is no server).

    python bench/hook.py [--runs 40]

Sets up what the shim would: a session directory with the policy snapshot, so the hook reads no
config files. Prints one JSON object; `-X importtime` of one run goes to bench/hook-importtime.txt
when --importtime is given.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EVENT = {"hook_event_name": "PreToolUse", "session_id": "bench", "cwd": "/tmp", "tool_name": "Bash",
         "tool_input": {"command": "git status && rm -rf build"}, "tool_use_id": "toolu_bench",
         "permission_mode": "default"}
CONFIG = ('[permissions]\nallow = ["Bash(git status)", "Bash(git diff *)", "Read"]\n'
          'deny = ["Bash(rm -rf *)", "Read(./.env)"]\nask = ["Bash(git push *)"]\n')


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--importtime", action="store_true")
    args = parser.parse_args()
    from claudeguard.plan.hooks import ctl_command

    ctl_argv = ctl_command()  # exactly what the shim registers as the hook command
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        (tmpdir / "cfg").mkdir()
        (tmpdir / "cfg" / "claudeguard").mkdir()
        (tmpdir / "cfg" / "claudeguard" / "config.toml").write_text(CONFIG)
        env = dict(os.environ, XDG_CONFIG_HOME=str(tmpdir / "cfg"), CLAUDEGUARD_RUNTIME_DIR=str(tmpdir / "rt"),
                   CLAUDEGUARD_LOG_DIR=str(tmpdir / "log"))
        env.pop("CLAUDEGUARD_CONFIG", None)
        # the session snapshot, exactly as the shim writes it
        script = (
            "import json, sys; from pathlib import Path\n"
            "from claudeguard.config.load import load_config\n"
            "from claudeguard.plan.claude_args import parse_claude_args\n"
            "from claudeguard.plan.session import session_snapshot\n"
            "from claudeguard.paths import runtime_dir\n"
            "cfg = load_config(Path('/tmp'))\n"
            "d = runtime_dir('sessions', 'bench')\n"
            "(d / 'session.json').write_text(json.dumps(session_snapshot(cfg, parse_claude_args(['-p', 'x']), "
            "session_id='bench', cwd='/tmp', interactive=False)))\n"
            "print(d)\n"
        )
        session_dir = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                     check=True).stdout.strip()
        hook_argv = [*ctl_argv, "hook", "--session-dir", session_dir]  # as the guard's settings name it
        payload = json.dumps(EVENT).encode()
        out = subprocess.run(hook_argv, input=payload, env=env, capture_output=True, check=True).stdout
        decision = json.loads(out)["hookSpecificOutput"]["permissionDecision"]

        def timed(argv: list[str], data: bytes | None) -> float:
            start = time.perf_counter()
            subprocess.run(argv, input=data, env=env, stdout=subprocess.DEVNULL, check=True)
            return time.perf_counter() - start

        from claudeguard.gate.server import GateServer

        os.environ.update(CLAUDEGUARD_RUNTIME_DIR=env["CLAUDEGUARD_RUNTIME_DIR"],
                          CLAUDEGUARD_LOG_DIR=env["CLAUDEGUARD_LOG_DIR"])
        server = GateServer(session_dir)
        served_out = b""
        bare, hook, standalone = [], [], []
        try:
            server.start()
            served_out = subprocess.run(hook_argv, input=payload, env=env, capture_output=True, check=True).stdout
            for _ in range(3):
                timed([sys.executable, "-c", "pass"], None)
                timed(hook_argv, payload)
            for _ in range(args.runs):
                bare.append(timed([sys.executable, "-c", "pass"], None))
                hook.append(timed(hook_argv, payload))
        finally:
            server.close()
        for _ in range(3):
            timed(hook_argv, payload)
        for _ in range(args.runs):
            standalone.append(timed(hook_argv, payload))
        if args.importtime:
            trace = subprocess.run([ctl_argv[0], "-X", "importtime", *hook_argv[1:]], input=payload, env=env,
                                   capture_output=True).stderr
            Path(__file__).with_name("hook-importtime.txt").write_bytes(trace)
    b, h, alone = statistics.median(bare), statistics.median(hook), statistics.median(standalone)
    assert json.loads(served_out) == json.loads(out), "the server and the standalone hook disagree"
    print(json.dumps({"runs": args.runs, "decision": decision, "python_pass_median_ms": round(b * 1000, 1),
                      "hook_median_ms": round(h * 1000, 1), "ratio": round(h / b, 2),
                      "hook_without_server_median_ms": round(alone * 1000, 1),
                      "pythondontwritebytecode": os.environ.get("PYTHONDONTWRITEBYTECODE")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
