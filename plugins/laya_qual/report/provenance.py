"""Where a run came from, written so a signed report names no local path: the CI
job's URL, the pytest arguments with local paths made relative, and test ids that
do not depend on how the suite was started."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SUITE_PREFIX = "laya_qual/suite"
LOCAL_PATH = "<local path>"


def ci_url(env: Mapping[str, str]) -> str | None:
    """The CI run's URL (GitHub Actions or GitLab CI), or None outside CI."""
    if all(env.get(v) for v in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")):
        return f"{env['GITHUB_SERVER_URL']}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    return env.get("CI_JOB_URL") or None


def _under(path: Path, root: Path) -> str | None:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return None


def test_id(nodeid: str, file: Path | str, rootpath: Path, suite_dir: Path | None) -> str:
    """A suite test as ``laya_qual/suite/<file>::<name>`` whether it was collected by
    --laya-qualify, a path or --pyargs (which changes pytest's node id); any other test
    keeps its node id. ``file`` is the file the test was collected from (absolute, or
    relative to ``rootpath``): the item's path, not its report location, which for a
    method inherited from another module (a Hypothesis state machine's ``runTest``)
    names that other module."""
    if suite_dir is None or not str(file):
        return nodeid
    rel = _under((rootpath / file).resolve(), suite_dir.resolve())
    if rel is None:
        return nodeid
    name = nodeid.partition("::")[2]
    return f"{SUITE_PREFIX}/{rel}::{name}" if name else f"{SUITE_PREFIX}/{rel}"


def portable_path(value: str, invocation_dir: Path, suite_dir: Path | None) -> str:
    """An absolute path becomes relative to the suite package or to the directory
    pytest was started in, or else a placeholder."""
    if not os.path.isabs(value):
        return value
    path = Path(value).resolve()
    if suite_dir is not None and (rel := _under(path, suite_dir.resolve())) is not None:
        return SUITE_PREFIX if rel == "." else f"{SUITE_PREFIX}/{rel}"
    rel = _under(path, invocation_dir.resolve())
    return LOCAL_PATH if rel is None else rel


def portable_args(args: list[str], invocation_dir: Path, suite_dir: Path | None) -> list[str]:
    out = []
    for arg in args:
        if arg.startswith("-") and "=" in arg:
            option, _, value = arg.partition("=")
            out.append(f"{option}={portable_path(value, invocation_dir, suite_dir)}")
        else:
            out.append(portable_path(arg, invocation_dir, suite_dir))
    return out
