"""Import a Hugging Face BERT-family checkpoint as a Laya base (docs/real-base.md).

Reads ``config.json``, ``model.safetensors`` and ``tokenizer.json`` once each and
writes a base-only artifact-v1 directory: the encoder config in laya's field set,
the encoder tensors (renamed only where HF layouts differ, values untouched), the
checkpoint's tokenizer byte for byte, special-token ids and the sequence format.
Markers are the vocabulary's own ``[unusedN]`` tokens, so neither the tokenizer
nor the embedding matrix changes. Anything but BERT's post-LN encoder with exact
GELU and absolute positions is refused, naming the file and field.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import click
import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from tokenizers import Tokenizer

from laya.artifact.manifest import (MAX_ENCODER_WEIGHTS_BYTES, MAX_JSON_BYTES, MAX_TOKENIZER_BYTES, ArtifactFiles,
                                    PinnedFile, loads_json_object, read_artifact_files, write_artifact_files)
from laya.serving.base import VerifiedBase
from laya.artifact.binding import canonical_json, sha256
from laya.serving.config import ENCODER_LIMITS, SEQUENCE_FORMAT_NAME
from laya.serving.encoder import EncoderConfig, encoder_parameter_shapes
from laya.errors import ArtifactError, LayaError

CONFIG, WEIGHTS, TOKENIZER = "config.json", "model.safetensors", "tokenizer.json"
# Checked on each file's size before it is read: the limits the base's own files are loaded under.
READ_LIMITS = {CONFIG: MAX_JSON_BYTES, WEIGHTS: MAX_ENCODER_WEIGHTS_BYTES, TOKENIZER: MAX_TOKENIZER_BYTES}
DEFAULT_OPTION_MARKERS = 8
INT_FIELDS = {"vocab_size": 1, "hidden_size": 1, "num_hidden_layers": 1, "num_attention_heads": 1,
              "intermediate_size": 1, "max_position_embeddings": 1, "type_vocab_size": 2}
# Fields that must hold BERT's value (any other is a different computation); all but
# model_type default to it when absent, as in transformers' BertConfig.
REQUIRED_VALUES = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute",
                   "is_decoder": False, "add_cross_attention": False}
DROPPED_PREFIXES = ("pooler.", "cls.")  # the pooler and pretraining heads are not part of a base
OLD_NORM_NAMES = {"gamma": "weight", "beta": "bias"}  # TF-era checkpoints (e.g. bert-base-uncased)
EXACT_UPCAST = (torch.float16, torch.bfloat16)  # every such value is exactly representable in float32


def import_bert_base(hf_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
                     option_markers: int = DEFAULT_OPTION_MARKERS) -> Path:
    """Write the base of the checkpoint in ``hf_dir`` to ``out_dir`` (new or empty); return it."""
    source = Path(hf_dir)
    config_bytes, weights_bytes, tokenizer_bytes = (_read(source, name) for name in (CONFIG, WEIGHTS, TOKENIZER))
    config = encoder_config(loads_json_object(config_bytes, CONFIG))
    _refuse_weights_over_the_limit(sum(math.prod(s) for s in encoder_parameter_shapes(config).values()) * 4)
    tokenizer = _tokenizer(tokenizer_bytes, config.vocab_size)
    special = special_token_ids(tokenizer, option_markers)
    tensors = encoder_tensors(weights_bytes, config)
    # One metadata key: safetensors stores metadata as a hash map, so several keys would
    # serialize in a run-dependent order and the weights pin would not be reproducible.
    provenance = {"laya.provenance": json.dumps({
        "importer": "laya.training.importer bert-v1", "config.json sha256": sha256(config_bytes),
        "model.safetensors sha256": sha256(weights_bytes)}, sort_keys=True)}
    sequence_format = {"name": SEQUENCE_FORMAT_NAME, "question_token_type": 0, "option_token_type": 1,
                       "state_position": "after_options", "padding": "none"}
    encoder_weights = save_safetensors(tensors, metadata=provenance)
    _refuse_weights_over_the_limit(len(encoder_weights))
    files = {
        "encoder_config": ("encoder_config.json", canonical_json(config.__dict__)),
        "encoder_weights": ("encoder.safetensors", encoder_weights),
        "tokenizer": ("tokenizer.json", tokenizer_bytes),
        "special_tokens": ("special_tokens.json", canonical_json(special)),
        "sequence_format": ("sequence_format.json", canonical_json(sequence_format)),
    }
    # Load the result with laya's own base loader before anything touches the disk.
    VerifiedBase(ArtifactFiles(Path(out_dir), {role: PinnedFile(role, rel, data, sha256(data))
                                               for role, (rel, data) in files.items()}))
    return write_artifact_files(out_dir, files)


def encoder_config(hf: dict[str, Any]) -> EncoderConfig:
    """Laya's encoder config from an HF ``config.json``; refuses any other architecture."""
    for field, required in REQUIRED_VALUES.items():
        value = hf.get(field, None if field == "model_type" else required)
        if value != required or type(value) is not type(required):
            raise ArtifactError(f"is {value!r}; laya computes only BERT's post-LN encoder, which needs {required!r}",
                                file=CONFIG, field=field)
    ints = {}
    for field, low in INT_FIELDS.items():
        value = hf.get(field)
        high = ENCODER_LIMITS[field]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ArtifactError(f"is {value!r}, expected an integer in [{low}, {high}]", file=CONFIG, field=field)
        ints[field] = value
    eps = hf.get("layer_norm_eps")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
        raise ArtifactError(f"is {eps!r}, expected a number in (0, 1)", file=CONFIG, field="layer_norm_eps")
    if ints["hidden_size"] % ints["num_attention_heads"]:
        raise ArtifactError("hidden_size is not divisible by num_attention_heads", file=CONFIG,
                            field="num_attention_heads")
    return EncoderConfig(**ints, layer_norm_eps=float(eps), hidden_act="gelu")


