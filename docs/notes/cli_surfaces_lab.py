"""The experiments behind docs/notes/cli-surfaces.md: each runs the real Claude Code CLI offline
against the scripted model (claudeguard/testing/model_server.py) in a throw-away HOME and git
repository, with hooks, MCP servers, helpers and plugins that only append a line to a marker file,
and prints one line per case: what ran, what the model was asked, whether the probe call ran.

    python docs/notes/cli_surfaces_lab.py EXPERIMENT VERSION [VERSION ...]

EXPERIMENT is one of the functions named in EXPERIMENTS at the end. Re-run them on a new CLI
version before trusting the note for it. Not part of the package or of the test suite.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from claudeguard.testing.cli_install import cli_path  # noqa: E402
from claudeguard.testing.model_server import ModelServer  # noqa: E402
from claudeguard.testing.offline_home import offline_env, prepare_home  # noqa: E402

KEY = "sk-ant-api03-offline-test-key-0123456789abcdef"
PY = sys.executable


def cli(version: str) -> str:
    path = cli_path(version)
    if path is None:
        raise SystemExit(f"Claude Code {version} is not installed: python -m claudeguard.testing.cli_install {version}")
    return str(path)


HOOK = r'''
import json, os, sys
name = sys.argv[1]; mark = sys.argv[2]; answer = sys.argv[3] if len(sys.argv) > 3 else ""
try:
    d = json.load(sys.stdin)
except Exception:
    d = {}
extra = {k: os.environ.get(k) for k in sys.argv[4:]}
with open(mark, "a") as f:
    f.write(json.dumps({"who": name, "event": d.get("hook_event_name"), "tool": d.get("tool_name"),
                        "input": d.get("tool_input"), "agent": d.get("agent_type"), "mode": d.get("permission_mode"),
                        "env": extra, "source": d.get("source"), "trigger": d.get("trigger")}) + "\n")
if answer in ("allow", "deny", "ask"):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": d.get("hook_event_name", "PreToolUse"),
                                             "permissionDecision": answer,
                                             "permissionDecisionReason": name + " says " + answer}}))
'''

MARKER = r'''
import json, os, sys, time
name = sys.argv[1]; mark = sys.argv[2]
with open(mark, "a") as f:
    f.write(json.dumps({"who": name, "argv": sys.argv[3:], "ppid": os.getppid()}) + "\n")
mode = os.environ.get("LAB_MODE", "")
if name.startswith("mcp"):
    # minimal stdio MCP server
    for line in sys.stdin:
        try:
            m = json.loads(line)
        except Exception:
            continue
        if "id" not in m:
            continue
        if m.get("method") == "initialize":
            r = {"protocolVersion": m["params"].get("protocolVersion", "2024-11-05"), "capabilities": {"tools": {}},
                 "serverInfo": {"name": name, "version": "0"}}
        elif m.get("method") == "tools/list":
            r = {"tools": []}
        else:
            r = {}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n"); sys.stdout.flush()
elif name.startswith("apikey"):
    print("sk-ant-api03-offline-test-key-0123456789abcdef")
elif name.startswith("status"):
    print("status")
'''


class Lab:
    def __init__(self, version: str, *, trusted: bool = True, git: bool = True):
        self.version = version
        self.claude = cli(version)
        self.root = Path(tempfile.mkdtemp(prefix="r25lab-"))
        self.home = self.root / "home"
        self.work = self.root / "work"
        self.work.mkdir()
        if git:
            subprocess.run(["git", "init", "-q", str(self.work)], check=True)
            subprocess.run(["git", "-C", str(self.work), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                            "--allow-empty", "-m", "init"], check=True)
        prepare_home(self.home, cwd=self.work if trusted else self.root / "elsewhere", api_key=KEY)
        self.mark = self.root / "MARK"
        self.mark.write_text("")
        (self.root / "hook.py").write_text(HOOK)
        (self.root / "marker.py").write_text(MARKER)
        self.server: ModelServer | None = None
        self.env = offline_env(self.home, "http://127.0.0.1:9", KEY)
        self.env.pop("CLAUDEGUARD_DISABLE", None)

    def hook(self, name: str, answer: str = "", *envs: str) -> dict:
        cmd = f"{PY} {self.root}/hook.py {name} {self.mark} {answer or '-'} {' '.join(envs)}"
        return {"type": "command", "command": cmd}

    def marker(self, name: str) -> str:
        return f"{PY} {self.root}/marker.py {name} {self.mark}"

    def mcp_server(self, name: str) -> dict:
        return {"command": PY, "args": [f"{self.root}/marker.py", name, str(self.mark)]}

    def model(self, scenario) -> ModelServer:
        if self.server:
            self.server.stop()
        self.server = ModelServer(scenario).start()
        self.env["ANTHROPIC_BASE_URL"] = self.server.url
        return self.server

    def write(self, rel: str | Path, data) -> Path:
        p = Path(rel) if Path(rel).is_absolute() else self.work / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(data if isinstance(data, str) else json.dumps(data, indent=1))
        return p

    def run(self, args, *, env=None, input=None, timeout=60, cwd=None):
        e = dict(self.env)
        e.update(env or {})
        before = len(self.marks())
        nreq = len(self.server.requests()) if self.server else 0
        t = time.time()
        proc = subprocess.Popen([self.claude, *args], env=e, cwd=str(cwd or self.work), text=True,
                                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(input, timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            rc = "timeout"
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        reqs = self.server.requests()[nreq:] if self.server else []
        return {"rc": rc, "out": out, "err": err, "secs": round(time.time() - t, 1),
                "marks": self.marks()[before:],
                "model": [r for r in reqs if r.get("played") not in ("head",)]}

    def marks(self):
        return [json.loads(x) for x in self.mark.read_text().splitlines() if x.strip()]

    def close(self):
        if self.server:
            self.server.stop()
        # stop anything left with our HOME
        import psutil
        for p in psutil.process_iter(["pid", "environ"]):
            try:
                if (p.info["environ"] or {}).get("HOME") == str(self.home):
                    p.kill()
            except psutil.Error:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


def brief(res, full=False):
    m = res["model"]
    tools = [r for r in m if r.get("has_tools")]
    out = {"rc": res["rc"], "secs": res["secs"], "model_requests": len(m), "with_tools": len(tools),
           "prompts": sorted({r["first_user_text"][:40] for r in tools}),
           "marks": [(x["who"], x.get("event") or "", x.get("tool") or "") for x in res["marks"]]}
    if full:
        out["out"] = res["out"][-400:]
        out["err"] = res["err"][-400:]
    return out


# A stdio MCP server with one tool, `approve`, that answers every permission prompt "deny" (or
# "allow") and appends a marker line.
PROMPT_TOOL = r'''
import json, sys
mark, answer = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    try: m = json.loads(line)
    except Exception: continue
    if "id" not in m: continue
    meth = m.get("method")
    if meth == "initialize":
        r = {"protocolVersion": m["params"].get("protocolVersion", "2024-11-05"), "capabilities": {"tools": {}},
             "serverInfo": {"name": "pt", "version": "0"}}
    elif meth == "tools/list":
        r = {"tools": [{"name": "approve", "description": "a", "inputSchema": {"type": "object", "properties": {}}}]}
    elif meth == "tools/call":
        args = m["params"].get("arguments", {})
        open(mark, "a").write(json.dumps({"who": "prompt-tool", "tool": args.get("tool_name")}) + "\n")
        d = ({"behavior": "allow", "updatedInput": args.get("input")} if answer == "allow"
             else {"behavior": "deny", "message": "prompt tool says no"})
        r = {"content": [{"type": "text", "text": json.dumps(d)}]}
    else:
        r = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n"); sys.stdout.flush()
'''


def prompt_tool(lab, answer="deny"):
    (lab.root / "pt.py").write_text(PROMPT_TOOL)
    cfg = {"mcpServers": {"pt": {"command": PY, "args": [str(lab.root / "pt.py"), str(lab.mark), answer]}}}
    return ["--mcp-config", json.dumps(cfg), "--permission-prompt-tool", "mcp__pt__approve"]


def touch_once(lab, tag, target):
    lab.model([{"match": tag, "turns": [{"tool_use": {"name": "Bash", "input": {"command": f"touch {target}",
                                                                                 "description": "t"}}},
                                        {"text": "fin"}]}])


def hooks_of(lab, who, answer="", events=("PreToolUse",)):
    return {"hooks": {ev: [{"matcher": "*", "hooks": [lab.hook(who, answer)]}] for ev in events}}


# --- 1. sub-commands ---------------------------------------------------------------------------

SUB_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "Setup", "Notification",
              "SessionEnd", "SubagentStart", "PermissionRequest")


def repo_code(lab):
    """A repository whose every hook event, apiKeyHelper, statusLine and .mcp.json server leave a mark."""
    lab.write(".claude/settings.json", {**hooks_of(lab, "proj", events=SUB_EVENTS),
                                        "apiKeyHelper": lab.marker("apikey-helper"),
                                        "statusLine": {"type": "command", "command": lab.marker("status-line")},
                                        "enableAllProjectMcpServers": True})
    lab.write(".mcp.json", {"mcpServers": {"repo": lab.mcp_server("mcp-repo")}})


SUBCOMMANDS = [
    ["doctor"], ["mcp", "list"], ["mcp", "get", "repo"], ["plugin", "list"], ["plugin", "validate", "."],
    ["auth", "status"], ["auto-mode", "config"], ["auto-mode", "defaults"], ["auto-mode", "critique"],
    ["agents", "--json"], ["project"], ["purge", "--dry-run"], ["import", "--dry-run"],
    ["workspace-trust", "--json"], ["sandbox", "status"], ["ultrareview"], ["gateway"], ["config"],
    ["daemon", "status"], ["logs", "deadbeef"], ["attach", "deadbeef"], ["mcp", "reset-project-choices"],
    ["plugin", "details", "x"], ["auto-mode", "reset", "-y"], ["edit-permission-rules", "--json"],
]


def subcommands(v):
    """`claude SUB...` (stdin empty, stdout a pipe) in a repository full of marker code."""
    for cmd in SUBCOMMANDS:
        lab = Lab(v)
        try:
            repo_code(lab)
            lab.model([{"match": "", "turns": [{"text": "model says hi"}]}])
            res = lab.run(cmd, timeout=25, input="")
            b = brief(res, full=True)
            said = (res["err"].strip() or res["out"].strip()).splitlines()[-1:] or [""]
            print(v, " ".join(cmd), json.dumps({k: b[k] for k in ("rc", "with_tools", "prompts", "marks")}),
                  "|", said[0][:100], flush=True)
        finally:
            lab.close()


def doctor_pty(v):
    """`claude doctor` under a pseudo-terminal in the same repository (2.1.197's doctor waits for a
    terminal)."""
    from claudeguard.testing.tui import close_tui, screen_now, spawn_tui

    lab = Lab(v)
    try:
        repo_code(lab)
        lab.model([{"match": "", "turns": [{"text": "hi"}]}])
        child = spawn_tui([lab.claude, "doctor"], lab.env, lab.work)
        deadline = time.time() + 15
        while time.time() < deadline and not any(m["who"] == "mcp-repo" for m in lab.marks()):
            screen_now(child, settle=0.5)
        print(v, "doctor (pty) marks:", [(m["who"], m.get("event")) for m in lab.marks()], flush=True)
        close_tui(child)
    finally:
        lab.close()


def mcp_serve(v):
    """`claude [ROOT OPTIONS] mcp serve` as a stdio MCP server: tools/call Bash `touch`, with deny
    rules and deny hooks in every place a session would honour them."""

    def rpc(p, msg):
        p.stdin.write(json.dumps(msg) + "\n")
        p.stdin.flush()
        while "id" in msg:
            line = p.stdout.readline()
            if not line:
                return {}
            m = json.loads(line)
            if m.get("id") == msg["id"]:
                return m
        return None

    def serve(lab, pre, target, note):
        p = subprocess.Popen([lab.claude, *pre, "mcp", "serve"], env=lab.env, cwd=lab.work, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        try:
            rpc(p, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "lab", "version": "0"}}})
            rpc(p, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            before = len(lab.marks())
            call = rpc(p, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                           "params": {"name": "Bash", "arguments": {"command": f"touch {target}", "description": "t"}}})
            print(v, note, "| ran:", os.path.exists(target), "| hooks:", [m["who"] for m in lab.marks()[before:]],
                  "|", json.dumps(call.get("result", call))[:100], flush=True)
        finally:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()

    lab = Lab(v)
    try:
        deny = {"permissions": {"deny": ["Bash(touch *)"]}}
        lab.write(".claude/settings.json", {**hooks_of(lab, "proj", "deny"), **deny})
        serve(lab, [], str(lab.root / "a"), "project deny rule + deny hook")
        lab.write(".claude/settings.json", {})
        serve(lab, ["--settings", json.dumps({**hooks_of(lab, "cli", "deny"), **deny})], str(lab.root / "b"),
              "--settings deny rule + deny hook before `mcp serve`")
        serve(lab, ["--disallowedTools=Bash"], str(lab.root / "c"), "--disallowedTools=Bash before `mcp serve`")
        lab.write(str(lab.home / ".claude/settings.json"), {**hooks_of(lab, "user", "deny"), **deny})
        serve(lab, [], str(lab.root / "d"), "user deny rule + deny hook")
    finally:
        lab.close()


WORDS = [["-p", "mcp", "list"], ["mcp", "list", "-p"], ["-p", "doctor"], ["--print", "plugin", "list"],
         ["-p", "--", "mcp", "list"], ["--model", "x", "mcp", "list"], ["--verbose", "logs", "deadbeef"],
         ["-p", "logs", "deadbeef"], ["--model", "m", "logs", "deadbeef"], ["hello", "mcp", "list"],
         ["--permission-mode", "default", "mcp", "list"], ["--debug", "mcp", "list"], ["-w", "mcp", "list"]]


def words(v):
    """Which argv shapes run a sub-command and which ask the model (stdout a pipe)."""
    lab = Lab(v)
    try:
        lab.model([{"match": "", "turns": [{"text": "model says hi"}]}])
        for c in WORDS:
            r = lab.run(c, timeout=20)
            b = brief(r)
            said = (r["out"].strip() or r["err"].strip()).splitlines()[:1] or [""]
            print(v, " ".join(c), "| rc", b["rc"], "| prompt sent:", b["prompts"] or "-", "|", said[0][:80], flush=True)
    finally:
        lab.close()


def edit_commands(v):
    """`claude edit-permission-rules --json` with an edit on stdin (2.1.330 and later)."""
    lab = Lab(v)
    try:
        edit = {"op": "add", "rules": ["Bash"], "behavior": "allow", "destination": "userSettings"}
        r = lab.run(["edit-permission-rules", "--json"], input=json.dumps(edit), timeout=30)
        user = lab.home / ".claude" / "settings.json"
        print(v, "edit-permission-rules", json.dumps(edit), "| rc", r["rc"], "|", r["out"].strip()[:80],
              "| user settings now:", user.read_text().replace("\n", "") if user.exists() else None, flush=True)
    finally:
        lab.close()


# --- 2. settings changed during a session -------------------------------------------------------

DENY = {"permissions": {"deny": ["Bash(touch *)"]}}
OFF = {"disableAllHooks": True}
WRITER = "import os, shutil, sys, time\nos.makedirs(os.path.dirname(os.path.abspath(sys.argv[2])), exist_ok=True)\n" \
         "shutil.copy(sys.argv[1], sys.argv[2])\ntime.sleep(float(sys.argv[3]))\n"


def reload_case(v, where, data, sleep, extra=()):
    """First call: `python3 w.py STAGE FILE SLEEP` writes FILE (through python, which the CLI's own
    protection of .claude/ does not see) and waits; second call: `touch`. --allowedTools Bash."""
    lab = Lab(v)
    try:
        hook = hooks_of(lab, "proj")
        lab.write(".claude/settings.json", hook)
        target, pcr = lab.root / "touched", lab.root / "pcr"
        files = {"project": lab.work / ".claude/settings.json", "local": lab.work / ".claude/settings.local.json",
                 "user": lab.home / ".claude/settings.json", "pcr": pcr / ".claude/settings.json",
                 "pcr-local": pcr / ".claude/settings.local.json",
                 "worktree-local": ".claude/settings.local.json", "worktree-project": ".claude/settings.json"}
        args = list(extra)
        if where.startswith("pcr"):
            lab.write(str(pcr / ".claude/settings.json"), hook)
            args += ["--project-config-root", str(pcr)]
        if where.startswith("worktree"):
            subprocess.run(["git", "-C", str(lab.work), "add", ".claude"], check=True)
            subprocess.run(["git", "-C", str(lab.work), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm",
                            "settings"], check=True)
            args += ["-w", "wt1"]
        content = {**hook, **data} if where in ("project", "pcr") else dict(data)
        (lab.root / "stage.json").write_text(json.dumps(content))
        (lab.root / "w.py").write_text(WRITER)
        first = f"python3 {lab.root}/w.py {lab.root}/stage.json {files[where]} {sleep}"
        lab.model([{"match": "RELOAD", "turns": [
            {"tool_use": {"name": "Bash", "input": {"command": first, "description": "write"}}},
            {"tool_use": {"name": "Bash", "input": {"command": f"touch {target}", "description": "touch"}}},
            {"text": "fin"}]}])
        res = lab.run(["-p", "RELOAD go", "--allowedTools", "Bash", *args], timeout=60)
        fired = [m["input"]["command"].split()[0] for m in lab.marks() if m["who"] == "proj"]
        print(v, where, next(iter(data)), f"sleep={sleep}", "| 2nd call ran:", target.exists(),
              "| PreToolUse hook fired for:", fired, "| rc", res["rc"], flush=True)
    finally:
        lab.close()


def reload(v):
    for where in ("project", "local", "user"):
        for sleep in (0, 2):
            reload_case(v, where, DENY, sleep)
    for sleep in (0, 2):
        reload_case(v, "project", OFF, sleep)
        reload_case(v, "local", OFF, sleep)
    reload_case(v, "worktree-local", DENY, 2)
    reload_case(v, "worktree-project", DENY, 2)
    if v != "2.1.197":
        reload_case(v, "pcr", DENY, 2)
        reload_case(v, "pcr-local", DENY, 2)
        reload_case(v, "pcr", OFF, 2)


def reload_latency(v):
    for sleep in (0.5, 1, 1.5):
        reload_case(v, "project", DENY, sleep)
        reload_case(v, "project", OFF, sleep)


# --- 3. modes that drop hooks -----------------------------------------------------------------

SOURCES = ("nothing", "allowed-only", "project-deny", "project-hook", "user-deny", "user-hook", "settings-deny",
           "settings-hook", "disallowed", "prompt-tool")
MODES = ("normal", "--bare", "SIMPLE", "value--bare", "--safe-mode", "SAFEENV", "--restricted", "RESTRICTEDENV")


def mode_case(v, mode, source):
    lab = Lab(v)
    try:
        target = lab.root / "t"
        args, env = [], {}
        allow = ["--allowedTools", "Bash"]
        if source == "project-deny":
            lab.write(".claude/settings.json", DENY)
            args += allow
        elif source == "project-hook":
            lab.write(".claude/settings.json", hooks_of(lab, "proj", "deny"))
            args += allow
        elif source == "user-deny":
            lab.write(str(lab.home / ".claude/settings.json"), DENY)
            args += allow
        elif source == "user-hook":
            lab.write(str(lab.home / ".claude/settings.json"), hooks_of(lab, "user", "deny"))
            args += allow
        elif source == "settings-deny":
            args += ["--settings", json.dumps(DENY), *allow]
        elif source == "settings-hook":
            args += ["--settings", json.dumps(hooks_of(lab, "cli", "deny")), *allow]
        elif source == "disallowed":
            args += [*allow, "--disallowedTools", "Bash(touch *)"]
        elif source == "allowed-only":
            args += allow
        elif source == "prompt-tool":
            args += prompt_tool(lab)
        front = {"--bare": ["--bare"], "--safe-mode": ["--safe-mode"],
                 "--restricted": ["--restricted", "--tools", "Bash"],
                 "value--bare": ["--append-system-prompt", "--bare"]}.get(mode, [])
        env.update({"SIMPLE": {"CLAUDE_CODE_SIMPLE": "1"}, "SAFEENV": {"CLAUDE_CODE_SAFE_MODE": "1"},
                    "RESTRICTEDENV": {"CLAUDE_CODE_RESTRICTED": "1"}}.get(mode, {}))
        touch_once(lab, "BARE", target)
        res = lab.run(["-p", "BARE go", *front, *args], env=env, timeout=60)
        results = [r["content"][:70] for r in lab.server.tool_results()]
        outcome = "RAN" if target.exists() else ("no call" if not results else "not run")
        print(v, mode, source, "|", outcome, "| marks:", [m["who"] for m in lab.marks()], "|",
              results[:1] if outcome != "RAN" else "", "| rc", res["rc"], res["err"].strip()[:90] if res["rc"] else "",
              flush=True)
    finally:
        lab.close()


def modes(v, which=MODES):
    for mode in which:
        for source in SOURCES:
            mode_case(v, mode, source)


# --- 4. env blocks ------------------------------------------------------------------------------

def env_case(v, where, block, note=""):
    """--settings FILE registers an HTTP hook (header `Bearer $CGTOK`, allowedEnvVars CGTOK) and a
    command hook that records CGTOK; the CLI starts with CGTOK=real; `{"env": block}` goes in WHERE."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    lab = Lab(v)
    try:
        guard = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
            {"type": "http", "url": f"http://127.0.0.1:{srv.server_address[1]}/h",
             "headers": {"Authorization": "Bearer $CGTOK"}, "allowedEnvVars": ["CGTOK"]},
            lab.hook("cmd", "", "CGTOK")]}]}}
        path = lab.root / "guard.json"
        lab.write(str(path), guard)
        args = ["--settings", str(path)]
        if where == "project":
            lab.write(".claude/settings.json", {"env": block})
        elif where == "local":
            lab.write(".claude/settings.local.json", {"env": block})
        elif where == "user":
            lab.write(str(lab.home / ".claude/settings.json"), {"env": block})
        elif where == "second --settings":
            args += ["--settings", json.dumps({"env": block})]
        elif where == "same --settings":
            lab.write(str(path), {**guard, "env": block})
        target = lab.root / "t"
        touch_once(lab, "ENV", target)
        res = lab.run(["-p", "ENV go", "--allowedTools", "Bash", *args], env={"CGTOK": "real"}, timeout=60)
        print(v, where, json.dumps(block), note, "| HTTP hook header:", seen, "| command hook saw CGTOK:",
              [m["env"].get("CGTOK") for m in lab.marks() if m["who"] == "cmd"], "| rc", res["rc"], flush=True)
    finally:
        lab.close()
        srv.shutdown()


