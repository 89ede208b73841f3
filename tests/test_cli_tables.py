"""The CLI's own argv tables (claudeguard/cli_tables/): each checked-in table is what the installed
CLI of that version says today, derived again from it (the oldest pinned CLI, and 2.1.332 when
it is installed); the loader finds exactly the checked-in versions; the help parser and the flag reader
read commander's texts as the CLI does."""

from __future__ import annotations

import json
import os

import pytest

from claudeguard.cli_tables import derive, load
from claudeguard.testing.cli_install import PINNED_VERSIONS, cli_path
from tests.conftest import _real_cli

NEWEST = "2.1.332"  # the newest published CLI when its table was made: checked when installed


def test_every_checked_in_table_is_canonical_and_named_by_its_version():
    found = load.versions()
    assert set(PINNED_VERSIONS) | {NEWEST} <= set(found)
    for version in found:
        path = load.table_path(version)
        assert path is not None
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        table = json.loads(text)
        assert table["cli_version"] == version and table["format"] == derive.FORMAT
        assert derive.dumps(table) == text  # stable key order: a regenerated table diffs line by line
        assert load.load(version) == table


@pytest.mark.parametrize("version", ["9.9.9", "2.1", "2.1.330.1", "../2.1.330", "2.1.33O", "", "latest", "２.1.330"])
def test_a_version_without_a_table_loads_as_none(version):
    assert load.load(version) is None


def test_differences_name_each_place_that_differs():
    checked = {"root": {"options": {"--a": {"takes": "one"}, "--b": {"takes": "none"}}, "commands": {}}}
    derived = {"root": {"options": {"--a": {"takes": "many"}, "--c": {"takes": "none"}}, "commands": {}}}
    assert derive.differences(checked, derived) == [
        "root.options.--a.takes: 'one' checked in, 'many' derived",
        "root.options.--b: checked in, not derived",
        "root.options.--c: derived, not checked in",
    ]
    assert derive.differences(checked, json.loads(json.dumps(checked))) == []


@pytest.mark.parametrize(("spec", "names", "takes", "value"), [
    ("-p, --print", ["-p", "--print"], "none", None),
    ("--allowedTools, --allowed-tools <tools...>", ["--allowedTools", "--allowed-tools"], "many", "<tools...>"),
    ("-d, --debug [filter]", ["-d", "--debug"], "optional", "[filter]"),
    ("--workload <tag>", ["--workload"], "one", "<tag>"),
    ("--resume-session-at <message id>", ["--resume-session-at"], "one", "<message id>"),
    ("--json [path]", ["--json"], "optional", "[path]"),
    ("-d2e, --debug-to-stderr", ["-d2e", "--debug-to-stderr"], "none", None),
    ("--tag <tag...>", ["--tag"], "many", "<tag...>"),
])
def test_option_specs_read_as_commander_reads_them(spec, names, takes, value):
    assert derive.parse_flags(spec) == {"names": names, "takes": takes, "value": value}


HELP_197 = """\
Usage: claude mcp [options] [command]

Configure and manage MCP servers

Options:
  -h, --help                            Display help for command

Commands:
  add [options] <name> <commandOrUrl> [args...]  Add an MCP server to Claude Code.
  \n  Examples:
    # Add HTTP server:
    claude mcp add --transport http sentry https://mcp.sentry.dev/mcp
  add-json [options] <name> <json>      Add an MCP server (stdio or SSE) with a
                                        JSON string
  get <name>                            Get details about an MCP server.
  help [command]                        display help for command
  remove|rm [options] <name>            Remove an MCP server
"""


def test_a_help_whose_descriptions_run_over_lines_yields_only_its_terms():
    parsed = derive.parse_help(HELP_197)
    assert parsed["usage"] == "claude mcp [options] [command]"
    assert parsed["commander"] is True
    assert parsed["options"] == ["-h, --help"]
    assert [derive.parse_command_term(t) for t in parsed["commands"]] == [
        ("add", []), ("add-json", []), ("get", []), ("help", []), ("remove", ["rm"])]


def test_a_help_of_its_own_shape_yields_its_usage_and_option_lines():
    text = ("Usage: claude rm <id> [--discard-unpushed <commit>@<worktree-id>]\n\n  If it's safe, remove a session.\n"
            "  --discard-unpushed <commit>@<worktree-id>  also discard the worktree's unpushed commits\n"
            "  --force-remove-worktree <worktree-id>      delete the worktree directory\n")
    parsed = derive.parse_help(text)
    assert parsed["commander"] is False
    assert parsed["arguments"] == ["<id>", "[--discard-unpushed <commit>@<worktree-id>]"]
    assert parsed["options"] == ["--discard-unpushed <commit>@<worktree-id>", "--force-remove-worktree <worktree-id>"]


def _installed(version: str) -> str:
    if version in PINNED_VERSIONS:
        return str(_real_cli(version))  # installed on demand; under CI=true a missing one fails
    path = cli_path(version)
    if path is None:
        pytest.skip(f"Claude Code {version} is not installed (python -m claudeguard.testing.cli_install {version})")
    return str(path)


# Derived again from the oldest pinned CLI and from the newest with a table: the two ends of what
# the derivation must read (commander's help of 2.1.197, the sub-commands of 2.1.33x). 2.1.330's
# table comes from the same immutable package and the same derivation as 2.1.332's, and one
# derivation costs ~28 s of CPU (168 CLI starts), a fifteenth of the suite's CPU for three.
DERIVED = [PINNED_VERSIONS[0], NEWEST]


@pytest.mark.real_cli
@pytest.mark.parametrize("version", DERIVED)
def test_the_checked_in_table_is_what_the_installed_cli_says(version):
    claude = _installed(version)
    derived = derive.derive(claude, jobs=max(4, 2 * (os.cpu_count() or 1)))
    assert derived["cli_version"] == version
    checked = load.load(version)
    assert checked is not None, f"no table for {version}: python -m claudeguard.cli_tables.derive {claude} --write"
    differences = derive.differences(checked, json.loads(derive.dumps(derived)))
    assert not differences, (f"the CLI {version} reads its argv otherwise than its checked-in table says "
                             f"(regenerate with `python -m claudeguard.cli_tables.derive PATH --write` once "
                             f"understood):\n" + "\n".join(differences[:40]))


def test_the_scanner_reads_what_json_reads_and_refuses_what_json_refuses():
    from claudeguard.json_read import parse as _parse

    for text in ['{"a": [1, 2.5, "x\\u00e9", true, null, {"b": {}}]}', '  {"a": 1}\n', "[]"]:
        assert _parse(text) == json.loads(text)
    for bad in ['{"a": 1} x', '{"a": NaN}', "{'a': 1}", '{"a": 1', ""]:
        with pytest.raises(ValueError):
            _parse(bad)
