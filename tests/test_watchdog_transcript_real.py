"""A -p run registers no PostToolUse hook: the watchdog learns that a call ended from the CLI's
transcript (watchdog/transcript.py), and a -p run of one prompt no Stop hook either. On both real
CLIs, a model that goes silent right after a call's result, of the main agent (allowed, or denied
after its PreToolUse hook) or of a foreground subagent, is a stall after ``stall_after`` (state
``thinking``), not a tool still running until ``tool_stall_after``."""

from __future__ import annotations

import json
import subprocess
import time

from tests.shim_helpers import GUARD, ctl, guarded_env, write_user_config
from tests.test_watchdog_real import INTERVAL, STALL, finish

TOOL_STALL = 120  # a call taken for still running would not be judged before this


def _call(word: str) -> dict:
    return {"name": "Bash", "input": {"command": f"echo {word}", "description": "echo"}}


def _stall_of(real_claude, offline_env, server, prompt: str, silent_script: str,
              config: str = "") -> tuple[int, str, dict, float]:
    """Runs ``claudeguard -p PROMPT`` (text output: no stream-json for the tap to see the calls
    in) until the watchdog kills it; the exit code, stderr, the one stall audit row and the time
    from the model's silence to the exit."""
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, f'[permissions]\nallow = ["Bash(echo *)", "Agent"]\n[watchdog]\n'
                           f"sample_interval = {INTERVAL}\ntool_stall_after = {TOOL_STALL}\nkill_grace = 2\n{config}")
    proc = subprocess.Popen(GUARD + ["-p", prompt, "--guard-stall-after", str(STALL), "--guard-on-stall", "kill"],
                            env=env, cwd=offline_env.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    server.wait_for(lambda: any(r.get("script") == silent_script and r.get("played") == "stall_after_text"
                                for r in server.requests()), timeout=60)
    silent_from = time.monotonic()  # the model's stream went silent no later than now
    code, _, err = finish(proc, timeout=TOOL_STALL - 10)  # the stall must come before the tool's
    took = time.monotonic() - silent_from
    stalls = [e for e in map(json.loads, ctl(env, "audit", "--json").stdout.splitlines()) if e.get("event") == "stall"]
    assert len(stalls) == 1, (stalls, err)
    return code, err, stalls[0], took


def test_the_main_agents_call_ended_then_its_model_went_silent(real_claude, offline_env, model_server):
    server = model_server([{"match": "MAINEND", "turns": [{"tool_use": _call("main")},
                                                          {"stall_after_text": "thinking ab"}]}])
    code, err, stall, took = _stall_of(real_claude, offline_env, server, "MAINEND go", "MAINEND")
    assert code == 124, err
    assert stall["state"] == "thinking" and stall["tool"] is None, stall
    # judged as a silent model (stall_after), not as a call still running (tool_stall_after); how
    # soon after the threshold is the bench's figure (bench/watchdog_cost.py --only detect)
    assert took < TOOL_STALL, took
    assert len(server.tool_results()) == 1


def test_a_subagents_call_ended_then_its_model_went_silent(real_claude, offline_env, model_server):
    agent = {"name": "Agent", "input": {"description": "helper", "prompt": "SUBEND go",
                                        "subagent_type": "general-purpose"}}
    server = model_server([{"match": "MAINSUB", "turns": [{"tool_use": agent}, {"text": "never"}]},
                           {"match": "SUBEND", "turns": [{"tool_use": _call("sub")},
                                                         {"stall_after_text": "sub thinking"}]}])
    code, err, stall, took = _stall_of(real_claude, offline_env, server, "MAINSUB go", "SUBEND")
    assert code == 124, err
    # The subagent's Bash call is not taken for running: its end is in the subagent's own
    # transcript. (2.1.330 runs this Agent call in the background: the call itself has ended.)
    assert stall["state"] == "thinking" and stall["tool"] is None, stall
    assert took < TOOL_STALL, took


def test_a_call_the_cli_asked_about_was_denied_then_its_model_went_silent(real_claude, offline_env, model_server):
    # No rule matches `touch`: the hook lets the CLI decide, the CLI asks (2.1.330: our
    # PermissionRequest hook; 2.1.197: our prompt tool), nobody answers and the deadline denies.
    # No PostToolUse follows a denied call, and the run registers no Stop: only the CLI's error
    # result in the transcript says that the call is over.
    asked = {"name": "Bash", "input": {"command": "touch made.txt", "description": "touch"}}
    server = model_server([{"match": "DENYEND", "turns": [{"tool_use": asked},
                                                          {"stall_after_text": "thinking cd"}]}])
    code, err, stall, took = _stall_of(real_claude, offline_env, server, "DENYEND go", "DENYEND",
                                       "[approval]\ntimeout = 1\non_timeout = \"deny\"\n")
    assert code == 124, err
    assert stall["state"] == "thinking" and stall["tool"] is None, stall
    assert took < TOOL_STALL, took
    [result] = server.tool_results()
    assert result["is_error"] is True and not (offline_env.cwd / "made.txt").exists(), result
