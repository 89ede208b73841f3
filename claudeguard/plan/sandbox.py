"""The box every Bash call of a guarded session runs in: our own bubblewrap, which the real CLI
enters through ``CLAUDE_CODE_SHELL_PREFIX`` (docs/design.md, "The sandbox").

Why this way (bench/shell_prefix_probe.py, bench/RESULTS.md): on 2.1.197, 2.1.330 and 2.1.332 the
CLI runs every Bash command, a background one and a ``!`` command typed at the keyboard as
``PREFIX '<its own framed command>'``, whoever allowed it (a rule, a human, a dialog, the CLI's
own rules when the guard's hook is down); the guard's ``--settings`` ``env`` block wins over
any project, local or user ``env`` block that would change or empty the variable. The CLI's own
sandbox is pinned off instead: it sends the guard's HTTP hooks through its proxy, which refuses
them, and costs +72..+103 ms a call against our +15..+19 ms.

The session's box is a small sh script in its session dir (``box``, hidden from the box itself)
that execs ``bwrap`` with the argv built here (``bwrap_args``): a read-only root; the project
(its git root), the git dirs and the ``[sandbox] allow_write`` paths writable; a private /tmp;
``.claude/``, ``.git/hooks``, ``.git/config`` and ``.mcp.json`` read-only; the guard's own dirs
and files (``paths.guard_paths``) behind an empty mode-0 tmpfs or file; its own pid and IPC
namespaces, a new session, no capabilities, and a seccomp filter (``seccomp_filter``) that
refuses AF_UNIX sockets and io_uring. The CLI applies the prefix to its command hooks, MCP
stdio servers and status line too: the script boxes only what carries the CLI's Bash frame
(``FRAME``) on a CLI version where that frame was measured, and everything but the guard's own
entries elsewhere (fail closed).

This module sits in the paths layer (tests/test_layers.py): the gate imports it for
``wrap_bash_input``, and it imports nothing above ``paths``.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Mapping, TypedDict

    from claudeguard.config.load import Config
    from claudeguard.paths import GuardPaths

    class BoxSpec(TypedDict):
        """A session's box, as the gate finds it (``session_box``)."""

        prefix: str  # the box script: CLAUDE_CODE_SHELL_PREFIX
        unbox: str  # the dir of one-time marks that let one human-approved call out of the box

    class AfterCommand(TypedDict):
        """What the box script checks once a command's box has ended (``box_script``)."""

        must_not_appear: list[str]  # git's code paths a command may not make: removed
        git: tuple[str, str, str] | None  # (work tree, git dir, common dir): a repository registered


PREFIX_VAR = "CLAUDE_CODE_SHELL_PREFIX"
SHELL_VAR = "CLAUDE_CODE_SHELL"  # the CLI's shell: the entry's shell way in, where it can be (``_shell_way``)
LEAVE_FLAG = "dangerouslyDisableSandbox"  # the Bash input's request to run outside the sandbox
UNBOX_MARK = "claudeguard-unbox-"
# The tail the CLI puts after every Bash tool command (``... && eval '<command>' < /dev/null &&
# pwd -P >| <tmp>/claude-XXXX-cwd``) and after nothing else it runs through the prefix (hooks,
# MCP servers, the status line): measured on these versions (bench/shell_prefix_probe.py,
# bench/shell_prefix_tui.py). Outside them every command string is boxed.
FRAME = " && pwd -P >| "
FRAMED_VERSIONS = ((2, 1, 197), (2, 1, 332))
BOX_FILE = "box"
SHELL_CONF = "box-shell.conf"  # what the CLI's shell (box_enter.c, its shell way in) needs of the session's box
AFTER_FILE = "box-after"  # the box script's checks after a command, for the CLI's shell to run when they have work
UNBOX_DIR = "unbox"
BOXES_DIR = "boxes"  # a file per box started (its shell's pid): gate/freeze.py looks for live ones
TMP_DIR = "tmp"
HIDDEN_FILE = "hidden"  # an empty mode-0 file bound over each hidden file
PROBE_FILE = "sandbox-probe.json"  # in the user's state dir (hidden from the box): the probe's cached answer
# The environment a boxed command never gets (the box script unsets them before bwrap starts:
# bwrap's own pid 1 keeps its environment, readable inside).
SECRET_VARS = ("CLAUDEGUARD_HOOK_TOKEN", "CLAUDEGUARD_FLEET_PASSWORD", "CLAUDEGUARD_FLEET_APPROVER_PASSWORD")

BWRAP_PACKAGE = "bubblewrap"
# (file, sysctl, the value that blocks bubblewrap's user namespace, the fix)
USERNS_SYSCTLS = (("/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                   "kernel.apparmor_restrict_unprivileged_userns", "1",
                   "load bubblewrap's AppArmor profile (README, \"Cron and CI\") or run "
                   "'sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0'"),
                  ("/proc/sys/user/max_user_namespaces", "user.max_user_namespaces", "0",
                   "run 'sudo sysctl -w user.max_user_namespaces=15000'"),
                  ("/proc/sys/kernel/unprivileged_userns_clone", "kernel.unprivileged_userns_clone", "0",
                   "run 'sudo sysctl -w kernel.unprivileged_userns_clone=1'"))


# --- the seccomp filter ------------------------------------------------------------------------

# (AUDIT_ARCH_*, socket's number, io_uring_setup's number, the first number of a foreign ABI
# sharing the arch value (x86_64's x32), or 0)
_ARCHES = {"x86_64": (0xC000003E, 41, 425, 0x40000000), "aarch64": (0xC00000B7, 198, 425, 0)}
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
_RETURNS = {"ALLOW": 0x7FFF0000, "EPERM": 0x00050000 | 1, "KILL": 0x80000000}  # SECCOMP_RET_*; KILL_PROCESS


