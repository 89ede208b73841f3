"""What the watchdog reads and says, as plain records: a sample of the process tree
(``ProcInfo``, ``Sample``: ``sampler`` builds them), a summary of a stream-json line
(``StreamMsg``: ``stream`` builds it), the thresholds and floors (``Limits``), the calls and tasks
in flight (``Call``, ``Task``), the states ``ps`` shows, and a sample's answer (``StallVerdict``)
with the launcher's line for it (``stall_line``). ``state.Tracker`` turns the first into the last.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from claudeguard.config.schema import KILL_GRACE_S, SAMPLE_INTERVAL_S, STALL_AFTER_S, TOOL_STALL_AFTER_S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

STARTING = "starting"
THINKING = "thinking"
STREAMING = "streaming"
TOOL = "tool"
AWAITING = "awaiting-approval"
BLOCKED = "blocked-on-terminal"
IDLE = "idle"
FINISHING = "finishing"
STALLED = "stalled"
EXITED = "exited"

# Tools that run a subagent: while only these are in flight the subagent is waiting on the model.
AGENT_TOOLS = frozenset({"Agent", "Task"})
# Kernel states worth naming in evidence.
ODD_STATES = {"D": "in uninterruptible sleep (disk or NFS)", "T": "stopped (SIGSTOP)", "t": "stopped by a tracer",
              "Z": "a zombie"}


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    name: str
    status: str = "S"  # kernel one-letter state: R S D Z T t I
    cpu: float = 0.0  # own user+system seconds, cumulative
    cpu_children: float = 0.0  # seconds of reaped children, cumulative (Linux cutime+cstime)
    start: float = 0.0  # start time in any unit: tells a reused pid from the same process
    io: int | None = None  # bytes read+written through syscalls, cumulative; None: unreadable
    reading: str | None = None  # what it is blocked reading: "/dev/pts/3", "stdin (pipe)", ...
    cmdline: str | None = None
    # /proc/PID/schedstat of its main thread, cumulative seconds: time on a CPU and time spent
    # runnable on a run queue, waiting for one. None: unreadable (not Linux, or no schedstat).
    sched_run: float | None = None
    sched_wait: float | None = None


@dataclass
class Sample:
    time: float
    root_pid: int
    procs: dict[int, ProcInfo]
    load: float | None = None  # the machine's 1-minute load average at the sample, when known
    cpus: int = 0  # the machine's CPUs (0: unknown)

    @property
    def root_alive(self) -> bool:
        root = self.procs.get(self.root_pid)
        return root is not None and root.status != "Z"


@dataclass
class StreamMsg:
    """What the watchdog keeps of one stream-json line."""

    time: float
    kind: str  # init assistant user result task-start task-end tasks partial control other
    message_id: str | None = None
    tokens: tuple[int, int, int, int] | None = None  # input, output, cache creation, cache read
    tool_uses: list[tuple[str, str, str]] = field(default_factory=list)  # (id, name, detail)
    tool_results: list[str] = field(default_factory=list)
    parent_tool_use_id: str | None = None
    task_id: str | None = None
    task: dict[str, Any] | None = None  # description, subagent_type, tool_use_id, task_type
    tasks: list[dict[str, Any]] | None = None  # background_tasks_changed: the whole set
    partial_event: str | None = None  # stream_event type: message_start, content_block_delta, ...
    mcp_servers: list[dict[str, Any]] | None = None
    request: str | None = None  # control_request subtype (SDK hosts answer can_use_tool)
    is_error: bool = False


@dataclass
class Limits:
    stall_after: float = STALL_AFTER_S
    tool_stall_after: float = TOOL_STALL_AFTER_S
    interval: float = SAMPLE_INTERVAL_S
    interactive: bool = False
    initial_prompt: bool = True  # an interactive session started with a prompt works at once
    startup_grace: float = 30.0  # without any sign of life, "starting" turns into "thinking"

    def root_cpu_floor(self, dt: float) -> float:
        return 0.12 + 0.04 * dt

    def desc_cpu_floor(self, dt: float) -> float:
        return 0.03 + 0.02 * dt

    def io_floor(self, dt: float) -> float:
        return 256 + 128 * dt

    def runnable_floor(self, dt: float) -> float:
        """Seconds of a window of ``dt`` a process must have been runnable (running or waiting for
        a CPU) to count as wanting the CPU: the CLI's CPU floor. On a quiet machine that is its
        CPU; on a loaded one the time it waited for a CPU counts too (an idle CLI, waiting on a
        silent stream, was runnable 0.5-1.5 % of each second at load 0 to 16: bench/RESULTS.md)."""
        return self.root_cpu_floor(dt)


@dataclass
class Call:
    id: str
    name: str
    started: float
    detail: str = ""
    agent: str | None = None  # agent type/id (hooks) or parent tool_use_id (stream) of the caller
    agent_id: str | None = None
    via: str = "stream"


@dataclass
class Task:
    id: str
    description: str
    started: float
    subagent_type: str | None = None
    tool_use_id: str | None = None


@dataclass
class StallVerdict:
    """What one sample says about the session: its state, and whether (and why) it is stalled.
    Not a permission decision (those are ``claudeguard.decision.Decision``)."""

    time: float
    state: str  # what ps shows: the base state, or "stalled"
    base: str  # the state underneath a stall
    detail: str | None  # tool name, dialog title, ...
    quiet_s: float
    threshold_s: float | None
    stalled: bool
    new_stall: bool  # first verdict of this stall episode
    diagnosis: str | None
    evidence: dict[str, Any]


def stall_line(diagnosis: str, action: str) -> str:
    """The launcher's one stderr line for a stall, whichever monitor found it."""
    what = {"warn": "", "interrupt": " (interrupting it)", "kill": " (stopping it)"}.get(action, "")
    return f"claudeguard: {diagnosis}{what}\n"


def prompt_words(prompt: str | None, words: int = 8, chars: int = 80) -> str | None:
    """The prompt's first ``words`` words (at most ``chars`` characters), as status files and
    ``ps`` show it."""
    if not prompt:
        return None
    text = " ".join(prompt.split()[:words])
    return text[:chars] + ("..." if len(text) > chars or len(prompt.split()) > words else "")


@dataclass
class WatchConfig:
    stall_after: float = STALL_AFTER_S
    tool_stall_after: float = TOOL_STALL_AFTER_S
    on_stall: str = "warn"
    sample_interval: float = SAMPLE_INTERVAL_S
    kill_grace: float = KILL_GRACE_S
    interactive: bool = False
    # The notify command (config ``approval.notify``; "{summary}" becomes the diagnosis). None:
    # read it from the session's ``session.json`` snapshot.
    notify: list[str] | None = None
    # The CLI draws on a pty nobody reads (a --bg session): its writes are not progress.
    writes_are_screen: bool = False
    # A tap thread reads the stream-json the relay feeds (``feed_stdout``); False where the
    # launcher's relay sends the stream's summaries itself (``feed_stream``: the service's and
    # the launcher's local monitor).
    tap_stream: bool = True
