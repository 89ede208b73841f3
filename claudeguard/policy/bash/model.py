"""What the walk of a command line finds, and where it stands while it walks.

The records rules are matched on (``Split``, ``Invocation``, ``Target``) and the walk's own
state: what it found so far (``Findings``, shared by the walks of nested code), where it is
(``Ctx``: the directory ``cd`` moved to, what stdin holds, the outermost command) and one shell
word (``Word``). ``Walk`` is the walk of one piece of source as the modules after this one see
it: each reads one concern (words, redirections, shells, wrappers, programs with rules of their
own) and calls back through it for what runs inside (``walk._Walker`` is the one there is).
"""

from __future__ import annotations

import _thread
import posixpath

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Protocol

    from tree_sitter import Node

MAX_DEPTH = 8  # nested shells (sh -c, heredocs, eval, trap) and substitutions; deeper is unknown
MAX_TREE_DEPTH = 120  # syntax-tree nesting walked; deeper is unknown
MAX_BYTES = 64 * 1024  # a longer command is not read at all
UNKNOWN_DIR = "\0"  # Target.base after a ``cd`` to a directory computed at run time

PARSER_LOCK = _thread.allocate_lock()  # one parser per process; the service answers hooks on threads
_STD_DIRS = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/", "/usr/local/sbin/",
             "/opt/homebrew/bin/")


class Target:
    """A file a command reads or writes. ``path`` as written after quote removal (None: computed
    at run time); ``base`` the directory a relative path is taken from ("" the call's cwd, an
    earlier literal ``cd``'s directory, or ``UNKNOWN_DIR``); ``kind`` "redirect" (``>``), "option"
    (``tee``, ``-o``, ``--output=``, ``find -fprint``: side effects the Edit rules decide) or
    "operand" (what the program is for: ``rm x``, ``cp a b``); ``via`` a few words for reasons."""

    __slots__ = ("path", "base", "kind", "via")

    def __init__(self, path: str | None, base: str, kind: str, via: str) -> None:
        self.path = path
        self.base = base
        self.kind = kind
        self.via = via

    def absolute(self, cwd: str, home: str) -> str | None:
        """The path made absolute (``~`` expanded, ``..`` resolved lexically), or None when the
        path or the directory it is relative to is not known before running."""
        path = self.path
        if path is None:
            return None
        if path == "~" or path.startswith("~/"):
            path = home + path[1:]
        elif path.startswith("~"):
            return None  # ~user
        if not path.startswith("/"):
            if self.base == UNKNOWN_DIR:
                return None
            base = self.base
            if base == "~" or base.startswith("~/"):
                base = home + base[1:]
            if not base.startswith("/"):
                base = cwd.rstrip("/") + "/" + base if base else cwd
            path = base.rstrip("/") + "/" + path
        path = posixpath.normpath(path)
        return "/" + path.lstrip("/")

    def __repr__(self) -> str:
        return f"Target({self.path!r}, {self.kind}, via={self.via!r})"


