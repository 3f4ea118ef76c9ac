"""Fixtures that hand qualification tests their artifacts.

Costly things are session-scoped and cached: synthetic artifacts are written once
per distinct recipe, loaded models once per directory. ``qualified_artifact`` is
parametrized over the artifacts under qualification: the embedded synthetic
default (one per head kind) or, with ``--laya-artifact DIR``, the user's own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pytest

if TYPE_CHECKING:
    import laya  # imported where used: loading the plugin must not import torch

SYNTHETIC_KINDS = ("float32", "int8", "transformer")
SYNTHETIC_BASE_SEED = 1


class ArtifactFactory:
    """Writes synthetic artifacts on demand, once per distinct recipe."""

    def __init__(self, root: Path):
        self.root = root
        self._made: dict[str, Path] = {}

    def __call__(self, *, seed: int, head_kind: str, **recipe: Any) -> Path:
        from laya_qual.synth import write_artifact

        key = json.dumps({"seed": seed, "head_kind": head_kind, **recipe}, sort_keys=True, default=str)
        if key not in self._made:
            self._made[key] = write_artifact(self.root / f"a{len(self._made)}", seed=seed, head_kind=head_kind, **recipe)
        return self._made[key]


class ModelCache:
    """Loads each artifact directory standalone once per session."""

    def __init__(self) -> None:
        self._models: dict[Path, laya.Model] = {}

    def __call__(self, directory: Path) -> laya.Model:
        directory = Path(directory)
        if directory not in self._models:
            import laya

            self._models[directory] = laya.load_artifact(directory)
        return self._models[directory]


@pytest.fixture(scope="session")
def artifact_factory(tmp_path_factory: pytest.TempPathFactory) -> ArtifactFactory:
    return ArtifactFactory(tmp_path_factory.mktemp("laya-synthetic"))


@pytest.fixture(scope="session")
def load_model() -> Callable[[Path], laya.Model]:
    return ModelCache()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run artifact-facing claims once per artifact under qualification."""
    if "qualified_artifact" not in metafunc.fixturenames:
        return
    user = metafunc.config.getoption("laya_artifact")
    if user:
        params = [("artifact", str(Path(p).resolve())) for p in user]
        ids = [f"artifact{i}-{Path(p).name}" for i, p in enumerate(user)]
    else:
        params = [("synthetic", kind) for kind in SYNTHETIC_KINDS]
        ids = [f"synthetic-{kind}" for kind in SYNTHETIC_KINDS]
    metafunc.parametrize("qualified_artifact", params, ids=ids, indirect=True)


def synthetic_artifact(artifact_factory: ArtifactFactory, kind: str) -> Path:
    """The synthetic default's artifact of one head kind (all kinds share one base)."""
    return artifact_factory(seed=7, head_kind=kind, base_seed=SYNTHETIC_BASE_SEED)


@pytest.fixture(scope="session")
def qualified_heads(pytestconfig: pytest.Config, artifact_factory: ArtifactFactory) -> list[tuple[str, Path]]:
    """(adapter id, directory) of every artifact under qualification, for claims about serving
    several heads at once: the user's ``--laya-artifact``s, else the synthetic default of each
    head kind (the recipes of ``qualified_artifact``, so they are written once per session)."""
    user = pytestconfig.getoption("laya_artifact")
    if user:
        return [(f"artifact{i}-{Path(p).name}", Path(p).resolve()) for i, p in enumerate(user)]
    return [(kind, synthetic_artifact(artifact_factory, kind)) for kind in SYNTHETIC_KINDS]


def heads_by_base(heads: list[tuple[str, Path]], base_dir: Path | None) -> list[dict[str, Path]]:
    """``heads`` grouped by the base they attach to ({adapter id: directory} per base)."""
    import laya

    by_base: dict[str, dict[str, Path]] = {}
    for adapter_id, directory in heads:
        by_base.setdefault(laya.load_artifact_base(directory, base_dir).identity, {})[adapter_id] = directory
    return list(by_base.values())


@pytest.fixture(scope="session")
def qualified_artifact(request: pytest.FixtureRequest, artifact_factory: ArtifactFactory) -> Path:
    """The directory of one artifact under qualification."""
    source, value = request.param
    if source == "artifact":
        return Path(value)
    return synthetic_artifact(artifact_factory, value)


@pytest.fixture(scope="session")
def qualified_model(qualified_artifact: Path, load_model: Callable[[Path], laya.Model]) -> laya.Model:
    return load_model(qualified_artifact)


@pytest.fixture(scope="session")
def qualified_base_dir(request: pytest.FixtureRequest) -> Path | None:
    """`--laya-base DIR` if given: the base the qualified artifacts must share."""
    base = request.config.getoption("laya_base")
    return Path(base).resolve() if base else None


@pytest.fixture(scope="session")
def laya_device(request: pytest.FixtureRequest) -> str:
    """`--laya-device`: where the runtime and the benchmark claims compute (cpu or cuda)."""
    return request.config.getoption("laya_device")
