"""From a command line to what it runs: every invocation, every file it reads or writes, and
everything the guard cannot read (``split_command``).

The syntax tree comes from tree-sitter-bash (``grammar``); this module walks it the way bash
runs it: lists, pipelines, subshells, braces, ``if``/``while``/``for`` bodies, functions (their
bodies count as run), ``$(...)``, backticks, ``<(...)``, here-documents. Then each simple command
is read the way the program reads its arguments: wrappers (``timeout``, ``env``, ``xargs``,
``find -exec``, ``sudo``, ...) are unwrapped with their own option grammars (``programs``,
``options``); a shell's ``-c`` string, the here-document or here-string a shell reads, and the
literal text ``echo``/``printf``/``cat`` pipe into a shell are parsed again as the program they
are; ``trap`` and ``alias`` bodies and ``eval``'s literal words too.

What cannot be read is recorded with a reason (``Split.unknowns``), never guessed: an ERROR or
MISSING node, nesting past ``MAX_DEPTH``, a command over ``MAX_BYTES``, a command word that is
not a literal after quote removal, ``eval``, ``source`` of anything but a literal path, code
given inline to an interpreter (``python3 -c``, ``awk 'BEGIN{system(...)}'``, ``git -c
alias.x=...``), data piped into a shell, an option of a wrapper, shell or interpreter that its
grammar does not know. An unknown tied to one invocation (``python3 -c``) names it, so that an
explicit allow rule for that program still allows it.

Where tree-sitter-bash and bash disagree, the walker checks: a backslash-newline joining two
words, a here-document's end line found where bash would not find it, unparsed backquotes in a
here-document: each is an unknown.
"""

from __future__ import annotations

import _thread
import posixpath
import re

from claudeguard.policy.bash import grammar, options, programs
from claudeguard.policy.bash.writes import argv_writes

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from tree_sitter import Node

MAX_DEPTH = 8  # nested shells (sh -c, heredocs, eval, trap) and substitutions; deeper is unknown
MAX_TREE_DEPTH = 120  # syntax-tree nesting walked; deeper is unknown
MAX_BYTES = 64 * 1024  # a longer command is not read at all
UNKNOWN_DIR = "\0"  # Target.base after a ``cd`` to a directory computed at run time

_LOCK = _thread.allocate_lock()  # one parser per process; the service answers hooks on threads
_WORD_TYPES = frozenset({
    "word", "string", "raw_string", "ansi_c_string", "translated_string", "concatenation", "number",
    "simple_expansion", "expansion", "command_substitution", "process_substitution", "arithmetic_expansion",
    "brace_expression", "special_variable_name", "variable_name", "extglob_pattern", "regex",
})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_COMPOUND = frozenset({"if_statement", "while_statement", "for_statement", "c_style_for_statement", "case_statement",
                       "compound_statement", "subshell", "function_definition"})
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_GLOB = frozenset("*?[")
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
                 deny_texts: tuple[str, ...], writes: list[Target], reads: list[Target], unknown: str | None,
                 changes: bool, surface: str, runs_path: str | None) -> None:
        self.words = words
        self.text = text
        self.plain = plain
        self.allow_texts = allow_texts
        self.deny_texts = deny_texts
        self.writes = writes
        self.reads = reads
        self.unknown = unknown
        self.changes = changes
        self.surface = surface
        self.runs_path = runs_path  # the command word when it is a path (./t, /usr/bin/touch)
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


def _std_name(word: str) -> str | None:
    """The command name if ``word`` is a bare name or a path in a standard system directory."""
    if "/" not in word:
        return word
    for d in _STD_DIRS:
        if word.startswith(d) and "/" not in word[len(d):]:
            return word[len(d):]
    return None


# -- the split cache ---------------------------------------------------------------------------

_CACHE: dict[str, Split] = {}


