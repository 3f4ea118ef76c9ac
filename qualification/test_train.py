"""Training claims: the frozen feature store's identity, export parity, warm starts,
temperature fitting, the certified bound, and calibration that stays per head.

One small synthetic task is encoded once per session (``trained``); the
statistical claims run on closed-form simulations and need no model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

import laya
from laya.artifact import read_artifact_files
from laya.calibration import fit_temperature
from laya.certify import binomial_cdf, certify, sequence_start
from laya.dataset import DatasetError, Example, split_indices
from laya.features import FeatureStoreMismatch, load_store
from laya.pipeline import train_artifact
from laya.scoring import option_scores, readout
from laya.training import TrainConfig, TrainingError, train_head, warm_start
from laya_qual.synth import replace_pinned_file, seeds
from laya_qual.synth.tasks import synthetic_task

SIZES = {"train": 150, "dev_cal": 100, "dev_conf": 200}
CONFIG = TrainConfig(seed=0, epochs=40)
TARGET_RISK, DELTA = 0.2, 0.05


class Trained:
    """One synthetic task on one base, its store, and a float32 and an int8 head trained from it."""

    def __init__(self, root: Path, base_dir: Path):
        self.root, self.base_dir = root, base_dir
        self.base = laya.load_artifact_base(base_dir)
        records = synthetic_task(self.base, seed=0, sizes=SIZES)
        self.examples = [Example(r["id"], r["split"], laya.Request.from_json(
            {k: r[k] for k in ("task", "question", "options")}), r.get("label"), None) for r in records]
        self.rendered = [self.base.render(e.request) for e in self.examples]
        self.splits = split_indices(self.examples, [r.token_ids for r in self.rendered])
        self.store_path = root / "store.safetensors"
        self.runs = {kind: self.train(f"head-{kind}", kind=kind) for kind in ("float32", "int8")}
        self.store = load_store(self.store_path, self.base, self.rendered)

    def train(self, name: str, **options):
        options = {"config": CONFIG, "target_risk": TARGET_RISK, "delta": DELTA, **options}
        return train_artifact(base_dir=self.base_dir, examples=self.examples, out_dir=self.root / name,
                              store_path=self.store_path, **options)


@pytest.fixture(scope="session")
def trained(tmp_path_factory, artifact_factory) -> Trained:
    base_dir = artifact_factory(seed=21, head_kind="float32", base_seed=21)
    return Trained(tmp_path_factory.mktemp("train"), base_dir)


def file_digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(directory).iterdir())}


# --- feature store identity ----------------------------------------------------------


def _edit_json(data: bytes, key: str, change) -> bytes:
    obj = json.loads(data)
    obj[key] = change(obj[key])
    return json.dumps(obj).encode()


def _perturb_one_weight(data: bytes) -> bytes:
    tensors = load_safetensors(data)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] += 1e-3
    return save_safetensors(tensors)


BASE_EDITS = {  # one consistent change per pinned base file, dimensions unchanged
    "encoder_config": lambda data: _edit_json(data, "layer_norm_eps", lambda eps: eps * 2),
    "encoder_weights": _perturb_one_weight,
    "tokenizer": lambda data: _edit_json(data, "normalizer", lambda n: {**n, "lowercase": not n["lowercase"]}),
    "special_tokens": lambda data: _edit_json(data, "option_markers", lambda m: [m[1], m[0], *m[2:]]),
    "sequence_format": lambda data: _edit_json(data, "state_position", lambda p: {
        "after_options": "after_question"}.get(p, "after_options")),
}


def _edited_base(trained: Trained, tmp_path: Path, role: str) -> laya.VerifiedBase:
    directory = tmp_path / "base"
    shutil.copytree(trained.base_dir, directory)
    replace_pinned_file(directory, role, BASE_EDITS[role](read_artifact_files(directory)[role].data))
    return laya.load_artifact_base(directory)


@pytest.mark.laya_claim("train.store.identity")
@pytest.mark.parametrize("field", sorted(BASE_EDITS))
def test_store_refuses_another_base(trained, tmp_path, field):
    """A store is refused for a base differing in one pinned file, naming that field."""
    other = _edited_base(trained, tmp_path, field)
    with pytest.raises(FeatureStoreMismatch) as refused:
        load_store(trained.store_path, other, trained.rendered)
    assert refused.value.field == field, str(refused.value)


@pytest.mark.laya_claim("train.store.identity")
@pytest.mark.parametrize("field", ["kernel", "numeric_profile", "sequences", "features"])
def test_store_refuses_other_kernel_profile_sequences_or_bytes(trained, tmp_path, monkeypatch, field):
    base, rendered, path = trained.base, list(trained.rendered), trained.store_path
    if field == "kernel":
        base = laya.load_artifact_base(trained.base_dir)
        base.identity = hashlib.sha256(b"another encoder kernel").hexdigest()
    elif field == "numeric_profile":
        monkeypatch.setattr(torch, "get_num_threads", lambda: 7)
    elif field == "sequences":
        ids = list(rendered[3].token_ids)
        ids[1] = (ids[1] + 1) % trained.base.config.vocab_size  # one question token differs
        rendered[3] = dataclasses.replace(rendered[3], token_ids=tuple(ids))
    else:
        data = bytearray(path.read_bytes())
        data[-5] ^= 0x01
        path = tmp_path / "flipped.safetensors"
        path.write_bytes(bytes(data))
    with pytest.raises(FeatureStoreMismatch) as refused:
        load_store(path, base, rendered)
    assert refused.value.field == field, str(refused.value)
    monkeypatch.undo()
    assert load_store(trained.store_path, trained.base, trained.rendered).sequences == trained.store.sequences


# --- export parity -------------------------------------------------------------------


@pytest.mark.laya_claim("train.export.parity")
@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_exported_head_parity(trained, kind):
    """Standalone and shared predictions are bitwise equal, and both equal what the
    certifier judged from the store; the runtime acts exactly on the certified set."""
    run = trained.runs[kind]
    directory = Path(run.head.source)
    standalone = laya.load_artifact(directory)
    shared = laya.open_adapters({"trained": directory}, base=trained.base_dir, cache_bytes=1 << 22)
    tensors = {"readout." + k: v for k, v in standalone._weights.module.readout.state_dict().items()}
    module = readout(kind, tensors)
    task = standalone.tasks["answer"]
    assert task.certification is not None and task.certification.certified, task
    for i in trained.splits["dev_conf"]:
        request = trained.examples[i].request
        alone, together = standalone.predict(request), shared.predict("trained", request)
        assert torch.equal(torch.tensor(alone.probabilities), torch.tensor(together.probabilities))
        judged = torch.softmax(option_scores(module, trained.store.markers[i], task.index) / task.temperature, dim=0)
        assert torch.equal(torch.tensor(alone.probabilities), judged)
        assert alone.decision == together.decision == ("act" if max(alone.probabilities) >= task.act_threshold
                                                      else "escalate")
    acted = sum(shared.predict("trained", trained.examples[i].request).decision == "act"
                for i in trained.splits["dev_conf"])
    assert acted == task.certification.acted


# --- warm starts ---------------------------------------------------------------------


@pytest.mark.laya_claim("train.warmstart.clone")
@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_warm_start_clones_its_source(trained, kind):
    directory = Path(trained.runs[kind].head.source)
    before = file_digests(directory)
    source = laya.load_artifact_with_base(directory, trained.base)
    request = trained.examples[trained.splits["dev_conf"][0]].request
    expected = source.predict(request)
    initial = warm_start(source)
    source_tensors = list(source._weights.module.state_dict().values())
    for tensor in (initial.weight, initial.bias):
        assert all(tensor.untyped_storage().data_ptr() != t.untyped_storage().data_ptr() for t in source_tensors)
    trained_further = train_head(trained.store, trained.examples, trained.splits["train"], initial,
                                 TrainConfig(seed=1, epochs=3))
    assert not torch.equal(trained_further.weight, initial.weight)
    source._weights.check_unmodified()
    assert torch.equal(torch.tensor(source.predict(request).probabilities), torch.tensor(expected.probabilities))
    assert file_digests(directory) == before


@pytest.mark.laya_claim("train.warmstart.refuse-transformer")
def test_warm_start_refuses_transformer_heads(trained, artifact_factory, tmp_path):
    transformer = artifact_factory(seed=5, head_kind="transformer", base_dir=trained.base_dir,
                                   tasks=[{"name": "answer", "max_options": 2, "temperature": 1.0,
                                           "act_threshold": 0.5, "escalate_threshold": 1.0}])
    head = laya.load_artifact_with_base(transformer, trained.base)
    with pytest.raises(TrainingError) as refused:
        warm_start(head)
    assert refused.value.field == "warm_start" and "transformer" in str(refused.value)
    with pytest.raises(TrainingError):
        trained.train("never-written", warm_start_dir=transformer)
    assert not (trained.root / "never-written").exists()


# --- temperature ---------------------------------------------------------------------


@pytest.mark.laya_claim("train.temperature.nll")
@given(seed=seeds(), options=st.integers(2, 4), factor=st.sampled_from([0.2, 0.35, 3.0, 5.0]))
def test_temperature_fit_lowers_nll_of_a_miscalibrated_head(seed, options, factor):
    """Labels drawn from softmax(z); the head serves z * factor: over- or under-confident.
    The fit lowers the served NLL and moves T to the side of 1 that undoes the factor."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 1.5, size=(300, options))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    labels = [int(rng.choice(options, p=row)) for row in p]
    fit = fit_temperature([torch.tensor(row * factor, dtype=torch.float32) for row in z], labels)
    assert fit.nll_after < fit.nll_before, fit
    assert (fit.temperature > 1.0) == (factor > 1.0), fit


