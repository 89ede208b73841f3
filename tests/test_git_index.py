"""plan/git_index.py: the index read as git writes it, and what the box does after a command
that registered a repository of its own (issue 32, git's code paths)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from claudeguard.plan import git_index
from claudeguard.plan.code_paths import UnreadableGit, code_paths

SCRIPT = git_index.__file__


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def _project(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q")
    (work / "deep" / "er").mkdir(parents=True)
    (work / "deep" / "er" / ("long-" * 30 + ".txt")).write_text("x\n")
    (work / "sp ace é.txt").write_text("y\n")
    _git(work, "init", "-q", "vend")
    _git(work / "vend", "commit", "-q", "--allow-empty", "-m", "v")
    _git(work, "add", ".")
    return work


@pytest.mark.parametrize("version", [2, 3, 4])
def test_every_entry_of_each_index_version_is_read_as_git_lists_it(tmp_path, version):
    work = _project(tmp_path)
    _git(work, "update-index", "--index-version", str(version))
    (work / "later.txt").write_text("z\n")
    _git(work, "add", "-N", "later.txt")  # intent to add: an extended flag (version 3 on)
    listed = _git(work, "ls-files", "-z").split("\0")[:-1]
    found = git_index.entries(str(work / ".git" / "index"))
    assert [name for name, _ in found] == listed
    assert git_index.gitlinks(str(work / ".git" / "index")) == ["vend"]


def test_an_index_that_cannot_be_read_refuses_the_box(tmp_path):
    work = _project(tmp_path)
    (work / ".git" / "index").write_bytes(b"DIRC\x00\x00\x00\x09\x00\x00\x00\x01")
    assert git_index.gitlinks(str(work / ".git" / "index")) is None
    with pytest.raises(UnreadableGit, match="index"):
        code_paths(str(work))


def test_a_registered_repository_of_the_users_is_a_git_dir_of_the_box(tmp_path):
    work = _project(tmp_path)
    code = code_paths(str(work))
    assert code.nested == [str(work / "vend")]
    assert str(work / "vend" / ".git" / "config") in code.existing
    assert (str(work / "vend" / ".git" / "config.worktree")) in code.must_not_appear


def _after(work: Path, session: Path) -> subprocess.CompletedProcess:
    """The box script's call, as it makes it: python -I -S, the standard library only."""
    return subprocess.run([sys.executable, "-I", "-S", SCRIPT, str(work), str(work / ".git"), str(work / ".git"),
                           str(session)], capture_output=True, text=True, timeout=60)


def _session(tmp_path: Path, work: Path) -> Path:
    """A session dir whose box was built knowing the project's ``vend`` repository."""
    session = tmp_path / "session"
    session.mkdir()
    (session / git_index.KNOWN_FILE).write_text(f"{work / 'vend'}\n")
    return session


def _register_nest(work: Path) -> None:
    """A repository ``nest`` made in the project and registered in its index (``git add nest``)."""
    _git(work, "init", "-q", "nest")
    _git(work / "nest", "commit", "-q", "--allow-empty", "-m", "x")
    _git(work, "add", "nest")


def test_a_repository_registered_after_the_build_is_moved_aside_and_again_when_put_back(tmp_path):
    work = _project(tmp_path)
    session = _session(tmp_path, work)
    assert _after(work, session).stderr == ""  # nothing new: nothing moved, nothing said
    _register_nest(work)
    out = _after(work, session)
    assert out.returncode == 0
    assert out.stderr.count(f"claudeguard: moved {work / 'nest'}/.git aside to "
                            f"{work / 'nest'}/.git.held-by-claudeguard: ") == 1, out.stderr
    assert not (work / "nest" / ".git").exists() and (work / "nest" / ".git.held-by-claudeguard" / "HEAD").exists()
    assert (work / "vend" / ".git").is_dir()  # the user's is left where it is
    # the agent puts it back: aside again, under a free name
    os.rename(work / "nest" / ".git.held-by-claudeguard", work / "nest" / ".git")
    (work / "nest" / ".git.held-by-claudeguard").mkdir()
    out = _after(work, session)
    assert out.stderr.count("aside to " + f"{work / 'nest'}/.git.held-by-claudeguard.2:") == 1, out.stderr
    assert (session / git_index.HELD_FILE).read_text() == f"{work / 'nest'}\n"


def test_a_directory_swapped_for_a_link_is_not_followed(tmp_path):
    work = _project(tmp_path)
    session = _session(tmp_path, work)
    _register_nest(work)
    elsewhere = tmp_path / "elsewhere"
    os.rename(work / "nest", elsewhere)
    os.symlink(elsewhere, work / "nest")  # the path now leads out of the project
    out = _after(work, session)
    assert (elsewhere / ".git").is_dir()  # nothing renamed through the link
    assert "could not be moved aside" in out.stderr and str(work / "vend") not in out.stderr


def test_the_clis_writing_tools_are_asked_about_another_repositorys_git_dir(tmp_path):
    from claudeguard.policy.protect import hit

    work = tmp_path / "we[ir]d*"  # the project's own path is literal in the pattern
    work.mkdir()
    _git(work, "init", "-q")
    asks = code_paths(str(work)).ask_writes
    for path in ("nest/.git", "nest/.git/config", "a/b/.git/hooks/pre-commit"):
        assert hit(str(work / path), asks) is not None, path
    for path in ("nest/.gitignore", "app.py", ".git/config"):  # the project's own .git: denied, not asked
        assert hit(str(work / path), asks) is None, path
    assert hit(str(tmp_path / "weid" / "n" / ".git"), asks) is None


def test_a_hidden_path_git_tracks_is_found_in_the_index(tmp_path):
    work = _project(tmp_path)
    (work / ".env").write_text("s\n")
    (work / "secrets").mkdir()
    (work / "secrets" / "k").write_text("k\n")
    (work / "ignored.env").write_text("i\n")
    _git(work, "add", ".env", "secrets")
    g = str(work / ".git")
    assert git_index.tracked_under(str(work), g, g, [str(work / "ignored.env")]) is None
    assert git_index.tracked_under(str(work), g, g, [str(tmp_path / "out")]) is None  # outside the work tree
    both = [str(work / "ignored.env"), str(work / ".env")]
    assert git_index.tracked_under(str(work), g, g, both) == str(work / ".env")
    assert git_index.tracked_under(str(work), g, g, [str(work / "secrets")]) == str(work / "secrets")
    assert git_index.tracked_under(str(work), g, g, [str(work / "sec")]) is None  # a prefix is not a parent


def test_a_gitlink_written_by_hand_that_leads_out_of_the_tree_moves_nothing(tmp_path):
    work = _project(tmp_path)
    session = _session(tmp_path, work)
    _register_nest(work)
    _git(tmp_path, "init", "-q", "v")  # a repository of the user's beside the project
    index = work / ".git" / "index"
    data = index.read_bytes()
    assert data.count(b"nest\0") == 1
    index.write_bytes(data.replace(b"nest\0", b"../v\0"))  # git refuses such a path; python writes it
    assert git_index.gitlinks(str(index)) == ["../v", "vend"]
    out = _after(work, session)
    assert (tmp_path / "v" / ".git").is_dir() and out.stderr == ""
