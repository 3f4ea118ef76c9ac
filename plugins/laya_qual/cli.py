"""The ``laya-qual`` command: run the suite into a signed report, make keys, verify
and show bundles, print the claims catalogue. Bad input ends in one line, not a
traceback."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import click

from laya.interrupts import SignalExit
from laya_qual import __version__, missing_harness

if missing := missing_harness():  # a runtime-only install: click's one-line error, exit 1
    raise SystemExit(f"Error: {missing}")

from laya_qual.measure.mutation import WHOLE_RUN_TIMEOUT_S
from laya_qual.plugin.shards import DURATIONS_DIR, DURATIONS_FILE, default_durations
from laya_qual.report.signing import (KEY_ENV, PASSWORD_ENV, PUBLIC_KEY_ENV, SigningError, dev_key_path, keygen,
                               load_public_key, load_signer, public_key_path)
from laya_qual.report.verify import VerifyError, read_statements, verify_bundle

# The per-user development key (signing.dev_key_path) as --help names it: the same words on every
# machine, so the option reference (tests/laya-qual-cli-reference.json) holds everywhere.
DEV_KEY = "$XDG_CACHE_HOME/laya-qual/dev-key (~/.cache/laya-qual/dev-key without it)"
# laya-qual verify exit codes (docs/report-format.md): 0 authentic and acceptable,
# 1 not authentic or inconsistent (or unreadable), 2 usage, 3 authentic but its result
# or a required claim falls short.
EXIT_REJECTED = 3
RESULTS = ("PASSED", "WARNED", "FAILED")


class BadOption(click.ClickException):
    """An option found unusable before any work starts: one `Error:` line, exit 2 (bad command line)."""

    exit_code = 2


# What an option of this kind may be: 0 workers runs in-process; a timeout is a positive time.
WORKERS = click.IntRange(min=0)
SECONDS = click.FloatRange(min=0, min_open=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="laya-qual")
def main() -> None:
    """laya-qual: qualification runs and their signed reports."""


@main.command("keygen")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--encrypt", is_flag=True, help=f"encrypt the private key with the password in ${PASSWORD_ENV}")
def keygen_cmd(path: Path, encrypt: bool) -> None:
    """Write an Ed25519 private key at PATH (mode 0600) and its public key at PATH.pub.

    Neither may exist yet. Both appear complete or not at all: an interrupted keygen
    leaves neither (SIGINT/SIGTERM exit 130/143)."""
    password = os.environ.get(PASSWORD_ENV, "").encode()
    if encrypt and not password:
        raise click.UsageError(f"--encrypt needs the password in ${PASSWORD_ENV}")
    try:
        with SignalExit():  # SIGINT/SIGTERM: the temporaries are removed, exit 130/143
            public = keygen(path, password if encrypt else None)
    except (SigningError, OSError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"private key: {path} (keep it secret{'; encrypted' if encrypt else ''})\npublic key:  {public}")


def _verify(bundle: Path, public_key: Path, artifacts=()):
    try:
        return verify_bundle(bundle, load_public_key(public_key), list(artifacts))
    except (SigningError, VerifyError) as e:
        raise click.ClickException(f"verification failed: {e}") from None


def _shortfalls(laya: dict, require_result: str, require_claims: tuple[str, ...]) -> list[str]:
    """Why an authentic report is still not acceptable (empty: acceptable)."""
    p = laya["predicate"]
    out = []
    if RESULTS.index(p["result"]) > RESULTS.index(require_result):
        out.append(f"result {p['result']} (required: {require_result}{' or better' * (require_result != 'PASSED')})")
    verdicts = {c["id"]: c["verdict"] for c in p["claims"]}
    for cid in require_claims:
        if verdicts.get(cid) != "passed":
            out.append(f"claim {cid} is {verdicts.get(cid, 'not in this report')} (required: passed)")
    return out


def _known_claims(required: tuple[str, ...], in_report: list[str]) -> None:
    """A --require-claim id that is neither catalogued nor in the report is a typo: a bad
    command line (exit 2), not a report that falls short (exit 3)."""
    from laya_qual.claims import CLAIMS
    from laya_qual.plugin.preflight import unknown_claims

    unknown = unknown_claims(required, {**dict.fromkeys(in_report), **CLAIMS})
    if unknown:
        raise BadOption(f"--require-claim {unknown[0]}; see `laya-qual claims`")


@main.command()
@click.argument("bundle", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--public-key", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="PEM public key of the signer")
@click.option("--artifact", "artifacts", multiple=True, metavar="DIR",
              help="recompute this artifact directory's digest and require it among the subjects")
@click.option("--require-result", type=click.Choice(RESULTS), default="WARNED", show_default=True,
              help="worst acceptable result: PASSED accepts only PASSED; FAILED checks authenticity only")
@click.option("--require-claim", "require_claims", multiple=True, metavar="ID",
              help="this claim must be passed (repeatable)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout instead of a line")
def verify(bundle: Path, public_key: Path, artifacts: tuple[str, ...], require_result: str,
           require_claims: tuple[str, ...], as_json: bool) -> None:
    """Check signatures, statement shapes, predicate agreement and artifact digests, then
    the result and claims a release requires.

    Exit status: 0 authentic and acceptable; 1 not authentic, inconsistent or unreadable;
    2 bad command line (a --require-claim naming no claim); 3 authentic but the result or
    a required claim falls short (a FAILED report is rejected unless --require-result FAILED)."""
    try:
        v = verify_bundle(bundle, load_public_key(public_key), list(artifacts))
    except (SigningError, VerifyError) as e:
        if as_json:
            click.echo(json.dumps({"bundle": str(bundle), "verified": False, "error": str(e)}))
            sys.exit(1)
        raise click.ClickException(f"verification failed: {e}") from None
    p = v.laya["predicate"]
    _known_claims(require_claims, [c["id"] for c in p["claims"]])
    short = _shortfalls(v.laya, require_result, require_claims)
    if as_json:
        click.echo(json.dumps({
            "bundle": str(bundle), "verified": True, "keyid": v.keyid, "result": p["result"],
            "counts": p["counts"], "developmentKey": bool(p.get("signing", {}).get("developmentKey")),
            "ignoredLines": v.ignored, "artifactsRechecked": len(artifacts),
            "required": {"result": require_result, "claims": list(require_claims)},
            "accepted": not short, "shortfalls": short,
            "claims": {c["id"]: c["verdict"] for c in p["claims"]}}, sort_keys=True))
    elif short:
        click.echo(f"REJECTED {bundle}: authentic (keyid {v.keyid}) but " + "; ".join(short), err=True)
    else:
        dev = "; DEVELOPMENT KEY" if p.get("signing", {}).get("developmentKey") else ""
        ignored = f"; {v.ignored} unrecognised line(s) ignored" if v.ignored else ""
        click.echo(f"OK {bundle}: signed by keyid {v.keyid}{dev}; result {p['result']}; "
                   f"{len(p['claims'])} claims; {len(artifacts)} artifact(s) rechecked{ignored}")
    if short:
        sys.exit(EXIT_REJECTED)


def _laya_statement(bundle: Path) -> dict:
    from laya_qual.report.model import LAYA_TYPE

    try:
        found = [s for s, _ in read_statements(bundle) if s.get("predicateType") == LAYA_TYPE]
    except VerifyError as e:
        raise click.ClickException(str(e)) from None
    if len(found) != 1:
        raise click.ClickException(f"{bundle}: no laya-qual statement")
    return found[0]


@main.command()
@click.argument("bundle", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--public-key", type=click.Path(dir_okay=False, path_type=Path),
              help="verify first (otherwise the summary says the signature was not checked)")
@click.option("--markdown", is_flag=True, help="release-note markdown instead of the terminal table")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help="write here instead of stdout (beside it, then renamed over it: a failed write "
                   "leaves the old file whole)")
@click.option("--append", is_flag=True, help="append to --output (e.g. $GITHUB_STEP_SUMMARY) instead of replacing it "
                                             "(the old bytes and the new, beside it, then renamed)")
@click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path),
              help="write one self-contained HTML page here instead: claims (filterable), each qualified head's "
                   "reliability diagrams and certification path, benchmark charts")
def show(bundle: Path, public_key: Path | None, markdown: bool, output: Path | None, append: bool,
         html_out: Path | None) -> None:
    """Summarize a report bundle: claims table (failures first) and benchmark figures.

    A BUNDLE that is not a regular file (a FIFO, /dev/zero) is refused before a byte is read."""
    from laya_qual.report import summary
    from laya_qual.report.html import Signature

    if append and not output:
        raise click.UsageError("--append needs --output")
    if html_out and (markdown or output):
        raise click.UsageError("--html writes its own file: it excludes --markdown and --output")
    if public_key:
        v = _verify(bundle, public_key)
        laya, signature = v.laya, f"verified with the given public key (keyid {v.keyid[:16]})"
        checked = Signature(True, v.keyid)
    else:
        laya, signature = _laya_statement(bundle), "NOT CHECKED (pass --public-key, or run laya-qual verify)"
        checked = Signature(False)
    if html_out:
        _write_html(laya, bundle, checked, html_out)
        return
    try:
        rendered = (summary.markdown(laya, bundle.name, signature) if markdown
                    else summary.text(laya, str(bundle), signature))
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise click.ClickException(f"{bundle}: laya-qual predicate is malformed ({e!r})") from None
    if output:
        _write_output(output, rendered, append)
        click.echo(f"{'appended to' if append else 'wrote'} {output}")
    else:
        click.echo(rendered, nl=False)


def _write_output(output: Path, text: str, append: bool) -> None:
    """``show --output``: the file (a symlink's target) is replaced whole through a temporary
    sibling, so a full disk or any OS error leaves the old file as it was (``--append``
    writes the old bytes and the new text beside it, then renames); a stream (a FIFO, a
    terminal, /dev/stdout) has no old bytes to lose and is written directly. An OS error is
    one `Error:` line."""
    import os
    import stat

    from laya.artifact.atomic import write_file
    from laya.errors import LayaError

    target = Path(os.path.realpath(output))
    try:
        try:
            mode = os.stat(target).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode):
            with open(target, "a" if append else "w", encoding="utf-8") as stream:
                stream.write(text)
            return
        old = target.read_bytes() if append and mode is not None else b""
        write_file(target, old + text.encode("utf-8"), mode=0o666 if mode is None else stat.S_IMODE(mode),
                   replace=True)
    except (OSError, LayaError) as e:
        raise click.ClickException(f"cannot write {output}: {getattr(e, 'strerror', None) or e}") from None


def _write_html(laya: dict, bundle: Path, checked, out: Path) -> None:
    """``show --html``: the page is written whole (through a temporary sibling) or not at all."""
    from laya.artifact.atomic import write_file
    from laya.errors import LayaError
    from laya_qual.report.html import render

    try:
        page = render(laya, bundle.name, checked)
    except (KeyError, TypeError, AttributeError, ValueError, ZeroDivisionError) as e:
        raise click.ClickException(f"{bundle}: laya-qual predicate is malformed ({e!r})") from None
    try:
        write_file(out, page.encode("utf-8"), replace=True)
    except (OSError, LayaError) as e:
        raise click.ClickException(f"cannot write {out}: {e}") from None
    click.echo(f"wrote {out}")


@main.command()
@click.option("--markdown", is_flag=True, help="the docs/claims.md page")
@click.option("--json", "as_json", is_flag=True, help="a JSON list of {id, area, statement}")
def claims(markdown: bool, as_json: bool) -> None:
    """Print the claims catalogue."""
    import json

    from laya_qual.claims import CLAIMS
    from laya_qual.report.summary import claims_markdown

    if markdown and as_json:
        raise click.UsageError("--markdown and --json exclude each other")
    if as_json:
        click.echo(json.dumps([{"id": c.id, "area": c.area, "statement": c.statement} for c in CLAIMS.values()],
                              indent=2))
    elif markdown:
        click.echo(claims_markdown(CLAIMS), nl=False)
    else:
        width = max(map(len, CLAIMS))
        for claim in CLAIMS.values():
            click.echo(f"{claim.id:<{width}}  {claim.statement}")


@main.command("compare")
@click.argument("old", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("new", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--public-key", type=click.Path(dir_okay=False, path_type=Path),
              help="PEM public key that signed both bundles")
@click.option("--old-key", type=click.Path(dir_okay=False, path_type=Path), help="public key for OLD (instead)")
@click.option("--new-key", type=click.Path(dir_okay=False, path_type=Path), help="public key for NEW (instead)")
@click.option("--fail-on", "fail_on", multiple=True, metavar="EXPR",
              help="exit 3 if this threshold trips (repeatable): verdict, temperature-bound, uncertified, "
                   "certification-coverage:-0.05, code-coverage:-0.01, kill-rate:-1%, CLAIM_OR_TEST:FIGURE:-5%, ... "
                   "(docs/report-format.md)")
@click.option("--across-machines", is_flag=True,
              help="judge benchmark changes even when OLD and NEW were measured on different machines")
@click.option("--markdown", is_flag=True, help="release-note markdown instead of the terminal summary")
@click.option("--json", "as_json", is_flag=True, help="every compared fact and threshold as one JSON object")
def compare_cmd(old: Path, new: Path, public_key: Path | None, old_key: Path | None, new_key: Path | None,
                fail_on: tuple[str, ...], across_machines: bool, markdown: bool, as_json: bool) -> None:
    """Compare two signed reports (OLD, e.g. the previous release's, and NEW): verdicts,
    catalogue and suite, subjects, each head's calibration and certification, benchmark
    figures with the machines that measured them, the kill rate. Both are verified first.
    Digests are shown by their first 16 hex digits (--json keeps them whole).

    \b
    Exit status: 0 compared, no --fail-on tripped; 1 a bundle is unreadable or does not
    verify; 2 usage (a malformed --fail-on included); 3 a --fail-on threshold tripped
    (each named on stderr)."""
    from laya_qual.release import compare

    if markdown and as_json:
        raise click.UsageError("--markdown and --json exclude each other")
    keys = {"OLD": old_key or public_key, "NEW": new_key or public_key}
    for label, option in (("OLD", "--old-key"), ("NEW", "--new-key")):
        if keys[label] is None:
            raise click.UsageError(f"{label} needs a public key: --public-key or {option}")
    try:
        thresholds = [compare.parse_threshold(expression) for expression in fail_on]
    except compare.ThresholdError as e:
        raise click.UsageError(str(e)) from None
    verified = {}
    for label, bundle in (("OLD", old), ("NEW", new)):
        try:
            v = verify_bundle(bundle, load_public_key(keys[label]))
        except (SigningError, VerifyError) as e:
            hint = ("; each report may have its own key: give --old-key OLD.pub --new-key NEW.pub"
                    if "not by the given key" in str(e) and public_key and not (old_key and new_key) else "")
            raise click.ClickException(f"{label} bundle {bundle}: verification failed: {e}{hint}") from None
        verified[label] = (str(bundle), v.keyid, v.laya)
    try:
        c = compare.compare(verified["OLD"], verified["NEW"], thresholds, across_machines)
    except compare.ReportError as e:
        raise click.ClickException(str(e)) from None
    except compare.ThresholdError as e:
        raise click.UsageError(str(e)) from None
    click.echo(compare.as_json(c) if as_json else compare.markdown(c) if markdown else compare.text(c), nl=False)
    for t in c["thresholds"]:
        for why in t["tripped"]:
            click.echo(f"laya-qual compare: --fail-on {t['expression']} tripped: {why}", err=True)
        if t["status"] == "not checked":
            click.echo(f"laya-qual compare: --fail-on {t['expression']} not checked: {'; '.join(t['notChecked'])}",
                       err=True)
    if any(t["status"] == "tripped" for t in c["thresholds"]):
        sys.exit(EXIT_REJECTED)


def _signing_key(key: str | None) -> str:
    """--key, else $LAYA_QUAL_SIGNING_KEY, else the per-user development key (created on
    first use outside any project tree; reports signed with it say so)."""
    if key or os.environ.get(KEY_ENV):
        return key or os.environ[KEY_ENV]
    dev = dev_key_path()
    if not dev.exists():
        try:
            keygen(dev)
        except (SigningError, OSError) as e:
            raise click.ClickException(f"cannot create the development key: {e}") from None
        click.secho(f"created development key {dev}", fg="yellow", err=True)
    click.secho(f"SIGNING WITH THE DEVELOPMENT KEY {dev}: fine for local checks, never for a "
                f"release report (use --key or ${KEY_ENV}); the report records it", fg="yellow", bold=True, err=True)
    return str(dev)


# `laya-qual run` exit codes, one per outcome (README and `run --help` list them).
EXIT_PASSED, EXIT_FAILED, EXIT_WARNED, EXIT_NO_REPORT = 0, 1, 3, 4
RESULT_EXIT = {"PASSED": EXIT_PASSED, "FAILED": EXIT_FAILED, "WARNED": EXIT_WARNED}
# pytest exit statuses after which a pass's report is complete: tests ran (some may have
# failed), or the selection left nothing for this pass (e.g. no benchmarks selected).
PYTEST_COMPLETE = (0, 1, 5)


class NoReport(click.ClickException):
    """The harness did not produce a complete, verified report."""

    exit_code = EXIT_NO_REPORT


def _preflight_run(artifacts: tuple[str, ...], base: str | None, out: Path | None,
                   figures: tuple[Path, ...]) -> None:
    """What would fail only after the suite pass, checked before it starts (laya_qual.plugin.preflight)."""
    from laya_qual.plugin import preflight

    problems = [preflight.artifact_problem("--artifact", a, head=True) for a in artifacts]
    problems.append(base and preflight.artifact_problem("--base", base, head=False))
    problems.append(out and preflight.report_path_problem("--out", out))
    writer = {"--kill-rate": "mutate", "--coverage": "coverage"}
    problems += [f"{option} {path}: no such file; give a results file `laya-qual {writer[option]}` wrote"
                 for option, path in figures if not Path(path).is_file()]
    problem = next((p for p in problems if p), None)
    if problem:
        raise BadOption(problem)


def _check_key(key: str) -> Path:
    """The key's public half (laya-qual run verifies with it), after loading both halves
    and matching them: a missing, unreadable or mismatched key is found before any test."""
    try:
        public = public_key_path(key)
    except SigningError as e:
        raise BadOption(f"--key {e}") from None
    pem = str(public) == f"{key}.pub"
    if pem and not Path(key).exists():
        raise BadOption(f"--key {key}: no such file; give a PEM private key file (`laya-qual keygen KEY` writes "
                        "KEY and KEY.pub) or a signer URI")
    try:
        public_key = load_public_key(public)
    except SigningError as e:
        fix = ("keep its public key KEY.pub beside KEY (laya-qual keygen writes both)" if pem
               else f"set ${PUBLIC_KEY_ENV} to the signer's PEM public key")
        raise BadOption(f"--key {key}: {e}; {fix}") from None
    if not pem:
        return public  # a signer URI: loading it may reach a key service; signing finds out soon enough
    try:
        signer = load_signer(key)
    except SigningError as e:
        raise BadOption(f"--key {e}") from None
    if signer.public_key.keyid != public_key.keyid:
        raise BadOption(f"--key {key}: {public} is not its public key (keyid {public_key.keyid[:16]}, the key's "
                        f"{signer.public_key.keyid[:16]}); put the matching KEY.pub beside it")
    return public


@main.command(context_settings={"ignore_unknown_options": True})
@click.option("--workers", "-n", type=WORKERS, default=2, show_default=True,
              help="xdist workers for the suite pass (0: in-process)")
@click.option("--artifact", "artifacts", multiple=True, metavar="DIR", help="qualify this artifact too")
@click.option("--base", metavar="DIR", help="shared base for the --artifact heads")
@click.option("--key", metavar="KEY",
              help=f"PEM private key file or securesystemslib signer URI (public key then in "
                   f"$LAYA_QUAL_SIGNING_PUBLIC_KEY); default: ${KEY_ENV}, else the dev key {DEV_KEY}")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="bundle path, overwritten (default: reports/qualification-<UTC time>.intoto.jsonl); with "
                   "--shard the shard's evidence (default: reports/shard-K-of-N.json)")
@click.option("--kill-rate", "kill_rates", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="a `laya-qual mutate` results file measured on this code, carried as suite.killRate "
                   "(catalogue) or suite.mutantSample (--sample); once per kind")
@click.option("--coverage", "coverage_file", type=click.Path(dir_okay=False, path_type=Path),
              help="a `laya-qual coverage` results file measured on this code, carried as suite.coverage")
@click.option("--plan", is_flag=True,
              help="run nothing: print per artifact and for the base what would run, and an estimate from the "
                   "recorded durations")
@click.option("--shard", metavar="K/N",
              help="run shard K of N (balanced by the recorded durations; the benchmarks on shard 1) and write "
                   "its unsigned evidence; `laya-qual merge` signs the N shards as one report")
@click.option("--durations", type=click.Path(dir_okay=False, path_type=Path),
              help=f"recorded per-test durations (default: reports/{DURATIONS_DIR}/{DURATIONS_FILE}, kept up "
                   "to date by every unsharded run and every merge)")
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def run(workers: int, artifacts: tuple[str, ...], base: str | None, key: str | None,
        out: Path | None, kill_rates: tuple[Path, ...], coverage_file: Path | None, plan: bool, shard: str | None,
        durations: Path | None, pytest_args: tuple[str, ...]) -> None:
    """Run the qualification suite, sign the report, verify it, and summarize it.

    Two passes make one report: the suite on WORKERS xdist workers with the benchmark
    tests deselected, then the benchmark tests in-process (pytest-benchmark measures
    nothing under xdist); the second pass merges the first one's evidence and signs.
    Both use the same Hypothesis seed, chosen here unless you pass --hypothesis-seed.
    Progress goes to stderr; the verdict (result, claims, signature, bundle) is printed last.

    \b
    Arguments after `--` go unchanged to both pytest passes, after the options run
    sets itself (-p laya_qual --laya-qualify, --laya-artifact/--laya-base from
    --artifact/--base, --hypothesis-seed, -n, --laya-benchmarks, --laya-evidence-out/-in,
    and on the second pass --laya-report and --laya-signing-key from --out and --key):
    e.g. `-- -k EXPR`, `-- --laya-claims cache,report`, `-- --hypothesis-seed 7`,
    `-- --laya-profile laya-qual-thorough`, `-- -x`.

    \b
    Exit status: 0 PASSED, 1 FAILED (a claim failed), 3 WARNED (a claim was not
    evaluated), 4 no complete verified report (a pass crashed, was interrupted or
    refused its options), 2 bad command line (an artifact, key or --out found unusable
    before pytest starts included). With --shard: 0 when the shard's evidence is
    complete (whatever its tests' outcomes), 4 otherwise."""
    from laya_qual.plugin.shards import ShardError, parse_shard

    _preflight_run(artifacts, base, out,
                   tuple(("--kill-rate", p) for p in kill_rates) + (("--coverage", coverage_file),) * bool(coverage_file))
    durations = durations or default_durations(Path("reports"))
    common = ["-p", "laya_qual", "--laya-qualify"]
    common += [arg for a in artifacts for arg in ("--laya-artifact", a)] + (["--laya-base", base] if base else [])
    if plan:
        if shard or out or kill_rates or coverage_file:
            raise click.UsageError("--plan runs nothing: it takes no --shard, --out, --kill-rate or --coverage")
        sys.exit(_print_plan(common, workers, durations, pytest_args))
    recorded = ["--laya-durations", str(durations)] if durations.exists() else []  # balance shards, time the ETA
    if not any(a.startswith("--hypothesis-seed") for a in pytest_args):
        if shard:
            raise click.UsageError("--shard needs --hypothesis-seed after `--`: every shard of a run uses the same seed")
        common.append(f"--hypothesis-seed={secrets.randbelow(2**32)}")
    if shard:
        try:
            index, count = parse_shard(shard, "--shard")
        except ShardError as e:
            raise click.UsageError(str(e)) from None
        if kill_rates or coverage_file:
            raise click.UsageError("--kill-rate and --coverage go to `laya-qual merge`, which signs the report")
        sys.exit(_run_shard([*common, "--laya-shard", f"{index}/{count}", *recorded], workers, index,
                            out or Path("reports") / f"shard-{index}-of-{count}.json", pytest_args))
    key = _signing_key(key)
    public = _check_key(key)
    out = out or Path("reports") / f"qualification-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.intoto.jsonl"
    figures = [arg for path in kill_rates for arg in ("--laya-kill-rate", str(path))]
    figures += ["--laya-coverage", str(coverage_file)] if coverage_file else []
    out.unlink(missing_ok=True)  # never verify and show a stale bundle from an earlier run
    with tempfile.TemporaryDirectory(prefix="laya-qual-") as scratch:
        evidence = Path(scratch) / "run.json"
        _two_passes([*common, *recorded], workers, pytest_args, evidence, [
            "--laya-report", str(out), "--laya-signing-key", str(key), *figures])
        if not out.exists():
            raise NoReport(f"the benchmark pass wrote no report at {out}")
        _keep_durations(durations, lambda: json.loads(evidence.read_text())["records"])
    _verified_summary(out, public, list(artifacts) + ([base] if base else []))


def _pytest(args: list[str]) -> int:
    return subprocess.call([sys.executable, "-m", "pytest", *args])


def _two_passes(common: list[str], workers: int, pytest_args: tuple[str, ...], evidence: Path,
                finish: list[str]) -> None:
    """The suite pass on xdist workers, then the benchmark pass in-process, which merges
    the first pass's evidence, writes the run's evidence to ``evidence`` and ``finish``es
    (a report, or nothing more)."""
    suite_evidence = evidence.with_name("suite-pass.json")
    rc = _pytest([*common, "-n", str(workers), "--laya-benchmarks", "exclude",
                  "--laya-evidence-out", str(suite_evidence), *pytest_args])
    if rc not in PYTEST_COMPLETE or not suite_evidence.exists():
        raise NoReport(f"the suite pass ended with pytest exit status {rc}; no report written")
    click.secho("\nlaya-qual run: benchmark pass (in-process, merges the suite pass)", bold=True, err=True)
    rc = _pytest([*common, "-n", "0", "--laya-benchmarks", "only", "--laya-evidence-in", str(suite_evidence),
                  "--laya-evidence-out", str(evidence), *finish, *pytest_args])
    if rc not in PYTEST_COMPLETE or not evidence.exists():
        raise NoReport(f"the benchmark pass ended with pytest exit status {rc}; no complete evidence")


def _keep_durations(durations: Path, records: Callable[[], list[dict]]) -> None:
    """Fold the run's per-test durations into the store; one that cannot be read or
    written is a warning: the report is already written and still gets verified."""
    from laya_qual.plugin.shards import write_durations

    try:
        write_durations(durations, records())
    except (OSError, ValueError, KeyError) as e:
        click.secho(f"laya-qual: could not record the durations in {durations}: {e}", fg="yellow", err=True)


def _verified_summary(out: Path, public, artifacts: list[str]) -> None:
    from laya_qual.report import summary

    try:
        v = verify_bundle(out, load_public_key(public), artifacts)
    except (SigningError, VerifyError) as e:
        raise NoReport(f"verification failed: {e}") from None
    signature = f"verified with {public} (keyid {v.keyid[:16]})"
    click.echo("")
    click.echo(summary.text(v.laya, str(out), signature), nl=False)
    click.echo(summary.verdict(v.laya, str(out), signature, f"laya-qual verify {out} --public-key {public}"), nl=False)
    sys.exit(RESULT_EXIT[v.laya["predicate"]["result"]])


def _run_shard(common: list[str], workers: int, index: int, out: Path, pytest_args: tuple[str, ...]) -> int:
    """One shard: its part of the suite pass, and on shard 1 the benchmark pass; the
    shard's evidence goes to ``out`` (nothing is signed until `laya-qual merge`)."""
    import shutil

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="laya-qual-") as scratch:
        evidence = Path(scratch) / "shard.json"
        if index == 1:
            _two_passes(common, workers, pytest_args, evidence, [])
        else:
            rc = _pytest([*common, "-n", str(workers), "--laya-benchmarks", "exclude",
                          "--laya-evidence-out", str(evidence), *pytest_args])
            if rc not in PYTEST_COMPLETE or not evidence.exists():
                raise NoReport(f"the shard's suite pass ended with pytest exit status {rc}; no evidence written")
        shutil.copyfile(evidence, out)
    click.echo(f"shard evidence: {out} (unsigned; `laya-qual merge` every shard's evidence into one report)")
    return 0


def _print_plan(common: list[str], workers: int, durations: Path, pytest_args: tuple[str, ...]) -> int:
    from laya_qual.release.plan import render
    from laya_qual.plugin.shards import ShardError, read_durations

    with tempfile.TemporaryDirectory(prefix="laya-qual-") as scratch:
        listing = Path(scratch) / "plan.json"
        rc = subprocess.call([sys.executable, "-m", "pytest", *common, "-n", "0", "-q", "--laya-plan", str(listing),
                              *pytest_args], stdout=subprocess.DEVNULL)
        if rc not in PYTEST_COMPLETE or not listing.exists():
            raise click.ClickException(f"collecting the selection failed (pytest exit status {rc}); run "
                                       f"`python -m pytest {' '.join(common)} --collect-only` to see why")
        try:
            seconds, _ = read_durations(durations if durations.exists() else None)
        except ShardError as e:
            raise click.ClickException(str(e)) from None
        click.echo(render(json.loads(listing.read_text())["tests"], seconds, workers,
                          str(durations) if seconds else None), nl=False)
    return 0


@main.command("merge")
@click.argument("evidence", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--key", metavar="KEY",
              help=f"PEM private key file or signer URI; default: ${KEY_ENV}, else the dev key {DEV_KEY}")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="bundle path, overwritten")
@click.option("--durations", type=click.Path(dir_okay=False, path_type=Path),
              help=f"fold the shards' test durations into this store (default: "
                   f"<bundle dir>/{DURATIONS_DIR}/{DURATIONS_FILE})")
def merge_cmd(evidence: tuple[Path, ...], key: str | None, out: Path, durations: Path | None) -> None:
    """Merge the evidence of every shard of one run (`laya-qual run --shard K/N`) into one
    signed report, then verify and summarize it like `laya-qual run`.

    Refused, naming the shard: a shard missing or given twice, a shard of another run
    (suite or harness digests, seed, options, subjects, selection, durations file or
    environment profile differ), a test in two shards or in none, a shard that did not
    finish its tests.

    \b
    Exit status: as `laya-qual run` (0 PASSED, 1 FAILED, 3 WARNED, 4 no complete
    verified report: the shards were refused), 2 bad command line (an unusable --key
    included)."""
    from laya_qual.plugin.assembler import write_report
    from laya_qual.release.merge import MergeError, merge

    key = _signing_key(key)
    public = _check_key(key)
    try:
        records, context, passes = merge(list(evidence))
    except MergeError as e:
        raise NoReport(f"merge refused: {e}") from None
    try:
        signer = load_signer(key)
    except SigningError as e:
        raise BadOption(f"--key {e}") from None
    write_report(out, signer, records, context, passes)  # replaces an earlier bundle whole (docs/report-format.md)
    _keep_durations(durations or default_durations(out.parent), lambda: records)
    _verified_summary(out, public, [])


@main.command()
@click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True,
              help="run every defect and the baseline under K Hypothesis seeds")
