"""The session a callback belongs to: the snapshot the shim wrote, grants, and guard events.

The shim writes ``session.json`` (policy spec, approval settings) into the session directory
before it starts the CLI; a command hook or the stdio prompt tool is told the directory on its
own command line (``--session-dir``), the service knows it from the registration, and nothing
is taken from the environment (any settings source's ``env`` block sets that). Without one (a
hook wired up by hand, outside claudeguard) the config is loaded from the event's cwd.
"""

from __future__ import annotations

import json
import os
import time

from claudeguard.files import append_line, read_json, write_atomic

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, TypedDict

    from claudeguard.config.schema import ApprovalSettings, PolicySpec
    from claudeguard.events import GuardEventKind

    class Snapshot(TypedDict, total=False):
        """``session.json``: what the launcher (or the service's planner) wrote for the session's
        hooks (``plan.session.session_file``), or the ad-hoc one of a hook outside a session
        (``current_session``); the service adds ``cli_short_id`` to a ``--bg`` session's."""

        session_id: str
        pid: int  # the launcher's
        cwd: str
        policy: PolicySpec
        approval: ApprovalSettings
        forever_file: str  # where `approve --forever` writes (the user's config file)
        print_mode: bool
        asker: str | None  # who answers a call the CLI asks about in -p (plan.hooks.print_asker)
        interactive: bool
        pty: bool  # the launcher's pty router owns its dialogs' requests (held)
        host: str | None  # "stdio": the caller's own prompt asks first (shim/host_prompt.py)
        memory_rules_held: bool  # the CLI holds its Read rules on memory imports (policy/memory_imports.py)
        log_dir: str | None  # the audit log's directory in the launcher's environment
        prepared_by: str  # "launcher" | "planner"
        hooks: str  # "http" (the service answers them) | "command"
        kind: str  # "background" for a --bg session or a child of agent view
        agent_view: str  # a child of agent view: the view's session id
        cli_short_id: str  # a --bg session: the id `claude agents` shows
        mode: ModeSpec  # the permission mode the run asked for and the one the CLI was given
        proof_of_life: bool  # an asker ends the session if no hook fired before it (gate/proof.py)

    class ModeSpec(TypedDict, total=False):
        """``session.json`` ``mode`` (``plan.session.session_snapshot``; gate/modes.py reads it)."""

        asked: str  # what the caller, the config or a settings file asked for
        by: str  # who asked for it
        cli: str  # what the CLI was given (allows no more than `default`: plan/argv.py)
        dirs: list[str]  # the working directories (cwd, each --add-dir), absolute


class Session:
    """The session a callback serves (a plain class, and ``dir`` a str: no dataclasses or
    pathlib on the hook's path)."""

    def __init__(self, id: str, dir: str | None, snapshot: Snapshot) -> None:
        self.id = id
        self.dir = dir
        self.snapshot = snapshot

    @property
    def approval(self) -> ApprovalSettings:
        """The snapshot's ``approval``; its keys may be missing in a snapshot written by hand."""
        return self.snapshot.get("approval") or {}

    @property
    def policy_spec(self) -> PolicySpec:
        return self.snapshot.get("policy") or {}


def load_session(directory: str) -> Session:
    """The session whose snapshot the launcher wrote into ``directory``."""
    fd = os.open(os.path.join(directory, "session.json"), os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd) as fh:
        snapshot: Snapshot = json.load(fh)  # written by plan.session (a reader meets a bad one as a deny)
    return Session(snapshot.get("session_id") or os.path.basename(directory.rstrip("/")), directory, snapshot)


def current_session(event_cwd: str | None = None, cli_session_id: str | None = None,
                    directory: str | None = None) -> Session:
    """The guarded session in ``directory`` (a callback's ``--session-dir``), or an ad-hoc one
    built from the config files."""
    if directory:
        return load_session(directory)
    from pathlib import Path

    from claudeguard.config.load import env_overrides, load_config

    cwd = Path(event_cwd or os.getcwd())
    cfg = load_config(cwd, env_overrides())
    snapshot: Snapshot = {
        "session_id": cli_session_id or "unguarded",
        "cwd": str(cwd),
        "policy": cfg.policy_spec(),
        "approval": cfg.approval(),
        "forever_file": str(cfg.searched[0][1]),
    }
    return Session(cli_session_id or "unguarded", None, snapshot)


