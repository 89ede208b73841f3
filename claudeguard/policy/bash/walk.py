"""From a command line to what it runs: every invocation, every file it reads or writes, and
everything the guard cannot read (``split_command``).

The syntax tree comes from tree-sitter-bash (``grammar``); this module walks it the way bash
runs it: lists, pipelines, subshells, braces, ``if``/``while``/``for`` bodies, functions (their
bodies count as run), ``$(...)``, backticks, ``<(...)``, here-documents. Then each simple command
(``command``) is read the way the program reads its arguments (``run``, here): wrappers
(``timeout``, ``env``, ``xargs``, ``sudo``, ...) are unwrapped with their own option grammars
(``wrappers``); a shell's ``-c`` string, the here-document or here-string a shell reads, and the
literal text ``echo``/``printf``/``cat`` pipe into a shell are parsed again as the program they
are (``shells``); ``trap`` and ``alias`` bodies and ``eval``'s literal words too; ``find``,
``git``, ``make``, ``awk`` and ``sed`` have rules of their own (``special``). The modules that
read one concern call back into the walk through ``model.Walk``: ``_Walker`` is that walk.

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

from claudeguard.policy.bash.command import command
from claudeguard.policy.bash.grammar import parse
from claudeguard.policy.bash.model import (
    MAX_BYTES, MAX_DEPTH, MAX_TREE_DEPTH, PARSER_LOCK, Ctx, Findings, Split, basename, decode, short, std_name,
)
from claudeguard.policy.bash.programs import AWKS, PRIVILEGED, RUNS_UNREAD, SEDS, WRAPPERS, runner_start
from claudeguard.policy.bash.record import add, note, pipe_output
from claudeguard.policy.bash.redirects import REDIRECTS, file_operands, loose_redirects, redirections
from claudeguard.policy.bash.shells import builtin, interpreter, is_shell, shell
from claudeguard.policy.bash.special import awk, find, git, make, sed
from claudeguard.policy.bash.words import WORD_TYPES, inside_quotes, word
from claudeguard.policy.bash.wrappers import busybox, coproc, flock, parallel, runner, script, su, watch, wrapper

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Callable

    from tree_sitter import Node

    from claudeguard.policy.bash.model import Stream, Target, Walk, Word

    # a program read by rules of its own: (walk, argv, ctx, stdin, writes, reads, outer, level)
    Handler = Callable[[Walk, list[Word], Ctx, Stream, list[Target], list[Target], list[list[Word]], int], Stream]

_COMPOUND = frozenset({"if_statement", "while_statement", "for_statement", "c_style_for_statement", "case_statement",
                       "compound_statement", "subshell", "function_definition"})


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
    out = Findings()
    if "\0" in command:
        out.unknown("holds a NUL byte")
    elif len(command.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        out.unknown(f"is too long to read ({len(command)} characters)")
    else:
        try:
            _Walker(command, 0, out, "").program(Ctx())
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


class _Walker:
    """The walk of one piece of source (the command line, or code found in it): ``model.Walk``."""

    __slots__ = ("src", "data", "depth", "out", "via")

    def __init__(self, source: str, depth: int, out: Findings, via: str) -> None:
        self.src = source
        self.data = source.encode("utf-8", "surrogatepass")
        self.depth = depth
        self.out = out
        self.via = via  # how this code is run ("bash -c"), for reasons

    def text(self, node: Node) -> str:
        return decode(self.data[node.start_byte:node.end_byte])

    def deeper(self, source: str, via: str) -> Walk:
        return _Walker(source, self.depth + 1, self.out, via)

    # -- statements --------------------------------------------------------------------------

    def program(self, ctx: Ctx) -> None:
        with PARSER_LOCK:
            tree = parse(self.data)
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
            if not inside_quotes(root, at + 1):
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

    def statements(self, node: Node, ctx: Ctx, level: int) -> None:
        """Every statement below ``node``, in order; ``cd`` moves ``ctx`` for the ones after it."""
        for child in node.children:
            self.statement(child, ctx, level + 1)

    def statement(self, node: Node, ctx: Ctx, level: int) -> Stream:
        """One statement, run the way bash runs it; what it gives a pipe, when the line shows it."""
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
            return command(self, node, [], ctx, None, level)
        if kind in ("variable_assignment", "variable_assignments"):
            return command(self, node, [], ctx, None, level)
        if kind in ("declaration_command", "unset_command", "test_command"):
            return command(self, node, [], ctx, None, level)
        if kind == "for_statement":
            if node.children and node.children[0].type == "select":
                self.out.unknown("uses select, which the guard does not read")
            for child in node.children:
                if child.type in WORD_TYPES and child.type != "variable_name":
                    word(self, child, ctx, level)
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
        if kind in WORD_TYPES:
            word(self, node, ctx, level)
            return None
        self.out.unknown(f"holds a {kind.replace('_', ' ')} the guard does not read")
        self._words_in(node, ctx, level)
        return None

    def _words_in(self, node: Node, ctx: Ctx, level: int) -> None:
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
            elif child.type in WORD_TYPES:
                word(self, child, ctx, level + 1)
            elif child.child_count:
                self._words_in(child, ctx, level + 1)

    def redirected(self, node: Node, ctx: Ctx, level: int) -> Stream:
        """``body redirections``; tree-sitter-bash hangs the rest of a line that follows a
        here-document's start (``cat <<EOF | sh``, ``&& next``) under the here-document."""
        body = node.child_by_field_name("body")
        redirects: list[Node] = []
        tail_pipeline: list[Node] = []
        after: list[Node] = []
        for child in node.children:
            if child.type in REDIRECTS:
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
            loose_redirects(self.out, redirections(self, redirects, ctx, level), ctx)
        else:
            out = self._attach(body, redirects, tail_pipeline, ctx, level)
        for part in after:
            self.statement(part, ctx, level + 1)
        return out

    def _attach(self, body: Node, redirects: list[Node], tail: list[Node], ctx: Ctx, level: int) -> Stream:
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

    def pipeline(self, elements: list[tuple[Node, list[Node]]], ctx: Ctx, level: int) -> Stream:
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

    def element(self, node: Node, redirects: list[Node], ctx: Ctx, stdin: Stream, level: int) -> Stream:
        """One pipeline element (or a lone statement) with its redirections."""
        if node.type == "command":
            return command(self, node, redirects, ctx, stdin, level)
        redirs = redirections(self, redirects, ctx, level)
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
        loose_redirects(self.out, redirs, ctx)
        return out if node.type == "redirected_statement" else None

    # -- what a program runs -----------------------------------------------------------------

    def run(self, words: list[Word], start: int, ctx: Ctx, stdin: Stream, writes: list[Target],
            reads: list[Target], outer: list[list[Word]], level: int) -> Stream:
        """The program ``words[start:]`` runs, with what it runs in turn. ``outer``: the
        wrapper commands around it (their readings are kept for deny and ask rules)."""
        if start >= len(words):
            return None
        head = words[start]
        argv = words[start:]
        if not head.literal or head.glob:
            add(self.out, argv, writes, reads, ctx, outer)
            self.out.unknown(f"runs a command whose name is computed at run time: {short(head.src)}")
            return None
        if head.brace:
            self.out.unknown(f"runs a command whose name is made by brace expansion: {short(head.src)}")
        name = std_name(head.value)  # None for a program outside the system's directories (./timeout)
        prog = basename(head.value)
        values = [w.value for w in argv]
        if name in WRAPPERS or name in PRIVILEGED:
            return wrapper(self, name, argv, ctx, stdin, writes, reads, outer, level)
        if name is None and (prog in WRAPPERS or prog in PRIVILEGED):
            # ./timeout, ~/bin/env: a program of its own (matched as written) that may be the
            # wrapper: what it would run is read too, for deny and ask rules and for allow
            index = add(self.out, argv, writes, reads, ctx, outer)
            return wrapper(self, prog, argv, ctx, stdin, writes, reads, outer, level, as_path=index)
        handler = _HANDLERS.get(prog)
        if handler is not None:
            return handler(self, argv, ctx, stdin, writes, reads, outer, level)
        if prog in RUNS_UNREAD:
            index = add(self.out, argv, writes, reads, ctx, outer)
            note(self.out, index, f"runs commands through {prog}, which the guard does not read", coverable=False)
            return None
        at = runner_start(values)
        if at is not None:
            return runner(self, argv, at, ctx, stdin, writes, reads, outer, level)
        if is_shell(prog):
            return shell(self, prog, argv, ctx, stdin, writes, reads, outer)
        index = add(self.out, argv, writes, reads, ctx, outer)
        interpreter(self.out, prog, argv, ctx, stdin, index)
        file_operands(self.out, prog, argv, ctx, index)
        if "/" in head.value:
            return pipe_output(values, stdin)
        if prog == "make":
            make(self.out, argv, index)
        elif prog in AWKS:
            awk(self.out, argv, index)
        elif prog in SEDS:
            sed(self.out, argv, ctx, index)
        else:
            builtin(self, prog, argv, ctx, stdin, index)
        return pipe_output(values, stdin)

    # -- code found inside the command -------------------------------------------------------

    def code(self, text: str, ctx: Ctx, via: str) -> None:
        """Walk ``text`` as the program it is (a ``-c`` string, a here-document a shell reads)."""
        if self.depth + 1 > MAX_DEPTH:
            self.out.unknown(f"is nested too deeply to read ({via})")
            return
        if "\0" in text:
            self.out.unknown(f"has code for {via} with a NUL byte")
            return
        _Walker(text, self.depth + 1, self.out, via).program(ctx.copy(nested=True))


# Programs read by rules of their own (``special``, ``wrappers``).
_HANDLERS: dict[str, Handler] = {
    "find": find, "git": git, "flock": flock, "script": script, "watch": watch, "busybox": busybox, "coproc": coproc,
    "parallel": parallel, "su": su,
}


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


def _first_error(node: Node) -> Node | None:
    while True:
        if node.is_error or node.is_missing:
            return node
        below = next((c for c in node.children if c.has_error or c.is_missing), None)
        if below is None:
            return None
        node = below
