"""The parser: the part of bash's grammar that matters to permission rules.

A recursive-descent reader over ``lexer.Lexer``'s tokens that collects every simple command
(``Cmd``): the ones joined by ``&&``/``||``/``;``/``|``/``&``/newlines, inside subshells, braces,
``if``/``while``/``for`` bodies and ``[[ ... ]]``, and (through the lexer) the ones nested in
substitutions. Constructs it does not analyse (``case``, ``select``, function definitions,
``((...))``, ...) are noted, so the split becomes "cannot tell".
"""

from __future__ import annotations

from claudeguard.policy.bash.lexer import NAME_RE, Cmd, Fatal, Lexer, Word
from claudeguard.policy.bash.writes import redirect_writes

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.policy.bash.lexer import Token


class Parser(Lexer):
    """Parses a command list; ``parse_list(None)`` reads it all, every simple command into ``cmds``."""

    def parse_list(self, end: str | None) -> None:
        """Commands up to ``end`` (``)``, ``}``) or the end of input; every simple command lands in cmds."""
        while True:
            at = len(self.cmds)  # where this command goes: before the ones nested in its words
            tok = self.next()
            kind = tok[0]
            if kind == "eof":
                if end:
                    raise Fatal(f"missing '{end}'")
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
                self.nested_list()
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
                        raise Fatal("nested too deeply")
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

    def _simple(self, tok: Token, at: int) -> None:
        cmd = Cmd()
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
            if redirect_writes(redir):
                cmd = Cmd()
                cmd.redirs.append(redir)
                self.cmds.append(cmd)

    def _for_header(self) -> None:
        tok = self.next()
        if tok[0] != "word" or not tok[1].literal or not NAME_RE.fullmatch(tok[1].value):
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

    def _conditional(self, first: Word) -> None:
        """``[[ ... ]]``: operators inside are words; arithmetic comparisons evaluate variables."""
        cmd = Cmd()
        cmd.words.append(first)
        at = len(self.cmds)
        while True:
            tok = self.next()
            if tok[0] == "eof":
                raise Fatal("missing ']]'")
            if tok[0] == "nl":
                continue
            if tok[0] == "word":
                w = tok[1]
            elif tok[0] == "op":
                w = Word(tok[1], tok[1], False, False, False, False)
            else:
                r = tok[1]
                w = Word(r.src, r.plain, False, False, False, False)
            cmd.words.append(w)
            if w.value in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
                self.note("arithmetic comparison in [[ ... ]]")
            if tok[0] == "word" and w.literal and w.value == "]]":
                break
        self.cmds.insert(at, cmd)
