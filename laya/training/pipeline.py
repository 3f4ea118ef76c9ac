"""The whole training lifecycle for one head: feature store, zero-layer training,
per-task temperature on dev_cal, per-task certified threshold on dev_conf, export.

Everything a task's calibration and threshold depend on is computed for that
task of this head alone (with dev_cal's reliability diagrams and every threshold the
certification tested, for a reader to see), on the exported (possibly int8) readout, and written
into this head's own head.json: nothing is shared with, or read from, any other
head.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Sequence

from laya.artifact.manifest import require_new_artifact_dir
from laya.training.calibration import METHOD as CALIBRATION_METHOD
from laya.training.calibration import MIN_EXAMPLES, T_BOUNDS, TemperatureFit, fit_temperature, served_probabilities
from laya.training.thresholds import METHOD, Certificate, certify, sequence_start
from laya.serving.config import Calibration, Certification
from laya.training.dataset import Example, split_digest, split_indices
from laya.errors import TrainingError
from laya.training.export import export_head, head_tensors, task_entry
from laya.training.features import FeatureStore, build_store, load_store, save_store
from laya.serving.loading import Head, load_artifact_base, load_artifact_with_base
from laya.training.scoring import option_scores, readout
from laya.training.head_training import LinearHead, TrainConfig, initial_head, train_head, warm_start

# progress(label, total) -> a context manager whose value has .update(n); click.progressbar fits.
Progress = Callable[[str, int], ContextManager[Any]]


@dataclass(frozen=True)
class TaskResult:
    name: str
    fit: TemperatureFit
    certificate: Certificate


@dataclass(frozen=True)
class TrainingRun:
    head: Head  # the export, attached to the base the features came from
    store_path: Path
    store_reused: bool
    trained: LinearHead
    train_examples: int
    tasks: dict[str, TaskResult]


class _Silent:
    def update(self, n: int) -> None:
        pass


def _silent(label: str, total: int) -> ContextManager[Any]:
    return contextlib.nullcontext(_Silent())


def train_artifact(*, base_dir: str | os.PathLike, examples: Sequence[Example], out_dir: str | os.PathLike,
                   store_path: str | os.PathLike, kind: str = "float32", config: TrainConfig = TrainConfig(),
                   target_risk: float = 0.1, delta: float = 0.05, warm_start_dir: str | os.PathLike | None = None,
                   sequence_budget: int | None = None, progress: Progress = _silent) -> TrainingRun:
    require_new_artifact_dir(out_dir)  # before minutes of feature extraction, not at export
    base = load_artifact_base(base_dir)
    rendered = [base.render(e.request) for e in examples]
    sequences = [r.token_ids for r in rendered]
    splits = split_indices(examples, sequences)
    store_path = Path(store_path)
    reused = store_path.exists()
    if reused:
        store = load_store(store_path, base, rendered)
    else:
        with progress("encoding frozen features", len(rendered)) as bar:
            store = build_store(base, rendered, progress=bar.update)
        save_store(store, store_path)

    if warm_start_dir is not None:
        initial = warm_start(load_artifact_with_base(warm_start_dir, base))
    else:
        initial = initial_head(sorted({e.request.task for e in examples}), base.hidden_size, config.seed)
    for task in initial.tasks:
        for split in ("dev_cal", "dev_conf"):
            if not any(examples[i].request.task == task for i in splits[split]):
                raise TrainingError(f"task {task!r} has no {split} examples; every task of a head is calibrated "
                                    "and certified afresh", field=split)
    with progress("training readout", config.epochs) as bar:
        trained = train_head(store, examples, splits["train"], initial, config, progress=bar.update)

    tensors = head_tensors(trained, kind)
    module = readout(kind, tensors)
    entries, results = [], {}
    for row, task in enumerate(trained.tasks):
        cal = [i for i in splits["dev_cal"] if examples[i].request.task == task]
        conf = [i for i in splits["dev_conf"] if examples[i].request.task == task]
        result = _calibrate_and_certify(store, examples, module, row, task, cal, conf, target_risk, delta)
        results[task] = result
        cert = result.certificate
        entries.append(task_entry(
            task, max(len(examples[i].request.options) for i in cal + conf), result.fit.temperature,
            cert.threshold if cert.certified else 1.0,
            Calibration("dev_cal", split_digest(examples, sequences, cal), len(cal), CALIBRATION_METHOD,
                        result.fit.nll_before, result.fit.nll_after, result.fit.ece_before, result.fit.ece_after,
                        *T_BOUNDS, MIN_EXAMPLES, result.fit.outcome, result.fit.reliability_before,
                        result.fit.reliability_after),
            Certification("dev_conf", split_digest(examples, sequences, conf), len(conf), METHOD, target_risk, delta,
                          cert.certified, cert.acted, cert.errors, cert.coverage, cert.risk_upper_bound,
                          result.fit.temperature, cert.path)))
    option_budget = max(e["max_options"] for e in entries)
    head = export_head(out_dir, base_dir=base_dir, base=base, kind=kind, tensors=tensors, tasks=entries,
                       sequence_budget=sequence_budget or base.config.max_position_embeddings,
                       option_budget=option_budget)
    return TrainingRun(head, store_path, reused, trained, len(splits["train"]), results)


def _calibrate_and_certify(store: FeatureStore, examples: Sequence[Example], module, row: int, task: str,
                           cal: list[int], conf: list[int], target_risk: float, delta: float) -> TaskResult:
    fit = fit_temperature([option_scores(module, store.markers[i], row) for i in cal],
                          [examples[i].label for i in cal])

    def judged(indices: list[int]) -> tuple[list[float], list[bool]]:
        probabilities = served_probabilities([option_scores(module, store.markers[i], row) for i in indices],
                                             fit.temperature)
        return ([float(p.max()) for p in probabilities],
                [int(p.argmax()) == examples[i].label for p, i in zip(probabilities, indices)])

    cal_conf, cal_correct = judged(cal)
    confidences, correct = judged(conf)
    start = sequence_start(cal_conf, cal_correct, len(conf), target_risk=target_risk, delta=delta)
    return TaskResult(task, fit, certify(confidences, correct, target_risk=target_risk, delta=delta, start=start))
