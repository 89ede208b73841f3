"""One reading a plan (claudeguard/plan/once.py): while one session's plan is made, each settings
file and the CLI's package are read once, and every part of the plan sees that reading; outside
a plan (the settings watch, a later plan, another thread) every reading is fresh."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

from claudeguard.plan.claude_args import parse_claude_args
from claudeguard.plan.once import one_plan
from claudeguard.plan.settings_sources import sources
from tests.test_service import env, write_config

__all__ = ["env"]  # the fixture, shared with test_service.py

COUNT = """
import json, os, sys
from claudeguard.plan import cli_version, settings_sources
from claudeguard.service import files, planner

reads, versions = [], []
read, package_version = settings_sources._read, cli_version.package_version  # every settings file is read by _read
settings_sources._read = lambda path: (reads.append(path), read(path))[1]
cli_version.package_version = lambda path: (versions.append(path), package_version(path))[1]
answers = []
for n in range(int(sys.argv[2])):
    request = {"root": os.path.dirname(os.path.dirname(planner.__file__)), "argv": ["-p", "x"], "argv0": "claudeguard",
               "executable": sys.executable, "cwd": sys.argv[1], "env": dict(os.environ), "pid": os.getpid(),
               "stdin_tty": False, "session_id": f"{n:016x}", "token": "t" * 48}
    answers.append(sorted(planner.prepare(request, 1234, files.fingerprint())))
print(json.dumps({"reads": reads, "versions": versions, "answers": answers}))
"""


def _count(env: dict, work: Path, plans: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", COUNT, str(work), str(plans)], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out: dict = json.loads(proc.stdout)
    assert all("argv" in keys for keys in out["answers"]), out["answers"]
    return out


def test_a_plan_reads_each_settings_file_and_the_clis_package_once(env, tmp_path):
    write_config(env, '[permissions]\nallow = ["Bash(echo *)"]\n')
    user = Path(env["HOME"], ".claude", "settings.json")
    user.parent.mkdir(parents=True)
    user.write_text('{"permissions": {"allow": ["Read"]}}')
    work = tmp_path / "work"
    (work / ".claude").mkdir(parents=True)
    project, local = work / ".claude" / "settings.json", work / ".claude" / "settings.local.json"
    project.write_text("{}")
    local.write_text('{"cleanupPeriodDays": 3}')
    one = _count(env, work, 1)
    read = Counter(one["reads"])
    # the settings check, the mode twice, the CLI's own sandbox twice, the transcript: six
    # readings of each file a plan before, one now
    assert read[str(user)] == 1 and read[str(project)] == 1 and read[str(local)] == 1, read
    assert set(read.values()) == {1}, read
    assert len(one["versions"]) == 1, one["versions"]  # the CLI's package.json: four times before
    two = _count(env, work, 2)  # the next plan reads them all again
    assert Counter(two["reads"]) == Counter({path: 2 for path in read}), two["reads"]
    assert len(two["versions"]) == 2


def _user_settings(args: object, work: Path, env: dict) -> object:
    found = [s.data for s in sources(args, str(work), env, managed=str(work / "no-managed")) if s.name == "user"]  # type: ignore[arg-type]
    assert len(found) == 1
    return found[0]


def test_the_first_reading_holds_in_a_plan_and_every_other_reading_is_fresh(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    (home / ".claude").mkdir(parents=True)
    user = home / ".claude" / "settings.json"
    env = {"HOME": str(home)}
    args = parse_claude_args(["-p", "x"])

    user.write_text('{"cleanupPeriodDays": 1}')
    assert _user_settings(args, work, env) == {"cleanupPeriodDays": 1}
    user.write_text('{"cleanupPeriodDays": 2}')
    assert _user_settings(args, work, env) == {"cleanupPeriodDays": 2}  # no plan: read again (the watch's case)
    with one_plan():
        assert _user_settings(args, work, env) == {"cleanupPeriodDays": 2}
        user.write_text('{"cleanupPeriodDays": 3}')
        assert _user_settings(args, work, env) == {"cleanupPeriodDays": 2}  # the plan's one reading
        another_run = parse_claude_args(["-p", "x"])
        assert _user_settings(another_run, work, env) == {"cleanupPeriodDays": 3}  # another run's argv: read afresh
        seen: list[object] = []
        other = threading.Thread(target=lambda: seen.append(_user_settings(args, work, env)))
        other.start()
        other.join(10)
        assert seen == [{"cleanupPeriodDays": 3}]  # another thread is not in this plan
        args.cli_version = "2.1.0"  # as `reread` reads the same object again for another CLI's table
        assert _user_settings(args, work, env) == {"cleanupPeriodDays": 3}
        other_home = tmp_path / "other"
        (other_home / ".claude").mkdir(parents=True)
        (other_home / ".claude" / "settings.json").write_text('{"cleanupPeriodDays": 9}')
        assert _user_settings(args, work, {"HOME": str(other_home)}) == {"cleanupPeriodDays": 9}  # another file
    user.write_text('{"cleanupPeriodDays": 4}')
    assert _user_settings(args, work, env) == {"cleanupPeriodDays": 4}  # the plan is over
