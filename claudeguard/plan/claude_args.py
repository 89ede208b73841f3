"""Read the real CLI's own arguments without changing them: which options take values, whether
this run is a session (interactive or ``-p``) or a pass-through (``--version``, ``doctor``, ``mcp``),
and the caller's choices the guard must respect (permission mode, prompt tool, settings ...).

The option table mirrors ``claude --help`` of the pinned versions (docs/cli-help/) plus the hidden
options the Agent SDK passes. Commander semantics: ``<v>`` takes one value, ``<v...>`` takes values
up to the next option, ``[v]`` takes the next word only if it does not start with ``-``.
"""

from __future__ import annotations

ONE = "one"
MANY = "many"
OPTIONAL = "optional"

VALUE_OPTIONS: dict[str, str] = {
    "--add-dir": MANY,
    "--agent": ONE,
    "--agents": ONE,
    "--allowedTools": MANY,
    "--allowed-tools": MANY,
    "--append-system-prompt": ONE,
    "--append-system-prompt-file": ONE,
    "--autocompact": ONE,
    "--betas": MANY,
    "--cloud": OPTIONAL,
    "--debug": OPTIONAL,
    "-d": OPTIONAL,
    "--debug-file": ONE,
    "--disallowedTools": MANY,
    "--disallowed-tools": MANY,
    "--effort": ONE,
    "--environment": ONE,
    "--fallback-model": ONE,
    "--file": MANY,
    "--from-pr": OPTIONAL,
    "--input-format": ONE,
    "--json-schema": ONE,
    "--max-budget-usd": ONE,
    "--max-turns": ONE,
    "--managed-settings": ONE,
    "--max-thinking-tokens": ONE,
    "--mcp-config": MANY,
    "--model": ONE,
    "--name": ONE,
    "-n": ONE,
    "--output-format": ONE,
    "--permission-mode": ONE,
    "--permission-prompt-tool": ONE,
    "--permission-prompts": ONE,
    "--plugin-dir": ONE,
    "--plugin-url": ONE,
    "--prompt-suggestions": OPTIONAL,
    "--remote-control": OPTIONAL,
    "--remote-control-session-name-prefix": ONE,
    "--resume": OPTIONAL,
    "-r": OPTIONAL,
    "--session-id": ONE,
    "--setting-sources": ONE,
    "--settings": ONE,
    "--system-prompt": ONE,
    "--system-prompt-file": ONE,
    "--system-prompt-snapshot": ONE,
    "--teleport": OPTIONAL,
    "--tools": MANY,
    "--worktree": OPTIONAL,
    "-w": OPTIONAL,
    "--sdk-url": ONE,
    "--resume-session-at": ONE,
}

# Sub-commands of the real CLI (both pinned versions): the guard passes these through untouched.
SUBCOMMANDS = frozenset(
    "agents attach auth auto-mode doctor gateway import install logs mcp plugin plugins purge "
    "respawn rm setup-token stop kill ultrareview update upgrade migrate-installer config project".split()
)

# Short flags without values that may be bundled (-pc) or stand alone.
BOOL_SHORT = {"-p": "--print", "-c": "--continue", "-h": "--help", "-v": "--version"}


class ClaudeArgs:
    """The caller's argv as the CLI will read it (plain class: kept off dataclasses for start-up)."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.options: dict[str, list[tuple[int, list[str]]]] = {}  # name -> [(index, values)]
        self.positionals: list[int] = []  # indexes of bare words
        self.subcommand: str | None = None
        self.subcommand_index: int | None = None  # where it stands in argv (parsing stops there)

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
    def passthrough(self) -> bool:
        """True when the CLI will not start a model session: version, help, a sub-command."""
        return self.subcommand is not None or self.has("--version", "--help")

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


def parse_claude_args(argv: list[str]) -> ClaudeArgs:
    out = ClaudeArgs(list(argv))
    i = 0
    n = len(argv)

    def add(name: str, index: int, vals: list[str]) -> None:
        out.options.setdefault(name, []).append((index, vals))

    while i < n:
        arg = argv[i]
        if arg == "--":
            out.positionals.extend(range(i + 1, n))
            break
        if arg.startswith("--"):
            name, eq, inline = arg.partition("=")
            kind = VALUE_OPTIONS.get(name)
            if name == "--background":
                name = "--bg"
            if eq:
                add(name, i, [inline])
                i += 1
                continue
            if kind == ONE:
                add(name, i, argv[i + 1 : i + 2])
                i += 2
                continue
            if kind == MANY:
                j = i + 1
                while j < n and not argv[j].startswith("-"):
                    j += 1
                add(name, i, argv[i + 1 : j])
                i = j
                continue
            if kind == OPTIONAL:
                if i + 1 < n and not argv[i + 1].startswith("-"):
                    add(name, i, [argv[i + 1]])
                    i += 2
                else:
                    add(name, i, [])
                    i += 1
                continue
            add(name, i, [])
            i += 1
            continue
        if arg.startswith("-") and len(arg) > 1:
            if arg in VALUE_OPTIONS:
                long = {"-d": "--debug", "-n": "--name", "-r": "--resume", "-w": "--worktree"}[arg]
                kind = VALUE_OPTIONS[arg]
                if kind == ONE or (kind == OPTIONAL and i + 1 < n and not argv[i + 1].startswith("-")):
                    add(long, i, argv[i + 1 : i + 2])
                    i += 2
                else:
                    add(long, i, [])
                    i += 1
                continue
            # bundled booleans such as -pc
            for ch in arg[1:]:
                add(BOOL_SHORT.get(f"-{ch}", f"-{ch}"), i, [])
            i += 1
            continue
        # With -p the CLI reads every bare word as the prompt (`claude -p mcp list` asks the model).
        if not out.positionals and out.subcommand is None and arg in SUBCOMMANDS and "--print" not in out.options:
            out.subcommand = arg
            out.subcommand_index = i
            break
        out.positionals.append(i)
        i += 1
    return out
