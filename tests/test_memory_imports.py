"""A memory file's ``@``-imports as the guard reads them for a CLI that does not hold its Read
rules on them (policy/memory_imports.py, plan/memory_check.py); the real CLIs in
tests/test_memory_import_real.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from claudeguard.config.load import Config, load_config
from claudeguard.errors import UsageError
from claudeguard.plan import memory_check
from claudeguard.plan.claude_args import parse_claude_args
from claudeguard.policy.decide import policy_from_spec
from claudeguard.policy.memory_imports import between, first_denied, imports_of, memory_files, read_denied


def test_imports_are_read_as_the_cli_reads_them(tmp_path):
    memory = tmp_path / "CLAUDE.md"
    memory.write_text("@./a.md and @b.md\nmail me at me@example.com, or @/abs/c.md#part\n"
                      "@~/d.md @my\\ file.md\n@@x @#y @/ @(z)\n")
    assert imports_of(str(memory), "/home/u") == [
        (1, str(tmp_path / "a.md")), (1, str(tmp_path / "b.md")), (2, "/abs/c.md"),
        (3, "/home/u/d.md"), (3, str(tmp_path / "my file.md"))]


def test_an_unreadable_or_import_free_file_has_no_imports(tmp_path):
    assert imports_of(str(tmp_path / "missing.md"), "/h") == []
    (tmp_path / "plain.md").write_text("no imports here\n")
    assert imports_of(str(tmp_path / "plain.md"), "/h") == []


def test_memory_files_of_a_directory_with_its_rules_and_a_link_cycle(tmp_path):
    (tmp_path / ".claude" / "rules" / "deep").mkdir(parents=True)
    (tmp_path / "CLAUDE.md").write_text("x")
    (tmp_path / "CLAUDE.local.md").write_text("x")
    (tmp_path / ".claude" / "rules" / "a.md").write_text("x")
    (tmp_path / ".claude" / "rules" / "deep" / "b.md").write_text("x")
    (tmp_path / ".claude" / "rules" / "deep" / "back").symlink_to(tmp_path / ".claude" / "rules")
    (tmp_path / ".claude" / "rules" / "notes.txt").write_text("x")
    found = memory_files(str(tmp_path))
    assert found[:2] == [str(tmp_path / "CLAUDE.md"), str(tmp_path / "CLAUDE.local.md")]
    assert sorted(os.path.realpath(f) for f in found[2:]) == [
        str(tmp_path / ".claude" / "rules" / "a.md"), str(tmp_path / ".claude" / "rules" / "deep" / "b.md")]


def _denied(policy_spec: dict, cwd: Path):
    return read_denied(policy_from_spec(policy_spec), [None], str(cwd), str(cwd / "home"))


def test_the_first_denied_import_is_found_through_links_and_hops(tmp_path):
    (tmp_path / ".env").write_text("SECRET=1\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "link.md").symlink_to(tmp_path / ".env")
    hops = [tmp_path / f"hop{i}.md" for i in range(6)]
    for here, there in zip(hops, hops[1:], strict=False):
        here.write_text(f"@./{there.name}\n")
    hops[-1].write_text("@docs/link.md\n")
    spec = {"permissions": {"deny": [{"rule": "Read(./.env)", "source": "config.toml:3"}]}}
    denied = _denied(spec, tmp_path)
    # five hops deep: the import in the fifth file is read, not one in the sixth
    hops[4].write_text("see @docs/link.md\n")
    found = first_denied([str(hops[0])], denied, str(tmp_path))
    assert found is not None
    assert (found.file, found.line, found.target) == (str(hops[4]), 1, str(tmp_path / "docs/link.md"))
    assert found.line_text() == (f"{hops[4]}:1: imports {tmp_path}/docs/link.md, which the policy keeps from reading "
                                 f"(Read denied by Read(./.env) (config.toml:3))")
    hops[4].write_text(f"@./{hops[5].name}\n")
    assert first_denied([str(hops[0])], denied, str(tmp_path)) is None  # the sixth file is past the CLI's hops
    assert first_denied([str(hops[5])], denied, str(tmp_path)) is not None


def test_an_ask_rule_counts_and_a_cycle_ends(tmp_path):
    (tmp_path / "a.md").write_text("@./b.md\n")
    (tmp_path / "b.md").write_text("@./a.md\n@./secret/x.md\n")
    spec = {"permissions": {"ask": [{"rule": "Read(./secret/**)", "source": "config.toml:1"}]}}
    found = first_denied([str(tmp_path / "a.md")], _denied(spec, tmp_path), str(tmp_path))
    assert found is not None and found.line == 2 and "needs a human decision" in found.why
    assert first_denied([str(tmp_path / "a.md")], _denied({}, tmp_path), str(tmp_path)) is None


def test_the_dirs_a_file_tool_makes_the_cli_read(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    both = [str(tmp_path / "a"), str(tmp_path / "a" / "b")]
    assert between(str(tmp_path), str(tmp_path / "a" / "b" / "f.txt")) == both
    assert between(str(tmp_path), str(tmp_path / "a" / "b")) == both
    assert between(str(tmp_path), str(tmp_path / "f.txt")) == []
    assert between(str(tmp_path / "a"), str(tmp_path / "ab" / "f.txt")) == []
    assert between(str(tmp_path), "/etc/passwd") == []


def _cfg(tmp_path: Path, cwd: Path, deny: list[str]) -> Config:
    """The user's config with ``deny`` as its Read rules (XDG_CONFIG_HOME: the project fixture's)."""
    config = tmp_path / "xdg" / "claudeguard" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[permissions]\ndeny = [" + ", ".join(json.dumps(r) for r in deny) + "]\n")
    return load_config(cwd)


def _cli(tmp_path: Path, version: str | None) -> str:
    """A stand-in CLI: with an npm package.json of ``version`` beside it, or of no known version."""
    pkg = tmp_path / "cli" / version if version else tmp_path / "cli" / "none"
    (pkg / "bin").mkdir(parents=True, exist_ok=True)
    if version:
        (pkg / "package.json").write_text(json.dumps({"name": "@anthropic-ai/claude-code", "version": version}))
    cli = pkg / "bin" / "claude"
    cli.write_text("#!/bin/sh\n")
    cli.chmod(0o755)
    return str(cli)


@pytest.fixture
def project(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (work / ".env").write_text("SECRET=1\n")
    (work / "CLAUDE.md").write_text("# rules\n\nSee @.env for the keys.\n")
    return work


def test_the_plan_refuses_a_start_that_would_import_a_denied_file_on_an_older_cli(tmp_path, project):
    args = parse_claude_args(["-p", "hi"])
    cfg = _cfg(tmp_path, project, ["Read(./.env)"])
    for version in ("2.1.197", None):
        with pytest.raises(UsageError) as err:
            memory_check.check(args, cfg, str(project), _cli(tmp_path, version))
        assert str(err.value).startswith(f"{project}/CLAUDE.md:3: imports {project}/.env, which the policy keeps "
                                         f"from reading (Read denied by Read(./.env) "
                                         f"({tmp_path}/xdg/claudeguard/config.toml:2)): ")
        assert "refused" in str(err.value)
    memory_check.check(args, cfg, str(project), _cli(tmp_path, "2.1.330"))  # it holds its rules
    memory_check.check(args, _cfg(tmp_path, project, []), str(project), _cli(tmp_path, "2.1.197"))  # nothing denied


def test_the_plan_reads_the_dirs_above_the_cwd_and_the_users_own(tmp_path, project):
    args = parse_claude_args(["-p", "hi"])
    (project / "CLAUDE.md").unlink()
    sub = project / "deep" / "er"
    sub.mkdir(parents=True)
    cfg = _cfg(tmp_path, sub, ["Read(//" + str(project / ".env").lstrip("/") + ")"])
    memory_check.check(args, cfg, str(sub), _cli(tmp_path, "2.1.197"))
    (project / "deep" / "CLAUDE.local.md").write_text(f"@{project}/.env\n")
    with pytest.raises(UsageError, match=r"deep/CLAUDE.local.md:1: imports "):
        memory_check.check(args, cfg, str(sub), _cli(tmp_path, "2.1.197"))
    (project / "deep" / "CLAUDE.local.md").unlink()
    user = tmp_path / "home" / ".claude"
    (user / "rules").mkdir(parents=True)
    (user / "rules" / "keys.md").write_text(f"@{project}/.env\n")
    with pytest.raises(UsageError, match=r"home/.claude/rules/keys.md:1: imports "):
        memory_check.check(args, cfg, str(sub), _cli(tmp_path, "2.1.197"))


def test_the_hook_denies_a_file_tools_call_that_loads_such_a_memory_file_unless_the_cli_holds_its_rules(tmp_path):
    from claudeguard.gate.decide import MEMORY_SOURCE, policy_decision
    from claudeguard.gate.session import Session

    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / ".env").write_text("SECRET=1\n")
    (work / "sub" / "CLAUDE.md").write_text("@../.env\n")
    (tmp_path / "sdir").mkdir()
    spec = {"permissions": {"allow": [{"rule": "Read", "source": "config.toml:1"}],
                            "deny": [{"rule": "Read(./.env)", "source": "config.toml:2"}]}}
    call = {"file_path": str(work / "sub" / "file.txt")}
    older = Session("s1", str(tmp_path / "sdir"), {"cwd": str(work), "policy": spec, "memory_rules_held": False})
    verdict = policy_decision(older, "Read", call, None, str(work))
    assert (verdict.decision, verdict.rule, verdict.source) == ("deny", "memory import", MEMORY_SOURCE)
    assert verdict.reason.startswith(f"claudeguard: {work}/sub/CLAUDE.md:1: imports {work}/.env, which the policy ")
    assert policy_decision(older, "Read", {"file_path": str(work / "top.txt")}, None, str(work)).decision == "allow"
    assert policy_decision(older, "Bash", {"command": "cat sub/file.txt"}, None, str(work)).decision != "deny"
    (work / ".claude" / "rules").mkdir(parents=True)  # a rule file written since the start
    (work / ".claude" / "rules" / "late.md").write_text("---\npaths: ['*.txt']\n---\n@../../.env\n")
    verdict = policy_decision(older, "Read", {"file_path": str(work / "top.txt")}, None, str(work))
    assert (verdict.decision, verdict.rule) == ("deny", "memory import")
    assert f"{work}/.claude/rules/late.md:4: imports {work}/.env" in verdict.reason
    newer = Session("s2", str(tmp_path / "sdir"), {"cwd": str(work), "policy": spec, "memory_rules_held": True})
    assert policy_decision(newer, "Read", call, None, str(work)).decision == "allow"
    # the CLI holds its deny rules, but is given no ask rules: an import of an asked-about path is denied
    asking = dict(spec, permissions=dict(spec["permissions"], ask=[{"rule": "Read(./.env)", "source": "c:3"}],
                                         deny=[]))
    newer = Session("s3", str(tmp_path / "sdir"), {"cwd": str(work), "policy": asking, "memory_rules_held": True})
    verdict = policy_decision(newer, "Read", call, None, str(work))
    assert (verdict.decision, verdict.rule) == ("deny", "memory import") and "needs a human decision" in verdict.reason


def test_an_import_an_ask_rule_names_is_refused_on_every_cli_and_a_deny_only_where_the_cli_does_not_hold_it(
        tmp_path, project):
    args = parse_claude_args(["-p", "hi"])
    (project / "secrets").mkdir()
    (project / "secrets" / "key.md").write_text("k\n")
    (project / "CLAUDE.md").write_text("@secrets/key.md\n")
    config = tmp_path / "xdg" / "claudeguard" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[permissions]\nask = ["Read(./secrets/**)"]\n')
    for version in ("2.1.197", "2.1.330"):
        with pytest.raises(UsageError, match=r"CLAUDE.md:1: imports .*/secrets/key.md, which the policy keeps from "
                                             r"reading \(Read needs a human decision by Read\(./secrets/\*\*\)"):
            memory_check.check(args, load_config(project), str(project), _cli(tmp_path, version))
    config.write_text('[permissions]\ndeny = ["Read(./secrets/**)"]\n')
    memory_check.check(args, load_config(project), str(project), _cli(tmp_path, "2.1.330"))  # the CLI holds a deny
    with pytest.raises(UsageError):
        memory_check.check(args, load_config(project), str(project), _cli(tmp_path, "2.1.197"))
    # an ask about every read: the memory file itself is the CLI's to read; what it imports is not
    config.write_text('[permissions]\nask = ["Read"]\n')
    (project / "CLAUDE.md").write_text("no imports\n")
    memory_check.check(args, load_config(project), str(project), _cli(tmp_path, "2.1.197"))
    (project / "CLAUDE.md").write_text("@secrets/key.md\n")
    with pytest.raises(UsageError, match="needs a human decision"):
        memory_check.check(args, load_config(project), str(project), _cli(tmp_path, "2.1.197"))


def test_a_skill_call_whose_skill_includes_a_file_the_policy_keeps_from_reading_is_denied(tmp_path, monkeypatch):
    from claudeguard.gate.decide import policy_decision
    from claudeguard.gate.session import Session
    from claudeguard.policy.memory_imports import skill_files

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    (work / "secrets").mkdir(parents=True)
    (work / "secrets" / "key.md").write_text("k\n")
    skill = work / ".claude" / "skills" / "notes" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: notes\n---\nThe key: @secrets/key.md\n")  # taken from the cwd, as the CLI does
    command = tmp_path / "home" / ".claude" / "commands" / "ops" / "keys.md"
    command.parent.mkdir(parents=True)
    command.write_text("See @secrets/key.md\n")
    assert skill_files("notes", str(work), str(tmp_path / "home")) == [str(skill)]
    assert skill_files("ops:keys", str(work), str(tmp_path / "home")) == [str(command)]
    assert skill_files("../../etc", str(work), str(tmp_path / "home")) == []
    (tmp_path / "sdir").mkdir()
    spec = {"permissions": {"allow": [{"rule": "Skill", "source": "c:1"}],
                            "ask": [{"rule": "Read(./secrets/**)", "source": "c:2"}]}}
    session = Session("s", str(tmp_path / "sdir"), {"cwd": str(work), "policy": spec, "memory_rules_held": True})
    verdict = policy_decision(session, "Skill", {"skill": "notes"}, None, str(work))
    assert (verdict.decision, verdict.rule) == ("deny", "skill import"), verdict.reason
    assert f"imports {work}/secrets/key.md, which the policy keeps from reading" in verdict.reason
    old_name = policy_decision(session, "SlashCommand", {"command": "/notes"}, None, str(work))  # an older CLI's tool
    assert (old_name.decision, old_name.rule) == ("deny", "skill import"), old_name.reason
    # the user's own command asks nobody about an ask rule's path (its choice); a deny still counts
    assert policy_decision(session, "Skill", {"skill": "ops:keys"}, None, str(work)).decision == "allow"
    deny = [{"rule": "Read(./secrets/**)", "source": "c:3"}]
    denying = Session("d", str(tmp_path / "sdir"), {"cwd": str(work), "memory_rules_held": True, "policy": {
        "permissions": {"allow": spec["permissions"]["allow"], "deny": deny}}})
    verdict = policy_decision(denying, "Skill", {"skill": "ops:keys"}, None, str(work))
    assert (verdict.decision, verdict.rule) == ("deny", "skill import"), verdict.reason
    skill.write_text("---\nname: notes\n---\nNothing kept here.\n")
    assert policy_decision(session, "Skill", {"skill": "notes"}, None, str(work)).decision == "allow"


def test_more_imports_than_the_guard_reads_is_a_no(tmp_path, monkeypatch):
    from claudeguard.policy import memory_imports

    monkeypatch.setattr(memory_imports, "MAX_FILES", 3)
    for i in range(5):
        (tmp_path / f"m{i}.md").write_text(f"@./m{i + 1}.md\n")
    found = first_denied([str(tmp_path / "m0.md")], lambda path: None, str(tmp_path))
    assert found is not None and "more than 3 memory files and imports to read" in found.line_text()
    monkeypatch.setattr(memory_imports, "MAX_FILES", 10)
    assert first_denied([str(tmp_path / "m0.md")], lambda path: None, str(tmp_path)) is None


def test_the_users_own_memory_files_and_a_trusted_one_import_what_an_ask_rule_names(tmp_path, project):
    from claudeguard.config.trust import record

    args = parse_claude_args(["-p", "hi"])
    (project / "secrets").mkdir()
    (project / "secrets" / "key.md").write_text("k\n")
    (project / "CLAUDE.md").write_text("@secrets/key.md\n")
    user = tmp_path / "home" / ".claude"
    user.mkdir(parents=True)
    (user / "CLAUDE.md").write_text(f"@{project}/secrets/key.md\n")
    config = tmp_path / "xdg" / "claudeguard" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[permissions]\nask = ["Read(./secrets/**)"]\n')
    with pytest.raises(UsageError) as err:  # the project's file, not the user's
        memory_check.check(args, load_config(project), str(project), _cli(tmp_path, "2.1.332"))
    assert str(err.value).startswith(f"{project}/CLAUDE.md:1: imports ")
    assert str(err.value).endswith(f"or trust the file (claudeguardctl config trust {project}/CLAUDE.md)")
    record([str(project / "CLAUDE.md")])
    for version in ("2.1.332", "2.1.197"):
        memory_check.check(args, load_config(project), str(project), _cli(tmp_path, version))
    (project / "CLAUDE.md").write_text("@secrets/key.md\n@./secrets/key.md\n")  # changed since trusted
    with pytest.raises(UsageError):
        memory_check.check(args, load_config(project), str(project), _cli(tmp_path, "2.1.332"))


def test_every_rule_file_is_read_and_past_the_bound_the_answer_is_no(tmp_path, monkeypatch):
    from claudeguard.policy import memory_imports

    rules = tmp_path / ".claude" / "rules"
    rules.mkdir(parents=True)
    for i in range(300):
        (rules / f"r{i:03}.md").write_text("plain\n")
    assert len(memory_files(str(tmp_path))) == 300  # none left out unread
    monkeypatch.setattr(memory_imports, "MAX_FILES", 299)
    found = first_denied(memory_files(str(tmp_path)), lambda path: None, str(tmp_path))
    assert found is not None and found.line == -1
