"""The hooks the guard registers in the real CLI, and who answers a call the CLI asks about.

``guard_settings`` is the settings value with the guard's hooks (``argv.build_plan`` puts it in
the CLI's ``--settings``): which events (``hook_events``: fewer in a -p run, where nothing of
the guard consumes some of them), in which form (a command, ``fast_entry.py hook --session-dir
DIR``, or an HTTP hook to the resident service, ``HttpHooks``), and who asks in -p
(``print_asker``).

Nothing a hook relies on comes from the environment, which any settings source's ``env`` block
sets for the CLI and everything it starts: an HTTP hook carries the session's secret literally
in its header (the settings go in a 0600 file in the session dir, never in argv), and a command
hook names its session dir on its own command line and reads its gate server's key from a 0600
file there.
"""

from __future__ import annotations

import os
import shlex
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import TypedDict

    from claudeguard.config.load import Config
    from claudeguard.plan.claude_args import ClaudeArgs
    from claudeguard.plan.status_line import StatusLineSetting

    # One hook as Claude Code's settings hold it: a command, or an HTTP hook ("async": the CLI
    # does not wait for it; a keyword, hence this form).
    HookEntry = TypedDict("HookEntry", {
        "type": str, "command": str, "url": str, "headers": dict[str, str], "allowedEnvVars": list[str],
        "timeout": int, "async": bool}, total=False)

    class HookGroup(TypedDict, total=False):
        matcher: str  # tool events only
        hooks: list[HookEntry]

    class GuardSettings(TypedDict, total=False):
        """The guard's part of the CLI's ``--settings``: its hooks (``guard_settings``), the CLI's
        own sandbox pinned off, and for agent view the permission rules too
        (``shim/agent_view.py``); the box's prefix in ``env`` (``argv.sandbox_env``)."""

        hooks: dict[str, list[HookGroup]]
        permissions: dict[str, list[str]]
        sandbox: dict[str, bool]
        env: dict[str, str]
        disabledMcpjsonServers: list[str]  # a repository's untrusted .mcp.json servers (plan.repo_code)
        statusLine: StatusLineSetting  # a session with a person at its terminal (plan/status_line.py)

MCP_SERVER_NAME = "claudeguard"
PROMPT_TOOL = f"mcp__{MCP_SERVER_NAME}__approve"
# Hook events the guard registers (all exist in both pinned versions; an unknown event name would
# make the CLI drop the whole settings value). Tool events take a matcher, the others none.
TOOL_HOOK_EVENTS = ("PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure")
OTHER_HOOK_EVENTS = ("Notification", "SubagentStart", "SubagentStop", "UserPromptSubmit", "Stop")
# What a -p session leaves out, as nothing of the guard consumes it there: PermissionRequest
# (unless it is the session's asker, ``print_asker``) and Notification (a dialog or an idle
# prompt on screen: the watchdog's notes for a TUI). Each event that fires costs the CLI an HTTP
# round trip.
PRINT_MODE_SKIPPED = ("PermissionRequest", "Notification")
# The first release whose -p runs fire the PermissionRequest hook, and honour its answer, when no
# permission-prompt tool is given (2.1.197 does not fire it and denies the call). Asking there
# spares the CLI the connection to our MCP server before its first turn (docs/design.md,
# "Who asks in -p").
PERMISSION_REQUEST_IN_PRINT = (2, 1, 330)


def print_asker(args: ClaudeArgs, cli_version: str | None) -> str | None:
    """Who answers, in a -p run, a call the CLI itself would ask about: the caller's prompt tool
    ("caller"), nobody (``--permission-prompts none``: the CLI denies), our PermissionRequest hook
    (a real CLI known to be >= PERMISSION_REQUEST_IN_PRINT) or our prompt tool (older or unknown
    versions). None outside -p (a dialog asks)."""
    if not args.print_mode:
        return None
    if args.has("--permission-prompt-tool"):
        return "caller"
    if args.last("--permission-prompts") == "none":
        return "none"
    from claudeguard.plan.discovery import version_at_least

    return "permission-request" if version_at_least(cli_version, PERMISSION_REQUEST_IN_PRINT) else "prompt-tool"


