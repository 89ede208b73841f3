"""What a Bash tool call can reach: run inside the call (by `bench/sandbox_probe.py`), prints JSON.

    python3 sandbox_inner.py TARGETS.json [CHECK ...]

TARGETS.json names what the guard must keep out of reach (written by the harness): a secret dir
and file, a dir outside the project, the CLI's pid, another process of the user's with a secret
in its environment, a host loopback port that a server listens on, a Unix socket file. Each check
prints `{"check": name, "ok": bool, "detail": str}`: `ok` means the call COULD do it. Stdlib only:
it runs under whatever python3 the sandbox shows.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
from typing import Any, Callable


def _try(fn: Callable[[], object]) -> tuple[bool, str]:
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001 - any failure is the answer we report
        return False, f"{type(exc).__name__}: {exc}"[:200]
    return True, str(out)[:200]


def _read(path: str) -> str:
    with open(path, "rb") as fh:
        return fh.read(200).decode(errors="replace")


def _write(path: str) -> str:
    with open(path, "w") as fh:
        fh.write("probe\n")
    return "written"


def _sh(cmd: str) -> str:
    proc = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=10)
    if proc.returncode != 0:
        raise OSError(f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:150]}")
    return proc.stdout.strip()


def _connect_tcp(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(b"GET /probe HTTP/1.0\r\n\r\n")
        return s.recv(100).decode(errors="replace")


def _bind_tcp(port: int) -> str:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    s.close()
    return f"bound {port}"


def _unix_socket() -> str:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    return "created"


def _unix_connect(path: str) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        s.connect(path)
        return s.recv(100).decode(errors="replace")


def _ptrace(pid: int) -> str:
    # PTRACE_SEIZE makes the same access check as PTRACE_ATTACH but does not stop the tracee;
    # the kernel detaches it when this process exits.
    libc = ctypes.CDLL(None, use_errno=True)
    ptrace_seize = 0x4206
    if libc.ptrace(ptrace_seize, pid, None, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return "seized"


def _mem(pid: int) -> str:
    maps = _read(f"/proc/{pid}/maps").splitlines()[0]
    start = int(maps.split("-")[0], 16)
    with open(f"/proc/{pid}/mem", "rb") as fh:
        fh.seek(start)
        return f"read {len(fh.read(16))} bytes at {start:#x}"


def _environ_has(pid: int, needle: str) -> str:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        data = fh.read()
    return f"{len(data)} bytes, secret {'PRESENT' if needle.encode() in data else 'absent'}"


def _env_vars(names: list[str]) -> str:
    return json.dumps({n: os.environ.get(n) for n in names})


def _ns() -> str:
    with open("/proc/self/status") as fh:
        status = fh.read()
    nspid = [line for line in status.splitlines() if line.startswith("NSpid")]
    pid1 = _read("/proc/1/cmdline").replace("\0", " ")[:60]
    return f"{nspid[0] if nspid else ''} pid1={pid1!r} uid={os.getuid()}"


def checks(t: dict[str, Any]) -> dict[str, Callable[[], object]]:
    return {
        "ns": _ns,
        "env": lambda: _env_vars(t.get("env_names", [])),
        "read_secret_file": lambda: _read(t["secret_file"]),
        "cat_secret_file": lambda: _sh(f"cat {t['secret_file']}"),
        "ls_secret_dir": lambda: _sh(f"ls -la {t['secret_dir']}"),
        "read_config": lambda: _read(t["config_file"]),
        "write_secret_dir": lambda: _write(os.path.join(t["secret_dir"], "planted")),
        "write_outside": lambda: _write(os.path.join(t["outside_dir"], "planted")),
        "write_cwd": lambda: _write("planted-in-cwd"),
        "write_tmp": lambda: _write(os.path.join(t["tmp_dir"], "planted")),
        "write_denied": lambda: _write(os.path.join(t["deny_write_dir"], "planted")),
        "cli_environ": lambda: _environ_has(t["cli_pid"], t["secret"]),
        "other_environ": lambda: _environ_has(t["other_pid"], t["secret"]),
        "kill0_cli": lambda: os.kill(t["cli_pid"], 0) or "signal delivered",
        "kill0_other": lambda: os.kill(t["other_pid"], 0) or "signal delivered",
        "kill_other": lambda: os.kill(t["other_pid"], signal.SIGTERM) or "SIGTERM delivered",
        "ptrace_cli": lambda: _ptrace(t["cli_pid"]),
        "mem_cli": lambda: _mem(t["cli_pid"]),
        "tcp_connect_host": lambda: _connect_tcp(t["host_port"]),
        "tcp_bind_host_port": lambda: _bind_tcp(t["host_port"]),
        "unix_socket": _unix_socket,
        "unix_connect": lambda: _unix_connect(t["unix_socket"]),
    }


def main() -> int:
    with open(sys.argv[1]) as fh:
        targets = json.load(fh)
    table = checks(targets)
    for name in sys.argv[2:] or list(table):
        ok, detail = _try(table[name])
        print(json.dumps({"check": name, "ok": ok, "detail": detail}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