def env(v):
    for where in ("project", "local", "user", "second --settings", "same --settings"):
        env_case(v, where, {"CGTOK": "evil"})
    for where in ("project", "local", "user", "same --settings"):
        env_case(v, where, {"CLAUDE_CODE_SIMPLE": "1"})
    env_case(v, "project", {"CLAUDE_CODE_SAFE_MODE": "1"})
    env_case(v, "user", {"CLAUDE_CODE_SAFE_MODE": "1"})
    env_case(v, "project", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, "(times out when honoured)")


# --- 5. repository code before the first tool call ----------------------------------------------

def plugin(lab, root, name, who):
    (root / ".claude-plugin").mkdir(parents=True, exist_ok=True)
    (root / ".claude-plugin/plugin.json").write_text(json.dumps({"name": name, "version": "0.0.1", "description": "x"}))
    (root / "hooks").mkdir(exist_ok=True)
    (root / "hooks/hooks.json").write_text(json.dumps(hooks_of(lab, who, events=("SessionStart", "UserPromptSubmit",
                                                                                   "PreToolUse"))))


def pre_tool_repo(lab):
    """Project hooks, apiKeyHelper, statusLine, an approved .mcp.json server, and a plugin the
    repository enables from a directory marketplace it declares; a --plugin-dir plugin too."""
    mkt = lab.work / "mkt"
    (mkt / ".claude-plugin").mkdir(parents=True)
    (mkt / ".claude-plugin/marketplace.json").write_text(json.dumps(
        {"name": "m1", "owner": {"name": "x"}, "plugins": [{"name": "p1", "source": "./p1", "description": "x"}]}))
    plugin(lab, mkt / "p1", "p1", "repo-plugin")
    lab.write(".claude/settings.json", {
        **hooks_of(lab, "proj", events=("SessionStart", "UserPromptSubmit", "Setup", "PreToolUse")),
        "apiKeyHelper": lab.marker("apikey-helper"),
        "statusLine": {"type": "command", "command": lab.marker("status-line")},
        "enableAllProjectMcpServers": True,
        "extraKnownMarketplaces": {"m1": {"source": {"source": "directory", "path": str(mkt)}}},
        "enabledPlugins": {"p1@m1": True}})
    lab.write(".mcp.json", {"mcpServers": {"repo": lab.mcp_server("mcp-repo")}})
    plugin(lab, lab.root / "cplug", "cplug", "flag-plugin")