def seccomp_filter(machine: str, *, unix: bool = False) -> bytes | None:
    """A classic-BPF seccomp program for bwrap's ``--seccomp FD``: ``socket(AF_UNIX, ...)``
    fails with EPERM (unless ``unix``: ``[sandbox] allow_unix_sockets``), so does
    ``io_uring_setup`` (its IORING_OP_SOCKET makes sockets the filter would not see); another
    ABI (i386 or x32 code on x86_64, arm32 on aarch64) is killed; everything else runs.
    ``socketpair`` stays allowed: a connected pair reaches nothing outside. None for a machine
    without a filter here (``os.uname().machine`` other than x86_64 and aarch64)."""
    import struct

    arch = _ARCHES.get(machine)
    if arch is None:
        return None
    audit_arch, nr_socket, nr_io_uring, foreign = arch
    af_unix = 1
    # (code, k, jump if true, jump if false): a jump names a return below, None falls through.
    code: list[tuple[int, int, str | None, str | None]] = [
        (_LD_ABS, 4, None, None),  # A = seccomp_data.arch
        (_JEQ, audit_arch, None, "KILL"),
        (_LD_ABS, 0, None, None),  # A = seccomp_data.nr
    ]
    if foreign:
        code.append((_JGE, foreign, "KILL", None))  # x32's numbers
    code.append((_JEQ, nr_io_uring, "EPERM", None))
    if not unix:
        code += [(_JEQ, nr_socket, None, "ALLOW"),
                 (_LD_ABS, 16, None, None),  # A = the low word of args[0]: the domain
                 (_JEQ, af_unix, "EPERM", "ALLOW")]
    at = {name: len(code) + i for i, name in enumerate(_RETURNS)}

    def jump(i: int, target: str | None) -> int:
        return 0 if target is None else at[target] - i - 1

    prog = [struct.pack("<HBBI", op, jump(i, jt), jump(i, jf), k) for i, (op, k, jt, jf) in enumerate(code)]
    prog += [struct.pack("<HBBI", _RET, 0, 0, value) for value in _RETURNS.values()]
    return b"".join(prog)


# --- does bubblewrap work here? ----------------------------------------------------------------


class Availability:
    """Whether the box can run on this machine: ``bwrap`` (its path) or ``reason`` (one line:
    what is missing, naming the package or the kernel setting)."""

    __slots__ = ("bwrap", "reason")

    def __init__(self, bwrap: str | None, reason: str | None) -> None:
        self.bwrap = bwrap
        self.reason = reason

    def __repr__(self) -> str:
        return f"Availability(bwrap={self.bwrap!r}, reason={self.reason!r})"


def find_program(name: str, env: Mapping[str, str]) -> str | None:
    """``name`` on ``env``'s PATH (or ``name`` itself when it holds a slash), as an absolute path;
    None when it is not there (shutil.which without its import)."""
    if "/" in name:
        return os.path.abspath(name) if os.access(name, os.X_OK) and os.path.isfile(name) else None
    for directory in (env.get("PATH") or os.defpath).split(os.pathsep):
        path = os.path.join(directory or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    return None


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _probe_key(bwrap: str, machine: str) -> str:
    """What the probe's answer depends on: the boot, the bwrap binary, the user, the machine and
    the kernel settings that allow user namespaces."""
    st = os.stat(bwrap)
    sysctls = ",".join(_read(path) or "-" for path, _, _, _ in USERNS_SYSCTLS)
    return (f"{_read('/proc/sys/kernel/random/boot_id')}|{bwrap}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}|"
            f"{os.getuid()}|{machine}|{sysctls}")


class Transient(Exception):
    """The probe could not tell (bwrap did not finish in time, could not be started): not kept."""


def probe(bwrap: str, machine: str, scratch: str) -> str | None:
    """Run a box like a session's (namespaces, no capabilities, a hidden dir, the seccomp filter)
    around ``/bin/true``; None when it works, else the reason in one line (Transient when it
    cannot tell). ``scratch``: a private dir for the filter's file."""
    import subprocess

    program = seccomp_filter(machine)
    if program is None:
        return f"no seccomp filter for this machine ({machine}): the sandbox supports x86_64 and aarch64"
    path = os.path.join(scratch, f".probe-{os.getpid()}.bpf")
    with open(path, "wb") as fh:
        fh.write(program)
    try:
        with open(path, "rb") as bpf:
            argv = [bwrap, "--new-session", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL",
                    "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--perms", "0000", "--tmpfs", "/tmp",
                    "--remount-ro", "/tmp", "--seccomp", str(bpf.fileno()), "--", "/bin/true"]
            # Not through procs.capture: the filter's fd must reach bwrap (pass_fds).
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20,
                                  pass_fds=(bpf.fileno(),))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Transient(f"bubblewrap ({bwrap}) could not be run: {exc}") from None
    finally:
        os.unlink(path)
    if proc.returncode == 0:
        return None
    said = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[0]
    for path, name, bad, fix in USERNS_SYSCTLS:
        if _read(path) == bad:
            return f"bubblewrap cannot create a user namespace here ({name}={bad}; {said}): {fix}"
    if os.path.exists("/.dockerenv") or "namespace" in said:
        return (f"bubblewrap cannot create its namespaces here ({said}); in Docker, run the container with "
                f"--security-opt seccomp=unconfined (README, \"Cron and CI\")")
    return f"bubblewrap does not start here: {said}"


