"""A mistake in what a qualification run is pointed at is refused before the first test
(claim report.harness.preflight; docs/report-format.md, "Checks before the first test").

Each expected line is written here from that table and its order of checks, never read
from laya_qual.plugin.preflight. pytest runs in this process through its own entry
point (`pytest.main`, the plugin loaded with `-p laya_qual`, as a user's command line
loads it): a refusal is a usage error raised while pytest configures, so nothing is
collected; what the checks accept configures and then stops at `--help`, which configures
every plugin and collects nothing. `laya-qual run` is its click command in this process:
a refusal is its exit 2 before pytest starts; what it accepts reaches the next check of
its command line, `--shard` without `--hypothesis-seed`, so no suite ever starts here.
Hypothesis' pytest plugin is kept out of the inner runs (a seed it read from them would
force this process's own tests), as are pytest's cache and pytest-benchmark's storage
(each makes its folder when pytest configures, whatever laya_qual does), and the torch
thread count a qualifying run sets is put back after each."""

from __future__ import annotations

import contextlib
import io
import os
import re
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from laya_qual.claims import CLAIMS
from laya_qual.cli import main as laya_qual
from laya_qual.report.signing import keygen
from laya_qual.synth import write_artifact
from laya_qual.synth.mistakes import (ROLES, ArtifactLayout, ReportLayout, artifact_layouts, claim_patterns,
                                      complete_layout, report_layouts)

CLAIM = pytest.mark.laya_claim("report.harness.preflight")
BASE_ROLES, HEAD_ROLES = ROLES[:5], ROLES[5:]
USAGE_ERROR = 4  # pytest's ExitCode.USAGE_ERROR
BAD_COMMAND_LINE = 2  # laya-qual's (and click's)
NEXT_CHECK = "Error: --shard needs --hypothesis-seed after `--`: every shard of a run uses the same seed"
# The spellings of each front end: (head option, base option, report option).
# What the user's own pytest command line may carry in its environment: not the inner runs'.
OUTER_ENVIRONMENT = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")
SPELLINGS = {"pytest": ("--laya-artifact", "--laya-base", "--laya-report"), "run": ("--artifact", "--base", "--out")}


def reference_artifact_refusal(layout: ArtifactLayout, option: str, given: str, *, head: bool,
                               base_option: str) -> str | None:
    """The documented line for a head (``head``) or base directory, or None where it may be tried."""
    what = "a head artifact directory" if head else "the base artifact directory"
    if layout.form == "missing":
        return f"{option} {given}: no such directory; give {what} (one laya wrote, with manifest.json)"
    if layout.form == "file":
        return f"{option} {given}: a file, not a directory; give {what}, not a file in it"
    if layout.form == "no-manifest":
        return f"{option} {given}: no manifest.json in it, so not a laya artifact; give {what} laya wrote"
    if layout.form == "unreadable":
        return None  # the suite's to judge
    listed = dict(layout.listed)
    if head and not all(role in listed for role in HEAD_ROLES):
        return (f"{option} {given}: manifest.json lists no head (head_config, head_weights): a base-only "
                f"artifact; give it as {base_option}, and a head built on it as {option}")
    checked = ROLES if head else BASE_ROLES
    missing = [f"{listed[r]} (role {r})" for r in checked if r in listed and listed[r] not in layout.present]
    if missing:
        return f"{option} {given}: {', '.join(missing)} missing, though manifest.json lists it; restore the artifact"
    unlisted = [r for r in BASE_ROLES if r not in listed]
    if unlisted:
        return f"{option} {given}: manifest.json lists no {', '.join(unlisted)}; give an artifact laya wrote"
    return None


def reference_report_refusal(layout: ReportLayout, option: str, given: str, root: str) -> str | None:
    """The documented line for a report path given as ``given`` (``root``: how the root is spelled in it)."""
    if layout.form == "directory":
        return f"{option} {given}: a directory; give the bundle's file name (e.g. {given}/report.intoto.jsonl)"
    if layout.form == "under-file":
        return f"{option} {given}: {root}taken is a file, so no folder can be made there; choose another path"
    return None


