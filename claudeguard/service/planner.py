"""The service's planner: a warm process that prepares a launcher's session before its CLI starts.

``shim/planned.py`` is the launcher's side. The planner has imported everything that preparing a
session needs. For each request it takes the launcher's argv, environment, working directory and
pid, runs the launcher's own preparation (``plan.session.load_checked`` and
``write_session``, ``plan.argv.build_plan``: the same code, so the same plan and the same
errors), answers, and puts its own environment back: ~3 ms.

Why a single-threaded process beside the service rather than a thread in it: preparing reads the
process's environment and working directory (config paths, PATH, XDG_*, the runtime dir), which
threads share. Requests are served one at a time; one that takes longer than
``PREPARE_LIMIT_S`` is dropped (its launcher, and any behind it that give up, prepare their
sessions themselves). Not a fork per request: a forked copy of the warm process spent ~10 ms
more on copy-on-write faults than the whole preparation takes.

Protocol: ``plan.sock`` in the service dir (0600 in a 0700 dir; each side checks that the other
is this user). The launcher sends one marshal'd request and shuts its write side; the child
answers one marshal'd dict: the plan (``argv``, ``env``, ``port``, ``real``, ``session_dir``,
``snapshot``), or ``error`` and ``exit`` (an expected failure: the launcher prints it as its own
path would), or ``refused`` (the launcher prepares the session itself). Whatever preparing
printed on stderr (a warning) travels in ``stderr``.

Lifetime: the service starts it (``start``) once its hook port is known and holds the write end
of a pipe whose read end the planner watches: when the service exits or dies, the planner stops.
It serves only launchers of its service's code: ``files.fingerprint`` of the launcher's package
dir must equal the service's (passed at start), and so must the planner's own, taken at its
start. A service restarts its planner when it dies, from the code on disk then: after an upgrade
in place that planner is new code beside an old service, and the port it hands out is the old
service's, which a launcher of the new code then retires; so it refuses everyone.
"""

from __future__ import annotations

import importlib
import io
import marshal
import os
import select
import shutil
import signal
import socket
import subprocess
import sys

from claudeguard.errors import GuardError
from claudeguard.plan.argv import build_plan
from claudeguard.plan.claude_args import parse_claude_args
from claudeguard.plan.discovery import print_cli_version, take_cli
from claudeguard.plan.hooks import HttpHooks
from claudeguard.plan.once import one_plan
from claudeguard.plan.options import split_argv
from claudeguard.plan.session import load_checked, session_dir_of, write_session
from claudeguard.plan.wire import PLAN_SOCKET
from claudeguard.service import files
from claudeguard.sockets import is_own_user, read_to_end

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:

    from claudeguard.plan.wire import PlanAnswer, PlanRequest

PREPARE_LIMIT_S = 3.0  # a request that takes longer is dropped (``TooLong``): its launcher gave up by then
IO_LIMIT_S = 1.0  # a launcher sends its request as soon as it connects, and reads the answer at once
MAX_REQUEST = 4 << 20
# What preparing a session imports (tests/test_service_planner.py holds that it imports nothing
# more in the forked child): imported once here, not in every child.
WARM = ("claudeguard.plan.options", "claudeguard.plan.claude_args", "claudeguard.plan.discovery",
        "claudeguard.plan.session", "claudeguard.plan.argv", "claudeguard.plan.hooks",
        "claudeguard.plan.settings_sources", "claudeguard.plan.sandbox", "claudeguard.plan.box_enter",
        "claudeguard.plan.box_rules", "claudeguard.plan.memory_check", "claudeguard.policy.memory_imports",
        "claudeguard.plan.code_paths", "claudeguard.plan.git_index", "claudeguard.plan.may_run",
        "claudeguard.plan.verified", "claudeguard.plan.cli_version", "mmap",
        "claudeguard.plan.repo_code", "claudeguard.config.trust", "hashlib", "claudeguard.config.load",
        "claudeguard.config.find", "claudeguard.config.lines", "claudeguard.config.schema", "claudeguard.policy.rules",
        "claudeguard.policy.pathrules", "claudeguard.paths", "claudeguard.files", "claudeguard.gate", "json", "io",
        "struct", "pathlib", "shlex", "shutil", "tomllib")


