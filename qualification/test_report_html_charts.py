"""The pictures of `laya-qual show --html` draw the signed report's own values (claim
report.html.charts; docs/report-format.md, "Pictures").

Every expectation is written from that text, not from the renderer: the page is parsed
here, each plot area's frame is read from its `data-*` attributes and mapped to pixels by
the documented formula, and the values are the report's (the head.json tasks and the
benchmark's extraInfo that were signed), drawn by laya_qual.synth's strategies under
docs/artifact-v1.md's rules for the pictures' records."""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from laya_qual.cli import main
from laya_qual.report.signing import keygen, load_signer
from laya_qual.suite.page import Node, Tree
from laya_qual.synth.reports import charted_tasks, report_spec, signed_report, trained_task

CLAIM = pytest.mark.laya_claim("report.html.charts")
PIXEL = 0.006   # a pixel is written to 2 decimals
SPAN = 0.011    # a length written to 2 decimals from two positions written to 2 decimals
ARMS = ("batched", "one_by_one", "onnxruntime", "x")
# docs/report-format.md: the extraInfo keys drawn as one bar per arm
FAMILIES = (r"median_(?P<arm>\w+)_s", r"requests_per_s_(?P<arm>\w+)", r"(?P<arm>\w+)_weight_bytes",
            r"(?P<arm>\w+)_update_seconds_median")


@dataclass(frozen=True)
class Frame:
    """docs/report-format.md: a plot area's <g> records its frame; a value maps to a pixel by
    x = left + (v - xmin) / (xmax - xmin) * width, y = top + (ymax - v) / (ymax - ymin) * height."""
    left: float
    top: float
    width: float
    height: float
    xmin: float
    xmax: float
    ymin: float
    ymax: float

    @classmethod
    def of(cls, svg: Node) -> "Frame":
        [area] = svg.all("g", class_="plot-area")
        return cls(*(float(area.attrs[f"data-{k}"]) for k in ("left", "top", "width", "height", "xmin", "xmax",
                                                              "ymin", "ymax")))

    def x(self, v: float) -> float:
        assert self.xmin <= v <= self.xmax, (v, self)  # the frame holds every value it draws
        return self.left + (v - self.xmin) / (self.xmax - self.xmin) * self.width

    def y(self, v: float) -> float:
        assert self.ymin <= v <= self.ymax, (v, self)
        return self.top + (self.ymax - v) / (self.ymax - self.ymin) * self.height


def at(attr: str, expected: float, tolerance: float = PIXEL) -> bool:
    return abs(float(attr) - expected) <= tolerance


def exact(node: Node, name: str) -> float:
    """A drawn value's exact number, from its data-* attribute (Python repr)."""
    return float(node.attrs[f"data-{name.replace('_', '-')}"])


# --- the oracle: docs/report-format.md, "Pictures" ----------------------------------------------

def check_reliability(svg: Node, bins: list[dict], when: str) -> None:
    """One point and one bar per non-empty bin, in order: the point at (mean top probability,
    accuracy), the bar spanning the bin from accuracy 0 up to the bin's accuracy."""
    frame = Frame.of(svg)
    drawn = [b for b in bins if b["count"]]
    points = svg.all("circle")
    [area] = svg.all("g", class_="plot-area")
    bars = area.all("rect")
    assert len(points) == len(bars) == len(drawn), (when, len(points), len(bars), len(drawn))
    for point, bar, b in zip(points, bars, drawn):
        assert point.attrs["data-series"] == when
        assert {k: exact(point, k) for k in b} == b
        assert at(point.attrs["cx"], frame.x(b["confidence"])) and at(point.attrs["cy"], frame.y(b["accuracy"]))
        assert at(bar.attrs["x"], frame.x(b["lower"]))
        assert at(float(bar.attrs["x"]) + float(bar.attrs["width"]), frame.x(b["upper"]), SPAN)
        assert at(bar.attrs["y"], frame.y(b["accuracy"]))
        assert at(float(bar.attrs["y"]) + float(bar.attrs["height"]), frame.y(0.0), SPAN)


