"""report.written: `pytest -p laya_qual --laya-report PATH` (and `--laya-evidence-out`) onto a
full disk ends in one `ERROR:` line and exit status 3, with what was at PATH kept byte for
byte (docs/report-format.md, "Writing the bundle" and "Exit codes").

Oracle: the docs' line and exit status, and the files' bytes before and after. The full disk
is real: the inner pytest runs under a file-size limit (RLIMIT_FSIZE, the kernel's EFBIG, as a
full disk's ENOSPC) smaller than any bundle or evidence file, larger than the earlier ones.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from laya_qual.report.signing import keygen

INNER = """
import pytest

@pytest.mark.laya_claim("report.verdicts")
def test_passes():
    pass
"""
LIMIT = 1024  # bytes: a bundle or evidence file of one test is several times this
EARLIER = b"an earlier bundle\n"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("written")
    keygen(root / "key")
    (root / "test_inner.py").write_text(INNER)
    return root


def small_files() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


@pytest.mark.laya_claim("report.written")
@pytest.mark.parametrize("option", ["--laya-report", "--laya-evidence-out"])
def test_a_full_disk_is_one_error_line_and_keeps_the_earlier_file(run_dir, option):
    out = run_dir / f"{option.strip('-')}.out"
    out.write_bytes(EARLIER)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST_", "PYTEST_ADDOPTS", "LAYA_QUAL_SIGNING_KEY"))}
    signing = ["--laya-signing-key", str(run_dir / "key")] if option == "--laya-report" else []
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "-q", f"--rootdir={run_dir}", "test_inner.py", option, str(out),
                           *signing], cwd=run_dir, env=env, capture_output=True, text=True,
                          preexec_fn=small_files, timeout=120)
    assert done.returncode == 3, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    errors = [line for line in (done.stdout + done.stderr).splitlines() if "Error" in line or "ERROR" in line]
    assert errors == [f"ERROR: {option} {out}: cannot be written (File too large); what was there before is kept"], (
        done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stdout + done.stderr
    assert out.read_bytes() == EARLIER
    assert [p.name for p in run_dir.iterdir() if ".tmp-" in p.name] == [], "a temporary was left"
