"""The offline test bed itself: the scripted model server on the wire, the offline HOME, the CLI
installer and runners, and then the real CLIs (both pinned versions) driven through it."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from claudeguard.errors import GuardError
from claudeguard.testing import cli_install
from claudeguard.testing.model_server import ModelServer, load_scenario, pick_turn
from claudeguard.testing.offline_home import offline_env, prepare_home
from claudeguard.testing.runner import run_claude as run_to_end
from claudeguard.testing.tui import READY_TEXT, exit_tui, expect_text, screen_text, text_pattern
from tests.shim_helpers import wait_until

REPO = Path(__file__).resolve().parent.parent
TOOLS = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]


# --- helpers ----------------------------------------------------------------------------------


def _conn(server: ModelServer, timeout: float = 5) -> http.client.HTTPConnection:
    host, port = server.url.removeprefix("http://").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=timeout)


def _messages(prompt: str, *, results: int = 0, reminder_after: bool = True) -> list[dict]:
    """A conversation as the CLI sends it: reminder + prompt, then `results` tool rounds, each
    result followed by a separate reminder message."""
    msgs: list[dict] = [{"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>\ntoday is a day; say hi\n</system-reminder>"},
        {"type": "text", "text": prompt}]}]
    for i in range(results):
        msgs.append({"role": "assistant",
                     "content": [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                                  "content": [{"type": "text", "text": f"out{i}"}],
                                                  "is_error": i == 1}]})
        if reminder_after:
            msgs.append({"role": "user", "content": "<system-reminder>keep going</system-reminder>"})
    return msgs


def _post(server: ModelServer, body: dict,
          path: str = "/v1/messages?beta=true") -> tuple[int, list[tuple[str, dict]] | dict]:
    """POST and return (status, SSE events) for streams, (status, JSON) otherwise."""
    conn = _conn(server)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read().decode()
    finally:
        conn.close()
    if resp.getheader("Content-Type", "").startswith("text/event-stream"):
        events = []
        for chunk in raw.strip().split("\n\n"):
            name, data = chunk.split("\n", 1)
            events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
        return resp.status, events
    return resp.status, json.loads(raw)


def _stream(server: ModelServer, prompt: str, results: int = 0, **extra: object) -> list[tuple[str, dict]]:
    status, events = _post(server, {"model": "m", "stream": True, "tools": TOOLS,
                                    "messages": _messages(prompt, results=results), **extra})
    assert status == 200
    assert isinstance(events, list)
    return events


def _text(events: list[tuple[str, dict]]) -> str:
    return "".join(d["delta"].get("text", "") for n, d in events if n == "content_block_delta")


SCENARIO = [
    {"match": "SUB-7", "turns": [{"text": "sub answer"}]},
    {"match": "say hi", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": "echo 1"}}},
        {"tool_uses": [{"name": "Bash", "input": {"command": "echo 2"}},
                       {"name": "Read", "input": {"file_path": "x"}}]},
        {"text": "all done here"},
    ]},
]


# --- scripted model server on the wire --------------------------------------------------------


def test_stream_plays_turns_by_counting_tool_results_over_the_whole_conversation(model_server):
    server = model_server(SCENARIO)
    events = _stream(server, "please say hi")
    names = [n for n, _ in events]
    assert names == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop"]
    start = dict(events)["message_start"]["message"]
    assert start["usage"]["input_tokens"] > 10 and start["model"] == "m"
    block = dict(events)["content_block_start"]["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "Bash" and block["id"].startswith("toolu_")
    assert json.loads(dict(events)["content_block_delta"]["delta"]["partial_json"]) == {"command": "echo 1"}
    delta = dict(events)["message_delta"]
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] > 0

    # One result, followed by a reminder message: turn 1, two calls in one message.
    events = _stream(server, "please say hi", results=1)
    starts = [d["content_block"]["name"] for n, d in events if n == "content_block_start"]
    assert starts == ["Bash", "Read"]
    # Two results of that message still pending one: still turn 1; three in all: the text turn.
    assert [d["content_block"]["name"] for n, d in _stream(server, "please say hi", results=2)
            if n == "content_block_start"] == ["Bash", "Read"]
    events = _stream(server, "please say hi", results=3)
    assert _text(events) == "all done here"
    assert dict(events)["message_delta"]["delta"]["stop_reason"] == "end_turn"
    assert [r["turn"] for r in server.requests()] == [0, 1, 1, 2]

    results = server.tool_results()
    assert [(r["tool_use_id"], r["tool"], r["content"], r["is_error"]) for r in results] == [
        ("t0", "Bash", "out0", False), ("t1", "Bash", "out1", True), ("t2", "Bash", "out2", False)]
    assert {r["script"] for r in results} == {"say hi"}


def test_pick_turn_consumes_tool_turns_and_stops_at_text():
    turns = load_scenario(SCENARIO)[1]["turns"]
    assert [pick_turn(turns, n) for n in range(5)] == [0, 1, 1, 2, 2]
    assert pick_turn([], 0) == 0
    assert pick_turn([{"tool_use": {"name": "Bash"}}], 1) == 1  # past the end


def test_matching_ignores_reminders_and_side_requests_get_ok(model_server):
    server = model_server(SCENARIO)
    # "say hi" is in the reminder block only: no match.
    assert _text(_stream(server, "unrelated prompt")) == "ok"
    # A request without tools is a side request even if its prompt matches.
    status, events = _post(server, {"model": "m", "stream": True, "messages": _messages("say hi")})
    assert status == 200 and _text(events) == "ok"
    assert _text(_stream(server, "task SUB-7 now")) == "sub answer"
    assert _text(_stream(server, "task SUB-7 now", results=1)) == "sub answer"  # text turn replays
    reqs = server.requests()
    assert [r["script"] for r in reqs] == [None, None, "SUB-7", "SUB-7"]
    assert reqs[2]["first_user_text"] == "task SUB-7 now" and reqs[1]["has_tools"] is False


def test_past_the_last_turn_is_done_and_non_streaming_is_one_message(model_server):
    server = model_server([{"match": "go", "turns": [{"tool_use": {"name": "Bash", "input": {"command": "x"}}}]}])
    status, msg = _post(server, {"model": "m", "tools": TOOLS, "messages": _messages("go")})
    assert status == 200 and isinstance(msg, dict)
    assert msg["type"] == "message" and msg["stop_reason"] == "tool_use"
    assert msg["content"][0]["type"] == "tool_use" and msg["content"][0]["input"] == {"command": "x"}
    assert msg["usage"]["input_tokens"] > 0 and msg["usage"]["output_tokens"] > 0
    status, msg = _post(server, {"model": "m", "tools": TOOLS, "messages": _messages("go", results=1)})
    assert msg["content"] == [{"type": "text", "text": "done"}] and msg["stop_reason"] == "end_turn"


def test_head_count_tokens_and_unknown_paths(model_server):
    server = model_server()
    conn = _conn(server)
    conn.request("HEAD", "/")
    resp = conn.getresponse()
    resp.read()
    conn.close()
    assert resp.status == 200
    status, body = _post(server, {"messages": _messages("count me")}, "/v1/messages/count_tokens?beta=true")
    assert status == 200 and isinstance(body, dict) and body["input_tokens"] > 0
    status, body = _post(server, {}, "/v1/other")
    assert status == 404 and body["type"] == "error"
    assert [(r["method"], r["played"]) for r in server.requests()] == [
        ("HEAD", "head"), ("POST", "count_tokens"), ("POST", "404")]


def test_stall_holds_the_stream_open_until_stop(model_server):
    server = model_server([{"match": "hang", "turns": [{"stall_after_text": "partial"}]}])
    host, port = server.url.removeprefix("http://").split(":")
    body = json.dumps({"model": "m", "stream": True, "tools": TOOLS, "messages": _messages("hang")}).encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        seen = b""
        while b"partial" not in seen:
            chunk = sock.recv(65536)
            assert chunk, seen
            seen += chunk
        assert b"message_start" in seen and b"message_stop" not in seen
        assert server.requests()[-1]["played"] == "stall_after_text"
        # Nothing more arrives while the server runs; on stop the connection closes.
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            sock.recv(65536)
        sock.settimeout(60)
        t0 = time.monotonic()
        server.stop()
        rest = b""
        while chunk := sock.recv(65536):
            rest += chunk
        assert b"message_stop" not in rest
        assert time.monotonic() - t0 < 60


def test_slow_stream_sends_words_apart(model_server):
    server = model_server([{"match": "slowly", "turns": [{"slow": {"text": "one two three", "chunk_delay": 0.2}}]}])
    t0 = time.monotonic()
    events = _stream(server, "slowly please")
    elapsed = time.monotonic() - t0
    deltas = [d["delta"]["text"] for n, d in events if n == "content_block_delta"]
    assert deltas == ["one ", "two ", "three"]
    assert 0.4 <= elapsed < 60  # apart: at least the two delays (a loaded machine only adds)


def test_wait_for_returns_value_or_raises(model_server):
    server = model_server()
    with pytest.raises(TimeoutError):
        server.wait_for(lambda: server.requests(), timeout=0.2)
    _post(server, {"model": "m", "stream": False, "messages": _messages("x")})
    assert server.wait_for(lambda: len(server.requests()), timeout=60) == 1


@pytest.mark.parametrize("bad", [
    [{"turns": []}],
    [{"match": "x", "turns": [{"txt": "typo"}]}],
    [{"match": "x", "turns": [{"text": "a", "tool_use": {"name": "Bash"}}]}],
    [{"match": "x", "turns": [{"tool_use": {"input": {}}}]}],
    {"not": "a list"},
])
def test_bad_scenarios_are_refused(bad):
    with pytest.raises(ValueError):
        ModelServer(bad)


def test_module_cli_prints_url_records_and_stops_on_sigterm(tmp_path):
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"scripts": [{"match": "go", "turns": [{"text": "fine"}]}]}))
    record = tmp_path / "rec.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "claudeguard.testing.model_server", "--scenario", str(scenario),
                             "--record", str(record)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        conn.request("POST", "/v1/messages",
                     json.dumps({"model": "m", "tools": TOOLS, "messages": _messages("go", results=1)}))
        assert json.loads(conn.getresponse().read())["content"][0]["text"] == "fine"
        conn.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["tool_result", "request"]
    assert lines[0]["content"] == "out0" and lines[1]["script"] == "go"


# --- offline HOME, installer, runners -----------------------------------------------------------


def test_prepare_home_and_offline_env(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    key = "sk-ant-a-rather-long-key-0123456789abcdefghij"
    state = json.loads(prepare_home(home, cwd=work, api_key=key).read_text())
    assert state["hasCompletedOnboarding"] is True
    assert state["projects"][str(work.resolve())]["hasTrustDialogAccepted"] is True
    assert key[-20:] in state["customApiKeyResponses"]["approved"]
    env = offline_env(home, "http://127.0.0.1:1", key, base={"PATH": "/bin", "ANTHROPIC_AUTH_TOKEN": "secret",
                                                               "CLAUDECODE": "1"})
    assert env["HOME"] == str(home) and env["ANTHROPIC_API_KEY"] == key and env["PATH"] == "/bin"
    assert "ANTHROPIC_AUTH_TOKEN" not in env and "CLAUDECODE" not in env
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and env["DISABLE_AUTOUPDATER"] == "1"
    for name in ("XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "CLAUDEGUARD_RUNTIME_DIR", "CLAUDEGUARD_LOG_DIR", "TMPDIR"):
        assert Path(env[name]).is_relative_to(home), name
    assert os.stat(env["XDG_RUNTIME_DIR"]).st_mode & 0o077 == 0


def test_cli_install_without_npm_is_one_clean_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDEGUARD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert cli_install.cli_path("2.1.197") is None
    with pytest.raises(GuardError, match="npm not found") as info:
        cli_install.install_cli("2.1.197")
    assert "\n" not in str(info.value)
    with pytest.raises(GuardError, match="not an exact"):
        cli_install.install_cli("../2.1.197")
    # A directory without the binary (an interrupted install) does not count as installed.
    (tmp_path / "cache" / "cli" / "2.1.197" / "node_modules").mkdir(parents=True)
    assert cli_install.cli_path("2.1.197") is None


def test_run_claude_kills_the_process_group_on_timeout(tmp_path):
    pidfile = tmp_path / "bg.pid"
    script = f"sleep 30 & echo $! > {pidfile}; echo started; wait"
    with pytest.raises(subprocess.TimeoutExpired) as info:
        run_to_end(["sh", "-c", script], dict(os.environ), tmp_path, timeout=1)
    assert "started" in info.value.output
    bg = int(pidfile.read_text())
    wait_until(lambda: not _alive(bg), 60, "the background child to be stopped")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_text_pattern_sees_words_drawn_with_cursor_moves():
    raw = "\x1b[2C\x1b[1mScripted\x1b[22m\x1b[1CTUI\x1b[12Ganswer\x1b[K\r\n"
    assert text_pattern("Scripted TUI answer").search(raw)
    assert screen_text(raw) == "Scripted TUI answer"
    assert not text_pattern("Scripted answer").search(raw)


def test_screen_now_reads_what_the_terminal_shows(tmp_path):
    from claudeguard.testing.tui import close_tui, screen_now, spawn_tui

    script = "printf 'first\\033[2Cline\\r\\n'; printf 'ready\\n' > ready; exec sleep 30"
    child = spawn_tui(["/bin/sh", "-c", script], {"PATH": "/usr/bin:/bin"}, tmp_path)
    try:
        wait_until(lambda: (tmp_path / "ready").exists(), 60, "the child to print")
        assert screen_now(child) == "first line"
    finally:
        close_tui(child)


# --- the real CLIs --------------------------------------------------------------------------


def test_print_mode_gets_the_scripted_text(real_claude, model_server, offline_env, run_claude):
    server = model_server([{"match": "say hi", "turns": [{"text": "Hello from the script"}]}])
    t0 = time.monotonic()
    proc = run_claude([real_claude, "-p", "say hi"], offline_env.use(server), offline_env.cwd, timeout=60)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Hello from the script"
    main = [r for r in server.requests() if r["script"] == "say hi"]
    assert len(main) == 1 and main[0]["has_tools"] and main[0]["stream"]
    assert elapsed < 30


def test_bash_tool_call_runs_and_its_result_is_recorded(real_claude, model_server, offline_env, run_claude):
    server = model_server([{"match": "make the file", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": "echo hello > out.txt", "description": "write out.txt"}}},
        {"text": "made it"}]}])
    proc = run_claude([real_claude, "-p", "make the file", "--allowedTools", "Bash"], offline_env.use(server),
                      offline_env.cwd, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "made it"
    assert (offline_env.cwd / "out.txt").read_text() == "hello\n"
    [result] = server.tool_results()
    assert result["tool"] == "Bash" and result["is_error"] is False and result["script"] == "make the file"


def test_stream_json_lines_parse(real_claude, cli_version, model_server, offline_env, run_claude):
    server = model_server([{"match": "list it", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": "echo listed", "description": "echo"}}},
        {"text": "listed it"}]}])
    proc = run_claude([real_claude, "-p", "list it", "--allowedTools", "Bash", "--output-format", "stream-json",
                       "--verbose"], offline_env.use(server), offline_env.cwd, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    init = lines[0]
    assert (init["type"], init["subtype"]) == ("system", "init")
    assert init["claude_code_version"] == cli_version and "Bash" in init["tools"]
    result = lines[-1]
    assert result["type"] == "result" and result["subtype"] == "success" and result["is_error"] is False
    assert result["result"] == "listed it" and result["num_turns"] == 2
    assert result["usage"]["input_tokens"] > 0 and result["usage"]["output_tokens"] > 0
    tool_results = [b for line in lines if line["type"] == "user" for b in line["message"]["content"]
                    if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert len(tool_results) == 1 and "listed" in json.dumps(tool_results[0])


def test_background_subagent_plays_its_own_script_and_the_run_waits(real_claude, model_server, offline_env,
                                                                    run_claude):
    server = model_server([
        {"match": "SUBTASK-42", "turns": [
            {"tool_use": {"name": "Bash", "input": {"command": "echo sub > sub.txt", "description": "write sub.txt"}}},
            # Slow on purpose: the main agent has long finished its own turns by then.
            {"slow": {"text": "subagent finished its work", "chunk_delay": 0.3}}]},
        {"match": "start the agent", "turns": [
            {"tool_use": {"name": "Agent",
                          "input": {"description": "background job", "prompt": "SUBTASK-42: write sub.txt",
                                                     "subagent_type": "general-purpose", "run_in_background": True}}},
            {"text": "launched it"}]},
    ])
    proc = run_claude([real_claude, "-p", "start the agent", "--allowedTools", "Bash"], offline_env.use(server),
                      offline_env.cwd, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (offline_env.cwd / "sub.txt").read_text() == "sub\n"
    results = {r["tool"]: r for r in server.tool_results()}
    assert "Async agent launched" in results["Agent"]["content"]
    assert results["Bash"]["script"] == "SUBTASK-42" and results["Bash"]["is_error"] is False
    reqs = server.requests()
    sub_last = max(i for i, r in enumerate(reqs) if r["script"] == "SUBTASK-42")
    assert reqs[sub_last]["played"] == "slow"
    # The main agent was told of the finished task (a request after the subagent's last one):
    # -p waited for the background subagent instead of exiting after "launched it".
    assert any(r["script"] == "start the agent" for r in reqs[sub_last + 1:])
    assert len({r["session_id"] for r in reqs if r["script"]}) == 1  # subagents share the session


def test_tui_answers_a_prompt_under_a_pty(real_claude, model_server, offline_env, spawn_tui):
    server = model_server([{"match": "hello tui", "turns": [{"text": "Scripted TUI answer"}]}])
    child = spawn_tui([real_claude], offline_env.use(server), offline_env.cwd, dimensions=(40, 120))
    expect_text(child, READY_TEXT, timeout=30)  # no onboarding, trust or API key dialog on the way
    child.send("hello tui")
    expect_text(child, "hello tui", timeout=10)
    child.send("\r")
    expect_text(child, "Scripted TUI answer", timeout=30)
    assert exit_tui(child) == 0
    assert [r["script"] for r in server.requests() if r["script"]] == ["hello tui"]
