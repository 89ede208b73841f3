"""Routing a dialog nobody answers to the approval channel: one session's dialog on screen ->
at most one channel request -> the keys that answer it."""

from __future__ import annotations

from dataclasses import dataclass

from claudeguard.config.schema import APPROVAL_TIMEOUT_S
from claudeguard.shim.dialogs.handshake import HOOK_GRACE_S, HookRequests
from claudeguard.shim.dialogs.keys import KeyLog

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable

    from claudeguard.channel.model import Answer
    from claudeguard.channel.requests import Pending
    from claudeguard.shim.dialogs.tables import Choice, Dialog

GONE_AFTER_S = 0.3  # a dialog missing from one redraw is not gone yet
CHANNEL_CHECK_S = 1.0  # how often a posted dialog checks its channel is still there
SETTLE_S = 5.0  # after typing an answer: the same dialog still on screen is not asked again before


@dataclass
class RouteSettings:
    session_id: str
    cwd: str
    idle_before_channel: float
    timeout: float = APPROVAL_TIMEOUT_S
    on_timeout: str = "deny"
    notify: list[str] | None = None
    hook_grace: float = HOOK_GRACE_S
    session_dir: str | None = None  # where the router says why it dropped a hook request
    attached: bool = True  # keys come from a person's terminal (not a detached session's stdin)
    tty: str | None = None  # that terminal's name, for the keyboard's audit rows


