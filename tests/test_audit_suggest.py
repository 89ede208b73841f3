"""`claudeguardctl audit --suggest`: rules learned from the calls a human answered or that timed
out, with counts; `--apply` writes them with tomlkit (comments kept, no duplicates); bad input is
one line and exit 2 with nothing written. Ends with a real-CLI run on both pinned versions."""

from __future__ import annotations

import itertools
import json
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

from tests.shim_helpers import CTL, Approver, ctl, guarded_env, pending, plain_env, run_guarded, write_user_config

_ids = itertools.count(1)


def iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + ".000Z"


def row(summary: str, rules, decision: str = "allow", by: str = "human", *, session: str = "sessaaaa11112222",  # type: ignore[no-untyped-def]
        agent: str | None = None, age_s: float = 60, rid: str | None = None, **extra) -> dict:
    return {"time": iso(time.time() - age_s), "session_id": session, "agent_type": agent, "agent_id": None,
            "tool": summary.split(":", 1)[0], "summary": summary, "decision": decision, "decided_by": by,
            "scope": "once" if by == "human" else None, "waited_s": 1.0, "rule": None, "source": None,
            "request_id": rid or f"req{next(_ids):013d}", "via": "hook",
            **({"rules": rules} if rules is not None else {}), **extra}


@pytest.fixture
def env(tmp_path: Path) -> dict:
    return plain_env(tmp_path)


