"""base.import: `laya base import` writes the base docs/real-base.md documents, or nothing.

The checkpoints are generated (laya_qual.synth.write_bert_checkpoint: transformers'
``save_pretrained`` of a seeded tiny BERT, its tokenizer written by transformers and
``tokenizers``), in the two layouts transformers writes (``BertModel`` with its pooler;
``BertForMaskedLM`` with the ``bert.`` prefix and ``cls.*`` heads), plus a TF-era copy
(LayerNorm ``gamma``/``beta``, bfloat16) re-saved with safetensors.

Oracle, independent of laya.training.importer: the checkpoint's own files read here (``vocab.txt``
line numbers are the ids, ``config.json`` with json, ``model.safetensors`` with
safetensors), the artifact's files read through its manifest with hashlib, and the
mapping of docs/real-base.md written out below (``documented_name``). The imported base's
encoder states are compared with ``transformers.BertModel.from_pretrained`` on the
checkpoint directory itself (float64, eager attention) within the per-layer bound of
test_forward.py. Refusals are made in the files' wire form (config.json text,
tokenizer.json text, a re-saved safetensors file) and must write nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

import laya
from laya.cli import main as laya_cli
from laya.errors import ArtifactError
from laya.training.importer import import_bert_base
from laya_qual.synth import bert_vocabulary, write_bert_checkpoint

SEED = 7
UNUSED = 20                 # [unused0] .. [unused19]: the state and at most 19 option markers
LAYERS, MAX_POSITIONS = 2, 64
VOCAB = bert_vocabulary(SEED, unused=UNUSED)
LAYER_BOUND = 1e-5          # test_forward.py: float32 runtime vs float64 reference, per layer traversed
DEFAULT_MARKERS = 8         # docs/real-base.md: K = 8 by default
ENCODER_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                  "max_position_embeddings", "type_vocab_size")
SEQUENCE_FORMAT = {"name": "laya-seq-v1", "question_token_type": 0, "option_token_type": 1,
                   "state_position": "after_options", "padding": "none"}
LAYOUTS = ("BertModel", "BertForMaskedLM", "tf-era")


# --- the oracle: docs/real-base.md's mapping, written out ---------------------------------

def documented_name(hf_name: str) -> str | None:
    """The base tensor a checkpoint tensor becomes, or None where docs/real-base.md drops it:
    ``bert.`` prefix removed, LayerNorm gamma/beta -> weight/bias; ``pooler.*``, ``cls.*`` and
    ``embeddings.position_ids`` dropped."""
    name = hf_name[len("bert."):] if hf_name.startswith("bert.") else hf_name
    if name.startswith(("pooler.", "cls.")) or name == "embeddings.position_ids":
        return None
    for old, new in ((".LayerNorm.gamma", ".LayerNorm.weight"), (".LayerNorm.beta", ".LayerNorm.bias")):
        if name.endswith(old):
            name = name[: -len(old)] + new
    return name


def vocab_ids(checkpoint: Path) -> dict[str, int]:
    """vocab.txt: the token on line i has id i."""
    return {token: i for i, token in enumerate((checkpoint / "vocab.txt").read_text(encoding="utf-8").splitlines())}


def documented_special_tokens(checkpoint: Path, markers: int) -> dict:
    ids = vocab_ids(checkpoint)
    return {"cls": ids["[CLS]"], "sep": ids["[SEP]"], "pad": ids["[PAD]"], "state": ids["[unused0]"],
            "option_markers": [ids[f"[unused{i}]"] for i in range(1, markers + 1)]}


def artifact_files(directory: Path) -> dict[str, bytes]:
    """{role: bytes} through manifest.json, each checked against its sha256 and size; the
    directory holds exactly the manifest and the files it lists."""
    manifest = json.loads((directory / "manifest.json").read_bytes())
    files = {}
    for entry in manifest["files"]:
        data = (directory / entry["path"]).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (entry["sha256"], entry["size"]), entry["path"]
        files[entry["role"]] = data
    listed = {"manifest.json", *(e["path"] for e in manifest["files"])}
    assert {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()} == listed
    assert manifest["adapter"] is None
    return files


def safetensors_metadata(data: bytes) -> dict:
    """The ``__metadata__`` of a safetensors file, read from its header (u64 length + JSON)."""
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + length]).get("__metadata__", {})


def listing(directory: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(directory)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(directory.rglob("*"))}


# --- fixtures: generated once per session ---------------------------------------------------

def tf_era_copy(source: Path, out: Path) -> Path:
    """The BertForMaskedLM checkpoint as a TF-era file: LayerNorm gamma/beta, bfloat16."""
    shutil.copytree(source, out)
    tensors = load_safetensors((source / "model.safetensors").read_bytes())
    renamed = {}
    for name, tensor in tensors.items():
        if ".LayerNorm." in name:
            name = name.replace(".LayerNorm.weight", ".LayerNorm.gamma").replace(".LayerNorm.bias", ".LayerNorm.beta")
        renamed[name] = tensor.to(torch.bfloat16)
    (out / "model.safetensors").write_bytes(save_safetensors(renamed, metadata={"format": "pt"}))
    return out


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("transformers", reason="base.import generates its checkpoints with transformers")
    root = tmp_path_factory.mktemp("hf")
    made = {layout: write_bert_checkpoint(root / layout, seed=SEED, architecture=layout, layers=LAYERS,
                                          max_positions=MAX_POSITIONS, unused=UNUSED)
            for layout in ("BertModel", "BertForMaskedLM")}
    made["tf-era"] = tf_era_copy(made["BertForMaskedLM"], root / "tf-era")
    return made


@pytest.fixture(scope="session")
def imported(checkpoints, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("imported")
    return {layout: import_bert_base(checkpoint, root / layout) for layout, checkpoint in checkpoints.items()}


@pytest.fixture(scope="session")
def transformers_models(checkpoints) -> dict:
    """transformers.BertModel loaded from each checkpoint directory by transformers itself."""
    from transformers import BertModel

    return {layout: BertModel.from_pretrained(checkpoints[layout], add_pooling_layer=False,
                                              attn_implementation="eager").double().eval()
            for layout in ("BertModel", "BertForMaskedLM")}


@pytest.fixture(scope="session")
def imported_bases(imported) -> dict:
    return {layout: laya.load_artifact_base(out) for layout, out in imported.items()}


# --- what is written ----------------------------------------------------------------------

@pytest.mark.laya_claim("base.import")
@given(layout=st.sampled_from(LAYOUTS), markers=st.integers(2, UNUSED - 1))
@example(layout="BertModel", markers=2)
@example(layout="BertModel", markers=DEFAULT_MARKERS)
@example(layout="BertModel", markers=UNUSED - 1)  # every [unusedN] used; markers cross [UNK]..[MASK]
def test_special_tokens_are_the_documented_vocabulary_tokens(checkpoints, tmp_path_factory, layout, markers):
    checkpoint = checkpoints[layout]
    out = import_bert_base(checkpoint, tmp_path_factory.mktemp("markers") / "base", option_markers=markers)
    special = json.loads(artifact_files(out)["special_tokens"])
    assert special == documented_special_tokens(checkpoint, markers)
    assert laya.load_artifact_base(out).special.option_markers == tuple(special["option_markers"])


@pytest.mark.laya_claim("base.import")
def test_default_import_has_eight_option_markers(checkpoints, imported):
    for layout, out in imported.items():
        special = json.loads(artifact_files(out)["special_tokens"])
        assert special == documented_special_tokens(checkpoints[layout], DEFAULT_MARKERS), layout


@pytest.mark.laya_claim("base.import")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_encoder_tensors_are_the_documented_checkpoint_tensors(checkpoints, imported, layout):
    source = load_safetensors((checkpoints[layout] / "model.safetensors").read_bytes())
    base = load_safetensors(artifact_files(imported[layout])["encoder_weights"])
    mapped = {documented_name(name): name for name in source if documented_name(name) is not None}
    assert len(mapped) == len([n for n in source if documented_name(n) is not None]), "two tensors map to one name"
    assert sorted(base) == sorted(mapped)
    assert len(base) == 5 + 16 * LAYERS  # docs/artifact-v1.md's list: 5 embedding tensors, 16 per layer
    for name, hf_name in mapped.items():
        assert base[name].dtype == torch.float32, name
        assert torch.equal(base[name], source[hf_name].to(torch.float32)), f"{name} is not the checkpoint's {hf_name}"
    # Power: no two same-shaped checkpoint tensors are equal, so a tensor from the wrong place fails above.
    values = list(mapped.values())
    for i, a in enumerate(values):
        for b in values[i + 1:]:
            assert source[a].shape != source[b].shape or not torch.equal(source[a], source[b]), (a, b)


@pytest.mark.laya_claim("base.import")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_config_tokenizer_format_and_provenance_are_the_checkpoint_s(checkpoints, imported, layout):
    checkpoint = checkpoints[layout]
    config_bytes = (checkpoint / "config.json").read_bytes()
    weights_bytes = (checkpoint / "model.safetensors").read_bytes()
    hf = json.loads(config_bytes)
    files = artifact_files(imported[layout])
    assert sorted(files) == ["encoder_config", "encoder_weights", "sequence_format", "special_tokens", "tokenizer"]
    encoder_config = json.loads(files["encoder_config"])
    assert encoder_config == {**{f: hf[f] for f in ENCODER_FIELDS}, "layer_norm_eps": hf["layer_norm_eps"],
                              "hidden_act": "gelu"}
    assert encoder_config["num_hidden_layers"] == LAYERS and encoder_config["vocab_size"] == len(VOCAB)
    assert files["tokenizer"] == (checkpoint / "tokenizer.json").read_bytes()
    assert json.loads(files["sequence_format"]) == SEQUENCE_FORMAT
    provenance = json.loads(safetensors_metadata(files["encoder_weights"])["laya.provenance"])
    assert safetensors_metadata(files["encoder_weights"]).keys() == {"laya.provenance"}
    assert provenance["config.json sha256"] == hashlib.sha256(config_bytes).hexdigest()
    assert provenance["model.safetensors sha256"] == hashlib.sha256(weights_bytes).hexdigest()
    assert safetensors_metadata(files["encoder_weights"])["laya.provenance"] == json.dumps(provenance, sort_keys=True)


# --- what it computes ---------------------------------------------------------------------

def documented_token_types(ids: list[int], sep: int) -> list[int]:
    """docs/artifact-v1.md: type 0 up to and including the first [SEP], type 1 after it."""
    first = ids.index(sep) if sep in ids else len(ids)
    return [0 if i <= first else 1 for i in range(len(ids))]


def request_ids(checkpoint: Path, question: str, options: list[str], state: str) -> list[int]:
    """[CLS] q [SEP] [unused1] o1 [unused2] o2 ... [SEP] [unused0] state [SEP], pieces by the
    checkpoint's own tokenizer (transformers) without its special tokens."""
    from transformers import BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(checkpoint)
    ids = vocab_ids(checkpoint)

    def piece(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    out = [ids["[CLS]"], *piece(question), ids["[SEP]"]]
    for i, option in enumerate(options, start=1):
        out += [ids[f"[unused{i}]"], *piece(option)]
    return out + [ids["[SEP]"], ids["[unused0]"], *piece(state), ids["[SEP]"]]


def assert_states_match(base: laya.VerifiedBase, model, checkpoint: Path, ids: list[int]) -> None:
    sep = vocab_ids(checkpoint)["[SEP]"]
    with torch.no_grad():
        expected = model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([documented_token_types(ids, sep)]),
                         attention_mask=torch.ones(1, len(ids), dtype=torch.long)).last_hidden_state[0]
    worst = float((base.encode(ids).double() - expected).abs().max())
    bound = LAYER_BOUND * (LAYERS + 1)
    assert worst <= bound, f"encoder states differ from transformers.BertModel by {worst:.3e} (bound {bound:.1e})"



