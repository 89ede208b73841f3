"""What the fleet's test modules share: one real ``redis-server`` per module (fails under
``CI=true`` when the Debian package is missing, skips otherwise), real ACL users made with the
roles' documented ``ACL SETUSER`` lines, approver configs with a 0600 password file, and
simulated machines (``claudeguard.testing.fleet_machine``) that are stopped by pid."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any, Iterator

import pytest

from claudeguard.testing.redis_server import RedisServer, redis_server_path
from tests.conftest import in_ci

PREFIX = "cgtest"


def need_redis_server() -> None:
    if redis_server_path() is None:
        why = "redis-server is not installed (Debian package redis-server)"
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    need_redis_server()
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


class Fleet:
    """ACL users on one server (each made once) and the machines of one test (stopped at its end)."""

    def __init__(self, server: RedisServer, root: Path) -> None:
        self.server = server
        self.root = root
        self.passwords: dict[str, str] = {}
        self.machines: list[Any] = []
        self.lines: list[str] = []

    def acl(self, line: str) -> None:
        self.lines.append(line)
        self._run(line)

    def restore_users(self) -> None:
        """After a restart of the server (nothing persisted): the same users again."""
        for line in self.lines:
            self._run(line)

    def _run(self, line: str) -> None:
        admin = self.server.admin()
        try:
            admin.execute_command(*line.split())
        finally:
            admin.close()

    def member_user(self, machine: str) -> tuple[str, str]:
        from claudeguard.fleet.keys import member_acl

        user = f"cg-m-{machine}"
        if user not in self.passwords:
            self.passwords[user] = secrets.token_hex(16)
            self.acl(member_acl(PREFIX, machine, user, ">" + self.passwords[user]))
        return user, self.passwords[user]

    def approver_user(self, name: str) -> tuple[str, str]:
        from claudeguard.fleet.keys import approver_acl

        user = f"cg-a-{name}"
        if user not in self.passwords:
            self.passwords[user] = secrets.token_hex(16)
            self.acl(approver_acl(PREFIX, user, ">" + self.passwords[user]))
        return user, self.passwords[user]

    def machine(self, name: str, heartbeat_s: float = 0.5) -> Any:
        from claudeguard.testing.fleet_machine import FleetMachine

        user, password = self.member_user(name)
        machine = FleetMachine(self.root, name, url=self.server.url, username=user, password=password, prefix=PREFIX,
                               heartbeat_s=heartbeat_s)
        self.machines.append(machine)
        return machine

    def approver_config(self, name: str, machine: str | None = None) -> Any:
        """An approver's FleetConfig: its ACL user, its password in a 0600 file."""
        from claudeguard.fleet.config import fleet_settings

        user, password = self.approver_user(name)
        path = self.root / f"{user}.pw"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password + "\n")
        return fleet_settings({"url": self.server.url, "username": user, "password_file": str(path),
                               "machine": machine or f"desk-{name}", "prefix": PREFIX}, environ={})

    def client(self, name: str) -> Any:
        from claudeguard.fleet.client import FleetClient

        return FleetClient(self.approver_config(name))

    def stop(self) -> None:
        for machine in self.machines:
            machine.stop()
        self.machines.clear()


@pytest.fixture
def fleet(redis_server: RedisServer, tmp_path: Path) -> Iterator[Fleet]:
    if redis_server.proc is None or redis_server.proc.poll() is not None:  # a test that killed it failed
        from claudeguard.testing.redis_server import wait_port_free

        wait_port_free(redis_server.port)
        redis_server.start()
    f = Fleet(redis_server, tmp_path)
    admin = redis_server.admin()
    try:
        admin.flushall()  # each test starts from an empty database (users stay)
    finally:
        admin.close()
    try:
        yield f
    finally:
        f.stop()
