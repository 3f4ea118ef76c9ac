"""The laya-qual command's error paths and rare branches: each bad input, refused shard
or odd report ends in its documented exit status and one line naming the file or option.

The reports are real: a two-test project run as one shard (`--laya-shard 1/1`), merged
and signed by `laya-qual merge`; a test that needs an odd report edits that report's
statements and signs them again. Any pytest a `laya-qual run` here starts is refused at
its command line (BOGUS), so no test waits on the suite.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from laya_qual.plugin.assembler import EVIDENCE_FORMAT
from laya_qual.claims import CLAIMS
from laya_qual.cli import main
from laya_qual.report.model import LAYA_TYPE, PAYLOAD_TYPE, PREDICATE_DESCRIPTOR, STATEMENT_TYPE, TEST_RESULT_TYPE, canonical
from laya_qual.report.signing import KEY_ENV, PUBLIC_KEY_ENV, keygen, load_public_key, load_signer, write_bundle
from laya_qual.report.verify import read_statements

PROJECT = """
import pytest

@pytest.mark.laya_claim("report.verdicts")
def test_passes():
    pass

@pytest.mark.laya_claim("report.signature")
def test_other():
    pass
"""
TESTS = ["test_project.py::test_other", "test_project.py::test_passes"]
BOGUS = "--laya-no-such-option"  # pytest refuses it at once (exit status 4)
HEAD = "artifact/head-a"


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def refused(result, exit_code: int, message: str) -> None:
    """``exit_code``, and the output ends in the one line ``Error: message`` (no traceback)."""
    assert result.exit_code == exit_code, result.output
    assert "Traceback" not in result.output
    assert result.output.strip().splitlines()[-1] == f"Error: {message}", result.output


def keyid(public: Path) -> str:
    return load_public_key(public).keyid


def statements(bundle: Path) -> tuple[dict, dict]:
    """(test-result statement, laya-qual statement) of a bundle, read without verifying."""
    found = {s["predicateType"]: s for s, _ in read_statements(bundle)}
    return found[TEST_RESULT_TYPE], found[LAYA_TYPE]


def resign(bundle: Path, out: Path, key: Path | None, edit) -> Path:
    """``bundle`` with ``edit(test_result, laya)`` applied, the test-result statement naming
    the edited laya-qual payload again, signed by ``key`` (None: unsigned, for `show`)."""
    test_result, laya = statements(bundle)
    edit(test_result, laya)
    payload = canonical(laya)
    for descriptor in test_result["predicate"]["configuration"]:
        if descriptor.get("name") == PREDICATE_DESCRIPTOR:
            descriptor["digest"] = {"sha256": hashlib.sha256(payload).hexdigest()}
    write_bundle(out, (canonical(test_result), payload), load_signer(key) if key else None)
    return out


def with_head(entry: dict):
    """An edit adding an artifact subject and its ``heads`` entry (``entry`` plus the subject name)."""
    def edit(test_result: dict, laya: dict) -> None:
        subject = {"name": HEAD, "digest": {"dirHash": "ab" * 32}, "annotations": {"kind": "artifact", "role": "head"}}
        for statement in (test_result, laya):
            statement["subject"].append(subject)
        laya["predicate"]["heads"] = [{"subject": HEAD, **entry}]
    return edit


def edited_evidence(evidence: Path, out: Path, edit) -> Path:
    doc = json.loads(evidence.read_text())
    edit(doc)
    out.write_text(json.dumps(doc))
    return out


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> tuple[Path, Path]:
    """Two key pairs: (signing key, another key); each public key is the key's path + .pub."""
    d = tmp_path_factory.mktemp("keys")
    keygen(d / "key")
    keygen(d / "other")
    return d / "key", d / "other"