@pytest.mark.laya_claim("base.import")
@given(layout=st.sampled_from(("BertModel", "BertForMaskedLM")),
       ids=st.lists(st.integers(0, len(VOCAB) - 1), min_size=1, max_size=MAX_POSITIONS))
@example(layout="BertModel", ids=[VOCAB.index("[CLS]")])                            # shortest
@example(layout="BertForMaskedLM", ids=[(7 * i) % len(VOCAB) for i in range(MAX_POSITIONS)])  # longest
@example(layout="BertModel", ids=[VOCAB.index("[SEP]")] * 3 + [VOCAB.index("[unused0]")])    # SEP first
def test_imported_base_encodes_as_transformers_bert_on_the_checkpoint(checkpoints, imported_bases,
                                                                      transformers_models, layout, ids):
    assert_states_match(imported_bases[layout], transformers_models[layout], checkpoints[layout], ids)


@pytest.mark.laya_claim("base.import")
@pytest.mark.parametrize("layout", ("BertModel", "BertForMaskedLM"))
def test_imported_base_encodes_a_rendered_request_as_transformers_bert(checkpoints, imported_bases,
                                                                        transformers_models, layout):
    ids = request_ids(checkpoints[layout], "Which option is right?", ["the first one", "the 2nd."], "waiting")
    assert_states_match(imported_bases[layout], transformers_models[layout], checkpoints[layout], ids)


