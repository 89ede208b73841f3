"""The end of a guarded run: the report file (``--guard-report``), the exit policy
(``--guard-fail-on``), the one-line summary on stderr, and the GitHub Actions step summary.

The run's calls are the audit log's rows of this session, read from where the log ended when the
session started (``audit_mark``), so a long log is never read whole. Stalls come from the
watchdog's own list. Nothing here writes to stdout: the child's stream-json stays pure.

Counts (``counts`` in the report):

- ``allowed_by_rule``: allowed by a policy rule or a grant, no human asked;
- ``denied_by_rule``: denied without a human: by a rule or grant, or by the guard's own default
  (``subagents.background = "deny"``, a failed channel);
- ``asked``: calls that went to a human (a request in the channel: tool calls and dialogs);
- ``approved_by_human`` / ``denied_by_human``: answered in the channel;
- ``timed_out``: nobody answered before ``approval.timeout`` (``approval.on_timeout`` decided);
- ``stalls``: stall episodes the watchdog reported.
"""

from __future__ import annotations

import os
import sys
import time

from claudeguard.plan.discovery import cli_version

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Iterable, Mapping, TypedDict

    from claudeguard.plan.options import GuardOptions

    # One line of the audit log (decision.audit_row, a channel or watchdog event), as read back.
    Row = dict[str, object]

    class _Report(TypedDict):
        session_id: str
        cli_version: str | None
        started: str  # ISO 8601, UTC
        ended: str
        duration_s: float
        exit_code: int  # claudeguard's
        child_exit_code: int | None  # the CLI's (None: unknown, e.g. a --bg session)
        counts: dict[str, int]  # COUNT_KEYS
        calls: list[Row]
        stalls: list[dict[str, object]]
        fail_on: list[str]  # the words of --guard-fail-on that this run matched

    class Report(_Report, total=False):
        """The report file (``--guard-report``), and what the summaries are made from."""

        background: dict[str, object]  # a --bg session: its short id and CLI pid
        untrusted: list[dict[str, object]]  # files whose loosening or code was left out (plan.repo_code.untrusted)

FAIL_ON_WORDS = ("denied", "timeout", "stall", "asked")
COUNT_KEYS = ("allowed_by_rule", "denied_by_rule", "asked", "approved_by_human", "denied_by_human",
              "timed_out", "stalls")
EXIT_FAIL_ON = 3
MAX_ANNOTATIONS = 20  # GitHub shows only the first few per step anyway; the rest are counted


def parse_fail_on(text: str, where: str) -> frozenset[str]:
    """``denied,timeout`` -> the set of words; any other word is a usage error naming it."""
    from claudeguard.errors import UsageError

    words = [w.strip() for w in text.split(",")]
    if not any(words):
        raise UsageError(f"{where}: empty list (choose from {', '.join(FAIL_ON_WORDS)})")
    for word in words:
        if word not in FAIL_ON_WORDS:
            raise UsageError(f"{where}: unknown event {word!r} (choose from {', '.join(FAIL_ON_WORDS)})")
    return frozenset(words)


def check_report_path(text: str, where: str, cwd: str) -> str:
    """The report's absolute path; its directory must exist and be writable now, so a run is
    never started whose report could not be written."""
    from claudeguard.errors import UsageError

    if not text:
        raise UsageError(f"{where}: empty file name")
    path = os.path.join(cwd, os.path.expanduser(text))
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        raise UsageError(f"{where}: {text} is a directory")
    if not os.path.isdir(folder):
        raise UsageError(f"{where}: {text}: directory {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{where}: {text}: directory {folder} is not writable")
    return path


class EndOptions:
    """What the caller asked of the end of the run (a plain class: see plan.options)."""

    def __init__(self, report: str | None = None, fail_on: frozenset[str] = frozenset()) -> None:
        self.report = report
        self.fail_on = fail_on

    @classmethod
    def parse(cls, opts: GuardOptions, environ: Mapping[str, str], cwd: str) -> EndOptions:
        """From ``--guard-report``/``--guard-fail-on``, else ``CLAUDEGUARD_REPORT``/``CLAUDEGUARD_FAIL_ON``."""
        end = cls()
        if opts.report is not None:
            end.report = check_report_path(opts.report, "--guard-report", cwd)
        elif environ.get("CLAUDEGUARD_REPORT"):
            end.report = check_report_path(environ["CLAUDEGUARD_REPORT"], "env CLAUDEGUARD_REPORT", cwd)
        if opts.fail_on is not None:
            end.fail_on = parse_fail_on(opts.fail_on, "--guard-fail-on")
        elif environ.get("CLAUDEGUARD_FAIL_ON"):
            end.fail_on = parse_fail_on(environ["CLAUDEGUARD_FAIL_ON"], "env CLAUDEGUARD_FAIL_ON")
        return end


# -- the audit rows of this run ------------------------------------------------------------------
def audit_mark() -> tuple[int, int, int] | None:
    """(device, inode, size) of the audit log now; this run's rows are appended after it."""
    from claudeguard.channel.audit import _audit_file

    try:
        st = os.stat(_audit_file())
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size)


