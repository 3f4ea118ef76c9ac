"""A report as one self-contained HTML page, for judging calibration and certification
by looking: the verdict, the signature state, the claims (filterable), each qualified
head's reliability diagrams and certification path, and the benchmark arms side by side.

Everything is inline (SVG, CSS, one small filtering script) and a Content-Security-Policy
forbids every load, so the page shows the same offline, attached to a release, years on.
The page is built with ElementTree, which escapes every text and attribute: a claim
statement or task name is never markup. Every plotted value also sits in a ``data-*``
attribute, written with Python's round-tripping ``repr``, so a test can read the
numbers back and compare them with the report's.
"""

from __future__ import annotations

import base64
import hashlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass

from laya_qual.report.model import FAILED, NOT_EVALUATED, PASSED
from laya_qual.measure.suite_figures import mutant_sample_headline, project_tests_figure
from laya_qual.report import units
from laya_qual.report.summary import DEV_KEY_NOTE, evidence_line, failures_first, glance, uncollected

NOT_RECORDED = "not recorded"
NO_HEAD_DETAILS = "no head details in this report"
# extraInfo keys that name one arm of a side-by-side measurement, by what they measure
ARM_FAMILIES = (
    ("median seconds", re.compile(r"median_(?P<arm>.+)_s")),
    ("requests per second", re.compile(r"requests_per_s_(?P<arm>.+)")),
    ("weight bytes", re.compile(r"(?P<arm>.+)_weight_bytes")),
    ("median seconds per update", re.compile(r"(?P<arm>.+)_update_seconds_median")),
)
# what a bar of a side-by-side family is: medians measured beside the fixture's own rounds
SIDE_BY_SIDE = {
    "median seconds": "each bar: one arm's median, the arms timed side by side in one run; spread not recorded",
    "median seconds per update": "each bar: one arm's median over its updates; spread not recorded",
    "requests per second": "each bar: requests served over the arm's median time",
}
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#1d1d1f;padding:0 1em}
h1 .PASSED{color:#1a7f37}h1 .FAILED{color:#cf222e}h1 .WARNED{color:#9a6700}
.warning{background:#fff8c5;border:1px solid #d4a72c;padding:.5em .8em}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #d0d7de;padding:.3em .5em;text-align:left;
vertical-align:top}td.verdict-failed{color:#cf222e;font-weight:600}td.verdict-not-evaluated{color:#9a6700}
.figures{display:flex;flex-wrap:wrap;gap:1em}.figure{flex:0 0 auto;width:min-content}
.figure p{margin:.2em 0;font-size:12px}
svg text{font-size:11px;fill:#57606a}.not-recorded{color:#57606a;font-style:italic}code{font-size:12px}
table.figures-table{width:auto;margin-top:.5em}td.number{font-variant-numeric:tabular-nums;white-space:nowrap}
table.glance{width:auto;margin:.6em 0}table.glance th{font-weight:600;white-space:nowrap}
table.glance td.what{color:#57606a}#claims th button{font:inherit;font-weight:600;border:0;background:none;
padding:0;cursor:pointer}#claims th[aria-sort=ascending] button::after{content:" \25B2"}
#claims th[aria-sort=descending] button::after{content:" \25BC"}details summary{cursor:pointer}
p.median{margin:.3em 0}p.median .what{color:#57606a}
.before{fill:#8c959f}.after{fill:#0969da}.pass{fill:#1a7f37}.fail{fill:#cf222e}
"""
FILTER_SCRIPT = """
(function () {
  var rows = document.querySelectorAll("#claims tbody tr");
  var area = document.getElementById("area-filter"), verdict = document.getElementById("verdict-filter");
  function apply() {
    var shown = 0;
    rows.forEach(function (row) {
      var keep = (!area.value || row.dataset.area === area.value) &&
                 (!verdict.value || row.dataset.verdict === verdict.value);
      row.hidden = !keep;
      shown += keep ? 1 : 0;
    });
    document.getElementById("claims-shown").textContent = shown + " of " + rows.length + " claims shown";
  }
  area.addEventListener("change", apply);
  verdict.addEventListener("change", apply);
  apply();
  var table = document.getElementById("claims"), body = table.tBodies[0];
  var heads = table.querySelectorAll("thead th");
  heads.forEach(function (th, column) {
    th.querySelector("button").addEventListener("click", function () {
      var up = th.getAttribute("aria-sort") !== "ascending";
      heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      function key(row) { var cell = row.cells[column]; return cell.dataset.sort || cell.textContent; }
      Array.prototype.slice.call(body.rows).sort(function (a, b) {
        return (up ? 1 : -1) * key(a).localeCompare(key(b), undefined, {numeric: true});
      }).forEach(function (row) { body.appendChild(row); });
    });
  });
})();
"""


@dataclass(frozen=True)
class Signature:
    """What ``show`` checked: verified against a given public key (and its keyid), or not."""

    verified: bool
    keyid: str | None = None


def number(value: float | int) -> str:
    """The exact value for a ``data-*`` attribute (``repr`` round-trips a float)."""
    return repr(float(value)) if isinstance(value, float) else str(int(value))


def shown(value: float) -> str:
    return f"{value:.4g}"


def _el(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    """A child element; attribute names use ``_`` for ``-`` (data_count -> data-count)."""
    element = ET.SubElement(parent, tag, {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()})
    if text is not None:
        element.text = text
    return element


# --- SVG plots ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    """Data coordinates to pixels for one plot area; recorded on its <g> so a reader (or a
    test) can map every mark back to its value."""

    left: float
    top: float
    width: float
    height: float
    xmin: float
    xmax: float
    ymin: float
    ymax: float

    def x(self, value: float) -> float:
        return round(self.left + (value - self.xmin) / (self.xmax - self.xmin) * self.width, 2)

    def y(self, value: float) -> float:
        return round(self.top + (self.ymax - value) / (self.ymax - self.ymin) * self.height, 2)

    def attributes(self) -> dict[str, str]:
        return {f"data-{k}": number(float(v)) for k, v in vars(self).items()}


def _plot(parent: ET.Element, frame: Frame, kind: str, title: str, xlabel: str, ylabel: str,
          ticks: tuple[Iterable[float], Iterable[float]]) -> ET.Element:
    """An <svg> with axes and ticks; returns the plot area's <g> for the marks."""
    svg = _el(parent, "svg", width=str(frame.left + frame.width + 24), height=str(frame.top + frame.height + 36),
              role="img", data_plot=kind)
    _el(svg, "title", title)
    _el(svg, "text", title, x=str(frame.left), y="12")
    area = ET.SubElement(svg, "g", {"class": "plot-area", **frame.attributes()})
    bottom, right = frame.top + frame.height, frame.left + frame.width
    _el(svg, "rect", x=str(frame.left), y=str(frame.top), width=str(frame.width), height=str(frame.height),
        fill="none", stroke="#8c959f")
    xticks, yticks = ticks
    for t in xticks:
        _el(svg, "text", shown(t), x=str(frame.x(t)), y=str(bottom + 13), text_anchor="middle")
    for t in yticks:
        _el(svg, "text", shown(t), x=str(frame.left - 4), y=str(frame.y(t) + 4), text_anchor="end")
    _el(svg, "text", xlabel, x=str((frame.left + right) / 2), y=str(bottom + 28), text_anchor="middle")
    _el(svg, "text", ylabel, x="10", y=str(frame.top + frame.height / 2), text_anchor="middle",
        transform=f"rotate(-90 10 {frame.top + frame.height / 2})")
    return area


def reliability_svg(parent: ET.Element, bins: list[dict], when: str, temperature: float, ece: float) -> None:
    """Accuracy against mean top probability per bin (bars span the bin), the diagonal
    being perfect calibration; empty bins draw nothing."""
    frame = Frame(44, 22, 220, 220, 0.0, 1.0, 0.0, 1.0)
    title = f"dev_cal {when} (T = {shown(temperature)}): ECE {shown(ece)}"
    area = _plot(parent, frame, "reliability", title, "mean top probability", "accuracy",
                 ((0, 0.5, 1), (0, 0.5, 1)))
    _el(area, "line", x1=str(frame.x(0)), y1=str(frame.y(0)), x2=str(frame.x(1)), y2=str(frame.y(1)),
        stroke="#8c959f", stroke_dasharray="4 3")
    for b in bins:
        if not b["count"]:
            continue
        _el(area, "rect", class_=when, x=str(frame.x(b["lower"])), y=str(frame.y(b["accuracy"])),
            width=str(round(frame.x(b["upper"]) - frame.x(b["lower"]), 2)),
            height=str(round(frame.y(0) - frame.y(b["accuracy"]), 2)), opacity="0.35")
        point = _el(area, "circle", class_=when, cx=str(frame.x(b["confidence"])), cy=str(frame.y(b["accuracy"])),
                    r="3.5", data_series=when, data_lower=number(b["lower"]), data_upper=number(b["upper"]),
                    data_count=number(b["count"]), data_confidence=number(b["confidence"]),
                    data_accuracy=number(b["accuracy"]))
        _el(point, "title", f"[{shown(b['lower'])}, {shown(b['upper'])}): {b['count']} examples, mean top "
                            f"probability {shown(b['confidence'])}, accuracy {shown(b['accuracy'])}")


def path_svg(parent: ET.Element, certification: dict, act_threshold: float) -> None:
    """Each tested threshold's risk bound, in the order tested (right to left), the target
    risk as a line, the certified threshold marked."""
    path, target = certification["path"], certification["target_risk"]
    thresholds = [s["threshold"] for s in path]
    low, high = min(thresholds), max(thresholds)
    pad = max((high - low) * 0.05, 0.01)
    top = min(1.0, max(max(s["risk_upper_bound"] for s in path), target) * 1.1)
    frame = Frame(44, 22, 340, 220, max(0.0, low - pad), min(1.0, high + pad), 0.0, top)
    xticks = [frame.xmin + (frame.xmax - frame.xmin) * i / 4 for i in range(5)]
    area = _plot(parent, frame, "certification-path",
                 f"certification on dev_conf: {len(path)} threshold(s) tested", "threshold (tested right to left)",
                 "risk upper bound", (xticks, (0, top)))
    _el(area, "line", x1=str(frame.left), x2=str(frame.left + frame.width), y1=str(frame.y(target)),
        y2=str(frame.y(target)), stroke="#9a6700", stroke_dasharray="5 3", data_target_risk=number(target))
    _el(area, "text", f"target {shown(target)}", x=str(frame.left + 4), y=str(frame.y(target) - 4))
    _el(area, "polyline", fill="none", stroke="#57606a",
        points=" ".join(f"{frame.x(s['threshold'])},{frame.y(s['risk_upper_bound'])}" for s in path))
    if certification["certified"]:
        x = frame.x(act_threshold)
        _el(area, "line", x1=str(x), x2=str(x), y1=str(frame.top), y2=str(frame.top + frame.height), stroke="#1a7f37",
            data_chosen_threshold=number(act_threshold))
        # the label on the side of the line with room for it: right of it in the plot's left half
        left_half = x <= frame.left + frame.width / 2
        _el(area, "text", f"acts at >= {act_threshold:.6g}", x=str(x + 4 if left_half else x - 4),
            y=str(frame.top + frame.height - 6), text_anchor="start" if left_half else "end")
    else:
        _el(area, "text", "nothing certified: escalates everything", x=str(frame.left + 4), y=str(frame.top + 14))
    for order, s in enumerate(path):
        passed = s["acted"] > 0 and s["risk_upper_bound"] <= target
        point = _el(area, "circle", class_="pass" if passed else "fail", cx=str(frame.x(s["threshold"])),
                    cy=str(frame.y(s["risk_upper_bound"])), r="3", data_order=str(order),
                    data_threshold=number(s["threshold"]), data_acted=number(s["acted"]),
                    data_errors=number(s["errors"]), data_risk_upper_bound=number(s["risk_upper_bound"]))
        _el(point, "title", f"threshold {s['threshold']:.6g}: {s['acted']} acted, {s['errors']} errors, bound "
                            f"{shown(s['risk_upper_bound'])} ({'passed' if passed else 'failed: the sequence stops'})")


def bars_svg(parent: ET.Element, measure: str, arms: list[tuple[str, str, float]]) -> None:
    """One horizontal bar per arm, on one scale from 0: (arm, extraInfo key, value)."""
    longest = max(value for _, _, value in arms) or 1.0
    frame = Frame(150, 22, 300, 22 * len(arms), 0.0, longest, 0.0, float(len(arms)))
    svg = _el(parent, "svg", width="560", height=str(frame.height + 30), role="img", data_plot="benchmark")
    _el(svg, "title", measure)
    _el(svg, "text", measure, x="0", y="12")
    area = ET.SubElement(svg, "g", {"class": "plot-area", **frame.attributes()})
    for row, (arm, key, value) in enumerate(arms):
        y = frame.top + 22 * row
        _el(area, "text", arm, x=str(frame.left - 6), y=str(y + 14), text_anchor="end")
        bar = _el(area, "rect", class_="after", x=str(frame.left), y=str(y + 3),
                  width=str(frame.x(value) - frame.left), height="15", data_arm=arm, data_key=key,
                  data_value=number(value))
        _el(bar, "title", f"{key}: {units.figure(key, value)}")
        _el(area, "text", units.figure(key, value), x=str(frame.x(value) + 4), y=str(y + 14), class_="number",
            data_key=key)


# --- page sections -----------------------------------------------------------------------


def _numeric(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def benchmark_arms(extra: dict) -> tuple[list[tuple[str, list[tuple[str, str, float]]]], list[str]]:
    """The side-by-side groups of one benchmark's extraInfo: by key family (median_<arm>_s,
    ...) and per nested object of numbers (e.g. peak_rss_bytes per process); and the keys
    left over."""
    groups: dict[str, list[tuple[str, str, float]]] = {}
    used = set()
    for key, value in extra.items():
        if isinstance(value, dict):
            arms = [(arm, f"{key}.{arm}", v) for arm, v in value.items() if _numeric(v)]
            if arms:
                groups[key] = arms
                used.add(key)
            continue
        for measure, pattern in ARM_FAMILIES:
            match = pattern.fullmatch(key)
            if match and _numeric(value):
                groups.setdefault(measure, []).append((match["arm"], key, value))
                used.add(key)
                break
    return list(groups.items()), [k for k in extra if k not in used]


def _benchmarks(body: ET.Element, benchmarks: list[dict]) -> None:
    _el(body, "h2", "Benchmarks", id="benchmarks")
    if not benchmarks:
        _el(body, "p", "No benchmark was measured in this report.", class_="not-recorded")
    for b in benchmarks:
        section = _el(body, "section", class_="benchmark", data_test=b["test"])
        _el(section, "h3").append(_code(b["test"]))
        headline = _el(section, "p", "median wall time of one round (pytest-benchmark's rounds, apart from the "
                                     "side-by-side figures below): ", class_="median",
                       data_median=number(b["median"]))
        _el(headline, "strong", units.median(b), class_="number").tail = f" ({units.spread(b)}). "
        _el(headline, "span", f"One round times: {units.timed(b)}.", class_="what", data_timed=units.timed(b))
        extra = b.get("extraInfo", {})
        groups, rest = benchmark_arms(extra)
        figures = _el(section, "div", class_="figures")
        for measure, arms in groups:
            figure = _el(figures, "div", class_="figure")
            bars_svg(figure, measure, arms)
            if measure in SIDE_BY_SIDE:
                _el(figure, "p", SIDE_BY_SIDE[measure])
        scalars = [(k, extra[k]) for k in rest if extra[k] is not None and not isinstance(extra[k], (list, dict))
                   and k != units.TIMED_KEY]
        if scalars:
            table = _el(section, "table", class_="figures-table")
            for key, value in scalars:
                row = _el(table, "tr")
                _el(row, "td").append(_code(key))
                _el(row, "td", units.figure(key, value), class_="number" if _numeric(value) else "text",
                    data_key=key, data_value=number(value) if _numeric(value) else str(value))


def _code(text: str) -> ET.Element:
    element = ET.Element("code")
    element.text = text
    return element


def _task(section: ET.Element, task: dict) -> None:
    box = _el(section, "div", class_="task", data_task=task["name"])
    _el(box, "h4", f"task {task['name']}")
    calibration, certification = task.get("calibration") or {}, task.get("certification") or {}
    if calibration:
        _el(box, "p", f"temperature {shown(task['temperature'])} ({calibration.get('outcome', calibration['method'])}, "
                      f"{calibration['examples']} dev_cal examples); NLL {shown(calibration['nll_before'])} -> "
                      f"{shown(calibration['nll_after'])}; ECE {shown(calibration['ece_before'])} -> "
                      f"{shown(calibration['ece_after'])}")
    if certification:
        verdict = (f"act when top probability >= {task['act_threshold']:.6g}: {certification['acted']} of "
                   f"{certification['examples']} acted, {certification['errors']} errors, risk bound "
                   f"{shown(certification['risk_upper_bound'])}" if certification["certified"]
                   else "NONE certified: this task escalates everything")
        _el(box, "p", f"{verdict} (target {shown(certification['target_risk'])}, confidence "
                      f"{shown(1 - certification['delta'])})")
    figures = _el(box, "div", class_="figures")
    if "reliability_before" in calibration and "reliability_after" in calibration:
        for when, temperature in (("before", 1.0), ("after", task["temperature"])):
            figure = _el(figures, "div", class_="figure")
            reliability_svg(figure, calibration[f"reliability_{when}"], when, temperature, calibration[f"ece_{when}"])
            _el(figure, "p", "per bin: accuracy at its mean top probability; dashed: calibrated")
    else:
        _el(figures, "p", f"reliability diagram: {NOT_RECORDED}", class_="not-recorded", data_picture="reliability")
    if "path" in certification:
        figure = _el(figures, "div", class_="figure")
        path_svg(figure, certification, task["act_threshold"])
        _el(figure, "p", "green: passed (bound <= target); red: failed, where the sequence stopped")
    else:
        _el(figures, "p", f"certification path: {NOT_RECORDED}", class_="not-recorded", data_picture="path")


def _heads(body: ET.Element, p: dict) -> None:
    _el(body, "h2", "Heads: calibration and certification", id="heads")
    if "heads" not in p:
        _el(body, "p", NO_HEAD_DETAILS, class_="not-recorded", data_heads="absent")
        return
    if not p["heads"]:
        _el(body, "p", "No artifact was qualified in this run.", class_="not-recorded", data_heads="none")
        return
    for head in p["heads"]:
        section = _el(body, "section", class_="head", data_subject=head["subject"])
        _el(section, "h3", f"{head['subject']} ({head.get('kind') or 'kind unknown'})")
        if "error" in head:
            _el(section, "p", head["error"], class_="not-recorded")
        for task in head["tasks"]:
            _task(section, task)


VERDICT_ORDER = {FAILED: 1, NOT_EVALUATED: 2, PASSED: 3}  # sorting the verdict column: failures first


def _opening(statement: str, width: int = 72) -> str:
    """The start of a claim's statement, cut at a word, for the folded row."""
    if len(statement) <= width:
        return statement
    return statement[:width].rsplit(" ", 1)[0] + " …"


def _glance(body: ET.Element, p: dict) -> None:
    """The headline figures, each with what it measures, before anything else."""
    table = _el(body, "table", class_="glance", id="glance")
    for name, value, what in glance(p):
        row = _el(table, "tr", data_figure=name)
        _el(row, "th", name, scope="row")
        cell = _el(row, "td", class_="number")
        verdict = {"claims passed": PASSED, "claims failed": FAILED, "claims not evaluated": NOT_EVALUATED}.get(name)
        if verdict:  # the count itself, readable back
            _el(cell, "span", str(p["counts"][verdict]), data_verdict_count=verdict,
                data_value=number(p["counts"][verdict])).tail = value[len(str(p["counts"][verdict])):]
        else:
            cell.text = value
        _el(row, "td", what, class_="what")


def _claims(body: ET.Element, claims: list[dict]) -> None:
    _el(body, "h2", "Claims", id="claims-section")
    controls = _el(body, "p")
    for label, name, values in (("area", "area-filter", sorted({c["area"] for c in claims})),
                                ("verdict", "verdict-filter", [PASSED, FAILED, NOT_EVALUATED])):
        _el(controls, "label", f"{label} ", for_=name)
        select = _el(controls, "select", id=name)
        _el(select, "option", "all", value="")
        for value in values:
            _el(select, "option", value, value=value)
        select.tail = " "
    _el(controls, "span", "", id="claims-shown")
    table = _el(body, "table", id="claims")
    header = _el(_el(table, "thead"), "tr")
    for name in ("claim", "verdict", "evidence", "statement"):
        _el(_el(header, "th", scope="col"), "button", name, type="button", title=f"sort by {name}")
    rows = _el(table, "tbody")
    for c in failures_first(claims):
        row = _el(rows, "tr", data_claim=c["id"], data_area=c["area"], data_verdict=c["verdict"])
        _el(row, "td").append(_code(c["id"]))
        _el(row, "td", c["verdict"], class_="verdict-" + c["verdict"].replace(" ", "-"), data_verdict=c["verdict"],
            data_sort=str(VERDICT_ORDER.get(c["verdict"], 0)))
        _el(row, "td", evidence_line(c))
        fold = _el(_el(row, "td"), "details")
        _el(fold, "summary", _opening(c["statement"]))
        _el(fold, "p", c["statement"], class_="statement")


def _header(body: ET.Element, laya: dict, bundle_name: str, signature: Signature) -> None:
    p = laya["predicate"]
    title = _el(body, "h1", "Qualification report: ")
    _el(title, "span", p["result"], class_=p["result"], data_result=p["result"])
    _el(body, "p", f"{bundle_name}, produced {p['invocation']['finishedOn']} with laya-qual {p['harness']['version']}")
    development = bool(p.get("signing", {}).get("developmentKey"))
    text = (f"Signature verified with the given public key (keyid {signature.keyid})" if signature.verified
            else "Signature NOT CHECKED (pass --public-key, or run laya-qual verify)")
    _el(body, "p", text + ".", id="signature", data_verified=str(signature.verified).lower(),
        data_development_key=str(development).lower())
    if development:
        _el(body, "p", f"Warning: {DEV_KEY_NOTE}.", class_="warning")
    if uncollected(p):
        _el(body, "p", "Did not collect (none of their tests ran, so the report is FAILED): "
            + ", ".join(uncollected(p)) + ".", id="not-collected", class_="warning")
    _glance(body, p)
    # Names first, digests folded: a reader's first screen says what was qualified, not 64-digit hex.
    box = _el(body, "details", id="subjects")
    _el(box, "summary", f"Subjects ({len(laya['subject'])}): " + ", ".join(s["name"] for s in laya["subject"]))
    for s in laya["subject"]:
        _el(box, "p", f"{s['name']} ({', '.join(f'{a}:{v}' for a, v in sorted(s['digest'].items()))})")
    sampled = p.get("suite", {}).get("mutantSample")
    if sampled:
        figure = _el(body, "p", "Sampled mutants: " + mutant_sample_headline(sampled) + ".", id="mutant-sample",
                     data_killed=number(sampled["killed"]), data_total=number(sampled["total"]),
                     data_lower_bound=number(sampled["lowerBound"]))
        second = project_tests_figure(sampled)
        if second:
            _el(figure, "br").tail = "A second figure, " + second + "."


def render(laya: dict, bundle_name: str, signature: Signature) -> str:
    """The whole page for a report's laya-qual statement."""
    p = laya["predicate"]
    script_hash = base64.b64encode(hashlib.sha256(FILTER_SCRIPT.encode()).digest()).decode()
    root = ET.Element("html", lang="en")
    head = _el(root, "head")
    _el(head, "meta", charset="utf-8")
    _el(head, "meta", http_equiv="Content-Security-Policy",
        content=f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'")
    _el(head, "title", f"laya-qual report {bundle_name}: {p['result']}")
    _el(head, "style", STYLE)
    body = _el(root, "body")
    _header(body, laya, bundle_name, signature)
    nav = _el(body, "p")
    for anchor, label in (("claims-section", "claims"), ("heads", "heads"), ("benchmarks", "benchmarks")):
        _el(nav, "a", label, href=f"#{anchor}").tail = " "
    _claims(body, p["claims"])
    _heads(body, p)
    _benchmarks(body, p["benchmarks"])
    _el(body, "h2", "Scope")
    _el(body, "p", p["scope"]["statement"])
    _el(body, "script", FILTER_SCRIPT)
    return "<!DOCTYPE html>\n" + ET.tostring(root, encoding="unicode", method="html") + "\n"
