"""The launcher's activity feed (shim/activity.py) with a stand-in for the service's connection:
batched activity lines, the service's verdicts carried out once, the launcher's own monitor
when the service is gone (carrying a reported stall on, not reporting it again), and handing
back to a service."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from claudeguard.shim.activity import Feed, compact
from claudeguard.watchdog.signals import StreamMsg

from test_watchdog_monitor import env, session_dir, sleeper  # noqa: F401 - fixtures and helpers
from test_watchdog_sampler import wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="real process trees on Linux")


class Cfg:
    def __init__(self, **values: object) -> None:
        self.values = {"stall_after": 1.0, "tool_stall_after": 60.0, "on_stall": "warn", "sample_interval": 0.1,
                       "kill_grace": 1.0, **values}

    def get(self, key: str) -> object:
        return self.values[key.split(".", 1)[1]]

    def watchdog(self) -> dict[str, object]:  # Config.watchdog: the [watchdog] section
        return dict(self.values)


class Args:
    print_mode = True
    prompt = "go"

    def __init__(self, output_format: str | None = None) -> None:
        self.output_format = output_format

    def last(self, *names: str) -> str | None:
        return self.output_format


class Link:
    """The service's side of the registration's connection: what the launcher sent."""

    def __init__(self) -> None:
        self.sent: list[dict] = []
        self.listener = None
        self.up = True
        self.lock = threading.Lock()

    def send(self, msg: dict) -> bool:
        with self.lock:
            if self.up:
                self.sent.append(msg)
            return self.up

    def ops(self, op: str) -> list[dict]:
        with self.lock:
            return [m for m in self.sent if m.get("op") == op]


def feed(child_pid: int, link: Link | None, output_format: str | None = None, **cfg: object) -> Feed:
    return Feed(child_pid=child_pid, session_id="s1", session_dir=str(session_dir("s1")), cfg=Cfg(**cfg),
                args=Args(output_format), cwd="/proj", argv=["claude", "-p", "go"], registration=link)


def stall_event(since: float) -> dict:
    return {"event": "stall", "diagnosis": "stalled: thinking for 9 s", "action": "warn",
            "stall": {"time": "now", "state": "thinking", "diagnosis": "stalled: thinking for 9 s", "action": "warn"},
            "notify": [], "carry": {"in_stall": True, "stall_count": 1, "since": since}}


def test_activity_is_batched_and_the_relay_never_sends(env, procs, capfd):  # noqa: F811 - pytest fixtures imported above
    child = sleeper(procs)
    link = Link()
    f = feed(child.pid, link, output_format="stream-json", sample_interval=0.2).start()
    try:
        (watch,) = link.ops("watch")
        assert watch["child_pid"] == child.pid and watch["config"]["stall_after"] == 1.0
        f.message({"event": "watching", "ok": True})
        line = b'{"type":"stream_event","event":{"type":"content_block_delta","index":0}}\n'
        began = time.monotonic()
        for _ in range(500):
            f.feed_stdout(line)
        assert f.monitor is None  # no local monitor: the service samples

        def counted() -> int:
            return sum(1 + m.get("collapsed", 0) for a in link.ops("activity") for m in a.get("msgs", []))

        wait_until(lambda: counted() == 500, 60)  # every delta counted, as summaries or in a count
        took = time.monotonic() - began
        acts = link.ops("activity")
        assert len(acts) <= took / 0.2 + 2 and len(acts) < 20  # one line per interval, not one per chunk
        assert [a["out"] for a in acts if "out" in a][-1][0] == 500 * len(line)
    finally:
        f.stop(0)
    assert link.ops("watch-end")[-1]["code"] == 0


def test_the_service_verdict_is_carried_out_once(env, procs, capfd):  # noqa: F811 - pytest fixtures imported above
    child = sleeper(procs)
    link = Link()
    f = feed(child.pid, link, on_stall="kill").start()
    f.message({"event": "watching", "ok": True})
    event = stall_event(time.monotonic() - 5)
    event["action"] = "kill"
    f.message(event)
    assert child.wait(10) is not None
    f.stop(child.returncode)
    assert f.killed and len(f.stalls) == 1
    err = capfd.readouterr().err
    assert err.count("claudeguard: ") == 1 and "(stopping it)" in err


def test_lost_service_the_local_monitor_carries_the_stall_on(env, procs, capfd):  # noqa: F811 - pytest fixtures imported above
    child = sleeper(procs)
    link = Link()
    f = feed(child.pid, link).start()
    try:
        f.message({"event": "watching", "ok": True})
        f.message(stall_event(time.monotonic() - 5))
        link.up = False
        f.lost()  # the service died: this process watches now
        mon = f.monitor
        assert mon is not None
        # Three stall thresholds of samples: the episode goes on, it is not news.
        started = time.monotonic()
        wait_until(lambda: mon.last_verdict is not None and mon.last_verdict.time >= started + 3.0, 60)
        assert mon.tracker.progress.in_stall and mon.tracker.progress.stall_count == 1 and mon.stalls == []
        # A new service took the session: the local monitor stops before it asks the service.
        link.up = True
        f.registered()
        assert f.monitor is None and mon._thread is not None and not mon._thread.is_alive()
        assert link.ops("watch")[-1]["carry"]["in_stall"] is True
    finally:
        f.stop(None)
    err = capfd.readouterr().err
    assert err.count("claudeguard: ") == 1, err
    assert len(f.stalls) == 1


def test_without_a_service_the_launcher_watches_and_reports_once(env, procs, capfd):  # noqa: F811 - pytest fixtures imported above
    child = sleeper(procs)
    f = feed(child.pid, None).start()
    try:
        assert f.monitor is not None
        wait_until(lambda: f.monitor.tracker.progress.stall_count == 1, 60)
    finally:
        f.stop(None)
    assert capfd.readouterr().err.count("claudeguard: ") == 1
    assert len(f.stalls) == 1


def test_compact_keeps_usage_and_the_last_partial():
    msgs = [StreamMsg(1.0, "partial", partial_event="message_start", message_id="m", tokens=(1, 2, 0, 0))]
    msgs += [StreamMsg(1.0 + i, "partial", partial_event="content_block_delta") for i in range(5)]
    msgs += [StreamMsg(7.0, "assistant", message_id="m", tool_uses=[("t1", "Bash", "ls")])]
    out = compact(msgs)
    assert [m["kind"] for m in out] == ["partial", "partial", "assistant"]
    assert out[0]["tokens"] == (1, 2, 0, 0) and out[1]["collapsed"] == 4 and out[1]["time"] == 5.0
    assert out[2]["tool_uses"] == [("t1", "Bash", "ls")]


PROBE = """
import json, sys, time
from claudeguard.shim.activity import Feed
class Cfg:
    def watchdog(self): return {"stall_after": 300, "tool_stall_after": 1800, "on_stall": "warn",
                                "sample_interval": 0.1, "kill_grace": 5}
class Args:
    print_mode, prompt = True, "go"
    def last(self, *names): return "stream-json"
class Link:
    listener = None
    def send(self, msg): return True
feed = Feed(child_pid=int(sys.argv[1]), session_id="probe", session_dir=sys.argv[2], cfg=Cfg(), args=Args(), cwd="/",
            argv=["claude"], registration=Link()).start()
feed.message({"event": "watching", "ok": True})
feed.feed_stdout(b'{"type":"assistant","message":{"id":"m","content":[]}}\\n')
time.sleep(0.3)
feed.stop(0)
heavy = ("psutil", "claudeguard.watchdog.sampler", "claudeguard.watchdog.monitor")
print(json.dumps(sorted(m for m in sys.modules if m in heavy)))
"""


def test_the_launcher_feeding_the_service_imports_no_sampler(env, procs):  # noqa: F811 - pytest fixtures imported above
    import json
    import subprocess
    from pathlib import Path

    child = sleeper(procs)
    out = subprocess.run([sys.executable, "-c", PROBE, str(child.pid), str(session_dir("probe"))], capture_output=True,
                         text=True, timeout=30, cwd=str(Path(__file__).parent.parent))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
