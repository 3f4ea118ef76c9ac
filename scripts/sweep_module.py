"""Triage one module's automatic mutants against the test files you name: which of them no
test there kills.

Not the kill rate: that is `laya-qual mutate --sample`, which draws from the whole population
and runs each mutant against the tests that executed it, suite first. This is the cheap look
before a draw: where a module's own tests are thin. Every mutant of MODULE (or a sample of
them) is written into a copy of the installed packages (the layout a mutation run copies,
first on PYTHONPATH), the named tests of this checkout run against it with -x, and a failed
run kills it. A survivor here may still be killed by tests not named, by the suite or by
tests/: check it before writing a test. Results go to --output as they come (a second run
with the same --output keeps what is there and runs the rest).

    .venv/bin/python scripts/sweep_module.py laya_qual/compare.py --sample 100 --seed 1 \\
        --output sweep-compare.json -- tests/test_compare.py
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from laya_qual.mutants import Mutant, module_mutants
from laya_qual.mutation import build_root, child_env, installed_layout

PROJECT = Path(__file__).resolve().parents[1]


def drawn(mutants: list[Mutant], sample: int | None, seed: int) -> list[Mutant]:
    """All of them, or ``sample`` drawn with ``seed``, in file order."""
    if sample is None or sample >= len(mutants):
        return mutants
    return sorted(random.Random(seed).sample(mutants, sample), key=lambda m: (m.line, m.col))


def target(root: Path, test: str) -> str:
    """Where pytest finds ``test``: a suite test (qualification/...) in the copy, as a mutation
    run runs it, since pytest puts a test file's root first on sys.path and a process that
    multiprocessing spawns (a rank) imports with its parent's sys.path; any other in this checkout."""
    if test.startswith("qualification/"):
        return str(root / "laya_qual" / "suite" / test.removeprefix("qualification/"))
    return str(PROJECT / test)


def run_tests(root: Path, tests: list[str], timeout: float) -> tuple[str, str | None]:
    """``(status, first failure)`` of the tests against the copy at ``root``."""
    cmd = [sys.executable, "-m", "pytest", *(target(root, t) for t in tests), f"--rootdir={PROJECT}",
           "-c", str(PROJECT / "pyproject.toml"), "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "0", "-x"]
    proc = subprocess.Popen(cmd, cwd=root, env=child_env(root), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "timeout", None
    first = next((line for line in output.splitlines() if line.startswith(("FAILED", "ERROR"))), None)
    status = {0: "survived", 1: "killed", 5: "survived"}.get(proc.returncode, f"pytest exit {proc.returncode}")
    return status, first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="catalogue path, e.g. laya/cache.py or laya_qual/compare.py")
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
                start = time.monotonic()
                status, first = run_tests(root, args.tests, args.timeout)
                return {"key": m.key, "line": m.line, "operator": m.operator, "original": m.original,
                        "replacement": m.replacement, "status": status, "firstFailure": first,
                        "seconds": round(time.monotonic() - start, 1)}
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
