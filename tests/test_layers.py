"""The package's import graph, read from the source with ast: no import circle and no import that
runs upward through the layers below (docs/design.md, "Layers").

Every ``import`` and ``from ... import`` of a ``claudeguard`` module counts wherever it stands:
at the top, inside a function (a deferred import hides an arrow, it does not remove it) and under
``if TYPE_CHECKING:`` (a type-only import still says which module knows which). A name taken
from a package (``from claudeguard.channel import audit``, ``import claudeguard.channel``) is an
arrow to the package's ``__init__`` as well: the name is looked up there, in what the
``__init__`` runs and re-exports, so an ``__init__`` that imports a module that takes a name from
the package is a circle. ``from claudeguard.channel.audit import record`` names the module alone
(Python runs every ``__init__`` above a module first, but reads nothing from it). Imports by
name at run time (``__import__``, ``importlib``) are not seen; the package keeps them to the
dispatchers that need them (``commands.ctl``, the service's planner, and the service's desk host,
which starts ``claudeguard.desk`` at the first ``claudeguardctl desk``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "claudeguard"

# Bottom first. A module may import modules of its own layer and of the layers below it, never
# one above. The first entry of each layer is its name in messages; a module belongs to the layer
# of the longest prefix that names it (``claudeguard`` itself names the package's __init__ alone).
# The same order is written in docs/design.md ("Layers").
LAYERS: list[tuple[str, ...]] = [
    ("base", "claudeguard", "claudeguard.errors", "claudeguard.home", "claudeguard.json_read", "claudeguard.stages",
     "claudeguard.switches"),
    ("tools", "claudeguard.files", "claudeguard.procs", "claudeguard.sockets", "claudeguard.decision",
     "claudeguard.events", "claudeguard.cli_tables", "claudeguard.ancestry", "claudeguard.tcp_owner"),
    ("policy", "claudeguard.policy"),
    ("config", "claudeguard.config"),
    # plan/sandbox.py: the box's argv and files, which the gate needs for every Bash allow it gives;
    # box_rules.py and code_paths.py: what of the user's rules and of git's files it holds;
    # box_enter.py: the session's box those calls run in
    ("paths", "claudeguard.paths", "claudeguard.plan.sandbox", "claudeguard.plan.box_rules",
     "claudeguard.plan.code_paths", "claudeguard.plan.git_index", "claudeguard.plan.box_enter"),
    ("channel", "claudeguard.channel"),
    ("fleet", "claudeguard.fleet"),
    ("gate", "claudeguard.gate"),
    ("watchdog", "claudeguard.watchdog"),
    ("plan", "claudeguard.plan"),
    ("service", "claudeguard.service"),
    ("launcher", "claudeguard.shim"),
    ("testing", "claudeguard.testing"),
    # gate/fast_entry.py is a program (`python -E -S .../gate/fast_entry.py hook`), imported by
    # nothing: in gate/ for its path, which running sessions' settings name; an entry like
    # bin/claudeguardctl, it may run any command
    ("commands", "claudeguard.commands", "claudeguard.desk", "claudeguard.__main__", "claudeguard.gate.fast_entry"),
    # the desk's screenshots: a demo run of the desk, above it
    ("demos", "claudeguard.testing.desk_demo"),
]
ROOT = "claudeguard"


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _target(name: str, known: dict[str, Path]) -> str | None:
    """The package module ``name`` is, or lies in (``claudeguard.x.y.attr`` -> ``claudeguard.x.y``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules ``module`` imports, anywhere in its file."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: None if is_package else -1]
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # `from pkg import mod` imports the module pkg.mod; `from mod import name`, mod itself
            names = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in known else origin
                     for alias in node.names]
            if origin in known and known[origin].name == "__init__.py":
                names.append(origin)  # `from pkg import ...` reads the names pkg's __init__ holds
        for name in names:
            if name == "claudeguard" or name.startswith("claudeguard."):
                target = _target(name, known)
                if target is not None and target != module:
                    found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, *prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module == prefix or (prefix != ROOT and module.startswith(prefix + "."))
            if inside and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return best[1] if best is not None else None


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def upward(edges: dict[str, set[str]]) -> list[str]:
    out = []
    for source in sorted(edges):
        for target in sorted(edges[source]):
            low, high = layer_of(source), layer_of(target)
            if low is not None and high is not None and high > low:
                out.append(f"{source} ({LAYERS[low][0]}) -> {target} ({LAYERS[high][0]})")
    return out


