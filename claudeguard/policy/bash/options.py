"""Option grammars: how a program reads its options, so the operand that holds a command is found
the way the program finds it (``timeout -k 5 10 rm``, ``bash -lc 'cmd'``, ``xargs -I{} sh -c``).

A grammar lists a program's short options (flags, and those taking a value: attached ``-n10`` or
the next word ``-n 10``), its long options (``--name``, ``--name=value``, ``--name value``) and
how options end (the first operand, ``--``). An option a grammar does not know could swallow the
word that names the command, so it is reported (the caller asks about the command) rather than
guessed. GNU's abbreviated long options (``--kill`` for ``--kill-after``) are not known on purpose.
"""

from __future__ import annotations


class Grammar:
    """One program's options. ``optional``: short options whose value is optional and attached
    only (``xargs -i``, ``-l5``); ``long_optional``: long options with an optional ``=value``."""

    __slots__ = ("flags", "values", "optional", "digits", "long_flags", "long_values", "long_optional", "numeric")

    def __init__(self, flags: str = "", values: str = "", *, optional: str = "", digits: str = "",
                 long_flags: str = "", long_values: str = "", long_optional: str = "", numeric: bool = False) -> None:
        self.flags = flags
        self.values = values
        self.optional = optional
        self.digits = digits  # optional attached values that are digits only (perl -l0, -le is -l -e)
        self.long_flags = frozenset(long_flags.split())
        self.long_values = frozenset(long_values.split())
        self.long_optional = frozenset(long_optional.split())
        self.numeric = numeric  # -N is a value (nice -10, head -5)


class Parsed:
    """Where the operands start, and the options seen in order as (name, value)."""

    __slots__ = ("index", "options")

    def __init__(self, index: int, options: list[tuple[str, str | None]]) -> None:
        self.index = index
        self.options = options

    def has(self, *names: str) -> bool:
        return any(name in names for name, _ in self.options)

    def value(self, *names: str) -> str | None:
        """The last value given to one of ``names`` (None when absent or without a value)."""
        found = None
        for name, value in self.options:
            if name in names:
                found = value
        return found


def parse(args: list[str], grammar: Grammar, start: int = 0) -> Parsed | str:
    """Options of ``args[start:]`` up to the first operand (or past ``--``); a one-line reason
    when an option is not in ``grammar`` or lacks its value."""
    options: list[tuple[str, str | None]] = []
    i = start
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return Parsed(i + 1, options)
        if not arg.startswith("-") or arg == "-":
            break
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            if name in grammar.long_values:
                if not eq:
                    if i + 1 >= len(args):
                        return f"option --{name} without its value"
                    value = args[i + 1]
                    i += 1
                options.append(("--" + name, value))
            elif name in grammar.long_optional:
                options.append(("--" + name, value if eq else None))
            elif name in grammar.long_flags and not eq:
                options.append(("--" + name, None))
            else:
                return f"option {arg.split('=', 1)[0]} is not known"
            i += 1
            continue
        if grammar.numeric and arg[1:].isdigit():
            options.append(("-", arg[1:]))
            i += 1
            continue
        j = 1
        while j < len(arg):
            c = arg[j]
            if c in grammar.values:
                value = arg[j + 1:]
                if not value:
                    if i + 1 >= len(args):
                        return f"option -{c} without its value"
                    value = args[i + 1]
                    i += 1
                options.append(("-" + c, value))
                break
            if c in grammar.optional:
                options.append(("-" + c, arg[j + 1:] or None))
                break
            if c in grammar.digits:
                k = j + 1
                while k < len(arg) and arg[k].isdigit():
                    k += 1
                options.append(("-" + c, arg[j + 1:k] or None))
                j = k
                continue
            if c not in grammar.flags:
                return f"option -{c} is not known"
            options.append(("-" + c, None))
            j += 1
        i += 1
    return Parsed(i, options)
