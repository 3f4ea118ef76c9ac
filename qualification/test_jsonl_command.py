"""jsonl.command: `laya predict` as a command (docs/serving.md; docs/decisions.md, "`laya
predict` gates"; the command's help for signals).

Its gates (exit 0 with --allow-errors, 1 when the adapters cannot be opened, 2 for a
malformed --adapter) run in process with click's runner, once from another thread; its
signals (exit 130 / 143, the finished chunks' lines complete) in a real process: a signal
while it waits for input, and one while a chunk's lines are being written into a full
stdout pipe (shrunk to one page, so a small chunk fills it), which must wait until the
chunk's last line is out. Oracle: exit statuses and stderr lines as documented (the cache line
from the documented entry size, qualification/cache_oracle.py), the output
parsed line by line with json.
"""

from __future__ import annotations

import fcntl
import json
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import laya
from laya.cli import main as laya_cli
from laya_qual.suite import cache_oracle
from laya_qual.synth import pinned_path

PIPE_PAGE = 4096
STARTUP_TIMEOUT_S = 120.0  # a hang guard, loose enough for a loaded machine


@pytest.fixture(scope="module")
def artifact(artifact_factory) -> Path:
    return artifact_factory(seed=11, head_kind="float32", base_seed=3)  # test_jsonl.py's recipe: written once


def head_json(directory: Path) -> dict:
    return json.loads((directory / pinned_path(directory, "head_config")).read_bytes())


def line(adapter: str, task: str, question: str = "is it here") -> bytes:
    return json.dumps({"adapter": adapter, "task": task, "question": question, "options": ["yes", "no"]}).encode()


def predict(artifact: Path, adapters: list[str], lines: list[bytes], *extra: str):
    args = ["predict", "--base", str(artifact), *[a for pair in adapters for a in ("--adapter", pair)], *extra]
    return CliRunner().invoke(laya_cli, args, input=b"\n".join(lines) + b"\n")


@pytest.mark.laya_claim("jsonl.command")
def test_allow_errors_exits_0_with_the_failed_count(artifact):
    task = head_json(artifact)["tasks"][0]["name"]
    lines = [line("one", task), line("nope", task), line("one", task)]
    strict = predict(artifact, [f"one={artifact}"], lines)
    allowed = predict(artifact, [f"one={artifact}"], lines, "--allow-errors")
    served = predict(artifact, [f"one={artifact}"], lines[:1])
    assert (strict.exit_code, allowed.exit_code, served.exit_code) == (3, 0, 0), (strict.output, allowed.output)
    assert allowed.stdout == strict.stdout and len(allowed.stdout.splitlines()) == 3
    assert "lines: 3, failed: 1" in allowed.stderr and "lines: 1, failed: 0" in served.stderr


@pytest.mark.laya_claim("jsonl.command")
def test_the_run_ends_with_the_caches_counters_and_the_line_count_on_stderr(artifact):
    """The command's help: at the end, exactly the cache line and the lines line on stderr. Two
    questions against a budget that holds either alone, asked q1 q1 q2 q1, one line at a time:
    a miss, a hit, a miss that evicts q1, a miss that evicts q2 (the counters of docs/decisions.md's
    LRU, the bytes its documented entry size)."""
    task = head_json(artifact)["tasks"][0]["name"]
    base = laya.load_artifact_base(artifact)
    questions = ["is it here", "was it there before"]
    sizes = [cache_oracle.documented_bytes(len(base.render(laya.Request(task, q, ("yes", "no"))).token_ids),
                                           base.hidden_size) for q in questions]
    lines = [line("one", task, questions[i]) for i in (0, 0, 1, 0)]
    cached = predict(artifact, [f"one={artifact}"], lines, "--cache-bytes", str(max(sizes)), "--batch-size", "1")
    uncached = predict(artifact, [f"one={artifact}"], lines[:2] + [line("one", "nope")], "--allow-errors")
    assert (cached.exit_code, uncached.exit_code) == (0, 0), (cached.output, uncached.output)
    assert cached.stderr.splitlines() == [f"cache: 1 hits, 3 misses, 2 evictions, 1 entries, {sizes[0]} bytes",
                                          "lines: 4, failed: 0"], cached.stderr
    assert uncached.stderr.splitlines() == ["cache: 0 hits, 0 misses, 0 evictions, 0 entries, 0 bytes",
                                            "lines: 3, failed: 1"], uncached.stderr


