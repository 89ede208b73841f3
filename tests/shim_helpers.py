"""Helpers for running claudeguard itself in tests (not fixtures: plain functions)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from claudeguard.testing.wait import wait_until  # the tests' one wait (re-exported)

REPO = Path(__file__).resolve().parent.parent
GUARD = [sys.executable, "-m", "claudeguard"]
CTL = [sys.executable, "-m", "claudeguard.commands.ctl"]


def remove_at_once(path: Path | str) -> None:
    """Remove a dir the guard keeps (a runtime dir, the channel's) as a logout or a tmp cleaner
    does, gone in one step: renamed aside, then removed. A plain ``rmtree`` walks it while the
    guard, noticing the loss, makes it again, and fails with ENOTEMPTY (seen in CI)."""
    path = Path(path)
    aside = path.with_name(f"{path.name}.removed-{time.monotonic_ns()}")
    path.rename(aside)
    shutil.rmtree(aside, ignore_errors=True)  # what the guard wrote there by a dir fd may stay: in tmp


def print_asker_of(cli_version: str) -> str:
    """Who asks (the audit row's ``via``) about a main-agent call no rule decides in -p on
    ``cli_version`` (docs/design.md, "Who asks in -p"): the PreToolUse hook itself from 2.1.330 on
    (where the PermissionRequest hook is the session's asker, a PreToolUse "ask" denies the call
    without firing it), else the prompt tool, which the hook's "ask" hands the call to."""
    from claudeguard.plan.discovery import version_at_least
    from claudeguard.plan.hooks import PERMISSION_REQUEST_IN_PRINT

    return "hook" if version_at_least(cli_version, PERMISSION_REQUEST_IN_PRINT) else "prompt-tool"


_HASHES: dict[tuple[str, tuple[int, ...]], str] = {}  # a binary's SHA-256 by path and stat key, once a run


def mark_verified(env: dict, cli: Path | str) -> None:
    """Record ``cli`` as verified in ``env``'s state dir, as a passed ``doctor --verify`` would: for
    tests of other things under lockdown (which refuses an unverified CLI, plan/verified.py)."""
    import os

    from claudeguard.plan import verified

    path = os.path.realpath(cli)
    key = verified.stat_key(path)
    assert key is not None, path
    if (path, tuple(key)) not in _HASHES:
        _HASHES[(path, tuple(key))] = verified.sha256_file(path)
    sha = _HASHES[(path, tuple(key))]
    state = env.get("XDG_STATE_HOME") or os.path.join(env["HOME"], ".local", "state")
    saved = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = state
    try:
        verified.remember(path, key, sha, None)
        verified.save_record({"cli_version": None, "sha256": sha, "ok": True, "checks": [], "path": path})
    finally:
        if saved is None:
            del os.environ["XDG_STATE_HOME"]
        else:
            os.environ["XDG_STATE_HOME"] = saved


def guarded_env(env: dict, real_claude: Path, **extra: str) -> dict:
    """The offline env plus the real CLI for claudeguard to find, and a short approval timeout."""
    out = dict(env)
    out["CLAUDEGUARD_CLAUDE"] = str(real_claude)
    out.update(extra)
    return out



def plain_env(tmp_path: Path, config: str | None = None, **extra: str) -> dict:
    """A minimal environment below ``tmp_path`` (HOME, XDG_CONFIG_HOME, the runtime and log dirs,
    PATH), with ``config`` as the user config file if given, and a ``work`` dir that is a git
    checkout: the environment a command-line test runs claudeguard in."""
    (tmp_path / "work" / ".git").mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "CLAUDEGUARD_RUNTIME_DIR": str(tmp_path / "rt"), "CLAUDEGUARD_LOG_DIR": str(tmp_path / "log"),
           "CLAUDEGUARD_AUTO_VERIFY": "0", **extra}
    if config is not None:
        write_user_config(env, config)
    return env


def write_user_config(env: dict, text: str) -> Path:
    """The user config file of an offline env (XDG_CONFIG_HOME points inside its HOME)."""
    path = Path(env["XDG_CONFIG_HOME"]) / "claudeguard" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def pending(env: dict) -> list[dict]:
    """`claudeguardctl pending --json`, run as a separate process like a user or script would."""
    out = subprocess.run(CTL + ["pending", "--json"], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


class PendingLook:
    """`claudeguardctl pending --json` for a poll loop: ctl runs when the channel dir's request
    files changed since it last ran (or 2 s later), not at every poll. A Python start each (~110
    ms of CPU) was 6.7 % of the suite's CPU when the tests ran it every 0.2 s while they waited."""

    def __init__(self, env: dict) -> None:
        root = env.get("CLAUDEGUARD_RUNTIME_DIR")
        self.env, self.channel_dir = env, (Path(root) / "channel" if root else None)
        self.names: list[str] | None = None
        self.at = 0.0

    def __call__(self, force: bool = False) -> list[dict] | None:
        """What ctl lists now; None when nothing can have changed since it last ran."""
        if self.channel_dir is not None and not force:
            try:
                names = sorted(n for n in os.listdir(self.channel_dir) if n.endswith(".json"))
            except OSError:
                names = []
            if names == self.names and time.monotonic() - self.at < 2.0:
                return None
            self.names, self.at = names, time.monotonic()
            if not names:
                return []
        return pending(self.env)


def wait_pending(env: dict, predicate=lambda r: True, timeout: float = 60) -> dict:  # type: ignore[no-untyped-def]
    """The first pending request matching ``predicate``, as `claudeguardctl pending --json` lists it."""
    look = PendingLook(env)
    return wait_until(lambda: next((req for req in (look() or []) if predicate(req)), None), timeout,
                      "a matching pending request", interval=0.1)


def ctl(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CTL + list(args), env=env, capture_output=True, text=True, timeout=60)


_NONE_LEFT: dict = {"none left": True}  # Approver._next's "the run is over" (wait_until wants a true value)


class Approver(threading.Thread):
    """Answers the next requests as they appear, in order: each item is ("approve", [args]) or
    ("deny", [args]); records what it saw. Stops after its list, after `timeout` (an error), or
    at ``finish``: a test that offers more answers than calls (a second request for a call
    would take one) calls it once the run has ended, when every request the run made is in the
    channel already."""

    def __init__(self, env: dict, answers: list[tuple[str, list[str]]], timeout: float = 90) -> None:
        super().__init__(daemon=True)
        self.env, self.answers, self.timeout = env, answers, timeout
        self.seen: list[dict] = []
        self.results: list[subprocess.CompletedProcess] = []
        self.error: BaseException | None = None
        self.run_over = threading.Event()

    def finish(self, timeout: float = 30) -> None:
        """The run has ended: answer what is still pending, then stop (and wait for it)."""
        self.run_over.set()
        self.join(timeout)
        assert not self.is_alive(), "the approver did not stop"

    def _next(self) -> dict | None:
        """The next request not answered yet; None once the run is over and none is left."""
        listed = PendingLook(self.env)

        def look() -> dict | None:
            over = self.run_over.is_set()  # first: a request made before the run ended is in this look
            seen = {s["id"] for s in self.seen}
            req = next((r for r in (listed(force=over) or []) if r["id"] not in seen), None)
            return req or (_NONE_LEFT if over else None)

        found = wait_until(look, self.timeout, "a new pending request", interval=0.1)
        return None if found is _NONE_LEFT else found

    def run(self) -> None:
        try:
            for verb, args in self.answers:
                req = self._next()
                if req is None:
                    return
                self.seen.append(req)
                self.results.append(ctl(self.env, verb, req["id"], *args))
        except BaseException as exc:  # noqa: BLE001 - reported by the test through .error
            self.error = exc


def run_guarded(env: dict, cwd: Path, prompt: str, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(GUARD + ["-p", prompt, "--output-format", "stream-json", "--verbose", *extra],
                          env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def results_of(proc: subprocess.CompletedProcess) -> list[dict]:
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return [m for m in lines if m.get("type") == "result"]
