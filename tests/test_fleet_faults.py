"""Redis is never on the critical path of safety: with redis-server killed, restarted empty (no
persistence), emptied by FLUSHALL, or paused (CLIENT PAUSE) longer than a request's deadline,
the calls still end by their own deadlines, local answers keep working, the owner publishes its
waiting requests again when Redis is back, and nothing is lost, answered twice or hung."""

from __future__ import annotations

import time

import pytest

from claudeguard import channel
from claudeguard.fleet.client import FleetClient, FleetError
from claudeguard.testing.redis_server import wait_port_free
from claudeguard.testing.wait import wait_until



def listed(client):
    return {v["id"] for v in client.requests()}


def listed_when_reachable(client):
    try:
        return listed(client)
    except FleetError:  # still paused
        return None


def status(machine):
    seen = len(machine.of("status"))  # counted before asking: the answer may come at once
    machine.send({"op": "status"})
    return machine.wait_for(lambda e: e["ev"] == "status", 60, "status", seen + 1)[-1]


def assert_each_done_once(machine, ids):
    for rid in ids:  # the machine reports a call's end after the approver heard "applied": wait for each
        machine.done(rid)
    assert sorted(e["id"] for e in machine.of("done")) == sorted(ids)
    applied = [e["id"] for e in machine.of("applied") if e["applied"]]
    assert len(applied) == len(set(applied))


def test_redis_killed_while_requests_wait_and_restarted_empty(fleet, redis_server, monkeypatch):
    alpha = fleet.machine("alpha")
    ids = alpha.post(4, timeout=120)
    bob_cfg = fleet.approver_config("bob")
    with FleetClient(bob_cfg) as bob:
        wait_until(lambda: listed(bob) == set(ids), 60, "four listed")
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", alpha.runtime_dir)

    redis_server.kill()
    wait_until(lambda: not status(alpha)["connected"]["pub"], 60, "the link sees Redis gone")
    # Local answering works with Redis gone, at the channel's speed.
    started = time.monotonic()
    channel.answer(ids[0], "allow", by="local-approver")
    assert alpha.done(ids[0], timeout=60)["by"] == "local-approver"
    assert time.monotonic() - started < 60 < 120  # answered, not ended by its deadline
    # An approver is told at once that it cannot answer; nothing is sent.
    with FleetClient(bob_cfg, io_timeout=2) as bob:
        with pytest.raises(FleetError, match="ConnectionError"):
            bob.answer(ids[1], "allow")

    # Back, empty (nothing was saved): the users come back (as an operator would restore them),
    # and the owner publishes exactly the requests still waiting.
    wait_port_free(redis_server.port)
    redis_server.start()
    fleet.restore_users()
    with FleetClient(bob_cfg) as bob:
        wait_until(lambda: listed(bob) == set(ids[1:]), 60, "the three waiting requests published again")
        assert bob.answer(ids[1], "allow", scope="session")["applied"]
        channel.answer(ids[2], "deny", by="local-approver")
        assert bob.answer(ids[3], "deny")["applied"]
        with pytest.raises(Exception, match="already answered by local-approver on alpha"):
            bob.answer(ids[2], "allow")
        wait_until(lambda: listed(bob) == set(), 60, "nothing left listed")
    assert [alpha.done(rid)["decision"] for rid in ids] == ["allow", "allow", "deny", "deny"]
    assert alpha.done(ids[1])["by"].startswith("fleet:cg-a-bob@")
    assert_each_done_once(alpha, ids)


def test_a_database_emptied_under_the_link_is_filled_again(fleet, redis_server):
    alpha = fleet.machine("alpha")
    ids = alpha.post(3, timeout=120)
    with fleet.client("bob") as bob:
        wait_until(lambda: listed(bob) == set(ids), 60, "three listed")
        admin = redis_server.admin()
        try:
            admin.flushall()
        finally:
            admin.close()
        assert listed(bob) == set()
        # The next heartbeat (0.5 s here, 2 s by default) finds its own key gone.
        wait_until(lambda: listed(bob) == set(ids), 60, "published again after FLUSHALL")
        for rid in ids:
            assert bob.answer(rid, "allow")["applied"]
    assert_each_done_once(alpha, ids)


PAUSE_S = 15  # Redis paused this long: the short request's 3 s deadline falls well inside it, even on a loaded machine


def test_client_pause_longer_than_a_deadline(fleet, redis_server, monkeypatch):
    alpha = fleet.machine("alpha")
    [short] = alpha.post(1, timeout=3)
    longer = alpha.post(2, timeout=120)
    bob_cfg = fleet.approver_config("bob")
    with FleetClient(bob_cfg) as bob:
        wait_until(lambda: listed(bob) == {short, *longer}, 60, "three listed")
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", alpha.runtime_dir)

    admin = redis_server.admin()
    try:
        admin.client_pause(PAUSE_S * 1000)  # every client, the link's and the approvers'
    finally:
        admin.close()
    paused = time.monotonic()
    # Local answers keep working during the pause.
    channel.answer(longer[0], "deny", by="local-approver")
    assert alpha.done(longer[0], timeout=3)["decision"] == "deny"
    # An approver during the pause fails within its own bound, having applied nothing.
    with FleetClient(bob_cfg, io_timeout=1) as bob:
        with pytest.raises(FleetError, match="TimeoutError"):
            bob.answer(longer[1], "allow")
    assert time.monotonic() - paused < PAUSE_S - 5
    # The short request ends at its own deadline (3 s), not when Redis comes back.
    done = alpha.done(short, timeout=PAUSE_S)
    assert done["decided_by"] == "timeout"
    assert done["waited_s"] < PAUSE_S - 5
    assert time.monotonic() - paused < PAUSE_S - 2  # Redis is still paused

    # After the pause: the expired request is not listed again, the waiting one is answerable.
    with FleetClient(bob_cfg) as bob:
        wait_until(lambda: listed_when_reachable(bob) == {longer[1]}, 60,
                   "only the waiting request listed after the pause")
        assert bob.answer(longer[1], "allow")["applied"]
    assert alpha.done(longer[1])["decision"] == "allow"
    assert_each_done_once(alpha, [short, *longer])
    assert [e for e in alpha.of("applied")] == [e for e in alpha.of("applied") if e["id"] == longer[1]]


def test_a_link_refused_by_the_acl_backs_off_and_says_why(fleet, tmp_path):
    import os

    from claudeguard.fleet.config import fleet_settings
    from claudeguard.fleet.link import FleetLink

    user, password = fleet.member_user("alpha")
    secret = tmp_path / "member.pw"
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, password.encode())
    os.close(fd)
    # Its ACL is for machine alpha; configured as another machine, every write is NOPERM.
    cfg = fleet_settings({"url": fleet.server.url, "username": user, "password_file": str(secret),
                          "machine": "not-alpha", "prefix": "cgtest"}, environ={})
    link = FleetLink(cfg, lambda *a: {"applied": False, "reason": "unused"})
    link.start()
    try:
        link.heartbeat([{"session_id": "s", "state": object()}])  # not JSON: published as its str()
        wait_until(lambda: link.status()["last_error"], 60, "the link's error")
        started = time.monotonic()
        time.sleep(3)
        status = link.status()
        took = time.monotonic() - started
        assert "NoPermissionError" in status["last_error"]
        assert status["connected"]["pub"] is False
        # a backoff, not a loop: 0.25 + 0.5 + 1 + 2 ... (reconnects included) in 3 s, both threads
        assert status["failures"] <= 12, status
        assert took < 3 + 10  # status() does not wait on the failing link
    finally:
        link.stop()
    assert all(not t.is_alive() for t in link._threads)
