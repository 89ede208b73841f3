"""Where the fleet is configured, the desk shows every machine (issues 28 and 29), on a real
redis-server with two simulated machines, each with its own HOME, runtime dir and log dir:
machine A (``alpha``, ``claudeguard.testing.fleet_machine``: a stand-in for its service, with a
real channel waiter and a real ``FleetLink``) has a waiting request; machine B (``bravo``) runs
the real guard service, started by ``claudeguardctl desk``, whose ``[fleet]`` names an approver.
Through B's desk (its HTTP JSON API, as a page uses it): A's request is listed, ``forever`` is
refused, an approval is applied by A's waiter, and A's audit row names the desk, its browser
session, B's approver ACL user and machine. Without an approver B's desk shows no other
machine's requests, and ``service status`` says why. (The real CLI answered from afar:
tests/test_fleet_real.py; the desk in a browser: tests/test_desk_service.py.)"""

from __future__ import annotations

import http.client
import json
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from claudeguard.commands.audit import answerer
from claudeguard.testing.wait import wait_until
from fleet_helpers import PREFIX
from tests.shim_helpers import ctl, plain_env


class Desk:
    """A logged-in desk page, over plain HTTP: its cookie, its CSRF token, its browser session."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.port = parts.port
        self.base = parts.path.rsplit("/login", 1)[0]
        status, headers, _ = self.call("GET", f"{parts.path}?{parts.query}")
        assert status == 303, status
        self.cookie = headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
        status, _, page = self.call("GET", f"{self.base}/")
        assert status == 200
        self.csrf = re.search(rb'name="desk-csrf" content="([^"]+)"', page).group(1).decode()
        self.browser_session = re.search(rb'name="desk-browser-session" content="([^"]+)"', page).group(1).decode()

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Host": f"127.0.0.1:{self.port}"}
        if getattr(self, "cookie", None):
            headers["Cookie"] = f"claudeguard_desk={self.cookie}"
        if body is not None:
            headers.update({"Content-Type": "application/json", "X-Desk-CSRF": self.csrf})
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data

    def requests(self) -> dict:
        status, _, data = self.call("GET", f"{self.base}/api/state")
        assert status == 200, data
        return json.loads(data)["requests"]

    def answer(self, body: dict) -> tuple[int, dict]:
        status, _, data = self.call("POST", f"{self.base}/api/answer", body)
        return status, json.loads(data)


def bravo_env(fleet, root: Path, *, approver: bool) -> dict:
    """Machine B: its own HOME, runtime and log dirs; its member's password in the environment
    (as a CI runner's secret), the desk's approver's in a 0600 file."""
    member, member_pw = fleet.member_user("bravo")
    config = (f'[fleet]\nurl = "{fleet.server.url}"\nusername = "{member}"\nmachine = "bravo"\n'
              f'prefix = "{PREFIX}"\n')
    if approver:
        user, password = fleet.approver_user("desk")
        pw = root / "desk.pw"
        pw.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(pw, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password + "\n")
        config += f'approver = "{user}"\napprover_password_file = "{pw}"\n'
    return plain_env(root, config, CLAUDEGUARD_FLEET_PASSWORD=member_pw)


def open_desk(env: dict) -> Desk:
    out = ctl(env, "desk")  # starts B's service, then its desk
    assert out.returncode == 0, out.stderr
    return Desk(out.stdout.strip())


def service_status(env: dict) -> dict:
    """``service status --json`` once the service's fleet is up (it starts after the control
    socket answers: a first ``desk`` may come before it)."""
    def fleet_up() -> dict | None:
        status = json.loads(ctl(env, "service", "status", "--json").stdout)
        return status if "fleet_desk" in status else None

    return wait_until(fleet_up, 60, "the service's fleet started")


def audit(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_bravos_desk_lists_and_approves_a_request_waiting_on_alpha(fleet, tmp_path):
    alpha = fleet.machine("alpha")
    env = bravo_env(fleet, tmp_path / "bravo", approver=True)
    desk = open_desk(env)
    status = service_status(env)
    assert status["fleet_desk"] == "the desk shows the fleet's requests as cg-a-desk: lists them"
    assert desk.requests()["fleet"] is True  # the page asked: the listing starts
    [rid] = alpha.post(1, timeout=60, tool_input={"command": "git push origin main"})

    def listed() -> dict | None:
        rows = [r for r in desk.requests()["requests"] if r["id"] == rid]
        return rows[0] if rows else None

    row = wait_until(listed, 60, "alpha's request on bravo's desk")
    assert (row["machine"], row["local"], row["tool"]) == ("alpha", False, "Bash")
    assert row["forever"] is None and "another machine" in row["forever_why"]
    assert row["call"]["command"] == "git push origin main" and len(row["call_sha256"]) == 64

    # forever for another machine's request: refused by the desk, nothing reaches alpha
    status_code, body = desk.answer({"id": rid, "answer": "forever", "machine": "alpha"})
    assert status_code == 409 and "never forever" in body["error"]
    # approved for the session on bravo's desk: alpha's waiter takes it
    status_code, body = desk.answer({"id": rid, "answer": "session", "machine": "alpha"})
    assert status_code == 200, body
    assert body["line"] == f"{rid} (alpha) approved (session): applied"
    done = alpha.done(rid, timeout=10)
    assert (done["decision"], done["scope"], done["decided_by"]) == ("allow", "session", "human")
    by = done["answered_by"]  # what alpha's decision row records (the waiter's answered_by)
    assert (by["via"], by["browser_session"], by["acl_user"], by["machine"], by["uid"]) == (
        "desk", desk.browser_session, "cg-a-desk", "bravo", os.getuid())
    assert "relayed_by" in by and by["ref"].startswith("cg-a-desk/")
    assert answerer(by) == " via desk through the fleet (cg-a-desk@bravo)"  # as `claudeguardctl audit` shows it
    # alpha's own audit row of the answer it read, exactly one
    [row] = [e for e in audit(alpha.audit_file) if e.get("event") == "fleet-answer"]
    assert row["applied"] is True and (row["decision"], row["scope"]) == ("allow", "session")
    assert {k: row["answered_by"][k] for k in ("via", "browser_session", "acl_user", "machine")} == {
        "via": "desk", "browser_session": desk.browser_session, "acl_user": "cg-a-desk", "machine": "bravo"}
    assert [e["id"] for e in alpha.of("applied")] == [rid]
    # bravo's audit: one desk-answer row naming alpha; the request leaves bravo's desk
    [mine] = [e for e in audit(Path(env["CLAUDEGUARD_LOG_DIR"]) / "audit.jsonl") if e.get("event") == "desk-answer"]
    assert (mine["machine"], mine["request_id"], mine["via"], mine["scope"]) == ("alpha", rid, "desk", "session")
    wait_until(lambda: listed() is None, 60, "the answered request gone from bravo's desk")
    # a second answer to it: gone
    status_code, body = desk.answer({"id": rid, "answer": "once", "machine": "alpha"})
    assert status_code == 409 and "no such pending request in the fleet" in body["error"]
    assert len(alpha.of("applied")) == 1


def test_without_an_approver_bravos_desk_shows_this_machine_only_and_says_why(fleet, tmp_path):
    alpha = fleet.machine("alpha")
    [rid] = alpha.post(1, timeout=60)
    env = bravo_env(fleet, tmp_path / "bravo", approver=False)
    desk = open_desk(env)
    status = service_status(env)
    assert status["fleet_desk"].startswith("the desk shows this machine's requests only: [fleet] names no approver")
    text = ctl(env, "service", "status").stdout
    assert "fleet: the desk shows this machine's requests only: [fleet] names no approver" in text

    def connected() -> bool:
        st = json.loads(ctl(env, "service", "status", "--json").stdout)
        return st["fleet"]["connected"] == {"pub": True, "inbox": True}

    wait_until(connected, 60, "bravo's link connected (its member's credentials work)")
    wait_until(lambda: alpha.of("posted"), 60, "alpha's request published")
    assert desk.requests() == {"machine": desk.requests()["machine"], "fleet": False, "requests": []}
    status_code, body = desk.answer({"id": rid, "answer": "once", "machine": "alpha"})
    assert status_code == 409 and "this desk has no fleet" in body["error"]
    assert alpha.of("applied") == []


def test_the_desks_view_lists_only_while_asked_and_wakes_at_the_next_ask(fleet):
    """``FleetDeskView``: from memory, this machine's own requests left out; it stops listing
    (and empties its list) when the desk stops asking, and lists again at the next ask."""
    from claudeguard.fleet.view import FleetDeskView

    alpha = fleet.machine("alpha")
    bravo = fleet.machine("bravo")
    [rid] = alpha.post(1, timeout=60)
    bravo.post(1, timeout=60)  # bravo's own: its desk lists it from its channel, not from the fleet
    cfg = fleet.approver_config("desk", machine="bravo")
    view = FleetDeskView(cfg, poll_s=0.1, idle_s=0.5)
    try:
        assert view.requests() == []  # the first ask starts the listing
        items = wait_until(lambda: view.requests() or None, 60, "alpha's request listed")
        assert [(i["machine"], i["id"], i["local"], i["forever_file"]) for i in items] == [("alpha", rid, False, None)]
        version = view.version()
        assert view.requests() is items and view.version() == version  # nothing changed: the same list
        # nobody asks: the listing stops and its list empties (a version change, seen at the next ask)
        wait_until(lambda: view._items == [], 60, "the idle view emptied")
        wait_until(lambda: view.requests() != [] or None, 60, "listed again at the next ask")
        assert view.version() > version
    finally:
        view.stop()


def test_pending_fleet_is_listed_by_the_service_as_its_approver(fleet, tmp_path):
    """``claudeguardctl pending --fleet`` asks the running service, which lists the fleet on its
    kept connection as ``[fleet] approver`` (the command need not import redis-py). B's own
    credential is a member's, which cannot list another machine's requests: what the command
    prints came through the service; with the service stopped the command asks Redis itself and
    is refused."""
    alpha = fleet.machine("alpha")
    env = bravo_env(fleet, tmp_path / "bravo", approver=True)
    open_desk(env)  # starts B's service
    service_status(env)
    [rid] = alpha.post(1, timeout=60, tool_input={"command": "make deploy"})
    out = ctl(env, "pending", "--fleet", "--json")
    assert out.returncode == 0, out.stderr
    [view] = [v for v in json.loads(out.stdout) if v["id"] == rid]
    assert (view["machine"], view["input"]["command"], len(view["call_sha256"])) == ("alpha", "make deploy", 64)
    assert ctl(env, "service", "stop").returncode == 0
    alone = ctl(env, "pending", "--fleet", "--json")
    assert alone.returncode == 1 and rid not in alone.stdout, alone.stdout
    assert "as cg-m-bravo" in alone.stderr and "no permissions" in alone.stderr, alone.stderr  # the member's ACL
