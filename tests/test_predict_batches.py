"""`laya predict --batch-size`: chunks that never wait for a line not yet sent, and an
input read at most one chunk (plus one read) ahead.

The property that any chunking serves every line exactly as one line at a time is a
shipped claim (qualification/test_jsonl.py), and so is how chunks are cut from a real pipe
(qualification/test_jsonl_chunks.py); these tests are about serving while reading: a real
`laya predict` answering a client line by line over pipes, and an endless stream served
chunk by chunk.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import select
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import laya
from laya.cli import main as laya_main
from laya.serving.jsonl import _READ_SIZE, predict_chunks
from laya_qual.synth import write_artifact

DEADLINE_S = 120.0  # turns a hang into a failure; not a speed claim
REQUEST = {"adapter": "a", "task": "answer", "question": "which word", "options": ["x", "y"]}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    return write_artifact(tmp_path_factory.mktemp("batches") / "a", seed=5, head_kind="float32")


def request_line(i: int) -> bytes:
    return (json.dumps({**REQUEST, "question": f"which word {'x ' * (i % 5)}"}) + "\n").encode()


def read_lines(fd: int, n: int) -> list[bytes]:
    """Exactly ``n`` lines from ``fd``, failing (not hanging) if they do not come."""
    data, deadline = b"", time.monotonic() + DEADLINE_S
    while data.count(b"\n") < n:
        assert select.select([fd], [], [], max(deadline - time.monotonic(), 0))[0], f"only {data!r} within {DEADLINE_S} s"
        chunk = os.read(fd, 1 << 16)
        assert chunk, f"output ended after {data!r}"
        data += chunk
    assert data.count(b"\n") == n, data
    return data.splitlines()


def test_a_client_is_answered_before_its_chunk_fills(artifact):
    """A client sends one line and waits for its answer, then sends six at once: with
    chunks of 4, fixed-size chunks would never answer the first line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.Popen([sys.executable, "-m", "laya.cli", "predict", "--base", str(artifact),
                             "--adapter", f"a={artifact}", "--batch-size", "4"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        proc.stdin.write(request_line(0))
        proc.stdin.flush()
        first = read_lines(proc.stdout.fileno(), 1)
        proc.stdin.write(b"".join(request_line(i) for i in range(1, 7)))
        proc.stdin.flush()
        rest = read_lines(proc.stdout.fileno(), 6)
        proc.stdin.close()
        assert proc.wait(timeout=DEADLINE_S) == 0, proc.stderr.read().decode()
        assert "lines: 7, failed: 0" in proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = [json.loads(line) for line in first + rest]
    assert [o["line"] for o in out] == list(range(1, 8))
    adapters = laya.open_adapters({"a": artifact}, base=artifact)
    for i, o in enumerate(out):
        alone = adapters.predict("a", laya.Request.from_json({k: v for k, v in json.loads(request_line(i)).items()
                                                              if k != "adapter"}))
        assert [p.hex() for p in o["prediction"]["probabilities"]] == [p.hex() for p in alone.probabilities]


class Endless(io.RawIOBase):
    """A source that never ends (like `yes`): the same request line forever, counting the
    bytes it has handed out; a reader that reads on past ``limit`` bytes fails here
    instead of filling memory."""

    def __init__(self, line: bytes, limit: int = 16 << 20):
        self.line, self.given, self.limit = line, 0, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        assert self.given < self.limit, f"read {self.given} bytes of an endless stream"
        data = (self.line * (len(buffer) // len(self.line) + 1))[self.given % len(self.line):][:len(buffer)]
        buffer[:len(data)] = data
        self.given += len(data)
        return len(data)


def test_an_endless_stream_is_served_chunk_by_chunk(artifact):
    source = Endless(request_line(0))
    adapters = laya.open_adapters({"a": artifact}, base=artifact)
    chunks = list(itertools.islice(predict_chunks(adapters, source, 4), 3))
    assert [[o["line"] for o in chunk] for chunk in chunks] == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
    assert all("prediction" in o for chunk in chunks for o in chunk)
    assert source.given <= 12 * len(source.line) + _READ_SIZE  # read ahead: at most one read past the chunks


def test_batch_size_below_one_is_a_usage_error(artifact):
    run = CliRunner().invoke(laya_main, ["predict", "--base", str(artifact), "--adapter", f"a={artifact}",
                                         "--batch-size", "0"], input=b"")
    assert run.exit_code == 2 and "--batch-size" in run.output and "x>=1" in run.output, run.output
