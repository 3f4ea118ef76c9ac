"""`laya-qual show BUNDLE --html OUT`: one self-contained page whose every shown number is
the report's. Bundles are real: a head trained by `laya train` (one task named like markup),
a copy of it as an older head without the recorded pictures, both qualified as artifacts of
a small pytest run signed with an Ed25519 development key; and the committed release report,
made before reports carried head details. The page is read back with html.parser."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

import laya
from laya.artifact.manifest import read_artifact_files
from laya.training.train_cli import train
from laya_qual.cli import main
from laya_qual.report.html import FILTER_SCRIPT, NO_HEAD_DETAILS, NOT_RECORDED, bars_svg, benchmark_arms, path_svg
from laya_qual.report.model import LAYA_TYPE
from laya_qual.synth import replace_pinned_file, write_artifact
from laya_qual.synth.tasks import synthetic_task, write_task
from laya_qual.report.verify import read_statements
from laya_qual.suite.page import Node, Tree

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "reports" / "releases" / "example-release.intoto.jsonl"
MARKUP_TASK = "<script>alert('task')</script>&amp;"
SIZES = {"train": 80, "dev_cal": 60, "dev_conf": 120}
SUITE = """
import pytest

@pytest.mark.laya_claim("report.verdicts")
def test_passes():
    pass

@pytest.mark.laya_claim("report.signature")
def test_fails():
    assert 1 + 1 == 3

@pytest.mark.laya_claim("bench.serve.batch")
def test_arms(benchmark):
    benchmark.extra_info.update(median_batched_s=0.125, median_one_by_one_s=0.5, requests_per_s_batched=240.0,
                                requests_per_s_one_by_one=60.0, batched_over_one_by_one=4.0, heads="a,b",
                                peak_rss_bytes={"owner0": 1000, "owner1": 3000, "idle": None})
    benchmark.pedantic(sum, args=(range(10),), rounds=3)
"""
ARM_KEYS = {"median_batched_s", "median_one_by_one_s", "requests_per_s_batched", "requests_per_s_one_by_one",
            "peak_rss_bytes.owner0", "peak_rss_bytes.owner1"}


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def predicate(bundle: Path) -> dict:
    return next(s for s, _ in read_statements(bundle) if s["predicateType"] == LAYA_TYPE)["predicate"]


def strip_pictures(head: Path, older: Path) -> None:
    """``older``: ``head`` as written before laya train recorded its pictures."""
    shutil.copytree(head, older)
    config = json.loads(read_artifact_files(older)["head_config"].data)
    for task in config["tasks"]:
        del task["calibration"]["reliability_before"], task["calibration"]["reliability_after"]
        del task["certification"]["path"]
    replace_pinned_file(older, "head_config", json.dumps(config, indent=2).encode())


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """{name: (bundle, page text, parsed page)} for a run qualifying two heads (signed with a
    development key), the same suite qualifying none, and the committed release report."""
    d = tmp_path_factory.mktemp("html")
    base_dir = write_artifact(d / "base", seed=2, head_kind="float32", base_seed=31)
    base = laya.load_artifact_base(base_dir)
    records = synthetic_task(base, seed=4, sizes=SIZES) + synthetic_task(base, seed=5, task=MARKUP_TASK, sizes=SIZES)
    data = write_task(d / "data.jsonl", records)
    trained = CliRunner().invoke(train, ["--base", base_dir, "--data", data, "--out", d / "head", "--epochs", "30",
                                         "--target-risk", "0.25"], catch_exceptions=False)
    assert trained.exit_code == 0, trained.output
    strip_pictures(d / "head", d / "older")
    (d / "test_mini.py").write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    env["XDG_CACHE_HOME"] = str(d / "cache")  # the key below is this run's development key
    dev_key = d / "cache" / "laya-qual" / "dev-key"
    dev_key.parent.mkdir(parents=True)
    assert cli("keygen", dev_key).exit_code == 0
    out = {}
    for name, artifacts in (("heads", ["--laya-artifact", d / "head", "--laya-artifact", d / "older",
                                       "--laya-base", base_dir]), ("none", [])):
        bundle = d / f"{name}.intoto.jsonl"
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "-q", "test_mini.py",
                               "--laya-report", bundle, "--laya-signing-key", dev_key, *artifacts],
                              cwd=d, capture_output=True, text=True, env=env)
        assert proc.returncode == 1 and bundle.exists(), proc.stdout + proc.stderr
        out[name] = (bundle, f"{dev_key}.pub")
    out["release"] = (RELEASE, RELEASE.with_name("example-release.pub"))
    rendered = {}
    for name, (bundle, public) in out.items():
        page = d / f"{name}.html"
        result = cli("show", bundle, "--public-key", public, "--html", page)
        assert result.output == f"wrote {page}\n", result.output
        text = page.read_text(encoding="utf-8")
        rendered[name] = (bundle, text, Tree(text).root)
    return rendered


def near(pixel: str, expected: float) -> bool:
    return abs(float(pixel) - expected) <= 0.006  # pixels are written to two decimals


def frame_of(svg: Node):
    """The plot area's mapping from data to pixels, as the page records it."""
    g = svg.one("g", **{"class": "plot-area"})
    f = {k: float(g.attrs[f"data-{k}"]) for k in ("left", "top", "width", "height", "xmin", "xmax", "ymin", "ymax")}
    return (lambda x: f["left"] + (x - f["xmin"]) / (f["xmax"] - f["xmin"]) * f["width"],
            lambda y: f["top"] + (f["ymax"] - y) / (f["ymax"] - f["ymin"]) * f["height"])


