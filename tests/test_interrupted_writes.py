"""Interrupted writes: nothing half-written under an output's name (laya.artifact.atomic, laya.interrupts).

Each test runs the real command in its own process and sends it a real signal at a
deterministic point. ``LAYA_TEST_HOLD_PUBLISH=FINAL:MARKER`` makes the process stop
right before it publishes FINAL: every byte is in the temporary sibling and synced,
nothing is renamed yet; it lists the temporaries in MARKER and waits for MARKER to go
away. `laya predict` needs no seam: it is signalled while blocked reading its next
request, after the test has read back the lines it finished (which also shows each
chunk is flushed as soon as it is served, without waiting for a full batch). Then the test looks at what is on disk:

- SIGKILL: nothing under the final name (an earlier bundle stays byte for byte); the
  hidden temporary is all that is left, and it holds the complete output.
- SIGINT / SIGTERM: the same, with the temporary removed and exit status 130 / 143.
- releasing the hold: the output appears complete and no temporary remains.

All processes start together in one module fixture (they spend their time importing
torch), so the file costs about as much as its slowest process.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from laya.artifact.atomic import HOLD_ENV, write_file
from laya.errors import OutputExists
from laya.interrupts import Interrupted, SignalExit
from laya_qual.report.signing import SigningError, keygen, load_public_key, open_envelope
from laya_qual.report.verify import verify_bundle

DEADLINE_S = 120.0  # turns a hang into a failure; not a speed claim
OLD_BUNDLE = b'{"an earlier bundle": true}\n'
SIGNALS = {"SIGKILL": signal.SIGKILL, "SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}
PYTHON = [sys.executable, "-c"]
LAYA = "from laya.cli import main; main()"
LAYA_QUAL = "from laya_qual.cli import main; main()"


def _sigint_as_at_a_terminal() -> None:
    """SIGINT at its default disposition in the command, as a terminal starts it: a run
    launched in the background without job control (`cmd &` in a script, some CI runners)
    would otherwise pass SIGINT ignored to it, and Python then installs no handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Launched:
    """One command in its own process, its output files, and where it holds."""

    def __init__(self, root: Path, name: str, argv: list[str], final: Path | None, stdin: bool = False):
        self.final = final
        self.marker = root / f"{name}.held"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # a top-level process
        if final is not None:
            env[HOLD_ENV] = f"{final}{os.pathsep}{self.marker}"
        self.out, self.err = root / f"{name}.stdout", root / f"{name}.stderr"
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(argv, cwd=root, env=env, stdout=out, stderr=err,
                                         stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                         preexec_fn=_sigint_as_at_a_terminal)

    def wait_for(self, ready) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not ready():
            assert self.proc.poll() is None, f"exited {self.proc.returncode} early:\n{self.err.read_text()}"
            assert time.monotonic() < deadline, f"not ready within {DEADLINE_S} s:\n{self.err.read_text()}"
            time.sleep(0.02)

    def held(self) -> list[Path]:
        """Wait until it holds before publishing; the temporaries it wrote."""
        self.wait_for(lambda: self.marker.exists() and self.marker.read_text().endswith("\n"))
        return [Path(line) for line in self.marker.read_text().split()]

    def signal(self, signum: int) -> int:
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=DEADLINE_S)

    def release(self) -> int:
        self.marker.unlink()
        return self.proc.wait(timeout=DEADLINE_S)