def write_log(env: dict, rows: list[dict]) -> None:
    log = Path(env["CLAUDEGUARD_LOG_DIR"])
    log.mkdir(mode=0o700, parents=True, exist_ok=True)
    (log / "audit.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CTL + ["audit", "--suggest", *args], env=env, capture_output=True, text=True, timeout=60)


def user_file(env: dict) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "claudeguard" / "config.toml"


MIXED = [
    row("Bash: npm test", ["Bash(npm test)"]),
    row("Bash: npm test", ["Bash(npm test)"], agent="Explore"),
    row("Bash: npm test", ["Bash(npm test)"], decision="deny", by="timeout"),  # a human said yes twice: yes wins
    row("Bash: git push --force", ["Bash(git push --force)"], decision="deny"),
    row("Bash: git push --force", ["Bash(git push --force)"], decision="deny", by="timeout"),
    row("Read: /etc/hosts", ["Read(//etc/hosts)"]),
    row("Bash: make a && make b", ["Bash(make a)", "Bash(make b)"]),
    row("Bash: eval $x", []),  # cannot be split safely
    row("Bash: ls && rm -rf build", ["Bash(ls)", "Bash(rm -rf build)"], decision="deny"),  # which part? unknown
    row("Bash: curl x", ["Bash(curl x)"]),
    row("Bash: curl x", ["Bash(curl x)"], decision="deny"),  # answered both ways
    row("Bash: old", None),  # logged before rules were kept
    row("Bash: echo hi", ["Bash(echo hi)"], ask_rule="Bash(echo *)", ask_source="config.toml:3"),
    row("Bash: sleep 1", ["Bash(sleep 1)"], decided_by_dummy=1, by="rule"),  # decided by a rule: not asked
]


def test_suggest_groups_counts_and_skips(env):
    write_log(env, MIXED + [dict(MIXED[0])])  # the same request logged twice counts once
    out = run(env)
    assert out.returncode == 0, out.stderr
    doc = tomllib.loads(out.stdout)
    assert doc == {"permissions": {"allow": ["Bash(npm test)", "Bash(make a)", "Bash(make b)", "Read(//etc/hosts)"],
                                   "deny": ["Bash(git push --force)"]}}
    lines = out.stdout.splitlines()
    assert lines[0].startswith("# claudeguardctl audit --suggest: 13 calls asked a human in the whole audit log "
                               "in 1 session: 8 approved, 3 denied, 2 timed out.")
    assert ('    "Bash(npm test)",  # 3 calls: approved 2, timed out 1 (denied by approval.on_timeout); '
            'asked by Explore, main') in lines
    assert ('    "Bash(git push --force)",  # 2 calls: denied 1, timed out 1 (denied by approval.on_timeout); '
            'asked by main') in lines
    text = out.stdout
    assert "# not suggested, answered both ways: Bash(curl x)" in text
    assert "# not suggested, cannot be split safely into rules: 1 call: Bash: eval $x" in text
    assert ("# not suggested, a compound command denied as a whole (which part was refused is unknown): "
            "1 call: Bash: ls && rm -rf build") in text
    assert "# not suggested, logged without its rules (by an older claudeguard): 1 call: Bash: old" in text
    assert "asked because of the ask rule Bash(echo *) (config.toml:3)" in text
    assert not user_file(env).exists()  # listing writes nothing


def test_suggest_json(env):
    write_log(env, MIXED)
    out = run(env, "--json")
    data = json.loads(out.stdout)
    assert [(r["rule"], r["calls"], r["approved"], r["denied"], r["timed_out"]) for r in data["allow"]] == [
        ("Bash(npm test)", 3, 2, 0, 1), ("Bash(make a)", 1, 1, 0, 0), ("Bash(make b)", 1, 1, 0, 0),
        ("Read(//etc/hosts)", 1, 1, 0, 0)]
    assert [r["rule"] for r in data["deny"]] == ["Bash(git push --force)"]
    assert [r["rule"] for r in data["conflicts"]] == ["Bash(curl x)"]
    assert data["calls"] == 13 and data["outcomes"] == {"approved": 8, "denied": 3, "timed_out": 2}


def test_since_and_session_filter(env):
    write_log(env, [row("Bash: a1", ["Bash(a1)"], age_s=3 * 3600), row("Bash: a2", ["Bash(a2)"], age_s=600),
                    row("Bash: a3", ["Bash(a3)"], age_s=30, session="otherbbbb2222333")])
    assert tomllib.loads(run(env, "--since", "1h").stdout)["permissions"]["allow"] == ["Bash(a2)", "Bash(a3)"]
    recent = run(env, "--since", "1h30m", "--session", "sessaaaa").stdout
    assert tomllib.loads(recent)["permissions"]["allow"] == ["Bash(a2)"]
    assert tomllib.loads(run(env, "--since", "4h").stdout)["permissions"]["allow"] == ["Bash(a1)", "Bash(a2)",
                                                                                      "Bash(a3)"]
    assert tomllib.loads(run(env, "--since", "20s").stdout) == {}
    # The plain listing takes the same filters.
    listed = ctl(env, "audit", "--json", "--since", "15m")
    assert [json.loads(line)["summary"] for line in listed.stdout.splitlines()] == ["Bash: a2", "Bash: a3"]


@pytest.mark.parametrize("since", ["yesterday", "5x", "", "-3h", "0s", "1h 30m", "h"])
def test_bad_since_is_one_line_and_exit_2(env, since):
    write_log(env, MIXED)
    out = run(env, "--since", since, "--apply")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("claudeguardctl") and "--since" in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert not user_file(env).exists()


def test_apply_keeps_comments_and_adds_no_duplicates(env):
    write_log(env, MIXED)
    path = user_file(env)
    path.parent.mkdir(parents=True)
    original = ('# my config\n[permissions]  # all agents\nallow = [\n  "Read(//etc/hosts)",  # mine\n]\n\n'
                '[approval]\ntimeout = 30  # short\n')
    path.write_text(original)
    out = run(env, "--apply")
    assert out.returncode == 0, out.stderr
    assert "already in" in out.stdout and "Read(//etc/hosts)" in out.stdout.splitlines()[-6:][0] + out.stdout
    assert out.stderr == f"added 4 rules (allow 3, deny 1) to [permissions] in {path}\n"
    text = path.read_text()
    assert text.startswith('# my config\n[permissions]  # all agents\nallow = [\n  "Read(//etc/hosts)",  # mine\n')
    assert "timeout = 30  # short" in text
    assert '  "Bash(npm test)", # 3 calls: approved 2, timed out 1' in text
    assert tomllib.loads(text) == {"permissions": {"allow": ["Read(//etc/hosts)", "Bash(npm test)", "Bash(make a)",
                                                             "Bash(make b)"],
                                                   "deny": ["Bash(git push --force)"]}, "approval": {"timeout": 30}}
    again = run(env, "--apply")
    assert again.returncode == 0 and again.stderr == f"nothing to add to [permissions] in {path}\n"
    assert path.read_text() == text
    assert "# no new rules to suggest" in again.stdout


def test_apply_to_another_file_and_refusals(env, tmp_path):
    write_log(env, MIXED)
    project = tmp_path / "proj.toml"
    out = run(env, "--apply", "--file", str(project))
    assert out.returncode == 0, out.stderr
    assert tomllib.loads(project.read_text())["permissions"]["deny"] == ["Bash(git push --force)"]
    assert not user_file(env).exists()
    broken = tmp_path / "broken.toml"
    broken.write_text("[permissions\nallow = [")
    out = run(env, "--apply", "--file", str(broken))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "invalid TOML, not changing it" in out.stderr
    assert broken.read_text() == "[permissions\nallow = ["
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('[permissions]\nallow = "Bash(x)"\n')
    out = run(env, "--apply", "--file", str(wrong))
    assert out.returncode == 2 and "permissions.allow is not a list" in out.stderr
    assert wrong.read_text() == '[permissions]\nallow = "Bash(x)"\n'
    out = subprocess.run(CTL + ["audit", "--apply"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "go with --suggest" in out.stderr


BROAD = [
    row("Bash: npm run build", ["Bash(npm run build)"]),
    row("Bash: npm run lint", ["Bash(npm run lint)"]),
    row("Bash: npm run lint", ["Bash(npm run lint)"]),
    row("Bash: git log -1", ["Bash(git log -1)"]),
    row("Bash: git log --oneline", ["Bash(git log --oneline)"]),
    row("Bash: git log -p", ["Bash(git log -p)"], decision="deny"),  # a prefix may not cover it
    row("Bash: python a.py", ["Bash(python a.py)"]),
    row("Bash: python b.py", ["Bash(python b.py)"]),  # runs anything: no prefix
    row("Bash: cat a.txt", ["Bash(cat a.txt)"]),
    row("Bash: cat 'b c.txt'", ["Bash(cat 'b c.txt')"]),
    row("Bash: uniq", ["Bash(uniq)"]),
]


def test_broader_prefix_rules_are_offered_as_such(env):
    write_log(env, BROAD)
    out = run(env, "--json")
    broader = {b["rule"]: (b["covers"], b["calls"]) for b in json.loads(out.stdout)["broader"]}
    assert broader == {"Bash(npm run *)": (["Bash(npm run lint)", "Bash(npm run build)"], 3),
                       "Bash(cat *)": (["Bash(cat 'b c.txt')", "Bash(cat a.txt)"], 2)}
    text = run(env).stdout
    assert tomllib.loads(text)["permissions"]["allow"] == [
        "Bash(npm run lint)", "Bash(cat 'b c.txt')", "Bash(cat a.txt)", "Bash(git log --oneline)", "Bash(git log -1)",
        "Bash(npm run build)", "Bash(python a.py)", "Bash(python b.py)", "Bash(uniq)"]
    assert '# allow = ["Bash(npm run *)"]  # covers Bash(npm run lint), Bash(npm run build): 3 calls' in text
    assert "Bash(*)" not in text and "Bash(python *)" not in text and "Bash(git log *)" not in text
    path = user_file(env)
    assert run(env, "--apply").returncode == 0
    assert "Bash(npm run *)" not in path.read_text()  # narrow rules only, unless asked
    path.unlink()
    assert run(env, "--apply", "--broader").returncode == 0
    assert tomllib.loads(path.read_text())["permissions"]["allow"] == [
        "Bash(git log --oneline)", "Bash(git log -1)", "Bash(python a.py)", "Bash(python b.py)", "Bash(uniq)",
        "Bash(npm run *)", "Bash(cat *)"]


def test_no_log_yet(env):
    out = run(env)
    assert out.returncode == 0
    assert out.stdout.startswith("# claudeguardctl audit --suggest: 0 calls asked a human")


# -- on the real CLI ----------------------------------------------------------------------------


def bash(command: str) -> dict:
    return {"name": "Bash", "input": {"command": command, "description": "run it"}}


@pytest.mark.one_cli
def test_real_run_learns_a_rule_and_the_next_run_is_not_asked(real_claude, offline_env, model_server):
    """A -p run asks for two commands (no rule decides them): one approved, one left to time out.
    --suggest proposes an allow and a deny; --apply writes them; the same run again asks nobody."""
    server = model_server([{"match": "LEARN", "turns": [{"tool_use": bash("echo learned > a.txt")},
                                                        {"tool_use": bash("touch nope.txt")}, {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="6")
    config = write_user_config(env, "# mine\n[permissions]\nallow = []  # empty for now\n")
    approver = Approver(env, [("approve", [])])
    approver.start()
    proc = run_guarded(env, offline_env.cwd, "LEARN go")
    approver.join(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert approver.error is None and [r.returncode for r in approver.results] == [0]
    assert (offline_env.cwd / "a.txt").read_text() == "learned\n" and not (offline_env.cwd / "nope.txt").exists()
    listed = ctl(env, "audit", "--suggest", "--since", "10m")
    assert listed.returncode == 0, listed.stderr
    assert tomllib.loads(listed.stdout) == {"permissions": {"allow": ["Bash(echo learned > a.txt)"],
                                                            "deny": ["Bash(touch nope.txt)"]}}
    assert "1 call: approved 1; asked by main" in listed.stdout
    assert "1 call: timed out 1 (denied by approval.on_timeout); asked by main" in listed.stdout
    applied = ctl(env, "audit", "--suggest", "--apply")
    assert applied.returncode == 0 and applied.stderr.startswith("added 2 rules (allow 1, deny 1)")
    assert config.read_text().startswith("# mine\n[permissions]\nallow = [\n")
    (offline_env.cwd / "a.txt").unlink()
    rows_before = len(ctl(env, "audit", "--json").stdout.splitlines())
    again = run_guarded(env, offline_env.cwd, "LEARN go")
    assert again.returncode == 0, again.stderr
    assert (offline_env.cwd / "a.txt").read_text() == "learned\n" and not (offline_env.cwd / "nope.txt").exists()
    # exactly two rows for the second run, both decided by the written rules: nobody was asked
    second = [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()][rows_before:]
    assert [(e["decision"], e["decided_by"]) for e in second] == [("allow", "rule"), ("deny", "rule")]
    assert pending(env) == []
