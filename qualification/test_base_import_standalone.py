"""base.import.standalone: `python -m laya.training.importer import HF_DIR OUT_DIR` is "the same
command, standalone" (docs/real-base.md) as `laya base import`; and two more refusals of
the import: a checkpoint holding one encoder tensor twice (a LayerNorm's ``weight`` and its
TF-era ``gamma``, which docs/real-base.md maps to the same name) and fewer than two option
markers (docs/artifact-v1.md: at least two).

Oracle: the bytes the two commands write, compared file by file; the re-saved checkpoint
(safetensors) with one extra tensor, and the output's parent listing for "nothing written".
The checkpoints are test_base_import.py's (generated with transformers, once per session).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from laya.cli import main as laya_cli
from laya.errors import ArtifactError
from laya.training.importer import import_bert_base
from laya_qual.suite.test_base_import import checkpoints, listing  # noqa: F401 (the session's checkpoints)

TIMEOUT_S = 300  # a hang guard, loose enough for a loaded machine
NORM = "encoder.layer.0.attention.output.LayerNorm"


@pytest.mark.laya_claim("base.import.standalone")
def test_the_standalone_module_writes_what_laya_base_import_writes(checkpoints, tmp_path):  # noqa: F811
    source = checkpoints["BertModel"]
    run = subprocess.run([sys.executable, "-m", "laya.training.importer", "import", str(source), str(tmp_path / "standalone"),
                          "--option-markers", "3"], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert run.returncode == 0, run.stderr
    via_laya = CliRunner().invoke(laya_cli, ["base", "import", str(source), str(tmp_path / "laya"),
                                             "--option-markers", "3"])
    assert via_laya.exit_code == 0, via_laya.output
    assert listing(tmp_path / "standalone") == listing(tmp_path / "laya")
    assert run.stdout.replace(str(tmp_path / "standalone"), str(tmp_path / "laya")) == via_laya.stdout


@pytest.mark.laya_claim("base.import.standalone")
@pytest.mark.parametrize("part", ["weight", "bias"])
def test_one_tensor_given_twice_is_refused_naming_the_second(checkpoints, tmp_path, part):  # noqa: F811
    source = shutil.copytree(checkpoints["BertModel"], tmp_path / "hf")
    tensors = load_safetensors((source / "model.safetensors").read_bytes())
    old = {"weight": "gamma", "bias": "beta"}[part]
    tensors[f"{NORM}.{old}"] = tensors[f"{NORM}.{part}"].clone()  # the same LayerNorm, also under its TF name
    (source / "model.safetensors").write_bytes(save_safetensors(tensors, metadata={"format": "pt"}))
    parent = tmp_path / "out"
    parent.mkdir()
    with pytest.raises(ArtifactError) as refused:
        import_bert_base(source, parent / "base")
    assert refused.value.file == "model.safetensors", str(refused.value)
    assert refused.value.field in {f"{NORM}.{part}", f"{NORM}.{old}"}, str(refused.value)  # whichever is read second
    assert os.listdir(parent) == []


@pytest.mark.laya_claim("base.import.standalone")
@pytest.mark.parametrize("markers", [1, 0, -1])
def test_fewer_than_two_option_markers_are_refused(checkpoints, tmp_path, markers):  # noqa: F811
    with pytest.raises(ValueError, match="at least two option markers"):
        import_bert_base(checkpoints["BertModel"], tmp_path / "base", option_markers=markers)
    assert os.listdir(tmp_path) == []
