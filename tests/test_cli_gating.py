"""Both command lines for scripts: exit statuses that gate, JSON output, --version and
-h, and a `laya --help` that answers without importing torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from laya.cli import LAZY_COMMANDS, EXIT_LINES_FAILED
from laya.cli import main as laya_main
from laya_qual.claims import CLAIMS
from laya_qual.cli import main as qual_main
from laya_qual.synth import write_artifact


def invoke(main, *args: str, input: bytes | None = None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    return write_artifact(tmp_path_factory.mktemp("cli") / "a", seed=5, head_kind="float32")


def test_laya_help_does_not_import_torch():
    code = ("import sys; from laya.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO TORCH')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.rstrip().endswith("NO TORCH"), out.stdout
    for name in LAZY_COMMANDS:
        assert f"  {name} " in out.stdout


def test_lazy_command_help_matches_the_command():
    """`laya --help` lists lazily loaded commands by a copy of their help: keep it true."""
    import click

    ctx = click.Context(laya_main)
    for name, (_, text) in LAZY_COMMANDS.items():
        assert laya_main.get_command(ctx, name).help == text


@pytest.mark.parametrize("main, prog", [(laya_main, "laya"), (qual_main, "laya-qual")])
def test_version_and_short_help(main, prog):
    from importlib.metadata import version

    assert invoke(main, "--version").output == f"{prog}, version {version('laya-qual')}\n"
    assert invoke(main, "-h").output == invoke(main, "--help").output
    assert invoke(main, "-h").output.startswith("Usage:")


def test_predict_exit_status_counts_failed_lines(artifact):
    good = json.dumps({"adapter": "a", "task": "answer", "question": "which word", "options": ["x", "y"]})
    lines = f"{good}\n{{not json\n{good}\n".encode()
    args = ("predict", "--base", artifact, "--adapter", f"a={artifact}")
    failing = invoke(laya_main, *args, input=lines)
    assert failing.exit_code == EXIT_LINES_FAILED
    assert "lines: 3, failed: 1" in failing.stderr
    assert [("error" in json.loads(line)) for line in failing.stdout.splitlines()] == [False, True, False]
    assert invoke(laya_main, *args, "--allow-errors", input=lines).exit_code == 0
    clean = invoke(laya_main, *args, input=f"{good}\n".encode())
    assert clean.exit_code == 0 and "lines: 1, failed: 0" in clean.stderr


def test_info_json(artifact):
    info = json.loads(invoke(laya_main, "info", artifact, "--json").output)
    assert info["head"] == "float32" and len(info["digest"]) == 64
    assert info["budgets"] == {"sequence": 96, "options": 4}
    assert {f["role"] for f in info["files"]} >= {"head_weights", "tokenizer"}
    assert all(len(f["sha256"]) == 64 for f in info["files"])


def test_claims_json():
    listed = json.loads(invoke(qual_main, "claims", "--json").output)
    assert [c["id"] for c in listed] == list(CLAIMS)
    assert listed[0] == {"id": CLAIMS[listed[0]["id"]].id, "area": CLAIMS[listed[0]["id"]].area,
                         "statement": CLAIMS[listed[0]["id"]].statement}
