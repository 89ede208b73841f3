"""Issue 23's specification, tests/data/bash_cases.toml: every case decided as written under every
policy it names; the file covers every class; and the smaller promises around it (the reason an
unreadable command is asked with, an explicit allow rule for an interpreter, protected paths, what
a split exposes of the files a command touches)."""

from __future__ import annotations

import os
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from claudeguard.policy.bash import part_allowed_by, pattern_matches, split_command
from claudeguard.policy.decide import Policy, decide, policy_from_spec

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

DATA = Path(__file__).parent / "data" / "bash_cases.toml"
CASES_FILE = tomllib.loads(DATA.read_text())
POLICIES: dict[str, dict] = CASES_FILE["policies"]
CASES: list[dict] = CASES_FILE["case"]
# Classes of smuggled spellings (issue 23, "What to build") and the least members each has.
SMUGGLING = ["shell-stdin", "source", "dynamic-name", "quoting", "shell-c", "wrapper", "interpreter", "git",
             "binary", "write", "unreadable", "list"]


def command_of(case: dict) -> str:
    """The case's command; an oversized one is built from its pieces."""
    if "oversized" in case:
        return case["command"] * (case["oversized"] // len(case["command"]) + 1) + case["tail"]
    return case["command"]


def policy(name: str, root: str) -> tuple[Policy, str | None]:
    spec = POLICIES[name]
    entries = {kind: [{"rule": r, "source": f"bash_cases.toml:{name}", "root": root} for r in spec.get(kind, [])]
               for kind in ("allow", "deny", "ask")}
    return policy_from_spec({"permissions": entries}), spec.get("mode")


def prepare(directory: Path, case: dict) -> None:
    """The links and files a case needs in its working directory."""
    for name, program in case.get("links", {}).items():
        target = shutil.which(program)
        assert target, f"{case['id']}: {program} is not on PATH"
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(target)
    for name, text in case.get("setup", {}).items():
        path = directory / name
        path.write_text(text)
        if text.startswith("#!"):
            path.chmod(0o755)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cases")
    (root / "home").mkdir()
    (root / "proj").mkdir()
    return root / "proj", root / "home"


PAIRS = [(case, name) for case in CASES for name in POLICIES if name in case]


@pytest.mark.parametrize("case,name", PAIRS, ids=[f"{c['id']}-{n}" for c, n in PAIRS])
def test_each_case_is_decided_as_written(case: dict, name: str, project: tuple[Path, Path]) -> None:
    cwd, home = project
    prepare(cwd, case)
    rules, mode = policy(name, str(cwd))
    d = decide(rules, "Bash", {"command": command_of(case)}, agent_type=None, cwd=str(cwd), home=str(home), mode=mode)
    assert d.decision == case[name], (case["id"], name, d.reason)
    assert d.reason.startswith("claudeguard: ") and "\n" not in d.reason


def test_the_file_covers_every_class_with_several_members_and_sixty_everyday_commands() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    classes = Counter(c["class"] for c in CASES)
    for cls in SMUGGLING:
        assert classes[cls] >= 4, cls
    everyday = [c for c in CASES if c["class"] == "everyday"]
    assert len(everyday) >= 60
    assert all(c["everyday"] == "allow" for c in everyday)
    joined = "\n".join(c["command"] for c in everyday)
    for form in ("git status", "python3 -m pytest", "npm test", "make", "cd sub && make", " | ", " && ", "$(",
                 "for f in", " > build/", "git commit -m \"$(cat <<'EOF'", "git -C sub status", "sed -n",
                 "mkdir", "echo", "grep", "find", "ls", "cat"):
        assert form in joined, form
    assert classes["corpus"] == 38  # tests/test_policy_vs_bash.py KNOWN, every line
    for case in CASES:
        for name in POLICIES:
            assert case.get(name, "allow") in ("allow", "deny", "ask", "none"), case["id"]
        if "trace" in case and not case.get("encoded"):
            where = case["command"] + case.get("tail", "") + "".join(case.get("setup", {}).values())
            assert case["trace"].split("/")[-1].rstrip(".") in where, case["id"]


def test_every_smuggled_spelling_is_refused_or_asked() -> None:
    """Issue 23's acceptance: under the deny-list policy each spelling of the denied touch is
    refused or asked; under the allow-list policy each spelling of a touch or a write is asked:
    by the guard, or left to Claude Code (none), whose own rules allow none of them either."""
    touches = [c for c in CASES if c.get("spelling") == "touch"]
    writes = [c for c in CASES if c.get("spelling") == "write"]
    assert len(touches) >= 70 and len(writes) >= 12
    assert {c["denylist"] for c in touches} <= {"deny", "ask"}
    assert {c["allowlist"] for c in touches + writes if "allowlist" in c} <= {"ask", "none"}
    assert all("allowlist" in c for c in touches)
    # "none" only where Claude Code's own copy of the allow list cannot let it run either: no rule
    # matches, as written, the command that holds a part no rule allows (those are the guard's to ask)
    specs = [r[5:-1] for r in POLICIES["allowlist"]["allow"] if r.startswith("Bash(")]
    for case in touches + writes:
        if case.get("allowlist") == "none":
            for inv in split_command(command_of(case)).invocations:
                if not any(part_allowed_by(spec, inv) for spec in specs):
                    assert not any(pattern_matches(spec, inv.surface) for spec in specs), (case["id"], inv)


def decide_with(rules: dict, command: str, cwd: str = "/p", **kw: object) -> object:
    spec = {"permissions": {k: [{"rule": r, "source": "t", "root": cwd} for r in v] for k, v in rules.items()}}
    return decide(policy_from_spec(spec), "Bash", {"command": command}, agent_type=None, cwd=cwd, home="/home/u",
                  **kw)  # type: ignore[arg-type]


def test_the_reason_says_why_the_guard_cannot_read_it() -> None:
    d = decide_with({"allow": ["Bash"], "deny": ["Bash(touch *)"]}, "python3 -c 'print(1)'")
    assert d.decision == "ask"
    assert "runs code the guard cannot read: python3 -c" in d.reason
    d = decide_with({"allow": ["Bash"], "deny": ["Bash(touch *)"]}, '"$(echo ls)" -la')
    assert d.decision == "ask" and "runs a command whose name is computed at run time" in d.reason
    d = decide_with({"allow": ["Bash"], "deny": ["Bash(touch *)"]}, "echo 'unbalanced")
    assert d.decision == "ask" and "cannot be parsed" in d.reason


def test_a_blanket_allow_with_nothing_denied_still_allows_what_cannot_be_read() -> None:
    assert decide_with({"allow": ["Bash"]}, "python3 -c 'print(1)'").decision == "allow"
    assert decide_with({"allow": ["Bash"]}, "echo 'unbalanced").decision == "allow"
    assert decide_with({"allow": ["Bash"], "ask": ["Bash(git push *)"]}, "eval ls").decision == "ask"


def test_an_allow_rule_for_the_interpreter_itself_allows_its_inline_code() -> None:
    rules = {"allow": ["Bash", "Bash(python3 *)", "Bash(awk *)"], "deny": ["Bash(touch *)"]}
    assert decide_with(rules, "python3 -c 'print(1)'").decision == "allow"
    assert decide_with(rules, "awk 'BEGIN{system(\"date\")}'").decision == "allow"
    assert decide_with(rules, "perl -e 'print 1'").decision == "ask"
    # an interpreter's allow rule is not a wrapper's: find, xargs and git stay asked
    rules = {"allow": ["Bash(find *)", "Bash(git *)"]}
    assert decide_with(rules, "find . -exec sh -c 'rm {}' \\;").decision == "ask"
    assert decide_with(rules, "git -c alias.x='!date' x").decision == "ask"


def test_protected_paths_are_denied_read_or_written_however_reached(tmp_path: Path) -> None:
    guard = tmp_path / "rt"
    guard.mkdir()
    (tmp_path / "p").mkdir()
    os.symlink(guard, tmp_path / "p" / "link")
    rules = {"allow": ["Bash"]}
    cwd = str(tmp_path / "p")
    for command in [f"echo x > {guard}/grants.json", f"cat {guard}/grants.json", f"cp x {guard}/",
                    f"rm -rf {tmp_path}", "echo x > link/grants.json", f"cd {guard} && echo x > f",
                    f"bash -c 'touch {guard}/x'", f"sort -o {guard}/x y", f"tee -a {guard}/log < /dev/null"]:
        d = decide_with(rules, command, cwd=cwd, protected=[str(guard)])
        assert d.decision == "deny", command
        assert "a file the guard protects" in d.reason
    assert decide_with(rules, "echo x > f", cwd=cwd, protected=[str(guard)]).decision == "allow"
    assert decide_with(rules, "echo x > \"$f\"", cwd=cwd, protected=[str(guard)]).decision == "ask"


def test_a_split_names_the_words_and_files_of_each_invocation() -> None:
    """What issue 24 builds on: literal words after quote removal, and the files read and written."""
    split = split_command("cd sub && grep -n 'a b' in.txt < list > out.txt 2>&1; cp a b | tee -a log")
    assert [i.words for i in split.invocations] == [["cd", "sub"], ["grep", "-n", "a b", "in.txt"], ["cp", "a", "b"],
                                                    ["tee", "-a", "log"]]
    assert [(t.path, t.base, t.kind) for t in split.writes] == [
        ("out.txt", "sub", "redirect"), ("b", "sub", "operand"), ("log", "sub", "option")]
    assert [(t.path, t.kind) for t in split.reads] == [("list", "redirect"), ("in.txt", "operand"), ("a", "operand")]
    assert split.writes[0].absolute("/p", "/h") == "/p/sub/out.txt"
    assert split_command("echo x > \"$f\"").writes[0].absolute("/p", "/h") is None
    assert split_command("cd \"$d\" && echo x > f").writes[0].absolute("/p", "/h") is None


def test_everyday_writes_need_the_mode_or_an_edit_rule() -> None:
    assert decide_with({"allow": ["Bash(echo *)"]}, "echo x > out.txt", mode="acceptEdits").decision == "allow"
    assert decide_with({"allow": ["Bash(echo *)"]}, "echo x > out.txt").decision == "ask"
    assert decide_with({"allow": ["Bash(echo *)"]}, "echo x > ../out.txt", mode="acceptEdits").decision == "ask"
    assert decide_with({"allow": ["Bash(echo *)", "Edit(./out.txt)"]}, "echo x > out.txt").decision == "allow"
    assert decide_with({"allow": ["Bash(echo x > out.txt)"]}, "echo x > out.txt").decision == "allow"
    assert decide_with({"allow": ["Bash(echo *)"], "deny": ["Edit(./out.txt)"]}, "echo x > out.txt",
                       mode="acceptEdits").decision == "deny"
    assert decide_with({"allow": ["Bash(echo *)"], "ask": ["Write(./out.txt)"]}, "echo x > out.txt",
                       mode="acceptEdits").decision == "ask"
