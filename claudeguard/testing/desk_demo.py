"""A desk with something to show, for its screenshots (``docs/desk-*.png``):
``python -m claudeguard.testing.desk_demo --screenshots docs``.

In a temp runtime dir and log dir: requests that really wait in the channel (a compound Bash
command of a background subagent, an Edit with its diff against a file on disk, a main-agent
Write), a session the real watchdog finds stalled and a healthy one, a few audit lines. Then
Debian's Chromium (``testing.desk_kit``) logs in and photographs the waiting requests, one diff
and the sessions.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from claudeguard.channel.audit import record
from claudeguard.desk import start_desk
from claudeguard.desk.local import LocalSource
from claudeguard.testing.desk_kit import StalledSession, browser_context, post_request
from claudeguard.testing.wait import wait_until

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.testing.desk_kit import Waiter

DEMO_FILE = '''"""Parse the release notes."""

import re


def parse(text):
    items = []
    for line in text.splitlines():
        if line.startswith("- "):
            items.append(line[2:])
    return items
'''


def populate(work: str) -> tuple[list[Waiter], list[StalledSession]]:
    """Requests and sessions in the current runtime dir (the caller set the environment)."""
    project = os.path.join(work, "project")
    os.makedirs(project, exist_ok=True)
    path = os.path.join(project, "notes.py")
    with open(path, "w") as fh:
        fh.write(DEMO_FILE)
    sessions = [StalledSession("7f3c2a91-demo-stalled", stall_after=1.0, prompt="update the changelog for 2.4",
                               cwd=project),
                StalledSession("c04d5e17-demo-release", stall_after=3600, prompt="tag the release and push it",
                               cwd=project),
                StalledSession("1b9e40c2-demo-main", stall_after=3600, prompt="make the notes parser accept bullets",
                               cwd=project)]
    waiters = [
        post_request("Write", {"file_path": os.path.join(project, "CHANGES.md"),
                               "content": "# 2.4\n\n- faster parse\n"},
                     session_id="1b9e40c2-demo-main", cwd=project, rule="Write(./CHANGES.md)",
                     rule_source="~/.config/claudeguard/config.toml:9"),
        post_request("Edit", {"file_path": path, "old_string": "    items = []\n    for line in text.splitlines():\n"
                                                              "        if line.startswith(\"- \"):\n",
                              "new_string": "    items = []\n    for line in text.splitlines():\n"
                                            "        line = line.strip()\n        if re.match(r\"[-*] \", line):\n"},
                     session_id="1b9e40c2-demo-main", agent_type="general-purpose", agent_id="a41f", cwd=project),
        post_request("Bash", {"command": "npm test && git push origin HEAD:release --force"},
                     session_id="c04d5e17-demo-release", agent_type="Explore", agent_id="a7c2", cwd=project,
                     rule="Bash(git push *)", rule_source="~/.config/claudeguard/config.toml:7",
                     extra={"cli_short_id": "k3v9"}),
    ]
    for n, (summary, decision, by) in enumerate([("Bash: npm test", "allow", "human"),
                                                 ("Bash: git status", "allow", "rule"),
                                                 ("Bash: rm -rf build", "deny", "rule")]):
        record({"session_id": "1b9e40c2-demo-main", "agent_type": None, "tool": "Bash", "summary": summary,
                "decision": decision, "decided_by": by, "scope": "once", "waited_s": 3.2 if by == "human" else 0.0,
                "request_id": f"demo{n}", "rules": [f"Bash({summary[6:]})"], "via": "hook"})
    return waiters, sessions


def screenshots(out_dir: str) -> list[str]:
    work = tempfile.mkdtemp(prefix="claudeguard-desk-demo-")
    os.environ["CLAUDEGUARD_RUNTIME_DIR"] = os.path.join(work, "run")
    os.environ["CLAUDEGUARD_LOG_DIR"] = os.path.join(work, "log")
    waiters, sessions = populate(work)
    desk = start_desk(LocalSource(config_file=os.path.join(work, "config.toml"), machine="build-01"))
    made = []
    try:
        wait_until(lambda: any(s.monitor.stalled for s in sessions), 10, "the demo session to stall")
        with browser_context((1200, 1000)) as context:
            page: Any = context.new_page()
            page.goto(desk.login_url())
            page.wait_for_selector("[data-request-id]")
            wait_until(lambda: page.locator("[data-request-id]").count() == len(waiters), 5, "all requests")
            time.sleep(0.3)  # the countdowns' first tick
            for name, action in (("desk-requests.png", None), ("desk-diff.png", "diff"), ("desk-sessions.png", "ps")):
                target = os.path.join(out_dir, name)
                if action == "diff":
                    page.locator("[data-request-id]", has=page.locator("pre.diff")).first.screenshot(path=target)
                elif action == "ps":
                    page.click("[data-tab=sessions]")
                    page.wait_for_selector("tr[data-state=stalled]")
                    box = page.locator("#sessions-table").bounding_box()
                    page.screenshot(path=target, clip={"x": 0, "y": 0, "width": 1200,
                                                       "height": box["y"] + box["height"] + 24})
                else:
                    page.screenshot(path=target, full_page=False)
                made.append(target)
    finally:
        desk.stop()
        for w in waiters:
            w.withdraw()
        for s in sessions:
            s.stop()

        shutil.rmtree(work, ignore_errors=True)
    return made


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m claudeguard.testing.desk_demo")
    parser.add_argument("--screenshots", metavar="DIR", required=True, help="where the PNG files go")
    args = parser.parse_args(argv)
    for path in screenshots(args.screenshots):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
