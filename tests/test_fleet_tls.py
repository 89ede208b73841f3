"""rediss://: the link and an approver over TLS to a real redis-server with a test CA (``ca_file``);
the server's certificate is checked (no CA: refused in one line, nothing published)."""

from __future__ import annotations

import os
import threading

import pytest

from claudeguard import channel
from claudeguard.fleet.client import FleetClient, FleetError
from claudeguard.fleet.config import fleet_settings
from claudeguard.fleet.keys import approver_acl, member_acl
from claudeguard.fleet.link import FleetLink, channel_apply
from claudeguard.fleet.model import done_from_answer, request_view
from claudeguard.testing.redis_server import RedisServer
from claudeguard.testing.wait import wait_until

from fleet_helpers import need_redis_server


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    need_redis_server()
    server = RedisServer(tmp_path_factory.mktemp("redis-tls"), tls=True).start()
    admin = server.admin()
    try:
        admin.execute_command(*member_acl("tls", "alpha", "cg-m-alpha", ">member-pw").split())
        admin.execute_command(*approver_acl("tls", "cg-a-bob", ">bob-pw").split())
    finally:
        admin.close()
    try:
        yield server
    finally:
        server.stop()


def config(server, tmp_path, user, password, machine, **more):
    path = tmp_path / f"{user}.pw"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password)
    return fleet_settings({"url": server.url, "username": user, "password_file": str(path), "machine": machine,
                           "prefix": "tls", **more}, environ={})


def test_a_request_answered_over_tls(tls_server, tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(run))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    member = config(tls_server, tmp_path, "cg-m-alpha", "member-pw", "alpha", ca_file=tls_server.ca_file)
    link = FleetLink(member, channel_apply, heartbeat_s=0.5)
    link.start()
    try:
        pending = channel.post(session_id="s", agent_type=None, agent_id=None, tool="Bash",
                               input={"command": "make release"}, summary="make release", cwd=str(tmp_path),
                               timeout=60)
        link.request_posted(request_view(pending.request, "alpha"))
        # The waiter judges each answer as it comes (channel/requests.py): it waits meanwhile, as a hook does.
        waited: list = []
        waiter = threading.Thread(target=lambda: waited.append(pending.wait()), daemon=True)
        waiter.start()
        approver = config(tls_server, tmp_path, "cg-a-bob", "bob-pw", "desk", ca_file=tls_server.ca_file)
        with FleetClient(approver) as bob:
            wait_until(lambda: [v["id"] for v in bob.requests()] == [pending.request.id], 60, "listed over TLS")
            assert bob.answer(pending.request.id, "allow")["applied"]
        waiter.join(60)
        [answer] = waited
        link.request_done(pending.request.id, done_from_answer(answer))
        assert (answer.decision, answer.decided_by) == ("allow", "human")
        assert answer.by.startswith("fleet:cg-a-bob@desk ")
    finally:
        link.stop()


def test_the_servers_certificate_is_checked(tls_server, tmp_path):
    # No ca_file: the system's CAs do not know the test CA.
    approver = config(tls_server, tmp_path, "cg-a-bob", "bob-pw", "desk")
    with FleetClient(approver) as bob:
        with pytest.raises(FleetError, match="certificate verify failed") as err:
            bob.requests()
    assert "\n" not in str(err.value) and "bob-pw" not in str(err.value)
    # The link refuses to talk to it too, and says why.
    member = config(tls_server, tmp_path, "cg-m-alpha", "member-pw", "alpha")
    link = FleetLink(member, channel_apply, heartbeat_s=0.5)
    link.start()
    try:
        wait_until(lambda: link.status()["last_error"], 60, "the link's error")
        assert "certificate verify failed" in link.status()["last_error"]
        assert link.status()["connected"] == {"pub": False, "inbox": False}
    finally:
        link.stop()
