"""The mutation figures a report carries (``suite.killRate``, ``suite.mutantSample``):
read from a ``laya-qual mutate`` results file, refused unless measured on the code
being qualified, and the lines ``laya-qual show`` prints for them."""

from __future__ import annotations

import json
from pathlib import Path

from laya_qual.measure import mutant_run
from laya_qual.measure.mutation import FORMAT


def _measured_on_this_code(flag: str, code: dict, runtime: str, harness: dict, command: str) -> None:
    """A figure measured on other code (runtime or suite/harness digests) is no figure of this run."""
    import pytest

    if code.get("runtime") != runtime:
        raise pytest.UsageError(f"{flag}: measured on runtime dirHash {code.get('runtime')}, this run qualifies "
                                f"{runtime}; rerun {command} on this code")
    if code.get("harness") != harness:
        raise pytest.UsageError(f"{flag}: measured with suite/harness {code.get('harness')}, this run uses "
                                f"{harness}; rerun {command} on this code")


def kill_rate(path: str | Path, *, runtime: str, harness: dict) -> tuple[str, dict]:
    """A report's ``suite`` figure from a results file: ``("killRate", ...)`` for a catalogue
    run, ``("mutantSample", ...)`` for a sampled one; refused unless the file was measured
    on this code, whole and finished."""
    import pytest

    try:
        result = json.loads(Path(path).read_text())
        summary, code, kind = result["summary"], result["code"], result.get("format")
        if kind not in (FORMAT, mutant_run.FORMAT):
            raise KeyError("format")
        partial = result["scope"] or not result["complete"] or (kind == FORMAT and result["catalogue"]["subset"])
        if partial:
            raise pytest.UsageError(f"--laya-kill-rate {path}: a partial or unfinished run (--claims, --only) "
                                    "is no suite figure")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise pytest.UsageError(f"--laya-kill-rate {path}: not a laya-qual mutate results file ({e!r})") from None
    _measured_on_this_code(f"--laya-kill-rate {path}", code, runtime, harness, "laya-qual mutate")
    if kind == mutant_run.FORMAT:
        if "withProjectTests" not in summary:
            raise pytest.UsageError(f"--laya-kill-rate {path}: its figure does not separate the shipped suite's "
                                    "kills from the project tests' (results made before 2026-12-04); measure "
                                    "it again with laya-qual mutate --sample")
        if summary["wronglyEquivalent"]:
            raise pytest.UsageError(f"--laya-kill-rate {path}: the suite kills mutants filed as equivalent "
                                    f"({', '.join(summary['wronglyEquivalent'])}); correct their reasons and rerun")
        return "mutantSample", {
            "killed": summary["killed"], "total": summary["total"], "population": result["population"],
            "sample": result["sample"], "sampleSeed": result["sampleSeed"],
            "hypothesisSeed": result["hypothesisSeed"], "confidence": mutant_run.CONFIDENCE,
            "lowerBound": summary["lowerBound95"], "survivors": summary["survivors"],
            "parts": summary["parts"], "notExecuted": summary["notExecuted"],
            "survivorsConfirmedOnWholeSuite": result.get("confirmWholeSuite", True),
            "projectTestsMeasured": bool(result.get("projectTests")),
            "withProjectTests": summary["withProjectTests"],
            "killedByTestsOnly": summary["killedByTestsOnly"],
            "equivalents": {r["key"]: r["reason"] for r in result["mutants"] if r["status"] == "equivalent"}}
    return "killRate", {
        "killed": summary["killed"], "total": summary["total"], "catalogueDigest": result["catalogue"]["digest"],
        "survivorsConfirmedOnWholeSuite": result["confirmWholeSuite"],
        "hypothesisSeeds": result["hypothesisSeeds"], "survivors": summary["survivors"],
        "probabilistic": summary["probabilistic"], "timeouts": summary["timeouts"]}


def kill_rate_line(predicate: dict) -> list[str]:
    """The ``laya-qual show`` lines for a report's kill rates (none if it carries none)."""
    lines = []
    k = predicate.get("suite", {}).get("killRate")
    if k:
        survivors = f"; survivors {', '.join(k['survivors'])}" if k["survivors"] else ""
        lines.append(f"  killrate  {k['killed']}/{k['total']} seeded defects killed "
                     f"(catalogue sha256:{k['catalogueDigest'][:16]}){survivors}")
    m = predicate.get("suite", {}).get("mutantSample")
    if m:
        lines.append(f"  mutants   {mutant_sample_headline(m)}")
        lines += [f"            {part}: {figure['killed']}/{figure['total']} killed, lower bound "
                  f"{figure['lowerBound95']:.1%}" for part, figure in m.get("parts", {}).items() if figure["total"]]
        second = project_tests_figure(m)
        if second:
            lines.append(f"            {second}")
    return lines


