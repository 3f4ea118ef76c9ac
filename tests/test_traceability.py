"""The traceability map (laya_qual/measure/traceability.json) against the docs and the tests.

Fails when a doc has an id the map lacks, the map has an id no doc has, an entry names a
test that does not exist (read with ast: a ``def test_...`` at the top level of the file,
or a method of a top-level class), an entry has neither tests nor a written gap, or
docs/claims.md's matrix is stale. Each failure is also provoked on a broken copy, so the
check is seen to fail.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from laya_qual.measure import traceability
from laya_qual.measure.traceability import check, doc_ids, figure, load_map, matrix_markdown

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def claims_md() -> str:
    return (DOCS / "claims.md").read_text(encoding="utf-8")


def test_docs_map_and_tests_agree():
    problems = check(DOCS, load_map(), ROOT, claims_md())
    assert not problems, "\n".join(problems)


def test_the_documented_formats_have_ids():
    """Each format the map is meant to cover keeps at least its fields' ids."""
    ids = doc_ids(DOCS)
    for prefix in ("F-manifest.", "F-encoder_config.", "F-special_tokens.", "F-sequence_format.", "F-head.",
                   "F-head.task.", "F-request.", "F-result.", "F-dataset.", "F-store.", "F-packet.", "F-report."):
        assert any(i.startswith(prefix) for i in ids), prefix
    assert len([i for i in ids if i.startswith("F-encoder_config.")]) == 9  # the table's nine rows


# --- each check, broken on purpose ------------------------------------------------------


@pytest.fixture
def broken_docs(tmp_path) -> Path:
    shutil.copytree(DOCS, tmp_path / "docs")
    return tmp_path / "docs"


def test_an_id_in_a_doc_without_an_entry_fails(broken_docs):
    page = broken_docs / "serving.md"
    page.write_text(page.read_text() + '\nA new rule<a id="R-serve.new-rule"></a>.\n')
    assert check(broken_docs, load_map(), ROOT) == ["R-serve.new-rule (serving.md) has no entry in the map"]


def test_an_entry_whose_id_no_doc_has_fails(broken_docs):
    page = broken_docs / "training.md"
    page.write_text(page.read_text().replace('<a id="F-dataset.state"></a>', ""))
    assert check(broken_docs, load_map(), ROOT) == ["F-dataset.state is in the map but in no doc"]


def test_an_id_written_twice_fails(broken_docs):
    page = broken_docs / "serving.md"
    page.write_text(page.read_text() + '\n<a id="F-head.kind"></a>\n')
    with pytest.raises(ValueError, match="F-head.kind is written twice"):
        check(broken_docs, load_map(), ROOT)


@pytest.mark.parametrize("test_id", [
    "laya_qual/suite/test_train_dataset.py::test_no_such_test",  # no such function
    "laya_qual/suite/test_no_such_file.py::test_dataset_unknown_field_is_refused_by_name",  # no such file
    "tests/test_traceability.py::claims_md",  # exists, but is no test
    "laya_qual/suite/test_train_dataset.py::TestNone::test_dataset_unknown_field_is_refused_by_name",  # no such class
    "laya_qual/suite/test_train_dataset.py",  # no test named
])
@pytest.mark.slow
def test_an_entry_naming_a_test_that_does_not_exist_fails(test_id):
    trace = copy.deepcopy(load_map())
    trace["ids"]["F-dataset.state"]["tests"].append(test_id)
    assert check(DOCS, trace, ROOT) == [f"F-dataset.state: names {test_id}, which does not exist"]


def test_class_methods_and_project_tests_resolve(tmp_path):
    assert traceability.defines(*traceability.test_file("tests/test_traceability.py::test_docs_map_and_tests_agree",
                                                        ROOT))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_k.py").write_text(
        "class TestK:\n    def test_m(self):\n        pass\n    def helper(self):\n        pass\n"
        "def test_top():\n    pass\n")
    resolves = {t: traceability.defines(*traceability.test_file(t, tmp_path)) for t in (
        "tests/test_k.py::TestK::test_m", "tests/test_k.py::test_top", "tests/test_k.py::TestK::helper",
        "tests/test_k.py::test_m", "tests/test_k.py::TestK", "tests/test_k.py::TestK::test_m::x")}
    assert resolves == {"tests/test_k.py::TestK::test_m": True, "tests/test_k.py::test_top": True,
                        "tests/test_k.py::TestK::helper": False, "tests/test_k.py::test_m": False,
                        "tests/test_k.py::TestK": False, "tests/test_k.py::TestK::test_m::x": False}


