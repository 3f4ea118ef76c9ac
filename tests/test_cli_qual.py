"""The laya-qual command line: keygen, verify, show, claims, run; bad input ends in
one line, never a traceback."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from laya_qual.claims import CLAIMS
from laya_qual.cli import main
from laya_qual.report.summary import DEV_KEY_NOTE, claims_markdown
from laya_qual.report.verify import read_statements

ROOT = Path(__file__).resolve().parents[1]
SUITE = """
import pytest
from hypothesis import given, settings, strategies as st

@pytest.mark.laya_claim("report.verdicts")
def test_passes():
    pass

@pytest.mark.laya_claim("report.signature")
def test_fails():
    assert 1 + 1 == 3

@pytest.mark.laya_claim("report.interop")
@settings(database=None)
@given(st.integers())
def test_property(x):
    assert x + 0 == x

@pytest.mark.laya_claim("report.subjects")
def test_bench(benchmark):
    benchmark.pedantic(sum, args=(range(10),), rounds=3)
"""


def outside_xdist() -> dict[str, str]:
    """The environment minus xdist's worker variables, so inner runs (and their
    benchmarks) behave as top-level runs even when this file runs on a worker."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}


def cli(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """A bundle from a real (small) pytest run: (bundle, private key, public key)."""
    d = tmp_path_factory.mktemp("run")
    assert cli("keygen", d / "key").exit_code == 0
    (d / "test_mini.py").write_text(SUITE)
    bundle = d / "r.intoto.jsonl"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "-q", "test_mini.py",
                           "--laya-report", bundle, "--laya-signing-key", d / "key", "--hypothesis-seed", "3"],
                          cwd=d, capture_output=True, text=True, env=outside_xdist())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return bundle, d / "key", d / "key.pub"


def one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


def test_keygen(tmp_path):
    umask = os.umask(0o022)
    try:
        result = cli("keygen", tmp_path / "k")
    finally:
        os.umask(umask)
    assert result.exit_code == 0
    assert result.stdout == f"private key: {tmp_path / 'k'} (keep it secret)\npublic key:  {tmp_path / 'k.pub'}\n"
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "k.pub").stat().st_mode) == 0o644  # a public file, as umask 022 allows
    assert (tmp_path / "k.pub").read_text().startswith("-----BEGIN PUBLIC KEY-----")
    one_line_error(cli("keygen", tmp_path / "k"), "already exists")


