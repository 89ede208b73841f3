"""Driving the Claude CLI's terminal UI under a pseudo-terminal, for tests.

The TUI positions its words with cursor escapes (a space is often ``ESC[1C`` or an absolute column),
so a plain ``expect("some words")`` misses text that is plainly on screen. ``text_pattern`` builds
a regex that matches the characters of a phrase with any escapes and whitespace between them;
``expect_text`` waits for it with a bounded timeout. ``screen_text`` flattens raw output for
assertion messages.
"""

from __future__ import annotations

import os
import re
import time
import weakref
from typing import Sequence

from claudeguard.shim.screen import Screen

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from pathlib import Path

    import pexpect


# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), charset selection, and other two-byte escapes.
_ESC = r"(?:\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[@-Z\\-_=>])"
_ESC_RE = re.compile(_ESC)
_GAP = rf"(?:\s|{_ESC})*"

READY_TEXT = "for agents"  # footer hint shown once the prompt box takes input (2.1.197 and 2.1.330)


def text_pattern(text: str) -> re.Pattern[str]:
    """A regex matching ``text``'s non-space characters with escapes or whitespace between any two."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        raise ValueError("text_pattern: empty text")
    return re.compile(_GAP.join(re.escape(c) for c in chars))


def screen_text(raw: str) -> str:
    """Raw terminal output with escapes turned into spaces and runs of whitespace collapsed."""
    return re.sub(r"\s+", " ", _ESC_RE.sub(" ", raw)).strip()


class _View:
    """What ``expect_text`` keeps per child: its screen model and the raw text not matched yet."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen
        self.raw = ""


_VIEWS: weakref.WeakKeyDictionary[pexpect.spawn[str], _View] = weakref.WeakKeyDictionary()


def spawn_tui(argv: Sequence[str], env: dict[str, str], cwd: str | Path,
              dimensions: tuple[int, int] = (40, 120), timeout: float = 30) -> pexpect.spawn[str]:
    """Start ``argv`` under a pty (rows, cols); the caller must ``close_tui`` it."""
    import pexpect  # noqa: PLC0415 - pexpect is a test extra: only tests drive a TUI

    # Not through procs: a pty that the test reads and types into (pexpect).
    return pexpect.spawn(str(argv[0]), [str(a) for a in argv[1:]], env=env, cwd=str(cwd),
                         dimensions=dimensions, encoding="utf-8", codec_errors="replace", timeout=timeout)


def _view_of(child: pexpect.spawn[str]) -> _View:
    view = _VIEWS.get(child)
    if view is None:
        rows, cols = child.getwinsize()
        view = _VIEWS[child] = _View(Screen(rows, cols))
    return view


def _read_some(child: pexpect.spawn[str], view: _View, timeout: float) -> bool:
    """Feed what the child prints within ``timeout`` to its view; False once it has ended."""
    import pexpect  # noqa: PLC0415 - pexpect is a test extra (see spawn_tui)

    try:
        data = child.read_nonblocking(65536, timeout=timeout)
    except pexpect.TIMEOUT:
        return True
    except pexpect.EOF:
        return False
    view.screen.feed(data)
    view.raw = (view.raw + data)[-20000:]
    return True


def _shown(view: _View) -> str:
    return " ".join(view.screen.text().split())


def expect_text(child: pexpect.spawn[str], text: str, timeout: float = 15) -> None:
    """Wait until ``text`` is on the screen; raise AssertionError with the screen if it has not
    appeared within ``timeout`` or the program ended.

    The output is fed to claudeguard's screen model (``claudeguard.shim.screen``), so words the
    TUI places with cursor moves, or redraws over, read as they look; the raw-stream pattern
    (``text_pattern``) is kept as a second way to see text that flashed by between reads.
    """
    view = _view_of(child)
    want = " ".join(text.split())
    pattern = text_pattern(text)
    deadline = time.monotonic() + timeout
    what = "timed out"
    while True:
        if want in _shown(view) or pattern.search(view.raw):
            view.raw = ""  # like expect(): what matched is consumed
            return
        left = deadline - time.monotonic()
        if left <= 0:
            break
        if not _read_some(child, view, min(left, 0.1)):
            what = "program ended"
            break
    raise AssertionError(f"{text!r} not seen on the terminal ({what} after {timeout}s); screen: {_shown(view)[-1500:]}")


def screen_now(child: pexpect.spawn[str], settle: float = 0.5) -> str:
    """What the terminal shows now: the output read so far and whatever comes within
    ``settle`` seconds (for failure messages)."""
    view = _view_of(child)
    deadline = time.monotonic() + settle
    while (left := deadline - time.monotonic()) > 0 and _read_some(child, view, min(left, 0.1)):
        pass
    return _shown(view)


def exit_tui(child: pexpect.spawn[str], timeout: float = 10) -> int | None:
    """Leave the TUI the way a user does and return its exit code: Ctrl-C, which first cancels
    whatever is open and arms "Press Ctrl-C again to exit", then Ctrl-C again (typed "/exit" works
    too, but not while a dialog holds the keyboard)."""
    import pexpect  # noqa: PLC0415 - pexpect is a test extra (see spawn_tui)

    for attempt in range(3):
        child.send("\x03")
        try:
            expect_text(child, "again to exit", timeout / 2)
            break
        except AssertionError:
            # the first Ctrl-C landed while the turn was still finishing (its Stop hook ran) and
            # interrupted that instead: press it again
            if attempt == 2:
                raise
    child.send("\x03")
    child.expect(pexpect.EOF, timeout=timeout)
    return close_tui(child)


def close_tui(child: pexpect.spawn[str]) -> int | None:
    """Stop the child by pid (SIGHUP, SIGINT, then SIGKILL), reap it, and return its exit code."""
    if not child.closed:
        if child.isalive():
            child.terminate(force=True)
        child.close(force=True)
    # pexpect reaps on close; make sure nothing of ours is left as a zombie.
    try:
        if child.pid is not None:
            os.waitpid(child.pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return child.exitstatus
