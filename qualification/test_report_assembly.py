"""Report assembly through real pytest runs (pytester): verdicts, evidence, xdist."""

from __future__ import annotations

import base64
import hashlib
import json
import os

import hypothesis.core
import pytest

from laya_qual.claims import CLAIMS
from laya_qual.report.model import LAYA_TYPE, TEST_RESULT_TYPE
from laya_qual.report.signing import keygen, load_public_key
from laya_qual.report.verify import VerifyError, verify_bundle

pytest_plugins = ("pytester",)

A, B, C, D, E = "report.verdicts", "report.signature", "report.interop", "report.subjects", "report.verify.agreement"

MIXED = f"""
import pytest

@pytest.mark.laya_claim("{A}")
def test_a_passes():
    pass

@pytest.mark.laya_claim("{B}")
def test_b_passes():
    pass

@pytest.mark.laya_claim("{B}", "{A}")
def test_b_fails():
    assert False

@pytest.mark.laya_claim("{C}")
def test_c_skipped():
    pytest.skip("not here")

@pytest.fixture
def broken():
    raise RuntimeError("setup broke")

@pytest.mark.laya_claim("{D}")
def test_d_setup_error(broken):
    pass

@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown broke")

@pytest.mark.laya_claim("{E}")
def test_e_teardown_error(broken_teardown):
    pass

@pytest.mark.laya_claim("report.verify.tamper")
@pytest.mark.xfail(reason="known not to hold")
def test_xfail():
    assert False
"""


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    path = tmp_path_factory.mktemp("key") / "signing-key"
    keygen(path)
    return path


@pytest.fixture(autouse=True)
def _isolated(monkeypatch):
    """Inner runs must not think they are xdist workers (when this file itself runs
    under xdist), and --hypothesis-seed sets a Hypothesis global: put it back."""
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hypothesis.core, "global_force_seed", hypothesis.core.global_force_seed)


def statements(path):
    out = {}
    for line in path.read_text().splitlines():
        stmt = json.loads(base64.b64decode(json.loads(line)["payload"]))
        out[stmt["predicateType"]] = stmt
    return out[TEST_RESULT_TYPE], out[LAYA_TYPE]


def run(pytester, key, *args, subprocess=False):
    out = pytester.path / "report.intoto.jsonl"
    argv = ("-p", "laya_qual", "--laya-report", str(out), "--laya-signing-key", str(key), *args)
    result = (pytester.runpytest_subprocess if subprocess else pytester.runpytest_inprocess)(*argv)
    verify_bundle(out, load_public_key(key.with_name(key.name + ".pub")))
    return result, *statements(out)


def by_id(laya):
    return {c["id"]: c for c in laya["predicate"]["claims"]}


@pytest.mark.laya_claim("report.verdicts")
def test_verdicts_and_failed_result(pytester, key):
    pytester.makepyfile(MIXED)
    result, tr, laya = run(pytester, key)
    result.assert_outcomes(passed=3, failed=1, skipped=1, errors=2, xfailed=1)
    claims = by_id(laya)
    assert list(claims) == list(CLAIMS)  # every catalogued claim, catalogue order
    assert claims[A]["verdict"] == "failed"  # one pass does not outweigh a failure
    assert claims[B]["verdict"] == "failed"
    assert claims[C]["verdict"] == "not evaluated"  # all skipped
    assert claims[D]["verdict"] == "failed"  # setup error
    assert claims[E]["verdict"] == "failed"  # the call passed, its teardown failed
    assert claims["report.verify.tamper"]["verdict"] == "failed"  # an xfail says it does not hold
    assert claims["report.xdist-equal"] == {**claims["report.xdist-equal"], "verdict": "not evaluated", "evidence": []}
    outcomes = {e["test"].split("::")[1]: e["outcome"] for c in claims.values() for e in c["evidence"]}
    assert outcomes == {"test_a_passes": "passed", "test_b_passes": "passed", "test_b_fails": "failed",
                        "test_c_skipped": "skipped", "test_d_setup_error": "error", "test_e_teardown_error": "error",
                        "test_xfail": "xfailed"}
    assert tr["predicate"]["result"] == laya["predicate"]["result"] == "FAILED"
    assert [t.split("::")[1] for t in tr["predicate"]["failedTests"]] == ["test_b_fails", "test_d_setup_error",
                                                                               "test_e_teardown_error", "test_xfail"]
    assert [t.split("::")[1] for t in tr["predicate"]["warnedTests"]] == ["test_c_skipped"]
    counts = ", ".join(f"{laya['predicate']['counts'][v]} {v}" for v in ("passed", "failed", "not evaluated"))
    result.stdout.fnmatch_lines(["*= laya_qual report =*", f"result FAILED: {counts} (of {len(CLAIMS)} claims)",
                                 f"  failed claim: {A}", "signed: keyid *", "bundle: *"])  # plain lines