@click.option("--hypothesis-seed", type=int, help="first seed (default: random, recorded); seeds are N, N+1, ...")
@click.option("--workers", "-n", type=WORKERS, default=2, show_default=True, help="most xdist workers a run may use")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="defects (mutants) run at the same time")
@click.option("--confirm/--no-confirm", default=True, show_default=True,
              help="run the whole suite on a defect its claims' tests (a mutant its covering tests) missed "
                   "before calling it survived")
@click.option("--timeout", type=SECONDS,
              help=f"seconds per pytest run (default: from the baseline timings; {WHOLE_RUN_TIMEOUT_S} for a baseline)")
@click.option("--only", multiple=True, metavar="ID", help="run only these defect ids (repeatable)")
@click.option("--claims", metavar="PATTERN[,...]",
              help="limit every run to these claims' tests (a quick, partial figure)")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path),
              help="results JSON (default: reports/mutation-<UTC time>.json, with --sample "
                   "reports/mutants-<UTC time>.json, with --resume the file resumed)")
@click.option("--require-rate", type=click.FloatRange(0, 1), metavar="R",
              help="exit 1 if the kill rate (with --sample: its 95% lower bound) is below R (0..1)")
@click.option("--sample", type=click.IntRange(min=1), metavar="N",
              help="instead of the catalogue: N automatic mutants drawn uniformly from the whole population")
