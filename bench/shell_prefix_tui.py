"""Does ``CLAUDE_CODE_SHELL_PREFIX`` wrap a ``!`` command typed in the TUI, and the status line?

    python bench/shell_prefix_tui.py [--versions 2.1.197,2.1.330,2.1.332]

The CLI runs under a pty with the prefix set to a logging wrapper (as in
``bench/shell_prefix_probe.py``) and a ``statusLine`` command in ``--settings``; the person at the
keyboard types ``!echo BANG-RAN``. Prints one JSON line per version: which strings the wrapper saw.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from claudeguard.testing.cli_install import cli_path
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.offline_home import offline_env, prepare_home
from claudeguard.testing.tui import READY_TEXT, close_tui, expect_text, screen_now, spawn_tui

sys.path.insert(0, str(Path(__file__).parent))
from shell_prefix_probe import KEY, WRAPPER


def run(version: str) -> dict[str, object]:
    claude = cli_path(version)
    root = Path(tempfile.mkdtemp(prefix="prefix-tui-"))
    try:
        home, work = root / "home", root / "work"
        work.mkdir()
        prepare_home(home, cwd=work, api_key=KEY)
        log = root / "wrap.log"
        wrapper = root / "wrap-A"
        wrapper.write_text(WRAPPER.replace("@NAME@", "A").replace("@LOG@", str(log)))
        wrapper.chmod(0o755)
        settings = {"statusLine": {"type": "command", "command": f"echo STATUS-RAN >> {root / 'status.log'}; echo S"}}
        (root / "settings.json").write_text(json.dumps(settings))
        with ModelServer([]) as server:
            env = offline_env(home, server.url, KEY)
            env["CLAUDE_CODE_SHELL_PREFIX"] = str(wrapper)
            child = spawn_tui([str(claude), "--settings", str(root / "settings.json")], env, work)
            try:
                expect_text(child, READY_TEXT, timeout=40)
                child.send("!")
                time.sleep(0.5)
                child.send("echo BANG-RAN")
                time.sleep(0.3)
                child.send("\r")
                try:
                    expect_text(child, "BANG-RAN", timeout=20)
                except AssertionError:
                    pass
                time.sleep(2)
                screen = screen_now(child)
            finally:
                close_tui(child)
        rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return {"version": version, "wrapper_saw": [" ".join(r["args"])[-160:] for r in rows],
                "status_ran": (root / "status.log").read_text().count("STATUS-RAN") if (root / "status.log").exists()
                else 0, "screen_tail": screen[-300:]}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--versions", default="2.1.197,2.1.330,2.1.332")
    for version in parser.parse_args().versions.split(","):
        print(json.dumps(run(version)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
