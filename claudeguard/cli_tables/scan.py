"""The static half of deriving a CLI's argv table (``derive.py``): what the binary's embedded
JavaScript says, read without running it. Option specs (``.option("--x <v>")``, ``new
Option(...)``) with the command each stands under, ``.command("name")`` names, the parser kind,
the words ``main()`` dispatches on before commander, and the eager reader's sets (2.1.330+).
``derive`` confirms each by probing the CLI. Stdlib only.
"""

from __future__ import annotations

import json
import mmap
import re

from claudeguard.cli_tables.tools import read_tools

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable


def _open(path: str) -> mmap.mmap:
    with open(path, "rb") as fh:
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def _finds(m: mmap.mmap, needle: bytes) -> Iterable[int]:
    i = m.find(needle)
    while i != -1:
        yield i
        i = m.find(needle, i + 1)


_SPEC = re.compile(rb'\(\s*"(-[^"\n]{1,120})"')
_VAR_SPEC = re.compile(rb"\(([A-Za-z_$][\w$]{0,8})[,)]")
_CMD = re.compile(rb'\.command\("([a-z][\w:-]*)([^"]*)"(,\{hidden:([^}]{1,20})\})?\)')


def _context(m: mmap.mmap, at: int) -> str | None:
    """The command an option spec (or a command) stands under in the JavaScript: the nearest
    ``.command("x`` (or the root program's ``.name("claude")``) before it, within one chain's
    reach."""
    back = m[max(0, at - 30000):at]
    cmd = back.rfind(b'.command("')
    root = back.rfind(b'.name("claude")')
    if cmd == -1 and root == -1:
        return None
    if root > cmd:
        return ""
    found = _CMD.match(back, cmd)
    return found.group(1).decode() if found else None


def scan_binary(path: str) -> dict[str, Any]:
    """Option specs (with the command each stands under), command names, the parser kind, the
    early-dispatch words of main() and the eager reader's table."""
    m = _open(path)
    try:
        specs: dict[tuple[str, str | None], None] = {}
        for needle in (b'.option("-', b'.requiredOption("-'):
            for at in _finds(m, needle):
                found = _SPEC.match(m, at + needle.index(b"("))
                if found:
                    specs[(found.group(1).decode("latin-1"), _context(m, at))] = None
        for at in _finds(m, b".addOption(new "):
            window = m[at:at + 200]
            found = re.match(rb'\.addOption\(new [A-Za-z_$][\w$]{0,8}\(\s*"(-[^"\n]{1,120})"', window)
            if found:
                specs[(found.group(1).decode("latin-1"), _context(m, at))] = None
                continue
            var = re.match(rb"\.addOption\(new [A-Za-z_$][\w$]{0,8}\(([A-Za-z_$][\w$]{0,8})[,)]", window)
            if var:  # a spec kept in a variable: `X="--flag"` close by
                lo = max(0, at - 2_000_000)
                near = m[lo:at + 2_000_000]
                value = re.search(rb"[,;{ ]" + re.escape(var.group(1)) + rb'="(-[^"\n]{1,120})"', near)
                if value:
                    specs[(value.group(1).decode("latin-1"), _context(m, at))] = None
        commands: dict[str, set[str]] = {}  # name -> the commands defined just before it (hints)
        for at in _finds(m, b'.command("'):
            found = _CMD.match(m, at)
            if found:
                commands.setdefault(found.group(1).decode(), set()).add(_context(m, at) or "")
        custom = m.find(b"enablePositionalOptions(){return this.#") != -1
        return {"specs": sorted(specs, key=lambda s: (s[0], s[1] or "")), "commands": commands,
                "parser": "claude-commander" if custom else "commander",
                "early": _early_words(m), "eager": _eager_table(m), "tools": read_tools(m)}
    finally:
        m.close()


def _module_around(m: mmap.mmap, at: int, reach: int = 80000) -> str:
    lo = m.rfind(b"// @bun", max(0, at - reach), at)
    hi = m.find(b"// @bun", at, at + reach)
    return m[lo if lo != -1 else max(0, at - reach):hi if hi != -1 else at + reach].decode("latin-1")


def _early_words(m: mmap.mmap) -> dict[str, list[Any]]:
    """Words main() dispatches on before commander: ``argv[0] === "word"`` and argv shapes such
    as ``plugin test``, in the module that starts the background pty host (main's own)."""
    at = m.find(b'==="--bg-pty-host"')
    if at == -1:
        return {"argv0": [], "shapes": []}
    text = _module_around(m, at, 60000)
    words: list[str] = []
    argv0 = r'(?:\b[A-Za-z_$][\w$]{0,2}\[0\]|process\.argv\[2\])==="([-a-z][-a-z0-9]*)"(&&\w\[1\]==="([-a-z0-9]+)")?'
    for found in re.finditer(argv0, text):
        if found.group(2) is None and found.group(1) not in words:
            words.append(found.group(1))
    shape = r'\w\[0\]==="([a-z][-a-z]*)"&&\w\[1\]==="([-a-z]+)"(?:&&\w\[2\]==="([-a-z]+)")?'
    shapes = sorted({tuple(w for w in f.groups() if w) for f in re.finditer(shape, text)})
    # The background-session verbs and the daemon may also be dispatched through helpers (their
    # names sit in a set, not in an argv[0] test): the eager reader's verb sets cover those.
    return {"argv0": sorted(words), "shapes": [list(s) for s in shapes]}


def _eager_table(m: mmap.mmap) -> dict[str, list[str]] | None:
    """The eager reader's sets (2.1.330+): value flags, variadic ones, optional-value ones, the
    boolean flags it steps over, the background-session verbs and the fast-path-only verbs."""
    at = m.find(b" as VARIADIC_VALUE_FLAGS")
    if at == -1:
        return None
    local = re.search(rb"([A-Za-z_$][\w$]*)$", m[at - 40:at])
    if local is None:
        return None
    impl = m.find(local.group(1) + b"=new Set([")
    if impl == -1:
        return None
    text = _module_around(m, impl, 40000)
    sets: dict[str, list[str]] = {}
    for found in re.finditer(r"([A-Za-z_$][\w$]*)=new Set\(\[([^\]]*(?:\.\.\.\[\])?)\]\)", text):
        sets[found.group(1)] = [tok.strip() for tok in found.group(2).split(",") if tok.strip()]

    def expand(name: str, seen: tuple[str, ...] = ()) -> list[str]:
        out: list[str] = []
        for tok in sets.get(name, []):
            if tok.startswith('"'):
                out.append(json.loads(tok))
            elif tok.startswith("...") and tok[3:] in sets and tok[3:] not in seen:
                out += expand(tok[3:], seen + (name,))
        return out

    table = {name: expand(name) for name in sets}
    variadic = local.group(1).decode()

    def pick(test: Callable[[list[str]], bool]) -> list[str]:
        hits = [v for k, v in table.items() if k != variadic and test(v)]
        return sorted(hits[0]) if len(hits) == 1 else []

    return {
        "value": pick(lambda v: "--settings" in v and "--model" in v),
        "many": sorted(table.get(variadic, [])),
        "optional": pick(lambda v: "--resume" in v and "-r" in v),
        "none": pick(lambda v: "--verbose" in v and "--bare" in v),
        "background_verbs": pick(lambda v: "attach" in v and "rm" in v and "daemon" not in v),
        "fast_path_verbs": pick(lambda v: "attach" in v and "daemon" in v),
    }
