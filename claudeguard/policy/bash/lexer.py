"""The lexer: a command line as bash tokenizes it (words, operators, redirections, here-documents).

Every quoted or expanded piece of text (an unquoted word, the inside of ``"..."``, an unquoted
here-document body, the operand of ``${x:-word}``) is read by one routine, ``Lexer.scan``; a
context says what ends it, what a backslash escapes and which quotes open there. Keeping that one
loop matters: this is a security boundary, and copies of it drift apart.

Command substitutions hold whole command lists (``$(...)``, backticks, ``<(...)``), so the lexer
calls back into the grammar through ``parse_list``, which ``parser.Parser`` provides; every simple
command it finds lands in ``cmds``. Anything the lexer cannot read with confidence is noted
(``note``); anything it cannot read at all raises ``Fatal``.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    Token = tuple[Any, ...]  # ("eof",) ("nl",) ("op", str) ("word", Word) ("redir", Redir)

MAX_DEPTH = 12  # nested $(...), backticks and sh -c; deeper means "cannot tell"


class LazyRe:
    """A regex compiled on first use (import time matters more than the first match)."""

    __slots__ = ("_pattern", "_flags", "_rx")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._pattern = pattern
        self._flags = flags
        self._rx: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(self._pattern, self._flags)
        return getattr(rx, name)


class Fatal(Exception):
    """The parser cannot continue (unbalanced quote, missing ')', ...)."""


class Word:
    """One shell word: its source text and its value with quotes removed (expansions as written)."""

    __slots__ = ("src", "value", "dynamic", "glob", "brace", "quoted")

    def __init__(self, src: str, value: str, dynamic: bool, glob: bool, brace: bool, quoted: bool) -> None:
        self.src = src
        self.value = value
        self.dynamic = dynamic  # holds $..., `...`, $(...): its value is not known before running
        self.glob = glob  # unquoted * ? [..]: pathname expansion
        self.brace = brace  # unquoted {a,b} or {1..3}: brace expansion
        self.quoted = quoted

    @property
    def static(self) -> bool:
        return not (self.dynamic or self.glob or self.brace)

    @property
    def literal(self) -> bool:
        """An unquoted plain word, as reserved words must be."""
        return self.static and not self.quoted


class Redir:
    """One redirection: ``2>>log``, ``<<EOF``, ``>&2``, ..."""

    __slots__ = ("fd", "op", "target", "src")

    def __init__(self, fd: str, op: str, target: Word, src: str) -> None:
        self.fd = fd  # "", "2", "{name}"
        self.op = op  # ">", ">>", "<<", ">&", ...
        self.target = target
        self.src = src

    @property
    def plain(self) -> str:
        return self.fd + self.op + ("" if self.op.endswith("&") else " ") + self.target.value


class Cmd:
    """One simple command: its words and redirections, in source order."""

    __slots__ = ("words", "redirs")

    def __init__(self) -> None:
        self.words: list[Word] = []
        self.redirs: list[Redir] = []


_OPERATORS = ("&&", "||", ";;&", ";;", ";&", "|&", ";", "&", "|", "(", ")")
_REDIR_OPS = ("&>>", "&>", "<<<", "<<-", "<<", "<&", "<>", "<", ">>", ">&", ">|", ">")
_META = " \t\n;&|()<>"
NAME_RE = LazyRe(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGN_RE = LazyRe(r"([A-Za-z_][A-Za-z0-9_]*)(\+?=)")
_SAFE_ARITH_RE = LazyRe(r"[0-9\s+\-*/%()<>=!&|^~?:,]*")
_FD_RE = LazyRe(r"[0-9]+(?=[<>])|\{[A-Za-z_][A-Za-z0-9_]*\}(?=[<>])")
_GLOB_CLASS_RE = LazyRe(r"\[[^\]]*\]")
_BRACE_RE = LazyRe(r"\{[^{}\s]*(?:,|\.\.)[^{}\s]*\}")
_BLANKS = str.maketrans("\t\n\r\f\v", "     ")
_ANSI_C_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
                   "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}

# The contexts of Lexer.scan.
IN_WORD = 0  # an unquoted word: ends before a metacharacter
IN_DQUOTE = 1  # after an opening '"': ends after the closing one
IN_HEREDOC = 2  # an unquoted here-document body: read like "...", to the end of the text
IN_OPERAND = 3  # the word in ${x:-word}: ends after the '}'
IN_OPERAND_DQ = 4  # the same inside "..."
_UNBALANCED = {IN_DQUOTE: "unbalanced double quote", IN_OPERAND: "unbalanced ${", IN_OPERAND_DQ: "unbalanced ${"}
# What a backslash escapes where the double-quote rule holds (elsewhere it escapes any character).
_DQ_ESCAPES = {IN_DQUOTE: '$`"\\\n', IN_HEREDOC: "$`\\\n"}

def normalize_space(text: str) -> str:
    """Runs of ASCII whitespace as one space (rule patterns and command texts alike).

    Only ASCII: bash does not split words on a no-break space, so neither may we.
    """
    return " ".join([w for w in text.translate(_BLANKS).split(" ") if w])


def basename(word: str) -> str:
    """The last component of a path (a command word's name)."""
    return word.rsplit("/", 1)[-1]


def _clean(src: str) -> str:
    """Source text as bash reads it: line continuations removed."""
    return src.replace("\\\n", "")


def _odd_backslashes(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


class Lexer:
    """Tokens of one source text, with one token of lookahead; the grammar is ``parser.Parser``."""

    def __init__(self, src: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise Fatal("nested too deeply")
        self.s = src
        self.i = 0
        self.n = len(src)
        self.depth = depth
        self.cmds: list[Cmd] = []  # the simple commands found, nested ones included
        self.unsure: str | None = None
        self.heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, strip tabs, quoted)
        self.buf: Token | None = None
        self.nest = 0

    # -- bookkeeping --------------------------------------------------------------------------
    def note(self, reason: str) -> None:
        if self.unsure is None:
            self.unsure = reason

    def parse_list(self, end: str | None) -> None:
        raise NotImplementedError  # the grammar: parser.Parser

    def _absorb(self, sub: Lexer) -> None:
        self.cmds.extend(sub.cmds)
        if sub.unsure:
            self.note(sub.unsure)

    def _sub_parse(self, text: str) -> None:
        """Parse ``text`` as a separate command list (backticks, arithmetic holding $(...))."""
        sub = type(self)(text, self.depth + 1)
        try:
            sub.parse_list(None)
        finally:
            self._absorb(sub)

    # -- tokens -------------------------------------------------------------------------------
    def peek(self) -> Token:
        if self.buf is None:
            self.buf = self._lex()
        return self.buf

    def next(self) -> Token:
        tok = self.peek()
        self.buf = None
        return tok

    def push(self, tok: Token) -> None:
        assert self.buf is None
        self.buf = tok

    def _skip_blanks(self) -> None:
        s, n = self.s, self.n
        while self.i < n:
            c = s[self.i]
            if c in " \t":
                self.i += 1
            elif c == "\\" and self.i + 1 < n and s[self.i + 1] == "\n":
                self.i += 2
            else:
                break

    def _lex(self) -> Token:
        s = self.s
        while True:
            self._skip_blanks()
            if self.i >= self.n:
                return ("eof",)
            c = s[self.i]
            if c == "#":
                # A comment runs to the end of the line; a backslash does not continue it.
                j = s.find("\n", self.i)
                self.i = self.n if j < 0 else j
                continue
            break
        if c == "\n":
            self.i += 1
            if self.heredocs:
                self._read_heredocs()
            return ("nl",)
        if c in "<>" and s.startswith("(", self.i + 1):
            return ("word", self._word())  # process substitution <(...) / >(...)
        # A redirection's fd: "2>x", "{v}>x". (Tested first so most words never compile the regex.)
        m = _FD_RE.match(s[self.i:self.i + 40]) if c in "0123456789{" else None
        if m and not s.startswith("(", self.i + len(m.group()) + 1):
            self.i += len(m.group())
            return self._redirect(m.group())
        for op in _REDIR_OPS:
            if s.startswith(op, self.i):
                return self._redirect("")
        for op in _OPERATORS:
            if s.startswith(op, self.i):
                self.i += len(op)
                return ("op", op)
        return ("word", self._word())

    def _redirect(self, fd: str) -> Token:
        s = self.s
        op = next(o for o in _REDIR_OPS if s.startswith(o, self.i))
        start = self.i - len(fd)
        self.i += len(op)
        self._skip_blanks()
        if self.i >= self.n or s[self.i] in "\n;&|()" or (s[self.i] in "<>" and not s.startswith("(", self.i + 1)):
            raise Fatal(f"redirection {op} without a target")
        target = self._word()
        if op in ("<<", "<<-"):
            self.heredocs.append((target.value, op == "<<-", target.quoted))
        return ("redir", Redir(fd, op, target, _clean(s[start:self.i])))

    def _read_heredocs(self) -> None:
        pending, self.heredocs = self.heredocs, []
        s = self.s
        for delim, strip_tabs, quoted in pending:
            body: list[str] = []
            while True:
                if self.i >= self.n:
                    self.note(f"here-document without its end line {delim!r}")
                    break
                j = s.find("\n", self.i)
                line = s[self.i:] if j < 0 else s[self.i:j]
                self.i = self.n if j < 0 else j + 1
                if strip_tabs:
                    line = line.lstrip("\t")
                # In an unquoted body bash joins "\<newline>" lines before it looks for the end
                # line, so "E\<newline>OF" ends the document: follow it, but do not trust it.
                while not quoted and _odd_backslashes(line) and self.i < self.n:
                    self.note("line continuation in a here-document")
                    j = s.find("\n", self.i)
                    nxt = s[self.i:] if j < 0 else s[self.i:j]
                    self.i = self.n if j < 0 else j + 1
                    line = line[:-1] + (nxt.lstrip("\t") if strip_tabs else nxt)
                if line == delim:
                    break
                body.append(line)
            if not quoted:
                # An unquoted delimiter means the body is expanded: $(...) and `...` run.
                sub = type(self)("\n".join(body), self.depth + 1)
                try:
                    sub.scan(IN_HEREDOC, [], {"dynamic": False, "quoted": False})
                finally:
                    self._absorb(sub)

    # -- words --------------------------------------------------------------------------------
    def _word(self) -> Word:
        start = self.i
        val: list[str] = []
        uq: list[str] = []  # the unquoted literal characters, "\0" for anything else
        flags = {"dynamic": False, "quoted": False}
        self.scan(IN_WORD, val, flags, uq)
        if self.i == start:
            raise Fatal(f"unexpected {self.s[self.i]!r}")
        raw_uq = "".join(uq)
        glob = "*" in raw_uq or "?" in raw_uq or ("[" in raw_uq and bool(_GLOB_CLASS_RE.search(raw_uq)))
        brace = "{" in raw_uq and bool(_BRACE_RE.search(raw_uq))
        return Word(_clean(self.s[start:self.i]), "".join(val), flags["dynamic"], glob, brace, flags["quoted"])

    def scan(self, ctx: int, val: list[str], flags: dict[str, bool], uq: list[str] | None = None) -> None:
        """Read text in context ``ctx`` (an ``IN_*``) from ``self.i`` up to where that context ends.

        Appends the text's value to ``val`` (quotes removed, expansions as written), sets
        ``flags["quoted"]`` and ``flags["dynamic"]``, and for an unquoted word collects in ``uq``
        its unquoted literal characters ("\\0" for anything else) for glob and brace detection.
        The commands in every ``$(...)`` and backtick it meets are parsed on the way.
        """
        s, n = self.s, self.n
        in_dq = ctx == IN_DQUOTE or ctx == IN_HEREDOC or ctx == IN_OPERAND_DQ
        dq_escapes = _DQ_ESCAPES.get(ctx)
        start = self.i
        while True:
            if self.i >= n:
                if ctx == IN_WORD or ctx == IN_HEREDOC:
                    return
                raise Fatal(_UNBALANCED[ctx])
            c = s[self.i]
            if ctx == IN_WORD:
                if c in "<>" and self.i == start and s.startswith("(", self.i + 1):
                    self._process_subst(val, flags)
                    if uq is not None:
                        uq.append("\0")
                    continue
                if c in _META:
                    return
            elif ctx == IN_DQUOTE:
                if c == '"':
                    self.i += 1
                    return
            elif ctx != IN_HEREDOC and c == "}":
                self.i += 1
                return
            lit = "\0"  # what uq gets: the character itself only when it stands for itself unquoted
            if c == "\\":
                nxt = s[self.i + 1] if self.i + 1 < n else ""
                if dq_escapes is not None:
                    # Inside double quotes a backslash escapes only a few characters.
                    if nxt and nxt in dq_escapes:
                        if nxt != "\n":
                            val.append(nxt)
                        self.i += 2
                    else:
                        val.append(c)
                        self.i += 1
                elif not nxt:
                    val.append(c)
                    self.i += 1
                elif nxt == "\n":
                    self.i += 2  # a line continuation: not even a character of the word
                    continue
                else:
                    val.append(nxt)
                    flags["quoted"] = True
                    self.i += 2
            elif c == "'" and not in_dq:
                j = s.find("'", self.i + 1)
                if j < 0:
                    raise Fatal("unbalanced single quote")
                val.append(s[self.i + 1:j])
                flags["quoted"] = True
                self.i = j + 1
            elif c == '"' and ctx != IN_HEREDOC:
                self._dquote(val, flags)
            elif c == "`":
                self._backtick(val, flags)
            elif c == "$":
                self._dollar(val, flags, in_dq)
            else:
                if c == "'" and ctx == IN_OPERAND_DQ:
                    self.note("quotes inside \"${...}\"")
                val.append(c)
                lit = c
                self.i += 1
            if uq is not None:
                uq.append(lit)

    def _dquote(self, val: list[str], flags: dict[str, bool]) -> None:
        self.i += 1
        flags["quoted"] = True
        self.scan(IN_DQUOTE, val, flags)

    def _backtick(self, val: list[str], flags: dict[str, bool]) -> None:
        s, n = self.s, self.n
        start = self.i
        j = self.i + 1
        inner: list[str] = []
        while True:
            if j >= n:
                raise Fatal("unbalanced backquote")
            c = s[j]
            if c == "`":
                break
            if c == "\\" and j + 1 < n:
                inner.append(s[j + 1] if s[j + 1] in "$`\\" else s[j:j + 2])
                j += 2
                continue
            inner.append(c)
            j += 1
        self.i = j + 1
        flags["dynamic"] = True
        val.append(s[start:self.i])
        self._sub_parse("".join(inner))

    def _process_subst(self, val: list[str], flags: dict[str, bool]) -> None:
        start = self.i
        self.i += 2
        self.nested_list()
        flags["dynamic"] = True
        val.append(self.s[start:self.i])

    def nested_list(self) -> None:
        """Parse a command list up to its closing ')' (for $(...), <(...), (...))."""
        self.nest += 1
        if self.nest > 64:
            raise Fatal("nested too deeply")
        saved, self.buf = self.buf, None
        if saved is not None:
            raise Fatal("internal: lookahead inside a word")
        try:
            self.parse_list(")")
        finally:
            self.nest -= 1

    def _dollar(self, val: list[str], flags: dict[str, bool], in_dq: bool) -> None:
        s, n = self.s, self.n
        start = self.i
        nxt = s[self.i + 1] if self.i + 1 < n else ""
        if nxt == "(":
            flags["dynamic"] = True
            if s.startswith("((", self.i + 1):
                self._arith()
            else:
                self.i += 2
                self.nested_list()
            val.append(s[start:self.i])
        elif nxt == "{":
            flags["dynamic"] = True
            self._param(in_dq)
            val.append(s[start:self.i])
        elif nxt == "'" and not in_dq:
            self.i += 2
            val.append(self._ansi_c())
            flags["quoted"] = True
        elif nxt == '"' and not in_dq:
            self.i += 1
            self._dquote(val, flags)
        elif nxt == "[":
            self.note("old-style arithmetic $[...]")
            flags["dynamic"] = True
            j = s.find("]", self.i)
            if j < 0:
                raise Fatal("unbalanced $[")
            self.i = j + 1
            val.append(s[start:self.i])
        elif nxt and (nxt.isascii() and nxt.isalpha() or nxt == "_"):
            m = NAME_RE.match(s, self.i + 1)
            assert m
            self.i = m.end()
            flags["dynamic"] = True
            val.append(s[start:self.i])
        elif nxt and nxt in "0123456789@*#?$!-":
            self.i += 2
            flags["dynamic"] = True
            val.append(s[start:self.i])
        else:
            val.append("$")
            self.i += 1

    def _arith(self) -> None:
        """``$((...))``: only constant arithmetic is understood (variables are evaluated recursively)."""
        s, n = self.s, self.n
        j = self.i + 3
        depth = 0
        while True:
            if j >= n:
                raise Fatal("unbalanced $((")
            c = s[j]
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    if j + 1 < n and s[j + 1] == ")":
                        break
                    self.note("$(( ... ) ... ) is not plain arithmetic")
                    break
                depth -= 1
            j += 1
        content = s[self.i + 3:j]
        if not _SAFE_ARITH_RE.fullmatch(content):
            self.note("arithmetic expansion on variables")
            if "$(" in content or "`" in content:
                self._sub_parse(content)
        self.i = min(j + 2, n)

    def _param(self, in_dq: bool) -> None:
        """``${...}``: plain forms only; indirection, subscripts and transforms cannot be read."""
        s, n = self.s, self.n
        self.i += 2
        if self.i < n and s[self.i] == "!":
            self.note("indirect expansion ${!...}")
        if self.i < n and s[self.i] == "#" and not s.startswith("}", self.i + 1):
            self.i += 1
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!\-]").match(s, self.i)
        if not m:
            self.note("unusual ${...} expansion")
        else:
            self.i = m.end()
        if self.i < n and s[self.i] == "[":
            self.note("array subscript in ${...}")
        if self.i < n and s[self.i] == "}":
            self.i += 1
            return
        op = re.compile(r":[-=+?]|[-=+?]|%%|%|##|#|//|/#|/%|/|\^\^|\^|,,|,|:|@").match(s, self.i)
        if not op:
            self.note("unusual ${...} expansion")
        elif op.group() == ":":
            j = s.find("}", self.i)
            if j < 0 or not re.fullmatch(r"[0-9 :\-]*", s[self.i + 1:j]):
                self.note("substring ${x:...} with an expression")
        elif op.group() == "@":
            self.note("${x@...} transformation")
        if op:
            self.i = op.end()
        # The operand: quotes and nested expansions up to the closing '}'.
        self.scan(IN_OPERAND_DQ if in_dq else IN_OPERAND, [], {"dynamic": False, "quoted": False})

    def _ansi_c(self) -> str:
        """Decode ``$'...'`` (self.i just after the opening quote)."""
        s, n = self.s, self.n
        out: list[str] = []
        while True:
            if self.i >= n:
                raise Fatal("unbalanced $'")
            c = s[self.i]
            if c == "'":
                self.i += 1
                return "".join(out)
            if c != "\\" or self.i + 1 >= n:
                out.append(c)
                self.i += 1
                continue
            e = s[self.i + 1]
            self.i += 2
            if e in _ANSI_C_ESCAPES:
                out.append(_ANSI_C_ESCAPES[e])
            elif e in "01234567":
                m = re.compile(r"[0-7]{1,2}").match(s, self.i)
                digits = e + (m.group() if m else "")
                self.i += len(digits) - 1
                out.append(chr(int(digits, 8) & 0xFF))
            elif e in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[e]
                m = re.compile(r"[0-9A-Fa-f]{1,%d}" % width).match(s, self.i)
                if not m:
                    out.append("\\" + e)
                else:
                    self.i = m.end()
                    try:
                        out.append(chr(int(m.group(), 16)))
                    except (ValueError, OverflowError):
                        self.note("bad escape in $'...'")
            elif e == "c" and self.i < n:
                out.append(chr(ord(s[self.i]) & 0x1F))
                self.i += 1
            else:
                out.append("\\" + e)
