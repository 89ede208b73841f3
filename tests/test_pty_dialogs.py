"""Dialog recognition (screens as the pinned CLIs draw them) and the router's timing and keys,
with a fake channel and a fake clock."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from claudeguard.shim.dialogs.parse import at_idle_prompt, find_dialog
from claudeguard.shim.dialogs.router import DialogRouter, RouteSettings
from claudeguard.plan.cli_version import package_version
from claudeguard.shim.dialogs.tables import DOWN, ENTER, ESC, SHIFT_TAB, banner_version, patterns_for

RULE = "─" * 100
DASH = "╌" * 100


def screen(text: str, rows: int = 30) -> list[str]:
    lines = text.strip("\n").split("\n")
    return lines + [""] * (rows - len(lines))


# --- screens copied from the pinned CLIs (paths replaced) -----------------------------------------

PERMISSION_197 = screen(f"""
 ▐▛███▜▌   Claude Code v2.1.197
▝▜█████▛▘  Opus 4.8 (1M context) · API Usage Billing
  ▘▘ ▝▝    /home/user/project

❯ run it

● Bash(echo hello > out.txt)
  ⎿  Waiting…

{RULE}
 Bash command

   echo hello > out.txt
   write out.txt

 Do you want to proceed?
 ❯ 1. Yes
   2. Yes, and always allow access to project/ from this project
   3. No

 Esc to cancel · Tab to amend · ctrl+e to explain
""")

PERMISSION_330 = screen(f"""
 ▐▛███▛█   Claude Code v2.1.330
▝▜██████▀  Opus 5.5 · API Usage Billing

❯ run it

  Writing out.txt
  ⎿  $ echo hello > out.txt

{RULE}
 Bash command
 Tip: auto mode handles these prompts for you — choose "switch to auto mode" below
 write out.txt
{DASH}
 echo hello > out.txt
{DASH}
 Do you want to proceed?
 ❯ 1. Yes
   2. Yes, and always allow access to /home/user/project from this project
   3. Yes, and switch to auto mode · auto mode handles these prompts for you
   4. No

 Esc to cancel · Tab to amend
""")

# 2.1.330 in auto mode behind a gateway: the approval it asks for after "stay in auto mode".
RISKY_330 = screen(f"""
{RULE}
 Bash command
 write out.txt
{DASH}
 curl -s http://127.0.0.1:9/x | sh
{DASH}
 Auto mode can't check actions in this session, so this one needs your approval
 Do you want to proceed?
 ❯ No
   Yes

 Esc to cancel · Tab to amend
""")

AUTO_MODE_330 = screen(f"""
❯ run it
  ⎿  $ curl -s http://127.0.0.1:9/x | sh
{RULE}
  Auto mode can't check actions in this session

  Auto mode's safety check runs on the server. Your requests go through 127.0.0.1:36103, and the check isn't getting
  through.

  You can stay in auto mode and approve each action that needs the check yourself.

  Enter to stay in auto mode · shift+Tab to leave for accept edits mode and stop · Esc to cancel
""")

TRUST_197 = screen(f"""
{RULE}
 Accessing workspace:

 /home/user/new-folder

 Quick safety check: Is this a project you created or one you trust? (Like your own code, a well-known open source
 project, or work from your team). If not, take a moment to review what's in this folder first.

 Claude Code'll be able to read, edit, and execute files here.

 Security guide

 ❯ 1. Yes, I trust this folder
   2. No, exit

 Enter to confirm · Esc to cancel
""")

TRUST_330 = [line.replace("❯ 1. Yes, I trust this folder", "❯ No, exit").replace("  2. No, exit", "  Yes, I "
                                                                                                  "trust this folder")
             for line in TRUST_197]

BYPASS_197 = screen(f"""
{RULE}
  WARNING: Claude Code running in Bypass Permissions mode

  In Bypass Permissions mode, Claude Code will not ask for your approval before running potentially dangerous
  commands.
  This mode should only be used in a sandboxed container/VM that has restricted internet access and can easily be
  restored if damaged.

  By proceeding, you accept all responsibility for actions taken while running in Bypass Permissions mode.

  https://code.claude.com/docs/en/security

  ❯ 1. No, exit
    2. Yes, I accept

  Enter to confirm · Esc to cancel
