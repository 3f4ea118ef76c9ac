"""A sampled run of automatic mutants (``laya-qual mutate --sample N --seed S``): a
kill rate nobody chose, with its Clopper-Pearson lower bound.

The sample is drawn uniformly from the whole population (``laya_qual.mutants``). Each
mutant is applied to its own isolated copy of the installed packages, exactly as a
catalogued defect is (``laya_qual.mutation``). To keep a run affordable, the
unmutated suite runs once under coverage with one context per test; a mutant is then
run first against the tests that executed one of its lines, and only a mutant they
miss (or one on a line no in-process test executes: module level, subprocesses) is
run against the whole suite. A mutant the suite misses is run against the project's
own ``tests/`` when ``--tests-dir`` is given, so the results say whether the suite,
tests/ or neither kills it. A survivor listed in the equivalence file with a written
reason counts as equivalent; a listed mutant that the suite kills is a wrong reason,
reported as such, and the run exits non-zero.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from laya_qual.mutants import Mutant, population, sample
from laya_qual.mutation import (BaselineRed, MutationError, RunResult, build_root, check_shadowing, child_env,
                                code_digests, installed_layout, run_suite)

FORMAT = "laya-qual-mutant-sample-v1"
CONFIDENCE = 0.95
# Covering tests that take longer than this, serially, run on the xdist workers.
SERIAL_LIMIT_S = 30.0


def clopper_pearson_lower(killed: int, total: int, confidence: float = CONFIDENCE) -> float:
    """One-sided lower confidence bound of a binomial proportion (Clopper-Pearson):
    the p at which P(X >= killed | total, p) = 1 - confidence, by bisection on the exact tail."""
    if not 0 <= killed <= total or total < 1:
        raise ValueError(f"killed {killed} of {total}")
    if killed == 0:
        return 0.0
    alpha = 1 - confidence

    def tail(p: float) -> float:  # P(X >= killed), from log-space terms
        logs = [math.lgamma(total + 1) - math.lgamma(i + 1) - math.lgamma(total - i + 1)
                + i * math.log(p) + (total - i) * math.log1p(-p) for i in range(killed, total + 1)]
        top = max(logs)
        return math.exp(top) * sum(math.exp(x - top) for x in logs)

    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if tail(mid) < alpha else (lo, mid)
    return lo


def covering_tests(data_file: Path, root: Path) -> dict[str, dict[int, set[str]]]:
    """Per file of the copy (relative path) and line: the node ids of the tests that ran it."""
    from coverage import CoverageData

    data = CoverageData(basename=str(data_file))
    data.read()
    out: dict[str, dict[int, set[str]]] = {}
    resolved = root.resolve()
    for measured in data.measured_files():
        path = Path(measured).resolve()
        if resolved not in path.parents:
            continue
        by_line = data.contexts_by_lineno(measured)
        out[path.relative_to(resolved).as_posix()] = {
            line: {c.rpartition("|")[0] for c in contexts if c} for line, contexts in by_line.items()}
    return out


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class SampleRun:
    def __init__(self, mutants: Sequence[Mutant], *, population_size: int, seed: int, hypothesis_seed: int,
                 workers: int, equivalents: dict[str, str], tests_dir: Path | None, timeout: float | None,
                 progress: Callable[[str], None], checkpoint: Callable[[dict], None] = lambda r: None,
                 scope: Sequence[str] = ()):
        self.mutants, self.population_size, self.seed, self.scope = list(mutants), population_size, seed, scope
        self.hypothesis_seed, self.workers, self.timeout = hypothesis_seed, workers, timeout
        self.equivalents, self.tests_dir = equivalents, tests_dir
        self.progress, self.checkpoint = progress, checkpoint
        self.layout = installed_layout()
        self.digests = code_digests(self.layout)
        self.tmp = Path(tempfile.mkdtemp(prefix="laya-mutants-"))
        self.pristine = build_root(self.tmp / "pristine", self.layout)
        if code_digests(self.layout) != self.digests:
            raise MutationError("the installed packages changed while they were being copied")
        self.coverage: dict[str, dict[int, set[str]]] = {}
        self.times: dict[str, float] = {}
        self.suite_seconds = 0.0

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def baseline(self) -> dict:
        """The unmutated suite, whole, under coverage with a context per test; it must be green."""
        root = Path(shutil.copytree(self.pristine, self.tmp / "baseline"))
        check_shadowing(root)
        data, junit = self.tmp / "coverage.db", self.tmp / "baseline.xml"
        (root / ".coveragerc").write_text(f"[run]\ndata_file = {data}\n")
        self.progress(f"baseline: whole suite under coverage (a context per test), -n {self.workers}")
        r = run_suite(root, seed=self.hypothesis_seed, workers=self.workers, timeout=self.timeout or 7200,
                      exitfirst=False, claims=self.scope, extra=["--cov=laya", "--cov=laya_qual", "--cov-context=test",
                                              "--cov-report=", "--cov-config=.coveragerc", f"--junitxml={junit}"])
        if r.outcome != "passed":
            raise BaselineRed({"baseline": {"runs": [{"seed": self.hypothesis_seed, "verdict": "red",
                                                      "failed": [r.first_failure], "seconds": r.seconds}]}})
        self.suite_seconds = r.seconds
        self.coverage = covering_tests(data, root)
        self.times = _times_by_test(junit)
        self.progress(f"baseline green in {r.seconds:.0f}s; {len(self.times)} tests, "
                      f"{sum(map(len, self.coverage.values()))} lines executed in-process")
        return {"seconds": round(r.seconds, 1), "tests": len(self.times)}

    def _covering(self, m: Mutant) -> list[str]:
        lines = self.coverage.get(m.file, {})
        return sorted(set().union(*(lines.get(n, set()) for n in range(m.line, m.end_line + 1))))

    def _budget(self, serial: float) -> float:
        return self.timeout or max(300.0, 4 * serial + 120)

    def run_mutant(self, m: Mutant) -> dict:
        root = Path(shutil.copytree(self.pristine, self.tmp / f"m{self.mutants.index(m)}"))
        path = root / m.file
        path.write_text(m.apply(path.read_text()))
        stages = []
        covering = self._covering(m)
        verdict = None
        if covering:
            serial = sum(self.times.get(t, 0.0) for t in covering)
            r = run_suite(root, seed=self.hypothesis_seed, workers=self.workers if serial > SERIAL_LIMIT_S else 0,
                          tests=covering, timeout=self._budget(serial))
            stages.append(_stage("covering tests", r, len(covering)))
            verdict = _killed(r)
        if verdict is None:
            r = run_suite(root, seed=self.hypothesis_seed, workers=self.workers, claims=self.scope,
                          timeout=self._budget(self.suite_seconds))
            stages.append(_stage("suite", r))
            verdict = _killed(r)
        killed_by = "suite" if verdict else None
        if verdict is None and self.tests_dir is not None:
            r = _run_tests_dir(root, self.tests_dir, self.workers, self._budget(self.suite_seconds))
            stages.append(_stage("tests/", r))
            killed_by = "tests/" if _killed(r) else None
        shutil.rmtree(root, ignore_errors=True)
        reason = self.equivalents.get(m.key)
        if killed_by == "suite":
            status = "wrongly-equivalent" if reason else ("timeout" if verdict == "timeout" else "killed")
        else:
            status = "equivalent" if reason else "survived"
        return {"id": m.id, "key": m.key, "operator": m.operator, "file": m.file, "line": m.line,
                "original": m.original, "replacement": m.replacement, "status": status,
                "killedBy": killed_by, "coveringTests": len(covering),
                **({"reason": reason} if reason else {}), "stages": stages,
                "seconds": round(sum(s["seconds"] for s in stages), 1)}

    def run(self) -> dict:
        started, t0 = _now(), time.monotonic()
        result = {"format": FORMAT, "code": self.digests, "population": self.population_size,
                  "sampleSeed": self.seed, "sample": len(self.mutants), "hypothesisSeed": self.hypothesis_seed,
                  "maxWorkers": self.workers, "scope": list(self.scope), "startedOn": started, "complete": False}
        result["baseline"] = self.baseline()
        records: list[dict] = []
        for n, m in enumerate(self.mutants, 1):
            record = self.run_mutant(m)
            records.append(record)
            self.progress(f"[{n}/{len(self.mutants)}] {m.id}: {record['status']}"
                          f" ({record['seconds']:.0f}s, {record['coveringTests']} covering tests)")
            self.checkpoint(result | {"mutants": records, "summary": summarize(records)})
        return result | {"complete": True, "mutants": records, "summary": summarize(records),
                         "finishedOn": _now(), "wallSeconds": round(time.monotonic() - t0, 1)}


def _times_by_test(junit: Path) -> dict[str, float]:
    """Serial seconds per test node id (``classname`` is the dotted module path)."""
    import xml.etree.ElementTree as ET

    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        out[f"{module}::{case.get('name')}"] = float(case.get("time", 0.0))
    return out


def _killed(r: RunResult) -> str | None:
    return {"failed": "failed", "timeout": "timeout"}.get(r.outcome)


def _stage(name: str, r: RunResult, tests: int | None = None) -> dict:
    return {"stage": name, "outcome": r.outcome, "firstFailure": r.first_failure, "seconds": round(r.seconds, 1),
            **({"tests": tests} if tests is not None else {})}


def _run_tests_dir(root: Path, tests_dir: Path, workers: int, timeout: float) -> RunResult:
    """The project's own tests against the mutated copy (the copy shadows the install)."""
    cmd = [sys.executable, "-m", "pytest", str(tests_dir), "-x", "-q", "-p", "no:cacheprovider", "-n", str(workers)]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=tests_dir.parent, env=child_env(root), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return RunResult("timeout", None, time.monotonic() - start, None)
    outcome = "passed" if proc.returncode in (0, 5) else "failed"
    return RunResult(outcome, None if outcome == "passed" else f"pytest exit status {proc.returncode}",
                     time.monotonic() - start, proc.returncode)


