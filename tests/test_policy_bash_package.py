"""The policy/bash package: its shape, and the shortcuts that stand in for a regex giving the same answers."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import claudeguard.policy.bash as bash
from claudeguard.policy.bash import compile_pattern, normalize_space, pattern_matches
from claudeguard.policy.bash import grammar
from claudeguard.policy.bash.patterns import _matcher, _test
from claudeguard.policy.bash.record import _plain_safe

PACKAGE = Path(bash.__file__).parent
MODULES = ["__init__", "grammar", "options", "programs", "writes", "model", "words", "record", "redirects", "shells",
           "wrappers", "special", "command", "walk", "patterns", "resolve", "judge"]
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
        "Invocation", "Split", "Target", "split_command", "command_writes", "compile_pattern", "pattern_matches",
        "part_allowed_by", "part_denied_by", "escape_pattern", "normalize_space", "fallback_chunks", "MAX_BYTES",
        "MAX_DEPTH"])
    assert all(getattr(bash, name) is not None for name in bash.__all__)


def test_the_parser_is_tree_sitter_bash_loaded_without_its_python_packages() -> None:
    """No hand-written lexer: the grammar is tree-sitter-bash's, its compiled modules loaded from
    the installed packages (their __init__ files cost the hook ~20 ms), and a later ordinary
    import of tree_sitter gets the same module, not a second copy."""
    import sys

    assert not (PACKAGE / "lexer.py").exists() and not (PACKAGE / "parser.py").exists()
    tree = grammar.parse(b"git status && ls | grep x")
    assert tree.root_node.type == "program" and not tree.root_node.has_error
    assert grammar.parser().language.name == "bash"
    binding = sys.modules["tree_sitter._binding"]
    assert Path(binding.__file__).parent.name == "tree_sitter"
    import tree_sitter

    assert tree_sitter.Parser is binding.Parser
    assert type(grammar.parser()) is tree_sitter.Parser


def test_non_ascii_text_reaches_the_parser_as_letters_of_the_same_length() -> None:
    """tree-sitter-bash's scanner hands characters to ctype (tables end at 255): code points past
    that are read out of bounds. The parser sees every non-ASCII byte as an ``a``."""
    text = "echo '\U0001f916 \u00e9t\u00e9' {\U00077568m \u4e2d".encode("utf-8").decode("unicode_escape")
    data = text.encode("utf-8", "surrogatepass")
    tree = grammar.parse(data)
    assert tree.root_node.end_byte == len(data)
    split = bash.split_command("echo '\U0001f916 caf\u00e9' | grep caf\u00e9".encode().decode("unicode_escape"))
    assert [i.words for i in split.invocations] == [["echo", "\U0001f916 caf\u00e9".encode().decode("unicode_escape")],
                                                   ["grep", "caf\u00e9".encode().decode("unicode_escape")]]


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
