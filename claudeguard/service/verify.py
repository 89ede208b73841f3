"""The service's side of verifying the real CLIs it guards (issue 26): a guarded run of a CLI that
has not passed ``claudeguardctl doctor --verify`` leaves a request in ``<service dir>/verify/``
(``plan.verified.request``); the service takes the requests up every few seconds and runs the
verification in the background as its own child, one process at a time per binary:
``python -m claudeguard.commands.verify CLI`` (started by name: the commands layer is above
this one). That process hashes the binary itself, reuses a record its hash already has, else
verifies it and is the only writer of the record (``plan.verified``); a second one for the same
binary (another service, ``doctor --verify`` by hand) waits for the first's lock.
"""

from __future__ import annotations

import os
import subprocess
import sys

from claudeguard.files import read_json
from claudeguard.plan import verified

# How many requests one round takes up: a flood of request files (a process of this user writing
# them in a loop) costs the service a bounded amount of work per round.
MAX_PER_ROUND = 16


class Verifications:
    """The verifications the service runs: one child per binary (its stat key) at a time."""

    def __init__(self, directory: str) -> None:
        self.requests = os.path.join(directory, verified.REQUESTS)
        self.running: dict[tuple[str, tuple[int, ...]], subprocess.Popen[bytes]] = {}

    def take_requests(self) -> list[int]:
        """Start a verification for each CLI a launcher asked about that is not verified, failed
        or being verified already; the pids started. Finished children are reaped first."""
        self.reap()
        try:
            names = sorted(os.listdir(self.requests))[:MAX_PER_ROUND]
        except OSError:
            return []
        started = []
        for name in names:
            path = os.path.join(self.requests, name)
            data = read_json(path)
            try:
                os.unlink(path)
            except OSError:
                continue  # another service of this runtime dir took it
            cli = data.get("cli") if data is not None else None
            if isinstance(cli, str) and os.path.isabs(cli):
                pid = self.start(cli)
                if pid is not None:
                    started.append(pid)
        return started

    def start(self, cli: str) -> int | None:
        """Start verifying ``cli`` unless a verification of it runs or it has a record already."""
        key = verified.stat_key(cli)
        if key is None:
            return None
        slot = (cli, tuple(key))
        if slot in self.running:
            return None
        if verified.lookup(cli).state in (verified.VERIFIED, verified.FAILED):
            return None  # settled since the request was left
        # Not procs.spawn_detached: the service reaps this child itself, and its stderr (a crash)
        # goes to the service's log like the service's own.
        proc = subprocess.Popen([sys.executable, "-m", "claudeguard.commands.verify", cli],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd="/", close_fds=True,
                                start_new_session=True)
        self.running[slot] = proc
        print(f"claudeguard service: verifying {cli} in the background (pid {proc.pid})", file=sys.stderr, flush=True)
        return proc.pid

    def reap(self) -> None:
        for slot, proc in list(self.running.items()):
            if proc.poll() is not None:
                del self.running[slot]

    def status(self) -> list[dict[str, object]]:
        """The verifications running now (``service status``)."""
        self.reap()
        return [{"cli": cli, "pid": proc.pid} for (cli, _), proc in self.running.items()]
