"""Training claims: the frozen feature store's identity, export parity, warm starts,
temperature fitting, the certified bound, and calibration that stays per head.

One small synthetic task is encoded once per session (``trained``); the
statistical claims run on closed-form simulations and need no model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import math
import pkgutil
import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

import laya
from laya.artifact.manifest import read_artifact_files
from laya.training.calibration import fit_temperature
from laya.training.dataset import Example, read_dataset, split_indices
from laya.errors import DatasetError, FeatureStoreMismatch, TrainingError
from laya.training.features import load_store
from laya.training.pipeline import train_artifact
from laya.training.scoring import option_scores, readout
from laya.training.train_cli import _summary
from laya.training.head_training import TrainConfig, initial_head, train_head, warm_start
from laya_qual.suite.calibration_oracle import (MIN_DEV_CAL, TEMPERATURE_BOUNDS, bounded_minimiser,
                                               pinned_bytes, readout_row, reference_nll,
                                               reference_temperature)
from laya_qual.suite.test_train_certify import reference_certify, reference_start
from laya_qual.synth import replace_pinned_file, seeds
from laya_qual.synth.tasks import synthetic_task

SIZES = {"train": 150, "dev_cal": 100, "dev_conf": 200}
TRIAGE_SIZES = {"train": 150, "dev_cal": 80, "dev_conf": 160}  # other sizes: a split mix-up shows in the counts
CONFIG = TrainConfig(seed=0, epochs=40)
TARGET_RISK, DELTA = 0.2, 0.05


class Trained:
    """Two synthetic tasks (two and three options) on one base, their store, and a float32
    and an int8 head, each serving both tasks, trained from it."""

    def __init__(self, root: Path, base_dir: Path):
        self.root, self.base_dir = root, base_dir
        self.base = laya.load_artifact_base(base_dir)
        records = (synthetic_task(self.base, seed=0, sizes=SIZES)
                   + synthetic_task(self.base, seed=1, task="triage", classes=3, sizes=TRIAGE_SIZES, label_noise=0.05))
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
    tensors = load_safetensors(bytes(data))
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
@pytest.mark.parametrize("field", ["kernel", "numeric_profile", "sequences", "marker_positions", "features"])
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
    elif field == "marker_positions":  # the same token ids, one marker read one position later
        positions = list(rendered[3].marker_positions)
        positions[0] += 1
        rendered[3] = dataclasses.replace(rendered[3], marker_positions=tuple(positions))
    else:
        data = bytearray(path.read_bytes())
        data[-5] ^= 0x01
        path = tmp_path / "flipped.safetensors"
        path.write_bytes(bytes(data))
    with pytest.raises(FeatureStoreMismatch) as refused:
        load_store(path, base, rendered)
    assert (refused.value.field, refused.value.file) == (field, str(path)), str(refused.value)
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
    assert standalone.tasks["answer"].certification.certified, standalone.tasks["answer"]
    acted = dict.fromkeys(standalone.tasks, 0)
    for i in trained.splits["dev_conf"]:
        request = trained.examples[i].request
        task = standalone.tasks[request.task]
        alone, together = standalone.predict(request), shared.predict("trained", request)
        assert torch.equal(torch.tensor(alone.probabilities), torch.tensor(together.probabilities))
        judged = torch.softmax(option_scores(module, trained.store.markers[i], task.index) / task.temperature, dim=0)
        assert torch.equal(torch.tensor(alone.probabilities), judged)
        assert alone.decision == together.decision == ("act" if max(alone.probabilities) >= task.act_threshold
                                                      else "escalate")
        acted[request.task] += together.decision == "act"
    assert acted == {name: task.certification.acted for name, task in standalone.tasks.items()}


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
    # the readout the artifact's bytes hold (docs/artifact-v1.md: an int8 row is q * scale)
    saved = load_safetensors(bytes(read_artifact_files(directory)["head_weights"].data))
    dequantized = saved["readout.weight_int8"].to(torch.float32) * saved["readout.weight_scale"][:, None] \
        if kind == "int8" else saved["readout.weight"]
    assert torch.equal(initial.weight, dequantized) and torch.equal(initial.bias, saved["readout.bias"])
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
    assert str(refused.value).startswith(f"field warm_start: head {head.source} has "), str(refused.value)
    with pytest.raises(TrainingError):
        trained.train("never-written", warm_start_dir=transformer)
    assert not (trained.root / "never-written").exists()


@pytest.mark.laya_claim("train.warmstart.tasks")
def test_warm_start_from_a_head_without_a_dataset_task_is_refused(trained, artifact_factory):
    """The dataset has tasks answer and triage; a head with answer alone cannot start them."""
    single = artifact_factory(seed=6, head_kind="float32", base_dir=trained.base_dir,
                              tasks=[{"name": "answer", "max_options": 3, "temperature": 1.0,
                                      "act_threshold": 0.5, "escalate_threshold": 1.0}])
    with pytest.raises(TrainingError) as refused:
        trained.train("never-written-tasks", warm_start_dir=single)
    assert refused.value.field == "task" and "'triage'" in str(refused.value) and "['answer']" in str(refused.value)
    assert not (trained.root / "never-written-tasks").exists()


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
    cal = [i for i in trained.splits["dev_cal"] if trained.examples[i].request.task == "answer"]
    fit = fit_temperature([option_scores(module, trained.store.markers[i], 0) for i in cal],
                          [trained.examples[i].label for i in cal])
    assert fit.nll_after < fit.nll_before and fit.temperature > 1.0, fit


def _split(rows: list[list[float]], labels: list[int]) -> tuple[list[torch.Tensor], list[int]]:
    return [torch.tensor(r, dtype=torch.float32) for r in rows], labels


@st.composite
def calibration_splits(draw) -> tuple[list[torch.Tensor], list[int]]:
    """Scores of n examples (some below the minimum) with labels drawn from the scores' own
    softmax, equal to their top option (separable), or top but for one error."""
    n, k = draw(st.integers(5, 120)), draw(st.integers(2, 4))
    rng = np.random.default_rng(draw(seeds()))
    scores = [torch.tensor(row, dtype=torch.float32) for row in rng.normal(0.0, 1.5, size=(n, k))
              * draw(st.sampled_from([0.3, 1.0, 4.0]))]
    labels = [int(s.argmax()) for s in scores]
    kind = draw(st.sampled_from(["drawn", "separable", "one error"]))
    if kind == "drawn":
        labels = [int(rng.choice(k, p=torch.softmax(s.double(), dim=0).numpy())) for s in scores]
    elif kind == "one error":
        labels[0] = int(scores[0].argsort(descending=True)[1])
    return scores, labels


@pytest.mark.laya_claim("train.temperature.separable")
@given(split=calibration_splits())
@example(split=_split([[0.5, 0.0]] * 40 + [[1e-3, 0.0]], [0] * 40 + [1]))  # minimum below 1/16: the lower bound
@example(split=_split([[1.0, 0.0]] * 40, [0, 1] * 20))  # labels ignore the scores: the upper bound
@example(split=_split([[1.0, 0.0, 0.5]] * 40, [0] * 40))  # separable
@example(split=_split([[1.0, 0.0]] * 29, [0] * 28 + [1]))  # one short of the minimum
@example(split=_split([[1.0, 0.0]] * 30, [0] * 27 + [1] * 3))  # just enough: fitted
def test_temperature_follows_the_documented_rule(split):
    """fit_temperature equals the documented rule computed with scipy: fewer than 30 examples
    or a separable split keep T = 1 and say so; otherwise T is the float64 NLL minimiser over
    [1/16, 16], exactly the bound when the minimum lies at or beyond it. The served T never
    leaves the interval."""
    scores, labels = split
    fit = fit_temperature(scores, labels)
    expected, outcome = reference_temperature(scores, labels)
    assert TEMPERATURE_BOUNDS[0] <= fit.temperature <= TEMPERATURE_BOUNDS[1], fit
    if fit.outcome == "not_better":  # the float32 served NLL lost to T = 1: only where the fit barely helps
        assert outcome in ("fitted", "at_lower_bound", "at_upper_bound") and fit.temperature == 1.0, fit
        assert reference_nll(scores, labels, 1.0) - reference_nll(scores, labels, expected) < 1e-6, (fit, expected)
        return
    assert fit.outcome == outcome, (fit, expected, outcome)
    if outcome == "fitted":
        assert reference_nll(scores, labels, fit.temperature) <= reference_nll(scores, labels, expected) + 1e-9
        assert math.isclose(fit.temperature, expected, rel_tol=1e-3), (fit, expected)
    else:
        assert fit.temperature == expected, (fit, expected)
    assert (fit.warning is None) == (outcome == "fitted"), fit


@pytest.fixture(scope="module")
def separable_run(trained, tmp_path_factory):
    """The two-task float32 head trained again from the same store and seed with every dev_cal
    label replaced by the head's own top option (float64 from its bytes): training reads only
    train, so the head is the same and its dev_cal is separable."""
    first = Path(trained.runs["float32"].head.source)
    names = [t["name"] for t in json.loads(pinned_bytes(first, "head_config"))["tasks"]]
    examples = list(trained.examples)
    for i in trained.splits["dev_cal"]:
        weight, bias = readout_row(first, names.index(examples[i].request.task))
        top = int((trained.store.markers[i].double() @ weight + bias).argmax())
        examples[i] = Example(examples[i].id, "dev_cal", examples[i].request, top, None)
    run = train_artifact(base_dir=trained.base_dir, examples=examples, out_dir=tmp_path_factory.mktemp("separable"),
                         store_path=trained.store_path, config=CONFIG, target_risk=TARGET_RISK, delta=DELTA)
    assert pinned_bytes(run.head.source, "head_weights") == pinned_bytes(first, "head_weights")
    return run, examples


def _summary_of(run, capsys) -> dict[str, str]:
    _summary(run, str(run.head.source))
    out = capsys.readouterr().out
    return {name: out.split(f"task {name}\n")[1].split("\ntask ")[0].split("\nartifact ")[0] for name in run.tasks}


@pytest.mark.laya_claim("train.temperature.separable")
def test_separable_dev_cal_is_not_fitted_and_says_so(trained, separable_run, capsys):
    """On a separable dev_cal the NLL alone would drive T to the lower bound (scipy on the
    head's bytes); the head keeps T = 1, head.json records outcome "separable" with the
    documented bounds and minimum, and the summary warns, for each task. The same head on
    its ordinary dev_cal is fitted and the summary does not warn."""
    run, examples = separable_run
    directory = Path(run.head.source)
    summary = _summary_of(run, capsys)
    for index, entry in enumerate(json.loads(pinned_bytes(directory, "head_config"))["tasks"]):
        cal = [i for i in trained.splits["dev_cal"] if examples[i].request.task == entry["name"]]
        weight, bias = readout_row(directory, index)
        scores, labels = [trained.store.markers[i].double() @ weight + bias for i in cal], [examples[i].label for i in cal]
        assert math.isclose(bounded_minimiser(scores, labels), TEMPERATURE_BOUNDS[0], rel_tol=1e-6)
        assert reference_temperature(scores, labels) == (1.0, "separable")
        calibration = entry["calibration"]
        assert (entry["temperature"], entry["certification"]["temperature"]) == (1.0, 1.0), entry
        assert (calibration["outcome"], calibration["temperature_min"], calibration["temperature_max"],
                calibration["min_examples"]) == ("separable", *TEMPERATURE_BOUNDS, MIN_DEV_CAL), calibration
        assert "WARNING" in summary[entry["name"]] and "separable" in summary[entry["name"]], summary
        assert (f"  temperature  1.0000  (dev_cal, {len(cal)} examples: separable; bounds "
                f"[{TEMPERATURE_BOUNDS[0]:g}, {TEMPERATURE_BOUNDS[1]:g}], fitted from {MIN_DEV_CAL} examples)\n"
                ) in summary[entry["name"]], summary
    ordinary = trained.runs["float32"]
    recorded = {t["name"]: t for t in json.loads(pinned_bytes(Path(ordinary.head.source), "head_config"))["tasks"]}
    for name, text in _summary_of(ordinary, capsys).items():
        assert ordinary.tasks[name].fit.outcome == "fitted" and "WARNING" not in text, text
        assert f"  temperature  {recorded[name]['temperature']:.4f}  (dev_cal, " in text and "examples: fitted;" in text
        # the reported NLL and ECE, before and after, are head.json's (the ECE checked against its bins elsewhere)
        fit = recorded[name]["calibration"]
        assert (f"  NLL          {fit['nll_before']:.4f} -> {fit['nll_after']:.4f}\n"
                f"  ECE          {fit['ece_before']:.4f} -> {fit['ece_after']:.4f}\n") in text, text
        cert = recorded[name]["certification"]  # and the threshold line: head.json's threshold and dev_conf size
        assert (f"  threshold    act when top probability >= {recorded[name]['act_threshold']:g}  (certified on "
                f"dev_conf, {cert['examples']} examples)\n" if cert["certified"] else
                "  threshold    NONE certified for target ") in text, text


@pytest.mark.laya_claim("train.temperature.separable")
def test_separable_head_serves_unsaturated_probabilities(trained, separable_run):
    """Every dev_cal and dev_conf request, to the head whose dev_cal was separable, is served
    probabilities strictly between 0 and 1 (at the bound 1/16, over a third round to 1.0).
    No temperature can promise this for any input: it holds while the head's own score gap
    stays below 16 (docs/training.md)."""
    run, _ = separable_run
    for i in trained.splits["dev_cal"] + trained.splits["dev_conf"]:
        served = run.head.predict(trained.examples[i].request).probabilities
        assert 0.0 < min(served) and max(served) < 1.0, (trained.examples[i].id, served)


# --- certified bound -----------------------------------------------------------------

@pytest.mark.laya_claim("train.certify.bound")
def test_uncertifiable_task_escalates_everything(trained):
    """A target no head could meet: nothing is certified, head.json says so, and the
    served head escalates every request, even ones it is sure about."""
    run = trained.train("impossible", target_risk=1e-4)
    for name, task in run.head.tasks.items():
        assert not run.tasks[name].certificate.certified and not task.certification.certified
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


def assert_unchangeable(value, where: str) -> int:
    """Try to edit every part of a parsed configuration in place: each dataclass field and
    each mapping entry must refuse; tuples and scalars cannot be edited. Returns the parts tried."""
    tried = 0
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            part = getattr(value, f.name)
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(value, f.name, part)
            tried += 1 + assert_unchangeable(part, f"{where}.{f.name}")
    elif isinstance(value, tuple):
        tried += sum(assert_unchangeable(part, f"{where}[{i}]") for i, part in enumerate(value))
    elif isinstance(value, Mapping):
        for key, part in value.items():
            with pytest.raises(TypeError):
                value[key] = part  # type: ignore[index]
            tried += 1 + assert_unchangeable(part, f"{where}[{key!r}]")
    else:
        assert isinstance(value, (str, int, float, type(None))), f"{where} is a {type(value).__name__}"
    return tried


@pytest.mark.laya_claim("train.calibration.private")
def test_what_a_head_hands_out_cannot_change_what_it_serves(trained):
    """A head's parsed configuration (its tasks' temperatures, thresholds, calibration with its
    reliability bins, certification with its path) and its base's are handed out as they are
    served, so no part of them can be edited in place; `tasks` is a copy. Each task's result the
    training run returns (its temperature fit and certificate) is as unchangeable as what it wrote."""
    run = trained.runs["float32"]
    head = run.head
    request = trained.examples[trained.splits["dev_conf"][0]].request
    before = head.predict(request)
    tried = assert_unchangeable(head.config, "head.config") + assert_unchangeable(head.base.config, "base.config")
    assert tried > 100  # two tasks' bins and paths among them
    results = sum(assert_unchangeable(result, f"run.tasks[{task!r}]") for task, result in run.tasks.items())
    assert results > 2 * 20  # two tasks' fits and certificates with their paths
    head.tasks.clear()
    after = head.predict(request)
    assert (after.probabilities, after.decision) == (before.probabilities, before.decision)


@pytest.mark.laya_claim("train.calibration.private")
def test_every_dataclass_the_runtime_defines_is_frozen():
    """docs/decisions.md (Immutability): a value laya hands out is never a live view of what it
    serves. Every dataclass of every runtime module is frozen, whichever caller gets it."""
    defined = {}
    for module in pkgutil.walk_packages(laya.__path__, "laya."):
        namespace = vars(importlib.import_module(module.name))
        defined |= {f"{module.name}.{name}": value for name, value in namespace.items()
                    if isinstance(value, type) and value.__module__ == module.name and dataclasses.is_dataclass(value)}
    assert len(defined) >= 33 and "laya.serving.config.HeadConfig" in defined, sorted(defined)  # the walk found them
    assert [name for name, cls in sorted(defined.items()) if not cls.__dataclass_params__.frozen] == []


@pytest.mark.laya_claim("train.calibration.private")
def test_calibration_and_thresholds_stay_per_head(trained, tmp_path):
    """A second head for the same task name, trained from the same store on flipped
    labels, gets its own temperature, threshold and certificate; the first head's files,
    metadata and predictions are untouched, standalone or served side by side."""
    first = Path(trained.runs["float32"].head.source)
    before = file_digests(first)
    flipped = [Example(e.id, e.split, e.request, (e.label + 1) % len(e.request.options), None)
               if e.split == "train" else e for e in trained.examples]
    second = train_artifact(base_dir=trained.base_dir, examples=flipped, out_dir=tmp_path / "flipped",
                            store_path=trained.store_path, config=CONFIG, target_risk=0.45, delta=DELTA)
    assert second.store_reused
    assert file_digests(first) == before
    mine, theirs = laya.load_artifact(first).tasks["answer"], second.head.tasks["answer"]
    assert (mine.temperature, mine.act_threshold, mine.certification) != (
        theirs.temperature, theirs.act_threshold, theirs.certification)
    served = laya.open_adapters({"a": first, "b": second.head.source}, base=trained.base)
    assert served.heads["a"].tasks == laya.load_artifact(first).tasks
    assert served.heads["b"].tasks == second.head.tasks
    standalone = {"a": laya.load_artifact(first), "b": laya.load_artifact(second.head.source)}
    for i in trained.splits["dev_conf"][:20]:
        request = trained.examples[i].request
        for adapter_id, model in standalone.items():
            alone = model.predict(request)
            together = served.predict(adapter_id, request)
            assert torch.equal(torch.tensor(alone.probabilities), torch.tensor(together.probabilities))
            assert alone.decision == together.decision


# --- provenance: which split each task's numbers came from --------------------------


def split_sha256(trained: Trained, indices: list[int]) -> str:
    """The documented split digest: sha256 of the compact JSON [[id, token ids, label], ...]."""
    rows = [[trained.examples[i].id, list(trained.rendered[i].token_ids), trained.examples[i].label] for i in indices]
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


@pytest.mark.laya_claim("train.provenance")
@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_each_task_is_fitted_on_its_own_splits(trained, kind):
    """For every task of a two-task head, recomputed from head.json's bytes and the served
    probabilities: the temperature is the NLL minimiser on that task's dev_cal alone (float64,
    scipy, the documented interval and rules, the outcome recorded), the act threshold and
    certificate are the fixed-sequence result on that task's dev_conf (start chosen on its
    dev_cal), and the split names, sizes and digests say so."""
    directory = Path(trained.runs[kind].head.source)
    model = laya.load_artifact(directory)
    for index, entry in enumerate(json.loads(pinned_bytes(directory, "head_config"))["tasks"]):
        name = entry["name"]
        cal, conf = ([i for i in trained.splits[split] if trained.examples[i].request.task == name]
                     for split in ("dev_cal", "dev_conf"))
        weight, bias = readout_row(directory, index)
        temperature, outcome = reference_temperature([trained.store.markers[i].double() @ weight + bias for i in cal],
                                                     [trained.examples[i].label for i in cal])
        assert math.isclose(entry["temperature"], temperature, rel_tol=1e-4), (name, entry["temperature"], temperature)
        calibration, certification = entry["calibration"], entry["certification"]
        assert (calibration["outcome"], calibration["temperature_min"], calibration["temperature_max"],
                calibration["min_examples"]) == (outcome, *TEMPERATURE_BOUNDS, MIN_DEV_CAL), calibration
        assert (calibration["split"], calibration["examples"], calibration["split_sha256"]) == (
            "dev_cal", len(cal), split_sha256(trained, cal))
        assert (certification["split"], certification["examples"], certification["split_sha256"]) == (
            "dev_conf", len(conf), split_sha256(trained, conf))

        def judged(indices):
            served = [model.predict(trained.examples[i].request).probabilities for i in indices]
            return ([max(p) for p in served],
                    [p.index(max(p)) == trained.examples[i].label for p, i in zip(served, indices)])

        start = reference_start(*judged(cal), len(conf), TARGET_RISK, DELTA)
        expected, tie = reference_certify(*judged(conf), TARGET_RISK, DELTA, start)
        assert not tie, "a p-value sits on delta: pick another dataset seed"
        if expected is None:
            assert (certification["certified"], entry["act_threshold"], certification["acted"]) == (False, 1.0, 0)
            continue
        threshold, acted, errors = expected
        assert certification["certified"] and entry["act_threshold"] == threshold, (name, entry, expected)
        assert (certification["acted"], certification["errors"]) == (acted, errors)
        assert certification["coverage"] == acted / len(conf)


# --- soft targets ----------------------------------------------------------------------


def reference_adam(features: list[torch.Tensor], targets: list[torch.Tensor], rows: list[int], weight: torch.Tensor,
                   lr: float, batches: list[list[int]]) -> torch.Tensor:
    """Adam (torch's documented update, betas 0.9/0.999, eps 1e-8) in float64, one step per
    batch (positions into ``features``) on the batch's *mean* cross-entropy against the
    targets; returns the readout weights. The bias is left out: a task's options share it, so
    softmax ignores it and its gradient is zero."""
    w = weight.double().clone()
    m, v = torch.zeros_like(w), torch.zeros_like(w)
    for t, batch in enumerate(batches, start=1):
        grad = torch.zeros_like(w)
        for j in batch:
            p = torch.softmax(features[j].double() @ w[rows[j]], dim=0)
            grad[rows[j]] += (p - targets[j]) @ features[j].double() / len(batch)  # d(-sum t log p)/d s = p - t
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad ** 2
        w = w - lr * (m / (1 - 0.9 ** t)) / ((v / (1 - 0.999 ** t)).sqrt() + 1e-8)
    return w


@pytest.mark.laya_claim("train.soft-targets")
@given(shares=st.lists(st.lists(st.floats(0.05, 1.0), min_size=3, max_size=3), min_size=8, max_size=8))
def test_soft_targets_are_the_cross_entropy_targets(trained, shares):
    """Train examples of both tasks get drawn soft targets (never one-hot); a few full-batch
    Adam steps equal an independent float64 computation: the trainer minimises cross-entropy
    against the whole target distribution, not its argmax."""
    indices = [i for task in ("answer", "triage")
               for i in [j for j in trained.splits["train"] if trained.examples[j].request.task == task][:4]]
    examples = list(trained.examples)
    targets = []
    for i, share in zip(indices, shares):
        k = len(examples[i].request.options)
        target = torch.tensor(share[:k], dtype=torch.float64) / sum(share[:k])
        targets.append(target)
        examples[i] = Example(examples[i].id, "train", examples[i].request, None, tuple(target.tolist()))
    initial = initial_head(("answer", "triage"), trained.base.hidden_size, seed=3)
    config = TrainConfig(seed=0, epochs=4, batch_size=len(indices), learning_rate=0.01)
    got = train_head(trained.store, examples, indices, initial, config).weight
    rows = [("answer", "triage").index(examples[i].request.task) for i in indices]
    expected = reference_adam([trained.store.markers[i] for i in indices], targets, rows, initial.weight, 0.01,
                              [list(range(len(indices)))] * 4)
    assert torch.allclose(got.double(), expected, atol=1e-4, rtol=0), float((got.double() - expected).abs().max())


def documented_batches(n: int, batch_size: int, epochs: int, seed: int) -> list[list[int]]:
    """docs/training.md's order: per epoch, torch.randperm(n) from one CPU generator seeded
    with the seed, cut into runs of batch_size (the last one shorter)."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(epochs):
        order = torch.randperm(n, generator=generator).tolist()
        batches += [order[i:i + batch_size] for i in range(0, n, batch_size)]
    return batches


@pytest.mark.laya_claim("train.minibatch")
@given(n=st.integers(3, 9), batch_size=st.integers(1, 8), epochs=st.integers(1, 3), seed=seeds(),
       soft=st.booleans())
@example(n=8, batch_size=3, epochs=2, seed=0, soft=False)  # batches of 3, 3 and 2: the mean is not the sum
@example(n=5, batch_size=5, epochs=1, seed=1, soft=True)   # one full batch
def test_every_minibatch_step_is_adam_on_the_batch_mean(trained, n, batch_size, epochs, seed, soft):
    """Mini-batches in the documented order, the last one shorter, each one Adam step on its
    examples' mean cross-entropy: the trained readout equals the float64 reference step for step
    (a loss summed over the batch, or batches in another order, weighs the steps otherwise)."""
    indices = [j for j in trained.splits["train"]][:n]
    examples = list(trained.examples)
    targets = []
    for number, i in enumerate(indices):
        k = len(examples[i].request.options)
        if soft:
            target = torch.arange(1, k + 1, dtype=torch.float64).roll(number) / (k * (k + 1) / 2)
            examples[i] = Example(examples[i].id, "train", examples[i].request, None, tuple(target.tolist()))
        else:
            target = torch.nn.functional.one_hot(torch.tensor(examples[i].label), k).double()
        targets.append(target)
    tasks = ("answer", "triage")
    initial = initial_head(tasks, trained.base.hidden_size, seed=3)
    config = TrainConfig(seed=seed, epochs=epochs, batch_size=batch_size, learning_rate=0.01)
    got = train_head(trained.store, examples, indices, initial, config).weight
    rows = [tasks.index(examples[i].request.task) for i in indices]
    expected = reference_adam([trained.store.markers[i] for i in indices], targets, rows, initial.weight, 0.01,
                              documented_batches(n, batch_size, epochs, seed))
    assert torch.allclose(got.double(), expected, atol=1e-4, rtol=0), float((got.double() - expected).abs().max())


# --- reproducibility -------------------------------------------------------------------


@pytest.mark.laya_claim("train.reproducible")
def test_same_inputs_and_seed_export_the_same_bytes(trained):
    """Training twice from the same dataset, store and seed exports byte-identical files;
    another seed changes the weights (so the comparison can fail)."""
    runs = [trained.train(f"again-{n}", config=TrainConfig(seed=seed, epochs=3), kind="int8")
            for n, seed in enumerate((5, 5, 6))]
    first, second, other = (file_digests(Path(run.head.source)) for run in runs)
    assert first == second
    assert first["head.safetensors"] != other["head.safetensors"]


# --- dataset parsing -------------------------------------------------------------------


def _record(**changes) -> dict:
    record = {"id": "x", "split": "train", "task": "t", "question": "q", "options": ["a", "b"], "label": 0}
    record.update(changes)
    return {k: v for k, v in record.items() if v is not None}


BAD_LINES = {  # what is wrong -> (the line's bytes, the field the refusal must name; None: the line itself)
    "not JSON": (b'{"id": "x",', None),
    "not UTF-8": (b'{"id": "\xff"}', None),
    "not an object": (b"[1, 2]", None),
    "nested past the parser": (b"[" * 100_000 + b"]" * 100_000, None),
    "unknown field": (json.dumps(_record(extra=1)).encode(), "extra"),
    "empty id": (json.dumps(_record(id="")).encode(), "id"),
    "unknown split": (json.dumps(_record(split="test")).encode(), "split"),
    "label out of range": (json.dumps(_record(label=2)).encode(), "label"),
    "boolean label": (json.dumps(_record(label=True)).encode(), "label"),
    "label and target": (json.dumps(_record(target=[0.5, 0.5])).encode(), "label"),
    "soft target off train": (json.dumps(_record(split="dev_cal", label=None, target=[0.5, 0.5])).encode(), "target"),
    "target not summing to 1": (json.dumps(_record(label=None, target=[0.2, 0.2])).encode(), "target"),
    "target of wrong length": (json.dumps(_record(label=None, target=[1.0])).encode(), "target"),
    "one option": (json.dumps(_record(options=["only"])).encode(), "options"),
    "question not a string": (json.dumps(_record(question=3)).encode(), "question"),
}


@pytest.mark.laya_claim("train.dataset.parse")
@pytest.mark.parametrize("bad", sorted(BAD_LINES))
@given(before=st.integers(0, 5), blanks=st.integers(0, 2))
@example(before=0, blanks=0)
def test_bad_dataset_lines_are_refused_by_line_and_field(tmp_path_factory, bad, before, blanks):
    """A bad line among good ones (and blank lines, which count) is refused with
    DatasetError naming its 1-based line number and the offending field."""
    line, field = BAD_LINES[bad]
    good = [json.dumps(_record(id=f"g{n}")).encode() for n in range(before)]
    lines = good + [b""] * blanks + [line, json.dumps(_record(id="after")).encode()]
    path = tmp_path_factory.mktemp("dataset") / "data.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(DatasetError) as refused:
        read_dataset(path)
    assert (refused.value.line, refused.value.field) == (before + blanks + 1, field), str(refused.value)