# --- what is refused ----------------------------------------------------------------------

def edit_config(**changes):
    """config.json text with fields replaced (None removes one), written back as JSON text."""
    def edit(directory: Path) -> None:
        config = json.loads((directory / "config.json").read_text())
        for field, value in changes.items():
            if value is None:
                config.pop(field, None)
            else:
                config[field] = value
        (directory / "config.json").write_text(json.dumps(config, indent=2))
    return edit


def rename_token(old: str, new: str):
    """tokenizer.json bytes with one token renamed everywhere it is spelled."""
    def edit(directory: Path) -> None:
        data = (directory / "tokenizer.json").read_bytes()
        assert old.encode() in data
        (directory / "tokenizer.json").write_bytes(data.replace(json.dumps(old).encode(), json.dumps(new).encode()))
    return edit


def add_token(content: str):
    """tokenizer.json with one added special token past the vocabulary (the next id)."""
    def edit(directory: Path) -> None:
        tokenizer = json.loads((directory / "tokenizer.json").read_text())
        tokenizer["added_tokens"].append({"id": len(VOCAB), "content": content, "single_word": False,
                                          "lstrip": False, "rstrip": False, "normalized": False, "special": True})
        (directory / "tokenizer.json").write_text(json.dumps(tokenizer))
    return edit


