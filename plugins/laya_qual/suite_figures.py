"""The mutation figures a report carries (``suite.killRate``, ``suite.mutantSample``):
read from a ``laya-qual mutate`` results file, refused unless measured on the code
being qualified, and the lines ``laya-qual show`` prints for them."""

from __future__ import annotations

import json
from pathlib import Path

from laya_qual import mutant_run
from laya_qual.mutation import FORMAT


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
    if code.get("runtime") != runtime:
        raise pytest.UsageError(f"--laya-kill-rate {path}: measured on runtime dirHash {code.get('runtime')}, "
                                f"this run qualifies {runtime}; rerun laya-qual mutate on this code")
    if code.get("harness") != harness:
        raise pytest.UsageError(f"--laya-kill-rate {path}: measured with suite/harness {code.get('harness')}, "
                                f"this run uses {harness}; rerun laya-qual mutate on this code")
    if kind == mutant_run.FORMAT:
        if summary["wronglyEquivalent"]:
            raise pytest.UsageError(f"--laya-kill-rate {path}: the suite kills mutants filed as equivalent "
                                    f"({', '.join(summary['wronglyEquivalent'])}); correct their reasons and rerun")
        return "mutantSample", {
            "killed": summary["killed"], "total": summary["total"], "population": result["population"],
            "sample": result["sample"], "sampleSeed": result["sampleSeed"],
            "hypothesisSeed": result["hypothesisSeed"], "confidence": mutant_run.CONFIDENCE,
            "lowerBound": summary["lowerBound95"], "survivors": summary["survivors"],
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
        lines.append(f"  mutants   {m['killed']}/{m['total']} sampled mutants killed, {m['confidence']:.0%} lower "
                     f"bound {m['lowerBound']:.1%} ({m['sample']} of {m['population']} drawn with seed "
                     f"{m['sampleSeed']}; {len(m['equivalents'])} equivalent, {len(m['survivors'])} survived)")
    return lines
