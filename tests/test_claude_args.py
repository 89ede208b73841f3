"""The launcher reads argv as the installed CLI does, with that version's checked-in table
(claudeguard/cli_tables/): which sub-command runs, which word is the prompt, which word is an
option's value, and what the run is (pass through, a session, refused). Each reading below that
differs between versions or from the old merged word list was checked on the real CLI (the
cases marked "probed": the CLI ran the sub-command, printed "No MCP servers configured", or
waited on the model); tests/test_argv_real.py starts the real CLIs through the guard."""

from __future__ import annotations

import json

import pytest

from claudeguard.plan import claude_args as ca
from claudeguard.plan.claude_args import parse_claude_args, table_for, table_note
from claudeguard.plan.may_run import refusal

OLD, NEW, NEWEST = "2.1.197", "2.1.330", "2.1.332"


def read(version: str, *argv: str) -> ca.ClaudeArgs:
    return parse_claude_args(list(argv), cli_version=version)


# (versions, argv, kind, command, prompt)
CASES = [
    # words the old merged list took for sub-commands: a prompt here (issue 25, class 1)
    ((OLD, NEW, NEWEST), ["config"], ca.SESSION, (), "config"),
    ((OLD, NEW, NEWEST), ["migrate-installer"], ca.SESSION, (), "migrate-installer"),
    ((OLD,), ["import"], ca.SESSION, (), "import"),
    ((NEW, NEWEST), ["import"], ca.WRITES, ("import",), None),
    ((OLD,), ["purge"], ca.SESSION, (), "purge"),
    ((OLD,), ["sandbox", "status"], ca.SESSION, (), "sandbox status"),
    ((NEW, NEWEST), ["sandbox", "status"], ca.PASS, ("sandbox", "status"), None),
    ((OLD,), ["edit-permission-rules"], ca.SESSION, (), "edit-permission-rules"),
    ((NEW, NEWEST), ["edit-permission-rules", "--json"], ca.WRITES, ("edit-permission-rules",), None),
    ((OLD, NEW, NEWEST), ["gateway"], ca.OTHER, ("gateway",), None),
    ((OLD, NEW, NEWEST), ["project"], ca.PASS, ("project",), None),
    ((OLD,), ["project", "purge"], ca.WRITES, ("project", "purge"), None),
    # main()'s early words: at argv[0] on every version; behind options a prompt on 2.1.197 and,
    # without an 8-hex id, on 2.1.330+ (probed: `--verbose --model m rm deadbeef` waited on the
    # model on 2.1.197, said "No session matching" on 2.1.330)
    ((OLD, NEW, NEWEST), ["attach", "abc"], ca.SESSIONS, ("attach",), None),
    ((OLD, NEW, NEWEST), ["--verbose", "attach", "abc"], ca.SESSION, (), "attach abc"),
    ((OLD,), ["--verbose", "--model", "m", "rm", "deadbeef"], ca.SESSION, (), "rm deadbeef"),
    ((NEW, NEWEST), ["--verbose", "--model", "m", "rm", "deadbeef"], ca.MANAGE, ("rm",), None),
    ((NEW, NEWEST), ["--model", "m", "respawn", "--all"], ca.SESSIONS, ("respawn",), None),
    ((NEW, NEWEST), ["-p", "logs", "deadbeef"], ca.SESSION, (), "logs deadbeef"),
    ((OLD, NEW, NEWEST), ["daemon", "status"], ca.PASS, ("daemon",), None),
    ((OLD, NEW, NEWEST), ["daemon", "run"], ca.MANAGE, ("daemon",), None),
    ((OLD, NEW, NEWEST), ["--verbose", "daemon", "status"], ca.SESSION, (), "daemon status"),
    ((OLD, NEW, NEWEST), ["--daemon-worker", "x"], ca.UNGUARDED, ("--daemon-worker",), None),
    ((OLD, NEW, NEWEST), ["remote-control"], ca.UNGUARDED, ("remote-control",), None),
    # remote control runs even behind options and with --help (probed on 2.1.330)
    ((OLD, NEW, NEWEST), ["--verbose", "remote-control", "--help"], ca.UNGUARDED, ("remote-control",), None),
    ((OLD, NEW, NEWEST), ["remote-control", "--help"], ca.UNGUARDED, ("remote-control",), None),
    ((NEW, NEWEST), ["plugin", "test", "x"], ca.REPO_CODE, ("plugin", "test"), None),
    # -p: 2.1.197 takes the word -p anywhere (a value, after --); 2.1.330 as its eager reader
    # does (probed: `--append-system-prompt -p mcp list` and `mcp list -- -p` ran mcp list on
    # 2.1.330 and waited on the model on 2.1.197); a bundle (-pc) is not the word -p (probed)
    ((OLD, NEW, NEWEST), ["-p", "mcp", "list"], ca.SESSION, (), "mcp list"),
    ((OLD, NEW, NEWEST), ["mcp", "list", "-p"], ca.SESSION, (), "mcp list"),
    ((OLD, NEW, NEWEST), ["-p", "--", "mcp", "list"], ca.SESSION, (), "mcp list"),
    ((OLD,), ["--append-system-prompt", "-p", "mcp", "list"], ca.SESSION, (), "mcp list"),
    ((NEW, NEWEST), ["--append-system-prompt", "-p", "mcp", "list"], ca.REPO_CODE, ("mcp", "list"), None),
    ((OLD,), ["mcp", "list", "--", "-p"], ca.SESSION, (), "mcp list -p"),
    ((NEW, NEWEST), ["mcp", "list", "--", "-p"], ca.REPO_CODE, ("mcp", "list"), None),
    ((OLD, NEW, NEWEST), ["-pc", "mcp", "list"], ca.REPO_CODE, ("mcp", "list"), None),
    ((OLD, NEW, NEWEST), ["-p", "mcp", "list", "cc://x"], ca.REPO_CODE, ("mcp", "list"), None),
    # sub-commands by what they do
    ((OLD, NEW, NEWEST), ["mcp", "serve"], ca.UNGUARDED, ("mcp", "serve"), None),
    ((OLD, NEW, NEWEST), ["--model", "m", "mcp", "serve"], ca.UNGUARDED, ("mcp", "serve"), None),
    ((OLD, NEW, NEWEST), ["mcp", "list"], ca.REPO_CODE, ("mcp", "list"), None),
    ((OLD, NEW, NEWEST), ["mcp", "get", "x"], ca.REPO_CODE, ("mcp", "get"), None),
    ((OLD,), ["doctor"], ca.REPO_CODE, ("doctor",), None),
    ((NEW, NEWEST), ["doctor"], ca.PASS, ("doctor",), None),
    ((NEW, NEWEST), ["workspace-trust", "--json"], ca.PASS, ("workspace-trust",), None),
    ((OLD, NEW, NEWEST), ["mcp", "add", "x", "y"], ca.WRITES, ("mcp", "add"), None),
    ((OLD, NEW, NEWEST), ["plugins", "list"], ca.PASS, ("plugin", "list"), None),
    ((OLD, NEW, NEWEST), ["plugin", "install", "p"], ca.WRITES, ("plugin", "install"), None),
    ((OLD, NEW, NEWEST), ["auth", "status"], ca.PASS, ("auth", "status"), None),
    ((OLD, NEW, NEWEST), ["auth", "login"], ca.OTHER, ("auth", "login"), None),
    ((OLD, NEW, NEWEST), ["auto-mode", "defaults"], ca.PASS, ("auto-mode", "defaults"), None),
    ((OLD, NEW, NEWEST), ["update"], ca.WRITES, ("update",), None),
    ((OLD, NEW, NEWEST), ["agents", "--json"], ca.SESSIONS, ("agents",), None),
    ((OLD, NEW, NEWEST), ["stop", "abc"], ca.MANAGE, ("stop",), None),
    # help and version as the table reads them: not another option's value
    ((OLD, NEW, NEWEST), ["--version"], ca.PASS, ("--version",), None),
    ((OLD, NEW, NEWEST), ["-v"], ca.PASS, ("-v",), None),
    ((OLD, NEW, NEWEST), ["--model", "m", "--version"], ca.PASS, (), None),
    ((OLD, NEW, NEWEST), ["--help"], ca.PASS, (), None),
    ((OLD, NEW, NEWEST), ["-ph"], ca.PASS, (), None),
    ((OLD, NEW, NEWEST), ["mcp", "serve", "--help"], ca.PASS, ("mcp", "serve"), None),
    ((OLD, NEW, NEWEST), ["mcp", "help", "serve"], ca.PASS, ("mcp",), None),
    ((OLD, NEW, NEWEST), ["mcp"], ca.PASS, ("mcp",), None),
    ((OLD, NEW, NEWEST), ["--settings", "--help", "-p", "x"], ca.SESSION, (), "x"),
    ((OLD, NEW, NEWEST), ["--append-system-prompt", "--version", "-p", "x"], ca.SESSION, (), "x"),
    # a value-taking option the old table lacked: its value is the next word whatever it is
    ((NEW, NEWEST), ["--workload", "--settings={}", "-p", "x"], ca.SESSION, (), "x"),
    ((OLD, NEW, NEWEST), ["--add-dir", "a", "b", "mcp", "serve"], ca.SESSION, (), None),
    # what the table does not know
    ((OLD, NEW, NEWEST), ["--no-such-option", "-p", "x"], ca.UNKNOWN, (), None),
    ((OLD, NEW, NEWEST), ["--verbose=1", "-p", "x"], ca.UNKNOWN, (), None),
    ((OLD,), ["--project-config-root", "d", "-p", "x"], ca.UNKNOWN, (), None),
    ((NEW, NEWEST), ["--project-config-root", "d", "-p", "x"], ca.SESSION, (), "x"),
    ((OLD, NEW, NEWEST), ["mcp", "frobnicate"], ca.UNKNOWN, ("mcp",), None),
    ((OLD, NEW, NEWEST), ["mcp", "--new", "serve"], ca.UNKNOWN, ("mcp",), None),
    # main() of 2.1.197 loads --settings (and --managed-settings, --setting-sources) with a walker
    # that steps over fewer options than commander, and launches in the background for the word
    # --bg anywhere (read from its binary; probed: `--workload --managed-settings=...` dropped the
    # guard's hooks): refused where the two readings differ
    ((OLD,), ["--workload", "--settings={}", "-p", "x"], ca.MISREAD, (), "x"),
    ((OLD,), ["--max-turns", "--managed-settings", "{}", "-p", "x"], ca.MISREAD, (), "{} x"),
    ((OLD,), ["--append-system-prompt", "--bg", "-p", "x"], ca.MISREAD, (), "x"),
    ((OLD,), ["-p", "x", "--", "--bg"], ca.MISREAD, (), "x --bg"),
    ((OLD, NEW, NEWEST), ["--model", "--settings={}", "-p", "x"], ca.SESSION, (), "x"),
    ((NEW, NEWEST), ["--append-system-prompt", "--bg", "-p", "x"], ca.SESSION, (), "x"),
]