def summarize(records: list[dict]) -> dict:
    """K of N, equivalents set apart with their reasons, and the lower bound of the rate."""
    equivalent = [r for r in records if r["status"] == "equivalent"]
    counted = [r for r in records if r["status"] != "equivalent"]
    killed = sum(r["status"] in ("killed", "timeout", "wrongly-equivalent") for r in counted)
    return {"killed": killed, "total": len(counted), "equivalent": len(equivalent),
            "rate": round(killed / len(counted), 4) if counted else None,
            "lowerBound95": round(clopper_pearson_lower(killed, len(counted)), 6) if counted else None,
            "survivors": sorted(r["key"] for r in counted if r["status"] == "survived"),
            "killedByTestsOnly": sorted(r["key"] for r in counted if r["killedBy"] == "tests/"),
            "wronglyEquivalent": sorted(r["key"] for r in records if r["status"] == "wrongly-equivalent"),
            "timeouts": sorted(r["key"] for r in counted if r["status"] == "timeout")}


def read_equivalents(path: Path | None) -> dict[str, str]:
    """``{mutant key: written reason}``; an entry without a reason is refused."""
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise MutationError(f"{path}: cannot read the equivalence reasons ({e})") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) and v.strip() for v in data.values()):
        raise MutationError(f"{path}: must map each mutant key to a written reason (a non-empty string)")
    return data


