"""The guard's protected paths as the real CLI itself holds them, with no hook to help
(``plan/settings_sources.protected_rules``, given as ``--disallowedTools``): one rule a path. A
rule on a dir covers everything below it, there or not made yet, and with a glob in its last part
too, on every CLI under test: the guard gives no ``//dir/**`` twin (issue 34: each rule costs the
CLI's start)."""

from __future__ import annotations

import pytest

from claudeguard.plan import settings_sources


def _write(path: object) -> dict:
    return {"name": "Write", "input": {"file_path": str(path), "content": "written\n"}}


def _read(path: object) -> dict:
    return {"name": "Read", "input": {"file_path": str(path)}}


@pytest.mark.newest_cli
def test_a_rule_on_a_dir_holds_everything_below_it(real_claude, offline_env, model_server, run_claude):
    work = offline_env.cwd
    held = work / "held"
    (held / "sub").mkdir(parents=True)
    (held / "sub" / "secret.txt").write_text("s3cret-in-held\n")
    (work / "conf").mkdir()
    (work / "runs-7").mkdir()
    (work / "runs-7" / "log.txt").write_text("s3cret-in-runs\n")
    calls = [
        ("into a dir that is there", _write(held / "sub" / "new.txt"), False),
        ("into dirs not made yet below it", _write(held / "a" / "b" / "new.txt"), False),
        ("below a dir that only Edit holds", _write(work / "conf" / "sub" / "new.txt"), False),
        ("below a dir not made yet", _write(work / "later" / "a" / "new.txt"), False),
        ("below a dir its glob names", _write(work / "runs-7" / "new.txt"), False),
        ("a read below a dir", _read(held / "sub" / "secret.txt"), False),
        ("a read below a dir its glob names", _read(work / "runs-7" / "log.txt"), False),
        ("the control: elsewhere", _write(work / "free" / "ok.txt"), True),
    ]
    server = model_server([{"match": "PROTECTED", "turns": [*({"tool_use": c} for _, c, _ in calls),
                                                             {"text": "fin"}]}])
    rules = [f"Read(/{held})", f"Edit(/{held})", f"Edit(/{work}/conf)", f"Edit(/{work}/later)", f"Read(/{work}/runs-*)",
             f"Edit(/{work}/runs-*)"]
    proc = run_claude([real_claude, "-p", "PROTECTED go", "--permission-mode", "acceptEdits",
                       "--allowedTools=Read,Write,Edit", "--disallowedTools=" + ",".join(rules)],
                      offline_env.use(server), work, timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = [r for r in server.tool_results() if r["script"] == "PROTECTED"]
    assert len(results) == len(calls), results
    for (what, _, allowed), result in zip(calls, results, strict=True):
        assert result["is_error"] is (not allowed), (what, result)
    assert "s3cret" not in "".join(str(r["content"]) for r in results)
    assert not (held / "sub" / "new.txt").exists() and not (held / "a").exists()
    assert not (work / "conf" / "sub").exists() and not (work / "later").exists()
    assert not (work / "runs-7" / "new.txt").exists()
    assert (work / "free" / "ok.txt").read_text() == "written\n"


def test_the_guard_gives_one_rule_a_path_and_none_below_another(tmp_path, monkeypatch):
    """No ``/**`` twin, and a path below another of the same kind is left out (its dir's rule
    holds it, above)."""
    monkeypatch.setattr(settings_sources, "protected_spec", lambda args, cwd, cfg=None: {
        "reads": [["/rt", "the runtime dir"], ["/rt-*", "its siblings"]],
        "writes": [["/cfg/claudeguard/config.toml", "config"], ["/cfg/claudeguard/", "config dir"],
                   ["/rt/x", "below a read"], ["/w/.git/hooks", "hooks"], ["/w/.git/hooks", "twice"]],
        "asks": []})
    rules = settings_sources.protected_rules(None, None, str(tmp_path))  # type: ignore[arg-type]
    assert rules == ["Read(//rt)", "Edit(//rt)", "Read(//rt-*)", "Edit(//rt-*)", "Edit(//cfg/claudeguard)",
                     "Edit(//w/.git/hooks)"]