def pre_tool_code(v):
    for trusted in (True, False):
        lab = Lab(v, trusted=trusted)
        try:
            pre_tool_repo(lab)
            lab.model([{"match": "", "turns": [{"text": "hi"}]}])
            for extra in (["--plugin-dir", str(lab.root / "cplug")], ["--init"]):
                r = lab.run(["-p", "PRE hello", *extra], timeout=60)
                print(v, "-p", " ".join(extra[:1]), "trusted" if trusted else "untrusted",
                      "| ran before the model's answer:",
                      [(m["who"], m.get("event") or "", m.get("trigger") or "") for m in r["marks"]], flush=True)
        finally:
            lab.close()


def interactive_trust(v):
    from claudeguard.testing.tui import close_tui, screen_now, spawn_tui

    for trusted in (False, True):
        lab = Lab(v, trusted=trusted)
        try:
            pre_tool_repo(lab)
            lab.model([{"match": "", "turns": [{"text": "hi"}]}])
            child = spawn_tui([lab.claude, "--plugin-dir", str(lab.root / "cplug")], lab.env, lab.work)
            screen = screen_now(child, settle=8)
            before = [(m["who"], m.get("event") or "") for m in lab.marks()]
            print(v, "interactive", "trusted" if trusted else "untrusted",
                  "| trust dialog:", "trust this folder" in screen,
                  "| ran before any key:", before, flush=True)
            if not trusted:
                child.send("\r")
                screen = screen_now(child, settle=8)
                after = [(m["who"], m.get("event") or "") for m in lab.marks()][len(before):]
                print(v, "   after Enter on the dialog:", after,
                      "|", " ".join(screen.split())[-120:], flush=True)
            close_tui(child)
        finally:
            lab.close()