def selects(claim: str, pattern: str) -> bool:
    """The --laya-claims rule (docs/pytest-options.md): equal, under it, or a glob."""
    return claim == pattern or claim.startswith(pattern + ".") or fnmatchcase(claim, pattern)


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under root but the ini file the inner run is given, with a file's bytes:
    nothing may be made or changed before the first test."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))
            if p != root / "pytest.ini"}


def configured(root: Path, *args, ini: str = "") -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `pytest -p laya_qual ARGS --help` in this process,
    with root's own ini file (``ini``: its lines below [pytest]) and root as cwd."""
    (root / "pytest.ini").write_text(f"[pytest]\n{ini}")
    threads = torch.get_num_threads()
    out, err = io.StringIO(), io.StringIO()
    outer = {name: os.environ.pop(name) for name in OUTER_ENVIRONMENT if name in os.environ}
    try:
        with contextlib.chdir(root), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = pytest.main(["-p", "laya_qual", "-p", "no:hypothesispytest", "-p", "no:cacheprovider",
                                  "-p", "no:benchmark", "-p", "no:randomly", "-c", str(root / "pytest.ini"), "--rootdir", str(root),
                                  *map(str, args), "--help"])
    finally:
        os.environ.update(outer)
        torch.set_num_threads(threads)
    return int(status), out.getvalue(), err.getvalue()


def assert_pytest(result: tuple[int, str, str], expected: str | None) -> None:
    status, out, err = result
    if expected is None:
        assert (status, err) == (0, ""), err
        assert out.startswith("usage:"), out[:500]
    else:
        assert status == USAGE_ERROR, (status, out, err)
        assert out == "", out  # not a line of a session: nothing was collected or run
        assert [line for line in err.splitlines() if line] == [f"ERROR: {expected}"], err


def run_command(root: Path, *args, then: tuple[str, ...] = ("--shard", "1/2")) -> tuple[int, str]:
    """`laya-qual run ARGS THEN` in this process, root as cwd: (exit status, last line)."""
    with contextlib.chdir(root):
        result = CliRunner().invoke(laya_qual, ["run", *map(str, args), *then])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output.strip().splitlines()[-1]


def assert_run(result: tuple[int, str], expected: str | None) -> None:
    assert result == (BAD_COMMAND_LINE, NEXT_CHECK if expected is None else f"Error: {expected}"), result


@CLAIM
@given(layout=artifact_layouts(), slot=st.sampled_from(("head", "base")), front=st.sampled_from(("option", "ini", "run")))
@example(layout=complete_layout(), slot="head", front="option")
@example(layout=complete_layout(BASE_ROLES), slot="head", front="run")  # a base-only artifact given as a head
@example(layout=complete_layout(BASE_ROLES), slot="base", front="ini")
@example(layout=complete_layout(ROLES[:4] + HEAD_ROLES), slot="head", front="option")  # no sequence_format
@example(layout=ArtifactLayout("listed", (("tokenizer", "t.json"), ("head_weights", "w"), ("head_config", "h")),
                               frozenset({"h"})), slot="head", front="option")
@example(layout=complete_layout(BASE_ROLES + HEAD_ROLES[:1]), slot="head", front="option")  # one head role
@example(layout=ArtifactLayout("listed", complete_layout().listed, complete_layout(BASE_ROLES).present),
         slot="base", front="option")  # a base's head files are not checked
@example(layout=ArtifactLayout("listed", complete_layout().listed,
                               complete_layout().present - {"tokenizer.bin"}, frozenset({"tokenizer.bin"})),
         slot="head", front="run")  # a folder where a listed file should be
