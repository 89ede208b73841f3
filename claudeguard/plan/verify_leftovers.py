"""What a verification of the real CLI leaves behind, found by identity and removed (issue 37).

A verification (``commands/verify.py``: ``doctor --verify``, or the background one the service
starts) runs its bed in a temp dir ``<tmp>/claudeguard-verify-XXXX``: its own HOMEs, a runtime
dir with its own guard service, the CLIs it runs and, for ``--bg`` sessions, the CLI's background
daemon. Each process of the bed carries ``CLAUDEGUARD_VERIFY_OWNER=<pid>:<start>:<root>`` in its
environment (the launchers hand it to their services and CLIs, the CLIs to their daemon), and
the temp dir holds ``owner.json`` with the same owner. So whatever ends the verifying process
(done, a signal, its parent's death, its home removed), what belongs to it can be told from
everything else on the machine:

- the verifying process sweeps its own bed on the way out (``sweep``);
- the service sweeps a verification child of its own that died by a signal, and at its start
  every bed whose owner is gone (``clean_leftovers``): a temp dir with a dead owner, and a
  process marked with one (its dir may be gone with a removed home).

Processes are stopped by pid only while their start time is unchanged (SIGTERM, SIGKILL after a
grace period, rounds until none is left); then the CLI daemons' socket dirs of the bed's config
dirs and the temp dir go.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import tempfile
import time

from claudeguard.procs import process_start

PREFIX = "claudeguard-verify-"
OWNER_VAR = "CLAUDEGUARD_VERIFY_OWNER"
OWNER_FILE = "owner.json"
GRACE_S = 3.0


def owner_token(pid: int) -> str:
    """``<pid>:<start>`` of a live process ("" when it is gone)."""
    start = process_start(pid)
    return f"{pid}:{start}" if start is not None else ""


def owner_alive(owner: str) -> bool:
    pid, _, start = owner.partition(":")
    return pid.isdigit() and bool(start) and process_start(int(pid)) == start


def make_root() -> tuple[str, str]:
    """A new bed dir for this process: (root, the marker its processes carry)."""
    from claudeguard.files import write_atomic

    root = tempfile.mkdtemp(prefix=PREFIX)
    owner = owner_token(os.getpid())
    write_atomic(os.path.join(root, OWNER_FILE), json.dumps({"owner": owner}))
    return root, f"{owner}:{root}"


def _env_value(data: bytes, name: bytes) -> str | None:
    needle = name + b"="
    at = data.find(needle)
    while at > 0 and data[at - 1] != 0:
        at = data.find(needle, at + 1)
    if at < 0:
        return None
    end = data.find(b"\0", at)
    return data[at + len(needle):end if end >= 0 else None].decode("utf-8", "replace")


def _root_of_home(home: str) -> str | None:
    """The bed dir a HOME lies in (``.../claudeguard-verify-XXXX/<run>/home``), else None."""
    at = home.find("/" + PREFIX)
    if at < 0:
        return None
    end = home.find("/", at + 1)
    return home[:end] if end >= 0 else home


def _marked() -> dict[int, tuple[str, str, str]]:
    """This user's processes of a verification's bed: pid -> (start, owner, root). The owner is
    "" for a process known only by a HOME inside a bed (a program that cleaned its environment
    of the marker but kept HOME)."""
    me = os.getuid()
    out: dict[int, tuple[str, str, str]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            if os.stat(f"/proc/{pid}").st_uid != me:
                continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if OWNER_VAR.encode() not in data and PREFIX.encode() not in data:
            continue
        owner, root = "", None
        value = _env_value(data, OWNER_VAR.encode())
        if value:
            pid_s, _, rest = value.partition(":")
            start, _, root = rest.partition(":")
            owner = f"{pid_s}:{start}"
        if not root:
            root = _root_of_home(_env_value(data, b"HOME") or "")
        proc_start = process_start(pid)
        if proc_start is not None and root:
            out[pid] = (proc_start, owner, root)
    return out


def _descendants(pids: set[int]) -> dict[int, str]:
    """Every live descendant of ``pids`` (pid -> start), from one scan of /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                raw = fh.read()
            ppid = int(raw[raw.rfind(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out: dict[int, str] = {}
    todo = [c for p in pids for c in children.get(p, [])]
    while todo:
        pid = todo.pop()
        start = process_start(pid)
        if start is not None and pid not in out:
            out[pid] = start
            todo.extend(children.get(pid, []))
    return out


def _signal(targets: dict[int, str], sig: int) -> None:
    for pid, start in targets.items():
        if process_start(pid) == start:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def stop_owned(owner: str, root: str, *, grace: float = GRACE_S) -> list[int]:
    """Stop every process of the bed (marked with ``owner``, or with a HOME in ``root``) and
    their descendants, by pid and start time; the pids signalled. Never this process."""
    me = os.getpid()
    stopped: list[int] = []
    for _ in range(5):
        marked = {pid: start for pid, (start, who, where) in _marked().items()
                  if (who == owner or where == root) and pid != me}
        targets = {**marked, **_descendants(set(marked))}
        targets.pop(me, None)
        if not targets:
            break
        stopped.extend(p for p in targets if p not in stopped)
        _signal(targets, signal.SIGTERM)
        _signal(targets, signal.SIGCONT)  # a stopped process acts on its SIGTERM only when continued
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(process_start(p) == s for p, s in targets.items()):
            time.sleep(0.05)
        _signal(targets, signal.SIGKILL)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and any(process_start(p) == s for p, s in targets.items()):
            time.sleep(0.02)
    return stopped


def daemon_socket_dir(cfg_dir: str) -> str:
    """``/tmp/cc-daemon-<uid>/<sha256(config dir)[:8]>``: where the CLI (2.1.330 on) puts its
    background daemon's sockets, whatever TMPDIR says."""
    digest = hashlib.sha256(cfg_dir.encode()).hexdigest()[:8]
    return os.path.join("/tmp", f"cc-daemon-{os.getuid()}", digest)


def remove_root(root: str) -> None:
    """The bed's dir, and the socket dirs of the CLI daemons its HOMEs ran."""
    if os.path.basename(root.rstrip("/")).startswith(PREFIX):
        try:
            runs = os.listdir(root)
        except OSError:
            runs = []
        for run in runs:
            path = daemon_socket_dir(os.path.join(root, run, "home", ".claude"))
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
                try:
                    os.rmdir(os.path.dirname(path))  # only when no other daemon's dir is left
                except OSError:
                    pass
        shutil.rmtree(root, ignore_errors=True)


def sweep(marker: str) -> list[int]:
    """Stop what the bed of ``marker`` (``<pid>:<start>:<root>``) runs and remove its dir."""
    pid, _, rest = marker.partition(":")
    start, _, root = rest.partition(":")
    stopped = stop_owned(f"{pid}:{start}", root)
    if root:
        remove_root(root)
    return stopped


def leftovers() -> list[str]:
    """Markers of the beds whose owner is gone: a temp dir of ours with a dead owner, a process
    marked with one."""
    found: dict[str, None] = {}
    tmp = tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(tmp) if n.startswith(PREFIX)]
    except OSError:
        names = []
    me = os.getuid()
    for name in names:
        root = os.path.join(tmp, name)
        try:
            st = os.lstat(root)
        except OSError:
            continue
        if st.st_uid != me or not os.path.isdir(root) or os.path.islink(root):
            continue
        try:
            with open(os.path.join(root, OWNER_FILE)) as fh:
                owner = str(json.load(fh).get("owner") or "")
        except (OSError, ValueError, AttributeError):
            owner = ""
        if owner and owner_alive(owner):
            continue
        if not owner and time.time() - st.st_mtime < 60:
            continue  # being made: its owner.json comes right after the dir
        found[f"{owner or '0:'}:{root}"] = None
    for _, owner, root in _marked().values():
        if owner and owner_alive(owner):
            continue
        if not owner:
            try:
                with open(os.path.join(root, OWNER_FILE)) as fh:
                    owner = str(json.load(fh).get("owner") or "")
            except (OSError, ValueError, AttributeError):
                owner = ""
            if owner and owner_alive(owner):
                continue
        found[f"{owner or '0:'}:{root}"] = None
    return list(found)


def clean_leftovers() -> list[str]:
    """Sweep every bed whose owner is gone; the markers swept."""
    swept = leftovers()
    for marker in swept:
        sweep(marker)
    return swept
