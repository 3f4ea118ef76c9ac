"""Triage one module's automatic mutants against the test files you name: which of them no
test there kills.

Not the kill rate: that is `laya-qual mutate --sample`, which draws from the whole population
and runs each mutant against the tests that executed it, suite first. This is the cheap look
before a draw: where a module's own tests are thin. Every mutant of MODULE (or a sample of
them) is written into a copy of the installed packages (the layout a mutation run copies,
first on PYTHONPATH), the named tests run against it with -x (the suite's from the copy
under Hypothesis seed 0, as a mutation run runs them; the others from this checkout), and
a failed run kills it. A survivor here may still be killed by tests not named, by the
suite or by tests/: check it before writing a test. Results go to --output as they come (a second run
with the same --output keeps what is there and runs the rest).

    .venv/bin/python scripts/sweep_module.py laya_qual/release/compare.py --sample 100 --seed 1 \\
        --output sweep-compare.json -- tests/test_compare.py
"""

from __future__ import annotations

import argparse
import json
import queue
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from laya_qual.measure.mutant_run import _run_tests_dir
from laya_qual.measure.mutants import Mutant, module_mutants, sample
from laya_qual.measure.mutation import build_root, installed_layout, run_suite

PROJECT = Path(__file__).resolve().parents[1]
SUITE = "qualification/"


def drawn(mutants: list[Mutant], n: int | None, seed: int) -> list[Mutant]:
    """All of them, or ``n`` drawn with ``seed`` (as ``laya-qual mutate`` draws), in file order."""
    if n is None or n >= len(mutants):
        return mutants
    return sorted(sample(mutants, n, seed), key=lambda m: (m.line, m.col))


def run_tests(root: Path, tests: list[str], timeout: float) -> tuple[str, str | None, float]:
    """``(status, first failure, seconds)`` of the tests against the copy at ``root``, with ``-x``:
    the suite's (qualification/...) as a mutation run runs them, from the copy, since a process
    multiprocessing spawns (a rank) imports with its parent's sys.path; then the others, from
    this checkout."""
    suite = [f"laya_qual/suite/{t.removeprefix(SUITE)}" for t in tests if t.startswith(SUITE)]
    others = [t for t in tests if not t.startswith(SUITE)]
    runs = [lambda: run_suite(root, seed=0, workers=0, tests=suite, timeout=timeout)] if suite else []
    if others:
        runs.append(lambda: _run_tests_dir(root, PROJECT / "tests", 0, timeout, tests=others))
    seconds = 0.0
    for run in runs:
        r = run()
        seconds += r.seconds
        if r.outcome in ("failed", "timeout"):
            return {"failed": "killed", "timeout": "timeout"}[r.outcome], r.first_failure, seconds
    return "survived", None, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="catalogue path, e.g. laya/serving/cache.py or laya_qual/release/compare.py")
    parser.add_argument("tests", nargs="+", help="test files or node ids, relative to the project (after --)")
    parser.add_argument("--sample", type=int, help="run this many, drawn with --seed (default: every mutant)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at the same time")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per test run (past it: killed)")
    parser.add_argument("--output", type=Path, required=True, help="results JSON, resumed if it exists")
    args = parser.parse_args()

    layout = installed_layout()
    tmp = Path(tempfile.mkdtemp(prefix="laya-sweep-"))
    try:
        pristine = build_root(tmp / "pristine", layout)
        source = (pristine / args.module).read_text()
        population = module_mutants(source, args.module)
        mutants = drawn(population, args.sample, args.seed)
        done = {r["key"]: r for r in json.loads(args.output.read_text())["mutants"]} if args.output.exists() else {}
        print(f"{args.module}: {len(population)} mutants, {len(mutants)} to sweep, {len(done)} done before",
              flush=True)
        copies: queue.Queue[Path] = queue.Queue()
        for j in range(args.jobs):
            copies.put(Path(shutil.copytree(pristine, tmp / f"job{j}")))

        def sweep(m: Mutant) -> dict:
            root = copies.get()
            try:
                (root / args.module).write_text(m.apply(source))
                status, first, seconds = run_tests(root, args.tests, args.timeout)
                return {"key": m.key, "line": m.line, "operator": m.operator, "original": m.original,
                        "replacement": m.replacement, "status": status, "firstFailure": first,
                        "seconds": round(seconds, 1)}
            finally:
                (root / args.module).write_text(source)
                copies.put(root)

        with ThreadPoolExecutor(args.jobs) as pool:
            for r in pool.map(sweep, [m for m in mutants if m.key not in done]):
                done[r["key"]] = r
                print(f"[{len(done)}/{len(mutants)}] {r['status']:<8} {r['seconds']:6.1f}s L{r['line']} "
                      f"{r['operator']}: {r['original'][:60]!r} -> {r['replacement'][:50]!r}", flush=True)
                args.output.write_text(json.dumps({"module": args.module, "population": len(population),
                                                   "tests": args.tests, "mutants": list(done.values())}, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    survivors = sorted((r for r in done.values() if r["status"] not in ("killed", "timeout")),
                       key=lambda r: r["line"])
    print(f"{args.module}: {len(done) - len(survivors)} of {len(done)} killed (a timeout counts as killed); "
          "not killed here:")
    for r in survivors:
        print(f"  L{r['line']} {r['operator']} ({r['status']}): {r['original'][:70]!r} -> {r['replacement'][:50]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