@pytest.mark.parametrize("versions, argv, kind, command, prompt", CASES,
                         ids=[" ".join(c[1]) + " @" + ",".join(c[0]) for c in CASES])
def test_each_version_reads_argv_as_its_cli_does(versions, argv, kind, command, prompt):
    for version in versions:
        args = read(version, *argv)
        assert (args.kind, args.command, args.prompt) == (kind, command, prompt), version
        assert args.table_version == version


def test_options_values_bundles_and_the_last_settings():
    args = read(NEW, "--allowedTools", "Read", "Bash(git *)", "-p", "--permission-mode=plan", "--settings", "{}",
                "hi there", "--settings=/s.json", "-dhooks", "-pc")
    assert args.values("--allowedTools") == ["Read", "Bash(git *)"]
    assert args.print_mode and args.has("--continue")
    assert args.last("--permission-mode") == "plan"
    assert args.last("--debug") == "hooks"
    assert args.prompt == "hi there"
    assert [(i, v) for i, v in args.options["--settings"]] == [(5, ["{}"]), (8, ["/s.json"])]
    # aliases read as one option
    args = read(OLD, "--allowed-tools", "Read", "--background", "-p", "x")
    assert args.values("--allowedTools") == ["Read"] and args.has("--bg")


def test_the_workload_value_hides_the_callers_settings():
    args = read(NEW, "--workload", "--settings", "{}", "-p", "x")
    assert args.options["--workload"] == [(0, ["--settings"])]
    assert "--settings" not in args.options and args.prompt == "{} x"


