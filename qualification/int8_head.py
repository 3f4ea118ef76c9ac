"""One int8 head artifact (seed 6) and its verified base, written once per module that
imports these fixtures: the subject of the suite's argument and input refusal tests."""

from __future__ import annotations

from pathlib import Path

import pytest

import laya


@pytest.fixture(scope="module")
def pristine(artifact_factory) -> Path:
    return artifact_factory(seed=6, head_kind="int8")


@pytest.fixture(scope="module")
def base(pristine):
    return laya.load_artifact_base(pristine)
