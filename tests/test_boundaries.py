"""The boundaries of config/, channel/, service/ and plan/ are typed (issue 22): no public function
or method there takes or returns ``Any`` or a bare ``dict``, read from the source with ast.

A public function is a module-level function or a method of a module-level class whose name does
not start with ``_`` (``__init__`` counts: it is how a class is called). Every parameter's and the
return's annotation is read; a type alias of the package that stands for ``Any`` (``X = dict[str,
Any]``) counts as ``Any`` too. What data really is of any shape (a JSON file of Claude Code's, a
message off a socket) is ``object`` or ``dict[str, object]`` there: the reader narrows it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "claudeguard"
TYPED = ("config", "channel", "service", "plan")


def _names(node: ast.AST) -> set[str]:
    """The names an annotation mentions (a string annotation is parsed first)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        node = ast.parse(node.value, mode="eval")
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
    return out


def _bare_dicts(node: ast.AST) -> bool:
    """A ``dict`` with no parameters anywhere in the annotation."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        node = ast.parse(node.value, mode="eval")
    subscripted = {id(sub.value) for sub in ast.walk(node) if isinstance(sub, ast.Subscript)}
    return any(isinstance(sub, ast.Name) and sub.id == "dict" and id(sub) not in subscripted for sub in ast.walk(node))


def any_aliases(root: Path = PACKAGE) -> set[str]:
    """Names the package assigns a type that mentions ``Any`` (at any depth of a module)."""
    found = {"Any"}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value: ast.AST = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None \
                    and "TypeAlias" in _names(node.annotation):
                value = node.value
            else:
                continue
            if isinstance(value, (ast.Subscript, ast.Name, ast.BinOp)) and "Any" in _names(value):
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                assert isinstance(target, ast.Name)
                found.add(target.id)
    return found


def untyped_signatures(root: Path = PACKAGE, packages: tuple[str, ...] = TYPED) -> list[str]:
    anys = any_aliases(root)
    bad = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            functions = [(node, "") for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for cls in tree.body:
                if isinstance(cls, ast.ClassDef) and not cls.name.startswith("_"):
                    functions += [(node, f"{cls.name}.") for node in cls.body
                                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for fn, owner in functions:
                if fn.name.startswith("_") and fn.name != "__init__":
                    continue
                a = fn.args
                params = a.posonlyargs + a.args + a.kwonlyargs + [p for p in (a.vararg, a.kwarg) if p is not None]
                annotated = [(p.arg, p.annotation) for p in params if p.annotation is not None]
                if fn.returns is not None:
                    annotated.append(("return", fn.returns))
                for name, annotation in annotated:
                    if _names(annotation) & anys or _bare_dicts(annotation):
                        where = f"{path.relative_to(root.parent)}:{fn.lineno}"
                        bad.append(f"{where} {owner}{fn.name}({name}): {ast.unparse(annotation)}")
    return bad


def test_no_public_function_of_the_typed_packages_takes_or_returns_any_or_a_bare_dict():
    assert untyped_signatures() == []


def test_the_reader_finds_any_bare_dicts_and_aliases(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "x.py").write_text(
        "from typing import Any\n"
        "Loose = dict[str, Any]\n"
        "def a(x: dict) -> None: ...\n"
        "def b(x: int) -> 'list[Any]': ...\n"
        "def c(x: Loose) -> None: ...\n"
        "def d(x: dict[str, object], y: object) -> dict[str, int]: ...\n"
        "def _private(x: Any) -> Any: ...\n"
        "class K:\n"
        "    def __init__(self, v: Any) -> None: ...\n"
        "    def m(self, *args: Any, **kw: dict) -> None: ...\n")
    found = untyped_signatures(tmp_path, ("config",))
    assert [line.split(" ", 1)[1] for line in found] == [
        "a(x): dict", "b(return): 'list[Any]'", "c(x): Loose", "K.__init__(v): Any", "K.m(args): Any",
        "K.m(kw): dict"]
