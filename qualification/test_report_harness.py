"""The harness's own guards. report.harness.inert: the plugin loaded into somebody else's
pytest run that does not ask for qualification (no --laya-qualify, no report, no evidence)
changes nothing of it: the same outcomes, no file of its own written, no line of output
added, its own `claim` marker untouched (docs/pytest-options.md: every option is opt-in).
report.harness.install-guard: a mutation or coverage run measures the isolated copy it
builds, never the install beside it (docs/mutation.md, "Isolation")."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from laya_qual.measure.mutation import MutationError, build_root, check_shadowing, child_env, installed_layout

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


@pytest.fixture(scope="module")
def isolated_copy(tmp_path_factory) -> Path:
    return build_root(tmp_path_factory.mktemp("isolated") / "root", installed_layout())


def imported_from(root: Path, module: str) -> Path:
    """Where a child started as a mutation run starts it imports ``module`` from."""
    out = subprocess.run([sys.executable, "-c", f"import {module}; print({module}.__file__)"], env=child_env(root),
                         cwd=root, capture_output=True, text=True, check=True)
    return Path(out.stdout.strip()).resolve()


@pytest.mark.laya_claim("report.harness.install-guard")
def test_the_isolated_copy_shadows_every_package_of_the_install(isolated_copy):
    check_shadowing(isolated_copy)
    for module in ("laya_qual.suite", "laya_qual.synth"):  # the two an editable install maps from elsewhere
        assert isolated_copy.resolve() in imported_from(isolated_copy, module).parents, module


@pytest.mark.laya_claim("report.harness.install-guard")
def test_a_copy_that_reaches_back_into_the_install_is_refused_by_name(isolated_copy, tmp_path):
    """A copy whose suite is a link to the installed one (as a copy that keeps symlinks
    makes) would run the unmutated suite: refused, naming the package."""
    root = tmp_path / "root"
    shutil.copytree(isolated_copy, root, ignore=shutil.ignore_patterns("suite"))
    (root / "laya_qual" / "suite").symlink_to(installed_layout()["laya_qual.suite"], target_is_directory=True)
    with pytest.raises(MutationError, match=r"does not shadow the install: \{'laya_qual.suite'"):
        check_shadowing(root)
