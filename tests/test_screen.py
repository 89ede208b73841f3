"""The screen model: a grid fed with terminal output, whatever the chunking; and screen.json."""

from __future__ import annotations

import json
import os
import stat

from hypothesis import given, settings, strategies as st

from claudeguard.shim.screen import Screen, read_screen_state, write_screen_state

# A frame in the style of the 2.1.330 TUI: alternate screen, absolute and relative cursor moves
# for spaces, SGR everywhere, a title OSC, mode switches.
FRAME = (
    "\x1b7\x1b[r\x1b8\x1b[?25h\x1b[?2004h\x1b]0;✳ Claude Code\x07\x1b[?1049h\x1b[2J\x1b[H\x1b[?1000h\x1b[?25l"
    "\x1b[H\r\x1b[1B\x1b[31m ▐\x1b[40m▛███▛█\x1b[12G\x1b[39m\x1b[49m\x1b[1mClaude Code\x1b[24G\x1b[22m\x1b[2mv2.1.330"
    "\r\x1b[2B\x1b[22m────────────────────\r\x1b[1B Bash\x1b[1Ccommand\r\x1b[1B Do you want to\x1b[17Gproceed?"
    "\r\x1b[1B ❯ 1. Yes\r\x1b[1B\x1b[3G 2. No\r\x1b[1B Esc to cancel"
)


def test_cursor_addressed_text_reads_as_a_person_sees_it():
    s = Screen(10, 40)
    s.feed(FRAME)
    lines = s.lines()
    assert lines[1] == " ▐▛███▛█   Claude Code v2.1.330"
    assert lines[3] == "─" * 20
    assert lines[4:9] == [" Bash command", " Do you want to proceed?", " ❯ 1. Yes", "   2. No", " Esc to cancel"]
    assert s.title == "✳ Claude Code"
    assert s.alternate and s.modes >= {"1049", "1000", "2004"} and s.cursor_hidden


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=60))
@settings(max_examples=60, deadline=None)
def test_any_chunking_gives_the_same_screen(cuts):
    whole = Screen(10, 40)
    whole.feed(FRAME.encode())
    pieces = Screen(10, 40)
    data = FRAME.encode()  # multi-byte characters and escapes get cut anywhere
    pos = 0
    for n in cuts:
        pieces.feed(data[pos:pos + n])
        pos += n
    pieces.feed(data[pos:])
    assert pieces.lines() == whole.lines()
    assert pieces.modes == whole.modes and pieces.title == whole.title


@given(st.binary(max_size=400))
@settings(max_examples=200, deadline=None)
def test_garbage_never_raises_and_keeps_the_grid_shape(data):
    s = Screen(5, 12)
    s.feed(data)
    s.feed(b"\x1b[3;4Hok")
    assert len(s.grid) == 5 and all(len(row) == 12 for row in s.grid)
    assert 0 <= s.x < 12 and 0 <= s.y < 5


def test_erase_and_overwrite():
    s = Screen(4, 10)
    s.feed("abcdefghij\r\n0123456789")
    s.feed("\x1b[1;4H\x1b[K")  # erase to end of line 1 from column 4
    s.feed("\x1b[2;3H\x1b[1K")  # erase line 2 up to column 3
    assert s.lines()[:2] == ["abc", "   3456789"]
    s.feed("\x1b[2J")
    assert s.lines() == [""] * 4
    s.feed("\x1b[2;2Hxy\x1b[2DZ")
    assert s.lines()[1] == " Zy"


def test_autowrap_scroll_and_scroll_region():
    s = Screen(3, 5)
    s.feed("12345678")  # wraps at the margin
    assert s.lines() == ["12345", "678", ""]
    s.feed("\r\nline3\r\nline4")  # scrolls one line up
    assert s.lines() == ["678", "line3", "line4"]
    s = Screen(4, 5)
    s.feed("a\r\nb\r\nc\r\nd")
    s.feed("\x1b[2;3r\x1b[3;1H\n")  # region rows 2-3: only they scroll
    assert s.lines() == ["a", "c", "", "d"]


def test_insert_delete_lines_and_chars():
    s = Screen(4, 6)
    s.feed("one\r\ntwo\r\nthree")
    s.feed("\x1b[2;1H\x1b[L")
    assert s.lines() == ["one", "", "two", "three"]
    s.feed("\x1b[M")
    assert s.lines() == ["one", "two", "three", ""]
    s.feed("\x1b[1;1H\x1b[2P")
    assert s.lines()[0] == "e"
    s.feed("\x1b[1;1H\x1b[2@")
    assert s.lines()[0] == "  e"


def test_alternate_screen_keeps_the_main_one():
    s = Screen(3, 10)
    s.feed("main text")
    s.feed("\x1b[?1049h\x1b[Halt")
    assert s.lines()[0] == "alt"
    s.feed("\x1b[?1049l")
    assert s.lines()[0] == "main text" and not s.alternate


def test_wide_and_combining_characters():
    s = Screen(2, 8)
    s.feed("日本x")
    assert s.lines()[0] == "日本x" and s.x == 5
    s.feed("\r\ne\u0301!")
    assert s.lines()[1] == "e\u0301!"


def test_resize_keeps_the_bottom_and_clamps():
    s = Screen(4, 10)
    s.feed("1\r\n2\r\n3\r\n4 long")
    s.resize(2, 4)
    assert s.lines() == ["3", "4 lo"]
    s.resize(3, 6)
    assert s.lines() == ["3", "4 lo", ""] and (s.rows, s.cols) == (3, 6)
    s.feed("\x1b[9;9Hz")
    assert s.lines()[2] == "     z"


def test_reset_sequence_undoes_modes_left_on():
    s = Screen(3, 10)
    s.feed("\x1b[?1049h\x1b[?1000h\x1b[?1006h\x1b[?2004h\x1b[?25l\x1b[>1u")
    reset = s.reset_sequence()
    for seq in ("\x1b[<u", "\x1b[?1000l", "\x1b[?1006l", "\x1b[?2004l", "\x1b[?25h"):
        assert seq in reset
    assert reset.index("\x1b[?1049l") > reset.index("\x1b[?1000l")  # the screen switch comes last
    s.feed("\x1b[?1000l\x1b[?1006l\x1b[?2004l\x1b[?25h\x1b[<u\x1b[?1049l")
    assert s.reset_sequence() == ""  # a clean exit leaves nothing to undo


def test_tail_skips_blank_rows():
    s = Screen(6, 10)
    s.feed("a\r\n\r\nb\r\n\r\n\r\nc")
    assert s.tail(2) == ["b", "c"] and s.tail() == ["a", "b", "c"]


def test_screen_state_file_is_private_and_atomic(tmp_path):
    assert read_screen_state(tmp_path) is None
    assert read_screen_state(None) is None
    write_screen_state(tmp_path, {"dialog": "Bash command", "tail": ["❯ 1. Yes"]})
    path = tmp_path / "screen.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_screen_state(tmp_path) == {"dialog": "Bash command", "tail": ["❯ 1. Yes"]}
    write_screen_state(tmp_path, {"dialog": None})
    assert json.loads(path.read_text()) == {"dialog": None}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["screen.json"]  # no temp file left
    path.write_text("{not json")
    assert read_screen_state(tmp_path) is None
    write_screen_state(tmp_path / "missing-dir", {"x": 1})  # never raises
