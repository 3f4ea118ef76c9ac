"""artifact.limits, weights files: a weights file above its role's limit is refused naming
the file before a byte of it is read; one at the limit is read (and hashed) like any other.

Oracle: the limits table of docs/artifact-v1.md, copied here as numbers. The files are
sparse (the manifest's size matches, the disk holds almost nothing), and every load runs
in one child process whose address space is capped, after its imports, at what it already
maps plus ``HEADROOM``: a loader that read an oversized file whole would die of it there
instead of taking the machine's memory, and the child reports how much its peak resident
memory grew (the kernel's VmHWM, restarted before each load). The encoder's 16 GiB limit is shown above the limit only (reading 16 GiB to
show the boundary would take half a minute); the head's 256 MiB is shown on both sides.

A weights file under its limit is held once (loading rule 5: read once into the buffer the
tensors are views of): loading a valid 96 MiB encoder, after one small load has paid for
what any first load costs, grows peak memory by at most a quarter more than the file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from laya_qual.synth import pinned_path

LIMITS = {"encoder_weights": 16 << 30, "head_weights": 256 << 20}
HEADROOM = 192 << 20  # bytes of address space the child may add while loading; under every limit
CASES = {"encoder-above": ("encoder_weights", 1), "head-above": ("head_weights", 1), "head-at": ("head_weights", 0)}
# 8 layers of width 512 (feed-forward 2048): 25.2M float32 parameters, about 96 MiB.
WIDE = {"hidden_size": 512, "num_layers": 8, "num_heads": 8, "intermediate_size": 2048, "max_positions": 128}
HELD_ONCE = 1.25  # peak growth over the file's size: the tensors and the load's own small change
CHILD = r"""
import json, resource, sys
import numpy, torch
import laya, laya.serving.loading
torch.ones(4, 4) @ torch.ones(4, 4)  # thread pools and BLAS buffers mapped before the cap

def status(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(field + ":"))

def reset_peak():
    # Peak resident memory from here on (VmHWM restarts at VmRSS). Not getrusage's
    # ru_maxrss: a child keeps the peak of the process it was forked from, pytest's.
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")

results = {}
for name, directory, capped in json.loads(sys.argv[1]):
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (status("VmSize") + int(sys.argv[2]) if capped else hard, hard))
    reset_peak()
    before = status("VmRSS")
    try:
        laya.load_artifact(directory)
        outcome = {"error": None}
    except MemoryError:
        outcome = {"error": "MemoryError"}
    except laya.errors.LayaError as refused:
        outcome = {"error": type(refused).__name__, "file": refused.file, "message": str(refused)}
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    outcome["rss_growth"] = status("VmHWM") - before
    results[name] = outcome
print(json.dumps(results))
"""


def sparse_weights(directory, destination, role: str, size: int):
    """``directory`` copied, with ``role``'s file extended (sparsely) to ``size`` bytes and the
    manifest's size set to match; its sha256 pin is left as it was."""
    shutil.copytree(directory, destination)
    os.truncate(destination / pinned_path(destination, role), size)
    manifest = json.loads((destination / "manifest.json").read_text())
    next(e for e in manifest["files"] if e["role"] == role)["size"] = size
    (destination / "manifest.json").write_text(json.dumps(manifest, sort_keys=True, separators=(",", ":")))
    return destination


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, artifact_factory):
    directory = artifact_factory(seed=0, head_kind="float32")
    wide = artifact_factory(seed=0, head_kind="float32", **WIDE)
    jobs = [("warm-up", str(directory), False), ("wide", str(wide), False)]
    for name, (role, over) in CASES.items():
        copy = sparse_weights(directory, tmp_path_factory.mktemp(name) / "a", role, LIMITS[role] + over)
        jobs.append((name, str(copy), over > 0))
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(jobs), str(HEADROOM)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout), {name: pinned_path(copy, CASES[name][0]) for name, copy, _ in jobs
                                     if name in CASES}, (wide / pinned_path(wide, "encoder_weights")).stat().st_size


@pytest.mark.laya_claim("artifact.limits")
@pytest.mark.parametrize("case", ["encoder-above", "head-above"])
def test_a_weights_file_above_its_limit_is_refused_before_it_is_read(outcomes, case):
    results, files, _ = outcomes
    outcome, limit = results[case], LIMITS[CASES[case][0]]
    assert outcome["error"] == "ArtifactError" and outcome["file"] == files[case], outcome
    assert f"limit for this file is {limit}" in outcome["message"], outcome
    assert outcome["rss_growth"] < 64 << 20, f"peak memory grew {outcome['rss_growth']} bytes: the file was read"


@pytest.mark.laya_claim("artifact.limits")
def test_a_weights_file_at_its_limit_is_read_and_its_pin_checked(outcomes):
    """At exactly 256 MiB the head's file passes the size check and is read and hashed: the
    refusal is its sha256 pin (left at the original file's), not the limit."""
    results, files, _ = outcomes
    outcome = results["head-at"]
    assert outcome["error"] == "DigestMismatch" and outcome["file"] == files["head-at"], outcome
    assert "sha256" in outcome["message"] and "limit" not in outcome["message"], outcome


@pytest.mark.laya_claim("artifact.limits")
def test_a_weights_file_is_held_once(outcomes):
    """Before, the file's bytes were copied once whole and once tensor by tensor, and the
    finiteness check made a float temporary the size of the largest tensor: about 2.9 times
    the file."""
    results, _, size = outcomes
    assert results["wide"]["error"] is None, results["wide"]
    assert results["wide"]["rss_growth"] <= HELD_ONCE * size, \
        f"loading a {size}-byte encoder grew peak memory {results['wide']['rss_growth']} bytes"
