"""Ask the resident service's planner to prepare this session (``service/planner.py``).

The planner, a warm process beside the service, reads and checks the config, writes the session
file and builds the CLI's argv with the same code as the launcher's own path, run with this
launcher's argv, environment and working directory. The launcher then starts the CLI without
importing and running all of that first (~40 ms before every guarded ``claude -p`` on the
benchmark machine, bench/RESULTS.md). This module imports nothing beyond ``_socket`` and
``marshal``: it is on that path.

The answer is None, and the launcher prepares the session itself, whenever the planner cannot
give one: none listening, a peer that is not this user, another version of claudeguard, a
refusal, a broken or late answer. An expected failure (a config error, lockdown, a settings
file that would silence the guard) comes back as the same one line and exit code the launcher's
own path would give, and is raised here as a ``GuardError``.
"""

from __future__ import annotations

import marshal
import os
import sys

from claudeguard.errors import GuardError
from claudeguard.plan.wire import PLAN_SOCKET
from claudeguard.switches import guard_disabled, planner_on

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import _socket

    from claudeguard.plan.wire import PlanRequest
# A planner answers in a few ms; one that takes longer is stuck (or busy behind a stuck request):
# the launcher prepares the session itself rather than keep its user waiting.
ANSWER_WAIT_S = 3.0
MAX_ANSWER = 8 << 20


class Planned:
    """A session the planner prepared: its files are written; the launcher starts ``argv``."""

    __slots__ = ("argv", "env", "port", "real", "session_dir", "session_id", "snapshot", "token", "files", "config",
                 "version", "untrusted", "dropped")

    def __init__(self, *, argv: list[str], env: dict[str, str], port: int, real: str, session_dir: str,
                 session_id: str, snapshot: str, token: str, files: dict[str, str] | None = None,
                 config: object = None, version: str | None = None, untrusted: list[dict[str, object]] | None = None,
                 dropped: list[str] | None = None) -> None:
        self.argv, self.env, self.port, self.real = argv, env, port, real
        self.session_dir, self.session_id, self.snapshot, self.token = session_dir, session_id, snapshot, token
        self.files = files or {}  # the other files the planner wrote into the session dir
        # The config the planner read and checked, as plain values (``Config.from_wire`` takes
        # it once the CLI runs; None: the launcher reads the layers again), and the code's
        # identity the planner checked the launcher's against (the registration's version).
        self.config = config
        self.version = version
        # What the plan left out as untrusted (the report's rows) and the settings sources the CLI
        # is not given (the settings watch's); None: not in the answer, the launcher reads them.
        self.untrusted = untrusted
        self.dropped = dropped


def _planned(answer: dict[str, object], session_id: str, token: str) -> Planned | None:
    argv, env, port = answer.get("argv"), answer.get("env"), answer.get("port")
    real, session_dir, snapshot = answer.get("real"), answer.get("session_dir"), answer.get("snapshot")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv) and isinstance(env, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()) and isinstance(port, int)
            and isinstance(real, str) and isinstance(session_dir, str) and isinstance(snapshot, str)):
        return None
    files = answer.get("files")
    if not (isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())):
        files = {}
    version = answer.get("version")
    untrusted, dropped = answer.get("untrusted"), answer.get("dropped")
    if not (isinstance(untrusted, list) and all(isinstance(u, dict) for u in untrusted)):
        untrusted = None
    if not (isinstance(dropped, list) and all(isinstance(d, str) for d in dropped)):
        dropped = None
    return Planned(argv=argv, env=env, port=port, real=real, session_dir=session_dir, session_id=session_id,
                   snapshot=snapshot, token=token, files=files, config=answer.get("config"),
                   version=version if isinstance(version, str) else None, untrusted=untrusted, dropped=dropped)


def plan_socket_path() -> str:
    """``<runtime root>/<service slot>/plan.sock``, computed as ``paths.service_slot()`` is but
    without its checks (and their imports): the peer's uid is checked instead."""
    from claudeguard import home

    root = os.environ.get("CLAUDEGUARD_RUNTIME_DIR") or home.default_root()
    return os.path.join(root, home.service_slot(root), PLAN_SOCKET)


