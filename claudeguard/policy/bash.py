"""Split a Bash command line into the simple commands a shell would run, and match rules on them.

This is a security boundary: ``Bash(git status:*)`` must never allow ``git status; rm -rf ~``.
So the splitter reads the command the way bash does (quotes, escapes, line continuations,
comments, ``&&``/``||``/``;``/``|``/``&``/newlines, subshells, braces, ``$(...)``, backticks,
``<(...)``/``>(...)``, heredocs, ``$'...'``) and returns every simple command it finds, including
the ones nested in substitutions. Anything it cannot read with confidence (``eval``, ``case``,
function definitions, a dynamic command word, ``sh -c "$x"``, unbalanced quotes, arithmetic on
variables, ...) marks the whole split as not ``ok``: allow rules never match such a command, while
deny and ask rules are still tried on every form that was extracted (fail closed).

Wrappers that only change how a command runs (``timeout``, ``nice``, ``nohup``, ``env VAR=x``,
``xargs``, ``command``, ``builtin``, ``exec``, ``time``, ``stdbuf``, ``ionice``) are looked through;
``sh -c 'static script'`` is split recursively. Privilege and tracing wrappers (``sudo``, ``doas``,
``strace``, ``watch``, ...) are looked through for deny and ask rules only.
"""

from __future__ import annotations

import re
__all__ = [
    "Part",
    "Split",
    "split_command",
    "command_writes",
    "compile_pattern",
    "pattern_matches",
    "part_allowed_by",
    "part_denied_by",
    "escape_pattern",
    "normalize_space",
    "fallback_chunks",
]

MAX_DEPTH = 12  # nested $(...), backticks and sh -c; deeper means "cannot tell"


class Part:
    """One simple command as rules see it.

    Plain slotted classes rather than dataclasses here: the hook imports this module for every
    Bash call, and building a dataclass costs about half a millisecond.
    """

    __slots__ = ("text", "plain", "argv", "full", "writes", "deny_texts", "plain_ok")

    def __init__(self, text: str, plain: str, argv: list[str], full: str, writes: bool,
                 deny_texts: tuple[str, ...], plain_ok: bool = True) -> None:
        self.text = text  # source text, wrappers and leading VAR=x stripped, tokens joined by one space
        self.plain = plain  # the same with quotes removed (word values joined by one space)
        self.argv = argv  # word values after stripping (quotes removed, expansions kept as written)
        self.full = full  # source text of the whole simple command, wrappers and assignments included
        self.writes = writes  # writes a file: output redirection or a command known to write
        self.deny_texts = deny_texts  # every reading deny and ask rules are tried on
        self.plain_ok = plain_ok  # ``plain`` is unambiguous (no word holds blanks, quotes or operators)

    def __repr__(self) -> str:
        return f"Part(text={self.text!r}, writes={self.writes})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Part) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)


class Split:
    """The simple commands of one command line; ``ok`` False means "cannot tell"."""

    __slots__ = ("parts", "ok", "reason")

    def __init__(self, parts: list[Part], ok: bool, reason: str | None = None) -> None:
        self.parts = parts
        self.ok = ok
        self.reason = reason

    def __repr__(self) -> str:
        return f"Split(parts={self.parts!r}, ok={self.ok}, reason={self.reason!r})"


class _LazyRe:
    """A regex compiled on first use (import time matters more than the first match)."""

    __slots__ = ("_pattern", "_flags", "_rx")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._pattern = pattern
        self._flags = flags
        self._rx: re.Pattern[str] | None = None

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(self._pattern, self._flags)
        return getattr(rx, name)


class _Fatal(Exception):
    """The parser cannot continue (unbalanced quote, missing ')', ...)."""


# --------------------------------------------------------------------------------------------
# Lexing and parsing


class _Word:
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


class _Redir:
    __slots__ = ("op", "target", "src", "writes")

    def __init__(self, op: str, target: _Word | None, src: str, writes: bool) -> None:
        self.op = op
        self.target = target
        self.src = src
        self.writes = writes

    @property
    def plain(self) -> str:
        if self.target is None:
            return self.op
        return self.op + ("" if self.op.endswith("&") else " ") + self.target.value


class _Cmd:
    __slots__ = ("words", "redirs", "note")

    def __init__(self) -> None:
        self.words: list[_Word] = []
        self.redirs: list[_Redir] = []
        self.note: str | None = None  # why this command cannot be matched, if it cannot


_OPERATORS = ("&&", "||", ";;&", ";;", ";&", "|&", ";", "&", "|", "(", ")")
_REDIR_OPS = ("&>>", "&>", "<<<", "<<-", "<<", "<&", "<>", "<", ">>", ">&", ">|", ">")
_META = " \t\n;&|()<>"
_NAME_RE = _LazyRe(r"[A-Za-z_][A-Za-z0-9_]*")
_DIGITS_RE = _LazyRe(r"[0-9]+")
_ASSIGN_RE = _LazyRe(r"([A-Za-z_][A-Za-z0-9_]*)(\+?=)")
_SAFE_ARITH_RE = _LazyRe(r"[0-9\s+\-*/%()<>=!&|^~?:,]*")
_SAFE_TARGETS = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
_BRACE_RE = _LazyRe(r"\{[^{}\s]*(?:,|\.\.)[^{}\s]*\}")