def session_rows(session_id: str, mark: tuple[int, int, int] | None) -> list[Row]:
    """Every audit row of ``session_id`` written after ``mark`` (from the start when the log was
    created, rotated or truncated since)."""
    import json

    from claudeguard.channel.audit import _audit_file

    try:
        fd = os.open(_audit_file(), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    rows: list[Row] = []
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if mark is not None and (st.st_dev, st.st_ino) == mark[:2] and st.st_size >= mark[2]:
            fh.seek(mark[2])
        needle = session_id.encode()
        for line in fh:
            if needle not in line:
                continue  # cheap filter before parsing: most lines belong to other sessions
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a torn line
            if isinstance(row, dict) and row.get("session_id") == session_id:
                rows.append(row)
    return rows


def is_call(row: Mapping[str, object]) -> bool:
    """A decision about one call (not a channel or watchdog event)."""
    return "event" not in row and row.get("decision") in ("allow", "deny")


def count(calls: Iterable[Mapping[str, object]], stalls: int) -> dict[str, int]:
    out = dict.fromkeys(COUNT_KEYS, 0)
    for row in calls:
        by, decision = row.get("decided_by"), row.get("decision")
        if row.get("request_id") or by in ("human", "timeout"):
            out["asked"] += 1
        if by in ("human", "keyboard"):  # the person at the terminal is a human too (issue 27)
            out["approved_by_human" if decision == "allow" else "denied_by_human"] += 1
        elif by == "timeout":
            out["timed_out"] += 1
        elif decision == "allow":
            out["allowed_by_rule"] += 1
        else:
            out["denied_by_rule"] += 1
    out["stalls"] = stalls
    return out


def fail_on_hits(counts: Mapping[str, int], calls: Iterable[Mapping[str, object]], fail_on: Iterable[str]) -> list[str]:
    """The words of ``fail_on`` this run's events match, in the order of FAIL_ON_WORDS."""
    seen = {
        "denied": any(row.get("decision") == "deny" for row in calls),
        "timeout": counts["timed_out"] > 0,
        "stall": counts["stalls"] > 0,
        "asked": counts["asked"] > 0,
    }
    wanted = set(fail_on)
    return [word for word in FAIL_ON_WORDS if word in wanted and seen[word]]


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


# -- the run -------------------------------------------------------------------------------------
class Run:
    """One guarded session from start to exit; ``finish`` ends it and returns the exit code."""

    def __init__(self, *, session_id: str, real_cli: str, end: EndOptions | None, non_interactive: bool) -> None:
        self.session_id = session_id
        self.real_cli = real_cli
        self.end = end or EndOptions()
        self.non_interactive = non_interactive
        self.started = time.time()
        self.mark = audit_mark()  # before the child starts: its rows come after this
        self.child_exit_code: int | None = None
        self.stalls: list[dict[str, object]] | None = None  # the watchdog's; None: take the audit's stall rows
        # Project files not trusted: their loosening ignored, their code not run (the launcher's).
        self.untrusted: list[dict[str, object]] = []

    def finish(self, exit_code: int, *, failed: bool = False) -> int:
        """Write the report, print the summary, apply ``--guard-fail-on``; never raises.
        ``failed``: claudeguard itself is ending with an error (its code stays)."""
        # The CLI's version only goes into a report file or a GitHub step summary: looking it up
        # reads its package.json, or runs `claude --version` when no npm package is beside it.
        wanted = bool(self.end.report) or os.environ.get("GITHUB_ACTIONS") == "true"
        try:
            report = self.build(exit_code, version=wanted)
        except Exception as exc:  # noqa: BLE001 - the run's own exit code matters more
            _say(f"end-of-run report: {exc}")
            return exit_code
        hits = fail_on_hits(report["counts"], report["calls"], self.end.fail_on)
        if hits and not failed and exit_code == 0 and self.child_exit_code == 0:
            exit_code = report["exit_code"] = EXIT_FAIL_ON
            report["fail_on"] = hits
        if self.end.report:
            try:
                write_report(self.end.report, report)
            except OSError as exc:
                _say(f"--guard-report {self.end.report}: {exc.strerror or exc}")
        if not failed:
            line = summary_line(report, hits)
            if line and self.non_interactive:
                _say(line)
            if os.environ.get("GITHUB_ACTIONS") == "true":
                github(report, os.environ.get("GITHUB_STEP_SUMMARY"))
        return exit_code

    def build(self, exit_code: int, *, version: bool = True) -> Report:
        ended = time.time()
        rows = session_rows(self.session_id, self.mark)
        calls = [row for row in rows if is_call(row)]
        if self.stalls is not None:
            stalls = [dict(s) for s in self.stalls]
        else:
            stalls = [{"time": r.get("time"), "state": r.get("state"), "diagnosis": r.get("summary"),
                       "action": r.get("action")}
                      for r in rows if r.get("event") == "stall"]
        return {
            "session_id": self.session_id,
            "cli_version": cli_version(self.real_cli) if version else None,
            "started": iso(self.started),
            "ended": iso(ended),
            "duration_s": round(ended - self.started, 3),
            "exit_code": exit_code,
            "child_exit_code": self.child_exit_code,
            "counts": count(calls, len(stalls)),
            "calls": calls,
            "stalls": stalls,
            "fail_on": [],
            "untrusted": list(self.untrusted),
        }


def write_report(path: str, report: Report) -> None:
    """Replace the report whole, 0600 (the calls' summaries may be private) and synced."""
    import json

    from claudeguard import files

    files.write_atomic(path, json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n", durable=True)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary_line(report: Report, hits: list[str]) -> str | None:
    """One line for cron's mail when calls were denied or timed out or a stall was found."""
    c = report["counts"]
    parts = []
    if c["denied_by_rule"]:
        parts.append(f"{_plural(c['denied_by_rule'], 'call')} denied by rule")
    if c["denied_by_human"]:
        parts.append(f"{_plural(c['denied_by_human'], 'call')} denied by a human")
    if c["timed_out"]:
        parts.append(f"{_plural(c['timed_out'], 'call')} timed out unanswered")
    if c["stalls"]:
        parts.append(_plural(c["stalls"], "stall"))
    if report.get("untrusted"):
        parts.append(f"{_plural(len(report.get('untrusted') or []), 'untrusted project file')} left out "
                     f"(claudeguardctl config trust)")
    if not parts:
        return None
    failed = hits and report["exit_code"] == EXIT_FAIL_ON
    tail = f"; exit {EXIT_FAIL_ON} (--guard-fail-on {','.join(hits)})" if failed else ""
    return f"session {report['session_id']}: {', '.join(parts)}{tail} (claudeguardctl audit --json for details)"


def _say(line: str) -> None:
    try:
        sys.stderr.write(f"claudeguard: {line}\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - stderr may be gone
        pass


# -- GitHub Actions ------------------------------------------------------------------------------
def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _cell(text: object) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")[:200]


def workflow_commands(report: Report) -> list[str]:
    """Workflow-command lines: a warning per denied or timed-out call and per stall."""
    out = []
    for row in report["calls"]:
        if row.get("decided_by") == "timeout":
            title = f"claudeguard: timed out ({row.get('decision')})"
        elif row.get("decision") == "deny":
            title = f"claudeguard: denied by {row.get('decided_by')}"
        else:
            continue
        rule = f" [{row['rule']}]" if row.get("rule") else ""
        message = f"{row.get('tool')}: {row.get('summary')}{rule}"
        out.append(f"::warning title={_escape_property(title)}::{_escape_data(message)}")
    for stall in report["stalls"]:
        out.append(f"::warning "
                   f"title={_escape_property('claudeguard: stall')}::{_escape_data(str(stall.get('diagnosis')))}")
    if len(out) > MAX_ANNOTATIONS:
        out = out[:MAX_ANNOTATIONS] + [f"::warning title=claudeguard::{len(out) - MAX_ANNOTATIONS} more (see "
                                       f"the step summary)"]
    return out


def step_summary(report: Report) -> str:
    c = report["counts"]
    lines = [f"### claudeguard: session `{report['session_id']}`", "",
             f"exit {report['exit_code']} (Claude: {report['child_exit_code']}), {report['duration_s']:.0f} s, CLI "
             f"{report['cli_version']}", "",
             "| " + " | ".join(COUNT_KEYS) + " |", "|" + "---:|" * len(COUNT_KEYS),
             "| " + " | ".join(str(c[k]) for k in COUNT_KEYS) + " |", ""]
    flagged = [r for r in report["calls"] if r.get("decision") == "deny" or r.get("decided_by") == "timeout"]
    if flagged:
        lines += ["| time | agent | tool | call | decision | by |", "|---|---|---|---|---|---|"]
        lines += [f"| {_cell(r.get('time'))} | {_cell(r.get('agent_type') or 'main')} | {_cell(r.get('tool'))} | "
                  f"{_cell(r.get('summary'))} | {_cell(r.get('decision'))} | {_cell(r.get('decided_by'))} |"
                  for r in flagged[:100]]
        lines.append("")
    if report["stalls"]:
        lines += ["| time | state | diagnosis | action |", "|---|---|---|---|"]
        lines += [f"| {_cell(s.get('time'))} | {_cell(s.get('state'))} | {_cell(s.get('diagnosis'))} | "
                  f"{_cell(s.get('action'))} |"
                  for s in report["stalls"]]
        lines.append("")
    return "\n".join(lines) + "\n"


def github(report: Report, summary_file: str | None) -> None:
    """Annotations on stderr (the runner reads workflow commands there too; stdout belongs to
    the child) and the markdown summary appended to ``$GITHUB_STEP_SUMMARY``."""
    for line in workflow_commands(report):
        try:
            sys.stderr.write(line + "\n")
        except Exception:  # noqa: BLE001 - stderr may be gone: the step summary is still written
            return
    try:
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - stderr may be gone: the step summary is still written
        pass
    if summary_file:
        try:
            with open(summary_file, "a", encoding="utf-8") as fh:
                fh.write(step_summary(report))
        except OSError as exc:
            _say(f"GITHUB_STEP_SUMMARY {summary_file}: {exc.strerror or exc}")
