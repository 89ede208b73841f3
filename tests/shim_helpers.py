"""Helpers for running claudeguard itself in tests (not fixtures: plain functions)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GUARD = [sys.executable, "-m", "claudeguard"]
CTL = [sys.executable, "-m", "claudeguard.commands.ctl"]


def guarded_env(env: dict, real_claude: Path, **extra: str) -> dict:
    """The offline env plus the real CLI for claudeguard to find, and a short approval timeout."""
    out = dict(env)
    out["CLAUDEGUARD_CLAUDE"] = str(real_claude)
    out.update(extra)
    return out
