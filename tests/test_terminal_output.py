"""What a terminal shows at the end of a qualification run and while it runs: the verdict
after every other summary (pytest-benchmark's tables included), and progress lines that
sit on lines of their own without breaking pytest's rows of results or its `[ NN%]` column.
Each run is a real subprocess, its output read as a terminal would show it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

LAYA_QUAL = str(Path(sys.executable).with_name("laya-qual"))
TESTS = """
import time

import pytest

@pytest.mark.laya_claim("report.verdicts")
@pytest.mark.parametrize("i", range(12))
def test_zq_row(i):
    time.sleep(0.01)

@pytest.mark.laya_claim("report.subjects")
def test_zq_bench(benchmark):
    benchmark.pedantic(sum, args=(range(10),), rounds=3)
"""
FAST_PROGRESS = "import laya_qual.plugin.progress\nlaya_qual.plugin.progress.EVERY_SECONDS = 0\n"  # a line after every test


def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST_", "LAYA_QUAL_SIGNING"))}
    return {**clean, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "80"}


def project(tmp_path: Path, conftest: str = "") -> Path:
    (tmp_path / "test_rows.py").write_text(TESTS)
    (tmp_path / "conftest.py").write_text(conftest)
    subprocess.run([LAYA_QUAL, "keygen", tmp_path / "key"], check=True, capture_output=True)
    return tmp_path


def pytest_run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """stdout and stderr into one stream, in the order written, as a terminal shows them."""
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "-p", "no:randomly",
                           "-p", "no:cacheprovider", *args], cwd=cwd, env=env(cwd), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)


@pytest.mark.slow
def test_the_plugin_prints_its_verdict_after_the_benchmark_tables(tmp_path):
    cwd = project(tmp_path)
    proc = pytest_run(cwd, "--laya-report", "r.intoto.jsonl", "--laya-signing-key", "key")
    lines = proc.stdout.rstrip("\n").splitlines()
    section = max(i for i, line in enumerate(lines) if "laya_qual report" in line and line.startswith("="))
    assert any("benchmark" in line and line.startswith("-") for line in lines[:section]), proc.stdout
    tail = lines[section + 1:]
    assert re.fullmatch(r"result WARNED: \d+ passed, 0 failed, \d+ not evaluated \(of \d+ claims\)", tail[0])
    assert tail[1].startswith("note: no --laya-qualify, so only the claim-tagged tests collected here")
    assert tail[2].startswith("signed: keyid ") and tail[3] == "bundle: r.intoto.jsonl"
    assert re.fullmatch(r"=+ 13 passed in .* =+", tail[4]) and len(tail) == 5  # pytest's own last line


@pytest.mark.slow
def test_progress_lines_keep_the_rows_and_the_percent_column(tmp_path):
    cwd = project(tmp_path, FAST_PROGRESS)
    proc = pytest_run(cwd, "--laya-evidence-out", "e.json", "--laya-benchmarks", "exclude")
    lines = proc.stdout.splitlines()
    progress = [i for i, line in enumerate(lines) if line.startswith("laya_qual progress:")]
    assert len(progress) == 12, proc.stdout
    rows = [line for line in lines if re.fullmatch(r"(test_rows\.py )?\.+ *\[ *\d+%\]", line)]
    assert len(rows) == 12, proc.stdout  # each progress line ended a row, which kept its column
    assert len({len(row) for row in rows}) == 1  # the column where pytest puts it, on every row
    assert rows[-1].endswith("[100%]") and lines[progress[-1] - 1] == rows[-1]  # the last line below 100%
    assert all(lines[i - 1] in rows for i in progress) and "" not in lines[progress[0]:progress[-1]]
    assert sum(line.count("[") for line in lines if "%]" in line) == 12  # no column written twice


@pytest.mark.slow
def test_run_ends_with_its_verdict(tmp_path):
    """`laya-qual run`: the claims table and benchmark figures first, the verdict block last."""
    cwd = project(tmp_path)
    proc = subprocess.run([LAYA_QUAL, "run", "--workers", "0", "--key", "key", "--out", "r.intoto.jsonl", "--",
                           "test_rows.py", "-k", "test_zq_", "-p", "no:randomly"],
                          cwd=cwd, env=env(cwd), capture_output=True, text=True, timeout=300)
    tail = proc.stdout.rstrip("\n").splitlines()[-5:]
    assert proc.returncode == 3, proc.stdout + proc.stderr  # WARNED: most claims not evaluated here
    assert tail[0] == "== laya-qual verdict =="
    assert re.fullmatch(r"result    WARNED  \(\d+ passed, 0 failed, \d+ not evaluated of \d+ claims\)", tail[1])
    assert tail[2].startswith("signature verified with key.pub (keyid ")
    assert tail[3] == "bundle    r.intoto.jsonl"
    assert tail[4] == "verify    laya-qual verify r.intoto.jsonl --public-key key.pub"
    assert "BENCHMARK" in proc.stdout.split("== laya-qual verdict ==")[0]
