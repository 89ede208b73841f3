"""Start-up of the callbacks the CLI runs on every tool call (``hook``) and every start
(``mcp-serve``), run as ``python -E -S fast_entry.py COMMAND``.

``-S`` skips the site module (``.pth`` processing: ~8 ms of every hook call here) and ``-E`` the
``PYTHON*`` variables (so a ``PYTHONDONTWRITEBYTECODE`` in the user's environment does not make
every hook compile the package from source). A hook call inside a guarded session first tries the
session's gate server (``claudeguard.gate.server``) with nothing but ``_socket`` imported; without
a server it decides in this process. The directory holding the ``claudeguard`` package is put first
on ``sys.path`` by hand; it is also where the package's dependencies are installed.
"""

import os
import sys


def _via_gate_server(data: bytes) -> bytes | None:
    """The hook's stdout as the session's gate server answers it; None when there is none."""
    directory = os.environ.get("CLAUDEGUARD_SESSION_DIR")
    if not directory or os.environ.get("CLAUDEGUARD_GATE_SERVER") == "0":
        return None
    try:
        import _socket  # the C module: `socket` would import enum and more (~8 ms)

        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        dir_fd = None
        try:
            path = os.path.join(directory, "gate.sock")
            if len(os.fsencode(path)) >= 108:  # too long for a socket address: via the directory's fd
                dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
                path = f"/proc/self/fd/{dir_fd}/gate.sock"
            conn.connect(path)
            conn.sendall(len(data).to_bytes(8, "big") + data)
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


if len(sys.argv) > 1 and sys.argv[1] == "hook":
    event = sys.stdin.buffer.read()
    answer = _via_gate_server(event)
    if answer is not None:
        sys.stdout.buffer.write(answer)
        sys.exit(0)
    import io

    sys.stdin = io.TextIOWrapper(io.BytesIO(event), encoding="utf-8")  # the event, read once already

sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from claudeguard.commands.ctl import main  # noqa: E402

sys.exit(main())
