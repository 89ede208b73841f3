"""The terminal relay of a pty session: bytes both ways between our terminal (fds 0 and 1) and the
pty's master side, our terminal's raw mode (entered before the CLI starts, left on any exit and on
a stop), and the window size. It only moves bytes: what they mean is the screen watcher's job.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable

from claudeguard.shim.child import write_all

DETACHED_SIZE = (50, 160)

# Input that is not a key press: mouse and focus reports, and the terminal's answers to queries
# (device attributes, cursor position, mode reports, colour scheme, XTVERSION, OSC replies).
_NOT_KEYS = re.compile(
    rb"\x1b\[<\d+;\d+;\d+[Mm]|\x1b\[M[\s\S]{3}|\x1b\[[IO]|\x1b\[\?[\d;]*[cu]|\x1b\[>[\d;]*c|\x1b\[\d+;\d+R"
    rb"|\x1b\[\?[\d;]*\$y|\x1b\[\?997;\d+n|\x1bP[^\x1b]*\x1b\\|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
)


def is_keypress(data: bytes) -> bool:
    """Did a person type this (as opposed to the terminal reporting focus, mouse or replies)?"""
    return bool(_NOT_KEYS.sub(b"", data))


def env_size() -> tuple[int, int]:
    """The detached pty's size: LINES x COLUMNS when sensible, else 50 x 160."""
    try:
        rows, cols = int(os.environ.get("LINES", "")), int(os.environ.get("COLUMNS", ""))
        if rows > 4 and cols > 20:
            return rows, cols
    except ValueError:
        pass
    return DETACHED_SIZE


def get_size(fd: int) -> tuple[int, int] | None:
    import fcntl
    import struct
    import termios

    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    except OSError:
        return None
    return (rows, cols) if rows and cols else None


def set_size(fd: int, rows: int, cols: int) -> None:
    import fcntl
    import struct
    import termios

    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    except OSError:
        pass


def plug_std_fds() -> None:
    """Started with stdin/stdout/stderr closed (``<&-``): put /dev/null there, or the pty we
    open next would get fd 0 and be read as the keyboard."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


class TerminalRelay:
    """Our terminal <-> the pty's master. ``on_output`` sees every byte the CLI wrote (after it
    went to our terminal); ``on_keypress`` is called when a person typed (not a terminal report).
    ``attached``: our stdin is a terminal (raw mode, window size); ``show_raw``: the CLI's bytes
    go to our stdout."""

    def __init__(self, attached: bool, show_raw: bool, on_output: Callable[[bytes], None],
                 on_keypress: Callable[[bytes], None]) -> None:
        self.attached = attached
        self.show_raw = show_raw
        self.on_output = on_output
        self.on_keypress = on_keypress
        self.master = -1
        self.stdin_open = True
        self.stdout_ok = True
        self.to_child = bytearray()  # typed or relayed, not yet taken by the pty
        self._saved_tc: list[Any] | None = None
        self._raw = False

    def open(self, rows: int, cols: int) -> int:
        """The pty (master kept, slave returned for the CLI), sized; attached: the user's terminal
        modes copied onto it and our terminal raw before the CLI starts, so no key typed
        meanwhile is cooked or echoed."""
        master, slave = os.openpty()
        self.master = master
        set_size(slave, rows, cols)
        if self.attached:
            import termios

            try:
                termios.tcsetattr(slave, termios.TCSANOW, termios.tcgetattr(0))  # the user's erase key etc.
            except termios.error:
                pass
            self.enter_raw()
        return slave

    # -- our terminal's modes --------------------------------------------------------------------

    def enter_raw(self) -> None:
        import termios as t

        try:
            if self._saved_tc is None:
                self._saved_tc = t.tcgetattr(0)
            mode = t.tcgetattr(0)
            # cfmakeraw (tty.setraw flushes typed-ahead keys; TCSADRAIN keeps them for the CLI)
            mode[0] &= ~(t.BRKINT | t.ICRNL | t.INPCK | t.ISTRIP | t.IXON | t.IGNBRK | t.PARMRK | t.INLCR | t.IGNCR)
            mode[1] &= ~t.OPOST
            mode[2] = (mode[2] & ~(t.CSIZE | t.PARENB)) | t.CS8
            mode[3] &= ~(t.ECHO | t.ECHONL | t.ICANON | t.IEXTEN | t.ISIG)
            mode[6][t.VMIN] = 1
            mode[6][t.VTIME] = 0
            t.tcsetattr(0, t.TCSADRAIN, mode)
            self._raw = True
        except t.error:
            self._raw = False

    def leave_raw(self) -> None:
        import termios

        if self._raw and self._saved_tc is not None:
            try:
                termios.tcsetattr(0, termios.TCSADRAIN, self._saved_tc)
            except termios.error:
                pass
        self._raw = False

    def restore(self, reset: str) -> None:
        """On the way out: undo modes the CLI left on (``reset``: it may have died), then cooked mode."""
        if self.show_raw and self.stdout_ok and reset:
            self.stdout_ok = write_all(1, reset.encode())
        self.leave_raw()

    def resize(self) -> tuple[int, int] | None:
        """Attached: our terminal's size onto the pty (the kernel sends SIGWINCH to the CLI)."""
        if not self.attached:
            return None
        size = get_size(0) or get_size(1)
        if size is not None:
            set_size(self.master, *size)
        return size

    # -- bytes -----------------------------------------------------------------------------------

    def read_fds(self) -> list[int]:
        return ([self.master] if self.master >= 0 else []) + ([0] if self.stdin_open else [])

    def write_fds(self) -> list[int]:
        return [self.master] if self.to_child and self.master >= 0 else []

    def from_child(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: every holder of the slave side closed it
            data = b""
        if not data:
            self.close_master()
            return
        self._output(data)

    def _output(self, data: bytes) -> None:
        if self.show_raw and self.stdout_ok:
            self.stdout_ok = write_all(1, data)
        self.on_output(data)  # after the write: the terminal never waits for the screen model

    def drain(self) -> None:
        """Take all the CLI wrote so far, without waiting for more."""
        while self.master >= 0:
            try:
                data = os.read(self.master, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.close_master()
                return
            self._output(data)

    def close_master(self) -> None:
        if self.master >= 0:
            os.close(self.master)
            self.master = -1
        self.to_child.clear()

    def from_stdin(self) -> None:
        try:
            data = os.read(0, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.stdin_open = False
            return
        self.to_child += data
        if is_keypress(data):
            self.on_keypress(data)
        self.flush()

    def type(self, keys: bytes) -> None:
        """Keys of ours (a channel answer, Ctrl-C to end a detached session) into the pty."""
        self.to_child += keys
        self.flush()

    def flush(self) -> None:
        if self.master < 0:
            self.to_child.clear()
            return
        while self.to_child:
            try:
                n = os.write(self.master, self.to_child)
            except BlockingIOError:
                return
            except OSError:
                self.to_child.clear()
                return
            del self.to_child[:n]

    def print_text(self, lines: list[str]) -> None:
        """Plain text to our stdout (the last screen of a detached session)."""
        if lines and self.stdout_ok:
            write_all(1, ("\n".join(lines) + "\n").encode())
