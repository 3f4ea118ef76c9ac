"""The dataset file of `laya train` (docs/training.md, "Dataset") at its edges: a soft target
that follows the rules is read as the distribution it spells (train.dataset.parse), an
integer too long for Python to convert is a bad line named by its number (docs: a line that
is not JSON is refused naming it), and a file without a single example is refused
(train.dataset.empty).

Oracle: the lines are written here as JSON text; the expected target is the literal list
as floats, the expected line number the 1-based position in the file, blank lines counted.
"""

from __future__ import annotations

import json

import pytest

from laya.training.dataset import read_dataset
from laya.errors import DatasetError

SOFT = {"id": "s", "split": "train", "task": "t", "question": "q", "options": ["a", "b", "c"]}


@pytest.mark.laya_claim("train.dataset.parse")
@pytest.mark.parametrize("target", [[0.25, 0.5, 0.25], [1, 0, 0], [0.1, 0.2, 0.7000000000000001]])
def test_a_soft_target_is_read_as_its_distribution(tmp_path, target):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps({**SOFT, "target": target}) + "\n")
    (example,) = read_dataset(path)
    assert example.target == tuple(float(p) for p in target) and example.label is None
    assert all(type(p) is float for p in example.target)


@pytest.mark.laya_claim("train.dataset.parse")
def test_an_integer_past_the_conversion_limit_is_a_bad_line(tmp_path):
    good = json.dumps({**SOFT, "label": 1})
    long = good.replace('"label": 1', '"label": ' + "9" * 5000)
    path = tmp_path / "data.jsonl"
    path.write_text(f"{good}\n\n{long}\n")
    with pytest.raises(DatasetError) as refused:
        read_dataset(path)
    assert refused.value.line == 3, str(refused.value)


@pytest.mark.laya_claim("train.dataset.empty")
@pytest.mark.parametrize("text", ["", "\n", "\n  \n\t\n"], ids=["empty", "one-blank-line", "blank-lines"])
def test_a_dataset_without_examples_is_refused(tmp_path, text):
    path = tmp_path / "data.jsonl"
    path.write_text(text)
    with pytest.raises(DatasetError, match="no examples"):
        read_dataset(path)