def agents(v):
    """A repository agent with `hooks:` in its front matter, one with `permissionMode:
    bypassPermissions`, and a caller's --agents JSON with it; each foreground subagent runs
    `touch` outside the working directory (which needs approval; -p, no rules)."""
    lab = Lab(v)
    try:
        lab.write(".claude/agents/hk.md", "---\nname: hk\ndescription: agent with hooks\nhooks:\n  PreToolUse:\n"
                  "    - matcher: \"*\"\n      hooks:\n        - type: command\n"
                  f"          command: \"{lab.hook('agent-file-hook')['command']}\"\n---\nYou run commands.\n")
        lab.write(".claude/agents/byp.md", "---\nname: byp\ndescription: bypass agent\n"
                  "permissionMode: bypassPermissions\n"
                  "---\nYou run commands.\n")
        t = {k: lab.root / k for k in ("hk", "byp", "jbyp")}
        calls = [{"tool_use": {"name": "Agent", "input": {"description": k, "prompt": f"SUB{k.upper()} go",
                                                          "subagent_type": k, "run_in_background": False}}} for k in t]
        lab.model([{"match": "MAIN", "turns": [*calls, {"text": "fin"}]},
                   *({"match": f"SUB{k.upper()}", "turns": [{"tool_use": {"name": "Bash", "input": {
                       "command": f"touch {p}", "description": "t"}}}, {"text": "ok"}]} for k, p in t.items())])
        aj = json.dumps({"jbyp": {"description": "json bypass agent", "prompt": "You run commands.",
                                  "permissionMode": "bypassPermissions"}})
        lab.run(["-p", "MAIN go", "--agents", aj], timeout=120)
        print(v, "agent-file hooks fired:", [(m["who"], m.get("event"), m.get("agent")) for m in lab.marks()],
              "| file bypass agent's touch ran:", t["byp"].exists(), "| --agents bypass agent's touch ran:",
              t["jbyp"].exists(), "| plain hk agent's touch ran:", t["hk"].exists(), flush=True)
    finally:
        lab.close()


