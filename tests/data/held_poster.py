"""A stand-in CLI for the port-holding tests: reads the guard's settings file, posts a
PreToolUse event to its hook URL each time a file named ``$OUT.go<N>`` appears (N = 1, 2, ...),
and appends the status and answer of each post to ``$OUT`` (one JSON line). ``$OUT.ready`` holds
its pid and the hooks' port once it runs. It ends when ``$OUT.end`` appears."""

import http.client
import json
import os
import sys
import time

value = next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--settings="))
settings = json.load(open(value))
entry = settings["hooks"]["PreToolUse"][0]["hooks"][0]
url, secret = entry["url"], entry["headers"]["Authorization"]
host_port, path = url[len("http://"):].split("/", 1)
port = int(host_port.split(":")[1])
out = os.environ["OUT"]
with open(out + ".ready", "w") as fh:
    fh.write(f"{os.getpid()} {port}\n")
n = 1
while not os.path.exists(out + ".end"):
    if not os.path.exists(f"{out}.go{n}"):
        time.sleep(0.02)
        continue
    body = json.dumps({"hook_event_name": "PreToolUse", "session_id": "cli", "tool_name": "Bash", "cwd": "/",
                       "tool_input": {"command": open(f"{out}.go{n}").read().strip() or "echo hi"},
                       "tool_use_id": f"toolu_{n}"})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/" + path, body=body, headers={"Authorization": secret,
                                                             "Content-Type": "application/json"})
        resp = conn.getresponse()
        text = resp.read().decode()
        result = {"n": n, "status": resp.status, "answer": json.loads(text) if text else None}
    except OSError as exc:
        result = {"n": n, "status": None, "error": str(exc)}
    conn.close()
    with open(out, "a") as fh:
        fh.write(json.dumps(result) + "\n")
    n += 1
