"""Shared fixtures: the pinned real Claude CLIs, a scripted model server, an offline HOME, and
helpers that run the CLI headless or under a pty and always stop what they started.

Typical real-CLI test::

    def test_x(real_claude, model_server, offline_env, run_claude):
        server = model_server([{"match": "say hi", "turns": [{"text": "hi"}]}])
        env = offline_env.use(server)
        proc = run_claude([real_claude, "-p", "say hi"], env, offline_env.cwd, timeout=30)

A test that uses ``real_claude`` runs once per pinned version (through ``cli_version``) and is
marked ``real_cli``. A missing CLI is installed with npm; when that is impossible the test is
skipped, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import psutil
import pytest

from claudeguard.testing import bg_daemon as bg
from claudeguard.testing.cli_install import (bg_version_under_test, cli_path, install_cli, newest_under_test,
                                             version_key, versions_under_test)
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.offline_home import offline_env as _offline_env, prepare_home
from claudeguard.testing.runner import run_claude as _run_claude
from claudeguard.testing.tui import close_tui, spawn_tui as _spawn_tui

# The fleet's fixtures (`redis_server`, one real redis-server per test module; `fleet`).
pytest_plugins = ["fleet_helpers"]

# Long enough that the CLI's last-20-characters key lookup differs from the whole key.
API_KEY = "sk-ant-api03-offline-test-key-0123456789abcdef"
UNUSED_URL = "http://127.0.0.1:9"  # until a test points the env at its server: nothing listens

_install_errors: dict[str, str] = {}

# Hypothesis keeps a cache directory (.hypothesis/) in the working directory; tests leave no
# files outside their temporary directories, so point it at one that is removed at the end.
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="claudeguard-hypothesis-")
os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = _HYPOTHESIS_HOME
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, True)

# A guarded run of a CLI that no `doctor --verify` passed asks the guard service to verify it in
# the background (plan/verified.py): not in tests, whose CLIs are stand-ins or run in a throwaway
# HOME. The tests of that feature set it back (tests/test_verify.py).
os.environ["CLAUDEGUARD_AUTO_VERIFY"] = "0"

# The session box's entry (plan/box_enter.py), built once per test process and named to every
# session the tests start: else each test's throwaway state dir would build its own (~0.2 s of
# CPU each). Where no compiler is found it stays unset, and the tests that need it fail under CI.
_BOX_ENTER_DIR = tempfile.mkdtemp(prefix="claudeguard-box-enter-")
atexit.register(shutil.rmtree, _BOX_ENTER_DIR, True)


def _build_box_enter() -> str | None:
    from claudeguard.plan.box_enter import PROGRAM_VAR, build

    program = os.path.join(_BOX_ENTER_DIR, "box-enter")
    if build(program, os.environ) is not None:
        return None
    os.environ[PROGRAM_VAR] = program
    return program


BOX_ENTER = _build_box_enter()


@pytest.fixture(autouse=True)
def _clean_signals() -> Any:
    """Each test starts with no signal blocked and SIGINT as Python sets it: code run in process
    (a ChildProcess of the launcher blocks the signals it forwards until its close) would hand
    a blocked SIGINT to every child a later test starts in the same worker, and that child's
    Ctrl-C would never come (seen under load, where the order of tests in a worker differs)."""
    import signal

    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield


@pytest.fixture(autouse=True)
def _stop_guard_services(request: pytest.FixtureRequest) -> Any:
    """A launcher starts the resident guard service in the test's runtime dir, and the service
    outlives it by design: stop it by pid when the test ends. Also removes the CLI's leftover
    messaging sockets (below)."""
    # Asked for now, at set-up, so that tmp_path is torn down after this fixture, not before.
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    sockets_before = _cli_sockets()
    yield
    if root is not None:
        from claudeguard.testing.services import stop_services

        stop_services(root)
    _remove_dead_cli_sockets(sockets_before)


# 2.1.330 puts a messaging socket per session in /tmp/cc-socks-<uid>/<pid>.sock, whatever
# XDG_RUNTIME_DIR and TMPDIR say, and leaves it there when the session ends. A test removes
# those that appeared while it ran and whose process is gone (a concurrent test's live CLI keeps
# its own); the directory goes at the end of the run if the run made it.
CLI_SOCKETS = Path("/tmp") / f"cc-socks-{os.getuid()}"
_CLI_SOCKETS_EXISTED = CLI_SOCKETS.exists()


def _cli_sockets() -> set[str]:
    try:
        return set(os.listdir(CLI_SOCKETS))
    except OSError:
        return set()


def _remove_dead_cli_sockets(before: set[str]) -> None:
    for name in _cli_sockets() - before:
        pid = name.split(".", 1)[0]
        if name.endswith(".sock") and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.unlink(CLI_SOCKETS / name)
            except OSError:
                pass


_CLI_SOCKETS_AT_START = _cli_sockets()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return
    # The controller, after its workers: what a test's own sweep missed (a CLI that outlived
    # its test's teardown by a moment), then the directory if the run made it.
    _remove_dead_cli_sockets(_CLI_SOCKETS_AT_START)
    if not _CLI_SOCKETS_EXISTED:
        try:
            CLI_SOCKETS.rmdir()
        except OSError:
            pass


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


# The desk's browser tests (test_desk_browser.py, test_desk_service.py): one headless Chromium per
# module, a fresh page per test. Under CI a missing browser fails, never skips.
@pytest.fixture(scope="module")
def browser() -> Any:
    from claudeguard.testing.desk_kit import browser_context, browser_missing

    why = browser_missing()
    if why:
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
    with browser_context() as context:
        yield context


@pytest.fixture
def page(browser: Any) -> Any:
    browser.clear_cookies()
    p = browser.new_page()
    p.on("dialog", lambda d: d.accept())  # the stop button's confirm()
    yield p
    p.close()


# The version a test marked ``one_cli`` runs on: the newest under test (2.1.330 of the pinned ones;
# the newest published CLI in .ci/run's extra run). Such a test's subject is the guard's own
# machinery (the desk, the fleet, two homes or installs, the audit's suggestions) with the CLI
# only driving it; what differs between CLIs (hooks, argv, dialogs, the box, the watchdog's
# reading of the stream) is tested on every version by the tests that are not marked.
ONE_CLI_VERSION = newest_under_test(min(versions_under_test(), key=version_key))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``cli_version`` (and with it ``real_claude``): each version under test, or ONE_CLI_VERSION
    for a test marked ``one_cli``; a test that parametrizes it itself keeps its own."""
    if "cli_version" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        if "cli_version" in ([n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)):
            return
    one = metafunc.definition.get_closest_marker("one_cli") is not None
    metafunc.parametrize("cli_version", [ONE_CLI_VERSION] if one else list(versions_under_test()), indirect=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if {"real_claude", "bg_claude"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.real_cli)


@pytest.fixture
def cli_version(request: pytest.FixtureRequest) -> str:
    """Each pinned Claude Code version in turn (or each of CLAUDEGUARD_TEST_CLI_VERSIONS, e.g. the
    newest published CLI: cli_install.versions_under_test), parametrized by pytest_generate_tests
    above; tests opt in by using this (or ``real_claude``)."""
    return str(request.param)


@pytest.fixture
def real_claude(cli_version: str) -> Path:
    """Path of the real ``claude`` binary for ``cli_version``, installed on first use."""
    return _real_cli(cli_version)


# The version the background-agent tests run on (`claude --bg`, `agents`): 2.1.330, or the newest
# of CLAUDEGUARD_TEST_CLI_VERSIONS that has them.
BG_VERSION = bg_version_under_test()


@pytest.fixture
def bg_claude() -> Path:
    """The real CLI that has background agents (``BG_VERSION``); like ``real_claude``, it fails
    instead of skipping under ``CI=true`` when it cannot be had."""
    return _real_cli(BG_VERSION)


@pytest.fixture
def bg_daemon(offline_env: "OfflineEnv") -> Any:
    """Guarantees that no background daemon of the test outlives it: at teardown every daemon,
    session, pty host and tool process of ``offline_env``'s HOME (and of every env given to
    ``bg_daemon.track(env)``) is stopped by pid, its socket dir under /tmp removed, and the
    test fails if anything survived. ``bg_daemon.stop(env)`` stops one early."""
    guard = _BgDaemonGuard([offline_env])
    yield guard
    leftovers = []
    for env in guard.envs:
        try:
            bg.stop_daemon(env)
        finally:
            leftovers += bg.live_processes(env)
            if bg.socket_dir(bg.config_dir(env)).exists():
                leftovers.append(str(bg.socket_dir(bg.config_dir(env))))
    assert not leftovers, f"background daemon processes or sockets survived the test: {leftovers}"


class _BgDaemonGuard:
    def __init__(self, envs: list[dict[str, str]]) -> None:
        self.envs = envs

    def track(self, env: dict[str, str]) -> dict[str, str]:
        self.envs.append(env)
        return env

    def stop(self, env: dict[str, str] | None = None) -> "bg.StopReport":
        return bg.stop_daemon(env if env is not None else self.envs[0])


def _real_cli(cli_version: str) -> Path:
    path = cli_path(cli_version)
    if path is None and cli_version not in _install_errors:
        try:
            path = install_cli(cli_version)
        except Exception as exc:  # noqa: BLE001 - any failure means "cannot be had"
            _install_errors[cli_version] = str(exc)
    if path is None:
        why = f"real Claude CLI {cli_version} unavailable: {_install_errors.get(cli_version, 'not installed')}"
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
    return path


@pytest.fixture
def model_server() -> Any:
    """Factory: ``model_server(scenario, **kw)`` starts a ModelServer; all are stopped at teardown."""
    servers: list[ModelServer] = []

    def start(scenario: Any = (), **kwargs: Any) -> ModelServer:
        server = ModelServer(scenario, **kwargs)
        servers.append(server)
        return server.start()

    yield start
    for server in reversed(servers):
        server.stop()


class OfflineEnv(dict):
    """A subprocess environment with attributes: ``home``, ``cwd`` (the ``work`` dir the CLI runs
    in, trusted in ``home``), ``api_key``; ``use(server)`` points it at a model server."""

    home: Path
    cwd: Path
    api_key: str

    def use(self, server: ModelServer | str) -> "OfflineEnv":
        self["ANTHROPIC_BASE_URL"] = server if isinstance(server, str) else server.url
        return self


@pytest.fixture
def offline_env(tmp_path: Path) -> OfflineEnv:
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    prepare_home(home, cwd=work, api_key=API_KEY)
    env = OfflineEnv(_offline_env(home, UNUSED_URL, API_KEY))
    env.home, env.cwd, env.api_key = home, work, API_KEY
    return env


@pytest.fixture
def run_claude() -> Callable[..., Any]:
    """``run_claude(argv, env, cwd, timeout=60, input=None) -> CompletedProcess``; kills the
    process group on timeout and raises ``subprocess.TimeoutExpired`` with the output so far."""
    return _run_claude


@pytest.fixture
def spawn_tui() -> Any:
    """Factory: ``spawn_tui(argv, env, cwd, dimensions=(40, 120)) -> pexpect.spawn``; every child
    is terminated and reaped at teardown."""
    children: list[Any] = []

    def spawn(argv: Any, env: dict[str, str], cwd: Any, dimensions: tuple[int, int] = (40, 120)) -> Any:
        child = _spawn_tui(argv, env, cwd, dimensions)
        children.append(child)
        return child

    yield spawn
    for child in children:
        close_tui(child)


@pytest.fixture
def procs() -> Any:
    """A list for the Popen objects and (pid, create_time) pairs a test starts; afterwards each
    still running is killed, by pid, only while it is still the process the test started."""
    started: list = []
    yield started
    for p in started:
        if hasattr(p, "poll"):
            if p.poll() is None:
                p.kill()
            p.wait(timeout=60)
            continue
        pid, born = p
        try:
            proc = psutil.Process(pid)
            if proc.create_time() == born:
                proc.kill()
        except psutil.Error:
            pass


@pytest.fixture
def rt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private runtime root for the test (CLAUDEGUARD_RUNTIME_DIR); its checked sessions/ dir."""
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "rt"))
    from claudeguard.paths import runtime_dir

    return runtime_dir("sessions")