# --- 6. several PreToolUse hooks -----------------------------------------------------------------

def hooks_case(v, other, ours, *, pt=False, ask_rule=False):
    lab = Lab(v)
    try:
        target = lab.root / "t"
        proj = hooks_of(lab, "other", other)
        if ask_rule:
            proj["permissions"] = {"ask": ["Bash(touch *)"]}
        lab.write(".claude/settings.json", proj)
        args = ["--settings", json.dumps(hooks_of(lab, "ours", ours)), *(prompt_tool(lab) if pt else [])]
        touch_once(lab, "MULTI", target)
        lab.run(["-p", "MULTI go", *args], timeout=60)
        results = [r["content"][:60] for r in lab.server.tool_results()]
        print(v, f"repository hook: {other or 'nothing'}, --settings hook: {ours or 'nothing'}",
              "+ ask rule" if ask_rule else "", "+ prompt tool (denies)" if pt else "", "|",
              "RAN" if target.exists() else "not run", "| asked:", sorted({m["who"] for m in lab.marks()}), "|",
              "" if target.exists() else results, flush=True)
    finally:
        lab.close()


def hooks(v):
    hooks_case(v, "", "")
    hooks_case(v, "allow", "")
    hooks_case(v, "allow", "ask")
    hooks_case(v, "allow", "ask", pt=True)
    hooks_case(v, "allow", "", pt=True)
    hooks_case(v, "allow", "", ask_rule=True)
    hooks_case(v, "allow", "deny")


