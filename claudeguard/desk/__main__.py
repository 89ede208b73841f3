"""``python -m claudeguard.desk [--runtime-dir D] [--log-dir L] [--config-file F] [--port N] [--open]``:
the desk standalone, over ``LocalSource`` (until the resident service serves it): prints its first
URL on stdout (one line) and serves until SIGINT or SIGTERM; SIGUSR1 prints one more first URL
(each logs in one browser)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import webbrowser

from claudeguard.desk import start_desk
from claudeguard.desk.local import LocalSource
from claudeguard.paths import runtime_dir


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m claudeguard.desk",
                                     description="Serve the approval desk on 127.0.0.1 and print its first URL.")
    parser.add_argument("--runtime-dir", help="the runtime dir (default: CLAUDEGUARD_RUNTIME_DIR, else "
                                              "/tmp/claudeguard-<uid>)")
    parser.add_argument("--log-dir", help="the audit log's dir (default: CLAUDEGUARD_LOG_DIR, else the user log dir)")
    parser.add_argument("--config-file", help="where `forever` and applied suggestions write (default: the user "
                                              "config file)")
    parser.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: any free one)")
    parser.add_argument("--open", action="store_true", help="also open the URL in a browser")
    args = parser.parse_args(argv)
    if args.runtime_dir:
        os.environ["CLAUDEGUARD_RUNTIME_DIR"] = os.path.abspath(args.runtime_dir)
    if args.log_dir:
        os.environ["CLAUDEGUARD_LOG_DIR"] = os.path.abspath(args.log_dir)

    runtime_dir("channel")  # refuses a runtime dir that is not private to us, before serving anything
    desk = start_desk(LocalSource(config_file=args.config_file), port=args.port)
    woke = threading.Event()
    asked: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
        signal.signal(sig, lambda signum, _frame: _note(asked, signum, woke))
    url = desk.login_url()
    print(url, flush=True)
    if args.open:
        # The user's browser (not through procs): webbrowser picks and starts it the platform's way.
        webbrowser.open(url)
    try:
        while True:
            woke.wait()
            woke.clear()
            while asked:
                if asked.pop(0) != signal.SIGUSR1:
                    return 0
                print(desk.login_url(), flush=True)  # SIGUSR1: a first URL for one more browser
    finally:
        desk.stop()


def _note(asked: list[int], signum: int, woke: threading.Event) -> None:
    asked.append(signum)
    woke.set()


if __name__ == "__main__":
    from claudeguard.errors import run_main

    sys.exit(run_main("claudeguard.desk", lambda: main(sys.argv[1:])))
