"""Read the real CLI's own arguments as the CLI itself reads them, without changing them: with the
argv table of the installed version (``claudeguard/cli_tables/``), by the CLI's own rules
(docs/notes/cli-surfaces.md, section 0), and say what the run is (``ClaudeArgs.kind``): a
model session the guard injects itself into, a command passed through untouched, or one that is
refused or guarded by what it does (section 1; docs/design.md, "How argv is read").

The rules, as the CLI's main() and its commander read argv:

- main() first: words it dispatches before commander (``early`` in the table: ``attach``,
  ``daemon``, ``remote-control`` ... at argv[0], argv shapes such as ``plugin test``, and on
  2.1.330+ a background verb behind root options when an 8-hex id follows it).
- ``-p`` anywhere (2.1.197: any word ``-p``/``--print``; 2.1.330+: as the eager reader finds it,
  before ``--``, not as another option's value) makes the CLI register no sub-commands: every
  bare word is the prompt (unless a word starts with ``cc://``).
- commander: a node reads options until its first sub-command word (positional options); ``<v>``
  takes the next word whatever it is; ``[v]`` takes it unless it starts with ``-``; ``<v...>``
  takes the next word, then every word up to one starting with ``-``; ``--opt=value`` for value
  options only; short flags bundle (``-pc``), a short value option takes the rest of its word
  (``-dhooks``); ``--`` ends the options; an option the node does not know sends every later
  bare word to the unknown list (so no later word is a sub-command); ``-h``/``--help`` among the
  unknown words shows the help and runs nothing.

The table is the installed version's, found from its ``package.json`` (no process started, no
``json``/``re`` import: the launcher's pass-through path stays fast); a version without a table
is read with the newest table not newer than it (``table_for``; ``doctor`` says so), an unknown
version with the newest. A word or option the table does not know is never a reason to pass
through (``kind`` ``unknown``).
"""

from __future__ import annotations

from claudeguard.cli_tables import load as tables

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any


# What a run is (``ClaudeArgs.kind``); docs/design.md "How argv is read" names the commands of each.
SESSION = "session"  # a model session (the prompt): guarded
PASS = "pass"  # starts no session, runs no tool, no repository code, writes nothing: exec'd untouched
SESSIONS = "sessions"  # agents, attach, respawn: the launcher's own handling (agent view, recorded flags)
MANAGE = "manage"  # stops, lists or removes background sessions, starts none: passed through
OTHER = "other"  # credentials, network services, a help-only group: passed through
PRINTS_VERSION = "prints the version"  # ClaudeArgs.why of a version request
PRINTS_HELP = "prints help"  # ... and of a help request
UNGUARDED = "unguarded"  # runs tools with no hook and no rule: refused (allow_unguarded without lockdown)
REPO_CODE = "repo-code"  # runs the repository's code (.mcp.json servers, its hooks): refused under lockdown
WRITES = "writes"  # writes settings or code later sessions honour, or the CLI itself: refused under lockdown
UNCHECKED = "unchecked"  # a command of the table nobody checked: refused under lockdown
UNKNOWN = "unknown"  # a word or option the table does not know: refused under lockdown, else a session
MISREAD = "misread"  # main() reads a word as an option that commander reads as a value: refused
# Kinds lockdown refuses; without lockdown only UNGUARDED is refused (unless allow_unguarded).
LOCKDOWN_REFUSES = frozenset({UNGUARDED, REPO_CODE, WRITES, UNCHECKED, UNKNOWN, MISREAD})