# --- 7. where settings come from ----------------------------------------------------------------

def roots_go(lab, args, note, env=None, cwd=None):
    target = lab.root / "t"
    if target.exists():
        target.unlink()
    touch_once(lab, "ROOTS", target)
    res = lab.run(["-p", "ROOTS go", "--allowedTools", "Bash", *args], env=env, cwd=cwd, timeout=60)
    print(lab.version, note, "|", "RAN" if target.exists() else "not run", "| hooks and servers that ran:",
          sorted({m["who"] for m in lab.marks()}), "| rc", res["rc"], flush=True)
    lab.mark.write_text("")


def roots(v):
    def src(lab, who, deny=False):
        return {**hooks_of(lab, who), **(DENY if deny else {})}

    if v != "2.1.197":
        lab = Lab(v)
        try:
            pcr = lab.root / "pcr"
            lab.write(str(pcr / ".claude/settings.json"), src(lab, "pcr-project"))
            lab.write(str(pcr / ".claude/settings.local.json"), src(lab, "pcr-local"))
            lab.write(str(pcr / ".mcp.json"), {"mcpServers": {"p": lab.mcp_server("mcp-pcr")}})
            lab.write(".claude/settings.json", {**src(lab, "cwd-project"), "enableAllProjectMcpServers": True})
            lab.write(".claude/settings.local.json", src(lab, "cwd-local"))
            lab.write(".mcp.json", {"mcpServers": {"c": lab.mcp_server("mcp-cwd")}})
            roots_go(lab, ["--project-config-root", str(pcr)], "--project-config-root DIR")
            lab.write(str(pcr / ".claude/settings.json"),
                      {**src(lab, "pcr-project", True), "enableAllProjectMcpServers": True})
            roots_go(lab, ["--project-config-root", str(pcr)], "--project-config-root DIR (a deny in DIR)")
        finally:
            lab.close()
    lab = Lab(v)
    try:
        lab.write(".claude/settings.json", src(lab, "committed-project"))
        subprocess.run(["git", "-C", str(lab.work), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(lab.work), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "s"],
                       check=True)
        lab.write(".claude/settings.local.json", src(lab, "main-local"))
        lab.write(".claude/settings.json", src(lab, "main-project-uncommitted"))
        roots_go(lab, ["-w", "w1"], "-w (committed settings.json; the checkout's own settings.json and .local.json)")
    finally:
        lab.close()
    lab = Lab(v)
    try:
        add = lab.root / "added"
        lab.write(str(add / ".claude/settings.json"), src(lab, "add-dir-project", True))
        lab.write(str(add / ".claude/settings.local.json"), src(lab, "add-dir-local"))
        roots_go(lab, ["--add-dir", str(add)], "--add-dir D (a deny and hooks in D)")
        lab.write(".claude/settings.json", src(lab, "project"))
        lab.write(str(lab.home / ".claude/settings.json"), src(lab, "user"))
        lab.write(".claude/settings.local.json", src(lab, "local"))
        for value in ("user", "project", ""):
            roots_go(lab, ["--setting-sources", value], f"--setting-sources '{value}'")
        cfg = lab.root / "cfgdir"
        lab.write(str(cfg / "settings.json"), src(lab, "config-dir"))
        (cfg / ".claude.json").write_text((lab.home / ".claude.json").read_text())
        roots_go(lab, [], "CLAUDE_CONFIG_DIR=X", env={"CLAUDE_CONFIG_DIR": str(cfg)})
        ours = json.dumps(src(lab, "cli-settings"))
        for managed in (src(lab, "managed", True), {"allowManagedHooksOnly": True}, {"disableAllHooks": True}):
            roots_go(lab, ["--settings", ours, "--managed-settings", json.dumps(managed)],
                     f"--managed-settings {json.dumps(managed)[:60]}")
    finally:
        lab.close()


def roots_subdir(v):
    lab = Lab(v)
    try:
        lab.write(".claude/settings.json", hooks_of(lab, "root-project"))
        lab.write(".claude/settings.local.json", hooks_of(lab, "root-local"))
        sub = lab.work / "sub"
        lab.write(str(sub / ".claude/settings.json"), hooks_of(lab, "sub-project"))
        roots_go(lab, [], "cwd a sub-directory with its own .claude/settings.json", cwd=sub)
        (lab.work / "sub2").mkdir()
        roots_go(lab, [], "cwd a sub-directory without .claude", cwd=lab.work / "sub2")
    finally:
        lab.close()


EXPERIMENTS = {f.__name__.replace("_", "-"): f for f in (
    subcommands, doctor_pty, mcp_serve, words, edit_commands, reload, reload_latency, modes, env, pre_tool_code,
    interactive_trust, agents, hooks, roots, roots_subdir)}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in EXPERIMENTS:
        raise SystemExit(f"usage: {sys.argv[0]} {{{','.join(EXPERIMENTS)}}} VERSION [VERSION ...]")
    for version in sys.argv[2:]:
        EXPERIMENTS[sys.argv[1]](version)