def test_a_sub_commands_own_options_are_read_by_its_own_node():
    args = read(NEW, "--model", "m", "agents", "--settings", "{}", "--permission-mode", "acceptEdits", "--json")
    assert args.command == ("agents",) and args.subcommand_index == 2
    assert args.options == {"--model": [(0, ["m"])]}
    assert args.command_options["--settings"] == [(3, ["{}"])]
    own = ca.command_args(args)
    assert own.argv == ["--settings", "{}", "--permission-mode", "acceptEdits", "--json"]
    assert own.last("--settings") == "{}" and own.options["--settings"] == [(0, ["{}"])]


def test_an_unknown_option_before_a_command_that_runs_unguarded_is_named():
    args = read(NEW, "mcp", "--new", "serve")
    assert args.why_unguarded.startswith("mcp serve serves the CLI's tools")
    assert read(NEW, "--new-flag", "remote-control").why_unguarded.startswith("remote-control runs")
    assert read(NEW, "--new-flag", "x").why_unguarded == ""


@pytest.mark.parametrize(("version", "table"), [
    ("2.1.197", "2.1.197"), ("2.1.330", "2.1.330"), ("2.1.331", "2.1.330"), ("2.1.400", "2.1.332"),
    ("3.0.0", "2.1.332"), ("2.1.100", "2.1.197"), (None, "2.1.332"), ("2.1.330-beta.1", "2.1.330"),
    ("latest", "2.1.332")])