@pytest.mark.laya_claim("train.temperature.nll")
def test_temperature_fit_recalibrates_a_trained_head(trained):
    """The trained readout made 4x overconfident: refitting on dev_cal brings NLL down."""
    run = trained.runs["float32"]
    tensors = {"readout.weight": run.trained.weight * 4, "readout.bias": run.trained.bias * 4}
    module = readout("float32", tensors)
    cal = trained.splits["dev_cal"]
    fit = fit_temperature([option_scores(module, trained.store.markers[i], 0) for i in cal],
                          [trained.examples[i].label for i in cal])
    assert fit.nll_after < fit.nll_before and fit.temperature > 1.0, fit


# --- certified bound -----------------------------------------------------------------

DRAWS, SIM_RISK, SIM_DELTA, SLOPE = 200, 0.1, 0.1, 0.6
FALSE_ALARM = 1e-3


def true_risk(threshold: float) -> float:
    """Selective risk of the simulated head: confidence ~ U(0.3, 1), P(error | c) = SLOPE * (1 - c)."""
    low = max(threshold, 0.3)
    return SLOPE * (1 - low) / 2 if low < 1 else 0.0


def draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    confidences = rng.uniform(0.3, 1.0, size=n)
    return confidences, rng.uniform(size=n) >= SLOPE * (1 - confidences)


