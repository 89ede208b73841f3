"""Reading the screen: the known dialog on it (anchor, menu, footer: a complete match or nothing),
and whether the CLI sits idle at its prompt.

The menu is read from the screen: a numbered list (``❯ 1. Yes`` / ``2. No``: answered by typing
the digit) or a plain one (``❯ No, exit`` / ``Yes, I trust this folder``: answered with arrow
keys from the highlighted line, then Enter), or a fixed set of keys named in the pattern
(``Enter to stay in auto mode · shift+Tab to leave ... · Esc to cancel``). Anything that does not
match a pattern completely, menu included, is not a dialog we answer: unknown dialogs are not
guessed at.
"""

from __future__ import annotations

import json
import re

from claudeguard.shim.dialogs.tables import DOWN, ENTER, ESC, MARK, NUMBERED, UP, Choice, Dialog, Pattern

_RULE = re.compile(r"^\s*[─━▔]{20,}\s*$")
_DASHED = re.compile(r"^\s*[╌┄]{10,}\s*$")
_MARKED = re.compile(r"^(\s*)❯\s+(\S.*?)\s*$")


def _menu(lines: list[str], start: int, stop: int) -> tuple[list[tuple[str, str | None]], int, int, int] | None:
    """Find the option list in lines[start:stop]: ([(label, number or None)], index of the
    highlighted option or -1, first line, last line). None when there is no clear menu."""
    for i in range(start, stop):
        m = NUMBERED.match(lines[i])
        if m and m.group(2) == "1":
            return _numbered(lines, i, stop)
    for i in range(start, stop):
        m = _MARKED.match(lines[i])
        if m:
            return _plain(lines, i, start, stop, len(m.group(1)) + 2)
    return None


def _numbered(lines: list[str], first: int, stop: int) -> tuple[list[tuple[str, str | None]], int, int, int] | None:
    options: list[tuple[str, str | None]] = []
    highlighted, indent, last = -1, None, first
    for i in range(first, stop):
        line = lines[i]
        m = NUMBERED.match(line)
        if m and int(m.group(2)) == len(options) + 1:
            options.append((m.group(3), m.group(2)))
            if MARK in line[: line.index(m.group(2) + ".")]:
                highlighted = len(options) - 1
            indent = line.index(m.group(2) + ".")
            last = i
            continue
        if line.strip() and indent is not None and len(line) - len(line.lstrip()) > indent and MARK not in line:
            label, number = options[-1]
            options[-1] = (f"{label} {line.strip()}", number)  # a long label wrapped onto this line
            last = i
            continue
        break
    return (options, highlighted, first, last) if len(options) >= 2 else None


def _plain(lines: list[str], marked: int, start: int, stop: int,
           column: int) -> tuple[list[tuple[str, str | None]], int, int, int] | None:
    def option(i: int) -> str | None:
        line = lines[i]
        if len(line) <= column or line[column] == " ":
            return None
        head = line[:column]
        if i == marked:
            return line[column:].strip()
        return line[column:].strip() if not head.strip() else None

    first = marked
    while first - 1 >= start and option(first - 1) is not None:
        first -= 1
    last = marked
    while last + 1 < stop and option(last + 1) is not None:
        last += 1
    labels = [option(i) or "" for i in range(first, last + 1)]
    return ([(label, None) for label in labels], marked - first, first, last) if len(labels) >= 2 else None


def find_dialog(lines: list[str], patterns: list[Pattern]) -> Dialog | None:
    """The known dialog on screen, or None. Only a complete match counts: anchor, a menu (or the
    pattern's fixed keys), the yes option, and the footer when the pattern has one."""
    for pattern in patterns:
        dialog = _match(lines, pattern)
        if dialog is not None:
            return dialog
    return None


def _match(lines: list[str], pattern: Pattern) -> Dialog | None:
    anchor_re: re.Pattern[str] = pattern._anchor  # type: ignore[attr-defined]  # set by __post_init__
    anchor = next((i for i in range(len(lines) - 1, -1, -1) if anchor_re.search(lines[i])), None)
    if anchor is None:
        return None
    top = next((i + 1 for i in range(anchor - 1, -1, -1) if _RULE.match(lines[i])), 0)
    highlight = -1
    if pattern.keys:
        choices = tuple(Choice(label, keys, role) for label, keys, role in pattern.keys)
        end = anchor
    elif pattern.checklist:
        found = _checklist(lines, anchor + 1, pattern)
        if found is None:
            return None
        choices, end = found
    else:
        menu = _menu(lines, anchor + 1, len(lines))
        if menu is None:
            return None
        options, highlighted, _first, last = menu
        end = last
        if pattern.footer is not None:
            footer = re.compile(pattern.footer)
            after = [i for i in range(last + 1, min(len(lines), last + 4)) if lines[i].strip()]
            if not after or not footer.search(lines[after[0]]):
                return None  # still being drawn, or not the dialog we think
            end = after[0]
        menu_choices = _choices(options, highlighted, pattern)
        if menu_choices is None:
            return None
        choices = menu_choices
        highlight = highlighted
    if top == 0 or not _alone_below(lines, end):
        return None  # a dialog sits under a rule at the bottom; this is text in the transcript
    body = [ln.rstrip() for ln in lines[top:end + 1] if not _DASHED.match(ln)]
    while body and not body[0].strip():
        body.pop(0)
    text = "\n".join(_dedent(body))
    title = pattern.title or (body[0].strip() if body else pattern.kind)
    menu_free = [ln.strip() for ln in body if ln.strip() and not NUMBERED.match(ln) and MARK not in ln]
    key = json.dumps([pattern.kind, title, [c.label for c in choices], menu_free[:12]], ensure_ascii=False)
    return Dialog(pattern.kind, title, text, choices, key, highlight)