def edit_tensors(change):
    """model.safetensors re-saved by safetensors with ``change`` applied to its tensors."""
    def edit(directory: Path) -> None:
        tensors = load_safetensors((directory / "model.safetensors").read_bytes())
        changed = save_safetensors(change(dict(tensors)), metadata={"format": "pt"})
        (directory / "model.safetensors").write_bytes(changed)
    return edit


def remove(name: str):
    return lambda directory: (directory / name).unlink()


def truncate(name: str, keep: int):
    return lambda directory: (directory / name).write_bytes((directory / name).read_bytes()[:keep])


Q0 = "encoder.layer.0.attention.self.query.weight"
HIDDEN = 32
REFUSALS = [
    # config.json: anything but BERT's post-LN encoder with exact GELU and absolute positions
    pytest.param(edit_config(model_type="roberta"), {}, "config.json", "model_type", id="roberta"),
    pytest.param(edit_config(model_type=None), {}, "config.json", "model_type", id="no-model-type"),
    pytest.param(edit_config(hidden_act="gelu_new"), {}, "config.json", "hidden_act", id="tanh-gelu"),
    pytest.param(edit_config(position_embedding_type="relative_key"), {}, "config.json", "position_embedding_type",
                 id="relative-positions"),
    pytest.param(edit_config(is_decoder=True), {}, "config.json", "is_decoder", id="decoder"),
    pytest.param(edit_config(add_cross_attention=True), {}, "config.json", "add_cross_attention",
                 id="cross-attention"),
    pytest.param(edit_config(type_vocab_size=1), {}, "config.json", "type_vocab_size", id="one-token-type"),
    pytest.param(edit_config(num_hidden_layers=None), {}, "config.json", "num_hidden_layers", id="no-depth"),
    # docs/artifact-v1.md's encoder_config bounds, before anything is built from them
    pytest.param(edit_config(num_hidden_layers=129), {}, "config.json", "num_hidden_layers", id="depth-over-128"),
    pytest.param(edit_config(type_vocab_size=17), {}, "config.json", "type_vocab_size", id="types-over-16"),
    pytest.param(edit_config(vocab_size=(1 << 20) + 1), {}, "config.json", "vocab_size", id="vocab-over-2**20"),
    # docs/real-base.md "Sizes, before the bytes": float32 weights over 16 GiB (word embeddings
    # alone 2**20 x 8192 x 4 bytes = 32 GiB), refused from config.json before the weights are parsed
    pytest.param(edit_config(vocab_size=1 << 20, hidden_size=8192), {}, "config.json", None,
                 id="implied-weights-over-16GiB"),
    pytest.param(edit_config(hidden_size=True), {}, "config.json", "hidden_size", id="bool-hidden"),
    pytest.param(edit_config(num_attention_heads=3), {}, "config.json", "num_attention_heads", id="uneven-heads"),
    pytest.param(edit_config(layer_norm_eps=0), {}, "config.json", "layer_norm_eps", id="eps-0"),
    pytest.param(edit_config(layer_norm_eps=1), {}, "config.json", "layer_norm_eps", id="eps-1"),
    pytest.param(edit_config(vocab_size=len(VOCAB) - 1), {}, "config.json", "vocab_size",
                 id="tokenizer-one-over-embeddings"),
    pytest.param(add_token("[ADDED]"), {}, "config.json", "vocab_size", id="added-token-over-embeddings"),
    # tokenizer.json: the documented vocabulary tokens must be there
    pytest.param(None, {"option_markers": UNUSED}, "tokenizer.json", "model.vocab", id="one-marker-too-many"),
    pytest.param(rename_token("[unused0]", "[reserved0]"), {}, "tokenizer.json", "model.vocab", id="no-unused0"),
    pytest.param(rename_token(f"[unused{DEFAULT_MARKERS}]", "[reserved]"), {}, "tokenizer.json", "model.vocab",
                 id="no-last-default-marker"),
    pytest.param(rename_token("[CLS]", "[BOS]"), {}, "tokenizer.json", "model.vocab", id="no-cls"),
    pytest.param(rename_token("[SEP]", "[EOS]"), {}, "tokenizer.json", "model.vocab", id="no-sep"),
    pytest.param(rename_token("[PAD]", "[NUL]"), {}, "tokenizer.json", "model.vocab", id="no-pad"),
    pytest.param(truncate("tokenizer.json", 100), {}, "tokenizer.json", None, id="tokenizer-not-json"),
    # model.safetensors: exactly a BERT encoder of this config, float32/float16/bfloat16
    pytest.param(edit_tensors(lambda t: {("encoder.layer.0.attention.q.weight" if n == Q0 else n): v
                                         for n, v in t.items()}),
                 {}, "model.safetensors", "encoder.layer.0.attention.q.weight", id="misnamed-tensor"),
    pytest.param(edit_tensors(lambda t: {n: v for n, v in t.items() if n != "encoder.layer.1.output.dense.bias"}),
                 {}, "model.safetensors", "encoder.layer.1.output.dense.bias", id="missing-tensor"),
    pytest.param(edit_tensors(lambda t: {n: v for n, v in t.items()
                                         if n not in ("encoder.layer.1.output.dense.bias", "embeddings.word_embeddings.weight")}),
                 {}, "model.safetensors", "embeddings.word_embeddings.weight", id="two-missing-the-first-named"),
    pytest.param(edit_tensors(lambda t: {**t, Q0: torch.zeros(HIDDEN, HIDDEN + 1)}), {}, "model.safetensors", Q0,
                 id="wrong-shape"),
    pytest.param(edit_tensors(lambda t: {**t, Q0: t[Q0].double()}), {}, "model.safetensors", Q0, id="float64"),
    pytest.param(edit_tensors(lambda t: {**t, "embeddings.position_ids": torch.arange(MAX_POSITIONS).flip(0)[None]}),
                 {}, "model.safetensors", "embeddings.position_ids", id="permuted-position-ids"),
    pytest.param(truncate("model.safetensors", 64), {}, "model.safetensors", None, id="weights-not-safetensors"),
    pytest.param(remove("model.safetensors"), {}, None, None, id="no-weights-file"),
]