@example(layout=ArtifactLayout("missing"), slot="head", front="option")
@example(layout=ArtifactLayout("file"), slot="base", front="run")
@example(layout=ArtifactLayout("no-manifest"), slot="head", front="ini")
@example(layout=ArtifactLayout("unreadable", text="{not json"), slot="head", front="option")
@example(layout=ArtifactLayout("unreadable", text='{"files": [7]}'), slot="base", front="option")
def test_an_artifact_directory_is_refused_before_collection_or_configures(tmp_path_factory, layout, slot, front):
    root = tmp_path_factory.mktemp("preflight")
    head_option, base_option, _ = SPELLINGS["run" if front == "run" else "pytest"]
    if slot == "base":
        complete_layout().make(root / "head")
    layout.make(root / "art")
    given_path = str(root / "art") if front == "ini" else "art"  # an ini file's paths are its folder's
    expected = reference_artifact_refusal(layout, head_option if slot == "head" else base_option, given_path,
                                          head=slot == "head", base_option=base_option)
    before = tree(root)
    if front == "run":
        args = ["--artifact", "art"] if slot == "head" else ["--artifact", "head", "--base", "art"]
        assert_run(run_command(root, *args), expected)
    elif front == "option":
        args = ["--laya-artifact", "art"] if slot == "head" else ["--laya-artifact", "head", "--laya-base", "art"]
        assert_pytest(configured(root, "--laya-qualify", *args), expected)
    else:
        ini = "laya_artifacts = art\n" if slot == "head" else "laya_artifacts = head\nlaya_base = art\n"
        assert_pytest(configured(root, "--laya-qualify", ini=ini), expected)
    assert tree(root) == before


@CLAIM
@given(layout=report_layouts(), front=st.sampled_from(("option", "ini", "run")))
@example(layout=ReportLayout("directory"), front="option")
@example(layout=ReportLayout("directory"), front="run")
@example(layout=ReportLayout("under-file", 0), front="ini")
@example(layout=ReportLayout("new-folders", 3), front="run")
def test_a_report_path_is_refused_before_collection_or_configures(tmp_path_factory, layout, front):
    root = tmp_path_factory.mktemp("preflight")
    given_path = layout.make(root)
    complete_layout().make(root / "head")
    before = tree(root)
    if front == "run":
        result = run_command(root, "--artifact", "head", "--out", given_path)
        if layout.form == "directory":  # click's own check of a dir_okay=False path comes first
            assert result == (BAD_COMMAND_LINE, f"Error: Invalid value for '--out': File '{given_path}' is a directory.")
        else:
            assert_run(result, reference_report_refusal(layout, "--out", given_path, ""))
    elif front == "option":
        assert_pytest(configured(root, "--laya-report", given_path),
                      reference_report_refusal(layout, "--laya-report", given_path, ""))
    else:
        spelled = f"{root}/{given_path}"
        assert_pytest(configured(root, ini=f"laya_report = {given_path}\n"),
                      reference_report_refusal(layout, "--laya-report", spelled, f"{root}/"))
    assert tree(root) == before  # no folder made yet


@CLAIM
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in any folder: no folder here refuses its writes")
def test_a_report_path_in_a_folder_this_user_cannot_write_is_refused(tmp_path_factory):
    root = tmp_path_factory.mktemp("preflight")
    (root / "locked").mkdir()
    (root / "locked").chmod(0o555)
    try:
        assert_pytest(configured(root, "--laya-report", "locked/new/r.intoto.jsonl"),
                      "--laya-report locked/new/r.intoto.jsonl: cannot write in locked (Permission denied); "
                      "choose a writable path")
    finally:
        (root / "locked").chmod(0o755)