def availability(cfg: Config, env: Mapping[str, str], paths: GuardPaths, *, cached: bool = True) -> Availability:
    """Whether the box can run for a session with ``cfg`` in ``env``: bwrap found and a probe box
    started. The probe's answer is kept in the user's state dir (hidden from the box) per boot,
    bwrap binary, user and kernel settings: a session's start reads it (~0.2 ms) instead of
    starting bwrap (~5-20 ms). ``cached=False`` (doctor) probes again."""
    import json

    from claudeguard.files import write_atomic
    from claudeguard.paths import private_dir

    name = cfg.sandbox()["bwrap"] or "bwrap"
    bwrap = find_program(name, env)
    if bwrap is None:
        where = f"[sandbox] bwrap = {name!r} ({cfg.source('sandbox.bwrap')})" if cfg.sandbox()["bwrap"] else \
            "no bwrap on PATH"
        return Availability(None, f"bubblewrap is not installed ({where}): install the package "
                                  f"'{BWRAP_PACKAGE}' (apt install {BWRAP_PACKAGE})")
    machine = os.uname().machine
    if seccomp_filter(machine) is None:
        return Availability(None, f"no seccomp filter for this machine ({machine}): the sandbox supports x86_64 "
                                  f"and aarch64")
    key = _probe_key(bwrap, machine)
    cache = os.path.join(paths.state_dir, PROBE_FILE)
    if cached:
        try:
            with open(cache) as fh:
                seen = json.load(fh)
            if isinstance(seen, dict) and seen.get("key") == key:
                reason = seen.get("reason")
                return Availability(None if reason else bwrap, reason if isinstance(reason, str) else None)
        except (OSError, ValueError):
            pass
    private_dir(paths.state_dir)
    try:
        reason = probe(bwrap, machine, paths.state_dir)
    except Transient as exc:
        return Availability(None, str(exc))  # not kept: the next start probes again
    try:
        write_atomic(cache, json.dumps({"key": key, "reason": reason}))
    except OSError:
        pass  # the next start probes again
    return Availability(None if reason else bwrap, reason)


def mode(cfg: Config) -> str:
    """``[security] sandbox``: "auto", "require" or "off"; lockdown makes it "require"."""
    return cfg.security()["sandbox"]


# --- the config's widenings ----------------------------------------------------------------------


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def check_config(cfg: Config, paths: GuardPaths) -> None:
    """``[sandbox] allow_write`` never names the guard's own paths: a path equal to one of them
    or inside one is a config error (``file:line``). One that contains one is fine: the box
    keeps the guard's paths hidden and makes their ancestor read-only (``bwrap_args``)."""
    from claudeguard.errors import ConfigError

    guarded = guard_dirs_and_files(paths)
    for entry in cfg.sandbox()["allow_write"]:
        path = os.path.abspath(os.path.expanduser(entry))
        if not os.path.isabs(os.path.expanduser(entry)):
            raise ConfigError(f"{cfg.source('sandbox.allow_write')}: sandbox.allow_write {entry!r}: give an "
                              f"absolute path (or one starting with ~/)")
        real = os.path.realpath(path)
        for what, kind in guarded:
            if _inside(path, what) or _inside(real, os.path.realpath(what)):
                raise ConfigError(f"{cfg.source('sandbox.allow_write')}: sandbox.allow_write {entry!r} would open "
                                  f"the guard's own {kind} ({what}) to the agent's commands: refused")


def guard_dirs_and_files(paths: GuardPaths) -> list[tuple[str, str]]:
    """(path, what) of everything the box hides: the runtime dir, the user's config dir and file,
    CLAUDEGUARD_CONFIG, the log dir, the state dir, the fleet's password files."""
    out = [(paths.runtime, "runtime dir"), (paths.config_dir, "config dir"), (paths.config_file, "config file"),
           (paths.log_dir, "log dir"), (paths.state_dir, "state dir")]
    if paths.extra_config:
        out.append((paths.extra_config, "CLAUDEGUARD_CONFIG file"))
    if paths.fleet_password_file:
        out.append((paths.fleet_password_file, "fleet password file"))
    if paths.fleet_approver_password_file:
        out.append((paths.fleet_approver_password_file, "fleet approver password file"))
    return out


# --- what the box shows ------------------------------------------------------------------------


def project_root(cwd: str) -> str:
    """The git work tree holding ``cwd`` (the nearest dir with a ``.git``), else ``cwd``: a
    commit from a sub-directory writes the repository's ``.git``."""
    path = os.path.abspath(cwd)
    while True:
        if os.path.lexists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return os.path.abspath(cwd)
        path = parent


class Layout:
    """What one session's box binds, in bwrap's order (later mounts cover earlier ones)."""

    __slots__ = ("writable", "read_only", "hidden_dirs", "hidden_files", "network", "unix", "notes",
                 "must_not_appear", "git")

    def __init__(self) -> None:
        self.writable: list[str] = []
        self.read_only: list[str] = []
        self.hidden_dirs: list[str] = []
        self.hidden_files: list[str] = []
        self.network = "host"
        self.unix = False
        self.notes: list[str] = []  # one line each: what of the user's rules the box cannot hold
        self.must_not_appear: list[str] = []  # code paths a command may not make (removed after it)
        # (work tree, git dir, common dir, the registered nested repositories) of a git project:
        # what the box checks after a command that changed the index (plan/git_index.py)
        self.git: tuple[str, str, str, list[str]] | None = None


