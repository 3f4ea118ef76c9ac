"""Mistakes a release engineer makes in the first hour, each refused before the first test
runs: a real subprocess (`python -m pytest -p laya_qual`, `laya-qual`), its exit code, its
one-line message naming the option and the fix, and that no test ran (laya_qual.plugin.preflight)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from laya_qual.synth import write_artifact

# No test may have started: pytest refused the command line before collecting.
LAYA_QUAL = str(Path(sys.executable).with_name("laya-qual"))
QUICK_S = 30.0  # a refusal takes about a second; generous for a shared, loaded machine


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST_", "LAYA_QUAL_SIGNING"))}
    return {**env, "XDG_CACHE_HOME": str(tmp_path / "cache")}


def refused(cwd: Path, *args, pytest_run: bool = True, rc: int | None = None) -> str:
    """Run it, check it stopped at once with its usage exit code; return its one message line."""
    command = ([sys.executable, "-m", "pytest", "-p", "laya_qual", "-p", "no:cacheprovider"] if pytest_run
               else [LAYA_QUAL])
    started = time.monotonic()
    proc = subprocess.run([*command, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          env=clean_env(cwd), timeout=120)
    took = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode == (rc if rc is not None else 4 if pytest_run else 2), out
    assert took < QUICK_S, f"took {took:.1f} s: {out}"
    assert "Traceback" not in out and "collected" not in out and "passed" not in out, out
    [line] = [line for line in proc.stderr.splitlines() if line.startswith(("ERROR: ", "Error: "))]
    return line


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """A head, the same head missing its weights, a base-only artifact and a key pair."""
    root = tmp_path_factory.mktemp("preflight")
    head = write_artifact(root / "head", seed=3, head_kind="float32")
    weightless = root / "weightless"
    shutil.copytree(head, weightless)
    (weightless / "head.safetensors").unlink()
    base = root / "base"
    shutil.copytree(head, base)
    manifest = json.loads((base / "manifest.json").read_text())
    manifest["files"] = [f for f in manifest["files"] if f["role"] not in ("head_config", "head_weights")]
    (base / "manifest.json").write_text(json.dumps(manifest))
    for name in ("head.json", "head.safetensors"):
        (base / name).unlink()
    subprocess.run([LAYA_QUAL, "keygen", root / "key"], check=True, capture_output=True)
    subprocess.run([LAYA_QUAL, "keygen", root / "other"], check=True, capture_output=True)
    return {"head": head, "weightless": weightless, "base": base, "key": root / "key", "other": root / "other"}


@pytest.mark.slow
def test_artifact_paths_are_checked_before_collection(tmp_path, made):
    (tmp_path / "afile").write_text("x")
    q = "--laya-qualify"
    assert refused(tmp_path, q, "--laya-artifact", "MISSING") == (
        "ERROR: --laya-artifact MISSING: no such directory; give a head artifact directory "
        "(one laya wrote, with manifest.json)")
    assert refused(tmp_path, q, "--laya-artifact", "afile").startswith(
        "ERROR: --laya-artifact afile: a file, not a directory")
    assert refused(tmp_path, q, "--laya-artifact", tmp_path) == (
        f"ERROR: --laya-artifact {tmp_path}: no manifest.json in it, so not a laya artifact; "
        "give a head artifact directory laya wrote")
    assert refused(tmp_path, q, "--laya-artifact", made["weightless"]) == (
        f"ERROR: --laya-artifact {made['weightless']}: head.safetensors (role head_weights) missing, "
        "though manifest.json lists it; restore the artifact")
    assert refused(tmp_path, q, "--laya-artifact", made["base"]).startswith(
        f"ERROR: --laya-artifact {made['base']}: manifest.json lists no head (head_config, head_weights): "
        "a base-only artifact; give it as --laya-base")
    assert refused(tmp_path, q, "--laya-artifact", made["head"], "--laya-base", "nobase").startswith(
        "ERROR: --laya-base nobase: no such directory; give the base artifact directory")
    # the ini key is checked as the option is
    (tmp_path / "pytest.ini").write_text("[pytest]\nlaya_artifacts = gone\n")
    assert refused(tmp_path, "--laya-report", "r.intoto.jsonl").startswith(
        f"ERROR: --laya-artifact {tmp_path / 'gone'}: no such directory")


@pytest.mark.slow
def test_report_path_and_key_are_checked_before_collection(tmp_path, made):
    (tmp_path / "afile").write_text("x")
    assert refused(tmp_path, "--laya-report", tmp_path) == (
        f"ERROR: --laya-report {tmp_path}: a directory; give the bundle's file name "
        f"(e.g. {tmp_path / 'report.intoto.jsonl'})")
    assert refused(tmp_path, "--laya-report", "afile/r.intoto.jsonl") == (
        "ERROR: --laya-report afile/r.intoto.jsonl: afile is a file, so no folder can be made there; "
        "choose another path")
    assert refused(tmp_path, "--laya-report", "r.intoto.jsonl", "--laya-signing-key", "nokey") == (
        "ERROR: --laya-signing-key nokey: cannot read private key (No such file or directory); "
        "give a PEM private key file or a signer URI")
    assert refused(tmp_path, "--laya-signing-key", made["key"]) == (
        f"ERROR: --laya-signing-key {made['key']} signs the --laya-report bundle, and there is none: "
        "add --laya-report PATH (or drop the key)")


@pytest.mark.slow
def test_a_claims_pattern_naming_no_claim_is_refused(tmp_path):
    assert refused(tmp_path, "--laya-claims", "cahce") == (
        "ERROR: --laya-claims cahce: matches no claim (did you mean cache?); see `laya-qual claims`")
    assert refused(tmp_path, "--laya-claims", "cache,report.nosuch").startswith(
        "ERROR: --laya-claims report.nosuch: matches no claim")


def test_run_checks_its_options_before_pytest_starts(tmp_path, made):
    """`laya-qual run`: exit 2 (bad command line) before the suite pass, not 4 after it."""
    assert refused(tmp_path, "run", "--artifact", "MISSING", pytest_run=False).startswith(
        "Error: --artifact MISSING: no such directory")
    assert refused(tmp_path, "run", "--base", made["head"] / "head.json", pytest_run=False).startswith(
        f"Error: --base {made['head'] / 'head.json'}: a file, not a directory")
    assert refused(tmp_path, "run", "--key", tmp_path / "nokey", pytest_run=False) == (
        f"Error: --key {tmp_path / 'nokey'}: no such file; give a PEM private key file "
        "(`laya-qual keygen KEY` writes KEY and KEY.pub) or a signer URI")
    lone = tmp_path / "lone"
    shutil.copyfile(made["key"], lone)
    assert refused(tmp_path, "run", "--key", lone, pytest_run=False) == (
        f"Error: --key {lone}: {lone}.pub: cannot read public key (No such file or directory); "
        "keep its public key KEY.pub beside KEY (laya-qual keygen writes both)")
    shutil.copyfile(f"{made['other']}.pub", f"{lone}.pub")
    assert refused(tmp_path, "run", "--key", lone, pytest_run=False).startswith(
        f"Error: --key {lone}: {lone}.pub is not its public key")
    (tmp_path / "afile").write_text("x")
    assert refused(tmp_path, "run", "--key", made["key"], "--out", "afile/r.intoto.jsonl", pytest_run=False) == (
        "Error: --out afile/r.intoto.jsonl: afile is a file, so no folder can be made there; choose another path")
    assert refused(tmp_path, "run", "--key", made["key"], "--kill-rate", "none.json", pytest_run=False) == (
        "Error: --kill-rate none.json: no such file; give a results file `laya-qual mutate` wrote")
    assert not (tmp_path / "reports").exists()  # nothing ran, nothing written


@pytest.mark.slow
def test_verify_require_claim_naming_no_claim_is_a_usage_error(tmp_path, made):
    """A misspelled --require-claim is a bad command line (2), not a rejected report (3)."""
    bundle = tmp_path / "r.intoto.jsonl"
    (tmp_path / "test_one.py").write_text(
        "import pytest\n@pytest.mark.laya_claim('report.verdicts')\ndef test_one():\n    pass\n")
    subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "-q", "test_one.py", "--laya-report", bundle,
                    "--laya-signing-key", made["key"]], cwd=tmp_path, env=clean_env(tmp_path), capture_output=True)
    assert refused(tmp_path, "verify", bundle, "--public-key", f"{made['key']}.pub", "--require-claim",
                   "report.verdict", pytest_run=False) == (
        "Error: --require-claim report.verdict: no such claim (did you mean report.verdicts?); "
        "see `laya-qual claims`")