# What a -p session whose transcript the CLI keeps leaves out too: the events that only say a
# call ended. Each cost the CLI ~8-10 ms a call (blocking or async, HTTP or command; a forty-call
# session, bench/RESULTS.md), and the CLI writes each result to its transcript as the tool
# returns, where the watchdog reads it (watchdog/transcript.py).
CALL_END_EVENTS = ("PostToolUse", "PostToolUseFailure")


def hook_events(print_mode: bool, asker: str | None = None, one_prompt: bool = False,
                transcript_kept: bool = False) -> tuple[str, ...]:
    """The events registered for a session: every one, less PRINT_MODE_SKIPPED under -p (but
    PermissionRequest when it is the -p session's asker). ``one_prompt``: a -p run of one prompt
    (not ``--input-format stream-json``) leaves out UserPromptSubmit too: it fires once, before
    the first request to the model (a round trip on the way to it), and the watchdog takes from
    it only that a new turn began, which at the start it knows. ``transcript_kept``: the -p run
    keeps its transcript (``keeps_transcript``), so CALL_END_EVENTS are left out; and with
    ``one_prompt`` Stop too: the CLI waits for its answer before it exits (the first HTTP hook of
    a run also pays the CLI's connection, 15-35 ms), and the watchdog takes from it only that the
    main agent's calls are over, which the transcript shows (in -p no user waits after a turn)."""
    events = TOOL_HOOK_EVENTS + OTHER_HOOK_EVENTS
    if not print_mode:
        return events
    return tuple(e for e in events
                 if (e not in PRINT_MODE_SKIPPED or (e == "PermissionRequest" and asker == "permission-request"))
                 and not (one_prompt and e == "UserPromptSubmit")
                 and not (transcript_kept and e in CALL_END_EVENTS)
                 and not (one_prompt and transcript_kept and e == "Stop"))


def keeps_transcript(args: ClaudeArgs, cwd: str, env: dict[str, str] | None = None) -> bool:
    """Whether the CLI will write this run's transcript: not with ``--no-session-persistence``,
    nor when a settings source sets ``cleanupPeriodDays`` to 0 (the CLI then writes none; a
    settings file that changes it during the run is not followed: the watchdog then sees its
    calls in flight until the run ends, and judges them by ``tool_stall_after``)."""
    if args.has("--no-session-persistence"):
        return False
    from claudeguard.plan.settings_sources import sources

    return not any(src.loaded and src.settings.get("cleanupPeriodDays") == 0
                   for src in sources(args, cwd, os.environ if env is None else env))


def ctl_command() -> list[str]:
    """How the CLI should call us back (the hook on every tool call, the MCP server on every
    start): this interpreter without site processing on our own entry file (see fast_entry)."""
    from claudeguard.gate import fast_entry_path

    return [sys.executable, "-E", "-S", fast_entry_path()]



class HttpHooks:
    """Hooks answered by the resident service (``claudeguard.service``): its port, and the
    session's secret, written literally into each hook's ``Authorization`` header. The settings
    holding it go into a 0600 file in the session dir (``argv.build_plan``): a literal header in
    a ``--settings`` file reaches the hook on 2.1.197, 2.1.330 and 2.1.332 and lands nowhere else
    (no transcript, no debug log, not ``~/.claude``; docs/notes/sandbox-and-secrets.md section
    4), while a ``$VAR`` header takes its value from the CLI's environment, which a project's
    ``env`` block replaces (then every hook is a 401 and the CLI goes on as if none ran).

    ``literal``: the form of a ``--bg`` session or agent view (they run under Claude Code's
    daemon): no ``async`` hooks there, as before."""

    def __init__(self, port: int | str, token: str, literal: bool = False) -> None:
        self.port = port  # "PORT" in a dry run: the service is started (and its port known) at launch
        self.token = token
        self.literal = literal

    def __repr__(self) -> str:  # never the secret
        return f"HttpHooks(port={self.port!r}, literal={self.literal!r})"


