"""The plugin in somebody else's project: loading it changes nothing for their tests
(Hypothesis profile and example counts, a `claim` marker of their own, torch import,
torch threads), and `--laya-qualify` collects the suite however it was enabled. Each
run is a subprocess, so `sys.modules` and torch's thread pool start clean."""

from __future__ import annotations

import json
import os

import pytest

pytest_plugins = ("pytester",)

UNRELATED = """
import json
import sys

import pytest
from hypothesis import given, settings, strategies as st

SEEN = []
FACTS = {"torch_before_user": "torch" in sys.modules}


@given(st.integers())
def test_property(x):
    SEEN.append(x)


@pytest.mark.claim("not a laya claim id")
def test_own_claim_marker():
    pass


def test_zz_record_facts():
    FACTS["torch_before_user"] = FACTS["torch_before_user"] or "torch" in sys.modules
    FACTS["examples"] = len(SEEN)
    FACTS["profile"] = settings.get_current_profile_name()
    FACTS["max_examples"] = settings.default.max_examples
    FACTS["deadline"] = str(settings.default.deadline)
    FACTS["derandomize"] = settings.default.derandomize
    import torch

    FACTS["threads"] = torch.get_num_threads()
    with open("facts.json", "w") as f:
        json.dump(FACTS, f)
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An unrelated project with its own `claim` marker (registered, strict markers on)."""
    for var in [v for v in os.environ if v.startswith("PYTEST_XDIST_")] + ["CI", "HYPOTHESIS_PROFILE"]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # so one thread would be a visible change
    pytester.makepyfile(test_unrelated=UNRELATED)
    pytester.makeini("[pytest]\nmarkers =\n    claim(id): the project's own marker\naddopts = --strict-markers\n")
    return pytester


def facts(pytester: pytest.Pytester, *args: str) -> dict:
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=3)
    return json.loads((pytester.path / "facts.json").read_text())


@pytest.mark.slow
def test_loading_the_plugin_changes_nothing_for_other_tests(project):
    without = facts(project)
    with_plugin = facts(project, "-p", "laya_qual")
    assert with_plugin == without
    assert with_plugin["examples"] >= 100 and with_plugin["profile"] == "default"  # Hypothesis' own default
    assert with_plugin["torch_before_user"] is False
    assert with_plugin["threads"] == 2


@pytest.mark.slow
def test_hypothesis_ci_profile_still_applies_under_ci(project, monkeypatch):
    monkeypatch.setenv("CI", "true")
    ci = facts(project, "-p", "laya_qual")
    assert ci["profile"] == "ci" and ci["derandomize"] is True and ci["deadline"] == "None"


@pytest.mark.slow
@pytest.mark.parametrize("enabled_by", ["conftest", "addopts"])
def test_laya_qualify_collects_the_suite_however_enabled(project, enabled_by):
    if enabled_by == "conftest":
        project.makeconftest('pytest_plugins = ["laya_qual"]\n')
    else:
        project.makeini("[pytest]\nmarkers =\n    claim(id): own marker\naddopts = -p laya_qual\n")
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--laya-qualify", "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()
    collected = result.stdout.str()
    for module in ("test_cache.py", "test_heads.py", "test_learner_exact.py", "test_report_assembly.py"):
        assert module in collected
    assert "test_unrelated.py" not in collected  # the suite instead of the project's own tests


@pytest.mark.slow
def test_the_header_line_belongs_to_a_qualifying_run_only(project):
    """Loading the plugin leaves pytest's header as it was; a qualifying run adds its line
    (versions, the suite's profile, device, seed) to it."""
    plain = project.runpytest_subprocess("-p", "no:cacheprovider", "-p", "laya_qual", "--collect-only")
    assert plain.ret == 0 and "laya_qual" not in plain.stdout.str(), plain.stdout.str()
    qualifying = project.runpytest_subprocess("-p", "no:cacheprovider", "-p", "laya_qual", "--laya-qualify",
                                              "--collect-only", "--hypothesis-seed", "3", "-k", "test_cache")
    assert qualifying.ret == 0, qualifying.stdout.str()
    qualifying.stdout.re_match_lines([r"laya_qual: laya-qual \S+, torch \S+, suite hypothesis profile laya-qual, "
                                      r"device cpu, hypothesis seed 3$"])


def test_laya_qualify_without_the_plugin_fails_loudly(project):
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--laya-qualify")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --laya-qualify*"])


@pytest.mark.slow
def test_suite_profile_applies_to_suite_tests_with_their_own_overrides(project):
    """laya-qual (12 examples) for suite tests, laya-qual-thorough (200) on request; a
    suite test's own @settings(max_examples=40) stays 40 under either."""
    def examples(*args: str) -> dict[str, int]:
        evidence = project.path / "evidence.json"
        result = project.runpytest_subprocess(
            "-p", "no:cacheprovider", "-p", "laya_qual", "--laya-qualify", "--laya-evidence-out", str(evidence),
            "-k", "test_cache_holds_copies or TestLruEviction", *args)
        assert result.ret == 0, result.stdout.str()
        records = json.loads(evidence.read_text())["records"]
        return {r["test"].split("::", 1)[1]: r["hypothesis"]["valid"] for r in records}

    default = examples()
    assert default == {"test_cache_holds_copies": 12, "TestLruEviction::runTest": 40}
    thorough = examples("--laya-profile", "laya-qual-thorough")
    assert thorough == {"test_cache_holds_copies": 200, "TestLruEviction::runTest": 40}


@pytest.mark.slow
@pytest.mark.parametrize(("flag", "says"), [
    ("--laya-kill-rate", "--laya-kill-rate goes into a signed report: it needs --laya-report"),
    ("--laya-evidence-in", "--laya-evidence-in merges into --laya-report or --laya-evidence-out: give one")])
def test_report_inputs_without_a_report_fail_loudly(project, flag, says):
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-p", "laya_qual", flag, "x.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{says}*"])


@pytest.mark.slow
def test_hypothesis_verbosity_reaches_suite_tests(project):
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-p", "laya_qual", "--laya-qualify", "-s",
                                          "--hypothesis-verbosity=verbose", "-k", "test_cache_holds_copies")
    assert result.ret == 0, result.stdout.str()
    assert "Test case: test_cache_holds_copies" in result.stdout.str()


def test_every_option_is_in_one_namespaced_help_group(project):
    """`pytest --help` lists the plugin's options together, under its own heading, after
    the other plugins' groups -- not scattered, and not under a heading it does not own."""
    help_text = project.runpytest_subprocess("-p", "laya_qual", "--help").stdout.str()
    sections = help_text.split("\n\n")
    [ours] = [s for s in sections if s.startswith("laya qualification:")]
    options = {line.split()[0].split("=")[0].rstrip(",") for line in ours.splitlines()[1:]
               if line.strip().startswith("--laya-")}
    assert {"--laya-qualify", "--laya-artifact", "--laya-report", "--laya-signing-key", "--laya-shard",
            "--laya-plan", "--laya-evidence-out", "--laya-kill-rate"} <= options
    assert help_text.count("--laya-qualify") == 1 and "laya_qual:" not in help_text
