"""The cost of reading a Bash command: parse + walk + match per command over issue 23's data file
(tests/data/bash_cases.toml), warm, as the resident service answers hooks; and what loading the
parser costs a process that decides on its own (the command hook, `CLAUDEGUARD_SERVICE=0`).

    python bench/bash_parse.py [--rounds 20] [--loads 15]

Warm: every case under every policy it names, the split cache cleared before each decision (so
each one parses), `rounds` times; p50 and p99 of the whole decision (`policy.decide`), of the split
alone (parse + walk) and of tree-sitter's parse alone. Goal: p99 of the decision under 1 ms.

Cold, in fresh `python -E -S` processes (as the hook entry starts, `re` and `json` already
loaded), `loads` times each, medians: importing the policy's Bash modules
(`claudeguard.policy.bash.judge`), making the parser the way the guard does (the two compiled
`_binding` modules loaded directly) or through `import tree_sitter, tree_sitter_bash` (the
packages' own `__init__` files), and the first decision after it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "bash_cases.toml"


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def warm(rounds: int) -> dict[str, object]:
    import tomllib

    from claudeguard.policy.bash import grammar, walk
    from claudeguard.policy.decide import decide, policy_from_spec

    data = tomllib.loads(DATA.read_text())
    cwd, home = "/tmp/bench-project", "/tmp/bench-home"
    policies = {}
    for name, spec in data["policies"].items():
        entries = {k: [{"rule": r, "source": name, "root": cwd} for r in spec.get(k, [])] for k in ("allow", "deny",
                                                                                                    "ask")}
        policies[name] = (policy_from_spec({"permissions": entries}), spec.get("mode"))
    calls = []
    for case in data["case"]:
        command = case["command"]
        if "oversized" in case:
            command = command * (case["oversized"] // len(command) + 1) + case["tail"]
        calls += [(command, name) for name in policies if name in case]
    decide_s: list[float] = []
    split_s: list[float] = []
    parse_s: list[float] = []
    for _ in range(rounds):
        for command, name in calls:
            policy, mode = policies[name]
            walk._CACHE.clear()
            t0 = time.perf_counter()
            decide(policy, "Bash", {"command": command}, agent_type=None, cwd=cwd, home=home, mode=mode)
            decide_s.append(time.perf_counter() - t0)
            walk._CACHE.clear()
            t0 = time.perf_counter()
            walk.split_command(command)
            split_s.append(time.perf_counter() - t0)
            data_ = command.encode("utf-8", "surrogatepass")
            t0 = time.perf_counter()
            grammar.parse(data_)
            parse_s.append(time.perf_counter() - t0)

    def stats(values: list[float]) -> dict[str, float]:
        return {"p50_ms": round(statistics.median(values) * 1000, 3),
                "p99_ms": round(_percentile(values, 99) * 1000, 3), "max_ms": round(max(values) * 1000, 3)}

    return {"calls_per_round": len(calls), "rounds": rounds, "decide": stats(decide_s), "split": stats(split_s),
            "parse": stats(parse_s)}


# A fresh process started as the hook entry starts (-E -S, site-packages appended by hand).
_COLD = """
import sys, time
sys.path[:0] = [{root!r}]
sys.path.append({site!r})
import re, json  # loaded on the hook's path before any policy code
t0 = time.perf_counter()
import claudeguard.policy.bash.judge
from claudeguard.policy.bash import grammar
t1 = time.perf_counter()
if {packages!r}:
    import tree_sitter, tree_sitter_bash
    grammar._PARSER.append(tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language())))
grammar.parser()
t2 = time.perf_counter()
from claudeguard.policy.decide import decide, policy_from_spec
policy = policy_from_spec({{"permissions": {{"allow": ["Bash(git status *)"], "deny": ["Bash(rm -rf *)"]}}}})
t3 = time.perf_counter()
decide(policy, "Bash", {{"command": "git status && rm -rf build"}}, agent_type=None, cwd="/tmp", home="/tmp")
t4 = time.perf_counter()
print(json.dumps({{"policy_modules_ms": (t1 - t0) * 1000, "parser_ms": (t2 - t1) * 1000,
                  "first_decision_ms": (t4 - t3) * 1000}}))
"""


def cold(loads: int) -> dict[str, object]:
    site = sysconfig.get_paths()["purelib"]
    out: dict[str, object] = {}
    for label, packages in (("direct_bindings", False), ("package_imports", True)):
        runs = []
        for _ in range(loads):
            proc = subprocess.run([sys.executable, "-E", "-S", "-c", _COLD.format(root=str(ROOT), site=site,
                                                                                  packages=packages)],
                                  capture_output=True, text=True, check=True, env=dict(os.environ))
            runs.append(json.loads(proc.stdout))
        out[label] = {key: round(statistics.median(r[key] for r in runs), 2)
                      for key in ("policy_modules_ms", "parser_ms", "first_decision_ms")}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--loads", type=int, default=15)
    args = parser.parse_args()
    result = {"warm": warm(max(1, args.rounds)), "cold": cold(max(1, args.loads))}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