def layout(cfg: Config, paths: GuardPaths, cwd: str, home: str | None = None,
           env: Mapping[str, str] | None = None) -> Layout:
    """The session's box: writable the project (its git root, and each dir from there down to
    ``cwd``, so none of them can be renamed away), the git dirs, ``allow_write``; read-only the
    project's ``.claude/`` (made when missing: an empty dir git ignores), ``.git/hooks``,
    ``.git/config``, ``.mcp.json``, and, in each writable root, the first dir on the way to a
    guard path inside it (renaming it would reopen the path); hidden the guard's own dirs (made
    when missing: a path that does not exist yet cannot be hidden) and files; then what the
    user's deny rules keep from the box."""
    settings = cfg.sandbox()
    out = Layout()
    out.network = settings["network"]
    out.unix = settings["allow_unix_sockets"]
    cwd = os.path.abspath(cwd)
    root = project_root(cwd)
    from claudeguard.plan.code_paths import git_dirs

    gitdir, common = git_dirs(root)
    _project_writable(out, root, cwd, (gitdir, common), settings["allow_write"])
    _code_read_only(out, root, cwd, (gitdir, common), env)
    _guard_hidden(out, paths)
    _user_rules(out, cfg, cwd, home or os.path.expanduser("~"))
    return out


def _project_writable(out: Layout, root: str, cwd: str, git: tuple[str | None, str | None],
                      allow_write: list[str]) -> None:
    """The project and each dir down to ``cwd``, its git dirs, the user's ``allow_write``."""
    if root != "/":  # a session started in / has no project to write: only its /tmp
        out.writable.append(root)
    if root != "/" and _inside(cwd, root):
        step = root
        for part in os.path.relpath(cwd, root).split(os.sep):
            if part in ("", "."):
                continue
            step = os.path.join(step, part)
            out.writable.append(step)
    for d in dict.fromkeys(git):
        if d and d not in out.writable and os.path.isdir(d):
            out.writable.append(d)
    for entry in allow_write:
        path = os.path.abspath(os.path.expanduser(entry))
        if os.path.exists(path) and path not in out.writable:
            out.writable.append(path)


def _code_read_only(out: Layout, root: str, cwd: str, git: tuple[str | None, str | None],
                    env: Mapping[str, str] | None) -> None:
    """The files git, the editor or the CLI run code from later: read-only where they exist, and
    removed after the call where a command made one that must not appear (plan/code_paths.py);
    the project files the user trusted; the project's ``.claude/`` and ``.mcp.json``."""
    from claudeguard.plan.code_paths import code_paths

    gitdir, common = git
    if common and os.path.isdir(common):
        try:
            os.makedirs(os.path.join(common, "hooks"), exist_ok=True)  # so that it can be bound
        except OSError:
            pass
    code = code_paths(root)
    out.read_only += [p for p in code.existing if p not in out.read_only]
    # The project files the user trusted (config/trust.py): theirs, not the agent's to rewrite.
    from claudeguard.config.trust import in_project

    out.read_only += [p for p in in_project(root, env) if os.path.exists(p) and p not in out.read_only]
    out.must_not_appear = list(code.must_not_appear)
    if gitdir and common:
        out.git = (root, gitdir, common, list(code.nested))
    for d in dict.fromkeys((root, cwd)):
        claude = os.path.join(d, ".claude")
        try:
            os.makedirs(claude, exist_ok=True)
        except OSError:
            pass
        for p in (claude, os.path.join(d, ".mcp.json")):
            if os.path.lexists(p) and p not in out.read_only:
                out.read_only.append(p)


def _guard_hidden(out: Layout, paths: GuardPaths) -> None:
    """The guard's own dirs and files hidden; in a writable root, the first dir on the way to one
    read-only (a mount point cannot be renamed, nor anything in it changed)."""
    from claudeguard.files import make_dirs

    for what, _ in guard_dirs_and_files(paths):
        if what in (paths.config_file, paths.extra_config, paths.fleet_password_file,
                    paths.fleet_approver_password_file):
            if os.path.isfile(what):
                out.hidden_files.append(what)
            continue
        try:
            make_dirs(what)  # each missing parent 0700 too: the state dir made as the log dir's parent
        except OSError:
            pass
        if os.path.isdir(what):
            out.hidden_dirs.append(what)
    # One tmpfs for a dir and whatever lies in it (the log dir in the state dir, by default): a
    # mount point inside a mode-0 tmpfs could not be made.
    out.hidden_dirs = [d for d in out.hidden_dirs if not any(o != d and _inside(d, o) for o in out.hidden_dirs)]
    out.hidden_files = [f for f in out.hidden_files if not any(_inside(f, d) for d in out.hidden_dirs)]
    for w in list(out.writable):
        for g in out.hidden_dirs + out.hidden_files:
            if g != w and _inside(g, w):
                first = os.path.join(w, os.path.relpath(g, w).split(os.sep)[0])
                if first != g and first not in out.read_only and os.path.isdir(first):
                    out.read_only.append(first)


def _user_rules(out: Layout, cfg: Config, cwd: str, home: str) -> None:
    """The user's own deny rules (plan/box_rules.py). A path of theirs inside the project moves
    with its mount if its directory is renamed, and stays hidden: no directory is made read-only
    for it. A hidden path git tracks hides git's object store too."""
    from claudeguard.plan.box_rules import resolve

    rules = resolve(cfg, cwd, home)
    out.notes += rules.notes
    out.read_only += [p for p in rules.read_only if p not in out.read_only]
    out.hidden_dirs += [d for d in rules.hidden_dirs if d not in out.hidden_dirs]
    out.hidden_files += [f for f in rules.hidden_files if f not in out.hidden_files]
    out.hidden_dirs = [d for d in out.hidden_dirs if not any(o != d and _inside(d, o) for o in out.hidden_dirs)]
    out.hidden_files = [f for f in out.hidden_files if not any(_inside(f, d) for d in out.hidden_dirs)]
    out.read_only = [r for r in out.read_only if not any(_inside(r, d) for d in out.hidden_dirs)]
    if out.git is not None and (rules.hidden_dirs or rules.hidden_files):
        _hide_objects_of_tracked(out, rules.hidden_dirs + rules.hidden_files)


