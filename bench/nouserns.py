"""Run a command where no user namespace can be made, as on a runner that blocks them (issue 24).

    python bench/nouserns.py UID COMMAND [ARG ...]

Must be started as root. Makes a user namespace with ids 0-65535 mapped 1:1, sets
`user.max_user_namespaces` to 0 inside it (per namespace: the host's setting is untouched), drops
to UID (0 keeps root) and execs COMMAND. bubblewrap started below then fails the way it does in
default Docker or under a kernel that refuses unprivileged user namespaces ("Creating new
namespace failed ... (ENOSPC)"). `bench/sandbox_probe.py --wrap "python bench/nouserns.py 65534"
--chown 65534 --claude <a copy of the CLI the uid can reach>` runs the CLI so.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys

CLONE_NEWUSER = 0x10000000


def main() -> int:
    uid, cmd = int(sys.argv[1]), sys.argv[2:]
    # Resolved before dropping to UID: this interpreter's own files may be out of its reach then.
    path = shutil.which(cmd[0]) or cmd[0]
    libc = ctypes.CDLL(None, use_errno=True)
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        if libc.unshare(CLONE_NEWUSER) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")
        os.write(ready_w, b"x")
        os.read(go_r, 1)  # the parent has written our id maps
        with open("/proc/sys/user/max_user_namespaces", "w") as fh:
            fh.write("0")
        if uid:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        os.execv(path, cmd)
    os.read(ready_r, 1)
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{name}", "w") as fh:
            fh.write("0 0 65536")
    os.write(go_w, b"x")
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