# The variable the guard's hooks took the secret from until the header held it literally: no
# hook of the guard reads it any more, and the launcher never sets it for the CLI.
TOKEN_VAR = "CLAUDEGUARD_HOOK_TOKEN"
# The command hook's and the stdio prompt tool's own argument naming their session's dir.
SESSION_DIR_ARG = "--session-dir"


# The HTTP hooks the CLI does not wait for, where they are registered at all (a -p run whose
# transcript is kept has neither: CALL_END_EVENTS): they only record that a call ended, with no
# answer to give. A twelve-round ten-call run put blocking at +27 ms a call and async at +9; the
# forty-call stand-ins of bench/per_call.py put each at ~8-10 ms a call (bench/RESULTS.md).
# The end of a call may reach the service after the next call's start: the watchdog matches them
# by tool_use_id. Command hooks stay blocking: a slow async hook delayed the end of a 2.1.330 run
# (three 0.2 s async hooks: +1.3 s against +0.6 s blocking), and a command hook is a process.
ASYNC_HTTP_EVENTS = ("PostToolUse", "PostToolUseFailure")


def ctl_args(command: str, session_dir: str | None) -> list[str]:
    """A callback's arguments: ``hook`` or ``mcp-serve``, and the session dir it serves (none in a
    dry run, which has none; such a hook decides from the config files, as one a user wires by
    hand)."""
    return [command, SESSION_DIR_ARG, session_dir] if session_dir else [command]


def _hook_entry(event: str, ctl: list[str], timeout: int, http: HttpHooks | None, session_id: str,
                session_dir: str | None) -> HookEntry:
    if http is None:
        return {"type": "command", "command": " ".join(shlex.quote(p) for p in ctl + ctl_args("hook", session_dir)),
                "timeout": timeout}
    entry: HookEntry = {"type": "http", "url": f"http://127.0.0.1:{http.port}/hook/{session_id}/{event}",
                        "headers": {"Authorization": f"Bearer {http.token}"}, "timeout": timeout}
    if event in ASYNC_HTTP_EVENTS and not http.literal:
        entry["async"] = True
    return entry


def guard_settings(cfg: Config, ctl: list[str], cwd: str, http: HttpHooks | None = None, session_id: str = "",
                   print_mode: bool = False, asker: str | None = None, one_prompt: bool = False,
                   transcript_kept: bool = False, session_dir: str | None = None) -> GuardSettings:
    timeout = int(cfg.approval()["timeout"]) + 30  # the guard, not the CLI, must decide
    # Every hook blocks but the HTTP form's PostToolUse and PostToolUseFailure (ASYNC_HTTP_EVENTS).
    hooks: dict[str, list[HookGroup]] = {}
    for event in hook_events(print_mode, asker, one_prompt, transcript_kept):
        group: HookGroup = {"matcher": "*"} if event in TOOL_HOOK_EVENTS else {}
        group["hooks"] = [_hook_entry(event, ctl, timeout, http, session_id, session_dir)]
        hooks[event] = [group]
    # The policy's ask rules are NOT given to the CLI: the hook asks the human itself, and the
    # CLI's own copy of an ask rule would ask a second time after the human's allow (the prompt
    # tool, or a dialog), and on 2.1.197 deny a background subagent's call outright. What keeps
    # an ask call from running unanswered when the hook cannot answer is `cli_allow_rules`.
    # The CLI's own sandbox stays off, whatever a project, local or user file says (this value
    # wins over theirs, measured on all three CLIs): with it on, the CLI sends these HTTP hooks
    # through its proxy, which refuses 127.0.0.1, and every call runs unguarded. The guard's
    # own box confines Bash instead (plan/sandbox.py).
    return {"hooks": hooks, "sandbox": {"enabled": False}}

