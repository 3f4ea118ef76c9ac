"""Numbers people can read in `laya-qual show --html` and `--markdown` (claim
report.html.numbers; docs/report-format.md, "Numbers as shown" and "Headline figures").

Every expectation below is written from that text, not from the formatter: a value's
3 significant digits are computed here from its exact binary value with decimal
arithmetic (half to even), its unit is the documented one for the rounded magnitude, and
a shown number must read back to within half a unit of its last digit. The end-to-end
test runs a small suite of benchmarks whose figures span every unit, signs the report
with a real key, and reads the page and the Markdown `laya-qual show` writes."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from laya_qual.cli import main
from laya_qual.report import units
from laya_qual.report.model import LAYA_TYPE
from laya_qual.report.verify import read_statements
from laya_qual.synth import benchmark_records, byte_counts, extra_info_names, shown_values
from laya_qual.synth.numbers import BYTE_EDGES, COUNT_EDGES, DURATION_EDGES, RATE_EDGES

CLAIM = pytest.mark.laya_claim("report.html.numbers")
NUMBER = r"(-?)(\d+(?:\.\d+)?)"
# the documented duration units: below 1000 s by power of 1000, then minutes and hours
SUBSECOND = (("s", Decimal(1)), ("ms", Decimal("1e-3")), ("µs", Decimal("1e-6")), ("ns", Decimal("1e-9")))
BINARY = ("B", "KiB", "MiB", "GiB", "TiB")
PREFIX = ("", "k", "M", "G")


# --- the oracle: docs/report-format.md, "Numbers as shown" ---------------------------------

def rounded3(x: Decimal) -> Decimal:
    """x to 3 significant digits, half to even."""
    with localcontext() as ctx:
        ctx.prec, ctx.rounding = 3, ROUND_HALF_EVEN
        return +x


def exact(value: float) -> Decimal:
    return abs(Decimal(value))


def divided(x: Decimal, by: Decimal) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        return x / by


def written_digits(text: str) -> str:
    return text.replace(".", "").lstrip("0")


def assert_three_digits(text: str) -> None:
    """Exactly 3 significant digits written (trailing zeros kept), or a whole number of 1000
    or more whose digits past the third are zeros; never an exponent."""
    digits = written_digits(text)
    if "." in text or Decimal(text) < 1000:
        assert len(digits) == 3, text
    else:
        assert len(digits) >= 4 and set(digits[3:]) <= {"0"}, text


def assert_reads_back(text: str, value: Decimal) -> None:
    """The shown number is within half a unit of its last significant digit of the value."""
    if "." in text:
        half = Decimal(5).scaleb(-len(text.split(".")[1]) - 1)
    elif Decimal(text) >= 1000:
        half = Decimal(5).scaleb(len(text) - 3 - 1)
    else:
        half = Decimal("0.5")
    slack = value * Decimal("1e-12")  # minutes and hours divide by 60 and 3600, which is not exact
    assert abs(Decimal(text) - value) <= half + slack, (text, value)


def special(value: float, shown: str) -> bool:
    """NaN and the infinities are written as themselves, with no unit."""
    if math.isnan(value):
        assert shown == "NaN"
        return True
    if math.isinf(value):
        assert shown == ("inf" if value > 0 else "-inf")
        return True
    return False


def parse(shown: str, units_pattern: str) -> tuple[str, str, str]:
    match = re.fullmatch(NUMBER + units_pattern, shown)
    assert match, shown
    return match.group(1), match.group(2), match.group(3)


def check_duration(value: float, shown: str) -> None:
    if special(value, shown):
        return
    if value == 0:
        assert shown == "0 s"
        return
    sign, number, unit = parse(shown, " (ns|µs|ms|s|min|h)")
    assert sign == ("-" if value < 0 else "")
    x = exact(value)
    if rounded3(x) < 1000:
        name, scale = next(((n, s) for n, s in SUBSECOND if rounded3(x) >= s), SUBSECOND[-1])
        in_unit = divided(x, scale)
        if name != "ns" or rounded3(x) >= Decimal("1e-9"):
            assert 1 <= Decimal(number) < 1000, shown
    else:
        minutes = divided(x, Decimal(60))
        name, in_unit = ("min", minutes) if rounded3(minutes) < 1000 else ("h", divided(x, Decimal(3600)))
        if name == "min":
            assert 1 <= Decimal(number) < 1000, shown
    assert unit == name, (value, shown, name)
    assert_three_digits(number)
    assert_reads_back(number, in_unit)


def check_bytes(value: float, shown: str) -> None:
    if special(value, shown):
        return
    sign, number, unit = parse(shown, " (B|KiB|MiB|GiB|TiB)")
    assert sign == ("-" if value < 0 else "")
    x = exact(value)
    if x < 1024 and x == x.to_integral_value():
        assert (number, unit) == (str(int(x)), "B"), shown  # a whole number of bytes below 1 KiB, exactly
        return
    power = 0
    while power + 1 < len(BINARY) and x >= 1024 ** (power + 1):
        power += 1
    assert unit == BINARY[power], (value, shown)
    if power and power < len(BINARY) - 1:
        assert 1 <= Decimal(number) < 1024, shown
    assert_three_digits(number)
    assert_reads_back(number, divided(x, Decimal(1024 ** power)))


def check_prefixed(value: float, number: str, prefix: str) -> None:
    """A rate's or count's number: below 1 plain; once the rounded value reaches 1000 the
    prefix k, M, G that puts it in [1, 1000) (past G it grows)."""
    x = exact(value)
    power = 0
    while power + 1 < len(PREFIX) and rounded3(x) >= Decimal(1000) ** (power + 1):
        power += 1
    assert prefix == PREFIX[power], (value, number, prefix)
    if 0 < power < len(PREFIX) - 1 or (power == 0 and rounded3(x) >= 1):
        assert 1 <= Decimal(number) < 1000, (value, number)
    assert_three_digits(number)
    assert_reads_back(number, divided(x, Decimal(1000) ** power))


def check_rate(value: float, shown: str, thing: str) -> None:
    if special(value, shown):
        return
    if value == 0:
        assert shown == f"0 {thing}/s"
        return
    sign, number, prefix = parse(shown, "(k|M|G)? " + re.escape(thing) + "/s")
    assert sign == ("-" if value < 0 else "")
    check_prefixed(value, number, prefix or "")


def check_count(value: float, shown: str) -> None:
    if special(value, shown):
        return
    x = exact(value)
    if x < 10000 and x == x.to_integral_value():
        assert shown == f"{'-' if value < 0 else ''}{int(x)}", (value, shown)
        return
    sign, number, prefix = parse(shown, "(k|M|G)?")
    assert sign == ("-" if value < 0 else "")
    check_prefixed(value, number, prefix or "")


def check_ratio(value: float, shown: str) -> None:
    if special(value, shown):
        return
    if value == 0:
        assert shown == "0×"
        return
    sign, number, _ = parse(shown, "(×)")
    assert sign == ("-" if value < 0 else "")
    assert_three_digits(number)
    assert_reads_back(number, exact(value))


# --- the properties --------------------------------------------------------------------------

@CLAIM
@given(shown_values(DURATION_EDGES, -13, 10))
@example(0.0009996).via("999.6 µs rounds to 1000 µs: 1.00 ms")
@example(0.0009994).via("stays 999 µs")
@example(999.5e-6).via("a tie in decimal, just below it in binary")
@example(0.9995).via("just above the tie in binary: 1.00 s")
@example(999.6).via("rounds to 1000 s: from there minutes, 16.7 min")
@example(59999.0).via("999.98 min rounds to 1000 min: 16.7 h")
@example(5e-10).via("below 1 ns: 0.500 ns")
@example(0.0).via("zero: 0 s")
@example(-0.0123).via("negative: -12.3 ms")
@example(1.125).via("an exact tie, half to even: 1.12 s")
@example(float("nan")).via("NaN: no unit")
@example(float("inf"))
@example(-float("inf"))
def test_a_duration_is_shown_in_the_unit_its_rounded_magnitude_calls_for(seconds):
    check_duration(seconds, units.duration(seconds))


@CLAIM
@given(st.one_of(byte_counts(), shown_values(BYTE_EDGES, -3, 16)))
@example(1023).via("1023 B, exactly")
@example(1024).via("1 KiB: 1.00 KiB")
@example(1000).via("the KiB step is 1024, not 1000")
@example(1023.5).via("fractional bytes below 1 KiB: 3 significant digits")
@example(1024 * 1024 - 1).via("just below 1 MiB: 1020 KiB")
@example(287_500_000).via("not 2.875e+08: 274 MiB")
@example(3 * 1024 ** 5).via("past TiB the number grows")
@example(0).via("0 B")
@example(-2048).via("negative: -2.00 KiB")
@example(float("nan"))
def test_bytes_are_shown_in_binary_units(count):
    check_bytes(count, units.size(count))


@CLAIM
@given(shown_values(RATE_EDGES, -4, 13), st.sampled_from(("req", "tokens")))
@example(999.6, "req").via("rounds to 1000: 1.00k req/s")
@example(999.4, "req")
@example(12345.6, "tokens")
@example(0.0, "req")
@example(0.5, "req")
@example(-240.0, "req")
@example(5e12, "req").via("past G the number grows")
def test_a_rate_is_shown_per_second_with_a_decimal_prefix(value, thing):
    check_rate(value, units.rate(value, thing), thing)


@CLAIM
@given(shown_values(COUNT_EDGES, -4, 13))
@example(9999).via("a whole number below 10000, exactly")
@example(10000).via("10.0k")
@example(1234.5).via("not whole: 1.23k")
@example(37.5)
@example(0)
@example(-3)
def test_a_count_is_shown_exactly_when_whole_and_small_else_to_3_digits(value):
    check_count(value, units.count(value))


@CLAIM
@given(shown_values((0.0, 1.0, 6.4869, 15.933, 999.5, 1234.5), -4, 6))
@example(6.4869).via("6.49×")
@example(0.0)
def test_a_ratio_is_shown_to_3_digits_with_a_times_sign(value):
    check_ratio(value, units.ratio(value))


def check_figure(name: str, kind: str, thing: str | None, value: float, shown: str) -> None:
    {"duration": check_duration, "bytes": check_bytes, "count": check_count, "ratio": check_ratio,
     "rate": lambda v, s: check_rate(v, s, thing)}[kind](value, shown)


@CLAIM
@given(extra_info_names(), shown_values((), -9, 12))
@example(("median_hit_s", "duration", None), 0.0010209409974777373)
@example(("requests_per_s_batched", "rate", "req"), 240.0)
@example(("tokens_per_s", "rate", "tokens"), 12345.6)
@example(("peak_rss_bytes.owner0", "bytes", None), 404103168)
@example(("kernel_bytes_sent_per_update", "bytes", None), 132096)
@example(("kernel_update_seconds_median", "duration", None), 0.1037)
@example(("flop_model_limit", "ratio", None), 2.608)
@example(("load_average_1m_before", "count", None), 0.37)
def test_an_extra_info_figure_takes_the_unit_its_name_gives(named, value):
    """The documented table: `per` `s` a rate, a last `s` or `seconds` a duration, `bytes`
    bytes, `over`/`speedup`/a speed-up limit a ratio, anything else a count."""
    name, kind, thing = named
    check_figure(name, kind, thing, value, units.figure(name, value))


SPREAD = re.compile(r"(?P<median>\S+ \S+) \(min (?P<min>\S+ \S+) – max (?P<max>\S+ \S+), IQR (?P<iqr>\S+ \S+), "
                    r"(?P<rounds>1 round|\d+ rounds|rounds not recorded)(?: of (?P<iterations>\d+) iterations)?\)")


def check_spread(record: dict, shown: str) -> None:
    """median (min X – max Y, IQR Z, N rounds [of M iterations]); each a duration, or
    "not recorded" where the record lacks it."""
    match = SPREAD.fullmatch(shown)
    assert match, shown
    for field in ("median", "min", "max", "iqr"):
        if field in record:
            check_duration(record[field], match[field])
        else:
            assert match[field] == units.NOT_RECORDED, (field, shown)
    if "rounds" in record:
        n = record["rounds"]
        assert match["rounds"] == ("1 round" if n == 1 else f"{n} rounds"), shown
    else:
        assert match["rounds"] == "rounds not recorded", shown
    iterations = record.get("iterations", 1)
    assert match["iterations"] == (None if iterations == 1 or "rounds" not in record else str(iterations)), shown


@CLAIM
@given(benchmark_records())
@example({"median": 0.0012345, "min": 0.0011, "max": 0.0015, "iqr": 0.00005, "rounds": 12, "iterations": 1})
@example({"median": 14.071, "min": 14.071, "max": 14.071, "iqr": 0.0, "rounds": 1, "iterations": 1})
@example({"median": 0.5}).via("a report that recorded the median only")
def test_every_median_carries_its_spread_and_rounds(record):
    check_spread(record, units.median_with_spread(record))


# --- end to end: a real signed report, shown -------------------------------------------------

SUITE = '''
import pytest

@pytest.mark.laya_claim("report.verdicts")
def test_every_unit(benchmark):
    benchmark.extra_info.update(
        median_fast_s=0.0004795, median_slow_s=2.5, requests_per_s_fast=12345.6, requests_per_s_slow=240.0,
        shared_weight_bytes=287500000, standalone_weight_bytes=1023, fast_over_slow=51.2, speedup=2.4641,
        tokens=123456, heads=16, length_median=37.5, load_average_1m_before=0.37, production_seconds=1234.5,
        peak_rss_bytes={"owner0": 404103168, "owner1": 1048575, "idle": None}, device="cpu",
        timed="one sum of ten numbers")
    benchmark.pedantic(sum, args=(range(10),), rounds=12)

@pytest.mark.laya_claim("report.subjects")
def test_one_round(benchmark):
    benchmark.pedantic(sum, args=(range(100),), rounds=1)
'''
# the kind docs/report-format.md's table gives each figure of SUITE (nested ones by their dotted name)
KINDS = {"median_fast_s": ("duration", None), "median_slow_s": ("duration", None),
         "requests_per_s_fast": ("rate", "req"), "requests_per_s_slow": ("rate", "req"),
         "shared_weight_bytes": ("bytes", None), "standalone_weight_bytes": ("bytes", None),
         "fast_over_slow": ("ratio", None), "speedup": ("ratio", None), "tokens": ("count", None),
         "heads": ("count", None), "length_median": ("count", None), "load_average_1m_before": ("count", None),
         "production_seconds": ("duration", None), "peak_rss_bytes.owner0": ("bytes", None),
         "peak_rss_bytes.owner1": ("bytes", None)}
HEADLINE = ("result", "claims passed", "claims failed", "claims not evaluated", "code coverage", "traceability",
            "mutant kill rate", "benchmarks")


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


class Page(HTMLParser):
    """The texts of a page, each with its element's tag, attributes and its ancestors' tags."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict]] = []
        self.texts: list[tuple[list[tuple[str, dict]], str]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag not in ("meta", "br"):
            self.stack.append((tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop()[0] != tag:
            pass

    def handle_data(self, data):
        if data.strip():
            self.texts.append((list(self.stack), data))

    def within(self, **attrs: str) -> list[tuple[list[tuple[str, dict]], str]]:
        """The texts inside an element with these attributes (``data_x`` for ``data-x``, ``class_``)."""
        want = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
        return [(stack, text) for stack, text in self.texts
                if any(all(a.get(k) == v for k, v in want.items()) for _, a in stack)]


@pytest.fixture(scope="module")
def shown(tmp_path_factory):
    """(predicate, page, markdown) of a real report of SUITE signed with a real key."""
    d = tmp_path_factory.mktemp("numbers")
    assert cli("keygen", d / "key").exit_code == 0
    (d / "test_units.py").write_text(SUITE)
    bundle = d / "units.intoto.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "-q", "-p", "no:cacheprovider",
                           "test_units.py", "--laya-report", bundle, "--laya-signing-key", d / "key"],
                          cwd=d, capture_output=True, text=True, env=env, timeout=300)
    assert bundle.exists(), proc.stdout + proc.stderr
    html = cli("show", bundle, "--public-key", f"{d / 'key'}.pub", "--html", d / "page.html")
    assert html.exit_code == 0, html.output
    markdown = cli("show", bundle, "--public-key", f"{d / 'key'}.pub", "--markdown")
    assert markdown.exit_code == 0, markdown.output
    [predicate] = [s["predicate"] for s, _ in read_statements(bundle) if s["predicateType"] == LAYA_TYPE]
    return predicate, (d / "page.html").read_text(encoding="utf-8"), markdown.output


def leaves(extra: dict, prefix: str = "") -> dict[str, float]:
    out = {}
    for key, value in extra.items():
        if isinstance(value, dict):
            out.update(leaves(value, f"{prefix}{key}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[prefix + key] = value
    return out


def assert_readable(text: str) -> None:
    """No exponent and no number of more than 4 significant digits."""
    assert not re.search(r"\d[eE][+-]?\d", text), text
    for number in re.findall(r"\d+(?:\.\d+)?", text):
        digits = written_digits(number) if "." in number else number.lstrip("0").rstrip("0")
        assert len(digits) <= 4, (number, text)


@CLAIM
def test_the_page_shows_every_median_with_its_unit_spread_and_rounds(shown):
    predicate, text, _ = shown
    page = Page(text)
    assert len(predicate["benchmarks"]) == 2
    for b in predicate["benchmarks"]:
        assert all(k in b for k in ("min", "max", "iqr", "rounds"))  # this harness records them all
        [headline] = ["".join(t for _, t in page.within(class_="median", data_median=repr(b["median"])))]
        match = re.fullmatch(r"median wall time of one round \(pytest-benchmark's rounds, apart from the "
                             r"side-by-side figures below\): (.+)\. One round times: (.+)\.", headline)
        assert match, headline
        check_spread(b, match[1])
        assert match[2] == b["extraInfo"].get("timed", units.NOT_RECORDED)
        assert_readable(match[1])
    [every] = [b for b in predicate["benchmarks"] if b["extraInfo"]]
    figures = leaves(every["extraInfo"])
    assert sorted(figures) == sorted(KINDS)
    seen = set()
    for stack, value_text in page.texts:
        tag, attrs = stack[-1]
        key = attrs.get("data-key")
        if key is None or tag == "title" or key not in figures:  # a text figure (device) is no number
            continue
        seen.add(key)
        kind, thing = KINDS[key]
        check_figure(key, kind, thing, figures[key], value_text)  # table cells and bar labels alike
        assert_readable(value_text)
    assert seen == set(KINDS)


@CLAIM
def test_the_page_begins_with_the_headline_figures_each_saying_what_it_measures(shown):
    predicate, text, _ = shown
    page = Page(text)
    assert text.index('id="glance"') < text.index('id="claims"')
    rows = {}
    for stack, value in page.within(id="glance"):
        figure = next(a["data-figure"] for _, a in reversed(stack) if "data-figure" in a)
        rows.setdefault(figure, []).append((stack[-1][0], stack[-1][1].get("class", ""), value))
    assert list(rows) == list(HEADLINE)
    for figure, cells in rows.items():
        whats = [v for tag, cls, v in cells if cls == "what"]
        assert len(whats) == 1 and len(whats[0].split()) >= 4, (figure, cells)  # a phrase, not a label
    value = {f: "".join(v for tag, cls, v in cells if tag in ("td", "span") and cls != "what")
             for f, cells in rows.items()}
    n = len(predicate["claims"])
    assert value["result"] == predicate["result"]
    for figure, verdict in (("claims passed", "passed"), ("claims failed", "failed"),
                            ("claims not evaluated", "not evaluated")):
        assert value[figure] == f"{predicate['counts'][verdict]} of {n}"
    assert value["code coverage"] == value["mutant kill rate"] == units.NOT_RECORDED  # this run measured neither
    t = predicate["suite"]["traceability"]
    covered, total = t["fields"]["covered"] + t["rules"]["covered"], t["fields"]["total"] + t["rules"]["total"]
    match = re.fullmatch(rf"{covered} of {total} \((\S+)%\)", value["traceability"])
    assert match, value["traceability"]
    if covered != total:
        assert_three_digits(match[1])
    assert_reads_back(match[1], divided(Decimal(covered * 100), Decimal(total)))
    assert value["benchmarks"] == f"{len(predicate['benchmarks'])} measured"


@CLAIM
def test_the_markdown_leads_with_the_figures_folds_the_claims_and_shows_units(shown):
    predicate, _, md = shown
    lines = md.splitlines()
    summary = [line for line in lines if line.startswith("| ") and line.split(" | ")[0][2:] in HEADLINE]
    assert [line.split(" | ")[0][2:] for line in summary] == list(HEADLINE)
    assert all(len(line.split(" | ")[2].split()) >= 4 for line in summary)  # what each measures
    assert md.index(summary[-1]) < md.index("<details>") < md.index("| `report.") < md.index("</details>")
    assert "<summary>Claims: " in md
    rows = [line for line in lines if line.startswith("| `") and "::test_" in line]
    assert len(rows) == len(predicate["benchmarks"])
    for b in predicate["benchmarks"]:
        [row] = [r for r in rows if r.startswith(f"| `{b['test']}` |")]
        cells = [c.strip() for c in row.split("|")[1:-1]]
        _, median, spread, timed, figures = cells
        check_spread(b, f"{median} ({spread})")
        assert timed == b["extraInfo"].get("timed", units.NOT_RECORDED)
        for cell in (median, spread, figures):
            assert_readable(cell)
        shown_figures = dict(part.split(" ", 1) for part in figures.split("; ") if part)
        expected = leaves(b["extraInfo"])
        assert set(expected) <= set(shown_figures), (sorted(expected), sorted(shown_figures))
        for key, value in expected.items():
            kind, thing = KINDS[key]
            check_figure(key, kind, thing, value, shown_figures[key])


@CLAIM
def test_a_spread_field_the_report_lacks_is_not_recorded(shown):
    """A report made before a field was recorded (no `iqr`, no `min`) says so, in both views."""
    from laya_qual.report.html import Signature, render
    from laya_qual.report.summary import markdown

    predicate, _, _ = shown
    old = {**predicate, "benchmarks": [{k: v for k, v in b.items() if k not in ("iqr", "min")}
                                       for b in predicate["benchmarks"]]}
    laya = {"predicate": old, "subject": [{"name": "laya-runtime", "digest": {"dirHash": "ab" * 32}}]}
    md = markdown(laya, "old.intoto.jsonl", "NOT CHECKED")
    page = render(laya, "old.intoto.jsonl", Signature(False))
    for b in old["benchmarks"]:
        expected = f"min {units.NOT_RECORDED} – max "
        [row] = [r for r in md.splitlines() if r.startswith(f"| `{b['test']}` |")]
        assert expected in row and f"IQR {units.NOT_RECORDED}" in row, row
        cells = [c.strip() for c in row.split("|")[1:-1]]
        check_spread(b, f"{cells[1]} ({cells[2]})")
    assert page.count(f"IQR {units.NOT_RECORDED}") == len(old["benchmarks"])
