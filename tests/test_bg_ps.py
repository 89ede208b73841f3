"""``claudeguardctl ps --all`` lists the real CLI's own background sessions (2.1.330) one by one,
with their short ids, and never the daemon, its pty hosts or its spares as sessions."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from claudeguard.testing import bg_daemon as bg
from tests.shim_helpers import CTL, wait_until


def _ps(env: dict, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(CTL + ["ps", "--all", *extra], env=env, capture_output=True, text=True, timeout=60)


def _cmdline(pid: int) -> str:
    """What a listed process runs, for the failure message (it may be gone by then)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "(gone)"


def _ours(rows: list[dict], cfg) -> list[dict]:  # type: ignore[no-untyped-def]
    return [r for r in rows if r.get("config_dir") == str(cfg)]


def test_ps_all_lists_background_sessions_not_the_daemon(bg_claude, model_server, offline_env, bg_daemon):
    server = model_server([{"match": "hello-one", "turns": [{"text": "one is done"}]},
                           {"match": "hello-two", "turns": [{"text": "two is done"}]}])
    env = offline_env.use(server)
    cfg = bg.config_dir(env)
    shorts = []
    for tag in ("one", "two"):
        launch = bg.launch_bg([bg_claude, "--bg", f"hello-{tag}"], env, offline_env.cwd)
        assert launch.returncode == 0 and launch.short_id, launch.stderr
        wait_until(lambda tag=tag, launch=launch: f"{tag} is done" in bg.job_texts(cfg, launch.short_id), 60,
                   what=f"session {tag}'s reply")
        shorts.append(launch.short_id)
    daemon = bg.wait_for_daemon(cfg)
    agents = {a["id"]: a["pid"] for a in bg.list_agents(bg_claude, env, offline_env.cwd)}
    assert sorted(agents) == sorted(shorts)
    machinery = set(bg.live_processes(env)) - set(agents.values())
    assert daemon in machinery and len(machinery) >= 3  # the daemon, a pty host per session, spares

    proc = _ps(env, "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    ours = _ours(rows, cfg)
    assert sorted((r["short_id"], r["pid"]) for r in ours) == sorted(agents.items())
    assert all(r["guarded"] is False and r["background"] is True and r["daemon_pid"] == daemon for r in ours)
    assert {r["cwd"] for r in ours} == {str(offline_env.cwd)}
    listed = [r for r in rows if r["pid"] in machinery]  # neither the daemon nor its hosts or spares
    assert not listed, [(r, _cmdline(r["pid"])) for r in listed]

    text = _ps(env)
    assert text.returncode == 0, text.stderr
    for short in shorts:
        assert sum(f"(unguarded, background {short})" in line for line in text.stdout.splitlines()) == 1
    assert not any(line.split()[0] == str(daemon) for line in text.stdout.splitlines()[1:] if line.strip())

    # The sessions outlive a daemon stopped alone (observed): they are still listed, from the
    # CLI's own records, and the orphaned pty hosts are not.
    os.kill(daemon, signal.SIGTERM)
    wait_until(lambda: bg.proc_start(daemon) is None and bg.daemon_pid(cfg) is None, 60, what="the daemon to exit")
    assert all(bg.proc_start(pid) is not None for pid in agents.values())
    hosts = set(bg.live_processes(env)) - set(agents.values())
    rows = json.loads(_ps(env, "--json").stdout)
    ours = _ours(rows, cfg)
    assert sorted((r["short_id"], r["pid"]) for r in ours) == sorted(agents.items())
    assert all(r["daemon_pid"] is None for r in ours)
    assert not hosts & {r["pid"] for r in rows}