def test_a_version_without_a_table_is_read_with_the_newest_not_newer(version, table):
    assert table_for(version)[0] == table
    args = parse_claude_args(["-p", "x"], cli_version=version)
    assert args.table_version == table


def test_the_note_says_which_table_reads_the_cli():
    assert table_note("2.1.330", "2.1.330") is None
    assert table_note("2.1.400", "2.1.332") == (
        "Claude Code 2.1.400 has no argv table in this claudeguard: its argv is read with the table of 2.1.332 "
        "(options and commands it added are unknown: refused under lockdown, else guarded)")
    assert "version is unknown" in (table_note(None, "2.1.332") or "")


def test_the_installed_version_is_read_from_package_json(tmp_path):
    package = tmp_path / "node_modules" / "@anthropic-ai" / "claude-code"
    (package / "bin").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": "@anthropic-ai/claude-code", "version": "2.1.330"}))
    exe = package / "bin" / "claude.exe"
    exe.write_text("")
    link = tmp_path / "claude"
    link.symlink_to(exe)
    assert ca.installed_version(str(link)) == "2.1.330"
    (package / "package.json").write_text(json.dumps({"name": "other", "version": "2.1.330"}))
    assert ca.installed_version(str(link)) is None
    (package / "package.json").write_text("{not json")
    assert ca.installed_version(str(link)) is None
    assert ca.installed_version(None) is None


def test_without_any_table_every_run_is_a_session():
    out = ca.ClaudeArgs(["mcp", "serve"])
    ca._read_without_table(out)
    assert out.kind == ca.SESSION and out.prompt == "mcp serve"
    out = ca.ClaudeArgs(["--version"])
    ca._read_without_table(out)
    assert out.kind == ca.PASS


@pytest.mark.parametrize(("argv", "lockdown", "allow", "line"), [
    (["mcp", "serve"], None, False,
     "claude mcp serve is refused: it serves the CLI's tools to any MCP client with no hook and no rule; set "
     "[security] allow_unguarded = true to run it unguarded"),
    (["mcp", "serve"], None, True, None),
    (["mcp", "serve"], "cfg.toml:2", True,
     "claude mcp serve is refused: it serves the CLI's tools to any MCP client with no hook and no rule: lockdown "
     "(cfg.toml:2)"),
    (["mcp", "list"], None, False, None),
    (["mcp", "list"], "cfg.toml:2", False,
     "claude mcp list is refused: it starts the repository's .mcp.json servers and runs its hooks: lockdown "
     "(cfg.toml:2)"),
    (["edit-permission-rules"], "cfg.toml:2", False,
     "claude edit-permission-rules is refused: it writes Claude's own settings (allow rules, hooks, the sandbox) "
     "that later sessions honour: lockdown (cfg.toml:2)"),
    (["--no-such", "-p", "x"], "cfg.toml:2", False,
     "this command line is refused: --no-such is not an option or command Claude Code 2.1.330 has here (read with "
     "its argv table, claudeguard/cli_tables): lockdown (cfg.toml:2)"),
    (["--no-such", "-p", "x"], None, False, None),
    (["mcp", "--new", "serve"], None, False,
     "claude mcp is refused: --new is not an option or command Claude Code 2.1.330 has here, and `mcp serve serves "
     "the CLI's tools to any MCP client with no hook and no rule`; set [security] allow_unguarded = true to run it "
     "unguarded"),
    (["--workload", "--settings={}", "-p", "x"], None, True, None),  # 2.1.330 reads it as commander does
    (["auth", "status"], "cfg.toml:2", False, None),
    (["stop", "abc"], "cfg.toml:2", False, None),
    (["auth", "login"], "cfg.toml:2", False, None),
    (["-p", "x"], "cfg.toml:2", False, None),
])
def test_the_refusal_line(argv, lockdown, allow, line):
    assert refusal(read(NEW, *argv), lockdown, allow) == line


def test_a_misread_word_is_refused_with_or_without_lockdown():
    args = read(OLD, "--workload", "--managed-settings={}", "-p", "x")
    line = ("this command line is refused: --managed-settings={} stands where the CLI's parser reads an option's "
            "value or the prompt, but Claude Code 2.1.197's main() takes it as an option (its early settings loader)")
    assert refusal(args, None, True) == line and refusal(args, "cfg.toml:2", False) == line