def hidden_siblings(final: Path) -> list[Path]:
    return sorted(final.parent.glob(f".{final.name}.tmp-*"))


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupted")
    key = root / "signing-key"
    keygen(key)
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "test_tiny.py").write_text("def test_tiny():\n    pass\n")
    procs: dict[str, Launched] = {}
    # No torch needed by the test process for these: start them first.
    for sig in ("SIGKILL", "SIGINT", "SIGTERM", "release"):
        procs[f"keygen-{sig}"] = Launched(root, f"keygen-{sig}", [*PYTHON, LAYA_QUAL, "keygen", str(root / f"key-{sig}")],
                                          root / f"key-{sig}")
    bundles = {sig: root / f"report-{sig}.intoto.jsonl" for sig in ("SIGKILL", "SIGINT")}
    for bundle in bundles.values():
        bundle.write_bytes(OLD_BUNDLE)
    # SIGINT hits a real qualification run in its session-finish hook; SIGKILL needs only the
    # writer itself (a hard kill leaves the same disk whoever called it), without a torch import.
    procs["report-SIGINT"] = Launched(
        root, "report-SIGINT", [sys.executable, "-m", "pytest", "-p", "laya_qual", "-p", "no:cacheprovider", "-q",
                                "test_tiny.py", "--laya-report", str(bundles["SIGINT"]), "--laya-signing-key", str(key)],
        bundles["SIGINT"])
    procs["report-SIGKILL"] = Launched(
        root, "report-SIGKILL", [*PYTHON, "import sys; from laya_qual.report.signing import load_signer, write_bundle; "
                                 "write_bundle(sys.argv[1], (b'{}',), load_signer(sys.argv[2]))",
                                 str(bundles["SIGKILL"]), str(key)], bundles["SIGKILL"])
    from laya_qual.synth import write_artifact
    from laya_qual.synth.tasks import synthetic_task, write_task

    import laya

    artifact = write_artifact(root / "artifact", seed=2, head_kind="float32", base_seed=31)
    records = synthetic_task(laya.load_artifact_base(artifact), seed=4,
                             sizes={"train": 8, "dev_cal": 6, "dev_conf": 6})
    data = write_task(root / "data.jsonl", records)
    for sig in ("SIGKILL", "SIGINT"):
        out = root / f"head-{sig}"
        procs[f"train-{sig}"] = Launched(root, f"train-{sig}", [*PYTHON, LAYA, "train", "--base", str(artifact),
                                                                "--data", str(data), "--out", str(out),
                                                                "--epochs", "1"], out)
    for sig in ("SIGKILL", "SIGINT"):
        procs[f"predict-{sig}"] = Launched(root, f"predict-{sig}", [*PYTHON, LAYA, "predict", "--base", str(artifact),
                                                                    "--adapter", f"h={artifact}"], None, stdin=True)
    requests = [json.dumps({"adapter": "h", **{k: r[k] for k in ("task", "question", "options")}}) + "\n"
                for r in records[:3]]
    yield root, procs, key, artifact, requests
    for launched_ in procs.values():
        if launched_.proc.poll() is None:
            launched_.proc.kill()
            launched_.proc.wait()


def test_artifact_writer_leaves_no_temporary(launched):
    root, _, _, artifact, _ = launched
    assert (artifact / "manifest.json").is_file() and hidden_siblings(artifact) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT"])
def test_train_export_interrupted_before_publishing(launched, sig):
    from laya.artifact.manifest import read_artifact_files

    root, procs, _, _, _ = launched
    run = procs[f"train-{sig}"]
    [temp] = run.held()
    assert temp.parent == root and temp.name.startswith(f".{run.final.name}.tmp-")
    read_artifact_files(temp)  # the temporary is a complete artifact, only unpublished
    status = run.signal(SIGNALS[sig])
    assert not run.final.exists(), "a half artifact under the final name"
    store = root / f"{run.final.name}.features.safetensors"
    assert store.is_file() and hidden_siblings(store) == []  # published whole before the export began
    if sig == "SIGKILL":
        assert status == -signal.SIGKILL and hidden_siblings(run.final) == [temp]
        read_artifact_files(temp)
    else:
        assert status == 130, run.err.read_text()
        assert hidden_siblings(run.final) == []


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT", "SIGTERM", "release"])
def test_keygen_interrupted_before_publishing(launched, sig):
    root, procs, _, _, _ = launched
    run = procs[f"keygen-{sig}"]
    private, public = run.final, run.final.with_name(run.final.name + ".pub")
    temps = run.held()
    assert [t.name.split(".tmp-")[0] for t in temps] == [f".{public.name}", f".{private.name}"]
    assert stat.S_IMODE(temps[1].stat().st_mode) == 0o600  # secret from creation, not chmod-ed later
    if sig == "release":
        assert run.release() == 0, run.err.read_text()
        assert load_public_key(public) and b"PRIVATE KEY" in private.read_bytes()
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
        assert hidden_siblings(private) + hidden_siblings(public) == []
        return
    status = run.signal(SIGNALS[sig])
    assert not private.exists() and not public.exists(), "a half key pair"
    if sig == "SIGKILL":
        assert status == -signal.SIGKILL and hidden_siblings(public) + hidden_siblings(private) == temps
    else:
        assert status == 128 + SIGNALS[sig], run.err.read_text()
        assert hidden_siblings(private) + hidden_siblings(public) == []


