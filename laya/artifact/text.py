"""Names are text: what a name (a task, a manifest path) may hold; an error shows one that
holds anything else escaped (``laya.errors.shown``), so no refusal can forge an output line
or fail to print.

A name may hold any character but the ones that break a line or its encoding: control
characters (Unicode category Cc: NUL, tab, newline, carriage return, DEL, the C1 range),
lone surrogates (Cs) and the line and paragraph separators (Zl, Zp). The categories are
fixed across Unicode versions, so a name accepted once is accepted by every Python.
"""

from __future__ import annotations

import unicodedata

from laya.errors import NAME_FORBIDDEN_CATEGORIES


def first_unprintable(name: str) -> int | None:
    """The index of the first character a name may not hold, or ``None``."""
    return next((i for i, c in enumerate(name) if unicodedata.category(c) in NAME_FORBIDDEN_CATEGORIES), None)


def unprintable_reason(name: str) -> str | None:
    """Why ``name`` is not a name (the character and its index), or ``None`` when it is one."""
    at = first_unprintable(name)
    if at is None:
        return None
    return (f"holds U+{ord(name[at]):04X} ({unicodedata.category(name[at])}) at character {at}; a name may not "
            "hold control characters, NUL, newlines, lone surrogates or line separators")