def package_root() -> str:
    """The installed package's directory: the planner serves only launchers of its own code."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Asked:
    """A request sent to the planner whose answer is still to be read: the launcher reads its
    own argv meanwhile (the planner prepares on the other core), then takes the plan
    (``answer``) or, when the run turned out not to be one the planner prepares, drops it (``drop``)."""

    __slots__ = ("sock", "session_id", "token")

    def __init__(self, sock: _socket.socket, session_id: str, token: str) -> None:
        self.sock, self.session_id, self.token = sock, session_id, token

    def _read(self) -> object:
        from claudeguard.sockets import read_to_end

        try:
            answer = read_to_end(self.sock, MAX_ANSWER)
        except OSError:
            return None
        finally:
            self.sock.close()
        if answer is None:
            return None
        try:
            return marshal.loads(answer)
        except (EOFError, ValueError, TypeError):
            return None

    def answer(self) -> Planned | None:
        """The plan; None when the planner gave none (the launcher prepares the session itself);
        an expected failure is raised as the launcher's own path would raise it."""
        answer = self._read()
        if not isinstance(answer, dict):
            return None
        if "error" in answer:
            _print_stderr(answer)
            error = GuardError(str(answer["error"]))
            code = answer.get("exit")
            error.exit_code = code if isinstance(code, int) else 2
            raise error
        planned = _planned(answer, self.session_id, self.token)
        if planned is not None:
            _print_stderr(answer)
        return planned

    def drop(self) -> None:
        """Not a run the planner prepares after all: wait for its answer (bounded, as always) and
        remove the session dir it made, saying nothing of it."""
        answer = self._read()
        where = answer.get("session_dir") if isinstance(answer, dict) else None
        # only this session's own dir (the planner names it by the id this launcher made)
        if isinstance(where, str) and os.path.isabs(where) and os.path.basename(where) == self.session_id:
            from claudeguard.files import remove_tree

            remove_tree(where)


# What keeps a run from the planner that bin/claudeguard can see without reading argv: the
# guard's own options that print (the dry run, its help and version), a --bg dispatch.
_NOT_FIRST = ("--guard-dry-run", "--guard-help", "--guard-version", "--bg")


def ask_first() -> Asked | None:
    """``bin/claudeguard``'s first step for a run that names ``-p`` (or ``--print``): with the
    service and the planner on and no word that keeps it from the planner, the request goes
    before the launcher imports and reads anything more (~1 ms sooner: the planner's plan is
    what the launch waits on). ``shim.main`` takes it (``run(first)``), or drops it when the
    run turns out not to be one the planner prepares. Nothing here may fail the launch: a cwd
    that is gone, or no planner, is the main path's to meet."""
    argv = sys.argv[1:]
    if not ("-p" in argv or "--print" in argv) or any(w.startswith(_NOT_FIRST) for w in argv):
        return None
    if guard_disabled() or not planner_on():
        return None
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    return send_request(argv, cwd)


def send_request(argv: list[str], cwd: str) -> Asked | None:
    """Send the planner this launcher's request (its answer is read later: ``Asked``); None
    when no planner of this user takes it."""
    import _socket

    from claudeguard.sockets import is_own_user, socket_address

    session_id = os.urandom(8).hex()
    token = os.urandom(24).hex()  # 192 bits, as the launcher's own path makes it
    request: PlanRequest = {
        "root": package_root(),
        "argv": argv,
        "argv0": sys.argv[0],
        "executable": sys.executable,
        "cwd": cwd,
        "env": dict(os.environ),
        "pid": os.getpid(),
        "stdin_tty": os.isatty(0),
        "session_id": session_id,
        "token": token,
    }
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(ANSWER_WAIT_S)  # for the answer too: a late planner is given up on
        with socket_address(plan_socket_path()) as address:  # a long runtime dir: through the directory's fd
            sock.connect(address)
        if not is_own_user(sock):  # the request carries this process's environment
            sock.close()
            return None
        sock.sendall(marshal.dumps(dict(request)))
        sock.shutdown(_socket.SHUT_WR)
    except OSError:
        sock.close()
        return None
    return Asked(sock, session_id, token)


def _print_stderr(answer: dict[str, object]) -> None:
    """What preparing the session printed (a warning), where the launcher's own path prints it."""
    text = answer.get("stderr")
    if isinstance(text, str) and text:
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
