"""A stand-in for the CLI's HTTP hook client, for the service's unit tests: reads the guard's
``--settings`` from argv, posts the events listed in $POSTS (a JSON list of
``{"event", "body" (object or raw string), "token" ("ok" | "none" | "wrong"), "length"}``) to
the URLs registered for them, and writes each status and answer to $OUT as JSON.
The real CLIs are tested elsewhere; this one posts what no real CLI would (no secret, huge or
malformed bodies)."""

import http.client
import json
import os
import sys

value = next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--settings="))
# The guard's settings are in a 0600 file of the session dir (the header holds the secret).
settings_file = None if value.lstrip().startswith("{") else value
settings = json.load(open(settings_file)) if settings_file else json.loads(value)
pre = settings["hooks"]["PreToolUse"][0]["hooks"][0]["url"]
port = int(pre.split("/")[2].split(":")[1])
results = []
mcp_files = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--mcp-config=")]
mcp = next(iter(json.load(open(mcp_files[0]))["mcpServers"].values())) if mcp_files else None
for post in json.loads(os.environ["POSTS"]):
    if post.get("event") == "mcp":  # an MCP message to the permission-prompt tool's server
        url, secret = mcp["url"], mcp["headers"]["Authorization"][len("Bearer "):]
    else:
        entry = settings["hooks"][post["event"]][0]["hooks"][0]
        url, secret = entry["url"], entry["headers"]["Authorization"][len("Bearer "):]
    host_port, path = url[len("http://"):].split("/", 1)
    host = host_port.split(":")[0]
    token = {"ok": secret, "wrong": "0" * 48, "none": None}[post.get("token", "ok")]
    body = post["body"] if isinstance(post["body"], str) else json.dumps(post["body"])
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", "/" + path)
    if token:
        conn.putheader("Authorization", f"Bearer {token}")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(post.get("length", len(body.encode()))))
    conn.endheaders()
    try:
        conn.send(body.encode())
        resp = conn.getresponse()
        text = resp.read().decode()
        results.append({"status": resp.status, "answer": json.loads(text) if text else None,
                        "mode": oct(os.stat(mcp_files[0]).st_mode & 0o777) if mcp_files else None})
    except OSError as exc:
        results.append({"status": None, "error": str(exc)})
    conn.close()
session = os.path.join(os.path.dirname(settings_file or ""), "session.json")
with open(os.environ["OUT"], "w") as fh:
    json.dump({"results": results, "url": pre, "port": port, "argv": sys.argv[1:], "ppid": os.getppid(),
               "session": json.load(open(session)) if settings_file and os.path.exists(session) else None,
               "settings_mode": oct(os.stat(settings_file).st_mode & 0o777) if settings_file else None,
               "env": {k: v for k, v in os.environ.items() if k.startswith("CLAUDEGUARD_")},
               "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd"))}, fh)
