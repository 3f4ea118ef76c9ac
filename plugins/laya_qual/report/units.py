"""Numbers as ``laya-qual show`` prints them in HTML and Markdown: each value in the unit
its size calls for, to 3 significant digits (docs/report-format.md, "Numbers as shown").

Every number is first rounded to 3 significant digits on its exact value (Python's
``%.2e``, correctly rounded), and only then given a unit, so 999.6 µs is 1.00 ms, never
1000 µs. Decimal units (ns, µs, ms, s; k, M, G) shift the rounded digits, which is exact;
binary units (KiB, MiB, ...) divide by powers of 2, which is exact in floating point too.
"""

from __future__ import annotations

import math
import re

NOT_RECORDED = "not recorded"
# decimal prefixes of rates and counts, by power of 1000
PREFIXES = ("", "k", "M", "G")
# sub-second duration units, by power of 1000 below the second
SUBSECOND = ("s", "ms", "µs", "ns")
BINARY = ("B", "KiB", "MiB", "GiB", "TiB")
# the figures that are speed-up limits (ratios) without saying so in their name
RATIO_KEYS = frozenset({"flop_model_limit", "limit_with_handoff", "limit_measured"})


def _digits(value: float) -> tuple[int, int]:
    """The 3 significant digits of |value| as an integer 100..999 and the decimal exponent
    of the first: |value| rounds to digits × 10^(exponent - 2)."""
    mantissa, exponent = f"{abs(value):.2e}".split("e")
    return int(mantissa.replace(".", "")), int(exponent)


def _fixed(digits: int, exponent: int) -> str:
    """digits × 10^(exponent - 2) written out with exactly 3 significant digits (trailing
    zeros kept: 1.00, 12.0), or as a whole number when the value is 1000 or more."""
    places = 2 - exponent
    if places <= 0:
        return str(digits * 10 ** -places)
    text = str(digits).rjust(places + 1, "0")
    return f"{text[:-places]}.{text[-places:]}"


def significant(value: float) -> str:
    """``value`` to 3 significant digits, no unit (``0`` for zero)."""
    special = _special(value)
    if special is not None:
        return special
    if value == 0:
        return "0"
    digits, exponent = _digits(value)
    return ("-" if value < 0 else "") + _fixed(digits, exponent)


def _special(value: float) -> str | None:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return None


