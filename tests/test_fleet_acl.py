"""The roles' Redis ACLs (``keys.member_acl``, ``keys.approver_acl``), with real ACL users: an
approver cannot answer in another approver's name nor forge an owner's records; a member cannot
answer anything, its own requests included; what the owner audits as the author is the ACL user
of the stream's key, not what the answer says of itself."""

from __future__ import annotations

import json
import os

import pytest

from claudeguard.fleet.client import FleetClient, FleetError
from claudeguard.fleet.config import fleet_settings
from claudeguard.fleet.conn import NoPermission, connect
from claudeguard.fleet.keys import approver_acl
from claudeguard.testing.wait import wait_until

from fleet_helpers import PREFIX


def conn_as(fleet, user, password):
    path = fleet.root / f"{user}.conn.pw"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password)
    cfg = fleet_settings({"url": fleet.server.url, "username": user, "password_file": str(path), "machine": "x",
                          "prefix": PREFIX}, environ={})
    return connect(cfg, io_timeout=5)


def answer_entry(rid, sha, machine="alpha", **more):
    return {"a": json.dumps({"v": 1, "request_id": rid, "machine": machine, "call_sha256": sha, "decision": "allow",
                             "scope": "once", "valid_until_ms": 2**62, **more})}


def test_an_approver_cannot_write_an_answer_under_another_approvers_name(fleet):
    alpha = fleet.machine("alpha")
    [rid] = alpha.post(timeout=60)
    fleet.approver_user("carol")
    bob_user, bob_pw = fleet.approver_user("bob")
    with fleet.client("bob") as client:
        view = wait_until(lambda: {v["id"]: v for v in client.requests()}.get(rid), 60, "listed")
    bob = conn_as(fleet, bob_user, bob_pw)
    try:
        for key in (f"{PREFIX}:a:alpha:cg-a-carol", f"{PREFIX}:a:alpha:cg-a-carol:x", f"{PREFIX}:a:alpha:carol",
                    f"{PREFIX}:a:alpha:cg-a-bo", f"{PREFIX}:a:alpha:x-cg-a-bob"):
            with pytest.raises(NoPermission):
                bob.xadd(key, answer_entry(rid, view["call_sha256"]))
        # In its own stream it may claim anything about itself: the owner records the ACL user.
        bob.sadd(f"{PREFIX}:ax:alpha", "cg-a-bob")
        bob.xadd(f"{PREFIX}:bell:alpha", {"user": "cg-a-bob"})
        # a desk's provenance it vouches for is recorded as a claim too, never over the key's user
        vouched = {"via": "desk", "browser_session": "bs-" + "x" * 100, "acl_user": "cg-a-carol", "ref": "carol/1"}
        bob.xadd(f"{PREFIX}:a:alpha:cg-a-bob", answer_entry(rid, view["call_sha256"], acl_user="cg-a-carol",
                                                             sender={"machine": "carols-laptop", "uid": 4242},
                                                             vouched=vouched))
    finally:
        bob.close()
    done = alpha.done(rid)
    assert done["decision"] == "allow"
    [row] = wait_until(lambda: [r for r in alpha.audit() if r.get("event") == "fleet-answer"], 60, "the audit row")
    assert row["answered_by"]["acl_user"] == "cg-a-bob"  # the key's, not the claim's
    assert (row["answered_by"]["via"], row["answered_by"]["browser_session"]) == ("desk", ("bs-" + "x" * 100)[:64])
    assert row["answered_by"]["ref"].startswith("cg-a-bob/")
    assert done["answered_by"]["acl_user"] == "cg-a-bob" and done["answered_by"]["via"] == "desk"
    assert (row["answered_by"]["machine"], row["answered_by"]["uid"]) == ("carols-laptop", 4242)  # its claim, as such
    assert done["by"].startswith("fleet:cg-a-bob@carols-laptop ")