@pytest.mark.laya_claim("base.import")
@pytest.mark.parametrize(("edit", "kwargs", "file", "field"), REFUSALS)
def test_unsupported_checkpoint_is_refused_naming_file_and_field_and_nothing_is_written(
        checkpoints, tmp_path_factory, edit, kwargs, file, field):
    source = shutil.copytree(checkpoints["BertModel"], tmp_path_factory.mktemp("refused") / "hf")
    if edit is not None:
        edit(source)
    parent = tmp_path_factory.mktemp("out")
    with pytest.raises(ArtifactError) as refused:
        import_bert_base(source, parent / "base", **kwargs)
    if file is None:  # a missing input file is named by its path
        assert refused.value.file == str(source / "model.safetensors"), str(refused.value)
    else:
        assert (refused.value.file, refused.value.field) == (file, field), str(refused.value)
    assert os.listdir(parent) == [], "a refused import must write nothing"


# docs/real-base.md "Sizes, before the bytes": each checkpoint file's limit, checked on its size.
FILE_LIMITS = {"config.json": 1 << 20, "tokenizer.json": 64 << 20, "model.safetensors": 16 << 30}


@pytest.mark.laya_claim("base.import")
@pytest.mark.parametrize("name", sorted(FILE_LIMITS))
def test_a_checkpoint_file_over_its_size_limit_is_refused_before_it_is_read(checkpoints, tmp_path_factory, name):
    """One byte over the limit, as a sparse file (so the test itself costs no memory): refused
    naming the file's path and its size, not read (the message is the size's, not a parse
    error of the zeros it would read), and nothing is written."""
    source = shutil.copytree(checkpoints["BertModel"], tmp_path_factory.mktemp("over") / "hf")
    os.truncate(source / name, FILE_LIMITS[name] + 1)
    parent = tmp_path_factory.mktemp("out")
    with pytest.raises(ArtifactError) as refused:
        import_bert_base(source, parent / "base")
    assert refused.value.file == str(source / name), str(refused.value)
    assert f"{FILE_LIMITS[name] + 1} bytes" in str(refused.value), str(refused.value)
    assert os.listdir(parent) == [], "a refused import must write nothing"


