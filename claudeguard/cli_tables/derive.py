"""Derive the argv table of an installed Claude Code CLI from the CLI itself.

    python -m claudeguard.cli_tables.derive PATH [--write] [--jobs N]

prints the table as JSON (``--write``: into ``data/<version>.json`` beside this module). Stdlib
only. Everything runs offline in a throw-away HOME and working directory; no run reaches a
command's action (each probe ends in ``--help`` or in the CLI's own "unknown option" error).

How each part is found (docs/notes/cli-surfaces.md has the why):

- **The sub-command tree**: ``claude --help``, then ``--help`` of every command it lists,
  recursively (``mcp serve``, ``plugin marketplace add``), in parallel.
- **Hidden sub-commands**: every ``.command("name ...")`` in the binary's embedded JavaScript
  that no help lists, kept when ``claude [parent] name --help`` prints that command's usage.
- **Options**: those each help lists (aliases, ``<v>``/``[v]``/``<v...>`` as commander reads
  them), plus the hidden ones: every option spec in the JavaScript (``.option("--x <v>")``,
  ``new Option("--x <v>")``) that no help lists, kept when a probe shows that the command
  (the root first, then the commands of the name the spec stands under) accepts it, and how:
  ``claude [path] OPT --zz-a --zz-b`` fails on ``OPT`` (unknown), on ``--zz-b`` (OPT took
  ``--zz-a``: a required value) or on ``--zz-a`` (no value, or an optional one); ``OPT=x``
  tells those two apart; ``OPT v CHILD --help`` (where the command has a child) tells one
  value from many.
- **Early dispatch**: words ``main()`` acts on before commander parses argv (``claude daemon``,
  ``claude attach``, ``claude remote-control`` ...), read from the JavaScript of the module
  that holds ``main()`` and confirmed with ``--help`` where that is safe.
- **The eager reader** (2.1.330 and later): the CLI's second table of value-taking options,
  which ``main()`` uses before commander (``--bg``, background-session verbs, ``-p``).
- **Tool names** (``tools``): the CLI's own sorted list of its built-in tools (2.1.330 and
  later keep one, beside the map of legacy names a permission rule may still use, such as
  ``Task`` for ``Agent``; 2.1.197 has the map alone; ``cli_tables.tools``). A config rule naming
  a tool that neither a table nor the installed CLI knows is an error (``policy.rules.tool_problem``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import signal
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from claudeguard.cli_tables.scan import scan_binary
from claudeguard.errors import GuardError, run_main

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable

FORMAT = 1
DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
RUN_TIMEOUT = 30.0
# Two options no CLI has: a probe's tripwires (the CLI names the first unknown option it meets).
ZZ_A, ZZ_B = "--zz-claudeguard-probe-a", "--zz-claudeguard-probe-b"
# Options a probe never passes, even with a tripwire behind them: main() acts on these words
# before commander parses argv (a background launch, a deep link, a relay token, an update).
NEVER_PROBE = frozenset({"--bg", "--background", "--handle-uri", "--session-tunnel", "--update", "--upgrade"})
# Words main() may take over at argv[0] (early dispatch): their help is always read, since it is
# theirs, not commander's, and lists options commander's listing does not announce.
EARLY_VERBS = frozenset({"attach", "logs", "stop", "kill", "respawn", "rm", "daemon"})
TAKES = ("none", "one", "optional", "many", "optional-many")

# --- option specs, as commander reads them ----------------------------------------------------


def parse_flags(spec: str) -> dict[str, Any]:
    """``"-p, --print"``, ``"--allowedTools, --allowed-tools <tools...>"`` -> names and how many
    words the option takes; the same reading as the CLI's own option class (a short and/or a
    long name, then ``<v>`` required, ``[v]`` optional, ``...`` variadic)."""
    spec = spec.strip()
    start = min((i for i in (spec.find("<"), spec.find("[")) if i != -1), default=len(spec))
    names = [w for w in re.split(r"[ ,|]+", spec[:start]) if w.startswith("-")]
    value = spec[start:].strip() or None
    required, optional = "<" in spec, "[" in spec
    variadic = bool(re.search(r"\w\.\.\.[>\]]$", spec.strip()))
    if required:
        takes = "many" if variadic else "one"
    elif optional:
        takes = "optional-many" if variadic else "optional"
    else:
        takes = "none"
    return {"names": names, "takes": takes, "value": value}


def _canonical(names: list[str]) -> str:
    longs = [n for n in names if n.startswith("--")]
    return longs[0] if longs else names[0]


def option_entry(spec: str, *, hidden: bool, found: str) -> tuple[str, dict[str, Any]]:
    flags = parse_flags(spec)
    key = _canonical(flags["names"])
    return key, {"aliases": [n for n in flags["names"] if n != key], "takes": flags["takes"],
                 "value": flags["value"], "eq": flags["takes"] != "none", "hidden": hidden, "found": found}


# --- help texts ---------------------------------------------------------------------------------


def parse_help(text: str) -> dict[str, Any]:
    """A commander help text -> usage, arguments, option specs and child command terms; a help of
    another shape (the early-dispatch commands print their own) -> its usage and the option
    specs of its indented ``-x`` lines."""
    usage = ""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("Usage:"):
            usage = line[len("Usage:"):].strip()
            current = None
            continue
        if line and not line[0].isspace():
            current = line.rstrip(":") if line.endswith(":") else None
            continue
        if current is not None and line.startswith("  ") and not line.startswith("   ") and line.strip():
            term = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            sections.setdefault(current, []).append(term)
    commander = "Options" in sections
    # A description may run over several lines at the terms' indent (2.1.197's `mcp add`
    # carries "Examples:" and shell lines): a term is an option spec or a lower-case word.
    options = [t for t in sections.get("Options", []) if t.startswith("-")]
    commands = [t for t in sections.get("Commands", []) if re.match(r"[a-z][\w:-]*(\|[\w-]+)*( |$)", t)]
    if not commander:
        options = [m.group(1) for m in re.finditer(r"(?m)^  (-[^\s,]+(?:, -[^\s,]+)*(?: [<\[][^\s]*)?)(?:\s{2,}|$)",
                                                   text)]
    return {"usage": usage, "commander": commander, "options": options,
            "commands": commands, "arguments": _usage_arguments(usage)}


def _usage_arguments(usage: str) -> list[str]:
    """The bracketed words of a usage line (one level of nesting: ``[--x <v>]``), without
    commander's ``[options]`` and ``[command]``."""
    groups = re.findall(r"[<\[](?:[^<>\[\]]|[<\[][^<>\[\]]*[>\]])*[>\]](?:\|[^\s]+)?", usage)
    return [g for g in groups if g not in ("[options]", "[command]")]


