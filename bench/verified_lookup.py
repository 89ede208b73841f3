"""What a guarded run pays to look its CLI up in the record of verified CLIs (plan/verified.py):
``check(cfg, real)`` as ``load_checked`` calls it, in a fresh interpreter that has already loaded
what a session's start loads (the launcher's path), and what it adds to that path's modules.

    python bench/verified_lookup.py [--cli PATH] [--runs 21]

The CLI (default: the newest installed in the cache) gets a record and a cached hash in a temp
state dir first, so the lookup finds it verified (the case of every run but the first); the
cache miss that hashes the binary (only under require_verified_cli, or in `doctor`) is timed once
for comparison. bench/importtime.py's session path is a dry run, which skips the check: its
budgets do not include this, so this measures it.
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

CHILD = r"""
import json, os, sys, time
from pathlib import Path
from claudeguard.config.load import env_overrides, load_config
import claudeguard.plan.session, claudeguard.plan.argv, claudeguard.plan.settings_sources  # the session's start
cfg = load_config(Path.cwd(), env_overrides())
before = set(sys.modules)
t0 = time.perf_counter()
from claudeguard.plan.verified import check
status = check(cfg, sys.argv[1])
t1 = time.perf_counter()
print(json.dumps({"ms": (t1 - t0) * 1000, "state": status.state, "new": sorted(set(sys.modules) - before)}))
"""


def newest_cli() -> str:
    from claudeguard.testing.cli_install import cli_root

    found = sorted(cli_root().glob("*/node_modules/.bin/claude"),
                   key=lambda p: tuple(int(x) for x in p.parents[2].name.split(".") if x.isdigit()))
    if not found:
        raise SystemExit("bench/verified_lookup.py: no CLI installed (python -m claudeguard.testing.cli_install)")
    return str(found[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", help="the CLI to look up (default: the newest in the cache)")
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    cli = args.cli or newest_cli()
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDEGUARD_")}
        env.update(XDG_STATE_HOME=os.path.join(tmp, "state"), XDG_CONFIG_HOME=os.path.join(tmp, "config"),
                   CLAUDEGUARD_RUNTIME_DIR=os.path.join(tmp, "rt"), HOME=tmp)
        os.environ.update(XDG_STATE_HOME=env["XDG_STATE_HOME"])
        from claudeguard.plan import verified

        t0 = time.perf_counter()
        status = verified.lookup(cli, compute=True)  # the miss: hashes the binary, caches it
        miss_s = time.perf_counter() - t0
        assert status.sha256 is not None
        verified.save_record({"cli_version": status.version, "sha256": status.sha256, "ok": True, "checks": []})
        warm = []
        for _ in range(200):
            t0 = time.perf_counter()
            assert verified.lookup(cli).state == verified.VERIFIED
            warm.append((time.perf_counter() - t0) * 1e6)
        cold, new = [], set()
        for _ in range(args.runs):
            proc = subprocess.run([sys.executable, "-c", CHILD, cli], env=env, cwd=tmp, capture_output=True,
                                  text=True, timeout=60)
            if proc.returncode != 0:
                raise SystemExit(f"bench/verified_lookup.py: child failed: {proc.stderr[-400:]}")
            out = json.loads(proc.stdout)
            assert out["state"] == verified.VERIFIED, out
            cold.append(out["ms"])
            new |= set(out["new"])
    size = Path(os.path.realpath(cli)).stat().st_size
    print(f"CLI {cli} ({size / 1e6:.0f} MB)")
    print(f"check() on the launcher's path (fresh interpreter, verified): median {statistics.median(cold):.2f} ms, "
          f"max {max(cold):.2f} ms over {args.runs}; modules it adds: {', '.join(sorted(new)) or 'none'}")
    print(f"lookup() again in the same process: median {statistics.median(warm):.0f} us")
    print(f"a cache miss that hashes the binary (require_verified_cli, doctor): {miss_s:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