@pytest.mark.laya_claim("base.import")
def test_a_config_of_exactly_its_size_limit_is_imported(checkpoints, tmp_path_factory):
    """The neighbour of the refusal above: config.json padded with trailing spaces to exactly 1 MiB."""
    source = shutil.copytree(checkpoints["BertModel"], tmp_path_factory.mktemp("at") / "hf")
    text = (source / "config.json").read_bytes()
    (source / "config.json").write_bytes(text + b" " * (FILE_LIMITS["config.json"] - len(text)))
    out = import_bert_base(source, tmp_path_factory.mktemp("at-out") / "base")
    assert json.loads(artifact_files(out)["encoder_config"])["num_hidden_layers"] == LAYERS


@pytest.mark.laya_claim("base.import")
def test_accepted_boundaries_of_the_refusals(checkpoints, tmp_path_factory):
    """The neighbours of the refused values above import: type_vocab_size 2, vocab_size equal to
    the tokenizer's size (the generated checkpoint), float16 and bfloat16 tensors, an arange
    position_ids buffer, an existing empty output directory."""
    source = shutil.copytree(checkpoints["BertModel"], tmp_path_factory.mktemp("accepted") / "hf")
    positions = torch.arange(MAX_POSITIONS)[None]
    edit_tensors(lambda t: {**t, Q0: t[Q0].half(), "embeddings.position_ids": positions})(source)
    out = tmp_path_factory.mktemp("empty")  # exists, empty
    assert import_bert_base(source, out) == out
    half = load_safetensors((source / "model.safetensors").read_bytes())[Q0]
    assert torch.equal(load_safetensors(artifact_files(out)["encoder_weights"])[Q0], half.float())
    assert json.loads(artifact_files(out)["encoder_config"])["type_vocab_size"] == 2