@pytest.mark.slow
def test_verdict_signature_and_counts(pages):
    for name, (bundle, _, page) in pages.items():
        p = predicate(bundle)
        assert page.one("span", data_result=p["result"]).content() == p["result"]
        signature = page.one("p", id="signature")
        development = "false" if name == "release" else "true"
        assert (signature.attrs["data-verified"], signature.attrs["data-development-key"]) == ("true", development)
        assert ("DEVELOPMENT key" in page.content()) == (development == "true")
        for verdict, count in p["counts"].items():
            assert int(page.one("span", data_verdict_count=verdict).attrs["data-value"]) == count


@pytest.mark.slow
def test_unverified_signature_says_so(pages, tmp_path):
    bundle = pages["none"][0]
    assert cli("show", bundle, "--html", tmp_path / "p.html").exit_code == 0
    signature = Tree((tmp_path / "p.html").read_text()).root.one("p", id="signature")
    assert signature.attrs["data-verified"] == "false" and "NOT CHECKED" in signature.content()


@pytest.mark.slow
def test_claims_table_is_the_reports(pages):
    """Every claim once, with its verdict, area and statement as text (real statements hold
    '<' and '&', which must come back as text); the filters offer every area and verdict."""
    for bundle, _, page in pages.values():
        claims = {c["id"]: c for c in predicate(bundle)["claims"]}
        rows = [r for r in page.one("table", id="claims").all("tr") if "data-claim" in r.attrs]
        assert sorted(r.attrs["data-claim"] for r in rows) == sorted(claims)
        for row in rows:
            claim = claims[row.attrs["data-claim"]]
            cells = row.all("td")
            assert (row.attrs["data-verdict"], row.attrs["data-area"]) == (claim["verdict"], claim["area"])
            assert cells[1].attrs["data-verdict"] == cells[1].content() == claim["verdict"]
            # the statement is folded: its opening as the summary, the whole statement inside
            [fold] = cells[3].all("details")
            assert fold.one("p", **{"class": "statement"}).content() == claim["statement"]
            opening = fold.one("summary").content()
            assert claim["statement"].startswith(opening.removesuffix(" …")) and len(opening) <= 74
        options = [o.attrs["value"] for o in page.one("select", id="area-filter").all("option")]
        assert options == ["", *sorted({c["area"] for c in claims.values()})]
    assert any("<" in c["statement"] for c in predicate(pages["heads"][0])["claims"])


def tasks_of(bundle: Path) -> list[tuple[str, dict]]:
    return [(head["subject"], task) for head in predicate(bundle)["heads"] for task in head["tasks"]]


