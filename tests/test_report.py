"""The end-of-run report and exit policy, piece by piece: option parsing, the audit rows of one
session, counts, --guard-fail-on, the stderr line, GitHub Actions output, the atomic write; and
that a bad option value starts nothing."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from claudeguard.channel import audit
from claudeguard.errors import UsageError
from claudeguard.plan import report as rp
from claudeguard.plan.options import split_argv
from tests.shim_helpers import GUARD


@pytest.fixture
def log(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    return tmp_path / "log" / "audit.jsonl"


def row(decision: str, by: str, **kw) -> dict:
    return dict({"session_id": "s1", "agent_type": None, "agent_id": None, "tool": "Bash", "summary": "Bash: x",
                 "decision": decision, "decided_by": by, "scope": None, "waited_s": 0.0, "request_id": None}, **kw)


# -- options -------------------------------------------------------------------------------------
def test_guard_options_are_split_from_the_cli_arguments():
    opts, rest = split_argv(["-p", "hi", "--guard-report", "r.json", "--guard-fail-on=denied,stall", "--verbose"])
    assert rest == ["-p", "hi", "--verbose"]
    assert opts.report == "r.json" and opts.fail_on == "denied,stall"


@pytest.mark.parametrize("text,words", [
    ("denied", {"denied"}), ("denied,timeout,stall,asked", {"denied", "timeout", "stall", "asked"}),
    (" stall , asked ", {"stall", "asked"}), ("denied,denied", {"denied"}),
])
def test_fail_on_parses(text, words):
    assert rp.parse_fail_on(text, "--guard-fail-on") == frozenset(words)


@pytest.mark.parametrize("text,word",
                         [("denyed", "'denyed'"), ("denied,", "''"), ("Denied", "'Denied'"), ("", "empty")])
def test_fail_on_rejects_unknown_words(text, word):
    with pytest.raises(UsageError) as err:
        rp.parse_fail_on(text, "env CLAUDEGUARD_FAIL_ON")
    assert str(err.value).startswith("env CLAUDEGUARD_FAIL_ON: ") and word in str(err.value)


def test_report_path_must_be_writable_before_the_run(tmp_path):
    assert rp.check_report_path("r.json", "--guard-report", str(tmp_path)) == str(tmp_path / "r.json")
    with pytest.raises(UsageError, match="does not exist"):
        rp.check_report_path("nope/r.json", "--guard-report", str(tmp_path))
    with pytest.raises(UsageError, match="is a directory"):
        rp.check_report_path(".", "--guard-report", str(tmp_path))


def test_options_win_over_environment(tmp_path):
    opts, _ = split_argv(["--guard-fail-on", "asked"])
    env = {"CLAUDEGUARD_FAIL_ON": "denied", "CLAUDEGUARD_REPORT": "env.json"}
    end = rp.EndOptions.parse(opts, env, str(tmp_path))
    assert end.fail_on == {"asked"} and end.report == str(tmp_path / "env.json")
    with pytest.raises(UsageError, match="^env CLAUDEGUARD_FAIL_ON: unknown event 'later'"):
        rp.EndOptions.parse(split_argv([])[0], {"CLAUDEGUARD_FAIL_ON": "later"}, str(tmp_path))


def _stub_cli(tmp_path):
    """A stand-in CLI that leaves a mark when it runs."""
    stub = tmp_path / "claude"
    stub.write_text(f"#!{sys.executable}\nimport pathlib\npathlib.Path({str(tmp_path / 'ran')!r}).write_text('x')\n")
    stub.chmod(0o755)
    return stub


@pytest.mark.parametrize("args,env,message", [
    (["--guard-fail-on", "denied,sometimes"], {}, "claudeguard: --guard-fail-on: unknown event 'sometimes'"),
    ([], {"CLAUDEGUARD_FAIL_ON": "nope"}, "claudeguard: env CLAUDEGUARD_FAIL_ON: unknown event 'nope'"),
    (["--guard-report", "missing/r.json"], {}, "claudeguard: --guard-report: missing/r.json: directory"),
])
def test_bad_values_are_usage_errors_before_anything_starts(tmp_path, args, env, message):
    stub = _stub_cli(tmp_path)
    full = dict(os.environ, CLAUDEGUARD_CLAUDE=str(stub), CLAUDEGUARD_RUNTIME_DIR=str(tmp_path / "rt"),
                CLAUDEGUARD_LOG_DIR=str(tmp_path / "log"), XDG_CONFIG_HOME=str(tmp_path / "cfg"), **env)
    for argv in (["-p", "hi", *args], ["--version", *args]):
        proc = subprocess.run(GUARD + argv, env=full, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
        if not args and argv[0] == "--version":
            # A pass-through command writes no report: the variables are not read (so a
            # `claude --version` starts nothing it does not need).
            assert proc.returncode == 0 and (tmp_path / "ran").read_text() == "x", proc.stderr
            continue
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1, proc.stderr
        assert not (tmp_path / "ran").exists() and not (tmp_path / "rt").exists()


# -- rows and counts -------------------------------------------------------------------------------
def test_session_rows_start_at_the_mark_and_keep_only_this_session(log):
    audit.record(row("allow", "rule", summary="before"))
    mark = rp.audit_mark()
    audit.record(row("deny", "rule", summary="mine"))
    audit.record(row("deny", "rule", session_id="s2", summary="other session"))
    audit.record({"session_id": "s1", "event": "stall", "decision": "stall", "state": "thinking", "summary": "d",
                  "action": "warn"})
    rows = rp.session_rows("s1", mark)
    assert [r["summary"] for r in rows] == ["mine", "d"]
    assert [r["summary"] for r in rows if rp.is_call(r)] == ["mine"]


def test_session_rows_read_a_rotated_log_from_its_start(log):
    audit.record(row("allow", "rule", summary="old"))
    mark = rp.audit_mark()
    log.rename(log.with_name("audit.jsonl.1"))
    audit.record(row("deny", "human", summary="new"))
    assert [r["summary"] for r in rp.session_rows("s1", mark)] == ["new"]
    assert rp.session_rows("s1", None)[0]["summary"] == "new"


def test_session_rows_without_a_log(log):
    assert rp.audit_mark() is None and rp.session_rows("s1", None) == []


CALLS = [
    row("allow", "rule"), row("allow", "rule"),
    row("deny", "rule"), row("deny", "default"),
    row("allow", "human", request_id="a", scope="session"), row("deny", "human", request_id="b"),
    row("deny", "timeout", request_id="c"), row("allow", "timeout", request_id="d"),
    row("allow", "human", request_id="e", tool="dialog:trust"),
]


def test_counts():
    assert rp.count(CALLS, 2) == {"allowed_by_rule": 2, "denied_by_rule": 2, "asked": 5, "approved_by_human": 2,
                                  "denied_by_human": 1, "timed_out": 2, "stalls": 2}
    assert rp.count([], 0) == dict.fromkeys(rp.COUNT_KEYS, 0)


def test_an_answer_at_the_keyboard_counts_as_a_human_s():
    keyboard = [row("allow", "keyboard", request_id="k1"), row("deny", "keyboard", request_id="k2")]
    assert rp.count(keyboard, 0) == {"allowed_by_rule": 0, "denied_by_rule": 0, "asked": 2, "approved_by_human": 1,
                                     "denied_by_human": 1, "timed_out": 0, "stalls": 0}


def test_fail_on_hits():
    counts = rp.count(CALLS, 0)
    assert rp.fail_on_hits(counts, CALLS, {"stall", "asked", "denied"}) == ["denied", "asked"]
    quiet = [row("allow", "rule")]
    assert rp.fail_on_hits(rp.count(quiet, 0), quiet, set(rp.FAIL_ON_WORDS)) == []
    allowed_late = [row("allow", "timeout", request_id="x")]
    assert rp.fail_on_hits(rp.count(allowed_late, 0), allowed_late, {"denied", "timeout"}) == ["timeout"]
    assert rp.fail_on_hits(rp.count([], 1), [], {"stall"}) == ["stall"]


# -- the end of a run ------------------------------------------------------------------------------
def _run(tmp_path, fail_on=frozenset(), report=True, non_interactive=True):
    end = rp.EndOptions(str(tmp_path / "r.json") if report else None, frozenset(fail_on))
    run = rp.Run(session_id="s1", real_cli=str(tmp_path / "claude"), end=end, non_interactive=non_interactive)
    run.stalls = []
    return run


@pytest.mark.parametrize("report, github", [(False, False), (True, False), (False, True)],
                         ids=["none", "file", "github"])
def test_the_cli_version_is_looked_up_only_for_a_report_or_a_step_summary(log, tmp_path, monkeypatch, report, github):
    # Looking it up imports shim.dialogs or runs `claude --version`: not for a run that shows no report.
    looked = []
    monkeypatch.setattr(rp, "cli_version", lambda real: looked.append(real) or "9.9.9")
    monkeypatch.setenv("GITHUB_ACTIONS", "true") if github else monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    run = _run(tmp_path, report=report)
    run.child_exit_code = 0
    assert run.finish(0) == 0
    assert looked == ([str(tmp_path / "claude")] if report or github else [])
    if report:
        assert json.loads((tmp_path / "r.json").read_text())["cli_version"] == "9.9.9"
    if github:
        assert "CLI 9.9.9" in (tmp_path / "summary.md").read_text()


def test_finish_writes_the_report_and_applies_the_policy(log, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    run = _run(tmp_path, fail_on={"denied"})
    for r in CALLS:
        audit.record(r)
    run.child_exit_code = 0
    assert run.finish(0) == 3
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["exit_code"] == 3 and data["child_exit_code"] == 0 and data["fail_on"] == ["denied"]
    assert data["counts"]["denied_by_human"] == 1 and len(data["calls"]) == len(CALLS)
    assert set(data) >= {"session_id", "cli_version", "started", "ended", "duration_s", "counts", "calls", "stalls"}
    assert data["started"].endswith("Z") and data["duration_s"] >= 0
    for call in data["calls"]:
        assert set(call) >= {"time", "session_id", "agent_type", "agent_id", "tool", "summary", "decision",
                             "decided_by", "scope", "waited_s"}
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log", "r.json"]  # no temp file left
    err = capsys.readouterr().err.splitlines()
    assert err == ["claudeguard: session s1: 2 calls denied by rule, 1 call denied by a human, 2 calls timed "
                   "out unanswered; "
                   "exit 3 (--guard-fail-on denied) (claudeguardctl audit --json for details)"]


def test_a_failed_or_killed_child_keeps_its_code(log, tmp_path, capsys):
    for child, ours in ((1, 1), (143, 124)):
        run = _run(tmp_path, fail_on={"denied", "stall"})
        audit.record(row("deny", "rule"))
        run.child_exit_code = child
        run.stalls = [{"time": "t", "state": "thinking", "diagnosis": "stalled: thinking", "action": "kill"}]
        assert run.finish(ours) == ours
        data = json.loads((tmp_path / "r.json").read_text())
        assert (data["exit_code"], data["child_exit_code"], data["counts"]["stalls"],
                data["fail_on"]) == (ours, child, 1, [])
        assert data["counts"]["denied_by_rule"] == 1


def test_a_clean_run_says_nothing_and_keeps_zero(log, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    run = _run(tmp_path, fail_on=set(rp.FAIL_ON_WORDS), report=False)
    audit.record(row("allow", "rule"))
    run.child_exit_code = 0
    assert run.finish(0) == 0
    assert capsys.readouterr().err == "" and not (tmp_path / "r.json").exists()


def test_an_interactive_run_prints_no_summary(log, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    run = _run(tmp_path, non_interactive=False)
    audit.record(row("deny", "rule"))
    run.child_exit_code = 0
    assert run.finish(0) == 0
    assert capsys.readouterr().err == ""
    assert json.loads((tmp_path / "r.json").read_text())["counts"]["denied_by_rule"] == 1


def test_an_unwritable_report_is_one_line_and_keeps_the_code(log, tmp_path, capsys):
    run = _run(tmp_path)
    (tmp_path / "r.json").mkdir()  # now a directory: the rename fails
    run.child_exit_code = 0
    assert run.finish(0) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"claudeguard: --guard-report {tmp_path / 'r.json'}: ") and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


# -- GitHub Actions --------------------------------------------------------------------------------
def test_github_annotations_and_step_summary(log, tmp_path, capsys, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    run = _run(tmp_path, report=False)
    audit.record(row("allow", "rule"))
    audit.record(row("deny", "rule", summary="Bash: rm -rf x, y: 100%\nnext", rule="Bash(rm *)"))
    audit.record(row("deny", "timeout", summary="Bash: git push", request_id="q"))
    run.child_exit_code = 0
    run.stalls = [{"time": "t", "state": "tool", "diagnosis": "stalled: tool Bash", "action": "warn"}]
    assert run.finish(0) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("claudeguard: session s1: ")
    assert err[1:] == [
        "::warning title=claudeguard%3A denied by rule::Bash: Bash: rm -rf x, y: 100%25%0Anext [Bash(rm *)]",
        "::warning title=claudeguard%3A timed out (deny)::Bash: Bash: git push",
        "::warning title=claudeguard%3A stall::stalled: tool Bash",
    ]
    text = summary.read_text()
    assert text.startswith("earlier step\n### claudeguard: session `s1`")
    assert "| 1 | 1 | 1 | 0 | 0 | 1 | 1 |" in text
    assert "| Bash: rm -rf x, y: 100% next | deny | rule |" in text
    assert "| t | tool | stalled: tool Bash | warn |" in text


def test_many_annotations_are_capped():
    calls = [row("deny", "rule", summary=f"Bash: n{i}") for i in range(30)]
    lines = rp.workflow_commands({"calls": calls, "stalls": []})
    assert len(lines) == rp.MAX_ANNOTATIONS + 1 and lines[-1].endswith("10 more (see the step summary)")
