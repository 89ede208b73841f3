"""Our pty relay against pexpect's ``interact()``: run ``python bench/pty_libs.py [--mb 32]``.

Each relay runs under an outer pty (the "user's terminal", which this script reads) with a
writer program as the child:

- ``direct``: the writer on the outer pty itself (the floor: no relay);
- ``ours``: ``python -m claudeguard.shim.pty_relay`` (the whole product relay: the leader, raw
  mode, the screen model read on its schedule, the dialog router);
- ``pexpect``: ``pexpect.spawn(...).interact()`` with no filter (a bare relay);
- ``pexpect+screen``: the same with ``output_filter`` feeding our ``Screen`` (interact's only
  hook for watching the screen: it runs on every chunk, in the relay's thread).

Measured: throughput (MB/s of writer output reaching the outer terminal), per-line delay at
4,000 lines/s (p50/p99, ms), and whether a window size change of the outer terminal reaches the
child (SIGWINCH forwarding). Needs pexpect (the test extra). Everything it starts is stopped by
pid; its files live in a temporary directory that is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WRITER = r"""
import os, signal, struct, sys, time, fcntl, termios
mode = sys.argv[1]
out = sys.stdout.buffer
def size(*_):
    rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(1, termios.TIOCGWINSZ, b"\0" * 8))
    out.write(b"SIZE %dx%d\r\n" % (rows, cols)); out.flush()
signal.signal(signal.SIGWINCH, size)
out.write(b"START\r\n"); out.flush()
if mode == "bulk":
    # terminal-like output: lines of text with colour codes, as a TUI redraw would send
    line = (b"\x1b[32m" + b"x" * 60 + b"\x1b[0m " + b"y" * 50 + b"\r\n")
    block = line * (65536 // len(line))
    left = int(sys.argv[2]) * 1024 * 1024
    while left > 0:
        out.write(block); left -= len(block)
    out.flush()
elif mode == "lines":
    n, rate = int(sys.argv[2]), float(sys.argv[3])
    start = time.monotonic()
    for i in range(n):
        due = start + i / rate
        while time.monotonic() < due:
            pass
        out.write(b"T %.6f\r\n" % time.time()); out.flush()
elif mode == "winch":
    time.sleep(3)
out.write(b"END\r\n"); out.flush()
"""

INTERACT = r"""
import sys, pexpect
screen = None
if sys.argv[1] == "screen":
    sys.path.insert(0, sys.argv[2])
    from claudeguard.shim.screen import Screen
    screen = Screen(24, 80)
def watch(data):
    screen.feed(data)
    return data
child = pexpect.spawn(sys.argv[3], sys.argv[4:], dimensions=(24, 80))
child.interact(output_filter=watch if screen else None)
child.close()
sys.exit(child.exitstatus or 0)
"""


def _argv(kind: str, tmp: Path, writer: list[str]) -> list[str]:
    py = sys.executable
    if kind == "direct":
        return writer
    if kind == "ours":
        return [py, "-m", "claudeguard.shim.pty_relay", "--idle", "30", "--session-dir", str(tmp / "session"),
                "--session-id", "bench", "--", *writer]
    return [py, str(tmp / "interact.py"), "screen" if kind == "pexpect+screen" else "plain", str(ROOT), *writer]


def _spawn(argv: list[str], tmp: Path):  # type: ignore[no-untyped-def]
    import pexpect  # only as the outer terminal: the same host for every relay

    env = dict(os.environ, PYTHONPATH=str(ROOT), CLAUDEGUARD_RUNTIME_DIR=str(tmp / "rt"),
               CLAUDEGUARD_LOG_DIR=str(tmp / "log"))
    return pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(tmp), dimensions=(24, 80), timeout=120)


def _read_all(child, on_data=None) -> bytes:  # type: ignore[no-untyped-def]
    out = bytearray()
    while True:
        try:
            data = os.read(child.child_fd, 1 << 16)
        except OSError:
            break
        if not data:
            break
        if on_data:
            on_data(data)
        out += data
    return bytes(out)


def _stop(child) -> None:  # type: ignore[no-untyped-def]
    if child.isalive():
        child.kill(signal.SIGKILL)
    child.close(force=True)


def throughput(kind: str, tmp: Path, mb: int) -> float:
    writer = [sys.executable, str(tmp / "writer.py"), "bulk", str(mb)]
    child = _spawn(_argv(kind, tmp, writer), tmp)
    try:
        child.expect(b"START", timeout=30)
        started = time.perf_counter()
        got = len(child.buffer) + len(_read_all(child))
        took = time.perf_counter() - started
    finally:
        _stop(child)
    assert got >= mb * 1024 * 1024 * 0.99, f"{kind}: only {got} bytes arrived"
    return mb / took


def line_delay(kind: str, tmp: Path, n: int = 8000, rate: float = 4000.0) -> tuple[float, float]:
    writer = [sys.executable, str(tmp / "writer.py"), "lines", str(n), str(rate)]
    child = _spawn(_argv(kind, tmp, writer), tmp)
    delays: list[float] = []
    pending = bytearray()

    def on_data(data: bytes) -> None:
        now = time.time()
        pending.extend(data)
        while b"\n" in pending:
            line, _, rest = bytes(pending).partition(b"\n")
            pending[:] = rest
            if line.startswith(b"T "):
                delays.append((now - float(line[2:].strip())) * 1000)

    try:
        child.expect(b"START", timeout=30)
        on_data(child.buffer)
        _read_all(child, on_data)
    finally:
        _stop(child)
    delays.sort()
    return statistics.median(delays), delays[int(len(delays) * 0.99)]


def winsize(kind: str, tmp: Path) -> bool:
    writer = [sys.executable, str(tmp / "writer.py"), "winch"]
    child = _spawn(_argv(kind, tmp, writer), tmp)
    try:
        child.expect(b"START", timeout=30)
        time.sleep(0.5)  # the relay is up and relaying: the resize lands during the session
        child.setwinsize(40, 100)
        try:
            child.expect(b"SIZE 40x100", timeout=2)
            return True
        except Exception:  # noqa: BLE001 - pexpect.TIMEOUT / EOF: the size never arrived
            return False
    finally:
        _stop(child)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="claudeguard-bench-pty-"))
    try:
        (tmp / "writer.py").write_text(WRITER)
        (tmp / "interact.py").write_text(INTERACT)
        (tmp / "rt").mkdir(mode=0o700)
        (tmp / "session").mkdir(mode=0o700)
        print(f"{'relay':16} {'MB/s (median)':>14} {'p50 ms':>8} {'p99 ms':>8}  SIGWINCH reaches the child")
        for kind in ("direct", "ours", "pexpect", "pexpect+screen"):
            rates = [throughput(kind, tmp, args.mb) for _ in range(args.runs)]
            p50, p99 = line_delay(kind, tmp)
            print(f"{kind:16} {statistics.median(rates):14.0f} {p50:8.2f} {p99:8.2f}  {winsize(kind, tmp)}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
