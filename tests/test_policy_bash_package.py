"""The policy/bash package: its shape, and the shortcuts that stand in for a regex giving the same answers."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import claudeguard.policy.bash as bash
from claudeguard.policy.bash import compile_pattern, normalize_space, pattern_matches
from claudeguard.policy.bash.patterns import _matcher, _test
from claudeguard.policy.bash.wrappers import _plain_safe

PACKAGE = Path(bash.__file__).parent
MODULES = ["__init__", "lexer", "writes", "parser", "wrappers", "patterns"]
SPEC_TEXT = st.lists(st.sampled_from(list("ab *:\\-.\t\n\xa0\u2028") + ["\\*", "\\\\", " *", ":*"]),
                     max_size=10).map("".join)


def test_every_module_has_a_docstring_and_imports_only_the_ones_before_it() -> None:
    assert sorted(p.stem for p in PACKAGE.glob("*.py")) == sorted(MODULES)
    for index, name in enumerate(MODULES):
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        assert ast.get_docstring(tree), name
        imported = {node.module.rsplit(".", 1)[-1] for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module
                    and node.module.startswith("claudeguard.policy.bash.")}
        if name != "__init__":
            assert imported <= set(MODULES[1:index]), (name, imported)


def test_the_public_names_come_from_the_package() -> None:
    assert sorted(bash.__all__) == sorted([
        "Part", "Split", "split_command", "command_writes", "compile_pattern", "pattern_matches", "part_allowed_by",
        "part_denied_by", "escape_pattern", "normalize_space", "fallback_chunks"])
    assert all(callable(getattr(bash, name)) for name in bash.__all__)


def test_one_scanning_routine_reads_quotes_dollars_and_backticks() -> None:
    """The character loop that dispatches on '$' and '`' (and quotes) is Lexer.scan alone, not copies."""
    tree = ast.parse((PACKAGE / "lexer.py").read_text())
    lexer = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Lexer")

    def compared(function: ast.FunctionDef) -> set[object]:
        return {c.value for n in ast.walk(function) if isinstance(n, ast.Compare)
                for c in n.comparators if isinstance(c, ast.Constant)}

    readers = [f.name for f in lexer.body if isinstance(f, ast.FunctionDef) and {"$", "`"} <= compared(f)]
    assert readers == ["scan"]
    assert {"'", '"', "\\"} <= compared(next(f
                                             for f in lexer.body
                                             if isinstance(f, ast.FunctionDef) and f.name == "scan"))


@settings(max_examples=500, deadline=None, database=None)
@given(SPEC_TEXT, SPEC_TEXT)
def test_rules_match_as_their_regex_does(spec: str, text: str) -> None:
    for candidate in (normalize_space(text), normalize_space(spec.replace("\\", "") + text)):
        expected = compile_pattern(spec).fullmatch(candidate) is not None
        assert _test(_matcher(spec), candidate) is expected
        assert pattern_matches(spec, candidate) is expected


@settings(max_examples=500, deadline=None, database=None)
@given(st.text(alphabet=list(" \t\n\r\f\v\xa0\x1c\x85\u2028\u3000ab"), max_size=12))
def test_normalize_space_folds_only_ascii_blanks(text: str) -> None:
    assert normalize_space(text) == re.sub(r"[ \t\n\r\f\v]+", " ", text).strip(" ")


@settings(max_examples=500, deadline=None, database=None)
@given(st.text(alphabet=list(";&|<>()$`\\\"' \t\xa0\u2028\u3000ab"), max_size=6))
def test_plain_safe_is_the_character_class_it_replaces(word: str) -> None:
    assert _plain_safe(word) is (re.search(r"[\s;&|<>()$`\\\"']", word) is None)