@pytest.mark.slow
def test_reliability_points_are_the_recorded_bins(pages):
    """Each plotted point is one non-empty bin of the report's head.json task, before and
    after, at the pixel its mean confidence and accuracy map to."""
    bundle, _, page = pages["heads"]
    drawn = 0
    for subject, task in tasks_of(bundle):
        calibration = task["calibration"]
        box = page.one("section", data_subject=subject).one("div", data_task=task["name"])
        if "reliability_before" not in calibration:
            continue
        svgs = box.all("svg", data_plot="reliability")
        assert len(svgs) == 2
        for when, svg in zip(("before", "after"), svgs):
            x, y = frame_of(svg)
            points = svg.all("circle")
            expected = [b for b in calibration[f"reliability_{when}"] if b["count"]]
            assert len(points) == len(expected)
            bars = svg.one("g", **{"class": "plot-area"}).all("rect")
            assert len(bars) == len(expected)
            for point, bar, b in zip(points, bars, expected):
                assert point.attrs["data-series"] == when
                assert bar.attrs.get("class") == point.attrs.get("class") == when  # coloured as its series
                assert {k: float(point.attrs[f"data-{k}"]) for k in b} == b
                assert near(point.attrs["cx"], x(b["confidence"])) and near(point.attrs["cy"], y(b["accuracy"]))
                # the bar spans the bin, from the axis up to the bin's accuracy
                left, top = float(bar.attrs["x"]), float(bar.attrs["y"])
                assert near(bar.attrs["x"], x(b["lower"])) and near(bar.attrs["width"], x(b["upper"]) - left)
                assert near(bar.attrs["y"], y(b["accuracy"])) and near(bar.attrs["height"], y(0) - top)
            assert_axis_labels_outside(svg, "mean top probability")
            drawn += 1
        # each diagram's figure says under it what its bars and its dashed line are
        legends = [[p.content() for p in figure.all("p")] for figure in box.all("div", **{"class": "figure"})
                   if figure.all("svg", data_plot="reliability")]
        assert legends == [["per bin: accuracy at its mean top probability; dashed: calibrated"]] * 2
    assert drawn == 4  # two tasks of the trained head, before and after


def frame_box(svg: Node) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of the plot area, in pixels."""
    g = svg.one("g", **{"class": "plot-area"})
    left, top, width, height = (float(g.attrs[f"data-{k}"]) for k in ("left", "top", "width", "height"))
    return left, top, left + width, top + height


def assert_axis_labels_outside(svg: Node, xlabel: str) -> None:
    """The x axis's label sits centred below its tick labels, which sit below the plot; the y
    axis's tick labels sit left of it."""
    left, _, right, bottom = frame_box(svg)
    texts = {t.content(): t.attrs for t in svg.all("text")}
    label = texts[xlabel]
    below = [float(a["y"]) for text, a in texts.items() if text != xlabel and float(a["y"]) > bottom]
    assert below and float(label["y"]) > max(below), (label, below)
    assert near(label["x"], (left + right) / 2)
    # the y axis's tick labels end just left of the plot, each at its height
    ticks = [t.attrs for t in svg.all("text") if t.attrs.get("text-anchor") == "end"]
    assert ticks and all(left - 10 < float(a.get("x", "nan")) < left for a in ticks), ticks


@pytest.mark.slow
def test_certification_path_points_are_the_recorded_path(pages):
    """Each tested threshold in order, at its (threshold, bound) pixel; the target risk line
    and the certified threshold's mark carry the task's values."""
    bundle, _, page = pages["heads"]
    drawn = 0
    for subject, task in tasks_of(bundle):
        certification = task["certification"]
        if "path" not in certification:
            continue
        svg = page.one("section", data_subject=subject).one("div", data_task=task["name"]).one(
            "svg", data_plot="certification-path")
        x, y = frame_of(svg)
        points = sorted(svg.all("circle"), key=lambda c: int(c.attrs["data-order"]))
        assert len(points) == len(certification["path"])
        for point, step in zip(points, certification["path"]):
            assert {k: float(point.attrs[f"data-{k.replace('_', '-')}"]) for k in step} == step
            assert near(point.attrs["cx"], x(step["threshold"]))
            assert near(point.attrs["cy"], y(step["risk_upper_bound"]))
        target = [n for n in svg.all("line") if "data-target-risk" in n.attrs]
        assert [float(n.attrs["data-target-risk"]) for n in target] == [certification["target_risk"]]
        left, top, right, bottom = frame_box(svg)
        for line in target:  # across the plot at the target's height
            assert [near(line.attrs[k], v) for k, v in (("x1", left), ("x2", right))] == [True, True]
            assert near(line.attrs["y1"], y(certification["target_risk"])) and line.attrs["y1"] == line.attrs["y2"]
        chosen = [n for n in svg.all("line") if "data-chosen-threshold" in n.attrs]
        assert [float(n.attrs["data-chosen-threshold"]) for n in chosen] == (
            [task["act_threshold"]] if certification["certified"] else [])
        for line in chosen:  # from the top of the plot to its bottom at the chosen threshold
            assert near(line.attrs["x1"], x(task["act_threshold"])) and line.attrs["x1"] == line.attrs["x2"]
            assert (near(line.attrs["y1"], top), near(line.attrs["y2"], bottom)) == (True, True)
        assert_axis_labels_outside(svg, "threshold (tested right to left)")
        drawn += 1
    assert drawn == 2


