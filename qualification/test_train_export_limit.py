"""train.export.limit: a trained head whose head.json would exceed the 1 MiB limit is refused
before anything is written (the recorded pictures cost up to about 46 KB a task:
docs/artifact-v1.md). The oracle is the size of the written head.json itself, read back."""

from __future__ import annotations

import pytest

import laya
from laya.serving.config import Calibration, Certification, ReliabilityBin, ThresholdTest
from laya.errors import ArtifactError
from laya.training.export import export_head, head_tensors, task_entry
from laya.training.head_training import initial_head
from laya_qual.synth import write_artifact

LIMIT = 1 << 20  # docs/artifact-v1.md, Limits: 1 MiB for each JSON file of an artifact
BINS = tuple(ReliabilityBin(i / 15, (i + 1) / 15, 4, (i + 0.5) / 15, 0.75) for i in range(15))
ECE = sum(b.count / 60 * abs(b.accuracy - b.confidence) for b in BINS)
PATH = tuple(ThresholdTest((216 - j) / 216, 10_000 + j, 1_000 + j, 0.0987654321012345 + j / 1e6) for j in range(217))


def entry(name: str) -> dict:
    last = PATH[-1]
    return task_entry(name, 2, 1.0, last.threshold,
                      Calibration("dev_cal", "0" * 64, 60, "temperature-nll-bounded", 0.5, 0.5, ECE, ECE,
                                  1 / 16, 16.0, 30, "not_better", BINS, BINS),
                      Certification("dev_conf", "0" * 64, 20_000, "clopper-pearson-fixed-sequence", 0.1, 0.05, True,
                                    last.acted, last.errors, last.acted / 20_000, last.risk_upper_bound, 1.0, PATH))


@pytest.mark.laya_claim("train.export.limit")
@pytest.mark.parametrize("tasks, written", [(22, True), (24, False)])
def test_head_json_over_the_limit_is_refused_before_writing(tmp_path, tasks, written):
    base_dir = write_artifact(tmp_path / "base", seed=2, head_kind="float32", base_seed=31)
    base = laya.load_artifact_base(base_dir)
    names = [f"task-{i}" for i in range(tasks)]
    out = tmp_path / "head"
    export = lambda: export_head(out, base_dir=base_dir, base=base, kind="float32",  # noqa: E731
                                 tensors=head_tensors(initial_head(names, base.hidden_size, 0), "float32"),
                                 tasks=[entry(n) for n in names], sequence_budget=16, option_budget=2)
    if written:
        assert sorted(export().tasks) == sorted(names)
        assert (out / "head.json").stat().st_size <= LIMIT  # the written file itself is within the limit
        assert sorted(laya.load_artifact(out).tasks) == sorted(names)
        return
    with pytest.raises(ArtifactError) as refused:
        export()
    assert refused.value.file == "head.json" and "1048576-byte limit" in str(refused.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base"]
