"""``python tests/hookless.py [--no-asker] ARGS...``: claudeguard with its hooks left out of the
CLI's settings, a stand-in for a route that takes them out that nobody has found yet (tests only:
no switch of the product does this). ``--no-asker``: the prompt tool too, so that only the CLI's
own flags decide (fail closed by construction). The plan is made in this process
(``CLAUDEGUARD_PLANNER=0`` in the caller's environment), so the stand-in applies."""

from __future__ import annotations

import sys

import claudeguard.plan.argv as plan_argv
from claudeguard.shim.main import main

_guard_settings = plan_argv.guard_settings


def _no_hooks(*args, **kwargs):  # type: ignore[no-untyped-def]
    settings = _guard_settings(*args, **kwargs)
    settings["hooks"] = {}
    return settings


if __name__ == "__main__":
    plan_argv.guard_settings = _no_hooks  # type: ignore[assignment]
    argv = sys.argv[1:]
    if argv[:1] == ["--no-asker"]:
        argv = argv[1:]
        plan_argv.print_asker = lambda args, version: None  # type: ignore[assignment]
    sys.exit(main(argv))
