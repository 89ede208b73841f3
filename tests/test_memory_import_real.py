"""The reads no hook sees: a memory file's ``@``-imports, which the CLI reads by itself (at its
start, and for a directory below the cwd once a file tool reaches into it). From 2.1.330 the CLI
holds them to the ``Read`` deny rules the guard hands it (the guard's runtime dir, the user's
rules); 2.1.197 reads them whatever its rules say, so there the guard reads them first: it
refuses a session whose start would import what the policy keeps from reading, and denies the
file tool's call that would load such a memory file below the cwd
(``policy/memory_imports.py``, ``plan/memory_check.py``). On the real CLIs, each with the bare
CLI beside it as the control: it imports the file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from claudeguard.plan.memory_check import rules_held
from tests.shim_helpers import guarded_env, run_guarded, write_user_config


def _approve_external_imports(home: Path, work: Path) -> None:
    """What the user's "allow external imports" answer writes: the CLI then follows a CLAUDE.md's
    ``@/abs/path`` outside the project (without it, none, rule or no rule)."""
    state_file = home / ".claude.json"
    state = json.loads(state_file.read_text())
    project = state["projects"][str(work.resolve())]
    project["hasClaudeMdExternalIncludesApproved"] = True
    project["hasClaudeMdExternalIncludesWarningShown"] = True
    state_file.write_text(json.dumps(state))


def _sent(server: object, script: str) -> str:
    return "".join(r["messages"] for r in server.requests() if r["script"] == script)  # type: ignore[attr-defined]


@pytest.mark.newest_cli
def test_a_claude_md_import_of_the_runtime_dir_never_reaches_the_model(real_claude, cli_version, offline_env,
                                                                       model_server, run_claude, tmp_path):
    work = offline_env.cwd
    _approve_external_imports(offline_env.home, work)
    runtime = Path(offline_env["CLAUDEGUARD_RUNTIME_DIR"])
    runtime.mkdir(parents=True, mode=0o700)
    planted = runtime / "planted.txt"
    planted.write_text("RUNTIME-SECRET-5f1c\n")
    os.chmod(planted, 0o600)
    (tmp_path / "outside.txt").write_text("OUTSIDE-NOTE-77a2\n")  # the controls: a project file and one
    (work / "notes.txt").write_text("PROJECT-NOTE-c3d4\n")  # outside it, both imported
    (work / "CLAUDE.md").write_text(f"Project rules.\n@./notes.txt\n@{tmp_path / 'outside.txt'}\n@{planted}\n")
    server = model_server([{"match": "MEMORY", "turns": [{"text": "noted"}]}], keep_messages=True)
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, "[permissions]\nallow = [\"Bash(true)\"]\n")

    proc = run_guarded(env, work, "MEMORY go")
    if rules_held(cli_version):
        assert proc.returncode == 0, proc.stderr
        sent = _sent(server, "MEMORY")
        assert "PROJECT-NOTE-c3d4" in sent and "OUTSIDE-NOTE-77a2" in sent
        assert "RUNTIME-SECRET-5f1c" not in sent
    else:  # refused before anything started: one line naming the memory file's line
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"claudeguard: {work}/CLAUDE.md:4: imports {planted}, which the policy keeps "
                                      f"from reading ("), proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert f"Claude Code {cli_version} reads a memory file's imports whatever its rules say" in proc.stderr
        assert server.requests() == []

    # The control: the bare CLI, in the same HOME and project, imports the planted file.
    proc = run_claude([real_claude, "-p", "MEMORY again"], env, work, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "RUNTIME-SECRET-5f1c" in _sent(server, "MEMORY")
    assert planted.read_text() == "RUNTIME-SECRET-5f1c\n"


@pytest.mark.newest_cli
def test_a_nested_claude_md_that_imports_a_denied_file_through_a_link_never_reaches_the_model(
        real_claude, cli_version, offline_env, model_server, run_claude):
    """The repository ships ``sub/CLAUDE.md`` with ``@./notes.md``, a link to the project's
    ``.env``, which the user's policy denies reading: the CLI loads it once the agent reads a
    file in ``sub/`` (no external-import approval needed: the link's own path is in the project)."""
    work = offline_env.cwd
    (work / ".env").write_text("API_TOKEN=ENV-SECRET-9b8a\n")
    (work / "sub").mkdir()
    (work / "sub" / "file.txt").write_text("just a file\n")
    (work / "sub" / "notes.md").symlink_to(work / ".env")
    (work / "sub" / "CLAUDE.md").write_text("NESTED-NOTE-1e2f\n@./notes.md\n")
    read = {"name": "Read", "input": {"file_path": str(work / "sub" / "file.txt")}}
    server = model_server([{"match": "NESTED", "turns": [{"tool_use": read}, {"text": "read it"}]}],
                          keep_messages=True)
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[permissions]\nallow = ["Read"]\ndeny = ["Read(./.env)"]\n')

    proc = run_guarded(env, work, "NESTED go")
    assert proc.returncode == 0, proc.stderr
    [result] = [r for r in server.tool_results() if r["script"] == "NESTED"]
    if rules_held(cli_version):  # the CLI's own rule holds the import; the Read itself runs
        assert result["is_error"] is False and "just a file" in result["content"], result
    else:
        assert result["is_error"] is True, result
        assert (f"{work}/sub/CLAUDE.md:2: imports {work}/sub/notes.md, which the policy keeps from reading"
                in result["content"]), result
    assert "ENV-SECRET-9b8a" not in _sent(server, "NESTED")

    # The control: the bare CLI with the same Read allowed reads the link's target into the conversation.
    proc = run_claude([real_claude, "-p", "NESTED again", "--allowedTools=Read"], env, work, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ENV-SECRET-9b8a" in _sent(server, "NESTED")


@pytest.mark.newest_cli
def test_a_claude_md_import_of_a_file_an_ask_rule_names_is_refused_on_every_cli(real_claude, offline_env, model_server,
                                                                                run_claude):
    """The CLI is given no ask rules (the guard's hook asks): it would read the import without
    asking anyone, on every version."""
    work = offline_env.cwd
    (work / "secrets").mkdir()
    (work / "secrets" / "key.md").write_text("KEY-SECRET-31c7\n")
    (work / "CLAUDE.md").write_text("Project rules.\n@secrets/key.md\n")
    server = model_server([{"match": "ASKED", "turns": [{"text": "noted"}]}], keep_messages=True)
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[permissions]\nask = ["Read(./secrets/**)"]\n')

    proc = run_guarded(env, work, "ASKED go")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"claudeguard: {work}/CLAUDE.md:2: imports {work}/secrets/key.md, which the policy "
                                  f"keeps from reading (Read needs a human decision by Read(./secrets/**)"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert server.requests() == []
    # The control: the bare CLI imports it.
    proc = run_claude([real_claude, "-p", "ASKED again"], env, work, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "KEY-SECRET-31c7" in _sent(server, "ASKED")


@pytest.mark.newest_cli
def test_a_skill_that_includes_a_file_an_ask_rule_names_is_denied(real_claude, offline_env, model_server, run_claude):
    """A skill's ``@`` include is read as the model invokes it, from the cwd, asking nobody: the
    Skill call is denied (the guard's hook sees it; the read itself it would not)."""
    work = offline_env.cwd
    (work / "secrets").mkdir()
    (work / "secrets" / "key.md").write_text("KEY-SECRET-8d0e\n")
    skill = work / ".claude" / "skills" / "notes" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: notes\ndescription: the notes\n---\nThe key: @secrets/key.md\n")
    server = model_server([{"match": "NOTES", "turns": [{"tool_use": {"name": "Skill", "input": {"skill": "notes"}}},
                                                        {"text": "fin"}]}], keep_messages=True)
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[permissions]\nallow = ["Skill"]\nask = ["Read(./secrets/**)"]\n')

    proc = run_guarded(env, work, "NOTES go")
    assert proc.returncode == 0, proc.stderr
    [result] = [r for r in server.tool_results() if r["script"] == "NOTES"]
    assert result["is_error"] is True, result
    assert f"{skill}:5: imports {work}/secrets/key.md, which the policy keeps from reading" in result["content"]
    assert "KEY-SECRET-8d0e" not in _sent(server, "NOTES")
    # The control: the bare CLI with the Skill allowed reads the include into the conversation.
    proc = run_claude([real_claude, "-p", "NOTES again", "--allowedTools=Skill"], env, work, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "KEY-SECRET-8d0e" in _sent(server, "NOTES")
