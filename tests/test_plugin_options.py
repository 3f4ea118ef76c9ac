"""The pytest plugin's command-line options and ini names, as `pytest -p laya_qual --help`
prints them, are exactly what docs/pytest-options.md shows: an option lost, its value's
name (metavar), choices or help text changed is a documented interface changed.

Oracle: the doc, changed only on purpose, when the plugin's options do::

    python tests/test_plugin_options.py --write    # rewrites docs/pytest-options.md

The help is read from a real `python -m pytest --help` at a fixed terminal width.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "pytest-options.md"
COLUMNS = "100"
GROUP = "laya qualification:"
FENCE = "```"
PREAMBLE = """# The pytest plugin's options

`pytest -p laya_qual` adds these command-line options (group "laya qualification") and ini
names. Generated from `pytest -p laya_qual --help` at 100 columns by
`python tests/test_plugin_options.py --write`; do not edit by hand: tests/test_plugin_options.py
checks that the plugin declares exactly this. What each produces is in docs/report-format.md.
"""


def help_text(cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")} | {"COLUMNS": COLUMNS}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "-p", "no:cacheprovider", "--help"],
                          cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return proc.stdout


def sections(text: str) -> tuple[list[str], list[str]]:
    """The plugin's option group, and its ini entries (each with its continuation lines)."""
    lines = text.splitlines()
    start = lines.index(GROUP)
    end = lines.index("", start)
    options = lines[start + 1:end]
    ini, inside = [], False
    for line in lines:
        if line.startswith("  ") and not line.startswith("   "):
            inside = line.split()[0].startswith("laya_")
        elif not line.startswith("   "):
            inside = False
        if inside:
            ini.append(line)
    return options, ini


def render(text: str) -> str:
    options, ini = sections(text)
    return "\n".join([PREAMBLE, "## Options", "", FENCE, *options, FENCE, "", "## Ini names", "",
                      FENCE, *ini, FENCE, ""])


def test_the_plugin_declares_exactly_the_documented_options(tmp_path):
    options, ini = sections(help_text(tmp_path))
    assert len([line for line in options if line.startswith("  --laya-")]) >= 17
    assert [line.split()[0] for line in ini if not line.startswith("   ")] == [
        "laya_artifacts", "laya_base", "laya_report"]
    assert DOC.read_text(encoding="utf-8") == render(help_text(tmp_path)), (
        "the plugin's options differ from docs/pytest-options.md (a change on purpose: "
        "python tests/test_plugin_options.py --write)")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_plugin_options.py --write")
    DOC.write_text(render(help_text(Path.cwd())), encoding="utf-8")
