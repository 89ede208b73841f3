"""Issue 23 end to end: cases of tests/data/bash_cases.toml through both pinned real CLIs under
claudeguard, headless, nobody answering (an asked call times out at once into a deny). Under
the deny-list and allow-list policies, two cases of every class of smuggled spelling run in one
session each: none leaves its trace file. Every everyday command runs in one session under the
everyday policy (acceptEdits): each ran (its result is the command's own), none was asked, and
the files they write inside the project are there. The project's corpus lines run against stub
programs: the denied one never ran, the allowed ones did."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shim_helpers import ctl, guarded_env, pending, run_guarded, write_user_config
from tests.test_bash_cases import CASES, POLICIES, SMUGGLING, command_of, prepare

PER_CLASS = 2
TIMEOUT = "0.3"  # seconds an asked call waits for the answer nobody gives


def config_for(name: str) -> str:
    spec = POLICIES[name]
    lines = ["[permissions]"]
    if spec.get("mode"):
        lines.append(f'mode = "{spec["mode"]}"')
    for kind in ("allow", "deny", "ask"):
        if spec.get(kind):
            lines.append(f"{kind} = {json.dumps(spec[kind])}")
    return "\n".join(lines) + "\n"


def bash(command: str) -> dict:
    return {"tool_use": {"name": "Bash", "input": {"command": command, "description": "case"}}}


def run_session(server_factory, offline_env, real_claude, tag: str, commands: list[str], policy: str,
                path: str | None = None) -> tuple[subprocess.CompletedProcess, list[dict], list[dict]]:
    server = server_factory([{"match": tag, "turns": [bash(c) for c in commands] + [{"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT=TIMEOUT)
    config = config_for(policy)
    if path is not None:
        env["PATH"] = path + os.pathsep + env["PATH"]
        # In the login profile too, as a user keeps it: when 2.1.197 cannot make its shell
        # snapshot within its 10 s (a loaded machine: seen in CI), it runs commands through a
        # login shell, whose /etc/profile resets PATH (checked: a profile slower than 10 s gives
        # the commands /etc/profile's PATH); the snapshot keeps the environment's.
        Path(env["HOME"], ".bash_profile").write_text(f'export PATH="{path}:$PATH"\n')
        # The stubs live in the test's /tmp, which the sandbox's box replaces with the session's
        # own (tests/test_sandbox_real.py): these sessions test the policy's decisions.
        config += '\n[security]\nsandbox = "off"\n'
    write_user_config(env, config)
    proc = run_guarded(env, offline_env.cwd, f"{tag} go", timeout=600)
    assert proc.returncode in (0, 3), proc.stderr[-2000:]
    results = [r for r in server.tool_results() if r["script"] == tag]
    audit = [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]
    assert pending(env) == []
    return proc, results, audit


def git_repo(directory: Path) -> None:
    for argv in (["init", "-q", "-b", "main"], ["config", "user.name", "t"], ["config", "user.email", "t@example.org"],
                 ["add", "-A"], ["commit", "-q", "-m", "start", "--allow-empty"]):
        subprocess.run(["git", *argv], cwd=directory, check=True, capture_output=True)


def smuggled(policy: str) -> list[dict]:
    """``PER_CLASS`` cases of every smuggling class that leave a trace if they run and that the
    policy refuses or asks (under the deny list, writes are allowed: Bash is)."""
    chosen: list[dict] = []
    for cls in SMUGGLING:
        found = [c for c in CASES if c["class"] == cls and policy in c and "trace" in c and c[policy] != "allow"]
        chosen += found[:PER_CLASS]
    return chosen


def test_the_real_runs_cover_every_class() -> None:
    run = {c["class"] for policy in ("denylist", "allowlist") for c in smuggled(policy)}
    assert run == set(SMUGGLING)
    assert {c["class"] for c in smuggled("allowlist")} == set(SMUGGLING)


@pytest.mark.parametrize("policy", ["denylist", "allowlist"])
def test_no_smuggled_spelling_leaves_a_trace(policy, real_claude, offline_env, model_server):
    cases = smuggled(policy)
    work = offline_env.cwd
    git_repo(work)
    for case in cases:
        prepare(work, case)
    proc, results, audit = run_session(model_server, offline_env, real_claude, f"SMUGGLE-{policy.upper()}",
                                       [command_of(c) for c in cases], policy)
    assert len(results) == len(cases), proc.stderr[-2000:]
    left = sorted(c["trace"] for c in cases if (work / c["trace"]).exists())
    assert left == []
    for case, result in zip(cases, results, strict=True):
        assert result["is_error"], (case["id"], result["content"])
    # each was refused by the guard: by a rule, or asked and timed out unanswered
    refused = [row for row in audit if row.get("tool") == "Bash" and row.get("decision") == "deny"]
    assert len(refused) == len(cases), [(r.get("summary"), r.get("decided_by")) for r in audit]
    assert {row.get("decided_by") for row in refused} <= {"rule", "timeout"}


EVERYDAY = [c for c in CASES if c["class"] == "everyday"]


def everyday_project(work: Path) -> None:
    (work / "src").mkdir()
    (work / "tests").mkdir()
    (work / "sub").mkdir()
    (work / "README.md").write_text("# demo\n\nA small project.\nTODO: more\n")
    (work / "src" / "app.py").write_text("import os\n\n\ndef add(a, b):\n    return a + b\n")
    (work / "src" / "util.py").write_text("import sys\n\n\ndef name():\n    return sys.platform\n")
    (work / "tests" / "test_app.py").write_text(
        "import os\nimport sys\n\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'src'))\n\n"
        "from app import add  # noqa: E402\n\n\ndef test_add():\n    assert add(1, 2) == 3\n")
    (work / "Makefile").write_text("all:\n\t@echo made\n\ntest:\n\t@echo tested\n")
    (work / "sub" / "Makefile").write_text("all:\n\t@echo sub-made\n")
    (work / "package.json").write_text(json.dumps({"name": "demo", "version": "1.0.0", "scripts": {
        "test": "echo npm-tested", "build": "echo npm-built"}}))
    (work / "data.txt").write_text("b\na\nb\nc\n")
    (work / "data.csv").write_text("a,1\nb,2\na,3\n")
    (work / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n")
    git_repo(work)


def test_everyday_commands_run_unasked(real_claude, offline_env, model_server):
    work = offline_env.cwd
    everyday_project(work)
    commands = [command_of(c) for c in EVERYDAY]
    venv_bin = str(Path(sys.executable).parent)  # python3 -m pytest and pytest: the test's own
    assert shutil.which("jq") and shutil.which("npm"), "jq and npm are on the machine (the CLI needs npm)"
    proc, results, audit = run_session(model_server, offline_env, real_claude, "EVERYDAY", commands, "everyday",
                                       path=venv_bin)
    assert len(results) == len(commands), proc.stderr[-2000:]
    failed = [(c["id"], r["content"][:200]) for c, r in zip(EVERYDAY, results, strict=True) if r["is_error"]]
    assert failed == []
    rows = [row for row in audit if row.get("tool") == "Bash"]
    assert [row.get("decision") for row in rows] == ["allow"] * len(commands)
    assert {row.get("decided_by") for row in rows} == {"rule"}
    for case in EVERYDAY:
        if "trace" in case:
            assert (work / case["trace"]).exists(), case["id"]
    log = subprocess.run(["git", "log", "-1", "--format=%B"], cwd=work, capture_output=True, text=True).stdout
    assert log.startswith("tidy the app\n\nCo-Authored-By: Claude")
    by_id = dict(zip((c["id"] for c in EVERYDAY), results, strict=True))
    assert "npm-tested" in by_id["e-npm-test"]["content"]
    assert "sub-made" in by_id["e-cd-make"]["content"]
    assert "1 passed" in by_id["e-pytest-module"]["content"]


CORPUS = {"corpus-00": "deny", "corpus-03": "deny", "corpus-10": "allow", "corpus-07": "deny", "corpus-22": "allow"}


def test_corpus_lines_run_as_decided(real_claude, offline_env, model_server, tmp_path):
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name in ("aa", "bb", "cc", "dd"):
        (stubs / name).write_text(f'#!/bin/sh\necho {name} >> "$PWD/ran.log"\n')
        (stubs / name).chmod(0o755)
    cases = [c for c in CASES if c["id"] in CORPUS]
    assert {c["id"]: c["corpus"] for c in cases} == CORPUS
    proc, results, audit = run_session(model_server, offline_env, real_claude, "CORPUS",
                                       [command_of(c) for c in cases], "corpus", path=str(stubs))
    assert len(results) == len(cases), proc.stderr[-2000:]
    ran = (offline_env.cwd / "ran.log").read_text().split()
    assert "bb" not in ran
    assert ran.count("aa") == 2  # timeout 5 aa, find -exec aa: the allowed lines
    assert [r["is_error"] for r in results] == [CORPUS[c["id"]] == "deny" for c in cases]