def _hide_objects_of_tracked(out: Layout, hidden: list[str]) -> None:
    """A path the user's Read deny rules hide that git tracks is in git's object store too
    (``git show HEAD:.env``, a program inflating the objects): the store is hidden, one line
    says so. (A secret committed once and untracked since is not looked for: README.)"""
    from claudeguard.plan.git_index import tracked_under

    assert out.git is not None
    root, gitdir, common, _ = out.git
    found = tracked_under(root, gitdir, common, hidden)
    objects = os.path.join(common, "objects")
    if found is None or not os.path.isdir(objects):
        return
    out.hidden_dirs.append(objects)
    out.notes.append(f"claudeguard: git tracks {found}, which your Read deny rule hides, so its content is in git's "
                     f"object store too: the sandbox hides {objects}, and git commands that read objects fail in it "
                     f"(take it out of git's history, or drop the rule, to use git there)")


def bwrap_args(box: Layout, private_tmp: str, hidden_file: str) -> list[str]:
    """bwrap's options for ``box`` (the command and ``--seccomp`` follow them)."""
    argv = ["--new-session", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL"]
    if box.network == "none":
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
             "--bind", private_tmp, "/tmp", "--setenv", "TMPDIR", "/tmp"]
    for path in box.writable:
        argv += ["--bind", path, path]
    for path in box.read_only:
        argv += ["--ro-bind", path, path]
    for path in box.hidden_dirs:
        argv += ["--perms", "0000", "--tmpfs", path, "--remount-ro", path]
    for path in box.hidden_files:
        argv += ["--ro-bind", hidden_file, path]
    return argv


# --- the session's box script -----------------------------------------------------------------


def framed_version(version: str | None) -> bool:
    """Whether the CLI at ``version`` ("2.1.330", "2.1.330-beta.1") frames every Bash command
    with ``FRAME`` and nothing else (measured from the first to the last of ``FRAMED_VERSIONS``;
    an unknown version is not)."""
    parts: list[int] = []
    for piece in (version or "").split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            return False
        parts.append(int(digits))
    low, high = FRAMED_VERSIONS
    return len(parts) == 3 and low <= tuple(parts) <= high


def _sh(word: str) -> str:
    import shlex

    return shlex.quote(word)


def box_script(*, bwrap: str, args: list[str], seccomp: str, shell: str, unbox: str, framed: bool,
               own: list[str], session_id: str, rm: str, after: AfterCommand | None = None,
               enter: str | None = None) -> str:
    """The sh script the CLI runs as its shell prefix: ``box '<command string>'``. Every program
    it runs is named by its absolute path (``rm`` too): a settings ``env`` block may change PATH.
    ``enter``: the session box's entry (plan/box_enter.py): a call runs through it when it is
    there, and it falls back to the call's own bwrap box (the same argv) whenever the session's
    box is not live."""
    q = _sh
    boxed = f"{q(bwrap)} {' '.join(q(a) for a in args)}"
    # The hidden dirs (and the session dir, with the box's /tmp in it) as case patterns.
    hidden_cases = "|".join(f"{q(d)}/*" for d in _hidden_dirs(args, unbox))
    lines = [
        "#!/bin/sh",
        f"# claudeguard: the box of session {session_id}. The real CLI runs it as {PREFIX_VAR} before",
        "# every Bash command, hook, MCP server and status line (written by claudeguard/plan/sandbox.py;",
        "# docs/design.md, \"The sandbox\"). Not for editing: the next session writes its own.",
        "IFS=' \t\n'",
        # Never one the CLI gives (one string, always): as without a prefix where the frame is
        # known (no Bash call comes so), else boxed.
        'case $# in 1) ;; *) exec "$@" ;; esac' if framed else
        f'case $# in 1) ;; *) unset {" ".join(SECRET_VARS)}; exec {boxed} --seccomp 9 -- "$@" 9< {q(seccomp)} ;; esac',
        "c=$1",
    ]
    own_words = "|".join(q(o) for o in own)
    if framed:
        lines += [f"case $c in *{q(FRAME)}*) ;; *) exec {q(shell)} -c \"$c\" ;; esac  # not a Bash call: unboxed"]
    elif own_words:
        lines += [f"case $c in {own_words}) exec /bin/sh -c \"$c\" ;; esac  # the guard's own entries"]
    lines += [
        # A call a human let out of the box (a dangerouslyDisableSandbox call approved): its one-time mark.
        f"for m in \"$c\" \"${{__CLAUDE_CC_COMMAND_TEXT-}}\"; do case $m in *{UNBOX_MARK}*)",
        f"  t=${{m#*{UNBOX_MARK}}}; t=${{t%%[!0-9a-f]*}}",
        f"  if [ \"${{#t}}\" -eq 32 ] && {q(rm)} -- {q(unbox)}/\"$t\" 2>/dev/null; then",
        f"    exec {q(shell)} -c \"$c\"; fi ;;",
        "esac; done",
        "set --; fc=; bd=",
        # The CLI records the command's last directory in this file: bound in so that a cd carries over.
        f"f=${{c##*{q(FRAME)}}}",
        "case $f in \\'*\\') f=${f#\\'}; f=${f%\\'} ;; esac",
        "case $f in /*-cwd) case $f in *[!A-Za-z0-9_./-]*|*/../*) f= ;; esac ;; *) f= ;; esac",
        # Never a link, nor a path in a hidden dir (an env block may move the CLI's temp dir into
        # the box's own /tmp, where a command could plant one).
        f"case $f in {hidden_cases}) f= ;; esac",
        "if [ -n \"$f\" ] && [ ! -L \"$f\" ] && { [ -f \"$f\" ] || : >> \"$f\"; } 2>/dev/null; then",
        "  set -- --bind \"$f\" \"$f\"; fc=$f; fi",
        # Background commands' output the CLI keeps under /tmp: readable, as outside the box.
        f"d=${{CLAUDE_CODE_TMPDIR:-${{TMPDIR:-/tmp}}}}/claude-{os.getuid()}",
        f"case $d in {hidden_cases}|*/../*) ;; /tmp/*) if [ -d \"$d\" ] && [ ! -L \"$d\" ]; then",
        "  set -- \"$@\" --ro-bind \"$d\" \"$d\"; bd=$d; fi ;; esac",
        f"unset {' '.join(SECRET_VARS)}",
        # Said before it starts (the box hides this dir from it): a box may be running now.
        f": > {q(os.path.join(os.path.dirname(unbox), BOXES_DIR))}/$$ 2>/dev/null",
    ]
    lines += [f"set -- {boxed} \"$@\""]
    if enter:
        # The session's box, entered (plan/box_enter.py); its entry runs the call's own box
        # (what follows ``--``) whenever the session's box is not live. Tried only once the
        # launcher found the box live: ``live`` is written after a trial call ran through the
        # entry, so an entry that cannot run here (a noexec state dir) is never tried.
        # Not live: the launcher is asked to start it (box_enter.OnDemand; the guard's hook asks
        # first where one runs), one byte into its FIFO opened read-write, which never blocks.
        from claudeguard.plan.box_enter import LIVE_FILE, WANT_FILE

        live = os.path.join(os.path.dirname(unbox), LIVE_FILE)
        wanted = q(os.path.join(os.path.dirname(unbox), WANT_FILE))
        lines += [f"if [ -f {q(live)} ] && [ -x {q(enter)} ]; then set -- {q(enter)} {q(live)} \"$fc\" \"$bd\" "
                  f"\"$c\" -- \"$@\"; elif [ -p {wanted} ]; then {{ printf x >&3; }} 2>/dev/null 3<> {wanted}; fi"]
    must_not_appear = after["must_not_appear"] if after else []
    git = after["git"] if after else None
    if not must_not_appear and git is None:
        lines += [f"exec \"$@\" --seccomp 9 -- {q(shell)} -c \"$c\" 9< {q(seccomp)}", ""]
        return "\n".join(lines)
    # Files git would run code from that the command may not make (plan/code_paths.py): a mount
    # point cannot hold a file that does not exist yet, so the box removes what the command made
    # (its processes are all gone by then: its own pid namespace ended with it).
    lines += [f"\"$@\" --seccomp 9 -- {q(shell)} -c \"$c\" 9< {q(seccomp)}", "s=$?"]
    lines += _after_lines(must_not_appear, git, rm, os.path.dirname(unbox))
    lines += ['exit "$s"', ""]
    return "\n".join(lines)