@pytest.mark.laya_claim("train.certify.bound")
def test_certified_bound_holds_in_simulation():
    """Over DRAWS independent (dev_cal, dev_conf) draws from a known distribution, the
    certified threshold's true acted error exceeds the target in V draws. If the
    guarantee holds, V <= Binomial(DRAWS, SIM_DELTA) stochastically, and this test fails
    only when P[Binomial(DRAWS, SIM_DELTA) >= V] < FALSE_ALARM: a false-alarm rate of at
    most 0.1% for a correct certifier. It also requires that most draws certify
    something, so a certifier that never acts cannot pass vacuously."""
    rng = np.random.default_rng(0)
    violations = certified = 0
    for _ in range(DRAWS):
        cal_conf, cal_correct = draw(rng, 300)
        conf, correct = draw(rng, 600)
        start = sequence_start(cal_conf, cal_correct, len(conf), target_risk=SIM_RISK, delta=SIM_DELTA)
        cert = certify(conf, correct, target_risk=SIM_RISK, delta=SIM_DELTA, start=start)
        if cert.certified:
            certified += 1
            violations += true_risk(cert.threshold) > SIM_RISK
            assert cert.risk_upper_bound <= SIM_RISK
    tail = 1.0 - float(binomial_cdf(violations - 1, DRAWS, SIM_DELTA)) if violations else 1.0
    assert tail >= FALSE_ALARM, f"{violations}/{DRAWS} certified thresholds violate the target (tail p={tail:.2e})"
    assert certified >= DRAWS // 2, f"only {certified}/{DRAWS} draws certified anything"
    print(f"{certified}/{DRAWS} draws certified, {violations} violated the target")


