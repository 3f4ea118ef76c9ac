"""Hooks of the laya_qual plugin: options, the claim marker, Hypothesis profiles,
the report header, and the collection rules that tie every qualification test to
a catalogued claim."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from laya_qual.claims import CLAIMS

CLAIM_PROPERTY = "laya_claims"

# Registered at import, before Hypothesis' own plugin loads the selected profile,
# so that `--hypothesis-profile thorough` and the implicit `default` both resolve here.
settings.register_profile(
    "default",
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("laya_qual", "laya qualification")
    group.addoption("--laya-artifact", action="append", default=[], metavar="DIR",
                    help="qualify this artifact directory too (repeatable)")
    group.addoption("--laya-base", default=None, metavar="DIR",
                    help="artifact directory whose encoder is the shared base for --laya-artifact heads")
    group.addoption("--laya-report", default=None, metavar="PATH",
                    help="write the qualification report bundle here (*.intoto.jsonl)")
    group.addoption("--laya-device", default="cpu", choices=("cpu", "cuda"),
                    help="device the runtime and benchmark claims run on (default: cpu)")
    group.addoption("--laya-threads", default=1, type=int, metavar="N",
                    help="torch intra-op threads per test process (default 1: xdist workers "
                         "share the cores, and exactness claims require one thread)")
    group.addoption("--laya-qualify", action="store_true", default=False,
                    help="collect the installed qualification suite (laya_qual.suite) "
                         "instead of the current project's tests")
    group.addoption("--laya-claims", default=None, metavar="PATTERN[,...]",
                    help="run only tests of these claims: an id, an area or id prefix (`cache`), or a glob")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """`--laya-qualify` points collection at the installed suite, wherever pytest runs."""
    if "--laya-qualify" in args:
        import laya_qual.suite

        args.append(str(Path(laya_qual.suite.__file__).parent))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "laya_claim(id, ...): ties a test to catalogued laya_qual claim ids; its outcome is evidence for them",
    )
    import torch

    if not config.getoption("hypothesis_profile", None):
        # Hypothesis loads its own `ci` profile when $CI is set; the suite's budget is ours.
        settings.load_profile("default")
    torch.set_num_threads(max(1, config.getoption("laya_threads")))
    if config.getoption("laya_device") == "cuda":
        if not torch.cuda.is_available():
            raise pytest.UsageError("--laya-device cuda: torch sees no CUDA device on this machine")


def pytest_report_header(config: pytest.Config) -> str:
    import torch

    import laya

    seed = config.getoption("hypothesis_seed", None)
    return (
        f"laya_qual: runtime laya {laya.__version__}, torch {torch.__version__}, "
        f"hypothesis profile {settings._current_profile}, device {config.getoption('laya_device')}, "
        f"hypothesis seed {seed if seed is not None else 'random (see failures)'}"
    )


def claim_ids(item: pytest.Item) -> list[str]:
    """The claim ids a test vouches for, in marker order."""
    ids: list[str] = []
    for mark in item.iter_markers("laya_claim"):
        ids.extend(mark.args)
    return ids


def _is_suite_test(item: pytest.Item) -> bool:
    import laya_qual.suite

    suite_dir = Path(laya_qual.suite.__file__).resolve().parent
    return suite_dir in Path(str(item.path)).resolve().parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse unknown claim ids and claim-less qualification tests at collection time,
    and attach the ids as plain data so xdist workers relay them to the controller."""
    problems = []
    for item in items:
        ids = claim_ids(item)
        unknown = [i for i in ids if i not in CLAIMS]
        if unknown:
            problems.append(f"{item.nodeid}: unknown claim id(s) {unknown} (see laya_qual.claims)")
        if not ids and _is_suite_test(item):
            problems.append(f"{item.nodeid}: qualification test without @pytest.mark.laya_claim")
        if ids:
            item.user_properties.append((CLAIM_PROPERTY, ids))
    if problems:
        raise pytest.UsageError("laya_qual claim rules broken:\n  " + "\n  ".join(problems))
    if config.getoption("laya_claims", None):
        _select_claims(config, items)


def _select_claims(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--laya-claims`: keep the tests of the named claims, deselect the rest."""
    from laya_qual.mutation import matches

    patterns = [p.strip() for p in config.getoption("laya_claims").split(",") if p.strip()]
    keep, dropped = [], []
    for item in items:
        (keep if matches(claim_ids(item), patterns) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
