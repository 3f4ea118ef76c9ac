"""artifact.fields: every documented field of artifact-v1's JSON files, changed alone in
the file's JSON text.

Oracle: the field tables of docs/artifact-v1.md, copied here as JSON types (never read
from laya). A field given each JSON type its table does not allow, or left out, must be
refused with ArtifactError naming the file and that field; an unknown field in any of
these objects must be refused naming the file (and the field where the doc's rule 6 has
one to name). The unchanged copy loads, so each refusal is its edit's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import laya
from laya.errors import ArtifactError, UnsupportedAdapter
from laya_qual.synth import pinned_path, replace_pinned_file, rewrite_file
from laya_qual.synth.wire import BOUNDARY, of_type, wrong_types

MANIFEST = "manifest.json"
# role -> {field path: documented type}; "a.0.b" is field b of the first entry of list a.
FIELDS = {
    "manifest": {"format": "string", "files": "list", "files.0.path": "string", "files.0.role": "string",
                 "files.0.sha256": "string", "files.0.size": "int"},
    "encoder_config": {"vocab_size": "int", "hidden_size": "int", "num_hidden_layers": "int",
                       "num_attention_heads": "int", "intermediate_size": "int", "max_position_embeddings": "int",
                       "type_vocab_size": "int", "layer_norm_eps": "number", "hidden_act": "string"},
    "special_tokens": {"cls": "int", "sep": "int", "pad": "int", "state": "int", "option_markers": "list",
                       "option_markers.0": "int"},
    "sequence_format": {"name": "string", "question_token_type": "int", "option_token_type": "int",
                        "state_position": "string", "padding": "string"},
    "head_config": {"kind": "string", "sequence_budget": "int", "option_budget": "int", "head_layers": "int",
                    "head_attention_heads": "int", "head_intermediate_size": "int", "tasks": "list",
                    "tasks.0.name": "string", "tasks.0.max_options": "int", "tasks.0.temperature": "number",
                    "tasks.0.act_threshold": "number", "tasks.0.escalate_threshold": "number"},
}
# The objects an unknown field is added to (path of the object; "" is the file's top level).
OBJECTS = [("manifest", ""), ("manifest", "files.0"), ("encoder_config", ""), ("special_tokens", ""),
           ("sequence_format", ""), ("head_config", ""), ("head_config", "tasks.0")]


def field_name(path: str) -> str:
    """How a refusal names a field path: "tasks.0.name" -> "tasks[0].name"."""
    out = ""
    for part in path.split("."):
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


def _parent(doc, path: str):
    *parents, last = path.split(".")
    for part in parents:
        doc = doc[int(part)] if part.isdigit() else doc[part]
    return doc, (int(last) if last.isdigit() else last)


@pytest.fixture(scope="module")
def pristine(artifact_factory) -> Path:
    """A transformer head (every head.json field in use) on a synthetic base."""
    return artifact_factory(seed=0, head_kind="transformer")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, pristine) -> Path:
    return tmp_path_factory.mktemp("fields") / "copy"


def fresh_copy(pristine: Path, scratch: Path) -> None:
    if scratch.exists():
        shutil.rmtree(scratch)
    shutil.copytree(pristine, scratch)


def load_edited(pristine: Path, scratch: Path, role: str, edit) -> tuple[Exception | None, str]:
    """Load a fresh copy whose ``role`` file's JSON was edited (and re-pinned), and the
    name a refusal must give the file."""
    fresh_copy(pristine, scratch)
    if role == "manifest":
        doc = json.loads((scratch / MANIFEST).read_text())
        edit(doc)
        rewrite_file(scratch / MANIFEST, json.dumps(doc).encode())
        file = MANIFEST
    else:
        file = pinned_path(scratch, role)
        doc = json.loads((scratch / file).read_text())
        edit(doc)
        replace_pinned_file(scratch, role, json.dumps(doc).encode())
    try:
        laya.load_artifact(scratch)
    except Exception as refused:  # noqa: BLE001 - the test says which refusal it expects
        return refused, file
    return None, file


def assert_refused_naming(outcome: Exception | None, file: str, field: str | None, what) -> None:
    assert isinstance(outcome, ArtifactError), f"{what}: {outcome!r}"
    assert Path(outcome.file).name == Path(file).name, f"{what}: names {outcome.file}"
    assert outcome.field == field, f"{what}: names field {outcome.field!r}, not {field!r}"


@pytest.mark.laya_claim("artifact.fields")
def test_the_unchanged_copy_loads(pristine, scratch):
    assert load_edited(pristine, scratch, "head_config", lambda doc: None)[0] is None


CASES = [(role, path, json_type) for role, fields in FIELDS.items() for path, kind in fields.items()
         for json_type in wrong_types(kind)]


@pytest.mark.laya_claim("artifact.fields")
@pytest.mark.parametrize("role, path, json_type", CASES, ids=[f"{r}:{p}:{t}" for r, p, t in CASES])
@settings(max_examples=1)
@given(data=st.data())
def test_a_field_of_a_wrong_json_type_is_refused_by_name(pristine, scratch, role, path, json_type, data):
    for value in (BOUNDARY[json_type], data.draw(of_type(json_type), label="value")):
        def edit(doc, value=value):
            parent, key = _parent(doc, path)
            parent[key] = value
        outcome, file = load_edited(pristine, scratch, role, edit)
        # A manifest entry's field is named as the entry's when the entry is no longer
        # exactly {path, role, sha256, size} (a value is never that).
        assert_refused_naming(outcome, file, field_name(path), (role, path, value))


MISSING = [(role, path) for role, fields in FIELDS.items() for path in fields if not path.endswith(".0")]


@pytest.mark.laya_claim("artifact.fields")
@pytest.mark.parametrize("role, path", MISSING, ids=[f"{r}:{p}" for r, p in MISSING])
def test_a_field_left_out_is_refused_by_name(pristine, scratch, role, path):
    def edit(doc):
        parent, key = _parent(doc, path)
        del parent[key]
    outcome, file = load_edited(pristine, scratch, role, edit)
    # A manifest entry missing a key is no longer "exactly path, role, sha256, size": the
    # refusal names the entry.
    expected = "files[0]" if path.startswith("files.0.") else field_name(path)
    assert_refused_naming(outcome, file, expected, (role, path))


@pytest.mark.laya_claim("artifact.fields")
@pytest.mark.parametrize("role, where", OBJECTS, ids=[f"{r}:{w or 'top'}" for r, w in OBJECTS])
@settings(max_examples=5)
@example(key="1")  # a key that looks like a list index
@example(key="tasks.0")  # a key that looks like a path
@given(key=st.text(min_size=1, max_size=10).filter(lambda k: k not in {f.rsplit(".", 1)[-1] for fs in FIELDS.values()
                                                                       for f in fs} | {"adapter"}))
def test_an_unknown_field_is_refused(pristine, scratch, role, where, key):
    def edit(doc):
        target = _parent(doc, where + ".x")[0] if where else doc
        target[key] = 1
    outcome, file = load_edited(pristine, scratch, role, edit)
    if role == "manifest":  # the manifest's refusal names the file, or the entry for an entry's key
        assert_refused_naming(outcome, file, "files[0]" if where else None, (role, where, key))
    else:
        # The unknown key is named as written (a key "1" is no list index).
        assert_refused_naming(outcome, file, f"{field_name(where)}.{key}" if where else key, (role, where, key))


@pytest.mark.laya_claim("artifact.fields")
@pytest.mark.parametrize("json_type", [t for t in wrong_types("object") if t != "null"] + ["object"])
def test_a_manifest_adapter_other_than_null_or_left_out_is_refused(pristine, scratch, json_type):
    outcome, _ = load_edited(pristine, scratch, "manifest", lambda doc: doc.update(adapter=BOUNDARY[json_type]))
    assert isinstance(outcome, UnsupportedAdapter), outcome
    outcome, file = load_edited(pristine, scratch, "manifest", lambda doc: doc.pop("adapter"))
    assert_refused_naming(outcome, file, "adapter", "adapter left out")


@pytest.mark.laya_claim("artifact.fields")
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_constant_strict_json_lacks_is_refused_where_null_would_load(pristine, scratch, constant):
    """The manifest's `adapter` loads only as null: NaN, Infinity or -Infinity there is refused
    as not strict JSON naming manifest.json, never read as some other value such as null."""
    text = json.dumps(json.loads((pristine / MANIFEST).read_text()))
    assert text.count('"adapter": null') == 1
    fresh_copy(pristine, scratch)
    rewrite_file(scratch / MANIFEST, text.replace('"adapter": null', f'"adapter": {constant}').encode())
    with pytest.raises(ArtifactError, match="not valid strict UTF-8 JSON") as refused:
        laya.load_artifact(scratch)
    assert refused.value.file == MANIFEST, str(refused.value)


@pytest.mark.laya_claim("artifact.fields")
@pytest.mark.parametrize("other", ["sep", "pad", "state", "option_markers.0", "option_markers.1"])
def test_special_token_ids_must_be_distinct(pristine, scratch, other):
    """Two special roles given one id (each other field unchanged and valid) are refused
    naming special_tokens.json."""
    def edit(doc):
        parent, key = _parent(doc, other)
        parent[key] = doc["cls"]
    outcome, file = load_edited(pristine, scratch, "special_tokens", edit)
    assert isinstance(outcome, ArtifactError) and Path(outcome.file).name == Path(file).name, outcome


@pytest.mark.laya_claim("artifact.fields")
@pytest.mark.parametrize("keep", [0, 1])
def test_fewer_than_two_option_markers_are_refused(pristine, scratch, keep):
    def edit(doc):
        doc["option_markers"] = doc["option_markers"][:keep]
    outcome, file = load_edited(pristine, scratch, "special_tokens", edit)
    assert_refused_naming(outcome, file, "option_markers", f"{keep} markers")


@pytest.mark.laya_claim("artifact.fields")
def test_task_names_are_unique(pristine, scratch):
    """A head whose second task repeats the first's name is refused naming that task's name."""
    def edit(doc):
        doc["tasks"] = [doc["tasks"][0], dict(doc["tasks"][0])]
    outcome, file = load_edited(pristine, scratch, "head_config", edit)
    assert_refused_naming(outcome, file, "tasks[1].name", "a repeated task name")


@pytest.mark.laya_claim("artifact.fields")
@pytest.mark.parametrize("field", ["question_token_type", "option_token_type"])
def test_a_token_type_is_below_type_vocab_size(pristine, scratch, field):
    """docs/artifact-v1.md: each token type is an int below type_vocab_size (a row of the
    token-type embeddings); the last row loads, one past it and -1 are refused naming the field."""
    types = json.loads((pristine / pinned_path(pristine, "encoder_config")).read_text())["type_vocab_size"]
    for value, refused in ((types, True), (-1, True), (types - 1, False)):
        outcome, file = load_edited(pristine, scratch, "sequence_format", lambda doc: doc.update({field: value}))
        if refused:
            assert_refused_naming(outcome, file, field, f"{field} = {value} of {types} types")
        else:
            assert outcome is None, f"{field} = {value} of {types} types: {outcome!r}"
