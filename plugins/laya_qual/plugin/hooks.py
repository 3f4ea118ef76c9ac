"""Hooks of the laya_qual plugin: options, the claim marker, the suite's Hypothesis
profile, the report header, and the collection rules that tie every qualification
test to a catalogued claim.

The plugin is inert for tests that are not qualification tests: it imports no torch,
sets no threads and loads no Hypothesis profile until a qualification run is asked
for (``--laya-qualify``, ``--laya-report``, ``--laya-evidence-out``) or suite tests
are collected, and even then the suite's profile applies to suite tests only.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from laya_qual import missing_harness

if missing := missing_harness():  # a runtime-only install: one line, not an ImportError below
    raise pytest.UsageError(missing)

from hypothesis import HealthCheck, Verbosity, settings

from laya_qual.plugin import selection
from laya_qual.claims import CLAIMS
from laya_qual.plugin.evidence import attach_claims
from laya_qual.plugin.fixtures import DEFAULT_INPUT, DEFAULT_KEY
from laya_qual.report.signing import KEY_ENV
from laya_qual.plugin.items import claim_ids, is_benchmark, keep_only

PROFILE, THOROUGH = "laya-qual", "laya-qual-thorough"
SEED_INPUT = "laya_hypothesis_seed"  # xdist workerinput key: workers re-parse only the command line
_QUALIFYING = pytest.StashKey[bool]()
_SUITE_PROFILE = pytest.StashKey[str]()

# Namespaced, parented on Hypothesis' built-in `default` (never on whatever profile is
# current, e.g. `ci` under $CI), and used only while suite modules are imported. No
# database: a qualification run's examples follow from its recorded seed alone.
_SUITE_SETTINGS = dict(deadline=None, database=None,
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(PROFILE, parent=settings.get_profile("default"), max_examples=12, **_SUITE_SETTINGS)
settings.register_profile(THOROUGH, parent=settings.get_profile("default"), max_examples=200, **_SUITE_SETTINGS)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("laya_qual", "laya qualification")
    group.addoption("--laya-artifact", action="append", default=[], metavar="DIR",
                    help="qualify this artifact directory too (repeatable; ini: laya_artifacts)")
    group.addoption("--laya-base", default=None, metavar="DIR",
                    help="artifact directory whose encoder is the shared base for --laya-artifact heads "
                         "(ini: laya_base)")
    group.addoption("--laya-report", default=None, metavar="PATH",
                    help="write the qualification report bundle here (*.intoto.jsonl; ini: laya_report)")
    group.addoption("--laya-device", default="cpu", choices=("cpu", "cuda"),
                    help="device the runtime and benchmark claims run on (default: cpu)")
    group.addoption("--laya-threads", default=1, type=int, metavar="N",
                    help="torch intra-op threads per test process in a qualification run (default 1: "
                         "xdist workers share the cores, and exactness claims require one thread)")
    group.addoption("--laya-qualify", action="store_true", default=False,
                    help="collect the installed qualification suite (laya_qual.suite) "
                         "instead of the current project's tests")
    group.addoption("--laya-claims", default=None, metavar="PATTERN[,...]",
                    help="run only tests of these claims: an id, an area or id prefix (`cache`), or a glob")
    group.addoption("--laya-profile", default=None, metavar="NAME",
                    help=f"Hypothesis profile for suite tests only: {PROFILE} (default, 12 examples) or "
                         f"{THOROUGH} (200), or any registered profile; other tests keep Hypothesis' own")
    group.addoption("--laya-benchmarks", default="include", choices=("include", "exclude", "only"),
                    help="deselect the benchmark tests (exclude) or everything else (only); "
                         "laya-qual run uses this to measure benchmarks in a serial pass")
    group.addoption("--laya-shard", default=None, metavar="K/N",
                    help="run only shard K of N: a deterministic part of the selection, balanced by the "
                         "durations in --laya-durations (benchmarks always on shard 1); merge the shards' "
                         "evidence with `laya-qual merge`")
    group.addoption("--laya-durations", default=None, metavar="FILE",
                    help="recorded per-test durations (laya-qual run keeps them in reports/.laya-qual/) that "
                         "balance --laya-shard, estimate --laya-plan and time the progress line's time left")
    group.addoption("--laya-plan", default=None, metavar="FILE",
                    help="run nothing: write the selection (each test's claims, artifact and level) to FILE")
    parser.addini("laya_artifacts", "default for --laya-artifact (paths relative to the ini file)", type="paths")
    parser.addini("laya_base", "default for --laya-base (relative to the ini file)", type="paths")
    parser.addini("laya_report", "default for --laya-report (relative to the ini file)", type="paths")


def _ini_defaults(config: pytest.Config) -> None:
    """Command-line options win; the ini keys fill in what was not given."""
    if not config.option.laya_artifact:
        config.option.laya_artifact = [str(p) for p in config.getini("laya_artifacts")]
    for option, ini in (("laya_base", "laya_base"), ("laya_report", "laya_report")):
        if getattr(config.option, option) is None:
            paths = config.getini(ini)
            if len(paths) > 1:
                raise pytest.UsageError(f"ini key {ini} takes one path, got {len(paths)}")
            setattr(config.option, option, str(paths[0]) if paths else None)


def suite_dir() -> Path:
    import laya_qual.suite

    return Path(laya_qual.suite.__file__).resolve().parent


def is_suite_path(path) -> bool:
    return suite_dir() in Path(str(path)).resolve().parents


def asked_to_qualify(config: pytest.Config) -> bool:
    """A qualification run by request (as opposed to one found by collecting suite tests)."""
    return bool(config.getoption("laya_qualify") or config.getoption("laya_report")
                or config.getoption("laya_evidence_out", None))


def enter_qualification(config: pytest.Config) -> None:
    """Set this process up for qualification (once): torch threads and the device check."""
    if config.stash.get(_QUALIFYING, False):
        return
    config.stash[_QUALIFYING] = True
    import torch

    torch.set_num_threads(max(1, config.getoption("laya_threads")))
    if config.getoption("laya_device") == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError("--laya-device cuda: torch sees no CUDA device on this machine")


def suite_profile(config: pytest.Config) -> str:
    """--laya-profile, else an explicit --hypothesis-profile, else laya-qual; never an
    implicit profile (Hypothesis' `default`, or `ci` under $CI)."""
    return config.stash.get(_SUITE_PROFILE, PROFILE)


def _choose_seed(config: pytest.Config) -> None:
    """Every report records its seed: choose one when none was given."""
    worker = getattr(config, "workerinput", None)
    if worker is not None and worker.get(SEED_INPUT) is not None:
        config.option.hypothesis_seed = worker[SEED_INPUT]
    elif config.getoption("hypothesis_seed", None) is None and (
            config.getoption("laya_report") or config.getoption("laya_evidence_out", None)):
        config.option.hypothesis_seed = str(secrets.randbelow(2**32))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist controller: hand the chosen seed, and the synthetic default it wrote, to each worker."""
    node.workerinput[SEED_INPUT] = node.config.getoption("hypothesis_seed", None)
    node.workerinput[DEFAULT_INPUT] = node.config.stash.get(DEFAULT_KEY, None)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """tryfirst: the seed must be in place before Hypothesis' own configure reads it."""
    config.addinivalue_line(
        "markers",
        "laya_claim(id, ...): ties a test to catalogued laya_qual claim ids; its outcome is evidence for them",
    )
    config.addinivalue_line(
        "markers",
        "laya_once_per(level): an artifact-facing suite test runs once per `base`, per `base-kind` "
        "(base and head kind), or (unmarked) per artifact under qualification",
    )
    _ini_defaults(config)
    _preflight(config)
    _choose_seed(config)
    profile = config.getoption("laya_profile") or config.getoption("hypothesis_profile", None) or PROFILE
    try:
        settings.get_profile(profile)
    except Exception:
        raise pytest.UsageError(f"--laya-profile {profile}: no such Hypothesis profile is registered") from None
    verbosity = config.getoption("hypothesis_verbosity", None)
    if verbosity:  # what Hypothesis' plugin does for its current profile, done for the suite's
        derived = f"{profile}-with-{verbosity}-verbosity"
        settings.register_profile(derived, settings.get_profile(profile), verbosity=Verbosity[verbosity])
        profile = derived
    config.stash[_SUITE_PROFILE] = profile
    if config.getoption("laya_benchmarks") == "exclude" and hasattr(config.option, "benchmark_disable"):
        # Benchmarks are deselected after -k and -m (the selection must be what runs), which is
        # after pytest-benchmark's own collection hook: disabled, it does not warn under xdist
        # about benchmarks this run never runs. (Its configure is trylast: after this one.)
        config.option.benchmark_disable = True
    if config.getoption("laya_qualify"):
        _point_at_suite(config)
    if asked_to_qualify(config):
        enter_qualification(config)


def _preflight(config: pytest.Config) -> None:
    """Refuse, before anything is collected, what would make every test of the run fail
    or select nothing: artifact and base paths that are no artifact, a report path that
    cannot be written, a --laya-claims pattern that names no claim (laya_qual.plugin.preflight), a
    --laya-signing-key with no --laya-report to sign."""
    from laya_qual.plugin import preflight

    problems = []
    if config.getoption("laya_claims", None):
        patterns = [p.strip() for p in config.getoption("laya_claims").split(",") if p.strip()]
        problems.append(preflight.claims_problem("--laya-claims", patterns, CLAIMS))
    if asked_to_qualify(config):
        problems += [preflight.artifact_problem("--laya-artifact", a, head=True)
                     for a in config.getoption("laya_artifact")]
        if config.getoption("laya_base"):
            problems.append(preflight.artifact_problem("--laya-base", config.getoption("laya_base"), head=False))
    if config.getoption("laya_report"):
        problems.append(preflight.report_path_problem("--laya-report", config.getoption("laya_report")))
    key = config.getoption("laya_signing_key", None)
    if key and key != os.environ.get(KEY_ENV) and not config.getoption("laya_report"):
        problems.append(f"--laya-signing-key {key} signs the --laya-report bundle, and there is none: "
                        "add --laya-report PATH (or drop the key)")
    problem = next((p for p in problems if p), None)
    if problem:
        raise pytest.UsageError(problem)


def _point_at_suite(config: pytest.Config) -> None:
    """`--laya-qualify`: collect the installed suite instead of the default paths (or
    next to the paths given). Done here rather than by rewriting the command line, so
    it works however the plugin was enabled (-p, addopts, a conftest's pytest_plugins)."""
    suite = str(suite_dir())
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [suite]
    elif suite not in config.args:
        config.args = [*config.args, suite]


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """Suite modules are imported with the suite profile as Hypothesis' default, so
    their @given tests, and any @settings(...) they carry, resolve on top of it;
    every other module is imported under whatever profile the run has."""
    if not (isinstance(collector, pytest.Module) and is_suite_path(collector.path)):
        return (yield)
    previous = settings.get_current_profile_name()
    settings.load_profile(suite_profile(collector.config))
    try:
        return (yield)
    finally:
        settings.load_profile(previous)


def pytest_report_header(config: pytest.Config) -> str | None:
    if not asked_to_qualify(config):
        return None
    from importlib.metadata import version

    seed = config.getoption("hypothesis_seed", None)
    return (f"laya_qual: laya-qual {version('laya-qual')}, torch {version('torch')}, suite hypothesis profile "
            f"{suite_profile(config)}, device {config.getoption('laya_device')}, "
            f"hypothesis seed {seed if seed is not None else 'random (see failures)'}")


def _select_benchmarks(config: pytest.Config, items: list[pytest.Item]) -> None:
    mode = config.getoption("laya_benchmarks")
    if mode == "include":
        return
    keep_only(config, items, lambda item: is_benchmark(item) == (mode == "only"))


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    """Refuse unknown claim ids and claim-less qualification tests among all collected,
    and attach the ids as plain data so xdist workers relay them to the controller.
    A wrapper: the selection (and a shard of it, and a plan) is taken after every other
    plugin's selection (-k, -m), so it is what will run; and before benchmarks are set
    apart, so both passes of a run agree on it."""
    problems = []
    suite_items = False
    for item in items:
        ids = claim_ids(item)
        in_suite = is_suite_path(item.path)
        suite_items = suite_items or in_suite
        unknown = [i for i in ids if i not in CLAIMS]
        if unknown:
            problems.append(f"{item.nodeid}: unknown claim id(s) {unknown} (see laya_qual.claims)")
        if not ids and in_suite:
            problems.append(f"{item.nodeid}: qualification test without @pytest.mark.laya_claim")
        if ids:
            attach_claims(item, ids, selection.report_test_id(config, item.nodeid, item.path))
    if problems:
        raise pytest.UsageError("laya_qual claim rules broken:\n  " + "\n  ".join(problems))
    result = yield
    if config.getoption("laya_claims", None):
        _select_claims(config, items)
    selection.record(config, items)
    _select_benchmarks(config, items)
    if suite_items:
        enter_qualification(config)
    return result


def _select_claims(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--laya-claims`: keep the tests of the named claims, deselect the rest."""
    from laya_qual.measure.mutation import matches

    patterns = [p.strip() for p in config.getoption("laya_claims").split(",") if p.strip()]
    keep_only(config, items, lambda item: matches(claim_ids(item), patterns))
