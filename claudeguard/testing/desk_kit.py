"""What the desk's tests, its benchmark and its screenshots share: Debian's headless Chromium
driven by Playwright, requests that really wait in the channel, and a session the real watchdog
finds stalled.

The browser is Debian's ``chromium`` (``/usr/bin/chromium``) started by Playwright with
``executable_path``; ``playwright install`` is never run (it downloads a browser build).
Everything here works in the runtime dir and log dir of the environment
(``CLAUDEGUARD_RUNTIME_DIR``, ``CLAUDEGUARD_LOG_DIR``), which the caller sets first.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from claudeguard import channel
from claudeguard.paths import runtime_dir
from claudeguard.policy.decide import summarize_call
from claudeguard.watchdog.monitor import Monitor
from claudeguard.watchdog.signals import WatchConfig

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Iterator

    from claudeguard.channel.model import Answer
    from claudeguard.channel.requests import Pending

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str | None:
    """Debian's chromium, or None when it is not installed (``apt-get install chromium``)."""
    path = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    return path


def browser_missing() -> str | None:
    """Why no browser test can run here, or None."""
    if chromium_path() is None:
        return "Debian's chromium is not installed (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401, PLC0415 - only whether it imports (a test extra)
    except ImportError:
        return "playwright is not installed (pip install '.[test]')"
    return None


@contextmanager
def browser_context(viewport: tuple[int, int] = (1280, 900)) -> Iterator[Any]:
    """A fresh Chromium profile in a temp dir (removed after), as a Playwright BrowserContext."""
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - a test extra, only for the browser tests

    path = chromium_path()
    if path is None:
        raise RuntimeError(browser_missing() or "no chromium")
    profile = tempfile.mkdtemp(prefix="claudeguard-chromium-")
    try:
        # Chromium is started by Playwright (not through procs), and stopped with the context.
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile, executable_path=path, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": viewport[0], "height": viewport[1]})
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class Waiter:
    """A request waiting in the channel, as a tool call waits: a thread that sleeps on the
    request's FIFO. ``Pending`` has one owner, so ``withdraw`` asks that thread to end it."""

    def __init__(self, pending: Pending) -> None:
        self.pending = pending
        self.request = pending.request
        self.answer: Answer | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._wait, daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        pending = self.pending
        while self.answer is None:
            if self._stop.is_set():
                pending.withdraw()
                return
            if time.time() >= pending.request.deadline:
                self.answer = pending.wait()  # ends at once with on_timeout
                return
            ready, _, _ = select.select([pending.fileno()], [], [], 0.1)
            self.answer = pending.poll() if ready else pending.check()

    def result(self, timeout: float) -> Answer:
        self._thread.join(timeout)
        if self.answer is None:
            raise AssertionError(f"request {self.request.id}: no answer within {timeout:g} s")
        return self.answer

    def withdraw(self) -> None:
        self._stop.set()
        self._thread.join(5)


# An attacker's page on another loopback port (the same site to a browser, so SameSite=Strict
# sends the desk's cookie along): it posts an answer to the desk twice, a no-cors fetch with the
# cookie, then a text/plain form whose body parses as JSON. Only the CSRF token can stop them.
CROSS_SITE_POST = """<!doctype html><html><body>
<form id="f" method="POST" action="{action}" enctype="text/plain">
<input name='{{"id":"{rid}","answer":"once","pad":"' value='"}}'></form>
<script>
fetch("{action}", {{method: "POST", mode: "no-cors", credentials: "include",
  body: JSON.stringify({{id: "{rid}", answer: "once"}})}}).finally(function () {{
  document.getElementById("f").submit();
}});
</script></body></html>"""


@contextmanager
def cross_site_page(action: str, request_id: str) -> Iterator[str]:
    """Serve ``CROSS_SITE_POST`` against ``action`` (the desk's ``api/answer``) for ``request_id``
    on a loopback port of its own, in a thread; yields the page's URL, and stops the server on exit."""
    body = CROSS_SITE_POST.format(action=action, rid=request_id).encode()

    class Attacker(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def post_request(tool: str, tool_input: dict[str, Any], *, session_id: str = "desk-test-session",
                 agent_type: str | None = None, agent_id: str | None = None, cwd: str = "/tmp",
                 timeout: float = 120, rule: str | None = None, rule_source: str | None = None,
                 extra: dict[str, Any] | None = None) -> Waiter:
    """Post a request through the real channel and wait for it in a thread."""
    more = {"via": "hook", "rule": rule, "rule_source": rule_source}
    more.update(extra or {})
    pending = channel.post(session_id=session_id, agent_type=agent_type, agent_id=agent_id, tool=tool,
                           input=tool_input, summary=summarize_call(tool, tool_input), cwd=cwd, timeout=timeout,
                           extra=more)
    return Waiter(pending)


class StalledSession:
    """A sleeping child watched by the real watchdog (``Monitor``) with a short ``stall_after``:
    within about ``stall_after`` + 2 samples its ``status.json`` says ``stalled``."""

    def __init__(self, session_id: str, *, stall_after: float = 1.0, prompt: str = "refactor the parser module",
                 cwd: str = "/tmp") -> None:
        # Not through procs: a stand-in CLI the test's watchdog samples, stopped by its handle.
        self.child = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"],
                                      stdout=subprocess.PIPE, text=True)
        assert self.child.stdout is not None
        self.child.stdout.readline()  # its start-up CPU is behind us
        self.session_id = session_id
        self.monitor: Monitor = Monitor(
            child_pid=self.child.pid, session_id=session_id, session_dir=runtime_dir("sessions", session_id),
            config=WatchConfig(stall_after=stall_after, sample_interval=0.2, on_stall="warn", notify=[]),
            output_format="stream-json", prompt=prompt, cwd=cwd, argv=["claude", "-p", prompt],
            on_stall=lambda _: None)
        self.monitor.start()
        self.monitor.feed_stdout(b'{"type":"system","subtype":"init"}\n')

    def stop(self) -> None:
        self.monitor.stop(None)
        if self.child.poll() is None:
            self.child.kill()
        self.child.wait(5)
        if self.child.stdout is not None:
            self.child.stdout.close()
