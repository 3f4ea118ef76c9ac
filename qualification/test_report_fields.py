"""The laya-qual predicate's summary fields (counts, environment, nominations, scope) and
the duplicate-key rule, read from one real signed report.

One pytest run in a fresh interpreter (the module fixture ``made``) qualifies two
synthetic heads on a synthetic base with a real Ed25519 key, with thread and determinism
settings that are not the defaults; every expectation below is computed here, from
docs/report-format.md and from the machine itself, never from the plugin code that
wrote the field.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from importlib import metadata
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner

from laya_qual.report.model import LAYA_TYPE, PAYLOAD_TYPE, TEST_RESULT_TYPE
from laya_qual.report.signing import keygen, load_public_key
from laya_qual.synth import write_artifact
from laya_qual.report.verify import VerifyError, verify_bundle

PASS_A, PASS_B, FAIL, SKIP = "report.verdicts", "report.subjects", "report.signature", "report.interop"

# Thread and determinism settings of the inner run, none of them a default.
ENV = {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "5", "OPENBLAS_NUM_THREADS": "7",
       "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "PYTHONHASHSEED": "4242"}
THREADS = 2  # --laya-threads
CONFTEST = """
import torch

def pytest_configure(config):  # before the session starts, so before the environment is recorded
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("medium")
"""
INNER = f"""
import json
import pytest
import torch

@pytest.mark.laya_claim({PASS_A!r})
def test_passes():
    pass

@pytest.mark.laya_claim({PASS_B!r}, {PASS_A!r})
def test_passes_too():
    pass

@pytest.mark.laya_claim({FAIL!r})
def test_fails():
    assert False

@pytest.mark.laya_claim({SKIP!r})
def test_skips():
    pytest.skip("not here")

def test_loads(qualified_artifact, load_model):  # no claim: not evidence
    load_model(qualified_artifact)
    with open("loaded.txt", "a") as f:
        f.write(str(qualified_artifact) + "\\n")

def test_probe(qualified_base_dir):
    import laya

    with open("probe.json", "w") as f:
        json.dump({{"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads(),
                   "base": str(qualified_base_dir), "laya": laya.__file__}}, f)
"""

BROKEN = f"""
import pytest

