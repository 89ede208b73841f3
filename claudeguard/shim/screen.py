"""What the CLI's terminal shows right now: a small terminal emulator, and the session's
``screen.json``.

The Claude CLI draws with cursor addressing (absolute columns for spaces, relative moves up and
down, the alternate screen on newer versions), so stripping escapes from the byte stream gives
garbled text. ``Screen`` keeps a grid of cells instead and applies the few operations a
full-screen program uses: printing with autowrap, cursor moves, erase in line/display,
insert/delete lines, scroll regions, the alternate screen, save/restore cursor. Colours and
modes are ignored. What is on the grid is what a person would read, so a dialog is "on screen"
exactly while its text is in ``lines()``.

The tokenizer works on decoded chunks with one regex (text runs are written with slice
assignment, not per character) and keeps an escape sequence cut at a chunk boundary for the
next chunk, so feeding the relay's chunks costs little.

``screen.json`` in the session directory is how the rest of claudeguard (the hook, ``ps``) learns
what the pty session shows: ``write_screen_state`` / ``read_screen_state``.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import unicodedata

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable

SCREEN_FILE = "screen.json"
# Private modes a program may leave on if it dies: mouse reports, focus events, bracketed paste,
# application cursor keys, colour-scheme reports, the alternate screen (last: its text goes).
RESETTABLE_MODES = ("1", "1000", "1002", "1003", "1005", "1006", "1015", "1004", "2004", "2031", "47", "1047", "1049")
_MAX_PENDING = 8192  # an unterminated escape longer than this is garbage: drop it

# One token per match: a run of printable text, a CSI, an OSC/DCS/APC string, a two-character
# escape, or one control character. Group names tell the kinds apart.
_TOKEN = re.compile(
    r"(?P<text>[^\x00-\x1f\x7f\x1b\x9b]+)"
    r"|\x1b\[(?P<params>[0-?]*)(?P<inter>[ -/]*)(?P<final>[@-~])"
    r"|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[ -/]+[0-~]"
    r"|\x1b(?P<esc>[0-OQ-WYZ\\`-~])"
    r"|(?P<ctl>[\x00-\x1a\x1c-\x1f\x7f])",
)
# A prefix of an escape sequence that may be completed by the next chunk.
_PARTIAL = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|[\]PX^_][^\x07\x1b]*(?:\x1b)?|[ -/]*)?\Z")


_NARROW: set[str] = set()  # non-ASCII characters seen so far that take exactly one column


def _width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


class Screen:
    """A rows x cols grid fed with the program's output. Not thread-safe."""

    def __init__(self, rows: int = 24, cols: int = 80) -> None:
        self.rows = max(1, rows)
        self.cols = max(1, cols)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._main = self._blank_grid()
        self._alt: list[list[str]] | None = None  # the saved main grid while the alternate is shown
        self.grid = self._main
        self.x = self.y = 0
        self._wrap_next = False  # DECAWM: the next printable wraps first
        self._saved = (0, 0)
        self.top, self.bottom = 0, self.rows - 1  # scroll region
        self.version = 0  # bumped by every feed that changed anything; callers skip re-reading
        self.title = ""
        self.modes: set[str] = set()  # private modes (DECSET) the program turned on
        self.cursor_hidden = False
        self.kitty_pushes = 0  # kitty keyboard protocol levels pushed (CSI > flags u)

    # -- public -----------------------------------------------------------------------------

    def feed(self, data: bytes | str) -> None:
        text = self._decoder.decode(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
        if self._pending:
            text = self._pending + text
            self._pending = ""
        if not text:
            return
        self.version += 1
        pos, end = 0, len(text)
        match = _TOKEN.match
        while pos < end:
            m = match(text, pos)
            if m is None:
                rest = text[pos:]
                if _PARTIAL.match(rest) and len(rest) < _MAX_PENDING:
                    self._pending = rest
                    return
                pos += 1  # a lone ESC or 8-bit CSI we do not understand: skip it
                continue
            pos = m.end()
            kind = m.lastgroup
            if kind == "text":
                self._print(m.group("text"))
            elif kind == "final":
                self._csi(m.group("params"), m.group("inter"), m.group("final"))
            elif kind == "ctl":
                self._control(m.group("ctl"))
            elif kind == "esc":
                self._esc(m.group("esc"))
            elif m.group(0).startswith("\x1b]"):
                self._osc(m.group(0))
            # charset designations (ESC ( B) and DCS/APC strings change nothing we keep

    def resize(self, rows: int, cols: int) -> None:
        rows, cols = max(1, rows), max(1, cols)
        if (rows, cols) == (self.rows, self.cols):
            return
        grids = [self._main] + ([self._alt] if self._alt is not None else [])
        for grid in grids:
            for row in grid:
                if len(row) > cols:
                    del row[cols:]
                else:
                    row.extend(" " * (cols - len(row)))
            if len(grid) > rows:
                # Keep the bottom of the screen, as terminals do when they get shorter.
                cut = len(grid) - rows if grid is self.grid else 0
                del grid[:cut]
                del grid[rows:]
            while len(grid) < rows:
                grid.append([" "] * cols)
        self.rows, self.cols = rows, cols
        self.top, self.bottom = 0, rows - 1
        self.x, self.y = min(self.x, cols - 1), min(self.y, rows - 1)
        self._wrap_next = False
        self.version += 1

    def lines(self) -> list[str]:
        """The visible rows, right-stripped (wide characters appear once)."""
        return ["".join(row).replace("\xa0", " ").rstrip() for row in self.grid]

    def text(self) -> str:
        return "\n".join(self.lines())

    def tail(self, n: int = 20) -> list[str]:
        """The last ``n`` non-blank visible rows: what ``claudeguardctl ps`` shows."""
        rows = [line for line in self.lines() if line.strip()]
        return rows[-n:]

    @property
    def alternate(self) -> bool:
        return self._alt is not None

    def reset_sequence(self) -> str:
        """Escapes that undo the terminal modes the program left on (it died, or was killed),
        so the user's terminal is usable again: empty after a clean exit."""
        out = ["\x1b[<u" * self.kitty_pushes]
        out += [f"\x1b[?{m}l" for m in RESETTABLE_MODES if m in self.modes]
        if self.cursor_hidden:
            out.append("\x1b[?25h")
        return "".join(out)

    # -- drawing ----------------------------------------------------------------------------

    def _blank_grid(self) -> list[list[str]]:
        return [[" "] * self.cols for _ in range(self.rows)]

    def _print(self, text: str) -> None:
        # Fast path (the CLI's box drawing, blocks and dingbats are all one column): every
        # character already known to be narrow, checked with one set difference in C.
        if text.isascii():
            self._put_run(text)
            return
        unknown = set(text).difference(_NARROW)
        if unknown:
            wide = [ch for ch in unknown if _width(ch) != 1]
            _NARROW.update(ch for ch in unknown if ch not in wide)
            if not wide:
                unknown.clear()
        if not unknown:
            self._put_run(text)
            return
        run: list[str] = []
        for ch in text:
            w = _width(ch)
            if w == 1:
                run.append(ch)
                continue
            if run:
                self._put_run("".join(run))
                run = []
            if w == 0:
                self._combine(ch)
            else:
                self._put_wide(ch)
        if run:
            self._put_run("".join(run))

    def _put_run(self, text: str) -> None:
        cols = self.cols
        while text:
            if self._wrap_next:
                self._wrap_next = False
                self.x = 0
                self._linefeed()
            room = cols - self.x
            part, text = text[:room], text[room:]
            self.grid[self.y][self.x:self.x + len(part)] = part
            self.x += len(part)
            if self.x >= cols:
                self.x = cols - 1
                self._wrap_next = True

    def _put_wide(self, ch: str) -> None:
        if self.cols < 2:
            return
        if self._wrap_next or self.x >= self.cols - 1:
            self._wrap_next = False
            if self.x >= self.cols - 1:
                self.x = 0
                self._linefeed()
        row = self.grid[self.y]
        row[self.x] = ch
        row[self.x + 1] = ""  # the right half: joins to nothing in lines()
        self.x += 2
        if self.x >= self.cols:
            self.x = self.cols - 1
            self._wrap_next = True

    def _combine(self, ch: str) -> None:
        x = self.x if self._wrap_next else self.x - 1
        if x >= 0:
            self.grid[self.y][x] += ch

    def _linefeed(self) -> None:
        if self.y == self.bottom:
            self._scroll_up(1)
        elif self.y < self.rows - 1:
            self.y += 1

    def _scroll_up(self, n: int) -> None:
        n = min(n, self.bottom - self.top + 1)
        del self.grid[self.top:self.top + n]
        for _ in range(n):
            self.grid.insert(self.bottom - n + 1, [" "] * self.cols)

    def _scroll_down(self, n: int) -> None:
        n = min(n, self.bottom - self.top + 1)
        del self.grid[self.bottom - n + 1:self.bottom + 1]
        for _ in range(n):
            self.grid.insert(self.top, [" "] * self.cols)

    def _erase_row(self, y: int, start: int, stop: int) -> None:
        row = self.grid[y]
        start, stop = max(0, start), min(self.cols, stop)
        if start < stop:
            row[start:stop] = " " * (stop - start)

    def _control(self, ch: str) -> None:
        if ch == "\r":
            self.x = 0
            self._wrap_next = False
        elif ch in "\n\x0b\x0c":
            self._wrap_next = False
            self._linefeed()
        elif ch == "\b":
            self._wrap_next = False
            self.x = max(0, self.x - 1)
        elif ch == "\t":
            self.x = min(self.cols - 1, (self.x // 8 + 1) * 8)
        # BEL, SI/SO and the rest draw nothing

    def _esc(self, final: str) -> None:
        if final == "7":
            self._saved = (self.x, self.y)
        elif final == "8":
            self.x, self.y = self._saved
            self._wrap_next = False
        elif final == "D":
            self._linefeed()
        elif final == "E":
            self.x = 0
            self._linefeed()
        elif final == "M":
            if self.y == self.top:
                self._scroll_down(1)
            elif self.y > 0:
                self.y -= 1
        elif final == "c":
            rows, cols = self.rows, self.cols
            self.__init__(rows, cols)  # type: ignore[misc]  # RIS: a full reset

    def _osc(self, seq: str) -> None:
        body = seq[2:].rstrip("\x07").removesuffix("\x1b\\")
        code, _, value = body.partition(";")
        if code in ("0", "2"):
            self.title = value

    def _csi(self, params: str, inter: str, final: str) -> None:
        if inter:
            return  # DECSCUSR and friends: cursor shape, nothing on the grid
        if params[:1] in ("?", ">", "<", "="):
            self._csi_private(params, final)
            return
        args = [int(p) if p.isdigit() else 0 for p in params.split(";")] if params else []

        def arg(i: int = 0, default: int = 1) -> int:
            v = args[i] if i < len(args) else 0
            return v if v else default

        self._wrap_next = False
        if final in "AFBECaDG`Hfd":
            self._move(final, arg)
        elif final in "JK":
            self._erase(final, arg(0, 0))
        elif final in "XP@":
            self._edit(final, arg())
        elif final in "LM":
            if self.top <= self.y <= self.bottom:
                saved_top, self.top = self.top, self.y
                (self._scroll_down if final == "L" else self._scroll_up)(arg())
                self.top = saved_top
        elif final == "S":
            self._scroll_up(arg())
        elif final == "T":
            self._scroll_down(arg())
        elif final == "r":
            top, bottom = arg(0, 1) - 1, arg(1, self.rows) - 1
            if 0 <= top < bottom < self.rows:
                self.top, self.bottom = top, bottom
            else:
                self.top, self.bottom = 0, self.rows - 1
            self.x = self.y = 0
        elif final == "s":
            self._saved = (self.x, self.y)
        elif final == "u":
            self.x, self.y = self._saved
        # SGR (m), modes (h/l), reports (n, c) and the rest leave the grid alone

    def _csi_private(self, params: str, final: str) -> None:
        """``CSI ? ... h/l`` (modes: the cursor, the alternate screen) and the kitty keyboard
        protocol's push and pop (``CSI > u``, ``CSI < u``)."""
        if params[0] == "?" and final in "hl":
            for p in params[1:].split(";"):
                if final == "h":
                    self.modes.add(p)
                else:
                    self.modes.discard(p)
                if p == "25":
                    self.cursor_hidden = final == "l"
                elif p in ("1049", "1047", "47"):
                    self._alternate(final == "h", save_cursor=p == "1049")
        elif final == "u" and params[0] == ">":
            self.kitty_pushes += 1
        elif final == "u" and params[0] == "<":
            pops = params[1:]
            self.kitty_pushes = max(0, self.kitty_pushes - (int(pops) if pops.isdigit() and int(pops) else 1))

    def _move(self, final: str, arg: Callable[..., int]) -> None:
        """The cursor moves: up, down, forward, back, to a column, a row or a place."""
        if final in "AF":
            self.y = max(self.top if self.y >= self.top else 0, self.y - arg())
            if final == "F":
                self.x = 0
        elif final in "BE":
            self.y = min(self.bottom if self.y <= self.bottom else self.rows - 1, self.y + arg())
            if final == "E":
                self.x = 0
        elif final in "Ca":
            self.x = min(self.cols - 1, self.x + arg())
        elif final == "D":
            self.x = max(0, self.x - arg())
        elif final in "G`":
            self.x = min(self.cols - 1, arg() - 1)
        elif final in "Hf":
            self.y = min(self.rows - 1, arg(0) - 1)
            self.x = min(self.cols - 1, arg(1) - 1)
        elif final == "d":
            self.y = min(self.rows - 1, arg() - 1)

    def _erase(self, final: str, mode: int) -> None:
        """Erase in display (J) or in line (K): from the cursor on (0), up to it (1), all (2)."""
        if final == "J":
            if mode == 0:
                self._erase_row(self.y, self.x, self.cols)
                for y in range(self.y + 1, self.rows):
                    self._erase_row(y, 0, self.cols)
            elif mode == 1:
                for y in range(0, self.y):
                    self._erase_row(y, 0, self.cols)
                self._erase_row(self.y, 0, self.x + 1)
            else:
                for y in range(self.rows):
                    self._erase_row(y, 0, self.cols)
        elif final == "K":
            if mode == 0:
                self._erase_row(self.y, self.x, self.cols)
            elif mode == 1:
                self._erase_row(self.y, 0, self.x + 1)
            else:
                self._erase_row(self.y, 0, self.cols)

    def _edit(self, final: str, count: int) -> None:
        """Erase (X), delete (P) or insert (@) ``count`` characters at the cursor."""
        if final == "X":
            self._erase_row(self.y, self.x, self.x + count)
            return
        row = self.grid[self.y]
        n = min(count, self.cols - self.x)
        if final == "P":
            del row[self.x:self.x + n]
            row.extend(" " * n)
        else:
            row[self.x:self.x] = " " * n
            del row[self.cols:]

    def _alternate(self, on: bool, *, save_cursor: bool) -> None:
        if on and self._alt is None:
            if save_cursor:
                self._saved = (self.x, self.y)
            self._alt = self._main
            self.grid = self._blank_grid()
        elif not on and self._alt is not None:
            self.grid = self._main = self._alt
            self._alt = None
            if save_cursor:
                self.x, self.y = self._saved
        self._wrap_next = False


# -- screen.json ------------------------------------------------------------------------------


def write_screen_state(session_dir: str | os.PathLike[str], state: dict[str, Any], name: str = SCREEN_FILE) -> None:
    """Replace ``screen.json`` (or ``name``) atomically (temp file + rename, 0600). Never raises:
    the screen file is a courtesy to other processes, the session goes on without it."""
    from claudeguard.files import write_atomic

    try:
        write_atomic(os.path.join(session_dir, name), json.dumps(state, ensure_ascii=False).encode("utf-8"))
    except OSError:
        pass


def read_screen_state(session_dir: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """The pty session's ``screen.json``: ``{"dialog": title | None, "kind": ..., "choices": [...],
    "since": epoch, "tail": [lines], "updated": epoch}``; None when there is none (a session
    without a pty, or not written yet) or it cannot be read."""
    if not session_dir:
        return None
    from claudeguard.files import read_json

    return read_json(os.path.join(session_dir, SCREEN_FILE))
