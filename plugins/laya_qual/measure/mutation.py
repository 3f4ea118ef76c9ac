"""Seeded-defect runs: how many catalogued bugs the qualification suite kills.

Each defect (``laya_qual.measure.defects``) is applied to an isolated copy of the
installed packages, never to the source tree: a temporary import root that
reproduces the installed layout (``laya/``, ``laya_qual/`` with ``suite/`` and
``synth/`` inside) is put first on ``PYTHONPATH``, which shadows an editable or
regular install because setuptools' editable finder sits after the path finder
(checked for every run: the child reports where each package was imported from).
The suite then runs with ``-x`` on the tests of the defect's claims first; a
defect that survives them is run against the whole suite before it is declared
survived. A run that outlives its timeout counts as killed, reported apart.

The results file names the catalogue digest and the digests of the runtime and
harness it was measured on; ``--laya-kill-rate`` folds it into a signed report
only when those digests are the code being qualified.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from fnmatch import fnmatchcase
from pathlib import Path

from laya_qual.measure.defects import DEFECTS, Defect
from laya_qual.subjects import HARNESS_PACKAGES, harness_digests, package_dir, source_digest

FORMAT = "laya-qual-mutation-v1"
# What one whole, unmutated run (a baseline, a coverage measurement) may take unless --timeout says.
WHOLE_RUN_TIMEOUT_S = 7200
# Import name -> its place under the temporary import root.
LAYOUT = {"laya": "laya", "laya_qual": "laya_qual", "laya_qual.suite": "laya_qual/suite",
          "laya_qual.synth": "laya_qual/synth"}
_IGNORE = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".hypothesis", "*.pyc")
_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+)", re.MULTILINE)
_SUMMARY_HEADER = " short test summary info "
_REPORTS_HEADER = re.compile(r"^=+ (?:FAILURES|ERRORS) =+$", re.MULTILINE)
_REPORT_TITLE = re.compile(r"^_{3,} \S.*? _{3,}$", re.MULTILINE)
_LOCATION = re.compile(r"^\S+:\d+: ")
_WORKER_HEADER = re.compile(r"^\[gw\d+\] ")  # "[gw0] linux -- Python ...", atop an xdist report
# The most of a failure's report a record keeps.
EXCERPT_CHARS = 800


def failures(output: str) -> list[str]:
    """The tests a pytest run's short summary (``-rfE``) names failed or in error, in its
    order; only that last section is read, so a FAILED line an inner pytest run printed
    into a test's captured output is not taken for one of this run's."""
    return [m.group(2) for m in _SUMMARY.finditer(output.rpartition(_SUMMARY_HEADER)[2])]


def failure_excerpt(output: str) -> str | None:
    """What a pytest run's first failure report says, for a record to keep: its ``E`` lines
    and the ``file:line`` that follows them, or, in a report without them (an xdist worker
    that crashed), its lines but the worker's header; at most EXCERPT_CHARS. None when the
    output holds no FAILURES or ERRORS section."""
    header = _REPORTS_HEADER.search(output)
    if header is None:
        return None
    first = _REPORT_TITLE.split(output[header.end():], maxsplit=2)[1:2]
    lines = first[0].split("\n=")[0].splitlines() if first else []
    said = [line for line in lines if line.startswith("E ")]
    if said:
        end = max(i for i, line in enumerate(lines) if line.startswith("E "))
        said += [line for line in lines[end + 1:] if _LOCATION.match(line)][:1]
    else:
        said = [line for line in lines if line.strip() and not _WORKER_HEADER.match(line)]
    text = "\n".join(said)
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS - 1] + "…"


# A kill needs one failing example, not the smallest: the suite's default profile without shrinking.
_PROFILE_MODULE = "laya_qual_mutate_profile"
_PROFILE = '''"""Loaded by laya-qual mutate runs (-p): the suite's profile without the shrink phase."""
from hypothesis import Phase, settings

