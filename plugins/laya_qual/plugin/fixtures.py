"""Fixtures that hand qualification tests their artifacts.

Costly things are session-scoped and cached: synthetic artifacts are written once
per distinct recipe, loaded models once per directory. ``qualified_artifact`` is
parametrized over the artifacts under qualification: the embedded synthetic
default (one per head kind, and a head trained and certified by laya's training
pipeline) or, with ``--laya-artifact DIR``, the user's own; a test whose subject is
the base, or a head kind's serving path, runs once per base (and kind).

A run that writes a report or evidence qualifies the synthetic default the controller
wrote (``write_synthetic_default``) and signs as subjects: its xdist workers get the
directories through ``workerinput``, so the bytes tested are the bytes digested.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pytest

if TYPE_CHECKING:
    import laya  # imported where used: loading the plugin must not import torch

# The synthetic default, by name: its head kind. One base; "trained" is a float32 head that
# laya's own training pipeline trained, calibrated and certified on synthetic tasks, so a
# default report shows what calibration and certification record.
SYNTHETIC = {"float32": "float32", "int8": "int8", "transformer": "transformer", "trained": "float32"}
TRAINED = "trained"
SYNTHETIC_BASE_SEED = 1
DEFAULT_INPUT = "laya_synthetic_default"  # xdist workerinput key: {name: directory} the controller wrote
DEFAULT_KEY = pytest.StashKey[dict]()


class ArtifactFactory:
    """Writes synthetic artifacts on demand, once per distinct recipe."""

    def __init__(self, root: Path, published: dict[str, Path] | None = None):
        self.root = root
        self._made: dict[str, Path] = {}
        self._published = published or {}  # the synthetic default the controller wrote

    def __call__(self, *, seed: int, head_kind: str, **recipe: Any) -> Path:
        from laya_qual.synth import write_artifact

        key = json.dumps({"seed": seed, "head_kind": head_kind, **recipe}, sort_keys=True, default=str)
        if key not in self._made:
            self._made[key] = write_artifact(self.root / f"a{len(self._made)}", seed=seed, head_kind=head_kind, **recipe)
        return self._made[key]

    def default(self, name: str) -> Path:
        """The synthetic default's artifact ``name`` (all share one base): the controller's if
        it wrote them, else written here into ``synthetic-NAME``."""
        from laya_qual.synth import write_artifact, write_trained_artifact

        if name in self._published:
            return self._published[name]
        key = f"default:{name}"
        if key not in self._made:
            out = self.root / f"synthetic-{name}"
            if name == TRAINED:
                write_trained_artifact(out, base_dir=self.default("float32"))
            else:
                write_artifact(out, seed=7, head_kind=SYNTHETIC[name], base_seed=SYNTHETIC_BASE_SEED)
            self._made[key] = out
        return self._made[key]


def write_synthetic_default(root: Path) -> dict[str, Path]:
    """Write the whole synthetic default into ``root``: {name: directory}."""
    factory = ArtifactFactory(root)
    return {name: factory.default(name) for name in SYNTHETIC}


def published_default(config: pytest.Config) -> dict[str, Path]:
    """The synthetic default this run's controller wrote ({} when it wrote none)."""
    worker = getattr(config, "workerinput", None)
    written = worker.get(DEFAULT_INPUT) if worker is not None else config.stash.get(DEFAULT_KEY, None)
    return {name: Path(directory) for name, directory in (written or {}).items()}


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
def artifact_factory(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> ArtifactFactory:
    return ArtifactFactory(tmp_path_factory.mktemp("laya-synthetic"), published_default(pytestconfig))


@pytest.fixture(scope="session")
def load_model() -> Callable[[Path], laya.Model]:
    return ModelCache()


# How often an artifact-facing test runs (``@pytest.mark.laya_once_per(LEVEL)``): once per
# artifact (no marker), once per distinct base and head kind, or once per distinct base.
LEVELS = ("artifact", "base-kind", "base")


def once_per(item_or_metafunc) -> str:
    """The level a test declares with ``laya_once_per`` (default: every artifact)."""
    definition = getattr(item_or_metafunc, "definition", item_or_metafunc)
    mark = definition.get_closest_marker("laya_once_per")
    return mark.args[0] if mark else "artifact"


def _group_key(directory: Path, level: str, index: int) -> tuple:
    """What a ``level`` representative stands for: the sha256 pins of the artifact's base
    files (from its manifest), and the head kind (from its head.json). An artifact whose
    manifest or head.json cannot be read is its own group, so the test runs on it and
    fails there with the loader's own error instead of being hidden behind another."""
    from laya.artifact.manifest import BASE_ROLES

    try:
        files = {e["role"]: e for e in json.loads((directory / "manifest.json").read_text())["files"]}
        base = tuple(files[role]["sha256"] for role in BASE_ROLES)
        if level == "base":
            return base
        return base, json.loads((directory / files["head_config"]["path"]).read_text())["kind"]
    except (OSError, ValueError, KeyError, TypeError):
        return ("unreadable", index)


def representatives(config: pytest.Config, level: str) -> list[tuple[tuple[str, str], str]]:
    """((source, value), test id) of the artifacts a ``level`` test runs on: every artifact
    under qualification, or the first of each group. Synthetic default: one base, one
    artifact per head kind, and the trained float32 head (a group of its own only per artifact)."""
    user = config.getoption("laya_artifact")
    if user:
        every = [(("artifact", str(Path(p).resolve())), f"artifact{i}-{Path(p).name}") for i, p in enumerate(user)]
        keys = [_group_key(Path(value), level, i) for i, ((_, value), _) in enumerate(every)] \
            if level != "artifact" else list(range(len(every)))
    else:
        every = [(("synthetic", name), f"synthetic-{name}") for name in SYNTHETIC]
        keys = {"artifact": list(SYNTHETIC), "base-kind": list(SYNTHETIC.values()),
                "base": ["base"] * len(SYNTHETIC)}[level]
    first: dict = {}
    for key, entry in zip(keys, every):
        first.setdefault(key, entry)
    return list(first.values())


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run artifact-facing claims once per artifact under qualification, or once per base
    (and head kind) where the test declares that its subject is the base (or the serving
    path of a head kind) rather than one head's own files and numbers."""
    if "qualified_artifact" not in metafunc.fixturenames:
        return
    level = once_per(metafunc)
    if level not in LEVELS:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: laya_once_per({level!r}): not one of {LEVELS}")
    chosen = representatives(metafunc.config, level)
    metafunc.parametrize("qualified_artifact", [p for p, _ in chosen], ids=[i for _, i in chosen], indirect=True)


@pytest.fixture(scope="session")
def qualified_heads(pytestconfig: pytest.Config, artifact_factory: ArtifactFactory) -> list[tuple[str, Path]]:
    """(adapter id, directory) of every artifact under qualification, for claims about serving
    several heads at once: the user's ``--laya-artifact``s, else the synthetic default (the
    directories of ``qualified_artifact``, so they are written once per session)."""
    user = pytestconfig.getoption("laya_artifact")
    if user:
        return [(f"artifact{i}-{Path(p).name}", Path(p).resolve()) for i, p in enumerate(user)]
    return [(name, artifact_factory.default(name)) for name in SYNTHETIC]


def heads_by_base(heads: list[tuple[str, Path]], base_dir: Path | None) -> list[dict[str, Path]]:
    """``heads`` grouped by the base they attach to ({adapter id: directory} per base): all of
    them with ``--laya-base``, else by the pins of their base files (read from each
    manifest, nothing loaded: opening the group on one base then checks every head's pins)."""
    if base_dir is not None:
        return [dict(heads)] if heads else []
    by_base: dict[tuple, dict[str, Path]] = {}
    for i, (adapter_id, directory) in enumerate(heads):
        by_base.setdefault(_group_key(Path(directory), "base", i), {})[adapter_id] = directory
    return list(by_base.values())


@pytest.fixture(scope="session")
def qualified_artifact(request: pytest.FixtureRequest, artifact_factory: ArtifactFactory) -> Path:
    """The directory of one artifact under qualification."""
    source, value = request.param
    if source == "artifact":
        return Path(value)
    return artifact_factory.default(value)


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
