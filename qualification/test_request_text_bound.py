"""request.budget, before tokenizing (docs/serving.md, "Bounds before tokenizing"): a text
(the question, an option, the state) longer than the head's sequence budget times the
tokenizer's characters per token is refused with BudgetExceeded naming its field before it
is tokenized; one exactly that long is tokenized (and, one word WordPiece reads as [UNK],
served). A real `laya predict` process given a 100 MB question under a 3 GiB address-space
limit (`ulimit -v`) answers it with that error and serves the lines around it; before, it
tokenized the whole question (25M tokens, 11.6 GB) and died with every line lost.

Oracle: characters per token computed here from the pinned tokenizer.json read with json
(the longest vocabulary piece, the ``##`` continuation prefix not counted, or WordPiece's
``max_input_chars_per_word``, whichever is longer, plus one), by the rule as documented.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import laya
from laya.errors import BudgetExceeded
from laya_qual.synth import pinned_path

ADDRESS_SPACE = 3 << 30  # what the command may map: a few times its own, far below a 100 MB text's tokens
RUN_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def artifact(artifact_factory) -> Path:
    return artifact_factory(seed=11, head_kind="float32", base_seed=3)  # test_jsonl.py's recipe: written once


def documented_chars_per_token(artifact: Path) -> int:
    spec = json.loads((artifact / pinned_path(artifact, "tokenizer")).read_bytes())
    model = spec["model"]
    prefix = model.get("continuing_subword_prefix") or ""
    pieces = list(model["vocab"]) + [t["content"] for t in spec.get("added_tokens", [])]
    longest = max(len(p) - len(prefix) if prefix and p.startswith(prefix) else len(p) for p in pieces)
    return max(longest, model.get("max_input_chars_per_word") or 0) + 1


@pytest.mark.laya_claim("request.budget")
@pytest.mark.parametrize("field", ["question", "options[1]", "state"])
def test_a_text_past_the_character_bound_is_refused_naming_its_field(artifact, field):
    model = laya.load_artifact(artifact)
    task = sorted(model.tasks)[0]
    bound = model.config.sequence_budget * documented_chars_per_token(artifact)

    def request(n: int) -> laya.Request:
        texts = {"question": "is it here", "options[1]": "no", "state": "s", field: "a" * n}
        return laya.Request(task, texts["question"], ("yes", texts["options[1]"]), texts["state"])

    assert model.predict(request(bound)).task == task  # one word past WordPiece's length: one [UNK]
    with pytest.raises(BudgetExceeded) as refused:
        model.predict(request(bound + 1))
    assert refused.value.field == field and f"at most {bound}" in str(refused.value), str(refused.value)


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


@pytest.mark.laya_claim("request.budget")
def test_a_100_mb_question_is_answered_within_a_bounded_address_space(artifact):
    task = json.loads((artifact / pinned_path(artifact, "head_config")).read_bytes())["tasks"][0]["name"]
    good = json.dumps({"adapter": "h", "task": task, "question": "is it here", "options": ["yes", "no"]})
    huge = json.dumps({"adapter": "h", "task": task, "question": "a " * 50_000_000, "options": ["yes", "no"]})
    run = subprocess.run([sys.executable, "-m", "laya.cli", "predict", "--base", str(artifact), "--adapter",
                          f"h={artifact}"], input=f"{good}\n{huge}\n{good}\n".encode(), capture_output=True,
                         preexec_fn=limited, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 3, run.stderr.decode()[-2000:]
    results = [json.loads(row) for row in run.stdout.decode().splitlines()]
    assert ["prediction" in r for r in results] == [True, False, True], results
    assert (results[1]["error"]["type"], results[1]["error"]["field"]) == ("BudgetExceeded", "question")
