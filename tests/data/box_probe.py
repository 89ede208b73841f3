"""Run inside a guarded session's Bash call (tests/test_sandbox_real.py): try each thing the box
must refuse, and each piece of ordinary work it must let through; print one JSON line per check.

    python3 box_probe.py TARGETS.json CHECK...

TARGETS.json (written by the test once the session runs; waited for here, at most 60 s) names
the paths, pids and ports. A check prints {"check": name, "ok": bool, "detail": str}: ok means
the call COULD do it. Stdlib only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request


def _read(path: str) -> str:
    with open(path, "rb") as fh:
        return fh.read(300).decode(errors="replace")


def _list(path: str) -> str:
    return ",".join(sorted(os.listdir(path)))


def _write(path: str) -> str:
    with open(path, "a") as fh:
        fh.write("# written from inside the box\n")
    return "written"


def _sh(cmd: str) -> str:
    proc = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise OSError(f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-200:]}")
    return proc.stdout.strip()[-200:]


def _unix(path: str) -> str:
    here = os.getcwd()
    os.chdir(os.path.dirname(path))  # a test's socket path may pass sun_path's 108 bytes
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(os.path.basename(path))
            return s.recv(100).decode(errors="replace")
    finally:
        os.chdir(here)


def _kill(pid: int) -> str:
    os.kill(pid, signal.SIGTERM)
    return "signalled"


def _http(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/box-probe", timeout=10) as resp:
        return resp.read(100).decode()


def _pid1() -> str:
    """The name of what runs as pid 1 where this runs: bwrap in a box of the call's own,
    box-enter in the session's box, the machine's init outside."""
    return _read("/proc/1/comm").strip()


def _pid1_argv0() -> str:
    """The program pid 1 was started as: the session box's entry through the box script, the
    CLI's shell (named as the real shell) where that shell entered the box itself."""
    return os.path.basename(_read("/proc/1/cmdline").split("\0")[0])


def checks(t: dict) -> dict:
    return {
        "pid1": _pid1,
        "pid1_argv0": _pid1_argv0,
        "cwd": os.getcwd,
        "read_runtime": lambda: _list(t["runtime"]),
        "read_session_file": lambda: _read(t["session_file"]),
        "cat_runtime": lambda: _sh(f"cat {t['service_record']}"),
        "read_config": lambda: _read(t["config"]),
        "cat_config": lambda: _sh(f"cat {t['config']}"),
        "read_log": lambda: _list(t["log"]),
        "cli_environ": lambda: _read(f"/proc/{t['cli_pid']}/environ"),
        "cat_cli_environ": lambda: _sh(f"cat /proc/{t['cli_pid']}/environ"),
        "control_socket": lambda: _unix(t["control_socket"]),
        "visible_socket": lambda: _unix(t["visible_socket"]),
        "kill_service": lambda: _kill(t["service_pid"]),
        "sh_kill_service": lambda: _sh(f"kill {t['service_pid']}"),
        "write_config": lambda: _write(t["config"]),
        "sh_write_config": lambda: _sh(f"echo evil >> {t['config']}"),
        "write_settings_local": lambda: _write(os.path.join(t["project"], ".claude", "settings.local.json")),
        "sh_write_settings_local": lambda: _sh("echo '{}' > .claude/settings.local.json"),
        "write_git_hook": lambda: _write(os.path.join(t["project"], ".git", "hooks", "pre-commit")),
        "write_outside": lambda: _write(t["outside_file"]),
        "http_loopback": lambda: _http(t["http_port"]),
        "write_project": lambda: _write(os.path.join(t["project"], "made-in-box.txt")),
        "run_tests": lambda: _sh("sh run_tests.sh"),
        "git_commit": lambda: _sh("git add made-in-box.txt && git -c user.name=box -c user.email=box@example.com "
                                  "commit -q -m 'from the box' && git log --oneline -1"),
        "git_checkout": lambda: _sh("git checkout -q other && git branch --show-current"),
    }


def main() -> int:
    path = sys.argv[1]
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            print(json.dumps({"check": "targets", "ok": False, "detail": "no targets file"}))
            return 1
        time.sleep(0.1)
    time.sleep(0.2)
    with open(path) as fh:
        targets = json.load(fh)
    table = checks(targets)
    for name in sys.argv[2:]:
        try:
            out = table[name]()
            row = {"check": name, "ok": True, "detail": str(out)[:200]}
        except Exception as exc:  # noqa: BLE001 - the failure is the answer
            row = {"check": name, "ok": False, "detail": f"{type(exc).__name__}: {exc}"[:200]}
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
