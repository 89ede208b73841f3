"""What confining each Bash call costs on the real CLI: its own sandbox against our own bubblewrap.

    python bench/sandbox_cost.py [--versions 2.1.197,2.1.330,2.1.332] [--rounds 8] [--calls 10]
                                 [--cases bare,hook,cli-sandbox,...] [--json FILE]
    python bench/sandbox_cost.py --bwrap-only [--rounds 40]

Offline against the scripted model server, in one throwaway lab per version. Every round runs
each case twice, interleaved: a session whose model makes `--calls` Bash(`true`) calls, one a
turn, and a session with a text turn only. Per case: the session's wall time (median, p25, min,
max over the rounds) and the **per-call cost** = (median of the N-call session − median of the
text session) / N, and the same for the CPU time (user + system) of the CLI's process tree,
which the machine's load moves far less than wall time. A PreToolUse and a PostToolUse HTTP
hook (answered in-process, no new process) time-stamp each call where a case has hooks:
`window` is the median ms from PreToolUse arriving to PostToolUse arriving, the CLI's own view
of one call.

Cases (all with `permissions.allow: ["Bash"]`, so nothing asks):

- `bare`: the CLI alone, no hooks, no sandbox (the unsandboxed raw CLI of the issue's goal);
- `hook`: + the two HTTP hooks, answering allow (what the guard's service costs, roughly);
- `cli-sandbox-bare`: the CLI's sandbox, no hooks (the issue's 909 → 1944 ms measurement):
  `sandbox.enabled`, `failIfUnavailable`, `autoAllowBashIfSandboxed: false`,
  `allowUnsandboxedCommands: false`, `denyRead` of the lab's runtime dir, config dir and log dir;
- `cli-sandbox`: the same with the two HTTP hooks, and `network.allowedDomains` naming the hook
  server (`127.0.0.1:PORT`; `127.0.0.1` on 2.1.197): without it the sandbox's proxy refuses the
  CLI's own HTTP hooks (403) and every call runs unguarded;
- `cli-sandbox-unix`: the same + `network.allowAllUnixSockets: true` (the CLI then skips its
  seccomp stage: what that stage costs);
- `own-bwrap`: the hook answers allow with an `updatedInput` that runs the command under our own
  `bwrap`: read-only root, the project and a private temp dir writable, the runtime dir, config
  dir and log dir under an empty tmpfs, `.git/hooks`, `.git/config`, `.claude` read-only,
  `--unshare-pid --proc /proc --dev /dev --die-with-parent --new-session`, host network;
- `own-bwrap-net`: + `--unshare-net` (no network at all, host loopback out of reach);
- `own-bwrap-seccomp`: `own-bwrap` + a seccomp filter refusing `socket(AF_UNIX, ...)` (EPERM),
  given to bwrap as `--seccomp FD`;
- `own-bwrap-net-seccomp`: both;
- `own-bwrap-script`: `own-bwrap-seccomp` with a short command line: `<runtime>/wrap.sh 'CMD'`, a
  script that drops `CLAUDEGUARD_HOOK_TOKEN` from the environment and execs the same bwrap line.

`--bwrap-only`: the wrapper alone, outside the CLI: `bash -c true` bare and under each of the
own-bwrap variants (and under the CLI's own 2.1.330 argv shape when `--cli-argv FILE` gives one
captured with a PATH wrapper), so the CLI's share can be told from bwrap's.

Prints one JSON object (and writes it to `--json`); the machine's load average at the start and
end of each version's run is part of it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import socket
import statistics
import struct
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

KEY = "sk-ant-bench-0123456789abcdefghijklmnopqrstuv"
CASES = ("bare", "hook", "cli-sandbox-bare", "cli-sandbox", "cli-sandbox-unix", "own-bwrap", "own-bwrap-net",
         "own-bwrap-seccomp", "own-bwrap-net-seccomp", "own-bwrap-script")


# --- a seccomp filter refusing AF_UNIX sockets (x86_64), as raw BPF for bwrap --seccomp ----------


def _wrapper_script(argv: list[str], bpf: Path | None) -> str:
    fd = f" 9< {shlex.quote(str(bpf))}" if bpf else ""
    return ("#!/bin/sh\n# runs \"$1\" under bwrap (bench/sandbox_cost.py)\n"
            f"exec env -u CLAUDEGUARD_HOOK_TOKEN {shlex.join(argv)} -- /bin/bash -c \"$1\"{fd}\n")


def unix_block_bpf() -> bytes:
    """A classic-BPF seccomp program: socket(AF_UNIX, ...) fails with EPERM, any other arch or an
    x32 syscall kills the process, everything else is allowed. socketpair() stays allowed (a
    connected pair reaches nothing outside)."""
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    audit_arch_x86_64, nr_socket, af_unix = 0xC000003E, 41, 1
    allow, errno_eperm, kill = 0x7FFF0000, 0x00050000 | 1, 0x80000000
    prog = [
        (ld_abs, 0, 0, 4),                    # 0: A = arch
        (jeq, 0, 7, audit_arch_x86_64),       # 1: not x86_64 -> 9 kill
        (ld_abs, 0, 0, 0),                    # 2: A = nr
        (jge, 5, 0, 0x40000000),              # 3: x32 -> 9 kill
        (jeq, 0, 3, nr_socket),               # 4: not socket -> 8 allow
        (ld_abs, 0, 0, 16),                   # 5: A = low word of args[0] (domain)
        (jeq, 0, 1, af_unix),                 # 6: AF_UNIX -> 7, else 8
        (ret, 0, 0, errno_eperm),             # 7
        (ret, 0, 0, allow),                   # 8
        (ret, 0, 0, kill),                    # 9
    ]
    return b"".join(struct.pack("<HBBI", *ins) for ins in prog)


# --- the lab -------------------------------------------------------------------------------------


class Lab:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home, self.work = root / "home", root / "work"
        self.work.mkdir()
        for d in (".git/hooks", ".claude"):
            (self.work / d).mkdir(parents=True)
        (self.work / ".git" / "config").write_text("[core]\n")
        prepare_home(self.home, cwd=self.work, api_key=KEY)
        self.runtime = root / "runtime" / "claudeguard"
        self.runtime.mkdir(parents=True, mode=0o700)
        (self.runtime / "token").write_text("secret\n")
        self.config = self.home / ".config" / "claudeguard"
        self.config.mkdir(parents=True)
        self.logdir = self.home / ".local" / "state" / "claudeguard" / "log"
        self.logdir.mkdir(parents=True)
        self.private_tmp = root / "sbx-tmp"
        self.private_tmp.mkdir()
        self.bpf = root / "unix-block.bpf"
        self.bpf.write_bytes(unix_block_bpf())

    def script(self, *, net: bool, seccomp: bool) -> Path:
        path = self.runtime.parent / f"wrap-{int(net)}{int(seccomp)}.sh"
        if not path.exists():
            path.write_text(_wrapper_script(self.bwrap_argv(net=net, seccomp=seccomp), self.bpf if seccomp else None))
            path.chmod(0o755)
        return path

    def hidden(self) -> list[Path]:
        return [self.runtime, self.config, self.logdir]

    def bwrap_argv(self, *, net: bool, seccomp: bool) -> list[str]:
        argv = ["bwrap", "--new-session", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
                "--unshare-pid", "--proc", "/proc", "--bind", str(self.work), str(self.work),
                "--bind", str(self.private_tmp), str(self.private_tmp), "--setenv", "TMPDIR", str(self.private_tmp)]
        for ro in (".git/hooks", ".git/config", ".claude"):
            argv += ["--ro-bind", str(self.work / ro), str(self.work / ro)]
        for hide in self.hidden():
            argv += ["--tmpfs", str(hide)]
        if net:
            argv.append("--unshare-net")
        if seccomp:
            argv += ["--seccomp", "9"]
        return argv

    def wrap(self, command: str, *, net: bool, seccomp: bool, script: bool = False) -> str:
        if script:
            # A short command line: the bwrap argv lives in a script of ours (outside the
            # sandbox's view), which also drops the environment's secrets before bwrap starts.
            return f"{shlex.quote(str(self.script(net=net, seccomp=seccomp)))} {shlex.quote(command)}"
        inner = shlex.join([*self.bwrap_argv(net=net, seccomp=seccomp), "--", "/bin/bash", "-c", command])
        return f"{inner} 9< {shlex.quote(str(self.bpf))}" if seccomp else inner


# --- the hook server ----------------------------------------------------------------------------


class HookServer:
    """Answers PreToolUse (allow, optionally with a rewritten command) and PostToolUse, time-stamps both."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.rewrite: dict[str, bool] | None = None
        self.stamps: list[tuple[str, str, float]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                now = time.time()
                event = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                name = str(event.get("hook_event_name"))
                outer.stamps.append((name, str(event.get("tool_use_id")), now))
                answer: dict[str, Any] = {}
                if name == "PreToolUse":
                    out: dict[str, Any] = {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                           "permissionDecisionReason": "bench"}
                    if outer.rewrite is not None:
                        tool_input = dict(event.get("tool_input") or {})
                        tool_input["command"] = outer.lab.wrap(str(tool_input.get("command", "")), **outer.rewrite)
                        out["updatedInput"] = tool_input
                    answer = {"hookSpecificOutput": out}
                data = json.dumps(answer).encode()
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                 + str(len(data)).encode() + b"\r\n\r\n" + data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def windows(self) -> list[float]:
        pre = {tid: t for name, tid, t in self.stamps if name == "PreToolUse"}
        return [(t - pre[tid]) * 1000 for name, tid, t in self.stamps if name == "PostToolUse" and tid in pre]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def case_settings(case: str, lab: Lab, hook_url: str, version: str) -> tuple[dict[str, Any], dict[str, bool] | None]:
    settings: dict[str, Any] = {"permissions": {"allow": ["Bash"]}}
    rewrite = None
    if case not in ("bare", "cli-sandbox-bare"):
        http = {"type": "http", "url": hook_url, "timeout": 30}
        settings["hooks"] = {e: [{"matcher": "*", "hooks": [http]}] for e in ("PreToolUse", "PostToolUse")}
    if case.startswith("cli-sandbox"):
        settings["sandbox"] = {"enabled": True, "failIfUnavailable": True, "autoAllowBashIfSandboxed": False,
                               "allowUnsandboxedCommands": False,
                               "filesystem": {"denyRead": [str(p) for p in lab.hidden()]}}
        if case != "cli-sandbox-bare":
            # Under the CLI's sandbox its HTTP hooks go through the sandbox's proxy, which refuses
            # 127.0.0.1 unless the allowlist names it; 2.1.197 takes no port suffix.
            port = hook_url.split(":")[2].split("/")[0]
            allowed = "127.0.0.1" if version == "2.1.197" else f"127.0.0.1:{port}"
            settings["sandbox"]["network"] = {"allowedDomains": [allowed]}
        if case == "cli-sandbox-unix":
            settings["sandbox"]["network"]["allowAllUnixSockets"] = True
    if case.startswith("own-bwrap"):
        rewrite = {"net": "-net" in case, "seccomp": "seccomp" in case or "script" in case,
                   "script": "script" in case}
    return settings, rewrite


def _stats(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4) if len(values) >= 2 else [values[0]] * 3
    return {"median": round(statistics.median(values)), "p25": round(q[0]), "p75": round(q[2]),
            "min": round(min(values)), "max": round(max(values))}


def run_version(version: str, cases: list[str], rounds: int, calls: int) -> dict[str, Any]:
    claude = cli_path(version)
    if claude is None:
        raise SystemExit(f"CLI {version} not installed: python -m claudeguard.testing.cli_install {version}")
    scenario = [{"match": "bench text", "turns": [{"text": "hello"}]},
                {"match": "bench calls", "turns": [*({"tool_use": {"name": "Bash", "input": {"command": "true"}}}
                                                     for _ in range(calls)), {"text": "all done"}]}]
    root = Path(tempfile.mkdtemp(prefix="sbx-cost-"))
    lab = Lab(root)
    hook = HookServer(lab)
    times: dict[tuple[str, str], list[float]] = {}
    windows: dict[str, list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    load = [os.getloadavg()[0]]
    try:
        with ModelServer(scenario) as server:
            env = offline_env(lab.home, server.url, KEY)
            for rnd in range(rounds + 1):  # round 0 warms up and is not counted
                for case in cases:
                    settings, rewrite = case_settings(case, lab, hook.url, version)
                    hook.rewrite = rewrite
                    sfile = root / f"settings-{case}.json"
                    sfile.write_text(json.dumps(settings))
                    for prompt in ("bench text", "bench calls"):
                        hook.stamps.clear()
                        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                        start = time.perf_counter()
                        proc = subprocess.run([str(claude), "--settings", str(sfile), "-p", prompt], env=env,
                                              cwd=lab.work, capture_output=True, text=True, timeout=300)
                        elapsed = (time.perf_counter() - start) * 1000
                        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                        cpu = (ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime) * 1000
                        want = "hello" if prompt == "bench text" else "all done"
                        if want not in proc.stdout:
                            raise SystemExit(f"{version} {case}: expected {want!r}, got {proc.stdout[-300:]!r} "
                                             f"{proc.stderr[-300:]!r}")
                        if rnd:
                            times.setdefault((case, prompt), []).append(elapsed)
                            cpus.setdefault((case, prompt), []).append(cpu)
                            if prompt == "bench calls":
                                windows.setdefault(case, []).extend(hook.windows())
            load.append(os.getloadavg()[0])
    finally:
        hook.close()
        shutil.rmtree(root, ignore_errors=True)
    out: dict[str, Any] = {"version": version, "rounds": rounds, "calls": calls,
                           "load_start_end": [round(x, 1) for x in load]}
    bare_per_call = bare_cpu = None
    for case in cases:
        text, many = times[(case, "bench text")], times[(case, "bench calls")]
        per_call = (statistics.median(many) - statistics.median(text)) / calls
        cpu_text, cpu_many = cpus[(case, "bench text")], cpus[(case, "bench calls")]
        cpu_per_call = (statistics.median(cpu_many) - statistics.median(cpu_text)) / calls
        if case == "bare":
            bare_per_call, bare_cpu = per_call, cpu_per_call
        out[case] = {"text_session": _stats(text), "calls_session": _stats(many), "per_call_ms": round(per_call, 1),
                     "cpu_text_session": _stats(cpu_text), "cpu_calls_session": _stats(cpu_many),
                     "cpu_per_call_ms": round(cpu_per_call, 1),
                     "window_ms": _stats(windows[case]) if windows.get(case) else None}
    if bare_per_call is not None:
        for case in cases:
            out[case]["per_call_over_bare_ms"] = round(out[case]["per_call_ms"] - bare_per_call, 1)
            out[case]["cpu_per_call_over_bare_ms"] = round(out[case]["cpu_per_call_ms"] - bare_cpu, 1)
    return out


def bwrap_only(rounds: int, cli_argv_file: str | None) -> dict[str, Any]:
    """`bash -c true` bare and under each wrapper, outside the CLI, interleaved."""
    root = Path(tempfile.mkdtemp(prefix="sbx-bwrap-"))
    lab = Lab(root)
    variants: dict[str, str] = {"bash -c true": "bash -c true"}
    for net in (False, True):
        for seccomp in (False, True):
            name = "own-bwrap" + ("-net" if net else "") + ("-seccomp" if seccomp else "")
            variants[name] = lab.wrap("true", net=net, seccomp=seccomp)
    variants["own-bwrap-script"] = lab.wrap("true", net=False, seccomp=True, script=True)
    variants["bwrap minimal (ro /, no pid ns)"] = "bwrap --ro-bind / / -- /bin/bash -c true"
    if cli_argv_file:
        argv = json.loads(Path(cli_argv_file).read_text())
        variants["the CLI's bwrap line, as captured"] = shlex.join(["bwrap", *argv])
    times: dict[str, list[float]] = {k: [] for k in variants}
    load = [os.getloadavg()[0]]
    try:
        for rnd in range(rounds + 1):
            for name, cmd in variants.items():
                start = time.perf_counter()
                proc = subprocess.run(["bash", "-c", cmd], cwd=lab.work, capture_output=True, text=True)
                if proc.returncode != 0:
                    raise SystemExit(f"{name}: exit {proc.returncode}: {proc.stderr[-300:]}")
                if rnd:
                    times[name].append((time.perf_counter() - start) * 1000)
        load.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out: dict[str, Any] = {"rounds": rounds, "load_start_end": [round(x, 1) for x in load]}
    for name, values in times.items():
        out[name] = {k: round(v, 1) for k, v in _stats_f(values).items()}
    return out


def _stats_f(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4)
    return {"median": statistics.median(values), "p25": q[0], "p75": q[2], "min": min(values), "max": max(values)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--versions", default="2.1.197,2.1.330,2.1.332")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--bwrap-only", action="store_true")
    parser.add_argument("--cli-argv", help="--bwrap-only: a JSON list, the CLI's bwrap argv captured by a wrapper")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args()
    if args.bwrap_only:
        result: Any = bwrap_only(args.rounds, args.cli_argv)
    else:
        result = {"machine": {"cpus": os.cpu_count(), "kernel": os.uname().release},
                  "runs": [run_version(v, args.cases.split(","), args.rounds, args.calls)
                           for v in args.versions.split(",")]}
    text = json.dumps(result, indent=1)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