class _Parser:
    """A recursive-descent reader for the part of bash that matters to permission rules."""

    def __init__(self, src: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _Fatal("nested too deeply")
        self.s = src
        self.i = 0
        self.n = len(src)
        self.depth = depth
        self.cmds: list[_Cmd] = []
        self.unsure: str | None = None
        self.heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, strip tabs, quoted)
        self.buf: tuple | None = None
        self.nest = 0

    # -- bookkeeping --------------------------------------------------------------------------
    def note(self, reason: str) -> None:
        if self.unsure is None:
            self.unsure = reason

    def absorb(self, sub: "_Parser") -> None:
        self.cmds.extend(sub.cmds)
        if sub.unsure:
            self.note(sub.unsure)

    def sub_parse(self, text: str) -> None:
        """Parse ``text`` as a separate command list (backticks, heredoc bodies)."""
        sub = _Parser(text, self.depth + 1)
        try:
            sub.parse_list(None)
        finally:
            self.absorb(sub)

    # -- lexer --------------------------------------------------------------------------------
    def peek(self) -> tuple:
        if self.buf is None:
            self.buf = self._lex()
        return self.buf

    def next(self) -> tuple:
        tok = self.peek()
        self.buf = None
        return tok

    def push(self, tok: tuple) -> None:
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

    def _lex(self) -> tuple:
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
        m = re.match(r"[0-9]+(?=[<>])|\{[A-Za-z_][A-Za-z0-9_]*\}(?=[<>])", s[self.i:self.i + 40])
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

    def _redirect(self, fd: str) -> tuple:
        s = self.s
        op = next(o for o in _REDIR_OPS if s.startswith(o, self.i))
        start = self.i - len(fd)
        self.i += len(op)
        self._skip_blanks()
        if self.i >= self.n or s[self.i] in "\n;&|()" or (s[self.i] in "<>" and not s.startswith("(", self.i + 1)):
            raise _Fatal(f"redirection {op} without a target")
        target = self._word()
        src = _clean(s[start:self.i])
        full_op = fd + op
        writes = False
        if op in ("<<", "<<-"):
            self.heredocs.append((target.value, op == "<<-", target.quoted))
        elif op in (">", ">>", ">|", "&>", "&>>", "<>"):
            writes = not (target.static and target.value in _SAFE_TARGETS)
        elif op == ">&":
            writes = not (target.static and (_DIGITS_RE.fullmatch(target.value) or target.value == "-" or target.value in _SAFE_TARGETS))
        return ("redir", _Redir(full_op, target, src, writes))

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
                sub = _Parser("\n".join(body), self.depth + 1)
                try:
                    sub.scan_expanded_text()
                finally:
                    self.absorb(sub)

    def scan_expanded_text(self) -> None:
        """Read the whole source like the inside of double quotes (a heredoc body)."""
        val: list[str] = []
        flags = {"dynamic": False}
        while self.i < self.n:
            c = self.s[self.i]
            if c == "\\" and self.i + 1 < self.n and self.s[self.i + 1] in "$`\\\n":
                self.i += 2
            elif c == "$":
                self._dollar(val, flags, in_dq=True)
            elif c == "`":
                self._backtick(val, flags)
            else:
                self.i += 1

    # -- words --------------------------------------------------------------------------------
    def _word(self) -> _Word:
        s, n = self.s, self.n
        start = self.i
        val: list[str] = []
        uq: list[str] = []  # the unquoted literal characters, "\0" for anything else
        flags = {"dynamic": False, "quoted": False}
        while self.i < n:
            c = s[self.i]
            if c in "<>" and s.startswith("(", self.i + 1) and self.i == start:
                self._process_subst(val, flags)
                uq.append("\0")
                continue
            if c in _META:
                break
            if c == "\\":
                if self.i + 1 >= n:
                    val.append("\\")
                    uq.append("\0")
                    self.i += 1
                elif s[self.i + 1] == "\n":
                    self.i += 2
                else:
                    val.append(s[self.i + 1])
                    uq.append("\0")
                    flags["quoted"] = True
                    self.i += 2
            elif c == "'":
                j = s.find("'", self.i + 1)
                if j < 0:
                    raise _Fatal("unbalanced single quote")
                val.append(s[self.i + 1:j])
                uq.append("\0")
                flags["quoted"] = True
                self.i = j + 1
            elif c == '"':
                self._dquote(val, flags)
                uq.append("\0")
            elif c == "`":
                self._backtick(val, flags)
                uq.append("\0")
            elif c == "$":
                self._dollar(val, flags, in_dq=False)
                uq.append("\0")
            else:
                val.append(c)
                uq.append(c)
                self.i += 1
        if self.i == start:
            raise _Fatal(f"unexpected {s[self.i]!r}")
        raw_uq = "".join(uq)
        glob = "*" in raw_uq or "?" in raw_uq or bool(re.search(r"\[[^\]]*\]", raw_uq))
        brace = bool(_BRACE_RE.search(raw_uq))
        return _Word(_clean(s[start:self.i]), "".join(val), flags["dynamic"], glob, brace, flags["quoted"])

    def _dquote(self, val: list[str], flags: dict) -> None:
        s, n = self.s, self.n
        self.i += 1
        flags["quoted"] = True
        while True:
            if self.i >= n:
                raise _Fatal("unbalanced double quote")
            c = s[self.i]
            if c == '"':
                self.i += 1
                return
            if c == "\\" and self.i + 1 < n and s[self.i + 1] in '$`"\\\n':
                if s[self.i + 1] != "\n":
                    val.append(s[self.i + 1])
                self.i += 2
            elif c == "$":
                self._dollar(val, flags, in_dq=True)
            elif c == "`":
                self._backtick(val, flags)
            else:
                val.append(c)
                self.i += 1

    def _backtick(self, val: list[str], flags: dict) -> None:
        s, n = self.s, self.n
        start = self.i
        j = self.i + 1
        inner: list[str] = []
        while True:
            if j >= n:
                raise _Fatal("unbalanced backquote")
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
        self.sub_parse("".join(inner))

    def _process_subst(self, val: list[str], flags: dict) -> None:
        start = self.i
        self.i += 2
        self._nested_list()
        flags["dynamic"] = True
        val.append(self.s[start:self.i])

    def _nested_list(self) -> None:
        """Parse a command list up to its closing ')' (for $(...), <(...), (...))."""
        self.nest += 1
        if self.nest > 64:
            raise _Fatal("nested too deeply")
        saved, self.buf = self.buf, None
        if saved is not None:
            raise _Fatal("internal: lookahead inside a word")
        try:
            self.parse_list(")")
        finally:
            self.nest -= 1

    def _dollar(self, val: list[str], flags: dict, in_dq: bool) -> None:
        s, n = self.s, self.n
        start = self.i
        nxt = s[self.i + 1] if self.i + 1 < n else ""
        if nxt == "(":
            flags["dynamic"] = True
            if s.startswith("((", self.i + 1):
                self._arith()
            else:
                self.i += 2
                self._nested_list()
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
                raise _Fatal("unbalanced $[")
            self.i = j + 1
            val.append(s[start:self.i])
        elif nxt and (nxt.isascii() and nxt.isalpha() or nxt == "_"):
            m = _NAME_RE.match(s, self.i + 1)
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
                raise _Fatal("unbalanced $((")
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
                self.sub_parse(content)
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
        elif op.group() == ":" :
            j = s.find("}", self.i)
            if j < 0 or not re.fullmatch(r"[0-9 :\-]*", s[self.i + 1:j]):
                self.note("substring ${x:...} with an expression")
        elif op.group() == "@":
            self.note("${x@...} transformation")
        if op:
            self.i = op.end()
        self._operand(in_dq)

    def _operand(self, in_dq: bool) -> None:
        """The word inside ``${x:-word}``: quotes and nested expansions up to the closing '}'."""
        s, n = self.s, self.n
        val: list[str] = []
        flags = {"dynamic": False, "quoted": False}
        while True:
            if self.i >= n:
                raise _Fatal("unbalanced ${")
            c = s[self.i]
            if c == "}":
                self.i += 1
                return
            if c == "\\":
                self.i += 2
            elif c == "'":
                if in_dq:
                    self.note("quotes inside \"${...}\"")
                    self.i += 1
                    continue
                j = s.find("'", self.i + 1)
                if j < 0:
                    raise _Fatal("unbalanced single quote")
                self.i = j + 1
            elif c == '"':
                self._dquote(val, flags)
            elif c == "$":
                self._dollar(val, flags, in_dq=in_dq)
            elif c == "`":
                self._backtick(val, flags)
            else:
                self.i += 1

    def _ansi_c(self) -> str:
        """Decode ``$'...'`` (self.i just after the opening quote)."""
        s, n = self.s, self.n
        out: list[str] = []
        while True:
            if self.i >= n:
                raise _Fatal("unbalanced $'")
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
            simple = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
                      "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
            if e in simple:
                out.append(simple[e])
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

    # -- grammar ------------------------------------------------------------------------------
    def parse_list(self, end: str | None) -> None:
        """Commands up to ``end`` (``)``, ``}``) or the end of input; every simple command lands in cmds."""
        while True:
            at = len(self.cmds)  # where this command goes: before the ones nested in its words
            tok = self.next()
            kind = tok[0]
            if kind == "eof":
                if end:
                    raise _Fatal(f"missing '{end}'")
                if self.heredocs:
                    self.note("here-document without a body")
                return
            if kind == "nl" or (kind == "op" and tok[1] in (";", "&", "&&", "||", "|", "|&")):
                continue
            if kind == "op" and tok[1] == ")":
                if end == ")":
                    return
                self.note("unexpected ')'")
                continue
            if kind == "op" and tok[1] == "(":
                if self.i < self.n and self.s[self.i] == "(":
                    self.note("arithmetic command ((...))")
                self._nested_list()
                self._compound_tail()
                continue
            if kind == "op":
                self.note(f"case syntax {tok[1]!r}")
                continue
            if kind == "word" and tok[1].literal:
                word = tok[1].value
                if word == "}":
                    if end == "}":
                        return
                    self.note("unexpected '}'")
                    continue
                if word == "{":
                    self.nest += 1
                    if self.nest > 64:
                        raise _Fatal("nested too deeply")
                    self.parse_list("}")
                    self.nest -= 1
                    self._compound_tail()
                    continue
                if word in ("!", "if", "then", "elif", "else", "do", "while", "until"):
                    continue
                if word == "time":
                    if self.peek()[0] == "word" and self.peek()[1].value in ("-p", "--"):
                        self.next()
                    continue
                if word in ("fi", "done"):
                    self._compound_tail()
                    continue
                if word == "for":
                    self._for_header()
                    continue
                if word == "[[":
                    self._conditional(tok[1])
                    continue
                if word in ("case", "esac", "select", "function", "coproc", "in"):
                    self.note(f"'{word}' is not analysed")
                    continue
            self._simple(tok, at)

    def _simple(self, tok: tuple, at: int) -> None:
        cmd = _Cmd()
        while tok[0] in ("word", "redir"):
            if tok[0] == "word":
                cmd.words.append(tok[1])
            else:
                cmd.redirs.append(tok[1])
            tok = self.next()
        if tok[0] == "op" and tok[1] == "(":
            self.note("function definition" if len(cmd.words) == 1 else "unexpected '('")
        self.push(tok)
        self.cmds.insert(at, cmd)

    def _compound_tail(self) -> None:
        """Redirections after ``)``, ``}``, ``fi``, ``done``: a write becomes a part of its own."""
        while self.peek()[0] == "redir":
            redir = self.next()[1]
            if redir.writes:
                cmd = _Cmd()
                cmd.redirs.append(redir)
                self.cmds.append(cmd)

    def _for_header(self) -> None:
        tok = self.next()
        if tok[0] != "word" or not tok[1].literal or not _NAME_RE.fullmatch(tok[1].value):
            self.note("for loop of an unusual form")
            self.push(tok)
            return
        tok = self.next()
        while tok[0] == "nl":
            tok = self.next()
        if tok[0] == "word" and tok[1].literal and tok[1].value == "in":
            tok = self.next()
            while tok[0] == "word":  # the list's own $(...) were collected while lexing
                tok = self.next()
            if tok[0] == "redir":
                self.note("for loop of an unusual form")
        self.push(tok)

    def _conditional(self, first: _Word) -> None:
        """``[[ ... ]]``: operators inside are words; arithmetic comparisons evaluate variables."""
        cmd = _Cmd()
        cmd.words.append(first)
        at = len(self.cmds)
        while True:
            tok = self.next()
            if tok[0] == "eof":
                raise _Fatal("missing ']]'")
            if tok[0] == "nl":
                continue
            if tok[0] == "word":
                w = tok[1]
            elif tok[0] == "op":
                w = _Word(tok[1], tok[1], False, False, False, False)
            else:
                r = tok[1]
                w = _Word(r.src, r.plain, False, False, False, False)
            cmd.words.append(w)
            if w.value in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
                self.note("arithmetic comparison in [[ ... ]]")
            if tok[0] == "word" and w.literal and w.value == "]]":
                break
        self.cmds.insert(at, cmd)