@pytest.mark.laya_claim("report.verdicts")
def test_a_run_that_calls_no_test_evaluates_no_claim(pytester, key):
    """--setup-only runs every fixture and no test call: a passing setup is no evidence."""
    pytester.makepyfile(MIXED)
    result, tr, laya = run(pytester, key, "--setup-only")
    assert {c["verdict"] for c in laya["predicate"]["claims"]} == {"not evaluated", "failed"}
    failed = {c["id"] for c in laya["predicate"]["claims"] if c["verdict"] == "failed"}
    assert failed == {D, E}  # their fixtures raised in setup and in teardown
    assert tr["predicate"]["passedTests"] == []


@pytest.mark.laya_claim("report.verdicts")
def test_unrun_claim_warns_and_all_run_passes(pytester, key):
    ids = list(CLAIMS)
    params = ", ".join(f"pytest.param({cid!r}, marks=pytest.mark.laya_claim({cid!r}))" for cid in ids)
    pytester.makepyfile(f"""
import pytest

@pytest.mark.parametrize("cid", [{params}])
def test_claim(cid):
    pass
""")
    _, tr, laya = run(pytester, key, "-k", f"not {ids[-1]}")
    assert by_id(laya)[ids[-1]]["verdict"] == "not evaluated"
    assert {c["verdict"] for c in laya["predicate"]["claims"][:-1]} == {"passed"}
    assert tr["predicate"]["result"] == "WARNED"
    _, tr, laya = run(pytester, key)
    assert tr["predicate"]["result"] == laya["predicate"]["result"] == "PASSED"


@pytest.mark.laya_claim("report.verdicts")
@pytest.mark.parametrize("go_on", [True, False], ids=["continue-on-collection-errors", "interrupted"])
def test_a_module_that_does_not_collect_fails_the_run_whatever_the_claims_say(pytester, key, go_on):
    """docs/report-format.md: a module that failed to collect ran none of its tests and
    nobody knows which claims they held, so the report is FAILED even when every claim
    passed; failedTests and collectionErrors name it by its report test id (its path)."""
    params = ", ".join(f"pytest.param({cid!r}, marks=pytest.mark.laya_claim({cid!r}))" for cid in CLAIMS)
    pytester.makepyfile(test_claims=f"""
import pytest

@pytest.mark.parametrize("cid", [{params}])
def test_claim(cid):
    pass
""", test_import="import laya_qual_no_such_module\n")
    pytester.mkpydir("sub").joinpath("test_syntax.py").write_text("def broken(:\n")
    result, tr, laya = run(pytester, key, f"--rootdir={pytester.path}",
                           *(["--continue-on-collection-errors"] if go_on else []))
    broken = ["sub/test_syntax.py", "test_import.py"]
    p = laya["predicate"]
    assert p["invocation"]["collectionErrors"] == broken
    assert {c["verdict"] for c in p["claims"]} == ({"passed"} if go_on else {"not evaluated"})
    assert tr["predicate"]["result"] == p["result"] == "FAILED"
    assert tr["predicate"]["failedTests"] == broken  # no claim test failed: only the modules
    assert len(tr["predicate"]["passedTests"]) == (len(CLAIMS) if go_on else 0)
    result.stdout.fnmatch_lines(["*= laya_qual report =*", "result FAILED: *",
                                 "  did not collect: sub/test_syntax.py", "  did not collect: test_import.py",
                                 "signed: keyid *"])


