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
from pathlib import Path
from typing import Sequence

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


def spawn_tui(argv: Sequence[str], env: dict[str, str], cwd: str | Path,
              dimensions: tuple[int, int] = (40, 120), timeout: float = 30):
    """Start ``argv`` under a pty (rows, cols); the caller must ``close_tui`` it."""
    import pexpect  # lazy: only tests drive a TUI

    return pexpect.spawn(str(argv[0]), [str(a) for a in argv[1:]], env=env, cwd=str(cwd),
                         dimensions=dimensions, encoding="utf-8", codec_errors="replace", timeout=timeout)


def expect_text(child, text: str, timeout: float = 15) -> None:
    """Wait until ``text`` has been drawn (see ``text_pattern``); raise AssertionError with the
    recent screen output if it has not appeared within ``timeout`` or the program ended."""
    import pexpect

    try:
        child.expect(text_pattern(text), timeout=timeout)
    except (pexpect.TIMEOUT, pexpect.EOF) as exc:
        what = "timed out" if isinstance(exc, pexpect.TIMEOUT) else "program ended"
        seen = screen_text(child.before or "")[-1500:]
        raise AssertionError(f"{text!r} not seen on the terminal ({what} after {timeout}s); recent output: {seen}") from None


def exit_tui(child, timeout: float = 10) -> int | None:
    """Leave the TUI the way a user does and return its exit code: Ctrl-C, which first cancels
    whatever is open and arms "Press Ctrl-C again to exit", then Ctrl-C again (typed "/exit" works
    too, but not while a dialog holds the keyboard)."""
    import pexpect

    child.send("\x03")
    expect_text(child, "again to exit", timeout)
    child.send("\x03")
    child.expect(pexpect.EOF, timeout=timeout)
    return close_tui(child)


def close_tui(child) -> int | None:
    """Stop the child by pid (SIGHUP, SIGINT, then SIGKILL), reap it, and return its exit code."""
    if not child.closed:
        if child.isalive():
            child.terminate(force=True)
        child.close(force=True)
    # pexpect reaps on close; make sure nothing of ours is left as a zombie.
    try:
        os.waitpid(child.pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return child.exitstatus
