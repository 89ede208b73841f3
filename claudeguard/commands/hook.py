"""``claudeguardctl hook [--session-dir DIR]``: the hook command the real CLI runs (see
``claudeguard.gate.hook``); a guarded session's names its session dir (nothing from the
environment: ``gate/fast_entry.py`` says why)."""

from __future__ import annotations

from claudeguard.errors import UsageError


def session_dir_arg(argv: list[str]) -> str | None:
    """``DIR`` of ``[--session-dir DIR]`` after the command's name; a usage error for anything else."""
    rest = argv[1:]
    if not rest:
        return None
    if len(rest) == 2 and rest[0] == "--session-dir" and rest[1]:
        return rest[1]
    raise UsageError(f"{argv[0]}: expected no arguments or --session-dir DIR, not {' '.join(rest)!r}")


def own_environment(directory: str) -> None:
    """Every ``CLAUDEGUARD_*`` variable dropped (a settings ``env`` block may have set it), and the
    runtime dir the session dir is in (``<runtime>/sessions/<id>``)."""
    import os

    for name in [n for n in os.environ if n.startswith("CLAUDEGUARD_")]:
        del os.environ[name]
    os.environ["CLAUDEGUARD_RUNTIME_DIR"] = os.path.dirname(os.path.dirname(os.path.abspath(directory)))


def main(argv: list[str]) -> int:
    directory = session_dir_arg(argv)
    if directory is not None:
        own_environment(directory)
    from claudeguard.gate.hook import main as hook_main

    return hook_main(directory)
