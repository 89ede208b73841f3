"""The CLI's blocking dialogs: which ones we know (one table per CLI version range), how to read
one off the screen, and how to answer it with keys.

A pattern names a dialog by an *anchor* line (its question), the lines that must close it, and
which of its options means yes and which means no. The menu itself is read from the screen: a
numbered list (``❯ 1. Yes`` / ``2. No``: answered by typing the digit) or a plain one
(``❯ No, exit`` / ``Yes, I trust this folder``: answered with arrow keys from the highlighted
line, then Enter), or a fixed set of keys named in the pattern (``Enter to stay in auto mode ·
shift+Tab to leave ... · Esc to cancel``). Anything that does not match a pattern completely,
menu included, is not a dialog we answer: unknown dialogs are not guessed at.

Changed wording in a new CLI release is one line in ``TABLES``. The texts were read off the
screens of 2.1.197 and 2.1.330 driven under a pty (see docs/design.md, "Interactive sessions").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

MARK = "❯"
UP, DOWN, ENTER, ESC, SHIFT_TAB = "\x1b[A", "\x1b[B", "\r", "\x1b", "\x1b[Z"


@dataclass(frozen=True)
class Choice:
    label: str
    keys: str  # typed into the pty to pick it
    role: str = "other"  # "yes" | "no" | "other": what allow / deny map to


@dataclass(frozen=True)
class Dialog:
    kind: str  # permission | trust | bypass | api-key | mcp-server | mcp-servers | plan | auto-mode
    title: str
    text: str  # the dialog's lines, for the approver
    choices: tuple[Choice, ...]
    key: str  # identity: the same dialog redrawn (or its highlight moved) keeps its key

    @property
    def labels(self) -> list[str]:
        return [c.label for c in self.choices]

    def summary(self) -> str:
        """One line for ``pending``: the title and the first two lines of substance."""
        picked: list[str] = []
        for line in self.text.splitlines():
            line = line.strip()
            if not line or line == self.title or line.startswith("Tip:") or MARK in line or _NUMBERED.match(line):
                continue
            if picked and picked[-1].endswith(":"):
                picked[-1] = f"{picked[-1]} {line}"  # "Accessing workspace:" + the path
                continue
            picked.append(line)
            if len(picked) == 2 and not picked[-1].endswith(":"):
                break
        text = f"{self.title}: {' · '.join(picked)}" if picked else self.title
        return text if len(text) <= 160 else text[:159] + "…"

    def pick(self, decision: str, choice: str | None = None) -> Choice | None:
        """The option an answer stands for: its ``choice`` (a label, or its 1-based number) when
        given, else the yes option for allow and the no option for deny."""
        if choice:
            wanted = choice.strip()
            for c in self.choices:
                if c.label == wanted:
                    return c
            if wanted.isdigit() and 1 <= int(wanted) <= len(self.choices):
                return self.choices[int(wanted) - 1]
            folded = wanted.casefold()
            for c in self.choices:
                if c.label.casefold() == folded:
                    return c
            return None
        role = "yes" if decision == "allow" else "no"
        for c in self.choices:
            if c.role == role:
                return c
        return None

    def to_state(self) -> dict:
        return {"dialog": self.title, "kind": self.kind, "choices": self.labels, "text": self.text}


_CONFIRM = r"Enter to confirm · Esc to cancel"


@dataclass(frozen=True)
class Pattern:
    kind: str
    anchor: str  # regex searched in each line; the last matching line anchors the dialog
    yes: str  # regex (fullmatch on a label) of the option "allow" means
    no: str | None  # ... and the one "deny" means; None: Esc
    title: str | None = None  # None: the dialog's first line (e.g. "Bash command")
    footer: str | None = _CONFIRM  # must follow the menu (within 3 lines); None: not checked
    keys: tuple[tuple[str, str, str], ...] = ()  # fixed (label, keys, role) instead of a menu
    checklist: bool = False  # a list of [✔] items: allow confirms the selection as shown, deny is Esc

    def __post_init__(self) -> None:
        object.__setattr__(self, "_anchor", re.compile(self.anchor))


# --- the tables -----------------------------------------------------------------------------
# Order matters: the first pattern whose anchor, menu and footer are all on screen wins, so the
# specific questions come before the generic permission one.

_TRUST = Pattern("trust", r"^\s*Accessing workspace:|Is this a project you created or one you trust\?",
                 yes=r"Yes, I trust this folder", no=r"No, exit", title="Trust this folder?")
# At the start of a --dangerously-skip-permissions session not accepted before (a root user needs
# IS_SANDBOX=1 to get this far). A deny, and the approval timeout, pick "No, exit".
_BYPASS = Pattern("bypass", r"WARNING: Claude Code running in Bypass Permissions mode", yes=r"Yes, I accept",
                  no=r"No, exit", title="Accept Bypass Permissions mode?")
_API_KEY = Pattern("api-key", r"Detected a custom API key in your environment", yes=r"Yes", no=r"No(?: \(recommended\))?",
                   title="Use the custom API key?")
_MCP = Pattern("mcp-server", r"New MCP server found in this project", yes=r"Use this MCP server",
               no=r"Continue without using this MCP server", title="Use the new MCP server?")
# Two or more servers at once: a checklist, every item checked at first. 2.1.197 confirms with
# Enter; 2.1.330 toggles an item with Enter and confirms on an "Enable selected" line below the
# items. Esc rejects all (written to disabledMcpjsonServers).
_MCP_MANY = Pattern("mcp-servers", r"^\s*\d+ new MCP servers found in this project", yes="", no=None,
                    title="Use the new MCP servers?", footer=r"Space to select · (?:Enter to confirm · )?Esc to reject all",
                    checklist=True)
_PLAN = Pattern("plan", r"^\s*(?:Exit plan mode\?|Would you like to proceed\?)", yes=r"Yes\b.*", no=r"No\b.*",
                title="Exit plan mode?", footer=None)
# "Do you want to proceed?" (Bash), "... create notes.txt?" (Write), "... allow Claude to fetch
# this content?" (WebFetch: drawn without a footer line).
_PERMISSION = Pattern("permission", r"^\s*Do you want to .*\?\s*$", yes=r"Yes", no=r"No\b.*", footer=None)
_AUTO_MODE = Pattern(
    "auto-mode", r"Enter to stay in auto mode\b.*Esc to cancel", yes="", no=None,
    title="Auto mode can't check actions in this session", footer=None,
    keys=(("Stay in auto mode", ENTER, "yes"), ("Leave for accept edits mode and stop", SHIFT_TAB, "other"),
          ("Cancel", ESC, "no")),
)

_COMMON = [_TRUST, _BYPASS, _API_KEY, _MCP, _MCP_MANY, _PLAN, _PERMISSION]

# (first version, first version no longer covered or None, patterns)
TABLES: list[tuple[str, str | None, list[Pattern]]] = [
    ("0", "2.1.300", _COMMON),
    ("2.1.300", None, [_AUTO_MODE, *_COMMON]),
]


def _vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:4])


def patterns_for(version: str | None) -> list[Pattern]:
    """The table for ``version``; the newest table when the version is unknown."""
    if version:
        v = _vkey(version)
        for low, high, patterns in TABLES:
            if _vkey(low) <= v and (high is None or v < _vkey(high)):
                return patterns
    return TABLES[-1][2]


def cli_version(real_cli: str) -> str | None:
    """The real CLI's version from its npm package.json (no process started), else None."""
    try:
        path = Path(real_cli).resolve()
    except OSError:
        return None
    for parent in list(path.parents)[:4]:
        manifest = parent / "package.json"
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("name") == "@anthropic-ai/claude-code" and isinstance(data.get("version"), str):
            return data["version"]
    return None


