"""The files a command reads and writes, and what its redirections feed it.

Redirections (``> f``, ``2>&1``, ``< f``) and here-strings and here-documents, which give the
command's stdin a text the guard can read again as code (``bash <<EOF``) or data it cannot. A
here-document's end is found again the way bash finds it (the first line that is the delimiter,
tabs stripped for ``<<-``): where tree-sitter-bash ends it elsewhere, the walk asks. An unquoted
document with ``$`` or backquotes is parsed again as a plain ``<<`` document (tree-sitter leaves
``$(...)`` after ``<<-`` and every backquote as text). Then the files a known program takes as
operands (``rm x``, ``cp a b``) or names with an output option (``tee``, ``-o F``, ``--output=F``,
``curl -sSLo F``).
"""

from __future__ import annotations

from claudeguard.policy.bash.grammar import parse
from claudeguard.policy.bash.model import MAX_DEPTH, PARSER_LOCK, Target, decode, is_fd_path
from claudeguard.policy.bash.programs import (
    CLUSTERED, COPIERS, OPERAND_WRITERS, OUTPUT_OPTIONS, PATTERN_FIRST, READERS, SAFE_TARGETS,
)
from claudeguard.policy.bash.words import WORD_TYPES, unescape_unquoted, word, word_parts

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from tree_sitter import Node

    from claudeguard.policy.bash.model import Ctx, Findings, Stream, Walk, Word

REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})


class Redir:
    """One redirection of a command, read: ``op`` ("arg" for a word after the target, which is
    the command's), the fd it names, its target word, what it feeds stdin."""

    __slots__ = ("op", "fd", "target", "stdin", "shown")

    def __init__(self, op: str, fd: str | None, target: Word | None, stdin: Stream, shown: str = "") -> None:
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


def redirections(walk: Walk, nodes: list[Node], ctx: Ctx, level: int) -> list[Redir]:
    """The redirections ``nodes`` read, in order; the words in their targets are walked (they run)."""
    out = []
    for node in nodes:
        if node.type == "file_redirect":
            op = ""
            fd = None
            targets: list[Word] = []
            for child in node.children:
                if child.type == "file_descriptor":
                    fd = walk.text(child)
                elif not child.is_named:
                    op = walk.text(child)
                elif child.type in WORD_TYPES:
                    targets.append(word(walk, child, ctx, level + 1))
            target = targets[0] if targets else None
            out.append(Redir(op, fd, target, None, (fd or "") + op))
            for extra in targets[1:]:  # ``echo > f x``: x is an argument of echo
                out.append(Redir("arg", None, extra, None))
        elif node.type == "herestring_redirect":
            words = [word(walk, c, ctx, level + 1) for c in node.children if c.type in WORD_TYPES]
            here = words[0] if words else None
            stream: Stream = ("text", here.value + "\n") if here is not None and here.literal else (
                "data", "a here-string")
            out.append(Redir("<<<", None, here, stream, "<<<"))
        elif node.type == "heredoc_redirect":
            start = next((c for c in node.children if c.type == "heredoc_start"), None)
            op = "<<-" if any(c.type == "<<-" for c in node.children) else "<<"
            out.append(Redir("<<", None, None, _heredoc(walk, node, ctx, level),
                             op + (walk.text(start) if start is not None else "")))
    return out


def _heredoc(walk: Walk, node: Node, ctx: Ctx, level: int) -> Stream:
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
    raw_delim = walk.text(start)
    quoted = any(c in raw_delim for c in "'\"\\")
    delim = unescape_unquoted(raw_delim.replace("'", "").replace('"', "")) or raw_delim
    data = walk.data
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
        walk.out.unknown("has a here-document whose end the guard cannot tell")
        return ("data", "a here-document")
    text = decode(data[body_start:end_line])
    if dash:
        text = "".join(line.lstrip("\t") for line in text.splitlines(keepends=True))
    if quoted:
        return ("text", text)
    if "\\\n" in text:
        walk.out.unknown("has a here-document with a line continuation")
        return ("data", "a here-document")
    if "`" in text or "$" in text:
        return _expanding_heredoc(walk, text, ctx, level)
    return ("text", text.replace("\\\\", "\\"))