class Invocation:
    """One program the command runs, as rules see it.

    ``words``: its literal words after quote removal, from the command word on (wrappers and
    leading assignments removed; a word that is not literal is kept as written). ``text``: the
    same words as written, joined by one space (what a grant rule names). ``allow_texts``: the
    readings an allow rule may match; ``deny_texts``: every reading deny and ask rules are tried
    on (wrappers kept and removed, quotes removed, paths reduced to names, redirections kept).
    ``writes``/``reads``: its files. ``unknown``: code it runs that the guard cannot read
    ("python3 -c"); ``changes``: it writes or may write (read-only agents). ``surface``: the
    outermost command as written that holds it (what Claude Code's own rules would match).
    Plain slotted classes rather than dataclasses: this is built on every Bash call.
    """

    __slots__ = ("words", "text", "plain", "allow_texts", "deny_texts", "writes", "reads", "unknown", "changes",
                 "surface", "runs_path", "implicit", "nested")

    def __init__(self, words: list[str], text: str, plain: str, allow_texts: tuple[str, ...],
                 deny_texts: tuple[str, ...], writes: list[Target], reads: list[Target], changes: bool,
                 surface: str) -> None:
        self.words = words
        self.text = text
        self.plain = plain
        self.allow_texts = allow_texts
        self.deny_texts = deny_texts
        self.writes = writes
        self.reads = reads
        self.unknown: str | None = None  # set when the walk notes code it runs that cannot be read
        self.changes = changes
        self.surface = surface
        self.runs_path: str | None = None  # the command word when it is a path (./t, /usr/bin/touch)
        # a shell whose program was read (``sh -c 'ls'``): what it runs are invocations of their
        # own, so it needs no allow rule itself (deny and ask rules still meet it)
        self.implicit = False
        # run by another command (a wrapper, find -exec, a -c string, a substitution, a
        # here-document a shell reads): Claude Code's own rules see only the outer command
        self.nested = False

    @property
    def argv(self) -> list[str]:
        return self.words

    @property
    def name(self) -> str:
        return basename(self.words[0]) if self.words else ""

    def __repr__(self) -> str:
        return f"Invocation({self.text!r}{', unknown=' + repr(self.unknown) if self.unknown else ''})"


class Split:
    """Everything one command line runs. ``unknowns``: (reason, index of the invocation it
    belongs to or None); ``ok`` when there is none. ``surfaces``: every outermost command as
    written. ``writes``/``reads``: every file of every invocation, redirections included."""

    __slots__ = ("invocations", "unknowns", "surfaces", "writes", "reads")

    def __init__(self, invocations: list[Invocation], unknowns: list[tuple[str, int | None]], surfaces: list[str],
                 writes: list[Target], reads: list[Target]) -> None:
        self.invocations = invocations
        self.unknowns = unknowns
        self.surfaces = surfaces
        self.writes = writes
        self.reads = reads

    @property
    def parts(self) -> list[Invocation]:
        return self.invocations

    @property
    def ok(self) -> bool:
        return not self.unknowns

    @property
    def reason(self) -> str | None:
        return self.unknowns[0][0] if self.unknowns else None

    def __repr__(self) -> str:
        return f"Split({self.invocations!r}, unknowns={[u for u, _ in self.unknowns]!r})"


def basename(word: str) -> str:
    return word.rsplit("/", 1)[-1] if "/" in word else word


def normalize_space(text: str) -> str:
    """ASCII blanks folded to one space, ends trimmed (no regex: this runs on every Bash call)."""
    for blank in "\t\n\r\f\v":
        if blank in text:
            text = text.replace(blank, " ")
    if "  " in text:
        text = " ".join(text.split(" "))
        while "  " in text:
            text = text.replace("  ", " ")
    return text.strip(" ")


def std_name(word: str) -> str | None:
    """The command name if ``word`` is a bare name or a path in a standard system directory."""
    if "/" not in word:
        return word
    for d in _STD_DIRS:
        if word.startswith(d) and "/" not in word[len(d):]:
            return word[len(d):]
    return None


def is_fd_path(path: str) -> bool:
    return path.startswith(("/dev/fd/", "/proc/self/fd/")) and path.rsplit("/", 1)[-1].isdigit()


def short(text: str) -> str:
    """``text`` cut to 40 characters, for a reason."""
    text = normalize_space(text)
    return text if len(text) <= 40 else text[:39] + "\u2026"


def decode(data: bytes) -> str:
    """Source bytes as text; a slice that cuts a character (only around syntax errors: the
    parser sees non-ASCII bytes as letters) keeps the pieces as replacement characters."""
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")


# -- the walk's state --------------------------------------------------------------------------

# What a pipeline element gives the next one on stdin: None (nothing the guard knows of),
# ("text", literal text) or ("data", where it comes from).
Stream = tuple[str, str] | None