def _hidden_dirs(args: list[str], unbox: str) -> list[str]:
    """The dirs the box hides (its ``--tmpfs`` ones) and the session dir: no cwd file or
    background dir the CLI names there is bound into a box."""
    return [args[i + 1] for i, a in enumerate(args) if a == "--tmpfs"] + [os.path.dirname(unbox)]


def _after_lines(must_not_appear: list[str], git: tuple[str, str, str] | None, rm: str, session_dir: str) -> list[str]:
    """The box script's checks once a command's box has ended (its processes all gone)."""
    q = _sh
    lines: list[str] = []
    if must_not_appear:
        watched = " ".join(q(p) for p in must_not_appear)
        lines += [
            f"for p in {watched}; do if [ -e \"$p\" ] || [ -L \"$p\" ]; then {q(rm)} -rf -- \"$p\"; "
            "printf 'claudeguard: removed %s, which this command made: git would take its config and hooks from "
            "what it names, outside the sandbox\\n' \"$p\" >&2; fi; done",
        ]
    if git is not None:
        # A repository the command registered in the index (plan/git_index.py): looked for
        # only when the index changed since the box started (its boxes/ file is older), or
        # where one was moved aside before (its .git may be back); a shell test costs nothing.
        root, gitdir, common = git
        from claudeguard.plan.git_index import HELD_FILE, SCRIPT

        held = os.path.join(session_dir, HELD_FILE)
        lines += [
            f"if [ {q(os.path.join(gitdir, 'index'))} -nt {q(os.path.join(session_dir, BOXES_DIR))}/$$ ] || "
            f"[ -s {q(held)} ]; then {q(sys.executable)} -I -S {q(SCRIPT)} {q(root)} {q(gitdir)} "
            f"{q(common)} {q(session_dir)}; fi",
        ]
    return lines


def cli_shell(env: Mapping[str, str]) -> str:
    """The shell the CLI runs its Bash commands with (``CLAUDE_CODE_SHELL``, else ``SHELL`` when
    it is bash or zsh, else bash on PATH)."""
    for name in (env.get("CLAUDE_CODE_SHELL"), env.get("SHELL")):
        if name and os.path.basename(name) in ("bash", "zsh") and os.access(name, os.X_OK) \
                and not os.path.exists(os.path.join(os.path.dirname(name), SHELL_CONF)):
            # (not a session's own shell way in, which its CLI's children inherit: a session
            # started from one of them, a hook's say, runs the real shell)
            return name
    return find_program("bash", env) or "/bin/bash"


def session_box(session_dir: str | None) -> BoxSpec | None:
    """The box of the session whose dir is ``session_dir`` (None: no box, the sandbox is off or
    could not run)."""
    if not session_dir:
        return None
    prefix = os.path.join(session_dir, BOX_FILE)
    if not os.path.isfile(prefix):
        return None
    return {"prefix": prefix, "unbox": os.path.join(session_dir, UNBOX_DIR)}