HYPOTHESIS_AND_BENCHMARK = f"""
import pytest
from hypothesis import given, seed, settings, strategies as st

@pytest.mark.laya_claim("{A}")
@settings(database=None, max_examples=7, derandomize=False)  # not the profile's: Hypothesis' "ci" one derandomizes
@given(st.integers())
def test_property(x):
    assert x == x

@pytest.mark.laya_claim("{B}")
def test_bench(benchmark):
    benchmark.extra_info["size"] = 3
    benchmark.pedantic(sum, args=(range(10),), rounds=5, iterations=2)

@pytest.mark.laya_claim("{C}")
def test_plain():
    pass

@pytest.mark.laya_claim("{C}")
@seed(99)
@settings(database=None, max_examples=3, derandomize=False)
@given(st.integers())
def test_pinned(x):
    pass

@pytest.mark.laya_claim("{C}")
@settings(database=None, max_examples=3, derandomize=True)
@given(st.integers())
def test_derandomized(x):
    pass

@pytest.mark.laya_claim("{D}")
def test_bench_never_called(benchmark):
    pass
"""


@pytest.mark.laya_claim("report.verdicts")
def test_hypothesis_and_benchmark_evidence(pytester, key):
    pytester.makepyfile(HYPOTHESIS_AND_BENCHMARK)
    _, _, laya = run(pytester, key, "--hypothesis-seed", "1234", "--benchmark-json", "bench.json")
    claims = by_id(laya)
    [prop] = claims[A]["evidence"]
    assert prop["hypothesis"]["examples"] == prop["hypothesis"]["valid"] == 7
    assert (prop["hypothesis"]["failing"], prop["hypothesis"]["invalid"]) == (0, 0)
    assert "max_examples" in prop["hypothesis"]["stoppedBecause"]  # Hypothesis' own statistics
    assert prop["hypothesis"]["seed"] == "1234"
    assert laya["predicate"]["hypothesis"]["seed"] == "1234"
    [bench] = claims[B]["evidence"]
    assert bench["benchmark"]["measured"] and bench["benchmark"]["rounds"] == 5
    assert bench["benchmark"]["extraInfo"] == {"size": 3} and bench["benchmark"]["median"] > 0
    [measured] = json.loads((pytester.path / "bench.json").read_text())["benchmarks"]  # pytest-benchmark's own
    assert {k: bench["benchmark"][k] for k in ("min", "max", "mean", "median", "stddev", "rounds", "iterations")} == \
        {k: measured["stats"][k] for k in ("min", "max", "mean", "median", "stddev", "rounds", "iterations")}
    assert [b["test"] for b in laya["predicate"]["benchmarks"]] == [bench["test"]]
    # a test's own @seed and derandomize setting are what replays it, not the run's seed
    assert prop["hypothesis"]["derandomize"] is False
    evidence = {e["test"].rsplit("::", 1)[1]: e for e in claims[C]["evidence"]}
    assert "hypothesis" not in evidence["test_plain"]
    assert {k: evidence["test_pinned"]["hypothesis"][k] for k in ("seed", "derandomize")} == {
        "seed": "99", "derandomize": False}
    assert evidence["test_derandomized"]["hypothesis"]["derandomize"] is True
    [unused] = claims[D]["evidence"]  # a benchmark test that never called its fixture measured nothing
    assert unused["benchmark"] == {"measured": False, "reason": "the benchmark fixture was not run"}
    assert (unused["outcome"], claims[D]["verdict"]) == ("unmeasured", "not evaluated")

    _, _, laya = run(pytester, key, "--benchmark-disable")
    assert by_id(laya)[B]["verdict"] == "not evaluated"  # a benchmark claim with no figures
    assert by_id(laya)[B]["evidence"][0]["outcome"] == "unmeasured"
    assert by_id(laya)[B]["evidence"][0]["benchmark"] == {
        "measured": False, "reason": "benchmarking disabled (xdist or --benchmark-disable)"}


