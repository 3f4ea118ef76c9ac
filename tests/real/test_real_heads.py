"""Heads of every kind on the imported real base: standalone and shared agree bitwise,
the cache serves the same numbers, and a head pinned to another base is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import laya
from laya.artifact.manifest import BASE_ROLES, read_artifact_files
from laya.errors import PinMismatch
from laya_qual.synth import write_artifact

KINDS = ("float32", "int8", "transformer")
REQUESTS = (
    laya.Request("answer", "Which animal barks at strangers?", ("a dog", "a goldfish", "a cactus")),
    laya.Request("triage", "Is the payment service down?", ("yes, page the on-call engineer", "no"),
                 state="The monitoring dashboard shows errors on every node since 9am."),
    laya.Request("answer", "What do you use to write on a blackboard?", ("chalk", "a spoon", "a pillow", "soup")),
)


@pytest.fixture(scope="module")
def real_heads(imported_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("real-heads")
    return {kind: write_artifact(root / kind, seed=11, head_kind=kind, base_dir=imported_dir) for kind in KINDS}


def as_tensor(prediction: laya.Prediction) -> torch.Tensor:
    return torch.tensor(prediction.probabilities, dtype=torch.float64)  # float64 holds every float exactly


@pytest.mark.parametrize("kind", KINDS)
def test_standalone_and_shared_agree_bitwise(kind, real_heads, real_base):
    standalone = laya.load_artifact(real_heads[kind])
    assert standalone.base.pins == real_base.pins
    shared = laya.load_artifact_with_base(real_heads[kind], real_base)
    for request in REQUESTS:
        a, b = standalone.predict(request), shared.predict(request)
        assert torch.equal(as_tensor(a), as_tensor(b)), request
        assert (a.decision, a.head_digest) == (b.decision, b.head_digest)


def test_heads_carry_the_imported_base_files_byte_for_byte(real_heads, imported_dir, real_base):
    base = read_artifact_files(imported_dir, require_head=False)
    for directory in real_heads.values():
        head = read_artifact_files(directory)
        assert all(head[role].data == base[role].data for role in BASE_ROLES)
    assert laya.load_artifact_base(real_heads["int8"], imported_dir).pins == real_base.pins


def test_cached_states_serve_every_head_the_standalone_numbers(real_heads, real_base):
    adapters = laya.open_adapters({kind: real_heads[kind] for kind in KINDS}, base=real_base, cache_bytes=64 << 20)
    request = REQUESTS[0]
    served = [adapters.predict(kind, request) for kind in KINDS]
    stats = adapters.cache_stats()
    assert (stats.misses, stats.hits, stats.entries) == (1, 2, 1)
    for kind, prediction in zip(KINDS, served):
        assert torch.equal(as_tensor(prediction), as_tensor(laya.load_artifact_with_base(real_heads[kind], real_base)
                                                            .predict(request)))


def test_a_head_for_the_synthetic_base_is_refused_on_the_real_base(real_base, tmp_path):
    synthetic = write_artifact(tmp_path / "synthetic", seed=7, head_kind="float32", base_seed=1)
    with pytest.raises(PinMismatch) as refused:
        laya.load_artifact_with_base(synthetic, real_base)
    assert refused.value.pin == "depth" and refused.value.file == "encoder_config.json"
    assert real_base.pins["encoder_config"] in str(refused.value)