_CHECK_ITEM = re.compile(r"^\s*(❯\s*)?\[([✔✓x ])\]\s+(\S.*?)\s*$")
_CONFIRM_LINE = re.compile(r"^\s*(❯\s*)?Enable selected\s*$")


def _checklist(lines: list[str], start: int, pattern: Pattern) -> tuple[tuple[Choice, ...], int] | None:
    """The choices of a checklist dialog and its last line (the footer), or None while it is not
    complete: items, the highlight on one of them or on the confirm line, then the footer."""
    items: list[tuple[str, bool]] = []
    highlighted = -1
    confirm = -1  # position of "Enable selected" in the list of lines that take the highlight
    i = start
    while i < len(lines) and not _CHECK_ITEM.match(lines[i]):
        i += 1
    while i < len(lines):
        item, line = _CHECK_ITEM.match(lines[i]), lines[i]
        if item:
            if item.group(1):
                highlighted = len(items)
            items.append((item.group(3), item.group(2) != " "))
        elif _CONFIRM_LINE.match(line):
            confirm = len(items)
            if MARK in line:
                highlighted = confirm
        elif line.strip():
            break
        i += 1
    footer = re.compile(pattern.footer or "")
    if len(items) < 2 or highlighted < 0 or i >= len(lines) or not footer.search(lines[i]):
        return None
    if confirm >= 0:
        yes_keys = DOWN * (confirm - highlighted) + ENTER
    elif "Enter to confirm" in lines[i]:
        yes_keys = ENTER
    else:
        return None
    selected = [name for name, checked in items if checked]
    yes = Choice(f"Enable selected: {', '.join(selected)}" if selected else "Enable selected: none", yes_keys, "yes")
    return (yes, Choice("Reject all", ESC, "no")), i


def _alone_below(lines: list[str], end: int) -> bool:
    """Nothing but a status line or two under the dialog: no input box, no rule, no other menu."""
    below = [ln for ln in lines[end + 1:] if ln.strip()]
    return len(below) <= 2 and not any(_RULE.match(ln) or MARK in ln for ln in below)


def _choices(options: list[tuple[str, str | None]], highlighted: int, pattern: Pattern) -> tuple[Choice, ...] | None:
    yes_re = re.compile(pattern.yes)
    no_re = re.compile(pattern.no) if pattern.no else None
    out: list[Choice] = []
    yes_seen = False
    for index, (label, number) in enumerate(options):
        if number is not None:
            keys = number
        elif highlighted >= 0:
            moves = index - highlighted
            keys = (DOWN * moves if moves > 0 else UP * -moves) + ENTER
        else:
            return None  # a plain menu without a highlight: we would not know where we are
        role = "other"
        if not yes_seen and yes_re.fullmatch(label):
            role, yes_seen = "yes", True
        elif no_re is not None and no_re.fullmatch(label) and not any(c.role == "no" for c in out):
            role = "no"
        out.append(Choice(label, keys, role))
    if not yes_seen:
        return None
    if not any(c.role == "no" for c in out):
        out.append(Choice("Cancel (Esc)", ESC, "no"))  # deny = dismiss the dialog
    return tuple(out)


def _dedent(lines: list[str]) -> list[str]:
    widths = [len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()]
    cut = min(widths) if widths else 0
    return [ln[cut:] for ln in lines]


# --- is the CLI idle at its prompt? -------------------------------------------------------------

BUSY = re.compile(r"esc to interrupt")
_PROMPT = re.compile(r"^\s*❯\s*$")


def at_idle_prompt(lines: list[str]) -> bool:
    """The input box is empty between its two rules and nothing is running ("esc to interrupt"
    is in the footer while the model streams or a tool runs, in both pinned versions)."""
    if any(BUSY.search(line) for line in lines):
        return False
    for i in range(len(lines) - 1, 0, -1):
        if _PROMPT.match(lines[i]):
            return bool(_RULE.match(lines[i - 1])) and i + 1 < len(lines) and bool(_RULE.match(lines[i + 1]))
    return False
