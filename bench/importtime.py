"""The start-up budget of the paths that run on every `claude` call and every tool call, measured
with `python -X importtime`: one check, instead of rules kept by convention in each module.

    python bench/importtime.py [--runs 7] [--json] [--modules-only]

Each path runs the way the user or the CLI runs it, with no config file and no XDG_RUNTIME_DIR:

- `launcher`: the installed `claudeguard --version` (passed through to the CLI, here `true`);
- `session`: `claudeguard --guard-dry-run -p x` (what a session imports before the CLI starts);
- `hook-gate`: the hook entry the shim registers (`python -E -S claudeguard/gate/fast_entry.py
  hook`) inside a session whose gate server answers (a stand-in server here: only the client's
  imports are measured);
- `hook`: the same entry deciding in its own process (no session: the fallback);
- `mcp-serve`: the same entry serving the prompt tool through initialize and tools/list;
- `pending`: `claudeguardctl pending` with nothing pending (what scripts poll).

Only what a path adds over the bare interpreter started the same way counts (`python -c pass`, or
`python -E -S -c pass`). For each path two limits hold: modules that must not load (what the lazy
imports are for: each is printed with the module that imported it), and a budget for the sum of
the added modules' own import times (median over the runs). A path over its budget prints the
modules it imports directly, slowest first. Exit status 1 when any limit is broken;
`--modules-only` checks the module limits alone (they do not depend on the machine's speed;
tests/test_importtime.py runs that).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field

# tree_sitter and tree_sitter_bash: the Bash parser loads their compiled modules directly
# (policy/bash/grammar.py), which -X importtime does not list; importing the packages themselves
# costs ~15 ms (bench/RESULTS.md, "Bash parsing") and must not happen on these paths.
DEPENDENCIES = ("platformdirs", "psutil", "tomlkit", "tomli", "pexpect", "ptyprocess", "tree_sitter",
                "tree_sitter_bash")
# What the pass-through path kept out (bench/RESULTS.md, "Start-up"): none of it is needed to exec
# the real CLI when no config file exists.
LAUNCHER_OUT = ("re", "enum", "typing", "dataclasses", "pathlib", "json", "subprocess", "threading",
                "tomllib", "inspect", "claudeguard.config.load", "claudeguard.shim.supervise")


@dataclass
class Path_:
    name: str
    budget_ms: float
    forbidden: tuple[str, ...] = ()
    only: tuple[str, ...] | None = None  # when set: nothing else may be added
    isolated: bool = False  # started with -E -S (the hook entry), else like a console script
    result: dict = field(default_factory=dict)


PATHS = [
    Path_("launcher", 4.0, LAUNCHER_OUT + DEPENDENCIES),
    Path_("session", 60.0,
          DEPENDENCIES + ("secrets", "shutil", "asyncio", "email", "http.client", "dataclasses", "inspect",
                                          "typing")),
    # `-S` leaves os out of the bare interpreter; the hook's client needs it and _socket, no more.
    Path_("hook-gate", 3.0, only=("_socket", "os", "stat", "_stat", "posixpath", "genericpath", "_collections_abc"),
          isolated=True),
    Path_("hook", 50.0, DEPENDENCIES + ("subprocess", "socket", "asyncio", "secrets", "http.client"), isolated=True),
    Path_("mcp-serve", 25.0, DEPENDENCIES + ("subprocess", "socket", "asyncio", "pathlib", "dataclasses",
                                           "inspect", "claudeguard.policy.bash"), isolated=True),
    # what scripts poll: the channel's records are plain classes, its ids from os.urandom
    Path_("pending", 30.0, DEPENDENCIES + ("dataclasses", "inspect", "secrets", "hmac", "typing", "subprocess",
                                         "asyncio", "tomllib", "shutil", "difflib")),
]

MCP_INPUT = "".join(json.dumps(m) + "\n" for m in (
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
))


def _event(cwd: str) -> str:
    return json.dumps({"hook_event_name": "PreToolUse", "session_id": "bench", "cwd": cwd, "tool_use_id": "t1",
                       "tool_name": "Bash", "tool_input": {"command": "git status && rm -rf build"}})


@dataclass
class Row:
    name: str
    self_us: int
    cumulative_us: int
    depth: int
    parent: str | None = None


def parse_importtime(stderr: str) -> list[Row]:
    """The rows of `-X importtime` in order, each with the module that imported it. The output is
    post-order: a module's imports come before it, one indentation level deeper."""
    rows: list[Row] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        own, cumulative, name = line[len("import time:"):].split("|")
        depth = (len(name) - len(name.lstrip(" "))) // 2
        rows.append(Row(name.strip(), int(own), int(cumulative), depth))
    for i, row in enumerate(rows):
        row.parent = next((r.name for r in rows[i + 1:] if r.depth < row.depth), "<entry>")
    return rows


