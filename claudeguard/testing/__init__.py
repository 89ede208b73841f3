"""Test helpers for running the real Claude Code CLI offline, usable by claudeguard's users too.

- ``model_server``: a scripted Messages API server (``ModelServer``) that plays tool calls, text,
  stalls and slow streams per conversation, and records the tool results the CLI sends back.
- ``cli_install``: pinned real CLIs installed with npm into claudeguard's cache.
- ``offline_home``: an isolated HOME and environment that keep the CLI offline and dialog-free.
- ``runner`` / ``tui``: run the CLI to completion, or drive its terminal UI under a pty.

Names are re-exported lazily so importing one helper does not load the others.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "ModelServer": "model_server",
    "load_scenario": "model_server",
    "PINNED_VERSIONS": "cli_install",
    "cli_path": "cli_install",
    "install_cli": "cli_install",
    "prepare_home": "offline_home",
    "offline_env": "offline_home",
    "run_claude": "runner",
    "spawn_tui": "tui",
    "expect_text": "tui",
    "exit_tui": "tui",
    "close_tui": "tui",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
