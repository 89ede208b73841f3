"""A simple command: its words, assignments and redirections read, then what it runs.

``command`` reads one ``command`` node (or a bare assignment, a declaration, a test): the
words after quote removal (``words``), the assignments before them (one that changes what a
command runs, ``PATH=`` or ``LD_PRELOAD=``, is an unknown), its redirections (with the ones
tree-sitter hung on the list or pipeline around it) and what they feed its stdin. Then the
program the words name is read by ``Walk.run``. A backslash-newline that bash would join into
one word (``gi\\<newline>t``) is an unknown: tree-sitter-bash reads two.
"""

from __future__ import annotations

from claudeguard.policy.bash.model import Word, lit, normalize_space, short
from claudeguard.policy.bash.programs import risky_assignment
from claudeguard.policy.bash.record import add
from claudeguard.policy.bash.redirects import REDIRECTS, redirect_target, redirections
from claudeguard.policy.bash.words import WORD_TYPES, inside_quotes, string_follows, word

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from tree_sitter import Node

    from claudeguard.policy.bash.model import Ctx, Stream, Target, Walk


def command(walk: Walk, node: Node, redirect_nodes: list[Node], ctx: Ctx, stdin: Stream, level: int) -> Stream:
    """One simple command with the redirections hung around it (``redirect_nodes``), fed
    ``stdin`` by the pipeline; outermost, it is a surface (what Claude Code's rules see)."""
    surface_set = ctx.surface is None
    if surface_set:
        parent = node.parent
        shown = parent if parent is not None and parent.type == "redirected_statement" and redirect_nodes else node
        ctx.surface = normalize_space(walk.text(shown))
        if walk.depth == 0:
            walk.out.surfaces.append(ctx.surface)
    outer_at = ctx.insert_at
    ctx.insert_at = len(walk.out.invocations)
    try:
        return _command(walk, node, redirect_nodes, ctx, stdin, level)
    finally:
        ctx.insert_at = outer_at
        if surface_set:
            ctx.surface = None


def _command(walk: Walk, node: Node, redirect_nodes: list[Node], ctx: Ctx, stdin: Stream, level: int) -> Stream:
    kind = node.type
    assignments, words, inner_redirects = _parts(walk, node, ctx, level)
    if kind == "test_command" and words and words[0].value == "[[" and any(
            w.value in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge") for w in words):
        walk.out.unknown("compares numbers in [[ ]], which evaluates variables as arithmetic")
    if kind in ("variable_assignment", "variable_assignments"):
        assignments = [_assignment(walk, node, ctx, level)] if kind == "variable_assignment" else [
            _assignment(walk, c, ctx, level) for c in node.children if c.type == "variable_assignment"]
    _line_continuations(walk, node)
    redirs = redirections(walk, list(redirect_nodes) + inner_redirects, ctx, level)
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
        if risky_assignment(name, value.value if value is not None and value.literal else None):
            walk.out.unknown(f"sets {name}, which changes what a command runs")
    writes: list[Target] = []
    reads: list[Target] = []
    for redir in redirs:
        found = redirect_target(redir, ctx)
        if found is not None:
            (writes if found[0] == "w" else reads).append(found[1])
    if kind in ("declaration_command",):
        for name, value in assignments:
            words.append(lit(name if value is None else f"{name}={value.value}"))
    if not words:
        text = normalize_space(" ".join(
            [walk.text(node)] if kind.startswith("variable_assignment") else []))
        if text or writes or reads:
            add(walk.out, [lit(text)] if text else [], writes, reads, ctx, [])
        return None
    return walk.run(words, 0, ctx, stdin, writes, reads, [], level)


def _parts(walk: Walk, node: Node, ctx: Ctx, level: int) -> tuple[list[tuple[str, Word | None]], list[Word],
                                                                  list[Node]]:
    """A command node's children: its leading assignments, its words (substitutions in them
    walked) and its own redirections."""
    assignments: list[tuple[str, Word | None]] = []
    words: list[Word] = []
    redirects: list[Node] = []
    kind = node.type
    pending_dollar = False
    for child in node.children if not kind.startswith("variable_assignment") else ():
        t = child.type
        if t == "variable_assignment":
            assignments.append(_assignment(walk, child, ctx, level))
        elif t == "variable_assignments":
            assignments += [_assignment(walk, c, ctx, level) for c in child.children
                            if c.type == "variable_assignment"]
        elif t == "command_name":
            for c in child.children:
                if c.is_named:
                    words.append(word(walk, c, ctx, level + 1))
        elif t in REDIRECTS:
            redirects.append(child)
        elif t in ("subscript",):
            words.append(word(walk, child, ctx, level + 1))
        elif kind == "test_command" or t in ("unary_expression", "binary_expression", "ternary_expression",
                                             "parenthesized_expression", "postfix_expression"):
            if not child.is_named:
                words.append(lit(walk.text(child)))
            else:
                _test_words(walk, child, ctx, level, words)
        elif t in WORD_TYPES:
            read = word(walk, child, ctx, level + 1)
            if pending_dollar and child.type == "string":
                read.src = "$" + read.src
            words.append(read)
        elif not child.is_named and t in ("declare", "typeset", "export", "readonly", "local", "unset",
                                          "unsetenv"):
            words.append(lit(walk.text(child)))
        elif t == "$":
            if string_follows(child):
                pending_dollar = True  # $"..." (a translated string)
                continue
            words.append(lit("$"))
        elif t == "comment":
            continue
        pending_dollar = False
    return assignments, words, redirects


def _test_words(walk: Walk, node: Node, ctx: Ctx, level: int, words: list[Word]) -> None:
    for child in node.children:
        if child.type in WORD_TYPES and child.type != "regex":
            words.append(word(walk, child, ctx, level + 1))
        elif child.child_count and child.is_named:
            _test_words(walk, child, ctx, level + 1, words)
        else:
            words.append(lit(walk.text(child)))


def _assignment(walk: Walk, node: Node, ctx: Ctx, level: int) -> tuple[str, Word | None]:
    name_node = node.child_by_field_name("name")
    name = walk.text(name_node) if name_node is not None else walk.text(node).split("=", 1)[0]
    if name_node is not None and name_node.type == "subscript":
        walk.out.unknown(f"assigns to an array element, whose subscript can run code: {short(walk.text(node))}")
        name = walk.text(name_node).split("[", 1)[0]
    value_node = node.child_by_field_name("value")
    value = None
    if value_node is not None:
        if value_node.type == "array":
            for c in value_node.children:
                if c.type in WORD_TYPES:
                    word(walk, c, ctx, level + 1)
            value = Word(walk.text(value_node), walk.text(value_node), False, False, False, False, value_node)
        else:
            value = word(walk, value_node, ctx, level + 1)
    elif "=" in walk.text(node):
        value = lit("")
    return name, value


def _line_continuations(walk: Walk, node: Node) -> None:
    """bash joins two words that a backslash-newline separates with nothing else between
    them (``gi\\<newline>t``); tree-sitter-bash reads two words."""
    end = node.end_byte
    start = node.start_byte
    chunk = walk.data[start:end]
    at = chunk.find(b"\\\n")
    while at >= 0:
        before = chunk[at - 1:at] if at else b" "
        after = chunk[at + 2:at + 3]
        if before not in (b" ", b"\t", b"\n", b"\\") and after not in (b" ", b"\t", b"\n", b""):
            if not inside_quotes(node, start + at):
                walk.out.unknown("joins words with a backslash-newline, which the guard does not read")
                return
        at = chunk.find(b"\\\n", at + 2)