def split_command(command: object) -> Split:
    """What ``command`` runs (see the module docstring). A command that is not a string, or holds
    a NUL byte, runs nothing the guard can read."""
    if not isinstance(command, str):
        return Split([], [("is not a string", None)], [], [], [])
    cached = _CACHE.get(command)
    if cached is not None:
        return cached
    out = _Out()
    if "\0" in command:
        out.unknown("holds a NUL byte")
    elif len(command.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        out.unknown(f"is too long to read ({len(command)} characters)")
    else:
        try:
            _Walker(command, 0, out, "").program(_Ctx())
        except RecursionError:
            out.unknown("is nested too deeply to read")
        except (ImportError, OSError) as exc:  # no parser: nothing can be read
            out.unknown(f"cannot be read: the Bash parser cannot load ({exc})")
    split = Split(out.invocations, out.unknowns, out.surfaces, [t for i in out.invocations for t in i.writes]
                  + out.loose_writes, [t for i in out.invocations for t in i.reads] + out.loose_reads)
    if len(_CACHE) > 256:
        _CACHE.clear()
    _CACHE[command] = split
    return split


def command_writes(command: str) -> bool:
    """True when any part of ``command`` writes a file, or when the command cannot be read."""
    split = split_command(command)
    return not split.ok or bool(split.writes) or any(i.changes for i in split.invocations)


# -- the walk ----------------------------------------------------------------------------------


# What a pipeline element gives the next one on stdin: None (nothing the guard knows of),
# ("text", literal text) or ("data", where it comes from).
Stream = tuple[str, str] | None


class _Out:
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


class _Ctx:
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

    def copy(self, nested: bool = False, stdin: Stream = None) -> _Ctx:
        # without the redirections: they belong to one command
        return _Ctx(self.cwd, self.surface, self.nested or nested, stdin or self.stdin)


class _Word:
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


def _lit(value: str) -> _Word:
    return _Word(value, value, True, False, False, False, None)




class _Redir:
    __slots__ = ("op", "fd", "target", "stdin", "shown")

    def __init__(self, op: str, fd: str | None, target: _Word | None, stdin: Stream, shown: str = "") -> None:
        self.op = op
        self.fd = fd
        self.target = target
        self.stdin = stdin
        self.shown = shown  # e.g. "2>&1", "> out.txt", "<<'EOF'"

    def readings(self) -> tuple[str, str]:
        """(as written, with quotes removed) for the invocation's readings."""
        word = self.target
        if word is None:
            return self.shown, self.shown
        prefix = (self.fd or "") + self.op
        return f"{prefix} {word.src}", f"{prefix} {word.value}"


class _Walker:
    """The walk of one piece of source (the command line, or code found in it)."""

    __slots__ = ("src", "data", "depth", "out", "via")

    def __init__(self, source: str, depth: int, out: _Out, via: str) -> None:
        self.src = source
        self.data = source.encode("utf-8", "surrogatepass")
        self.depth = depth
        self.out = out
        self.via = via  # how this code is run ("bash -c"), for reasons

    def text(self, node: Node) -> str:
        return _decode(self.data[node.start_byte:node.end_byte])

    # -- statements --------------------------------------------------------------------------

    def program(self, ctx: _Ctx) -> None:
        with _LOCK:
            tree = grammar.parse(self.data)
        root = tree.root_node
        if root.has_error:
            self.out.unknown(self._error_reason(root))
        if self.data.count(b"`") > 2 and _stray_backquote(root):
            # tree-sitter-bash reads `a` `b;c` as one substitution holding a "` `" token
            self.out.unknown("has backquotes the guard cannot read")
        at = self.data.find(b"\n\\")
        while at >= 0:
            # tree-sitter-bash joins a line that starts with a backslash to the line before
            # (`aa<newline>\bb` as one command aa with the word "\nbb"); bash runs two commands
            if not self._inside_quotes(root, at + 1):
                self.out.unknown("has a line that starts with a backslash, which the guard does not read")
                break
            at = self.data.find(b"\n\\", at + 2)
        self.statements(root, ctx, 0)

    def _error_reason(self, root: Node) -> str:
        node = _first_error(root)
        where = ""
        if node is not None:
            snippet = self.text(node).strip().splitlines()
            if node.is_missing:
                where = f": missing '{node.type}'"
            elif snippet:
                where = f" near `{snippet[0][:30]}`"
        prefix = f"has code for {self.via} that " if self.via else ""
        return f"{prefix}cannot be parsed (a syntax error{where})"

    def statements(self, node: Node, ctx: _Ctx, level: int) -> None:
        """Every statement below ``node``, in order; ``cd`` moves ``ctx`` for the ones after it."""
        for child in node.children:
            self.statement(child, ctx, level + 1)

    def statement(self, node: Node, ctx: _Ctx, level: int) -> Stream:
        if level > MAX_TREE_DEPTH:
            self.out.unknown("is nested too deeply to read")
            return None
        kind = node.type
        if not node.is_named or kind == "comment":
            return None
        if kind in _COMPOUND and not ctx.nested:
            # What runs inside a loop, a condition, a group or a function body is run by it
            # (Claude Code's rules see the compound command); ``cd`` inside still moves ctx.
            ctx.nested = True
            try:
                return self.statement(node, ctx, level)
            finally:
                ctx.nested = False
        if kind in ("program", "list", "do_group", "else_clause", "elif_clause", "if_statement",
                    "while_statement"):
            self.statements(node, ctx, level)
            return None
        if kind == "compound_statement":
            first = node.children[0] if node.child_count else None
            if first is not None and first.type == "((":
                self.out.unknown("evaluates arithmetic, which can run code through variables: ((...))")
                self._words_in(node, ctx, level)
                return None
            self.statements(node, ctx, level)
            return None
        if kind == "subshell":
            self.statements(node, ctx.copy(), level)
            return None
        if kind == "negated_command":
            for child in node.children:
                self.statement(child, ctx, level + 1)
            return None
        if kind == "pipeline":
            return self.pipeline([(c, []) for c in node.children if c.is_named and c.type != "comment"], ctx, level)
        if kind == "redirected_statement":
            return self.redirected(node, ctx, level)
        if kind == "command":
            return self.command(node, [], ctx, None, level)
        if kind in ("variable_assignment", "variable_assignments"):
            return self.command(node, [], ctx, None, level)
        if kind in ("declaration_command", "unset_command", "test_command"):
            return self.command(node, [], ctx, None, level)
        if kind == "for_statement":
            if node.children and node.children[0].type == "select":
                self.out.unknown("uses select, which the guard does not read")
            for child in node.children:
                if child.type in _WORD_TYPES and child.type != "variable_name":
                    self.word(child, ctx, level)
                elif child.is_named and child.type != "variable_name":
                    self.statement(child, ctx, level + 1)
            return None
        if kind == "c_style_for_statement":
            self.out.unknown("evaluates arithmetic, which can run code through variables: for ((...))")
            self._words_in(node, ctx, level)
            return None
        if kind == "case_statement":
            self.out.unknown("uses case, which the guard does not read")
            self._words_in(node, ctx, level)
            return None
        if kind == "function_definition":
            body = node.child_by_field_name("body")
            if body is not None:
                self.statement(body, ctx.copy(), level + 1)  # its body counts as run
            return None
        if kind == "ERROR":
            self._words_in(node, ctx, level)
            return None
        if kind in _WORD_TYPES:
            self.word(node, ctx, level)
            return None
        self.out.unknown(f"holds a {kind.replace('_', ' ')} the guard does not read")
        self._words_in(node, ctx, level)
        return None

    def _words_in(self, node: Node, ctx: _Ctx, level: int) -> None:
        """Everything that runs below a node the walk does not analyse: its commands and the
        substitutions in its words (so a deny found there still counts)."""
        for child in node.children:
            if child.type in ("command", "redirected_statement", "pipeline", "list", "subshell",
                              "compound_statement", "if_statement", "while_statement", "for_statement",
                              "function_definition", "negated_command", "case_item", "do_group"):
                if child.type == "case_item":
                    self._words_in(child, ctx, level + 1)
                else:
                    self.statement(child, ctx.copy(), level + 1)
            elif child.type in _WORD_TYPES:
                self.word(child, ctx, level + 1)
            elif child.child_count:
                self._words_in(child, ctx, level + 1)

    def redirected(self, node: Node, ctx: _Ctx, level: int) -> Stream:
        """``body redirections``; tree-sitter-bash hangs the rest of a line that follows a
        here-document's start (``cat <<EOF | sh``, ``&& next``) under the here-document."""
        body = node.child_by_field_name("body")
        redirects: list[Node] = []
        tail_pipeline: list[Node] = []
        after: list[Node] = []
        for child in node.children:
            if child.type in _REDIRECTS:
                redirects.append(child)
                if child.type == "heredoc_redirect":
                    for part in child.children:
                        if part.type == "pipeline":
                            tail_pipeline.extend(c for c in part.children if c.is_named and c.type != "comment")
                        elif part.type in ("file_redirect", "herestring_redirect"):
                            redirects.append(part)
                        elif part.is_named and part.type not in ("heredoc_start", "heredoc_body", "heredoc_end"):
                            after.append(part)
        out: Stream = None
        if body is None:
            self._loose_redirects(self.redirections(redirects, ctx, level), ctx)
        else:
            out = self._attach(body, redirects, tail_pipeline, ctx, level)
        for part in after:
            self.statement(part, ctx, level + 1)
        return out

    def _attach(self, body: Node, redirects: list[Node], tail: list[Node], ctx: _Ctx, level: int) -> Stream:
        """Redirections belong to the last command: tree-sitter-bash hangs them on a whole list or
        pipeline (``a && b > f`` redirects b alone, as bash does)."""
        if level > MAX_TREE_DEPTH:
            self.out.unknown("is nested too deeply to read")
            return None
        if body.type == "list":
            named = [c for c in body.children if c.is_named and c.type != "comment"]
            for child in named[:-1]:
                self.statement(child, ctx, level + 1)
            return self._attach(named[-1], redirects, tail, ctx, level + 1) if named else None
        if body.type == "pipeline" or tail:
            elements: list[tuple[Node, list[Node]]]
            if body.type == "pipeline":
                elements = [(c, []) for c in body.children if c.is_named and c.type != "comment"]
                elements[-1] = (elements[-1][0], redirects)
            else:
                elements = [(body, redirects)]
            elements += [(c, []) for c in tail]
            return self.pipeline(elements, ctx, level)
        return self.element(body, redirects, ctx, None, level)

    def pipeline(self, elements: list[tuple[Node, list[Node]]], ctx: _Ctx, level: int) -> Stream:
        flat: list[tuple[Node, list[Node]]] = []
        todo = list(reversed(elements))
        while todo:  # tree-sitter nests pipelines after a here-document: one pipe all the same
            node, redirects = todo.pop()
            if node.type == "pipeline" and not redirects:
                todo += reversed([(c, []) for c in node.children if c.is_named and c.type != "comment"])
            else:
                flat.append((node, redirects))
        stream: Stream = None
        for index, (node, redirects) in enumerate(flat):
            inner = ctx.copy() if len(flat) > 1 else ctx  # each element runs in a subshell
            stream = self.element(node, redirects, inner, stream if index else None, level + 1)
        return stream

    def element(self, node: Node, redirects: list[Node], ctx: _Ctx, stdin: Stream, level: int) -> Stream:
        """One pipeline element (or a lone statement) with its redirections."""
        if node.type == "command":
            return self.command(node, redirects, ctx, stdin, level)
        redirs = self.redirections(redirects, ctx, level)
        for redir in redirs:
            if redir.stdin is not None or redir.op == "<":
                stdin = redir.stdin or ("data", "a file")
        # What a compound command reads (a pipe, < file, a here-document) is read by the commands
        # inside it, any of them: a shell there reads data, not a program the guard has seen.
        outer_stdin = ctx.stdin
        if stdin is not None:
            ctx.stdin = ("data", "the input of a compound command")
        try:
            out = self.redirected(node, ctx, level) if node.type == "redirected_statement" else self.statement(
                node, ctx, level)
        finally:
            ctx.stdin = outer_stdin
        self._loose_redirects(redirs, ctx)
        return out if node.type == "redirected_statement" else None

    def _loose_redirects(self, redirs: list[_Redir], ctx: _Ctx) -> None:
        """Redirections of a compound command (``{ ...; } > f``) or of nothing at all."""
        for redir in redirs:
            target = self._target(redir, ctx)
            if target is not None:
                (self.out.loose_writes if target[0] == "w" else self.out.loose_reads).append(target[1])

    # -- words -------------------------------------------------------------------------------

    def word(self, node: Node, ctx: _Ctx, level: int) -> _Word:
        """A word's value after quote removal; substitutions inside it are walked (they run)."""
        parts: list[str] = []
        flags = [True, False, False, False]  # literal, glob, brace, quoted
        self._word_parts(node, ctx, level, parts, flags, quoted=False)
        src = self.text(node)
        value = "".join(parts) if flags[0] else src
        return _Word(value, src, flags[0], flags[1], flags[2], flags[3], node)

    def _word_parts(self, node: Node, ctx: _Ctx, level: int, parts: list[str], flags: list[bool],
                    quoted: bool) -> None:
        if level > MAX_TREE_DEPTH:
            self.out.unknown("is nested too deeply to read")
            flags[0] = False
            return
        kind = node.type
        text = self.text(node)
        if kind in ("word", "number", "special_variable_name", "variable_name", "regex", "extglob_pattern"):
            if quoted:
                parts.append(text)
                return
            if "\n" in text:  # no unquoted word holds a newline: the parser has read it wrong
                self.out.unknown("has a word across lines, which the guard does not read")
                flags[0] = False
                return
            value = _unescape_unquoted(text)
            if value is None:
                flags[0] = False
                return
            if any(c in _GLOB for c in _unquoted_chars(text)):
                flags[1] = True
            if "{" in text and ("," in text or ".." in text):
                flags[2] = True
            parts.append(value)
            return
        if kind == "raw_string":
            flags[3] = True
            parts.append(text[1:-1])
            return
        if kind == "ansi_c_string":
            flags[3] = True
            value = _ansi_c(text[2:-1])
            if value is None:
                flags[0] = False
            else:
                parts.append(value)
            return
        if kind == "translated_string":  # $"..."
            for child in node.children:
                if child.is_named:
                    self._word_parts(child, ctx, level + 1, parts, flags, quoted)
            return
        if kind == "string":
            flags[3] = True
            children = node.children
            if children and children[0].type == '"' and children[-1].type == '"' and len(children) > 1:
                children = children[1:-1]
            for child in children:
                if child.type == "string_content":
                    parts.append(_unescape_double(self.text(child)))
                elif child.is_named:
                    self._word_parts(child, ctx, level + 1, parts, flags, quoted=True)
                else:
                    parts.append(self.text(child))  # a lone "$"
            return
        if kind == "concatenation":
            raw = [c for c in node.children if c.type == "word"]
            if not quoted and any("{" in self.text(c) for c in raw) and any(
                    "," in self.text(c) or ".." in self.text(c) for c in raw):
                flags[2] = True
            for child in node.children:
                if child.is_named:
                    self._word_parts(child, ctx, level + 1, parts, flags, quoted)
                elif child.type == "$" and _string_follows(child):
                    continue  # $"..." (a translated string): the string follows
                else:
                    parts.append(self.text(child))
            return
        if kind == "brace_expression":
            flags[2] = True
            parts.append(text)
            return
        # Everything else expands at run time.
        flags[0] = False
        if kind in ("command_substitution", "process_substitution"):
            # >(cmd) reads what the command writes into it
            feeds = ("data", "a process substitution") if text.startswith(">(") else None
            self.statements(node, ctx.copy(nested=True, stdin=feeds), level)
            return
        if kind == "arithmetic_expansion":
            if text.startswith("$["):
                self.out.unknown(f"uses the old $[...] arithmetic, which the guard does not read: {_short(text)}")
            elif _has_variable(node):
                self.out.unknown(f"evaluates arithmetic on variables, which can run code: {_short(text)}")
            self._subs_in(node, ctx, level)
            return
        if kind == "expansion":
            self._expansion(node, ctx, level, text)
            return
        if kind == "simple_expansion":
            return
        self._subs_in(node, ctx, level)

    def _expansion(self, node: Node, ctx: _Ctx, level: int, text: str) -> None:
        """``${...}``: indirection, prompt expansion and arithmetic in offsets or subscripts can
        run code held in a variable."""
        tokens = [c.type for c in node.children]
        if len(tokens) > 1 and tokens[1] == "!":
            self.out.unknown(f"expands a variable named by another variable: {_short(text)}")
        if "@" in tokens and text.rstrip("}").endswith(("P", "A", "K", "k")):
            self.out.unknown(f"expands a variable as a prompt: {_short(text)}")
        for child in node.children:
            if child.type == "subscript":
                index = child.child_by_field_name("index")
                if index is not None and index.type not in ("number", "word") or (
                        index is not None and index.type == "word" and self.text(index) not in ("@", "*")
                        and not self.text(index).isdigit()):
                    self.out.unknown(f"evaluates an array subscript, which can run code: {_short(text)}")
        if ":" in tokens and any(t in ("simple_expansion", "expansion", "variable_name", "binary_expression")
                                 for t in tokens[tokens.index(":") + 1:]):
            self.out.unknown(f"evaluates arithmetic on variables, which can run code: {_short(text)}")
        self._subs_in(node, ctx, level)

    def _subs_in(self, node: Node, ctx: _Ctx, level: int) -> None:
        """The substitutions anywhere below ``node`` (they run)."""
        for child in node.children:
            if child.type in ("command_substitution", "process_substitution"):
                feeds = ("data", "a process substitution") if self.text(child).startswith(">(") else None
                self.statements(child, ctx.copy(nested=True, stdin=feeds), level + 1)
            elif child.type == "expansion":
                self._expansion(child, ctx, level + 1, self.text(child))
            elif child.child_count:
                self._subs_in(child, ctx, level + 1)

    # -- redirections ------------------------------------------------------------------------

    def redirections(self, nodes: list[Node], ctx: _Ctx, level: int) -> list[_Redir]:
        out = []
        for node in nodes:
            if node.type == "file_redirect":
                op = ""
                fd = None
                targets: list[_Word] = []
                for child in node.children:
                    if child.type == "file_descriptor":
                        fd = self.text(child)
                    elif not child.is_named:
                        op = self.text(child)
                    elif child.type in _WORD_TYPES:
                        targets.append(self.word(child, ctx, level + 1))
                target = targets[0] if targets else None
                out.append(_Redir(op, fd, target, None, (fd or "") + op))
                for extra in targets[1:]:  # ``echo > f x``: x is an argument of echo
                    out.append(_Redir("arg", None, extra, None))
            elif node.type == "herestring_redirect":
                words = [self.word(c, ctx, level + 1) for c in node.children if c.type in _WORD_TYPES]
                word = words[0] if words else None
                stream: Stream = ("text", word.value + "\n") if word is not None and word.literal else (
                    "data", "a here-string")
                out.append(_Redir("<<<", None, word, stream, "<<<"))
            elif node.type == "heredoc_redirect":
                start = next((c for c in node.children if c.type == "heredoc_start"), None)
                op = "<<-" if any(c.type == "<<-" for c in node.children) else "<<"
                out.append(_Redir("<<", None, None, self.heredoc(node, ctx, level),
                                  op + (self.text(start) if start is not None else "")))
        return out

    def heredoc(self, node: Node, ctx: _Ctx, level: int) -> Stream:
        """The text a here-document gives its command's stdin, checked against bash's own reading
        of where it ends."""
        start = end = body = None
        dash = False
        for child in node.children:
            if child.type == "heredoc_start":
                start = child
            elif child.type == "heredoc_end":
                end = child
            elif child.type == "heredoc_body":
                body = child
            elif child.type == "<<-":
                dash = True
        if start is None or end is None:
            return ("data", "a here-document")
        raw_delim = self.text(start)
        quoted = any(c in raw_delim for c in "'\"\\")
        delim = _unescape_unquoted(raw_delim.replace("'", "").replace('"', "")) or raw_delim
        data = self.data
        first = body.start_byte if body is not None else end.start_byte
        body_start = data.rfind(b"\n", 0, first) + 1
        end_line = data.rfind(b"\n", 0, end.start_byte) + 1
        # bash: the body is every line up to the first that is the delimiter (tabs stripped for <<-)
        pos = body_start
        expected = delim.encode("utf-8", "surrogatepass")
        bash_end = -1
        while pos <= len(data):
            nl = data.find(b"\n", pos)
            line = data[pos:nl if nl >= 0 else len(data)]
            if (line.lstrip(b"\t") if dash else line) == expected:
                bash_end = pos
                break
            if nl < 0:
                break
            pos = nl + 1
        if bash_end != end_line:
            self.out.unknown("has a here-document whose end the guard cannot tell")
            return ("data", "a here-document")
        text = _decode(data[body_start:end_line])
        if dash:
            text = "".join(line.lstrip("\t") for line in text.splitlines(keepends=True))
        if quoted:
            return ("text", text)
        if "\\\n" in text:
            self.out.unknown("has a here-document with a line continuation")
            return ("data", "a here-document")
        if "`" in text or "$" in text:
            return self._expanding_heredoc(text, ctx, level)
        return ("text", text.replace("\\\\", "\\"))

    def _expanding_heredoc(self, text: str, ctx: _Ctx, level: int) -> Stream:
        """An unquoted here-document with ``$`` or backquotes: its substitutions run, and the text
        it gives is not known. tree-sitter-bash leaves backquotes (and, after ``<<-``, ``$(``) in
        the body as plain text, so the body is parsed again as a plain ``<<`` document."""
        if "`" in text.replace("\\`", ""):
            self.out.unknown("has a here-document with backquotes, which the guard does not read")
            return ("data", "a here-document")
        sentinel = "CLAUDEGUARD_END"
        while sentinel in text:
            sentinel += "_"
        if self.depth >= MAX_DEPTH:
            self.out.unknown("is nested too deeply to read")
            return ("data", "a here-document")
        sub = _Walker(f"cat <<{sentinel}\n{text}{sentinel}\n", self.depth + 1, self.out, self.via)
        with _LOCK:
            tree = grammar.parse(sub.data)
        if tree.root_node.has_error:
            self.out.unknown("has a here-document the guard cannot parse")
            return ("data", "a here-document")
        for node in _descendants(tree.root_node, "heredoc_body"):
            for child in node.children:
                if child.type == "heredoc_content":
                    content = sub.text(child).replace("\\$", "")
                    if "$(" in content or "$[" in content:
                        self.out.unknown("has a here-document with a substitution the guard cannot read")
                elif child.is_named:
                    sub._word_parts(child, ctx, level + 1, [], [True, False, False, False], quoted=True)
        return ("data", "a here-document with expansions")

    def _target(self, redir: _Redir, ctx: _Ctx) -> tuple[str, Target] | None:
        """("w", target) for a redirection that writes a file, ("r", target) for one that reads."""
        op = redir.op
        word = redir.target
        if op in _WRITE_OPS and word is not None:
            if op == ">&" and word.literal and (word.value.rstrip("-").isdigit() or word.value == "-"):
                return None  # a file descriptor duplicated or closed: no file
            if word.literal and (word.value in programs.SAFE_TARGETS or _is_fd_path(word.value)):
                return None
            return ("w", Target(word.value if word.literal else None, ctx.cwd, "redirect", f"{op} {word.src}"))
        if op == "<&" or op == ">&-" or op == "<&-":
            return None
        if op == "<" and word is not None:
            return ("r", Target(word.value if word.literal else None, ctx.cwd, "redirect", f"< {word.src}"))
        return None

    # -- simple commands ---------------------------------------------------------------------

    def command(self, node: Node, redirect_nodes: list[Node], ctx: _Ctx, stdin: Stream, level: int) -> Stream:
        surface_set = ctx.surface is None
        if surface_set:
            parent = node.parent
            shown = parent if parent is not None and parent.type == "redirected_statement" and redirect_nodes else node
            ctx.surface = normalize_space(self.text(shown))
            if self.depth == 0:
                self.out.surfaces.append(ctx.surface)
        outer_at = ctx.insert_at
        ctx.insert_at = len(self.out.invocations)
        try:
            return self._command(node, redirect_nodes, ctx, stdin, level)
        finally:
            ctx.insert_at = outer_at
            if surface_set:
                ctx.surface = None

    def _command(self, node: Node, redirect_nodes: list[Node], ctx: _Ctx, stdin: Stream, level: int) -> Stream:
        assignments: list[tuple[str, _Word | None]] = []
        words: list[_Word] = []
        inner_redirects = list(redirect_nodes)
        kind = node.type
        pending_dollar = False
        for child in node.children if not kind.startswith("variable_assignment") else ():
            t = child.type
            if t == "variable_assignment":
                assignments.append(self._assignment(child, ctx, level))
            elif t == "variable_assignments":
                assignments += [self._assignment(c, ctx, level) for c in child.children
                                if c.type == "variable_assignment"]
            elif t == "command_name":
                for c in child.children:
                    if c.is_named:
                        words.append(self.word(c, ctx, level + 1))
            elif t in _REDIRECTS:
                inner_redirects.append(child)
            elif t in ("subscript",):
                words.append(self.word(child, ctx, level + 1))
            elif kind == "test_command" or t in ("unary_expression", "binary_expression", "ternary_expression",
                                                 "parenthesized_expression", "postfix_expression"):
                if not child.is_named:
                    words.append(_lit(self.text(child)))
                else:
                    self._test_words(child, ctx, level, words)
            elif t in _WORD_TYPES:
                word = self.word(child, ctx, level + 1)
                if pending_dollar and child.type == "string":
                    word.src = "$" + word.src
                words.append(word)
            elif not child.is_named and t in ("declare", "typeset", "export", "readonly", "local", "unset",
                                             "unsetenv"):
                words.append(_lit(self.text(child)))
            elif t == "$":
                if _string_follows(child):
                    pending_dollar = True  # $"..." (a translated string)
                    continue
                words.append(_lit("$"))
            elif t == "comment":
                continue
            pending_dollar = False
        if kind == "test_command" and words and words[0].value == "[[" and any(
                w.value in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge") for w in words):
            self.out.unknown("compares numbers in [[ ]], which evaluates variables as arithmetic")
        if kind in ("variable_assignment", "variable_assignments"):
            assignments = [self._assignment(node, ctx, level)] if kind == "variable_assignment" else [
                self._assignment(c, ctx, level) for c in node.children if c.type == "variable_assignment"]
        self._line_continuations(node)
        redirs = self.redirections(inner_redirects, ctx, level)
        ctx.redirs = [r.readings() for r in redirs if r.op != "arg"]
        if stdin is None:
            stdin = ctx.stdin
        for redir in redirs:
            if redir.op == "arg" and redir.target is not None:
                words.append(redir.target)
            elif redir.stdin is not None:
                stdin = redir.stdin
            elif redir.op == "<":
                stdin = ("data", "a file")
        for name, value in assignments:
            if programs.risky_assignment(name, value.value if value is not None and value.literal else None):
                self.out.unknown(f"sets {name}, which changes what a command runs")
        writes: list[Target] = []
        reads: list[Target] = []
        for redir in redirs:
            found = self._target(redir, ctx)
            if found is not None:
                (writes if found[0] == "w" else reads).append(found[1])
        if kind in ("declaration_command",):
            for name, value in assignments:
                words.append(_lit(name if value is None else f"{name}={value.value}"))
        if not words:
            text = normalize_space(" ".join(
                [self.text(node)] if kind.startswith("variable_assignment") else []))
            if text or writes or reads:
                self._add([_lit(text)] if text else [], writes, reads, ctx, [])
            return None
        return self.run(words, 0, ctx, stdin, writes, reads, [], level)

    def _test_words(self, node: Node, ctx: _Ctx, level: int, words: list[_Word]) -> None:
        for child in node.children:
            if child.type in _WORD_TYPES and child.type != "regex":
                words.append(self.word(child, ctx, level + 1))
            elif child.child_count and child.is_named:
                self._test_words(child, ctx, level + 1, words)
            else:
                words.append(_lit(self.text(child)))

    def _assignment(self, node: Node, ctx: _Ctx, level: int) -> tuple[str, _Word | None]:
        name_node = node.child_by_field_name("name")
        name = self.text(name_node) if name_node is not None else self.text(node).split("=", 1)[0]
        if name_node is not None and name_node.type == "subscript":
            self.out.unknown(f"assigns to an array element, whose subscript can run code: {_short(self.text(node))}")
            name = self.text(name_node).split("[", 1)[0]
        value_node = node.child_by_field_name("value")
        value = None
        if value_node is not None:
            if value_node.type == "array":
                for c in value_node.children:
                    if c.type in _WORD_TYPES:
                        self.word(c, ctx, level + 1)
                value = _Word(self.text(value_node), self.text(value_node), False, False, False, False, value_node)
            else:
                value = self.word(value_node, ctx, level + 1)
        elif "=" in self.text(node):
            value = _lit("")
        return name, value

    def _line_continuations(self, node: Node) -> None:
        """bash joins two words that a backslash-newline separates with nothing else between
        them (``gi\\<newline>t``); tree-sitter-bash reads two words."""
        end = node.end_byte
        start = node.start_byte
        chunk = self.data[start:end]
        at = chunk.find(b"\\\n")
        while at >= 0:
            before = chunk[at - 1:at] if at else b" "
            after = chunk[at + 2:at + 3]
            if before not in (b" ", b"\t", b"\n", b"\\") and after not in (b" ", b"\t", b"\n", b""):
                if not self._inside_quotes(node, start + at):
                    self.out.unknown("joins words with a backslash-newline, which the guard does not read")
                    return
            at = chunk.find(b"\\\n", at + 2)

    def _inside_quotes(self, node: Node, offset: int) -> bool:
        """Whether ``offset`` lies in a quoted string or a here-document body (where the
        backslash-newline is not between words)."""
        found = node.descendant_for_byte_range(offset, offset + 1)
        while found is not None and found != node:
            if found.type in ("string", "raw_string", "ansi_c_string", "heredoc_body", "comment"):
                return True
            found = found.parent
        return False

    # -- what a program runs -----------------------------------------------------------------

    def run(self, words: list[_Word], start: int, ctx: _Ctx, stdin: Stream, writes: list[Target],
            reads: list[Target], outer: list[list[_Word]], level: int) -> Stream:
        """The program ``words[start:]`` runs, with what it runs in turn. ``outer``: the
        wrapper commands around it (their readings are kept for deny and ask rules)."""
        if start >= len(words):
            return None
        head = words[start]
        argv = words[start:]
        if not head.literal or head.glob:
            self._add(argv, writes, reads, ctx, outer)
            self.out.unknown(f"runs a command whose name is computed at run time: {_short(head.src)}")
            return None
        if head.brace:
            self.out.unknown(f"runs a command whose name is made by brace expansion: {_short(head.src)}")
        name = _std_name(head.value)  # None for a program outside the system's directories (./timeout)
        prog = basename(head.value)
        values = [w.value for w in argv]
        args = values[1:]
        if name in programs.WRAPPERS or name in programs.PRIVILEGED:
            return self._wrapper(name, words, start, ctx, stdin, writes, reads, outer, level)
        if name is None and (prog in programs.WRAPPERS or prog in programs.PRIVILEGED):
            # ./timeout, ~/bin/env: a program of its own (matched as written) that may be the
            # wrapper: what it would run is read too, for deny and ask rules and for allow
            index = self._add(argv, writes, reads, ctx, outer)
            return self._wrapper(prog, words, start, ctx, stdin, writes, reads, outer, level, as_path=index)
        handler = _HANDLERS.get(prog)
        if handler is not None:
            return handler(self, argv, ctx, stdin, writes, reads, outer, level)
        if prog in programs.RUNS_UNREAD:
            index = self._add(argv, writes, reads, ctx, outer)
            self._note(index, f"runs commands through {prog}, which the guard does not read", coverable=False)
            return None
        runner = programs.runner_start(values)
        if runner is not None:
            return self._runner(argv, runner, ctx, stdin, writes, reads, outer, level)
        if is_shell(prog):
            return self._shell(prog, argv, ctx, stdin, writes, reads, outer, level)
        index = self._add(argv, writes, reads, ctx, outer)
        self._interpreter(prog, argv, ctx, stdin, index)
        self._file_operands(prog, argv, ctx, index)
        if "/" in head.value:
            return self._output(values, stdin)
        if prog == "cd":
            self._cd(args, ctx)
        elif prog == "eval":
            self._note(index, "runs code the guard cannot read: eval", coverable=False)
            if all(w.literal for w in argv[1:]):
                self.code(" ".join(args), ctx, "eval")
        elif prog in ("source", "."):
            self._source(argv, ctx, stdin, index)
        elif prog == "trap":
            self._trap(argv, ctx)
        elif prog == "alias":
            for word in argv[1:]:
                if "=" in word.value:
                    if word.literal:
                        self.code(word.value.split("=", 1)[1], ctx, "alias")
                    else:
                        self.out.unknown("defines an alias the guard cannot read", index)
        elif prog == "hash" and "-p" in args:
            self.out.unknown("makes a name run another program: hash -p", index)
        elif prog == "enable" and any(a.startswith("-") and "f" in a for a in args):
            self.out.unknown("loads a builtin from a shared object: enable -f", index)
        elif prog in ("mapfile", "readarray") and any(a.startswith("-") and "C" in a for a in args):
            self.out.unknown(f"runs a callback the guard cannot read: {prog} -C", index)
        elif prog in ("export", "declare", "typeset", "local", "readonly"):
            for word in argv[1:]:
                var, eq, value = word.value.partition("=")
                if eq and programs.risky_assignment(var, value if word.literal else None):
                    self.out.unknown(f"sets {var}, which changes what a command runs")
        elif prog == "make":
            self._make(argv, index)
        elif prog in programs.AWKS:
            self._awk(argv, index)
        elif prog in programs.SEDS:
            self._sed(argv, ctx, index)
        return self._output(values, stdin)

    def _add(self, argv: list[_Word], writes: list[Target], reads: list[Target], ctx: _Ctx,
             outer: list[list[_Word]], *, readings: tuple[list[str], ...] = ()) -> int:
        """Record one invocation; its index."""
        words = [w.value for w in argv]
        text = " ".join([w.src for w in argv] + [r[0] for r in ctx.redirs])
        plain = " ".join(words + [r[1] for r in ctx.redirs])
        bare_text = " ".join(w.src for w in argv)
        bare_plain = " ".join(words)
        safe = all(_plain_safe(w) for w in words)
        # Allow rules meet the words alone (what is written is judged as a write) and the
        # command with its redirections (as Claude Code's rules read it).
        allow = [normalize_space(bare_text)] + ([normalize_space(bare_plain)] if safe else [])
        for extra in readings:
            allow.append(normalize_space(" ".join(extra)))
        if ctx.redirs:
            allow.append(normalize_space(text))
            if safe:
                allow.append(normalize_space(plain))
        deny = list(allow)
        deny += [normalize_space(bare_plain), normalize_space(text), normalize_space(plain)]
        if words and "/" in words[0]:
            deny.append(normalize_space(" ".join([basename(words[0])] + words[1:])))
        if words and words[0].startswith("=") and len(words[0]) > 1:
            deny.append(normalize_space(" ".join([words[0][1:]] + words[1:])))  # zsh =cmd
        if any(w.brace for w in argv):
            deny.append(normalize_space(" ".join(_brace_expand(w.value) if w.brace else w.value for w in argv)))
        for wrapper in outer:
            full = wrapper + argv
            deny.append(normalize_space(" ".join([w.src for w in full] + [r[0] for r in ctx.redirs])))
            deny.append(normalize_space(" ".join([w.value for w in full] + [r[1] for r in ctx.redirs])))
        for extra in readings:
            deny.append(normalize_space(" ".join(extra)))
        allow_texts = tuple(dict.fromkeys(a for a in allow if a))
        deny_texts = tuple(dict.fromkeys(d.replace(" \0", "") for d in deny + allow if d))
        changes = bool(writes) or argv_writes(words)
        runs_path = words[0] if words and "/" in words[0] and argv[0].literal else None
        inv = Invocation(words, normalize_space(text), normalize_space(plain), allow_texts, deny_texts, writes, reads,
                         None, changes, ctx.surface or normalize_space(text), runs_path)
        inv.nested = ctx.nested or bool(outer)
        at = ctx.insert_at
        ctx.insert_at = None  # the command's own invocation goes before the ones its words ran
        found = self.out.invocations
        if at is None or at >= len(found):
            found.append(inv)
            return len(found) - 1
        found.insert(at, inv)
        self.out.unknowns = [(r, i + 1 if i is not None and i >= at else i) for r, i in self.out.unknowns]
        return at

    def _note(self, index: int, reason: str, *, coverable: bool = True) -> None:
        """Code invocation ``index`` runs that the guard cannot read. ``coverable``: an allow rule
        with a specifier that matches the invocation still allows it (an interpreter the user
        allowed: ``Bash(python3 *)``); not so for what a wrapper, ``find`` or ``git`` would run."""
        inv = self.out.invocations[index]
        if inv.unknown is None:
            inv.unknown = reason
        self.out.unknown(reason, index if coverable else None)

    def _output(self, values: list[str], stdin: Stream) -> Stream:
        """What a command writes to a pipe, when the command line shows it: ``echo`` and
        ``printf`` their arguments, a bare ``cat`` its stdin (a here-document)."""
        if not values:
            return None
        name = basename(values[0])
        args = values[1:]
        if name == "echo":
            while args and args[0] in ("-n", "-e", "-E", "-ne", "-en"):
                args = args[1:]
            text = " ".join(args)
            return ("text", text + "\n") if "\\" not in text else ("data", "echo with escapes")
        if name == "printf":
            if args and args[0] == "--":
                args = args[1:]
            if len(args) == 1 and "%" not in args[0] and "\\" not in args[0].replace("\\n", ""):
                return ("text", args[0].replace("\\n", "\n"))
            return ("data", "printf")
        if name == "cat" and (not args or args == ["-"]):
            return stdin
        return ("data", name)

    # -- wrappers ----------------------------------------------------------------------------

    def _wrapper(self, name: str, words: list[_Word], start: int, ctx: _Ctx, stdin: Stream,
                 writes: list[Target], reads: list[Target], outer: list[list[_Word]], level: int,
                 as_path: int | None = None) -> Stream:
        argv = words[start:]
        values = [w.value for w in argv]
        privileged = name in programs.PRIVILEGED
        spec, positionals = programs.PRIVILEGED[name] if privileged else programs.WRAPPERS[name]
        index = as_path  # the path's own invocation (./env), or None
        if privileged and as_path is None:
            index = self._add(argv, writes, reads, ctx, outer)
        # the options must be literal: a word computed at run time could be any option
        limit = next((i for i, w in enumerate(argv[1:], 1) if not w.literal), len(argv))
        parsed = options.parse(values[:limit], spec, 1)
        if isinstance(parsed, str) and name == "nice" and len(values) > 1 and values[1].startswith("-"):
            parsed = options.parse(values[:limit], programs.WRAPPERS["nice"][0], 1)
        if isinstance(parsed, str):
            self._unknown_at(index, f"runs a command through {name}, whose {parsed}", argv, writes, reads, ctx, outer)
            return None
        if any(parsed.has(o) for o in programs.NO_COMMAND_OPTIONS.get(name, ())):
            if index is None:
                self._add(argv, writes, reads, ctx, outer)
            return None
        at = parsed.index
        if at < len(argv) and at >= limit:
            self._unknown_at(index, f"runs a command through {name} with options computed at run time",
                             argv, writes, reads, ctx, outer)
            return None
        inner_writes: list[Target] = []
        inner_reads: list[Target] = []
        cwd = ctx
        if name == "env":
            if parsed.has("-S", "--split-string"):
                self._unknown_at(index, "splits a string into a command: env -S", argv, writes, reads, ctx, outer)
                return None
            chdir = parsed.value("-C", "--chdir")
            if chdir is not None:
                cwd = ctx.copy()
                self._cd([chdir], cwd)
            while at < len(argv) and "=" in argv[at].value and _is_name(argv[at].value.split("=", 1)[0]):
                var, _, value = argv[at].value.partition("=")
                if programs.risky_assignment(var, value if argv[at].literal else None):
                    self.out.unknown(f"sets {var}, which changes what a command runs")
                at += 1
        elif name == "time":
            out_file = parsed.value("-o", "--output")
            if out_file is not None:
                inner_writes.append(Target(out_file, ctx.cwd, "option", f"time -o {out_file}"))
        elif name == "xargs":
            arg_file = parsed.value("-a", "--arg-file")
            if arg_file is not None:
                inner_reads.append(Target(arg_file, ctx.cwd, "operand", f"xargs -a {arg_file}"))
        elif name == "sudo" and parsed.has("-e", "--edit") and index is not None:
            inv = self.out.invocations[index]  # sudoedit: its operands are the files it edits
            inv.writes += [Target(w.value if w.literal else None, ctx.cwd, "operand", "sudo -e") for w in argv[at:]]
            inv.changes = True
            return None
        at += positionals
        if at > len(argv):
            self._unknown_at(index, f"runs {name} without the command it needs", argv, writes, reads, ctx, outer)
            return None
        if at == len(argv):
            if name == "exec" or name not in ("env", "nice", "time", "command", "builtin"):
                if index is None:
                    index = self._add(argv, writes + inner_writes, reads + inner_reads, ctx, outer)
                    if name == "exec" and stdin is not None and stdin is not ctx.stdin:
                        # every later command reads from there: a shell among them reads data
                        self._note(index, "makes later commands read from a file or here-document: exec <",
                                   coverable=False)
                elif inner_writes:
                    self.out.invocations[index].writes.extend(inner_writes)
                return None
            if index is None:
                self._add(argv, writes + inner_writes, reads + inner_reads, ctx, outer)
            return ("data", name)
        wrapper = argv[:at]
        if name == "xargs":
            return self._xargs(parsed, argv, at, cwd, writes + inner_writes, reads + inner_reads, outer + [wrapper],
                               level)
        return self.run(argv, at, cwd, stdin, writes + inner_writes, reads + inner_reads, outer + [wrapper], level)

    def _runner(self, argv: list[_Word], at: int | str, ctx: _Ctx, stdin: Stream, writes: list[Target],
                reads: list[Target], outer: list[list[_Word]], level: int) -> Stream:
        """``npx CMD``, ``npm exec -- CMD``, ``uv run CMD``, ``bundle exec CMD`` ...: the runner is
        an invocation of its own; the command it runs meets deny and ask rules, and needs no
        allow rule of its own beyond the runner's (``Bash(npx *)`` already allows anything)."""
        index = self._add(argv, writes, reads, ctx, outer)
        if isinstance(at, str):
            if at.startswith("-c "):  # npx -c 'CMD', npm exec -c 'CMD': a shell string
                first = len(self.out.invocations)
                self.code(at[3:], ctx, "npm exec -c")
                for inv in self.out.invocations[first:]:
                    inv.implicit = True
            else:
                self._note(index, f"runs a command through {argv[0].value}, whose {at}")
            return None
        if at >= len(argv):
            return None
        if not all(w.literal for w in argv[1:at]):
            self._note(index, f"runs a command through {argv[0].value} with options computed at run time")
            return None
        first = len(self.out.invocations)
        out = self.run(argv, at, ctx, stdin, [], [], outer + [argv[:at]], level)
        for inv in self.out.invocations[first:]:
            inv.implicit = True
        return out

    def _unknown_at(self, index: int | None, reason: str, argv: list[_Word], writes: list[Target],
                    reads: list[Target], ctx: _Ctx, outer: list[list[_Word]]) -> None:
        if index is None:
            index = self._add(argv, writes, reads, ctx, outer)
        self._note(index, reason, coverable=False)

    def _xargs(self, parsed: options.Parsed, argv: list[_Word], at: int, ctx: _Ctx, writes: list[Target],
               reads: list[Target], outer: list[list[_Word]], level: int) -> Stream:
        replace = parsed.value("-I", "--replace", "-i")
        if parsed.has("-i", "--replace") and replace is None:
            replace = "{}"
        inner = argv[at:]
        if replace is not None:
            head = inner[0].value
            if replace in head:
                self._unknown_at(None, "runs a command whose name xargs reads from its input", argv, writes, reads,
                                 ctx, outer)
                return None
            name = _std_name(head)
            if name is not None and is_shell(basename(name)) and any(replace in w.value for w in inner[1:]):
                script_index = _shell_script_index(basename(name), [w.value for w in inner])
                if isinstance(script_index, int) and replace in inner[script_index].value:
                    self._unknown_at(None, f"puts its input into a shell script: xargs {replace}", argv, writes,
                                     reads, ctx, outer)
                    return None
        if replace is not None and any(replace in w.value for w in inner[1:]):
            # What xargs puts in place of the string is its input, known only at run time: the
            # words that hold it are read as computed ones (a wrapper between xargs and a shell,
            # `xargs -I{} env sh -c '{}'`, hid a script made of the input).
            argv = argv[:at] + [inner[0]] + [_Word(w.value, w.src, False, w.glob, w.brace, w.quoted, w.node)
                                             if replace in w.value else w for w in inner[1:]]
        first = len(self.out.invocations)
        self.run(argv, at, ctx, ("data", "xargs"), writes, reads, outer, level)
        if replace is None and first < len(self.out.invocations):
            inv = self.out.invocations[first]  # xargs appends what it reads to the command
            inv.allow_texts = tuple(a + " \0" for a in inv.allow_texts)
        return ("data", "xargs")

    # -- programs with their own rules (_HANDLERS) -------------------------------------------

    def _find(self, argv: list[_Word], ctx: _Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
              outer: list[list[_Word]], level: int) -> Stream:
        values = [w.value for w in argv]
        i = 1
        while i < len(values) and values[i] in ("-H", "-L", "-P") or (i < len(values) and values[i].startswith(
                ("-D", "-O")) and values[i] not in ("-D", "-O")):
            i += 1
        starts = []
        while i < len(values) and not values[i].startswith(("-", "(", "!", ")", ",")):
            starts.append(argv[i])
            i += 1
        index = self._add(argv, writes, reads, ctx, outer)
        inv = self.out.invocations[index]
        for w in starts or [_lit(".")]:
            inv.reads.append(Target(w.value if w.literal else None, ctx.cwd, "operand", f"find {w.src}"))
        while i < len(values):
            v = values[i]
            if v in ("-exec", "-execdir", "-ok", "-okdir"):
                j = i + 1
                while j < len(values) and values[j] not in (";", "+"):
                    j += 1
                if j >= len(values):
                    self._note(index, f"runs find {v} without its ';'", coverable=False)
                    return None
                inner = argv[i + 1:j]
                if not inner:
                    self._note(index, f"runs find {v} without a command", coverable=False)
                elif "{}" in inner[0].value:
                    self._note(index, f"runs the files it finds: find {v} {{}}", coverable=False)
                else:
                    head = _std_name(inner[0].value)
                    if head is not None and is_shell(basename(head)):
                        at = _shell_script_index(basename(head), [w.value for w in inner])
                        if isinstance(at, int) and "{}" in inner[at].value:
                            self._note(index, f"puts file names into a shell script: find {v}", coverable=False)
                            i = j + 1
                            continue
                    self.run(inner, 0, ctx, None, [], [], outer + [argv[:i + 1]], level)
                i = j + 1
                continue
            if v in ("-fprint", "-fprint0", "-fls", "-fprintf") and i + 1 < len(values):
                w = argv[i + 1]
                inv.writes.append(Target(w.value if w.literal else None, ctx.cwd, "option", f"find {v} {w.src}"))
                i += 3 if v == "-fprintf" else 2
                continue
            if v == "-delete":
                for w in starts or [_lit(".")]:
                    inv.writes.append(Target(w.value if w.literal else None, ctx.cwd, "option", "find -delete"))
            i += 1
        inv.changes = inv.changes or bool(inv.writes)
        return ("data", "find")

    def _git(self, argv: list[_Word], ctx: _Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
             outer: list[list[_Word]], level: int) -> Stream:
        values = [w.value for w in argv]
        i = 1
        problems: list[str] = []
        git_dir = ctx
        while i < len(values) and values[i].startswith("-"):
            v = values[i]
            if not argv[i].literal:
                problems.append("options computed at run time")
                break
            opt, eq, attached = v.partition("=")
            if v == "-c" or v.startswith("-c") and not v.startswith("--"):
                pair = v[2:] if len(v) > 2 else (values[i + 1] if i + 1 < len(values) else "")
                if len(v) == 2:
                    i += 1
                key, _, value = pair.partition("=")
                if not _git_key_harmless(key.lower(), value):
                    problems.append(f"git -c {key}")
                i += 1
                continue
            if opt in ("--config-env", "--exec-path") and (eq or opt == "--config-env"):
                problems.append(f"git {opt}")
                i += 1 if eq else 2
                continue
            if opt in programs.GIT_GLOBAL:
                takes = programs.GIT_GLOBAL[opt]
                given = attached if eq else (values[i + 1] if takes and i + 1 < len(values) else None)
                if opt == "-C" and given is not None:
                    git_dir = git_dir.copy()
                    self._cd([given], git_dir)
                i += 1 if (eq or not takes) else 2
                continue
            if opt == "--exec-path":
                i += 1
                continue
            problems.append(f"git {opt}: an option the guard does not know")
            break
        sub = values[i] if i < len(values) else None
        rest = values[i + 1:] if sub is not None else []
        normal = ["git"] + values[i:]
        inner_writes: list[Target] = []
        if sub is not None:
            if sub == "config":
                setting = _git_config_set(rest)
                if setting is not None and not _git_key_harmless(setting.lower(), ""):
                    problems.append(f"git config {setting} (configuration a later git command runs)")
            if sub in programs.GIT_CODE_SUBCOMMANDS:
                problems.append(programs.GIT_CODE_SUBCOMMANDS[sub])
            if (sub == "submodule" and "foreach" in rest) or (sub == "bisect" and rest[:1] == ["run"]):
                problems.append(f"git {sub} {'foreach' if sub == 'submodule' else 'run'}")
            for j, a in enumerate(rest):
                opt = a.split("=", 1)[0]
                if opt in programs.GIT_CODE_OPTIONS or a in programs.GIT_CODE_SHORT.get(sub, ()) or (
                        sub in ("rebase",) and opt == "--exec"):
                    problems.append(f"git {sub} {opt}")
                if opt == "--output":
                    path = a.split("=", 1)[1] if "=" in a else (rest[j + 1] if j + 1 < len(rest) else None)
                    inner_writes.append(Target(path, git_dir.cwd, "option", f"git {sub} --output"))
                if a == "-o" and sub in ("format-patch", "archive") and j + 1 < len(rest):
                    inner_writes.append(Target(rest[j + 1], git_dir.cwd, "option", f"git {sub} -o"))
        readings = (normal,) if i > 1 else ()
        index = self._add(argv, writes + inner_writes, reads, ctx, outer, readings=readings)
        for problem in problems:
            self._note(index, f"runs code the guard cannot read: {problem}", coverable=False)
        return ("data", "git")

    def _shell(self, name: str, argv: list[_Word], ctx: _Ctx, stdin: Stream, writes: list[Target],
               reads: list[Target], outer: list[list[_Word]], level: int) -> Stream:
        index = self._add(argv, writes, reads, ctx, outer)
        values = [w.value if w.literal else "\0" for w in argv]
        found = _shell_script_index(name, values)
        if isinstance(found, str):
            self._note(index, f"runs {name} with options the guard cannot read ({found})")
            return None
        if found is None:  # no -c: the program is a script file, or stdin
            operand = _shell_operand(name, values)
            if operand is not None:
                return ("data", name)
            if stdin is None:
                return ("data", name)
            if stdin[0] == "text":
                self.out.invocations[index].implicit = True
                self.code(stdin[1], ctx, f"{name} reading stdin")
            else:
                self._note(index, f"runs code the guard cannot read: {stdin[1]} piped into {name}")
            return ("data", name)
        script = argv[found] if found < len(argv) else None
        if script is None or not script.literal:
            self._note(index, f"runs code the guard cannot read: {name} -c with a script computed at run time")
            return None
        self.out.invocations[index].implicit = True
        self.code(script.value, ctx, f"{name} -c")
        return ("data", name)

    def _flock(self, argv: list[_Word], ctx: _Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
               outer: list[list[_Word]], level: int) -> Stream:
        values = [w.value for w in argv]
        grammar_ = options.Grammar("sxenuoF", "wEc", long_flags="shared exclusive nonblock nb unlock close no-fork "
                                   "verbose", long_values="timeout wait conflict-exit-code command")
        parsed = options.parse(values, grammar_, 1)
        if isinstance(parsed, str) or any(not w.literal for w in argv[1:parsed.index + 1]
                                          if not isinstance(parsed, str)):
            self._unknown_at(None, f"runs a command through flock, whose {parsed}"
                             if isinstance(parsed, str) else "runs flock with options computed at run time",
                             argv, writes, reads, ctx, outer)
            return None
        at = parsed.index
        script = parsed.value("-c", "--command")
        if at < len(values) and values[at + 1:at + 2] in (["-c"], ["--command"]) and at + 2 < len(values):
            script = values[at + 2]
            if not argv[at + 2].literal:
                self._unknown_at(None, "runs code the guard cannot read: flock -c with a script computed at run time",
                                 argv, writes, reads, ctx, outer)
                return None
        if script is not None:
            self._add(argv, writes, reads, ctx, outer)
            self.code(script, ctx, "flock -c")
            return None
        if at + 1 >= len(values):  # flock FD, or flock FILE alone
            self._add(argv, writes, reads, ctx, outer)
            return None
        return self.run(argv, at + 1, ctx, stdin, writes, reads, outer + [argv[:at + 1]], level)

    def _script(self, argv: list[_Word], ctx: _Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
                outer: list[list[_Word]], level: int) -> Stream:
        values = [w.value for w in argv]
        grammar_ = options.Grammar("aefqhVkpdrF", "cTBIOEmoK", optional="t",
                                   long_flags="append return flush force quiet help version",
                                   long_values="command log-timing log-io log-in log-out echo output-limit "
                                   "logging-format", long_optional="timing")
        parsed = options.parse(values, grammar_, 1)
        if isinstance(parsed, str):
            self._unknown_at(None, f"runs a command through script, whose {parsed}", argv, writes, reads, ctx, outer)
            return None
        at = parsed.index
        index = self._add(argv[:at + 1] if at < len(argv) else argv, writes, reads, ctx, outer)
        if at < len(values):
            w = argv[at]
            self.out.invocations[index].writes.append(Target(w.value if w.literal else None, ctx.cwd, "option",
                                                             f"script {w.src}"))
        code = parsed.value("-c", "--command")
        if code is not None:
            self.code(code, ctx, "script -c")
            return None
        if at + 1 < len(values):  # BSD: script [opts] file command ...
            return self.run(argv, at + 1, ctx, stdin, [], [], outer + [argv[:at + 1]], level)
        return None

    def _watch(self, argv: list[_Word], ctx: _Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
               outer: list[list[_Word]], level: int) -> Stream:
        values = [w.value for w in argv]
        grammar_ = options.Grammar("bcCegprtwxh", "nqs", optional="d",
                                   long_flags="beep color no-color errexit chgexit precise no-rerun no-title "
                                   "no-wrap exec help version", long_values="interval equexit shotsfile",
                                   long_optional="differences")
        parsed = options.parse(values, grammar_, 1)
        if isinstance(parsed, str) or parsed.index >= len(values):
            self._unknown_at(None, f"runs a command through watch, whose {parsed}" if isinstance(parsed, str)
                             else "runs watch without a command", argv, writes, reads, ctx, outer)
            return None
        if parsed.has("-x", "--exec"):
            return self.run(argv, parsed.index, ctx, stdin, writes, reads, outer + [argv[:parsed.index]], level)
        rest = argv[parsed.index:]
        self._add(argv, writes, reads, ctx, outer)
        if not all(w.literal for w in rest):
            self.out.unknown("runs code the guard cannot read: watch with a command computed at run time")
            return None
        self.code(" ".join(w.value for w in rest), ctx, "watch")  # watch runs it with sh -c
        return None

    def _busybox(self, argv: list[_Word], ctx: _Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
                 outer: list[list[_Word]], level: int) -> Stream:
        if len(argv) < 2 or argv[1].value.startswith("-"):
            self._add(argv, writes, reads, ctx, outer)
            return None
        return self.run(argv, 1, ctx, stdin, writes, reads, outer + [argv[:1]], level)

    def _coproc(self, argv: list[_Word], ctx: _Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
                outer: list[list[_Word]], level: int) -> Stream:
        values = [w.value for w in argv]
        if len(values) < 2 or values[1] in ("{", "(") or values[2:3] in (["{"], ["("]):
            self._unknown_at(None, "runs a coproc with a compound command, which the guard does not read",
                             argv, writes, reads, ctx, outer)
            return None
        return self.run(argv, 1, ctx, stdin, writes, reads, outer + [argv[:1]], level)

    def _parallel(self, argv: list[_Word], ctx: _Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
                  outer: list[list[_Word]], level: int) -> Stream:
        values = [w.value for w in argv]
        grammar_ = options.Grammar("kqvX mu", "jS", long_flags="keep-order will-cite bar dry-run verbose "
                                   "line-buffer group ungroup quote xargs no-notice halt-on-error",
                                   long_values="jobs halt delay timeout retries joblog results")
        parsed = options.parse(values, grammar_, 1)
        seps = (":::", "::::", ":::+", "::::+")
        end = next((i for i, v in enumerate(values) if v in seps), len(values))
        if isinstance(parsed, str) or parsed.index >= end:
            self._unknown_at(None, f"runs commands through parallel, whose {parsed}" if isinstance(parsed, str)
                             else "runs the commands parallel reads from its input", argv, writes, reads, ctx, outer)
            return None
        command = argv[parsed.index:end]
        self._add(argv, writes, reads, ctx, outer)
        if not all(w.literal for w in command):
            self.out.unknown("runs code the guard cannot read: parallel with a command computed at run time")
            return None
        self.code(" ".join(w.value for w in command), ctx, "parallel")
        return None

    def _su(self, argv: list[_Word], ctx: _Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
            outer: list[list[_Word]], level: int) -> Stream:
        index = self._add(argv, writes, reads, ctx, outer)
        values = [w.value for w in argv]
        for i, v in enumerate(values[1:], 1):
            if v in ("-c", "--command", "-C", "--session-command") or v.startswith("--command="):
                code = v.split("=", 1)[1] if "=" in v else (values[i + 1] if i + 1 < len(values) else None)
                word = argv[i] if "=" in v else (argv[i + 1] if i + 1 < len(argv) else None)
                if code is None or word is None or not word.literal:
                    self._note(index, "runs code the guard cannot read: su -c", coverable=False)
                else:
                    self.code(code, ctx, "su -c")
        return None

    # -- interpreters, make, awk, sed --------------------------------------------------------

    def _interpreter(self, prog: str, argv: list[_Word], ctx: _Ctx, stdin: Stream, index: int) -> None:
        values = [w.value for w in argv]
        if programs.is_python(prog):
            parsed = options.parse(values, programs.PYTHON, 1)
            if isinstance(parsed, str):
                self._note(index, f"runs {prog} with options the guard cannot read ({parsed})")
            elif parsed.has("-c"):
                self._note(index, f"runs code the guard cannot read: {prog} -c")
            elif parsed.has("-m"):
                module = parsed.value("-m") or ""
                if module.split(".", 1)[0] in programs.PYTHON_CODE_MODULES:
                    self._note(index, f"runs code the guard cannot read: {prog} -m {module}")
            elif (parsed.index >= len(values) or values[parsed.index] == "-") and stdin is not None:
                self._note(index, f"runs code the guard cannot read: {prog} reading its program from stdin")
            return
        if programs.is_node(prog):
            self._node(prog, values, stdin, index)
            return
        if prog in ("perl", "ruby"):
            parsed = options.parse(values, programs.PERL if prog == "perl" else programs.RUBY, 1)
            if isinstance(parsed, str):
                self._note(index, f"runs {prog} with options the guard cannot read ({parsed})")
            elif parsed.has("-e", "-E"):
                self._note(index, f"runs code the guard cannot read: {prog} -e")
            elif parsed.index >= len(values) and stdin is not None:
                self._note(index, f"runs code the guard cannot read: {prog} reading its program from stdin")
            elif prog == "perl" and parsed.has("-i"):
                inv = self.out.invocations[index]
                for w in argv[parsed.index + 1:]:
                    inv.writes.append(Target(w.value if w.literal else None, ctx.cwd, "operand", "perl -i"))
            return
        escapes = programs.SHELL_ESCAPES.get(prog)
        if escapes is not None and any(e in v for v in values[1:] for e in escapes):
            self._note(index, f"runs code the guard cannot read: {prog} with a shell escape")
            return
        if prog == "man" and any(v in ("-P", "--pager") or v.startswith(("--pager=", "-P")) for v in values[1:]):
            self._note(index, "runs code the guard cannot read: man -P", coverable=False)
            return
        code_options = programs.INLINE_ANYWHERE.get(prog)
        if code_options is not None:
            for v in values[1:]:
                if v in code_options or any(v.startswith(o) and len(o) == 2 and o[0] == "-" and len(v) > 2
                                            and not v.startswith("--") for o in code_options if o != "+"):
                    self._note(index, f"runs code the guard cannot read: {prog} {v[:12]}")
                    return
                if "+" in code_options and v.startswith("+") and len(v) > 1:
                    self._note(index, f"runs code the guard cannot read: {prog} {v[:12]}")
                    return
            if stdin is not None:
                self._note(index, f"runs code the guard cannot read: {stdin[1] if stdin[0] == 'data' else 'text'} "
                                  f"piped into {prog}")

    def _node(self, prog: str, values: list[str], stdin: Stream, index: int) -> None:
        i = 1
        while i < len(values) and values[i].startswith("-") and values[i] != "-":
            v = values[i]
            if v == "--":
                i += 1
                break
            if v.startswith("--"):
                name = v[2:].split("=", 1)[0]
                if name in ("eval", "print"):
                    self._note(index, f"runs code the guard cannot read: {prog} --{name}")
                    return
                i += 1 if ("=" in v or name not in programs.NODE_VALUES) else 2
                continue
            parsed = options.parse([v], programs.NODE_SHORT)
            if isinstance(parsed, str):
                self._note(index, f"runs {prog} with options the guard cannot read ({parsed})")
                return
            if parsed.has("-e", "-p"):
                self._note(index, f"runs code the guard cannot read: {prog} {v[:2]}")
                return
            i += 2 if len(v) == 2 and v[1] in "rC" else 1  # -r MODULE, -C CONDITION
        if prog == "bun" and i < len(values) and values[i] in ("-e", "--eval"):
            self._note(index, f"runs code the guard cannot read: {prog} -e")
            return
        if (i >= len(values) or values[i] == "-") and stdin is not None:
            self._note(index, f"runs code the guard cannot read: {prog} reading its program from stdin")

    def _make(self, argv: list[_Word], index: int) -> None:
        values = [w.value for w in argv]
        for i, v in enumerate(values[1:], 1):
            if v in ("-f", "--file", "--makefile") and values[i + 1:i + 2] in (["-"], ["/dev/stdin"]) or v in (
                    "--file=-", "--makefile=-", "-f-", "--file=/dev/stdin"):
                self._note(index, "runs a Makefile read from stdin: make -f -", coverable=False)
                return
        for w in argv[1:]:
            v = w.value
            if v in ("-E", "--eval") or v.startswith(("--eval=", "-E")) and not v.startswith("--"):
                self._note(index, "runs code the guard cannot read: make --eval", coverable=False)
                return
            if "=" in v and not v.startswith("-"):
                name = v.split("=", 1)[0].rstrip(":+?!").strip()
                if (name in programs.MAKE_RISKY or v.split("=", 1)[0].endswith("!") or not w.literal
                        or "$(" in v or "${" in v or "`" in v):
                    self._note(index, f"runs code the guard cannot read: make {_short(v)}", coverable=False)
                    return

    def _awk(self, argv: list[_Word], index: int) -> None:
        values = [w.value for w in argv]
        parsed = options.parse(values, programs.AWK, 1)
        if isinstance(parsed, str):
            self._note(index, f"runs awk with options the guard cannot read ({parsed})")
            return
        if parsed.has("-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec"):
            self._note(index, "runs an awk program the guard cannot read: awk -f")
            return
        if parsed.has("--sandbox"):
            return
        code = [v for name, v in parsed.options if name in ("-e", "--source") and v is not None]
        if not code:
            if parsed.index >= len(values):
                return
            code = [values[parsed.index]]
            if not argv[parsed.index].literal:
                self._note(index, "runs an awk program computed at run time")
                return
        for text in code:
            reason = _awk_risk(text)
            if reason:
                self._note(index, f"runs code the guard cannot read: awk with {reason}")
                return

    def _sed(self, argv: list[_Word], ctx: _Ctx, index: int) -> None:
        values = [w.value for w in argv]
        parsed = options.parse(values, programs.SED, 1)
        if isinstance(parsed, str):
            self._note(index, f"runs sed with options the guard cannot read ({parsed})")
            return
        if parsed.has("-f", "--file"):
            self._note(index, "runs a sed script the guard cannot read: sed -f")
            return
        scripts = [v for name, v in parsed.options if name in ("-e", "--expression") and v is not None]
        operands = argv[parsed.index:]
        if not scripts and operands:
            if not operands[0].literal:
                self._note(index, "runs a sed script computed at run time")
                return
            operands = operands[1:]
        if not parsed.has("--sandbox"):
            for text in scripts + [w.value for w in argv[1:]]:
                if _sed_risk(text):
                    self._note(index, "runs code the guard cannot read: sed with an e or w command")
                    return
        if parsed.has("-i", "--in-place"):
            inv = self.out.invocations[index]
            for w in operands:
                inv.writes.append(Target(w.value if w.literal else None, ctx.cwd, "operand", "sed -i"))

    def _source(self, argv: list[_Word], ctx: _Ctx, stdin: Stream, index: int) -> None:
        if len(argv) < 2:
            return
        target = argv[1]
        node = target.node
        if node is not None and node.type == "process_substitution":
            self._note(index, "runs code the guard cannot read: source of a process substitution")
            return
        if not target.literal:
            self._note(index, f"runs code the guard cannot read: source of a path computed at run time ({target.src})")
            return
        if target.value in ("/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"):
            if stdin is not None and stdin[0] == "text":
                self.code(stdin[1], ctx, "source /dev/stdin")
            else:
                self._note(index, "runs code the guard cannot read: source of its stdin")
        elif target.value.startswith(("/dev/fd/", "/proc/")):
            self._note(index, f"runs code the guard cannot read: source {target.value}")

    def _trap(self, argv: list[_Word], ctx: _Ctx) -> None:
        values = [w.value for w in argv]
        if len(values) < 3 or values[1].startswith("-"):
            return
        if not argv[1].literal:
            self.out.unknown("sets a trap the guard cannot read")
        else:
            self.code(values[1], ctx, "trap")

    def _file_operands(self, prog: str, argv: list[_Word], ctx: _Ctx, index: int) -> None:
        """The files a known reader or writer takes as operands or option values."""
        inv = self.out.invocations[index]
        values = [w.value for w in argv]
        operands = [w for w in argv[1:] if not w.value.startswith("-") or w.value == "-" or not w.literal]
        if "--" in values:
            after = values.index("--")
            operands = [w for w in argv[1:after] if not w.value.startswith("-")] + argv[after + 1:]

        def target(w: _Word, kind: str, via: str) -> Target:
            return Target(w.value if w.literal else None, ctx.cwd, kind, via)

        if prog in programs.OPERAND_WRITERS:
            inv.writes += [target(w, "operand", prog) for w in operands]
        elif prog in programs.COPIERS:
            dest = next((values[i + 1] for i, v in enumerate(values[:-1]) if v in ("-t", "--target-directory")), None)
            dest = dest or next((v.split("=", 1)[1] for v in values if v.startswith("--target-directory=")), None)
            if dest is not None:
                inv.writes.append(Target(dest, ctx.cwd, "operand", prog))
                inv.reads += [target(w, "operand", prog) for w in operands if w.value != dest]
            elif operands:
                inv.writes.append(target(operands[-1], "operand", prog))
                inv.reads += [target(w, "operand", prog) for w in operands[:-1]]
        elif prog == "tee":
            inv.writes += [target(w, "option", "tee") for w in operands
                           if not (w.literal and (w.value in programs.SAFE_TARGETS or _is_fd_path(w.value)))]
        elif prog == "dd":
            for w in argv[1:]:
                if w.value.startswith("of="):
                    inv.writes.append(Target(w.value[3:] if w.literal else None, ctx.cwd, "operand", "dd of="))
                elif w.value.startswith("if="):
                    inv.reads.append(Target(w.value[3:] if w.literal else None, ctx.cwd, "operand", "dd if="))
        elif prog in ("uniq",) and len(operands) >= 2:
            inv.writes.append(target(operands[1], "option", "uniq"))
            inv.reads.append(target(operands[0], "operand", "uniq"))
        elif prog in programs.READERS:
            if prog in programs.PATTERN_FIRST and operands and not any(
                    v in ("-e", "-f", "--regexp", "--file") or v.startswith(("--regexp=", "--file=")) for v in values):
                operands = operands[1:]  # the pattern, the program, the filter
            inv.reads += [target(w, "operand", prog) for w in operands]
        outputs = programs.OUTPUT_OPTIONS.get(prog)
        if outputs:
            inv.writes += self._output_files(prog, argv, outputs, ctx)
        inv.changes = inv.changes or bool(inv.writes)

    def _output_files(self, prog: str, argv: list[_Word], outputs: tuple[str, ...], ctx: _Ctx) -> list[Target]:
        """Files named by output options: ``--output=F``, ``--output F``, ``-o F``, ``-oF``, and
        for getopt-style programs an option at the end of a cluster (``curl -sSLo F``)."""
        found = []
        values = [w.value for w in argv]

        def add(value: str | None, literal: bool, via: str) -> None:
            if value != "-":  # stdout
                found.append(Target(value if literal else None, ctx.cwd, "option", f"{prog} {via}"))

        for i, v in enumerate(values[1:], 1):
            following = argv[i + 1] if i + 1 < len(argv) else None
            if v.startswith("--"):
                name, eq, attached = v.partition("=")
                if name in outputs:
                    if eq:
                        add(attached, argv[i].literal, name)
                    elif following is not None:
                        add(following.value, following.literal, name)
            elif v in outputs:  # -o F, and single-dash long options (openssl -out F)
                if following is not None:
                    add(following.value, following.literal, v)
            elif len(v) > 2 and v[0] == "-" and prog != "openssl":
                if v[:2] in outputs:
                    add(v[2:], argv[i].literal, v[:2])  # -oF
                elif prog in programs.CLUSTERED:
                    for j, c in enumerate(v[1:], 1):
                        if "-" + c in outputs:
                            rest = v[j + 1:]
                            if rest:
                                add(rest, argv[i].literal, "-" + c)
                            elif following is not None:
                                add(following.value, following.literal, "-" + c)
                            break
        if prog == "curl" and any(v in ("-O", "--remote-name", "--remote-name-all", "-J") or (
                v.startswith("-") and not v.startswith("--") and "O" in v[1:]) for v in values[1:]):
            found.append(Target(".", ctx.cwd, "option", "curl -O"))  # a file named by the server
        return found

    def _cd(self, args: list[str], ctx: _Ctx) -> None:
        operands = [a for a in args if not a.startswith("-") or a == "-"]
        if not operands:
            ctx.cwd = "~"
            return
        target = operands[0]
        if target == "-" or "$" in target or "`" in target or target.startswith("~") and target[1:2] not in ("", "/"):
            ctx.cwd = UNKNOWN_DIR
        elif ctx.cwd == UNKNOWN_DIR or target.startswith(("/", "~")):
            ctx.cwd = target if target.startswith(("/", "~")) else UNKNOWN_DIR
        else:
            ctx.cwd = (ctx.cwd.rstrip("/") + "/" + target) if ctx.cwd else target

    # -- code found inside the command -------------------------------------------------------

    def code(self, text: str, ctx: _Ctx, via: str) -> None:
        """Walk ``text`` as the program it is (a ``-c`` string, a here-document a shell reads)."""
        if self.depth + 1 > MAX_DEPTH:
            self.out.unknown(f"is nested too deeply to read ({via})")
            return
        if "\0" in text:
            self.out.unknown(f"has code for {via} with a NUL byte")
            return
        _Walker(text, self.depth + 1, self.out, via).program(ctx.copy(nested=True))


_HANDLERS = {
    "find": _Walker._find, "git": _Walker._git, "flock": _Walker._flock, "script": _Walker._script,
    "watch": _Walker._watch, "busybox": _Walker._busybox, "coproc": _Walker._coproc, "parallel": _Walker._parallel,
    "su": _Walker._su,
}


def is_shell(name: str) -> bool:
    return name in programs.SHELL_GRAMMARS


def _shell_script_index(name: str, values: list[str]) -> int | str | None:
    """For ``name [options] -c SCRIPT``: the index of SCRIPT; None without ``-c``; a reason when
    an option is not the shell's."""
    shorts, long_values, long_flags = programs.SHELL_GRAMMARS.get(name, programs.SHELL_GRAMMARS["sh"])
    command = False
    i = 1
    while i < len(values):
        arg = values[i]
        if arg == "\0":
            if command:
                break  # the script, computed at run time
            return "options computed at run time"
        if arg in ("--", "-"):
            i += 1
            break
        if arg.startswith("--"):
            long, eq, _ = arg[2:].partition("=")
            if long in long_values:
                i += 1 if eq else 2
                continue
            if eq or (long_flags is not None and long not in long_flags):
                return f"option {arg} is not known"
            i += 1
            continue
        if len(arg) < 2 or arg[0] not in "-+":
            break
        i += 1
        for c in arg[1:]:
            if c == "c":
                command = True
            elif c in shorts:
                i += 1
            elif not c.isalnum():
                return f"option {arg} is not known"
    if not command:
        return None
    return i if i < len(values) else "-c without a script"


def _shell_operand(name: str, values: list[str]) -> str | None:
    """The script file a shell runs (``bash build.sh``), or None when it reads stdin."""
    shorts, long_values, _ = programs.SHELL_GRAMMARS.get(name, programs.SHELL_GRAMMARS["sh"])
    stdin = False
    i = 1
    while i < len(values):
        arg = values[i]
        if arg in ("--", "-"):
            i += 1
            break
        if arg.startswith("--"):
            i += 2 if arg[2:] in long_values else 1
            continue
        if len(arg) < 2 or arg[0] not in "-+":
            break
        i += 1
        for c in arg[1:]:
            if c == "s":
                stdin = True
            elif c in shorts:
                i += 1
    if stdin or i >= len(values):
        return None
    return values[i]


def _git_config_set(args: list[str]) -> str | None:
    """The key ``git config ARGS`` sets (``git config alias.x '!cmd'``), or None when it reads."""
    reading = ("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--show-origin", "--unset",
               "--unset-all", "--remove-section", "--rename-section", "--edit", "-e", "get", "list")
    if any(a in reading or a.startswith("--get") for a in args):
        return None
    positional = [a for a in args if not a.startswith("-")]
    if positional[:1] == ["set"]:
        positional = positional[1:]
    return positional[0] if len(positional) >= 2 else None


def _git_key_harmless(key: str, value: str) -> bool:
    for harmless in programs.GIT_HARMLESS_KEYS:
        if key == harmless or (harmless.endswith(".") and key.startswith(harmless)):
            return True
    allowed = programs.GIT_HARMLESS_VALUES.get(key)
    return allowed is not None and value in allowed


def _awk_risk(program: str) -> str | None:
    """What in an awk program runs a command or writes a file."""
    if re.search(r"\bsystem\s*\(", program):
        return "system()"
    if re.search(r"(?<!\|)\|(?!\|)", program):
        return "a pipe"
    if re.search(r"\bgetline\b", program):
        return "getline"
    if re.search(r"\bprintf?\b[^;{}\n]*>", program):
        return "output to a file"
    return None


def _sed_risk(script: str) -> bool:
    """Whether a sed script holds an ``e`` (run) or ``w``/``W`` (write) command or flag."""
    return bool(re.search(r"(?:^|[;{}\n])\s*(?:[0-9$]+|/[^/]*/)?\s*(?:,\s*(?:[0-9$]+|/[^/]*/))?\s*!?\s*[wWe](?:\s|$)"
                          r"|/[gpIiMmeE0-9]*[wWe](?:\s|$)|^\s*:[^;]*;\s*e", script)
                or re.search(r"s([^\w\s\\])(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1[gpIiMm0-9]*[eEwW]", script))


def _stray_backquote(root: Node) -> bool:
    """Whether a token other than a substitution's own backquote holds one."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.child_count:
            stack.extend(node.children)
        elif node.type != "`" and b"`" in (node.text or b"") and node.type not in (
                "raw_string", "string_content", "ansi_c_string", "comment", "heredoc_body", "heredoc_content"):
            return True
    return False


def _decode(data: bytes) -> str:
    """Source bytes as text; a slice that cuts a character (only around syntax errors: the
    parser sees non-ASCII bytes as letters) keeps the pieces as replacement characters."""
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")


def _string_follows(node: Node) -> bool:
    """Whether ``node`` (a ``$``) is glued to a double-quoted string after it: ``$"..."``."""
    after = node.next_sibling
    return after is not None and after.type == "string" and after.start_byte == node.end_byte


def _first_error(node: Node) -> Node | None:
    while True:
        if node.is_error or node.is_missing:
            return node
        below = next((c for c in node.children if c.has_error or c.is_missing), None)
        if below is None:
            return None
        node = below


def _descendants(node: Node, kind: str) -> list[Node]:
    found = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == kind:
            found.append(n)
        stack.extend(n.children)
    return found


def _has_variable(node: Node) -> bool:
    stack = list(node.children)
    while stack:
        n = stack.pop()
        if n.type in ("variable_name", "simple_expansion", "expansion", "command_substitution", "word",
                      "subscript"):
            return True
        stack.extend(n.children)
    return False


def _is_name(text: str) -> bool:
    return bool(text) and (text[0].isalpha() or text[0] == "_") and all(c.isalnum() or c == "_" for c in text)


def _is_fd_path(path: str) -> bool:
    return path.startswith(("/dev/fd/", "/proc/self/fd/")) and path.rsplit("/", 1)[-1].isdigit()


def _short(text: str) -> str:
    text = normalize_space(text)
    return text if len(text) <= 40 else text[:39] + "\u2026"


_UNSAFE_IN_PLAIN = frozenset(";&|<>()$`\\\"'")


def _plain_safe(value: str) -> bool:
    """No blank, quote or operator in a word: joined by spaces, the words read back unchanged."""
    return _UNSAFE_IN_PLAIN.isdisjoint(value) and not any(c.isspace() for c in value)


def _unquoted_chars(text: str) -> str:
    """The characters of an unquoted word that are not escaped by a backslash."""
    out = []
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _unescape_unquoted(text: str) -> str | None:
    """An unquoted word's text with backslashes removed (``\\x`` is ``x``); None for a trailing
    backslash that tree-sitter left in."""
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text):
                return None
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _unescape_double(text: str) -> str:
    """Inside double quotes a backslash escapes only ``$ ` " \\`` and a newline."""
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in "$`\"\\\n":
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


_ANSI_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "e": "\x1b",
                "E": "\x1b", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_c(body: str) -> str | None:
    """The value of ``$'...'``; None for an escape bash reads differently (``\\c``)."""
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(body):
            return None
        e = body[i + 1]
        if e in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[e])
            i += 2
        elif e in "01234567":
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(chr(int(body[i + 1:j], 8) & 0xFF))
            i = j
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            j = i + 2
            while j < len(body) and j < i + 2 + width and body[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i + 2:
                out.append("\\" + e)
            else:
                try:
                    out.append(chr(int(body[i + 2:j], 16)))
                except (ValueError, OverflowError):
                    return None
            i = j
        elif e == "c":
            return None
        else:
            out.append("\\" + e)
            i += 2
    return "".join(out)


def _brace_expand(word: str) -> str:
    """One level of ``a{b,c}d`` -> ``abd acd`` (enough for deny readings)."""
    start = word.find("{")
    end = word.find("}", start + 1)
    if start < 0 or end < 0 or "," not in word[start:end]:
        return word
    return " ".join(word[:start] + alt + word[end + 1:] for alt in word[start + 1:end].split(","))