def special_token_ids(tokenizer: Tokenizer, option_markers: int) -> dict[str, Any]:
    """[CLS]/[SEP]/[PAD] as the checkpoint defines them; [STATE] = [unused0], options = [unused1..]."""
    if option_markers < 2:
        raise ValueError(f"a base needs at least two option markers, got {option_markers}")

    def token_id(token: str, field: str) -> int:
        found = tokenizer.token_to_id(token)
        if found is None:
            raise ArtifactError(f"has no token {token!r} (needed for {field})", file=TOKENIZER, field="model.vocab")
        return found

    return {"cls": token_id("[CLS]", "cls"), "sep": token_id("[SEP]", "sep"), "pad": token_id("[PAD]", "pad"),
            "state": token_id("[unused0]", "state"),
            "option_markers": [token_id(f"[unused{i + 1}]", f"option_markers[{i}]") for i in range(option_markers)]}


def encoder_tensors(data: bytes, config: EncoderConfig) -> dict[str, torch.Tensor]:
    """The encoder's tensors under laya's (= HF BertModel's) names, values untouched."""
    try:
        raw = load_safetensors(data)
    except SafetensorError as exc:
        raise ArtifactError(f"not a valid safetensors file ({exc})", file=WEIGHTS) from None
    expected = encoder_parameter_shapes(config)
    tensors: dict[str, torch.Tensor] = {}
    for hf_name, tensor in raw.items():
        name = laya_name(hf_name)
        if name.startswith(DROPPED_PREFIXES):
            continue
        if name == "embeddings.position_ids":  # a saved arange buffer, not a weight
            if not torch.equal(tensor.flatten(), torch.arange(tensor.numel(), dtype=tensor.dtype)):
                raise ArtifactError("is not 0..n-1; laya uses absolute positions", file=WEIGHTS, field=hf_name)
            continue
        if name not in expected:
            raise ArtifactError("tensor is not part of a BERT encoder of this config", file=WEIGHTS, field=hf_name)
        if name in tensors:
            raise ArtifactError(f"tensor maps to {name!r}, which another tensor already holds", file=WEIGHTS,
                                field=hf_name)
        if tuple(tensor.shape) != expected[name]:
            raise ArtifactError(f"shape is {tuple(tensor.shape)}, config.json implies {expected[name]}",
                                file=WEIGHTS, field=hf_name)
        if tensor.dtype not in (torch.float32, *EXACT_UPCAST):
            raise ArtifactError(f"dtype {tensor.dtype} is not float32, float16 or bfloat16", file=WEIGHTS,
                                field=hf_name)
        tensors[name] = tensor.to(torch.float32).contiguous()
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise ArtifactError(f"tensor missing ({len(missing)} in all)", file=WEIGHTS, field=missing[0])
    return dict(sorted(tensors.items()))