_BANNER = re.compile(r"Claude Code v(\d+\.\d+\.\d+)")


def banner_version(lines: list[str]) -> str | None:
    for line in lines[:12]:
        m = _BANNER.search(line)
        if m:
            return m.group(1)
    return None


# --- reading a dialog off the screen ------------------------------------------------------------

_RULE = re.compile(r"^\s*[─━▔]{20,}\s*$")
_DASHED = re.compile(r"^\s*[╌┄]{10,}\s*$")
_NUMBERED = re.compile(r"^(\s*)(?:❯\s*)?(\d{1,2})\.\s+(\S.*?)\s*$")
_MARKED = re.compile(r"^(\s*)❯\s+(\S.*?)\s*$")


def _menu(lines: list[str], start: int, stop: int) -> tuple[list[tuple[str, str | None]], int, int, int] | None:
    """Find the option list in lines[start:stop]: ([(label, number or None)], index of the
    highlighted option or -1, first line, last line). None when there is no clear menu."""
    for i in range(start, stop):
        m = _NUMBERED.match(lines[i])
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
        m = _NUMBERED.match(line)
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


def _plain(lines: list[str], marked: int, start: int, stop: int, column: int) -> tuple[list[tuple[str, str | None]], int, int, int] | None:
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
    anchor_re: re.Pattern[str] = pattern._anchor  # type: ignore[attr-defined]
    anchor = next((i for i in range(len(lines) - 1, -1, -1) if anchor_re.search(lines[i])), None)
    if anchor is None:
        return None
    top = next((i + 1 for i in range(anchor - 1, -1, -1) if _RULE.match(lines[i])), 0)
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
        choices = _choices(options, highlighted, pattern)
        if choices is None:
            return None
    if top == 0 or not _alone_below(lines, end):
        return None  # a dialog sits under a rule at the bottom; this is text in the transcript
    body = [ln.rstrip() for ln in lines[top:end + 1] if not _DASHED.match(ln)]
    while body and not body[0].strip():
        body.pop(0)
    text = "\n".join(_dedent(body))
    title = pattern.title or (body[0].strip() if body else pattern.kind)
    menu_free = [ln.strip() for ln in body if ln.strip() and not _NUMBERED.match(ln) and MARK not in ln]
    key = json.dumps([pattern.kind, title, [c.label for c in choices], menu_free[:12]], ensure_ascii=False)
    return Dialog(pattern.kind, title, text, choices, key)


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