class DialogRouter:
    """One session's dialog on screen -> at most one channel request -> keys for the pty.

    The relay calls ``observe`` with what the screen shows, ``keyboard`` when a key arrives from
    the person at the terminal, ``step`` on every wake-up (it returns keys to type, if an answer
    came), and selects on ``fds()`` until ``next_wakeup()``. ``channel`` is the module (a fake
    in tests); time comes from ``clock`` (monotonic) and ``wall`` (epoch, for deadlines)."""

    def __init__(self, settings: RouteSettings, *, channel: Any = None, clock: Callable[[], float] | None = None,
                 wall: Callable[[], float] | None = None) -> None:  # channel: the channel package, or a test's stand-in
        import time

        self.s = settings
        self._channel = channel
        self._clock = clock or time.monotonic
        self._wall = wall or time.time
        self.dialog: Dialog | None = None
        self.since_wall: float | None = None
        self._idle_from = 0.0
        self._missing_since: float | None = None
        self._pending: Pending | None = None
        self._posted_at = 0.0
        self._answered: tuple[str, float] | None = None  # (dialog key, when we typed)
        self.keys = KeyLog()  # what the person typed: which option answered a dialog (dialogs/keys.py)
        self._hook = HookRequests(settings.session_id, settings.hook_grace, self.keys,  # the hook's requests
                                  settings.session_dir, settings.attached, settings.tty)
        self.keyboard_wall: float | None = None
        self._shown_held: str | None = None  # the hook's held request of the dialog, as last written
        self.changed = False  # state() differs from what was last written

    # -- inputs ------------------------------------------------------------------------------

    @property
    def channel(self) -> Any:  # the channel package, or a test's stand-in
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

    def keyboard(self, data: bytes = b"") -> None:
        """A key from the terminal: the person there is answering; they win over the channel.
        ``data``: the bytes typed (which option they picked: the keyboard's audit row)."""
        now = self._clock()
        self.keys.add(now, data)
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
        on_screen = self.dialog is not None and self.dialog.kind == "permission"
        self._hook.sync(self.channel, now, self._wall(), dialog=self.dialog if on_screen else None,
                        head_start_over=on_screen and now >= self._idle_from + self.s.idle_before_channel,
                        screen_posted=on_screen and self._pending is not None, keyboard_wall=self.keyboard_wall)
        if self._hook.shown != self._shown_held:
            self._shown_held = self._hook.shown
            self.changed = True  # screen.json says which held request the dialog is (pending lists it)
        if self._pending is not None:
            return self._check_answer()
        if self.dialog is None or now < self._due_at():
            return None
        if self.dialog.kind == "permission" and not self._hook.clear(now):
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
        on_screen = self.dialog is not None and self.dialog.kind == "permission"
        now = self._clock()
        if self._pending is None and self.dialog is not None:
            due = self._due_at()
            if not (on_screen and now >= due):  # past it, a permission dialog waits on the hook's requests
                times.append(due)
        check = self._hook.next_check(on_screen)  # the hook's requests (handshake)
        if check is not None:
            times.append(check)
        head_start_end = self._idle_from + self.s.idle_before_channel
        if on_screen and self._hook.known and head_start_end > now:
            times.append(head_start_end)  # the hook's held request is released then
        return min(times) if times else None

    def state(self) -> dict[str, Any]:
        """The dialog part of ``screen.json``."""
        d = self.dialog
        return {
            "dialog": d.title if d else None,
            "kind": d.kind if d else None,
            "choices": d.labels if d else [],
            "since": self.since_wall if d else None,
            "request": self.request_id,
            "keyboard_at": self.keyboard_wall,
            "held": self._hook.shown if d else None,
            "channel_at": self._channel_at(),
        }

    def _channel_at(self) -> float | None:
        """When (epoch) the dialog on screen reaches the channel if no key is pressed: its held
        request is released (or the screen path posts it) then; None when it is there already
        or none is on screen. ``pending`` and the console show it (commands/at_keyboard.py)."""
        d = self.dialog
        if d is None or self._pending is not None:
            return None
        if d.kind == "permission" and self._hook.shown is not None:
            due = self._idle_from + self.s.idle_before_channel  # the hook's request is told "go"
        else:
            due = self._due_at()
        return round(self._wall() + max(0.0, due - self._clock()), 3)

    def close(self) -> None:
        if self._pending is not None:
            self._withdraw()
        self._hook.drop_all(self.channel)  # the CLI is gone: nobody waits for these answers

    # -- internals -----------------------------------------------------------------------------

    def _set(self, dialog: Dialog | None, now: float) -> None:
        if self._pending is not None:
            self._withdraw()  # whoever answered it, it is gone (or replaced): the request is moot
        self.dialog = dialog
        self.since_wall = self._wall() if dialog else None
        self._idle_from = now
        self._missing_since = None
        self._hook.reset()
        self.changed = True

    def _due_at(self) -> float:
        assert self.dialog is not None
        due = self._idle_from + self.s.idle_before_channel
        if self.dialog.kind == "permission":
            due += self.s.hook_grace
        if self._answered is not None and self._answered[0] == self.dialog.key:
            due = max(due, self._answered[1] + SETTLE_S)
        return due

    def _post(self, now: float) -> None:
        d = self.dialog
        assert d is not None
        try:
            self._pending = self.channel.post(
                session_id=self.s.session_id, agent_type=None, agent_id=None, tool=f"dialog:{d.kind}",
                input={"title": d.title, "text": d.text, "choices": d.labels}, summary=d.summary(),
                cwd=self.s.cwd, timeout=self.s.timeout, choices=d.labels,
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
        if pending is None:
            return None
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
        choice = dialog_answer(d, answer)
        self._audit(d, answer, choice, pending.request.id)
        return choice.keys if choice is not None else None

    def _withdraw(self) -> None:
        pending, self._pending = self._pending, None
        self.changed = True
        if pending is None:
            return
        try:
            pending.withdraw()
        except Exception:  # noqa: BLE001 - the request ends with its deadline anyway
            pass

    def _audit(self, d: Dialog, answer: Answer, choice: Choice | None, request_id: str) -> None:
        try:
            from claudeguard.channel import audit
            from claudeguard.decision import Decision, audit_row

            if answer.decided_by not in ("human", "timeout"):
                return  # the caller audits typed answers only (this also narrows decided_by for the type)
            decision = Decision(answer.decision, answer.message or "", decided_by=answer.decided_by, scope="once",
                                waited_s=round(self._clock() - self._posted_at, 3), request_id=request_id,
                                answered_by=getattr(answer, "answered_by", None))
            audit.record(audit_row(decision, session_id=self.s.session_id, tool=f"dialog:{d.kind}", summary=d.summary(),
                                   via="screen", choice=choice.label if choice else None))
        except Exception:  # noqa: BLE001 - the log never blocks an answer
            pass


def dialog_answer(dialog: Dialog, answer: Answer) -> Choice | None:
    """The option a channel answer picks on the dialog: its ``choice`` when it names one, else the
    yes option for allow and the no option for deny (None: nothing to type)."""
    return dialog.pick(answer.decision, answer.choice) or dialog.pick(answer.decision)


def _warn(message: str) -> None:
    """Never on the terminal (the TUI owns it): into the audit log as a channel event."""
    try:
        from claudeguard.channel import audit

        audit.record({"event": "dialog-error", "message": message})
    except Exception:  # noqa: BLE001 - a warning must not stop the relay
        pass
