"""cli.reference: every `laya` command declares exactly the options, arguments, types, defaults and
help texts of the CLI reference, and its `--help` tells the user each of them.

Oracle: laya-cli-reference.json, shipped with the suite and changed only on purpose
(``python -m laya_qual.suite.cli_reference --write``; docs/cli.md is rendered from it). The live
surface is read from click's declarations through the `laya` group, lazily loaded commands
resolved as a user's command line resolves them; what the user reads is each command's `--help`
at a fixed terminal width, run in-process.
"""

from __future__ import annotations

import copy

import pytest
from click.testing import CliRunner

from laya.cli import main as laya_cli
from laya_qual.suite.cli_reference import (TERMINAL_WIDTH, commands_on, describe, differences, help_problems,
                                           load)

REFERENCE = load()
# The commands README.md and docs/cli.md list, groups included: the reference may not lose one.
COMMANDS = ("laya", "laya base", "laya base import", "laya evolve", "laya evolve check", "laya evolve plan",
            "laya info", "laya predict", "laya train")


@pytest.mark.laya_claim("cli.reference")
def test_every_command_declares_what_the_reference_says():
    assert sorted(REFERENCE) == sorted(COMMANDS)
    found = differences(describe(), REFERENCE)
    assert not found, "the laya CLI differs from qualification/laya-cli-reference.json:\n" + "\n".join(found)


@pytest.mark.laya_claim("cli.reference")
@pytest.mark.parametrize("path", COMMANDS)
def test_help_says_every_option_its_help_and_its_default(path, monkeypatch):
    # click (>= 8.1.8) caches a command's help option with the names of the first context that asked:
    # a test that invoked `evolve` alone leaves it without -h. Here, as in a fresh `laya` process, none is.
    for command in commands_on(path):
        monkeypatch.setattr(command, "_help_option", None, raising=False)
    done = CliRunner().invoke(laya_cli, [*path.split()[1:], "--help"], prog_name="laya",
                              terminal_width=TERMINAL_WIDTH)
    assert done.exit_code == 0, done.output
    found = help_problems(path, REFERENCE[path], done.output)
    assert not found, "\n".join(found) + "\n--- laya --help said:\n" + done.output


@pytest.mark.laya_claim("cli.reference")
def test_the_comparison_names_command_parameter_and_field():
    """The comparison can fail: the reference with one default, one help text, one show_default and
    one Path flag changed is told apart from itself, each named by command, parameter and field."""
    assert differences(copy.deepcopy(REFERENCE), REFERENCE) == []
    altered = copy.deepcopy(REFERENCE)
    params = {p["name"]: p for p in altered["laya evolve check"]["params"]}
    params["microbatch"]["default"] = 3
    params["json_path"]["help"] = None
    train = {p["name"]: p for p in altered["laya train"]["params"]}
    train["seed"]["show_default"] = None
    train["warm_start_dir"]["type"]["exists"] = False
    assert sorted(differences(altered, REFERENCE)) == [
        "laya evolve check --json: help is None, the reference says "
        "'also write the figures, the per-update rows and the state digests to this JSON file'",
        "laya evolve check --microbatch: default is 3, the reference says 2",
        "laya train --seed: show_default is None, the reference says True",
        "laya train --warm-start: type.exists is False, the reference says True",
    ]
