"""Start-up of the callbacks the CLI runs on every tool call (``hook``), every start
(``mcp-serve``) and every status line refresh of a session with a person at its terminal
(``statusline``), run as ``python -E -S fast_entry.py COMMAND``.

``-S`` skips the site module (``.pth`` processing: ~8 ms of every hook call here) and ``-E`` the
``PYTHON*`` variables (so a ``PYTHONDONTWRITEBYTECODE`` in the user's environment does not make
every hook compile the package from source). A hook call inside a guarded session first tries the
session's gate server (``claudeguard.gate.server``) with nothing but ``_socket`` imported; without
a server it decides in this process. The directory holding the ``claudeguard`` package is put first
on ``sys.path`` by hand, and the interpreter's site-packages after the standard library (in an
editable install the package's directory is a checkout without the dependencies).

A guarded session's callbacks run as ``hook --session-dir DIR`` and ``mcp-serve --session-dir
DIR``: the session is the one on the command line, and every ``CLAUDEGUARD_*`` variable of the
environment is dropped before anything reads it (any settings source's ``env`` block sets the
CLI's environment, and ours with it); the runtime dir is the one the session dir is in, the
audit log the one ``session.json`` names, and the gate server is asked with the key in the
session dir's ``gate.key`` (0600).
"""

import os
import sys


def _session_dir() -> str | None:
    """``DIR`` of ``hook --session-dir DIR`` (or ``mcp-serve``); None for a hook wired by hand."""
    args = sys.argv[2:]
    return args[1] if len(args) == 2 and args[0] == "--session-dir" and args[1] else None


def _own_environment(directory: str) -> None:
    """Nothing of ours from the environment: the session's runtime dir is the one it lives in."""
    for name in [n for n in os.environ if n.startswith("CLAUDEGUARD_")]:
        del os.environ[name]
    os.environ["CLAUDEGUARD_RUNTIME_DIR"] = os.path.dirname(os.path.dirname(os.path.abspath(directory)))


def _via_gate_server(data: bytes, directory: str) -> bytes | None:
    """The hook's stdout as the session's gate server answers it; None when there is none."""
    try:
        fd = os.open(os.path.join(directory, "gate.key"), os.O_RDONLY | os.O_NOFOLLOW)
        try:
            key = os.read(fd, 128).strip()
        finally:
            os.close(fd)
        import _socket  # the C module: `socket` would import enum and more (~8 ms)

        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        dir_fd = None
        try:
            path = os.path.join(directory, "gate.sock")
            if len(os.fsencode(path)) >= 108:  # too long for a socket address: via the directory's fd
                dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
                path = f"/proc/self/fd/{dir_fd}/gate.sock"
            conn.connect(path)
            conn.sendall(len(key).to_bytes(1, "big") + key + len(data).to_bytes(8, "big") + data)
            chunks = []
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            conn.close()
            if dir_fd is not None:
                os.close(dir_fd)
    except OSError:
        return None
    answer = b"".join(chunks)
    return answer[2:] if answer.startswith(b"OK") else None


SESSION_DIR = _session_dir() if len(sys.argv) > 1 and sys.argv[1] in ("hook", "mcp-serve") else None
if SESSION_DIR is not None:
    _own_environment(SESSION_DIR)
if len(sys.argv) > 1 and sys.argv[1] == "hook":
    event = sys.stdin.buffer.read()
    answer = _via_gate_server(event, SESSION_DIR) if SESSION_DIR is not None else None
    if answer is not None:
        sys.stdout.buffer.write(answer)
        sys.exit(0)
    import io

    sys.stdin = io.TextIOWrapper(io.BytesIO(event), encoding="utf-8")  # the event, read once already


def _site_packages() -> list[str]:
    """The site-packages directories ``site`` would have added, found without it: in an editable
    install this file is in a checkout and the dependencies (platformdirs, psutil, ...) are only
    there. ``.pth`` files are not read (their cost is what ``-S`` saves)."""
    import site  # under -S importing it runs nothing; only its path functions are used

    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    venv = os.path.dirname(exe_dir)  # where site.venv() finds pyvenv.cfg and puts sys.prefix
    for cfg in (os.path.join(exe_dir, "pyvenv.cfg"), os.path.join(venv, "pyvenv.cfg")):
        if os.path.isfile(cfg):
            break
    else:
        return [site.getusersitepackages(), *site.getsitepackages()]
    dirs = site.getsitepackages([venv])
    try:
        with open(cfg, encoding="utf-8") as fh:
            system = any(line.partition("=")[0].strip().lower() == "include-system-site-packages"
                         and line.partition("=")[2].strip().lower() == "true" for line in fh)
    except OSError:
        system = False
    return dirs + [site.getusersitepackages(), *site.getsitepackages()] if system else dirs


sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Last, as `site` would put them: the standard library is found first, at no extra cost.
sys.path.extend(d for d in _site_packages() if d not in sys.path and os.path.isdir(d))

from claudeguard.errors import run_main  # noqa: E402 - after sys.path is set above

# What the CLI starts, `hook` and `mcp-serve`, runs the gate's own entry points as
# `claudeguardctl hook|mcp-serve` would, without loading the dispatcher and its package.
if sys.argv[1:2] == ["hook"] and (len(sys.argv) == 2 or SESSION_DIR is not None):
    from claudeguard.gate.hook import main as hook_main

    sys.exit(run_main("claudeguardctl", lambda: hook_main(SESSION_DIR)))
if sys.argv[1:2] == ["mcp-serve"] and (len(sys.argv) == 2 or SESSION_DIR is not None):
    from claudeguard.gate.mcp_server import serve

    sys.exit(run_main("claudeguardctl", lambda: serve(session_dir=SESSION_DIR)))
if sys.argv[1:2] == ["statusline"]:  # the status line of a session with a person at its terminal
    from claudeguard.gate.status_line import main as status_line

    sys.exit(run_main("claudeguardctl", lambda: status_line(sys.argv[2:])))
# Every other command line, as claudeguardctl runs it. This file is a program, which nothing
# imports: tests/test_layers.py gives it the commands' layer, beside bin/claudeguardctl's.
from claudeguard.commands.ctl import main  # noqa: E402 - after sys.path is set above

sys.exit(main())
