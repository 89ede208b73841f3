"""The files git, the user's editor and Claude Code run code from later, in a project (issue 32).

An agent that writes one of these runs code outside any sandbox, after the session: git runs
``core.fsmonitor``, ``core.hooksPath``, aliases and hooks from its config files, reads a git dir's
``commondir`` to find which config and hooks those are, and a submodule's ``update = !cmd`` from
``.gitmodules``; an editor runs tasks and terminal settings from ``.vscode/`` and ``.idea/``;
Claude Code runs ``.mcp.json`` servers and ``.claude/`` commands and agents. The list follows
Anthropic's sandbox-runtime's mandatory one (``.gitconfig``, ``.gitmodules``, the shell start
files, ``.ripgreprc``, ``.mcp.json``, ``.vscode/``, ``.idea/``, ``.claude/commands``,
``.claude/agents``, ``.git/hooks``, ``.git/config``, ``commondir``, ``config.worktree``, linked
worktrees' and every submodule's git dir), found wherever git looks:

- ``git_dirs``: the work tree's git dir and common dir, through a ``.git`` file (a linked work
  tree, a submodule) and through a ``commondir`` file in either;
- ``code_paths``: what of them exists (the box makes it read-only), what must not appear (a
  ``commondir`` or ``config.worktree`` in a git dir that has none: the box removes one a command
  made, plan/sandbox.py), what the CLI's writing tools are denied (the git dirs' code files) and
  what they are asked about (the editor's and the CLI's own, ``policy.protect``).

A repository nested in the work tree and registered in the index (its git dir in the work tree,
not absorbed into ``modules/``) is one more git dir (``plan/git_index.py``); one the agent
registers during the session has its ``.git`` moved aside by the box after the command. The CLI's
writing tools are asked about any other ``.git`` below the project. What it cannot cover, said in
the README: the project's own scripts (``Makefile``, ``package.json``) that the user runs later.

In the paths layer with ``plan/sandbox.py``; the standard library only.
"""

from __future__ import annotations

import os

from claudeguard.plan.git_index import embedded, git_dir_of

WHY_GIT = "git runs the commands it names outside any sandbox (core.fsmonitor, core.hooksPath, aliases, hooks)"
WHY_GITDIR = "git reads its config and hooks from the directory it names"
WHY_NESTED = "a repository's git dir: once registered in the project, git runs what its config names"
WHY_EDITOR = "your editor or Claude Code runs what it names later, outside any sandbox"
# In a git dir: files whose content is code or says where code is.
GITDIR_CODE = ("config", "hooks", "commondir", "config.worktree")
# New in a git dir that has none: never made by an ordinary git command in a work tree.
GITDIR_MUST_NOT_APPEAR = ("commondir", "config.worktree")
# In the work tree: the editor's, git's and the CLI's files (the CLI's settings files are the
# guard's own protected paths already).
WORK_TREE_CODE = (".gitmodules", ".gitconfig", ".vscode", ".idea", ".ripgreprc", ".mcp.json",
                  os.path.join(".claude", "commands"), os.path.join(".claude", "agents"),
                  ".bashrc", ".bash_profile", ".zshrc", ".zprofile", ".profile")