XDIST = f"""
import pytest
from hypothesis import given, settings, strategies as st

@pytest.mark.laya_claim("{A}")
@pytest.mark.parametrize("n", range(4))
def test_many(n):
    pass

@pytest.mark.laya_claim("{B}")
# No timing and no integers: example counts must depend on the seed alone, not on machine
# load or on the source constants Hypothesis mixes into integer draws (which differ with
# the modules each process has loaded).
@settings(database=None, deadline=None)
@given(st.lists(st.booleans()))
def test_property(xs):
    assert sorted(sorted(xs)) == sorted(xs)

@pytest.mark.laya_claim("{C}", "{A}")
def test_fails():
    assert 1 == 2

@pytest.mark.laya_claim("{D}")
def test_skips():
    pytest.skip("x")

@pytest.mark.laya_claim("report.interop")
def test_bench(benchmark):
    benchmark.pedantic(sorted, args=([3, 1, 2],), rounds=3)
"""


def without_figures(laya: dict) -> list[dict]:
    """Claims with benchmark figures reduced to whether they were measured: figures
    differ from run to run, nothing else may."""
    return [{**c, "evidence": [{**e, "benchmark": e["benchmark"]["measured"]} if "benchmark" in e else e
                               for e in c["evidence"]]} for c in laya["predicate"]["claims"]]


@pytest.mark.laya_claim("report.xdist-equal")
def test_report_equal_under_xdist(pytester, key):
    """One in-process run, versus the suite on two workers plus the benchmarks in a
    serial pass merged into one report (what laya-qual run does)."""
    pytester.makepyfile(XDIST)
    # One rootdir for all three runs (path arguments such as the key's would move it), so they name tests alike.
    same = ("--hypothesis-seed", "7", f"--rootdir={pytester.path}")
    # Every run in a fresh interpreter, as a real one is: Hypothesis seeds its generation
    # with constants from the modules loaded, so an in-process run would draw differently.
    _, tr0, laya0 = run(pytester, key, "-n", "0", *same, subprocess=True)
    evidence = pytester.path / "suite-pass.json"
    first = pytester.runpytest_subprocess("-p", "laya_qual", "-n", "2", *same, "--laya-benchmarks", "exclude",
                                          "--laya-evidence-out", str(evidence))
    first.stdout.fnmatch_lines(["*2 workers*"])
    _, tr2, laya2 = run(pytester, key, "-n", "0", *same, "--laya-benchmarks", "only", "--laya-evidence-in", str(evidence),
                        subprocess=True)
    assert [(p["workers"], p["benchmarks"]) for p in laya2["predicate"]["passes"]] == [(2, "exclude"), (0, "only")]
    assert without_figures(laya0) == without_figures(laya2)
    assert by_id(laya2)[C]["verdict"] == "failed"  # the bench passed, but test_fails (suite pass) also claims C
    [bench] = [e for e in by_id(laya2)[C]["evidence"] if "benchmark" in e]
    assert bench["outcome"] == "passed" and bench["benchmark"]["measured"]
    assert by_id(laya2)[B]["evidence"][0]["hypothesis"]["examples"] > 0
    for key_ in ("result", "passedTests", "warnedTests", "failedTests"):
        assert tr0["predicate"][key_] == tr2["predicate"][key_]
    assert tr0["predicate"]["result"] == "FAILED"
    invocation = laya0["predicate"]["invocation"]  # the command line as given, its workers, device and status
    assert (invocation["workers"], invocation["device"], invocation["exitStatus"]) == (0, "cpu", 1)
    assert invocation["args"][-5:] == ["-n", "0", "--hypothesis-seed", "7", "--rootdir=."]  # portable: its own dir
    assert invocation["startedOn"] <= invocation["finishedOn"]


@pytest.mark.laya_claim("report.signature")
def test_unsigned_run_says_so_and_does_not_verify(pytester, monkeypatch):
    monkeypatch.delenv("LAYA_QUAL_SIGNING_KEY", raising=False)
    pytester.makepyfile(f"import pytest\n@pytest.mark.laya_claim({A!r})\ndef test_a():\n    pass\n")
    out = pytester.path / "r.intoto.jsonl"
    result = pytester.runpytest_inprocess("-p", "laya_qual", "--laya-report", str(out))
    result.stdout.fnmatch_lines(["*UNSIGNED*", "*UNSIGNED REPORT*will NOT verify*"])
    other = pytester.path / "k"
    keygen(other)
    with pytest.raises(VerifyError, match="unsigned"):
        verify_bundle(out, load_public_key(other.with_name("k.pub")))


