"""The pty session's leader, run as its own program (``python -I -S leader.py STATUS_FD ARGV...``):
session leader of the pty and parent of the CLI, which it runs in its own process group as the
pty's foreground group, like a shell would (see ``pty_relay``). It imports only what it names;
it reports "pid N" or "error ERRNO" on the status fd, then lives exactly as long as the CLI, and
stops itself (SIGSTOP) when the CLI stops so the relay sees the stop.
"""

import os
import signal
import sys


def main() -> None:
    status = int(sys.argv[1])
    argv = sys.argv[2:]
    for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
        signal.signal(s, signal.SIG_IGN)
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except Exception:  # noqa: BLE001 - no prctl here (no ctypes, not Linux): the leader goes without it
        prctl = None
    leader = os.getpid()
    err_r, err_w = os.pipe()
    pid = os.fork()  # not through procs: this program imports only os, signal and sys (see above)
    if pid == 0:
        try:
            os.close(err_r)
            os.close(status)
            os.setpgid(0, 0)
            os.tcsetpgrp(0, os.getpid())
            for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU,
                      signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(s, signal.SIG_DFL)  # Python ignores SIGPIPE/SIGXFSZ; the CLI must not
            if prctl is not None:
                prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
                # PR_SET_CHILD_SUBREAPER, kept across the exec: a tool's orphans stay under the
                # CLI (shim/child.py says why).
                prctl(36, 1, 0, 0, 0)
            if os.getppid() != leader:
                os._exit(129)
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(err_w, str(exc.errno or 1).encode())
        os._exit(127)
    os.close(err_w)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    try:
        os.tcsetpgrp(0, pid)
    except OSError:
        pass
    err = os.read(err_r, 32)
    os.close(err_r)
    os.write(status, (b"error " + err if err else b"pid %d" % pid) + b"\n")
    os.close(status)
    while True:
        try:
            _, st = os.waitpid(pid, os.WUNTRACED)
        except ChildProcessError:
            os._exit(127)
        if os.WIFSTOPPED(st):
            os.kill(leader, signal.SIGSTOP)  # our parent sees us stop and stops too
            try:
                os.tcsetpgrp(0, pid)
            except OSError:
                pass
            try:
                os.killpg(pid, signal.SIGCONT)
            except OSError:
                pass
            continue
        code = os.waitstatus_to_exitcode(st)
        os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