def _append(path: str, record: dict[str, Any]) -> None:
    append_line(path, (json.dumps(record, separators=(",", ":")) + "\n").encode())


def record_event(session: Session, event: GuardEventKind, **fields: object) -> None:
    """One JSON line in ``events.jsonl`` for the watchdog (``claudeguard.events``: the record's
    type, shared with its reader); never fails the callback."""
    if session.dir is None:
        return
    try:
        _append(os.path.join(session.dir, "events.jsonl"), {"time": time.time(), "event": event, **fields})
    except OSError:
        pass


def load_grants(session: Session) -> list[dict[str, Any]]:
    if session.dir is None:
        return []
    try:
        fd = os.open(os.path.join(session.dir, "grants.jsonl"), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return []
    with os.fdopen(fd) as fh:
        out = []
        for line in fh:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


def add_grants(session: Session, rules: list[str], *, kind: str, scope: str, agent_type: str | None,
               request_id: str | None) -> None:
    if session.dir is None:
        return
    for rule in rules:
        _append(
            os.path.join(session.dir, "grants.jsonl"),
            {"rule": rule, "kind": kind, "scope": scope, "agent_type": agent_type, "request_id": request_id},
        )


def remember_call(session: Session, tool_use_id: str | None, info: dict[str, Any]) -> None:
    """PreToolUse knows which agent asks; the prompt tool only gets the tool_use_id."""
    if session.dir is None or not tool_use_id or "/" in tool_use_id:
        return
    try:
        calls = os.path.join(session.dir, "calls")
        os.makedirs(calls, mode=0o700, exist_ok=True)
        # Written whole, then renamed: the prompt tool may read it while the hook rewrites it.
        write_atomic(os.path.join(calls, tool_use_id), json.dumps(info))
    except OSError:
        pass


def recall_call(session: Session, tool_use_id: str | None) -> dict[str, Any]:
    if session.dir is None or not tool_use_id or "/" in tool_use_id:
        return {}
    return read_json(os.path.join(session.dir, "calls", tool_use_id)) or {}


def record_answer(session: Session, tool_use_id: str | None, info: dict[str, Any], answer: dict[str, Any]) -> None:
    """A human's (or the deadline's) answer to this call, kept beside who asked: the CLI may
    ask again for the same call (its own copy of an ``ask`` rule sends it to the prompt tool or
    a dialog after the hook's allow), and that second ask must reuse this answer, not post."""
    remember_call(session, tool_use_id or "", {**info, "answer": answer})


def take_answer(session: Session, tool_use_id: str | None, digest: str,
                agent_id: str | None = None) -> dict[str, Any] | None:
    """The answer ``record_answer`` kept for this call, once: by ``tool_use_id`` when the asker
    has one (the prompt tool), else the oldest unused answer with the same input digest and
    agent (the PermissionRequest hook carries no tool_use_id). The answer is consumed."""
    if session.dir is None:
        return None
    if tool_use_id:
        names = [tool_use_id] if "/" not in tool_use_id else []
    else:
        try:
            names = os.listdir(os.path.join(session.dir, "calls"))
        except OSError:
            return None
    found: list[tuple[float, str, dict[str, Any]]] = []
    for name in names:
        info = recall_call(session, name)
        answer = info.get("answer")
        if not isinstance(answer, dict) or answer.get("digest") != digest or answer.get("used"):
            continue
        if not tool_use_id and info.get("agent_id") != agent_id:
            continue
        found.append((float(answer.get("time") or 0), name, info))
    if not found:
        return None
    _, name, info = min(found, key=lambda item: item[0])
    info["answer"] = {**info["answer"], "used": True}
    remember_call(session, name, info)
    answer_used: dict[str, Any] = info["answer"]
    return answer_used


def forget_call(session: Session, tool_use_id: str | None) -> None:
    forget_call_in(session.dir, tool_use_id)


def forget_call_in(directory: str | None, tool_use_id: str | None) -> None:
    """The call's note in ``<session dir>/calls`` has served (the call ended): the PostToolUse
    hook, or the watchdog where it reads the end from the transcript instead."""
    if directory is None or not tool_use_id or "/" in tool_use_id:
        return
    try:
        os.unlink(os.path.join(directory, "calls", tool_use_id))
    except OSError:
        pass
