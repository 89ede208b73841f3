"""Our screen model (``shim/screen.py``) against ``pyte``: run ``python bench/screen_libs.py``.

1. Records the real CLIs (each pinned version that is installed) drawing a session offline: the
   banner, a prompt, a Bash permission dialog, a file-creation dialog, the answers, the reply and
   Ctrl-C twice, at 40 x 120, chunk by chunk as a relay reads them.
2. Correctness: both models are fed the same chunks; after each chunk their visible rows are
   compared, and the dialog parser (``dialogs.find_dialog``) is run on each model's rows. A
   model is right where the parser finds the dialogs the CLI showed (title, kind, choices).
3. Speed: MB/s of ``feed`` over the recordings repeated to ~4 MB, and over a synthetic redraw
   stream (colour runs, cursor moves, line erases) of the same size.

Needs pexpect and pyte (``pip install pyte``: a measurement only, not a dependency). Everything
it starts is stopped by pid; its files live in a temporary directory removed at the end.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from claudeguard.shim.dialogs.parse import find_dialog  # noqa: E402 - after the sys.path set-up above
from claudeguard.shim.dialogs.tables import patterns_for  # noqa: E402 - after the sys.path set-up above
from claudeguard.shim.screen import Screen  # noqa: E402 - after the sys.path set-up above

ROWS, COLS = 40, 120
KEY = "sk-ant-api03-offline-bench-key-0123456789abcdef"
TURNS = [{"tool_use": {"name": "Bash", "input": {"command": "echo hello > out.txt", "description": "write out.txt"}}},
         {"tool_use": {"name": "Write", "input": {"file_path": "notes.txt", "content": "a note\n"}}},
         {"text": "made it"}]


def record(cli: str, tmp: Path) -> list[bytes]:
    """The chunks the CLI wrote, as a relay reads them (64 KiB reads)."""
    import pexpect

    from claudeguard.testing.model_server import ModelServer
    from claudeguard.testing.offline_home import offline_env, prepare_home

    home, work = tmp / "home", tmp / "work"
    shutil.rmtree(tmp, ignore_errors=True)
    work.mkdir(parents=True)
    prepare_home(home, cwd=work, api_key=KEY)
    server = ModelServer([{"match": "run it", "turns": TURNS}]).start()
    chunks: list[bytes] = []
    screen = Screen(ROWS, COLS)
    child = pexpect.spawn(cli, ["--permission-mode", "default", "run it"], env=offline_env(home, server.url, KEY),
                          cwd=str(work), dimensions=(ROWS, COLS))
    try:
        def until(text: str, timeout: float = 60) -> None:
            deadline = time.monotonic() + timeout
            while text not in " ".join(screen.text().split()):
                if time.monotonic() > deadline:
                    raise SystemExit(f"{cli}: {text!r} never drawn; screen:\n{screen.text()}")
                try:
                    data = child.read_nonblocking(65536, timeout=0.2)
                except pexpect.TIMEOUT:
                    continue
                chunks.append(data)
                screen.feed(data)

        until("Do you want to proceed?")
        child.send("\r")  # the highlighted "Yes"
        until("Do you want to create notes.txt?")
        child.send("\r")
        until("made it")
        for _ in range(2):
            time.sleep(0.5)  # the CLI reads a second Ctrl-C only after it drew the first's hint
            child.send("\x03")
        try:
            while True:
                chunks.append(child.read_nonblocking(65536, timeout=10))
        except (pexpect.EOF, pexpect.TIMEOUT):
            pass
    finally:
        if child.isalive():
            child.kill(signal.SIGKILL)
        child.close(force=True)
        server.stop()
    return chunks


def _pyte(rows: int, cols: int):  # type: ignore[no-untyped-def]
    import pyte

    screen = pyte.Screen(cols, rows)
    return screen, pyte.ByteStream(screen)


def _dialog(lines: list[str], version: str) -> tuple | None:
    found = find_dialog(lines, patterns_for(version))
    return None if found is None else (found.kind, found.title, tuple(found.labels))


def compare(chunks: list[bytes], version: str) -> dict:
    ours = Screen(ROWS, COLS)
    theirs, stream = _pyte(ROWS, COLS)
    differ, dialogs_ours, dialogs_pyte, dialog_differs = 0, set(), set(), 0
    example = None
    for chunk in chunks:
        ours.feed(chunk)
        stream.feed(chunk)
        a = ours.lines()
        b = [line.replace("\xa0", " ").rstrip() for line in theirs.display]
        if a != b:
            differ += 1
            if example is None:
                row = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
                example = (row, a[row], b[row])
        da, db = _dialog(a, version), _dialog(b, version)
        dialogs_ours.add(da)
        dialogs_pyte.add(db)
        dialog_differs += da != db
    return {"chunks": len(chunks), "bytes": sum(map(len, chunks)), "rows_differ": differ, "example": example,
            "dialogs_ours": sorted(d for d in dialogs_ours if d), "dialogs_pyte": sorted(d for d in dialogs_pyte if d),
            "dialog_differs": dialog_differs}


def synthetic(size: int) -> list[bytes]:
    """A TUI redraw stream: cursor moves, line erases, colour runs, box drawing, a wide char."""
    frame = bytearray()
    for row in range(1, ROWS + 1):
        frame += b"\x1b[%d;1H\x1b[2K\x1b[38;5;%dm\xe2\x94\x82 " % (row, row % 200)
        frame += ("row %02d \u276f " % row).encode() + b"text " * 18 + b"\x1b[0m\xe2\x94\x82"
    chunks = []
    while sum(map(len, chunks)) < size:
        chunks.append(bytes(frame))
    return chunks


def speed(chunks: list[bytes], target: int) -> tuple[float, float]:
    """MB/s of ours and pyte feeding ``chunks`` repeated to about ``target`` bytes."""
    total = sum(map(len, chunks))
    reps = max(1, target // max(1, total))
    out = []
    for make in ("ours", "pyte"):
        if make == "ours":
            screen = Screen(ROWS, COLS)
            feed = screen.feed
        else:
            _, stream = _pyte(ROWS, COLS)
            feed = stream.feed
        started = time.perf_counter()
        for _ in range(reps):
            for chunk in chunks:
                feed(chunk)
        out.append(total * reps / (1 << 20) / (time.perf_counter() - started))
    return out[0], out[1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=4.0)
    args = parser.parse_args()
    from claudeguard.testing.cli_install import PINNED_VERSIONS, cli_path

    tmp = Path(tempfile.mkdtemp(prefix="claudeguard-bench-screen-"))
    try:
        for version in PINNED_VERSIONS:
            cli = cli_path(version)
            if cli is None:
                print(f"{version}: not installed (python -m claudeguard.testing.cli_install)")
                continue
            chunks = record(str(cli), tmp / version)
            result = compare(chunks, version)
            mine, pytes = speed(chunks, int(args.mb * (1 << 20)))
            print(f"{version}: {result['chunks']} chunks, {result['bytes']} bytes; rows differ after "
                  f"{result['rows_differ']} chunks; dialog verdicts differ after {result['dialog_differs']}")
            print(f"  dialogs found: ours {result['dialogs_ours']}")
            print(f"                 pyte {result['dialogs_pyte']}")
            if result["example"]:
                row, a, b = result["example"]
                print(f"  first differing row {row}:\n    ours {a!r}\n    pyte {b!r}")
            print(f"  feed speed: ours {mine:.1f} MB/s, pyte {pytes:.1f} MB/s", flush=True)
        mine, pytes = speed(synthetic(1 << 20), int(args.mb * (1 << 20)))
        print(f"synthetic redraw stream: ours {mine:.1f} MB/s, pyte {pytes:.1f} MB/s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
