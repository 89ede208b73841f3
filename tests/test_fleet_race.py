"""Exactly one answer wins, and the owner decides which: 50 requests on one machine, each
answered at the same moment (one barrier releases all 150 answerers) locally through the channel
and from two other machines through the fleet. Each call gets exactly one answer, the one the
winner gave; every loser is told so (a remote loser: by whom and when); no answer is reported
given that the call did not get."""

from __future__ import annotations

import threading

from claudeguard import channel
from claudeguard.errors import NotFoundError
from claudeguard.fleet.client import FleetClient, FleetError
from claudeguard.testing.wait import wait_until


N = 50


def test_fifty_requests_each_answered_at_once_from_two_machines_and_locally(fleet, monkeypatch):
    alpha = fleet.machine("alpha")
    ids = alpha.post(N, timeout=180)
    approvers = {"bob": fleet.approver_config("bob"), "carol": fleet.approver_config("carol")}
    with FleetClient(approvers["bob"]) as probe:
        wait_until(lambda: len(probe.requests()) == N, 60, f"{N} requests listed")
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", alpha.runtime_dir)  # this process is alpha's local approver

    # What each answerer says, so the call's answer tells who won.
    wants = {"local": ("allow", "once"), "bob": ("allow", "session"), "carol": ("deny", "agent")}
    barrier = threading.Barrier(3 * N)
    results: dict[tuple[str, str], tuple[str, str]] = {}
    lock = threading.Lock()

    def record(rid: str, who: str, outcome: str, text: str) -> None:
        with lock:
            results[(rid, who)] = (outcome, text)

    def local(rid: str) -> None:
        decision, scope = wants["local"]
        barrier.wait()
        try:
            channel.answer(rid, decision, scope=scope, by="local-approver")
        except NotFoundError as exc:
            record(rid, "local", "lost", str(exc))
            return
        record(rid, "local", "won", "")

    def remote(rid: str, who: str) -> None:
        decision, scope = wants[who]
        client = FleetClient(approvers[who])
        try:
            client.conn.ping()  # connected before the barrier
            barrier.wait()
            try:
                verdict = client.answer(rid, decision, scope=scope, wait=90)
            except (FleetError, NotFoundError) as exc:
                record(rid, who, "lost", str(exc))
                return
            assert verdict["applied"] is True
            record(rid, who, "won", "")
        finally:
            client.close()

    threads = []
    for rid in ids:
        threads.append(threading.Thread(target=local, args=(rid,)))
        threads += [threading.Thread(target=remote, args=(rid, who)) for who in ("bob", "carol")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(150)
    assert not any(t.is_alive() for t in threads), "an answerer hung"
    assert len(results) == 3 * N, "an answerer failed without a verdict (see the thread's traceback)"

    dones = {rid: alpha.done(rid, timeout=60) for rid in ids}
    wins = {"local": 0, "bob": 0, "carol": 0}
    for rid in ids:
        winners = [who for who in wants if results[(rid, who)][0] == "won"]
        assert len(winners) == 1, (rid, {who: results[(rid, who)] for who in wants})
        [winner] = winners
        wins[winner] += 1
        done = dones[rid]
        # The call got exactly the winner's answer.
        assert (done["decision"], done["scope"], done["decided_by"]) == (*wants[winner], "human")
        if winner == "local":
            assert done["by"] == "local-approver"
            shown = "local-approver on alpha"
        else:
            assert done["by"].startswith(f"fleet:cg-a-{winner}@desk-{winner} ")
            shown = f"cg-a-{winner}@desk-{winner} (uid"
        for who in wants:
            if who == winner:
                continue
            text = results[(rid, who)][1]
            assert text.startswith(rid), text
            assert "\n" not in text
            if who != "local":  # the owner's verdict names the winner
                assert f"already answered by {shown}" in text, (winner, who, text)
    # Every call ended once; the link applied exactly the remote winners' answers.
    assert sorted(e["id"] for e in alpha.of("done")) == sorted(ids)
    applied = [e for e in alpha.of("applied") if e["applied"]]
    assert len(applied) == wins["bob"] + wins["carol"]
    assert len({e["id"] for e in applied}) == len(applied)
    with FleetClient(approvers["bob"]) as probe:
        wait_until(lambda: probe.requests() == [], 60, "nothing left listed")
    print("wins:", wins)
