"""The watchdog's state machine on synthetic runs: no processes, no real time."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claudeguard.watchdog.signals import (
    AWAITING, BLOCKED, EXITED, FINISHING, IDLE, STALLED, STARTING, STREAMING, THINKING, TOOL,
    Limits, ProcInfo, Sample, StreamMsg,
)
from claudeguard.watchdog.state import Tracker

ROOT = 100


class Run:
    """A synthetic child: cumulative counters per pid, advanced one sample at a time."""

    def __init__(self, limits: Limits | None = None, start: float = 1000.0) -> None:
        self.limits = limits or Limits(stall_after=60, tool_stall_after=600, interval=1.0)
        self.t = start
        self.tracker = Tracker(self.limits, start)
        self.procs: dict[int, dict] = {ROOT: dict(pid=ROOT, ppid=1, name="claude", cpu=1.5, io=10_000, start=1.0)}
        self.verdicts = [self.tracker.sample(self._sample())]

    def _sample(self) -> Sample:
        return Sample(self.t, ROOT, {pid: ProcInfo(**p) for pid, p in self.procs.items()})

    def spawn(self, pid: int, ppid: int = ROOT, name: str = "bash", **kw: object) -> None:
        self.procs[pid] = dict(pid=pid, ppid=ppid, name=name, start=self.t, **kw)

    def step(self, dt: float | None = None, cpu: dict[int, float] | None = None, io: dict[int, int] | None = None):
        self.t += self.limits.interval if dt is None else dt
        for pid, d in (cpu or {}).items():
            self.procs[pid]["cpu"] = self.procs[pid].get("cpu", 0.0) + d
        for pid, d in (io or {}).items():
            self.procs[pid]["io"] = self.procs[pid].get("io", 0) + d
        v = self.tracker.sample(self._sample())
        self.verdicts.append(v)
        return v

    def idle(self, seconds: float, rng: random.Random | None = None):
        """The observed idle CLI: 0-25 ms CPU per second, a ~100 ms spike now and then, io drift."""
        rng = rng or random.Random(7)
        v = None
        for _ in range(int(round(seconds / self.limits.interval))):
            d = rng.uniform(0, 0.025) * self.limits.interval + (0.1 if rng.random() < 0.1 else 0.0)
            v = self.step(cpu={ROOT: d}, io={ROOT: int(50 * self.limits.interval)})
            if v.stalled:
                return v
        return v

    def stream(self, kind: str, **kw: object) -> None:
        self.tracker.stream(StreamMsg(self.t, kind, **kw))

    def guard(self, event: str, **kw: object) -> None:
        self.tracker.guard(self.t, {"event": event, **kw})


def test_idle_cli_noise_is_a_stall_within_threshold_plus_two_samples():
    run = Run()
    run.tracker.output(run.t, 10)  # a first line: the session is alive
    t0 = run.t
    v = run.idle(200)
    assert v.stalled and v.new_stall and v.state == STALLED and v.base == THINKING
    assert 60 <= v.time - t0 <= 60 + 2 * run.limits.interval
    assert "model stream silent 60 s" in v.diagnosis and "tree CPU" in v.diagnosis
    assert v.diagnosis.startswith("stalled: thinking for 60 s")


def test_detection_at_two_second_interval_too():
    run = Run(Limits(stall_after=30, interval=2.0))
    run.tracker.output(run.t, 10)
    t0 = run.t
    v = run.idle(100)
    assert v.stalled and 30 <= v.time - t0 <= 34


def test_busy_cli_is_never_stalled():
    run = Run()
    for _ in range(300):
        v = run.step(cpu={ROOT: 0.4})
        assert not v.stalled


def test_streaming_io_is_progress_and_its_end_starts_the_clock():
    run = Run()
    run.tracker.output(run.t, 10)
    for _ in range(100):
        v = run.step(cpu={ROOT: 0.01}, io={ROOT: 3000})  # a slow model stream arriving
        assert not v.stalled
    assert v.base == STREAMING
    t_end = run.t
    v = run.idle(200)
    assert v.stalled and 60 <= v.time - t_end <= 62


def test_starting_state_then_first_output():
    run = Run()
    v = run.step(cpu={ROOT: 0.01})
    assert v.base == STARTING
    run.tracker.output(run.t, 100)
    assert run.step(cpu={ROOT: 0.01}).base == STREAMING
    run.step()
    run.step()
    assert run.step().base == THINKING


def test_silent_start_is_diagnosed_as_starting():
    run = Run(Limits(stall_after=20, interval=1.0, startup_grace=30))
    v = run.idle(100)
    assert v.stalled and v.base == STARTING
    assert v.diagnosis.startswith("stalled: starting for 20 s: no output and no hook event yet")


def test_tool_from_stream_json_is_named_and_uses_the_tool_threshold():
    run = Run()
    run.stream("assistant", message_id="m1", tokens=(10, 5, 0, 0), tool_uses=[("toolu_1", "Bash", "sleep 1000")])
    v = run.step()
    assert v.base == TOOL and v.detail == "Bash"
    assert v.evidence["tools"][0]["detail"] == "sleep 1000"
    run.spawn(200, name="bash")
    run.spawn(201, ppid=200, name="sleep")
    v = run.idle(120)
    assert not v.stalled  # past stall_after, under tool_stall_after
    v = run.idle(600)
    assert v.stalled and v.base == TOOL and 600 <= v.quiet_s <= 602
    assert v.diagnosis.startswith("stalled: tool Bash (toolu_1) for 6")
    assert "with no CPU in its processes (bash 200 S, sleep 201 S)" in v.diagnosis
    run.stream("user", tool_results=["toolu_1"])
    v = run.step()
    assert not v.stalled and v.base == THINKING


def test_a_tool_whose_processes_use_cpu_is_progress():
    run = Run(Limits(stall_after=5, tool_stall_after=10, interval=1.0))
    run.guard("tool-start", tool="Bash", tool_use_id="toolu_9")
    run.spawn(300, name="make")
    for _ in range(100):
        v = run.step(cpu={ROOT: 0.01, 300: 0.08})  # a modest compiler: above the 0.05 s floor
        assert not v.stalled and v.base == TOOL
    # Many small processes together count as well.
    for pid in range(400, 410):
        run.spawn(pid, name="cc1")
    for _ in range(30):
        v = run.step(cpu={pid: 0.02 for pid in range(400, 410)})
        assert not v.stalled


def test_short_lived_children_are_credited_once():
    run = Run()
    run.spawn(500, name="git", cpu=0.2)
    run.step()
    # git ran 0.7 s more and exited; the CLI reaped it (its children time grew by all 0.9 s).
    del run.procs[500]
    run.procs[ROOT]["cpu_children"] = 0.9
    before = run.tracker.progress.cpu_total
    v = run.step()
    assert abs(run.tracker.progress.cpu_total - before - 0.7) < 1e-6
    assert v.evidence["last_progress"].startswith("CPU:")


def test_mcp_tool_stall_names_the_server():
    run = Run(Limits(stall_after=5, tool_stall_after=20, interval=1.0))
    run.stream("assistant", message_id="m1", tool_uses=[("toolu_m", "mcp__github__create_issue", "")])
    v = run.idle(60)
    assert v.stalled
    assert ("tool mcp__github__create_issue (toolu_m) for 20 s: MCP server github idle with a request outstanding"
            in v.diagnosis)


def test_awaiting_approval_never_stalls_and_restarts_the_clock():
    run = Run(Limits(stall_after=10, interval=1.0))
    run.tracker.output(run.t, 10)
    run.tracker.pending(run.t, 1)
    for _ in range(100):
        v = run.step()
        assert v.base == AWAITING and not v.stalled
    run.tracker.pending(run.t, 0)
    t0 = run.t
    v = run.idle(100)
    assert v.stalled and v.base == THINKING and 10 <= v.time - t0 <= 12


def test_pending_from_events_when_the_channel_is_unknown():
    run = Run(Limits(stall_after=10, interval=1.0))
    run.tracker.pending(run.t, None)
    run.guard("approval-wait", request_id="r1")
    assert run.step().base == AWAITING
    run.guard("approval-done", request_id="r1")
    assert run.step().base != AWAITING


def test_interactive_idle_never_stalls_and_a_prompt_starts_a_turn():
    run = Run(Limits(stall_after=10, interval=1.0, interactive=True, initial_prompt=False))
    for _ in range(60):
        v = run.step()
        assert v.base == IDLE and not v.stalled
    run.guard("other", hook_event_name="UserPromptSubmit")
    t0 = run.t
    v = run.idle(60)
    assert v.stalled and v.base == THINKING and 10 <= v.time - t0 <= 12
    run.guard("other", hook_event_name="Stop")
    v = run.step()
    assert v.base == IDLE and not v.stalled


def test_interactive_idle_prompt_notification_means_idle():
    run = Run(Limits(stall_after=100, interval=1.0, interactive=True, initial_prompt=True))
    assert run.step().base == STARTING
    run.guard("notification", notification_type="idle_prompt", message="Claude is waiting for your input")
    assert run.step().base == IDLE


def test_dialog_on_screen_is_blocked_on_terminal():
    run = Run(Limits(stall_after=10, interval=1.0))
    run.tracker.screen(run.t, "Bash command")
    v = run.idle(60)
    assert v.stalled and v.base == BLOCKED
    assert v.diagnosis.startswith("stalled: blocked reading its terminal: a prompt is waiting (Bash command) for 10 s")
    run.tracker.screen(run.t, None)
    assert not run.step().stalled


def test_permission_prompt_notification_is_blocked_until_something_happens():
    run = Run(Limits(stall_after=10, interval=1.0))
    run.guard("notification", notification_type="permission_prompt", message="Claude needs your permission to use Bash")
    v = run.step()
    assert v.base == BLOCKED and v.detail == "Claude needs your permission to use Bash"
    run.guard("tool-start", tool="Bash", tool_use_id="t1")
    assert run.step().base == TOOL


def test_process_reading_a_terminal_is_blocked_after_two_samples():
    run = Run(Limits(stall_after=10, tool_stall_after=1000, interval=1.0))
    run.guard("tool-start", tool="Bash", tool_use_id="t1")
    run.spawn(600, name="ssh", reading="/dev/pts/4")
    assert run.step().base == TOOL
    v = run.step()
    assert v.base == BLOCKED and v.detail == "ssh (pid 600) reads /dev/pts/4"
    v = run.idle(30)
    assert v.stalled  # stall_after applies, not tool_stall_after
    assert "blocked reading its terminal: ssh (pid 600) reads /dev/pts/4" in v.diagnosis


def test_interactive_cli_reading_its_own_terminal_is_not_blocked():
    run = Run(Limits(stall_after=10, interval=1.0, interactive=True, initial_prompt=False))
    run.procs[ROOT]["reading"] = "/dev/pts/1"
    for _ in range(5):
        assert run.step().base == IDLE


@pytest.mark.parametrize(("field", "value", "named"), [
    ("reading", "stdin (pipe)", "the CLI is blocked reading its stdin (pipe)"),
    ("status", "T", "the CLI is stopped (SIGSTOP)"),
])
def test_what_blocks_the_cli_is_named_in_the_diagnosis(field, value, named):
    run = Run(Limits(stall_after=5, interval=1.0))
    run.procs[ROOT][field] = value
    v = run.idle(20)
    assert v.stalled and named in v.diagnosis


def test_stall_episodes_are_reported_once_each():
    run = Run(Limits(stall_after=5, interval=1.0))
    run.tracker.output(run.t, 1)
    news = []
    for i in range(40):
        if i == 20:
            run.tracker.output(run.t, 2)  # progress ends the first episode
        v = run.step()
        news.append(v.new_stall)
    assert sum(news) == 2 and run.tracker.progress.stall_count == 2


def test_tokens_are_counted_once_per_message():
    run = Run()
    run.stream("assistant", message_id="m1", tokens=(100, 1, 0, 0), tool_uses=[("a", "Read", "")])
    run.stream("assistant", message_id="m1", tokens=(100, 1, 0, 0), tool_uses=[("b", "Bash", "")])
    run.stream("partial", partial_event="message_delta", message_id="m1", tokens=(0, 40, 0, 0))
    run.stream("assistant", message_id="m2", tokens=(150, 3, 5, 7))
    assert run.tracker.flow.tokens == 100 + 40 + 150 + 3
    run.stream("result", tokens=(200, 50, 0, 0))
    assert run.tracker.flow.tokens == 293


def test_subagent_and_background_task_states():
    run = Run(Limits(stall_after=10, tool_stall_after=100, interval=1.0))
    run.stream("assistant", message_id="m1", tool_uses=[("toolu_a", "Agent", "Explore: look around")])
    v = run.step()
    assert v.base == THINKING and "subagent via Agent (toolu_a): Explore: look around" in v.detail
    run.stream("assistant", message_id="m2", parent_tool_use_id="toolu_a", tool_uses=[("toolu_g", "Grep", "x")])
    assert run.step().base == TOOL
    run.stream("user", parent_tool_use_id="toolu_a", tool_results=["toolu_g"])
    run.stream("user", tool_results=["toolu_a"])
    run.stream("task-start", task_id="t1", task={"description": "watch logs", "subagent_type": "general-purpose"})
    run.stream("result", tokens=(1, 1, 0, 0))
    v = run.step()
    assert v.base == THINKING and v.detail == "background general-purpose: watch logs"
    v = run.idle(30)
    assert v.stalled and "model stream silent" in v.diagnosis
    run.stream("task-end", task_id="t1")
    assert run.step().base == FINISHING


def test_background_shell_task_is_a_tool():
    run = Run()
    run.stream("tasks", tasks=[{"task_id": "b1", "description": "npm run dev", "task_type": "local_bash"}])
    v = run.step()
    assert v.base == TOOL and v.detail == "background task: npm run dev"


def test_hook_calls_end_with_their_subagent_and_with_stop():
    run = Run()
    run.guard("subagent-start", agent_id="ag1", agent_type="Explore")
    run.guard("tool-start", tool="Bash", tool_use_id="t1", agent_id="ag1", agent_type="Explore")
    run.guard("tool-start", tool="Read", tool_use_id="t2")
    assert set(run.tracker.work.calls) == {"t1", "t2"}
    run.guard("subagent-stop", agent_id="ag1", agent_type="Explore")
    assert set(run.tracker.work.calls) == {"t2"}
    run.guard("other", hook_event_name="Stop")
    assert run.tracker.work.calls == {}


def test_sdk_permission_request_is_awaiting_approval():
    run = Run(Limits(stall_after=5, interval=1.0))
    run.stream("control", request="can_use_tool")
    v = run.idle(30)
    assert v.base == AWAITING and not v.stalled
    run.stream("assistant", message_id="m", tool_uses=[("t", "Bash", "")])
    assert run.step().base == TOOL


def test_exited_child_is_never_stalled():
    run = Run(Limits(stall_after=5, interval=1.0))
    run.procs[ROOT]["status"] = "Z"
    for _ in range(20):
        v = run.step()
        assert v.base == EXITED and not v.stalled


def test_evidence_is_json_ready():
    import json

    run = Run()
    run.stream("assistant", message_id="m1", tool_uses=[("toolu_1", "Bash", "ls")])
    run.spawn(700, name="ls", reading="stdin (pipe)")
    run.step()
    v = run.step()
    text = json.dumps(v.evidence)
    assert "toolu_1" in text and v.evidence["blocked_reading"][0]["pid"] == 700


@settings(max_examples=60, deadline=None)
@given(
    interval=st.sampled_from([0.5, 1.0, 2.0]),
    threshold=st.integers(min_value=3, max_value=40),
    noise=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=200, max_size=200),
)
def test_noise_under_the_floor_stalls_exactly_on_time(interval, threshold, noise):
    """No sample above the floors and no event: the stall comes at the first sample at or past
    the threshold, never before."""
    lim = Limits(stall_after=float(threshold), interval=interval)
    run = Run(lim)
    run.tracker.output(run.t, 1)
    t0 = run.t
    floor = lim.root_cpu_floor(interval)
    for x in noise:
        v = run.step(cpu={ROOT: x * floor * 0.99}, io={ROOT: int(x * lim.io_floor(interval) * 0.99)})
        if v.time - t0 < threshold:
            assert not v.stalled
        else:
            assert v.stalled
            assert v.time - t0 < threshold + interval + 1e-9
            break


@settings(max_examples=40, deadline=None)
@given(
    interval=st.sampled_from([0.5, 1.0, 2.0]),
    busy=st.lists(st.tuples(st.sampled_from([ROOT, 800]), st.floats(min_value=1.01, max_value=3.0)),
                  min_size=50, max_size=50),
)
def test_cpu_above_the_floor_every_sample_never_stalls(interval, busy):
    lim = Limits(stall_after=interval * 2, tool_stall_after=interval * 3, interval=interval)
    run = Run(lim)
    run.spawn(800, name="node")
    for pid, factor in busy:
        floor = lim.root_cpu_floor(interval) if pid == ROOT else lim.desc_cpu_floor(interval)
        assert not run.step(cpu={pid: floor * factor}).stalled


def test_a_helper_waiting_on_its_stdin_is_not_news():
    """MCP stdio servers always sit in read(0): evidence, not diagnosis."""
    run = Run(Limits(stall_after=5, interval=1.0))
    run.spawn(900, name="python3", reading="stdin (socket)")
    v = run.idle(20)
    assert v.stalled and "stdin" not in v.diagnosis
    assert v.evidence["blocked_reading"] == [{"pid": 900, "name": "python3", "reading": "stdin (socket)"}]


def test_exit_code_told_after_the_sample_saw_the_exit():
    run = Run()
    run.procs[ROOT]["status"] = "Z"
    run.step()
    run.tracker.exited(run.t, 137)
    v = run.tracker.verdict(run.t)
    assert v.base == EXITED and v.detail == "exit code 137"


def test_pty_screen_output_is_no_progress_but_keystrokes_are():
    run = Run(Limits(stall_after=10, interval=1.0, interactive=True, initial_prompt=True))
    run.tracker.activity(run.t, "output")
    t0 = run.t
    for _ in range(30):  # the spinner redraws every second while the model stream is silent
        run.tracker.activity(run.t, "output")
        v = run.step(cpu={ROOT: 0.01})
        if v.stalled:
            break
    assert v.stalled and v.base == THINKING and 10 <= v.time - t0 <= 12
    assert v.evidence["last_screen_output_ago_s"] <= 1.0
    run.tracker.activity(run.t, "input")
    assert not run.step().stalled


def test_pty_prompt_and_busy_hints():
    run = Run(Limits(stall_after=5, interval=1.0, interactive=True, initial_prompt=True))
    run.tracker.activity(run.t, "at-prompt")
    v = run.idle(30)
    assert v.base == IDLE and not v.stalled
    run.tracker.activity(run.t, "busy")
    v = run.idle(30)
    assert v.stalled and v.base == THINKING


def _sched_run(limits: Limits, runnable_share: float, cpu_share: float, seconds: float,
               load: float = 8.0) -> list:
    """A root process whose main thread is runnable ``runnable_share`` of each second and gets
    ``cpu_share`` of it on a CPU (schedstat), on a machine at ``load``: the verdicts."""
    tracker = Tracker(limits, 0.0)
    run = wait = cpu = 0.0
    verdicts = []
    for i in range(int(seconds / limits.interval) + 1):
        t = i * limits.interval
        procs = {ROOT: ProcInfo(ROOT, 1, "claude", cpu=cpu, start=1.0, io=0, sched_run=run, sched_wait=wait)}
        verdicts.append(tracker.sample(Sample(t, ROOT, procs, load=load, cpus=2)))
        run += cpu_share * limits.interval
        cpu += cpu_share * limits.interval
        wait += (runnable_share - cpu_share) * limits.interval
    return verdicts


def test_a_process_that_wants_the_cpu_and_cannot_get_it_is_never_stalled():
    lim = Limits(stall_after=5, interval=1.0)
    # Runnable all the time, 3 % of a CPU (a niced busy loop at load 8): under every CPU floor.
    starved = _sched_run(lim, runnable_share=1.0, cpu_share=0.03, seconds=60)
    assert not any(v.stalled for v in starved)
    assert starved[-1].evidence["last_progress"].startswith("waiting for a CPU: claude (pid 100) runnable 1.00 s")
    assert starved[-1].evidence["waiting_for_cpu"] == "claude (pid 100) waited 0.97 s for a CPU in 1.00 s"
    assert starved[-1].evidence["load"] == 8.0


def test_a_sleeping_process_on_a_loaded_machine_is_stalled_and_the_load_is_named():
    lim = Limits(stall_after=5, interval=1.0)
    # An idle CLI's wake-ups at load 8: runnable 12 % of a second (measured: 4-12 %).
    idle = _sched_run(lim, runnable_share=0.12, cpu_share=0.01, seconds=10)
    first = next(i for i, v in enumerate(idle) if v.stalled)
    assert first == 5
    assert idle[first].diagnosis.endswith("; machine load 8.0 on 2 CPUs"), idle[first].diagnosis
    assert "waiting_for_cpu" not in idle[first].evidence
    # The same on a quiet machine: no load named.
    quiet = _sched_run(lim, runnable_share=0.02, cpu_share=0.01, seconds=10, load=0.3)
    assert "machine load" not in next(v for v in quiet if v.stalled).diagnosis