# Sub-commands by what they do (a path matches itself and every path below it; the longest
# match wins). Only PASS_PATHS pass through unguarded, each from the version on which it was
# checked (docs/notes/cli-surfaces.md section 1); a command of the table named nowhere here is
# UNCHECKED.
PASS_PATHS: dict[tuple[str, ...], tuple[int, ...]] = {
    ("auth", "status"): (0,),
    ("plugin", "list"): (0,),
    ("auto-mode", "config"): (0,),
    ("auto-mode", "defaults"): (0,),
    ("doctor",): (2, 1, 330),  # 2.1.197's doctor starts the repository's .mcp.json servers
    ("workspace-trust",): (2, 1, 330),
    ("sandbox", "status"): (2, 1, 330),
}
KINDS: dict[tuple[str, ...], tuple[str, str]] = {
    ("mcp", "serve"): (UNGUARDED, "serves the CLI's tools to any MCP client with no hook and no rule"),
    ("remote-control",): (UNGUARDED, "runs sessions driven from elsewhere that the guard's hooks do not reach"),
    ("rc",): (UNGUARDED, "runs sessions driven from elsewhere that the guard's hooks do not reach"),
    ("remote",): (UNGUARDED, "runs sessions driven from elsewhere that the guard's hooks do not reach"),
    ("sync",): (UNGUARDED, "runs sessions driven from elsewhere that the guard's hooks do not reach"),
    ("bridge",): (UNGUARDED, "runs sessions driven from elsewhere that the guard's hooks do not reach"),
    ("self-hosted-runner",): (UNGUARDED, "runs sessions for a remote service that the guard's hooks do not reach"),
    ("self-hosted-agent-proxy",): (UNGUARDED, "runs sessions for a remote service that the guard's hooks do not "
                                              "reach"),
    ("mcp", "list"): (REPO_CODE, "starts the repository's .mcp.json servers and runs its hooks"),
    ("mcp", "get"): (REPO_CODE, "starts the repository's .mcp.json servers and runs its hooks"),
    ("doctor",): (REPO_CODE, "starts the repository's .mcp.json servers on this version"),
    ("worktree-hook",): (REPO_CODE, "runs the repository's WorktreeCreate/WorktreeRemove hooks"),
    ("plugin", "test"): (REPO_CODE, "runs a plugin's code"),
    ("plugin", "eval"): (REPO_CODE, "runs a plugin's code"),
    ("plugin", "validate", "--module"): (REPO_CODE, "loads a plugin's code"),
    ("mcp",): (WRITES, "changes the MCP servers later sessions start"),
    ("plugin",): (WRITES, "installs or changes the plugins later sessions run"),
    ("auto-mode", "reset"): (WRITES, "changes the auto mode rules later sessions follow"),
    ("import",): (WRITES, "imports settings later sessions honour"),
    ("import-conversations",): (WRITES, "writes transcripts later sessions resume"),
    ("install",): (WRITES, "replaces the CLI with a version the guard may have no table for"),
    ("update",): (WRITES, "replaces the CLI with a version the guard may have no table for"),
    ("--update",): (WRITES, "replaces the CLI with a version the guard may have no table for"),
    ("--upgrade",): (WRITES, "replaces the CLI with a version the guard may have no table for"),
    ("purge",): (WRITES, "deletes transcripts the audit relies on"),
    ("project", "purge"): (WRITES, "deletes transcripts the audit relies on"),
    ("sandbox",): (WRITES, "changes the CLI's sandbox set-up"),
    ("agents",): (SESSIONS, "dispatches sessions (agent view)"),
    ("attach",): (SESSIONS, "re-attaches a background session"),
    ("respawn",): (SESSIONS, "restarts background sessions"),
    ("stop",): (MANAGE, "stops a background session"),
    ("kill",): (MANAGE, "stops a background session"),
    ("logs",): (MANAGE, "shows a background session's output"),
    ("rm",): (MANAGE, "removes a background session"),
    ("daemon",): (MANAGE, "runs or stops the supervisor of background sessions"),
    ("auth",): (OTHER, "signs in or out"),
    ("setup-token",): (OTHER, "makes a sign-in token"),
    ("gateway",): (OTHER, "runs the enterprise gateway (a network service)"),
    ("ultrareview",): (OTHER, "starts a review in the cloud"),
    ("design-login",): (OTHER, "signs in"),
    ("auto-mode", "critique"): (OTHER, "asks the model about the auto mode rules (no tool)"),
    ("mcp", "login"): (OTHER, "signs in to an MCP server"),
    ("mcp", "logout"): (OTHER, "signs out of an MCP server"),
    ("plugin", "details"): (OTHER, "shows a plugin"),
    ("plugin", "validate"): (OTHER, "checks a plugin's files"),
    ("plugin", "marketplace", "list"): (OTHER, "lists marketplaces"),
    ("project",): (OTHER, "shows its help"),
}
# Edits of Claude's own settings (2.1.330+: edit-permission-rules adds allow rules, edit-hook hooks).
EDIT_PREFIX = ("edit-", WRITES, "writes Claude's own settings (allow rules, hooks, the sandbox) that later sessions "
               "honour")