@pytest.mark.laya_claim("base.import")
@pytest.mark.parametrize("existing", ["file", "non-empty directory"])
def test_existing_output_is_refused_naming_it_and_left_untouched(checkpoints, tmp_path_factory, existing):
    parent = tmp_path_factory.mktemp("existing")
    out = parent / "base"
    if existing == "file":
        out.write_bytes(b"someone else's")
    else:
        out.mkdir()
        (out / "mine.txt").write_bytes(b"someone else's")
    before = listing(parent)
    with pytest.raises(ArtifactError) as refused:
        import_bert_base(checkpoints["BertModel"], out)
    assert refused.value.file == str(out), str(refused.value)
    assert listing(parent) == before


# --- the command --------------------------------------------------------------------------

@pytest.mark.laya_claim("base.import")
def test_laya_base_import_command_writes_the_same_bytes_and_refuses_with_nothing_written(checkpoints,
                                                                                           tmp_path_factory):
    parent = tmp_path_factory.mktemp("cli")
    runner = CliRunner()
    ok = runner.invoke(laya_cli, ["base", "import", str(checkpoints["BertModel"]), str(parent / "one"),
                                  "--option-markers", "3"])
    assert ok.exit_code == 0, ok.output
    pins = json.loads((parent / "one" / "manifest.json").read_bytes())["files"]  # it says what it wrote
    assert ok.stdout.splitlines() == [f"wrote base {parent / 'one'}", *(
        f"  {pin['role']:16} {pin['sha256']}  {pin['path']}" for pin in pins)], ok.stdout
    two = import_bert_base(checkpoints["BertModel"], parent / "two", option_markers=3)
    assert listing(parent / "one") == listing(two), "two imports of one checkpoint differ"
    assert json.loads(artifact_files(two)["special_tokens"]) == documented_special_tokens(checkpoints["BertModel"], 3)
    too_many = runner.invoke(laya_cli, ["base", "import", str(checkpoints["BertModel"]), str(parent / "three"),
                                        "--option-markers", str(UNUSED)])
    assert too_many.exit_code == 1 and f"[unused{UNUSED}]" in too_many.output, too_many.output
    too_few = runner.invoke(laya_cli, ["base", "import", str(checkpoints["BertModel"]), str(parent / "four"),
                                       "--option-markers", "1"])
    assert too_few.exit_code == 2, too_few.output
    assert sorted(os.listdir(parent)) == ["one", "two"]


@pytest.mark.laya_claim("base.import")
def test_laya_base_import_onto_a_full_disk_is_one_error_line_and_keeps_what_was_there(checkpoints,
                                                                                      tmp_path_factory):
    """The file-size limit (RLIMIT_FSIZE, the kernel's EFBIG, as a full disk's ENOSPC) cuts the
    write short: exit 1 (docs/cli.md), one `Error:` line naming the output, no traceback, and the
    parent directory as it was."""
    parent = tmp_path_factory.mktemp("full")
    (parent / "neighbour").write_bytes(b"keep")
    before = listing(parent)

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    done = subprocess.run([sys.executable, "-m", "laya.cli", "base", "import", str(checkpoints["BertModel"]),
                           str(parent / "base")], capture_output=True, text=True, preexec_fn=small_files,
                          timeout=120)
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert done.stderr.splitlines() == [f"Error: {parent / 'base'}: cannot be written (File too large)"], done.stderr
    assert listing(parent) == before
