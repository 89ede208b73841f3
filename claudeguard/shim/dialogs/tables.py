"""The CLI's blocking dialogs we know: what a dialog is (``Dialog``, its ``Choice``s) and one table
of ``Pattern``s per CLI version range.

A pattern names a dialog by an *anchor* line (its question), the lines that must close it, and
which of its options means yes and which means no (``parse`` reads the menu off the screen).
Changed wording in a new CLI release is one line in ``TABLES``. The texts were read off the
screens of 2.1.197 and 2.1.330 driven under a pty (see docs/design.md, "Interactive sessions").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from claudeguard.decision import dialog_role

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.decision import Permission

MARK = "❯"
UP, DOWN, ENTER, ESC, SHIFT_TAB = "\x1b[A", "\x1b[B", "\r", "\x1b", "\x1b[Z"
NUMBERED = re.compile(r"^(\s*)(?:❯\s*)?(\d{1,2})\.\s+(\S.*?)\s*$")  # "❯ 1. Yes": an option of a numbered menu


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
    highlighted: int = -1  # the index of the option the highlight is on (-1: not known, fixed keys)

    @property
    def labels(self) -> list[str]:
        return [c.label for c in self.choices]

    def summary(self) -> str:
        """One line for ``pending``: the title and the first two lines of substance."""
        picked: list[str] = []
        for line in self.text.splitlines():
            line = line.strip()
            if not line or line == self.title or line.startswith("Tip:") or MARK in line or NUMBERED.match(line):
                continue
            if picked and picked[-1].endswith(":"):
                picked[-1] = f"{picked[-1]} {line}"  # "Accessing workspace:" + the path
                continue
            picked.append(line)
            if len(picked) == 2 and not picked[-1].endswith(":"):
                break
        text = f"{self.title}: {' · '.join(picked)}" if picked else self.title
        return text if len(text) <= 160 else text[:159] + "…"

    def pick(self, decision: Permission, choice: str | None = None) -> Choice | None:
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
        role = dialog_role(decision)
        for c in self.choices:
            if c.role == role:
                return c
        return None


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
_API_KEY = Pattern("api-key", r"Detected a custom API key in your environment", yes=r"Yes",
                   no=r"No(?: \(recommended\))?",
                   title="Use the custom API key?")
_MCP = Pattern("mcp-server", r"New MCP server found in this project", yes=r"Use this MCP server",
               no=r"Continue without using this MCP server", title="Use the new MCP server?")
# Two or more servers at once: a checklist, every item checked at first. 2.1.197 confirms with
# Enter; 2.1.330 toggles an item with Enter and confirms on an "Enable selected" line below the
# items. Esc rejects all (written to disabledMcpjsonServers).
_MCP_MANY = Pattern("mcp-servers", r"^\s*\d+ new MCP servers found in this project", yes="", no=None,
                    title="Use the new MCP servers?",
                    footer=r"Space to select · (?:Enter to confirm · )?Esc to reject all",
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


_BANNER = re.compile(r"Claude Code v(\d+\.\d+\.\d+)")


def banner_version(lines: list[str]) -> str | None:
    for line in lines[:12]:
        m = _BANNER.search(line)
        if m:
            return m.group(1)
    return None