def parse_command_term(term: str) -> tuple[str, list[str]]:
    """``"remove|rm [options] <name>"`` -> ("remove", ["rm"])."""
    head = term.split()[0]
    name, *aliases = head.split("|")
    return name, aliases


# --- running the CLI ----------------------------------------------------------------------------


class Runner:
    """Runs the CLI in a throw-away HOME and working directory, offline: no credentials, a model
    URL where nothing listens, no auto-update, no telemetry."""

    def __init__(self, claude: str, root: str) -> None:
        self.claude = claude
        self.cwd = os.path.join(root, "work")
        home = os.path.join(root, "home")
        tmp = os.path.join(root, "tmp")
        for d in (self.cwd, home, tmp):
            os.makedirs(d, mode=0o700, exist_ok=True)
        proxies = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ANTHROPIC")) and k not in proxies}
        env.update({
            "HOME": home, "TMPDIR": tmp, "CLAUDE_CODE_TMPDIR": tmp, "XDG_RUNTIME_DIR": tmp,
            "XDG_CONFIG_HOME": os.path.join(home, ".config"), "XDG_CACHE_HOME": os.path.join(home, ".cache"),
            "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
            "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
            "CLAUDEGUARD_DISABLE": "1", "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "80"})
        self.env = env
        self.runs = 0

    def run(self, args: Iterable[str]) -> tuple[int, str, str]:
        argv = [self.claude, *args]
        self.runs += 1
        # Not through procs: cli_tables imports no claudeguard module but errors, and a run past
        # its time is killed with its whole process group (capture's timeout kills the CLI alone).
        proc = subprocess.Popen(argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
        try:
            out, err = proc.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise GuardError(f"`claude {' '.join(argv[1:])}` did not finish within {RUN_TIMEOUT:g} s") from None
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything it left behind in its group
        except (ProcessLookupError, PermissionError):
            pass
        return proc.returncode, out, err


def cli_version(runner: Runner) -> str:
    code, out, err = runner.run(["--version"])
    found = re.match(r"(\d+\.\d+\.\d+\S*) \(Claude Code\)", out.strip())
    if code != 0 or not found:
        raise GuardError(f"{runner.claude}: `--version` printed no Claude Code version ({(out or err).strip()[:80]!r})")
    return found.group(1)


# --- what the binary's JavaScript says ----------------------------------------------------------


# --- probes -----------------------------------------------------------------------------------


def _unknown_named(err: str) -> str | None:
    found = re.search(r"error: unknown option '([^']*)'", err)
    return found.group(1) if found else None


def _unexpected(args: list[str], err: str) -> GuardError:
    return GuardError(f"probe `claude {' '.join(args)}`: unexpected answer {err.strip()[:120]!r}")


def probe_option(runner: Runner, path: list[str], name: str, child: str | None) -> dict[str, Any] | None:
    """How the command at ``path`` reads option ``name`` (None: it does not accept it)."""
    _, _, err = runner.run([*path, name, ZZ_A, ZZ_B])
    named = _unknown_named(err)
    invalid = _refused(err, [name]) == name
    if named == name:
        return None
    if named == ZZ_B or invalid:
        takes = "one"
    elif named == ZZ_A:
        takes = "none"
    else:
        raise _unexpected([*path, name, ZZ_A, ZZ_B], err)
    eq = False
    if name.startswith("--"):
        _, _, err = runner.run([*path, f"{name}=x", ZZ_A])
        named = _unknown_named(err)
        eq = named == ZZ_A or _refused(err, [name]) == name
        if named not in (ZZ_A, f"{name}=x") and not eq:
            raise _unexpected([*path, f"{name}=x", ZZ_A], err)
        if takes == "none" and eq:
            takes = "optional"
    if takes in ("one", "optional") and child is not None:
        value = "x"
        for _ in range(2):
            _, out, err = runner.run([*path, name, value, child, "--help"])
            choices = re.search(r"argument '" + re.escape(value) + r"' is invalid\. Allowed choices are ([^.,]+)", err)
            if choices:
                value = choices.group(1).strip()
                continue
            usage = next((ln for ln in out.splitlines() if ln.startswith("Usage:")), "")
            if usage and _usage_path(usage) == path:
                # the child word went to the option too: it keeps taking words
                takes = "many" if takes == "one" else "optional-many"
            break
    return {"takes": takes, "eq": eq}


# --- the walk -----------------------------------------------------------------------------------


def _node(help_: dict[str, Any], *, aliases: list[str], hidden: bool, dispatch: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for spec in help_["options"]:
        key, entry = option_entry(spec, hidden=False, found="help")
        if key in ("--help", "-h"):
            continue
        if dispatch == "early":
            entry["found"] = "help (its own parser)"
        options[key] = entry
    node: dict[str, Any] = {"aliases": aliases, "arguments": help_["arguments"], "hidden": hidden,
                            "dispatch": dispatch, "options": options, "commands": {}}
    return node


def _help(runner: Runner, path: list[str], *, strict: bool = True) -> dict[str, Any]:
    """The help of the command at ``path``; ``strict``: it must be that command's (a help of
    another command means this table would be built on a misreading)."""
    code, out, err = runner.run([*path, "--help"])
    if "Usage:" not in out[:400]:
        raise GuardError(f"`claude {' '.join(path)} --help` exited {code}: {(err or out).strip()[:120]!r}")
    help_ = parse_help(out)
    if strict and help_["commander"] and not _is_usage_of(help_, path):
        raise GuardError(f"`claude {' '.join(path)} --help` printed the help of another command: {help_['usage']!r}")
    return help_


def _usage_path(usage: str) -> list[str]:
    """``Usage: claude mcp serve [options]`` -> ["mcp", "serve"]."""
    words = usage.replace("Usage:", "", 1).split()
    return [w.split("|")[0] for w in words[1:] if w[:1] not in "<[" and not w.startswith("-")][:8]


def _is_usage_of(help_: dict[str, Any], path: list[str]) -> bool:
    usage = help_["usage"].split()
    words = usage[1:1 + len(path)]
    return usage[:1] == ["claude"] and [w.split("|")[0] for w in words] == path


def walk(runner: Runner, pool: ThreadPoolExecutor, root_help: dict[str, Any],
         skip: set[tuple[str, ...]], base: list[str] | None = None, *, hidden: bool = False) -> dict[str, Any]:
    """The commander tree under the root, one ``--help`` per command, a level at a time in
    parallel. ``skip``: argv shapes main() takes over (never asked for help)."""
    root = _node(root_help, aliases=[], hidden=hidden, dispatch="commander" if root_help["commander"] else "early")
    level: list[tuple[dict[str, Any], list[str], dict[str, Any]]] = [(root, list(base or []), root_help)]
    while level:
        jobs = []
        for node, path, help_ in level:
            for term in help_["commands"]:
                name, aliases = parse_command_term(term)
                if name == "help":  # commander's own `help [command]`
                    node["help_command"] = True
                    continue
                child_path = [*path, name]
                if (" [options]" not in f" {term} " and _usage_arguments(term) and tuple(child_path) not in skip
                        and not (path == [] and name in EARLY_VERBS)):
                    # commander lists "[options]" for a command with any option (hidden ones
                    # too): one with arguments and none is a leaf with nothing more to read
                    node["commands"][name] = {"aliases": aliases, "arguments": _usage_arguments(term), "hidden": False,
                                              "dispatch": "commander", "options": {}, "commands": {}}
                    continue
                if tuple(child_path) in skip:
                    node["commands"][name] = {"aliases": aliases, "arguments": _usage_arguments(term), "hidden": False,
                                              "dispatch": "early", "options": {}, "commands": {}}
                    continue
                jobs.append((node, child_path, aliases, pool.submit(_help, runner, child_path)))
        level = []
        for node, child_path, aliases, fut in jobs:
            help_ = fut.result()
            dispatch = "commander" if help_["commander"] else "early"
            child = _node(help_, aliases=aliases, hidden=False, dispatch=dispatch)
            node["commands"][child_path[-1]] = child
            if dispatch == "commander" and help_["commands"]:
                level.append((child, child_path, help_))
    return root


def _paths(node: dict[str, Any], path: list[str] | None = None) -> Iterable[tuple[list[str], dict[str, Any]]]:
    path = path or []
    yield path, node
    for name, child in node["commands"].items():
        yield from _paths(child, [*path, name])


def _known_names(node: dict[str, Any]) -> set[str]:
    names = set()
    for key, entry in node["options"].items():
        names.add(key)
        names.update(entry["aliases"])
    return names


def add_hidden_commands(runner: Runner, pool: ThreadPoolExecutor, root: dict[str, Any],
                        commands: dict[str, set[str]], skip: set[tuple[str, ...]]) -> None:
    """Commands the JavaScript defines that no help lists: kept where ``--help`` shows their
    usage: at the root, else under the command defined just before them or that command's
    parent (where a definition usually sits), then walked like the others."""
    listed = {name for path, node in _paths(root) for name in [*path[-1:], *node["aliases"]]}
    nodes = list(_paths(root))
    pending: dict[str, list[list[str]]] = {}
    for name, hints in sorted(commands.items()):
        if name in listed or name == "help":
            continue
        parents: list[list[str]] = [[]]
        for path, node in nodes:
            if node["dispatch"] != "commander" or not path:
                continue
            if path[-1] in hints and node["commands"] or any(h in node["commands"] for h in hints):
                if path not in parents:
                    parents.append(path)
        pending[name] = parents
    while pending:
        futs = {name: pool.submit(_help, runner, [*paths[0], name], strict=False) for name, paths in pending.items()}
        for name, fut in futs.items():
            parent = pending[name].pop(0)
            try:
                help_ = fut.result()
            except GuardError:
                continue
            if _is_usage_of(help_, [*parent, name]):
                target = root
                for word in parent:
                    target = target["commands"][word]
                target["commands"][name] = walk(runner, pool, help_, skip, [*parent, name], hidden=True)
                pending[name] = []
        pending = {name: paths for name, paths in pending.items() if paths}


def _probe_child(node: dict[str, Any]) -> str | None:
    """A child command a probe may end in (``CHILD --help``): ``mcp`` at the root, else the first
    child that commander dispatches."""
    children = [n for n, c in node["commands"].items() if c["dispatch"] == "commander"]
    return "mcp" if "mcp" in children else (children[0] if children else None)


def _batches(runner: Runner, pool: ThreadPoolExecutor, items: list[str], argv_of: Callable[[list[str]], list[str]],
             ok: Callable[[str, str], bool], culprit: Callable[[str, str, list[str]], str | None]
             ) -> tuple[list[str], list[str]]:
    """Run ``argv_of(items)`` once for all. A run that is not ``ok(stdout, stderr)`` either names
    the item it failed on (``culprit``: that item is set aside and the rest run again) or is
    split in halves and run again, down to single items. Returns (items confirmed, items set
    aside or failing alone)."""
    confirmed: list[str] = []
    failed: list[str] = []
    level = [items] if items else []
    while level:
        futs = [(batch, pool.submit(runner.run, argv_of(batch))) for batch in level]
        level = []
        for batch, fut in futs:
            _, out, err = fut.result()
            if ok(out, err):
                confirmed += batch
                continue
            bad = culprit(out, err, batch)
            if bad is not None and bad in batch:
                failed.append(bad)
                rest = [b for b in batch if b != bad]
                level += [rest] if rest else []
            elif len(batch) == 1:
                failed += batch
            else:
                half = len(batch) // 2
                level += [batch[:half], batch[half:]]
    return confirmed, failed


def _refused(err: str, names: Iterable[str]) -> str | None:
    """Which of ``names`` refused the value it took: commander's "option '--x <v>' argument
    'y' is invalid", or (2.1.197's commander, a parser that throws a plain error) an
    "error: --x must be ..." line."""
    found = re.search(r"error: option '([^' ]+)[^']*' argument", err)
    if found and found.group(1) in names:
        return found.group(1)
    for line in err.splitlines():
        if line.startswith("error: ") and "unknown option" not in line:
            first = line[len("error: "):].split()[:1]
            if first and first[0] in names:
                return first[0]
    return None


def _named(err: str, batch: list[str]) -> str | None:
    """The batch item an error names: an unknown option, or an option whose value was refused."""
    found = re.search(r"error: unknown option '([^'=]*)", err)
    if found:
        return found.group(1) if found.group(1) in batch else None
    return _refused(err, batch)


def _root_batches(runner: Runner, pool: ThreadPoolExecutor, root: dict[str, Any],
                  names: dict[str, str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Confirm the root's candidates (name -> the takes its spec says) a batch at a time; returns
    what was confirmed and the names left to probe one by one. The batches, with ``mcp`` the
    root's child and ``--model`` a value option the root's help lists:

    - value options: ``R1 --zz-v-0 R2 --zz-v-1 ... --zz-a`` fails on ``--zz-a`` only when every
      Ri took the dash word after it (a required value); a failure on ``--zz-v-i`` names the
      option that did not. An option that refuses ``--zz-v-i`` as its value (choices) took it
      too: it is confirmed and left out;
    - the others, first ``B1 B2 ... --zz-a`` (fails on ``--zz-a`` only when all are known), then
      ``B1 --model m B2 --model m ... mcp --help``: ``mcp``'s help only when no Bi took a word
      (else ``m`` is the prompt, and the root's help shows);
    - optional values, besides: ``O1 w O2 w ... mcp --help`` prints ``mcp``'s help only when
      every Oi took its ``w``.
    """
    child = _probe_child(root)
    if child is None or "--model" not in root["options"]:
        return {}, sorted(names)
    child_usage = f"Usage: claude {child}"
    value = [n for n, t in names.items() if t in ("one", "many")]
    plain = [n for n, t in names.items() if t not in ("one", "many")]
    refused: list[str] = []

    def value_culprit(out: str, err: str, batch: list[str]) -> str | None:
        named = _unknown_named(err) or ""
        if named.startswith("--zz-claudeguard-v"):  # the option before it took no dash word
            index = int(named.rsplit("-", 1)[1])
            return batch[index] if index < len(batch) else None
        bad = _named(err, batch)
        if bad is not None and _refused(err, [bad]) == bad:
            refused.append(bad)
        return bad

    v_ok, v_bad = _batches(runner, pool, value,
                           lambda b: [w for i, n in enumerate(b) for w in (n, f"--zz-claudeguard-v-{i}")] + [ZZ_A],
                           lambda out, err: _unknown_named(err) == ZZ_A, value_culprit)
    known, k_bad = _batches(runner, pool, plain, lambda b: [*b, ZZ_A], lambda out, err: _unknown_named(err) == ZZ_A,
                            lambda out, err, b: _named(err, b))
    p_ok, p_bad = _batches(runner, pool, known,
                           lambda b: [w for n in b for w in (n, "--model", "m")] + [child, "--help"],
                           lambda out, err: out.startswith(child_usage), lambda out, err, b: _named(err, b))
    optional = [n for n in p_ok if names[n] != "none"]
    o_ok, o_bad = _batches(runner, pool, optional, lambda b: [w for n in b for w in (n, "w")] + [child, "--help"],
                           lambda out, err: out.startswith(child_usage), lambda out, err, b: _named(err, b))
    done: dict[str, dict[str, Any]] = {}
    for n in [*v_ok, *refused]:
        done[n] = {"takes": names[n], "eq": True}
    for n in p_ok:
        if names[n] == "none":
            done[n] = {"takes": "none", "eq": False}
    for n in o_ok:
        done[n] = {"takes": names[n], "eq": True}
    return done, sorted((set(v_bad) - set(refused)) | set(k_bad) | set(p_bad) | set(o_bad))


def add_hidden_options(runner: Runner, pool: ThreadPoolExecutor, root: dict[str, Any],
                       specs: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
    """Probe each option spec no help lists, at the commands of the name it stands under in the
    JavaScript (then at the root), or at the root when it stands under the root program or
    nothing known; returns the specs no command accepted."""
    by_name: dict[str, list[tuple[list[str], dict[str, Any]]]] = {}
    for path, node in _paths(root):
        if path and node["dispatch"] == "commander":
            by_name.setdefault(path[-1], []).append((path, node))

    def places(context: str | None) -> list[tuple[list[str], dict[str, Any]]]:
        return [*(by_name.get(context, []) if context else []), ([], root)]

    def place(name: str, context: str | None) -> tuple[dict[str, Any], dict[str, Any]] | None:
        for path, node in places(context):
            got = probe_option(runner, path, name, _probe_child(node))
            if got is not None:
                return node, got
        return None

    unconfirmed: list[dict[str, Any]] = []
    at_root: dict[str, str] = {}  # name -> takes by its spec
    spec_of: dict[str, str] = {}
    context_of: dict[str, str | None] = {}
    elsewhere: list[tuple[str, str | None]] = []
    for spec, context in specs:
        flags = parse_flags(spec)
        if not flags["names"]:
            continue
        name = _canonical(flags["names"])
        if any(name in _known_names(node) for _, node in places(context)):
            continue
        if name in NEVER_PROBE:
            unconfirmed.append({"spec": spec, "under": context, "why": "not probed: main() acts on it"})
            continue
        if context and context in by_name:
            elsewhere.append((spec, context))
        elif name not in at_root:
            at_root[name] = flags["takes"]
            spec_of[name] = spec
            context_of[name] = context

    def add(node: dict[str, Any], spec: str, got: dict[str, Any]) -> None:
        key, entry = option_entry(spec, hidden=True, found="probe")
        if key in node["options"]:
            return
        if got["takes"] != entry["takes"]:
            entry["spec_takes"] = entry["takes"]
        entry["takes"], entry["eq"] = got["takes"], got["eq"]
        node["options"][key] = entry

    done, single = _root_batches(runner, pool, root, at_root)
    for name, got in done.items():
        add(root, spec_of[name], got)
    # variadic options: one more run each shows that their values run on (root only: it has a child)
    child = _probe_child(root)
    many = [n for n, got in done.items() if got["takes"] in ("many", "optional-many")]
    tails = {n: pool.submit(runner.run, [n, "x", child, "--help"]) for n in many if child}
    for name, tail in tails.items():
        _, out, _ = tail.result()
        if out.startswith(f"Usage: claude {child}"):  # `x` was its only value: the child ran
            root["options"][name]["takes"] = "one" if done[name]["takes"] == "many" else "optional"
            root["options"][name]["spec_takes"] = done[name]["takes"]
    places_of = [(spec_of[n], context_of[n], pool.submit(place, n, None)) for n in single]
    places_of += [(spec, context, pool.submit(place, _canonical(parse_flags(spec)["names"]), context))
                  for spec, context in elsewhere]
    for spec, context, where in places_of:
        placed = where.result()
        if placed is None:
            unconfirmed.append({"spec": spec, "under": context, "why": "no command accepts it"})
            continue
        add(placed[0], spec, placed[1])
    return sorted(unconfirmed, key=lambda u: (u["spec"], u["under"] or ""))


def confirm_early(runner: Runner, pool: ThreadPoolExecutor, root: dict[str, Any], early: dict[str, list[Any]],
                  eager: dict[str, list[str]] | None) -> dict[str, Any]:
    """The argv[0] words main() dispatches on: for each bare word, what ``claude WORD --help``
    does (its own usage, or the root's when this build reads the word as a prompt)."""
    # `daemon`: main() of 2.1.330 hands it to a helper outside its own module, so no argv[0] test
    # names it there; asking costs one run.
    words = sorted(set(early["argv0"]) | set((eager or {}).get("fast_path_verbs", []))
                   | set((eager or {}).get("background_verbs", [])) | {"daemon"})
    bare = [w for w in words if not w.startswith("-")]
    futs = {w: pool.submit(runner.run, [w, "--help"]) for w in bare}
    out: dict[str, Any] = {}
    for w in words:
        if w.startswith("-"):
            out[w] = {"read_as": "early (argv[0] only; not run)"}
            continue
        code, stdout, stderr = futs[w].result()
        first = (stdout.strip() or stderr.strip()).splitlines()[:1]
        said = first[0].strip() if first else ""
        if said.startswith("Usage: claude [options] [command] [prompt]"):
            out[w] = {"read_as": "prompt"}
        else:
            out[w] = {"read_as": "command", "help": said[:100]}
            if w not in root["commands"] and not any(w in c["aliases"] for c in root["commands"].values()):
                root["commands"][w] = {"aliases": [], "arguments": [], "hidden": True, "dispatch": "early",
                                       "options": {}, "commands": {}}
            elif w in root["commands"]:
                root["commands"][w]["dispatch"] = "early"
    return {"argv0": out, "shapes": early["shapes"]}


def positional_options(runner: Runner, root: dict[str, Any]) -> bool:
    """Whether the root stops reading its own options at the first sub-command word (commander's
    ``enablePositionalOptions``): ``claude mcp --model m --zz-a`` then fails on ``--model``
    (``mcp`` does not know it), else on ``--zz-a`` (the root took ``--model m``)."""
    child = _probe_child(root)
    if child is None or "--model" not in root["options"]:
        raise GuardError("cannot tell how the root reads options after a sub-command: no `mcp`/`--model` to probe with")
    _, _, err = runner.run([child, "--model", "m", ZZ_A])
    named = _unknown_named(err)
    if named not in ("--model", ZZ_A):
        raise _unexpected([child, "--model", "m", ZZ_A], err)
    return named == "--model"


def print_reads_commands_as_prompt(runner: Runner, root: dict[str, Any]) -> bool:
    """Whether, with ``-p`` anywhere in argv, a sub-command word is read as the prompt (then
    ``claude -p mcp --help`` shows the root's help, else ``mcp``'s)."""
    child = _probe_child(root)
    if child is None:
        raise GuardError("cannot tell how -p treats sub-command words: no child command to probe with")
    _, out, _ = runner.run(["-p", child, "--help"])
    usage = next((ln for ln in out.splitlines() if ln.startswith("Usage:")), "")
    if not usage:
        raise _unexpected(["-p", child, "--help"], out)
    return _usage_path(usage) == []


def derive(claude: str, *, jobs: int = 4) -> dict[str, Any]:
    """The table of the CLI at ``claude`` (see the module's docstring)."""
    path = os.path.realpath(claude)
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise GuardError(f"{claude}: not an executable file")
    static = scan_binary(path)
    root_dir = tempfile.mkdtemp(prefix="claudeguard-derive-")
    try:
        runner = Runner(claude, root_dir)
        version = cli_version(runner)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            # a shape of command words alone is main()'s (`plugin test`); one that ends in an
            # option (`plugin validate --module`) leaves the command itself to commander
            skip = {tuple(s) for s in static["early"]["shapes"] if not s[-1].startswith("-")}
            root_help = _help(runner, [])
            root = walk(runner, pool, root_help, skip)
            root["arguments"] = root_help["arguments"]
            add_hidden_commands(runner, pool, root, static["commands"], skip)
            unconfirmed = add_hidden_options(runner, pool, root, static["specs"])
            early = confirm_early(runner, pool, root, static["early"], static["eager"])
            positional = positional_options(runner, root)
            print_prompt = print_reads_commands_as_prompt(runner, root)
        return {
            "format": FORMAT,
            "cli_version": version,
            "parser": {"kind": static["parser"], "positional_options": positional,
                       "print_reads_commands_as_prompt": print_prompt},
            "root": _sorted(root),
            "early": early,
            "eager": static["eager"],
            "tools": static["tools"],
            "binary_only": unconfirmed,
        }
    finally:
        shutil.rmtree(root_dir, ignore_errors=True)


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    node["options"] = dict(sorted(node["options"].items()))
    node["commands"] = {k: _sorted(v) for k, v in sorted(node["commands"].items())}
    node["aliases"] = sorted(node["aliases"])
    return node


def differences(checked: Any, derived: Any, where: str = "") -> list[str]:
    """Each place where two tables differ, one line each, named by its path through the
    table (``root.commands.mcp.options.--debug.takes: 'none' checked in, 'optional' derived``)."""
    if isinstance(checked, dict) and isinstance(derived, dict):
        out: list[str] = []
        for key in sorted(set(checked) | set(derived), key=str):
            at = f"{where}.{key}" if where else str(key)
            if key not in derived:
                out.append(f"{at}: checked in, not derived")
            elif key not in checked:
                out.append(f"{at}: derived, not checked in")
            else:
                out += differences(checked[key], derived[key], at)
        return out
    if checked != derived:
        return [f"{where}: {checked!r} checked in, {derived!r} derived"]
    return []


def dumps(table: dict[str, Any]) -> str:
    """The one text form of a table: sorted keys, two-space indent, a newline at the end."""
    return json.dumps(table, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m claudeguard.cli_tables.derive",
                                     description="Derive the argv table of an installed Claude Code CLI.")
    parser.add_argument("claude", help="path of the claude binary")
    parser.add_argument("--write", action="store_true", help="write data/<version>.json beside this module")
    parser.add_argument("--jobs", type=int, default=4, help="CLI runs at a time (default 4)")
    args = parser.parse_args(argv)

    def run() -> int:
        table = derive(args.claude, jobs=args.jobs)
        text = dumps(table)
        if args.write:
            os.makedirs(DATA_DIR, exist_ok=True)
            target = os.path.join(DATA_DIR, f"{table['cli_version']}.json")
            with open(target + ".tmp", "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(target + ".tmp", target)
            print(f"wrote {target}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return 0

    return run_main("derive", run)


if __name__ == "__main__":
    sys.exit(main())
