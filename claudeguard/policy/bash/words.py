"""Shell words: a word's value after quote removal, and the code that runs inside it.

tree-sitter-bash finds the words; it does not compute their values. What remains of a lexer is
here: quote removal on the tokens it gives (``unescape_unquoted``: a backslash escapes the next
character; ``_unescape_double``: inside ``"..."`` it escapes only ``$ ` " \\`` and newline;
``_ansi_c``: ``$'...'``) and ``brace_expand`` for deny readings. A word that expands at run time
(``$x``, ``$(...)``, ``$((...))``) keeps its text as written and is not literal; the
substitutions inside it run, so they are walked (``Walk.statements``), and expansions that can
run code held in a variable (indirection, prompt expansion, arithmetic on variables) are
unknowns.
"""

from __future__ import annotations

from claudeguard.policy.bash.model import MAX_TREE_DEPTH, Word, short

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from tree_sitter import Node

    from claudeguard.policy.bash.model import Ctx, Walk

# The node types that are one shell word (or a piece of one).
WORD_TYPES = frozenset({
    "word", "string", "raw_string", "ansi_c_string", "translated_string", "concatenation", "number",
    "simple_expansion", "expansion", "command_substitution", "process_substitution", "arithmetic_expansion",
    "brace_expression", "special_variable_name", "variable_name", "extglob_pattern", "regex",
})
_GLOB = frozenset("*?[")
# the node types whose text is the word itself (quote removal aside)
_PLAIN = ("word", "number", "special_variable_name", "variable_name", "regex", "extglob_pattern")


def word(walk: Walk, node: Node, ctx: Ctx, level: int) -> Word:
    """A word's value after quote removal; substitutions inside it are walked (they run)."""
    parts: list[str] = []
    flags = [True, False, False, False]  # literal, glob, brace, quoted
    word_parts(walk, node, ctx, level, parts, flags, quoted=False)
    src = walk.text(node)
    value = "".join(parts) if flags[0] else src
    return Word(value, src, flags[0], flags[1], flags[2], flags[3], node)


def word_parts(walk: Walk, node: Node, ctx: Ctx, level: int, parts: list[str], flags: list[bool],
               quoted: bool) -> None:
    """The pieces of ``node``'s value go to ``parts``; ``flags`` (literal, glob, brace, quoted)
    say what the word is. Inside ``"..."`` (``quoted``) a word's text is taken as it is."""
    if level > MAX_TREE_DEPTH:
        walk.out.unknown("is nested too deeply to read")
        flags[0] = False
        return
    kind = node.type
    text = walk.text(node)
    if kind in _PLAIN:
        _plain(walk, text, quoted, parts, flags)
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
                word_parts(walk, child, ctx, level + 1, parts, flags, quoted)
        return
    if kind == "string":
        _string(walk, node, ctx, level, parts, flags)
        return
    if kind == "concatenation":
        _concatenation(walk, node, ctx, level, parts, flags, quoted)
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
        walk.statements(node, ctx.copy(nested=True, stdin=feeds), level)
        return
    if kind == "arithmetic_expansion":
        if text.startswith("$["):
            walk.out.unknown(f"uses the old $[...] arithmetic, which the guard does not read: {short(text)}")
        elif _has_variable(node):
            walk.out.unknown(f"evaluates arithmetic on variables, which can run code: {short(text)}")
        _subs_in(walk, node, ctx, level)
        return
    if kind == "expansion":
        _expansion(walk, node, ctx, level, text)
        return
    if kind == "simple_expansion":
        return
    _subs_in(walk, node, ctx, level)


def _plain(walk: Walk, text: str, quoted: bool, parts: list[str], flags: list[bool]) -> None:
    """A word token: backslashes removed outside quotes; a glob or a brace expansion noted."""
    if quoted:
        parts.append(text)
        return
    if "\n" in text:  # no unquoted word holds a newline: the parser has read it wrong
        walk.out.unknown("has a word across lines, which the guard does not read")
        flags[0] = False
        return
    value = unescape_unquoted(text)
    if value is None:
        flags[0] = False
        return
    if any(c in _GLOB for c in _unquoted_chars(text)):
        flags[1] = True
    if "{" in text and ("," in text or ".." in text):
        flags[2] = True
    parts.append(value)


