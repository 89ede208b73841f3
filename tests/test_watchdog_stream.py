"""The stream-json tap: line summaries (shaped like the real CLI's output), line reassembly over
any chunking, large lines, and the tap thread."""

from __future__ import annotations

import json
import threading
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from claudeguard.watchdog import stream
from claudeguard.watchdog.stream import Context, LineSplitter, StreamTap, summarize_line

SID = "907aa87a-53fe-4041-b794-6d09829d5e3d"
# Shapes as written by the CLI (2.1.197 with --include-partial-messages, and 2.1.330), shortened.
INIT = ('{"type":"system","subtype":"init","cwd":"/proj","session_id":"%s","tools":["Task","Bash","Read"],'
        '"mcp_servers":[{"name":"github","status":"connected"},{"name":"db","status":"failed"}],'
        '"model":"claude-opus-4-8","permissionMode":"default","claude_code_version":"2.1.197"}' % SID)
STATUS = '{"type":"system","subtype":"status","status":"requesting","uuid":"f331ca4b","session_id":"%s"}' % SID
MSG_START = ('{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_01","type":"message",'
             '"role":"assistant","model":"claude-opus-4-8","content":[],"stop_reason":null,"stop_sequence":null,'
             '"usage":{"input_tokens":3201,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}},'
             '"session_id":"%s","parent_tool_use_id":null,"uuid":"u1"}' % SID)
DELTA = ('{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
         '"text":"all good"}},"session_id":"%s","parent_tool_use_id":null,"uuid":"u2"}' % SID)
MSG_DELTA = ('{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"tool_use",'
             '"stop_sequence":null},"usage":{"output_tokens":24}},"session_id":"%s","parent_tool_use_id":null,'
             '"uuid":"u3"}' % SID)
MSG_STOP = ('{"type":"stream_event","event":{"type":"message_stop"},"session_id":"%s","parent_tool_use_id":null,'
            '"uuid":"u4"}' % SID)
ASSISTANT = ('{"type":"assistant","message":{"id":"msg_01","type":"message","role":"assistant",'
             '"model":"claude-opus-4-8","content":[{"type":"tool_use","id":"toolu_01","name":"Bash",'
             '"input":{"command":"echo hi; sleep 1",'
             '"description":"say hi"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":4420,'
             '"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"context_management":null},'
             '"parent_tool_use_id":null,"session_id":"%s","uuid":"u5"}' % SID)
USER = ('{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01","type":"tool_result",'
        '"content":"hi","is_error":false}]},"parent_tool_use_id":null,"session_id":"%s","uuid":"u6",'
        '"tool_use_result":{"stdout":"hi","stderr":"","interrupted":false},'
        '"tool_result_meta":[{"id":"toolu_01","permission_decision":{"decision":"accept"}}]}' % SID)
# 2.1.330 writes "type" late in result lines.
RESULT = ('{"duration_api_ms":131,"stop_reason":"end_turn","session_id":"%s","total_cost_usd":0.05,'
          '"usage":{"input_tokens":13707,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":60,'
          '"server_tool_use":{"web_search_requests":0}},"permission_denials":[],"is_error":false,"num_turns":4,'
          '"subtype":"success","result":"all good","type":"result","uuid":"u7"}' % SID)
TASK_STARTED = ('{"type":"system","subtype":"task_started","task_id":"t1","tool_use_id":"toolu_02",'
                '"description":"watch logs","subagent_type":"general-purpose","is_backgrounded":true,'
                '"session_id":"%s"}' % SID)
TASK_DONE = ('{"type":"system","subtype":"task_notification","task_id":"t1","tool_use_id":"toolu_02",'
             '"status":"completed","output_file":"","summary":"done","session_id":"%s"}' % SID)
CONTROL = ('{"type":"control_request","request_id":"r1",'
           '"request":{"subtype":"can_use_tool","tool_name":"Bash","input":{}}}')


def summ(line: str, ctx: Context | None = None):
    return summarize_line(line.encode(), 1.0, ctx)


def test_real_shaped_lines():
    init = summ(INIT)
    assert init.kind == "init" and [s["name"] for s in init.mcp_servers] == ["github", "db"]
    assert summ(STATUS).kind == "other"
    a = summ(ASSISTANT)
    assert a.kind == "assistant" and a.message_id == "msg_01" and a.tokens == (4420, 1, 0, 0)
    assert a.tool_uses == [("toolu_01", "Bash", "echo hi; sleep 1")]
    u = summ(USER)
    assert u.kind == "user" and u.tool_results == ["toolu_01"] and u.parent_tool_use_id is None
    r = summ(RESULT)
    assert r.kind == "result" and r.tokens == (13707, 60, 0, 0)
    assert summ(TASK_STARTED).task == {"description": "watch logs", "subagent_type": "general-purpose",
                                       "tool_use_id": "toolu_02", "is_backgrounded": True}
    assert summ(TASK_DONE).kind == "task-end" and summ(TASK_DONE).task_id == "t1"
    assert summ(CONTROL).kind == "control" and summ(CONTROL).request == "can_use_tool"
    assert summ("not json at all").kind == "other"
    assert summ("   ") is None


