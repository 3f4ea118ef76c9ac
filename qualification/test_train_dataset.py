"""train.dataset.parse through the wire form: a dataset line (docs/training.md,
"Dataset"), each field changed alone in the JSON text; and train.splits.complete: a
dataset read from JSONL text with an empty split, or a task missing from dev_cal or
dev_conf, is refused.

Oracle: the field list of docs/training.md, copied here (never read from laya): every
field given each JSON type the doc does not allow is refused naming that field and the
line; a required field left out is refused naming it; the optional `state` is accepted
present and absent; an unknown field is refused naming it; target entries outside [0, 1]
or boolean are refused even when they sum to 1. Values of a wrong type are drawn by
``laya_qual.synth.wire``; each type's boundary value (``true`` for an integer, ``1.0``
for an integer, ...) is tried on every run as well.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from laya.training.dataset import parse_example
from laya.errors import DatasetError
from laya_qual.synth.wire import BOUNDARY, of_type, wrong_types


HARD = {"id": "x", "split": "train", "task": "t", "question": "q", "options": ["a", "b"], "label": 0}
SOFT = {"id": "x", "split": "train", "task": "t", "question": "q", "options": ["a", "b"], "target": [0.5, 0.5]}

# field -> (documented type, the record it is changed in, the field a refusal names).
# A field inside a list is written "name[0]"; a refusal of a target entry names `target`.
DATASET_FIELDS = {
    "id": ("string", HARD, "id"),
    "split": ("string", HARD, "split"),
    "task": ("string", HARD, "task"),
    "question": ("string", HARD, "question"),
    "options": ("list", HARD, "options"),
    "options[0]": ("string", HARD, "options[0]"),
    "state": ("string", HARD, "state"),
    "label": ("int", HARD, "label"),
    "target": ("list", SOFT, "target"),
    "target[0]": ("number", SOFT, "target"),
}
DATASET_REQUIRED = ("id", "split", "task", "question", "options")
# `null` is the same as leaving a field out: for `state` that is allowed; for `label` and
# `target` it leaves a line with neither, which the exactly-one rule refuses naming `label`.
NULL_MEANS_ABSENT = {"state": None, "label": "label", "target": "label"}


def changed(record: dict, field: str, value) -> bytes:
    """The record's JSON text with one field (or one list entry) set to ``value``."""
    doc = json.loads(json.dumps(record))
    if field.endswith("[0]"):
        doc[field[:-3]][0] = value
    else:
        doc[field] = value
    return json.dumps(doc).encode()


def dataset_refusal(raw: bytes) -> tuple[int, str | None] | None:
    try:
        parse_example(raw, 7)
    except DatasetError as refused:
        return refused.line, refused.field
    return None


@pytest.mark.laya_claim("train.dataset.parse")
@pytest.mark.parametrize("field, json_type", [(f, t) for f, (kind, _, _) in DATASET_FIELDS.items()
                                              for t in wrong_types(kind)])
@given(data=st.data())
def test_dataset_field_of_each_wrong_json_type_is_refused_by_name(field, json_type, data):
    kind, record, named = DATASET_FIELDS[field]
    if json_type == "null" and field in NULL_MEANS_ABSENT:
        expected = NULL_MEANS_ABSENT[field]
        for value in (None,):
            got = dataset_refusal(changed(record, field, value))
            assert got == (None if expected is None else (7, expected)), (field, got)
        return
    for value in (BOUNDARY[json_type], data.draw(of_type(json_type), label="value")):
        assert dataset_refusal(changed(record, field, value)) == (7, named), (field, value)


@pytest.mark.laya_claim("train.dataset.parse")
@pytest.mark.parametrize("field", DATASET_REQUIRED)
def test_dataset_required_field_left_out_is_refused_by_name(field):
    record = {k: v for k, v in HARD.items() if k != field}
    assert dataset_refusal(json.dumps(record).encode()) == (7, field)


@pytest.mark.laya_claim("train.dataset.parse")
@given(state=st.text(min_size=1).filter(str.strip))
@example(state="s")
def test_dataset_optional_state_present_and_absent(state):
    with_state = parse_example(json.dumps({**HARD, "state": state}).encode(), 1)
    without = parse_example(json.dumps(HARD).encode(), 1)
    assert (with_state.request.state, without.request.state) == (state, None)
    assert with_state.request.question == without.request.question == "q"


@pytest.mark.laya_claim("train.dataset.parse")
@given(keys=st.sets(st.text(min_size=1, max_size=12).filter(lambda k: k not in {*HARD, "state", "target"}),
                   min_size=1, max_size=3))