@pytest.mark.laya_claim({PASS_A!r})
def test_never_collected(:
"""


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("fields")
    keygen(root / "key")
    base = write_artifact(root / "base", seed=5, head_kind="float32")
    heads = [write_artifact(root / "head-a", seed=6, head_kind="float32", base_dir=base),
             write_artifact(root / "head-b", seed=7, head_kind="int8", base_dir=base)]
    run_dir = root / "run"
    run_dir.mkdir()
    (run_dir / "conftest.py").write_text(CONFTEST)
    (run_dir / "test_inner.py").write_text(INNER)
    (run_dir / "sub").mkdir()
    (run_dir / "sub" / "test_broken.py").write_text(BROKEN)
    bundle = run_dir / "r.intoto.jsonl"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST_", "PYTEST_ADDOPTS", "LAYA_QUAL_SIGNING_KEY"))} | ENV
    # The runtime the inner run imports (from its own directory and environment), and its
    # checkout just before and just after the run.
    laya_file = subprocess.run([sys.executable, "-c", "import laya; print(laya.__file__)"], cwd=run_dir, env=env,
                               capture_output=True, text=True, check=True).stdout.strip()
    checkout_before = _runtime_checkout(laya_file)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "-p", "no:cacheprovider", "-q",
                           f"--rootdir={run_dir}", "test_inner.py", "sub/test_broken.py",
                           "--continue-on-collection-errors", "--laya-report", str(bundle),
                           "--laya-signing-key", str(root / "key"), "--laya-base", str(base),
                           *(a for h in heads for a in ("--laya-artifact", str(h))),
                           "--laya-threads", str(THREADS), "--laya-device", "cpu", "--hypothesis-seed", "3"],
                          cwd=run_dir, env=env, capture_output=True, text=True, timeout=300)
    checkout_after = _runtime_checkout(laya_file)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # test_fails failed, test_broken did not collect
    verified = verify_bundle(bundle, load_public_key(root / "key.pub"))
    return {"root": root, "key": root / "key", "bundle": bundle, "base": base, "heads": heads,
            "tr": verified.test_result, "laya": verified.laya, "predicate": verified.laya["predicate"],
            "probe": json.loads((run_dir / "probe.json").read_text()),
            "loaded": (run_dir / "loaded.txt").read_text().split(),
            "laya_file": laya_file, "checkout": (checkout_before, checkout_after)}


# --- invocation -----------------------------------------------------------------------

@pytest.mark.laya_claim("report.predicate")
def test_invocation_names_the_module_that_failed_to_collect_and_the_exit_status(made):
    """docs/report-format.md: `invocation` records pytest's exit status and the collection
    errors, a module named by its report test id (its path from the rootdir)."""
    invocation = made["predicate"]["invocation"]
    assert invocation["collectionErrors"] == ["sub/test_broken.py"], invocation
    assert invocation["exitStatus"] == 1, invocation


# --- counts ---------------------------------------------------------------------------

@pytest.mark.laya_claim("report.predicate")
def test_counts_tally_the_claims_verdicts(made):
    """`counts`: {"passed": n, "failed": n, "not evaluated": n} over claims -- here 2, 1
    and the rest of the catalogue, three different numbers so no two keys can trade places."""
    p = made["predicate"]
    verdicts = {c["id"]: c["verdict"] for c in p["claims"]}
    assert {cid for cid, v in verdicts.items() if v == "passed"} == {PASS_A, PASS_B}
    assert {cid for cid, v in verdicts.items() if v == "failed"} == {FAIL}
    tally = Counter(verdicts.values())
    assert tally == {"passed": 2, "failed": 1, "not evaluated": len(verdicts) - 3}
    assert p["counts"] == dict(tally)
    assert set(p["counts"]) == {"passed", "failed", "not evaluated"}


# --- environment ----------------------------------------------------------------------

# docs/report-format.md: "package versions (torch, numpy, tokenizers, safetensors,
# hypothesis, pytest, xdist, benchmark, laya-qual)", by distribution name.
PACKAGES = ("torch", "numpy", "tokenizers", "safetensors", "hypothesis", "pytest", "pytest-xdist",
            "pytest-benchmark", "laya-qual")


def _cpu_model_from_proc() -> str | None:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    return next((ln.partition(":")[2].strip() for ln in lines if ln.split(":")[0].strip() == "model name"), None)


def _runtime_checkout(laya_file: str) -> dict | None:
    """HEAD and dirtiness of the git checkout that holds the `laya` package at laya_file, or None."""
    here = Path(laya_file).resolve().parent
    if shutil.which("git") is None:
        return None

    def git(*args):
        return subprocess.run(["git", "-C", str(here), *args], capture_output=True, text=True, timeout=30)

    if git("ls-files", "--error-unmatch", "__init__.py").returncode != 0:
        return None
    return {"commit": git("rev-parse", "HEAD").stdout.strip(), "dirty": git("status", "--porcelain").stdout.strip() != ""}


@pytest.mark.laya_claim("report.predicate")
def test_environment_is_the_machine_that_ran(made):
    import torch

    e = made["predicate"]["environment"]
    v = sys.version_info
    assert e["python"] == f"{v.major}.{v.minor}.{v.micro}"
    for dist in PACKAGES:
        assert e["packages"][dist] == metadata.version(dist), dist
    assert e["cpu"]["logical_cores"] == os.cpu_count()
    model = _cpu_model_from_proc()
    assert e["cpu"]["model"] == model if model else isinstance(e["cpu"]["model"], str) and e["cpu"]["model"]
    if torch.cuda.is_available():
        assert e["gpu"] == {"name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count(),
                            "cuda": torch.version.cuda}
    else:
        assert e["gpu"] is None
    # Threads as the run's own process had them (its tests saw the same), and the thread variables.
    probe = made["probe"]
    assert probe["intra_op"] == THREADS
    assert (e["threads"]["intra_op"], e["threads"]["inter_op"]) == (probe["intra_op"], probe["inter_op"])
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        assert e["threads"][var] == ENV[var], var
    # Determinism flags, each set away from its default by the run's conftest.
    d = e["determinism"]
    assert d["deterministic_algorithms"] is True
    assert (d["cudnn_deterministic"], d["cudnn_benchmark"], d["cudnn_allow_tf32"]) == (True, True, False)
    assert d["matmul_allow_tf32"] is True and d["float32_matmul_precision"] == "medium"
    assert (d["CUBLAS_WORKSPACE_CONFIG"], d["PYTHONHASHSEED"]) == (ENV["CUBLAS_WORKSPACE_CONFIG"], ENV["PYTHONHASHSEED"])
    assert e["device"] == "cpu"
    # The checkout of the runtime the inner run imported (this process may import another: a
    # checkout on sys.path), as it was while the run ran: read just before and just after it,
    # not when this test runs, since anything may touch the checkout in between (an editor, a
    # build). If it changed during the run, either state is the truth.
    assert probe["laya"] == made["laya_file"]
    assert e["git"] in made["checkout"], made["checkout"]


# --- nominations ----------------------------------------------------------------------

def _dir_hash(root: Path) -> str:
    """in-toto dirHash (docs/report-format.md, Subjects): sha256sum lines sorted bytewise."""
    rels = sorted((p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()), key=str.encode)
    return hashlib.sha256("".join(f"{hashlib.sha256((root / r).read_bytes()).hexdigest()}  {r}\n"
                                  for r in rels).encode()).hexdigest()


@pytest.mark.laya_claim("report.predicate")
def test_nominations_are_the_qualified_artifacts(made):
    """`nominations`: the artifact subjects (`artifact/<directory name>`, one per
    --laya-artifact, plus --laya-base once): what the run loaded, none of it accepted."""
    p, base, heads = made["predicate"], made["base"], made["heads"]
    # What the run qualified, as its own fixtures saw it: both heads loaded, on this base.
    assert sorted(made["loaded"]) == sorted(str(h.resolve()) for h in heads)
    assert made["probe"]["base"] == str(base.resolve())
    nominations = p["nominations"]
    assert len(nominations) == len(set(nominations))
    assert set(nominations) == {f"artifact/{d.name}" for d in (base, *heads)}
    subjects = {s["name"]: s for s in made["laya"]["subject"]}
    for directory in (base, *heads):
        assert subjects[f"artifact/{directory.name}"]["digest"]["dirHash"] == _dir_hash(directory)
    assert "laya-runtime" in subjects and "laya-runtime" not in nominations  # the runtime is no nomination


# --- scope ----------------------------------------------------------------------------

def _flat(text: str) -> str:
    return " ".join(text.lower().split())


@pytest.mark.laya_claim("report.predicate")
def test_scope_says_what_is_not_qualified(made):
    """docs/report-format.md, Scope: "mechanics only (parity, pins, cache, cancellation,
    exactness) on the recorded environment; not real-domain accuracy; not latency,
    throughput or memory on other hardware; every loaded artifact remains an unaccepted
    model nomination that needs domain validation." `notQualified` lists the exclusions."""
    scope = made["predicate"]["scope"]
    assert set(scope) == {"statement", "notQualified"}
    statement = _flat(scope["statement"])
    assert "mechanics only" in statement
    for word in ("parity", "pins", "cache", "cancellation", "exactness", "recorded", "real-domain accuracy",
                 "latency", "throughput", "memory", "other hardware"):
        assert word in statement, word
    assert "unaccepted model nomination" in statement and "domain validation" in statement
    items = [_flat(i) for i in scope["notQualified"]]
    assert items and all(isinstance(i, str) and i for i in scope["notQualified"])

    def listed(*words):
        return any(all(w in item for w in words) for item in items)

    assert listed("real-domain accuracy")
    assert listed("latency", "throughput", "memory", "hardware")
    assert listed("accept", "artifact", "nomination")