""")

BYPASS_330 = [line.replace("❯ 1. No, exit", "❯ No, exit").replace("  2. Yes, I accept", "  Yes, I accept")
              for line in BYPASS_197]

API_KEY_330 = screen(f"""
{RULE}
  Detected a custom API key in your environment

  ANTHROPIC_API_KEY: sk-ant-...key-0123456789abcdef

  Do you want to use this API key?
    Yes
  ❯ No (recommended)

  Enter to confirm · Esc to cancel
""")

MCP_197 = screen(f"""
{RULE}
  New MCP server found in this project: demo

  MCP servers may execute code or access system resources. All tool calls require approval. Learn more in the MCP
  documentation.

  ❯ 1. Use this MCP server
    2. Use this and all future MCP servers in this project
    3. Continue without using this MCP server

  Enter to confirm · Esc to cancel
""")

MCP_MANY_197 = screen(f"""
{RULE}
  2 new MCP servers found in this project

  Select any you wish to enable.

  MCP servers may execute code or access system resources. All tool calls require approval. Learn more in the MCP
  documentation.

  ❯ [✔] one
    [✔] two

 Space to select · Enter to confirm · Esc to reject all
""")

MCP_MANY_330 = screen(f"""
{RULE}
  2 new MCP servers found in this project

  Select any you wish to enable.

  MCP servers may execute code or access system resources. All tool calls require approval. Learn more in the MCP
  documentation.

  ❯ [ ] one
    [✔] two

       Enable selected

 Space to select · Esc to reject all
""")

PLAN_330 = screen(f"""
❯ plan it
{RULE}
   Exit plan mode?

    Claude wants to exit plan mode

    ❯ 1. Yes, and switch to default (ask each time) for this session
      2. No