def test_partial_events_carry_usage_for_their_message():
    ctx = Context()
    start = summ(MSG_START, ctx)
    assert start.kind == "partial" and start.partial_event == "message_start" and start.tokens == (3201, 1, 0, 0)
    assert summ(DELTA, ctx).partial_event == "content_block_delta"
    delta = summ(MSG_DELTA, ctx)
    assert delta.message_id == "msg_01" and delta.tokens == (0, 24, 0, 0)
    assert summ(MSG_STOP, ctx).partial_event == "message_stop"


def test_agent_call_detail():
    line = json.dumps({"type": "assistant", "message": {"id": "m", "content": [
        {"type": "tool_use", "id": "toolu_a", "name": "Agent",
         "input": {"subagent_type": "Explore", "description": "find it", "prompt": "...", "run_in_background": True}}]},
        "parent_tool_use_id": None})
    assert summ(line).tool_uses == [("toolu_a", "Agent", "Explore in background: find it")]


def test_huge_tool_result_is_scanned_not_parsed_and_quoted_ids_are_ignored():
    content = "x" * (3 << 20) + ' {"tool_use_id":"fake"} '
    line = json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": "toolu_big", "type": "tool_result", "content": content},
        {"tool_use_id": "toolu_two", "type": "tool_result", "content": "ok"}]},
        "parent_tool_use_id": "toolu_parent"}, separators=(",", ":"))
    t0 = time.perf_counter()
    m = summ(line)
    assert time.perf_counter() - t0 < 0.05
    assert m.tool_results == ["toolu_big", "toolu_two"] and m.parent_tool_use_id == "toolu_parent"


def test_huge_assistant_line_falls_back_to_a_scan(monkeypatch):
    monkeypatch.setattr(stream, "PARSE_MAX", 1000)
    line = json.dumps({"type": "assistant", "message": {"id": "msg_big", "type": "message", "content": [
        {"type": "tool_use", "id": "toolu_w", "name": "Write", "input": {"file_path": "/p", "content": "y" * 5000}}],
        "usage": {"input_tokens": 7, "output_tokens": 900, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 2}},
        "parent_tool_use_id": None}, separators=(",", ":"))
    m = summ(line)
    assert m.kind == "assistant" and m.tool_uses == [("toolu_w", "Write", "")]
    assert m.message_id == "msg_big" and m.tokens == (7, 900, 0, 2)


LINES = [INIT, STATUS, MSG_START, DELTA, ASSISTANT, MSG_DELTA, MSG_STOP, USER, RESULT, "", "plain text"]


@settings(max_examples=150, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=30))
def test_any_chunking_gives_the_same_lines(cuts):
    data = ("\n".join(LINES) + "\npartial-tail").encode()
    got: list[bytes] = []
    splitter = LineSplitter(lambda line, t: got.append(line))
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    for a, b in zip(points, points[1:], strict=False):
        splitter.feed(data[a:b], 0.0)
    assert got == data.split(b"\n")[:-1]


def test_overlong_line_is_dropped_and_the_next_one_kept():
    got: list[bytes] = []
    splitter = LineSplitter(lambda line, t: got.append(line), line_max=100)
    splitter.feed(b"a" * 80, 0.0)
    splitter.feed(b"b" * 80, 0.0)
    splitter.feed(b"c" * 80 + b"\nnext\n", 0.0)
    assert got == [b"next"]


def test_tap_thread_summarizes_fed_chunks():
    got = []
    done = threading.Event()

    def sink(m):
        got.append(m)
        if m.kind == "result":
            done.set()

    tap = StreamTap(sink)
    tap.start()
    data = ("\n".join([INIT, ASSISTANT, USER, RESULT]) + "\n").encode()
    for i in range(0, len(data), 97):
        tap.feed(data[i:i + 97], 5.0)
    assert done.wait(5)
    tap.stop()
    assert [m.kind for m in got] == ["init", "assistant", "user", "result"]
    assert all(m.time == 5.0 for m in got) and tap.lines == 4


def test_tap_that_falls_behind_drops_instead_of_growing():
    got = []
    tap = StreamTap(got.append, max_backlog=1000)
    line = (ASSISTANT + "\n").encode()
    for _ in range(50):  # fed before the thread runs: far past the backlog
        tap.feed(line, 1.0)
    tap.start()
    tap.stop(timeout=5)
    assert tap.skipped_bytes > 0 and tap.done_bytes == tap.fed_bytes
    assert 0 < len(got) < 50
