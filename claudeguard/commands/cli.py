"""What ``claudeguardctl --help`` and each ``claudeguardctl COMMAND --help`` say, and the argument
parser every command uses (its errors are one line, exit 2, like every other usage error).

Imported only by commands that parse options and on ``--help``: the hook's path through
``commands.ctl`` never loads it.
"""

from __future__ import annotations

import argparse
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import NoReturn

# One line per command: what it does. `claudeguardctl --help` lists them in this order.
SUMMARIES = {
    "pending": "List the approval requests waiting in the channel, from every guarded session of this user.",
    "approve": "Allow a waiting request: this call only, or this agent type, the whole session, or forever (written "
               "to the config).",
    "deny": "Deny a waiting request, with an optional message the model receives as the reason.",
    "console": "Watch requests arrive live and answer each with one key (y a s f n); a bell rings for each new one.",
    "ps": "List guarded sessions: state, CPU, tokens, last activity, pending requests (--all: unguarded Claude "
          "processes too).",
    "explain": "Show the decision the policy gives a call written like a rule, and the rule (file:line) "
               "that decides it.",
    "config": "Show the effective config with the source of every value, list the files searched, write a "
              "starter config, or trust (untrust) a project's files.",
    "audit": "Show the decision log; --suggest turns the calls a human answered or that timed out into rules.",
    "doctor": "Check the setup: config, runtime dir (owner, mode), the real CLI and that the injected "
              "flags are accepted; --verify proves the guard on it.",
    "demo": "Run the whole flow offline on an embedded scripted model: a subagent asks, the request is answered.",
    "desk": "Print the URL (with a one-time login token) of the approval desk, a page on 127.0.0.1 that "
            "shows what waits and answers with one click.",
    "service": "Show, start or stop the resident guard service that answers the hooks of this user's sessions.",
    "hook": "Internal: the Claude Code hook command (event JSON on stdin, decision JSON on stdout).",
    "mcp-serve": "Internal: the stdio MCP server behind --permission-prompt-tool (tool mcp__claudeguard__approve).",
}

# Commands that take no options of their own: their --help is this text, printed by ctl.
PLAIN_HELP = {
    "console": """\
usage: claudeguardctl console [--fleet]

{summary}

--fleet: the requests of every machine of the configured fleet (each shown with its machine);
an answer is applied by that machine for exactly the call shown; f (forever) is refused there.

keys (at a terminal): y approve once, a approve for this agent type in the session,
s approve for the whole session, f approve forever (written to the user config),
n deny (asks for an optional message), q quit.
Without a terminal (stdin is a pipe): prints each new request as one line and keeps going;
answer with `claudeguardctl approve|deny ID`.""",
    "hook": """\
usage: claudeguardctl hook   (run by Claude Code; reads one hook event as JSON on stdin)

{summary}

Decides PreToolUse and PermissionRequest events from the policy, the session's grants or a
human through the channel; records the other events for the watchdog. Always exits 0 with a
decision (a deny and its reason when anything fails).""",
    "mcp-serve": """\
usage: claudeguardctl mcp-serve   (run by Claude Code over stdio in -p runs)

{summary}

Serves one tool, `approve`, which the CLI calls for each permission prompt; the answer comes
from the policy, the session's grants, or a human through the channel.""",
}

ENVIRONMENT = """\
environment:
  CLAUDEGUARD_RUNTIME_DIR  the approval channel and session state (default /tmp/claudeguard-<uid>;
                           /tmp/claudeguard-<uid>-<key> for a HOME other than yours)
  CLAUDEGUARD_LOG_DIR      the audit log (default ~/.local/state/claudeguard/log)
  CLAUDEGUARD_CONFIG       one more config file, highest precedence
  XDG_CONFIG_HOME          where the user config lives (claudeguard/config.toml)
  CLAUDEGUARD_DEBUG=1      tracebacks instead of one-line internal errors"""


def top_help(commands: list[str]) -> str:
    width = max(len(c) for c in commands)
    lines = [
        "usage: claudeguardctl COMMAND [OPTIONS]",
        "",
        "Operate claudeguard: answer approval requests, watch guarded Claude Code sessions, read the",
        "decision log, check the setup. (`claudeguard` itself is the drop-in for `claude`.)",
        "",
        "commands:",
    ]
    lines += [f"  {c:{width}}  {SUMMARIES.get(c, '')}" for c in commands]
    lines += ["", "`claudeguardctl COMMAND --help` explains each command's options.", "", ENVIRONMENT]
    return "\n".join(lines)


def plain_help(name: str) -> str:
    return PLAIN_HELP[name].format(summary=SUMMARIES[name])


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (``prog: message (see prog --help)``), exit 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message}{_did_you_mean(message)} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def _did_you_mean(message: str) -> str:
    """``: did you mean show?`` for argparse's "invalid choice: 'shwo' (choose from 'show', ...)"."""
    head, found, rest = message.partition("invalid choice: ")
    if not found or " (choose from " not in rest:
        return ""
    import difflib  # noqa: PLC0415 - only for a mistake: `pending`, which scripts poll, never pays it
    given, _, choices = rest.partition(" (choose from ")
    names = [c.strip().strip("'") for c in choices.rstrip(")").split(",")]  # argparse quotes each with repr()
    near = difflib.get_close_matches(given.strip().strip("'"), names, n=1, cutoff=0.6)
    return f": did you mean {near[0]}?" if near else ""


def parser(name: str, epilog: str | None = None, prog: str | None = None) -> Parser:
    return Parser(prog=prog or f"claudeguardctl {name}", description=SUMMARIES[name], epilog=epilog,
                  formatter_class=_formatter)


def _formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's RawDescriptionHelpFormatter at the terminal's width, found as
    ``shutil.get_terminal_size`` finds it (``COLUMNS``, else stdout's terminal, else 80) but
    without importing shutil (bz2, lzma, fnmatch: ~1.7 ms of every command, since argparse makes
    a formatter for each ``add_argument``)."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    out = sys.__stdout__
    if columns <= 0 and out is not None:
        try:
            columns = os.get_terminal_size(out.fileno()).columns
        except (ValueError, OSError):
            columns = 0
    return argparse.RawDescriptionHelpFormatter(prog, width=(columns or 80) - 2)