# main()'s internal argv[0] entries (a background session's pty host, the daemon's worker, the
# Chrome and computer-use MCP servers ...): tools with no hook of the guard's.
INTERNAL = (UNGUARDED, "is an internal entry of the CLI that runs tools the guard's hooks do not reach")

# 2.1.330+: what main() steps over before a background verb (its ``_da``): these words end the
# search (``-p``, ``--bg``, a help or version request, bundled short flags) ...
_BG_VERB_STOP = frozenset({"-p", "--print", "--bg", "--background", "--routine", "-h", "--help", "-v", "-V",
                           "--version"})
# ... and these value options, though the eager reader knows them, are not root options there.
_BG_VERB_NOT_ROOT = frozenset({"--exec", "-m", "--handle-uri"})
_HELP = ("-h", "--help")
# Options main() reads before commander, on its own (docs/design.md, "How argv is read"): the
# settings it loads early, and a background launch.
EARLY_SETTINGS = ("--settings", "--managed-settings", "--setting-sources")
BACKGROUND = ("--bg", "--background")
# 2.1.197 (a table without an eager reader): main() loads EARLY_SETTINGS with a walker of its own
# that steps over the values of these options only (its eagerLoadSettings, read from the
# binary), and takes a background launch for the word --bg or --background anywhere in argv.
EARLY_SETTINGS_STEPS_2_1_197 = frozenset({
    "--prefill", "--prefill-b64", "--deep-link-repo", "--deep-link-last-fetch", "--deep-link-cwd-b64",
    "--handle-uri", "--settings", "--managed-settings", "--setting-sources", "--team-name", "--agent-id",
    "--agent-name", "--agent-color", "--parent-session-id", "--agent-type", "--model", "--agent", "--routine",
    "--effort", "--permission-mode", "--session-id"})


def _maybe_option(word: str) -> bool:
    return len(word) > 1 and word.startswith("-")


def _version_tuple(version: str) -> tuple[int, ...]:
    out: list[int] = []
    for piece in version.split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