@example(keys={"labels"})
@example(keys={"Label"})
@example(keys={"labels", "Label", "zeta"})  # several: the first in code-point order, "Label"
def test_dataset_unknown_field_is_refused_by_name(keys):
    """One unknown field is named; of several, the first in code-point order (docs/training.md)."""
    assert dataset_refusal(json.dumps({**HARD, **dict.fromkeys(keys, 1)}).encode()) == (7, min(keys))


@pytest.mark.laya_claim("train.dataset.parse")
@given(k=st.integers(1, 2**20), n=st.integers(2, 5), where=st.data())
@example(k=2**19, n=2, where=None)  # [1.5, -0.5]
@example(k=2**20, n=2, where=None)  # [2.0, -1.0]
def test_dataset_target_entries_outside_zero_one_are_refused(k, n, where):
    """Entries summing to exactly 1 with one above 1 and one below 0: only the [0, 1] rule
    can refuse them."""
    excess = k / 2**20  # exact in float64, so 1 + excess - excess sums to exactly 1.0
    target = [1.0 + excess, -excess] + [0.0] * (n - 2)
    if where is not None:
        target = where.draw(st.permutations(target), label="target")
    assert sum(target) == 1.0
    record = {**SOFT, "options": [f"o{i}" for i in range(n)], "target": target}
    assert dataset_refusal(json.dumps(record).encode()) == (7, "target"), target


@pytest.mark.laya_claim("train.dataset.parse")
@pytest.mark.parametrize("target", [[True, False], [False, True], [True, False, False], [1, False]])
def test_dataset_boolean_target_entries_summing_to_one_are_refused(target):
    """A JSON boolean is not a probability, even where it would sum to 1 as a Python int."""
    record = {**SOFT, "options": [f"o{i}" for i in range(len(target))], "target": target}
    assert dataset_refusal(json.dumps(record).encode()) == (7, "target")


# --- splits: every split non-empty, every task in dev_cal and dev_conf (docs/training.md) --


@pytest.fixture(scope="module")
def split_base(artifact_factory):
    return artifact_factory(seed=5, head_kind="float32")


def dataset_text(base_dir, tmp_path, *, drop: tuple[str, str] | None = None) -> list:
    """Two tasks' examples written as JSONL text and read back (the wire form); ``drop``
    = (task, split) leaves that task out of that split."""
    from laya import load_artifact_base
    from laya.training.dataset import read_dataset
    from laya_qual.synth import synthetic_task, write_task

    base = load_artifact_base(base_dir)
    sizes = {"train": 6, "dev_cal": 4, "dev_conf": 4}
    records = []
    for seed, task in ((1, "a"), (2, "b")):
        records += [{**r, "id": f"{task}-{r['id']}"} for r in synthetic_task(base, seed=seed, task=task, sizes=sizes)]
    if drop is not None:
        records = [r for r in records if (r["task"], r["split"]) != drop]
    return read_dataset(write_task(tmp_path / "data.jsonl", records))


@pytest.mark.laya_claim("train.splits.complete")
@pytest.mark.parametrize("split", ["train", "dev_cal", "dev_conf"])
def test_an_empty_split_is_refused(split_base, tmp_path, split):
    from laya import load_artifact_base
    from laya.training.dataset import split_indices

    base = load_artifact_base(split_base)
    examples = dataset_text(split_base, tmp_path)
    kept = [e for e in examples if e.split != split]
    sequences = [base.render(e.request).token_ids for e in kept]
    with pytest.raises(DatasetError) as refused:
        split_indices(kept, sequences)
    assert refused.value.field == "split", str(refused.value)
    assert split_indices(examples, [base.render(e.request).token_ids for e in examples])  # all three: accepted


@pytest.mark.laya_claim("train.splits.complete")
@pytest.mark.parametrize("split", ["dev_cal", "dev_conf"])
def test_a_task_without_dev_cal_or_dev_conf_examples_is_refused(split_base, tmp_path, split):
    """Task b keeps its train examples but has none in ``split`` (the split itself is not
    empty: task a has some): training refuses, naming the split, and writes no head."""
    from laya.errors import TrainingError
    from laya.training.pipeline import train_artifact

    examples = dataset_text(split_base, tmp_path, drop=("b", split))
    out = tmp_path / "head"
    with pytest.raises(TrainingError) as refused:
        train_artifact(base_dir=split_base, examples=examples, out_dir=out, store_path=tmp_path / "store")
    assert refused.value.field == split and "'b'" in str(refused.value), str(refused.value)
    assert not out.exists() or not any(out.iterdir())