@pytest.mark.parametrize("change, problem", [
    (lambda e: e.pop("tests"), "needs exactly one of tests or gap"),
    (lambda e: e.update(gap="because"), "needs exactly one of tests or gap"),
    (lambda e: (e.pop("tests"), e.update(gap="later")), "a gap needs a written reason"),
    (lambda e: e.update(tests=[]), "tests must be a non-empty list"),
    (lambda e: e.update(kind="rule"), "kind 'rule', but its prefix says 'field'"),
    (lambda e: e.update(doc="serving.md"), "the map says serving.md, it is written in training.md"),
])
@pytest.mark.slow
def test_a_malformed_entry_fails(change, problem):
    trace = copy.deepcopy(load_map())
    change(trace["ids"]["F-dataset.state"])
    assert [p for p in check(DOCS, trace, ROOT) if "F-dataset.state" in p] == [f"F-dataset.state: {problem}"]


def test_a_stale_claims_md_matrix_fails():
    trace = copy.deepcopy(load_map())
    trace["ids"]["F-dataset.state"]["text"] += " (edited)"
    assert check(DOCS, trace, ROOT, claims_md()) == [
        "docs/claims.md's traceability matrix is stale: laya-qual claims --markdown > docs/claims.md"]
    assert "\n".join(matrix_markdown()) in claims_md()


# --- the figure -------------------------------------------------------------------------


def test_figure_counts_what_the_map_says():
    trace = {"format": traceability.FORMAT, "ids": {
        "F-a.x": {"doc": "a.md", "kind": "field", "text": "x", "tests": ["tests/t.py::test_x"]},
        "F-a.y": {"doc": "a.md", "kind": "field", "text": "y", "gap": "no test changes y alone yet"},
        "R-a.z": {"doc": "a.md", "kind": "rule", "text": "z", "tests": ["tests/t.py::test_z"]}}}
    digest = hashlib.sha256(json.dumps(trace, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert figure(trace) == {"fields": {"covered": 1, "total": 2}, "rules": {"covered": 1, "total": 1},
                             "mapDigest": digest, "gaps": ["F-a.y"]}
    assert traceability.line(figure(trace)).startswith("fields and rules covered 2 of 3 (fields 1/2, rules 1/1; 1 gaps")
    real = figure()
    ids = load_map()["ids"]
    assert real["fields"]["total"] + real["rules"]["total"] == len(ids) == len(doc_ids(DOCS))
    assert real["gaps"] == sorted(i for i, e in ids.items() if "gap" in e)


MINI = """
import pytest

@pytest.mark.laya_claim("request.validation")
def test_passes():
    pass
"""


@pytest.mark.slow
def test_the_report_carries_the_figure(tmp_path):
    """A run's signed report carries suite.traceability as computed from the shipped map,
    and laya-qual show prints its line."""
    from click.testing import CliRunner

    from laya_qual.cli import main

    (tmp_path / "test_mini.py").write_text(MINI)
    assert CliRunner().invoke(main, ["keygen", str(tmp_path / "key")]).exit_code == 0
    bundle = tmp_path / "r.intoto.jsonl"
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "-q", "test_mini.py", "-n", "0",
                           "--laya-report", bundle, "--laya-signing-key", tmp_path / "key"],
                          cwd=tmp_path, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    statements = [json.loads(base64.b64decode(json.loads(line)["payload"])) for line in bundle.read_text().splitlines()]
    [predicate] = [s["predicate"] for s in statements if "laya-qual" in s["predicateType"]]
    assert predicate["suite"]["traceability"] == figure()
    shown = CliRunner().invoke(main, ["show", str(bundle), "--public-key", str(tmp_path / "key.pub")])
    assert shown.exit_code == 0, shown.output
    assert f"  traced    {traceability.line(figure())}" in shown.output
    markdown = CliRunner().invoke(main, ["show", str(bundle), "--public-key", str(tmp_path / "key.pub"), "--markdown"])
    assert traceability.line(figure()) in markdown.output