@CLAIM
@given(value=claim_patterns(CLAIMS))
@example(value="cahce")
@example(value="cache, report.nosuch")
@example(value="report.harness.*,learner")
def test_a_claims_pattern_that_selects_no_claim_is_refused_before_collection(tmp_path_factory, value):
    root = tmp_path_factory.mktemp("preflight")
    status, out, err = configured(root, "--laya-claims", value)
    patterns = [p.strip() for p in value.split(",") if p.strip()]
    unmatched = [p for p in patterns if not any(selects(c, p) for c in CLAIMS)]
    if not unmatched:
        assert_pytest((status, out, err), None)
        return
    assert (status, out) == (USAGE_ERROR, ""), (status, out, err)
    [line] = [line for line in err.splitlines() if line]
    found = re.fullmatch(rf"ERROR: --laya-claims {re.escape(unmatched[0])}: matches no claim"
                         r"(?: \(did you mean (?P<hint>[^ ?]+)\?\))?; see `laya-qual claims`", line)
    assert found, line
    areas = {c.split(".")[0] for c in CLAIMS}
    assert found["hint"] is None or found["hint"] in set(CLAIMS) | areas, line


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("preflight-keys")
    keygen(d / "key")
    keygen(d / "other")
    (d / "unpaired").write_bytes((d / "key").read_bytes())  # a private key without its KEY.pub
    (d / "mismatched").write_bytes((d / "key").read_bytes())
    (d / "mismatched.pub").write_bytes((d / "other.pub").read_bytes())
    return d


@CLAIM
def test_keys_figures_and_options_that_need_a_report_are_refused_before_collection(tmp_path_factory, keys):
    root = tmp_path_factory.mktemp("preflight")
    head = write_artifact(root / "head", seed=3, head_kind="float32")
    assert_pytest(configured(root, "--laya-qualify", "--laya-artifact", head, "--laya-base", head), None)
    assert_pytest(configured(root, "--laya-report", "r.intoto.jsonl", "--laya-signing-key", keys / "gone"),
                  f"--laya-signing-key {keys / 'gone'}: cannot read private key (No such file or directory); "
                  "give a PEM private key file or a signer URI")
    assert_pytest(configured(root, "--laya-signing-key", keys / "key"),
                  f"--laya-signing-key {keys / 'key'} signs the --laya-report bundle, and there is none: "
                  "add --laya-report PATH (or drop the key)")
    for option in ("--laya-kill-rate", "--laya-coverage"):
        assert_pytest(configured(root, option, "figures.json"),
                      f"{option} goes into a signed report: it needs --laya-report")
    assert_pytest(configured(root, "--laya-evidence-in", "shard.json"),
                  "--laya-evidence-in merges into --laya-report or --laya-evidence-out: give one")
    assert_pytest(configured(root, "--laya-qualify", ini=f"laya_artifacts = {head}\nlaya_base = {head}\n  {head}\n"),
                  "ini key laya_base takes one path, got 2")
    for option, writer in (("--kill-rate", "mutate"), ("--coverage", "coverage")):
        assert_run(run_command(root, option, "gone.json"),
                   f"{option} gone.json: no such file; give a results file `laya-qual {writer}` wrote")
    # The key is checked last, and only for a whole run: were it accepted, the suite pass would
    # start and refuse this claims pattern at once (exit 4), so no suite runs here either way.
    unstarted = ("--", "--hypothesis-seed=1", "--laya-claims", "nosuch.claim")
    code, line = run_command(root, "--key", keys / "unpaired", then=unstarted)
    assert (code, line.split(": ")[:3]) == (BAD_COMMAND_LINE, ["Error", f"--key {keys / 'unpaired'}",
                                                             f"{keys / 'unpaired'}.pub"]), line
    assert "cannot read public key" in line and line.endswith("keep its public key KEY.pub beside KEY "
                                                              "(laya-qual keygen writes both)"), line
    code, line = run_command(root, "--key", keys / "mismatched", then=unstarted)
    assert code == BAD_COMMAND_LINE and line.startswith(
        f"Error: --key {keys / 'mismatched'}: {keys / 'mismatched'}.pub is not its public key (keyid "), line
    assert line.endswith("); put the matching KEY.pub beside it"), line
    code, line = run_command(root, "--key", keys / "gone", then=unstarted)
    assert (code, line) == (BAD_COMMAND_LINE, f"Error: --key {keys / 'gone'}: no such file; give a PEM private key "
                                              "file (`laya-qual keygen KEY` writes KEY and KEY.pub) or a signer URI")
