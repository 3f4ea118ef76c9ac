"""docs/cli.md is the CLI reference the suite holds `laya` to (cli.reference), rendered; the
reference file is the one the installed suite ships, and its writer reproduces it byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

from laya_qual.suite import cli_reference

ROOT = Path(__file__).resolve().parents[1]


def test_docs_cli_md_is_the_rendered_reference():
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == cli_reference.markdown(cli_reference.load()), \
        "docs/cli.md is stale: python -m laya_qual.suite.cli_reference --markdown > docs/cli.md"


def test_the_reference_file_is_what_its_writer_writes():
    """Hand edits that --write would not produce (order, layout) are caught, so a regenerated
    reference shows only real changes."""
    text = cli_reference.REFERENCE.read_text(encoding="utf-8")
    assert cli_reference.dumps(cli_reference.load()) == text
    assert json.loads(text)["format"] == cli_reference.FORMAT


def test_the_reference_is_shipped_with_the_suite():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"laya_qual.suite" = ["laya-cli-reference.json"]' in pyproject
    # The file the suite reads (installed or not) is the project's qualification/ one.
    assert cli_reference.REFERENCE.read_bytes() == (ROOT / "qualification" / cli_reference.REFERENCE.name).read_bytes()
