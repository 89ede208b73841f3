"""What the person at the terminal answered a dialog with: the keys the relay read from the real
terminal, read the way the CLI's menus read them (a digit picks its option, the arrows move the
highlight, Enter picks the highlighted option, Esc and Ctrl-C cancel).

Only bytes the relay read from its own terminal are logged here. Input that a program pushes
into the CLI's terminal (the ``TIOCSTI`` ioctl on the pty the CLI reads) never passes the relay,
and bytes written to that pty (``/dev/tty``, ``/proc/<pid>/fd/0``) are output, not input: neither
is ever taken for the keyboard (docs/design.md, "Threat model").
"""

from __future__ import annotations

from claudeguard.shim.dialogs.tables import ESC, Choice

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.decision import Permission
    from claudeguard.shim.dialogs.tables import Dialog

KEEP_S = 60.0  # keys older than this answer nothing we still wait on
# A key typed this long before the dialog was first read off the screen may have answered it: the
# screen is read 30 ms after output pauses (0.25 s while it flows), and a person can be quicker.
BEFORE_SEEN_S = 0.5


class KeyLog:
    """The keys typed at the terminal, with the (monotonic) time each chunk arrived."""

    def __init__(self) -> None:
        self._chunks: list[tuple[float, bytes]] = []

    def add(self, now: float, data: bytes) -> None:
        self._chunks.append((now, data))
        while self._chunks and self._chunks[0][0] < now - KEEP_S:
            self._chunks.pop(0)

    def since(self, start: float) -> bytes:
        return b"".join(data for at, data in self._chunks if at >= start)


def tokens(data: bytes) -> list[str]:
    """The keys in ``data`` that move or answer a menu: "up", "down", "enter", "cancel" (Esc alone,
    Ctrl-C), and digits; everything else (letters typed to amend, mouse and focus reports) is
    skipped."""
    out: list[str] = []
    i = 0
    while i < len(data):
        b = data[i]
        if b == 0x1B:
            if i + 2 < len(data) and data[i + 1] in b"[O":
                # CSI or SS3: arrows (normal and application mode), then any other sequence
                j = i + 2
                while j < len(data) and not 0x40 <= data[j] <= 0x7E:
                    j += 1
                final = data[j:j + 1]
                if j == i + 2 and final in (b"A", b"B"):
                    out.append("up" if final == b"A" else "down")
                i = j + 1
                continue
            out.append("cancel")  # Esc alone
        elif b in (0x0D, 0x0A):
            out.append("enter")
        elif b == 0x03:
            out.append("cancel")
        elif 0x31 <= b <= 0x39:
            out.append(chr(b))
        i += 1
    return out


def answered_with(dialog: Dialog | None, keys: bytes) -> Choice | None:
    """The option ``keys`` picked on ``dialog`` (as last read off the screen: its options and
    highlight), the first key that answers it deciding; None when nothing in ``keys`` answers.
    Without a dialog (it came and went between two screen reads) only the answers every
    permission dialog shares are read: "1" and Enter (the highlight starts on Yes) are Yes, a
    cancel is No."""
    if dialog is None:
        for key in tokens(keys):
            if key in ("1", "enter"):
                return Choice("Yes", key, "yes")
            if key == "cancel":
                return Choice("Cancel (Esc)", ESC, "no")
            if key.isdigit():
                return None  # which option that digit is depends on the dialog we did not see
        return None
    choices = dialog.choices
    at = dialog.highlighted if 0 <= dialog.highlighted < len(choices) else 0
    numbered = all(c.keys.isdigit() for c in choices if c.role != "no" or c.keys != ESC)
    for key in tokens(keys):
        if key == "up":
            at = max(0, at - 1)
        elif key == "down":
            at = min(len(choices) - 1, at + 1)
        elif key == "enter":
            return choices[at]
        elif key == "cancel":
            return next((c for c in choices if c.role == "no"), Choice("Cancel (Esc)", ESC, "no"))
        elif numbered and int(key) <= len(choices) and choices[int(key) - 1].keys == key:
            return choices[int(key) - 1]
    return None


def decision_of(choice: Choice) -> Permission:
    """allow for the yes option and any other "Yes, ..." option; deny for the rest."""
    if choice.role == "yes" or (choice.role == "other" and choice.label.startswith("Yes")):
        return "allow"
    return "deny"
