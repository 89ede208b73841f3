"""Durations where seconds are: ``"90s"``, ``"10m"``, ``"1h"``, ``"1h30m"``, ``"7d"``, ``"2w"``, or
a plain number of seconds.

One reading for every place a person gives a time: the config's seconds (``approval.timeout =
"10m"``), the ``CLAUDEGUARD_*`` variables and ``--guard-*`` options that set them, and ``audit
--since``. Read by hand, without ``re``: a variable such as ``CLAUDEGUARD_STALL_AFTER`` is read
on the launcher's start path.
"""

from __future__ import annotations

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
EXAMPLES = "90s, 10m, 1h or 1h30m"


def seconds(text: str) -> float:
    """``text`` as a number of seconds; ValueError when it is neither a number nor a duration.
    A number is taken as Python reads it (``1.5``, ``1e3``: checks of range are the caller's);
    a duration is one or more ``<digits>[.<digits>]<unit>`` (units s, m, h, d, w), any case."""
    raw = text.strip().lower()
    try:
        return float(raw)
    except ValueError:
        pass
    total, number, pieces = 0.0, "", 0
    for ch in raw:
        if (ch.isdigit() and ch.isascii()) or (ch == "." and number and "." not in number):
            number += ch
        elif ch in UNITS and number and not number.endswith("."):
            total += float(number) * UNITS[ch]
            number, pieces = "", pieces + 1
        else:
            raise ValueError(f"not a duration: {text!r}")
    if number or not pieces:
        raise ValueError(f"not a duration: {text!r}")
    return total