def _run(argv: list[str], env: dict[str, str], cwd: str, stdin: str = "") -> list[Row]:
    proc = subprocess.run(argv, env=env, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise SystemExit(f"bench/importtime.py: {' '.join(argv)} exited {proc.returncode}: {proc.stderr[-500:]}")
    return parse_importtime(proc.stderr)


class GateStandIn:
    """Answers every hook client on `<dir>/gate.sock` with an empty answer, as a gate server does
    for an event it has nothing to say about."""

    def __init__(self, directory: str) -> None:
        with open(os.path.join(directory, "gate.key"), "w") as fh:
            fh.write("k" * 48 + "\n")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(os.path.join(directory, "gate.sock"))
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                key_length = conn.recv(1)[0]
                want = key_length + 8
                head = b""
                while len(head) < want:
                    head += conn.recv(want - len(head)) or b"x" * want
                want = int.from_bytes(head[-8:], "big")
                while want > 0:
                    want -= len(conn.recv(min(want, 65536)) or b"x" * want)
                conn.sendall(b"OK")

    def close(self) -> None:
        self.sock.close()


def measure(runs: int) -> list[Path_]:
    from claudeguard.gate import fast_entry_path

    guard = os.path.join(os.path.dirname(sys.executable), "claudeguard")
    if not os.path.isfile(guard):
        raise SystemExit(f"bench/importtime.py: {guard}: claudeguard is not installed beside this Python")
    entry = fast_entry_path()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, ".git"))  # the cwd is a repository with no project config
        session_dir = os.path.join(tmp, "rt", "sessions", "bench")  # the hook finds the runtime dir above it
        os.makedirs(session_dir, 0o700)
        os.chmod(os.path.join(tmp, "rt"), 0o700)  # private, as the guard makes it (ctl refuses another)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CLAUDEGUARD_", "PYTHON")) and k != "XDG_RUNTIME_DIR"}
        env.update(HOME=tmp, XDG_CONFIG_HOME=os.path.join(tmp, "config"), XDG_STATE_HOME=os.path.join(tmp, "state"),
                   CLAUDEGUARD_RUNTIME_DIR=os.path.join(tmp, "rt"), CLAUDEGUARD_LOG_DIR=os.path.join(tmp, "log"),
                   CLAUDEGUARD_CLAUDE=shutil.which("true") or "/bin/true")
        commands = {
            "launcher": ([py, "-X", "importtime", guard, "--version"], env, ""),
            "session": ([py, "-X", "importtime", guard, "--guard-dry-run", "-p", "x"], env, ""),
            "hook-gate": ([py, "-E", "-S", "-X", "importtime", entry, "hook", "--session-dir", session_dir], env,
                          _event(tmp)),
            "hook": ([py, "-E", "-S", "-X", "importtime", entry, "hook"], env, _event(tmp)),
            "mcp-serve": ([py, "-E", "-S", "-X", "importtime", entry, "mcp-serve"], env, MCP_INPUT),
            "pending": ([py, "-X", "importtime", os.path.join(os.path.dirname(sys.executable), "claudeguardctl"),
                         "pending"], env, ""),
        }
        baselines = {
            False: [py, "-X", "importtime", "-c", "pass"],
            True: [py, "-E", "-S", "-X", "importtime", "-c", "pass"],
        }
        gate = GateStandIn(session_dir)
        try:
            base = {iso: {r.name for r in _run(argv, env, tmp)} for iso, argv in baselines.items()}
            samples: dict[str, list[list[Row]]] = {p.name: [] for p in PATHS}
            for _ in range(runs):  # interleaved, so a busy moment of the machine hits every path
                for p in PATHS:
                    argv, penv, stdin = commands[p.name]
                    samples[p.name].append(_run(argv, penv, tmp, stdin))
        finally:
            gate.close()
    for p in PATHS:
        _judge(p, samples[p.name], base[p.isolated])
    return PATHS


def _judge(p: Path_, samples: list[list[Row]], baseline: set[str]) -> None:
    first = samples[0]
    added = [r for r in first if r.name not in baseline]
    names = {r.name for r in added}
    if p.only is not None:
        bad = [r for r in added if r.name not in p.only]
    else:
        bad = [r for r in added if r.name in p.forbidden]
    own: dict[str, list[int]] = {}
    cumulative: dict[str, list[int]] = {}
    for rows in samples:
        for r in rows:
            if r.name in names:
                own.setdefault(r.name, []).append(r.self_us)
                cumulative.setdefault(r.name, []).append(r.cumulative_us)
    total_ms = sum(statistics.median(v) for v in own.values()) / 1000
    direct = sorted(((r.name, statistics.median(cumulative[r.name]) / 1000) for r in added if r.parent == "<entry>"),
                    key=lambda item: -item[1])
    p.result = {
        "path": p.name, "modules": len(added), "total_ms": round(total_ms, 1), "budget_ms": p.budget_ms,
        "forbidden": [f"{r.name} (imported by {r.parent})" for r in bad],
        "direct": [[name, round(ms, 1)] for name, ms in direct],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="one JSON object per path")
    parser.add_argument("--modules-only", action="store_true", help="check the module limits, not the budgets")
    args = parser.parse_args()
    ok = True
    for p in measure(max(1, args.runs)):
        r = p.result
        over = not args.modules_only and r["total_ms"] > r["budget_ms"]
        ok &= not over and not r["forbidden"]
        if args.json:
            print(json.dumps(dict(r, over_budget=over)))
            continue
        verdict = "ok" if not over and not r["forbidden"] else "OVER"
        print(f"{verdict:4}  {p.name:9}  {r['modules']:3} modules  {r['total_ms']:5.1f} ms  (budget {p.budget_ms} ms)")
        for what in r["forbidden"]:
            print(f"      must not load: {what}")
        if over:
            for name, ms in r["direct"]:
                if ms >= 0.5:
                    print(f"      {ms:5.1f} ms  {name}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
