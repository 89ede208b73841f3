"""``claudeguard --bg PROMPT`` (2.1.330): a session that Claude Code's daemon runs on after this
command returns, guarded for its whole life by the resident service.

The launcher registers the session with the service as ``background`` (kept after the launcher
exits), writes the guard's settings with the session's secret into a 0600 file in the session
dir (the session gets the daemon's environment, not ours, so neither an env variable nor argv
may carry it), runs ``claude --bg``, reads the CLI's short id from its ``backgrounded · <id>``
line, and hands the session to the service (``attach``), which watches it and forgets it when
it ends (``service/background.py``). No service, no guard: the launch is refused before
anything runs, never started half-guarded.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from claudeguard.errors import UsageError
from claudeguard.files import remove_tree, write_atomic
from claudeguard.paths import log_dir_text, runtime_dir
from claudeguard.plan.argv import build_plan, child_environ
from claudeguard.plan.hooks import HttpHooks
from claudeguard.plan.report import audit_mark
from claudeguard.plan.session import session_snapshot
from claudeguard.service.client import Registration, ServiceError, request
from claudeguard.switches import service_on

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from claudeguard.config.load import Config
    from claudeguard.plan.claude_args import ClaudeArgs
    from claudeguard.plan.report import EndOptions
    from claudeguard.service.protocol import WatchSettings

SHORT_ID = re.compile(r"backgrounded\s+·\s+(\S+)")


def config_dir(env: dict[str, str]) -> str:
    """Where the CLI keeps its session records (``CLAUDE_CONFIG_DIR``, else ``~/.claude``)."""
    return env.get("CLAUDE_CONFIG_DIR") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".claude")


def watch_settings(cfg: Config) -> WatchSettings:
    """The watchdog settings the service's keeper applies to a background session."""
    return {**cfg.watchdog(), "interactive": True,
            # the session draws on a pty nobody reads: its writes are no progress
            "writes_are_screen": True}


def run_background(real: str, args: ClaudeArgs, cfg: Config, cwd: Path, session_id: str,
                   end: EndOptions | None = None) -> int:
    if not service_on():
        raise UsageError("--bg needs the guard service (CLAUDEGUARD_SERVICE=0): the session would outlive every "
                         "guard; refused")
    session_dir = runtime_dir("sessions", session_id)
    token = os.urandom(24).hex()
    registration: Registration | None = None
    launched = False
    try:
        snapshot = session_snapshot(cfg, args, session_id=session_id, cwd=str(cwd), interactive=False)
        snapshot.update({"hooks": "http", "log_dir": log_dir_text(), "kind": "background"})
        write_atomic(session_dir / "session.json", json.dumps(snapshot))
        record: dict[str, Any] = {"token": token, "config_dir": config_dir(dict(os.environ)),
                                  "watch": watch_settings(cfg),
                  "prompt": args.prompt}
        if end is not None and end.report:
            # The report covers the background session: the service writes it when it ends.

            record["report"] = {"path": end.report, "fail_on": sorted(end.fail_on), "started": time.time(),
                                "mark": audit_mark(), "real_cli": real}
        write_atomic(session_dir / "background.json", json.dumps(record))
        registration = Registration(session_id, str(session_dir), token, kind="background")
        try:
            port = registration.open()
        except (ServiceError, OSError, ValueError) as exc:
            raise UsageError(f"--bg needs the guard service, which cannot be had ({exc}); refused") from None
        plan = build_plan(real, args, cfg, session_id=session_id, session_dir=str(session_dir), cwd=str(cwd),
                          http=HttpHooks(port, token, literal=True), settings_file=str(session_dir / "settings.json"))
        record["port"] = port  # a successor service keeps the session only if this port was handed back
        # The daemon this may start keeps our environment for every later session it runs:
        # nothing of this session goes into it (the secret is in the settings file).
        env = {k: v for k, v in child_environ(os.environ, {}, cfg).items() if not k.startswith("CLAUDEGUARD_SESSION")}
        # Not procs.capture: the launch's stderr stays on the user's terminal; its stdout is passed on
        # (and the short id read off it).
        proc = subprocess.run(plan.argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        sys.stdout.buffer.write(proc.stdout)
        sys.stdout.flush()
        match = SHORT_ID.search(proc.stdout.decode(errors="replace"))
        if proc.returncode != 0 or match is None:
            if proc.returncode == 0:
                print("claudeguard: claude --bg printed no session id; the session is not guarded", file=sys.stderr)
                return 1
            return proc.returncode
        record["short_id"] = match.group(1)
        write_atomic(session_dir / "background.json", json.dumps(record))
        reply = registration.request({"op": "attach", "session_id": session_id})
        if not reply.get("ok"):
            print(f"claudeguard: the guard service did not take the session: {reply.get('error')}", file=sys.stderr)
            return 1
        launched = True
        return 0
    finally:
        end_launch(registration, session_id, session_dir, handed_over=launched)


def end_launch(registration: Registration | None, session_id: str, session_dir: Path, *, handed_over: bool) -> None:
    """The launcher's part ends: a session not handed over to the service is unregistered and
    its dir removed; the control connection closes either way."""
    if registration is not None:
        if not handed_over and registration.sock is not None:
            try:
                request(registration.sock, {"op": "unregister", "session_id": session_id})
            except Exception:  # noqa: BLE001 - the service may be gone; the dir goes anyway
                pass
        registration.close()
    if not handed_over:
        remove_tree(str(session_dir))