""")

FETCH_330 = screen(f"""
● Fetch(http://127.0.0.1:9/page)
{RULE}
 Fetch

 Claude wants to fetch content from 127.0.0.1
{DASH}
 url: http://127.0.0.1:9/page
 prompt: summarize
{DASH}
 Do you want to allow Claude to fetch this content?
 ❯ 1. Yes
   2. Yes, and don't ask again for 127.0.0.1
   3. No, and tell Claude what to do differently (esc)
""")

IDLE_330 = screen(f"""
❯ run it
● made it
✻ Baked for 6s · done 8:14 AM

{RULE}
❯
{RULE}
  ⏵⏵ auto mode on (shift+tab to cycle)
""")

BUSY_197 = screen(f"""
❯ slow it
✽ Pondering… (1s · ↓ 14 tokens)
{RULE}
❯
{RULE}
  esc to interrupt · ← for agents
""")


def keys_of(dialog) -> dict[str, tuple[str, str]]:
    return {c.label: (c.keys, c.role) for c in dialog.choices}


def test_permission_dialogs_numbered():
    d = find_dialog(PERMISSION_197, patterns_for("2.1.197"))
    assert d is not None and d.kind == "permission" and d.title == "Bash command"
    assert d.labels == ["Yes", "Yes, and always allow access to project/ from this project", "No"]
    assert d.pick("allow").keys == "1" and d.pick("deny").keys == "3"
    assert d.summary() == "Bash command: echo hello > out.txt · write out.txt"
    assert "Do you want to proceed?" in d.text and "echo hello > out.txt" in d.text
    d = find_dialog(PERMISSION_330, patterns_for("2.1.330"))
    assert d is not None and d.kind == "permission" and len(d.choices) == 4
    assert d.pick("allow").keys == "1" and d.pick("deny").keys == "4" and d.pick("deny").label == "No"
    assert "echo hello > out.txt" in d.summary() and "Tip:" not in d.summary()
    assert DASH not in d.text


def test_plain_menus_move_from_the_highlight():
    d = find_dialog(RISKY_330, patterns_for("2.1.330"))
    assert d is not None and d.kind == "permission"
    assert keys_of(d) == {"No": (ENTER, "no"), "Yes": (DOWN + ENTER, "yes")}
    d = find_dialog(TRUST_330, patterns_for("2.1.330"))
    assert d is not None and d.kind == "trust" and d.title == "Trust this folder?"
    assert keys_of(d) == {"No, exit": (ENTER, "no"), "Yes, I trust this folder": (DOWN + ENTER, "yes")}
    assert "/home/user/new-folder" in d.summary()
    d = find_dialog(API_KEY_330, patterns_for("2.1.330"))
    assert d is not None and d.kind == "api-key"
    assert keys_of(d) == {"Yes": ("\x1b[A" + ENTER, "yes"), "No (recommended)": (ENTER, "no")}


def test_other_dialogs():
    d = find_dialog(TRUST_197, patterns_for("2.1.197"))
    assert d is not None and keys_of(d) == {"Yes, I trust this folder": ("1", "yes"), "No, exit": ("2", "no")}
    d = find_dialog(MCP_197, patterns_for("2.1.197"))
    assert d is not None and d.kind == "mcp-server"
    assert d.pick("allow").label == "Use this MCP server" and d.pick("deny").keys == "3"
    d = find_dialog(PLAN_330, patterns_for("2.1.330"))
    assert d is not None and d.kind == "plan" and d.pick("allow").keys == "1" and d.pick("deny").keys == "2"
    d = find_dialog(FETCH_330, patterns_for("2.1.330"))  # drawn without a footer
    assert d is not None and d.kind == "permission" and d.title == "Fetch"
    assert d.pick("deny").label.startswith("No, and tell Claude")


def test_bypass_permissions_dialog_in_both_menu_styles():
    d = find_dialog(BYPASS_197, patterns_for("2.1.197"))
    assert d is not None and d.kind == "bypass" and d.title == "Accept Bypass Permissions mode?"
    assert keys_of(d) == {"No, exit": ("1", "no"), "Yes, I accept": ("2", "yes")}
    assert "Bypass Permissions mode" in d.summary()
    d = find_dialog(BYPASS_330, patterns_for("2.1.330"))
    assert d is not None and d.kind == "bypass"
    assert keys_of(d) == {"No, exit": (ENTER, "no"), "Yes, I accept": (DOWN + ENTER, "yes")}


def test_several_new_mcp_servers_are_a_checklist():
    d = find_dialog(MCP_MANY_197, patterns_for("2.1.197"))
    assert d is not None and d.kind == "mcp-servers" and d.title == "Use the new MCP servers?"
    assert keys_of(d) == {"Enable selected: one, two": (ENTER, "yes"), "Reject all": (ESC, "no")}
    d = find_dialog(MCP_MANY_330, patterns_for("2.1.330"))
    assert d is not None and d.kind == "mcp-servers"
    # Enter on an item toggles it there: the confirm line is two rows down from the highlight.
    assert keys_of(d) == {"Enable selected: two": (DOWN * 2 + ENTER, "yes"), "Reject all": (ESC, "no")}
    on_confirm = [ln.replace("❯ [ ] one", "  [ ] one").replace("     Enable selected", "   ❯ Enable selected")
                  for ln in MCP_MANY_330]
    assert keys_of(find_dialog(on_confirm, patterns_for("2.1.330")))["Enable selected: two"] == (ENTER, "yes")
    without_footer = MCP_MANY_197[:MCP_MANY_197.index("    [✔] two") + 1]
    assert find_dialog(without_footer, patterns_for("2.1.197")) is None  # still being drawn


def test_auto_mode_dialog_has_fixed_keys_and_only_in_its_version_range():
    d = find_dialog(AUTO_MODE_330, patterns_for("2.1.330"))
    assert d is not None and d.kind == "auto-mode"
    assert keys_of(d) == {"Stay in auto mode": (ENTER, "yes"),
                          "Leave for accept edits mode and stop": (SHIFT_TAB, "other"),
                          "Cancel": (ESC, "no")}
    assert find_dialog(AUTO_MODE_330, patterns_for("2.1.197")) is None
    assert patterns_for(None) == patterns_for("9.9.9") == patterns_for("2.1.330")


def test_pick_by_label_or_number():
    d = find_dialog(PERMISSION_197, patterns_for("2.1.197"))
    assert d.pick("allow", "Yes, and always allow access to project/ from this project").keys == "2"
    assert d.pick("deny", "2").keys == "2"
    assert d.pick("allow", "no").keys == "3"  # case folded
    assert d.pick("allow", "Maybe") is None


def test_no_guessing():
    # No dialog: the transcript, an idle prompt, a half-drawn dialog, text that looks like one.
    assert find_dialog(IDLE_330, patterns_for("2.1.330")) is None
    half = PERMISSION_197[:PERMISSION_197.index(" ❯ 1. Yes") + 1]
    assert find_dialog(screen("\n".join(half)), patterns_for("2.1.197")) is None  # one option only
    trust_cut = TRUST_197[:TRUST_197.index("   2. No, exit") + 1]
    assert find_dialog(screen("\n".join(trust_cut)), patterns_for("2.1.197")) is None  # footer missing
    model_text = screen(f"""
● Here is a question for you:
 Do you want to proceed?
 1. Yes
 2. No

{RULE}
❯
{RULE}
  ? for shortcuts
""")
    assert find_dialog(model_text, patterns_for("2.1.197")) is None
    unknown = screen(f"""
{RULE}
 Something new the CLI asks
 ❯ 1. Sure
   2. Never
 Enter to confirm · Esc to cancel
""")
    assert find_dialog(unknown, patterns_for("2.1.330")) is None
    # A menu without the yes option the pattern needs is not that dialog.
    assert find_dialog([ln.replace("1. Yes", "1. Perhaps") for ln in PERMISSION_197], patterns_for("2.1.197")) is None


def test_same_dialog_keeps_its_key_when_the_highlight_moves():
    moved = [ln.replace(" ❯ 1. Yes", "   1. Yes").replace("   3. No", " ❯ 3. No") for ln in PERMISSION_197]
    a = find_dialog(PERMISSION_197, patterns_for("2.1.197"))
    b = find_dialog(moved, patterns_for("2.1.197"))
    assert a.key == b.key
    other = [ln.replace("echo hello > out.txt", "rm -r build") for ln in PERMISSION_197]
    assert find_dialog(other, patterns_for("2.1.197")).key != a.key


def test_idle_prompt_and_versions(tmp_path):
    assert at_idle_prompt(IDLE_330)
    assert not at_idle_prompt(BUSY_197)
    assert not at_idle_prompt(PERMISSION_197)
    assert banner_version(PERMISSION_197) == "2.1.197" and banner_version(TRUST_197) is None
    pkg = tmp_path / "node_modules" / "@anthropic-ai" / "claude-code"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": "@anthropic-ai/claude-code", "version": "2.1.250"}))
    (pkg / "bin" / "claude.exe").write_text("")
    bin_dir = tmp_path / "node_modules" / ".bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(pkg / "bin" / "claude.exe")
    assert package_version(str(bin_dir / "claude")) == "2.1.250"
    assert package_version(str(tmp_path / "nowhere")) is None


# --- the router -------------------------------------------------------------------------------


@dataclass
class FakeRequest:
    id: str
    deadline: float
    kind: str = "dialog"
    extra: dict = field(default_factory=dict)
    created: float = 0.0
    held: bool = False
    input: dict = field(default_factory=dict)


@dataclass
class FakeAnswer:
    decision: str
    choice: str | None = None
    decided_by: str = "human"
    scope: str = "once"
    message: str | None = None


class FakePending:
    def __init__(self, channel: "FakeChannel", request: FakeRequest) -> None:
        self.channel, self.request = channel, request
        self.answer: FakeAnswer | None = None
        self.withdrawn = False

    def fileno(self) -> int:
        return -1

    def poll(self):  # type: ignore[no-untyped-def]
        return self.answer

    def wait(self, on_timeout: str = "deny"):  # type: ignore[no-untyped-def]
        return FakeAnswer(on_timeout, decided_by="timeout")

    def check(self):  # type: ignore[no-untyped-def]
        return None  # the channel is in place

    def withdraw(self):  # type: ignore[no-untyped-def]
        self.withdrawn = True
        return None


class FakeChannel:
    def __init__(self, clock) -> None:  # type: ignore[no-untyped-def]
        self.clock = clock
        self.posted: list[tuple[dict, FakePending]] = []
        self.hook_requests: list[FakeRequest] = []
        self.told: list[tuple[str, str]] = []  # (request id, word) the router told the hook's waiters

    def post(self, **kw):  # type: ignore[no-untyped-def]
        pending = FakePending(self, FakeRequest(f"r{len(self.posted)}", self.clock.wall + kw["timeout"]))
        self.posted.append((kw, pending))
        return pending

    def list_pending(self, session_id=None, held=False):  # type: ignore[no-untyped-def]
        return [r for r in self.hook_requests if r.held == held]

    def tell_waiter(self, request_id: str, word: str) -> None:
        self.told.append((request_id, word))
        for r in self.hook_requests:
            if r.id == request_id and word == "go":
                r.held = False  # the hook publishes it
        if word == "drop":
            self.hook_requests = [r for r in self.hook_requests if r.id != request_id]  # the hook withdraws it


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    @property
    def wall(self) -> float:
        return self.t + 1_700_000_000

    def advance(self, dt: float) -> None:
        self.t += dt


@pytest.fixture
def rig(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))  # typed answers are audited
    clock = Clock()
    channel = FakeChannel(clock)

    def make(idle: float = 30, timeout: float = 600, on_timeout: str = "deny") -> DialogRouter:
        return DialogRouter(RouteSettings(session_id="s1", cwd="/w", idle_before_channel=idle, timeout=timeout,
                                          on_timeout=on_timeout, hook_grace=3),
                            channel=channel, clock=lambda: clock.t, wall=lambda: clock.wall)

    return clock, channel, make


TRUST = find_dialog(TRUST_197, patterns_for("2.1.197"))
PERMISSION = find_dialog(PERMISSION_197, patterns_for("2.1.197"))


def test_a_dialog_waits_idle_then_is_posted_and_the_answer_is_typed(rig, tmp_path):
    clock, channel, make = rig
    router = make(idle=30)
    router.observe(TRUST)
    assert router.step() is None and channel.posted == []
    assert router.next_wakeup() == pytest.approx(clock.t + 30)
    clock.advance(29.9)
    router.step()
    assert channel.posted == []
    clock.advance(0.2)
    router.step()
    [(kw, pending)] = channel.posted
    assert "kind" not in kw and kw["tool"] == "dialog:trust"  # a dialog by its choices
    assert kw["choices"] == ["Yes, I trust this folder", "No, exit"]
    assert kw["input"]["title"] == "Trust this folder?" and "/home/user/new-folder" in kw["input"]["text"]
    assert kw["extra"] == {"via": "screen", "dialog": "trust"} and kw["session_id"] == "s1"
    assert router.state()["request"] == "r0" and router.state()["dialog"] == "Trust this folder?"
    pending.answer = FakeAnswer("allow")
    assert router.step() == "1"
    assert router.request_id is None
    [line] = (tmp_path / "log" / "audit.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert (entry["tool"], entry["decision"], entry["decided_by"], entry["via"], entry["choice"]) == (
        "dialog:trust", "allow", "human", "screen", "Yes, I trust this folder")
    router.observe(TRUST)  # still drawn for a moment: not asked again
    clock.advance(1)
    assert router.step() is None and len(channel.posted) == 1


@pytest.mark.parametrize("decision, choice, keys",
                         [("deny", None, "2"), ("allow", "No, exit", "2"), ("allow", "1", "1")])
def test_answers_map_to_keys(rig, decision, choice, keys):
    clock, channel, make = rig
    router = make(idle=0)
    router.observe(TRUST)
    router.step()
    channel.posted[0][1].answer = FakeAnswer(decision, choice)
    assert router.step() == keys


def test_timeout_takes_on_timeout(rig):
    clock, channel, make = rig
    router = make(idle=0, timeout=10, on_timeout="deny")
    router.observe(TRUST)
    router.step()
    assert router.next_wakeup() == pytest.approx(clock.t + 1)  # wakes each second to check its channel
    clock.advance(9.5)
    assert router.step() is None and router.next_wakeup() == pytest.approx(clock.t + 0.5)
    clock.advance(0.5)
    assert router.step() == "2"


def test_keyboard_wins_and_restarts_the_idle_time(rig):
    clock, channel, make = rig
    router = make(idle=5)
    router.observe(TRUST)
    clock.advance(4)
    router.keyboard()  # e.g. an arrow key: the person is there
    clock.advance(4)
    router.step()
    assert channel.posted == []
    clock.advance(1)
    router.step()
    [(_, pending)] = channel.posted
    router.keyboard()
    assert pending.withdrawn and router.request_id is None and router.state()["keyboard_at"] is not None


def test_dialog_gone_withdraws_but_a_flicker_does_not(rig):
    clock, channel, make = rig
    router = make(idle=0)
    router.observe(TRUST)
    router.step()
    [(_, pending)] = channel.posted
    router.observe(None)  # one redraw without it
    clock.advance(0.1)
    router.observe(TRUST)
    assert not pending.withdrawn
    router.observe(None)
    clock.advance(0.5)
    router.step()
    assert pending.withdrawn and router.dialog is None and router.state()["dialog"] is None


def test_another_dialog_replaces_the_request(rig):
    clock, channel, make = rig
    router = make(idle=0)
    router.observe(TRUST)
    router.step()
    router.observe(find_dialog(MCP_197, patterns_for("2.1.197")))
    assert channel.posted[0][1].withdrawn
    router.step()
    assert [kw["tool"] for kw, _ in channel.posted] == ["dialog:trust", "dialog:mcp-server"]


def test_permission_dialog_left_to_the_hook_when_it_routed_it(rig):
    clock, channel, make = rig
    router = make(idle=0)
    channel.hook_requests.append(FakeRequest("h1", clock.wall + 600, kind="permission", extra={"via": "dialog"}))
    router.observe(PERMISSION)
    for _ in range(20):
        clock.advance(1)
        router.step()
    assert channel.posted == []  # the hook's request is the one; never a second
    channel.hook_requests.clear()  # answered or withdrawn, and the dialog is still there
    clock.advance(1)
    router.step()
    assert channel.posted == []  # grace: the CLI may be closing the dialog right now
    clock.advance(3)
    router.step()
    assert [kw["tool"] for kw, _ in channel.posted] == ["dialog:permission"]


def test_permission_dialog_without_a_hook_is_posted_after_the_grace(rig):
    clock, channel, make = rig
    router = make(idle=1)
    router.observe(PERMISSION)
    clock.advance(3.9)
    router.step()
    assert channel.posted == []
    clock.advance(0.2)
    router.step()
    [(kw, pending)] = channel.posted
    assert kw["tool"] == "dialog:permission" and kw["summary"].startswith("Bash command: echo hello")
    pending.answer = FakeAnswer("deny")
    assert router.step() == "3"


def _held(channel: FakeChannel, clock: Clock, rid: str = "h1") -> FakeRequest:
    request = FakeRequest(rid, clock.wall + 600, kind="permission", extra={"via": "dialog"},
                          created=clock.wall, held=True)
    channel.hook_requests.append(request)
    return request


def test_the_hooks_held_request_is_released_after_the_keyboards_head_start(rig):
    clock, channel, make = rig
    router = make(idle=5)
    _held(channel, clock)
    router.observe(PERMISSION)
    router.step()
    assert channel.told == [] and router.next_wakeup() == pytest.approx(clock.t + 0.25)
    clock.advance(4)
    router.keyboard()  # an arrow key: the head start counts again from here
    clock.advance(4.5)
    router.step()
    assert channel.told == []
    clock.advance(0.6)
    router.step()
    assert channel.told == [("h1", "go")] and channel.posted == []
    clock.advance(10)
    router.step()
    assert channel.told == [("h1", "go")] and channel.posted == []  # published: one request, the hook's


def test_the_hooks_request_is_dropped_when_a_key_answered_its_dialog_and_kept_when_none_did(rig):
    clock, channel, make = rig
    router = make(idle=0)
    _held(channel, clock)
    router.observe(PERMISSION)
    router.step()
    assert channel.told == [("h1", "go")]
    router.keyboard(b"\r")
    router.observe(None)  # answered at the keyboard
    clock.advance(0.5)
    router.step()
    assert channel.told == [("h1", "go"), ("h1", "drop")] and channel.posted == []


def test_a_dialog_drawn_over_without_a_key_keeps_its_request(rig):
    # A program writing to the CLI's terminal can make the screen we read lose the dialog: no key
    # answered it, and the CLI stops the hook of a dialog it closes, so the request stays open.
    clock, channel, make = rig
    router = make(idle=5)
    _held(channel, clock)
    router.observe(PERMISSION)
    router.step()
    router.keyboard(b"\x1b[B")  # an arrow answers nothing
    router.observe(None)
    clock.advance(0.5)
    router.step()
    assert channel.told == []
    router.observe(PERMISSION)  # the CLI's next redraw
    clock.advance(5)
    router.step()
    assert channel.told == [("h1", "go")]


def test_a_hook_request_after_the_screen_path_posted_is_dropped(rig):
    clock, channel, make = rig
    router = make(idle=0)
    router.observe(PERMISSION)
    clock.advance(3.1)
    router.step()
    assert [kw["extra"]["via"] for kw, _ in channel.posted] == ["screen"]
    _held(channel, clock)  # a hook slower than the grace
    clock.advance(0.3)
    router.step()
    assert channel.told == [("h1", "drop")] and len(channel.posted) == 1


def test_a_held_request_no_dialog_shows_goes_to_the_channel_and_a_key_before_drops_one(rig):
    # 2.1.330 draws a background agent's dialog only once its PermissionRequest hook returned:
    # while no dialog is on screen, a held request is released after NO_DIALOG_GO_S, and stays.
    clock, channel, make = rig
    router = make(idle=30)
    _held(channel, clock, "h1")
    router.step()
    clock.advance(1.1)
    router.step()
    assert channel.told == []
    clock.advance(1.1)
    router.step()
    assert channel.told == [("h1", "go")]
    clock.advance(60)
    router.keyboard(b"x")  # typing a prompt meanwhile: the request in the channel stays
    clock.advance(1.1)
    router.step()
    assert channel.told == [("h1", "go")]
    # a key pressed after a held request was posted, with no dialog read: the keyboard answered one
    # that came and went between two screen reads
    _held(channel, clock, "h2")
    clock.advance(0.5)
    router.keyboard(b"\r")
    clock.advance(1.1)
    router.step()
    assert channel.told[-1] == ("h2", "drop")


def _request(channel: FakeChannel, clock: Clock, rid: str, command: str) -> FakeRequest:
    request = _held(channel, clock, rid)
    request.input = {"command": command}
    return request


def test_the_dialog_on_screen_is_matched_to_the_call_it_shows_and_the_queued_one_waits(rig, tmp_path):
    clock, channel, make = rig
    router = DialogRouter(RouteSettings(session_id="s1", cwd="/w", idle_before_channel=5, hook_grace=3,
                                        session_dir=str(tmp_path)),
                          channel=channel, clock=lambda: clock.t, wall=lambda: clock.wall)
    _request(channel, clock, "h1", "make build")
    clock.advance(0.01)
    _request(channel, clock, "h2", "echo hello > out.txt")  # the call PERMISSION_197 shows
    router.observe(PERMISSION)
    clock.advance(5.1)
    router.step()
    assert channel.told == [("h2", "go")]  # only the one on screen; h1 waits its turn
    router.keyboard(b"1")
    router.observe(None)
    clock.advance(0.5)
    router.step()
    assert channel.told == [("h2", "go"), ("h2", "drop")]
    said = json.loads((tmp_path / "keyboard" / "h2.json").read_text())
    assert (said["reason"], said["decision"], said["choice"]) == ("keyboard", "allow", "Yes")
    assert not (tmp_path / "keyboard" / "h1.json").exists()


@pytest.mark.parametrize("keys, reason, decision, choice", [
    (b"\r", "keyboard", "allow", "Yes"),
    (b"3", "keyboard", "deny", "No"),
    (b"\x1b[B\r", "keyboard", "allow", "Yes, and always allow access to project/ from this project"),
    (b"\x1b[B\x1b[B\x1b[B\r", "keyboard", "deny", "No"),
    (b"\x1b", "keyboard", "deny", "No"),
    (b"\x03", "keyboard", "deny", "No"),
])
def test_why_a_held_request_was_dropped_is_said_with_what_the_keyboard_chose(rig, tmp_path, keys, reason, decision,
                                                                              choice):
    clock, channel, make = rig
    router = DialogRouter(RouteSettings(session_id="s1", cwd="/w", idle_before_channel=30, hook_grace=3,
                                        session_dir=str(tmp_path), tty="/dev/pts/9"),
                          channel=channel, clock=lambda: clock.t, wall=lambda: clock.wall)
    _request(channel, clock, "h1", "echo hello > out.txt")
    router.observe(PERMISSION)
    router.step()
    clock.advance(2)
    router.keyboard(keys)
    router.observe(None)
    clock.advance(0.5)
    router.step()
    assert channel.told == [("h1", "drop")]
    said = json.loads((tmp_path / "keyboard" / "h1.json").read_text())
    assert (said["reason"], said.get("decision"), said.get("choice"), said["tty"]) == (reason, decision, choice,
                                                                                       "/dev/pts/9")


def test_a_request_its_waiter_withdrew_first_still_gets_why_once_its_dialog_is_gone(rig, tmp_path):
    # The CLI stops a PermissionRequest hook the moment the keyboard answers: its waiter may
    # withdraw before the router sees the dialog leave; the waiter still waits for the word.
    clock, channel, make = rig
    router = DialogRouter(RouteSettings(session_id="s1", cwd="/w", idle_before_channel=30, hook_grace=3,
                                        session_dir=str(tmp_path)),
                          channel=channel, clock=lambda: clock.t, wall=lambda: clock.wall)
    _request(channel, clock, "h1", "echo hello > out.txt")
    router.observe(PERMISSION)
    router.step()
    router.keyboard(b"\r")
    channel.hook_requests.clear()  # withdrawn by its waiter
    clock.advance(0.3)
    router.step()
    assert not (tmp_path / "keyboard").exists()  # the dialog is still drawn: not yet
    router.observe(None)
    clock.advance(0.5)
    router.step()
    said = json.loads((tmp_path / "keyboard" / "h1.json").read_text())
    assert (said["reason"], said["decision"]) == ("keyboard", "allow") and channel.told == []


def test_the_hooks_requests_are_dropped_when_the_session_ends(rig):
    clock, channel, make = rig
    router = make(idle=30)
    _held(channel, clock)
    router.observe(PERMISSION)
    router.step()
    router.close()
    assert channel.told == [("h1", "drop")]
