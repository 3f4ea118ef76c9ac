"""cli.help: `laya --help` lists every subcommand, those defined in torch-importing modules
included, with their own help text, and answers without importing torch (docs/decisions.md,
"Command lines": "`laya --help` without torch").

Oracle: the subcommands' click objects, imported here, click's own listing of them, and
``python -X importtime``'s list of the modules the command imported.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import import_module

import click
import pytest
from click.testing import CliRunner

import laya
from laya.cli import LAZY_COMMANDS
from laya.cli import main as laya_cli

COMMANDS = ("base", "evolve", "info", "predict", "train")  # docs: README.md's command list
TIMEOUT_S = 120.0  # a hang guard, loose enough for a loaded machine


def real_command(name: str):
    if name in LAZY_COMMANDS:
        return getattr(import_module(LAZY_COMMANDS[name][0]), name)  # each module names its command so
    return laya_cli.commands[name]


@pytest.mark.laya_claim("cli.help")
def test_help_lists_every_command_with_its_help_and_imports_no_torch():
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "laya.cli", "--help"], capture_output=True,
                         text=True, timeout=TIMEOUT_S)
    assert run.returncode == 0, run.stderr
    imported = {row.split("|")[-1].strip() for row in run.stderr.splitlines() if row.startswith("import time:")}
    assert "laya" in imported and not {m for m in imported if m.split(".")[0] == "torch"}
    listed = dict(row.split(None, 1) for row in run.stdout.split("Commands:\n", 1)[1].splitlines() if row.strip())
    assert sorted(listed) == list(COMMANDS)
    for name, text in listed.items():
        real = " ".join(real_command(name).help.split())
        assert real.startswith(text.removesuffix("...")), (name, text, real)


@pytest.mark.laya_claim("cli.help")
def test_the_command_list_is_what_click_prints_for_the_real_commands():
    """The lazily listed commands read as click's own listing of the real ones would, each
    short help cut where click cuts it, at every terminal width from 30 to 139 columns."""
    eager = click.Group("laya", commands={name: real_command(name) for name in COMMANDS})
    for width in range(30, 140):
        ours = CliRunner().invoke(laya_cli, ["--help"], terminal_width=width).output
        theirs = CliRunner().invoke(eager, ["--help"], terminal_width=width).output
        assert ours.split("Commands:\n", 1)[1] == theirs.split("Commands:\n", 1)[1], (width, ours, theirs)


@pytest.mark.laya_claim("cli.help")
@pytest.mark.parametrize("option", ["--version", "-V"])
def test_the_version_is_laya_s(option):
    done = CliRunner().invoke(laya_cli, [option])
    assert (done.exit_code, done.output) == (0, f"laya, version {laya.__version__}\n")