def main(*, size: int, seed: int, hypothesis_seed: int | None, workers: int, timeout: float | None,
         equivalents: Path | None, tests_dir: Path | None, output: Path | None, require_rate: float | None,
         scope: Sequence[str] = ()) -> int:
    """``laya-qual mutate --sample N``: draw, run, write the results, print the summary;
    exit 1 on a wrong equivalence reason or a lower bound below ``require_rate``."""
    import secrets

    from laya_qual.mutation import _progress as progress

    reasons = read_equivalents(equivalents)
    everything = population(installed_layout())
    try:
        drawn = sample(everything, size, seed)
    except ValueError as e:
        raise MutationError(f"--sample: {e}") from None
    h_seed = secrets.randbelow(2**31) if hypothesis_seed is None else hypothesis_seed
    output = output or Path("reports") / f"mutants-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    run = SampleRun(drawn, population_size=len(everything), seed=seed, hypothesis_seed=h_seed, workers=workers,
                    equivalents=reasons, tests_dir=tests_dir, timeout=timeout, progress=progress, scope=scope,
                    checkpoint=lambda partial: output.write_text(json.dumps(partial, indent=2) + "\n"))
    progress(f"{size} of {len(everything)} mutants drawn with seed {seed}; hypothesis seed {h_seed}; "
             f"copies under {run.tmp}")
    try:
        result = run.run()
    finally:
        run.close()
    output.write_text(json.dumps(result, indent=2) + "\n")
    s = result["summary"]
    print(f"killed {s['killed']} of {s['total']} sampled mutants ({s['equivalent']} equivalent set apart), "
          f"population {result['population']}, sample seed {seed}: rate {s['rate']:.1%}, "
          f"95% lower bound {s['lowerBound95']:.1%}")
    for key in s["survivors"]:
        print(f"  survived  {key}")
    for key in s["wronglyEquivalent"]:
        print(f"  WRONG EQUIVALENCE (the suite kills it)  {key}")
    print(f"results: {output}")
    if require_rate is not None and s["lowerBound95"] < require_rate:
        print(f"the kill rate's 95% lower bound {s['lowerBound95']:.1%} is below the required {require_rate:.1%}",
              file=sys.stderr)
        return 1
    return 1 if s["wronglyEquivalent"] else 0