@pytest.mark.laya_claim("report.signature")
def test_signing_key_from_environment(pytester, key, monkeypatch):
    monkeypatch.setenv("LAYA_QUAL_SIGNING_KEY", str(key))
    pytester.makepyfile(f"import pytest\n@pytest.mark.laya_claim({A!r})\ndef test_a():\n    pass\n")
    out = pytester.path / "r.intoto.jsonl"
    pytester.runpytest_inprocess("-p", "laya_qual", "--laya-report", str(out))
    verify_bundle(out, load_public_key(key.with_name(key.name + ".pub")))


@pytest.mark.laya_claim("report.signature")
def test_bad_signing_key_is_a_usage_error(pytester):
    pytester.makepyfile("def test_a():\n    pass\n")
    (pytester.path / "notakey").write_text("hello")
    result = pytester.runpytest_inprocess("-p", "laya_qual", "--laya-report", "r.jsonl",
                                          "--laya-signing-key", "notakey")
    result.stderr.fnmatch_lines(["*--laya-signing-key notakey: not a usable PEM private key*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


SIMPLE = f"import pytest\n@pytest.mark.laya_claim({A!r})\ndef test_a():\n    pass\n"
CI_VARS = ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID", "CI_JOB_URL")


def payload_texts(path) -> list[str]:
    return [base64.b64decode(json.loads(line)["payload"]).decode() for line in path.read_text().splitlines()]


@pytest.mark.laya_claim("report.interop")
def test_report_validates_with_in_toto_attestation_and_securesystemslib(pytester, key, monkeypatch):
    """Both statements parse strictly into the in-toto-attestation protobufs (unknown fields
    refused) and pass its Statement/ResourceDescriptor validation; every line verifies
    with securesystemslib's DSSE Envelope."""
    json_format = pytest.importorskip("google.protobuf.json_format")
    pytest.importorskip("in_toto_attestation")
    from cryptography.hazmat.primitives.serialization import load_pem_public_key
    from in_toto_attestation.predicates.test_result.v0 import test_result_pb2
    from in_toto_attestation.v1 import statement_pb2
    from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
    from in_toto_attestation.v1.statement import Statement
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    for var in CI_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example")
    monkeypatch.setenv("GITHUB_REPOSITORY", "org/repo")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    pytester.makepyfile(MIXED)
    _, tr, laya = run(pytester, key)
    out = pytester.path / "report.intoto.jsonl"
    public = SSlibKey.from_crypto(load_pem_public_key(key.with_name(key.name + ".pub").read_bytes()))
    for line in out.read_text().splitlines():
        Envelope.from_dict(json.loads(line)).verify([public], 1)
    for stmt in (tr, laya):
        pb = json_format.Parse(json.dumps(stmt), statement_pb2.Statement())
        Statement.copy_from_pb(pb).validate()
        assert all(s.digest for s in pb.subject)
    result = json_format.Parse(json.dumps(tr["predicate"]), test_result_pb2.TestResult())
    assert result.url == "https://github.example/org/repo/actions/runs/42"
    assert laya["predicate"]["invocation"]["url"] == result.url
    for descriptor in result.configuration:
        ResourceDescriptor.copy_from_pb(descriptor).validate()
        assert descriptor.digest or descriptor.content or descriptor.uri, descriptor.name
    [invocation] = [d for d in result.configuration if d.name == "pytest-invocation"]
    assert hashlib.sha256(invocation.content).hexdigest() == invocation.digest["sha256"]
    assert json.loads(invocation.content)["args"] == laya["predicate"]["invocation"]["args"]
    runtime = next(s for s in laya["subject"] if s["name"] == "laya-runtime")
    assert set(runtime["digest"]) <= {"dirHash", "gitCommit"} and "dirHash" in runtime["digest"]


@pytest.mark.laya_claim("report.interop")
def test_gitlab_url_and_no_url_outside_ci(pytester, key, monkeypatch):
    for var in CI_VARS:
        monkeypatch.delenv(var, raising=False)
    pytester.makepyfile(SIMPLE)
    _, tr, laya = run(pytester, key)
    assert "url" not in tr["predicate"] and "url" not in laya["predicate"]["invocation"]
    monkeypatch.setenv("CI_JOB_URL", "https://gitlab.example/g/p/-/jobs/7")
    _, tr, _ = run(pytester, key)
    assert tr["predicate"]["url"] == "https://gitlab.example/g/p/-/jobs/7"


@pytest.mark.laya_claim("report.interop")
def test_no_absolute_local_path_is_signed(pytester, key, tmp_path_factory):
    """Key, report, suite and test paths given as absolute paths, inside and outside
    the rootdir, leave no absolute path in either statement."""
    from laya_qual.subjects import package_dir

    outside = tmp_path_factory.mktemp("elsewhere") / "report.intoto.jsonl"
    pytester.makepyfile(SIMPLE)
    suite_file = package_dir("laya_qual.suite") / "test_report_signing.py"
    args = ("-p", "laya_qual", "--laya-report", str(outside), f"--laya-signing-key={key}",
            str(pytester.path / "test_no_absolute_local_path_is_signed.py"), str(suite_file), "-k", "test_a or test_pae")
    pytester.runpytest_inprocess(*args)
    texts = payload_texts(outside)
    for local in {str(pytester.path), str(key.parent), str(outside.parent), str(package_dir("laya_qual.suite")),
                  str(pytester.path.resolve()), os.path.expanduser("~")}:
        assert all(local not in t for t in texts), local
    laya = json.loads(texts[1])
    invocation = laya["predicate"]["invocation"]["args"]
    assert "<local path>" in invocation and "laya_qual/suite/test_report_signing.py" in invocation
    assert "test_no_absolute_local_path_is_signed.py" in invocation


@pytest.mark.laya_claim("report.xdist-equal")
def test_suite_test_ids_do_not_depend_on_how_the_suite_was_started(pytester, key):
    """The same suite test by file path, by --pyargs and by --laya-qualify: one id; so
    too a Hypothesis state machine, whose ``runTest`` pytest locates in Hypothesis's
    own file rather than the suite's."""
    from laya_qual.subjects import package_dir

    suite = package_dir("laya_qual.suite")
    expected = "laya_qual/suite/test_report_signing.py::test_pae_is_dsse_v1"
    machine = "laya_qual/suite/test_cache.py::TestLruEviction::runTest"
    for selection in ([str(suite / "test_report_signing.py"), str(suite / "test_cache.py")],
                      ["--pyargs", "laya_qual.suite.test_report_signing", "laya_qual.suite.test_cache"],
                      ["--laya-qualify", str(suite)]):
        _, tr, laya = run(pytester, key, *selection, "-k", "test_pae_is_dsse_v1 or TestLruEviction")
        assert tr["predicate"]["passedTests"] == [machine, expected], selection
        assert [e["test"] for e in by_id(laya)["report.interop"]["evidence"]] == [expected]
        assert [e["test"] for e in by_id(laya)["cache.eviction"]["evidence"]] == [machine]


def signing_facts(key, *, development: bool) -> dict:
    """The predicate's `signing` as docs/report-format.md writes it for an Ed25519 key: the keyid
    is the sha256 of the canonical JSON key dict, computed here from the public key file."""
    from cryptography.hazmat.primitives import serialization

    public = serialization.load_pem_public_key(key.with_name(key.name + ".pub").read_bytes())
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
    key_dict = {"keytype": "ed25519", "keyval": {"public": raw}, "scheme": "ed25519"}
    keyid = hashlib.sha256(json.dumps(key_dict, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return {"keyid": keyid, "keytype": "ed25519", "scheme": "ed25519", "developmentKey": development}


@pytest.mark.laya_claim("report.signature")
def test_development_key_is_recorded(pytester, monkeypatch, tmp_path):
    from laya_qual.report.signing import dev_key_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    dev = dev_key_path()
    assert dev == tmp_path / "cache" / "laya-qual" / "dev-key"
    other = tmp_path / "release-key"
    keygen(other)
    pytester.makepyfile(SIMPLE)
    _, _, laya = run(pytester, other)  # a machine with no development key at all
    assert laya["predicate"]["signing"] == signing_facts(other, development=False) and not dev.exists()
    keygen(dev)
    _, _, laya = run(pytester, dev)
    assert laya["predicate"]["signing"] == signing_facts(dev, development=True)
    _, _, laya = run(pytester, other)
    assert laya["predicate"]["signing"]["developmentKey"] is False