def _expanding_heredoc(walk: Walk, text: str, ctx: Ctx, level: int) -> Stream:
    """An unquoted here-document with ``$`` or backquotes: its substitutions run, and the text
    it gives is not known. tree-sitter-bash leaves backquotes (and, after ``<<-``, ``$(``) in
    the body as plain text, so the body is parsed again as a plain ``<<`` document."""
    if "`" in text.replace("\\`", ""):
        walk.out.unknown("has a here-document with backquotes, which the guard does not read")
        return ("data", "a here-document")
    sentinel = "CLAUDEGUARD_END"
    while sentinel in text:
        sentinel += "_"
    if walk.depth >= MAX_DEPTH:
        walk.out.unknown("is nested too deeply to read")
        return ("data", "a here-document")
    sub = walk.deeper(f"cat <<{sentinel}\n{text}{sentinel}\n", walk.via)
    with PARSER_LOCK:
        tree = parse(sub.data)
    if tree.root_node.has_error:
        walk.out.unknown("has a here-document the guard cannot parse")
        return ("data", "a here-document")
    for node in _descendants(tree.root_node, "heredoc_body"):
        for child in node.children:
            if child.type == "heredoc_content":
                content = sub.text(child).replace("\\$", "")
                if "$(" in content or "$[" in content:
                    walk.out.unknown("has a here-document with a substitution the guard cannot read")
            elif child.is_named:
                word_parts(sub, child, ctx, level + 1, [], [True, False, False, False], quoted=True)
    return ("data", "a here-document with expansions")


def redirect_target(redir: Redir, ctx: Ctx) -> tuple[str, Target] | None:
    """("w", target) for a redirection that writes a file, ("r", target) for one that reads."""
    op = redir.op
    word = redir.target
    if op in _WRITE_OPS and word is not None:
        if op == ">&" and word.literal and (word.value.rstrip("-").isdigit() or word.value == "-"):
            return None  # a file descriptor duplicated or closed: no file
        if word.literal and (word.value in SAFE_TARGETS or is_fd_path(word.value)):
            return None
        return ("w", Target(word.value if word.literal else None, ctx.cwd, "redirect", f"{op} {word.src}"))
    if op == "<&" or op == ">&-" or op == "<&-":
        return None
    if op == "<" and word is not None:
        return ("r", Target(word.value if word.literal else None, ctx.cwd, "redirect", f"< {word.src}"))
    return None


def loose_redirects(out: Findings, redirs: list[Redir], ctx: Ctx) -> None:
    """Redirections of a compound command (``{ ...; } > f``) or of nothing at all."""
    for redir in redirs:
        target = redirect_target(redir, ctx)
        if target is not None:
            (out.loose_writes if target[0] == "w" else out.loose_reads).append(target[1])


def file_operands(out: Findings, prog: str, argv: list[Word], ctx: Ctx, index: int) -> None:
    """The files a known reader or writer takes as operands or option values."""
    inv = out.invocations[index]
    values = [w.value for w in argv]
    operands = [w for w in argv[1:] if not w.value.startswith("-") or w.value == "-" or not w.literal]
    if "--" in values:
        after = values.index("--")
        operands = [w for w in argv[1:after] if not w.value.startswith("-")] + argv[after + 1:]

    def target(w: Word, kind: str, via: str) -> Target:
        return Target(w.value if w.literal else None, ctx.cwd, kind, via)

    if prog in OPERAND_WRITERS:
        inv.writes += [target(w, "operand", prog) for w in operands]
    elif prog in COPIERS:
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
                       if not (w.literal and (w.value in SAFE_TARGETS or is_fd_path(w.value)))]
    elif prog == "dd":
        for w in argv[1:]:
            if w.value.startswith("of="):
                inv.writes.append(Target(w.value[3:] if w.literal else None, ctx.cwd, "operand", "dd of="))
            elif w.value.startswith("if="):
                inv.reads.append(Target(w.value[3:] if w.literal else None, ctx.cwd, "operand", "dd if="))
    elif prog in ("uniq",) and len(operands) >= 2:
        inv.writes.append(target(operands[1], "option", "uniq"))
        inv.reads.append(target(operands[0], "operand", "uniq"))
    elif prog in READERS:
        if prog in PATTERN_FIRST and operands and not any(
                v in ("-e", "-f", "--regexp", "--file") or v.startswith(("--regexp=", "--file=")) for v in values):
            operands = operands[1:]  # the pattern, the program, the filter
        inv.reads += [target(w, "operand", prog) for w in operands]
    outputs = OUTPUT_OPTIONS.get(prog)
    if outputs:
        inv.writes += _output_files(prog, argv, outputs, ctx)
    inv.changes = inv.changes or bool(inv.writes)


def _output_files(prog: str, argv: list[Word], outputs: tuple[str, ...], ctx: Ctx) -> list[Target]:
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
            elif prog in CLUSTERED:
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


def _descendants(node: Node, kind: str) -> list[Node]:
    found = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == kind:
            found.append(n)
        stack.extend(n.children)
    return found