@pytest.mark.parametrize(("certified", "steps", "classes"), [
    # at a target of 1.0 every bound is within it: a step on which nothing acted still fails
    (False, [(0.9, 0, 0, 1.0)], ["fail"]),
    (True, [(0.9, 3, 3, 1.0), (0.0, 9, 9, 1.0)], ["pass", "pass"]),
])
def test_a_path_step_passes_only_when_something_acted_within_the_target(certified, steps, classes):
    """docs/artifact-v1.md: a step passes when `acted` >= 1 and its bound <= `target_risk`."""
    path = [dict(zip(("threshold", "acted", "errors", "risk_upper_bound"), step)) for step in steps]
    parent = ET.Element("div")
    path_svg(parent, {"path": path, "target_risk": 1.0, "certified": certified}, 0.0)
    points = sorted(Tree(ET.tostring(parent, encoding="unicode")).root.all("circle"),
                    key=lambda c: int(c.attrs["data-order"]))
    assert [p.attrs["class"] for p in points] == classes


@pytest.mark.slow
def test_older_heads_and_older_reports_say_not_recorded(pages):
    bundle, _, page = pages["heads"]
    older = [(s, t) for s, t in tasks_of(bundle) if s == "artifact/older"]
    assert len(older) == 2
    for subject, task in older:
        box = page.one("section", data_subject=subject).one("div", data_task=task["name"])
        assert not box.all("svg")
        assert {p.attrs["data-picture"]: p.content() for p in box.all("p") if "data-picture" in p.attrs} == {
            "reliability": f"reliability diagram: {NOT_RECORDED}", "path": f"certification path: {NOT_RECORDED}"}
    assert "heads" not in predicate(RELEASE)
    assert pages["release"][2].one("p", data_heads="absent").content() == NO_HEAD_DETAILS
    assert predicate(pages["none"][0])["heads"] == [] and pages["none"][2].all("p", data_heads="none")


@pytest.mark.slow
@pytest.mark.parametrize("kept", ["reliability_before", "reliability_after"])
def test_a_task_with_one_reliability_diagram_recorded_says_not_recorded(pages, kept):
    """Both diagrams are drawn from the pair; a head.json task carrying only one of them (a
    hand-edited or truncated head) is told not recorded, not half drawn."""
    from laya_qual.report.html import _task

    bundle, _, _ = pages["heads"]
    subject, task = next((s, t) for s, t in tasks_of(bundle) if "reliability_before" in t["calibration"])
    task = json.loads(json.dumps(task))
    del task["calibration"][({"reliability_before", "reliability_after"} - {kept}).pop()]
    section = ET.Element("section")
    _task(section, task)
    box = Tree(ET.tostring(section, encoding="unicode", method="html")).root.one("div", data_task=task["name"])
    assert box.one("p", data_picture="reliability").content() == f"reliability diagram: {NOT_RECORDED}"