import laya_qual.plugin.hooks  # registers the suite's profiles

settings.register_profile("laya-mutate", settings(settings.get_profile(laya_qual.plugin.hooks.PROFILE), phases=[
    Phase.explicit, Phase.reuse, Phase.generate, Phase.target]))
'''


class MutationError(Exception):
    """The catalogue or the run cannot give a meaningful figure (names what and why)."""


# --- catalogue ------------------------------------------------------------------------

def catalogue_digest(defects: Sequence[Defect] = DEFECTS) -> str:
    """sha256 over the canonical JSON of every defect, in catalogue order."""
    rows = [dataclasses.asdict(d) | {"claims": list(d.claims)} for d in defects]
    return hashlib.sha256(json.dumps(rows, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def installed_layout() -> dict[str, Path]:
    """Where each import name resolves now (without importing the suite)."""
    found = {name: package_dir(name) for name in LAYOUT}
    missing = [n for n, p in found.items() if p is None]
    if missing:
        raise MutationError(f"packages not importable: {missing}")
    return found


def _source(layout: dict[str, Path], rel: str) -> Path:
    """The installed file for a catalogue path such as ``laya/serving/head_network.py``."""
    for name in sorted(LAYOUT, key=lambda n: -len(LAYOUT[n])):
        prefix = LAYOUT[name] + "/"
        if rel.startswith(prefix):
            return layout[name] / rel[len(prefix):]
    raise MutationError(f"{rel}: not under any of {sorted(LAYOUT.values())}")


def apply_text(defect: Defect, text: str) -> str:
    """``text`` with the defect's one substitution; refuses unless ``find`` occurs exactly once."""
    count = text.count(defect.find)
    if count != 1:
        raise MutationError(f"defect {defect.id}: its find text occurs {count} times in {defect.file} "
                            "(must be exactly once; update the catalogue)")
    return text.replace(defect.find, defect.replace)


def check_catalogue(defects: Sequence[Defect] = DEFECTS, layout: dict[str, Path] | None = None) -> None:
    """Every defect is unique, changes its file, and applies exactly once to the current tree."""
    layout = layout or installed_layout()
    seen: set[str] = set()
    for d in defects:
        if d.id in seen:
            raise MutationError(f"defect {d.id}: id listed twice")
        seen.add(d.id)
        if d.find == d.replace or not d.claims:
            raise MutationError(f"defect {d.id}: changes nothing or names no claims")
        path = _source(layout, d.file)
        if not path.is_file():
            raise MutationError(f"defect {d.id}: no file {d.file} ({path})")
        apply_text(d, path.read_text())


def code_digests(layout: dict[str, Path] | None = None) -> dict:
    """The runtime subject digest and the harness digests, as a report records them."""
    layout = layout or installed_layout()
    return {"runtime": source_digest(layout["laya"])[0],
            "harness": harness_digests({n: layout[n] for n in HARNESS_PACKAGES})}


# --- isolated copies -------------------------------------------------------------------

def build_root(dest: Path, layout: dict[str, Path]) -> Path:
    """Copy the installed packages into ``dest`` in import layout."""
    for name in ("laya", "laya_qual", "laya_qual.suite", "laya_qual.synth"):
        target = dest / LAYOUT[name]
        if not target.exists():  # a regular install already nests suite/ and synth/ in laya_qual/
            shutil.copytree(layout[name], target, ignore=_IGNORE)
    (dest / "pytest.ini").write_text("[pytest]\n")  # pins the rootdir; no project ini applies
    (dest / f"{_PROFILE_MODULE}.py").write_text(_PROFILE)
    return dest


def mutate_root(root: Path, defect: Defect) -> None:
    path = root / defect.file
    path.write_text(apply_text(defect, path.read_text()))


def deliverable_sigint() -> None:
    """Give SIGINT back its default disposition when this process inherited it ignored.
    A shell without job control (a script's ``cmd &``, some CI runners) starts background
    commands with SIGINT ignored, and an ignored signal stays ignored across exec in every
    process they start: a measured test that interrupts a child with SIGINT would then
    wait for it forever, and the baseline would be red for the launcher's sake. A handled
    signal is reset to its default at exec, so the children start as they would anywhere."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def child_env(root: Path) -> dict:
    """A top-level run importing ``root`` first: not an xdist worker's, and not measured by a
    coverage run this process may itself be under (a run that wants coverage starts its own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST_", "COVERAGE_PROCESS_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_shadowing(root: Path) -> None:
    """The child must import every package from ``root``, not from the install."""
    probe = ("import json, importlib; print(json.dumps({n: importlib.import_module(n).__file__ for n in "
             f"{sorted(LAYOUT)!r}}}))")
    out = subprocess.run([sys.executable, "-c", probe], env=child_env(root), cwd=root, capture_output=True,
                         text=True, check=False)
    if out.returncode:
        raise MutationError(f"cannot import the isolated copy: {out.stderr.strip()[-500:]}")
    resolved = root.resolve()
    wrong = {n: f for n, f in json.loads(out.stdout).items() if resolved not in Path(f).resolve().parents}
    if wrong:
        raise MutationError(f"the isolated copy does not shadow the install: {wrong}")


# --- running the suite -----------------------------------------------------------------

@dataclasses.dataclass
class RunResult:
    outcome: str  # passed | failed | timeout | empty (no test selected)
    first_failure: str | None
    seconds: float
    returncode: int | None
    output: str = ""


def run_suite(root: Path, *, seed: int, workers: int, claims: Sequence[str] = (), timeout: float,
              exitfirst: bool = True, extra: Sequence[str] = (), tests: Sequence[str] = ()) -> RunResult:
    """``pytest -p laya_qual --laya-qualify`` on the copy at ``root``; with ``tests``, those
    suite node ids (relative to ``root``) alone."""
    select = list(tests) or ["--laya-qualify"]
    cmd = [sys.executable, "-m", "pytest", "-p", "laya_qual", *select, "-p", "no:cacheprovider",
           f"--rootdir={root}", f"--hypothesis-seed={seed}", "-n", str(workers), "-q", "-rfE",
           "--no-header", "-p", "no:randomly", "-p", _PROFILE_MODULE, "--laya-profile=laya-mutate",
           *(["-x"] if exitfirst else []),
           *([f"--laya-claims={','.join(claims)}"] if claims else []), *extra]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=root, env=child_env(root), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group: xdist workers and spawned ranks
        output, _ = proc.communicate()
        return RunResult("timeout", None, time.monotonic() - start, None, output)
    seconds = time.monotonic() - start
    if proc.returncode in (0, 5):  # 5: no test selected, which catches nothing
        return RunResult("passed" if proc.returncode == 0 else "empty", None, seconds, proc.returncode, output)
    first = next(iter(failures(output)), f"pytest exit status {proc.returncode}")
    return RunResult("failed", first, seconds, proc.returncode, output)


def matches(claim_ids: Iterable[str], patterns: Sequence[str]) -> bool:
    """The ``--laya-claims`` rule: a pattern selects a claim equal to it, under it
    (``cache`` selects ``cache.copies``), or matching it as a glob."""
    return any(c == p or c.startswith(p + ".") or fnmatchcase(c, p) for c in claim_ids for p in patterns)


def test_times(junit: Path) -> list[tuple[list[str], float]]:
    """(claim ids, seconds) per test case of a junit XML report."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        claims: list[str] = []
        for prop in case.iter("property"):
            if prop.get("name") == "laya_claims":
                claims = [c.strip(" '\"") for c in prop.get("value", "").strip("[]").split(",") if c.strip()]
        out.append((claims, float(case.get("time", 0.0))))
    return out


# --- the whole run ---------------------------------------------------------------------

@dataclasses.dataclass
class Plan:
    seeds: list[int]
    max_workers: int = 2
    jobs: int = 1
    confirm: bool = True
    timeout: float | None = None  # per pytest run; None: derived from the baseline
    scope: Sequence[str] = ()  # claim patterns the whole run is limited to (a partial figure)
    defects: Sequence[Defect] = DEFECTS


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _selection(defect: Defect) -> list[str]:
    return list(dict.fromkeys([*defect.claims, defect.area]))


class Runner:
    def __init__(self, plan: Plan, progress: Callable[[str], None], checkpoint: Callable[[dict], None] = lambda r: None):
        self.plan, self.progress, self.checkpoint = plan, progress, checkpoint
        self.layout = installed_layout()
        check_catalogue(plan.defects, self.layout)
        self.tmp = Path(tempfile.mkdtemp(prefix="laya-mutate-"))
        # Every copy comes from this snapshot, so edits to the tree during a long run change nothing.
        self.digests = code_digests(self.layout)
        self.pristine = build_root(self.tmp / "pristine", self.layout)
        if code_digests(self.layout) != self.digests:
            raise MutationError("the installed packages changed while they were being copied")
        self.times: list[tuple[list[str], float]] = []
        self.startup = 0.0
        self.suite_seconds = 0.0

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _root(self, name: str, defect: Defect | None = None) -> Path:
        root = Path(shutil.copytree(self.pristine, self.tmp / name))
        if defect is not None:
            mutate_root(root, defect)
        return root

    def baseline(self) -> list[dict]:
        """The unmutated suite, whole, under every seed; it must be green under each."""
        root = self._root("baseline")
        check_shadowing(root)
        junit = self.tmp / "baseline.xml"
        records = []
        for i, seed in enumerate(self.plan.seeds):
            self.progress(f"baseline: whole suite, seed {seed}, -n {self.plan.max_workers}")
            r = run_suite(root, seed=seed, workers=self.plan.max_workers, timeout=self.plan.timeout or 3600,
                          exitfirst=False, claims=self.plan.scope, extra=[f"--junitxml={junit}"] if i == 0 else [])
            failed = sorted(set(failures(r.output)))
            records.append({"seed": seed, "verdict": "green" if r.outcome == "passed" else "red",
                            "failed": failed, "seconds": round(r.seconds, 1)})
            self.progress(f"baseline seed {seed}: {records[-1]['verdict']} in {r.seconds:.0f}s"
                          + (f"; failed {failed or r.output[-2000:]}" if failed or r.outcome != "passed" else ""))
            if i == 0 and r.outcome == "passed":
                self.times = test_times(junit)
                self.suite_seconds = r.seconds
                self.startup = self._measure_startup(root, seed)
        return records

    def _measure_startup(self, root: Path, seed: int) -> float:
        """What xdist costs beyond a serial run: the quickest claim's tests at -n 0 and at -n W."""
        w = self.plan.max_workers
        per_claim: dict[str, float] = {}
        for ids, t in self.times:
            for c in ids:
                per_claim[c] = per_claim.get(c, 0.0) + t
        if w < 2 or not per_claim:
            return 0.0
        quickest = min(per_claim, key=per_claim.get)
        serial = run_suite(root, seed=seed, workers=0, claims=[quickest], timeout=600)
        parallel = run_suite(root, seed=seed, workers=w, claims=[quickest], timeout=600)
        self.progress(f"xdist start-up: {quickest} took {serial.seconds:.1f}s at -n 0, {parallel.seconds:.1f}s at -n {w}")
        return max(0.0, parallel.seconds - serial.seconds)

    def workers_for(self, claims: Sequence[str]) -> tuple[int, float]:
        """-n for a selection, by measurement: workers pay off when the test time they
        save exceeds the start-up they cost. Returns (workers, serial test seconds)."""
        serial = sum(t for ids, t in self.times if matches(ids, claims))
        w = self.plan.max_workers
        return (w if w > 1 and serial * (1 - 1 / w) > self.startup else 0), serial

    def _timeout(self, serial: float) -> float:
        return self.plan.timeout or max(300.0, 4 * (serial + self.startup) + 120)

    def run_defect(self, defect: Defect) -> dict:
        root = self._root(defect.id, defect)
        selection = list(self.plan.scope) or _selection(defect)
        workers, serial = self.workers_for(selection)
        runs = []
        for seed in self.plan.seeds:
            r = run_suite(root, seed=seed, workers=workers, claims=selection, timeout=self._timeout(serial))
            stage, spent = "claims", r.seconds
            if r.outcome in ("passed", "empty") and self.plan.confirm:
                stage = "suite"
                r = run_suite(root, seed=seed, workers=self.plan.max_workers, claims=self.plan.scope,
                              timeout=self._timeout(self.suite_seconds))
                spent += r.seconds
            outcome = {"passed": "survived", "empty": "survived", "failed": "killed", "timeout": "timeout"}[r.outcome]
            runs.append({"seed": seed, "outcome": outcome, "stage": stage, "firstFailure": r.first_failure,
                         "seconds": round(spent, 1), "workers": workers})
        shutil.rmtree(root, ignore_errors=True)
        return _defect_record(defect, runs)

    def run(self) -> dict:
        started, t0 = _now(), time.monotonic()
        digests = self.digests
        baseline = self.baseline()
        result = {"format": FORMAT, "catalogue": {"digest": catalogue_digest(self.plan.defects),
                                                  "defects": len(self.plan.defects)},
                  "code": digests, "scope": list(self.plan.scope), "hypothesisSeeds": self.plan.seeds, "confirmWholeSuite": self.plan.confirm,
                  "maxWorkers": self.plan.max_workers, "startupSeconds": round(self.startup, 1),
                  "baseline": {"stable": all(b["verdict"] == "green" for b in baseline), "runs": baseline},
                  "startedOn": started}
        if not result["baseline"]["stable"]:
            raise BaselineRed(result)
        records: list[dict] = []
        with ThreadPoolExecutor(max_workers=max(1, self.plan.jobs)) as pool:
            for n, record in enumerate(pool.map(self.run_defect, self.plan.defects), 1):
                records.append(record)
                last = record["runs"][-1]
                self.progress(f"[{n}/{len(self.plan.defects)}] {record['id']}: {record['status']} "
                              f"({last['stage']}, {sum(r['seconds'] for r in record['runs']):.0f}s, -n {last['workers']})"
                              + (f" by {last['firstFailure']}" if last["firstFailure"] else ""))
                self.checkpoint(result | {"complete": False, "defects": records, "summary": summarize(records)})
        result |= {"complete": True, "defects": records, "summary": summarize(records), "finishedOn": _now(),
                   "wallSeconds": round(time.monotonic() - t0, 1)}
        return result


class BaselineRed(MutationError):
    """The unmutated suite failed under some seed: every kill would be meaningless."""

    def __init__(self, result: dict):
        self.result = result
        red = [b for b in result["baseline"]["runs"] if b["verdict"] != "green"]
        super().__init__("; ".join(f"the unmutated {b.get('of', 'suite')} is red under seed {b['seed']} "
                                   f"({', '.join(b['failed']) or 'see output'})" for b in red))


def _defect_record(defect: Defect, runs: list[dict]) -> dict:
    killed = [r for r in runs if r["outcome"] != "survived"]
    if len(killed) == len(runs):
        status = "timeout" if all(r["outcome"] == "timeout" for r in runs) else "killed"
    else:
        status = "probabilistic" if killed else "survived"
    first = next((r["firstFailure"] for r in runs if r["firstFailure"]), None)
    return {"id": defect.id, "area": defect.area, "claims": list(defect.claims), "file": defect.file,
            "why": defect.why, "status": status, "killFrequency": f"{len(killed)}/{len(runs)}",
            "firstFailure": first, "seconds": round(sum(r["seconds"] for r in runs), 1), "runs": runs}


def summarize(records: list[dict]) -> dict:
    """Killed (timeouts included) over total, overall and per area; the rest by name."""
    def tally(rs: list[dict]) -> dict:
        killed = sum(r["status"] in ("killed", "timeout") for r in rs)
        return {"killed": killed, "total": len(rs), "rate": round(killed / len(rs), 4) if rs else None}

    areas: dict[str, list[dict]] = {}
    for r in records:
        areas.setdefault(r["area"], []).append(r)
    return tally(records) | {
        "timeouts": sorted(r["id"] for r in records if r["status"] == "timeout"),
        "probabilistic": {r["id"]: r["killFrequency"] for r in records if r["status"] == "probabilistic"},
        "survivors": sorted(r["id"] for r in records if r["status"] == "survived"),
        "byArea": {a: tally(rs) for a, rs in sorted(areas.items())}}


def table(result: dict) -> str:
    """The printed summary: per area, overall, then every defect not killed."""
    s = result["summary"]
    lines = [f"{'AREA':<12} {'KILLED':>6} {'TOTAL':>5} {'RATE':>7}"]
    for area, t in s["byArea"].items():
        lines.append(f"{area:<12} {t['killed']:>6} {t['total']:>5} {t['rate']:>7.1%}")
    lines.append(f"{'all':<12} {s['killed']:>6} {s['total']:>5} {s['rate']:>7.1%}")
    lines.append(f"catalogue sha256:{result['catalogue']['digest']}; runtime dirHash:{result['code']['runtime']}; "
                 f"seeds {result['hypothesisSeeds']}; wall {result['wallSeconds']:.0f}s")
    for r in result["defects"]:
        if r["status"] != "killed":
            lines.append(f"  {r['status']:<13} {r['id']} [{r['killFrequency']}]: {r['why']}")
    return "\n".join(lines) + "\n"


# --- the command -------------------------------------------------------------------------

def _progress(message: str) -> None:
    print(f"[laya-qual mutate {datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def main(*, seeds: int, hypothesis_seed: int | None, workers: int, jobs: int, confirm: bool,
         timeout: float | None, only: Sequence[str], claims: str | None, output: Path | None,
         require_rate: float | None) -> int:
    """``laya-qual mutate``: run, write the results JSON, print the table; the exit status."""
    import secrets

    deliverable_sigint()
    defects = DEFECTS
    if only:
        unknown = sorted(set(only) - {d.id for d in DEFECTS})
        if unknown:
            raise MutationError(f"unknown defect id(s) {unknown}")
        defects = tuple(d for d in DEFECTS if d.id in set(only))
    first = secrets.randbelow(2**31) if hypothesis_seed is None else hypothesis_seed
    plan = Plan(seeds=[first + i for i in range(seeds)], max_workers=workers, jobs=jobs, confirm=confirm,
                timeout=timeout, defects=defects, scope=[p for p in (claims or "").split(",") if p])
    output = output or Path("reports") / f"mutation-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    def checkpoint(partial: dict) -> None:  # a long run leaves its figures so far on disk
        partial["catalogue"]["subset"] = bool(only)
        output.write_text(json.dumps(partial, indent=2) + "\n")

    runner = Runner(plan, _progress, checkpoint)
    _progress(f"{len(defects)} defects (catalogue sha256:{catalogue_digest(defects)[:16]}), "
              f"seeds {plan.seeds}, copies under {runner.tmp}")
    try:
        result = runner.run()
    except BaselineRed as e:
        output.write_text(json.dumps(e.result, indent=2) + "\n")
        raise
    finally:
        runner.close()
    result["catalogue"]["subset"] = bool(only)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result), end="")
    print(f"results: {output}")
    if require_rate is not None and result["summary"]["rate"] < require_rate:
        print(f"kill rate {result['summary']['rate']:.1%} is below the required {require_rate:.1%}", file=sys.stderr)
        return 1
    return 0
