"""The shipped suite is green in any order its tests are run in: shuffled, and fastest first
(the order a sampled mutant run's whole-suite stage uses). A test that depends on what ran
before it turns a mutant's run red for no fault of the mutant's, and a kill counted from it
overstates the suite. Two whole suite runs (6 minutes in all on 2 cores): marked
``slow``, run by .ci/run after the README's test command (``pytest -n 2 -m slow tests``)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import laya_qual.suite

SUITE = Path(laya_qual.suite.__file__).parent
SEED = 7


def _pytest(ini: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest on the installed suite, node ids relative to it, no project configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    return subprocess.run([sys.executable, "-m", "pytest", "-c", str(ini), f"--rootdir={SUITE}", "-p", "laya_qual",
                           "-p", "no:cacheprovider", "-q", *args], cwd=SUITE, env=env, capture_output=True, text=True)


def _run(ini: Path, ids: list[str], junit: Path) -> subprocess.CompletedProcess:
    return _pytest(ini, "-rfE", f"--hypothesis-seed={SEED}", "-n", "2", f"--junitxml={junit}", *ids)


def _node_ids(ini: Path) -> list[str]:
    return [line for line in _pytest(ini, "--collect-only").stdout.splitlines() if "::" in line]


def _seconds(junit: Path) -> dict[str, float]:
    """Each test's seconds, by the node id pytest was given (file path, ``::``, name)."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        path = case.get("classname", "").replace(".", "/") + ".py"
        out[f"{path}::{case.get('name')}"] = float(case.get("time", 0.0))
    return out


@pytest.mark.slow
def test_the_suite_is_green_shuffled_and_fastest_first(tmp_path):
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\n")
    ids = _node_ids(ini)
    assert len(ids) > 1000, "the suite's collection listed too few tests"
    shuffled = random.Random(45).sample(ids, len(ids))
    first = _run(ini, shuffled, tmp_path / "shuffled.xml")
    assert first.returncode == 0, first.stdout[-6000:]
    seconds = _seconds(tmp_path / "shuffled.xml")
    fastest_first = sorted(ids, key=lambda t: (seconds.get(t, 0.0), t))
    second = _run(ini, fastest_first, tmp_path / "fastest.xml")
    assert second.returncode == 0, second.stdout[-6000:]