class Prepared:
    """``prepare``'s answer: the box (None: no box) and the lines to say on stderr."""

    __slots__ = ("box", "notes", "shell")

    def __init__(self, box: BoxSpec | None, notes: list[str], shell: str | None = None) -> None:
        self.box = box
        self.notes = notes
        self.shell = shell  # the CLI's shell (CLAUDE_CODE_SHELL) that runs its calls in the session's box, or None


def prepare(cfg: Config, env: Mapping[str, str], cwd: str, session_dir: str, *, session_id: str,
            cli_version: str | None, own: list[str]) -> Prepared:
    """Write the session's box (script, seccomp filter, private /tmp) into ``session_dir``; or,
    where the sandbox is off or cannot run, no box: with one line under "auto", and a refusal
    (UsageError) under "require" and lockdown. ``own``: the guard's own command hooks and MCP
    server, as the CLI passes them to the prefix (left unboxed on a CLI whose frame is unknown)."""
    from claudeguard.errors import UsageError
    from claudeguard.files import write_atomic
    from claudeguard.paths import guard_paths

    chosen = mode(cfg)
    if chosen == "off":
        return Prepared(None, [])
    paths = guard_paths(env, cfg)
    found = availability(cfg, env, paths)
    if found.bwrap is None:
        if chosen == "require":
            raise UsageError(refusal(cfg, found.reason or "the sandbox cannot run"))
        return Prepared(None, [f"claudeguard: no sandbox for Bash here: {found.reason}; commands run with all of "
                               f"your user's rights ('claudeguardctl doctor' says what stays open)"])
    from claudeguard.plan.code_paths import UnreadableGit

    try:
        box = layout(cfg, paths, cwd, env.get("HOME"), env)
    except UnreadableGit as exc:
        raise UsageError(f"the sandbox cannot be built: {exc}; it does not start with gaps (fix the "
                         f"permissions, or run outside this checkout)") from None
    private_tmp = os.path.join(session_dir, TMP_DIR)
    os.makedirs(private_tmp, mode=0o700, exist_ok=True)
    hidden = os.path.join(session_dir, HIDDEN_FILE)
    write_atomic(hidden, b"", mode=0)
    program = seccomp_filter(os.uname().machine, unix=box.unix)
    assert program is not None  # availability() checked the machine
    seccomp = os.path.join(session_dir, "seccomp.bpf")
    write_atomic(seccomp, program)
    os.makedirs(os.path.join(session_dir, UNBOX_DIR), mode=0o700, exist_ok=True)
    os.makedirs(os.path.join(session_dir, BOXES_DIR), mode=0o700, exist_ok=True)
    from claudeguard.plan.box_enter import ARGS_FILE, program_path

    args = bwrap_args(box, private_tmp, hidden)
    enter = program_path(paths.state_dir, env)
    # What the launcher starts the session's box from: the entry, then bwrap's argv.
    write_atomic(os.path.join(session_dir, ARGS_FILE), "\0".join([enter, found.bwrap, *args]), mode=0o600)
    shell = cli_shell(env)
    framed = framed_version(cli_version)
    unbox = os.path.join(session_dir, UNBOX_DIR)
    rm = find_program("rm", {"PATH": "/usr/bin:/bin"}) or find_program("rm", env) or "/bin/rm"
    after: AfterCommand = {"must_not_appear": box.must_not_appear,
                           "git": (box.git[0], box.git[1], box.git[2]) if box.git else None}
    script = box_script(bwrap=found.bwrap, args=args, seccomp=seccomp, enter=enter, shell=shell, unbox=unbox,
                        framed=framed, own=own, session_id=session_id, rm=rm, after=after)
    if box.git is not None:
        from claudeguard.plan.git_index import KNOWN_FILE

        write_atomic(os.path.join(session_dir, KNOWN_FILE), "".join(r + "\n" for r in box.git[3]))
    prefix = os.path.join(session_dir, BOX_FILE)
    write_atomic(prefix, script, mode=0o700)
    notes = list(box.notes)
    if env.get(PREFIX_VAR):
        notes.append(f"claudeguard: your {PREFIX_VAR} ({env[PREFIX_VAR]}) is replaced by the sandbox's in this "
                     f"session")
    cli_shell_link = _shell_way(session_dir, enter=enter, prefix=prefix, shell=shell, seccomp=seccomp,
                                hidden=_hidden_dirs(args, unbox), after=after, rm=rm) if framed else None
    return Prepared({"prefix": prefix, "unbox": unbox}, notes, cli_shell_link)


def _plain(path: str) -> bool:
    """A path the CLI hands its shell as it is (its quoting leaves these characters alone)."""
    return path.startswith("/") and all(c.isalnum() and c.isascii() or c in "_./-" for c in path)