@pytest.mark.laya_claim("jsonl.command")
@pytest.mark.parametrize("adapters, status, said", [
    (["one"], 2, "expected ID=DIR"),
    (["=DIR"], 2, "expected ID=DIR"),
    (["one="], 2, "expected ID=DIR"),
    (["one=A", "one=B"], 2, "given twice"),
    (["one=MISSING"], 1, "MISSING"),
])
def test_bad_adapters_exit_2_or_1_before_reading_a_line(artifact, tmp_path, adapters, status, said):
    named = [a.replace("MISSING", str(tmp_path / "missing")).replace("=A", f"={artifact}")
             .replace("=B", f"={artifact}") for a in adapters]
    run = predict(artifact, named, [line("one", head_json(artifact)["tasks"][0]["name"])])
    assert run.exit_code == status, run.output
    assert said.replace("MISSING", str(tmp_path / "missing")) in run.stderr and run.stdout == ""


@pytest.mark.laya_claim("jsonl.command")
def test_predict_run_off_the_main_thread_serves_and_leaves_signal_handlers(artifact):
    """Only the main thread may set signal handlers: from another thread (an application that
    runs the command in a worker) the command serves and the handlers stay as they were."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    task = head_json(artifact)["tasks"][0]["name"]
    results = []
    worker = threading.Thread(target=lambda: results.append(predict(artifact, [f"one={artifact}"],
                                                                    [line("one", task)])))
    worker.start()
    worker.join(STARTUP_TIMEOUT_S)
    (run,) = results
    assert run.exit_code == 0 and "prediction" in json.loads(run.stdout), (run.output, run.exception)
    assert {s: signal.getsignal(s) for s in before} == before


def start(artifact: Path, stdin, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "laya.cli", "predict", "--base", str(artifact),
                             "--adapter", f"one={artifact}", *extra],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.laya_claim("jsonl.command")
def test_sigint_while_waiting_for_input_exits_130_after_the_served_lines(artifact):
    task = head_json(artifact)["tasks"][0]["name"]
    proc = start(artifact, subprocess.PIPE)
    try:
        proc.stdin.write(line("one", task) + b"\n")
        proc.stdin.flush()
        first = proc.stdout.readline()  # the chunk of one line is out; the command waits for more
        wait_until_reading(proc)  # the signal must come outside the write, while the command waits
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=STARTUP_TIMEOUT_S)
    finally:
        proc.kill()
    assert proc.returncode == 130, err.decode()
    assert json.loads(first)["line"] == 1 and "prediction" in json.loads(first) and rest == b""
    assert "lines: 1, failed: 0; interrupted by SIGINT" in err.decode()


@pytest.mark.laya_claim("jsonl.command")
def test_sigterm_while_writing_waits_for_the_chunks_last_line(artifact, tmp_path):
    task = head_json(artifact)["tasks"][0]["name"]
    count = 64  # about 10 KB of results: more than the one-page pipe holds
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(b"".join(line("one", task) + b"\n" for _ in range(count)))
    with requests.open("rb") as stdin:
        proc = start(artifact, stdin, "--batch-size", str(count))
    try:
        fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, PIPE_PAGE)
        capacity = fcntl.fcntl(proc.stdout.fileno(), fcntl.F_GETPIPE_SZ)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while waiting(proc) < capacity:  # full: the writer is blocked inside the chunk's write
            assert proc.poll() is None and time.monotonic() < deadline, "the command never filled the pipe"
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)  # the handler runs while the write is blocked
        out, err = proc.communicate(timeout=STARTUP_TIMEOUT_S)
    finally:
        proc.kill()
    assert proc.returncode == 143, err.decode()
    results = [json.loads(row) for row in out.decode().splitlines()]
    assert [r["line"] for r in results] == list(range(1, count + 1)) and all("prediction" in r for r in results)
    assert f"lines: {count}, failed: 0; interrupted by SIGTERM" in err.decode()


def wait_until_reading(proc: subprocess.Popen) -> None:
    """Until the command's main thread sleeps in a pipe read (its kernel wait channel, Linux);
    where the channel is hidden, half a second (the command has nothing else to do)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            channel = Path(f"/proc/{proc.pid}/wchan").read_text()
        except OSError:
            channel = "0"
        if channel in ("", "0"):
            time.sleep(0.5)
            return
        if channel.endswith("pipe_read"):
            return
        time.sleep(0.005)
    raise AssertionError("the command never waited for input")


def waiting(proc: subprocess.Popen) -> int:
    """Bytes in the command's stdout pipe, unread."""
    return int.from_bytes(fcntl.ioctl(proc.stdout.fileno(), termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)
