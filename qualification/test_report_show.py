"""`laya-qual show` prints what the signed report says (claim report.show; docs/report-format.md,
"Verifying": `laya-qual show`).

The reports are real bundles signed with a real key (laya_qual.synth.reports), their claims'
outcomes drawn; each expectation is computed here from the drawn outcomes by the documented
rules (a claim fails if a test failed, erred or xfailed, passes if one passed and none
failed, else is not evaluated), never read back from the code that printed it."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from laya_qual.claims import CLAIMS
from laya_qual.cli import main
from laya_qual.report.signing import keygen, load_signer
from laya_qual.synth.reports import report_spec, signed_report

CLAIM = pytest.mark.laya_claim("report.show")
BENCH = "bench.serve.batch"  # signed_report's benchmark record always carries it
FAILING = ("failed", "error", "xfailed")
RANK = {"failed": 0, "not evaluated": 1, "passed": 2}  # failures first
MODULES = ("sub/test_syntax.py", "test_import.py")  # modules a report may name as not collected


def expected(outcomes: dict[str, str], catalogue: list[str]) -> dict[str, tuple[str, str]]:
    """claim id -> (verdict, its evidence counted: ``1 failed``, ``no test ran``)."""
    out = {}
    for cid in catalogue:
        ran = ([outcomes[cid]] if cid in outcomes else []) + ["passed"] * (cid == BENCH)  # + the benchmark test
        counted = ", ".join(f"{n} {o}" for o, n in sorted(Counter(ran).items())) + ", 1 benchmark(s)" * (cid == BENCH)
        out[cid] = (verdict_of(ran), counted or "no test ran")
    return out


def verdict_of(outcomes: list[str]) -> str:
    if any(o in FAILING for o in outcomes):
        return "failed"
    return "passed" if "passed" in outcomes else "not evaluated"


def result_of(verdicts: list[str], uncollected: list[str]) -> str:
    """FAILED if a claim failed or a module did not collect."""
    return ("FAILED" if "failed" in verdicts or uncollected else "WARNED" if "not evaluated" in verdicts
            else "PASSED")


@st.composite
def claim_outcomes(draw) -> tuple[list[str], dict[str, str]]:
    """A catalogue (some real claim ids, the benchmark's among them) and the outcome of the one
    test each claim has, if it has one (the benchmark's claim has its passed benchmark test too)."""
    others = draw(st.lists(st.sampled_from(sorted(set(CLAIMS) - {BENCH})), unique=True, min_size=1, max_size=7))
    catalogue = draw(st.permutations([BENCH, *others]))
    tested = draw(st.lists(st.sampled_from(catalogue), unique=True))
    outcomes = {cid: draw(st.sampled_from(("passed", "failed", "error", "xfailed", "skipped"))) for cid in tested}
    return list(catalogue), outcomes


@pytest.fixture(scope="module")
def signer(tmp_path_factory):
    d = tmp_path_factory.mktemp("show-key")
    keygen(d / "k")
    return load_signer(d / "k"), d / "k.pub"


def show(*args) -> str:
    result = CliRunner().invoke(main, ["show", *map(str, args)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def table(lines: list[str], header: str) -> list[list[str]]:
    """The rows under ``header`` up to the first blank line, split at runs of 2+ spaces."""
    start = next(i for i, line in enumerate(lines) if line.split() == header.split())
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


@CLAIM
@given(drawn=claim_outcomes(), uncollected=st.lists(st.sampled_from(MODULES), unique=True, max_size=2))
@example(drawn=([BENCH, "report.verdicts"], {}), uncollected=[])                       # WARNED: a claim no test ran
@example(drawn=([BENCH, "report.verdicts"], {"report.verdicts": "passed"}), uncollected=[])   # PASSED
@example(drawn=([BENCH, "report.verdicts"], {"report.verdicts": "passed"}),
         uncollected=[MODULES[0]])  # every claim passed, a module did not collect: FAILED
@example(drawn=(["report.verdicts", BENCH, "report.subjects"],
                {"report.verdicts": "xfailed", "report.subjects": "skipped"}), uncollected=[])  # an xfail fails its claim
@example(drawn=([BENCH, "report.verdicts"], {BENCH: "error"}), uncollected=[])  # one passed test does not outweigh an error
def test_show_prints_the_signed_result_and_every_claim_failures_first(signer, tmp_path_factory, drawn, uncollected):
    catalogue, outcomes = drawn
    private, public = signer
    bundle = signed_report(tmp_path_factory.mktemp("show"), report_spec(catalogue=catalogue, outcomes=outcomes,
                                                                        uncollected=uncollected), private)
    want = expected(outcomes, catalogue)
    verdicts = [v for v, _ in want.values()]
    counts = Counter(verdicts)
    result = result_of(verdicts, uncollected)
    summary = (f"{counts['passed']} passed, {counts['failed']} failed, {counts['not evaluated']} not evaluated "
               f"of {len(catalogue)} claims")

    for checked in (True, False):
        text = show(bundle, *(["--public-key", public] if checked else []))
        lines = text.splitlines()
        assert lines[0] == f"laya-qual report {bundle}"
        assert lines[1].split() == ["result", result, *f"({summary})".split()]
        assert lines[2:2 + len(uncollected)] == [f"  not collected {m}" for m in sorted(uncollected)]
        assert lines[2 + len(uncollected)].split()[0] == "signature"
        [signature] = [line.split(None, 1)[1] for line in lines if line.split()[:1] == ["signature"]]
        assert signature.startswith("verified") if checked else signature.startswith("NOT CHECKED"), signature
        rows = table(lines, "CLAIM VERDICT EVIDENCE")
        assert sorted(row[0] for row in rows) == sorted(catalogue)  # every claim, once
        assert {row[0]: (row[1], row[2]) for row in rows} == want
        assert [RANK[row[1]] for row in rows] == sorted(RANK[row[1]] for row in rows)

    md = show(bundle, "--public-key", public, "--markdown")
    assert md.startswith(f"## Qualification report: {result}\n")
    folded = md[md.index("<details>"):md.index("</details>")]
    assert f"<summary>Claims: {summary} (failures first)</summary>" in folded
    md_rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in folded.splitlines()
               if line.startswith("| `")]
    assert [row[0].strip("`") for row in md_rows] == [row[0] for row in rows]  # the same order as the text
    assert {row[0].strip("`"): (row[1].strip("*"), row[2]) for row in md_rows} == want
    assert all(row[1] == "**failed**" for row in md_rows if row[1].strip("*") == "failed")
    failed = [cid for cid, (v, _) in want.items() if v == "failed"]
    if failed:
        listed = md[md.index("### Failed claims"):].split("\n\n")[1].splitlines()
        assert [line.split("`")[1] for line in listed] == [cid for cid in catalogue if cid in failed]
        for line, cid in zip(listed, [c for c in catalogue if c in failed]):  # only the tests that did not pass
            assert line.endswith(f"Failing: `t.py::test_{cid}` ({outcomes[cid]})"), line
    else:
        assert "### Failed claims" not in md
    if uncollected:
        listed = md[md.index("### Test modules that did not collect"):].split("\n\n")[2].splitlines()
        assert listed == [f"- `{m}`" for m in sorted(uncollected)]
    else:
        assert "did not collect" not in md
    page = tmp_path_factory.mktemp("page") / "page.html"
    show(bundle, "--html", page)
    named = re.findall(r'<p id="not-collected"[^>]*>([^<]*)</p>', page.read_text(encoding="utf-8"))
    assert named == ([f"Did not collect (none of their tests ran, so the report is FAILED): "
                      f"{', '.join(sorted(uncollected))}."] if uncollected else [])


@CLAIM
@given(old=st.binary(max_size=64).map(lambda b: b.decode("latin-1")), append=st.booleans())
@example(old="", append=True)
def test_show_output_replaces_the_file_whole_or_appends_to_it(signer, tmp_path_factory, old, append):
    """`--output FILE` writes what stdout would show (the file replaced whole); with `--append`
    FILE keeps its bytes and the summary follows them (for $GITHUB_STEP_SUMMARY)."""
    private, public = signer
    d = tmp_path_factory.mktemp("out")
    bundle = signed_report(d, report_spec(), private)
    printed = show(bundle, "--public-key", public, "--markdown")
    out = d / "summary.md"
    out.write_bytes(old.encode("latin-1"))
    said = show(bundle, "--public-key", public, "--markdown", "--output", out, *(["--append"] if append else []))
    assert said == f"{'appended to' if append else 'wrote'} {out}\n"
    assert out.read_bytes() == (old.encode("latin-1") if append else b"") + printed.encode("utf-8")
    assert sorted(p.name for p in d.iterdir()) == ["head-a", "report.intoto.jsonl", "summary.md"]  # no temporary left
