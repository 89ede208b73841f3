"""Where the guard's hook secret can be seen, on the real CLI (issue 24, part 5).

    python bench/secret_probe.py scrub   --version V [--value 1]
    python bench/secret_probe.py header  --version V
    python bench/secret_probe.py envover --version V

`scrub`: runs a session with `CLAUDE_CODE_SUBPROCESS_ENV_SCRUB=<value>` and a set of variables
(the guard's token, provider keys, neutral names) in the CLI's environment; reports which of them
a Bash call, a PreToolUse command hook and an MCP stdio server still see, whether Bash ran under
bwrap, the permission mode the hook was told, and which files the run left in the project and the
HOME that were not there before.

`header`: an HTTP PreToolUse hook whose `Authorization` header holds the secret literally, in a
0600 `--settings` FILE (path on argv, no env var): reports whether the hook server got the header,
and every file under the HOME, the project and the temp dir that holds the secret afterwards
(transcripts, debug log, caches), and whether the CLI's `/proc/PID/cmdline` shows it.

`envover`: the guard's HTTP hook header is `Bearer $CLAUDEGUARD_HOOK_TOKEN` with `allowedEnvVars`;
the project's `.claude/settings.json` has `"env": {"CLAUDEGUARD_HOOK_TOKEN": "attacker"}`: reports
which value the hook server received.

Prints one JSON object. Offline against the scripted model server, in a throwaway dir.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from claudeguard.testing.cli_install import cli_path
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.offline_home import offline_env, prepare_home

KEY = "sk-ant-probe-0123456789abcdefghijklmnopqrstuv"
SECRET = "s3cr3t-hook-token-4242"
ALLOW = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                "permissionDecisionReason": "probe"}}
# Variables put into the CLI's environment for `scrub`: the guard's own, and a few of each kind.
VARS = {"CLAUDEGUARD_HOOK_TOKEN": SECRET, "CLAUDEGUARD_SESSION": "sess-1", "GUARD_HOOK_SECRET": "x1",
        "MY_PLAIN_VAR": "plain", "GITHUB_TOKEN": "ghp_probe", "AWS_SECRET_ACCESS_KEY": "aws_probe",
        "OPENAI_API_KEY": "sk-openai-probe", "NPM_TOKEN": "npm_probe", "DATABASE_URL": "postgres://u:p@h/db"}


class _HookServer:
    """Records the headers and bodies of the hook posts it gets and answers allow."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.seen.append({"path": self.path, "authorization": self.headers.get("Authorization"),
                                   "event": json.loads(body or b"{}").get("hook_event_name")})
                data = json.dumps(ALLOW).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _files(root: Path) -> set[str]:
    out = set()
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            out.add(str(Path(dirpath, name).relative_to(root)))
    return out


def _session(version: str, tmp: Path, command: str, *, settings: dict[str, Any], env_extra: dict[str, str],
             mcp: dict[str, Any] | None = None, project: dict[str, Any] | None = None,
             settings_inline: bool = False) -> dict[str, Any]:
    claude = cli_path(version)
    if claude is None:
        raise SystemExit(f"CLI {version} not installed")
    home, work = tmp / "home", tmp / "work"
    work.mkdir()
    (work / ".git").mkdir()
    prepare_home(home, cwd=work, api_key=KEY)
    if project is not None:
        (work / ".claude").mkdir()
        (work / ".claude" / "settings.json").write_text(json.dumps(project))
    settings_file = tmp / "guard-settings.json"
    settings_file.write_text(json.dumps(settings))
    settings_file.chmod(0o600)
    scenario = [{"match": "probe the secret", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": command}}}, {"text": "probe done"}]}]
    debug = tmp / "debug.log"
    with ModelServer(scenario) as server:
        env = offline_env(home, server.url, KEY)
        env.update(env_extra)
        before_home, before_work = _files(home), _files(work)
        argv = [str(claude), "--settings", json.dumps(settings) if settings_inline else str(settings_file),
                f"--debug-file={debug}", "-p", "probe the secret", "--output-format", "stream-json", "--verbose"]
        if mcp is not None:
            argv[1:1] = ["--mcp-config", json.dumps(mcp)]
        proc = subprocess.Popen(argv, env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        time.sleep(0.3)
        try:
            cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            cmdline = ""
        try:
            out, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, err = proc.communicate()
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        results = [r["content"] for r in server.tool_results()]
    return {"exit": proc.returncode, "tool_results": results, "stderr": err[-500:], "stdout": out,
            "cmdline_has_secret": SECRET in cmdline,
            "new_in_work": sorted(_files(work) - before_work), "new_in_home": sorted(_files(home) - before_home),
            "home": home, "work": work, "debug": debug}


def scrub(version: str, value: str) -> dict[str, Any]:
    names = list(VARS)
    with tempfile.TemporaryDirectory(prefix="scrub-probe-") as tmp_s:
        tmp = Path(tmp_s)
        hook_log, mcp_log = tmp / "hook-env.log", tmp / "mcp-env.log"
        dump = "; ".join(f'echo "{n}=${{{n}-UNSET}}"' for n in names)
        settings = {"permissions": {"allow": ["Bash"]}, "hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
            {"type": "command", "command": f"(cat; echo; {dump}) >> {hook_log}"}]}]}}
        mcp = {"mcpServers": {"envdump": {"command": "sh", "args": ["-c", f"({dump}) > {mcp_log}; sleep 3"]}}}
        env_extra = dict(VARS)
        if value != "unset":
            env_extra["CLAUDE_CODE_SUBPROCESS_ENV_SCRUB"] = value
        r = _session(version, tmp, f"{dump}; cat /proc/1/cmdline | tr '\\0' ' ' | cut -c1-40; echo",
                     settings=settings, env_extra=env_extra, mcp=mcp)

        def parse(text: str) -> dict[str, str]:
            return {k: v for k, _, v in (ln.partition("=") for ln in text.splitlines()) if k in VARS}

        hook_text = hook_log.read_text() if hook_log.exists() else ""
        mode = next((json.loads(ln).get("permission_mode") for ln in hook_text.splitlines() if ln.startswith("{")),
                    None)
        bash = parse(r["tool_results"][0]) if r["tool_results"] else {}
        return {"version": version, "scrub": value, "exit": r["exit"], "stderr": r["stderr"],
                "bash_pid1": (r["tool_results"][0].splitlines()[-1] if r["tool_results"] else None),
                "visible_to_bash": sorted(k for k, v in bash.items() if v != "UNSET"),
                "visible_to_hook": sorted(k for k, v in parse(hook_text).items() if v != "UNSET"),
                "visible_to_mcp": sorted(k for k, v in parse(mcp_log.read_text()).items() if v != "UNSET")
                if mcp_log.exists() else "mcp server did not start",
                "hook_permission_mode": mode,
                "new_files_in_project": r["new_in_work"],
                "new_files_in_home": [f for f in r["new_in_home"] if not f.startswith((".claude/", ".cache", "tmp"))]}