class Planner:
    """The service's handle on its planner process."""

    def __init__(self, proc: subprocess.Popen[bytes], lifeline: int) -> None:
        self.proc = proc
        self.lifeline = lifeline

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Close the lifeline (the planner stops at once), then make sure, by its pid."""
        try:
            os.close(self.lifeline)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except Exception:  # noqa: BLE001 - a planner that does not stop is killed
            self.proc.kill()
            self.proc.wait()


def start(directory: str, port: int, version: str) -> Planner | None:
    """Start the planner for the service (of fingerprint ``version``) whose hook port is
    ``port``. None when it cannot be started: launchers then prepare their sessions themselves,
    as before it existed."""
    read_end, write_end = os.pipe()  # not inheritable: only the planner gets the read end
    try:
        # Not through procs: the service keeps the planner's handle (poll, wait, kill) and hands it
        # the lifeline's read end.
        proc = subprocess.Popen([sys.executable, "-m", "claudeguard.service.planner", directory, str(port),
                                 str(read_end), version], pass_fds=(read_end,), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL)
    except OSError as exc:
        print(f"claudeguard service: no planner ({exc})", file=sys.stderr, flush=True)
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    return Planner(proc, write_end)


def serve(directory: str, port: int, lifeline: int, service_version: str) -> int:
    for name in WARM:
        importlib.import_module(name)
    # None: this planner's code is not its service's (see the module's docstring).
    version = service_version if files.fingerprint() == service_version else None
    path = os.path.join(directory, PLAN_SOCKET)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.unlink(path)  # a dead planner's: the service that starts us holds the slot
    except FileNotFoundError:
        pass
    old = os.umask(0o177)
    try:
        with files.socket_path(directory, PLAN_SOCKET) as address:
            listener.bind(address)
    finally:
        os.umask(old)
    inode = os.stat(path).st_ino
    listener.listen(64)
    signal.signal(signal.SIGALRM, _too_long)
    try:
        while True:
            ready, _, _ = select.select([listener.fileno(), lifeline], [], [])
            if lifeline in ready:
                return 0  # the service is gone (or stopping)
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            try:
                conn.settimeout(IO_LIMIT_S)  # a peer that does not send or read holds nobody up for long
                _serve_one(conn, port, version)
            except (OSError, TooLong):
                pass  # the launcher sees no answer and prepares the session itself
            finally:
                conn.close()
    finally:
        try:
            if os.stat(path).st_ino == inode:  # only our own: a successor may have bound its own
                os.unlink(path)
        except OSError:
            pass


class TooLong(Exception):
    """A request took longer than ``PREPARE_LIMIT_S`` (a config on a hung mount, a peer that
    does not send): the next launchers must not wait behind it."""


def _too_long(signum: int, frame: object) -> None:
    raise TooLong()


def _serve_one(conn: socket.socket, port: int, version: str | None) -> None:
    if not is_own_user(conn):
        return
    data = read_to_end(conn, MAX_REQUEST)
    if data is None:
        return
    try:
        # Whatever a peer of this user sent: prepare() refuses a request whose fields are not there.
        request: PlanRequest = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return
    answer: PlanAnswer = prepare(request, port, version) if isinstance(request, dict) else {"refused": "not a request"}
    conn.sendall(marshal.dumps(dict(answer)))


def prepare(request: PlanRequest, port: int, version: str | None) -> PlanAnswer:
    """Prepare the launcher's session as its own path would: in the launcher's environment,
    working directory and names (``sys.argv[0]``, ``sys.executable``), all put back after."""
    try:
        if version is None or files.fingerprint(request["root"]) != version:
            return {"refused": "another version of claudeguard"}
        cwd, env = request["cwd"], request["env"]
        if not isinstance(env, dict):
            return {"refused": "no environment"}
    except (KeyError, TypeError, OSError) as exc:
        return {"refused": f"not a request: {exc}"}
    saved = (dict(os.environ), sys.argv, sys.executable, sys.stderr)
    stderr = io.StringIO()
    signal.setitimer(signal.ITIMER_REAL, PREPARE_LIMIT_S)
    try:
        os.chdir(cwd)
        _set_environ(env)
        sys.argv = [request["argv0"]]  # the launcher's own paths are never the real CLI
        sys.executable = request["executable"]
        sys.stderr = stderr
        answer = _prepare(request, port)
        if "argv" in answer:
            answer["version"] = version  # the launcher's too (checked above): its registration needs no walk
    except (KeyError, TypeError, ValueError, OSError) as exc:
        answer = {"refused": f"cannot take the launcher's place: {exc}"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)  # first: nothing may interrupt putting things back
        _set_environ(saved[0])
        sys.argv, sys.executable, sys.stderr = saved[1], saved[2], saved[3]
        os.chdir("/")
    answer.setdefault("stderr", stderr.getvalue())
    return answer


def _set_environ(env: dict[str, str]) -> None:
    """``os.environ`` made exactly ``env``, touching only what differs (a launcher's environment
    is mostly the planner's: clearing and refilling ~50 names twice was ~0.6 ms a plan)."""
    for name in [n for n in os.environ if n not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def _prepare(request: PlanRequest, port: int) -> PlanAnswer:
    cwd, pid, session_id = request["cwd"], request["pid"], request["session_id"]
    session_dir = None
    try:
        with one_plan():  # each file the plan's parts ask about is read once (plan/once.py)
            opts, rest = split_argv(request["argv"])
            opts.cli, rest = take_cli(rest)  # as the launcher took it: the CLI its first argument names
            args = parse_claude_args(rest)
            cfg, real = load_checked(opts, args, cwd)
            session_dir = session_dir_of(session_id)
            version = print_cli_version(real, args)  # who asks in -p (its package.json: ~0.1 ms)
            written = write_session(cfg, args, session_dir, session_id=session_id, cwd=cwd,
                                    stdin_tty=bool(request["stdin_tty"]), exec_pid=pid, cli_version=version,
                                    prepared_by="planner")
            at_terminal = bool(written.snapshot.get("pty") and written.snapshot.get("interactive"))
            plan = build_plan(real, args, cfg, session_id=session_id, session_dir=session_dir, cwd=cwd,
                              http=HttpHooks(port, request["token"]), exec_pid=pid,
                              run={"cli_version": version, "status_line": at_terminal})
            return {"argv": plan.argv, "env": plan.env_additions, "port": port, "real": real,
                    "session_dir": session_dir, "snapshot": written.text, "files": plan.files, "config": cfg.to_wire(),
                    "untrusted": plan.untrusted, "dropped": plan.dropped}
    except GuardError as exc:
        if session_dir is not None:
            shutil.rmtree(session_dir, ignore_errors=True)
        return {"error": str(exc), "exit": exc.exit_code}
    except BaseException as exc:  # TooLong too: the session dir goes; the launcher's own path meets it again
        if session_dir is not None:
            shutil.rmtree(session_dir, ignore_errors=True)
        if isinstance(exc, (TooLong, KeyboardInterrupt, SystemExit)):
            raise
        return {"refused": f"{type(exc).__name__}: {exc}"}


def main(argv: list[str]) -> int:
    """``python -m claudeguard.service.planner DIR PORT LIFELINE_FD VERSION`` (started by the
    service)."""
    directory, port, lifeline, version = argv[0], int(argv[1]), int(argv[2]), argv[3]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the service's lifeline ends us, not a terminal's ^C
    return serve(directory, port, lifeline, version)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
