"""Probe what a Bash tool call of the real CLI can reach, under given sandbox settings (issue 24).

    python bench/sandbox_probe.py --version 2.1.330 --settings '{"sandbox": {...}}' [--checks a,b]
                                  [--project '{...}'] [--local '{...}'] [--user '{...}']
                                  [--input-extra '{"dangerouslyDisableSandbox": true}'] [--env K=V]

Offline against the scripted model server, in a throwaway lab: an isolated HOME, a project dir
(`work`, with `.git`), a "runtime dir" holding a 0700 dir with a token file (what the guard must
hide), a config file under the HOME, a dir outside the project, a host TCP server on 127.0.0.1, a
listening Unix socket in a readable dir, and another process of the user's (`sleep`) with a
secret in its environment. The model makes one Bash call running `bench/sandbox_inner.py` (copied
into the project) with the chosen checks; its JSON lines come back as the tool result. A
PreToolUse command hook logs what the CLI passes to hooks. Prints one JSON object: the per-check
results, the hook log, what the host servers saw, the exit code, and stderr's tail.

`--settings` is written to a 0600 file and passed as `--settings FILE`; `permissions.allow`
gets `Bash` unless the settings give their own `permissions`. Also a library: `Lab`, `probe()`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from claudeguard.testing.cli_install import cli_path
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.offline_home import offline_env, prepare_home

KEY = "sk-ant-probe-0123456789abcdefghijklmnopqrstuv"
SECRET = "s3cr3t-hook-token-4242"
INNER = Path(__file__).with_name("sandbox_inner.py")
ALL_CHECKS = ("ns", "env", "read_secret_file", "cat_secret_file", "ls_secret_dir", "read_config",
              "write_secret_dir", "write_outside", "write_cwd", "write_tmp", "write_denied", "cli_environ",
              "other_environ", "kill0_cli", "kill0_other", "ptrace_cli", "mem_cli", "tcp_connect_host",
              "tcp_bind_host_port", "unix_socket", "unix_connect")


class _Listeners:
    """A host TCP server and a Unix socket server that record who connected."""

    def __init__(self, unix_path: Path) -> None:
        self.seen: list[str] = []
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen()
        self.port = self.tcp.getsockname()[1]
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(str(unix_path))
        self.unix.listen()
        for sock, name in ((self.tcp, "tcp"), (self.unix, "unix")):
            threading.Thread(target=self._serve, args=(sock, name), daemon=True).start()

    def _serve(self, sock: socket.socket, name: str) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            self.seen.append(name)
            try:
                conn.sendall(f"HOST-{name.upper()}-SERVER\n".encode())
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self.tcp.close()
        self.unix.close()


class Lab:
    """The throwaway world one probe runs in; a context manager that stops what it started."""

    def __init__(self, version: str) -> None:
        found = cli_path(version)
        if found is None:
            raise SystemExit(f"CLI {version} not installed: python -m claudeguard.testing.cli_install {version}")
        self.claude = str(found)
        self.version = version
        self.root = Path(tempfile.mkdtemp(prefix="sbx-probe-"))
        self.home, self.work = self.root / "home", self.root / "work"
        self.work.mkdir()
        (self.work / ".git").mkdir()
        (self.work / "protected").mkdir()
        prepare_home(self.home, cwd=self.work, api_key=KEY)
        self.runtime = self.root / "runtime"
        self.secret_dir = self.runtime / "guard"
        self.secret_dir.mkdir(parents=True)
        self.secret_dir.chmod(0o700)
        (self.secret_dir / "token").write_text(SECRET + "\n")
        self.config = self.home / ".config" / "claudeguard" / "config.toml"
        self.config.parent.mkdir(parents=True)
        self.config.write_text('# user config\n[permissions]\nallow = ["Bash(*)"]\n')
        self.outside = self.root / "outside"
        self.outside.mkdir()
        (self.root / "sockdir").mkdir()
        self.listeners = _Listeners(self.root / "sockdir" / "guard.sock")
        self.other = subprocess.Popen(["sleep", "600"], env={"PATH": os.environ["PATH"],
                                                             "CLAUDEGUARD_HOOK_TOKEN": SECRET})
        shutil.copy(INNER, self.work / "sandbox_inner.py")
        self.hook_log = self.root / "hook.log"

    def __enter__(self) -> "Lab":
        return self

    def __exit__(self, *exc: object) -> None:
        self.other.kill()
        self.other.wait()
        self.listeners.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def targets(self, cli_pid: int, env_names: list[str]) -> dict[str, Any]:
        return {"secret_file": str(self.secret_dir / "token"), "secret_dir": str(self.secret_dir),
                "config_file": str(self.config), "outside_dir": str(self.outside),
                "tmp_dir": str(self.home / "tmp"), "deny_write_dir": str(self.work / "protected"),
                "cli_pid": cli_pid, "other_pid": self.other.pid, "secret": SECRET,
                "host_port": self.listeners.port, "unix_socket": str(self.root / "sockdir" / "guard.sock"),
                "env_names": env_names}

    def subst(self, text: str) -> str:
        """Replace @ROOT@, @WORK@, @HOME@, @RUNTIME@, @SECRETDIR@, @OUTSIDE@, @PORT@ in settings text."""
        for key, value in (("@ROOT@", self.root), ("@WORK@", self.work), ("@HOME@", self.home),
                           ("@RUNTIME@", self.runtime), ("@SECRETDIR@", self.secret_dir),
                           ("@OUTSIDE@", self.outside), ("@PORT@", self.listeners.port)):
            text = text.replace(key, str(value))
        return text


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    path.chmod(0o600)


def probe(lab: Lab, settings: dict[str, Any] | None, checks: list[str], *, project: dict[str, Any] | None = None,
          local: dict[str, Any] | None = None, user: dict[str, Any] | None = None,
          input_extra: dict[str, Any] | None = None, env_extra: dict[str, str] | None = None,
          env_names: list[str] | None = None, hook: bool = True, command: str | None = None,
          extra_args: list[str] | None = None, timeout: float = 90,
          debug_copy: str | None = None, hook_reply: dict[str, Any] | None = None,
          wrap: list[str] | None = None, chown: int | None = None) -> dict[str, Any]:
    """Run one scripted session whose single Bash call runs the checks; return what happened."""
    settings = dict(settings or {})
    settings.setdefault("permissions", {"allow": ["Bash"]})
    if hook:
        log = lab.hook_log
        reply = f"; echo {shlex.quote(json.dumps(hook_reply))}" if hook_reply else ""
        settings.setdefault("hooks", {})["PreToolUse"] = [{"matcher": "*", "hooks": [
            {"type": "command", "command": f"cat >> {log}; echo >> {log}{reply}"}]}]
    settings_file = lab.root / "settings.json"
    _write_json(settings_file, settings)
    for data, path in ((project, lab.work / ".claude" / "settings.json"),
                       (local, lab.work / ".claude" / "settings.local.json"),
                       (user, lab.home / ".claude" / "settings.json")):
        if data is not None:
            _write_json(path, data)
        else:
            path.unlink(missing_ok=True)
    lab.hook_log.unlink(missing_ok=True)
    cmd = command or f"python3 sandbox_inner.py targets.json {' '.join(checks)}"
    tool_input: dict[str, Any] = {"command": cmd, **(input_extra or {})}
    scenario = [{"match": "probe the sandbox", "turns": [{"tool_use": {"name": "Bash", "input": tool_input}},
                                                          {"text": "probe done"}]}]
    debug = lab.root / "debug.log"
    debug.unlink(missing_ok=True)
    with ModelServer(scenario) as server:
        env = offline_env(lab.home, server.url, KEY)
        env["CLAUDEGUARD_HOOK_TOKEN"] = SECRET  # as the guard's launcher passes it today
        env.update(env_extra or {})
        if chown is not None:  # the CLI runs as another user (see --wrap): give it the lab
            for dirpath, _dirs, files in os.walk(lab.root):
                for name in [dirpath, *(os.path.join(dirpath, f) for f in files)]:
                    os.lchown(name, chown, chown)
        argv = [*(wrap or []), lab.claude, "--settings", str(settings_file), f"--debug-file={debug}",
                *(extra_args or []), "-p", "probe the sandbox", "--output-format", "stream-json", "--verbose"]
        start = time.monotonic()
        proc = subprocess.Popen(argv, env=env, cwd=lab.work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        _write_json(lab.work / "targets.json", lab.targets(proc.pid, env_names or ["CLAUDEGUARD_HOOK_TOKEN"]))
        if chown is not None:
            os.chown(lab.work / "targets.json", chown, chown)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, err = proc.communicate()
        try:
            os.killpg(proc.pid, 9)  # stragglers in its group
        except ProcessLookupError:
            pass
        elapsed = time.monotonic() - start
        results = server.tool_results()
    found: dict[str, Any] = {}
    raw = [r["content"] for r in results]
    for content in raw:
        for line in content.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and "check" in row:
                found[row["check"]] = "YES " + row["detail"] if row["ok"] else "no  " + row["detail"]
    hooks = []
    if lab.hook_log.exists():
        for line in lab.hook_log.read_text().splitlines():
            if line.strip():
                event = json.loads(line)
                hooks.append({"tool_input": event.get("tool_input"), "permission_mode": event.get("permission_mode")})
    if debug_copy and debug.exists():
        shutil.copy(debug, debug_copy)
        Path(debug_copy + ".stderr").write_text(err)
    pr_log = lab.root / "pr.log"  # a PermissionRequest hook a caller's settings may add (@ROOT@/pr.log)
    pr_lines = pr_log.read_text().splitlines() if pr_log.exists() else []
    permission_requests = [json.loads(ln).get("tool_input") for ln in pr_lines if ln.strip()]
    pr_log.unlink(missing_ok=True)
    result_line = next((json.loads(line) for line in out.splitlines() if '"type":"result"' in line), {})
    return {"version": lab.version, "exit": proc.returncode, "elapsed_s": round(elapsed, 2), "checks": found,
            "tool_results": raw, "hooks": hooks, "permission_requests": permission_requests,
            "host_servers_saw": list(lab.listeners.seen),
            "denials": result_line.get("permission_denials"), "stderr": err[-600:],
            "debug_sandbox": [ln for ln in debug.read_text().splitlines() if "andbox" in ln][-25:]
            if debug.exists() else []}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", default="2.1.330")
    parser.add_argument("--settings", default="{}")
    parser.add_argument("--project")
    parser.add_argument("--local")
    parser.add_argument("--user")
    parser.add_argument("--input-extra")
    parser.add_argument("--checks", default=",".join(ALL_CHECKS))
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--env-names", default="CLAUDEGUARD_HOOK_TOKEN")
    parser.add_argument("--command")
    parser.add_argument("--no-hook", action="store_true")
    parser.add_argument("--arg", action="append", default=[], help="an extra CLI argument (repeatable)")
    parser.add_argument("--debug-copy", help="keep the CLI's --debug-file here")
    parser.add_argument("--claude", help="this CLI binary instead of the cached one of --version")
    parser.add_argument("--chown", type=int, help="give the lab to this uid (for a --wrap that runs the CLI as it)")
    parser.add_argument("--wrap", help="a command line (shell words) to start the CLI under")
    parser.add_argument("--hook-reply", help="JSON the PreToolUse hook prints (default: nothing)")
    args = parser.parse_args()
    with Lab(args.version) as lab:
        if args.claude:
            lab.claude = args.claude
        def load(text: str | None) -> Any:
            return None if text is None else json.loads(lab.subst(text))
        env_extra = dict(kv.split("=", 1) for kv in args.env)
        out = probe(lab, load(args.settings), args.checks.split(","), project=load(args.project),
                    local=load(args.local), user=load(args.user), input_extra=load(args.input_extra),
                    env_extra={k: lab.subst(v) for k, v in env_extra.items()}, env_names=args.env_names.split(","),
                    hook=not args.no_hook, command=lab.subst(args.command) if args.command else None,
                    debug_copy=args.debug_copy, hook_reply=load(args.hook_reply),
                    wrap=shlex.split(args.wrap) if args.wrap else None, chown=args.chown,
                    extra_args=args.arg)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
