"""watchdog/transcript.py: the ends of tool calls read from growing transcripts, and the Tracker's
use of them (the real CLIs: tests/test_watchdog_transcript_real.py)."""

from __future__ import annotations

import json
import os

from claudeguard.watchdog import transcript
from claudeguard.watchdog.signals import Limits
from claudeguard.watchdog.state import Tracker
from claudeguard.watchdog.transcript import TranscriptEnds, subagent_transcript


def _result(call_id: str, stamp: str = "2026-11-23T18:28:39.011Z") -> bytes:
    record = {"type": "user", "timestamp": stamp,
              "message": {"role": "user", "content": [{"tool_use_id": call_id, "type": "tool_result", "content": "x"}]}}
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def _use(call_id: str) -> bytes:
    record = {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": call_id, "name": "Bash"}]}}
    return json.dumps(record).encode() + b"\n"


def test_results_are_read_as_the_file_grows_and_a_cut_line_waits_for_its_end(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(_use("a") + _result("a"))
    ends = TranscriptEnds()
    ends.read([str(path)])
    assert list(ends.ended) == ["a"]
    assert ends.ended["a"] == 1795458519.011  # the record's own timestamp
    line = _result("b")
    with open(path, "ab") as fh:
        fh.write(line[:30])
    ends.read([str(path)])
    assert list(ends.ended) == ["a"]
    with open(path, "ab") as fh:
        fh.write(line[30:])
    ends.read([str(path)])
    assert list(ends.ended) == ["a", "b"]


def test_only_tool_results_of_user_records_count(tmp_path):
    path = tmp_path / "s.jsonl"
    # An assistant's text that quotes a tool result, a progress record, and a broken line.
    quoted = {"type": "assistant", "message": {"content": [
        {"type": "text", "text": '{"type":"tool_result","tool_use_id":"q"}'}]}}
    progress = {"type": "progress", "message": {"content": [{"type": "tool_result", "tool_use_id": "p"}]}}
    path.write_bytes(json.dumps(quoted).encode() + b"\n" + json.dumps(progress).encode() + b"\n"
                     + b'{"type":"user","tool_result"\n' + _result("r"))
    ends = TranscriptEnds()
    ends.read([str(path)])
    assert list(ends.ended) == ["r"]


def test_a_missing_file_a_link_and_a_fifo_give_nothing(tmp_path):
    real = tmp_path / "real.jsonl"
    real.write_bytes(_result("linked"))
    (tmp_path / "link.jsonl").symlink_to(real)
    os.mkfifo(tmp_path / "fifo.jsonl")
    ends = TranscriptEnds()
    ends.read([str(tmp_path / "missing.jsonl"), str(tmp_path / "link.jsonl"), str(tmp_path / "fifo.jsonl")])
    assert ends.ended == {}


def test_a_first_read_looks_back_only_so_far_and_skips_the_cut_line(tmp_path, monkeypatch):
    monkeypatch.setattr(transcript, "LOOKBACK", 200)
    path = tmp_path / "s.jsonl"
    old = b"".join(_result(f"old{i}") for i in range(20))
    path.write_bytes(old + _result("new"))
    ends = TranscriptEnds()
    ends.read([str(path)])
    assert "old0" not in ends.ended and "new" in ends.ended
    assert len(ends.ended) <= 2  # at most the line before the last one fits in 200 bytes


def test_a_replaced_file_is_read_from_its_start(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(_result("a") + _result("b"))
    ends = TranscriptEnds()
    ends.read([str(path)])
    path.unlink()
    path.write_bytes(_result("c"))  # shorter than the offset reached, and another inode
    ends.read([str(path)])
    assert list(ends.ended) == ["a", "b", "c"]


def test_the_subagent_transcript_is_beside_the_sessions():
    assert subagent_transcript("/h/p/s1.jsonl", "a5cc") == "/h/p/s1/subagents/agent-a5cc.jsonl"
    assert subagent_transcript("/h/p/s1.jsonl", "../x") is None
    assert subagent_transcript("/h/p/s1.txt", "a5cc") is None


def test_the_tracker_reads_only_while_a_hook_call_is_in_flight_and_drops_the_ended():
    tr = Tracker(Limits(stall_after=3, tool_stall_after=60, interval=0.5), start=0.0)
    assert tr.transcripts_to_read() == []
    main = "/h/p/s1.jsonl"
    tr.guard(1.0, {"event": "tool-start", "tool": "Bash", "tool_use_id": "m1", "transcript": main})
    tr.guard(1.5, {"event": "tool-start", "tool": "Bash", "tool_use_id": "s1", "agent_id": "ag",
                   "agent_type": "general-purpose", "transcript": main})
    assert tr.transcripts_to_read() == [main, "/h/p/s1/subagents/agent-ag.jsonl"]
    assert tr.verdict(2.0).base == "tool"
    tr.calls_ended({"m1": 2.5})
    assert tr.transcripts_to_read() == ["/h/p/s1/subagents/agent-ag.jsonl"]
    assert tr.progress.last == 2.5
    tr.calls_ended({"s1": 3.0, "other": 3.0})
    assert tr.work.calls == {} and tr.transcripts_to_read() == []
    assert tr.verdict(4.0).base != "tool"
