"""Time the bwrap line the CLI builds for a sandboxed Bash call, outside the CLI, in variants.

    python bench/sandbox_replay.py --version 2.1.330 [--rounds 20]

Runs one sandboxed session (one `Bash(true)` call) of the CLI in a kept lab with a `bwrap`
wrapper first on PATH that records the argv, then replays that argv with `bash -c true` variants
(socat and its wait, the seccomp stage, the mounts, the user and network namespaces taken out one
at a time), interleaved, and prints median / p25 / p75 / min ms of each. The mount points the CLI
made for the call (and removed after it) are made again; the proxy's bridge sockets are replaced
by empty files. fd 3 is the CLI's binary (its `apply-seccomp` stage execs `/proc/self/fd/3`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sandbox_cost import KEY, HookServer, Lab, case_settings  # bench/sandbox_cost.py

from claudeguard.testing.cli_install import cli_path
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.offline_home import offline_env

WRAPPER = '#!/bin/bash\nprintf "%s\\0" "$@" > "$BWRAP_ARGV_DIR/argv-$EPOCHREALTIME"\nexec /usr/bin/bwrap "$@"\n'


def capture(version: str, root: Path) -> list[str]:
    lab = Lab(root)
    hook = HookServer(lab)
    wrapbin, argv_dir = root / "wrapbin", root / "argv"
    wrapbin.mkdir()
    argv_dir.mkdir()
    (wrapbin / "bwrap").write_text(WRAPPER)
    (wrapbin / "bwrap").chmod(0o755)
    scenario = [{"match": "bench calls", "turns": [{"tool_use": {"name": "Bash", "input": {"command": "true"}}},
                                                   {"text": "all done"}]}]
    try:
        with ModelServer(scenario) as server:
            env = offline_env(lab.home, server.url, KEY)
            env.update(PATH=f"{wrapbin}:{env['PATH']}", BWRAP_ARGV_DIR=str(argv_dir))
            settings, _ = case_settings("cli-sandbox", lab, hook.url, version)
            sfile = root / "settings.json"
            sfile.write_text(json.dumps(settings))
            subprocess.run([str(cli_path(version)), "--settings", str(sfile), "-p", "bench calls"], env=env,
                           cwd=lab.work, capture_output=True, timeout=120, check=True)
    finally:
        hook.close()
    for path in sorted(argv_dir.iterdir()):
        args = [a.decode() for a in path.read_bytes().split(b"\0")[:-1]]
        if len(args) > 3:  # not `bwrap --version`
            return args
    raise SystemExit("no bwrap line captured")


def _drop(opts: list[str], names: set[str], nargs: int) -> list[str]:
    out, k = [], 0
    while k < len(opts):
        if opts[k] in names:
            k += 1 + nargs
            continue
        out.append(opts[k])
        k += 1
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", default="2.1.330")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    claude = os.path.realpath(str(cli_path(args.version)))
    root = Path(tempfile.mkdtemp(prefix="sbx-replay-"))
    try:
        argv = capture(args.version, root)
        i = argv.index("--")
        opts, tail = argv[:i], argv[i + 1:]
        for k, a in enumerate(opts):  # what the CLI had made for the call and removed after it
            if a in ("--bind", "--ro-bind"):
                src, dst = Path(opts[k + 1]), Path(opts[k + 2])
                if not src.exists():
                    src.parent.mkdir(parents=True, exist_ok=True)
                    src.touch()
                if not os.path.lexists(dst):
                    if src.is_dir():
                        dst.mkdir(parents=True, exist_ok=True)
                    else:
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        dst.touch()
            if a == "--tmpfs":
                Path(opts[k + 1]).mkdir(parents=True, exist_ok=True)
        seccomp_only = ["/bin/bash", "-c", "ARGV0=apply-seccomp /proc/self/fd/3 /bin/bash -c true"]
        variants: dict[str, list[str] | None] = {
            "the CLI's line (socat + wait, seccomp, bash)": opts + ["--"] + tail,
            "same mounts and namespaces, no socat": opts + ["--"] + seccomp_only,
            "same mounts and namespaces, bash -c true only": opts + ["--", "/bin/bash", "-c", "true"],
        }
        if "--unshare-user" in opts:
            no_user = _drop(_drop(opts, {"--unshare-user"}, 0), {"--cap-drop", "--cap-add"}, 1)
            variants["no --unshare-user, no socat"] = no_user + ["--"] + seccomp_only
        variants["no --unshare-net, no socat"] = _drop(opts, {"--unshare-net"}, 0) + ["--"] + seccomp_only
        variants["minimal: ro /, dev, proc, pid + net namespaces"] = [
            "--new-session", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid",
            "--unshare-net", "--proc", "/proc", "--", "/bin/bash", "-c", "true"]
        variants["bash -c true, no bwrap (one bash fewer)"] = None
        prefix = f"exec 3<{claude} 5</dev/null 6>/dev/null; exec /usr/bin/bwrap \"$@\""

        def run(a: list[str] | None) -> subprocess.CompletedProcess[bytes]:
            cmd = ["/bin/bash", "-c", "true"] if a is None else ["/bin/bash", "-c", prefix, "bwrap", *a]
            return subprocess.run(cmd, cwd=root / "work", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=30)

        for name, a in variants.items():
            proc = run(a)
            if proc.returncode:
                raise SystemExit(f"{name}: exit {proc.returncode}: {proc.stderr.decode()[-300:]}")
        times: dict[str, list[float]] = {k: [] for k in variants}
        load = [os.getloadavg()[0]]
        for _ in range(args.rounds):
            for name, a in variants.items():
                start = time.perf_counter()
                run(a)
                times[name].append((time.perf_counter() - start) * 1000)
        load.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{args.version}: {args.rounds} rounds, load {load[0]:.1f} -> {load[1]:.1f}, {len(opts)} bwrap options")
    for name, values in times.items():
        q = statistics.quantiles(values, n=4)
        print(f"  {name:48} median {statistics.median(values):6.1f}  p25 {q[0]:6.1f}  p75 {q[2]:6.1f}"
              f"  min {min(values):6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
