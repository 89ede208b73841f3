"""``claudeguardctl doctor --verify`` (issue 26): it proves the guard on the real CLI, fails on the
exact check where a CLI's hooks do not fire (the real CLI silenced by the user's settings, and
stand-ins), records the result per binary, and a guarded run uses that record: once verified,
never again; a changed binary again; an unverified one refused under lockdown."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from claudeguard.plan import verified
from claudeguard.testing.wait import wait_until
from tests.shim_helpers import CTL, GUARD, guarded_env, write_user_config

HOOKLESS = Path(__file__).resolve().parent / "data" / "hookless_cli.py"
CHECKS = ["deny-main", "deny-subagent", "deny-background", "ask-channel", "silencing-refused", "sandbox",
          "background-sessions"]


def verify(env: dict, cwd: Path, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(CTL + ["doctor", "--verify", *extra], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def verify_json(env: dict, cwd: Path) -> tuple[int, dict]:
    proc = verify(env, cwd, "--json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def state_dir(env: dict) -> Path:
    return Path(env["XDG_STATE_HOME"]) / "claudeguard"


def records(env: dict) -> dict:
    return json.loads((state_dir(env) / verified.RECORD_FILE).read_text())["binaries"]


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(os.path.realpath(path)).read_bytes()).hexdigest()


def by_name(result: dict) -> dict:
    return {c["name"]: c for c in result["checks"]}


def leftovers(home: Path) -> list[int]:
    """Processes still running with a HOME inside ``home`` (the verification's own HOMEs are)."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(b"HOME=" + str(home).encode()) for e in entries):
            found.append(int(pid))
    return found


def stand_in(path: Path, body: str) -> Path:
    path.write_text(body)
    path.chmod(0o755)
    return path


def hookless(tmp_path: Path) -> Path:
    """A CLI that runs every tool call the model asks for and fires no hook (tests/data)."""
    return stand_in(tmp_path / "hookless-claude", f"#!/bin/sh\nexec python3 {HOOKLESS} \"$@\"\n")


# --- on the real CLI -------------------------------------------------------------------------------


def test_verify_proves_every_check_on_the_real_cli_and_records_it(real_claude, cli_version, offline_env):
    env = guarded_env(offline_env, real_claude)
    code, result = verify_json(env, offline_env.cwd)
    assert code == 0, result
    assert result["cli_version"] == cli_version and result["ok"] is True
    assert [c["name"] for c in result["checks"]] == CHECKS
    assert all(c["ok"] for c in result["checks"]), result["checks"]
    checks = by_name(result)
    # bubblewrap is installed (CI installs it): the probe ran boxed, and found no way out
    assert not checks["sandbox"].get("skipped"), checks["sandbox"]
    assert checks["sandbox"]["detail"].startswith(
        "a boxed Bash call ran in the project and could not write beside the project, read the guard's runtime dir "
        "or audit log, signal a process outside it or open a Unix socket (bubblewrap "), checks["sandbox"]
    if cli_version == "2.1.197":  # its --bg sessions wait for a claude.ai login: nothing to run offline
        assert checks["background-sessions"]["skipped"]
    else:
        assert "denied by the guard's hook after the launcher returned" in checks["background-sessions"]["detail"]
    # recorded for this binary, 0600 in a 0700 state dir, by its SHA-256; its hash cached by path
    sha = sha256(real_claude)
    rec = records(env)[sha]
    assert rec["ok"] is True and rec["cli_version"] == cli_version and rec["checks"] == result["checks"]
    assert stat.S_IMODE((state_dir(env) / verified.RECORD_FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE(state_dir(env).stat().st_mode) == 0o700
    cache = json.loads((state_dir(env) / verified.HASH_FILE).read_text())["paths"]
    assert cache[os.path.realpath(real_claude)]["sha256"] == sha
    # nothing left behind: its temp dir, its service, the CLI's daemon
    tmp = Path(env["TMPDIR"])
    assert not [p for p in tmp.iterdir() if p.name.startswith("claudeguard-verify-")]
    assert leftovers(tmp) == []


@pytest.mark.newest_cli
def test_verify_fails_on_the_exact_checks_when_the_users_settings_silence_the_hooks(real_claude, cli_version,
                                                                                      offline_env):
    # The user's own Claude settings switch every hook off, and the user's config lets the launcher
    # run anyway: the CLI still denies by its own copy of the rule, but the guard never decides.
    (offline_env.home / ".claude" / "settings.json").write_text('{"disableAllHooks": true}')
    env = guarded_env(offline_env, real_claude)
    write_user_config(env, "[security]\nallow_settings_override = true\n")
    code, result = verify_json(env, offline_env.cwd)
    assert code == 1 and result["ok"] is False
    checks = by_name(result)
    for name in ("deny-main", "deny-subagent", "deny-background"):
        assert not checks[name]["ok"], checks[name]
        assert "hook never decided it: the CLI's hooks did not fire" in checks[name]["detail"], checks[name]
    silencing = checks["silencing-refused"]
    assert silencing["ok"] and "allow_settings_override = true" in silencing["detail"]
    rec = records(env)[sha256(real_claude)]
    assert rec["ok"] is False
    # the record of a failed verification names the check: a guarded run under require is refused with it
    write_user_config(env, "[security]\nallow_settings_override = true\nrequire_verified_cli = true\n")
    proc = subprocess.run(GUARD + ["-p", "hello"], env=env, cwd=offline_env.cwd, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    *warning, refusal = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(warning) == 1 and "disableAllHooks" in warning[0], proc.stderr
    assert "failed `claudeguardctl doctor --verify` on this machine (deny-main: " in refusal
    config = f"{env['XDG_CONFIG_HOME']}/claudeguard/config.toml:3"
    assert refusal.endswith(f"refused by security.require_verified_cli ({config}); "
                            "run `claudeguardctl doctor --verify`")


# --- stand-ins ----------------------------------------------------------------------------------


def test_verify_catches_a_cli_that_runs_tools_without_its_hooks(offline_env, tmp_path):
    cli = hookless(tmp_path)
    env = guarded_env(offline_env, cli)
    code, result = verify_json(env, offline_env.cwd)
    assert code == 1 and result["cli_version"] == "2.1.999" and result["ok"] is False
    checks = by_name(result)
    assert "the main agent's denied call ran" in checks["deny-main"]["detail"]
    assert "the foreground subagent's denied call ran" in checks["deny-subagent"]["detail"]
    assert "the background subagent's denied call ran" in checks["deny-background"]["detail"]
    assert not checks["ask-channel"]["ok"] and not checks["background-sessions"]["ok"]
    assert checks["silencing-refused"]["ok"]  # the launcher refuses before any CLI runs
    # it runs Bash without the guard's shell prefix: the probe found itself outside the box
    assert not checks["sandbox"]["ok"] and "the probe call ran outside the box" in checks["sandbox"]["detail"]
    assert "not bwrap): the CLI did not run it through the guard's shell prefix" in checks["sandbox"]["detail"]
    assert [c["name"] for c in result["checks"] if not c["ok"]] == [
        "deny-main", "deny-subagent", "deny-background", "ask-channel", "sandbox", "background-sessions"]
    assert records(env)[sha256(cli)]["ok"] is False


def test_verify_shows_its_progress_on_stderr_while_it_runs(offline_env, tmp_path):
    """doctor --verify says when its runs start and each check as it ends, on stderr, while it
    runs (issue 36: it printed nothing for 10-13 s); stdout keeps the listing."""
    env = guarded_env(offline_env, hookless(tmp_path))
    proc = subprocess.Popen(CTL + ["doctor", "--verify"], env=env, cwd=offline_env.cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    running_at_first = None
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if running_at_first is None:
                running_at_first = proc.poll() is None  # said while it runs, not at its end
            said.append(line.rstrip("\n"))
        out = proc.stdout.read() if proc.stdout is not None else ""
        assert proc.wait(timeout=120) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert running_at_first is True
    cli = os.path.realpath(tmp_path / "hookless-claude")
    assert said[0] == (f"claudeguardctl doctor: verifying Claude Code 2.1.999 ({cli}) offline: 7 checks at once, "
                       f"about 10-20 s")
    steps = said[1:]
    assert len(steps) == len(CHECKS), said
    assert [s.split("] ", 1)[0] for s in steps] == [f"claudeguardctl doctor: [{n}/7" for n in range(1, 8)]
    listed = {line.split(":", 1)[0].split()[1]: line.split()[0] for line in out.splitlines() if ":" in line
              and line.split()[0] in ("ok", "FAIL", "skip")}
    told = {s.split("] ", 1)[1].split()[1]: s.split("] ", 1)[1].split()[0] for s in steps}
    assert sorted(told) == sorted(CHECKS) and told == listed, (told, listed)


def test_verify_catches_a_cli_that_only_says_its_version(offline_env, tmp_path):
    cli = stand_in(tmp_path / "claude", "#!/bin/sh\necho '2.1.400 (Claude Code)'\n")
    env = guarded_env(offline_env, cli)
    proc = verify(env, offline_env.cwd)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines[:7]] == [
        "FAIL  deny-main", "FAIL  deny-subagent", "FAIL  deny-background", "FAIL  ask-channel",
        "ok    silencing-refused", "FAIL  sandbox", "FAIL  background-sessions"]
    assert "sandbox: the probe call was never made (the run exited 0)" in lines[5]
    assert "the main agent never made its call (the run exited 0" in lines[0]
    assert "2.1.400" in lines[7] and "NOT verified" in lines[7]


@pytest.mark.parametrize("config, verdict, detail", [
    ('[security]\nsandbox = "off"\n', "skip", 'off by your config ({config}:2): Bash calls run with all of your '
                                              "user's rights"),
    ('[security]\nsandbox = "auto"\n[sandbox]\nbwrap = "/nonexistent/bwrap"\n', "skip",
     "none here (bubblewrap is not installed ([sandbox] bwrap = '/nonexistent/bwrap' ({config}:4)): install the "
     "package 'bubblewrap' (apt install bubblewrap)): sessions run without it"),
    ('[security]\nsandbox = "require"\n[sandbox]\nbwrap = "/nonexistent/bwrap"\n', "FAIL",
     "required by your config, and bubblewrap is not installed"),
])
def test_the_sandbox_check_follows_the_users_config(offline_env, tmp_path, config, verdict, detail):
    env = guarded_env(offline_env, hookless(tmp_path))
    path = write_user_config(env, config)
    proc = verify(env, offline_env.cwd)
    [line] = [ln for ln in proc.stdout.splitlines() if ln.split(":")[0].endswith(" sandbox")]
    assert line.startswith(f"{verdict:<6}sandbox: " + detail.format(config=path)), line
    assert not (offline_env.cwd / "cgv-box.sh").exists()  # the probe lives in the verification's own project


def test_doctor_takes_no_unknown_option(offline_env):
    for args in (["--bogus"], ["--json"], ["--verify", "extra"]):
        proc = subprocess.run(CTL + ["doctor", *args], env=offline_env, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert proc.stderr.startswith("claudeguardctl doctor: ") and proc.stdout == ""


# --- the record in use: guarded runs, the service, lockdown ------------------------------------------


def auto_env(env: dict, cli: Path, **extra: str) -> dict:
    """A guarded run's environment where an unverified CLI is verified in the background."""
    out = guarded_env(env, cli, **extra)
    out.pop("CLAUDEGUARD_AUTO_VERIFY")
    return out


def service_log(env: dict) -> str:
    try:
        return (Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "service" / "service.log").read_text()
    except OSError:
        return ""


def started_verifications(env: dict, cli: Path) -> int:
    return service_log(env).count(f"verifying {os.path.realpath(cli)} in the background")


def test_the_first_guarded_run_verifies_in_the_background_and_the_record_is_reused(bg_claude, offline_env,
                                                                                  model_server):
    server = model_server([{"match": "HELLO", "turns": [{"text": "hi"}]}])
    env = auto_env(offline_env.use(server), bg_claude)
    first = subprocess.run(GUARD + ["-p", "HELLO"], env=env, cwd=offline_env.cwd, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("is not verified on this machine yet: the guard service verifies it in the "
                              "background") == 1, first.stderr
    sha = sha256(bg_claude)
    wait_until(lambda: (state_dir(env) / verified.RECORD_FILE).exists() and sha in records(env), 90,
               "the background verification's record")
    rec = records(env)[sha]
    assert rec["ok"] is True, rec
    assert started_verifications(env, bg_claude) == 1
    # nothing of it is left: no process of its bed, no temp dir (issue 37)
    tmp = Path(env["TMPDIR"])
    wait_until(lambda: not list(tmp.glob("claudeguard-verify-*")) and not _bed_processes(tmp), 60,
               "the verification's processes and temp dir to be gone")
    # the next run: verified, nothing said, nothing asked of the service
    second = subprocess.run(GUARD + ["-p", "HELLO"], env=env, cwd=offline_env.cwd, capture_output=True,
                            text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert second.returncode == 0 and "verif" not in second.stderr, second.stderr
    # a background verification of the same binary reuses the record: no second run of the checks
    again = subprocess.run([sys.executable, "-m", "claudeguard.commands.verify", os.path.realpath(bg_claude)],
                           env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert records(env)[sha] == rec  # same verified_at: not verified again
    assert started_verifications(env, bg_claude) == 1
    # required and verified: it runs; doctor says so
    write_user_config(env, "[security]\nrequire_verified_cli = true\n")
    third = subprocess.run(GUARD + ["-p", "HELLO"], env=env, cwd=offline_env.cwd, capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert third.returncode == 0 and third.stderr == "", third.stderr
    doctor = subprocess.run(CTL + ["doctor"], env=env, cwd=offline_env.cwd, capture_output=True, text=True,
                            timeout=120)
    said = f"ok    verified: Claude Code {rec['cli_version']} (sha256 {sha[:12]}) passed doctor --verify"
    assert said in doctor.stdout, doctor.stdout


def test_a_binary_changed_under_the_same_version_is_verified_again(offline_env, tmp_path):
    cli = stand_in(tmp_path / "claude", "#!/bin/sh\necho '2.1.400 (Claude Code)'\n")
    env = auto_env(offline_env, cli)
    first = subprocess.run(GUARD + ["-p", "x"], env=env, cwd=offline_env.cwd, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    assert "is not verified on this machine yet" in first.stderr
    old = sha256(cli)
    wait_until(lambda: (state_dir(env) / verified.RECORD_FILE).exists() and old in records(env), 60,
               "the first verification's record")
    assert records(env)[old]["ok"] is False and records(env)[old]["cli_version"] == "2.1.400"
    # a failed record: said on every run, not verified again by itself
    said = subprocess.run(GUARD + ["-p", "x"], env=env, cwd=offline_env.cwd, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert "failed `claudeguardctl doctor --verify` on this machine (deny-main: " in said.stderr
    # the same version, another binary: verified again
    stand_in(cli, "#!/bin/sh\n# rebuilt\necho '2.1.400 (Claude Code)'\n")
    new = sha256(cli)
    assert new != old
    changed = subprocess.run(GUARD + ["-p", "x"], env=env, cwd=offline_env.cwd, capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)
    assert "is not verified on this machine yet" in changed.stderr, changed.stderr
    wait_until(lambda: new in records(env), 60, "the changed binary's record")
    assert sorted(r["cli_version"] for r in records(env).values()) == ["2.1.400", "2.1.400"]
    assert started_verifications(env, cli) == 2


@pytest.mark.parametrize("config", ["[security]\ndisable_bypass_permissions = true\n",
                                    "[security]\nrequire_verified_cli = true\n"], ids=["lockdown", "required"])
def test_an_unverified_cli_is_refused_before_anything_starts(offline_env, tmp_path, config):
    mark = tmp_path / "ran"
    cli = stand_in(tmp_path / "claude", f"#!/bin/sh\ntouch {mark}\n")
    env = auto_env(offline_env, cli)
    write_user_config(env, config)
    proc = subprocess.run(GUARD + ["-p", "x"], env=env, cwd=offline_env.cwd, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("claudeguard: Claude Code (version unknown) (") and \
        "has not passed `claudeguardctl doctor --verify` on this machine: refused by " in proc.stderr
    assert proc.stderr.rstrip().endswith("run `claudeguardctl doctor --verify`")
    assert not mark.exists()
    runtime = Path(env["CLAUDEGUARD_RUNTIME_DIR"])
    assert not (runtime / "service" / "service.json").exists()  # no service started
    assert not (runtime / "sessions").exists() or not list((runtime / "sessions").iterdir())
    # the hash was computed to decide, and cached (the next refusal reads it)
    cache = json.loads((state_dir(env) / verified.HASH_FILE).read_text())["paths"]
    assert cache[os.path.realpath(cli)]["sha256"] == sha256(cli)


# --- the record's files ---------------------------------------------------------------------------


def test_the_hash_cache_holds_only_while_the_binary_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cli = stand_in(tmp_path / "claude", "#!/bin/sh\nexit 0\n")
    assert verified.lookup(str(cli)).state == verified.UNKNOWN  # never hashed on a plain lookup
    computed = verified.lookup(str(cli), compute=True)
    assert computed.state == verified.UNVERIFIED and computed.sha256 == sha256(cli)
    assert verified.cached(str(cli))["sha256"] == computed.sha256
    os.utime(cli, ns=(0, 0))  # same content, another mtime (and ctime): the key no longer holds
    assert verified.cached(str(cli)) is None


def test_a_record_not_only_the_users_own_is_not_believed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cli = stand_in(tmp_path / "claude", "#!/bin/sh\nexit 0\n")
    status = verified.lookup(str(cli), compute=True)
    verified.save_record({"cli_version": "9.9.9", "sha256": status.sha256, "ok": True, "checks": []})
    assert verified.lookup(str(cli)).state == verified.VERIFIED
    path = tmp_path / "state" / "claudeguard" / verified.RECORD_FILE
    path.chmod(0o620)  # another user could have written it
    assert verified.lookup(str(cli)).state == verified.UNVERIFIED
    path.chmod(0o600)
    target = tmp_path / "elsewhere.json"
    path.rename(target)
    path.symlink_to(target)  # a link is never followed
    assert verified.lookup(str(cli)).state == verified.UNVERIFIED


def test_only_a_launcher_outside_every_session_has_the_service_verify_a_cli(tmp_path, monkeypatch):
    """The verification runs the named program outside any session (service/verify.py): a process
    inside a guarded session (an agent's nested launcher, or anything it runs) names none."""
    from claudeguard.service.verify import Verifications

    runtime = tmp_path / "run"
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(runtime))
    out = tmp_path / "pid"
    launcher = subprocess.Popen([sys.executable, "-c", "import subprocess  # claudeguard\n"
                                 f"p = subprocess.Popen(['sleep', '30']); open({str(out)!r}, 'w').write(str(p.pid)); "
                                 "p.wait()"], start_new_session=True)
    try:
        wait_until(lambda: out.exists() and out.read_text().strip(), 60, "the agent's pid")
        agent = int(out.read_text())
        session = runtime / "sessions" / "s-agent"
        session.mkdir(parents=True)
        (session / "session.json").write_text(json.dumps({"session_id": "s-agent", "pid": launcher.pid}))
        started: list[str] = []
        checks = Verifications()
        monkeypatch.setattr(checks, "start", lambda cli: started.append(cli) or 4242)
        assert checks.asked("/tmp/evil/claude", agent) is None  # inside s-agent
        assert checks.asked("relative/claude", os.getpid()) is None  # not an absolute path
        assert checks.asked("/tmp/evil/claude", None) is None  # no peer credentials: nobody vouches
        assert started == []
        assert checks.asked("/opt/claude/bin/claude", os.getpid()) == 4242  # this test runs outside every session
        assert checks.asked("/opt/claude/bin/claude", launcher.pid) == 4242  # a launcher is outside its own session
        assert started == ["/opt/claude/bin/claude", "/opt/claude/bin/claude"]
    finally:
        os.killpg(launcher.pid, 9)
        launcher.wait(10)


# --- nothing of a verification outlives it (issue 37) ----------------------------------------------


def _verifying_pid(env: dict, cli: Path) -> int:
    line = f"verifying {os.path.realpath(cli)} in the background (pid "
    log = service_log(env)
    return int(log[log.index(line) + len(line):].split(")", 1)[0])


def _bed_of(env: dict, pid: int) -> Path | None:
    """The bed dir whose owner.json names the verifying process ``pid``."""
    for root in Path(env["TMPDIR"]).glob("claudeguard-verify-*"):
        try:
            if json.loads((root / "owner.json").read_text())["owner"].split(":")[0] == str(pid):
                return root
        except (OSError, ValueError, KeyError):
            continue
    return None


def _bed_processes(root: Path) -> list[int]:
    """Processes marked as the bed's, or with a HOME inside it."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(e.startswith((b"HOME=" + str(root).encode() + b"/", b"CLAUDEGUARD_VERIFY_OWNER="))
               and str(root).encode() + b"/" in e + b"/" for e in entries):
            found.append(int(pid))
    return found


def _alive(pid: int) -> bool:
    from claudeguard.procs import process_start

    return process_start(pid) is not None


def _start_background_verification(cli: Path, offline_env, model_server, procs) -> tuple[dict, int, Path, int]:
    """A guarded run whose service starts verifying ``cli``: (env, verifying pid, its bed dir, the
    service's pid), once the bed runs processes of its own."""
    from claudeguard.testing.services import live_services

    server = model_server([{"match": "HELLO", "turns": [{"text": "hi"}]}])
    env = auto_env(offline_env.use(server), cli)
    # The service starts verifying as the run registers; the run is not waited for (the
    # verification may end before it does).
    first = subprocess.Popen(GUARD + ["-p", "HELLO"], env=env, cwd=offline_env.cwd, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(first)
    pid = wait_until(lambda: started_verifications(env, cli) and _verifying_pid(env, cli), 60,
                     "the service to start the verification", interval=0.01)
    root = wait_until(lambda: _bed_of(env, pid), 60, "the verification's bed", interval=0.01)
    wait_until(lambda: len(_bed_processes(root)) >= 2, 60, "the bed's runs to start", interval=0.01)
    assert _alive(pid)  # caught in the middle
    [service] = live_services(Path(env["CLAUDEGUARD_RUNTIME_DIR"]))
    return env, pid, root, service


def test_a_verification_ends_with_the_service_that_started_it(bg_claude, offline_env, model_server, procs):
    env, pid, root, service = _start_background_verification(bg_claude, offline_env, model_server, procs)
    os.kill(service, 9)
    wait_until(lambda: not _alive(pid) and not root.exists() and not _bed_processes(root), 60,
               "the verification, its processes and its dir to be gone")
    assert not (state_dir(env) / verified.RECORD_FILE).exists() or sha256(bg_claude) not in records(env)


def test_a_verification_ends_when_the_home_it_started_from_is_removed(bg_claude, offline_env, model_server, procs):
    import shutil

    env, pid, root, service = _start_background_verification(bg_claude, offline_env, model_server, procs)
    gone = offline_env.home.with_name("home-removed")
    try:
        # Away at once (its processes write into it while rmtree walks it), then removed.
        offline_env.home.rename(gone)
        shutil.rmtree(gone, ignore_errors=True)
        wait_until(lambda: not _alive(pid) and not _bed_processes(root), 60,
                   "the verification and its processes to be gone")
    finally:
        os.kill(service, 9)  # its record went with the home: the fixtures cannot find it
        shutil.rmtree(gone, ignore_errors=True)
    assert not root.exists() and not gone.exists()


def test_a_killed_verification_is_swept_by_the_service(bg_claude, offline_env, model_server, procs):
    env, pid, root, service = _start_background_verification(bg_claude, offline_env, model_server, procs)
    os.kill(pid, 9)  # no way out of its own: the service that waits for it sweeps its bed
    wait_until(lambda: not root.exists() and not _bed_processes(root), 60,
               "the killed verification's processes and dir to be gone")
    assert _alive(service)
    assert "swept the leftovers of an interrupted verification" in service_log(env)


def test_the_next_service_sweeps_what_a_verification_killed_with_its_service_left(bg_claude, offline_env,
                                                                                model_server, procs):
    env, pid, root, service = _start_background_verification(bg_claude, offline_env, model_server, procs)
    bed = _bed_processes(root)
    os.kill(pid, signal.SIGSTOP)  # so that it cannot sweep on its way out
    os.kill(service, 9)
    os.kill(pid, 9)
    assert root.exists() and [p for p in bed if p != pid and _alive(p)]  # left behind, running
    # the next guarded run's service finds it by its dead owner
    again = subprocess.run(GUARD + ["-p", "HELLO"], env={**env, "CLAUDEGUARD_AUTO_VERIFY": "0"},
                           cwd=offline_env.cwd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert again.returncode == 0, again.stderr
    wait_until(lambda: not root.exists() and not _bed_processes(root), 60, "the next service to sweep the bed")