def test_every_module_has_a_layer():
    assert [m for m in modules() if layer_of(m) is None] == [], \
        "a new package: add it to LAYERS here and to docs/design.md ('Layers')"


def test_no_import_circle():
    assert circles(graph()) == []


def test_no_import_runs_upward():
    assert upward(graph()) == []


def test_the_reader_sees_every_kind_of_import(tmp_path):
    pkg = tmp_path / "claudeguard"
    (pkg / "a").mkdir(parents=True)
    for name in ("__init__.py", "a/__init__.py", "a/low.py", "a/other.py", "b.py"):
        (pkg / name).write_text("")
    (pkg / "a" / "high.py").write_text(
        "from . import low\n"
        "TYPE_CHECKING = False\n"
        "if TYPE_CHECKING:\n"
        "    from claudeguard.b import Thing\n"
        "def f():\n"
        "    from .other import name\n"
        "    import claudeguard.a.low.attr\n")
    known = {"claudeguard": pkg / "__init__.py", "claudeguard.a": pkg / "a/__init__.py",
             "claudeguard.a.low": pkg / "a/low.py", "claudeguard.a.other": pkg / "a/other.py",
             "claudeguard.a.high": pkg / "a/high.py", "claudeguard.b": pkg / "b.py"}
    assert imports_of("claudeguard.a.high", pkg / "a/high.py", known) == {
        "claudeguard.a", "claudeguard.a.low", "claudeguard.a.other", "claudeguard.b"}
    assert circles({"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": {"x"}}) == [["x", "y", "z"]]
    assert layer_of("claudeguard.shim.main") == layer_of("claudeguard.shim") > layer_of("claudeguard.service.files")
    assert layer_of("claudeguard") == 0 and layer_of("claudeguard.errors") == 0
    assert layer_of("claudeguard.gate.fast_entry") == layer_of("claudeguard.commands") > layer_of("claudeguard.gate")
    assert layer_of("claudeguard.nowhere") is None and layer_of("claudeguard.nowhere.x") is None


def test_a_name_taken_from_a_package_goes_through_its_init(tmp_path):
    """``from pkg import mod`` reads pkg's ``__init__``: when that ``__init__`` re-exports from
    the module, the two are a circle; taking the name from the module itself is not."""
    pkg = tmp_path / "claudeguard"
    (pkg / "p").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "p" / "__init__.py").write_text("from claudeguard.p.api import thing\n")
    (pkg / "p" / "low.py").write_text("")
    (pkg / "p" / "api.py").write_text("from claudeguard.p import low\nthing = 1\n")
    (pkg / "p" / "direct.py").write_text("from claudeguard.p.low import x\nimport claudeguard.p.api\n")
    known = {"claudeguard": pkg / "__init__.py", "claudeguard.p": pkg / "p/__init__.py",
             "claudeguard.p.low": pkg / "p/low.py", "claudeguard.p.api": pkg / "p/api.py",
             "claudeguard.p.direct": pkg / "p/direct.py"}
    edges = {name: imports_of(name, path, known) for name, path in known.items()}
    assert edges["claudeguard.p.api"] == {"claudeguard.p", "claudeguard.p.low"}
    assert edges["claudeguard.p.direct"] == {"claudeguard.p.low", "claudeguard.p.api"}
    assert circles(edges) == [["claudeguard.p", "claudeguard.p.api"]]
    (pkg / "p" / "api.py").write_text("from claudeguard.p.low import y\nthing = 1\n")
    edges["claudeguard.p.api"] = imports_of("claudeguard.p.api", pkg / "p/api.py", known)
    assert circles(edges) == []
