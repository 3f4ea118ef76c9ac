"""report.synthetic-default: a qualification run given no --laya-artifact signs the synthetic
default it tested (docs/report-format.md, "Artifacts"), through real pytest runs on two
xdist workers.

Oracle: a probe test in the run writes, from inside each worker, the directory it was handed
and that directory's in-toto dirHash computed here (sha256sum lines, bytewise-sorted paths,
not laya_qual's code); the signed subjects must be exactly those, with role synthetic, and
no nomination. The trained head's tasks are read against docs/training.md's records: the
clean task certified, the noisy one not, each with reliability bins and a certification path.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from laya_qual.report.model import LAYA_TYPE
from laya_qual.report.signing import load_public_key
from laya_qual.report.verify import verify_bundle
from laya_qual.suite.test_report_assembly import _isolated, key  # noqa: F401 - fixtures: a signing key, clean inner runs

pytest_plugins = ("pytester",)

NAMES = ("float32", "int8", "transformer", "trained")
PROBE = '''
import hashlib, json, os
from pathlib import Path
import pytest

def dir_hash(root):
    rels = sorted((str(p.relative_to(root)) for p in Path(root).rglob("*") if p.is_file()), key=str.encode)
    return hashlib.sha256("".join(f"{hashlib.sha256((Path(root) / r).read_bytes()).hexdigest()}  {r}\\n"
                                  for r in rels).encode()).hexdigest()

@pytest.mark.laya_claim("report.synthetic-default")
def test_probe(qualified_artifact):
    out = Path(os.environ["LAYA_PROBE_OUT"]) / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{qualified_artifact.name}"
    out.write_text(json.dumps({"dir": str(qualified_artifact), "dirHash": dir_hash(qualified_artifact)}))
'''


def laya_statement(bundle) -> dict:
    for line in bundle.read_text().splitlines():
        statement = json.loads(base64.b64decode(json.loads(line)["payload"]))
        if statement["predicateType"] == LAYA_TYPE:
            return statement
    raise AssertionError("no laya-qual statement")


@pytest.mark.laya_claim("report.synthetic-default")
def test_a_default_report_signs_the_synthetic_default_its_workers_tested(pytester, key, tmp_path_factory,
                                                                        monkeypatch):
    probes = tmp_path_factory.mktemp("probes")
    monkeypatch.setenv("LAYA_PROBE_OUT", str(probes))
    pytester.makepyfile(test_probe=PROBE)
    bundle = pytester.path / "r.intoto.jsonl"
    result = pytester.runpytest_subprocess("-p", "laya_qual", "--laya-qualify", "-n", "2", "-k", "test_probe",
                                           "--laya-report", str(bundle), "--laya-signing-key", str(key),
                                           "--hypothesis-seed", "7", "-p", "no:cacheprovider", "test_probe.py")
    assert result.ret == 0, result.stdout.str()[-3000:]  # a WARNED report (one claim evaluated): pytest passed
    verify_bundle(bundle, load_public_key(key.with_name(key.name + ".pub")))
    laya = laya_statement(bundle)
    seen = {p.name: json.loads(p.read_text()) for p in probes.iterdir()}
    workers = {name.split("-", 1)[0] for name in seen}
    assert workers == {"gw0", "gw1"}, seen  # both workers ran a probe
    tested = {(s["dir"], s["dirHash"]) for s in seen.values()}  # each directory: one path, one content
    assert len(tested) == len({d for d, _ in tested}) == len(NAMES), seen
    signed = [s for s in laya["subject"] if s["annotations"].get("role") == "synthetic"]
    assert sorted((f"artifact/{d.rsplit('/', 1)[1]}", h) for d, h in tested) == sorted(
        (s["name"], s["digest"]["dirHash"]) for s in signed)
    assert sorted(s["name"] for s in signed) == sorted(f"artifact/synthetic-{n}" for n in NAMES)
    assert len({str(Path(d).parent) for d, _ in tested}) == 1, tested  # one directory, the controller's
    assert all(not Path(d).exists() for d, _ in tested)  # removed when the run ended
    predicate = laya["predicate"]
    assert predicate["nominations"] == []
    assert [h["subject"] for h in predicate["heads"]] == [s["name"] for s in signed]
    [trained] = [h for h in predicate["heads"] if h["subject"] == "artifact/synthetic-trained"]
    tasks = {t["name"]: t for t in trained["tasks"]}
    assert trained["kind"] == "float32" and sorted(tasks) == ["answer", "route"]
    assert [tasks[n]["certification"]["certified"] for n in ("answer", "route")] == [True, False]
    for task in tasks.values():
        assert task["calibration"]["reliability_before"] and task["calibration"]["reliability_after"]
        assert task["certification"]["path"]
        assert task["act_threshold"] < 1 if task["certification"]["certified"] else task["act_threshold"] == 1.0


@pytest.mark.laya_claim("report.synthetic-default")
def test_a_second_pass_refuses_evidence_of_other_subjects(pytester, key):
    """The two passes of one report must have qualified the same bytes (docs/report-format.md)."""
    pytester.makepyfile(test_one='import pytest\n\n@pytest.mark.laya_claim("report.synthetic-default")\n'
                                 'def test_one():\n    pass\n')
    evidence = pytester.path / "suite-pass.json"
    first = pytester.runpytest_inprocess("-p", "laya_qual", "--laya-evidence-out", str(evidence), "--hypothesis-seed", "7")
    assert first.ret == 0
    data = json.loads(evidence.read_text())
    data["context"]["subjects"].append({"name": "artifact/synthetic-trained", "digest": {"dirHash": "00" * 32},
                                        "annotations": {"kind": "artifact", "role": "synthetic", "files": {}}})
    evidence.write_text(json.dumps(data))
    second = pytester.runpytest_inprocess("-p", "laya_qual", "--laya-evidence-in", str(evidence), "--hypothesis-seed", "7",
                                          "--laya-report", str(pytester.path / "r.intoto.jsonl"),
                                          "--laya-signing-key", str(key))
    assert second.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--laya-evidence-in {evidence}: the earlier pass qualified other subjects" in second.stderr.str()
    assert not (pytester.path / "r.intoto.jsonl").exists()
