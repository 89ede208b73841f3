"""``claudeguardctl hook``: the hook command the real CLI runs (see ``claudeguard.gate.hook``)."""

from __future__ import annotations


def main(argv: list[str]) -> int:
    from claudeguard.gate.hook import main as hook_main

    return hook_main()