@click.option("--seed", type=int, help="the draw's seed for --sample (default: random, recorded)")
@click.option("--population", is_flag=True,
              help="print the automatic mutant population per module (and with --sample the drawn mutants); "
                   "run nothing")
@click.option("--equivalents", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="JSON {mutant key: written reason}: survivors listed there count as equivalent")
@click.option("--tests-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="with --sample: also run this directory of the project's own tests on a mutant the suite misses")
@click.option("--time-box", type=click.FloatRange(min=0, min_open=True), metavar="MINUTES",
              help="with --sample: start no mutant after MINUTES from the run's start; the figure is the first K "
                   "drawn (the sample --sample K draws), every started one finished")
@click.option("--resume", type=click.Path(dir_okay=False, exists=True, path_type=Path), metavar="FILE",
              help="with --sample: keep the mutants FILE (the results of an interrupted or time-boxed run of the "
                   "same draw on the same code) measured and run the rest; seeds default to FILE's")
def mutate(sample: int | None, seed: int | None, population: bool, equivalents: Path | None,
           tests_dir: Path | None, time_box: float | None, resume: Path | None, **options) -> None:
    """Run the suite against every seeded defect of the catalogue, or (--sample N) against
    automatic mutants drawn without choice; print the kill rate."""
    from laya_qual.measure.mutation import MutationError, main as run_mutation

    try:
        if population:
            sys.exit(_print_population(sample, seed))
        if sample:
            sys.exit(_run_sample(sample, seed, equivalents, tests_dir, time_box, resume, options))
        if seed is not None or equivalents or tests_dir or time_box or resume:
            raise click.UsageError("--seed, --equivalents, --tests-dir, --time-box and --resume go with --sample")
        sys.exit(run_mutation(**options))
    except MutationError as e:
        raise click.ClickException(str(e)) from None


def _print_population(size: int | None, seed: int | None) -> int:
    from laya_qual.measure import mutants
    from laya_qual.measure.mutation import installed_layout

    if size and seed is None:
        raise click.UsageError("--population --sample N needs --seed: a listing must be reproducible")
    everything = mutants.population(installed_layout())
    click.echo(mutants.population_table(everything), nl=False)
    if size:
        for m in _draw(everything, size, seed):
            click.echo(f"{m.id}  {m.original!r} -> {m.replacement!r}")
    return 0


def _draw(everything: list, size: int, seed: int) -> list:
    from laya_qual.measure import mutants

    try:
        return mutants.sample(everything, size, seed)
    except ValueError as e:
        raise click.UsageError(f"--sample: {e}") from None


def _run_sample(size: int, seed: int | None, equivalents: Path | None, tests_dir: Path | None,
                time_box: float | None, resume: Path | None, options: dict) -> int:
    from laya_qual.measure import mutants
    from laya_qual.measure.mutant_run import main as run_sample, read_results
    from laya_qual.measure.mutation import installed_layout

    catalogue_only = {"seeds": 1, "only": ()}
    clashing = [k for k, default in catalogue_only.items() if options[k] != default]
    if clashing:
        raise click.UsageError(f"--sample runs every drawn mutant once, under one Hypothesis seed; "
                               f"it does not take {', '.join('--' + k for k in clashing)}")
    earlier = read_results(resume) if resume else {}
    seed = earlier.get("sampleSeed") if seed is None else seed
    seed = secrets.randbelow(2**31) if seed is None else seed
    hypothesis_seed = options["hypothesis_seed"]
    hypothesis_seed = earlier.get("hypothesisSeed") if hypothesis_seed is None else hypothesis_seed
    everything = mutants.population(installed_layout())
    return run_sample(drawn=_draw(everything, size, seed), population_size=len(everything), seed=seed,
                      hypothesis_seed=hypothesis_seed, workers=options["workers"],
                      timeout=options["timeout"], equivalents=equivalents, tests_dir=tests_dir,
                      output=options["output"] or resume, require_rate=options["require_rate"],
                      scope=[p for p in (options["claims"] or "").split(",") if p],
                      confirm=options["confirm"], jobs=options["jobs"], time_box=time_box,
                      earlier=earlier if resume else None)


@main.command("coverage")
@click.option("--workers", "-n", type=WORKERS, default=2, show_default=True, help="xdist workers for the suite run")
@click.option("--hypothesis-seed", type=int, help="the suite's Hypothesis seed (default: random, recorded)")
@click.option("--claims", metavar="PATTERN[,...]",
              help="only these claims' tests: a quick, partial figure that --laya-coverage refuses")
@click.option("--timeout", type=SECONDS, help=f"seconds the suite run may take (default: {WHOLE_RUN_TIMEOUT_S})")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path),
              help="results JSON (default: reports/coverage-<UTC time>.json); the combined coverage data "
                   "is kept beside it (same name, .coverage)")
def coverage_cmd(workers: int, hypothesis_seed: int | None, claims: str | None, timeout: float | None,
                 output: Path | None) -> None:
    """Run the whole suite (benchmarks excluded) under coverage.py in branch mode, its
    subprocesses measured too (CLIs, xdist workers, spawned ranks), a context per test;
    print statements and branches covered per package (runtime laya, plugin laya_qual,
    suite, synth) and write the results that --laya-coverage / `run --coverage` sign into
    a report as suite.coverage (docs/coverage.md)."""
    from laya_qual.measure.coverage_run import CoverageError, main as run_coverage

    try:
        sys.exit(run_coverage(hypothesis_seed=hypothesis_seed, workers=workers, output=output, timeout=timeout,
                              scope=[p for p in (claims or "").split(",") if p]))
    except CoverageError as e:
        raise click.ClickException(str(e)) from None
