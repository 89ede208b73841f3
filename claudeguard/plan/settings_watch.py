"""The settings watch of a session the launcher supervises (docs/design.md, "Claude Code's own
settings"): every settings file the CLI re-reads, judged the moment it changes, against what the
session started with (``plan.settings_sources``, ``plan.repo_code``); the gate waits for its word
before deciding a call under changed settings (``gate.settings_check``).

The CLI applies a changed settings file once it has been still for 1 s (its watcher's
``stabilityThreshold``, 1000 ms in the pinned versions; docs/notes/cli-surfaces.md section 2), so
a watch that notices within ``WATCH_INTERVAL`` stops the session while the guard's hooks still
answer; the gate's check closes what a stalled watch would leave open.
"""

from __future__ import annotations

import os
import sys

from claudeguard.errors import UsageError
from claudeguard.plan.settings_sources import (
    OVERRIDDEN, REPORT, WATCH_INTERVAL, WORKTREES, Source, _read, check, env_findings, findings, managed_dir,
    mode_chosen, protected_files, repo_root, sources,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Collection
    from typing import Any

    from claudeguard.config.load import Config
    from claudeguard.plan.claude_args import ClaudeArgs


class _View:
    """What the watch compares: the findings, each loaded source's permission rules and mode, and
    the repository code the session would run that the user has not trusted."""

    __slots__ = ("findings", "rules", "code")

    def __init__(self, findings: set[tuple[str, str]], rules: dict[str, tuple[dict[str, frozenset[str]], int]],
                 code: list[str]) -> None:
        self.findings = findings  # (line, action)
        self.rules = rules  # source -> its permission lists and mode rank (_rules_of)
        self.code = code  # lines of untrusted code in a source the session loads


RULE_KINDS = ("deny", "ask")


def _rules_of(data: dict[str, Any]) -> tuple[dict[str, frozenset[str]], int]:
    """A source's permission lists and the rank of its default mode (-1: none)."""
    from claudeguard.config.load import mode_rank

    perms = data.get("permissions")
    perms = perms if isinstance(perms, dict) else {}
    lists: dict[str, frozenset[str]] = {}
    for kind in RULE_KINDS:
        value = perms.get(kind)
        lists[kind] = frozenset(r for r in value if isinstance(r, str)) if isinstance(value, list) else frozenset()
    mode = perms.get("defaultMode")
    return lists, mode_rank(mode) if isinstance(mode, str) else -1


def _loosened(before: dict[str, tuple[dict[str, frozenset[str]], int]],
              after: dict[str, tuple[dict[str, frozenset[str]], int]]) -> str | None:
    """What got looser from ``before`` to ``after``: a deny or ask rule removed, a looser default
    mode. An allow rule added is not: the CLI itself writes one into settings.local.json when the
    person at the keyboard answers "don't ask again", and the guard takes the CLI's allow rules
    at the start only (``claude_allow``), deciding every call itself."""
    empty = _rules_of({})
    for where in sorted(set(before) | set(after)):
        (old, old_mode), (new, new_mode) = before.get(where, empty), after.get(where, empty)
        for kind in ("deny", "ask"):
            dropped = sorted(old[kind] - new[kind])
            if dropped:
                return f"{where}: permissions.{kind}: drops {dropped[0]!r}"
        if new_mode > max(old_mode, -1) and new_mode > mode_rank_default():
            return f"{where}: permissions.defaultMode: looser than before"
    return None


def mode_rank_default() -> int:
    from claudeguard.config.load import mode_rank

    return mode_rank("default")


class Watch:
    """Watches every settings file the run's CLI re-reads (the user's, the project's, a
    worktree's, ``--project-config-root``'s, the repository root's local file, a ``--settings``
    file, the managed ones, and the project's agent files). A change is judged at once: one that
    silences or loosens the guard (a source it would refuse, a new finding, repository code the
    user has not trusted in a source the session loads, a deny or ask rule dropped, a looser
    default mode) ends the session as compromised: one stderr line, an audit
    row, the CLI's process tree stopped (its exit is a signal's: non-zero). Any other change (a
    `git checkout` that only tightens) is recorded as checked for the gate, which waits for that
    word before deciding a call (``gate.settings_check``)."""

    def __init__(self, args: ClaudeArgs, cfg: Config, cwd: str, child_pid: int, managed: str | None = None,
                 session_id: str | None = None, session_dir: str | None = None,
                 dropped: Collection[str] | None = None) -> None:
        import threading

        self.args, self.cfg, self.cwd, self.child_pid, self.managed = args, cfg, cwd, child_pid, managed
        self.session_id, self.session_dir = session_id, session_dir
        if dropped is None:  # not handed over by the session's plan: read as the plan read it
            from claudeguard.plan.repo_code import treat

            dropped = treat(args, cwd).drop
        self.dropped = set(dropped)  # the sources the CLI does not load (untrusted code)
        self.compromised: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="claudeguard-settings-watch", daemon=True)
        # The state judged at the start is the state the thread compares with: a change that
        # lands before the thread runs is still a change.
        self._seen = self._record()
        self._baseline = self._view()

    def _paths(self) -> tuple[list[str], list[str]]:
        from claudeguard.plan.repo_code import agent_files, _bases

        base = self.managed or managed_dir()
        drop = os.path.join(base, "managed-settings.d")
        try:
            dropins = [os.path.join(drop, n) for n in sorted(os.listdir(drop))]
        except OSError:
            dropins = []
        files = protected_files(self.args, self.cwd) + [os.path.join(base, "managed-settings.json"), *dropins]
        dirs = [drop, os.path.join(repo_root(self.cwd), WORKTREES)]
        files += [path for _, path in self._worktree_files()]
        dirs += [os.path.join(b, ".claude", "agents") for b in _bases(self.args, self.cwd)]
        files += agent_files(self.args, self.cwd)
        return list(dict.fromkeys(files)), dirs

    def _view(self) -> _View:
        from claudeguard.plan.repo_code import Code, find, settings_code

        from claudeguard.config.trust import load as load_trust

        env = dict(os.environ)
        srcs = sources(self.args, self.cwd, env, self.managed)
        loaded = [src for src in srcs if src.loaded and src.name not in self.dropped]
        records = load_trust()
        code = [c.line() for c in find(self.args, self.cwd, records)
                if not c.trusted and c.role not in ("mcp", "plugin") and not (
                    c.role in self.dropped or (c.role == "agent" and "project" in self.dropped))]
        # Any worktree's files: the session may enter one (EnterWorktree) and read them then.
        known = {src.where for src in srcs}
        for role, path in self._worktree_files():
            data, _ = _read(path)
            if data is None or path in known or role in self.dropped:
                continue
            loaded.append(Source(role, path, data, True))
            what = settings_code(data)
            if what and not records.trusted(path):
                code.append(Code(path, role, what, False).line())
        found = findings(self.args, loaded, mode_chosen=mode_chosen(self.args, self.cfg)) + env_findings(self.args, env)
        lines = {(f.line(), f.action) for f in found if f.action not in (OVERRIDDEN, REPORT)}
        rules = {src.where: _rules_of(src.settings) for src in loaded if src.name not in ("managed",)}
        return _View(lines, rules, code)

    def _worktree_files(self) -> list[tuple[str, str]]:
        trees = os.path.join(repo_root(self.cwd), WORKTREES)
        try:
            names = sorted(os.listdir(trees))
        except OSError:
            return []
        return [(role, os.path.join(trees, name, ".claude", file)) for name in names
                for role, file in (("project", "settings.json"), ("local", "settings.local.json"))]

    def _record(self, state: dict[str, object] | None = None) -> tuple[dict[str, object], dict[str, object]]:
        """Record ``state`` (taken before it was judged; default: now) as checked for the gate
        (the session dir); its files and dirs (each by path), the watch's ``_seen``."""
        from claudeguard.gate.settings_check import record, snapshot

        state = snapshot(*self._paths()) if state is None else state
        if self.session_dir:
            try:
                record(self.session_dir, state)
            except OSError:
                pass  # the session dir is gone: the session is ending
        files, dirs = state["files"], state["dirs"]
        assert isinstance(files, dict) and isinstance(dirs, dict)  # as snapshot() makes them
        return files, dirs

    def start(self) -> "Watch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def judge(self) -> str | None:
        """Why the settings as they are now silence or loosen the guard; None when they do not."""
        try:
            check(self.args, self.cfg, self.cwd, managed=self.managed)
        except UsageError as exc:
            return str(exc)
        now = self._view()
        new = sorted(now.findings - self._baseline.findings)
        if new:
            return f"{new[0][0]}: {'refused by lockdown' if self.cfg.lockdown.value else 'not there at the start'}"
        fresh = [line for line in now.code if line not in self._baseline.code]
        if fresh:
            return fresh[0]
        looser = _loosened(self._baseline.rules, now.rules)
        if looser is not None:
            return looser
        self._baseline = now
        return None

    def _run(self) -> None:
        from claudeguard.gate.settings_check import snapshot

        while not self._stop.wait(WATCH_INTERVAL):
            # The files and dirs of the state last checked, looked at again; they are worked out
            # anew only when something changed: every name read from a dir (a drop-in, a
            # worktree's files, an agent file) comes from a dir whose listing the state holds, so
            # a new one changes the state first. Worked out each round, they took 1-3 ms of the
            # launcher's CPU five times a second beside the CLI.
            state = snapshot(*self._seen)
            if (state["files"], state["dirs"]) == self._seen:
                continue
            state = snapshot(*self._paths())  # taken before judge() reads the files
            why = self.judge()
            if why is None:
                # checked: the gate may decide calls again (a change that landed while judging
                # differs from this state, and is judged on the next round)
                self._seen = self._record(state)
                continue
            self.compromised = why
            print(f"claudeguard: compromised: {why}; written during the session: stopping the CLI", file=sys.stderr,
                  flush=True)
            from claudeguard.channel import audit

            audit.record({"event": "compromised", "session_id": self.session_id, "decision": "compromised",
                          "decided_by": "settings-watch", "summary": f"{why}; written during the session"})
            from claudeguard.watchdog.sampler import kill_tree

            if self.child_pid > 0:
                kill_tree(self.child_pid, 2.0)
            return