def _brace_expand(word: str) -> str:
    """One level of ``a{b,c}d`` -> ``abd acd`` (enough for deny readings)."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", word)
    if not m:
        return word
    return " ".join(word[:m.start()] + alt + word[m.end():] for alt in m.group(1).split(","))


def _odd_backslashes(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _clean(src: str) -> str:
    """Source text as bash reads it: line continuations removed."""
    return src.replace("\\\n", "")


# --------------------------------------------------------------------------------------------
# Simple commands to parts: assignments, wrappers, sh -c, find -exec


# Variables whose value changes which code a command runs: setting them is never looked through.
_RISKY_ENV = {
    "PATH", "IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "CDPATH",
    "NODE_OPTIONS", "NODE_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE",
    "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",
    "GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "PAGER", "MANPAGER", "SYSTEMD_PAGER", "EDITOR", "VISUAL",
    "GIT_DIR", "GIT_WORK_TREE", "GIT_TEMPLATE_DIR", "GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND",
    "LESSOPEN", "LESSCLOSE", "BROWSER", "RUSTC_WRAPPER", "RUSTC", "CC", "CXX", "LD", "MAKEFLAGS",
    "HOME", "XDG_CONFIG_HOME", "ZDOTDIR", "TMPDIR",
}
_RISKY_ENV_PREFIXES = ("LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_", "NPM_CONFIG_", "PIP_")
_HARMLESS_PAGERS = {"", "cat", "less", "more"}

# Wrappers looked through for every rule: name -> (flags, options taking a value, positionals).
_WRAPPERS: dict[str, tuple[frozenset[str], frozenset[str], int]] = {
    "timeout": (frozenset({"--foreground", "--preserve-status", "-v", "--verbose"}),
                frozenset({"-k", "--kill-after", "-s", "--signal"}), 1),
    "nice": (frozenset(), frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), frozenset(), 0),
    "noglob": (frozenset(), frozenset(), 0),  # zsh precommand modifiers
    "nocorrect": (frozenset(), frozenset(), 0),
    "builtin": (frozenset(), frozenset(), 0),
    "command": (frozenset({"-p"}), frozenset(), 0),
    "exec": (frozenset({"-c", "-l"}), frozenset({"-a"}), 0),
    "time": (frozenset({"-p", "-v", "--verbose", "--portability", "-a", "--append", "-q", "--quiet"}),
             frozenset({"-f", "--format", "-o", "--output"}), 0),
    "stdbuf": (frozenset(), frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "ionice": (frozenset({"-t", "--ignore"}), frozenset({"-c", "-n", "--class", "--classdata"}), 0),
    "env": (frozenset({"-i", "-", "--ignore-environment", "-0", "--null", "-v", "--debug"}),
            frozenset({"-u", "--unset", "-C", "--chdir"}), 0),
    "xargs": (frozenset({"-0", "--null", "-r", "--no-run-if-empty", "-t", "--verbose", "-p", "--interactive",
                         "-x", "--exit", "-o", "--open-tty", "-e", "-i", "-l"}),
              frozenset({"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n", "--max-args",
                         "-P", "--max-procs", "-s", "--max-chars", "--process-slot-var", "--eof",
                         "--replace", "--max-lines"}), 0),
}
# Looked through for deny/ask rules and for "does it write" only: they change who runs it.
_DENY_WRAPPERS: dict[str, tuple[frozenset[str], frozenset[str], int]] = {
    "sudo": (frozenset({"-A", "-b", "-E", "-H", "-i", "-k", "-K", "-n", "-P", "-S", "-s", "-e", "--preserve-env",
                        "--login", "--shell", "--non-interactive", "--background", "--askpass", "--stdin"}),
             frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R", "--user", "--group",
                        "--host", "--prompt", "--chdir", "--role", "--type", "--other-user", "--close-from",
                        "--command-timeout", "--chroot"}), 0),
    "doas": (frozenset({"-n", "-s"}), frozenset({"-u", "-C"}), 0),
    "setsid": (frozenset({"-c", "-f", "-w", "--ctty", "--fork", "--wait"}), frozenset(), 0),
    "unbuffer": (frozenset({"-p"}), frozenset(), 0),
    "watch": (frozenset({"-b", "-c", "-d", "-e", "-g", "-t", "-x", "-p", "--beep", "--color", "--differences",
                         "--errexit", "--chgexit", "--no-title", "--exec", "--precise"}),
              frozenset({"-n", "--interval", "-q"}), 0),
    "strace": (frozenset({"-f", "-ff", "-c", "-C", "-q", "-qq", "-t", "-tt", "-ttt", "-T", "-v", "-x", "-xx",
                          "-y", "-yy", "-k", "-i", "-r", "-w", "-z", "-Z", "-n"}),
               frozenset({"-o", "-e", "-p", "-s", "-u", "-E", "-P", "-a", "-b", "-I", "-O", "-S", "-X"}), 0),
    "ltrace": (frozenset({"-f", "-c", "-C", "-i", "-r", "-S", "-t", "-tt", "-ttt", "-T"}),
               frozenset({"-o", "-e", "-p", "-s", "-u", "-a", "-A", "-D", "-F", "-l", "-L", "-n", "-x"}), 0),
    "chrt": (frozenset({"-a", "-b", "-d", "-f", "-i", "-o", "-r", "-R", "-v", "--all-tasks", "--batch",
                        "--fifo", "--idle", "--other", "--rr"}), frozenset(), 1),
    "taskset": (frozenset({"-a", "-c", "--all-tasks", "--cpu-list"}), frozenset(), 1),
    "caffeinate": (frozenset({"-d", "-i", "-m", "-s", "-u"}), frozenset({"-t", "-w"}), 0),
    "flock": (frozenset({"-s", "-x", "-n", "-o", "-e", "-u", "--shared", "--exclusive", "--nonblock", "--close"}),
              frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}), 1),
    "chroot": (frozenset(), frozenset({"--userspec", "--groups"}), 1),
    "repeat": (frozenset(), frozenset(), 1),  # zsh: repeat N cmd
}
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh"}
_STD_DIRS = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/", "/opt/homebrew/bin/")


def _std_name(word: str) -> str | None:
    """The command name if ``word`` is a bare name or a path in a standard system directory."""
    if "/" not in word:
        return word
    for d in _STD_DIRS:
        if word.startswith(d) and "/" not in word[len(d):]:
            return word[len(d):]
    return None


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _skip_options(words: list[_Word], k: int, spec: tuple[frozenset[str], frozenset[str], int], name: str) -> int | None:
    """Index of the wrapped command after the wrapper at ``k``, or None when it cannot be told."""
    flags, takes_value, positionals = spec
    j = k + 1
    while j < len(words):
        w = words[j]
        if not w.static:
            return None
        v = w.value
        if v == "--":
            j += 1
            break
        if name == "env" and _ASSIGN_RE.match(v):
            break
        if not v.startswith("-") or v == "-" and name != "env":
            break
        if v in flags:
            j += 1
        elif v in takes_value:
            j += 2
        elif v.startswith("--") and "=" in v and v.split("=", 1)[0] in takes_value:
            j += 1
        elif not v.startswith("--") and v[:2] in takes_value:
            j += 1  # value attached: -n10, -oL
        elif name == "nice" and re.fullmatch(r"-[0-9]+", v):
            j += 1
        elif name == "xargs" and v[:2] in ("-e", "-i", "-l"):
            j += 1
        elif name in ("sudo", "strace", "ltrace", "watch") and not v.startswith("--") and all(
                "-" + c in flags for c in v[1:]):
            j += 1  # clustered flags: -nE
        else:
            return None
    if name == "env":
        while j < len(words) and words[j].static and _ASSIGN_RE.match(words[j].value):
            j += 1
    j += positionals
    return j if j < len(words) else None


def _assignment_risk(value: str) -> str | None:
    m = _ASSIGN_RE.match(value)
    if not m:
        return None
    name = m.group(1)
    if name in ("GIT_PAGER", "PAGER", "MANPAGER", "SYSTEMD_PAGER") and value[m.end():] in _HARMLESS_PAGERS:
        return None
    if name in _RISKY_ENV or name.startswith(_RISKY_ENV_PREFIXES):
        return f"sets {name}"
    return None


class _Built:
    __slots__ = ("parts", "unsure")

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.unsure: str | None = None

    def note(self, reason: str) -> None:
        if self.unsure is None:
            self.unsure = reason


def _text(words: list[_Word], redirs: list[_Redir]) -> str:
    return " ".join([w.src for w in words] + [r.src for r in redirs])


def _plain(words: list[str], redirs: list[_Redir]) -> str:
    return " ".join(list(words) + [r.plain for r in redirs])


_UNSAFE_PLAIN = _LazyRe(r"[\s;&|<>()$`\\\"']")


def _build(cmd: _Cmd, depth: int, out: _Built) -> None:
    """Turn one simple command into parts (several for ``sh -c`` and ``find -exec``)."""
    words = cmd.words
    extra_readings: list[str] = []
    extra_writes = False
    full = _text(words, cmd.redirs)
    k = 0
    while k < len(words) and _ASSIGN_RE.match(words[k].src):
        risk = _assignment_risk(words[k].value)
        if risk:
            out.note(risk)
        k += 1
    if k < len(words) and re.match(r"[A-Za-z_][A-Za-z0-9_]*\[", words[k].src) and "=" in words[k].src:
        out.note("array assignment")
    # Allow-level wrappers.
    deny_starts: list[int] = []
    while k < len(words):
        w = words[k]
        name = _std_name(w.value) if w.static else None
        if name == "command" and k + 1 < len(words) and words[k + 1].value in ("-v", "-V"):
            break
        if name in _WRAPPERS:
            j = _skip_options(words, k, _WRAPPERS[name], name)
            if j is None:
                if name == "env" and any(x.value in ("-S", "--split-string") or x.value.startswith("--split-string")
                                         for x in words[k + 1:]):
                    out.note("env -S splits a string into a command")
                break
            if name == "env":
                for x in words[k + 1:j]:
                    risk = _assignment_risk(x.value)
                    if risk:
                        out.note(risk)
            k = j
            continue
        break
    argv_words = words[k:]
    # Deny-level wrappers (sudo, strace, ...) give further readings for deny and ask rules.
    d = k
    while d < len(words):
        w = words[d]
        name = _basename(w.value) if w.static else None
        spec = _DENY_WRAPPERS.get(name or "") or _WRAPPERS.get(name or "")
        if not spec:
            break
        j = _skip_options(words, d, spec, name or "")
        if j is None:
            break
        deny_starts.append(j)
        d = j
    if not argv_words:
        # Only assignments and redirections: bash runs nothing but may still write.
        text = _text(words, cmd.redirs)
        if not text:
            return
        out.parts.append(Part(text, _plain([w.value for w in words], cmd.redirs), [w.value for w in words], full,
                              any(r.writes for r in cmd.redirs), (text,)))
        return
    head = argv_words[0]
    if not head.static:
        out.note("the command name is computed at run time")
    elif head.value.startswith("=") and not head.quoted and len(head.value) > 1:
        out.note("=cmd is a path expansion in zsh")
        extra_readings.append(" ".join([head.value[1:]] + [w.value for w in argv_words[1:]]))
    name = _basename(head.value)
    if head.static and name == "eval":
        out.note("eval")
        if all(w.static for w in argv_words[1:]):
            # Never allowed, but deny rules see the evaluated text.
            sub = _split(" ".join(w.value for w in argv_words[1:]), depth + 1)
            extra_readings += [t for p in sub.parts for t in p.deny_texts]
    # sh -c 'script': split the script itself.
    inner_start = deny_starts[-1] if deny_starts else k
    inner = words[inner_start:]
    if inner and inner[0].static and _basename(inner[0].value) in _SHELLS:
        script = _shell_script(inner)
        if script is not None:
            if isinstance(script, str):
                out.note(script)
            else:
                if not script.static:
                    out.note("sh -c with a dynamic string")
                elif inner_start != k:
                    # sudo sh -c '...': not looked through for allow, but deny rules see inside.
                    sub = _split(script.value, depth + 1)
                    extra_readings += [t for p in sub.parts for t in p.deny_texts]
                    extra_writes = not sub.ok or any(p.writes for p in sub.parts)
                else:
                    # The shell is the command: its script's parts replace it.
                    sub = _split(script.value, depth + 1)
                    out.parts.extend(sub.parts)
                    if not sub.ok:
                        out.note(sub.reason or "cannot parse the sh -c script")
                    if cmd.redirs:
                        redir_text = " ".join(r.src for r in cmd.redirs)
                        if any(r.writes for r in cmd.redirs):
                            out.parts.append(Part(redir_text, _plain([], cmd.redirs), [], full, True, (redir_text,)))
                    return
    if inner and inner[0].static and _basename(inner[0].value) in ("fish", "csh", "tcsh", "pwsh", "nu", "xonsh"):
        if any(w.value == "-c" or w.value.startswith("--command") for w in inner[1:]):
            out.note(f"{_basename(inner[0].value)} -c is not analysed")
    argv = [w.value for w in argv_words]
    text = _text(argv_words, cmd.redirs)
    plain = _plain(argv, cmd.redirs)
    readings = [text, plain, full, _plain([w.value for w in words], cmd.redirs)]
    for start in deny_starts:
        rest = words[start:]
        readings += [_text(rest, cmd.redirs), _plain([w.value for w in rest], cmd.redirs)]
        if rest and "/" in rest[0].value:
            readings.append(_plain([_basename(rest[0].value)] + [w.value for w in rest[1:]], cmd.redirs))
    if "/" in argv[0]:
        readings.append(_plain([_basename(argv[0])] + argv[1:], cmd.redirs))
    if any(w.brace for w in argv_words):
        # {rm,-rf,/} is brace-expanded by bash into "rm -rf /": deny rules see that reading.
        readings.append(" ".join(_brace_expand(w.value) if w.brace else w.value for w in argv_words))
    readings = list(dict.fromkeys(normalize_space(r) for r in readings + extra_readings))
    final = [w.value for w in inner] if inner else argv
    writes = extra_writes or any(r.writes for r in cmd.redirs) or _argv_writes(final) or _argv_writes(argv)
    plain_ok = not any(_UNSAFE_PLAIN.search(v) for v in argv)
    out.parts.append(Part(text, plain, argv, full, writes, tuple(readings), plain_ok))
    # find -exec CMD ... ; runs CMD: it is a part of its own.
    if inner and inner[0].static and _basename(inner[0].value) == "find":
        _find_exec(inner, depth, out)


def _shell_script(words: list[_Word]) -> _Word | str | None:
    """For ``sh [opts] -c SCRIPT``: the script word; a reason string when unclear; None if no -c."""
    j = 1
    has_c = False
    while j < len(words):
        w = words[j]
        if not w.static:
            if has_c:
                break  # this is the (dynamic) script
            return "shell options computed at run time"
        v = w.value
        if v == "--":
            j += 1
            break
        if v in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            j += 2
            continue
        if v.startswith("--"):
            j += 1
            continue
        if len(v) > 1 and v[0] in "-+":
            if v[0] == "-" and "c" in v[1:]:
                has_c = True
            j += 1
            continue
        break
    if not has_c:
        return None
    if j >= len(words):
        return "sh -c without a script"
    return words[j]


def _find_exec(words: list[_Word], depth: int, out: _Built) -> None:
    """``find ... -exec CMD ARGS ;`` runs CMD: add it as a part of its own (wrappers and sh -c included)."""
    j = 1
    while j < len(words):
        if words[j].value in ("-exec", "-execdir", "-ok", "-okdir"):
            start = j + 1
            j = start
            while j < len(words) and words[j].value not in (";", "+"):
                j += 1
            if j >= len(words):
                out.note("find -exec without its ';'")
            sub = _Cmd()
            sub.words = words[start:j]
            if start < j and words[start].value == "{}":
                out.note("find -exec runs the found file")
                sub.words = []
            if sub.words:
                _build(sub, depth, out)
        j += 1


def _split(command: str, depth: int) -> Split:
    """Parse, then build parts; after a fatal error the commands read so far still count (for denies)."""
    if depth > MAX_DEPTH:
        return Split([], False, "nested too deeply")
    parser = None
    fatal = None
    try:
        parser = _Parser(command, depth)
        parser.parse_list(None)
    except _Fatal as exc:
        fatal = str(exc)
    except RecursionError:
        fatal = "nested too deeply"
    built = _Built()
    cmds = parser.cmds if parser is not None else []
    for cmd in cmds:
        try:
            _build(cmd, depth, built)
        except RecursionError:
            built.note("nested too deeply")
    reason = fatal or (parser.unsure if parser is not None else None) or built.unsure
    return Split(built.parts, reason is None, reason)


def split_command(command: str) -> Split:
    """The simple commands of ``command`` (nested ones included), each with its matching forms."""
    if not isinstance(command, str):
        return Split([], False, "the command is not a string")
    if "\0" in command:
        return Split([], False, "the command holds a NUL byte")
    return _split(command, 0)


# --------------------------------------------------------------------------------------------
# Does it write?

_WRITERS = {
    "rm", "rmdir", "mv", "cp", "mkdir", "touch", "tee", "chmod", "chown", "chgrp", "ln", "link", "unlink",
    "dd", "truncate", "install", "shred", "rsync", "scp", "sftp", "patch", "mkfifo", "mknod", "mktemp",
    "split", "csplit", "chattr", "setfacl", "ed", "ex", "vi", "vim", "nvim", "nano", "emacs", "pico",
    "kill", "pkill", "killall", "crontab", "at", "mount", "umount", "sudo", "doas", "su", "ssh",
    "systemctl", "service", "launchctl", "reboot", "shutdown", "useradd", "userdel", "usermod", "passwd",
    "make", "cmake", "ninja", "gradle", "gradlew", "mvn", "ant", "bazel", "gcc", "g++", "cc", "c++",
    "clang", "clang++", "rustc", "javac", "tsc", "webpack", "vite", "esbuild", "rollup", "npx", "pnpx",
    "bunx", "source", ".", "eval", "exec", "open", "xdg-open", "trap", "alias", "nc", "ncat", "socat",
    "rename", "renice", "sponge", "git-lfs", "terraform", "ansible", "ansible-playbook", "helm",
    "firebase", "vercel", "heroku", "gh", "aws", "gcloud", "az", "sqlite3", "mysql", "psql", "redis-cli",
    "mongo", "mongosh",
}
_INTERPRETERS = {
    "python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "deno", "bun", "perl", "ruby",
    "php", "lua", "luajit", "Rscript", "R", "osascript", "java", "tclsh", "wish", "julia", "swift",
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "pwsh", "expect", "irb",
    "ipython", "jshell", "ts-node", "tsx", "groovy", "scala", "kotlin", "dotnet", "go", "cargo",
}
_VERSION_ONLY = {"--version", "-V", "-v", "--help", "-h", "version", "help"}
_GIT_READONLY = {
    "status", "log", "diff", "show", "blame", "annotate", "grep", "ls-files", "ls-tree", "ls-remote",
    "rev-parse", "describe", "shortlog", "cat-file", "rev-list", "show-ref", "for-each-ref", "name-rev",
    "merge-base", "count-objects", "var", "help", "version", "whatchanged", "range-diff", "diff-tree",
    "diff-files", "diff-index", "check-ignore", "check-attr", "check-ref-format", "verify-commit",
    "verify-tag", "cherry", "show-branch", "--version", "--help",
}
_PKG_TOOLS = {"npm", "pnpm", "yarn", "pip", "pip3", "uv", "poetry", "pipenv", "conda", "mamba", "gem",
              "bundle", "composer", "apt", "apt-get", "brew", "dnf", "yum", "pacman", "apk", "port",
              "docker", "podman", "kubectl", "nix", "snap", "flatpak", "rustup", "pipx", "hatch", "pdm"}
_PKG_READONLY = {"list", "ls", "ll", "la", "view", "info", "show", "outdated", "search", "help", "freeze",
                 "check", "version", "--version", "-v", "-V", "--help", "-h", "root", "prefix", "bin", "whoami",
                 "explain", "why", "ps", "images", "inspect", "logs", "get", "describe", "top", "env", "tree",
                 "config", "doctor", "audit", "status", "policy", "depends", "rdepends", "query"}
_COMPRESSORS = {"gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzstd", "lz4", "compress",
                "uncompress", "zip", "7z", "7za", "rar", "unrar", "lzma", "unlzma", "brotli"}
_SED_WRITE_RE = _LazyRe(r"(?:^|[;{}\n])\s*(?:[0-9$]+|/[^/]*/)?\s*[wWe](?:\s|$)|/[gpIiMmeE0-9]*[wWe](?:\s|$)")


def _argv_writes(argv: list[str]) -> bool:
    """Whether a command (wrappers already removed) is on the conservative list of writers."""
    if not argv:
        return False
    name = _basename(argv[0])
    args = argv[1:]
    if name in _WRITERS:
        return True
    if re.fullmatch(r"python[0-9.]*|pypy[0-9.]*|node[0-9]*", name) or name in _INTERPRETERS:
        if name == "go":
            return not (args and args[0] in ("version", "env", "list", "doc", "help"))
        if name == "cargo":
            return not (args and args[0] in ("--version", "version", "help", "metadata", "tree", "search"))
        return not (args and set(args) <= _VERSION_ONLY)
    if name in ("sed", "gsed"):
        for a in args:
            if a.startswith("--in-place") or (a.startswith("-") and not a.startswith("--") and "i" in a[1:]
                                              and not a.startswith("-e") and not a.startswith("-f")):
                return True
        return any(_SED_WRITE_RE.search(a) for a in args if not a.startswith("-"))
    if name in ("awk", "gawk", "mawk", "nawk"):
        return any((">" in a or "system" in a or "|" in a or "inplace" in a) for a in args)
    if name == "find":
        return any(a in ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls")
                   for a in args)
    if name in ("sort", "gsort"):
        return any(a == "-o" or a.startswith("--output") or (a.startswith("-o") and len(a) > 2) for a in args)
    if name == "uniq":
        return len([a for a in args if not a.startswith("-")]) >= 2
    if name == "xxd":
        return len([a for a in args if not a.startswith("-")]) >= 2
    if name == "curl":
        return any(a in ("-o", "-O", "--output", "--remote-name", "--remote-name-all", "-D", "--dump-header",
                         "-c", "--cookie-jar", "-T", "--upload-file", "--create-dirs", "-J")
                   or a.startswith(("--output=", "--dump-header=", "--cookie-jar=", "--upload-file="))
                   or (re.fullmatch(r"-[a-zA-Z]+", a) and any(c in a for c in "oODcTJ")) for a in args)
    if name == "wget":
        return not ({"-O-", "--spider", "--output-document=-"} & set(args)
                    or any(a == "-O" and b == "-" for a, b in zip(args, args[1:])))
    if name in ("tar", "gtar", "bsdtar"):
        first = args[0] if args else ""
        listing = "--list" in args or (first and not first.startswith("--") and "t" in first.lstrip("-")
                                      and not any(c in first for c in "cxruA"))
        return not listing
    if name in ("unzip",):
        return not any(a in ("-l", "-t", "-v", "-Z", "-p", "-z") for a in args)
    if name in _COMPRESSORS:
        return not any(a in ("-c", "--stdout", "-l", "--list", "-t", "--test", "-d") and a != "-d" for a in args)
    if name == "git":
        return _git_writes(args)
    if name in _PKG_TOOLS:
        sub = next((a for a in args if not a.startswith("-")), None)
        if sub is None:
            return not (args and set(args) <= _VERSION_ONLY)
        if sub in ("run", "run-script", "exec", "x", "dlx", "test", "start"):
            return True
        return sub not in _PKG_READONLY or any(a in ("--fix", "fix", "set", "delete", "edit", "rm") for a in args)
    return False


def _git_writes(args: list[str]) -> bool:
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-C", "--git-dir", "--work-tree", "--namespace"):
            i += 2
        elif a in ("-c", "--exec-path", "--config-env") or a.startswith(("-c", "--config-env")):
            return True  # config on the command line can run programs
        elif a.startswith("-"):
            i += 1
        else:
            break
    if i >= len(args):
        return False
    sub, rest = args[i], args[i + 1:]
    if any(r.startswith("--output") for r in rest):
        return True
    if sub in _GIT_READONLY:
        return False
    positional = [r for r in rest if not r.startswith("-")]
    if sub == "branch":
        writing = {"-d", "-D", "-m", "-M", "-c", "-C", "--delete", "--move", "--copy", "-f", "--force", "-u",
                   "--set-upstream-to", "--unset-upstream", "--edit-description", "--track", "-t"}
        if writing & set(rest):
            return True
        listing = {"-l", "--list", "-a", "--all", "-r", "--remotes", "--contains", "--merged", "--no-merged",
                   "--points-at"}
        return bool(positional) and not (listing & set(rest))
    if sub == "tag":
        if {"-d", "--delete", "-a", "-s", "-f", "-m", "-F", "-u", "--annotate", "--sign", "--force"} & set(rest):
            return True
        return bool(positional) and not ({"-l", "--list"} & set(rest))
    if sub == "remote":
        return bool(positional) and positional[0] not in ("show", "get-url")
    if sub == "stash":
        return not (positional and positional[0] in ("list", "show"))
    if sub == "config":
        if {"--add", "--unset", "--unset-all", "--replace-all", "--edit", "-e", "--rename-section",
                "--remove-section"} & set(rest):
            return True
        reading = any(r.startswith("--get") or r in ("--list", "-l") for r in rest)
        return not reading and len(positional) >= 2
    if sub in ("worktree", "submodule", "notes", "reflog", "lfs"):
        return not (positional and positional[0] in ("list", "show", "status"))
    return True


def command_writes(command: str) -> bool:
    """True when any part of ``command`` writes a file, or when the command cannot be read."""
    split = split_command(command)
    return not split.ok or any(p.writes for p in split.parts)


# --------------------------------------------------------------------------------------------
# Rule patterns

_PATTERN_CACHE: dict[str, re.Pattern[str]] = {}
_WS_RE = _LazyRe(r"[ \t\n\r\f\v]+")


def normalize_space(text: str) -> str:
    """Runs of ASCII whitespace as one space (rule patterns and command texts alike).

    Only ASCII: bash does not split words on a no-break space, so neither may we.
    """
    return _WS_RE.sub(" ", text).strip(" ")


def compile_pattern(spec: str) -> re.Pattern[str]:
    """A Bash rule specifier as a regex over a part's text (use ``fullmatch``).

    ``*`` matches anything, spaces included; a trailing `` *`` also matches nothing at all (so
    ``ls *`` matches ``ls`` and ``ls -la`` but not ``lsof``); a trailing ``:*`` is the legacy spelling
    of `` *``; ``\\*`` is a literal star and ``\\\\`` a literal backslash.
    """
    cached = _PATTERN_CACHE.get(spec)
    if cached is not None:
        return cached
    s = normalize_space(spec)
    if s.endswith(":*") and not _escaped_at(s, len(s) - 1):
        s = s[:-2].rstrip() + " *"
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s) and s[i + 1] in "*\\":
            out.append(re.escape(s[i + 1]))
            i += 2
            continue
        if c == " " and s.startswith(" *", i) and i + 2 == len(s):
            out.append("(?: .*)?")
            break
        out.append(".*" if c == "*" else re.escape(c))
        i += 1
    pattern = re.compile("".join(out), re.S)
    if len(_PATTERN_CACHE) > 2048:
        _PATTERN_CACHE.clear()
    _PATTERN_CACHE[spec] = pattern
    return pattern


def _escaped_at(s: str, index: int) -> bool:
    """Whether the character at ``index`` is preceded by an odd number of backslashes."""
    count = 0
    j = index - 1
    while j >= 0 and s[j] == "\\":
        count += 1
        j -= 1
    return count % 2 == 1


def escape_pattern(text: str) -> str:
    """The specifier that matches exactly ``text`` (for grant rules)."""
    return text.replace("\\", "\\\\").replace("*", "\\*")


def pattern_matches(spec: str, text: str) -> bool:
    return compile_pattern(spec).fullmatch(normalize_space(text)) is not None


def part_allowed_by(spec: str, part: Part) -> bool:
    """Allow-style match: the part's own text, or its unquoted form when that is unambiguous."""
    rx = compile_pattern(spec)
    if rx.fullmatch(normalize_space(part.text)):
        return True
    return part.plain_ok and rx.fullmatch(normalize_space(part.plain)) is not None


def part_denied_by(spec: str, part: Part) -> bool:
    """Deny/ask-style match: any reading of the part (wrappers, quotes, paths removed)."""
    rx = compile_pattern(spec)
    return any(rx.fullmatch(t) for t in part.deny_texts)


_CHUNK_SPLIT = _LazyRe(r"\$\(|<\(|>\(|[;&|\n(){}`]")


def fallback_chunks(command: str) -> list[str]:
    """Crude pieces of a command that could not be parsed, for deny and ask rules only."""
    out: list[str] = []
    for chunk in _CHUNK_SPLIT.split(command):
        words = re.sub(r"[\"'\\]", "", chunk).split()
        # Drop leading assignments and wrapper words with their option-looking arguments.
        while words and (_ASSIGN_RE.match(words[0]) or _basename(words[0]) in _WRAPPERS
                         or _basename(words[0]) in _DENY_WRAPPERS or words[0].startswith("-")
                         or re.fullmatch(r"[0-9.]+[smhd]?", words[0])):
            out.append(" ".join(words))
            words = words[1:]
        if words:
            out.append(" ".join(words))
            if "/" in words[0]:
                out.append(" ".join([_basename(words[0])] + words[1:]))
    return list(dict.fromkeys(w for w in out if w))
