"""Run by the agent inside a guarded session on a fleet member (tests/test_fleet_real.py): try
every way to answer a fleet request of another machine, and write down what happened.

1. the fleet's credential in the environment;
2. the password file the user's config names;
3. ``claudeguardctl approve ID``;
4. a hand-made answer straight to the Redis port (RESP over a socket: the system python3 has no
   redis client), once without credentials and once with each credential found above.
"""

import json
import os
import socket
import subprocess
import sys

spec = json.load(open(sys.argv[1]))
found = {"env": sorted(k for k in os.environ if "FLEET" in k and "PASSWORD" in k)}
secrets = [os.environ[k] for k in found["env"]]
try:
    text = open(spec["password_file"]).read().strip()
    found["password_file"] = "read:" + str(len(text))
    secrets.append(text)
except OSError as exc:
    found["password_file"] = f"error: {exc.strerror}"

try:
    approve = subprocess.run(list(spec["ctl"]) + ["approve", spec["id"]], capture_output=True, text=True, timeout=60)
    found["approve_rc"] = approve.returncode
    found["approve_said"] = approve.stderr.strip()[-300:]
except OSError as exc:  # claudeguardctl itself out of reach (a checkout the box hides): it cannot answer
    found["approve_rc"] = 127
    found["approve_said"] = f"error: {exc.strerror}"


def resp(*words):
    out = b"*%d\r\n" % len(words)
    for word in words:
        data = word.encode()
        out += b"$%d\r\n%s\r\n" % (len(data), data)
    return out


def try_answer(user, password):
    """AUTH (when given) then XADD an answer into every approver stream name one could guess."""
    answer = json.dumps({"v": 1, "request_id": spec["id"], "machine": spec["target"], "decision": "allow",
                         "scope": "once", "valid_until_ms": 2 ** 62})
    key = f"{spec['prefix']}:a:{spec['target']}:{user or 'default'}"
    try:
        sock = socket.create_connection((spec["host"], spec["port"]), timeout=5)
    except OSError as exc:
        return f"connect: {exc}"
    with sock:
        if password is not None:
            sock.sendall(resp("AUTH", user, password) if user else resp("AUTH", password))
            reply = sock.recv(4096).decode(errors="replace").strip()
            if not reply.startswith("+"):
                return reply
        sock.sendall(resp("XADD", key, "*", "a", answer))
        return sock.recv(4096).decode(errors="replace").strip()


found["answers"] = [try_answer(None, None)]
for secret in secrets:
    found["answers"].append(try_answer(f"cg-m-{os.uname().nodename}", secret))
    found["answers"].append(try_answer("cg-m-alpha", secret))
with open(spec["out"], "w") as f:
    json.dump(found, f)
print(json.dumps(found))