def _scaled(value: float, names: tuple[str, ...], floor: int, ceiling: int, join: str) -> str:
    """|value| rounded to 3 significant digits, written with the power of 1000 (named
    ``names[k]`` for 1000^k, k in floor..ceiling) that puts it in [1, 1000)."""
    digits, exponent = _digits(value)
    power = min(max(exponent // 3, floor), ceiling)
    return ("-" if value < 0 else "") + _fixed(digits, exponent - 3 * power) + join + names[power - floor]


def duration(seconds: float) -> str:
    """ns, µs, ms or s below 1000 s (the number in [1, 1000)), then min below 1000 min, then h."""
    special = _special(seconds)
    if special is not None:
        return special
    if seconds == 0:
        return "0 s"
    sign, magnitude = ("-" if seconds < 0 else ""), abs(seconds)
    digits, exponent = _digits(magnitude)
    if exponent < 3:  # below 1000 s once rounded
        return sign + _scaled(magnitude, SUBSECOND[::-1], -3, 0, " ")
    for unit, scale in (("min", 60.0), ("h", 3600.0)):
        digits, exponent = _digits(magnitude / scale)
        if exponent < 3 or unit == "h":
            return f"{sign}{_fixed(digits, exponent)} {unit}"
    raise AssertionError("unreachable")


def size(count: float) -> str:
    """Bytes: a whole number below 1024 exactly (``1023 B``); from 1 KiB up the largest of
    KiB, MiB, GiB, TiB in which the value is at least 1, to 3 significant digits."""
    special = _special(count)
    if special is not None:
        return special
    sign, magnitude = ("-" if count < 0 else ""), abs(count)
    if magnitude < 1024:
        if float(magnitude).is_integer():
            return f"{sign}{int(magnitude)} B"
        return f"{sign}{significant(magnitude)} B"
    power = 0
    while magnitude >= 1024 ** (power + 1) and power + 1 < len(BINARY):
        power += 1
    return f"{sign}{significant(magnitude / 1024 ** power)} {BINARY[power]}"


def _prefixed(value: float) -> str:
    """3 significant digits, with k, M or G once the rounded magnitude reaches 1000."""
    if abs(value) < 1:
        return significant(value)
    return _scaled(value, PREFIXES, 0, len(PREFIXES) - 1, "")


def count(value: float) -> str:
    """A plain number: a whole number below 10000 exactly; any other to 3 significant
    digits, with k, M or G once it reaches 1000 (``37.5``, ``1.23k``, ``528k``, ``4.20M``)."""
    special = _special(value)
    if special is not None:
        return special
    if abs(value) < 10000 and float(value).is_integer():
        return str(int(value))
    return _prefixed(value)


def rate(value: float, what: str) -> str:
    """Per second: ``240 req/s``, ``1.23k tokens/s`` (k, M, G from 1000 up; 3 significant digits)."""
    special = _special(value)
    if special is not None:
        return special
    return f"{'0' if value == 0 else _prefixed(value)} {what}/s"


def ratio(value: float) -> str:
    """A ratio of two figures (a speed-up, a memory saving): 3 significant digits and ×."""
    special = _special(value)
    return special if special is not None else f"{significant(value)}×"


def percent(fraction: float) -> str:
    """A fraction as a percentage to 3 significant digits (``96.4%``, ``100%``, ``0%``)."""
    special = _special(fraction)
    if special is not None:
        return special
    return f"{significant(fraction * 100)}%"


_WORD = re.compile(r"[^_.]+")


def unit_of(key: str) -> tuple[str, str | None]:
    """The kind of an ``extraInfo`` figure, from its (dotted) name; first rule that applies:

    - ``rate``: the words ``per`` ``s`` in a row (``requests_per_s_batched``); ``requests`` is ``req``;
    - ``duration``: a last word ``s`` of the name's first part (``median_hit_s``) or a word ``seconds``;
    - ``bytes``: a word ``bytes`` (``peak_rss_bytes.owner0``, ``kernel_bytes_sent_per_update``);
    - ``ratio``: a word ``over`` or ``speedup``, or a speed-up limit of RATIO_KEYS;
    - ``count``: anything else (sizes, counts, load averages).
    """
    head = key.split(".")[0]
    words = _WORD.findall(key)
    for i in range(len(words) - 2):
        if words[i + 1] == "per" and words[i + 2] == "s":
            return "rate", "req" if words[i] == "requests" else words[i]
    if head.split("_")[-1] == "s" or "seconds" in words:
        return "duration", None
    if "bytes" in words:
        return "bytes", None
    if "over" in words or "speedup" in words or head in RATIO_KEYS:
        return "ratio", None
    return "count", None


def figure(key: str, value: object) -> str:
    """An ``extraInfo`` value as shown: a number in the unit its name says, other values as text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, (int, float)):
        return str(value)
    kind, what = unit_of(key)
    if kind == "rate":
        return rate(value, what or "")
    return {"duration": duration, "bytes": size, "ratio": ratio, "count": count}[kind](value)


def _present(record: dict, key: str) -> bool:
    value = record.get(key)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def rounds(record: dict) -> str:
    if not _present(record, "rounds"):
        return f"rounds {NOT_RECORDED}"
    n = int(record["rounds"])
    text = f"{n} round" + ("" if n == 1 else "s")
    iterations = record.get("iterations")
    if _present(record, "iterations") and iterations != 1:
        text += f" of {int(iterations)} iterations"
    return text


def spread(record: dict) -> str:
    """A benchmark record's spread and rounds: ``min 866 µs – max 1.14 ms, IQR 50.1 µs, 30 rounds``;
    a figure the record lacks is "not recorded"."""
    def one(name: str, key: str) -> str:
        return f"{name} {duration(record[key]) if _present(record, key) else NOT_RECORDED}"
    return f"{one('min', 'min')} – {one('max', 'max')}, {one('IQR', 'iqr')}, {rounds(record)}"


def median(record: dict) -> str:
    return duration(record["median"]) if _present(record, "median") else NOT_RECORDED


def median_with_spread(record: dict) -> str:
    """``982 µs (min 866 µs – max 1.14 ms, IQR not recorded, 30 rounds)``."""
    return f"{median(record)} ({spread(record)})"


TIMED_KEY = "timed"


def timed(record: dict) -> str:
    """What one round of the benchmark fixture times, as the benchmark recorded it (``extraInfo.timed``)."""
    text = (record.get("extraInfo") or {}).get(TIMED_KEY)
    return text if isinstance(text, str) and text else NOT_RECORDED