@pytest.fixture(scope="module")
def evidence(tmp_path_factory) -> Path:
    """The evidence of a real one-shard run of the two-test project."""
    d = tmp_path_factory.mktemp("shard")
    (d / "test_project.py").write_text(PROJECT)
    out = d / "shard-1-of-1.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "-p", "no:cacheprovider", "-q",
                           "test_project.py", "--laya-shard", "1/1", "--laya-evidence-out", str(out),
                           "--hypothesis-seed", "3"], cwd=d, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def bundle(evidence, keys, tmp_path_factory) -> Path:
    """The shard merged into a signed report: WARNED (most catalogued claims have no test here)."""
    out = tmp_path_factory.mktemp("bundle") / "report.intoto.jsonl"
    result = cli("merge", evidence, "--key", keys[0], "--out", out, "--durations", out.with_name("durations.json"))
    assert result.exit_code == 3, result.output
    return out


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """A top-level run in an empty directory: no xdist worker variables, no signing key from outside."""
    for var in [v for v in os.environ if v.startswith("PYTEST_XDIST_")] + [KEY_ENV, PUBLIC_KEY_ENV]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


# --- laya-qual merge -------------------------------------------------------------------------

@pytest.mark.parametrize("text, why", [
    ("{not json", "cannot read it (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
    ('{"format": "laya-qual-evidence/v0"}', f"not a {EVIDENCE_FORMAT} file (laya-qual run --shard K/N writes one)"),
    ("[]", f"not a {EVIDENCE_FORMAT} file (laya-qual run --shard K/N writes one)"),
], ids=["unreadable", "other_format", "list"])
def test_merge_refuses_a_file_that_is_not_shard_evidence(tmp_path, text, why):
    """Unreadable JSON, or JSON of another format, is refused naming the file (exit 4)."""
    path = tmp_path / "shard.json"
    path.write_text(text)
    refused(cli("merge", path, "--out", tmp_path / "r.jsonl"), 4, f"merge refused: {path}: {why}")


@pytest.mark.slow
def test_merge_refuses_the_evidence_of_an_unsharded_run(evidence, tmp_path):
    """Evidence without a shard (a plain --laya-evidence-out run) is not a shard of anything."""
    path = edited_evidence(evidence, tmp_path / "whole.json", lambda doc: doc["selection"].update(shard=None))
    refused(cli("merge", path, "--out", tmp_path / "r.jsonl"), 4,
            f"merge refused: {path}: the evidence of an unsharded run, not of a shard (laya-qual run --shard K/N)")


def test_merge_refuses_a_test_that_two_shards_ran(evidence, tmp_path):
    """Shards 1/2 and 2/2 that both list the same tests: the first test found twice is named with both shards."""
    def as_shard(k):
        return lambda doc: doc["selection"]["shard"].update(index=k, count=2)
    first = edited_evidence(evidence, tmp_path / "one.json", as_shard(1))
    second = edited_evidence(evidence, tmp_path / "two.json", as_shard(2))
    refused(cli("merge", first, second, "--out", tmp_path / "r.jsonl"), 4,
            f"merge refused: test {TESTS[0]} is in shard 1/2 ({first}) and in shard 2/2 ({second})")


def test_merge_refuses_a_shard_that_recorded_tests_outside_its_part(evidence, tmp_path):
    """A shard with records of tests it was not assigned is named, with those tests."""
    path = edited_evidence(evidence, tmp_path / "s.json",
                           lambda doc: doc["selection"]["shard"].update(tests=[TESTS[1]]))
    refused(cli("merge", path, "--out", tmp_path / "r.jsonl"), 4,
            f"merge refused: shard 1/1 ({path}) recorded tests outside its shard: {[TESTS[0]]}")


def test_merge_refuses_shards_that_leave_a_selected_test_out(evidence, tmp_path):
    """A selected test that no shard was assigned: counted, with an example."""
    path = edited_evidence(evidence, tmp_path / "s.json",
                           lambda doc: doc["selection"]["tests"].append("test_project.py::test_gone"))
    refused(cli("merge", path, "--out", tmp_path / "r.jsonl"), 4,
            "merge refused: 1 selected test(s) in no shard (e.g. test_project.py::test_gone)")


def test_merge_with_no_evidence_at_all_is_refused():
    """merge() given no file (the command needs one; the function says so itself)."""
    from laya_qual.release.merge import MergeError, merge

    with pytest.raises(MergeError, match=r"^no shard evidence given$"):
        merge([])


def test_merge_without_a_key_cannot_create_the_development_key(evidence, tmp_path, clean_env):
    """No --key and no $LAYA_QUAL_SIGNING_KEY: the dev key is made on first use; where it cannot be, exit 1 says why."""
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory would be")
    clean_env.setenv("XDG_CACHE_HOME", str(blocker))
    out = tmp_path / "r.jsonl"
    refused(cli("merge", evidence, "--out", out), 1,
            f"cannot create the development key: {blocker / 'laya-qual' / 'dev-key.pub'}: cannot be written "
            "(Not a directory)")
    assert not out.exists()


def test_merge_with_a_signer_uri_whose_public_key_is_missing(evidence, tmp_path, clean_env):
    """A signer URI's public key file that cannot be read is named as such (not as a signer
    failure), before anything is merged: a bad command line."""
    missing = tmp_path / "missing.pub"
    clean_env.setenv(PUBLIC_KEY_ENV, str(missing))
    refused(cli("merge", evidence, "--key", "file2:/nonexistent/key", "--out", tmp_path / "r.jsonl"), 2,
            f"--key file2:/nonexistent/key: {missing}: cannot read public key (No such file or directory); "
            f"set ${PUBLIC_KEY_ENV} to the signer's PEM public key")


def test_merge_with_a_public_key_beside_the_key_that_is_not_its_half(evidence, keys, tmp_path):
    """The report is verified with KEY.pub: one that is not the key's half is refused before
    anything is merged or written (exit 2), naming both keyids."""
    key = tmp_path / "key"
    keygen(key)
    signer = load_signer(key).public_key.keyid
    Path(f"{key}.pub").write_bytes(Path(f"{keys[1]}.pub").read_bytes())
    out = tmp_path / "r.jsonl"
    refused(cli("merge", evidence, "--key", key, "--out", out, "--durations", tmp_path / "d.json"), 2,
            f"--key {key}: {key}.pub is not its public key (keyid {keyid(Path(f'{keys[1]}.pub'))[:16]}, "
            f"the key's {signer[:16]}); put the matching KEY.pub beside it")
    assert not out.exists()


def test_merge_overwrites_the_report_an_earlier_merge_left_at_its_out(evidence, keys, tmp_path):
    """`--out` is "bundle path, overwritten": a second merge to the same path signs, verifies
    and shows its own report (signed by another key here), not the earlier one."""
    out = tmp_path / "r.jsonl"
    for key in keys:
        result = cli("merge", evidence, "--key", key, "--out", out, "--durations", tmp_path / "d.json")
        assert result.exit_code == 3 and "WARNED" in result.output, result.output
    assert {env["signatures"][0]["keyid"] for env in map(json.loads, out.read_text().splitlines())} == {
        keyid(Path(f"{keys[1]}.pub"))}


# --- laya-qual run: refused before any pytest, or when the first pass fails ----------------

def test_run_shard_needs_a_hypothesis_seed(clean_env):
    """Every shard of a run must use one seed: --shard without --hypothesis-seed after `--` is a usage error."""
    refused(cli("run", "--shard", "1/2", "--", BOGUS), 2,
            "--shard needs --hypothesis-seed after `--`: every shard of a run uses the same seed")


def test_run_refuses_a_malformed_shard(clean_env):
    """--shard 0/2 is not K/N with 1 <= K <= N: exit 2 with the shard parser's reason."""
    refused(cli("run", "--shard", "0/2", "--", "--hypothesis-seed=1", BOGUS), 2,
            "--shard '0/2': expected K/N with 1 <= K <= N, e.g. 2/5")


@pytest.mark.parametrize("option", ["--kill-rate", "--coverage"])
def test_run_shard_sends_suite_figures_to_merge(clean_env, tmp_path, option):
    """A shard signs nothing, so the figures that go into a signed report are refused with it."""
    figure = tmp_path / "figure.json"
    figure.write_text("{}")
    refused(cli("run", "--shard", "1/2", option, figure, "--", "--hypothesis-seed=1", BOGUS), 2,
            "--kill-rate and --coverage go to `laya-qual merge`, which signs the report")


def test_run_with_a_signer_uri_but_no_public_key(clean_env):
    """A signer URI needs $LAYA_QUAL_SIGNING_PUBLIC_KEY to verify what it signed: a bad command line
    (exit 2) before any pass runs."""
    refused(cli("run", "--key", "file2:/nonexistent/key", "--", BOGUS), 2,
            f"--key file2: a signer URI needs its public key in ${PUBLIC_KEY_ENV}")


def test_run_shard_one_whose_suite_pass_fails(clean_env, tmp_path):
    """Shard 1 runs both passes; a suite pass that pytest refuses ends the shard with exit 4 and no evidence."""
    out = tmp_path / "shard.json"
    refused(cli("run", "-n", "0", "--shard", "1/2", "--out", out, "--", "--hypothesis-seed=1", BOGUS), 4,
            "the suite pass ended with pytest exit status 4; no report written")
    assert not out.exists()


def test_run_later_shard_whose_suite_pass_fails(clean_env, tmp_path):
    """Shard 2 of 2 runs the suite pass only; pytest refusing it ends the shard with exit 4 and no evidence."""
    out = tmp_path / "shard.json"
    refused(cli("run", "-n", "0", "--shard", "2/2", "--out", out, "--", "--hypothesis-seed=1", BOGUS), 4,
            "the shard's suite pass ended with pytest exit status 4; no evidence written")
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize(("extra", "status"), [(BOGUS, 4), ("--version", 0)])
def test_run_plan_whose_collection_fails(clean_env, extra, status):
    """--plan collects the selection in a pytest of its own; when that fails, exit 1 says how to see why.
    Failing is either: a pytest exit status other than 0, 1 or 5, or no listing written, which a
    pytest that exits 0 without collecting (``--version``) leaves."""
    refused(cli("run", "--plan", "--", extra), 1,
            f"collecting the selection failed (pytest exit status {status}); run "
            "`python -m pytest -p laya_qual --laya-qualify --collect-only` to see why")


def test_mutate_refuses_an_unknown_defect_id(clean_env, tmp_path):
    """--only names catalogue defects: an unknown id is refused (exit 1) before anything is copied or run."""
    out = tmp_path / "mutation.json"
    refused(cli("mutate", "--only", "no.such.defect", "--output", out, "--timeout", "1"), 1,
            "unknown defect id(s) ['no.such.defect']")
    assert not out.exists()


# --- show ------------------------------------------------------------------------------------

def test_show_with_the_wrong_public_key_fails_verification(bundle, keys):
    """show --public-key verifies first: another key's public half gives exit 1 and the verifier's reason."""
    refused(cli("show", bundle, "--public-key", f"{keys[1]}.pub"), 1,
            f"verification failed: {bundle}: line 1: signed by keyid {keyid(Path(f'{keys[0]}.pub'))[:16]}..., "
            f"not by the given key {keyid(Path(f'{keys[1]}.pub'))[:16]}...")


def test_show_a_bundle_without_a_laya_qual_statement(bundle, tmp_path):
    """A bundle of only the test-result line has nothing to summarize: exit 1 naming it."""
    only = tmp_path / "only.jsonl"
    only.write_text(bundle.read_text().splitlines(keepends=True)[0])
    refused(cli("show", only), 1, f"{only}: no laya-qual statement")


@pytest.mark.parametrize("fmt", [[], ["--markdown"]])
def test_show_a_malformed_predicate_is_one_line(bundle, tmp_path, fmt):
    """A predicate without its environment cannot be summarized: exit 1 naming the bundle and the missing key."""
    broken = resign(bundle, tmp_path / "broken.jsonl", None, lambda tr, laya: laya["predicate"].pop("environment"))
    refused(cli("show", broken, *fmt), 1, f"{broken}: laya-qual predicate is malformed (KeyError('environment'))")


def test_show_html_of_a_malformed_predicate_writes_nothing(bundle, tmp_path):
    """show --html: a predicate without its claims list is refused naming the bundle; no page is written."""
    broken = resign(bundle, tmp_path / "broken.jsonl", None, lambda tr, laya: laya["predicate"].pop("claims"))
    page = tmp_path / "page.html"
    refused(cli("show", broken, "--html", page), 1, f"{broken}: laya-qual predicate is malformed (KeyError('claims'))")
    assert not page.exists()


def test_show_html_says_when_no_benchmark_was_measured(bundle, tmp_path):
    """A report without benchmarks gets the sentence saying so under its Benchmarks heading."""
    page = tmp_path / "page.html"
    assert cli("show", bundle, "--html", page).exit_code == 0
    html = page.read_text()
    benchmarks = html[html.index('id="benchmarks"'):]
    assert benchmarks.startswith('id="benchmarks">Benchmarks</h2><p class="not-recorded">'
                                 'No benchmark was measured in this report.</p>'), benchmarks[:200]


def test_show_html_shows_why_a_head_has_no_tasks(bundle, tmp_path):
    """A heads entry that records an error (head.json unreadable as a head) shows that error in its section."""
    why = "head.json: not JSON (Expecting value: line 1 column 1 (char 0))"
    odd = resign(bundle, tmp_path / "odd.jsonl", None, with_head({"kind": None, "tasks": [], "error": why}))
    page = tmp_path / "page.html"
    assert cli("show", odd, "--html", page).exit_code == 0
    html = page.read_text()
    assert f'<h3>{HEAD} (kind unknown)</h3><p class="not-recorded">{why}</p></section>' in html


def test_show_markdown_warns_of_a_development_key(bundle, tmp_path):
    """A report signed with a development key says so in bold right under the signature line."""
    from laya_qual.report.summary import DEV_KEY_NOTE

    def dev(tr, laya):
        laya["predicate"]["signing"]["developmentKey"] = True
    marked = resign(bundle, tmp_path / "dev.jsonl", None, dev)
    lines = cli("show", marked, "--markdown").output.splitlines()
    assert lines[2:6] == ["**Signature:** NOT CHECKED (pass --public-key, or run laya-qual verify).", "",
                          f"**Warning:** {DEV_KEY_NOTE}", ""]
    assert "**Warning:**" not in cli("show", bundle, "--markdown").output


@pytest.mark.parametrize("append", [False, True])
def test_show_output_is_utf8_whatever_the_locale(bundle, tmp_path, append):
    """show --output [--append] writes UTF-8 even where the locale's encoding is ASCII (a
    POSIX locale, neither coerced nor in UTF-8 mode): a benchmark in microseconds reads "µs"."""
    def fast(tr, laya):
        laya["predicate"]["benchmarks"] = [{"test": "test_project.py::test_fast", "median": 4.2e-6, "rounds": 5}]
    shown = resign(bundle, tmp_path / "fast.jsonl", None, fast)
    out = tmp_path / "summary.md"
    out.write_bytes(b"before\n")
    script = ("import codecs, locale\nassert codecs.lookup(locale.getpreferredencoding(False)).name == 'ascii'\n"
              "from laya_qual.cli import main\nmain()")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    env |= {"LC_ALL": "POSIX", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    proc = subprocess.run([sys.executable, "-c", script, "show", str(shown), "--markdown", "--output", str(out),
                           *(["--append"] if append else [])], capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, (proc.stdout + proc.stderr).decode(errors="replace")
    written = out.read_bytes().decode("utf-8")
    assert written.startswith("before\n") == append and written.count("## Qualification report") == 1
    assert "| `test_project.py::test_fast` | 4.20 µs | min not recorded – max not recorded, IQR not recorded, 5 rounds |" \
        in written


# --- verify: the bundle's lines and statements ------------------------------------------------

def test_verify_refuses_a_blank_line(bundle, keys, tmp_path):
    """A bundle is one JSON object per line: a blank line is refused by its number."""
    lines = bundle.read_text().splitlines(keepends=True)
    blank = tmp_path / "blank.jsonl"
    blank.write_text(lines[0] + "\n" + lines[1])
    refused(cli("verify", blank, "--public-key", f"{keys[0]}.pub"), 1,
            f"verification failed: {blank}: line 2 is not one JSON object (blank line or surrounding whitespace)")


def test_verify_refuses_a_line_that_is_not_an_object(bundle, keys, tmp_path):
    """A JSON line that is not an object cannot be a DSSE envelope: refused by its number."""
    listed = tmp_path / "listed.jsonl"
    listed.write_text(bundle.read_text() + "[]\n")
    refused(cli("verify", listed, "--public-key", f"{keys[0]}.pub"), 1,
            f"verification failed: {listed}: line 3: not a DSSE envelope (not a JSON object)")


def test_verify_refuses_a_signature_that_is_not_a_string(bundle, keys, tmp_path):
    """An envelope of ours whose signature is a number is refused by its line, not a traceback."""
    lines = bundle.read_text().splitlines()
    envelope = json.loads(lines[0])
    envelope["signatures"][0]["sig"] = 5
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps(envelope, separators=(",", ":")) + "\n" + lines[1] + "\n")
    refused(cli("verify", odd, "--public-key", f"{keys[0]}.pub"), 1,
            f"verification failed: {odd}: line 1: signature is not a string")


def test_verify_ignores_a_payload_that_is_not_an_object(bundle, keys, tmp_path):
    """An in-toto line whose payload is a JSON list (even one that spells predicateType) is
    someone else's: ignored and counted, as the bundle spec asks."""
    lie = [["predicateType", LAYA_TYPE]]
    extra = {"payload": base64.b64encode(json.dumps(lie).encode()).decode(),
             "payloadType": PAYLOAD_TYPE, "signatures": []}
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(bundle.read_text() + json.dumps(extra, separators=(",", ":")) + "\n")
    result = cli("verify", mixed, "--public-key", f"{keys[0]}.pub", "--require-result", "FAILED")
    assert result.exit_code == 0, result.output
    assert result.output.rstrip().endswith("; 1 unrecognised line(s) ignored")


def test_show_skips_a_line_without_a_payload(bundle, tmp_path):
    """show reads statements unverified and skips lines that carry none, first line included."""
    padded = tmp_path / "padded.jsonl"
    padded.write_text('{"payloadType":"x"}\n' + bundle.read_text())
    shown, plain = cli("show", padded), cli("show", bundle)
    assert shown.exit_code == plain.exit_code == 0
    assert shown.output == plain.output.replace(str(bundle), str(padded))


@pytest.mark.parametrize("statement, why", [
    ({"predicateType": LAYA_TYPE, "predicate": {}}, "not an in-toto Statement v1"),
    ({"_type": STATEMENT_TYPE, "subject": [], "predicateType": LAYA_TYPE, "predicate": {}},
     "statement has no subjects"),
    ({"_type": STATEMENT_TYPE, "subject": [{"name": "x", "digest": {}}], "predicateType": LAYA_TYPE,
      "predicate": {}}, "subject needs a name and a digest"),
    ({"_type": STATEMENT_TYPE, "subject": [{"name": "x", "digest": {"sha256": "00"}}], "predicateType": LAYA_TYPE,
      "predicate": []}, "statement needs predicateType and a predicate object"),
])
def test_verify_refuses_a_signed_line_that_is_no_statement(keys, tmp_path, statement, why):
    """A correctly signed line of ours whose payload is not an in-toto statement is refused by its line."""
    odd = tmp_path / "odd.jsonl"
    write_bundle(odd, (canonical(statement),), load_signer(keys[0]))
    refused(cli("verify", odd, "--public-key", f"{keys[0]}.pub"), 1, f"verification failed: {odd}: line 1: {why}")


# --- claims ----------------------------------------------------------------------------------

def test_claims_markdown_and_json_exclude_each_other():
    """The two output formats cannot be asked for at once: exit 2."""
    refused(cli("claims", "--markdown", "--json"), 2, "--markdown and --json exclude each other")


def test_claims_plain_lists_every_claim_with_its_statement():
    """Without a format: one line per claim, in catalogue order, ids padded to the longest."""
    result = cli("claims")
    width = max(len(cid) for cid in CLAIMS)
    assert result.exit_code == 0
    assert result.output.splitlines() == [f"{cid.ljust(width)}  {c.statement}" for cid, c in CLAIMS.items()]


# --- compare ---------------------------------------------------------------------------------

def test_compare_refuses_a_head_task_without_a_string_name(bundle, keys, tmp_path):
    """A verified report whose head task is named by a number cannot be compared: exit 1 naming OLD and why."""
    odd = resign(bundle, tmp_path / "odd.jsonl", keys[0], with_head({"kind": "float32", "tasks": [{"name": 5}]}))
    refused(cli("compare", odd, bundle, "--public-key", f"{keys[0]}.pub"), 1,
            f"OLD bundle {odd}: laya-qual predicate is malformed "
            f"(TypeError('task name 5 of {HEAD} is not a string'))")


def test_compare_shows_a_head_error_as_a_row(bundle, keys, tmp_path):
    """A head whose head.json could not be read as a head compares by its error."""
    old = resign(bundle, tmp_path / "old.jsonl", keys[0], with_head({"kind": None, "tasks": [], "error": "one"}))
    new = resign(bundle, tmp_path / "new.jsonl", keys[0], with_head({"kind": None, "tasks": [], "error": "two"}))
    result = cli("compare", old, new, "--public-key", f"{keys[0]}.pub", "--json")
    assert result.exit_code == 0, result.output
    rows = [r for r in json.loads(result.output)["rows"] if r["section"] == "heads"]
    assert [(r["item"], r["figure"], r["old"], r["new"], r["changed"]) for r in rows] == [
        (HEAD, "kind", None, None, False), (HEAD, "error", "one", "two", True)]


def test_compare_notes_a_report_made_before_heads_were_recorded(bundle, keys, tmp_path):
    """A report without a heads field has none to compare, and the text says so."""
    old = resign(bundle, tmp_path / "old.jsonl", keys[0], lambda tr, laya: laya["predicate"].pop("heads"))
    note = "  (a report made before laya-qual recorded heads has none to compare)\n"
    with_note = cli("compare", old, bundle, "--public-key", f"{keys[0]}.pub")
    assert with_note.exit_code == 0 and note in with_note.output
    assert note not in cli("compare", bundle, bundle, "--public-key", f"{keys[0]}.pub").output


def test_compare_markdown_has_suite_figures_and_thresholds(bundle, keys):
    """Release-note markdown lists the suite figures (the traceability figure here) and one row per --fail-on."""
    result = cli("compare", bundle, bundle, "--public-key", f"{keys[0]}.pub", "--markdown",
                 "--fail-on", "verdict", "--fail-on", "kill-rate:-1%")
    assert result.exit_code == 0, result.output
    md = result.output
    suite = md[md.index("\n### Suite figures\n"):md.index("\n### Thresholds\n")].splitlines()
    assert suite[1:5] == ["### Suite figures", "", "| Suite | Figure | Old | New | Change | |",
                          "|---|---|---|---|---|---|"]
    assert suite[5].startswith("| `traceability` | ")
    thresholds = md[md.index("\n### Thresholds\n"):].splitlines()
    assert thresholds[1:6] == ["### Thresholds", "", "| --fail-on | Status | Why |", "|---|---|---|",
                               "| `verdict` | held |  |"]
    assert thresholds[6] == "| `kill-rate:-1%` | not checked | no rate in either report |"


def test_merge_still_verifies_and_shows_its_report_when_the_durations_cannot_be_kept(evidence, keys, tmp_path):
    """The durations store is a convenience: one that cannot be written (its folder is a
    file) is a yellow warning on stderr, and the merged report is verified and shown."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    out = tmp_path / "report.intoto.jsonl"
    result = CliRunner().invoke(main, ["merge", str(evidence), "--key", str(keys[0]), "--out", str(out),
                                       "--durations", str(blocked / "durations.json")])
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    assert f"laya-qual: could not record the durations in {blocked / 'durations.json'}" in result.stderr
    assert out.exists() and "WARNED" in result.stdout


@pytest.mark.slow
def test_laya_predict_into_a_full_disk_is_one_error_line(tmp_path):
    """Before: `laya predict > /dev/full` ended in an OSError traceback (and a second error at exit)."""
    from laya_qual.synth import write_artifact

    artifact = write_artifact(tmp_path / "a", seed=11, head_kind="float32", base_seed=3)
    line = json.dumps({"adapter": "h", "task": "answer", "question": "is it here", "options": ["yes", "no"]})
    with open("/dev/full", "wb") as full:
        run = subprocess.run([sys.executable, "-m", "laya.cli", "predict", "--base", str(artifact), "--adapter",
                               f"h={artifact}"], input=(line + "\n").encode(), stdout=full, stderr=subprocess.PIPE,
                              timeout=120)
    assert run.returncode == 1 and run.stderr.decode().splitlines() == [
        "Error: cannot write the results (No space left on device); the first 0 lines were written"], run.stderr
