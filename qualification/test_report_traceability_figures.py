"""report.figures.traceability: the figure a report carries as ``suite.traceability``, its line,
docs/claims.md's matrix and the check that keeps docs and map together, against a reference
written from docs/report-format.md (``suite.traceability``, and R-report.canonical-json for
what canonical JSON is) over generated maps (laya_qual.synth.figures) and the map the harness
ships."""

from __future__ import annotations

import hashlib
import json
from importlib.resources import files

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from laya_qual.measure.suite_figures import traceability_line
from laya_qual.measure.traceability import check, figure, line, load_map, matrix_markdown
from laya_qual.synth import traceability_maps

FORMAT = "laya-qual-traceability-v1"


# --- the reference ------------------------------------------------------------------------------

def canonical_json(value) -> bytes:
    """docs/report-format.md: sorted keys, no whitespace, UTF-8, non-ASCII unescaped."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def held(entry: dict) -> bool:
    """Held by tests: the entry names at least one, and carries no gap (a gap counts as not covered)."""
    return isinstance(entry.get("tests"), list) and len(entry["tests"]) > 0 and "gap" not in entry


def reference_figure(trace: dict) -> dict:
    def count(prefix):
        mine = [ident for ident in trace["ids"] if ident.startswith(prefix)]
        return {"covered": sum(held(trace["ids"][i]) for i in mine), "total": len(mine)}

    return {"fields": count("F-"), "rules": count("R-"),
            "mapDigest": hashlib.sha256(canonical_json(trace)).hexdigest(),
            "gaps": sorted(i for i, e in trace["ids"].items() if not held(e))}


def reference_line(fig: dict) -> str:
    f, r = fig["fields"], fig["rules"]
    return (f"fields and rules covered {f['covered'] + r['covered']} of {f['total'] + r['total']} "
            f"(fields {f['covered']}/{f['total']}, rules {r['covered']}/{r['total']}; {len(fig['gaps'])} gaps; "
            f"map sha256:{fig['mapDigest'][:16]})")


def cell(text: str) -> str:
    """A Markdown table cell holds no bare "|" and no line break."""
    return text.replace("|", "\\|").replace("\n", " ")


def reference_tables(trace: dict) -> list[str]:
    """After the figure's line: per doc (by name), its ids in the map's order with their tests or gap."""
    out = []
    for doc in sorted({e["doc"] for e in trace["ids"].values()}):
        out += [f"### {doc}", "", "| Id | What | Tests |", "|---|---|---|"]
        for ident, e in trace["ids"].items():
            if e["doc"] == doc:
                tests = "<br>".join(f"`{t}`" for t in e["tests"]) if held(e) else f"**gap**: {cell(e['gap'])}"
                out.append(f"| [`{ident}`]({doc}#{ident}) | {cell(e['text'])} | {tests} |")
        out.append("")
    return out


def entry(doc="a.md", kind="field", text="x", **held_by):
    return {"doc": doc, "kind": kind, "text": text, **held_by}


def a_map(**ids):
    return {"format": FORMAT, "ids": {ident.replace("_", "-", 1): e for ident, e in ids.items()}}


T = ["laya_qual/suite/test_a.py::test_x"]
UNSORTED = a_map(R_z=entry(kind="rule", gap="not yet"), F_b=entry(tests=T), F_a=entry(gap="later"))
BOTH = a_map(F_x=entry(tests=T, gap="the test checks something else"), R_y=entry(kind="rule", tests=[]),
             R_w=entry(kind="rule"))
NON_ASCII = a_map(F_e=entry(text="é — Σ", tests=["tests/test_c.py::test_é"]))


# --- the figure ---------------------------------------------------------------------------------

@pytest.mark.laya_claim("report.figures.traceability")
@settings(max_examples=80)
@given(trace=traceability_maps())
@example(trace=a_map()).via("an empty map: nothing covered of nothing")
@example(trace=UNSORTED).via("gaps sorted whatever the map's order; a gap's keys are not in sorted order")
@example(trace=BOTH).via("tests beside a gap, an empty tests list, neither: none covered")
@example(trace=NON_ASCII).via("the digest is of UTF-8, non-ASCII unescaped")
def test_the_figure_counts_the_ids_the_map_holds_by_tests(trace):
    fig = figure(trace)
    assert fig == reference_figure(trace)
    assert line(fig) == reference_line(reference_figure(trace))
    assert traceability_line({"suite": {"traceability": fig}}) == [f"  traced    {reference_line(fig)}"]


@pytest.mark.laya_claim("report.figures.traceability")
def test_a_report_without_the_figure_prints_no_line():
    assert traceability_line({"suite": {}}) == [] and traceability_line({}) == []


@pytest.mark.laya_claim("report.figures.traceability")
def test_the_shipped_map_gives_the_figure_a_report_carries():
    shipped = json.loads(files("laya_qual.measure").joinpath("traceability.json").read_text(encoding="utf-8"))
    assert shipped["format"] == FORMAT
    fig = figure()
    assert fig == reference_figure(shipped)
    assert fig["fields"]["total"] + fig["rules"]["total"] == len(shipped["ids"]) > 0


@pytest.mark.laya_claim("report.figures.traceability")
def test_a_map_of_another_format_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "traceability.json"
    path.write_text(json.dumps({"format": "laya-qual-traceability-v0", "ids": {}}))
    with pytest.raises(ValueError, match="laya-qual-traceability-v0") as refused:
        load_map(path)
    assert str(path) in str(refused.value)


# --- docs/claims.md's matrix ----------------------------------------------------------------------

@pytest.mark.laya_claim("report.figures.traceability")
@settings(max_examples=40)
@given(trace=traceability_maps(valid=True))
@example(trace=a_map(F_p=entry(text="a | b\nc", gap="a | in a\nreason"), R_q=entry(doc="0.md", kind="rule", tests=T),
                     F_r=entry(doc="0.md", tests=[*T, "tests/test_c.py::test_é"]))).via(
    "cells escape | and fold lines; docs by name, ids in the map's order")
def test_the_matrix_lists_each_docs_ids_with_their_tests_or_gap(trace):
    lines = matrix_markdown(trace)
    assert lines[0] == "## Traceability: documented fields and rules to tests"
    bold = lines.index(f"**{reference_line(reference_figure(trace))}**")
    assert lines[bold + 1:] == ["", *reference_tables(trace)]


# --- the check that keeps the docs and the map together ---------------------------------------------

TEST_FILES = {"qualification/test_a.py": "def test_x():\n    pass\n",
              "qualification/test_b.py": "class TestK:\n    def test_m(self):\n        pass\n",
              "tests/test_c.py": "def test_é():\n    pass\n"}


@st.composite
def docs_for(draw, trace: dict) -> dict[str, list[str]]:
    """Where each id is written: ``{doc: [ids]}``; a map id maybe nowhere or in another doc,
    and maybe ids the map lacks."""
    written: dict[str, list[str]] = {}
    for ident, e in trace["ids"].items():
        where = draw(st.sampled_from([e["doc"], e["doc"], None, "other.md"]))
        if where:
            written.setdefault(where, []).append(ident)
    for extra in draw(st.lists(st.sampled_from(["F-new", "R-new.rule", "F-x.y"]), unique=True)):
        if extra not in trace["ids"]:
            written.setdefault(draw(st.sampled_from(["a.md", "other.md"])), []).append(extra)
    return written


@pytest.mark.laya_claim("report.figures.traceability")
@settings(max_examples=25)
@given(data=st.data())
def test_the_check_names_each_id_in_a_doc_or_the_map_alone_and_each_misplaced_one(tmp_path_factory, data):
    trace = data.draw(traceability_maps(valid=True, max_size=6))
    written = data.draw(docs_for(trace))
    root = tmp_path_factory.mktemp("tree")
    for rel, text in TEST_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    (root / "docs").mkdir()
    for doc, idents in written.items():
        (root / "docs" / doc).write_text("".join(f"Words<a id=\"{i}\"></a>.\n" for i in idents), encoding="utf-8")
    where = {i: doc for doc, idents in written.items() for i in idents}
    expected = ({f"{i} ({where[i]}) has no entry in the map" for i in where if i not in trace["ids"]}
                | {f"{i} is in the map but in no doc" for i in trace["ids"] if i not in where}
                | {f"{i}: the map says {e['doc']}, it is written in {where[i]}" for i, e in trace["ids"].items()
                   if i in where and where[i] != e["doc"]})
    placement = ("has no entry in the map", "is in the map but in no doc", ": the map says ")
    problems = check(root / "docs", trace, root)
    assert {p for p in problems if any(s in p for s in placement)} == expected
    assert not [p for p in problems if "which does not exist" in p]  # every named test is there
