"""Report assembly on the controller: the report options, and the ``Assembler`` that
turns the test reports it receives (their evidence, see ``evidence``) into per-test
records, then into the signed bundle (the report model is ``report``).

A report can be assembled from two passes: benchmarks cannot be measured under xdist,
so ``laya-qual run`` runs the suite on workers with ``--laya-benchmarks exclude
--laya-evidence-out FILE`` (plain records, nothing signed), then the benchmarks
in-process with ``--laya-benchmarks only --laya-evidence-in FILE --laya-report PATH``,
whose controller merges both passes' records and signs one bundle.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from laya_qual.plugin.evidence import Evidence, collects_evidence
from laya_qual.plugin.progress import Progress
from laya_qual.report.model import VERDICTS
from laya_qual.report.signing import KEY_ENV, SigningError, load_signer

EVIDENCE_FORMAT = "laya-qual-evidence/v2"
# Later in this list wins when a test's phases disagree (setup skipped, teardown error, ...).
_PRECEDENCE = (None, "passed", "skipped", "xfailed", "error", "failed")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("laya_qual").addoption(
        "--laya-signing-key", default=os.environ.get(KEY_ENV), metavar="PATH",
        help=f"PEM private key file or securesystemslib signer URI that signs the --laya-report bundle "
             f"(default: ${KEY_ENV})")
    group = parser.getgroup("laya_qual")
    group.addoption(
        "--laya-kill-rate", action="append", default=[], metavar="FILE",
        help="fold this `laya-qual mutate` results file into the report: suite.killRate (catalogue) or "
             "suite.mutantSample (--sample); once per kind")
    group.addoption(
        "--laya-coverage", default=None, metavar="FILE",
        help="fold this `laya-qual coverage` results file (measured on this code) into the report: suite.coverage")
    group.addoption("--laya-evidence-out", default=None, metavar="PATH",
                    help="write this pass's plain evidence (JSON, unsigned) for a later --laya-evidence-in")
    group.addoption("--laya-evidence-in", default=None, metavar="PATH",
                    help="merge an earlier pass's evidence into this run's --laya-report")


def pytest_configure(config: pytest.Config) -> None:
    """The controller alone (never an xdist worker) assembles."""
    for option, flag in (("laya_kill_rate", "--laya-kill-rate"), ("laya_coverage", "--laya-coverage")):
        if config.getoption(option, None) and not config.getoption("laya_report", None):
            raise pytest.UsageError(f"{flag} goes into a signed report: it needs --laya-report")
    if config.getoption("laya_evidence_in", None) and not (
            config.getoption("laya_report", None) or config.getoption("laya_evidence_out", None)):
        raise pytest.UsageError("--laya-evidence-in merges into --laya-report or --laya-evidence-out: give one")
    if collects_evidence(config) and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Assembler(config), "laya_qual_assembler")


def _worse(a: str | None, b: str | None) -> str | None:
    return a if _PRECEDENCE.index(a) >= _PRECEDENCE.index(b) else b


def _phase_outcome(report: pytest.TestReport) -> str | None:
    if report.failed:
        return "failed" if report.when == "call" else "error"
    if report.skipped:
        return "xfailed" if hasattr(report, "wasxfail") else "skipped"
    return "passed" if report.when == "call" else None


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def runner(environment: dict) -> dict:
    """The machine a shard ran on, as a signed report may name it: the CI runner's name
    (never a local host name) and its CPU."""
    name = os.environ.get("RUNNER_NAME") or os.environ.get("CI_RUNNER_DESCRIPTION") or "local"
    cpu = environment.get("cpu", {})
    return {"name": name, "cpu": cpu.get("model"), "cores": cpu.get("logical_cores")}


def signing_facts(key) -> dict:
    """Which key signs; a development-key report says so in its signed predicate."""
    from laya_qual.report.signing import is_dev_key

    if key is None:
        return {"keyid": None, "developmentKey": False}
    public = key.public_key
    return {"keyid": public.keyid, "keytype": public.keytype, "scheme": public.scheme,
            "developmentKey": is_dev_key(public)}


def _written(session: pytest.Session, option: str, write):
    """What ``write()`` returns; an OS error (a full disk, a folder made unwritable since the
    checks before the first test) is one pytest ``ERROR:`` line instead of a traceback, and
    exit status 3; the atomic writer has left what was at the path before untouched."""
    try:
        return write()
    except OSError as e:
        sys.stderr.write(f"ERROR: {option} {e}; what was there before is kept\n")
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        return None


def write_report(path: Path, key, records: list[dict], context: dict, passes: list[dict]) -> dict:
    """Build, sign and write the bundle from plain records and a run's facts (one run, or
    the merged shards of one); returns the verdict summary."""
    from laya_qual.claims import CLAIMS
    from laya_qual.report.model import build_claims, build_details, build_statements, report_records, verdict_summary
    from laya_qual.report.signing import write_bundle

    records = report_records(records)
    claims = build_claims(CLAIMS, records)
    details, configuration = build_details(
        records, hypothesis=context["hypothesis"], environment=context["environment"],
        invocation=context["invocation"], signing=signing_facts(key), harness=context["harness"],
        subjects=context["subjects"], heads=context["heads"], suite=context["suite"], passes=passes)
    write_bundle(path, build_statements(context["subjects"], claims, details, configuration), key)
    collection_errors = context["invocation"]["collectionErrors"]
    return {**verdict_summary(claims, collection_errors), "collectionErrors": collection_errors,
            "failed": [c["id"] for c in claims if c["verdict"] == "failed"]}


class Assembler:
    """Collects plain per-test records on the controller and writes the bundle."""

    def __init__(self, config: pytest.Config) -> None:
        from laya_qual.subjects import (DIR_HASH, HARNESS_PACKAGES, SubjectError, harness_digests, heads,
                                        package_dir, subjects)

        self.config = config
        self.synthetic_root: Path | None = None
        self.records: dict[str, dict] = {}
        self.collection_errors: list[str] = []
        self.started = _now()
        report = config.getoption("laya_report")
        self.path = Path(report) if report else None
        self.evidence_out = config.getoption("laya_evidence_out")
        self.earlier = self._read_evidence(config.getoption("laya_evidence_in"))
        self.key = None
        key_path = config.getoption("laya_signing_key") if self.path else None
        try:
            self.key = load_signer(key_path) if key_path else None
        except SigningError as e:
            given = "--laya-signing-key" if key_path != os.environ.get(KEY_ENV) else f"${KEY_ENV}"
            raise pytest.UsageError(f"{given} {e}; give a PEM private key file or a signer URI") from None
        synthetic = self._write_synthetic_default()
        try:
            self.subjects = subjects(config.getoption("laya_artifact"), config.getoption("laya_base"), synthetic)
            self.heads = heads(config.getoption("laya_artifact"), config.getoption("laya_base"), self.subjects,
                               synthetic)
        except SubjectError as e:
            raise pytest.UsageError(f"laya_qual report: {e}") from None
        if self.earlier and self.earlier.get("context", {}).get("subjects") != self.subjects:
            raise pytest.UsageError(f"--laya-evidence-in {config.getoption('laya_evidence_in')}: the earlier pass "
                                    "qualified other subjects (artifact bytes or runtime differ); both passes need "
                                    "the same")
        # The harness as it was when the run started, not as it is when it ends.
        self.harness = harness_digests({name: package_dir(name) for name in HARNESS_PACKAGES if package_dir(name)})
        from laya_qual.measure.suite_figures import kill_rate

        runtime = next(s for s in self.subjects if s["annotations"]["kind"] == "runtime")
        self.suite_figures: dict[str, dict] = {}
        for path in config.getoption("laya_kill_rate", None) or []:
            kind, figure = kill_rate(path, runtime=runtime["digest"][DIR_HASH], harness=self.harness)
            if kind in self.suite_figures:
                raise pytest.UsageError(f"--laya-kill-rate {path}: a second suite.{kind} file; give one per kind")
            self.suite_figures[kind] = figure
        if config.getoption("laya_coverage", None):
            from laya_qual.measure.suite_figures import coverage

            self.suite_figures["coverage"] = coverage(config.getoption("laya_coverage"),
                                                      runtime=runtime["digest"][DIR_HASH], harness=self.harness)
        from laya_qual.measure import traceability

        self.suite_figures["traceability"] = traceability.figure()  # docs/report-format.md, suite.traceability
        self.environment: dict = {}
        self.summary: dict | None = None
        self.selection: dict | None = None
        self.progress = Progress(config)

    def _write_synthetic_default(self) -> list[Path]:
        """A qualification run given no --laya-artifact qualifies the synthetic default:
        written once here, handed to every worker, digested as the report's subjects, and
        removed when the run ends."""
        from laya_qual.plugin.fixtures import DEFAULT_KEY, write_synthetic_default

        if not self.config.getoption("laya_qualify") or self.config.getoption("laya_artifact"):
            return []
        self.synthetic_root = Path(tempfile.mkdtemp(prefix="laya-qual-synthetic-"))
        written = write_synthetic_default(self.synthetic_root)
        self.config.stash[DEFAULT_KEY] = {name: str(directory) for name, directory in written.items()}
        return list(written.values())

    def pytest_unconfigure(self) -> None:
        if self.synthetic_root:
            shutil.rmtree(self.synthetic_root, ignore_errors=True)

    def _run_facts(self) -> dict:
        """What two passes must agree on to make one report."""
        from laya_qual.plugin.hooks import suite_profile

        c = self.config
        return {"seed": c.getoption("hypothesis_seed", None), "profile": suite_profile(c),
                "artifacts": [str(a) for a in c.getoption("laya_artifact")], "base": c.getoption("laya_base"),
                "device": c.getoption("laya_device"), "shard": c.getoption("laya_shard", None)}

    def _read_evidence(self, path: str | None) -> dict | None:
        if not path:
            return None
        try:
            earlier = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise pytest.UsageError(f"--laya-evidence-in {path}: cannot read it ({e})") from None
        if not isinstance(earlier, dict) or earlier.get("format") != EVIDENCE_FORMAT:
            raise pytest.UsageError(f"--laya-evidence-in {path}: not a {EVIDENCE_FORMAT} file")
        mine = self._run_facts()
        differ = [k for k in mine if earlier.get("run", {}).get(k) != mine[k]]
        if differ:
            raise pytest.UsageError(f"--laya-evidence-in {path}: the earlier pass ran with different "
                                    f"{', '.join(differ)}; both passes need the same options")
        return earlier

    def pytest_sessionstart(self) -> None:
        """After every plugin's configure (thread settings included), before any test."""
        from laya_qual.report import environment
        from laya_qual.subjects import package_dir

        self.environment = environment.collect(self.config.getoption("laya_device"), package_dir("laya"))

    def pytest_report_header(self) -> str:
        if self.path is None:
            return f"laya_qual evidence: {self.evidence_out} (unsigned partial, for --laya-evidence-in)"
        if self.key is None:
            return (f"laya_qual report: {self.path} -- UNSIGNED (no --laya-signing-key or ${KEY_ENV}); "
                    "it will not verify")
        return f"laya_qual report: {self.path}, signed by keyid {self.key.public_key.keyid[:16]}"

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors.append(report.nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        evidence = Evidence.of(report)
        if evidence is None:
            return
        record = self.records.setdefault(
            report.nodeid, {"test": evidence.test,
                            "claims": evidence.claims, "outcome": None, "duration": 0.0})
        record["outcome"] = _worse(_phase_outcome(report), record["outcome"])
        record["duration"] += report.duration
        self.progress.advance(record["test"], report)
        if evidence.hypothesis is not None:
            record["hypothesis"] = evidence.hypothesis
        if evidence.benchmark is not None:
            record["benchmark"] = evidence.benchmark

    def _merged(self) -> list[dict]:
        """This pass's records plus an earlier pass's; a test in both keeps its worse outcome.
        Both meet by report test id: this pass keys its records by node id, which for a
        suite test is not the id the earlier pass wrote."""
        merged = {r["test"]: dict(r) for r in (self.earlier or {}).get("records", [])}
        for record in self.records.values():
            test = record["test"]
            if test in merged:
                record = {**merged[test], **record, "outcome": _worse(merged[test]["outcome"], record["outcome"])}
            merged[test] = dict(record)
        return list(merged.values())

    def _collection_errors(self) -> list[str]:
        from laya_qual.plugin.selection import report_test_id

        return sorted(report_test_id(self.config, n, n.partition("::")[0]) for n in self.collection_errors)

    def _hypothesis(self) -> dict:
        """The suite's Hypothesis settings and the command that replays this report's examples."""
        from hypothesis import settings

        from laya_qual.plugin.hooks import suite_profile
        from laya_qual.plugin.rerun import reproduce_command

        seed = self.config.getoption("hypothesis_seed", None)
        profile = suite_profile(self.config)
        suite_settings = settings.get_profile(profile)
        reproduce = reproduce_command(self.config, seed)
        if self.earlier:
            reproduce = f"{self.earlier['reproduce']} && {reproduce}"
        return {"profile": profile, "seed": None if seed is None else str(seed),
                "derandomize": suite_settings.derandomize, "maxExamples": suite_settings.max_examples,
                "reproduce": reproduce}

    def _invocation(self, exitstatus: int) -> dict:
        from laya_qual.report.provenance import ci_url, portable_args
        from laya_qual.subjects import package_dir

        config = self.config
        invocation = {"args": portable_args(list(config.invocation_params.args), config.invocation_params.dir,
                                            package_dir("laya_qual.suite")),
                      "workers": config.getoption("numprocesses", None),
                      "device": config.getoption("laya_device"), "exitStatus": int(exitstatus),
                      "collectionErrors": sorted({*self._collection_errors(),
                                                  *(self.earlier or {}).get("collectionErrors", [])}),
                      "startedOn": self.started, "finishedOn": _now()}
        url = ci_url(os.environ)
        if url:
            invocation["url"] = url
        return invocation

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session):
        """Outermost: the last progress line goes after the terminal's final progress column."""
        try:
            return (yield)
        finally:
            self.progress.finish()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.progress.expect([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:
        self.progress.expect(ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """xdist: the selection a worker collected (every worker collects the same)."""
        from laya_qual.plugin.selection import WORKER_KEY

        chosen = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if chosen is not None and self.selection is None:
            self.selection = chosen

    def _context(self, exitstatus: int) -> dict:
        """The run's facts a report is built from, besides its records and passes."""
        return {"hypothesis": self._hypothesis(), "environment": self.environment,
                "invocation": self._invocation(exitstatus), "harness": self.harness, "subjects": self.subjects,
                "heads": self.heads, "suite": self.suite_figures}

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from laya.artifact.atomic import write_file
        from laya_qual.plugin import selection

        self.selection = self.selection or selection.of(self.config)
        chosen = self.selection or {"tests": [], "shard": None}
        shard = chosen["shard"]
        this_pass = {"workers": self.config.getoption("numprocesses", None),
                     "benchmarks": self.config.getoption("laya_benchmarks"), "exitStatus": int(exitstatus),
                     "tests": len(self.records),
                     **({"shard": f"{shard['index']}/{shard['count']}", "runner": runner(self.environment)}
                        if shard else {})}
        passes = [*(self.earlier or {}).get("passes", []), this_pass]
        context = self._context(exitstatus)
        if self.evidence_out:  # like the bundle: replaced whole, never left truncated
            evidence = json.dumps({
                "format": EVIDENCE_FORMAT, "run": self._run_facts(), "passes": passes,
                "reproduce": context["hypothesis"]["reproduce"],
                "collectionErrors": context["invocation"]["collectionErrors"],
                "selection": chosen, "context": context,
                "records": sorted(self._merged(), key=lambda r: r["test"])}, indent=1).encode() + b"\n"
            if not _written(session, "--laya-evidence-out",
                            lambda: write_file(self.evidence_out, replace=True, data=evidence)):
                return
        if self.path is None:
            return
        self.summary = _written(session, "--laya-report",
                                lambda: write_report(self.path, self.key, self._merged(), context, passes))

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter) -> None:
        """The verdict, after every other plugin's summary (pytest-benchmark's tables
        included), so it is what the terminal shows when the run ends."""
        from laya_qual.report.summary import DEV_KEY_NOTE

        if self.summary is None:
            return
        tr, s = terminalreporter, self.summary
        tr.section("laya_qual report")
        counts = ", ".join(f"{s['counts'][v]} {v}" for v in VERDICTS)
        tr.write_line(f"result {s['result']}: {counts} (of {sum(s['counts'].values())} claims)",
                      red=s["result"] == "FAILED", yellow=s["result"] == "WARNED", green=s["result"] == "PASSED",
                      bold=True)
        for cid in s["failed"]:
            tr.write_line(f"  failed claim: {cid}", red=True)
        for module in s["collectionErrors"]:
            tr.write_line(f"  did not collect: {module}", red=True)
        if s["counts"]["not evaluated"] and not self.config.getoption("laya_qualify"):
            tr.write_line("note: no --laya-qualify, so only the claim-tagged tests collected here were evidence; "
                          "add --laya-qualify to run the shipped qualification suite", yellow=True)
        if self.key is None:
            tr.write_line(f"UNSIGNED REPORT: no signing key (--laya-signing-key or ${KEY_ENV}); "
                          "this bundle will NOT verify and must not be attached to a release",
                          red=True, bold=True)
        else:
            tr.write_line(f"signed: keyid {self.key.public_key.keyid}")
        tr.write_line(f"bundle: {self.path}")
        if signing_facts(self.key)["developmentKey"]:
            tr.write_line(f"WARNING: {DEV_KEY_NOTE}", yellow=True, bold=True)
