"""The approval desk over HTTP, without a browser: the login token and its cookie, 401 without
it, the loopback Host check, CSRF on every change, the CSP, the views of a call (Bash parts,
diffs against the file on disk), ``LocalSource`` over the real channel (answers with provenance,
forever, suggestions), and ``python -m claudeguard.desk``. The browser tests are in
``test_desk_browser.py``."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from claudeguard.channel.audit import read_events, record
from claudeguard.desk import start_desk
from claudeguard.desk.local import LocalSource
from claudeguard.desk.server import CSP, loopback_host
from claudeguard.desk.views import bash_view, call_view, edit_view
from claudeguard.errors import GuardError, NotFoundError
from claudeguard.testing.desk_kit import post_request
from claudeguard.testing.wait import wait_until

STATIC = Path(__file__).resolve().parent.parent / "claudeguard" / "desk" / "static"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    return tmp_path


@pytest.fixture
def desk(env):
    d = start_desk(LocalSource(config_file=str(env / "config.toml"), machine="test-host"))
    yield d
    d.stop()


@pytest.fixture
def waiters():
    made: list = []
    yield made
    for w in made:
        w.withdraw()


def call(desk, method, path, *, host=None, cookie=None, headers=None, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", desk.port, timeout=10)
    h = {"Host": host if host is not None else f"127.0.0.1:{desk.port}"}
    if cookie:
        h["Cookie"] = f"claudeguard_desk={cookie}"
    h.update(headers or {})
    conn.request(method, path, body=body, headers=h)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


def login(desk):
    parts = urlsplit(desk.login_url())
    status, headers, _ = call(desk, "GET", f"{parts.path}?{parts.query}")
    assert status == 303, status
    return headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]


def csrf_of(desk, cookie):
    status, _, page = call(desk, "GET", f"/{desk.base}/", cookie=cookie)
    assert status == 200
    return re.search(rb'name="desk-csrf" content="([^"]+)"', page).group(1).decode()


def answer(desk, cookie, token, body, headers=None):
    h = {"Content-Type": "application/json", "X-Desk-CSRF": token}
    h.update(headers or {})
    return call(desk, "POST", f"/{desk.base}/api/answer", cookie=cookie, headers=h, body=json.dumps(body))


# -- who may come in ---------------------------------------------------------------------------


def test_the_login_token_becomes_an_httponly_strict_cookie_and_is_used_once(desk):
    url = urlsplit(desk.login_url())
    assert url.hostname == "127.0.0.1" and url.port == desk.port and url.path == f"/{desk.base}/login"
    status, headers, _ = call(desk, "GET", f"{url.path}?{url.query}")
    assert status == 303 and headers["location"] == f"/{desk.base}/"  # no token in the next URL
    cookie = headers["set-cookie"]
    attrs = [a.strip() for a in cookie.split(";")]
    assert attrs[0].startswith("claudeguard_desk=") and len(attrs[0]) > 40
    assert set(attrs[1:]) == {f"Path=/{desk.base}/", "HttpOnly", "SameSite=Strict"}
    secret = attrs[0].split("=", 1)[1]
    assert secret not in url.query
    status, headers, page = call(desk, "GET", f"/{desk.base}/", cookie=secret)
    assert status == 200 and b"<title>claudeguard desk</title>" in page
    assert headers["content-security-policy"] == CSP and "'unsafe-inline'" not in CSP
    assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer"
    # the same first URL again: used (without the cookie it is refused; with it, back to the page)
    assert call(desk, "GET", f"{url.path}?{url.query}")[0] == 401
    assert call(desk, "GET", f"{url.path}?{url.query}", cookie=secret)[0] == 303


def test_an_expired_or_made_up_login_token_is_refused(desk):
    url = urlsplit(desk.login_url())
    token = url.query.split("=", 1)[1]
    desk._logins[token] = time.time() - 1
    assert call(desk, "GET", f"{url.path}?{url.query}")[0] == 401
    assert call(desk, "GET", f"/{desk.base}/login?token=" + "A" * 43)[0] == 401
    assert call(desk, "GET", f"/{desk.base}/login")[0] == 401


@pytest.mark.parametrize("path", ["/", "/favicon.ico", "/{base}/", "/{base}/api/state", "/{base}/api/events",
                                  "/{base}/api/audit", "/{base}/api/suggestions", "/{base}/static/desk.js"])
def test_every_request_without_the_cookie_gets_401(desk, path):
    path = path.format(base=desk.base)
    assert call(desk, "GET", path)[0] == 401
    assert call(desk, "GET", path, cookie="not-a-session-secret")[0] == 401
    assert desk.refusals[-1]["status"] == 401


def test_a_change_without_the_cookie_gets_401_and_answers_nothing(desk, waiters):
    waiters.append(post_request("Bash", {"command": "git push"}))
    rid = waiters[0].request.id
    status, _, _ = call(desk, "POST", f"/{desk.base}/api/answer", headers={"Content-Type": "application/json"},
                        body=json.dumps({"id": rid, "answer": "once"}))
    assert status == 401
    assert waiters[0].answer is None and waiters[0].pending.poll() is None


@pytest.mark.parametrize("host,ok", [
    ("127.0.0.1:{port}", True), ("localhost:{port}", True), ("[::1]:{port}", True), ("LOCALHOST:8080", True),
    ("127.0.0.1", True), ("evil.example:{port}", False), ("evil.example", False), ("127.0.0.1.evil.example", False),
    ("localhost.evil.example:{port}", False), ("127.0.0.2:{port}", False), ("", False), ("127.0.0.1:x", False),
    ("127.0.0.1:{port}@evil.example", False),
])
def test_only_a_loopback_host_is_served(desk, host, ok):
    cookie = login(desk)
    host = host.format(port=desk.port)
    assert loopback_host(host) is ok
    status = call(desk, "GET", f"/{desk.base}/api/state", host=host, cookie=cookie)[0]
    assert status == (200 if ok else 403)
    if not ok:  # refused before the cookie is even looked at: a rebinding page learns nothing
        assert desk.refusals[-1]["reason"].startswith("wrong Host")


def test_a_login_under_a_wrong_host_is_refused_and_the_token_still_works(desk):
    url = urlsplit(desk.login_url())
    assert call(desk, "GET", f"{url.path}?{url.query}", host="evil.example")[0] == 403
    assert call(desk, "GET", f"{url.path}?{url.query}")[0] == 303


# -- changes: CSRF -----------------------------------------------------------------------------


def test_a_change_needs_the_csrf_token_and_a_json_body(desk, waiters):
    waiters.append(post_request("Bash", {"command": "git push"}))
    rid = waiters[0].request.id
    cookie = login(desk)
    token = csrf_of(desk, cookie)
    body = {"id": rid, "answer": "once"}
    assert answer(desk, cookie, "", body)[0] == 403
    assert answer(desk, cookie, token[:-1] + ("A" if token[-1] != "A" else "B"), body)[0] == 403
    assert desk.refusals[-1] == dict(desk.refusals[-1], status=403, reason="missing or wrong CSRF token", cookie=True)
    # the right token, but sent from another origin (a page of another 127.0.0.1 port)
    assert answer(desk, cookie, token, body, {"Origin": "http://127.0.0.1:9"})[0] == 403
    assert answer(desk, cookie, token, body, {"Sec-Fetch-Site": "same-site"})[0] == 403
    status, _, _ = call(desk, "POST", f"/{desk.base}/api/answer", cookie=cookie,
                        headers={"Content-Type": "text/plain", "X-Desk-CSRF": token}, body=json.dumps(body))
    assert status == 415
    assert waiters[0].answer is None and waiters[0].pending.poll() is None  # nothing reached the channel
    # a token of another browser session does not do either
    other = login(desk)
    assert answer(desk, cookie, csrf_of(desk, other), body)[0] == 403
    status, _, data = answer(desk, cookie, token, body, {"Origin": f"http://127.0.0.1:{desk.port}",
                                                         "Sec-Fetch-Site": "same-origin"})
    assert status == 200, data
    got = waiters[0].result(5)
    assert (got.decision, got.scope, got.decided_by) == ("allow", "once", "human")
    by = json.loads(got.by)
    assert by["via"] == "desk" and by["uid"] == os.getuid() and by["browser_session"].startswith("bs-")
    assert by == json.loads(data)["by"]
    assert cookie not in got.by and token not in got.by  # the session's id, never its secrets


def test_an_answer_is_given_once_and_its_audit_row_says_desk(desk, waiters):
    waiters.append(post_request("Bash", {"command": "npm test"}, agent_type="Explore"))
    rid = waiters[0].request.id
    cookie = login(desk)
    token = csrf_of(desk, cookie)
    status, _, data = answer(desk, cookie, token, {"id": rid, "answer": "deny", "message": "use the staging db"})
    assert status == 200, data
    got = waiters[0].result(5)
    assert (got.decision, got.message) == ("deny", "use the staging db")
    status, _, data = answer(desk, cookie, token, {"id": rid, "answer": "once"})
    assert status == 409 and b"no such pending request" in data
    rows = [e for e in read_events() if e.get("event") == "desk-answer"]
    assert len(rows) == 1
    row = rows[0]
    assert (row["request_id"], row["decision"], row["scope"], row["via"], row["uid"]) == (
        rid, "deny", "once", "desk", os.getuid())
    assert row["browser_session"] == json.loads(got.by)["browser_session"]


def test_forever_writes_the_rule_into_the_config_file_keeping_comments(desk, env, waiters):
    config = env / "config.toml"
    config.write_text('# mine\n[permissions]\nallow = ["Bash(git status)"]  # keep me\n')
    waiters.append(post_request("Bash", {"command": "npm run build"}))
    cookie = login(desk)
    status, _, data = answer(desk, cookie, csrf_of(desk, cookie), {"id": waiters[0].request.id, "answer": "forever"})
    assert status == 200, data
    assert waiters[0].result(5).scope == "forever"
    text = config.read_text()
    assert "# mine" in text and "# keep me" in text and '"Bash(npm run build)"' in text
    assert json.loads(data)["file"] == str(config)


def test_state_shows_the_call_and_what_forever_would_write(desk, env, waiters):
    project = env / "p"
    project.mkdir()
    (project / "a.py").write_text("one\ntwo\nthree\n")
    waiters.append(post_request("Bash", {"command": "make && rm -rf build"}, cwd=str(project),
                                rule="Bash(rm *)", rule_source="config.toml:3"))
    wait_until(lambda: time.time() > waiters[0].request.created, 60, "a later creation time")  # newest first
    waiters.append(post_request("Edit", {"file_path": str(project / "a.py"), "old_string": "two", "new_string": "2"},
                                cwd=str(project), agent_type="Explore", extra={"cli_short_id": "k3v9"}))
    cookie = login(desk)
    status, _, data = call(desk, "GET", f"/{desk.base}/api/state", cookie=cookie)
    assert status == 200
    state = json.loads(data)
    rows = state["requests"]["requests"]
    assert [r["id"] for r in rows] == [waiters[1].request.id, waiters[0].request.id]
    edit, bash = rows
    assert edit["call"]["kind"] == "diff" and "-two" in edit["call"]["diff"] and "+2" in edit["call"]["diff"]
    assert edit["background"] is True and edit["agent_type"] == "Explore" and edit["machine"] == "test-host"
    assert bash["call"]["parts"] == [{"text": "make", "writes": False}, {"text": "rm -rf build", "writes": True}]
    assert (bash["rule"], bash["rule_source"]) == ("Bash(rm *)", "config.toml:3")
    assert bash["forever"] == {"rules": ["Bash(make)", "Bash(rm -rf build)"], "file": str(env / "config.toml"),
                               "kind": "allow"}
    assert "input" not in bash  # the call is shown as it will run, not as raw input twice


def test_a_fleet_request_of_another_machine_offers_no_forever_and_is_answered_through_the_fleet(env):
    class View:  # what the guard service's fleet gives the desk (desk.source.FleetView)
        answers: list = []
        changes = 0

        def version(self):
            return self.changes

        def requests(self):
            return [{"id": "a" * 16, "session_id": "s", "machine": "runner-7", "local": False, "tool": "Bash",
                     "input": {"command": "ls"}, "summary": "Bash: ls", "cwd": "/", "created": 1.0,
                     "deadline": time.time() + 60, "forever_file": None}]

        def answer(self, machine, request_id, decision, scope, message, choice, answered_by):
            self.answers.append((machine, request_id, decision, scope, message, answered_by))
            return {"line": f"{request_id} of {machine}: {decision}", "rules": [], "file": None}

    view = View()
    desk = start_desk(LocalSource(config_file=str(env / "c.toml"), machine="here", fleet=lambda: view))
    try:
        cookie = login(desk)
        state = json.loads(call(desk, "GET", f"/{desk.base}/api/state", cookie=cookie)[2])
        [row] = state["requests"]["requests"]
        assert row["forever"] is None and "another machine" in row["forever_why"]
        assert state["requests"]["fleet"] is True
        csrf = csrf_of(desk, cookie)
        status, _, data = answer(desk, cookie, csrf, {"id": "a" * 16, "answer": "forever", "machine": "runner-7"})
        assert status == 409 and b"never forever" in data and view.answers == []
        status, _, data = answer(desk, cookie, csrf, {"id": "a" * 16, "answer": "deny", "machine": "runner-7",
                                                      "message": "not there"})
        assert status == 200, data
        [(machine, rid, decision, scope, message, by)] = view.answers
        assert (machine, rid, decision, scope, message) == ("runner-7", "a" * 16, "deny", "once", "not there")
        assert by["via"] == "desk" and by["uid"] == os.getuid() and by["browser_session"].startswith("bs-")
        [row] = [e for e in read_events() if e.get("event") == "desk-answer"]
        assert (row["machine"], row["request_id"], row["via"]) == ("runner-7", "a" * 16, "desk")
        # a change on the fleet wakes the desk's refresh (its version moved), without a local change
        source = desk.source
        source.wait_change(0)
        assert source.wait_change(0.3) is False
        view.changes += 1
        assert source.wait_change(0.3) is True
    finally:
        desk.stop()

    plain = start_desk(LocalSource(config_file=str(env / "c.toml"), machine="here"))  # no fleet
    try:
        cookie = login(plain)
        status, _, data = answer(plain, cookie, csrf_of(plain, cookie), {"id": "a" * 16, "answer": "once",
                                                                         "machine": "runner-7"})
        assert status == 409 and b"runner-7" in data and b"no fleet" in data
    finally:
        plain.stop()


# -- the page's files ------------------------------------------------------------------------------


def test_the_page_has_no_inline_script_no_inline_style_and_nothing_from_another_origin():
    html = (STATIC / "index.html").read_text()
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    assert scripts and all('src="static/' in attrs and not body.strip() for attrs, body in scripts)
    assert not re.search(r"\sstyle=|<style|\son[a-z]+=", html)
    for name in ("index.html", "desk.css", "desk.js"):
        text = (STATIC / name).read_text()
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text), name
        assert "@import" not in text
    js = (STATIC / "desk.js").read_text()
    assert "innerHTML" not in js and "eval(" not in js and "new Function" not in js and "insertAdjacentHTML" not in js


# -- how a call is shown ---------------------------------------------------------------------------


def test_bash_view_splits_with_the_policy_reader():
    view = bash_view("cd src && npm test | tee log.txt; echo $(whoami)")
    assert view["ok"] is True
    assert [p["text"] for p in view["parts"]] == ["cd src", "npm test", "tee log.txt", "echo $(whoami)", "whoami"]
    assert [p["writes"] for p in view["parts"]][2] is True
    bad = bash_view('eval "$x"')
    assert bad["ok"] is False and bad["reason"]


def test_edit_write_and_multiedit_diffs_against_the_file_on_disk(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("a = 1\nb = 2\nc = 3\n")
    view = edit_view("Edit", {"file_path": str(f), "old_string": "b = 2", "new_string": "b = 20"}, "/")
    assert view["diff"][2:] == ["@@ -1,3 +1,3 @@", " a = 1", "-b = 2", "+b = 20", " c = 3"]
    assert view["notes"] == [] and view["new_file"] is False
    multi = edit_view("MultiEdit", {"file_path": "m.py", "edits": [{"old_string": "a = 1", "new_string": "a = 0"},
                                                                   {"old_string": "a = 0", "new_string": "A = 0"}]},
                      str(tmp_path))
    assert "-a = 1" in multi["diff"] and "+A = 0" in multi["diff"] and multi["path"] == str(f)
    new = edit_view("Write", {"file_path": str(tmp_path / "new.txt"), "content": "hello\n"}, "/")
    assert new["new_file"] is True and new["diff"][0] == "--- /dev/null" and "+hello" in new["diff"]
    missing = edit_view("Edit", {"file_path": str(f), "old_string": "zzz", "new_string": "y"}, "/")
    assert any("not in the file on disk" in n for n in missing["notes"])
    assert f.read_text() == "a = 1\nb = 2\nc = 3\n"  # nothing written


def test_a_fifo_or_device_named_by_the_agent_is_not_read(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    view = edit_view("Edit", {"file_path": str(fifo), "old_string": "x", "new_string": "y"}, "/")
    assert time.monotonic() - started < 30  # not blocked opening it (a FIFO's open waits for a writer)
    assert any("not a regular file" in n for n in view["notes"])
    dev = edit_view("Write", {"file_path": "/dev/zero", "content": "x"}, "/")
    assert any("not a regular file" in n for n in dev["notes"])


def test_another_tool_shows_its_input():
    view = call_view("WebFetch", {"url": "https://example.org", "prompt": "read"}, "/")
    assert view["kind"] == "input" and '"url": "https://example.org"' in view["text"]


# -- LocalSource --------------------------------------------------------------------------------------


PROV = {"via": "desk", "uid": os.getuid(), "browser_session": "bs-test"}


def test_local_source_refuses_a_scoped_deny_and_a_bad_id(env, waiters):
    src = LocalSource(config_file=str(env / "c.toml"))
    waiters.append(post_request("Bash", {"command": "ls"}))
    with pytest.raises(GuardError, match="scope once"):
        src.answer(waiters[0].request.id, "deny", "session", None, None, PROV)
    with pytest.raises(NotFoundError, match="not a request id"):
        src.answer("../../etc/passwd", "allow", "once", None, None, PROV)
    assert waiters[0].pending.poll() is None


def test_local_source_stops_only_a_stalled_session(env):
    from claudeguard.testing.desk_kit import StalledSession

    src = LocalSource()
    healthy = StalledSession("healthy-1", stall_after=3600)
    stalled = StalledSession("stalled-1", stall_after=1.0)
    try:
        wait_until(lambda: stalled.monitor.stalled, 60, "the stall")
        with pytest.raises(GuardError, match="not stalled"):
            src.stop_session("healthy-1", PROV)
        with pytest.raises(NotFoundError):
            src.stop_session("../healthy-1", PROV)
        line = src.stop_session("stalled-1", PROV)
        assert f"pid {stalled.child.pid}" in line
        assert stalled.child.wait(10) == -signal.SIGTERM
        assert healthy.child.poll() is None
        [row] = [e for e in read_events() if e.get("event") == "desk-stop"]
        assert row["session_id"] == "stalled-1" and row["via"] == "desk" and row["browser_session"] == "bs-test"
    finally:
        healthy.stop()
        stalled.stop()


def _asked(rule: str, decision: str, rid: str, summary: str) -> None:
    record({"session_id": "s1", "agent_type": None, "tool": "Bash", "summary": summary, "decision": decision,
            "decided_by": "human", "scope": "once", "request_id": rid, "rules": [rule], "via": "hook"})


def test_suggestions_preview_their_calls_and_only_a_suggested_rule_is_applied(env):
    config = env / "c.toml"
    config.write_text("# my rules\n[permissions]\nallow = []\n")
    _asked("Bash(npm test)", "allow", "r1", "Bash: npm test")
    _asked("Bash(npm test)", "allow", "r2", "Bash: npm test")
    _asked("Bash(npm run lint)", "allow", "r3", "Bash: npm run lint")
    _asked("Bash(npm run build)", "allow", "r4", "Bash: npm run build")
    _asked("Bash(git push --force)", "deny", "r5", "Bash: git push --force")
    src = LocalSource(config_file=str(config))
    found = src.suggestions(None)
    allow = {r["rule"]: r for r in found["allow"]}
    assert set(allow) == {"Bash(npm test)", "Bash(npm run lint)", "Bash(npm run build)"}
    assert [c["summary"] for c in allow["Bash(npm test)"]["preview"]] == ["Bash: npm test"] * 2
    assert [r["rule"] for r in found["deny"]] == ["Bash(git push --force)"]
    [broader] = found["broader"]
    assert broader["rule"] == "Bash(npm run *)" and len(broader["preview"]) == 2
    with pytest.raises(NotFoundError):
        src.apply_suggestion("Bash(*)", "allow", None, PROV)
    with pytest.raises(NotFoundError):
        src.apply_suggestion("Bash(git push --force)", "allow", None, PROV)  # suggested as a deny
    assert config.read_text() == "# my rules\n[permissions]\nallow = []\n"
    line = src.apply_suggestion("Bash(git push --force)", "deny", None, PROV)
    assert "added to [permissions].deny" in line
    text = config.read_text()
    assert text.startswith("# my rules\n") and '"Bash(git push --force)", # 1 call: denied 1; asked by main' in text
    assert src.apply_suggestion("Bash(npm run *)", "allow", None, PROV).startswith("Bash(npm run *) added")
    assert [e["rule"] for e in read_events() if e.get("event") == "desk-apply"] == [
        "Bash(git push --force)", "Bash(npm run *)"]


def test_suggestions_and_apply_over_http(desk, env):
    _asked("Bash(npm test)", "allow", "r1", "Bash: npm test")
    cookie = login(desk)
    status, _, data = call(desk, "GET", f"/{desk.base}/api/suggestions?since=7d", cookie=cookie)
    assert status == 200 and json.loads(data)["allow"][0]["rule"] == "Bash(npm test)"
    assert call(desk, "GET", f"/{desk.base}/api/suggestions?since=7x", cookie=cookie)[0] == 400
    token = csrf_of(desk, cookie)
    body = json.dumps({"rule": "Bash(npm test)", "kind": "allow", "since": "7d"})
    h = {"Content-Type": "application/json"}
    assert call(desk, "POST", f"/{desk.base}/api/apply", cookie=cookie, headers=h, body=body)[0] == 403
    status, _, data = call(desk, "POST", f"/{desk.base}/api/apply", cookie=cookie,
                           headers=dict(h, **{"X-Desk-CSRF": token}), body=body)
    assert status == 200, data
    assert '"Bash(npm test)"' in (env / "config.toml").read_text()


def test_audit_filter(desk):
    _asked("Bash(npm test)", "allow", "r1", "Bash: npm test")
    _asked("Bash(rm -rf x)", "deny", "r2", "Bash: rm -rf x")
    cookie = login(desk)
    data = json.loads(call(desk, "GET", f"/{desk.base}/api/audit?decision=deny", cookie=cookie)[2])
    assert [r["summary"] for r in data["rows"]] == ["Bash: rm -rf x"] and data["total"] == 2
    data = json.loads(call(desk, "GET", f"/{desk.base}/api/audit?q=NPM", cookie=cookie)[2])
    assert [r["request_id"] for r in data["rows"]] == ["r1"]


# -- standalone ------------------------------------------------------------------------------------------


def test_python_m_claudeguard_desk_prints_its_url_and_serves_until_sigterm(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDEGUARD_")}
    proc = subprocess.Popen([sys.executable, "-m", "claudeguard.desk", "--runtime-dir", str(tmp_path / "run"),
                             "--log-dir", str(tmp_path / "log")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        line = proc.stdout.readline().strip()
        url = urlsplit(line)
        assert url.scheme == "http" and url.hostname == "127.0.0.1" and url.path.endswith("/login")
        conn = http.client.HTTPConnection("127.0.0.1", url.port, timeout=10)
        conn.request("GET", f"{url.path}?{url.query}")
        resp = conn.getresponse()
        assert resp.status == 303 and "HttpOnly" in resp.getheader("Set-Cookie")
        conn.close()
        assert (tmp_path / "run" / "channel").is_dir()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert proc.stdout is not None