@pytest.mark.parametrize("sig", ["SIGKILL", pytest.param("SIGINT", marks=pytest.mark.slow)])
def test_report_bundle_interrupted_before_publishing(launched, sig):
    root, procs, key, _, _ = launched
    run = procs[f"report-{sig}"]
    [temp] = run.held()
    public = load_public_key(key.with_name(key.name + ".pub"))
    if sig == "SIGINT":
        verify_bundle(temp, public)  # a complete signed report, only unpublished
    else:
        [line] = temp.read_text().splitlines()
        open_envelope(json.loads(line), public)
    status = run.signal(SIGNALS[sig])
    assert run.final.read_bytes() == OLD_BUNDLE, "the earlier bundle was replaced by an unfinished one"
    if sig == "SIGKILL":
        assert status == -signal.SIGKILL and hidden_siblings(run.final) == [temp]
    else:
        assert status != 0 and hidden_siblings(run.final) == []


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT"])
def test_predict_interrupted_has_written_exactly_the_finished_lines(launched, sig):
    root, procs, _, _, requests = launched
    run = procs[f"predict-{sig}"]
    run.proc.stdin.write("".join(requests[:2]).encode() + requests[2][:10].encode())  # line 3 half sent
    run.proc.stdin.flush()
    run.wait_for(lambda: run.out.read_bytes().count(b"\n") == 2)
    finished = run.out.read_bytes()
    status = run.signal(SIGNALS[sig])
    assert run.out.read_bytes() == finished and finished.endswith(b"\n")
    assert [json.loads(line)["line"] for line in finished.splitlines()] == [1, 2]
    assert all("prediction" in json.loads(line) for line in finished.splitlines())
    if sig == "SIGKILL":
        assert status == -signal.SIGKILL
    else:
        assert status == 128 + SIGNALS[sig], run.err.read_text()
        assert "lines: 2, failed: 0; interrupted" in run.err.read_text()


def test_existing_outputs_are_refused_by_name(tmp_path):
    (tmp_path / "k.pub").write_bytes(b"someone's public key\n")
    with pytest.raises(SigningError, match="k.pub: already exists"):
        keygen(tmp_path / "k")
    assert not (tmp_path / "k").exists() and (tmp_path / "k.pub").read_bytes() == b"someone's public key\n"
    (tmp_path / "store").write_bytes(b"old")
    with pytest.raises(OutputExists) as refused:
        write_file(tmp_path / "store", b"new")
    assert refused.value.file == str(tmp_path / "store") and (tmp_path / "store").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.pub", "store"]


def test_a_signal_during_a_deferred_block_waits_for_its_end():
    """What keeps `laya predict` from cutting a result line: a real SIGTERM sent to this
    process inside ``deferred()`` is acted on only when the block is done."""
    before = signal.getsignal(signal.SIGTERM)
    finished = []
    with pytest.raises(Interrupted) as stopped:
        with SignalExit() as signals:
            with signals.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler has run by now; it must not have raised
                finished.append("line")
            finished.append("never")
    assert finished == ["line"] and stopped.value.code == 143
    assert signal.getsignal(signal.SIGTERM) is before