def mutant_sample_headline(m: dict) -> str:
    """What a report's ``suite.mutantSample`` says first: the shipped suite's own kills (in a
    report made before 2026-12-04, the suite's and the project tests' together, and it says so)."""
    whose = ("the shipped suite killed" if "withProjectTests" in m
             else "killed by the suite or the project's tests/ (one figure, made before they were told apart):")
    return (f"{whose} {m['killed']}/{m['total']} sampled mutants, {m['confidence']:.0%} lower bound "
            f"{m['lowerBound']:.1%} ({m['sample']} of {m['population']} drawn with seed {m['sampleSeed']}; "
            f"{len(m['equivalents'])} equivalent, {len(m['survivors'])} survived everything)")


def project_tests_figure(m: dict) -> str | None:
    """The second, labelled figure: kills by the suite or the project's own tests/, which users
    never run; None when the run did not measure them."""
    t = m.get("withProjectTests")
    if not t or not m.get("projectTestsMeasured"):
        return None
    parts = "; ".join(f"{part} {f['killed']}/{f['total']}" for part, f in t["parts"].items() if f["total"])
    return (f"with the project's tests/ (not shipped, not what a user runs): {t['killed']}/{t['total']} killed, "
            f"lower bound {t['lowerBound95']:.1%} ({parts}); {len(m['killedByTestsOnly'])} by tests/ only")


def traceability_line(predicate: dict) -> list[str]:
    """The ``laya-qual show`` line for a report's ``suite.traceability`` (none in reports
    made before it existed)."""
    from laya_qual.measure.traceability import line

    t = predicate.get("suite", {}).get("traceability")
    return [f"  traced    {line(t)}"] if t else []


def coverage(path: str | Path, *, runtime: str, harness: dict) -> dict:
    """A report's ``suite.coverage`` from a ``laya-qual coverage`` results file: refused
    unless measured on this code, whole and finished, with its data file beside it and
    of the digest the results name."""
    import pytest

    from laya_qual.measure import coverage_run

    flag = f"--laya-coverage {path}"
    try:
        result = json.loads(Path(path).read_text())
        if result.get("format") != coverage_run.FORMAT:
            raise KeyError("format")
        code, packages, digest = result["code"], result["packages"], result["dataDigest"]
        data = Path(path).parent / result["dataFile"]
        partial = result["scope"] or not result["complete"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise pytest.UsageError(f"{flag}: not a laya-qual coverage results file ({e!r})") from None
    if partial:
        raise pytest.UsageError(f"{flag}: a partial or unfinished run (--claims) is no suite figure")
    _measured_on_this_code(flag, code, runtime, harness, "laya-qual coverage")
    if not data.is_file() or coverage_run.sha256(data) != digest:
        raise pytest.UsageError(f"{flag}: its coverage data {data} is missing or is not the file it names "
                                f"(sha256 {digest[:16]}...)")
    return {"packages": {name: {k: figure[k] for k in ("statements", "branches", "inProcessOnly") if k in figure}
                         for name, figure in packages.items()},
            "dataDigest": digest, "hypothesisSeed": result["hypothesisSeed"], "coveragePy": result["coveragePy"],
            "branch": result["branch"], "patch": result["patch"], "benchmarks": result["benchmarks"],
            "tests": result["contexts"]["tests"], "testsWithSubprocesses": result["contexts"]["testsWithSubprocesses"],
            "redOnlyUnderCoverage": result.get("redOnlyUnderCoverage", []),  # absent: a run that allowed none
            "exclusions": [{k: e[k] for k in ("file", "line", "kind", "reason")} for e in result["exclusions"]]}


def coverage_line(predicate: dict) -> list[str]:
    """The ``laya-qual show`` lines for a report's coverage figure (none if it carries none)."""
    from laya_qual.measure.coverage_run import package_line

    c = predicate.get("suite", {}).get("coverage")
    if not c:
        return []
    lines = [f"  coverage  {package_line(name, figure)}" for name, figure in c["packages"].items()]
    lines.append(f"            branch mode, subprocesses measured; {c['tests']} tests "
                 f"({c['testsWithSubprocesses']} with subprocesses), {len(c['exclusions'])} exclusions with reasons; "
                 f"data sha256:{c['dataDigest'][:16]}")
    if c.get("redOnlyUnderCoverage"):
        lines.append(f"            red only under coverage (green without it): {', '.join(c['redOnlyUnderCoverage'])}")
    return lines