# --- duplicate keys -------------------------------------------------------------------

def _cli(*args):
    from click.testing import CliRunner

    from laya_qual.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _canonical(obj) -> bytes:
    """docs/report-format.md: sorted keys, no whitespace, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@pytest.mark.laya_claim("report.predicate")
def test_statement_payloads_are_canonical_utf8_json(made):
    """Each statement's payload is the canonical JSON of what it holds: sorted keys, no
    whitespace, UTF-8 with non-ASCII text written as itself, never \\u-escaped (the
    writer's form is this oracle's, for text the run did not happen to contain too)."""
    from laya_qual.report.model import canonical
    from laya_qual.report.verify import read_statements

    payloads = [payload for _, payload in read_statements(made["bundle"])]
    assert len(payloads) == 2 and all(payload == _canonical(json.loads(payload)) for payload in payloads)
    text = {"z": "naïve — ≥ 1", "a": [1, {"y": None, "b": "ü"}]}
    assert canonical(text) == _canonical(text) and "ü".encode() in canonical(text)


@pytest.mark.laya_claim("report.verify.duplicate-keys")
def test_a_repeated_key_is_refused_even_when_validly_signed(made, tmp_path):
    """Each bundle repeats one key with its own value, in the envelope, in the test-result
    statement or deep in the laya-qual predicate, and is signed afresh (securesystemslib,
    the run's key): every signature verifies and a last-value-wins reading gives exactly
    the statements of the real report, so only the duplicate-key rule can refuse it."""
    signer = CryptoSigner(load_pem_private_key(made["key"].read_bytes(), None))
    public = load_public_key(made["key"].with_name("key.pub"))

    def line(payload: bytes) -> str:
        env = Envelope(payload, PAYLOAD_TYPE, {})
        env.sign(signer)
        return json.dumps(env.to_dict(), separators=(",", ":")) + "\n"

    tr, laya = _canonical(made["tr"]), _canonical(made["laya"])
    control = tmp_path / "control.intoto.jsonl"
    control.write_text(line(tr) + line(laya))
    assert verify_bundle(control, public).laya == made["laya"]  # the re-signed report verifies

    def repeat_first(payload: bytes, inside: bytes, key: str, value) -> bytes:
        """``payload`` with ``"key":value`` written again right after the one ``inside`` opening."""
        assert payload.count(inside) == 1
        return payload.replace(inside, inside + _canonical({key: value})[1:-1] + b",")

    stmt_type = json.dumps(made["tr"]["_type"])
    tr_twice = repeat_first(tr, b'{"_type":' + stmt_type.encode() + b",", "_type", made["tr"]["_type"])
    laya_twice = repeat_first(laya, b'"predicate":{', "result", made["predicate"]["result"])
    tr_bound = json.loads(tr)  # statement 1 names statement 2's bytes: bind it to the new ones
    [binding] = [d for d in tr_bound["predicate"]["configuration"] if d["name"] == "laya-qual-predicate"]
    binding["digest"]["sha256"] = hashlib.sha256(laya_twice).hexdigest()
    envelope_twice = '{"payloadType":' + json.dumps(PAYLOAD_TYPE) + "," + line(tr)[1:]
    cases = {
        "envelope": ("payloadType", envelope_twice + line(laya), None),
        "test-result statement": ("_type", line(tr_twice) + line(laya), tr_twice),
        "laya-qual predicate": ("result", line(_canonical(tr_bound)) + line(laya_twice), laya_twice),
    }
    for name, (key, text, payload) in cases.items():
        if payload is not None:  # the repeat is the only difference a lax reader could see
            assert json.loads(payload) in (made["tr"], made["laya"]) and payload not in (tr, laya), name
        path = tmp_path / f"{name.replace(' ', '-')}.intoto.jsonl"
        path.write_text(text)
        with pytest.raises(VerifyError, match=f"duplicate key in .*'{key}'.*'{key}'"):
            verify_bundle(path, public)
        result = _cli("verify", path, "--public-key", made["key"].with_name("key.pub"), "--require-result", "FAILED")
        assert result.exit_code == 1, (name, result.output)
        [message] = [ln for ln in result.output.splitlines() if ln.strip()]
        assert message.startswith("Error: verification failed: ") and "duplicate key" in message, (name, message)
        assert f"'{key}'" in message, (name, message)


@pytest.mark.laya_claim("report.verify.duplicate-keys")
def test_a_line_naming_our_type_among_repeats_is_not_ignored(made, tmp_path):
    """A stranger's line whose payload names the laya-qual predicate type first and another
    type last is ours by its first word: it must verify (and is refused), never be ignored
    as someone else's line, which a last-value-wins reading of the type would do."""
    stranger = tmp_path / "stranger"
    keygen(stranger)
    signer = CryptoSigner(load_pem_private_key(stranger.read_bytes(), None))
    payload = _canonical(made["laya"])
    ours = b'"predicateType":' + json.dumps(LAYA_TYPE).encode()
    assert payload.count(ours) == 1
    foreign = payload.replace(ours, ours + b',"predicateType":"https://slsa.dev/provenance/v1"')
    env = Envelope(foreign, PAYLOAD_TYPE, {})
    env.sign(signer)
    path = tmp_path / "repeat.intoto.jsonl"
    path.write_text(made["bundle"].read_text() + json.dumps(env.to_dict(), separators=(",", ":")) + "\n")
    with pytest.raises(VerifyError, match="line 3"):
        verify_bundle(path, load_public_key(made["key"].with_name("key.pub")))


@pytest.mark.laya_claim("report.predicate")
def test_counts_that_do_not_tally_the_verdicts_are_refused(made, tmp_path):
    """The same report with two of its counts swapped, re-signed with the run's key (and
    statement 1 bound to the new bytes), is refused by verify: the counts are part of what
    the two statements must agree on."""
    signer = CryptoSigner(load_pem_private_key(made["key"].read_bytes(), None))
    laya = json.loads(_canonical(made["laya"]))
    counts = laya["predicate"]["counts"]
    counts["passed"], counts["failed"] = counts["failed"], counts["passed"]
    assert counts["passed"] != counts["failed"]
    swapped = _canonical(laya)
    tr = json.loads(_canonical(made["tr"]))
    [binding] = [d for d in tr["predicate"]["configuration"] if d["name"] == "laya-qual-predicate"]
    binding["digest"]["sha256"] = hashlib.sha256(swapped).hexdigest()
    lines = []
    for payload in (_canonical(tr), swapped):
        env = Envelope(payload, PAYLOAD_TYPE, {})
        env.sign(signer)
        lines.append(json.dumps(env.to_dict(), separators=(",", ":")) + "\n")
    path = tmp_path / "swapped.intoto.jsonl"
    path.write_text("".join(lines))
    with pytest.raises(VerifyError, match="counts .* but the claims' verdicts give"):
        verify_bundle(path, load_public_key(made["key"].with_name("key.pub")))
