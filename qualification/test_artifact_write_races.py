"""artifact.atomic-write, while the writer runs: a name that another writer takes after
write_artifact_files has checked it is still never replaced (docs/artifact-v1.md, "Writing
rules" 3: "a rename that would replace one is refused by the filesystem as well,
laya.artifact.atomic.OutputExists"), and a publication that fails for any other reason leaves no
temporary behind (rule 2).

The interleaving is made real, not simulated: the writer holds right before publishing
(the ``LAYA_TEST_HOLD_PUBLISH`` seam of laya.artifact.atomic) while a second thread takes the name,
with laya's own file writer (a file inside a new directory under the name) or with a
plain file, then lets the writer go on. Oracle: the parent directory's bytes, read with
os.walk before and after, and the error's class and ``file``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from laya.artifact.manifest import write_artifact_files
from laya.artifact.atomic import write_file
from laya.errors import OutputExists
from laya_qual.suite.holding import while_held

FILES = {"encoder_config": ("encoder_config.json", b"{}"), "tokenizer": ("tok/tokenizer.json", b'{"v": 1}')}


def tree(directory: Path) -> dict[str, bytes | None]:
    """Every path under ``directory`` (hidden ones included) with its bytes, None for a directory."""
    return {str(p.relative_to(directory)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(directory.rglob("*"))}


def write_while_held(final: Path, marker: Path, meanwhile) -> None:
    """write_artifact_files(final, FILES), running ``meanwhile(temporaries)`` once the
    writer holds before publishing; re-raises what the writer raised."""
    while_held(final, marker, lambda: write_artifact_files(final, FILES), meanwhile)


def take_with_laya(final: Path) -> None:
    # laya's own writer, while the hold names another output: it publishes without holding
    write_file(final / "theirs.bin", b"the other writer's")


def take_with_a_file(final: Path) -> None:
    final.write_bytes(b"the other writer's")


@pytest.mark.laya_claim("artifact.atomic-write")
@pytest.mark.parametrize("take", [take_with_laya, take_with_a_file], ids=["non-empty-directory", "file"])
def test_a_name_taken_while_writing_is_refused_and_kept(tmp_path, take):
    parent = tmp_path / "out"
    parent.mkdir()
    final = parent / "artifact"
    expected: dict = {}

    def meanwhile(_temporaries):
        take(final)
        expected.update(tree(parent))  # the other writer's output, plus our unpublished temporary

    with pytest.raises(OutputExists) as refused:
        write_while_held(final, tmp_path / "held", meanwhile)
    assert refused.value.file == str(final)
    theirs = {k: v for k, v in expected.items() if not k.startswith(".artifact.tmp-")}
    assert theirs != expected, "the writer held without a temporary"
    assert tree(parent) == theirs, "the other writer's output changed, or a temporary was left"


@pytest.mark.laya_claim("artifact.atomic-write")
def test_a_publication_failing_otherwise_raises_it_and_leaves_nothing(tmp_path):
    """The temporary deleted under the writer (docs: a leftover .NAME.tmp-* "can be deleted"):
    the rename fails with ENOENT, which is an OS error, not a refusal of the name."""
    parent = tmp_path / "out"
    parent.mkdir()
    (parent / "neighbour").write_bytes(b"keep")
    before = tree(parent)

    def delete_temporaries(temporaries):
        assert [t.parent for t in temporaries] == [parent] and temporaries[0].name.startswith(".artifact.tmp-")
        shutil.rmtree(temporaries[0])

    with pytest.raises(OSError) as failed:
        write_while_held(parent / "artifact", tmp_path / "held", delete_temporaries)
    assert not isinstance(failed.value, OutputExists), failed.value
    assert tree(parent) == before
