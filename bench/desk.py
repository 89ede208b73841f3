"""What the approval desk costs: 200 waiting requests rendered in Chromium, and the idle
server's CPU with an event stream open.

    python bench/desk.py [--requests 200] [--loads 5] [--seconds 60]

Render: in a throwaway runtime dir, N requests wait in the real channel (a third compound Bash
commands, a third Edits with a diff against a file on disk, a third Writes of a new file); the
desk as the resident guard service serves it (``claudeguardctl desk``: the service is started,
then its desk, each first URL from ``claudeguardctl desk`` again) serves them and Debian's headless
Chromium (``testing.desk_kit``) opens the page ``--loads`` times. Per load: ``render_ms``, the
page script's DOM work for the N cards (``renderRequests``), ``painted_ms`` up to the frame after
it (style, layout, paint), and ``load_ms`` from the login URL to N cards in the DOM (the login
redirect, the page, the event stream and the server listing N requests with their views).

Idle: the same service process with nothing waiting and no session, for ``--seconds`` each:
before its desk started (the service's own idle: its main loop and hooks' listener), the desk
started and no page open, then one event stream open (a raw HTTP client reading it, so no
browser CPU is counted), then the stream open with the N requests waiting. The CPU share is
the service process's CPU time over the wall time (% of one core).

Prints one JSON object; stops everything it started by pid.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from urllib.parse import urlsplit


CTL = [sys.executable, "-m", "claudeguard.commands.ctl"]


def ctl(env: dict[str, str], *args: str) -> str:
    out = subprocess.run(CTL + list(args), env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def desk_url(env: dict[str, str]) -> str:
    """A fresh first URL of the service's desk (the service and its desk started at the first)."""
    return ctl(env, "desk")


def cookie_for(url: str) -> tuple[str, str]:
    """Log in with the first URL: (cookie secret, base path)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=10)
    conn.request("GET", f"{parts.path}?{parts.query}")
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp.getheader("Set-Cookie").split(";", 1)[0].split("=", 1)[1], resp.getheader("Location")


class Stream:
    """One open event stream, read (and thrown away) by a thread."""

    def __init__(self, port: int, base: str, secret: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conn.request("GET", f"{base}api/events", headers={"Cookie": f"claudeguard_desk={secret}"})
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.status
        self.bytes = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while chunk := self.resp.read1(65536):
                self.bytes += len(chunk)
        except OSError:
            pass

    def close(self) -> None:
        if self.conn.sock is not None:
            self.conn.sock.shutdown(2)
        self.conn.close()


def cpu_share(pid: int, seconds: float) -> float:
    import psutil

    p = psutil.Process(pid)
    t0, c0 = time.monotonic(), sum(p.cpu_times()[:2])
    time.sleep(seconds)
    t1, c1 = time.monotonic(), sum(p.cpu_times()[:2])
    return round(100 * (c1 - c0) / (t1 - t0), 3)


def post_requests(n: int, work: str) -> list:
    from claudeguard.testing.desk_kit import post_request

    project = os.path.join(work, "project")
    os.makedirs(project, exist_ok=True)
    source = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40))
    waiters = []
    for i in range(n):
        if i % 3 == 0:
            call = ("Bash", {"command": f"cd src && npm test -- --shard={i} | tee log{i}.txt && git push origin b{i}"})
        elif i % 3 == 1:
            path = os.path.join(project, f"m{i}.py")
            with open(path, "w") as fh:
                fh.write(source)
            call = ("Edit", {"file_path": path, "old_string": "    return x + 7\n", "new_string": "    return x * 7\n"})
        else:
            call = ("Write", {"file_path": os.path.join(project, f"new{i}.md"), "content": f"# note {i}\n" * 12})
        waiters.append(post_request(call[0], call[1], session_id=f"bench-{i % 7}",
                                    agent_type="Explore" if i % 2 else None, cwd=project, timeout=600))
    return waiters


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    from claudeguard.testing.desk_kit import browser_context

    out: dict[str, object] = {"requests": args.requests, "loads": args.loads, "seconds": args.seconds,
                              "load_average": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory() as work:
        os.environ["CLAUDEGUARD_RUNTIME_DIR"] = os.path.join(work, "run")
        os.environ["CLAUDEGUARD_LOG_DIR"] = os.path.join(work, "log")
        env = dict(os.environ)
        from claudeguard.paths import runtime_dir

        env["CLAUDEGUARD_SERVICE_IDLE"] = "3600"  # no session here: the service must not leave meanwhile
        runtime_dir("channel")
        from claudeguard.procs import process_start

        pid = int(json.loads(ctl(env, "service", "start", "--json"))["pid"])
        started = process_start(pid)
        waiters: list = []
        try:
            time.sleep(2)
            out["service_idle_before_desk_cpu_pct"] = cpu_share(pid, args.seconds)
            url = desk_url(env)
            port = urlsplit(url).port
            assert port is not None
            time.sleep(1)
            # -- idle, nothing waiting
            out["idle_no_stream_cpu_pct"] = cpu_share(pid, args.seconds)
            secret, base = cookie_for(url)
            stream = Stream(port, base, secret)
            time.sleep(1)
            out["idle_one_stream_cpu_pct"] = cpu_share(pid, args.seconds)
            # -- render N waiting requests
            waiters = post_requests(args.requests, work)
            renders, paints, loads = [], [], []
            with browser_context((1280, 900)) as context:
                from playwright.sync_api import Page

                for _ in range(args.loads):
                    context.clear_cookies()
                    page: Page = context.new_page()
                    login = desk_url(env)
                    started = time.monotonic()
                    page.goto(login)
                    # attribute selectors, not wait_for_function: the page's CSP forbids the eval that would need
                    page.wait_for_selector(f'body[data-requests="{args.requests}"]', state="attached", timeout=30000)
                    loads.append((time.monotonic() - started) * 1000)
                    page.wait_for_selector("body[data-painted-ms]", state="attached", timeout=10000)
                    renders.append(float(page.evaluate("document.body.dataset.renderMs")))
                    paints.append(float(page.evaluate("document.body.dataset.paintedMs")))
                    page.close()
            out["render_ms"] = {"median": round(statistics.median(renders), 1), "max": round(max(renders), 1),
                                "all": [round(x, 1) for x in renders]}
            out["painted_ms"] = {"median": round(statistics.median(paints), 1), "max": round(max(paints), 1),
                                 "all": [round(x, 1) for x in paints]}
            out["load_ms"] = {"median": round(statistics.median(loads), 1), "max": round(max(loads), 1),
                              "all": [round(x, 1) for x in loads]}
            # -- idle again, the stream open and N requests waiting
            time.sleep(2)
            out[f"idle_one_stream_{args.requests}_waiting_cpu_pct"] = cpu_share(pid, args.seconds)
            out["stream_bytes"] = stream.bytes
            stream.close()
        finally:
            for w in waiters:
                w.withdraw()
            ctl(env, "service", "stop")  # waits until the service's pid is gone
            if process_start(pid) == started:  # still the service we started: stop refused or timed out
                os.kill(pid, signal.SIGTERM)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