def laya_name(hf_name: str) -> str:
    """Rename where layouts differ: the ``bert.`` prefix of task checkpoints and old LayerNorm gamma/beta."""
    name = hf_name.removeprefix("bert.")
    stem, _, last = name.rpartition(".")
    if stem.endswith("LayerNorm") and last in OLD_NORM_NAMES:
        return f"{stem}.{OLD_NORM_NAMES[last]}"
    return name


def _tokenizer(data: bytes, vocab_size: int) -> Tokenizer:
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as exc:  # tokenizers raises a bare Exception on malformed JSON
        raise ArtifactError(f"not a valid tokenizers JSON ({exc})", file=TOKENIZER) from None
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if size > vocab_size:
        raise ArtifactError(f"tokenizer has {size} tokens, the embedding matrix only {vocab_size}", file=CONFIG,
                            field="vocab_size")
    return tokenizer


def _refuse_weights_over_the_limit(size: int) -> None:
    """Refuse, before the work, a base whose float32 encoder weights (float16 and bfloat16
    checkpoints double on import) no laya loader would read."""
    if size > MAX_ENCODER_WEIGHTS_BYTES:
        raise ArtifactError(f"the encoder's float32 weights come to {size} bytes, over the {MAX_ENCODER_WEIGHTS_BYTES}"
                            "-byte limit of a base's encoder_weights file", file=CONFIG)


def _read(directory: Path, name: str) -> bytes:
    """The bytes of one checkpoint file, its size checked against its limit before a byte is read."""
    path, limit = directory / name, READ_LIMITS[name]
    if path.is_symlink() or not path.is_file():
        raise ArtifactError("missing, a symlink, or not a regular file", file=str(path))
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise ArtifactError(f"is {size} bytes, the limit for this file is {limit}", file=str(path))
            data = fh.read(size + 1)
    except OSError as e:  # pragma: no cover — an unreadable regular file (EIO; EACCES for a user other than root, which CI runs as): no test can make one here
        raise ArtifactError(f"cannot be read: {e.strerror}", file=str(path)) from None
    if len(data) != size:  # pragma: no cover — defensive: the file changed size between its fstat and this read, a race no test can time
        raise ArtifactError(f"changed size while it was read ({size} bytes, then {len(data)})", file=str(path))
    return data


@click.group()
def base() -> None:
    """Laya bases."""


@base.command("import")
@click.argument("hf_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--option-markers", type=click.IntRange(2), default=DEFAULT_OPTION_MARKERS, show_default=True,
              help="how many [unusedN] tokens become option markers")
def import_command(hf_dir: Path, out_dir: Path, option_markers: int) -> None:
    """Import the BERT-family checkpoint in HF_DIR as a Laya base in OUT_DIR; print the base's
    directory, then each pinned file of its manifest (role, sha256, path).

    A checkpoint refused, an existing OUT_DIR, or one that cannot be written (a full disk,
    no permission) is one Error line and exit status 1, with nothing left under OUT_DIR."""
    try:
        out = import_bert_base(hf_dir, out_dir, option_markers=option_markers)
    except LayaError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote base {out}")
    for role, pinned in read_artifact_files(out, require_head=False).files.items():
        click.echo(f"  {role:16} {pinned.sha256}  {pinned.path}")


if __name__ == "__main__":
    base()