def test_a_private_key_no_signer_takes_is_refused_naming_it(tmp_path):
    """An X25519 key is a valid PEM private key but signs nothing: refused by name, not a traceback."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import x25519

    from laya_qual.report.signing import SigningError, load_signer

    path = tmp_path / "x25519.pem"
    path.write_bytes(x25519.X25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with pytest.raises(SigningError, match=f"{path}: unsupported private key"):
        load_signer(path)


def test_keygen_encrypts_only_with_the_password_from_the_environment(tmp_path, monkeypatch):
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    from laya_qual.report.signing import PASSWORD_ENV

    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    refused = cli("keygen", tmp_path / "k", "--encrypt")
    assert refused.exit_code == 2 and f"--encrypt needs the password in ${PASSWORD_ENV}" in refused.output
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv(PASSWORD_ENV, "s3cret")
    encrypted = cli("keygen", tmp_path / "k", "--encrypt")
    assert encrypted.exit_code == 0
    assert encrypted.stdout.startswith(f"private key: {tmp_path / 'k'} (keep it secret; encrypted)\n")
    pem = (tmp_path / "k").read_bytes()
    with pytest.raises(TypeError):  # encrypted: no key without the password
        load_pem_private_key(pem, password=None)
    assert load_pem_private_key(pem, password=b"s3cret") is not None


@pytest.mark.slow
@pytest.mark.laya_claim("report.signature")
def test_verify_ok_and_wrong_key(real, tmp_path):
    bundle, _, public = real
    result = cli("verify", bundle, "--public-key", public)
    # A FAILED report is authentic but not acceptable: plain verify rejects it (exit 3).
    result = cli("verify", bundle, "--public-key", public, "--require-result", "FAILED")
    assert result.exit_code == 0 and result.output.startswith(f"OK {bundle}: signed by keyid")
    # the whole line: no "unrecognised line(s)" part when there are none
    assert re.fullmatch(rf"OK {re.escape(str(bundle))}: signed by keyid [0-9a-f]{{64}}(; DEVELOPMENT KEY)?; "
                        r"result FAILED; \d+ claims; 0 artifact\(s\) rechecked\n", result.output), result.output
    cli("keygen", tmp_path / "other")
    one_line_error(cli("verify", bundle, "--public-key", tmp_path / "other.pub"), "not by the given key")


def test_verify_bad_input_is_one_line(real, tmp_path):
    bundle, private, public = real
    one_line_error(cli("verify", tmp_path / "missing.jsonl", "--public-key", public), "cannot read bundle")
    one_line_error(cli("verify", bundle, "--public-key", tmp_path / "missing.pub"), "cannot read public key")
    one_line_error(cli("verify", bundle, "--public-key", private), "not a usable PEM public key")
    ecdsa = ec.generate_private_key(ec.SECP256R1()).public_key()
    (tmp_path / "ec.pub").write_bytes(ecdsa.public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
    one_line_error(cli("verify", bundle, "--public-key", tmp_path / "ec.pub"), "not by the given key")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(bundle.read_text().splitlines()[0][:-5] + "\n")
    one_line_error(cli("verify", broken, "--public-key", public), "line 1 is not one JSON object")
    one_line_error(cli("show", broken), "line 1")
    as_json = cli("verify", broken, "--public-key", public, "--json")
    assert as_json.exit_code == 1 and json.loads(as_json.output)["verified"] is False
    one_line_error(cli("verify", bundle, "--public-key", public, "--artifact", tmp_path / "nope"), "not a directory")


def test_show_table(real):
    bundle, _, public = real
    result = cli("show", bundle)
    assert result.exit_code == 0
    out = result.output
    assert "result    FAILED" in out and "NOT CHECKED" in out
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("  report.")]
    assert rows[0] == "report.signature"  # failures first
    assert rows.index("report.verify.tamper") < rows.index("report.verdicts")  # then not evaluated, then passed
    assert "Hypothesis examples" in out and "BENCHMARK" in out and "test_mini.py::test_bench" in out
    assert "--hypothesis-seed 3" in out and "real-domain accuracy" in out
    assert "verified with the given public key (keyid" in cli("show", bundle, "--public-key", public).output


def test_show_markdown(real, tmp_path):
    bundle, _, public = real
    out = tmp_path / "notes.md"
    written = cli("show", bundle, "--markdown", "--output", out)
    assert (written.exit_code, written.output) == (0, f"wrote {out}\n")  # what went where, and nothing else
    md = out.read_text()
    assert md.startswith("## Qualification report: FAILED\n\n**Signature:** NOT CHECKED")
    table = [line for line in md.splitlines() if line.startswith("| `report.")]
    assert table[0].startswith("| `report.signature` | **failed**")
    for section in ("### Failed claims", "### Benchmarks", "### Scope", "### Subjects", "### How to verify"):
        assert section in md
    assert "`laya-runtime`" in md and f"laya-qual verify {bundle.name} --public-key" in md
    # each failed claim with its statement and each failing test with its outcome
    failing = [line for line in md.splitlines() if line.startswith("- `report.signature`: ")]
    assert len(failing) == 1 and failing[0].endswith(" Failing: `test_mini.py::test_fails` (failed)"), failing
    assert "unaccepted model nominations" in md
    # --append (for $GITHUB_STEP_SUMMARY) keeps what is there; verified output says so.
    appended = cli("show", bundle, "--markdown", "--output", out, "--append", "--public-key", public)
    assert (appended.exit_code, appended.output) == (0, f"appended to {out}\n")
    both = out.read_text()
    assert both.startswith(md) and both.count("## Qualification report") == 2
    assert "**Signature:** verified with the given public key (keyid" in both[len(md):]
    assert cli("show", bundle, "--append").exit_code == 2  # --append needs --output


def test_claims_markdown_is_docs_claims_md():
    result = cli("claims", "--markdown")
    assert result.output == claims_markdown(CLAIMS)
    assert (ROOT / "docs" / "claims.md").read_text() == result.output, \
        "docs/claims.md is stale: laya-qual claims --markdown > docs/claims.md"
    assert all(f"`{cid}`" in result.output for cid in CLAIMS)


@pytest.mark.slow
def test_run_signs_verifies_and_summarizes(tmp_path, monkeypatch):
    """The main command end to end (suite deselected to stay fast): dev key made on
    first use, bundle written, verified, summarized; non-zero exit when pytest was."""
    monkeypatch.chdir(tmp_path)
    for var in ("LAYA_QUAL_SIGNING_KEY", *(k for k in os.environ if k.startswith("PYTEST_XDIST_"))):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    dev = tmp_path / "cache" / "laya-qual" / "dev-key"
    result = cli("run", "--workers", "0", "--", "-k", "no_test_is_called_this", "-q")
    # the development-key notices go to stderr (progress), stdout holds the summary only
    assert f"created development key {dev}" in result.stderr and "created development key" not in result.stdout
    assert "SIGNING WITH THE DEVELOPMENT KEY" in result.stderr
    [bundle] = (tmp_path / "reports").glob("qualification-*.intoto.jsonl")
    assert f"bundle    reports/{bundle.name}" in result.output
    assert f"signature verified with {dev}.pub" in result.output
    assert "DEVELOPMENT key" in result.output
    assert "\n\n\n" not in result.stdout  # one blank line between parts
    assert result.stdout.endswith(f"--public-key {dev}.pub\nWARNING   {DEV_KEY_NOTE}\n")  # the verdict, last
    assert result.exit_code != 0  # nothing ran: pytest exit 5, and the report is WARNED
    assert stat.S_IMODE(dev.stat().st_mode) == 0o600
    # no key in the project: the bundle, and the durations store that balances later shards and plans
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [".laya-qual", bundle.name]
    assert [p.name for p in (tmp_path / "reports" / ".laya-qual").iterdir()] == ["durations.json"]
    assert cli("verify", bundle, "--public-key", f"{dev}.pub").exit_code == 0
    assert "DEVELOPMENT KEY" in cli("verify", bundle, "--public-key", f"{dev}.pub").output


RELEASES = ROOT / "reports" / "releases"
# The weakest result a committed release report may carry.
RELEASE_RESULT = "PASSED"


def test_committed_release_reports_verify_with_their_keys():
    """Every bundle under reports/releases/ verifies with the public key next to it, was
    not signed with a development key, and names no local path."""
    bundles = sorted(RELEASES.glob("*.intoto.jsonl"))
    assert bundles, "reports/releases/ has no release report"
    for bundle in bundles:
        public = bundle.with_name(bundle.name.removesuffix(".intoto.jsonl") + ".pub")
        result = cli("verify", bundle, "--public-key", public, "--require-result", RELEASE_RESULT,
                     "--require-claim", "report.signature", "--require-claim", "report.verdicts", "--json")
        verdict = json.loads(result.output)
        assert result.exit_code == 0 and verdict["accepted"], verdict
        assert verdict["required"] == {"result": RELEASE_RESULT, "claims": ["report.signature", "report.verdicts"]}
        assert verdict["developmentKey"] is False
        text = "\n".join(payload.decode() for _, payload in read_statements(bundle))
        for local in ("/home/", "/root/", "/tmp/", "/work/", "/Users/", str(ROOT)):
            assert local not in text, (bundle.name, local)
        summary = bundle.with_name(bundle.name.removesuffix(".intoto.jsonl") + ".md")
        shown = cli("show", bundle, "--public-key", public, "--markdown")
        assert shown.exit_code == 0 and shown.output == summary.read_text(), f"{summary.name} is not `show --markdown`"


def test_the_catalogue_keeps_the_order_of_the_released_claims():
    """A report lists its claims in catalogue order (docs/report-format.md, F-report.claims) and
    `laya-qual claims` lists them so: every committed release report lists the claims it shares
    with the catalogue in the catalogue's order (a reordered catalogue would make `laya-qual compare`
    against those releases say the claim catalogue differs with no claim added or changed)."""
    assert [c["id"] for c in json.loads(cli("claims", "--json").output)] == list(CLAIMS)
    for bundle in sorted(RELEASES.glob("*.intoto.jsonl")):
        [released] = [[c["id"] for c in s["predicate"]["claims"]] for s, _ in read_statements(bundle)
                      if "claims" in s["predicate"]]
        assert [cid for cid in released if cid in CLAIMS] == [cid for cid in CLAIMS if cid in released], bundle.name


@pytest.mark.parametrize("seconds, shown", [(2.5, "2.5 s"), (1.0, "1 s"), (0.0125, "12.5 ms"), (3e-6, "3 µs"),
                                            (5e-10, "0.5 ns"), (0.0, "0 ns")])
def test_durations_are_shown_in_the_largest_unit_they_reach(seconds, shown):
    from laya_qual.report.summary import duration

    assert duration(seconds) == shown


def test_claims_are_listed_unknown_verdicts_first_then_failures_then_the_rest():
    """A verdict this harness does not know (a newer report's) is the most alarming row."""
    from laya_qual.report.summary import failures_first

    claims = [{"id": i, "verdict": v} for i, v in
              enumerate(["passed", "not evaluated", "failed", "someday", "passed", "failed"])]
    assert [c["id"] for c in failures_first(claims)] == [3, 2, 5, 1, 0, 4]


LAYA_QUAL = [sys.executable, "-c", "from laya_qual.cli import main; main()"]


def show_limited(args: list, limit: int) -> subprocess.CompletedProcess:
    """`laya-qual show` as a process that may write files of at most ``limit`` bytes (a full
    disk, as the writer sees one: EFBIG once a write would pass it)."""
    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.run([*LAYA_QUAL, "show", *map(str, args)], capture_output=True,
                          text=True, preexec_fn=limited, timeout=120)


@pytest.mark.parametrize("append", [False, True], ids=["output", "append"])
def test_show_output_on_a_full_disk_keeps_the_old_file_and_says_so_in_one_line(real, tmp_path, append):
    """Before: --output truncated the old file and left the 4 KiB the disk took of the new
    one; --append left half an appended summary. Now the new file is written beside and
    renamed, so the old one stays whole, and the OS error is one `Error:` line."""
    bundle, _, _ = real
    out = tmp_path / "summary.md"
    old = "previous summary\n" * 100
    out.write_text(old)
    run = show_limited([bundle, "--markdown", "--output", out, *(["--append"] if append else [])], len(old) + 64)
    assert run.returncode == 1 and run.stdout == "", run.stderr
    assert run.stderr.startswith("Error: cannot write") and len(run.stderr.splitlines()) == 1, run.stderr
    assert out.read_text() == old and sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_bundle_that_is_not_a_regular_file_is_refused_at_once(tmp_path, kind):
    """Before: /dev/zero ended in a MemoryError traceback and a FIFO no one writes blocked forever."""
    path = {"fifo": tmp_path / "fifo", "dev-zero": Path("/dev/zero")}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    run = subprocess.run([*LAYA_QUAL, "show", str(path)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1 and len(run.stderr.splitlines()) == 1 and run.stderr.startswith("Error: "), run.stderr
    assert "not a regular file" in run.stderr, run.stderr
