"""Torture: 20 requester processes x 25 requests each, answered in random order by 3 concurrent
approver processes. Every request gets exactly its own answer; none is lost, none is answered
twice, and nothing is left in the channel directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

REQUESTERS, PER_REQUESTER, APPROVERS = 20, 25, 3

REQUESTER = """
import json, sys
from claudeguard import channel
index, count, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with open(out, 'w') as f:
    for k in range(count):
        p = channel.post(session_id=f's{index}', agent_type=None if k % 3 else 'Explore', agent_id=f'a{index}',
                         tool='Bash', input={'proc': index, 'k': k}, summary=f'Bash(job {index}/{k})', cwd='/',
                         timeout=60)
        a = p.wait()
        f.write(json.dumps({'id': p.request.id, 'proc': index, 'k': k, **a.__dict__}) + '\\n')
        f.flush()
"""

APPROVER = """
import json, os, random, sys
from claudeguard import channel
from claudeguard.errors import NotFoundError
index, out, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3]
tried = set()
with open(out, 'w') as f:
    while not os.path.exists(stop):
        new = channel.wait_for_new(tried, 0.2)
        random.shuffle(new)
        for r in new:
            tried.add(r.id)
            decision = 'allow' if (r.input['proc'] + r.input['k']) % 2 else 'deny'
            scope = random.choice(['once', 'agent', 'session'])
            ident = r.id if random.random() < 0.5 else r.id[:8]  # full ids and prefixes
            try:
                channel.answer(ident, decision, scope=scope, message=f'{r.id} by {index}', by=f'approver {index}')
            except NotFoundError as exc:
                f.write(json.dumps({'refused': r.id, 'why': str(exc)}) + '\\n')
                continue
            f.write(json.dumps({'answered': r.id, 'decision': decision, 'scope': scope}) + '\\n')
            f.flush()
"""


def test_torture_exactly_once(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    stop = tmp_path / "stop"
    procs: list[subprocess.Popen] = []
    try:
        approvers = [subprocess.Popen([sys.executable, "-c", APPROVER, str(i),
                                       str(tmp_path / f"approver{i}.jsonl"), str(stop)])
                     for i in range(APPROVERS)]
        procs += approvers
        requesters = [subprocess.Popen([sys.executable, "-c", REQUESTER, str(i), str(PER_REQUESTER),
                                        str(tmp_path / f"requester{i}.jsonl")])
                      for i in range(REQUESTERS)]
        procs += requesters
        end = time.monotonic() + 45
        for proc in requesters:
            assert proc.wait(max(0.1, end - time.monotonic())) == 0
        stop.touch()
        for proc in approvers:
            assert proc.wait(10) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)

    got = [json.loads(line) for i in range(REQUESTERS)
           for line in (tmp_path / f"requester{i}.jsonl").read_text().splitlines()]
    assert len(got) == REQUESTERS * PER_REQUESTER
    assert len({g["id"] for g in got}) == len(got)
    answered: dict[str, tuple[int, dict]] = {}
    refusals = Counter()
    for i in range(APPROVERS):
        for line in (tmp_path / f"approver{i}.jsonl").read_text().splitlines():
            event = json.loads(line)
            if "answered" in event:
                assert event["answered"] not in answered, "answered twice"
                answered[event["answered"]] = (i, event)
            else:
                refusals[event["why"].split(": ", 1)[1]] += 1
    assert len(answered) == len(got)  # every success an approver was told about reached a waiter
    for g in got:
        approver, event = answered[g["id"]]
        assert g["decided_by"] == "human"
        assert g["message"] == f"{g['id']} by {approver}"  # its own answer, from the one who won
        assert g["by"] == f"approver {approver}"
        assert (g["decision"], g["scope"]) == (event["decision"], event["scope"])
        assert g["decision"] == ("allow" if (g["proc"] + g["k"]) % 2 else "deny")
    # Losers were told why, in one line; nothing else went wrong.
    assert set(refusals) <= {"already answered", "no such pending request (already answered, expired or never existed)",
                             "no longer pending", "being answered by someone else right now"}, refusals
    channel_dir = tmp_path / "run" / "channel"
    assert [n for n in os.listdir(channel_dir) if n != "bells"] == []
    assert os.listdir(channel_dir / "bells") == []
    assert not (tmp_path / "log" / "audit.jsonl").exists()  # the channel itself logged no failure