def _shell_way(session_dir: str, *, enter: str, prefix: str, shell: str, seccomp: str, hidden: list[str],
               after: AfterCommand, rm: str) -> str | None:
    """The CLI's shell that runs its Bash calls in the session's box itself (``box_enter.c``'s
    shell way in: a link named as the real shell, ``box-shell.conf`` and ``box-after`` beside it);
    its path for ``CLAUDE_CODE_SHELL``, or None where calls go through the box script alone: an
    entry that has not yet run a trial call on this machine (``box_enter.RAN_SUFFIX``: one the
    kernel will not run would fail every call), a shell other than bash or zsh, a path the CLI
    would quote, a value with a newline, a list longer than the program takes."""
    from claudeguard.files import write_atomic
    from claudeguard.plan.box_enter import LIVE_FILE, MAX_LIST, RAN_SUFFIX

    name = os.path.basename(shell)
    if name not in ("bash", "zsh") or not _plain(prefix) or not os.path.exists(enter + RAN_SUFFIX):
        return None
    gone = after["must_not_appear"]
    lines = [("prefix", prefix), ("shell", shell), ("live", os.path.join(session_dir, LIVE_FILE)),
             ("seccomp", seccomp), ("boxes", os.path.join(session_dir, BOXES_DIR)),
             ("after", os.path.join(session_dir, AFTER_FILE)), ("frame", FRAME), ("unbox", UNBOX_MARK)]
    git = after["git"]
    if git is not None:
        from claudeguard.plan.git_index import HELD_FILE

        lines += [("index", os.path.join(git[1], "index")), ("held", os.path.join(session_dir, HELD_FILE))]
    lines += [("hidden", d) for d in hidden] + [("secret", v) for v in SECRET_VARS] + [("gone", p) for p in gone]
    if max(len(hidden), len(gone)) > MAX_LIST or any("\n" in v for _, v in lines):
        return None
    write_atomic(os.path.join(session_dir, SHELL_CONF), "".join(f"{k} {v}\n" for k, v in lines))
    checks = ["#!/bin/sh", "# claudeguard: the box script's checks after a command, run by the CLI's shell "
              "(plan/box_enter.c) when they have work; $1 is the command's exit status.", 's=$1',
              *_after_lines(gone, git, rm, session_dir), 'exit "$s"', ""]
    write_atomic(os.path.join(session_dir, AFTER_FILE), "\n".join(checks), mode=0o700)
    link = os.path.join(session_dir, name)
    try:
        os.symlink(enter, link)
    except FileExistsError:
        os.unlink(link)
        os.symlink(enter, link)
    return link


KEPT = ((BOX_FILE, 0o700), ("seccomp.bpf", 0o600), (HIDDEN_FILE, 0), (SHELL_CONF, 0o600), (AFTER_FILE, 0o700))
LINKED = ("bash", "zsh")  # the CLI's shell, a link to the entry (``_shell_way``)


def kept_files(session_dir: str) -> dict[str, tuple[bytes, int]]:
    """The session's box files as they are now (name -> content, mode), for ``restore_box``:
    a session dir removed under the session (``plan.keeper``) takes the box with it, and every
    Bash call fails (closed) until the box is back."""
    out = {}
    for name, file_mode in KEPT:
        try:
            with open(os.path.join(session_dir, name), "rb") as fh:
                out[name] = (fh.read(), file_mode)
        except OSError:
            pass
    for name in LINKED:
        try:
            out[name] = (os.fsencode(os.readlink(os.path.join(session_dir, name))), -1)  # -1: a link to this
        except OSError:
            pass
    return out


def restore_box(session_dir: str, kept: dict[str, tuple[bytes, int]]) -> None:
    """Put the box back into a session dir made again (its /tmp comes back empty)."""
    from claudeguard.files import write_atomic

    if not kept:
        return
    for name in (TMP_DIR, UNBOX_DIR, BOXES_DIR):
        os.makedirs(os.path.join(session_dir, name), mode=0o700, exist_ok=True)
    for name, (data, file_mode) in kept.items():
        if file_mode == -1:
            os.symlink(os.fsdecode(data), os.path.join(session_dir, name))
        else:
            write_atomic(os.path.join(session_dir, name), data, mode=file_mode)


def refusal(cfg: Config, reason: str) -> str:
    """The one line a session that needs the sandbox and cannot have it is refused with."""
    if cfg.lockdown.value:
        why = f"lockdown ({cfg.lockdown.source}) needs the sandbox"
    else:
        why = f"security.sandbox = \"require\" ({cfg.source('security.sandbox')})"
    return f"{why}, and {reason}"


def check(cfg: Config, env: Mapping[str, str]) -> None:
    """What must hold before a session starts: the widenings keep off the guard's paths, and a
    session that requires the sandbox (lockdown, "require") finds it working (UsageError, one
    line naming the package or the kernel setting, otherwise)."""
    from claudeguard.errors import UsageError
    from claudeguard.paths import guard_paths

    paths = guard_paths(env, cfg)
    check_config(cfg, paths)
    if mode(cfg) == "require":
        found = availability(cfg, env, paths)
        if found.bwrap is None:
            raise UsageError(refusal(cfg, found.reason or "the sandbox cannot run"))


# --- the gate's side: an allowed Bash call's input -----------------------------------------------


def asks_to_leave(tool: str, tool_input: Mapping[str, object]) -> bool:
    """A Bash call that asks to run outside the sandbox."""
    return tool == "Bash" and tool_input.get(LEAVE_FLAG) is True


def wrap_bash_input(tool_input: Mapping[str, object], box: BoxSpec | None, *, leave: bool = False) -> dict[str, object]:
    """The input the CLI runs for a Bash call the guard allows: every field kept (an
    ``updatedInput`` replaces the whole input) but ``dangerouslyDisableSandbox`` (the CLI's own
    sandbox is off; ours decides); the command itself is boxed by the session's prefix.
    ``leave``: a human let this call out of the box: the command gets a one-time mark that the
    box script honours once (its file in the session's unbox dir, which no boxed command sees)."""
    out = {k: v for k, v in tool_input.items() if k != LEAVE_FLAG}
    command = out.get("command")
    if leave and box is not None and isinstance(command, str):
        token = os.urandom(16).hex()
        fd = os.open(os.path.join(box["unbox"], token), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.close(fd)
        out["command"] = f": {UNBOX_MARK}{token}\n{command}"
    return out