@pytest.mark.laya_claim("train.certify.bound")
def test_uncertifiable_task_escalates_everything(trained):
    """A target no head could meet: nothing is certified, head.json says so, and the
    served head escalates every request, even ones it is sure about."""
    run = trained.train("impossible", target_risk=1e-4)
    task = run.head.tasks["answer"]
    assert not run.tasks["answer"].certificate.certified and not task.certification.certified
    assert task.act_threshold == math.inf
    decisions = {run.head.predict(trained.examples[i].request).decision for i in trained.splits["dev_conf"]}
    assert decisions == {"escalate"}


# --- splits and privacy --------------------------------------------------------------


@pytest.mark.laya_claim("train.splits.disjoint")
@pytest.mark.parametrize("overlap", ["id", "tokens"])
def test_splits_must_be_disjoint(trained, overlap):
    examples = list(trained.examples)
    cal, conf = trained.splits["dev_cal"][0], trained.splits["dev_conf"][0]
    if overlap == "id":
        examples[conf] = Example(examples[cal].id, "dev_conf", examples[conf].request, examples[conf].label, None)
    else:
        examples[conf] = Example(examples[conf].id, "dev_conf", examples[cal].request, examples[cal].label, None)
    sequences = [trained.base.render(e.request).token_ids for e in examples]
    with pytest.raises(DatasetError) as refused:
        split_indices(examples, sequences)
    assert refused.value.field == ("id" if overlap == "id" else "split")


@pytest.mark.laya_claim("train.calibration.private")
def test_calibration_and_thresholds_stay_per_head(trained):
    """A second head for the same task name, trained from the same store on flipped
    labels, gets its own temperature, threshold and certificate; the first head's files,
    metadata and predictions are untouched, standalone or served side by side."""
    first = Path(trained.runs["float32"].head.source)
    before = file_digests(first)
    flipped = [Example(e.id, e.split, e.request, 1 - e.label, None) if e.split == "train" else e
               for e in trained.examples]
    second = train_artifact(base_dir=trained.base_dir, examples=flipped, out_dir=trained.root / "flipped",
                            store_path=trained.store_path, config=CONFIG, target_risk=0.45, delta=DELTA)
    assert second.store_reused
    assert file_digests(first) == before
    mine, theirs = laya.load_artifact(first).tasks["answer"], second.head.tasks["answer"]
    assert (mine.temperature, mine.act_threshold, mine.certification) != (
        theirs.temperature, theirs.act_threshold, theirs.certification)
    served = laya.open_adapters({"a": first, "b": second.head.source}, base=trained.base)
    assert served.heads["a"].tasks["answer"] == mine and served.heads["b"].tasks["answer"] == theirs
    standalone = {"a": laya.load_artifact(first), "b": laya.load_artifact(second.head.source)}
    for i in trained.splits["dev_conf"][:20]:
        request = trained.examples[i].request
        for adapter_id, model in standalone.items():
            alone = model.predict(request)
            together = served.predict(adapter_id, request)
            assert torch.equal(torch.tensor(alone.probabilities), torch.tensor(together.probabilities))
            assert alone.decision == together.decision