def _read_line(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.readline().strip()
    except (OSError, UnicodeDecodeError):
        return None


def git_dirs(root: str) -> tuple[str | None, str | None]:
    """(git dir, common dir) of the work tree at ``root``: ``.git`` itself or, for a ``.git``
    file (``gitdir: ...``), the dir it names; the common dir is what that dir's ``commondir``
    names, else the git dir."""
    gitdir = git_dir_of(root)
    if gitdir is None:
        return None, None
    common = _read_line(os.path.join(gitdir, "commondir"))
    return gitdir, os.path.normpath(os.path.join(gitdir, common)) if common else gitdir


def _sub_git_dirs(base: str, limit: int = 200) -> list[str]:
    """The submodules' git dirs below a git dir (``modules/<name>/``, nested), and the linked
    work trees' (``worktrees/<name>/``): at most ``limit``."""
    out: list[str] = []
    todo = [base]
    while todo and len(out) < limit:
        here = todo.pop()
        for kind in ("modules", "worktrees"):
            top = os.path.join(here, kind)
            try:
                names = sorted(os.listdir(top))
            except OSError:
                continue
            for name in names:
                path = os.path.join(top, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    out.append(path)
                    if os.path.exists(os.path.join(path, "HEAD")) or kind == "modules":
                        todo.append(path)  # a submodule's own submodules
    return out[:limit]


class CodePaths:
    """What of a project's code paths exists and what must not appear (absolute paths)."""

    __slots__ = ("existing", "must_not_appear", "deny_writes", "ask_writes", "nested")

    def __init__(self) -> None:
        self.existing: list[str] = []  # read-only in the box
        self.must_not_appear: list[str] = []  # removed by the box when a command makes one
        self.deny_writes: list[tuple[str, str]] = []  # (path, why): the CLI's writing tools are denied
        self.ask_writes: list[tuple[str, str]] = []  # (path, why): the CLI's writing tools ask first
        self.nested: list[str] = []  # registered repositories whose git dir is in the work tree


class UnreadableGit(Exception):
    """Git's metadata of the work tree cannot be read: which files git runs code from is unknown."""


def _check_readable(root: str, dirs: list[str]) -> None:
    dot = os.path.join(root, ".git")
    if os.path.lexists(dot) and not dirs:
        raise UnreadableGit(f"{dot} names no git dir that can be read")
    for d in dirs:
        try:
            os.listdir(d)
        except OSError as exc:
            raise UnreadableGit(f"git's metadata at {d} cannot be read ({exc.strerror})") from None


def code_paths(root: str) -> CodePaths:
    """The code paths of the work tree at ``root`` (``plan.sandbox.project_root``); UnreadableGit
    when git's metadata cannot be read (the box refuses to start rather than run with gaps)."""
    out = CodePaths()
    gitdir, common = git_dirs(root)
    dirs = [d for d in dict.fromkeys((gitdir, common)) if d]
    _check_readable(root, dirs)
    for d in list(dirs):
        dirs += [s for s in _sub_git_dirs(d) if s not in dirs]
    if gitdir and common:
        nested = embedded(root, gitdir, common)
        if nested is None:
            raise UnreadableGit(f"git's index at {os.path.join(gitdir, 'index')} cannot be read")
        out.nested = [repo for repo, _ in nested]
        dirs += [inner for _, inner in nested if inner not in dirs]
    for d in dirs:
        for name in GITDIR_CODE:
            path = os.path.join(d, name)
            out.deny_writes.append((path, f"{WHY_GITDIR if name == 'commondir' else WHY_GIT}"))
            if os.path.lexists(path):
                out.existing.append(path)
            elif name in GITDIR_MUST_NOT_APPEAR:
                out.must_not_appear.append(path)
        for kind in ("modules", "worktrees"):
            out.deny_writes.append((os.path.join(d, kind), "a submodule's or a linked work tree's git dir: "
                                                          + WHY_GIT))
    if os.path.isfile(os.path.join(root, ".git")):
        out.existing.append(os.path.join(root, ".git"))  # a linked work tree's or submodule's pointer
        out.deny_writes.append((os.path.join(root, ".git"), WHY_GITDIR))
    # Any other repository's git dir below the project (one the agent makes: git would enter it
    # once it is registered): not the CLI's writing tools' to fill unasked.
    base = "".join(f"[{c}]" if c in "*?[" else c for c in root)  # a pattern (policy.protect), root literal
    out.ask_writes += [(os.path.join(base, "*", ".git"), WHY_NESTED),
                       (os.path.join(base, "*", ".git", "*"), WHY_NESTED)]
    for name in WORK_TREE_CODE:
        path = os.path.join(root, name)
        out.ask_writes.append((path, WHY_EDITOR))
        if os.path.lexists(path):
            out.existing.append(path)
    return out
