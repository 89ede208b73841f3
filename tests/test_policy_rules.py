"""Rule strings and what each kind of rule matches: Bash, paths, WebFetch, MCP, Agent."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claudeguard.policy.pathrules import escape_path, normalize_path, path_rule_matches
from claudeguard.cli_tables.load import tool_names
from claudeguard.policy.rules import Rule, parse_rule, rule_matches, tool_problem

CWD = "/work/repo"
HOME = "/home/u"
ROOT = "/work/repo"  # the directory of the config file a rule came from


def matches(rule: str, tool: str, tool_input: dict, *, broad: bool = False, cwd: str = CWD, root: str = ROOT) -> bool:
    return rule_matches(parse_rule(rule), tool, tool_input, cwd=cwd, home=HOME, root=root, broad=broad)


# ---------------------------------------------------------------------------------------------
# Parsing


@pytest.mark.parametrize("text,tool,spec", [
    ("Bash", "Bash", None),
    ("Bash(*)", "Bash", None),
    ("Bash(git status)", "Bash", "git status"),
    ("Bash(npm run test:*)", "Bash", "npm run test:*"),
    ("Bash(echo (x))", "Bash", "echo (x)"),
    ("  Read(./.env)  ", "Read", "./.env"),
    ("Edit(//etc/**)", "Edit", "//etc/**"),
    ("Task", "Agent", None),
    ("Task(Explore)", "Agent", "Explore"),
    ("Agent(Plan)", "Agent", "Plan"),
    ("WebFetch(domain:example.com)", "WebFetch", "domain:example.com"),
    ("WebFetch(domain:*.example.com)", "WebFetch", "domain:*.example.com"),
    ("mcp__github", "mcp__github", None),
    ("mcp__github__*", "mcp__github__*", None),
    ("mcp__github__create_issue", "mcp__github__create_issue", None),
    ("mcp__my-server__do_it", "mcp__my-server__do_it", None),
    ("bash(ls)", "bash", "ls"),  # as Claude Code reads it: no tool is named bash, so it matches no call
    ("WebSearch", "WebSearch", None),
    ("SomeFutureTool", "SomeFutureTool", None),
])
def test_parse_rule(text: str, tool: str, spec: str | None) -> None:
    rule = parse_rule(text)
    assert rule == Rule(text, tool, spec)


@pytest.mark.parametrize("text", [
    "", "   ", "Bash(", "Bash(ls", "Bash()", "Bash(  )", "(ls)", "Ba sh", "Bash)ls(", "Bash(:*)",
    "mcp__", "mcp__*", "mcp__github(x)", "Bash*", "WebFetch(domain:)", "WebFetch(domain:a b)",
    "Read(a\nb)", "123", "Read(x) trailing",
])
def test_parse_rule_rejects(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_rule(text)
    assert "\n" not in str(info.value) and str(info.value)


def test_parse_rule_rejects_non_strings() -> None:
    with pytest.raises(ValueError):
        parse_rule(None)  # type: ignore[arg-type]


def test_rule_is_frozen_and_hashable() -> None:
    rule = parse_rule("Bash(ls)")
    assert {rule, parse_rule("Bash(ls)")} == {rule}
    with pytest.raises(AttributeError):  # a namedtuple's fields are read-only
        rule.tool = "Read"  # type: ignore[misc]  # the assignment is the point


def test_a_tool_name_in_the_wrong_case_matches_no_call_as_in_claude_code() -> None:
    # The real CLI lets nothing run under allow = ["bash(touch *)"] or ["bash"] in dontAsk mode
    # (2.1.197 and 2.1.330): tool names are exact.
    assert not matches("bash(ls *)", "Bash", {"command": "ls x"}, broad=True)
    assert not matches("bash", "Bash", {"command": "ls"}, broad=True)
    assert not matches("read", "Read", {"file_path": "/x"}, broad=True)
    assert matches("Task(Explore)", "Agent", {"subagent_type": "Explore"})  # the one legacy name kept


@pytest.mark.parametrize("name, expected", [
    ("Bsh", "'Bsh' is not a Claude Code tool: did you mean Bash?"),
    ("Webfetch", "'Webfetch' is not a Claude Code tool: did you mean WebFetch? (tool names are matched exactly, "
                 "as Claude Code matches them: Webfetch matches no call)"),
    ("Reed", "'Reed' is not a Claude Code tool: did you mean Read?"),
    ("bash", "'bash' is not a Claude Code tool: did you mean Bash? (tool names are matched exactly, as Claude Code "
             "matches them: bash matches no call)"),
    ("Zzzzqqqq", "'Zzzzqqqq' is not a Claude Code tool (the nearest is "),
])
def test_a_name_no_claude_code_has_is_a_problem_naming_the_nearest(name: str, expected: str) -> None:
    problem = tool_problem(name)
    assert problem is not None and problem.startswith(expected)


@pytest.mark.parametrize("name", ["Bash", "Read", "Agent", "Task", "KillShell", "LS", "MultiEdit",
                                  "CronCreate", "Monitor", "TaskOutput", "ToolSearch", "propose_skills",
                                  "mcp__github", "mcp__github__create_issue", "mcp__github__*"])
def test_every_tool_the_clis_name_is_no_problem(name: str) -> None:
    assert tool_problem(name) is None


def test_the_tool_names_come_from_every_checked_in_table() -> None:
    names = tool_names()
    # 2.1.330's own list, the legacy names of 2.1.197's map and their targets
    assert {"Agent", "Bash", "Glob", "Grep", "Monitor", "ToolSearch", "WebFetch", "Write"} <= names
    assert {"Task", "KillShell", "BashOutput", "TaskOutput", "TaskStop"} <= names
    assert "bash" not in names and "Bsh" not in names


# ---------------------------------------------------------------------------------------------
# Tool families and bare rules


def test_bare_rules_match_every_call_of_their_tool() -> None:
    assert matches("Bash", "Bash", {"command": "anything; at all"})
    assert matches("Bash(*)", "Bash", {"command": "echo 'unbalanced"})
    assert not matches("Bash", "Read", {"file_path": "/x"})
    assert matches("WebSearch", "WebSearch", {"query": "x"})


def test_edit_covers_every_file_editing_tool() -> None:
    for tool, inp in [("Edit", {"file_path": "/work/repo/a.py"}), ("MultiEdit", {"file_path": "/work/repo/a.py"}),
                      ("Write", {"file_path": "/work/repo/a.py", "content": ""}),
                      ("NotebookEdit", {"notebook_path": "/work/repo/a.py"})]:
        assert matches("Edit(./a.py)", tool, inp), tool
        assert matches("Edit", tool, inp), tool
    assert not matches("Edit(./a.py)", "Read", {"file_path": "/work/repo/a.py"})
    assert matches("Write(./a.py)", "Write", {"file_path": "/work/repo/a.py"})
    assert not matches("Write(./a.py)", "Edit", {"file_path": "/work/repo/a.py"})


def test_read_covers_read_glob_and_grep_by_their_path() -> None:
    assert matches("Read(./src/**)", "Read", {"file_path": "/work/repo/src/a.py"})
    assert matches("Read(./src/**)", "Grep", {"pattern": "x", "path": "/work/repo/src"})
    assert matches("Read(./src/**)", "Glob", {"pattern": "**/*.py", "path": "/work/repo/src"})
    assert matches("Read(./src/**)", "Glob", {"pattern": "src/**/*.py"})  # the pattern's fixed part counts
    assert not matches("Read(./src/**)", "Grep", {"pattern": "x"})  # no path: the whole cwd
    assert matches("Read(//etc/**)", "Glob", {"pattern": "/etc/*.conf"})
    assert matches("Read(//etc/**)", "Glob", {"pattern": "../../../etc/*", "path": "/work/repo"})
    assert not matches("Read(./src/**)", "Edit", {"file_path": "/work/repo/src/a.py"})


def test_task_is_an_alias_of_agent() -> None:
    assert matches("Task(Explore)", "Agent", {"subagent_type": "Explore"})
    assert matches("Agent(Explore)", "Task", {"subagent_type": "Explore"})
    assert not matches("Agent(Explore)", "Agent", {"subagent_type": "Plan"})
    assert matches("Agent", "Task", {"subagent_type": "anything"})
    assert matches("Agent(general-purpose)", "Agent", {"prompt": "no type given"})
    assert matches("Agent(code-*)", "Agent", {"subagent_type": "code-reviewer"})


def test_mcp_rules() -> None:
    assert matches("mcp__github", "mcp__github__create_issue", {})
    assert matches("mcp__github__*", "mcp__github__create_issue", {})
    assert matches("mcp__github__create_issue", "mcp__github__create_issue", {})
    assert not matches("mcp__github__create_issue", "mcp__github__delete_repo", {})
    assert not matches("mcp__github", "mcp__githubber__x", {})
    assert not matches("mcp__github__*", "mcp__githubber__x", {})
    assert not matches("mcp__github", "Bash", {"command": "ls"})


def test_unknown_specifier_matches_nothing() -> None:
    assert not matches("TodoWrite(x)", "TodoWrite", {"todos": []})
    assert matches("TodoWrite", "TodoWrite", {"todos": []})


# ---------------------------------------------------------------------------------------------
# Bash rules: strict for allow, broad for deny and ask


def test_bash_rule_strict_and_broad() -> None:
    cmd = {"command": "git status && rm -rf ~"}
    assert not matches("Bash(git status:*)", "Bash", cmd)
    assert matches("Bash(rm -rf *)", "Bash", cmd, broad=True)
    assert not matches("Bash(rm -rf *)", "Bash", cmd)  # strict: not every part is "rm -rf ..."
    assert matches("Bash(git status:*)", "Bash", {"command": "git status -s; git status"})
    assert not matches("Bash(ls *)", "Bash", {"command": "ls 'x"})
    assert matches("Bash(rm *)", "Bash", {"command": "ls 'x; rm y"}, broad=True)  # crude pieces of unparseable text
    assert not matches("Bash(ls *)", "Bash", {"command": ""})
    assert not matches("Bash(ls *)", "Bash", {"command": None})


# ---------------------------------------------------------------------------------------------
# Path rules

PATH_CASES = [
    # (specifier, path, expected)
    ("//etc/passwd", "/etc/passwd", True),
    ("//etc/passwd", "/etc/passwd.bak", False),
    ("//etc/**", "/etc/ssh/sshd_config", True),
    ("//etc/*", "/etc/ssh/sshd_config", True),  # /etc/ssh matches: a directory covers its contents
    ("//etc/*.conf", "/etc/a.conf", True),
    ("//etc/*.conf", "/etc/sub/a.conf", False),
    ("//etc/**/*.conf", "/etc/sub/deep/a.conf", True),
    ("//etc/**/*.conf", "/etc/a.conf", True),
    ("~/.ssh/**", "/home/u/.ssh/id_rsa", True),
    ("~/.ssh/**", "/home/v/.ssh/id_rsa", False),
    ("~/.ssh", "/home/u/.ssh/id_rsa", True),
    ("~", "/home/u/anything", True),
    ("~/.ssh/**", "~/.ssh/id_rsa", True),  # ~ in the call's path is expanded too
    ("/config/*.json", "/work/repo/config/a.json", True),  # root-relative
    ("/config/*.json", "/config/a.json", False),
    ("./.env", "/work/repo/.env", True),
    ("./.env", "/work/repo/sub/.env", False),
    (".env", "/work/repo/sub/deep/.env", True),  # no slash: any depth below the cwd
    (".env", "/work/other/.env", False),
    ("*.env", "/work/repo/a/b/prod.env", True),
    ("*.env", "/work/repo/a/b/prod.envx", False),
    ("secrets", "/work/repo/x/secrets/key", True),  # a matching directory covers its contents
    ("src/*.py", "/work/repo/src/a.py", True),
    ("src/*.py", "/work/repo/lib/src/a.py", False),  # a slash in the middle anchors it
    ("src/", "/work/repo/src/a/b.py", True),
    ("src/**", "/work/repo/src", True),
    ("src/**", "/work/repo/srcx/a", False),
    ("**", "/work/repo/anything/at/all", True),
    ("**", "/elsewhere", False),
    ("*", "/anywhere/at/all", True),
    ("**/test_*.py", "/work/repo/a/test_x.py", True),
    ("**/test_*.py", "/work/repo/test_x.py", True),
    ("a?c.txt", "/work/repo/abc.txt", True),
    ("a?c.txt", "/work/repo/a/c.txt", False),
    ("[ab].txt", "/work/repo/b.txt", True),
    ("[!ab].txt", "/work/repo/b.txt", False),
    ("[!ab].txt", "/work/repo/c.txt", True),
    ("\\*.txt", "/work/repo/*.txt", True),
    ("\\*.txt", "/work/repo/a.txt", False),
    ("../shared/**", "/work/shared/x", True),
    ("./.env", "/work/repo/sub/../.env", True),  # .. resolved lexically
    ("./.env", "sub/../.env", True),  # relative paths are from the cwd
    ("./sub/**", "/work/repo/sub/../../repo2/x", False),
    ("//etc/passwd", "//etc/passwd", True),
    ("//etc/passwd", "/etc//passwd", True),
    ("//etc/passwd", "/etc/./passwd", True),
]


@pytest.mark.parametrize("spec,path,expected", PATH_CASES)
def test_path_rules(spec: str, path: str, expected: bool) -> None:
    assert path_rule_matches(spec, path, cwd=CWD, home=HOME, root=ROOT) is expected


def test_root_relative_rules_use_the_rule_root_not_the_cwd() -> None:
    assert matches("Read(/docs/**)", "Read", {"file_path": "/proj/docs/a.md"}, cwd="/proj/sub", root="/proj")
    assert not matches("Read(/docs/**)", "Read", {"file_path": "/proj/sub/docs/a.md"}, cwd="/proj/sub", root="/proj")
    assert matches("Read(./docs/**)", "Read", {"file_path": "/proj/sub/docs/a.md"}, cwd="/proj/sub", root="/proj")


def test_normalize_path() -> None:
    assert normalize_path("a/../b", cwd="/x/y", home=HOME) == "/x/y/b"
    assert normalize_path("../../../../etc", cwd="/x/y", home=HOME) == "/etc"
    assert normalize_path("~/a", cwd="/x", home=HOME) == "/home/u/a"
    assert normalize_path("//etc", cwd="/x", home=HOME) == "/etc"
    assert normalize_path("/a/./b/", cwd="/x", home=HOME) == "/a/b"


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.text(alphabet="ab*?[]\\. -", min_size=1, max_size=6), min_size=1, max_size=4))
def test_an_escaped_exact_path_matches_itself_only(segments: list[str]) -> None:
    path = "/" + "/".join(segments)
    full = normalize_path(path, cwd="/", home=HOME)
    if full == "/":
        return  # "//" is the whole file system, not one file
    spec = "/" + escape_path(full)
    assert path_rule_matches(spec, full, cwd=CWD, home=HOME, root=ROOT)
    assert not path_rule_matches(spec, full + "x", cwd=CWD, home=HOME, root=ROOT)


# ---------------------------------------------------------------------------------------------
# WebFetch


@pytest.mark.parametrize("rule,url,strict,broad", [
    ("domain:example.com", "https://example.com/a", True, True),
    ("domain:example.com", "https://EXAMPLE.com./a", True, True),
    ("domain:example.com", "http://example.com:8080/", True, True),
    ("domain:example.com", "https://docs.example.com/", False, False),
    ("domain:example.com", "https://example.com.evil.org/", False, False),
    ("domain:example.com", "https://evil.org/?u=https://example.com", False, False),
    ("domain:example.com", "https://example.com@evil.org/", False, False),
    ("domain:evil.org", "https://example.com@evil.org/", True, True),
    # Python and a browser disagree on where the host ends: never allowed, always denied.
    ("domain:example.com", "https://evil.org\\@example.com/", False, True),
    ("domain:evil.org", "https://evil.org\\@example.com/", False, True),
    ("domain:example.com", "https://ex%61mple.com/", False, True),
    ("domain:example.com", "example.com/path", True, True),  # no scheme: read as https
    ("domain:example.com", "ftp://example.com/", False, True),
    ("domain:example.com", "https://exa mple.com/", False, False),
    ("domain:*.example.com", "https://docs.example.com/", True, True),
    ("domain:*.example.com", "https://a.b.example.com/", True, True),
    ("domain:*.example.com", "https://example.com/", False, False),
    ("domain:*.example.com", "https://badexample.com/", False, False),
    ("domain:*", "https://anything.org/", True, True),
])
def test_webfetch_domains(rule: str, url: str, strict: bool, broad: bool) -> None:
    call = {"url": url, "prompt": "p"}
    assert matches(f"WebFetch({rule})", "WebFetch", call) is strict
    assert matches(f"WebFetch({rule})", "WebFetch", call, broad=True) is broad


def test_webfetch_without_url_matches_nothing_but_the_bare_rule() -> None:
    assert not matches("WebFetch(domain:example.com)", "WebFetch", {"prompt": "p"})
    assert matches("WebFetch", "WebFetch", {"prompt": "p"})