@pytest.mark.slow
def test_benchmark_bars_are_the_reports_arms(pages):
    """Every bar's value is its extraInfo figure (nested objects per arm), on one scale per
    chart; the mini suite's arms are all drawn, and the release report's side-by-side pairs."""
    for name, (bundle, _, page) in pages.items():
        benchmarks = predicate(bundle)["benchmarks"]
        assert benchmarks
        for b in benchmarks:
            section = page.one("section", data_test=b["test"])
            medians = [float(n.attrs["data-median"]) for n in section.all("p") if "data-median" in n.attrs]
            assert medians == [b["median"]]
            keys = set()
            for svg in section.all("svg", data_plot="benchmark"):
                x, y = frame_of(svg)
                bars = svg.all("rect")
                for row, bar in enumerate(bars):
                    key = bar.attrs["data-key"]
                    value = b["extraInfo"]
                    for part in key.split("."):
                        value = value[part]
                    assert float(bar.attrs["data-value"]) == value, (b["test"], key)
                    assert near(bar.attrs["width"], x(value) - x(0)), (key, bar.attrs["width"])
                    top, height = float(bar.attrs["y"]), float(bar.attrs["height"])  # within its own row's band
                    assert y(len(bars) - row) <= top and top + height <= y(len(bars) - row - 1), (key, top)
                    keys.add(key)
            if name != "release":
                assert keys == ARM_KEYS
            elif "cache_hit" in b["test"]:
                assert keys == {"median_hit_s", "median_miss_s"}
            elif "learner" in b["test"]:
                assert {"learner_update_seconds_median", "kernel_update_seconds_median"} <= keys


def test_a_benchmark_s_figures_are_grouped_by_arm_and_the_rest_left_over():
    """A nested object of numbers is one group of its own, a key of an arm family joins its
    measure's group; each grouped key is drawn once, in bars, and only the others are left over."""
    groups, left = benchmark_arms({"peak_rss_bytes": {"owner0": 5, "learner": 7, "note": "x"}, "median_one_s": 0.5,
                                   "median_batched_s": 0.25, "requests": 256, "batched_over_one_by_one": 2.0})
    assert groups == [("peak_rss_bytes", [("owner0", "peak_rss_bytes.owner0", 5),
                                          ("learner", "peak_rss_bytes.learner", 7)]),
                      ("median seconds", [("one", "median_one_s", 0.5), ("batched", "median_batched_s", 0.25)])]
    assert left == ["requests", "batched_over_one_by_one"]


def test_bars_of_arms_that_all_measured_zero_are_drawn_empty():
    """All arms at 0 (nothing measured yet, or a count of nothing): a scale from 0 to 1 and bars of no width."""
    page = ET.Element("body")
    bars_svg(page, "weight bytes", [("float32", "float32_weight_bytes", 0), ("int8", "int8_weight_bytes", 0)])
    assert [bar.get("width") for bar in page.iter("rect") if bar.get("data-arm")] == ["0.0", "0.0"]


@pytest.mark.slow
def test_the_page_links_to_each_of_its_sections(pages):
    for name, (_, _, page) in pages.items():
        links = [a for a in page.all("a") if a.attrs.get("href", "").startswith("#")]
        assert [(a.content(), a.attrs["href"]) for a in links[:3]] == [
            ("claims", "#claims-section"), ("heads", "#heads"), ("benchmarks", "#benchmarks")], name
        for a in links:
            assert page.all(id=a.attrs["href"][1:]), (name, a.attrs["href"])  # a link to a place that exists


@pytest.mark.slow
def test_every_plot_shows_its_title(pages):
    """A plot's title is visible text at its top, not only the <title> a pointer reveals."""
    plots = 0
    for name, (_, _, page) in pages.items():
        for svg in page.all("svg"):
            [title] = [child.content() for child in svg.children if child.tag == "title"]
            assert title and svg.all("text")[0].content() == title, (name, svg.attrs.get("data-plot"))
            plots += 1
    assert plots


@pytest.mark.slow
def test_every_mark_lies_inside_its_picture(pages):
    """No line, bar or label of a plot is drawn past its <svg>'s width or height (which would
    clip an axis label off the page); a label's width is taken at a conservative 5 px a character."""
    for name, (_, _, page) in pages.items():
        for svg in page.all("svg"):
            width, height = float(svg.attrs["width"]), float(svg.attrs["height"])
            for mark in svg.all():
                a = mark.attrs
                xs = [float(a[k]) for k in ("x", "x1", "x2", "cx") if k in a]
                ys = [float(a[k]) for k in ("y", "y1", "y2", "cy") if k in a]
                if mark.tag == "rect":
                    xs.append(float(a["x"]) + float(a["width"]))
                    ys.append(float(a["y"]) + float(a["height"]))
                if mark.tag == "text" and "transform" not in a:  # its extent, at 5 px a character of 11 px type
                    extent = 5 * len(mark.content())
                    start = float(a["x"]) - {"middle": extent / 2, "end": extent}.get(a.get("text-anchor"), 0)
                    xs += [start, start + extent]
                assert all(0 <= x <= width for x in xs) and all(0 <= y <= height for y in ys), \
                    (name, svg.attrs.get("data-plot"), mark.tag, a, width, height)


