"""The fleet end to end on a real redis-server, with machines simulated as processes of their
own (own HOME, runtime dir and log dir) that post real channel requests: listing, a remote
answer applied through the channel and audited with its author, the verdicts an approver gets,
the hash check, scopes, dialogs, heartbeats and machines that are gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from claudeguard import channel
from claudeguard.errors import NotFoundError
from claudeguard.fleet.client import FleetError
from claudeguard.fleet.model import call_sha256
from claudeguard.testing.wait import wait_until

from fleet_helpers import PREFIX

PENDING_JSON_FIELDS = ("id", "session_id", "agent_type", "agent_id", "tool", "input", "summary", "age_s", "deadline_s")


def listed(client, machine=None):
    return {v["id"]: v for v in client.requests(machine)}


def test_a_request_is_listed_with_its_machine_and_hash_and_answered_from_another_machine(fleet, monkeypatch):
    a = fleet.machine("alpha")
    [rid] = a.post(tool_input={"command": "git push origin main"}, timeout=60)
    with fleet.client("bob") as bob:
        views = wait_until(lambda: listed(bob) or None, 60, "the request listed")
        assert list(views) == [rid]
        view = views[rid]
        for field in PENDING_JSON_FIELDS + ("machine", "user", "uid", "cwd", "deadline", "call_sha256"):
            assert field in view, field
        assert view["machine"] == "alpha"
        assert view["input"] == {"command": "git push origin main"}
        assert view["call_sha256"] == call_sha256("Bash", {"command": "git push origin main"})
        assert view["cwd"] == str(a.root / "home")
        assert view["uid"] == os.getuid()
        assert 0 < view["deadline_s"] <= 60

        verdict = bob.answer(rid[:8], "allow", scope="session")
    assert verdict["applied"] is True
    done = a.done(rid)
    # The call on alpha got exactly this answer, through its channel.
    assert (done["decision"], done["scope"], done["decided_by"]) == ("allow", "session", "human")
    assert done["by"].startswith("fleet:cg-a-bob@desk-bob ")
    assert len(a.of("applied")) == 1
    # alpha's own audit log names the answering ACL user, machine and uid.
    [row] = wait_until(lambda: [r for r in a.audit() if r.get("event") == "fleet-answer"], 60, "the audit row")
    assert row["request_id"] == rid and row["applied"] is True and row["scope"] == "session"
    assert row["answered_by"]["acl_user"] == "cg-a-bob"
    assert row["answered_by"]["machine"] == "desk-bob"
    assert row["answered_by"]["uid"] == os.getuid()
    # Once answered it leaves the listing, and a second answer is told who won and when.
    with fleet.client("carol") as carol:
        wait_until(lambda: rid not in listed(carol), 60, "the answered request unlisted")
        with pytest.raises(NotFoundError) as err:
            carol.answer(rid, "deny")
    assert "already answered by cg-a-bob@desk-bob (uid" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_local_answer_wins_and_the_remote_one_is_told_so(fleet, monkeypatch):
    a = fleet.machine("alpha")
    [rid] = a.post(timeout=60)
    with fleet.client("bob") as bob:
        wait_until(lambda: rid in listed(bob), 60, "listed")
        monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", a.runtime_dir)
        channel.answer(rid, "deny", message="not today", by="claudeguardctl deny")
        done = a.done(rid)
        assert (done["decision"], done["by"]) == ("deny", "claudeguardctl deny")
        wait_until(lambda: rid not in listed(bob), 60, "unlisted")
        with pytest.raises(NotFoundError, match=r"already answered by claudeguardctl deny on alpha at \d\d:\d\d:\d\dZ"):
            bob.answer(rid, "allow")
    assert a.of("applied") == []  # the fleet answer never reached the channel


def test_the_owner_applies_only_an_answer_for_the_exact_call(fleet):
    a = fleet.machine("alpha")
    [rid] = a.post(tool_input={"command": "rm -r build"}, timeout=60)
    with fleet.client("bob") as bob:
        wait_until(lambda: rid in listed(bob), 60, "listed")
        with pytest.raises(FleetError, match="call_sha256 is not the one of the call waiting on alpha: approve "
                                             "exactly what was shown"):
            bob.answer(rid, "allow", shown_sha256=call_sha256("Bash", {"command": "rm -r /"}))
        assert a.of("applied") == []
        assert rid in listed(bob)  # still waiting, still answerable
        assert bob.answer(rid, "allow", shown_sha256=call_sha256("Bash", {"command": "rm -r build"}))["applied"]
    assert a.done(rid)["decision"] == "allow"
    rows = wait_until(lambda: (r := [r for r in a.audit() if r.get("event") == "fleet-answer"]) and len(r) == 2 and r,
                      60, "two audit rows")
    assert [r["applied"] for r in rows] == [False, True]
    assert "call_sha256" in rows[0]["reason"]


def test_forever_from_another_machine_is_refused_by_the_client_and_by_the_owner(fleet):
    a = fleet.machine("alpha")
    [rid] = a.post(timeout=60)
    cfg = fleet.approver_config("bob")
    from claudeguard.fleet.client import FleetClient

    with FleetClient(cfg) as bob:
        wait_until(lambda: rid in listed(bob), 60, "listed")
        with pytest.raises(FleetError) as err:
            bob.answer(rid, "allow", scope="forever")
        assert str(err.value) == (f"{rid} (alpha): --scope forever cannot be given from another machine: it would "
                                  "write alpha's config from afar; answer with --scope session, or on alpha itself")
        # A client that sends it anyway: the owner refuses it too.
        view = listed(bob)[rid]
        seconds, micros = bob.conn.time()
        answer = {"v": 1, "request_id": rid, "machine": "alpha", "call_sha256": view["call_sha256"],
                  "decision": "allow", "scope": "forever", "valid_until_ms": seconds * 1000 + micros // 1000 + 10000,
                  "sender": {"machine": "desk-bob", "uid": os.getuid()}}
        bob.conn.sadd(f"{PREFIX}:ax:alpha", cfg.acl_user)
        bob.conn.xadd(f"{PREFIX}:bell:alpha", {"user": cfg.acl_user})
        entry = bob.conn.xadd(f"{PREFIX}:a:alpha:{cfg.acl_user}", {"a": json.dumps(answer)})
        verdict = wait_until(lambda: _verdict(bob, "alpha", f"{cfg.acl_user}/{entry}"), 60, "the owner's verdict")
        assert verdict["applied"] is False
        assert "--scope forever cannot be given from another machine" in verdict["message"]
        assert rid in listed(bob)
    assert a.of("applied") == []


def _verdict(client, machine, ref):
    for _, fields in client.conn.xrevrange(f"{PREFIX}:m:{machine}:results"):
        verdict = json.loads(fields["r"])
        if verdict["answer"] == ref:
            return verdict
    return None


@pytest.mark.parametrize("scope", ["once", "agent", "session"])
def test_each_remote_scope_reaches_the_call(fleet, scope):
    a = fleet.machine("alpha")
    [rid] = a.post(timeout=60)
    with fleet.client("bob") as bob:
        wait_until(lambda: rid in listed(bob), 60, "listed")
        bob.answer(rid, "allow", scope=scope)
    assert a.done(rid)["scope"] == scope


def test_a_remote_grant_that_an_ask_rule_would_beat_is_refused_and_the_call_still_waits(fleet):
    # As `claudeguardctl approve --scope session` on alpha itself is refused: a grant is an allow
    # rule of the session, the ask rule wins, so it would answer once and ask again in silence.
    a = fleet.machine("alpha")
    found = subprocess.run([sys.executable, "-c", "from claudeguard.paths import user_config_file as f; print(f())"],
                           env=a.env, capture_output=True, text=True, check=True)
    config = Path(found.stdout.strip())
    assert str(config).startswith(str(a.root))
    config.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    config.write_text('[permissions]\nask = ["Bash(git push *)"]\n')
    [rid] = a.post(tool_input={"command": "git push origin main"}, timeout=60)
    with fleet.client("bob") as bob:
        wait_until(lambda: rid in listed(bob), 60, "listed")
        with pytest.raises(FleetError) as err:
            bob.answer(rid, "allow", scope="session")
        line = str(err.value)
        assert line.startswith(f"{rid} (alpha): refused: {rid}: not answered: --scope session would allow ")
        assert (f"but an ask rule matches this call and wins over every allow rule: Bash(git push *) "
                f"({config}:2), so the next such call is asked again; answer --scope once") in line
        assert "\n" not in line
        assert rid in listed(bob)  # still waiting, still answerable
        assert bob.answer(rid, "allow")["applied"]
    done = a.done(rid)
    assert (done["decision"], done["scope"]) == ("allow", "once")
    assert [e["applied"] for e in a.of("applied")] == [False, True]
    rows = wait_until(lambda: (r := [r for r in a.audit() if r.get("event") == "fleet-answer"]) and len(r) == 2 and r,
                      60, "two audit rows")
    assert [(r["applied"], r["scope"]) for r in rows] == [(False, "session"), (True, "once")]


def test_a_remote_deny_carries_its_message(fleet):
    a = fleet.machine("alpha")
    [rid] = a.post(timeout=60)
    with fleet.client("bob") as bob:
        wait_until(lambda: rid in listed(bob), 60, "listed")
        bob.answer(rid, "deny", message="use the staging database")
    done = a.done(rid)
    assert (done["decision"], done["message"]) == ("deny", "use the staging database")


def test_a_dialog_is_answered_with_one_of_its_choices(fleet):
    a = fleet.machine("alpha")
    choices = ["Yes", "Yes, and don't ask again", "No"]
    [rid] = a.post(kind="dialog", choices=choices, tool="dialog", tool_input={"title": "Trust this folder?"})
    with fleet.client("bob") as bob:
        wait_until(lambda: rid in listed(bob), 60, "listed")
        assert listed(bob)[rid]["choices"] == choices
        with pytest.raises(Exception, match="is not one of"):
            bob.answer(rid, "allow", choice="Maybe")
        bob.answer(rid, "allow", choice="3")
    assert a.done(rid)["choice"] == "No"


def test_requests_of_many_machines_are_listed_and_each_answer_reaches_its_owner(fleet):
    machines = [fleet.machine(name) for name in ("alpha", "beta", "gamma")]
    ids = {m.name: m.post(3, timeout=60) for m in machines}
    with fleet.client("bob") as bob:
        views = wait_until(lambda: (v := listed(bob)) and len(v) == 9 and v, 60, "nine requests listed")
        for m in machines:
            assert {rid for rid, v in views.items() if v["machine"] == m.name} == set(ids[m.name])
            assert set(listed(bob, m.name)) == set(ids[m.name])
        for m in machines:
            for rid in ids[m.name]:
                assert bob.answer(rid, "allow")["applied"]
    for m in machines:
        assert sorted(m.done(rid)["decision"] for rid in ids[m.name]) == ["allow"] * 3
        assert len(m.of("applied")) == 3  # each answer reached its owner, and only its owner


def test_ps_shows_sessions_and_a_dead_machine_as_gone(fleet):
    a, b = fleet.machine("alpha"), fleet.machine("beta")
    a.send({"op": "sessions", "sessions": [{"session_id": "s1", "state": "stalled", "stalled": True,
                                            "diagnosis": "stalled: thinking for 312 s", "pending": 2,
                                            "secret_field": "not published"}]})
    a.post(2, timeout=60)
    with fleet.client("bob") as bob:
        def rows():
            return {r["machine"]: r for r in bob.ps()}

        table = wait_until(lambda: (r := rows()) and r.get("alpha", {}).get("sessions") and
                           r["alpha"]["pending"] == 2 and "beta" in r and r, 60, "both machines in ps")
        assert table["alpha"]["alive"] and table["beta"]["alive"]
        assert table["alpha"]["sessions"] == [{"session_id": "s1", "state": "stalled", "stalled": True,
                                               "diagnosis": "stalled: thinking for 312 s", "pending": 2}]
        os.kill(b.proc.pid, signal.SIGKILL)  # a crash: nothing takes its keys down
        b.proc.wait(10)
        gone = wait_until(lambda: (r := rows()) and not r["beta"]["alive"] and r["beta"], 60, "beta gone")
        assert gone["gone_s"] >= 0
        assert rows()["alpha"]["alive"]
        # A clean stop takes the machine's requests down at once.
        a.stop()
        wait_until(lambda: not rows()["alpha"]["alive"], 60, "alpha gone after its stop")
        assert listed(bob) == {}


def test_two_machines_answer_each_others_requests(fleet):
    """Each machine a process with its own HOME and runtime dir, each with a member's link and
    a human with an approver's credentials: alpha's request approved on beta runs on alpha, and
    alpha's audit log names beta's approver; and the other way round."""
    alpha, beta = fleet.machine("alpha"), fleet.machine("beta")
    [on_alpha] = alpha.post(timeout=60)
    [on_beta] = beta.post(timeout=60)
    with fleet.client("probe") as probe:
        wait_until(lambda: len(listed(probe)) == 2, 60, "both listed")
    secrets = {}
    for name in ("alpha", "beta"):
        cfg = fleet.approver_config(f"human-{name}")
        secrets[name] = (cfg.acl_user, cfg.password_file)
    beta.send({"op": "answer", "id": on_alpha, "decision": "allow", "scope": "agent",
               "username": secrets["beta"][0], "password_file": secrets["beta"][1]})
    alpha.send({"op": "answer", "id": on_beta, "decision": "deny",
                "username": secrets["alpha"][0], "password_file": secrets["alpha"][1]})
    assert beta.wait_for(lambda e: e["ev"] == "answered", 60, "beta's answer")[0]["ok"] is True
    assert alpha.wait_for(lambda e: e["ev"] == "answered", 60, "alpha's answer")[0]["ok"] is True
    assert (alpha.done(on_alpha)["decision"], alpha.done(on_alpha)["scope"]) == ("allow", "agent")
    assert beta.done(on_beta)["decision"] == "deny"
    for machine, approver, on in ((alpha, "beta", on_alpha), (beta, "alpha", on_beta)):
        [row] = wait_until(lambda m=machine: [r for r in m.audit() if r.get("event") == "fleet-answer"], 60, "audit")
        assert row["request_id"] == on and row["applied"] is True
        assert row["answered_by"]["acl_user"] == f"cg-a-human-{approver}"
        assert row["answered_by"]["machine"] == approver
        assert len(machine.of("applied")) == 1
