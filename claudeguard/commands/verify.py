"""``claudeguardctl doctor --verify``: prove the guard on the real CLI this machine has, offline.

The CLI claudeguard would use runs under claudeguard itself (``python -m claudeguard``, the
launcher a user runs) against the embedded scripted model (``testing/model_server.py``), in a
temp dir removed afterwards: its own HOME per run, and one runtime dir (so one resident service
of its own, stopped by pid at the end), log dir and config dir for all. The runs are independent
and go at once. The checks, each one line:

- ``deny-main``, ``deny-subagent``, ``deny-background``: a deny rule holds for the main agent, a
  foreground subagent and a background subagent: the call did not run, the model was told, and
  the guard's PreToolUse hook decided it (exactly one audit row, the agent's type on it). A CLI
  whose hooks do not fire fails here even where its own copy of the rule denied the call.
- ``ask-channel``: a call an ask rule sends to a human (the hook asks) and a call no rule decides
  (the CLI asks in -p: the PermissionRequest hook or the prompt tool, per version) each reach the
  channel exactly once; the first is approved (``claudeguardctl approve``) and runs, the second
  denied with a message (``claudeguardctl deny``), which the model gets, and does not run.
- ``silencing-refused``: a repository whose ``.claude/settings.json`` sets ``disableAllHooks`` is
  refused before the CLI starts (exit 2, one line naming the file and the key; no model request).
- ``sandbox``: where the box is on (``[security] sandbox`` not "off" in the user's config, and
  bubblewrap starts here), an allowed Bash call runs a probe script in the project under the
  user's ``[sandbox]`` table and ``sandbox = "require"``: it writes in the project, and cannot
  write beside it, read the guard's runtime dir or audit log, signal this process or open a Unix
  socket (unless ``allow_unix_sockets``). A CLI that runs Bash without the guard's shell prefix
  fails here. Skipped, with why, where the box is off; failed where it is required and cannot run.
- ``background-sessions`` (2.1.330 on): a ``claudeguard --bg`` session's denied call is decided
  by the guard after the launcher returned; the CLI's daemon is stopped by pid afterwards.

What the user's setup brings in: the Claude settings of every run of this user (the user
settings file; managed settings the CLI reads from the system dir itself), less what would take
the runs off the local model, run a credential helper or change the verification's policy; and
``[security] allow_settings_override``, which lets such settings through as in the user's runs
(not for ``silencing-refused``, which proves the refusal). Nothing else of the user's config.

The result is recorded per binary (``plan.verified``; this process is the only writer of the
record). ``python -m claudeguard.commands.verify CLI`` is the background verification the guard
service starts (``service/verify.py``): quiet, and it reuses a record the binary's hash has.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import tomlkit

from claudeguard import __version__
from claudeguard.channel.answers import list_pending
from claudeguard.config.load import env_overrides, load_config
from claudeguard.errors import GuardError, run_main
from claudeguard.paths import guard_paths, private_dir, state_dir_text
from claudeguard.plan import sandbox as box
from claudeguard.plan import verified
from claudeguard.plan import verify_leftovers as leftovers
from claudeguard.plan.cli_version import cli_version
from claudeguard.plan.discovery import version_at_least
from claudeguard.procs import ask_version, capture, process_start
from claudeguard.switches import service_on
from claudeguard.testing import bg_daemon
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.offline_home import offline_env, prepare_home
from claudeguard.testing.services import stop_services

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable

    from claudeguard.config.load import Config
    from claudeguard.plan.verified import CheckResult, Record

CHECKS = ("deny-main", "deny-subagent", "deny-background", "ask-channel", "silencing-refused", "sandbox",
          "background-sessions")
BG_FLOOR = (2, 1, 330)  # the first CLI whose `--bg` sessions run with an API key (2.1.197's wait for a login)
RUN_TIMEOUT = 60.0  # one guarded run, at most (a hung CLI fails its checks, never the verification's end)
KEY = "sk-ant-verify-offline-key-0123456789abcdef"
LAUNCHER = [sys.executable, "-m", "claudeguard"]
CTL = [sys.executable, "-m", "claudeguard.commands.ctl"]
DENIED_MESSAGE = "claudeguardctl doctor --verify denied this call"

# The verification's own policy: what the checks ask of the guard.
POLICY = """\
[permissions]
deny = ["Bash(touch cgv-deny-*)"]
ask = ["Bash(touch cgv-ask-*)"]
"""


def _bash(command: str) -> dict[str, Any]:
    return {"tool_use": {"name": "Bash", "input": {"command": command, "description": command}}}


def _agent(prompt: str, background: bool) -> dict[str, Any]:
    return {"tool_use": {"name": "Agent", "input": {"description": "verify", "prompt": prompt,
                                                    "subagent_type": "general-purpose",
                                                    "run_in_background": background}}}


# The scripted model: one script per conversation (matched by a marker in its first message).
SCRIPTS: list[dict[str, Any]] = [
    {"match": "CGV-MAIN", "turns": [_bash("touch cgv-deny-main"), _agent("CGV-SUBFG: run it", False),
                                    _agent("CGV-SUBBG: run it", True), {"text": "main done"}]},
    {"match": "CGV-SUBFG", "turns": [_bash("touch cgv-deny-fg"), {"text": "fg done"}]},
    {"match": "CGV-SUBBG", "turns": [_bash("touch cgv-deny-bg"), {"text": "bg done"}]},
    {"match": "CGV-ASK", "turns": [_bash("touch cgv-ask-yes"), _bash("touch cgv-plain-no"), {"text": "ask done"}]},
    {"match": "CGV-SILENT", "turns": [_bash("touch cgv-silenced"), {"text": "silent done"}]},
    {"match": "CGV-BGSESSION", "turns": [_bash("touch cgv-deny-session"), {"text": "session done"}]},
    {"match": "CGV-BOX", "turns": [_bash("sh cgv-box.sh"), {"text": "box done"}]},
]

# Keys of the user's Claude settings left out of the verification's HOME: they would take the runs
# off the local model or run a credential helper, or replace the verification's policy.
DROPPED_SETTINGS = ("permissions", "apiKeyHelper", "awsAuthRefresh", "awsCredentialExport", "gcpAuthRefresh",
                    "otelHeadersHelper", "forceLoginMethod", "forceLoginOrgUUID", "model")
DROPPED_ENV_PREFIXES = ("ANTHROPIC_", "CLAUDE_CODE_USE_", "AWS_", "GOOGLE_", "VERTEX_", "CLOUD_ML_")
DROPPED_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "NO_PROXY")


def _check(name: str, ok: bool, detail: str, *, skipped: bool = False) -> CheckResult:
    out: CheckResult = {"name": name, "ok": ok, "detail": detail}
    if skipped:
        out["skipped"] = True
    return out


# --- the bed: what every run shares ----------------------------------------------------------------


class Bed:
    """The temp dir of one verification, and the environment of each of its runs."""

    def __init__(self, real: str, root: Path, server: ModelServer, user_settings: dict[str, object] | None,
                 override: bool, marker: str = "") -> None:
        self.real = real
        self.root = root
        self.marker = marker  # every process of the bed carries it (plan/verify_leftovers.py)
        self.server = server
        self.user_settings = user_settings
        self.override = override
        self.runtime = root / "rt"
        self.log = root / "log"

    def env(self, name: str, *, override: bool | None = None, allow: str | None = None,
            security: tuple[str, ...] = (), extra: str = "") -> tuple[dict[str, str], Path]:
        """The environment of the run ``name`` (its own HOME and work dir; the shared runtime and
        log dirs) and its work dir. Its config is ``POLICY`` with ``allow`` (a rule allowed),
        ``security`` lines (and allow_settings_override per ``override``, default: the user's),
        and ``extra`` TOML tables after them."""
        base = self.root / name
        home, work = base / "home", base / "work"
        work.mkdir(parents=True)
        prepare_home(home, cwd=work, api_key=KEY)
        if self.user_settings is not None:
            (home / ".claude" / "settings.json").write_text(json.dumps(self.user_settings))
        caller = {k: v for k, v in os.environ.items()
                  if not k.startswith("CLAUDEGUARD_") or k in ("CLAUDEGUARD_SERVICE", "CLAUDEGUARD_PLANNER")}
        env = offline_env(home, self.server.url, KEY, base=caller)
        config = base / "config"
        (config / "claudeguard").mkdir(parents=True)
        lines = list(security)
        if self.override if override is None else override:
            lines.append("allow_settings_override = true")
        text = POLICY + (f"allow = [{json.dumps(allow)}]\n" if allow else "")
        text += "\n[security]\n" + "\n".join(lines) + "\n" if lines else ""
        (config / "claudeguard" / "config.toml").write_text(text + ("\n" + extra if extra else ""))
        env.update({"XDG_CONFIG_HOME": str(config), "CLAUDEGUARD_RUNTIME_DIR": str(self.runtime),
                    "CLAUDEGUARD_LOG_DIR": str(self.log), "CLAUDEGUARD_CLAUDE": self.real})
        if self.marker:
            env[leftovers.OWNER_VAR] = self.marker
        return env, work

    def audit(self) -> list[dict[str, Any]]:
        rows = []
        try:
            lines = (self.log / "audit.jsonl").read_text().splitlines()
        except OSError:
            return []
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                rows.append(row)
        return rows

    def rows_for(self, command: str) -> list[dict[str, Any]]:
        return [r for r in self.audit() if r.get("summary") == f"Bash: {command}"]

    def results_for(self, script: str) -> list[dict[str, Any]]:
        return [t for t in self.server.tool_results() if t.get("script") == script and t.get("tool") == "Bash"]


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = RUN_TIMEOUT) -> tuple[int | None, str]:
    """Run a launcher to its end: (exit code, its stderr); (None, ...) when it did not end in time
    (then its process group is killed)."""
    # Not through procs.capture: on a time-out the launcher's whole group goes (the CLI, its tools).
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        _, err = proc.communicate()
        return None, err
    return proc.returncode, err


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        pass


def _refused(code: int | None, err: str) -> str | None:
    """What a launcher that did not run the scenario said: a refusal (exit 2) or a time-out."""
    if code is None:
        return f"the run did not end within {RUN_TIMEOUT:g} s"
    if code == 2:
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        return f"claudeguard refused to start: {lines[-1] if lines else 'exit 2'}"
    return None


# --- the checks --------------------------------------------------------------------------------------


def _deny(bed: Bed, work: Path, name: str, who: str, agent_type: str | None, script: str, marker: str,
          ran: tuple[int | None, str]) -> CheckResult:
    command = f"touch {marker}"
    if (work / marker).exists():
        return _check(name, False, f"the {who}'s denied call ran (`{command}` created its file)")
    refused = _refused(*ran)
    results = bed.results_for(script)
    rows = bed.rows_for(command)
    if not results:
        return _check(name, False, refused or f"the {who} never made its call (the run exited {ran[0]}"
                                              f"{': ' + ran[1].strip()[-160:] if ran[1].strip() else ''})")
    if not rows:
        said = str(results[0].get("content") or "")[:100]
        return _check(name, False, f"the {who}'s call did not run, but claudeguard's hook never decided it: "
                                   f"the CLI's hooks did not fire for the {who} (the model was told: {said!r})")
    if len(rows) != 1 or len(results) != 1:
        return _check(name, False, f"one call of the {who}: {len(rows)} audit rows, {len(results)} results "
                                   "(expected exactly one each)")
    row, result = rows[0], results[0]
    got = (row.get("decision"), row.get("decided_by"), row.get("via"), row.get("agent_type"))
    if got != ("deny", "rule", "hook", agent_type):
        return _check(name, False, f"the {who}'s call was decided {got[0]} by {got[1]} through {got[2]} for agent "
                                   f"{got[3]!r} (expected deny by rule through the PreToolUse hook for "
                                   f"{agent_type!r})")
    if not result.get("is_error"):
        return _check(name, False, f"the {who}'s call did not run, but the model was not told it was denied")
    return _check(name, True, f"the {who}'s `{command}` was denied by the guard's hook ({row.get('rule')}) "
                              "and did not run")


def scenario_deny(bed: Bed) -> list[CheckResult]:
    env, work = bed.env("deny")
    ran = _run([*LAUNCHER, "-p", "CGV-MAIN: run the checks", "--permission-mode", "default"], env, work)
    return [_deny(bed, work, "deny-main", "main agent", None, "CGV-MAIN", "cgv-deny-main", ran),
            _deny(bed, work, "deny-subagent", "foreground subagent", "general-purpose", "CGV-SUBFG", "cgv-deny-fg",
                  ran),
            _deny(bed, work, "deny-background", "background subagent", "general-purpose", "CGV-SUBBG",
                  "cgv-deny-bg", ran)]


def scenario_ask(bed: Bed) -> list[CheckResult]:
    env, work = bed.env("ask")
    # Not through procs: the run goes on while this loop answers its requests (its handle polled,
    # its process group killed at the end).
    proc = subprocess.Popen([*LAUNCHER, "-p", "CGV-ASK: run the checks", "--permission-mode", "default"], env=env,
                            cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    seen: dict[str, str] = {}  # request id -> its summary
    answers: list[str] = []
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        while proc.poll() is None and time.monotonic() < deadline:
            for request in list_pending():
                if request.id in seen:
                    continue
                seen[request.id] = request.summary
                approve = "touch cgv-ask-yes" in request.summary
                verb = ["approve", request.id] if approve else ["deny", request.id, "--message", DENIED_MESSAGE]
                answered = capture([*CTL, *verb], env=env, cwd=str(work), timeout=30)
                if answered.returncode != 0:
                    answers.append(f"`claudeguardctl {verb[0]}` failed: {answered.stderr.strip()[:160]}")
            time.sleep(0.05)  # the channel is files: this loop polls them, as `pending` would
        try:
            _, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            _, err = proc.communicate()
            code = None
    finally:
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
    return [_ask_verdict(bed, work, seen, answers, code, err)]


def _ask_verdict(bed: Bed, work: Path, seen: dict[str, str], answers: list[str], code: int | None,
                 err: str) -> CheckResult:
    name = "ask-channel"
    if answers:
        return _check(name, False, answers[0])
    if (work / "cgv-plain-no").exists():
        return _check(name, False, "the call denied in the channel ran anyway (`touch cgv-plain-no`)")
    yes = [s for s in seen.values() if "touch cgv-ask-yes" in s]
    no = [s for s in seen.values() if "touch cgv-plain-no" in s]
    if len(yes) != 1 or len(no) != 1 or len(seen) != 2:
        refused = _refused(code, err)
        return _check(name, False, refused or (
            f"expected two requests in the channel, one each: the ask rule's call asked {len(yes)} time(s), the "
            f"call no rule decides {len(no)} time(s), {len(seen) - len(yes) - len(no)} other(s)"))
    if not (work / "cgv-ask-yes").exists():
        return _check(name, False, "the call approved in the channel did not run (`touch cgv-ask-yes`)")
    humans = [(r.get("summary"), r.get("decision"), r.get("via")) for r in bed.audit()
              if r.get("decided_by") == "human"]
    decisions = sorted((s, d) for s, d, _ in humans)
    if decisions != [("Bash: touch cgv-ask-yes", "allow"), ("Bash: touch cgv-plain-no", "deny")]:
        return _check(name, False, f"the audit log has these human answers: {decisions} (expected one approve, "
                                   "one deny)")
    told = [t for t in bed.results_for("CGV-ASK") if DENIED_MESSAGE in str(t.get("content"))]
    if len(told) != 1:
        return _check(name, False, "the model was not given the deny's message")
    asker = next((v for s, _, v in humans if s == "Bash: touch cgv-plain-no"), "?")
    return _check(name, True, f"two calls asked once each: an ask rule's (through the hook) was approved and ran; one "
                              f"no rule decides (the CLI asked, through {asker}) was denied, the model got the message")


def scenario_silencing(bed: Bed) -> list[CheckResult]:
    env, work = bed.env("silencing", override=False)
    (work / ".claude").mkdir()
    (work / ".claude" / "settings.json").write_text('{"disableAllHooks": true}\n')
    code, err = _run([*LAUNCHER, "-p", "CGV-SILENT: run the checks"], env, work)
    return [_silencing_verdict(bed, work, code, err)]


def _silencing_verdict(bed: Bed, work: Path, code: int | None, err: str) -> CheckResult:
    name = "silencing-refused"
    asked = [r for r in bed.server.requests() if r.get("script") == "CGV-SILENT"]
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    if (work / "cgv-silenced").exists() or asked:
        return _check(name, False, "a repository's .claude/settings.json with disableAllHooks was not refused: the "
                                   "CLI ran")
    if code != 2 or len(lines) != 1 or "disableAllHooks" not in lines[0] or ".claude/settings.json" not in lines[0]:
        return _check(name, False, f"expected exit 2 and one line naming the file and the key; got exit {code}: "
                                   f"{err.strip()[:200]!r}")
    note = ("; note: your config's security.allow_settings_override = true runs such a repository anyway"
            if bed.override else "")
    return _check(name, True, "a repository's .claude/settings.json with disableAllHooks was refused before the CLI "
                              f"started (exit 2){note}")


def scenario_background(bed: Bed, version: str | None) -> list[CheckResult]:
    name = "background-sessions"
    if version is not None and not version_at_least(version, BG_FLOOR):
        return [_check(name, True, f"Claude Code {version} has no background sessions that run offline "
                                   "(`claude --bg` with an API key from 2.1.330 on)", skipped=True)]
    if not service_on():
        return [_check(name, True, "the guard service is off (CLAUDEGUARD_SERVICE=0), and claudeguard "
                                   "refuses `--bg` without it", skipped=True)]
    env, work = bed.env("background")
    try:
        launch = bg_daemon.launch_bg([*LAUNCHER, "--bg", "CGV-BGSESSION: run the checks", "--permission-mode",
                                      "default"], env, work, timeout=RUN_TIMEOUT)
        if launch.returncode != 0 or not launch.short_id:
            lines = [ln for ln in launch.stderr.strip().splitlines() if ln.strip()]
            return [_check(name, False, f"`claudeguard --bg` exited {launch.returncode} without a session id: "
                                        f"{lines[-1] if lines else launch.stdout.strip()[:160]!r}")]
        command = "touch cgv-deny-session"
        # The session's call came back to the model; the guard's row, if it decided the call, was
        # written before the answer went to the CLI (a moment's grace for the file).
        _wait(lambda: bed.results_for("CGV-BGSESSION"), RUN_TIMEOUT)
        _wait(lambda: bed.rows_for(command), 2.0)
        results, rows = bed.results_for("CGV-BGSESSION"), bed.rows_for(command)
        if (work / "cgv-deny-session").exists():
            return [_check(name, False, f"the background session's denied call ran (`{command}`)")]
        if not results:
            return [_check(name, False, f"the background session {launch.short_id} made no call within "
                                        f"{RUN_TIMEOUT:g} s")]
        if len(rows) != 1 or rows[0].get("decision") != "deny" or rows[0].get("via") != "hook":
            return [_check(name, False, f"the background session's call was not decided by the guard's hook "
                                        f"({len(rows)} audit rows): the CLI's own background sessions run unguarded")]
        if rows[0].get("cli_short_id") != launch.short_id:
            return [_check(name, False, f"the guard decided the call, but for session {rows[0].get('cli_short_id')!r}, "
                                        f"not {launch.short_id!r}")]
        return [_check(name, True, f"the background session {launch.short_id}'s `{command}` was denied by the "
                                   "guard's hook after the launcher returned")]
    finally:
        bg_daemon.stop_daemon(env, grace=1.0)


def _wait(predicate: Callable[[], object], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.1)


# The probe the sandbox check's allowed Bash call runs (a file in the project: the guard's parser
# sees `sh cgv-box.sh`, so only the box stands between the probe and what it tries). It writes to
# BOX_RESULT the name of its pid 1 (bwrap: it ran in the box's pid namespace), a line for each way
# out it found, and "end". Its write beside the project is judged by the file outside: inside the
# box that path may lie in the box's own /tmp, where a write is harmless.
BOX_RESULT = "cgv-box-result"
BOX_PROBE = """\
out={result}
: > "$out"
echo "pid 1: $(cat /proc/1/comm 2>/dev/null)" >> "$out"
(echo escaped > {outside}) 2>/dev/null
if ls {runtime} > /dev/null 2>&1; then echo "read the guard's runtime dir {runtime}" >> "$out"; fi
if cat {audit} > /dev/null 2>&1; then echo "read the guard's audit log {audit}" >> "$out"; fi
{signal}{unix}echo end >> "$out"
"""
SIGNAL_PROBE = 'if kill -0 {pid} 2>/dev/null; then echo "signalled the verifying process {pid}" >> "$out"; fi\n'
UNIX_PROBE = ("if command -v python3 > /dev/null && python3 -c 'import socket; socket.socket(socket.AF_UNIX)' "
              "2>/dev/null; then echo 'opened a Unix socket' >> \"$out\"; fi\n")


def _user_config() -> Config | None:
    try:
        return load_config(Path.cwd(), env_overrides())
    except GuardError:
        return None


def check_sandbox(bed: Bed, cfg: Config | None) -> list[CheckResult]:
    """``sandbox``: the box, as the user's config ``cfg`` and this machine make it, holds one
    allowed call."""
    name = "sandbox"
    if cfg is None:
        return [_check(name, False, "your claudeguard config does not load (`claudeguardctl doctor` says why)")]
    chosen = box.mode(cfg)
    if chosen == "off":
        return [_check(name, True, f"off by your config ({cfg.source('security.sandbox')}): Bash calls run with all "
                                   "of your user's rights", skipped=True)]
    found = box.availability(cfg, dict(os.environ), guard_paths(cfg=cfg))
    if found.bwrap is None:
        if chosen == "require":
            return [_check(name, False, f"required by your config, and {found.reason}")]
        return [_check(name, True, f"none here ({found.reason}): sessions run without it", skipped=True)]
    settings = cfg.sandbox()
    table = {k: v for k, v in settings.items() if v not in (None, [], "")}
    env, work = bed.env("sandbox", allow="Bash(sh cgv-box.sh)", security=('sandbox = "require"',),
                        extra=tomlkit.dumps({"sandbox": table}))
    outside = work.parent / "outside-cgv"
    pid = os.getpid()
    # In the box's own pid namespace a small pid may be one of its own processes (it runs a dozen
    # at most); a machine just booted gives its first processes pids of a few hundred.
    signals = pid > 100
    (work / "cgv-box.sh").write_text(BOX_PROBE.format(
        result=BOX_RESULT, outside=shlex.quote(str(outside)), runtime=shlex.quote(str(bed.runtime)),
        audit=shlex.quote(str(bed.log / "audit.jsonl")),
        signal=SIGNAL_PROBE.format(pid=pid) if signals else "",
        unix="" if settings["allow_unix_sockets"] else UNIX_PROBE))
    ran = _run([*LAUNCHER, "-p", "CGV-BOX: run the probe", "--permission-mode", "default"], env, work)
    try:
        said = (work / BOX_RESULT).read_text().splitlines()
    except OSError:
        said = []
    escaped = [line for line in said if line != "end" and not line.startswith("pid 1: ")]
    # bwrap: a box of the call's own; box-enter: the call ran in the session's box (plan/box_enter.py)
    in_box = bool(said) and (said[0] == "pid 1: bwrap" or said[0].startswith("pid 1: box-enter"))
    if outside.exists():
        escaped.insert(0, f"wrote {outside}")
    if said[-1:] == ["end"] and not in_box:
        return [_check(name, False, f"the probe call ran outside the box ({said[0]}, not bwrap): the CLI did not run "
                                    "it through the guard's shell prefix" + "".join(f"; it {e}" for e in escaped))]
    if escaped:
        return [_check(name, False, "a Bash call of a boxed session " + "; ".join(escaped))]
    if not (in_box and said[1:] == ["end"]):
        refused = _refused(*ran)
        results = bed.results_for("CGV-BOX")
        if refused or not results:
            return [_check(name, False, refused or f"the probe call was never made (the run exited {ran[0]})")]
        told = str(results[0].get("content") or "")[:160]
        return [_check(name, False, f"the probe call did not run to its end in the project (the model was told: "
                                    f"{told!r})")]
    tried = "write beside the project, read the guard's runtime dir or audit log" + \
            (", signal a process outside it" if signals else "") + \
            ("" if settings["allow_unix_sockets"] else " or open a Unix socket")
    return [_check(name, True, f"a boxed Bash call ran in the project and could not {tried} "
                               f"(bubblewrap {found.bwrap}, network {settings['network']})")]


# --- the whole verification -----------------------------------------------------------------------


def user_claude_settings() -> dict[str, object] | None:
    """The user's own Claude settings (``$CLAUDE_CONFIG_DIR`` or ``~/.claude``: ``settings.json``)
    as the verification's HOME gets them: without ``DROPPED_SETTINGS`` and the ``env`` entries
    that would take a run off the local model. None: there are none (or none readable)."""
    base = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    try:
        data = json.loads(Path(base, "settings.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    kept = {k: v for k, v in data.items() if k not in DROPPED_SETTINGS}
    env = kept.get("env")
    if isinstance(env, dict):
        kept["env"] = {k: v for k, v in env.items()
                       if isinstance(k, str) and not k.startswith(DROPPED_ENV_PREFIXES) and k not in DROPPED_ENV}
    return kept


def _user_override(cfg: Config | None) -> bool:
    """The user's ``[security] allow_settings_override`` (lockdown: never)."""
    return cfg is not None and cfg.security()["allow_settings_override"] and not cfg.lockdown.value


def run_checks(real: str, version: str | None, progress: Callable[[str], None] | None = None) -> list[CheckResult]:
    """Every check of ``CHECKS`` on the CLI ``real``, in that order; the runs go at once.
    ``progress``: told one line when the runs start and one per check as it ends (doctor
    --verify says them on stderr: the runs take 10-20 s)."""
    made, marker = leftovers.make_root()
    root = Path(made)
    sockets_before = _cli_sockets()
    saved = os.environ.get("CLAUDEGUARD_RUNTIME_DIR")
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        # A SIGTERM or SIGHUP (a closed terminal) ends the verification through its way out,
        # which sweeps the bed, as Ctrl-C does.
        handlers = {signum: signal.signal(signum, _ended_by_signal) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with ModelServer(SCRIPTS) as server:
            cfg = _user_config()
            bed = Bed(real, root, server, user_claude_settings(), _user_override(cfg), marker)
            # This process answers the ask run's requests: its channel is the bed's.
            os.environ["CLAUDEGUARD_RUNTIME_DIR"] = str(bed.runtime)
            jobs: list[tuple[Callable[[], list[CheckResult]], tuple[str, ...]]] = [
                (lambda: scenario_deny(bed), ("deny-main", "deny-subagent", "deny-background")),
                (lambda: scenario_ask(bed), ("ask-channel",)),
                (lambda: scenario_silencing(bed), ("silencing-refused",)),
                (lambda: scenario_background(bed, version), ("background-sessions",)),
                (lambda: check_sandbox(bed, cfg), ("sandbox",)),
            ]
            if progress is not None:
                progress(f"verifying Claude Code {version or '(version unknown)'} ({real}) offline: "
                         f"{len(CHECKS)} checks at once, about 10-20 s")
            found = _run_all(jobs, progress)
    finally:
        if saved is None:
            os.environ.pop("CLAUDEGUARD_RUNTIME_DIR", None)
        else:
            os.environ["CLAUDEGUARD_RUNTIME_DIR"] = saved
        stop_services(root)  # their own way out first: they remove their files
        # Then whatever of the bed is still running (a daemon the CLI started, a run a signal
        # cut short), by its mark; and the dir.
        leftovers.sweep(marker)
        _remove_cli_sockets(sockets_before)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return [found[name] for name in CHECKS]


def _run_all(jobs: list[tuple[Callable[[], list[CheckResult]], tuple[str, ...]]],
             progress: Callable[[str], None] | None = None) -> dict[str, CheckResult]:
    """Each job in a thread of its own; a job that raised fails its checks with the reason.
    ``progress`` hears one line per check as its job ends."""
    found: dict[str, CheckResult] = {}
    lock = threading.Lock()
    started = time.monotonic()
    total = sum(len(names) for _, names in jobs)

    def one(job: Callable[[], list[CheckResult]], names: tuple[str, ...]) -> None:
        try:
            results = job()
        except Exception as exc:  # noqa: BLE001 - a check that cannot run fails, with why
            results = [_check(n, False, f"could not run: {type(exc).__name__}: {exc}") for n in names]
        with lock:
            for result in results:
                found[result["name"]] = result
                if progress is not None:
                    word = "skip" if result.get("skipped") else ("ok" if result["ok"] else "FAIL")
                    progress(f"[{len(found)}/{total}] {word} {result['name']} "
                             f"({time.monotonic() - started:.1f} s)")

    threads = [threading.Thread(target=one, args=job, daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(RUN_TIMEOUT * 2)
    for _, names in jobs:
        for n in names:
            found.setdefault(n, _check(n, False, f"did not finish within {RUN_TIMEOUT * 2:g} s"))
    return found


# The CLI (2.1.330 on) leaves a messaging socket per session in /tmp/cc-socks-<uid>/<pid>.sock,
# whatever TMPDIR says: the verification removes those of its own runs (new, and their process gone).
def _cli_sockets() -> set[str]:
    try:
        return set(os.listdir(f"/tmp/cc-socks-{os.getuid()}"))
    except OSError:
        return set()


def _remove_cli_sockets(before: set[str]) -> None:
    for name in _cli_sockets() - before:
        pid = name.split(".", 1)[0]
        if name.endswith(".sock") and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.unlink(f"/tmp/cc-socks-{os.getuid()}/{name}")
            except OSError:
                pass


# --- verify and record ---------------------------------------------------------------------------


def cli_version_of(real: str) -> str | None:
    """The CLI's version: its package.json or its own answer (``plan.cli_version``), else what
    ``--version`` says; None when neither tells."""
    found = cli_version(real)
    if found:
        return found
    try:
        return ask_version(real, timeout=10)
    except GuardError:
        return None


class Lock:
    """One verification of a binary at a time (this user, any process): ``flock`` on a file in the
    state dir named after the binary's path and stat key."""

    def __init__(self, real: str, key: list[int]) -> None:
        name = hashlib.sha256(json.dumps([os.path.realpath(real), key]).encode()).hexdigest()[:24]
        directory = private_dir(state_dir_text())
        self.fd = os.open(os.path.join(directory, f".verify-{name}.lock"),
                          os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)

    def take(self, wait: bool) -> bool:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True

    def close(self) -> None:
        os.close(self.fd)  # the lock goes with it


def verify(real: str, *, background: bool = False, progress: Callable[[str], None] | None = None) -> Record | None:
    """Verify the CLI ``real`` and record the result. ``background``: the service's run: None
    when another verification of the binary runs now, and a record the binary's hash already has
    is reused (recorded again under today's stat key) instead of verifying again."""
    real = os.path.realpath(real)
    key = verified.stat_key(real)
    if key is None:
        raise GuardError(f"{real}: cannot stat the CLI")
    lock = Lock(real, key)
    try:
        if not lock.take(wait=False):
            if background:
                return None
            if progress is not None:
                progress(f"waiting for another verification of {real} to end")
            lock.take(wait=True)
        started = time.monotonic()
        version = cli_version_of(real)
        hashed: dict[str, str] = {}
        hasher = threading.Thread(target=lambda: hashed.update(sha=verified.sha256_file(real)), daemon=True)
        hasher.start()
        if background:
            hasher.join()
            known = verified.records().get(hashed.get("sha", ""))
            if known is not None and verified.stat_key(real) == key:
                verified.remember(real, key, known["sha256"], version)
                return known
        checks = run_checks(real, version, progress)
        hasher.join()
        record: Record = {"cli_version": version, "sha256": hashed.get("sha", ""), "path": real,
                          "ok": all(c["ok"] for c in checks), "checks": checks,
                          "verified_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                          "duration_s": round(time.monotonic() - started, 1), "claudeguard": __version__}
        if not record["sha256"] or verified.stat_key(real) != key:
            record["ok"] = False
            record["checks"] = [*checks, _check("binary", False, "the binary changed while it was verified: "
                                                                 "nothing recorded")]
            return record
        verified.save_record(record)
        verified.remember(real, key, record["sha256"], version)
        return record
    finally:
        lock.close()


def _ended_by_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # the way out runs: the bed is swept (run_checks)


def watch_origin(parent: int | None, dirs: list[str], *, every: float = 0.5) -> threading.Thread:
    """A thread that ends this process (SIGTERM to itself, so that the main thread's way out
    sweeps the bed) when ``parent`` is gone or one of ``dirs`` is removed: a verification has
    no one to report to once the service that started it died, nor anything to record into
    once the home it started from is gone."""
    parent_start = process_start(parent) if parent else None

    def watch() -> None:
        while True:
            time.sleep(every)
            gone = (parent is not None and process_start(parent) != parent_start) or \
                not all(os.path.isdir(d) for d in dirs)
            if gone:
                os.kill(os.getpid(), signal.SIGTERM)
                return

    thread = threading.Thread(target=watch, name="verify-origin", daemon=True)
    thread.start()
    return thread


def main(argv: list[str]) -> int:
    """``python -m claudeguard.commands.verify [--parent PID] CLI``: the service's background
    verification (``--parent``: the service; when it is gone, so is this)."""

    def run() -> int:
        args = list(argv)
        parent = None
        if args[:1] == ["--parent"] and len(args) > 1 and args[1].isdigit():
            parent = int(args[1])
            del args[:2]
        if len(args) != 1 or not os.path.isabs(args[0]):
            print("usage: python -m claudeguard.commands.verify [--parent PID] /ABS/PATH/OF/CLAUDE", file=sys.stderr)
            return 2
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, _ended_by_signal)
        state = private_dir(state_dir_text())
        watch_origin(parent, [state])
        record = verify(args[0], background=True)
        return 0 if record is None or record.get("ok") else 1

    return run_main("claudeguard verify", run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