# --- routing a dialog nobody answers to the approval channel -----------------------------------

HOOK_GRACE_S = 3.0  # a permission dialog: time the PermissionRequest hook gets to post it first
HOOK_CHECK_EVERY_S = 1.0
GONE_AFTER_S = 0.3  # a dialog missing from one redraw is not gone yet
CHANNEL_CHECK_S = 1.0  # how often a posted dialog checks its channel is still there
SETTLE_S = 5.0  # after typing an answer: the same dialog still on screen is not asked again before


@dataclass
class RouteSettings:
    session_id: str
    cwd: str
    idle_before_channel: float
    timeout: float = 600.0
    on_timeout: str = "deny"
    notify: list[str] | None = None
    hook_grace: float = HOOK_GRACE_S


class DialogRouter:
    """One session's dialog on screen -> at most one channel request -> keys for the pty.

    The relay calls ``observe`` with what the screen shows, ``keyboard`` when a key arrives from
    the person at the terminal, ``step`` on every wake-up (it returns keys to type, if an answer
    came), and selects on ``fds()`` until ``next_wakeup()``. ``channel`` is the module (a fake
    in tests); time comes from ``clock`` (monotonic) and ``wall`` (epoch, for deadlines)."""

    def __init__(self, settings: RouteSettings, *, channel=None, clock=None, wall=None) -> None:  # type: ignore[no-untyped-def]
        import time

        self.s = settings
        self._channel = channel
        self._clock = clock or time.monotonic
        self._wall = wall or time.time
        self.dialog: Dialog | None = None
        self.since_wall: float | None = None
        self._idle_from = 0.0
        self._missing_since: float | None = None
        self._pending = None  # channel.Pending
        self._posted_at = 0.0
        self._answered: tuple[str, float] | None = None  # (dialog key, when we typed)
        self._hook_state = "unseen"  # unseen | pending | gone (the hook's request for this dialog)
        self._hook_gone_at = 0.0
        self._hook_checked_at = -1e9
        self.keyboard_wall: float | None = None
        self.changed = False  # state() differs from what was last written

    # -- inputs ------------------------------------------------------------------------------

    @property
    def channel(self):  # type: ignore[no-untyped-def]
        if self._channel is None:
            from claudeguard import channel

            self._channel = channel
        return self._channel

    @property
    def request_id(self) -> str | None:
        return self._pending.request.id if self._pending is not None else None

    def observe(self, dialog: Dialog | None) -> None:
        now = self._clock()
        if dialog is None:
            if self.dialog is None:
                return
            if self._missing_since is None:
                self._missing_since = now
            if now - self._missing_since < GONE_AFTER_S:
                return
            self._set(None, now)
            return
        self._missing_since = None
        if self.dialog is None or dialog.key != self.dialog.key:
            self._set(dialog, now)
        elif dialog != self.dialog:
            self.dialog = dialog  # same dialog, highlight moved: the keys for each choice changed

    def keyboard(self) -> None:
        """A key from the terminal: the person there is answering; they win over the channel."""
        now = self._clock()
        self.keyboard_wall = self._wall()
        self._idle_from = now
        self.changed = True
        if self._pending is not None:
            self._withdraw()

    def step(self) -> str | None:
        """Timers and answers: post when a dialog has waited long enough; return the keys to type
        when an answer arrived (or the request timed out)."""
        now = self._clock()
        if self.dialog is not None and self._missing_since is not None and now - self._missing_since >= GONE_AFTER_S:
            self._set(None, now)
        if self._pending is not None:
            return self._check_answer()
        if self.dialog is None or now < self._due_at():
            return None
        if self.dialog.kind == "permission" and not self._hook_clear(now):
            return None
        self._post(now)
        return None

    def fds(self) -> list[int]:
        return [self._pending.fileno()] if self._pending is not None else []

    def next_wakeup(self) -> float | None:
        """Monotonic time of the next timer, or None (only an fd or a new screen can wake us)."""
        times: list[float] = []
        if self._missing_since is not None:
            times.append(self._missing_since + GONE_AFTER_S)
        if self._pending is not None:
            left = max(0.0, self._pending.request.deadline - self._wall())
            # Also wake to check the channel (a removed runtime dir is made again: requests).
            times.append(self._clock() + min(left, CHANNEL_CHECK_S))
        elif self.dialog is not None:
            due = self._due_at()
            if self.dialog.kind == "permission" and self._clock() >= due:
                due = self._hook_checked_at + HOOK_CHECK_EVERY_S  # waiting on the hook's request
            times.append(due)
        return min(times) if times else None

    def state(self) -> dict:
        """The dialog part of ``screen.json``."""
        d = self.dialog
        return {
            "dialog": d.title if d else None,
            "kind": d.kind if d else None,
            "choices": d.labels if d else [],
            "since": self.since_wall if d else None,
            "request": self.request_id,
            "keyboard_at": self.keyboard_wall,
        }

    def close(self) -> None:
        if self._pending is not None:
            self._withdraw()

    # -- internals -----------------------------------------------------------------------------

    def _set(self, dialog: Dialog | None, now: float) -> None:
        if self._pending is not None:
            self._withdraw()  # whoever answered it, it is gone (or replaced): the request is moot
        self.dialog = dialog
        self.since_wall = self._wall() if dialog else None
        self._idle_from = now
        self._missing_since = None
        self._hook_state = "unseen"
        self._hook_checked_at = -1e9
        self.changed = True

    def _due_at(self) -> float:
        assert self.dialog is not None
        due = self._idle_from + self.s.idle_before_channel
        if self.dialog.kind == "permission":
            due += self.s.hook_grace
        if self._answered is not None and self._answered[0] == self.dialog.key:
            due = max(due, self._answered[1] + SETTLE_S)
        return due

    def _hook_clear(self, now: float) -> bool:
        """May the screen path post this permission dialog? Not while a permission request of
        this session posted by the PermissionRequest hook (``extra.via == "dialog"``) is pending,
        nor for ``hook_grace`` after it went (the CLI may be closing the dialog right now)."""
        if now - self._hook_checked_at >= HOOK_CHECK_EVERY_S:
            self._hook_checked_at = now
            try:
                pending = self.channel.list_pending(self.s.session_id)
            except Exception:  # noqa: BLE001 - an unreadable channel must not stop the screen path
                pending = []
            if any(r.kind == "permission" and (r.extra or {}).get("via") == "dialog" for r in pending):
                self._hook_state = "pending"
            elif self._hook_state == "pending":
                self._hook_state, self._hook_gone_at = "gone", now
        if self._hook_state == "pending":
            return False
        return self._hook_state == "unseen" or now - self._hook_gone_at >= self.s.hook_grace

    def _post(self, now: float) -> None:
        d = self.dialog
        assert d is not None
        try:
            self._pending = self.channel.post(
                session_id=self.s.session_id, agent_type=None, agent_id=None, tool=f"dialog:{d.kind}",
                input={"title": d.title, "text": d.text, "choices": d.labels}, summary=d.summary(),
                cwd=self.s.cwd, timeout=self.s.timeout, kind="dialog", choices=d.labels,
                extra={"via": "screen", "dialog": d.kind}, notify=self.s.notify or None,
            )
        except Exception as exc:  # noqa: BLE001 - the person at the terminal can still answer
            _warn(f"claudeguard: cannot post the dialog {d.title!r} to the approval channel: {exc}")
            self._answered = (d.key, now + 60.0)  # do not retry in a tight loop
            return
        self._posted_at = now
        self.changed = True

    def _check_answer(self) -> str | None:
        pending = self._pending
        answer = pending.poll()
        if answer is None and self._wall() < pending.request.deadline:
            answer = pending.check()  # None while its channel is in place (or was made again)
        if answer is None and self._wall() >= pending.request.deadline:
            answer = pending.wait(on_timeout=self.s.on_timeout)  # past the deadline: returns at once
        if answer is None:
            return None
        self._pending = None
        self.changed = True
        d = self.dialog
        if d is None:
            return None
        self._answered = (d.key, self._clock())  # typed or not, do not ask again at once
        if answer.decided_by not in ("human", "timeout"):
            return None  # the channel was lost: the dialog stays for the keyboard
        choice = d.pick(answer.decision, answer.choice) or d.pick(answer.decision)
        self._audit(d, answer, choice, pending.request.id)
        return choice.keys if choice is not None else None

    def _withdraw(self) -> None:
        pending, self._pending = self._pending, None
        self.changed = True
        try:
            pending.withdraw()
        except Exception:  # noqa: BLE001
            pass

    def _audit(self, d: Dialog, answer, choice: Choice | None, request_id: str) -> None:  # type: ignore[no-untyped-def]
        try:
            from claudeguard.channel import audit

            audit.record({
                "session_id": self.s.session_id, "agent_type": None, "agent_id": None, "tool": f"dialog:{d.kind}",
                "summary": d.summary(), "decision": answer.decision, "decided_by": answer.decided_by,
                "scope": "once", "waited_s": round(self._clock() - self._posted_at, 3), "request_id": request_id,
                "via": "screen", "choice": choice.label if choice else None,
            })
        except Exception:  # noqa: BLE001 - the log never blocks an answer
            pass


def _warn(message: str) -> None:
    """Never on the terminal (the TUI owns it): into the audit log as a channel event."""
    try:
        from claudeguard.channel import audit

        audit.record({"event": "dialog-error", "message": message})
    except Exception:  # noqa: BLE001
        pass