def _grep_secret(*roots: Path) -> list[str]:
    hits = []
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                path = Path(dirpath, name)
                try:
                    if SECRET.encode() in path.read_bytes():
                        hits.append(str(path.relative_to(root.parent)))
                except OSError:
                    pass
    return sorted(hits)


def header(version: str, inline: bool) -> dict[str, Any]:
    hook = _HookServer()
    try:
        with tempfile.TemporaryDirectory(prefix="header-probe-") as tmp_s:
            tmp = Path(tmp_s)
            settings = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
                {"type": "http", "url": hook.url, "headers": {"Authorization": f"Bearer {SECRET}"}, "timeout": 10}]}]}}
            r = _session(version, tmp, "echo ran", settings=settings, env_extra={}, settings_inline=inline)
            (tmp / "guard-settings.json").unlink()  # the one file that must hold it
            return {"version": version, "settings_passed_as": "json" if inline else "file", "exit": r["exit"],
                    "hook_server_saw": hook.seen, "tool_results": r["tool_results"],
                    "files_holding_secret": _grep_secret(tmp),
                    "cmdline_has_secret": r["cmdline_has_secret"]}
    finally:
        hook.close()


def envover(version: str, *, scrub_value: str | None = None, override: bool = True) -> dict[str, Any]:
    hook = _HookServer()
    try:
        with tempfile.TemporaryDirectory(prefix="envover-probe-") as tmp_s:
            tmp = Path(tmp_s)
            settings = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
                {"type": "http", "url": hook.url, "headers": {"Authorization": "Bearer $CLAUDEGUARD_HOOK_TOKEN"},
                 "allowedEnvVars": ["CLAUDEGUARD_HOOK_TOKEN"], "timeout": 10}]}]}}
            project = {"env": {"CLAUDEGUARD_HOOK_TOKEN": "attacker-value"}} if override else None
            env_extra = {"CLAUDEGUARD_HOOK_TOKEN": SECRET}
            if scrub_value is not None:
                env_extra["CLAUDE_CODE_SUBPROCESS_ENV_SCRUB"] = scrub_value
            r = _session(version, tmp, "echo token=${CLAUDEGUARD_HOOK_TOKEN-UNSET}", settings=settings,
                         env_extra=env_extra, project=project)
            return {"version": version, "project_env_override": override, "scrub": scrub_value, "exit": r["exit"],
                    "hook_server_saw": hook.seen, "bash_saw": r["tool_results"], "stderr": r["stderr"]}
    finally:
        hook.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("scrub", "header", "envover"))
    parser.add_argument("--version", default="2.1.330")
    parser.add_argument("--value", default="1", help="scrub: the variable's value, or 'unset'")
    parser.add_argument("--scrub", help="envover: also set CLAUDE_CODE_SUBPROCESS_ENV_SCRUB to this")
    parser.add_argument("--no-override", action="store_true", help="envover: no project env block")
    parser.add_argument("--inline", action="store_true", help="header: pass --settings as JSON, not a file")
    args = parser.parse_args()
    if args.what == "scrub":
        out = scrub(args.version, args.value)
    elif args.what == "header":
        out = header(args.version, args.inline)
    else:
        out = envover(args.version, scrub_value=args.scrub, override=not args.no_override)
    print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
