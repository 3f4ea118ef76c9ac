"""report.harness.inert: the plugin loaded into somebody else's pytest run that does not
ask for qualification (no --laya-qualify, no report, no evidence) changes nothing of it:
the same outcomes, no file of its own written, no line of output added, its own `claim` marker and
Hypothesis tests untouched (docs/pytest-options.md: every option is opt-in)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

THEIR_TESTS = """
import pytest
from hypothesis import given, settings, strategies as st


@settings(max_examples=7, database=None)
@given(st.integers())
def test_property(x):
    assert isinstance(x, int)


@pytest.mark.claim("their own marker")
def test_own_claim_marker():
    pass


def test_failing_on_purpose():
    assert False


@pytest.mark.skip(reason="theirs")
def test_skipped():
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """Their project: its own registered `claim` marker, strict markers on."""
    for var in [v for v in os.environ if v.startswith(("PYTEST_XDIST_", "LAYA_QUAL_"))] + ["PYTEST_ADDOPTS"]:
        monkeypatch.delenv(var, raising=False)
    pytester.makepyfile(test_theirs=THEIR_TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    claim(id): the project's own marker\naddopts = --strict-markers\n")
    return pytester


def files(root: Path) -> set[str]:
    """Every path under ``root`` but caches and pytester's own temporary directories."""
    paths = (p.relative_to(root) for p in root.rglob("*"))
    return {str(p) for p in paths if "__pycache__" not in p.parts and not p.parts[0].startswith("runpytest-")
            and p.parts[0] not in ("stdout", "stderr")}


def run(project: pytest.Pytester, *args: str):
    """A run in its own process (nothing of this one's plugins or imports carried over);
    the files it wrote are returned and removed, so each run starts from the same tree."""
    before = files(project.path)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args)
    written = files(project.path) - before
    for name in sorted(written, reverse=True):
        path = project.path / name
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
    return result, written


@pytest.mark.laya_claim("report.harness.inert")
def test_loading_the_plugin_without_qualifying_changes_nothing(project):
    without, written_without = run(project)
    with_plugin, written_with = run(project, "-p", "laya_qual")
    assert with_plugin.ret == without.ret == pytest.ExitCode.TESTS_FAILED
    assert with_plugin.parseoutcomes() == without.parseoutcomes() == {"passed": 2, "failed": 1, "skipped": 1}
    # what pytest's other plugins and caches write (.benchmarks, Hypothesis' .hypothesis) may
    # differ with import order; nothing of the plugin's own (report, evidence, durations):
    assert not [name for name in written_with - written_without if not name.startswith(".hypothesis")], written_with
    added = [line for line in with_plugin.outlines + with_plugin.errlines if "laya" in line.lower()]
    assert added == [], added


@pytest.mark.laya_claim("report.harness.inert")
def test_their_claim_marker_is_theirs(project):
    """`claim` is their marker's name; the plugin's is `laya_claim`: nothing of theirs is
    read as a claim, and a run that does not qualify writes no report of it."""
    result, written = run(project, "-p", "laya_qual", "--strict-markers", "-k", "own_claim_marker")
    result.assert_outcomes(passed=1, deselected=3)
    assert not any("laya" in name.lower() or name.endswith(".jsonl") for name in written), written