class ClaudeArgs:
    """The caller's argv as the CLI will read it (plain class: kept off dataclasses for start-up).

    ``options``: the root program's options as read (canonical name -> [(index, values)]);
    ``command``: the sub-command path (``("mcp", "serve")``; an early word of main() such as
    ``("attach",)``), empty for a session; ``command_options``: the options its own node read;
    ``unknown``: (index, word) of each word or option the table does not know."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.options: dict[str, list[tuple[int, list[str]]]] = {}  # name -> [(index, values)]
        self.positionals: list[int] = []  # indexes of bare words (the prompt)
        self.subcommand: str | None = None
        self.subcommand_index: int | None = None  # where it stands in argv (the root stops reading there)
        self.command: tuple[str, ...] = ()
        self.command_options: dict[str, list[tuple[int, list[str]]]] = {}
        self.early = False  # main() takes the command before commander reads argv
        self.help = False  # a help request, read as the CLI reads it: nothing runs
        self.print_prompt = False  # -p anywhere, as main() finds it: sub-command words are the prompt
        self.unknown: list[tuple[int, str]] = []
        self.errors: list[str] = []  # what the CLI itself refuses (a value missing at the end)
        self.end_of_options: int | None = None  # the index of the `--` that ends the root's options
        self.kind = SESSION
        self.why = ""  # what the command does, for a refusal line
        self.why_unguarded = ""  # an unknown word stands before a command that runs tools unguarded
        self.cli_version: str | None = None
        self.table_version: str | None = None  # the table it was read with (None: no table at all)

    def identity(self) -> tuple[object, ...]:
        """This reading as a key of ``plan.once``: the object, the words and the table read with
        (``reread`` reads the same object again, in place, for another CLI's table)."""
        return (id(self), self.table_version, self.cli_version, *self.argv)

    def has(self, *names: str) -> bool:
        return any(n in self.options for n in names)

    def values(self, *names: str) -> list[str]:
        out: list[str] = []
        for n in names:
            for _, vals in self.options.get(n, []):
                out.extend(vals)
        return out

    def last(self, *names: str) -> str | None:
        best: tuple[int, str] | None = None
        for n in names:
            for index, vals in self.options.get(n, []):
                if vals and (best is None or index > best[0]):
                    best = (index, vals[-1])
        return best[1] if best else None

    @property
    def print_mode(self) -> bool:
        return self.has("--print")

    @property
    def host_answers(self) -> bool:
        """The caller answers the CLI's permission prompts itself over the stream-json control
        protocol (``--permission-prompt-tool stdio`` with ``--input-format stream-json``: VS
        Code's chat panel, CI actions, the Agent SDKs' ``can_use_tool``): its prompt is the
        keyboard (shim/host_prompt.py)."""
        return self.last("--permission-prompt-tool") == "stdio" and self.last("--input-format") == "stream-json"

    @property
    def prints_only(self) -> bool:
        """A request for the version or a help text: the CLI prints and runs nothing (a broken
        config does not stop it, ``shim.main``)."""
        return self.kind == PASS and self.why in (PRINTS_VERSION, PRINTS_HELP)

    @property
    def passthrough(self) -> bool:
        """True when the CLI will not start a model session of its own (a sub-command, a help or
        version request): the guard does not inject itself; ``kind`` says what happens instead."""
        return self.kind != SESSION and self.kind != UNKNOWN

    @property
    def uses_pty(self) -> bool:
        """No -p: the TUI runs on the launcher's pty (with or without a terminal of its own), so
        its dialogs can be seen and, when nobody answers them, routed to the channel. A
        stream-json caller without -p (the Agent SDK's streaming mode) is headless: pipes, as
        with -p."""
        return not self.print_mode and self.last("--input-format", "--output-format") is None

    @property
    def prompt(self) -> str | None:
        words = [self.argv[i] for i in self.positionals]
        return " ".join(words) if words else None

    def command_line(self) -> str:
        """The command as the user would name it (``mcp serve``), for messages."""
        return " ".join(self.command) or "claude"


# --- the table --------------------------------------------------------------------------------


def table_for(version: str | None) -> tuple[str | None, dict[str, object] | None]:
    """(the version whose table reads ``version``'s argv, that table): its own, else the newest
    not newer than it, else (older than every table) the oldest; the newest for a version that
    is unknown or not digits.digits.digits; (None, None) when no table is checked in at all."""
    known = tables.versions()
    if not known:
        return None, None
    chosen = known[-1]
    want = _version_tuple(version or "")
    if version in known:
        chosen = str(version)
    elif len(want) == 3:
        older = [v for v in known if _version_tuple(v) <= want]
        chosen = older[-1] if older else known[0]
    if chosen not in _LOADED:
        _LOADED[chosen] = tables.load(chosen)
    return chosen, _LOADED[chosen]


_LOADED: dict[str, dict[str, object] | None] = {}  # a table read once per process (the planner reads many argvs)


def table_note(cli_version: str | None, table_version: str | None) -> str | None:
    """One line when the installed CLI is read with another version's table (``doctor``, and the
    launcher under ``CLAUDEGUARD_DEBUG``); None when the table is its own."""
    if table_version is None:
        return "no argv table is installed with claudeguard: every run is guarded as a session"
    if cli_version == table_version:
        return None
    if cli_version is None:
        return f"the real CLI's version is unknown: its argv is read with the table of {table_version}"
    return (f"Claude Code {cli_version} has no argv table in this claudeguard: its argv is read with the table of "
            f"{table_version} (options and commands it added are unknown: refused under lockdown, else guarded)")


def installed_version(real_cli: str | None) -> str | None:
    """The real CLI's version however it is installed (``plan.cli_version``: its package.json,
    else the binary's own answer cached by its stat key); None for a program that is not a
    Claude Code CLI."""
    from claudeguard.plan.cli_version import cli_version

    return cli_version(real_cli)


# --- reading ----------------------------------------------------------------------------------


class _Node:
    """One command of the table with its option and child lookups (names and aliases)."""

    __slots__ = ("name", "raw", "opts", "kids")

    def __init__(self, name: str, raw: dict[str, Any]) -> None:
        self.name = name
        self.raw = raw
        self.opts: dict[str, tuple[str, str]] = {}  # spelling -> (canonical, takes)
        for key, spec in (raw.get("options") or {}).items():
            takes = str(spec.get("takes") or "none")
            self.opts[key] = (key, takes)
            for alias in spec.get("aliases") or ():
                self.opts[alias] = (key, takes)
        self.kids: dict[str, str] = {}  # spelling -> canonical child name
        for key, child in (raw.get("commands") or {}).items():
            self.kids[key] = key
            for alias in child.get("aliases") or ():
                self.kids[alias] = key

    def child(self, name: str) -> _Node:
        return _Node(name, self.raw["commands"][name])

    @property
    def early(self) -> bool:
        return self.raw.get("dispatch") == "early"

    @property
    def help_command(self) -> bool:
        # commander's implicit `help [command]`: a group of commands with no action of its own
        return bool(self.kids) and not self.raw.get("arguments")


class _Read:
    """What one node's parse found (commander's parseOptions): operand indexes, the index of the
    sub-command word (None: none), the words after an unknown option, a help request."""

    __slots__ = ("operands", "sub_at", "rest", "help", "dashdash")

    def __init__(self) -> None:
        self.dashdash: int | None = None  # where a `--` ended the options
        self.operands: list[int] = []
        self.sub_at: int | None = None
        self.rest: list[int] = []  # commander's "unknown" list: every word after an unknown option
        self.help = False


def _parse_node(argv: list[str], start: int, node: _Node, commands: bool,
                out: dict[str, list[tuple[int, list[str]]]], unknown: list[tuple[int, str]],
                errors: list[str]) -> _Read:
    """Commander's parseOptions for one node from ``argv[start]``: its options into ``out``, the
    options it does not know into ``unknown``. ``commands``: whether the node's sub-commands are
    registered (not with ``-p`` anywhere)."""
    read = _Read()
    dest = read.operands
    i = start
    n = len(argv)
    variadic: list[str] | None = None

    def add(name: str, index: int, vals: list[str]) -> list[str]:
        out.setdefault(name, []).append((index, vals))
        return vals

    pending: list[str] = []  # what a bundle of short flags still has to give (commander's unshift)
    while i < n or pending:
        if pending:
            word, at = pending.pop(), i - 1
        else:
            word, at = argv[i], i
            i += 1
        if word == "--":
            read.dashdash = at
            dest.extend(range(i, n))
            break
        if variadic is not None and not _maybe_option(word):
            variadic.append(word)
            continue
        variadic = None
        found = node.opts.get(word) if _maybe_option(word) else None
        if found is not None:
            name, takes = found
            if takes in ("one", "many"):
                if i < n:
                    vals = add(name, at, [argv[i]])
                    i += 1
                else:
                    vals = add(name, at, [])
                    errors.append(f"option {word} needs a value")
                variadic = vals if takes == "many" else None
            elif takes in ("optional", "optional-many"):
                if i < n and not _maybe_option(argv[i]):
                    vals = add(name, at, [argv[i]])
                    i += 1
                else:
                    vals = add(name, at, [])
                variadic = vals if takes == "optional-many" else None
            else:
                add(name, at, [])
            continue
        if len(word) > 2 and word[0] == "-" and word[1] != "-":
            found = node.opts.get(word[:2])
            if found is not None:
                if found[1] != "none":
                    add(found[0], at, [word[2:]])
                else:
                    add(found[0], at, [])
                    pending.append("-" + word[2:])
                continue
        if word.startswith("--") and "=" in word[3:]:
            found = node.opts.get(word.partition("=")[0])
            if found is not None and found[1] != "none":
                add(found[0], at, [word.partition("=")[2]])
                continue
        if _maybe_option(word):
            dest = read.rest
            if word in _HELP:
                read.help = True
            else:
                unknown.append((at, word))
        elif commands and not read.operands and not read.rest and (
                word in node.kids or (word == "help" and node.help_command)):
            read.sub_at = at
            return read
        dest.append(at)
    return read


def _print_anywhere(argv: list[str], table: dict[str, Any]) -> bool:
    """Whether main() registers no sub-commands because of ``-p``: 2.1.197 looks for the word
    anywhere; 2.1.330+ with its eager reader (before ``--``, stepping over option values). A
    word starting with ``cc://`` keeps the commands."""
    if not (table.get("parser") or {}).get("print_reads_commands_as_prompt"):
        return False
    eager = table.get("eager")
    if not eager:
        words = argv
        found = "-p" in words or "--print" in words
    else:
        words = _eager_words(argv, eager)
        found = any(w in ("-p", "--print") for w in words)
    return found and not any(w.startswith(("cc://", "cc+unix://")) for w in words)


def _eager_step(argv: list[str], i: int, eager: dict[str, Any]) -> int:
    """The eager reader's ``aVe``: the index of the last word option ``argv[i]`` takes."""
    word = argv[i]
    if word in eager["_optional"]:
        return i + 1 if i + 1 < len(argv) and not _maybe_option(argv[i + 1]) else i
    if word not in eager["_value"]:
        return i
    j = i + 1
    if word in eager["_many"]:
        while j + 1 < len(argv) and not _maybe_option(argv[j + 1]):
            j += 1
    return j


def _eager_words(argv: list[str], eager: dict[str, Any]) -> list[str]:
    """The words the eager reader looks at (not values, before ``--``)."""
    _prepare_eager(eager)
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "--":
            break
        out.append(argv[i])
        i = _eager_step(argv, i, eager) + 1
    return out


def _prepare_eager(eager: dict[str, Any]) -> None:
    if "_value" not in eager:
        eager["_value"] = frozenset(eager.get("value") or ()) | frozenset(eager.get("many") or ())
        eager["_many"] = frozenset(eager.get("many") or ())
        eager["_optional"] = frozenset(eager.get("optional") or ())
        eager["_none"] = frozenset(eager.get("none") or ())


def _background_verb(argv: list[str], eager: dict[str, Any]) -> int | None:
    """2.1.330+ (main()'s ``_da``): where a background verb stands that main() takes before
    commander: at argv[0], or behind root options when an 8-hex id (or ``respawn --all``)
    follows it and every word before it is a root option the eager reader steps over."""
    _prepare_eager(eager)
    verbs = set(eager.get("background_verbs") or ())
    t = None
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            t = i + 1 if i + 1 < len(argv) else None
            break
        if not _maybe_option(word):
            t = i
            break
        i = _eager_step(argv, i, eager) + 1
    if t is None or argv[t] not in verbs:
        return None
    if t == 0:
        return 0
    if argv[t - 1] == "--":
        return None
    nxt = argv[t + 1] if t + 1 < len(argv) else None
    hexid = nxt is not None and len(nxt) == 8 and all(c in "0123456789abcdef" for c in nxt)
    if not (hexid or (argv[t] == "respawn" and nxt == "--all")):
        return None
    s = 0
    while s < t:
        word = argv[s]
        if word in _BG_VERB_STOP or word.startswith("--routine=") or (
                len(word) > 2 and word[0] == "-" and word[1:].isalpha() and word[1:].isascii()):
            return None
        name = word.partition("=")[0]
        root_option = word in eager["_none"] or (name in eager["_value"] and name not in _BG_VERB_NOT_ROOT) or (
            name in eager["_optional"])
        if not root_option:
            return None
        s = _eager_step(argv, s, eager) + 1
    return t


def _early(argv: list[str], table: dict[str, Any]) -> tuple[tuple[str, ...], int] | None:
    """The command main() takes before commander, and where it stands."""
    early = table.get("early") or {}
    for shape in early.get("shapes") or ():
        if len(argv) >= len(shape) and argv[:len(shape)] == shape:
            return tuple(shape), 0
    if argv and argv[0] in (early.get("argv0") or {}):
        return (argv[0],), 0
    eager = table.get("eager")
    if eager:
        at = _background_verb(argv, eager)
        if at is not None:
            return (argv[at],), at
    return None


def parse_claude_args(argv: list[str], table: dict[str, object] | None = None, *, cli_version: str | None = None,
                      table_version: str | None = None) -> ClaudeArgs:
    """``argv`` (the CLI's words, without the program) as the CLI reads it with ``table``;
    without one, the table ``table_for(cli_version)`` picks."""
    if table is None:
        table_version, table = table_for(cli_version)
    out = ClaudeArgs(list(argv))
    out.cli_version, out.table_version = cli_version, table_version
    if table is None:
        _read_without_table(out)
        return out
    return _read(out, table)


def _read(out: ClaudeArgs, table: Any) -> ClaudeArgs:  # the table: JSON derive wrote (cli_tables/data)
    argv = out.argv
    root = _Node("claude", table["root"])
    early = _early(argv, table)
    if early is not None:
        shape, at = early
        out.early = True
        out.command = shape
        if not shape[0].startswith("-"):  # main()'s own argv[0] flags are no sub-command
            out.subcommand, out.subcommand_index = shape[0], at
        # the root options main() stepped over (a background verb behind them) are commander's
        if at:
            _parse_node(argv[:at], 0, root, False, out.options, out.unknown, out.errors)
        words = argv[at + len(shape):]
        # its own help (read by derive from the CLI), where that runs nothing: not remote control's
        out.help = words[:1] in (["-h"], ["--help"]) and len(words) == 1 and _kind_of(shape, (0,))[0] != UNGUARDED
        _classify(out)
        return out
    out.print_prompt = _print_anywhere(argv, table)
    read = _parse_node(argv, 0, root, not out.print_prompt, out.options, out.unknown, out.errors)
    out.end_of_options = read.dashdash
    node = root
    path: list[str] = []
    while read.sub_at is not None:
        at = read.sub_at
        word = argv[at]
        if word not in node.kids:
            out.help = True  # commander's `help [command]`
            break
        name = node.kids[word]
        child = node.child(name)
        if child.early and _kind_of((*path, name), (0,))[0] != UNGUARDED:
            # A word main() takes only at argv[0] (2.1.197's `attach`, every version's `daemon`):
            # behind options commander reads it as the prompt. (Remote control runs either way.)
            read = _parse_node(argv, at + 1, root, False, out.options, out.unknown, out.errors)
            read.operands.insert(0, at)
            out.end_of_options = read.dashdash
            break
        path.append(name)
        node = child
        if path == [name]:
            out.subcommand_index = at
        if node.early:
            break
        out.command_options = {}
        read = _parse_node(argv, at + 1, node, True, out.command_options, out.unknown, out.errors)
        if read.sub_at is None and node.help_command:
            if read.operands:
                # a word where a sub-command stands that the table does not know
                out.unknown.append((read.operands[0], argv[read.operands[0]]))
            else:
                out.help = True  # a group without a command: commander shows its help
    if not path:
        out.positionals = read.operands
    out.help = out.help or read.help
    out.command = tuple(path)
    out.subcommand = path[0] if path else None
    if out.command[-1:] == ("validate",) and "--module" in out.command_options:
        out.command = out.command + ("--module",)
    _classify(out)
    misread = _misread(out, table)
    if misread is not None:
        at, reader = misread
        out.kind = MISREAD
        out.why = (f"{argv[at]} stands where the CLI's parser reads an option's value or the prompt, but Claude "
                   f"Code {out.table_version}'s main() takes it as an option ({reader})")
    return out


def _read_without_table(out: ClaudeArgs) -> None:
    """No table at all (a broken installation): every run is a session; only the plain
    ``--version``/``--help`` at argv[0] pass."""
    argv = out.argv
    out.positionals = [i for i, w in enumerate(argv) if not _maybe_option(w)]
    if argv and argv[0] in ("--version", "-v") and len(argv) == 1:
        out.kind, out.command, out.why = PASS, ("--version",), PRINTS_VERSION
    elif argv and argv[0] in _HELP and len(argv) == 1:
        out.kind, out.help, out.why = PASS, True, PRINTS_HELP
    for i, w in enumerate(argv):
        if w in ("-p", "--print"):
            out.options.setdefault("--print", []).append((i, []))


def _kind_of(path: tuple[str, ...], version: tuple[int, ...]) -> tuple[str, str]:
    since = PASS_PATHS.get(path)
    if since is not None and version >= since:
        return PASS, "passes through"
    if path and path[0].startswith(EDIT_PREFIX[0]):
        return EDIT_PREFIX[1], EDIT_PREFIX[2]
    for cut in range(len(path), 0, -1):
        found = KINDS.get(path[:cut])
        if found is not None:
            return found
    return UNCHECKED, "is a command claudeguard has not checked"


def command_args(args: ClaudeArgs) -> ClaudeArgs:
    """The words after the sub-command's name with the options its own node read (indexes into
    those words): what ``claude agents ...`` gives the sessions it dispatches."""
    at = (args.subcommand_index if args.subcommand_index is not None else len(args.argv)) + len(args.command)
    out = ClaudeArgs(args.argv[at:])
    out.options = {name: [(i - at, vals) for i, vals in found] for name, found in args.command_options.items()}
    out.cli_version, out.table_version = args.cli_version, args.table_version
    return out


def read_args(argv: list[str], real_cli: str | None) -> ClaudeArgs:
    """``argv`` as the installed CLI at ``real_cli`` reads it (its version's table)."""
    return parse_claude_args(argv, cli_version=installed_version(real_cli))


def reread(args: ClaudeArgs, real_cli: str) -> None:
    """Read ``args.argv`` again, in place, for the CLI the config named (``claude.path``), when
    its version is not the one the first reading assumed."""
    version = installed_version(real_cli)
    if version != args.cli_version:
        vars(args).update(vars(parse_claude_args(args.argv, cli_version=version)))


def _value_indexes(out: ClaudeArgs) -> set[int]:
    """The argv indexes commander reads as an option's value (not the option words)."""
    found: set[int] = set()
    for options in (out.options, out.command_options):
        for found_at in options.values():
            for index, vals in found_at:
                word = out.argv[index]
                if "=" in word or (len(word) > 2 and word[0] == "-" and word[1] != "-"):
                    continue  # --opt=value, -dvalue: the value is in the word itself
                found.update(range(index + 1, index + 1 + len(vals)))
    return found


def _misread(out: ClaudeArgs, table: Any) -> tuple[int, str] | None:
    """A word main() reads as one of its early options (EARLY_SETTINGS, BACKGROUND) where
    commander reads it as another option's value, or past ``--``: (index, main()'s reader)."""
    argv = out.argv
    values = _value_indexes(out)
    end = out.end_of_options if out.end_of_options is not None else len(argv)
    eager = table.get("eager")
    if eager:
        # 2.1.330+: main()'s eager reader (the same walk as its -p test) stops at `--`
        _prepare_eager(eager)
        i = 0
        while i < len(argv) and argv[i] != "--":
            name = argv[i].partition("=")[0]
            if (name in EARLY_SETTINGS or argv[i] in BACKGROUND) and i in values:
                return i, "its early reader"
            i = _eager_step(argv, i, eager) + 1
        return None
    for i, word in enumerate(argv):
        if word in BACKGROUND and (i in values or i > end):
            return i, "its background launch (the word anywhere)"
    i = 0
    while i < len(argv) and argv[i] != "--":
        name = argv[i].partition("=")[0]
        if name in EARLY_SETTINGS and i in values:
            return i, "its early settings loader"
        if argv[i] in EARLY_SETTINGS_STEPS_2_1_197:
            i += 1
        i += 1
    return None


def _subsequence(path: tuple[str, ...], words: list[str]) -> bool:
    it = iter(words)
    return all(any(w == p for w in it) for p in path)


def _classify(out: ClaudeArgs) -> None:
    version = _version_tuple(out.table_version or "0")
    if out.unknown:
        out.kind = UNKNOWN
        at, word = out.unknown[0]
        out.why = f"{word} is not an option or command Claude Code {out.table_version} has here"
        # On a CLI newer than its table the unknown option may be a flag, and a later word a
        # command that runs tools unguarded (`mcp --new serve`): such a run is never let through.
        words = [*out.command, *out.argv[at + 1:]]
        for path, (kind, why) in KINDS.items():
            if kind == UNGUARDED and _subsequence(path, words):
                out.why_unguarded = f"{' '.join(path)} {why}"
                break
        return
    if out.has("--version") and not out.command:
        out.kind, out.why = PASS, PRINTS_VERSION
        return
    if out.help:
        out.kind, out.why = PASS, PRINTS_HELP
        return
    if not out.command:
        out.kind = SESSION
        return
    first = out.command[0]
    if out.early and first.startswith("-"):
        if first in ("--version", "-v"):
            out.kind, out.why = PASS, PRINTS_VERSION
        elif first in ("--update", "--upgrade"):
            out.kind, out.why = _kind_of(out.command, version)
        else:
            out.kind, out.why = INTERNAL
        return
    if out.command == ("daemon",):
        words = out.argv[(out.subcommand_index or 0) + 1:]
        if words[:1] == ["status"] and all(_maybe_option(w) for w in words[1:]):
            out.kind, out.why = PASS, "shows the daemon's state"
            return
    if out.command == ("project",) and not out.early:
        out.kind, out.why = PASS, PRINTS_HELP
        return
    out.kind, out.why = _kind_of(out.command, version)
