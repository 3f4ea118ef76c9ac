"""`pip install laya-qual` alone: the runtime serves from a fresh virtual environment
without the qualification harness, exactly as it does in the development one.

A wheel built from this tree is installed with its runtime dependencies only into a
fresh venv (no system site-packages). There `laya predict` answers a synthetic
artifact's requests byte for byte like the development venv's runtime, neither
`import laya` nor the commands load a harness module, and `laya-qual` and
`pytest -p laya_qual` stop with one line naming the install command. Installing torch
is most of this test's time (docs/decisions.md has the figure).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from importlib.metadata import version
from pathlib import Path

import pytest

from laya_qual import HARNESS, INSTALL_HARNESS
from laya_qual.synth import write_artifact

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "laya", "plugins", "qualification", "fixtures")
RUNTIME = {"torch", "numpy", "safetensors", "tokenizers", "click"}
HARNESS_MODULES = {"_pytest", *HARNESS.values()}
# The development venv's pip acting on another venv's interpreter (that venv has no pip).
PIP = [sys.executable, "-m", "pip", "--python"]
REQUESTS = [{"adapter": "a", "task": "answer", "question": "which word", "options": ["x", "y", "z"]},
            {"adapter": "a", "task": "triage", "question": "route this one", "options": ["y", "x"]}]
# Imports laya, serves stdin with the `laya predict` command in this process, imports
# the module of every lazily loaded command (train, base, evolve), and writes the
# top-level modules the import and then the commands loaded to argv[1] (not those the
# interpreter had loaded before: coverage.py, where a measurement started it).
PROBE = """
import json, sys
from importlib import import_module
def top_level():
    return {m.split(".")[0] for m in sys.modules}
before = top_level()
import laya
loaded = {"laya": laya.__file__, "after_import": sorted(top_level() - before)}
from laya.cli import LAZY_COMMANDS, main
main(sys.argv[2:], standalone_mode=False)
for module, _ in LAZY_COMMANDS.values():
    import_module(module)
loaded["after_commands"] = sorted(top_level() - before)
with open(sys.argv[1], "w") as out:
    json.dump(loaded, out)
"""


def run(args: list, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run outside this pytest process's environment and away from the source tree, so
    a fresh venv's python imports its installed wheel, never the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON")) and k != "VIRTUAL_ENV"}
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, input=stdin, capture_output=True,
                          text=True, timeout=900)


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"{result.args}: exit {result.returncode}\n{result.stderr}"
    return result.stdout


def build_wheel(tmp: Path) -> Path:
    """`pip wheel --no-deps` of a copy of the tree (the build writes beside its sources)."""
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(ROOT / name, src / name)
    ok(run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", tmp / "dist", src], tmp))
    (wheel,) = (tmp / "dist").glob("laya_qual-*.whl")
    return wheel


def requirements(wheel: Path) -> dict[str | None, set[str]]:
    """The wheel's Requires-Dist names by extra (None: always installed)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(name).decode())
    found: dict[str | None, set[str]] = {}
    for requirement in metadata.get_all("Requires-Dist"):
        extra = re.search(r'extra\s*==\s*"([^"]+)"', requirement)
        found.setdefault(extra and extra.group(1), set()).add(re.match(r"[A-Za-z0-9._-]+", requirement).group())
    return found


def installed(venv_python: Path, tmp: Path) -> set[str]:
    listed = ok(run([*PIP, venv_python, "list", "--format", "json"], tmp))
    return {p["name"].lower().replace("_", "-") for p in json.loads(listed)}


def assert_well_formed(output: str) -> None:
    """One prediction per request, in order, for its adapter and task."""
    lines = [json.loads(line) for line in output.splitlines()]
    assert [line["line"] for line in lines] == [1, 2], output
    for line, request in zip(lines, REQUESTS):
        p = line["prediction"]
        assert set(p) == {"adapter_id", "task", "probabilities", "decision", "head_digest"}, line
        assert (p["adapter_id"], p["task"]) == (request["adapter"], request["task"]), line
        assert len(p["probabilities"]) == len(request["options"]) and abs(sum(p["probabilities"]) - 1) < 1e-5, line


def needs(missing) -> str:
    """The one-line refusal naming the missing harness distributions, in HARNESS order."""
    return (f"laya_qual needs its qualification harness ({', '.join(d for d in HARNESS if d in missing)} missing): "
            f"{INSTALL_HARNESS}")


def harness_loaded(probe_out: Path) -> dict[str, list[str]]:
    loaded = json.loads(probe_out.read_text())
    return {stage: sorted(set(loaded[stage]) & HARNESS_MODULES) for stage in ("after_import", "after_commands")}


@pytest.mark.slow
def test_the_runtime_installs_and_serves_without_the_harness(tmp_path):
    wheel = build_wheel(tmp_path)
    required = requirements(wheel)
    assert (required[None], required["qualify"]) == (RUNTIME, set(HARNESS))

    venv = tmp_path / "venv"
    ok(run([sys.executable, "-m", "venv", "--without-pip", venv], tmp_path))
    python = venv / "bin" / "python"
    # The runtime's dependencies at the development venv's versions: the same builds
    # (torch's pinned CPU one) and so the same numbers. --no-compile: byte-compiling
    # torch's sources tripled the install's time.
    (tmp_path / "constraints.txt").write_text("".join(f"{d}=={version(d)}\n" for d in sorted(RUNTIME)))
    ok(run([*PIP, python, "install", "--quiet", "--no-compile",
            "--constraint", tmp_path / "constraints.txt", wheel], tmp_path))
    packages = installed(python, tmp_path)
    assert RUNTIME | {"laya-qual"} <= packages
    assert sorted(packages & set(HARNESS)) == []

    artifact = write_artifact(tmp_path / "artifact", seed=3, head_kind="transformer")
    requests = "".join(json.dumps(r) + "\n" for r in REQUESTS)
    serve = ["predict", "--base", artifact, "--adapter", f"a={artifact}"]
    served = ok(run([venv / "bin" / "laya", *serve], tmp_path, requests))
    assert_well_formed(served)
    assert ok(run([python, "-c", PROBE, tmp_path / "fresh.json", *serve], tmp_path, requests)) == served
    assert Path(json.loads((tmp_path / "fresh.json").read_text())["laya"]).is_relative_to(venv)
    assert harness_loaded(tmp_path / "fresh.json") == {"after_import": [], "after_commands": []}
    # The development venv's runtime answers byte for byte the same; the harness is
    # installed there, so an import of it would show in what the probe loaded.
    assert ok(run([sys.executable, "-c", PROBE, tmp_path / "dev.json", *serve], tmp_path, requests)) == served
    assert harness_loaded(tmp_path / "dev.json") == {"after_import": [], "after_commands": []}

    refused = run([venv / "bin" / "laya-qual", "run"], tmp_path)
    assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", f"Error: {needs(HARNESS)}\n"), refused
    # pytest alone, without the rest of the harness: the plugin refuses in one line too.
    ok(run([*PIP, python, "install", "--quiet", "--no-compile", f"pytest=={version('pytest')}"], tmp_path))
    refused = run([python, "-m", "pytest", "-p", "laya_qual"], tmp_path)
    assert (refused.returncode, refused.stderr.strip()) == (4, f"ERROR: {needs(set(HARNESS) - {'pytest'})}"), refused