class Findings:
    """What a walk found, shared by the walks of nested code (sh -c, heredocs)."""

    __slots__ = ("invocations", "unknowns", "surfaces", "loose_writes", "loose_reads")

    def __init__(self) -> None:
        self.invocations: list[Invocation] = []
        self.unknowns: list[tuple[str, int | None]] = []
        self.surfaces: list[str] = []
        self.loose_writes: list[Target] = []  # of commands that run nothing (``> f``, ``exec 3>f``)
        self.loose_reads: list[Target] = []

    def unknown(self, reason: str, invocation: int | None = None) -> None:
        if (reason, invocation) not in self.unknowns:
            self.unknowns.append((reason, invocation))


class Ctx:
    """Where the walk is: the directory relative paths are taken from (``cd`` moves it), what
    stdin holds for the command, and the outermost command being read (its surface)."""

    __slots__ = ("cwd", "surface", "insert_at", "redirs", "nested", "stdin")

    def __init__(self, cwd: str = "", surface: str | None = None, nested: bool = False,
                 stdin: Stream = None) -> None:
        self.cwd = cwd
        self.surface = surface
        self.nested = nested  # inside another command: a substitution, a -c string, a here-document
        self.stdin = stdin  # what a command reads when nothing else feeds it: a compound's input
        self.insert_at: int | None = None  # where the command being read goes: before what its words ran
        self.redirs: list[tuple[str, str]] = []  # the command's redirections (as written, quotes removed)

    def copy(self, nested: bool = False, stdin: Stream = None) -> Ctx:
        # without the redirections: they belong to one command
        return Ctx(self.cwd, self.surface, self.nested or nested, stdin or self.stdin)

    def cd(self, args: list[str]) -> None:
        """Where ``cd ARGS`` (``env -C``, ``git -C``) moves the directory of the commands after it."""
        operands = [a for a in args if not a.startswith("-") or a == "-"]
        if not operands:
            self.cwd = "~"
            return
        target = operands[0]
        if target == "-" or "$" in target or "`" in target or target.startswith("~") and target[1:2] not in ("", "/"):
            self.cwd = UNKNOWN_DIR
        elif self.cwd == UNKNOWN_DIR or target.startswith(("/", "~")):
            self.cwd = target if target.startswith(("/", "~")) else UNKNOWN_DIR
        else:
            self.cwd = (self.cwd.rstrip("/") + "/" + target) if self.cwd else target


class Word:
    """One shell word: ``value`` after quote removal (as written where it is not literal)."""

    __slots__ = ("value", "src", "literal", "glob", "brace", "quoted", "node")

    def __init__(self, value: str, src: str, literal: bool, glob: bool, brace: bool, quoted: bool,
                 node: Node | None) -> None:
        self.value = value
        self.src = src
        self.literal = literal
        self.glob = glob
        self.brace = brace
        self.quoted = quoted
        self.node = node


def lit(value: str) -> Word:
    """A literal word the walk makes itself (an operator, ``.`` for ``find`` with no start)."""
    return Word(value, value, True, False, False, False, None)


if TYPE_CHECKING:
    class Walk(Protocol):
        """The walk of one piece of source (the command line, or code found in it), as the
        modules that read one concern see it: its bytes, its depth of nesting, what it found,
        and the calls back into the walk for what runs inside (``walk._Walker``)."""

        data: bytes
        depth: int
        out: Findings
        via: str  # how this code is run ("bash -c"), for reasons

        def text(self, node: Node) -> str: ...

        def statements(self, node: Node, ctx: Ctx, level: int) -> None:
            """Every statement below ``node``, in order (a substitution's, a loop's)."""

        def run(self, words: list[Word], start: int, ctx: Ctx, stdin: Stream, writes: list[Target],
                reads: list[Target], outer: list[list[Word]], level: int) -> Stream:
            """The program ``words[start:]`` runs, with what it runs in turn."""

        def code(self, text: str, ctx: Ctx, via: str) -> None:
            """``text`` walked as the program it is (a ``-c`` string, what a shell reads)."""

        def deeper(self, source: str, via: str) -> Walk:
            """A walk of other source one level deeper, adding to the same findings."""