def check_path(svg: Node, task: dict) -> None:
    """Each tested threshold in the order tested at (threshold, risk bound), passed exactly when
    it acted and its bound is within the target; the target a line across the plot at its
    height; the certified threshold a vertical line across it, when there is one."""
    certification, frame = task["certification"], Frame.of(svg)
    points = sorted(svg.all("circle"), key=lambda c: int(c.attrs["data-order"]))
    assert [int(p.attrs["data-order"]) for p in points] == list(range(len(certification["path"])))
    for point, step in zip(points, certification["path"]):
        assert {k: exact(point, k) for k in step} == step
        assert at(point.attrs["cx"], frame.x(step["threshold"]))
        assert at(point.attrs["cy"], frame.y(step["risk_upper_bound"]))
        passed = step["acted"] >= 1 and step["risk_upper_bound"] <= certification["target_risk"]
        assert point.attrs["class"] == ("pass" if passed else "fail"), (step, point.attrs)
    [target] = [line for line in svg.all("line") if "data-target-risk" in line.attrs]
    assert exact(target, "target_risk") == certification["target_risk"]
    assert at(target.attrs["y1"], frame.y(certification["target_risk"])) and target.attrs["y1"] == target.attrs["y2"]
    assert (at(target.attrs["x1"], frame.left), at(target.attrs["x2"], frame.left + frame.width)) == (True, True)
    chosen = [line for line in svg.all("line") if "data-chosen-threshold" in line.attrs]
    if not certification["certified"]:
        assert chosen == []
        return
    [line] = chosen
    assert exact(line, "chosen_threshold") == task["act_threshold"]
    assert at(line.attrs["x1"], frame.x(task["act_threshold"])) and line.attrs["x1"] == line.attrs["x2"]
    assert (at(line.attrs["y1"], frame.top), at(line.attrs["y2"], frame.top + frame.height)) == (True, True)


def arms_of(extra: dict) -> dict[str, float]:
    """Every bar the docs give a benchmark's extraInfo: a key of an arm family, or a number
    in an object of numbers (``key.member``)."""
    bars = {}
    for key, value in extra.items():
        if isinstance(value, dict):
            bars.update({f"{key}.{m}": v for m, v in value.items()})
        elif any(re.fullmatch(f, key) for f in FAMILIES):
            bars[key] = value
    return bars


def check_bars(page: Node, extra: dict) -> None:
    """Each arm one bar, from 0 to its value, on its chart's scale."""
    drawn = {}
    for svg in page.all("svg", data_plot="benchmark"):
        frame = Frame.of(svg)
        for bar in svg.all("rect", class_="after"):
            drawn[bar.attrs["data-key"]] = exact(bar, "value")
            assert at(bar.attrs["x"], frame.x(0.0))
            assert at(float(bar.attrs["x"]) + float(bar.attrs["width"]), frame.x(exact(bar, "value")), SPAN)
    assert drawn == arms_of(extra)


def check_inside(svg: Node) -> None:
    """No mark or label of a plot is drawn past its <svg> (a label's width taken at 5 px a
    character)."""
    width, height = float(svg.attrs["width"]), float(svg.attrs["height"])
    for mark in svg.all():
        a = mark.attrs
        xs = [float(a[k]) for k in ("x", "x1", "x2", "cx") if k in a]
        ys = [float(a[k]) for k in ("y", "y1", "y2", "cy") if k in a]
        if mark.tag == "rect":
            xs.append(float(a["x"]) + float(a["width"]))
            ys.append(float(a["y"]) + float(a["height"]))
        if mark.tag == "polyline":
            pairs = [p.split(",") for p in a["points"].split()]
            xs += [float(x) for x, _ in pairs]
            ys += [float(y) for _, y in pairs]
        if mark.tag == "text" and "transform" not in a:
            extent = 5 * len(mark.content())
            start = float(a["x"]) - {"middle": extent / 2, "end": extent}.get(a.get("text-anchor"), 0)
            xs += [start, start + extent]
        assert all(0 <= x <= width for x in xs) and all(0 <= y <= height for y in ys), \
            (svg.attrs.get("data-plot"), mark.tag, a, width, height)


# --- the runs -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def signer(tmp_path_factory):
    d = tmp_path_factory.mktemp("charts-key")
    keygen(d / "k")
    return load_signer(d / "k"), d / "k.pub"


