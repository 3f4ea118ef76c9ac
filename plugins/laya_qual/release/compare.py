"""``laya-qual compare OLD NEW``: what changed between two verified reports, and the
``--fail-on`` thresholds a release gate sets on those changes (docs/report-format.md,
"Comparing two reports").

Each report is first reduced to flat *facts*, ``{Key(section, item, task, figure): value}``;
the comparison is one row per key of either report, so a figure present in one report
only is a row with the other side null. Which direction is better is decided here, per
figure, and nowhere else.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import NamedTuple

from laya_qual.report.model import FAILED, NOT_EVALUATED, PASSED, canonical
from laya_qual.subjects import DIR_HASH

SECTIONS = ("result", "claims", "suite", "machine", "subjects", "heads", "benchmarks")
LOWER, HIGHER = "lower", "higher"
# Worst first: a verdict or result that moves left got worse.
RANKS = {"claims": (FAILED, NOT_EVALUATED, PASSED), "result": ("FAILED", "WARNED", "PASSED")}
# Per task of a head (heads[].tasks[]), in the order they are shown; dotted = nested object.
TASK_FIGURES = ("temperature", "calibration.outcome", "act_threshold", "escalate_threshold",
                "certification.target_risk", "certification.delta", "certification.coverage",
                "certification.acted", "certification.errors", "certification.risk_upper_bound",
                "certification.certified", "calibration.ece_before", "calibration.ece_after",
                "calibration.nll_before", "calibration.nll_after")
HEAD_DIRECTIONS = {"certification.coverage": HIGHER, "certification.certified": HIGHER,
                   "certification.risk_upper_bound": LOWER, "calibration.ece_before": LOWER,
                   "calibration.ece_after": LOWER, "calibration.nll_before": LOWER, "calibration.nll_after": LOWER}
# Benchmark figures (median and flattened extraInfo), first match wins; unmatched figures
# (workload sizes, load averages, model limits) have no better side and are never "worse".
BENCH_DIRECTIONS = (("requests_per_s_*", HIGHER), ("batched_over_*", HIGHER), ("miss_over_hit", HIGHER),
                    ("standalone_over_shared", HIGHER), ("speedup", HIGHER), ("laya_over_bare", LOWER),
                    ("int8_over_float32", LOWER), ("median", LOWER), ("*_s", LOWER), ("*seconds*", LOWER),
                    ("*_bytes", LOWER), ("*_bytes.*", LOWER))
BOUND_OUTCOMES = ("at_lower_bound", "at_upper_bound")
# --fail-on names of task figures: the per-task thresholds.
TASK_THRESHOLDS = {"certification-coverage": "certification.coverage",
                   "risk-upper-bound": "certification.risk_upper_bound",
                   "ece": "calibration.ece_after", "nll": "calibration.nll_after"}
# Two figures are called coverage; each row and --fail-on name says which (docs/report-format.md).
CODE_COVERAGE, CODE_COVERAGE_FIGURE = "code coverage", "laya.branches.fraction"
SUITE_ITEMS = {"coverage": CODE_COVERAGE}
AMBIGUOUS = {"coverage": "certification-coverage:LIMIT (a task's certification.coverage) or code-coverage:LIMIT "
                         "(the share of the runtime's branches the suite executes)"}
FLAGS = ("verdict", "temperature-bound", "uncertified")
_LIMIT = re.compile(r"([+-])(\d+(?:\.\d*)?|\.\d+)(%?)")


class ReportError(Exception):
    """A verified report whose predicate lacks what a comparison reads."""


class ThresholdError(Exception):
    """A --fail-on expression that is malformed or names nothing in either report (a usage error)."""


class Key(NamedTuple):
    section: str
    item: str
    task: str | None
    figure: str


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numeric_leaves(obj: dict, prefix: str = "") -> list[tuple[str, float]]:
    """Numbers of a nested object as (dotted name, value); strings, lists, bools and nulls are not figures."""
    out = []
    for name, value in obj.items():
        if isinstance(value, dict):
            out += _numeric_leaves(value, f"{prefix}{name}.")
        elif _number(value) and math.isfinite(value):
            out.append((f"{prefix}{name}", value))
    return out


def machine(environment: dict) -> dict:
    """What a benchmark figure depends on: CPU model and cores, GPU, and the device it ran on."""
    gpu = environment.get("gpu")
    return {"cpu": environment["cpu"]["model"], "cores": environment["cpu"]["logical_cores"],
            "gpu": f"{gpu['count']}x {gpu['name']}" if gpu else None, "device": environment.get("device")}


def _task_facts(subject: str, task: dict) -> dict[Key, object]:
    name = task["name"]
    if not isinstance(name, str):
        raise TypeError(f"task name {name!r} of {subject} is not a string")
    out = {}
    for figure in TASK_FIGURES:
        value = task
        for part in figure.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None:
            out[Key("heads", subject, name, figure)] = value
    return out


def facts(laya: dict) -> tuple[dict[Key, object], dict[str, list[str]]]:
    """One verified report's comparable facts, in the order it lists them, and the claims
    each measured benchmark test carries (a --fail-on names a benchmark by either)."""
    p = laya["predicate"]
    out: dict[Key, object] = {Key("result", "report", None, "result"): p["result"]}
    bench_claims: dict[str, list[str]] = {}
    for claim in p["claims"]:
        out[Key("claims", claim["id"], None, "verdict")] = claim["verdict"]
        for entry in claim["evidence"]:
            if entry.get("benchmark", {}).get("measured"):
                bench_claims.setdefault(entry["test"], []).append(claim["id"])
    catalogue = [[c["id"], c["area"], c["statement"]] for c in p["claims"]]
    out[Key("suite", "claim catalogue", None, "sha256")] = hashlib.sha256(canonical(catalogue)).hexdigest()
    out[Key("suite", "harness", None, "version")] = p["harness"]["version"]
    for package, digest in sorted(p["harness"][DIR_HASH].items()):
        out[Key("suite", "harness", None, package)] = digest
    for name, figure in sorted(p.get("suite", {}).items()):
        item = SUITE_ITEMS.get(name, name)
        for leaf, value in _numeric_leaves(figure):
            out[Key("suite", item, None, leaf)] = value
        if _number(figure.get("killed")) and _number(figure.get("total")) and figure["total"]:
            out[Key("suite", item, None, "rate")] = figure["killed"] / figure["total"]
        if item == CODE_COVERAGE:
            branches = figure.get("packages", {}).get("laya", {}).get("branches", {})
            if _number(branches.get("covered")) and _number(branches.get("total")) and branches["total"]:
                out[Key("suite", item, None, CODE_COVERAGE_FIGURE)] = branches["covered"] / branches["total"]
    for name, value in machine(p["environment"]).items():
        out[Key("machine", "machine", None, name)] = value
    for subject in laya["subject"]:
        out[Key("subjects", subject["name"], None, DIR_HASH)] = subject["digest"].get(DIR_HASH)
    for head in p.get("heads", []):
        out[Key("heads", head["subject"], None, "kind")] = head["kind"]
        if "error" in head:
            out[Key("heads", head["subject"], None, "error")] = head["error"]
        for task in head["tasks"]:
            out.update(_task_facts(head["subject"], task))
    for bench in p["benchmarks"]:
        out[Key("benchmarks", bench["test"], None, "median")] = bench["median"]
        for leaf, value in _numeric_leaves(bench.get("extraInfo", {})):
            out[Key("benchmarks", bench["test"], None, leaf)] = value
    return out, bench_claims


def is_setting(key: Key) -> bool:
    """A number that configures a run (a seed, the machine's cores) rather than measures
    it: shown as changed, never as a difference or a percentage."""
    return key.section == "machine" or "seed" in key.figure.lower()


def direction(key: Key) -> str | None:
    """Which way a figure is better: ``lower``, ``higher``, or None (no better side)."""
    if key.section == "heads":
        return HEAD_DIRECTIONS.get(key.figure)
    if key.section == "suite" and key.figure.rsplit(".", 1)[-1] in ("rate", "lowerBound", "lowerBound95", "fraction"):
        return HIGHER
    if key.section == "benchmarks":
        return next((d for pattern, d in BENCH_DIRECTIONS if fnmatchcase(key.figure, pattern)), None)
    return None


def _assessment(key: Key, old: object, new: object, comparable: bool) -> str | None:
    """better, worse, same, not comparable (a benchmark measured on two machines), or None."""
    if key.section in RANKS:
        if old is None:
            return None  # an added claim did not get worse
        rank = RANKS[key.section]
        if new is None or rank.index(new) < rank.index(old):
            return "worse"
        return "better" if rank.index(new) > rank.index(old) else "same"
    better = direction(key)
    if better is None or not (_number(old) and _number(new) or isinstance(old, bool) and isinstance(new, bool)):
        return None
    if key.section == "benchmarks" and not comparable:
        return "not comparable"
    if new == old:
        return "same"
    return "better" if (new > old) == (better == HIGHER) else "worse"


def _order(keys: list[Key]) -> list[Key]:
    """Sections in SECTIONS order; within one, items (and tasks) in first-seen order, OLD's first."""
    items: dict[tuple, int] = {}
    for k in keys:
        items.setdefault((k.section, k.item), len(items))
        items.setdefault((k.section, k.item, k.task), len(items))
    return sorted(keys, key=lambda k: (SECTIONS.index(k.section), items[(k.section, k.item)],
                                      items[(k.section, k.item, k.task)]))


def rows(old: dict[Key, object], new: dict[Key, object], bench_claims: dict[str, list[str]],
         comparable: bool) -> list[dict]:
    """One row per fact of either report; ``changed`` marks the differences."""
    out = []
    for key in _order(list(dict.fromkeys([*old, *new]))):
        a, b = old.get(key), new.get(key)
        row = {"section": key.section, "item": key.item, **({"task": key.task} if key.task is not None else {}),
               "figure": key.figure, "old": a, "new": b, "changed": a != b}
        if key.section == "benchmarks":
            row["claims"] = bench_claims.get(key.item, [])
        if _number(a) and _number(b) and not is_setting(key):
            row["change"] = b - a
            row["relative"] = (b - a) / abs(a) if a else None
        if direction(key):
            row["better"] = direction(key)
        assessment = _assessment(key, a, b, comparable)
        if assessment:
            row["assessment"] = assessment
        out.append(row)
    return out


# --- thresholds ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Limit:
    """How far a figure may move the worse way: ``-N``, ``+N``, ``N%`` of OLD's value."""

    sign: int        # -1: trips when the figure fell by more than amount; +1: rose
    amount: float
    relative: bool   # amount is a percentage of OLD's value

    def __str__(self) -> str:
        """The amount as the expression gave it, without its sign (the trip message says the way)."""
        return f"{self.amount:g}{'%' if self.relative else ''}"


@dataclass(frozen=True)
class Threshold:
    """One --fail-on expression: a flag (``verdict``, ...; no figure, no limit) or a figure limit."""

    expression: str
    kind: str                  # a FLAGS name, "task", "kill-rate", "code-coverage" or "bench"
    figure: str | None = None  # the row figure a limit applies to
    selector: str | None = None  # bench: a claim id or a test id
    limit: Limit | None = None   # every kind but a flag


GRAMMAR = ("verdict | temperature-bound | uncertified | certification-coverage:LIMIT | risk-upper-bound:LIMIT "
           "| ece:LIMIT | nll:LIMIT | kill-rate:LIMIT | code-coverage:LIMIT | BENCHMARK:FIGURE:LIMIT, "
           "LIMIT = -N or +N, optionally N%")


def parse_threshold(expression: str) -> Threshold:
    if expression in FLAGS:
        return Threshold(expression, expression)
    head, _, limit = expression.rpartition(":")
    if head in AMBIGUOUS:
        raise ThresholdError(f"--fail-on {expression!r}: {head!r} names two figures; say which: {AMBIGUOUS[head]}")
    match = _LIMIT.fullmatch(limit)
    if not head or not match:
        raise ThresholdError(f"--fail-on {expression!r}: not one of {GRAMMAR}")
    sign, number, percent = match.groups()
    limit = Limit(-1 if sign == "-" else 1, float(number), bool(percent))
    if head in TASK_THRESHOLDS:
        return Threshold(expression, "task", figure=TASK_THRESHOLDS[head], limit=limit)
    if head == "kill-rate":
        return Threshold(expression, "kill-rate", figure="rate", limit=limit)
    if head == "code-coverage":
        return Threshold(expression, "code-coverage", figure=CODE_COVERAGE_FIGURE, limit=limit)
    selector, _, figure = head.rpartition(":")
    if not selector or not figure:
        raise ThresholdError(f"--fail-on {expression!r}: not one of {GRAMMAR}")
    return Threshold(expression, "bench", figure=figure, selector=selector, limit=limit)


def _where(row: dict) -> str:
    task = f" task {row['task']}" if "task" in row else ""
    return f"{row['item']}{task} {row['figure']}"


def _show(value: object) -> str:
    if value is None:
        return "absent"
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _flag_reasons(threshold: Threshold, table: list[dict]) -> list[str]:
    if threshold.kind == "verdict":
        return [f"claim {r['item']}: {r['old']} -> {r['new'] or 'removed'}" for r in table
                if r["section"] == "claims" and r.get("assessment") == "worse"]
    if threshold.kind == "temperature-bound":
        return [f"{r['item']} task {r['task']}: temperature {r['new'].replace('_', ' ')} "
                f"(calibration.outcome {_show(r['old'])} -> {r['new']})" for r in table
                if r["figure"] == "calibration.outcome" and r["section"] == "heads"
                and r["new"] in BOUND_OUTCOMES and r["old"] not in BOUND_OUTCOMES]
    return [f"{r['item']} task {r['task']}: certified {_show(r['old'])} -> {_show(r['new'])}" for r in table
            if r["figure"] == "certification.certified" and r["section"] == "heads"
            and r["old"] is True and r["new"] is not True]


def _selected(threshold: Threshold, table: list[dict]) -> list[dict]:
    section = {"task": "heads", "kill-rate": "suite", "code-coverage": "suite", "bench": "benchmarks"}[threshold.kind]
    return [r for r in table if r["section"] == section and r["figure"] == threshold.figure
            and (threshold.kind != "bench" or threshold.selector in (r["item"], *r["claims"]))]


def check(threshold: Threshold, table: list[dict]) -> dict:
    """``status`` tripped, held or not checked, and why: each tripped pair, each pair not checked."""
    if threshold.kind in FLAGS:
        tripped = _flag_reasons(threshold, table)
        return {"expression": threshold.expression, "status": "tripped" if tripped else "held",
                "tripped": tripped, "notChecked": []}
    selected = _selected(threshold, table)
    if threshold.kind == "bench" and not selected:
        raise ThresholdError(f"--fail-on {threshold.expression!r}: no benchmark of claim or test "
                             f"{threshold.selector!r} has a figure {threshold.figure!r} in OLD or NEW")
    tripped, unchecked, checked = [], [], 0
    for row in selected:
        old, new = row["old"], row["new"]
        if not _number(old):
            unchecked.append(f"{_where(row)}: absent from OLD")
        elif not _number(new):
            missing = "absent from" if new is None else "not a number in"
            tripped.append(f"{_where(row)}: {_show(old)} in OLD, {missing} NEW")
        elif row.get("assessment") == "not comparable":
            unchecked.append(f"{_where(row)}: measured on different machines (--across-machines compares anyway)")
        else:
            checked += 1
            limit = threshold.limit
            amount = abs(old) * limit.amount / 100 if limit.relative else limit.amount
            if (new < old - amount) if limit.sign < 0 else (new > old + amount):
                moved = "fell" if limit.sign < 0 else "rose"
                relative = f", {row['relative']:+.2%}" if row.get("relative") is not None else ""
                tripped.append(f"{_where(row)}: {_show(old)} -> {_show(new)} ({row['change']:+.6g}{relative}): "
                               f"{moved} by more than {limit}")
    if tripped:
        status = "tripped"
    else:
        status = "held" if checked else "not checked"
        if not selected:
            unchecked.append(f"no {threshold.figure} in either report")
    return {"expression": threshold.expression, "status": status, "tripped": tripped, "notChecked": unchecked}


# --- the comparison -----------------------------------------------------------------------

def _report_info(bundle: str, keyid: str, laya: dict) -> dict:
    p = laya["predicate"]
    return {"bundle": bundle, "keyid": keyid, "result": p["result"],
            "finishedOn": p.get("invocation", {}).get("finishedOn"), "machine": machine(p["environment"]),
            "developmentKey": bool(p.get("signing", {}).get("developmentKey")), "hasHeads": "heads" in p}


def compare(old: tuple[str, str, dict], new: tuple[str, str, dict], thresholds: list[Threshold],
            across_machines: bool) -> dict:
    """The comparison of two verified reports, each ``(bundle, keyid, laya statement)``:
    ``old``/``new`` (bundle, signer, result, machine), ``sameMachine``, ``acrossMachines``,
    ``rows`` (every fact of either, ``changed`` marking the differences) and ``thresholds``."""
    found = {}
    for label, (bundle, keyid, laya) in (("OLD", old), ("NEW", new)):
        try:
            found[label] = (_report_info(bundle, keyid, laya), *facts(laya))
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise ReportError(f"{label} bundle {bundle}: laya-qual predicate is malformed ({e!r})") from None
    (old_info, old_facts, old_claims), (new_info, new_facts, new_claims) = found["OLD"], found["NEW"]
    same = old_info["machine"] == new_info["machine"]
    table = rows(old_facts, new_facts, {**old_claims, **new_claims}, same or across_machines)
    return {"old": old_info, "new": new_info, "sameMachine": same, "acrossMachines": across_machines,
            "rows": table, "thresholds": [check(t, table) for t in thresholds]}


def as_json(comparison: dict) -> str:
    return json.dumps(comparison, indent=1, sort_keys=True) + "\n"


# --- views --------------------------------------------------------------------------------

def _machine_line(m: dict) -> str:
    return f"{m['cpu']}, {m['cores']} cores, {m['gpu'] or 'no GPU'}, device {m['device']}"


def _machines(c: dict) -> str:
    old, new = _machine_line(c["old"]["machine"]), _machine_line(c["new"]["machine"])
    if c["sameMachine"]:
        return f"same: {old}"
    if c["acrossMachines"]:
        return f"different, benchmarks compared anyway (--across-machines): OLD {old}; NEW {new}"
    return (f"DIFFERENT: OLD {old}; NEW {new}: benchmark changes are not called better or worse "
            "(--across-machines compares them anyway)")


def _value(row: dict, value: object) -> str:
    """A fact as a reader wants it: digests shortened, benchmark seconds with a unit."""
    from laya_qual.report.summary import duration

    if row["figure"] in (DIR_HASH, "sha256") and isinstance(value, str):
        return value[:16]
    seconds = row["section"] == "benchmarks" and (row["figure"] == "median" or row["figure"].endswith("_s"))
    if seconds and _number(value):
        return duration(value)
    return f"{value:.4g}" if isinstance(value, float) else _show(value)


def _change(row: dict) -> str:
    if not row["changed"] or "change" not in row:
        return ""
    relative = f", {row['relative']:+.1%}" if row.get("relative") is not None else ""
    return f"{row['change']:+.4g}{relative}"


def _status(row: dict) -> str:
    if not row["changed"]:
        return "same"
    return "added" if row["old"] is None else "removed" if row["new"] is None else "changed"


def _line(row: dict) -> str:
    """``figure  old -> new (change)  assessment``, or ``figure  value`` when unchanged."""
    if not row["changed"]:
        moved = _value(row, row["old"])
    else:
        change = _change(row)
        moved = f"{_value(row, row['old'])} -> {_value(row, row['new'])}" + (f" ({change})" if change else "")
    mark = row.get("assessment", "") if row.get("assessment") not in (None, "same") else ""
    return f"{row['figure']}  {moved}  {mark}".rstrip()


def _section(table: list[dict], section: str) -> list[dict]:
    return [r for r in table if r["section"] == section]


def _groups(table: list[dict]) -> dict[tuple, list[dict]]:
    """Rows by (item, task), in row order."""
    out: dict[tuple, list[dict]] = {}
    for row in table:
        out.setdefault((row["item"], row.get("task")), []).append(row)
    return out


def _claims_summary(c: dict) -> tuple[list[dict], str]:
    claims = _section(c["rows"], "claims")
    changed = [r for r in claims if r["changed"]]
    added = sum(r["old"] is None for r in changed)
    removed = sum(r["new"] is None for r in changed)
    catalogue = "differs" if any(r["item"] == "claim catalogue" and r["changed"] for r in c["rows"]) else "same"
    harness = sorted(r["figure"] for r in _section(c["rows"], "suite") if r["item"] == "harness" and r["changed"])
    line = (f"{len(changed) - added - removed} verdict(s) changed, {added} added, {removed} removed; "
            f"claim catalogue {catalogue}; suite (harness digests) "
            f"{'differ (' + ', '.join(harness) + ')' if harness else 'same'}")
    return changed, line


def _label(row: dict) -> str:
    """What a row is about, for a reader: ``claim ID``, ``SUBJECT task NAME``, a test id, ..."""
    if row["section"] in ("result", "machine"):
        return row["section"]
    task = f" task {row['task']}" if "task" in row else ""
    return f"{'claim ' * (row['section'] == 'claims')}{row['item']}{task}"


WORSE_NOTE = ("Every figure that moved the worse way, by any amount (no significance test: "
              "`--fail-on` sets the limits a release gate enforces).")


def _worse(c: dict) -> list[dict]:
    return [r for r in c["rows"] if r.get("assessment") == "worse"]


def _threshold_line(t: dict) -> str:
    why = "; ".join(t["tripped"] or t["notChecked"])
    return f"{t['expression']}: {t['status']}" + (f" ({why})" if why else "")


def text(c: dict) -> str:
    """The terminal summary: worse rows first, then every section."""
    o, n = c["old"], c["new"]
    lines = ["laya-qual compare"]
    for label, info in (("OLD", o), ("NEW", n)):
        dev = "; DEVELOPMENT KEY" if info["developmentKey"] else ""
        lines.append(f"  {label}      {info['bundle']}: verified (keyid {info['keyid'][:16]}{dev}), "
                     f"result {info['result']}, finished {info['finishedOn']}")
    lines += [f"  machine  {_machines(c)}", f"  result   {o['result']} -> {n['result']}"]
    worse = _worse(c)
    lines += ["", f"  WORSE ({len(worse)}; any amount, see --fail-on for limits)"]
    lines += [f"    {_label(r)}: {_line(r)}" for r in worse]
    changed, summary_line = _claims_summary(c)
    lines += ["", f"  CLAIMS   {summary_line}"] + [f"    {r['item']}  {_show(r['old'])} -> {_show(r['new'])}"
                                                   for r in changed]
    lines += ["", "  SUBJECTS"]
    for r in _section(c["rows"], "subjects"):
        lines.append(f"    {r['item']}  {_status(r)}  {_line(r)}")
    for section, title in (("heads", "HEADS"), ("benchmarks", "BENCHMARKS"), ("suite", "SUITE FIGURES")):
        groups = {k: v for k, v in _groups(_section(c["rows"], section)).items()
                  if section != "suite" or k[0] not in ("harness", "claim catalogue")}
        if not groups:
            continue
        lines += ["", f"  {title}"]
        for (item, task), group in groups.items():
            claims = f"  [{', '.join(group[0]['claims'])}]" if group[0].get("claims") else ""
            lines.append(f"    {item}{' task ' + task if task else ''}{claims}")
            lines += [f"      {_line(r)}" for r in group]
    if not o["hasHeads"] or not n["hasHeads"]:
        lines.append("  (a report made before laya-qual recorded heads has none to compare)")
    if c["thresholds"]:
        lines += ["", "  THRESHOLDS"] + [f"    {_threshold_line(t)}" for t in c["thresholds"]]
    return "\n".join(lines) + "\n"


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def _table(table: list[dict], title: str, tasks: bool = False) -> list[str]:
    """Rows as a markdown table; with ``tasks``, the task gets a column of its own."""
    out = [f"| {title} |{' Task |' * tasks} Figure | Old | New | Change | |",
           "|---|---|---|---|---|---|" + "---|" * tasks]
    for r in table:
        what, task = (r["item"], f" {_cell(r.get('task', ''))} |") if tasks else (_label(r), "")
        mark = {"worse": "**worse**", "same": ""}.get(r.get("assessment"), r.get("assessment", ""))
        out.append(f"| `{_cell(what)}` |{task} {_cell(r['figure'])} | {_cell(_value(r, r['old']))} | "
                   f"{_cell(_value(r, r['new']))} | {_change(r) or _status(r) * r['changed']} | {mark} |")
    return out


def markdown(c: dict) -> str:
    """Release notes: what got worse, what changed, every head and benchmark figure."""
    o, n = c["old"], c["new"]
    out = [f"## Qualification reports compared: {o['result']} -> {n['result']}", "",
           f"**Signatures:** both verified: OLD `{o['bundle']}` (keyid `{o['keyid'][:16]}`), "
           f"NEW `{n['bundle']}` (keyid `{n['keyid'][:16]}`).", "", f"**Machines:** {_cell(_machines(c))}.", ""]
    worse = _worse(c)
    out += ["### Worse", "", WORSE_NOTE, ""] + (_table(worse, "What") if worse else ["Nothing got worse."])
    changed, summary_line = _claims_summary(c)
    out += ["", "### Claims", "", f"{summary_line}."]
    if changed:
        out += ["", "| Claim | Old | New |", "|---|---|---|"]
        out += [f"| `{r['item']}` | {_show(r['old'])} | {_show(r['new'])} |" for r in changed]
    out += ["", "### Subjects", ""] + _table(_section(c["rows"], "subjects"), "Subject")
    heads = _section(c["rows"], "heads")
    if heads:
        out += ["", "### Heads", ""] + _table(heads, "Subject", tasks=True)
    bench = _section(c["rows"], "benchmarks")
    if bench:
        out += ["", "### Benchmarks", "", f"Machines: {_cell(_machines(c))}.", "",
                f"<details><summary>All {len(bench)} benchmark figures</summary>", ""]
        out += _table(bench, "Benchmark") + ["", "</details>"]
    suite = [r for r in _section(c["rows"], "suite") if r["item"] not in ("harness", "claim catalogue")]
    if suite:
        out += ["", "### Suite figures", ""] + _table(suite, "Suite")
    if c["thresholds"]:
        out += ["", "### Thresholds", "", "| --fail-on | Status | Why |", "|---|---|---|"]
        out += [f"| `{t['expression']}` | {t['status']} | {_cell('; '.join(t['tripped'] or t['notChecked']))} |"
                for t in c["thresholds"]]
    return "\n".join(out) + "\n"