def _string(walk: Walk, node: Node, ctx: Ctx, level: int, parts: list[str], flags: list[bool]) -> None:
    """``"..."``: its text with the double quotes' escapes removed, its expansions read inside."""
    flags[3] = True
    children = node.children
    if children and children[0].type == '"' and children[-1].type == '"' and len(children) > 1:
        children = children[1:-1]
    for child in children:
        if child.type == "string_content":
            parts.append(_unescape_double(walk.text(child)))
        elif child.is_named:
            word_parts(walk, child, ctx, level + 1, parts, flags, quoted=True)
        else:
            parts.append(walk.text(child))  # a lone "$"


def _concatenation(walk: Walk, node: Node, ctx: Ctx, level: int, parts: list[str], flags: list[bool],
                   quoted: bool) -> None:
    """Pieces glued into one word (``a"b"$c``); a ``{`` in one piece and a ``,`` in another is a
    brace expansion too."""
    raw = [c for c in node.children if c.type == "word"]
    if not quoted and any("{" in walk.text(c) for c in raw) and any(
            "," in walk.text(c) or ".." in walk.text(c) for c in raw):
        flags[2] = True
    for child in node.children:
        if child.is_named:
            word_parts(walk, child, ctx, level + 1, parts, flags, quoted)
        elif child.type == "$" and string_follows(child):
            continue  # $"..." (a translated string): the string follows
        else:
            parts.append(walk.text(child))


def _expansion(walk: Walk, node: Node, ctx: Ctx, level: int, text: str) -> None:
    """``${...}``: indirection, prompt expansion and arithmetic in offsets or subscripts can
    run code held in a variable."""
    tokens = [c.type for c in node.children]
    if len(tokens) > 1 and tokens[1] == "!":
        walk.out.unknown(f"expands a variable named by another variable: {short(text)}")
    if "@" in tokens and text.rstrip("}").endswith(("P", "A", "K", "k")):
        walk.out.unknown(f"expands a variable as a prompt: {short(text)}")
    for child in node.children:
        if child.type == "subscript":
            index = child.child_by_field_name("index")
            if index is not None and index.type not in ("number", "word") or (
                    index is not None and index.type == "word" and walk.text(index) not in ("@", "*")
                    and not walk.text(index).isdigit()):
                walk.out.unknown(f"evaluates an array subscript, which can run code: {short(text)}")
    if ":" in tokens and any(t in ("simple_expansion", "expansion", "variable_name", "binary_expression")
                             for t in tokens[tokens.index(":") + 1:]):
        walk.out.unknown(f"evaluates arithmetic on variables, which can run code: {short(text)}")
    _subs_in(walk, node, ctx, level)


def _subs_in(walk: Walk, node: Node, ctx: Ctx, level: int) -> None:
    """The substitutions anywhere below ``node`` (they run)."""
    for child in node.children:
        if child.type in ("command_substitution", "process_substitution"):
            feeds = ("data", "a process substitution") if walk.text(child).startswith(">(") else None
            walk.statements(child, ctx.copy(nested=True, stdin=feeds), level + 1)
        elif child.type == "expansion":
            _expansion(walk, child, ctx, level + 1, walk.text(child))
        elif child.child_count:
            _subs_in(walk, child, ctx, level + 1)


def inside_quotes(node: Node, offset: int) -> bool:
    """Whether ``offset`` lies in a quoted string or a here-document body (where the
    backslash-newline is not between words)."""
    found = node.descendant_for_byte_range(offset, offset + 1)
    while found is not None and found != node:
        if found.type in ("string", "raw_string", "ansi_c_string", "heredoc_body", "comment"):
            return True
        found = found.parent
    return False


def string_follows(node: Node) -> bool:
    """Whether ``node`` (a ``$``) is glued to a double-quoted string after it: ``$"..."``."""
    after = node.next_sibling
    return after is not None and after.type == "string" and after.start_byte == node.end_byte


def _has_variable(node: Node) -> bool:
    stack = list(node.children)
    while stack:
        n = stack.pop()
        if n.type in ("variable_name", "simple_expansion", "expansion", "command_substitution", "word",
                      "subscript"):
            return True
        stack.extend(n.children)
    return False


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


def unescape_unquoted(text: str) -> str | None:
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


def brace_expand(word: str) -> str:
    """One level of ``a{b,c}d`` -> ``abd acd`` (enough for deny readings)."""
    start = word.find("{")
    end = word.find("}", start + 1)
    if start < 0 or end < 0 or "," not in word[start:end]:
        return word
    return " ".join(word[:start] + alt + word[end + 1:] for alt in word[start + 1:end].split(","))