def test_a_member_cannot_answer_anything_its_own_requests_included(fleet):
    alpha, beta = fleet.machine("alpha"), fleet.machine("beta")
    [own] = alpha.post(timeout=60)
    [other] = beta.post(timeout=60)
    with fleet.client("bob") as client:
        views = wait_until(lambda: (v := {x["id"]: x for x in client.requests()}) and len(v) == 2 and v, 60, "listed")
    user, password = fleet.member_user("alpha")
    member = conn_as(fleet, user, password)
    try:
        for machine, rid in (("alpha", own), ("beta", other)):
            for key in (f"{PREFIX}:a:{machine}:{user}", f"{PREFIX}:a:{machine}:cg-a-bob", f"{PREFIX}:a:{machine}:x"):
                with pytest.raises(NoPermission):
                    member.xadd(key, answer_entry(rid, views[rid]["call_sha256"], machine=machine))
            with pytest.raises(NoPermission):
                member.sadd(f"{PREFIX}:ax:{machine}", user)
            with pytest.raises(NoPermission):
                member.xadd(f"{PREFIX}:bell:{machine}", {"user": user})
        # Nor can it touch another machine's records, or read them.
        for attempt in (lambda: member.hset(f"{PREFIX}:m:beta:reqs", "x", "{}"),
                        lambda: member.xadd(f"{PREFIX}:m:beta:results", {"r": "{}"}),
                        lambda: member.set(f"{PREFIX}:m:beta:hb", "{}", get=True),
                        lambda: member.smembers(f"{PREFIX}:ax:beta"),
                        lambda: member.xread({f"{PREFIX}:a:beta:cg-a-bob": "0-0"}),
                        lambda: member.flushall(), lambda: member.keys("*"), lambda: member.config_get("*"),
                        lambda: member.publish("x", "y"), lambda: member.acl_setuser(user, enabled=True)):
            with pytest.raises(NoPermission):
                attempt()
        # What it needs it has: its own records, the answers addressed to it.
        assert json.loads(member.set(f"{PREFIX}:m:alpha:hb", "{}", get=True))["machine"] == "alpha"
        member.xread({f"{PREFIX}:a:alpha:cg-a-bob": "0-0", f"{PREFIX}:bell:alpha": "0-0"})
    finally:
        member.close()
    # The approver's own command with a member's credentials: refused, one line, nothing applied.
    path = fleet.root / "member.pw"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password)
    cfg = fleet_settings({"url": fleet.server.url, "username": user, "password_file": str(path), "machine": "alpha",
                          "prefix": PREFIX}, environ={})
    with FleetClient(cfg) as as_member:
        with pytest.raises(FleetError, match="NoPermissionError") as err:
            as_member.answer(own, "allow", machine="alpha")
        assert "\n" not in str(err.value)
    assert alpha.of("applied") == [] and beta.of("applied") == []
    assert alpha.of("done") == [] and beta.of("done") == []


def test_an_approver_cannot_forge_an_owners_records(fleet):
    alpha = fleet.machine("alpha")
    [rid] = alpha.post(timeout=60)
    user, password = fleet.approver_user("bob")
    with fleet.client("bob") as client:
        wait_until(lambda: client.requests(), 60, "listed")
    bob = conn_as(fleet, user, password)
    try:
        fake = {"answer": f"{user}/1-0", "request_id": rid, "applied": True, "message": "applied"}
        for attempt in (lambda: bob.xadd(f"{PREFIX}:m:alpha:results", {"r": json.dumps(fake)}),
                        lambda: bob.hset(f"{PREFIX}:m:alpha:reqs", rid, "{}"),
                        lambda: bob.hset(f"{PREFIX}:m:alpha:done", rid, "{}"),
                        lambda: bob.delete(f"{PREFIX}:m:alpha:reqs"),
                        lambda: bob.set(f"{PREFIX}:m:alpha:hb", "{}"),
                        lambda: bob.zadd(f"{PREFIX}:machines", {"ghost": 1}),
                        lambda: bob.flushall(), lambda: bob.keys("*"), lambda: bob.config_set("save", ""),
                        lambda: bob.publish("x", "y")):
            with pytest.raises(NoPermission):
                attempt()
    finally:
        bob.close()
    assert alpha.of("done") == []


def test_an_approver_narrowed_to_some_machines_answers_only_those(fleet):
    ci, alpha = fleet.machine("ci-1"), fleet.machine("alpha")
    [on_ci] = ci.post(timeout=60)
    [on_alpha] = alpha.post(timeout=60)
    fleet.acl(approver_acl(PREFIX, "cg-a-ci-only", ">ci-only-pw", machines="ci-*"))
    path = fleet.root / "ci-only.pw"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("ci-only-pw")
    cfg = fleet_settings({"url": fleet.server.url, "username": "cg-a-ci-only", "password_file": str(path),
                          "machine": "desk", "prefix": PREFIX}, environ={})
    with FleetClient(cfg) as client:
        wait_until(lambda: len(client.requests()) == 2, 60, "both listed")
        assert client.answer(on_ci, "allow")["applied"]
        with pytest.raises(FleetError, match="NoPermissionError"):
            client.answer(on_alpha, "allow")
    assert ci.done(on_ci)["decision"] == "allow"
    assert alpha.of("applied") == [] and alpha.of("done") == []


def test_the_documented_acl_lines_are_the_tested_ones():
    from pathlib import Path

    from claudeguard.fleet.keys import member_acl

    root = Path(__file__).resolve().parent.parent
    readme, design = (root / "README.md").read_text(), (root / "docs" / "design.md").read_text()
    assert member_acl("claudeguard", "ci-runner-7", "cg-ci-runner-7", ">MEMBER-PASSWORD") in readme
    assert approver_acl("claudeguard", "cg-alice", ">APPROVER-PASSWORD") in readme
    assert member_acl("claudeguard", "ci-runner-7", "cg-ci-runner-7") in design
    assert approver_acl("claudeguard", "cg-alice") in design
