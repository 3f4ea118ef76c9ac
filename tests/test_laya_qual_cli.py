"""`laya-qual`, the harness's command line, declares exactly the options, arguments, types, defaults
and help texts of its reference, and each command's `--help` tells the user each of them.

Oracle: tests/laya-qual-cli-reference.json, changed only on purpose, when the CLI does::

    python tests/test_laya_qual_cli.py --write    # rewrites the reference and docs/laya-qual-cli.md

The reading, comparison, `--help` check and rendering are the suite's own for `laya`
(``laya_qual.suite.cli_reference``, claim `cli.reference`); this is a test of the project,
not a claim: `laya-qual` is the harness, not the runtime the suite qualifies. All in-process
(CliRunner at a fixed terminal width), nothing spawned.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from laya_qual import __version__
from laya_qual.cli import main as laya_qual_cli
from laya_qual.suite.cli_reference import (TERMINAL_WIDTH, commands_on, describe, differences, dumps, help_problems,
                                           load, markdown)

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_FILE = Path(__file__).with_name("laya-qual-cli-reference.json")
DOCS = ROOT / "docs" / "laya-qual-cli.md"
PROG = "laya-qual"
# The commands README.md and docs/laya-qual-cli.md name: the reference may not lose one.
COMMANDS = ("laya-qual", "laya-qual claims", "laya-qual compare", "laya-qual coverage", "laya-qual keygen",
            "laya-qual merge", "laya-qual mutate", "laya-qual run", "laya-qual show", "laya-qual verify")
PREAMBLE = ("# The `laya-qual` command line", "",
            "Generated from `tests/laya-qual-cli-reference.json` by `python tests/test_laya_qual_cli.py --write`; "
            "do not edit by hand. tests/test_laya_qual_cli.py checks that `laya-qual` declares exactly these "
            "commands, options, types, defaults and help texts, and that each command's `--help` says them.", "")


def live() -> dict:
    """Every `laya-qual` command as the reference records it, read from click's declarations."""
    return describe(laya_qual_cli, PROG)


@pytest.fixture(scope="module")
def reference() -> dict:
    return load(REFERENCE_FILE)


def test_every_command_declares_what_the_reference_says(reference):
    assert sorted(reference) == sorted(COMMANDS)
    found = differences(live(), reference)
    assert not found, ("laya-qual's CLI differs from tests/laya-qual-cli-reference.json (a change on purpose: "
                       "python tests/test_laya_qual_cli.py --write):\n" + "\n".join(found))


@pytest.mark.parametrize("path", COMMANDS)
def test_help_says_every_option_its_help_and_its_default(path, reference, monkeypatch):
    # click caches a command's help option with the names of the first context that asked: a test
    # that invoked `verify` alone leaves it without -h. Here, as in a fresh `laya-qual` process, none is.
    for command in commands_on(path, laya_qual_cli):
        monkeypatch.setattr(command, "_help_option", None, raising=False)
    done = CliRunner().invoke(laya_qual_cli, [*path.split()[1:], "--help"], prog_name=PROG,
                              terminal_width=TERMINAL_WIDTH)
    assert done.exit_code == 0, done.output
    found = help_problems(path, reference[path], done.output)
    assert not found, "\n".join(found) + "\n--- laya-qual --help said:\n" + done.output


def test_every_option_says_what_it_does():
    """Also once the reference is rewritten: an option needs a help text (arguments are named in the
    command's own)."""
    bare = [f"{path} {max(p['opts'], key=len)}" for path, entry in live().items() for p in entry["params"]
            if p["kind"] == "option" and not (p["help"] or "").strip()]
    assert not bare, f"options without a help text: {bare}"


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_names_the_program_and_its_version(flag):
    done = CliRunner().invoke(laya_qual_cli, [flag], prog_name=PROG)
    assert (done.exit_code, done.output) == (0, f"laya-qual, version {__version__}\n")


def test_the_comparison_names_command_parameter_and_field(reference):
    """The comparison tells a changed default, help text, show_default, type and Path flag apart
    from the reference, each named by command, parameter and field."""
    assert differences(copy.deepcopy(reference), reference) == []
    altered = copy.deepcopy(reference)
    mutate = {p["name"]: p for p in altered["laya-qual mutate"]["params"]}
    mutate["confirm"]["default"] = False
    mutate["workers"]["show_default"] = False
    mutate["equivalents"]["type"]["exists"] = False
    verify = {p["name"]: p for p in altered["laya-qual verify"]["params"]}
    verify["public_key"]["help"] = None
    verify["require_result"]["type"]["choices"] = ["PASSED", "FAILED"]
    assert sorted(differences(altered, reference)) == [
        "laya-qual mutate --confirm: default is False, the reference says True",
        "laya-qual mutate --equivalents: type.exists is False, the reference says True",
        "laya-qual mutate --workers: show_default is False, the reference says True",
        "laya-qual verify --public-key: help is None, the reference says 'PEM public key of the signer'",
        "laya-qual verify --require-result: type.choices is ['PASSED', 'FAILED'], "
        "the reference says ['PASSED', 'WARNED', 'FAILED']",
    ]


def test_the_reference_file_is_what_its_writer_writes(reference):
    """Hand edits --write would not produce (order, layout) are caught: a regenerated reference
    shows only real changes."""
    assert dumps(reference) == REFERENCE_FILE.read_text(encoding="utf-8")


def test_docs_laya_qual_cli_md_is_the_rendered_reference(reference):
    assert DOCS.read_text(encoding="utf-8") == markdown(reference, PREAMBLE), \
        "docs/laya-qual-cli.md is stale: python tests/test_laya_qual_cli.py --write"


@pytest.mark.parametrize("args, message", [
    (["run", "-n", "-2", "--plan"], "Invalid value for '--workers' / '-n': -2 is not in the range x>=0."),
    (["coverage", "--workers", "-1"], "Invalid value for '--workers' / '-n': -1 is not in the range x>=0."),
    (["coverage", "--timeout", "0"], "Invalid value for '--timeout': 0.0 is not in the range x>0."),
    (["mutate", "--workers", "-1"], "Invalid value for '--workers' / '-n': -1 is not in the range x>=0."),
    (["mutate", "--jobs", "0"], "Invalid value for '--jobs': 0 is not in the range x>=1."),
    (["mutate", "--seeds", "0"], "Invalid value for '--seeds': 0 is not in the range x>=1."),
    (["mutate", "--timeout", "-5"], "Invalid value for '--timeout': -5.0 is not in the range x>0."),
    (["mutate", "--require-rate", "1.5"], "Invalid value for '--require-rate': 1.5 is not in the range 0<=x<=1."),
])
def test_a_count_or_time_out_of_its_range_is_a_usage_error(args, message):
    """Before any work: -n -2 was planned as one worker, a negative timeout ended the coverage
    run as 'not green', --jobs 0 failed after the whole baseline."""
    result = CliRunner().invoke(laya_qual_cli, args)
    assert result.exit_code == 2 and message in result.output, result.output


def write() -> None:
    """Rewrite the reference from the live CLI, and docs/laya-qual-cli.md from the reference."""
    commands = live()
    REFERENCE_FILE.write_text(dumps(commands), encoding="utf-8")
    DOCS.write_text(markdown(commands, PREAMBLE), encoding="utf-8")
    print(f"wrote {REFERENCE_FILE} and {DOCS}", file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_laya_qual_cli.py --write")
    write()