@pytest.mark.slow
def test_task_names_and_statements_are_text_not_markup(pages):
    """The markup-named task appears as text and as an attribute value; the page holds one
    script, the filter, which the Content-Security-Policy pins by hash."""
    _, text, page = pages["heads"]
    assert page.all("div", data_task=MARKUP_TASK)
    assert any(h.content() == f"task {MARKUP_TASK}" for h in page.all("h4"))
    [script] = page.all("script")
    assert script.content() == FILTER_SCRIPT
    digest = base64.b64encode(hashlib.sha256(FILTER_SCRIPT.encode()).digest()).decode()
    [csp] = [m.attrs["content"] for m in page.all("meta") if m.attrs.get("http-equiv") == "Content-Security-Policy"]
    assert csp == f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'"
    assert "<script>alert" not in text


@pytest.mark.slow
def test_page_loads_nothing(pages):
    for _, text, page in pages.values():
        assert "http:" not in text and "https:" not in text and "url(" not in text
        for node in page.all():
            assert "src" not in node.attrs, node
            assert node.attrs.get("href", "#").startswith("#"), node
            assert node.tag not in ("link", "img", "iframe", "object", "embed", "image", "use"), node


@pytest.mark.slow
def test_bad_html_options_are_one_line_errors(pages, tmp_path):
    bundle = pages["none"][0]
    both = CliRunner().invoke(main, ["show", str(bundle), "--html", str(tmp_path / "a.html"), "--markdown"])
    assert both.exit_code == 2 and "--html writes its own file" in both.output
    (tmp_path / "a-file").write_text("not a directory")
    blocked = cli("show", bundle, "--html", tmp_path / "a-file" / "page.html")
    lines = blocked.output.strip().splitlines()
    assert blocked.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: cannot write"), blocked.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # and no temporary left beside it


# --- the approved pages ------------------------------------------------------------------

APPROVED = ROOT / "tests" / "data" / "show-html"
# page: (bundle, public key or None: not checked); heads.intoto.jsonl is the "heads" bundle above,
# written once and kept
FIXED_BUNDLES = {"heads.html": (APPROVED / "heads.intoto.jsonl", APPROVED / "heads.pub"),
                 "heads-not-checked.html": (APPROVED / "heads.intoto.jsonl", None),
                 "release.html": (RELEASE, RELEASE.with_name("example-release.pub"))}


def render_fixed(name: str, out: Path) -> str:
    bundle, public = FIXED_BUNDLES[name]
    verify = [] if public is None else ["--public-key", public]
    assert cli("show", bundle, *verify, "--html", out).output == f"wrote {out}\n"
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(FIXED_BUNDLES))
def test_the_page_of_a_fixed_bundle_is_the_approved_one(tmp_path, name):
    """A picture's geometry, colours and legend have no spec but the page someone looked at:
    two fixed bundles (two heads' pictures, verified and not; the release report's benchmark
    charts) render byte for byte to the approved copies. After an intended change, rewrite them with
    `python tests/test_show_html.py --write` and review the difference."""
    page, approved = render_fixed(name, tmp_path / name), (APPROVED / name).read_text(encoding="utf-8")
    if page != approved:
        at = next((i for i, (a, b) in enumerate(zip(page, approved)) if a != b), min(len(page), len(approved)))
        raise AssertionError(f"{name} is not the approved page from character {at}:\n"
                             f"  rendered: ...{page[max(0, at - 120):at + 120]!r}\n"
                             f"  approved: ...{approved[max(0, at - 120):at + 120]!r}\n"
                             f"if intended: python tests/test_show_html.py --write, then review the diff")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_show_html.py --write  (rewrites the approved pages)")
    for name in FIXED_BUNDLES:
        render_fixed(name, APPROVED / name)
        print(f"wrote {APPROVED / name}")
