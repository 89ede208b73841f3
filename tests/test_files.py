"""claudeguard.files: the one atomic writer and the one line appender every private file goes
through: modes, links, atomicity, and what is left behind on failure."""

from __future__ import annotations

import os
import threading

import pytest

from claudeguard import files


def _names(directory) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.mark.parametrize("data", ["text", b"bytes", "x" * 1_000_000])
def test_write_atomic_makes_a_private_file_and_leaves_no_temp(tmp_path, data):
    old = os.umask(0o022)
    try:
        files.write_atomic(tmp_path / "f", data)
    finally:
        os.umask(old)
    expected = data if isinstance(data, bytes) else data.encode()
    assert (tmp_path / "f").read_bytes() == expected
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o600
    assert _names(tmp_path) == ["f"]


def test_write_atomic_tightens_an_existing_loose_file_unless_its_mode_is_kept(tmp_path):
    path = tmp_path / "f"
    path.write_text("old")
    path.chmod(0o644)
    files.write_atomic(path, "new", keep_mode=True, durable=True)
    assert path.stat().st_mode & 0o777 == 0o644 and path.read_text() == "new"
    files.write_atomic(path, "newer")
    assert path.stat().st_mode & 0o777 == 0o600 and path.read_text() == "newer"


def test_write_atomic_replaces_a_link_at_its_name_and_never_writes_through_it(tmp_path):
    target = tmp_path / "target"
    target.write_text("keep")
    target.chmod(0o644)
    (tmp_path / "d").mkdir()
    link = tmp_path / "d" / "f"
    link.symlink_to(target)
    files.write_atomic(link, "mine", keep_mode=True)  # a link's target mode is not "kept" either
    assert target.read_text() == "keep" and target.stat().st_mode & 0o777 == 0o644
    assert not link.is_symlink() and link.read_text() == "mine"
    assert link.stat().st_mode & 0o777 == 0o600


def test_a_failed_write_atomic_keeps_the_old_file_and_removes_its_temp(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_text("old")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        files.write_atomic(path, "new")
    monkeypatch.undo()
    assert path.read_text() == "old" and _names(tmp_path) == ["f"]


def test_concurrent_writers_leave_one_whole_file(tmp_path):
    path = tmp_path / "f"
    payloads = [str(n) * 50_000 for n in range(8)]
    errors: list[BaseException] = []

    def write(data: str) -> None:
        try:
            for _ in range(20):
                files.write_atomic(path, data)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert path.read_text() in payloads and _names(tmp_path) == ["f"]


def test_append_line_creates_a_private_file_and_tightens_a_loose_one(tmp_path):
    path = tmp_path / "log.jsonl"
    files.append_line(path, b'{"n":1}\n')
    assert path.stat().st_mode & 0o777 == 0o600
    path.chmod(0o644)
    files.append_line(path, b'{"n":2}\n')
    assert path.read_bytes() == b'{"n":1}\n{"n":2}\n' and path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("planted", ["symlink", "fifo"])
def test_append_line_refuses_what_is_not_a_regular_file_of_ours(tmp_path, planted):
    target = tmp_path / "target"
    target.write_text("keep")
    path = tmp_path / "log.jsonl"
    if planted == "symlink":
        path.symlink_to(target)
    else:
        os.mkfifo(path)
        keep_open = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # so that opening it to write does not block
    try:
        with pytest.raises(OSError):
            files.append_line(path, b"x\n")
    finally:
        if planted == "fifo":
            os.close(keep_open)
    assert target.read_text() == "keep"


def test_append_line_ends_a_torn_line_and_reports_it(tmp_path, monkeypatch):
    path = tmp_path / "log.jsonl"
    monkeypatch.setattr(files, "_write", lambda fd, data: os.write(fd, data[:3]))
    with pytest.raises(OSError, match="short write"):
        files.append_line(path, b'{"n":1}\n')
    monkeypatch.undo()
    files.append_line(path, b'{"n":2}\n')
    assert path.read_bytes().splitlines() == [b'{"n', b'{"n":2}']


@pytest.mark.parametrize(("content", "expected"), [
    (b'{"a": 1}', {"a": 1}),
    ('{"é": "ü"}'.encode(), {"é": "ü"}),
    (b"[1, 2]", None),  # not an object
    (b'{"a": ', None),  # half a file
    (b"\xff\xfe", None),  # not UTF-8
    (None, None),  # missing
])
def test_read_json_gives_an_object_or_none(tmp_path, content, expected):
    path = tmp_path / "r.json"
    if content is not None:
        path.write_bytes(content)
    assert files.read_json(path) == expected


def test_read_json_does_not_follow_a_link(tmp_path):
    (tmp_path / "target.json").write_text('{"planted": true}')
    (tmp_path / "r.json").symlink_to(tmp_path / "target.json")
    assert files.read_json(tmp_path / "r.json") is None


def test_remove_tree_removes_everything_below_and_follows_no_link(tmp_path):
    """The session dir's removal (the launcher's last step): files, dirs, a FIFO, links (removed,
    never followed: what a link names outside stays), a tree deeper than Python's recursion
    limit, and a dir given as a link is not entered."""
    import sys

    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "file").write_text("kept")
    top = tmp_path / "session"
    (top / "boxes" / "a").mkdir(parents=True)
    (top / "session.json").write_text("{}")
    (top / "boxes" / "a" / "x").write_text("x")
    os.mkfifo(top / "box-want")
    (top / "to-dir").symlink_to(outside / "keep")
    (top / "boxes" / "to-file").symlink_to(outside / "keep" / "file")
    deep = top / "tmp"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(sys.getrecursionlimit() + 50):  # deeper than a recursive walk could go
        os.mkdir("d", dir_fd=fd)
        fd, old = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(old)
    os.close(fd)
    files.remove_tree(str(top))
    assert not os.path.lexists(top)
    assert (outside / "keep" / "file").read_text() == "kept"
    (tmp_path / "link").symlink_to(outside)
    files.remove_tree(str(tmp_path / "link"))  # a link as the top: nothing removed
    assert (outside / "keep" / "file").read_text() == "kept" and (tmp_path / "link").is_symlink()
    files.remove_tree(str(tmp_path / "missing"))  # nothing there: nothing to say