def page_of(spec: dict, signer) -> Node:
    """The page `laya-qual show --html` writes for a report of ``spec`` signed by ``signer``."""
    private, public = signer
    with tempfile.TemporaryDirectory(prefix="laya-charts-") as d:
        bundle = signed_report(Path(d), spec, private)
        result = CliRunner().invoke(main, ["show", str(bundle), "--public-key", str(public), "--html",
                                           str(Path(d) / "page.html")], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return Tree((Path(d) / "page.html").read_text(encoding="utf-8")).root


# figures as benchmarks record them (counts of bytes whole; no 1e-276 s): every label has room
NUMBERS = st.one_of(st.just(0), st.integers(0, 2**40), st.floats(1e-6, 1e6))
EXTRAS = st.dictionaries(
    st.sampled_from([f"median_{a}_s" for a in ARMS] + [f"requests_per_s_{a}" for a in ARMS]
                    + [f"{a}_weight_bytes" for a in ARMS] + ["speedup", "requests"]),
    NUMBERS, max_size=8).flatmap(
    lambda flat: st.dictionaries(st.sampled_from(["peak_rss_bytes.owner0", "peak_rss_bytes.owner1",
                                                  "baseline_rss_bytes.feature_learner"]),
                                 NUMBERS, max_size=3).map(lambda nested: {**flat, **unflatten(nested)}))


def unflatten(dotted: dict) -> dict:
    out: dict = {}
    for key, value in dotted.items():
        outer, inner = key.split(".")
        out.setdefault(outer, {})[inner] = value
    return out


def literal_task(path: list[tuple], bins: list[tuple], target: float = 0.1) -> dict:
    """A task with these pictures: path steps (threshold, acted, errors, bound), bins (lower,
    upper, count, confidence, accuracy), both diagrams alike; its figures follow the rules."""
    steps = [dict(zip(("threshold", "acted", "errors", "risk_upper_bound"), s)) for s in path]
    diagram = [dict(zip(("lower", "upper", "count", "confidence", "accuracy"), b)) for b in bins]
    examples = sum(b["count"] for b in diagram)
    passed = [s for s in steps if s["acted"] >= 1 and s["risk_upper_bound"] <= target]
    certified = bool(passed) and passed[0] is steps[0]
    task = trained_task(**{"act_threshold": passed[-1]["threshold"] if certified else 1.0,
                           "calibration.examples": examples, "calibration.reliability_before": diagram,
                           "calibration.reliability_after": diagram, "certification.path": steps,
                           "certification.target_risk": target, "certification.certified": certified})
    return {**task, "name": "edge"}


EVERY_BIN = [(0.0, 0.5, 3, 0.0, 1.0), (0.5, 1.0, 0, None, None), (1.0 - 1e-9, 1.0, 2, 1.0, 0.0)]


@CLAIM
@given(tasks=st.lists(charted_tasks(), min_size=1, max_size=2).map(
           lambda ts: [{**t, "name": f"task{i}"} for i, t in enumerate(ts)]),
       extra=EXTRAS)
@example(tasks=[], extra={"median_a_s": 0.0, "median_b_s": 0.0})  # every arm 0: bars drawn empty
@example(tasks=[literal_task([(0.0, 5, 0, 0.05)], EVERY_BIN)], extra={})  # one step, at 0, passed
@example(tasks=[literal_task([(1.0, 0, 0, 1.0)], EVERY_BIN)], extra={})  # one step at 1 failed: nothing certified
@example(tasks=[literal_task([(0.9, 3, 0, 0.1), (0.5, 9, 1, 0.1), (0.1, 20, 9, 0.6)], EVERY_BIN)],
         extra={"median_x_s": 1e6})  # bounds exactly at the target pass; a threshold far from the left edge
@example(tasks=[literal_task([(0.95, 3, 0, 0.05), (0.2, 9, 5, 0.6)], EVERY_BIN)], extra={})  # certified at the right edge
def test_every_picture_draws_the_reports_values_where_its_frame_maps_them(signer, tasks, extra):
    page = page_of(report_spec(tasks=tasks or [trained_task()], extra=extra), signer)
    for task in tasks:
        [box] = page.all("div", data_task=task["name"])
        reliability = box.all("svg", data_plot="reliability")
        assert len(reliability) == 2
        for when, svg in zip(("before", "after"), reliability):
            check_reliability(svg, task["calibration"][f"reliability_{when}"], when)
        [path] = box.all("svg", data_plot="certification-path")
        check_path(path, task)
    check_bars(page, extra)
    for svg in page.all("svg"):
        check_inside(svg)
