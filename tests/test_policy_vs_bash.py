"""The splitter against the real bash: every command bash runs must be one of the parts we found.

Stub programs (aa, bb, cc, dd) on PATH log their names; random command lines built from
separators, substitutions, groups, heredocs, quoting and wrappers are run with ``bash -c``.
Whenever the splitter says it read a command with confidence, the set of stubs bash actually ran
must be a subset of the command names among the parts (allow rules are only tried then).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claudeguard.policy.bash import split_command

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")
STUBS = ["aa", "bb", "cc", "dd"]


class Runner:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        for name in STUBS:
            stub = self.bin / name
            stub.write_text('#!/bin/sh\necho "${0##*/}" >> "$STUB_LOG"\n')
            stub.chmod(0o755)
        self.count = 0

    def ran(self, command: str) -> set[str]:
        self.count += 1
        log = self.root / f"log{self.count}"  # a fresh log: a late background stub cannot leak into the next run
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "STUB_LOG": str(log), "HOME": str(self.root)}
        proc = subprocess.Popen([BASH, "-c", command + "\nwait"], env=env, cwd=self.root, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the group of the bash we started: leftovers included
            except ProcessLookupError:
                pass
            proc.wait()
        return set(log.read_text().split()) if log.exists() else set()


def parsed_names(command: str) -> tuple[set[str], bool]:
    split = split_command(command)
    names: set[str] = set()
    for part in split.parts:
        for text in part.deny_texts:
            names.add(os.path.basename(text.split(" ")[0]))
    return names, split.ok


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    return Runner(tmp_path_factory.mktemp("stubs"))


KNOWN = [
    "aa; bb", "aa # ; bb", "aa #\\\nbb", "aa $(bb)", "echo `bb`", "echo <(aa) >(bb)", "cat <<EOF\n$(aa)\nEOF",
    "cat <<\"EOF\"\n$(aa)\nEOF\nbb", "(aa; { bb; })", "bash -c 'aa; bb'", "timeout 5 aa", "env X=1 aa", "xargs aa",
    "$'\\x61a'", "a\\a", "a''a", "echo ${x:-$(aa)}", 'echo "${x:-$(aa)}"', "if aa; then bb; fi",
    "cat <<E1 <<E2\n$(aa)\nE1\n$(bb)\nE2", "echo a;#bb", "echo a#; bb", "find . -maxdepth 0 -exec aa \\;",
    "echo \"$(echo ')'; aa)\"", "echo $(echo \"(\" ; aa)", "aa|&bb", "[[ -n x ]] && aa", "x=$(aa) bb",
    "echo $(cat <<EOF\n$(aa)\nEOF\n)", "echo \"$(cat <<EOF\n\"\nEOF\n)\"; aa", "echo ${x:+\"}\"}; aa",
    "echo $(# comment )\n aa)", "cat <<EOF\nE\\\nOF\nbb\nEOF", "cat <<-EOF\n\tE\\\nOF\nbb\nEOF",
    "echo $'a\\'b'; aa", "echo ${x%%;*}; aa", "echo x<(aa)", "aa\\\n&& bb",
]


@pytest.mark.parametrize("command", KNOWN)
def test_known_tricky_lines(runner: Runner, command: str) -> None:
    names, ok = parsed_names(command)
    ran = runner.ran(command)
    if ok:
        assert ran <= names, (command, ran, names)
    else:
        assert ran, "a line we cannot read should still be one bash runs (or the case is pointless)"


NAMES = st.sampled_from(STUBS)


def _obfuscated(name: str) -> st.SearchStrategy[str]:
    return st.sampled_from([name, f"'{name}'", f'"{name}"', f"{name[0]}'{name[1]}'", f"{name[0]}\\{name[1]}",
                            f"$'{name}'", "$'\\x%02x%s'" % (ord(name[0]), name[1]), f"\\{name}"])


PLAIN_ARGS = st.sampled_from(["x", "'x;y'", '"p|q"', "\\;", "'#'", "a#b", '"a b"', "'&&'", "\\&", "'$(x)'",
                              "$((1+2))", "${HOME}", '"$HOME"', "$'\\n'", "\\\\", "x\\\ny", "'\n'", '")"', "'('"])
PREFIX = st.sampled_from(["", "", "", "X=1 ", "timeout 5 ", "env Y=2 ", "nice ", "command ", "time ", "! ",
                          "nice -n 2 ", "xargs ", "builtin ", "exec "])
REDIR = st.sampled_from(["", "", "", " >/dev/null", " 2>&1", " </dev/null", " <<< x", " 2>/dev/null"])
SEP = st.sampled_from([";", " ; ", "&&", " || ", "|", " | ", "&", "\n", " && ", ";\n", "|&"])


@st.composite
def simple(draw: st.DrawFn, depth: int) -> str:
    name = draw(NAMES.flatmap(_obfuscated))
    args = []
    for _ in range(draw(st.integers(0, 2))):
        if depth < 2 and draw(st.integers(0, 3)) == 0:
            inner = draw(command_list(depth + 1))
            form = draw(st.sampled_from(["$(%s)", '"$(%s)"', "`%s`", "<(%s)", "${v:-$(%s)}", '"${v:-$(%s)}"']))
            if form == "`%s`" and ("`" in inner or "\\" in inner):
                form = "$(%s)"
            args.append(form % inner)
        else:
            args.append(draw(PLAIN_ARGS))
    return draw(PREFIX) + " ".join([name] + args) + draw(REDIR)


@st.composite
def command_list(draw: st.DrawFn, depth: int = 0) -> str:
    items = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 9)) if depth < 2 else 0
        if kind <= 4:
            items.append(draw(simple(depth)))
        elif kind == 5:
            items.append("( %s )" % draw(command_list(depth + 1)))
        elif kind == 6:
            items.append("{ %s; }" % draw(command_list(depth + 1)))
        elif kind == 7:
            items.append("if %s; then %s; fi" % (draw(command_list(depth + 1)), draw(command_list(depth + 1))))
        elif kind == 8:
            inner = draw(command_list(depth + 1))
            items.append(("bash -c '%s'" if "'" not in inner else "for i in 1; do %s; done") % inner)
        else:
            quote = draw(st.sampled_from(["EOF", "'EOF'"]))
            items.append("cat <<%s >/dev/null\n$(%s)\nEOF\n" % (quote, draw(command_list(depth + 1))))
    out = items[0]
    for item in items[1:]:
        out += draw(SEP) + item
    if depth == 0 and draw(st.integers(0, 5)) == 0:
        out += " # ; " + draw(simple(depth))
    return out


@settings(max_examples=120, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(command_list())
def test_bash_runs_nothing_we_did_not_see(runner: Runner, command: str) -> None:
    names, ok = parsed_names(command)
    if not ok:
        return
    ran = runner.ran(command)
    assert ran <= names, (command, ran, names)
